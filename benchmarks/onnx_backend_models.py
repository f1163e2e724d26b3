"""PyTorch's single-layer exports that the onnx package ships with their inputs and outputs
(``onnx/backend/test/data/pytorch-converted`` and ``pytorch-operator``: opset 6, most with a fixed batch of
several rows), each built for a board with ``--policy support`` (every op the FPGA takes goes there) and its
recorded input predicted by the build (``hetdeploy.commands.api.Pipeline``), against the output the package records.

Run by hand (prints a row a model, then counts; ``--json`` a JSON line a model):

    .venv/bin/python benchmarks/onnx_backend_models.py [--board pynq-z2] [--only Conv] [--jobs 2] [--json]

Per model: the build's exit (0, or the one line it was refused or failed with), its FPGA subfunctions, and the
largest difference from the package's output relative to that output's largest magnitude. A model of several
inputs or outputs is built, and compared on its first output only where it has one input.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
SUITES = ("pytorch-converted", "pytorch-operator")


def case_row(case: Path, board: str, folder: Path) -> dict:
    """Build ``case`` for ``board`` in ``folder`` (a child process: a crash is a row, not the end), then predict."""
    out = folder / case.name
    built = subprocess.run([sys.executable, "-m", "hetdeploy", "build", str(case / "model.onnx"), "--board", board,
                            "--policy", "support", "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    row = {"model": f"{case.parent.name}/{case.name}", "board": board, "exit": built.returncode,
           "said": (built.stderr.strip().splitlines() or [""])[-1][:240] if built.returncode else ""}
    if built.returncode:
        return row
    plan = json.loads((out / "plan.json").read_text())
    row["fpga_subfunctions"] = sum(s["kind"] == "fpga" for s in plan["subfunctions"])
    inputs = sorted((case / "test_data_set_0").glob("input_*.pb"))
    if len(inputs) != 1:
        return row
    sample = numpy_helper.to_array(onnx.load_tensor(str(inputs[0])))
    expected = numpy_helper.to_array(onnx.load_tensor(str(case / "test_data_set_0" / "output_0.pb")))
    predict = ("import sys, numpy as np\nfrom hetdeploy.commands.api import Pipeline\n"
               "np.save(sys.argv[3], Pipeline(sys.argv[1]).predict(np.load(sys.argv[2]))[0])\n")
    np.save(folder / f"{case.name}.in.npy", sample)
    ran = subprocess.run([sys.executable, "-c", predict, str(out), str(folder / f"{case.name}.in.npy"),
                          str(folder / f"{case.name}.out.npy")], capture_output=True, text=True, cwd=ROOT)
    if ran.returncode:
        row["said"] = (ran.stderr.strip().splitlines() or [""])[-1][:240]
        return row
    got = np.load(folder / f"{case.name}.out.npy")
    row["error_relative"] = float(np.max(np.abs(got - expected)) / max(1e-30, float(np.max(np.abs(expected)))))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="pynq-z2")
    parser.add_argument("--only", default="", help="a regular expression the model's folder name must match")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cases = [c for suite in SUITES for c in sorted((DATA / suite).iterdir()) if re.search(args.only, c.name)]
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(args.jobs) as pool:
        rows = []
        for row in pool.map(lambda c: case_row(c, args.board, Path(folder)), cases):
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                error = row.get("error_relative")
                print(f"{row['model']:<60} exit {row['exit']}  FPGA subfunctions {row.get('fpga_subfunctions', '-')}"
                      f"  error {'-' if error is None else f'{error:.1e}'}  {row['said']}", flush=True)
    if not args.json:
        compared = [r for r in rows if "error_relative" in r]
        print(f"\n{len(rows)} models on the {args.board}: {sum(r['exit'] == 0 for r in rows)} built "
              f"({sum(r.get('fpga_subfunctions', 0) > 0 for r in rows)} with an FPGA subfunction), "
              f"{len(compared)} compared with the package's output, "
              f"{sum(r['error_relative'] <= 1e-2 for r in compared)} within 1 % of its largest magnitude; "
              f"{sum(r['exit'] == 2 for r in rows)} refused in one line, "
              f"{sum(r['exit'] not in (0, 2) for r in rows)} failed otherwise")


if __name__ == "__main__":
    main()
