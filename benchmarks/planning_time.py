"""How long `hetdeploy plan` takes on the model zoo's CNNs, on every board hetdeploy ships, and what it plans.

Run by hand (prints a table; nothing here is a test):

    .venv/bin/python benchmarks/planning_time.py                      # the nine CNNs, every shipped board
    .venv/bin/python benchmarks/planning_time.py --model light_resnet50 --board kv260
    .venv/bin/python benchmarks/planning_time.py --json

The networks: the nine CNNs of the ONNX model zoo as the `onnx` package ships them in its backend test data
(onnx/backend/test/data/light/light_*.onnx). Each is loaded once, then planned on each board as `hetdeploy plan`
plans it (the latency policy, folded, against the support and all-on-CPU baselines), all in one process, as
tests/test_rewrites.py's model-zoo test does (the estimate caches warm from one board to the next). Per model and
board: the seconds of the plan (wall time; this machine's load moves it) and the first 16 hex digits of the SHA-256
of its plan.json, or the one line it was refused with. Two commits whose digests agree plan alike byte for byte;
the total seconds compare their planners' speed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hetdeploy.core.board import available_boards, load_board  # noqa: E402
from hetdeploy.core.errors import UserError  # noqa: E402
from hetdeploy.intake.model import load_model  # noqa: E402
from hetdeploy.planning.config import BuildOptions  # noqa: E402
from hetdeploy.steps.plan_model import against_baselines, folded_plan  # noqa: E402

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = tuple(sorted(path.stem for path in ZOO.glob("light_*.onnx")))  # as tests/test_rewrites.py finds them


def plan_row(loaded, model: Path, board_name: str) -> dict:
    """``model`` (loaded) planned on ``board_name``: its seconds and its plan.json's digest (or why refused)."""
    options = BuildOptions(model=model, board=board_name, out_dir=Path("."))
    board = load_board(board_name)
    start = time.perf_counter()
    try:
        plan = against_baselines(folded_plan(loaded, board, options), loaded, board, options)
        outcome = hashlib.sha256(plan.to_json().encode()).hexdigest()[:16]
    except UserError as error:
        outcome = f"refused: {error}"
    return {"model": model.stem, "board": board_name, "plan_s": round(time.perf_counter() - start, 2),
            "plan": outcome}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", default=list(MODELS), choices=MODELS,
                        help="model-zoo names (default: all nine)")
    parser.add_argument("--board", nargs="+", default=available_boards(), choices=available_boards(),
                        help="shipped boards (default: every one)")
    parser.add_argument("--json", action="store_true", help="a JSON line a plan, then one of the total")
    args = parser.parse_args(argv)
    total = 0.0
    if not args.json:
        print(f"{'model':<20} {'board':<12} {'plan s':>7}  plan.json (SHA-256) or refusal")
    for name in args.model:
        model = ZOO / f"{name}.onnx"
        loaded = load_model(model)
        for board_name in args.board:
            row = plan_row(loaded, model, board_name)
            total += row["plan_s"]
            print(json.dumps(row) if args.json else
                  f"{row['model']:<20} {row['board']:<12} {row['plan_s']:>7.2f}  {row['plan'][:100]}", flush=True)
    print(json.dumps({"total_plan_s": round(total, 2)}) if args.json else f"{'total':<33} {total:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
