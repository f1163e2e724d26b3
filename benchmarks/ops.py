"""FPGA op coverage: every op of benchmarks/op_models.py, standalone and after a layer, at 4-D and
2-D, built for a board with the support policy (each op goes to the FPGA when the board file lets
it), then emulated against onnxruntime. Prints, per op, where it ran and the emulation error.

    python benchmarks/ops.py [--board pynq-z2] [--ops Relu,Tanh] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import op_models  # noqa: E402

from hetdeploy.core.errors import UserError  # noqa: E402
from hetdeploy.running.emulate import emulate  # noqa: E402
from hetdeploy.steps.build import BuildOptions, build  # noqa: E402


def check_op(op: str, rank: int, position: str, board: str, folder: Path) -> dict | None:
    """Build and emulate one op model; None when the op has no such form."""
    model = op_models.op_model(op, rank, position)
    if model is None:
        return None
    path = folder / f"{op}_{rank}d_{position}.onnx"
    onnx.save(model, str(path))
    row = {"op": op, "rank": rank, "position": position, "board": board}
    started = time.monotonic()
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            plan = build(BuildOptions(model=path, board=board, out_dir=folder / path.stem, policy="support"),
                         progress=lambda message: None)
            result = emulate(folder / path.stem, None, 0)
    except Exception as err:  # noqa: BLE001  (a benchmark reports every failure and goes on)
        kind = "" if isinstance(err, UserError) else f"{type(err).__name__}: "
        row.update(device="-", error=f"{kind}{err}", seconds=round(time.monotonic() - started, 1))
        return row
    where = plan.node_map["op"]
    device = next(s.device for s in plan.subfunctions if s.name == where.get("subfunction"))
    reason = next((f"{f.reason}{': ' + f.detail if f.detail else ''}" for f in plan.fpga_fallbacks
                   if f.node == "op"), "")
    row.update(device=device, unit=where.get("unit", ""), fallback=reason,
               max_abs_error=result.comparison.max_abs_error, tolerance=result.comparison.tolerance,
               passed=result.comparison.passed, seconds=round(time.monotonic() - started, 1))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", default="pynq-z2")
    parser.add_argument("--ops", help="comma-separated ops of op_models.OPS (default: all)")
    parser.add_argument("--json", action="store_true", help="print a JSON list of rows")
    args = parser.parse_args(argv)
    ops = args.ops.split(",") if args.ops else list(op_models.OPS)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for op in ops:
            for rank in (4, 2):
                for position in op_models.POSITIONS:
                    row = check_op(op, rank, position, args.board, Path(folder))
                    if row is not None:
                        rows.append(row)
                        if not args.json:
                            print(_line(row), flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


def _line(row: dict) -> str:
    head = f"{row['op']:<18} {row['rank']}-D {row['position']:<12} {row['device']:<8}"
    if "max_abs_error" not in row:
        return f"{head} FAILED: {row['error']}"
    verdict = "ok" if row["passed"] else "OUT OF TOLERANCE"
    return (f"{head} {row['unit']:<14} error {row['max_abs_error']:.3g} (tolerance {row['tolerance']:.3g}) {verdict}"
            f"{' [' + row['fallback'] + ']' if row['fallback'] else ''} {row['seconds']} s")


if __name__ == "__main__":
    sys.exit(main())
