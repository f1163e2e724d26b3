"""What a build writes, byte for byte, to show that a refactor changes none of it (issue 34).

    .venv/bin/python benchmarks/fingerprint.py record FILE [--quick]
    .venv/bin/python benchmarks/fingerprint.py compare FILE [--quick]

For each case (the shipped examples and three exported models of the test suite, each on pynq-z2 and
zcu104, under the support policy so that the FPGA path is taken): `plan --json`, the build's plan.json,
every source file it generates (subfunction models, hls4ml projects, our tops, Makefiles and Tcl), the
deployment package, and `emulate --json`. `record` writes their SHA-256 digests to FILE (JSON);
`compare` builds again and prints each case whose bytes differ, file by file, exiting 1 if any does.
Compiled objects, libraries and logs are left out (they hold times and absolute paths); the checkout's
own path is read as <root> (plan.json names the model by its path). `--quick`
runs the first two cases only. Run by hand: about 15 minutes on two cores with a warm build cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOARDS = ("pynq-z2", "zcu104")
MODELS = sorted((ROOT / "examples").glob("*.onnx")) + [
    ROOT / "tests" / "data" / "brevitas" / "tfc_1w1a.onnx",
    ROOT / "tests" / "data" / "brevitas" / "conv_w2.onnx",
    ROOT / "tests" / "data" / "quantized" / "cnv_qonnx.onnx",
]
# what a build writes that is not its output's bytes: compiled code, logs (times, paths), the browser view
LEFT_OUT = {".so", ".o", ".log", ".html", ".d"}
WORK = Path("/tmp/hetdeploy-fingerprint")


def hetdeploy(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "hetdeploy", *args], capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"hetdeploy {' '.join(args)} failed: {result.stderr.strip().splitlines()[-1]}")
    return result.stdout


def digest(data: bytes) -> str:
    """SHA-256 of ``data`` with this checkout's path as <root>: plan.json names the model by its path, and a
    recording made in another worktree must compare."""
    return hashlib.sha256(data.replace(str(ROOT).encode(), b"<root>")).hexdigest()


def fingerprint(model: Path, board: str) -> dict[str, str]:
    """File (relative to the build folder) -> its digest; `plan --json` and `emulate --json` as two more."""
    out = WORK / f"{model.stem}-{board}"
    options = ["--board", board, "--policy", "support"]
    found = {"plan --json": digest(hetdeploy("plan", str(model), *options, "--json").encode())}
    shutil.rmtree(out, ignore_errors=True)
    hetdeploy("build", str(model), *options, "-o", str(out))
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.suffix not in LEFT_OUT):
        found[str(path.relative_to(out))] = digest(path.read_bytes())
    found["emulate --json"] = digest(hetdeploy("emulate", str(out), "--json").encode())
    return found


def cases(quick: bool) -> list[tuple[Path, str]]:
    every = [(model, board) for model in MODELS for board in BOARDS]
    return every[:2] if quick else every


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["record", "compare"])
    parser.add_argument("file", type=Path)
    parser.add_argument("--quick", action="store_true", help="the first two cases only")
    args = parser.parse_args()
    recorded = json.loads(args.file.read_text()) if args.action == "compare" else {}
    now, differing = {}, 0
    for model, board in cases(args.quick):
        name = f"{model.relative_to(ROOT)} on {board}"
        now[name] = fingerprint(model, board)
        if args.action == "compare":
            before = recorded.get(name, {})
            changed = sorted(k for k in before.keys() | now[name].keys() if before.get(k) != now[name].get(k))
            differing += bool(changed)
            print(f"{name}: {'same bytes' if not changed else f'{len(changed)} differ'} ({len(now[name])} files)")
            for key in changed:
                state = "new" if key not in before else "gone" if key not in now[name] else "changed"
                print(f"    {state}: {key}")
        else:
            print(f"{name}: {len(now[name])} files")
    if args.action == "record":
        args.file.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
