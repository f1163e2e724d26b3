"""The ``hetdeploy`` command.

Exit codes: 0 success; 2 bad input (model, board, options); 3 C-simulation or
emulation out of tolerance; 1 an internal error (a bug: the traceback is kept).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from . import __version__
from .errors import UserError


def _build(args: argparse.Namespace) -> int:
    from .build import BuildOptions, build

    plan = build(BuildOptions(
        model=Path(args.model), board=args.board, out_dir=Path(args.output), calibration=args.calibration,
        samples=args.samples, seed=args.seed, relative_tolerance=args.tolerance,
    ))
    if args.json:
        print(plan.to_json(), end="")
        return 0
    print(f"{'subfunction':<16} {'device':<10} {'nodes':>5}  {'C-sim max abs error':>20}  {'tolerance':>9}")
    for sub in plan.subfunctions:
        v = sub.verification
        error = f"{v.max_abs_error:.3g}" if v else "-"
        print(f"{sub.name:<16} {sub.device:<10} {len(sub.nodes):>5}  {error:>20}  {v.tolerance if v else 0:>9.3g}")
    return 0


def _emulate(args: argparse.Namespace) -> int:
    from .emulate import emulate

    result = emulate(Path(args.build_dir), args.input, args.seed)
    if args.output:
        values = list(result.comparison.outputs.values())
        if len(values) == 1:
            np.save(args.output, values[0])
        else:
            np.savez(args.output, **result.comparison.outputs)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.table())
    return 0 if result.comparison.passed else 3


def _boards(args: argparse.Namespace) -> int:
    from .board import available_boards, load_board

    boards = [load_board(name) for name in available_boards()]
    if args.json:
        print(json.dumps([{"name": b.name, "devices": [{"name": d.name, "kind": d.kind} for d in b.devices]}
                          for b in boards], indent=2))
    else:
        for b in boards:
            devices = ", ".join(f"{d.name} ({d.kind})" for d in b.devices)
            print(f"{b.name:<14} {devices}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="hetdeploy",
        description="Deploy an ONNX network onto a heterogeneous CPU/GPU/FPGA board.",
    )
    top.add_argument("--version", action="version", version=f"hetdeploy {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = commands.add_parser("build", help="partition, generate HLS, verify in C-simulation, write a build folder",
                            description="Run every stage and write the build folder DIR (moved into place only "
                                        "when every stage passed).")
    b.add_argument("model", help="the ONNX model file")
    b.add_argument("--board", required=True, help="a board name from boards/ (see 'hetdeploy boards') or a .yaml path")
    b.add_argument("-o", "--output", required=True, metavar="DIR", help="the build folder to write")
    b.add_argument("--calibration", metavar="X.npy", help="input samples (.npy, or .npz by input name) used to size "
                   "fixed-point precisions and to verify; default: seeded random samples")
    b.add_argument("--samples", type=int, default=4, help="number of random samples without --calibration (default 4)")
    b.add_argument("--seed", type=int, default=0, help="seed of the random samples (default 0)")
    b.add_argument("--tolerance", type=float, default=0.05,
                   help="allowed max abs error, as a fraction of the reference's peak magnitude (at least 1.0); "
                        "default 0.05")
    b.add_argument("--json", action="store_true", help="print plan.json instead of the summary table")
    b.set_defaults(run=_build)

    e = commands.add_parser("emulate", help="run a build on this host and compare with the model on onnxruntime",
                            description="CPU/GPU subfunctions on onnxruntime, FPGA subfunctions in C-simulation, in "
                                        "plan order; exits 3 when out of tolerance.")
    e.add_argument("build_dir", metavar="DIR", help="a folder written by 'hetdeploy build'")
    e.add_argument("--input", metavar="X.npy", help="input (.npy, or .npz by input name); default: a seeded random one")
    e.add_argument("--output", metavar="Y.npy", help="save the pipeline's output here")
    e.add_argument("--seed", type=int, default=0, help="seed of the random input without --input (default 0)")
    e.add_argument("--json", action="store_true", help="print the comparison as JSON")
    e.set_defaults(run=_emulate)

    bo = commands.add_parser("boards", help="list the board capability files", description="List boards/*.yaml.")
    bo.add_argument("--json", action="store_true", help="print a JSON list of {name, devices: [{name, kind}]}")
    bo.set_defaults(run=_boards)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except UserError as err:
        print(f"hetdeploy: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("hetdeploy: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
