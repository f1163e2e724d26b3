"""The build cache on alexnet_style (pynq-z2, latency policy): three builds sharing an empty cache.

    .venv/bin/python benchmarks/cache.py [--model examples/alexnet_style.onnx] [--json]

1. the first build (nothing cached), 2. the same build again (unchanged), 3. every FPGA unit pinned at
the reuse factor the first build chose, the last foldable one at the next valid factor up (one unit
changed). Prints each build's wall time, its speed-up over the first, and what came from the cache.
Run by hand; tests check behaviour, never time.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed_build(model: Path, out: Path, cache: Path, *more: str) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "hetdeploy", "build", str(model), "--board", "pynq-z2", "-o",
                             str(out), "--cache", str(cache), "-v", *more], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"build failed: {result.stderr.strip().splitlines()[-1]}")
    found = re.search(r"from the build cache [^:]*: (.*)", result.stderr)
    return seconds, found.group(1) if found else "-"


def next_factor(model: Path, pins: list[str], unit: dict) -> int:
    """The next reuse factor above ``unit``'s that hls4ml accepts and that fits beside ``pins`` (an
    invalid one's message lists the valid ones)."""
    import hetdeploy

    pinned = dict(p.rsplit("=", 1) for p in pins)
    node = unit["nodes"][0]
    try:
        hetdeploy.plan(model, "pynq-z2", reuse_factors={**{n: int(r) for n, r in pinned.items()},
                                                        node: unit["reuse_factor"] + 1})
        return unit["reuse_factor"] + 1
    except hetdeploy.UserError as err:
        valid = [int(v) for v in re.findall(r"\d+", str(err).split("valid:")[-1])]
    for factor in (v for v in valid if v > unit["reuse_factor"]):
        try:
            hetdeploy.plan(model, "pynq-z2", reuse_factors={**{n: int(r) for n, r in pinned.items()}, node: factor})
            return factor
        except hetdeploy.UserError:
            continue
    sys.exit(f"no reuse factor above {unit['reuse_factor']} fits for {unit['name']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=ROOT / "examples" / "alexnet_style.onnx")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp, rows = Path(tmp), []
        cache = tmp / "cache"
        rows.append(("first build", *timed_build(args.model, tmp / "a", cache)))
        rows.append(("unchanged", *timed_build(args.model, tmp / "b", cache)))
        plan = json.loads((tmp / "a" / "plan.json").read_text())
        units = [u for s in plan["subfunctions"] for u in s["execution_units"] if u["foldable"]]
        pins = [f"{u['nodes'][0]}={u['reuse_factor']}" for u in units[:-1]]
        last = units[-1]
        changed = next_factor(args.model, pins, last)
        pins.append(f"{last['nodes'][0]}={changed}")
        rows.append((f"{last['name']} refolded ({last['reuse_factor']} -> {changed})",
                     *timed_build(args.model, tmp / "c", cache, *[a for p in pins for a in ("--reuse-factor", p)])))
    first = rows[0][1]
    if args.json:
        print(json.dumps([{"build": name, "seconds": round(s, 2), "speedup": round(first / s, 2), "from_cache": what}
                          for name, s, what in rows], indent=2))
        return
    print(f"{'build':<34} {'s':>7} {'speed-up':>9}  from the cache")
    for name, seconds, what in rows:
        print(f"{name:<34} {seconds:>7.2f} {first / seconds:>8.2f}x  {what}")


if __name__ == "__main__":
    main()
