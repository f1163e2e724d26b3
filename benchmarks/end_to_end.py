"""Build time and emulation error of the reference networks on this machine.

    .venv/bin/python benchmarks/end_to_end.py [--board pynq-z2]

Prints a table; run by hand (tests check behaviour, never time).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import networks  # noqa: E402
from hetdeploy.running.emulate import emulate  # noqa: E402
from hetdeploy.steps.build import BuildOptions, build  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="pynq-z2")
    args = parser.parse_args()
    print(f"{'network':<16} {'subfunctions':<28} {'build s':>8} {'emulate max abs err':>20} {'tolerance':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in networks.NETWORKS.items():
            model = Path(tmp) / f"{name}.onnx"
            onnx.save(make(), str(model))
            out = Path(tmp) / name
            started = time.monotonic()
            plan = build(BuildOptions(model=model, board=args.board, out_dir=out), progress=lambda _: None)
            seconds = time.monotonic() - started
            result = emulate(out, None, seed=1)
            devices = "/".join(s.device for s in plan.subfunctions)
            print(f"{name:<16} {devices:<28} {seconds:>8.1f} {result.comparison.max_abs_error:>20.4g} "
                  f"{result.comparison.tolerance:>9.3g}")


if __name__ == "__main__":
    main()
