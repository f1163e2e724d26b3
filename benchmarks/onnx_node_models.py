"""The onnx package's single-op test models through `hetdeploy plan`: each ends in a plan or in one line naming the
problem, never in a traceback or a hang.

Run by hand (prints a table, then every finding; nothing here is a test):

    .venv/bin/python benchmarks/onnx_node_models.py                       # every case, the KV260
    .venv/bin/python benchmarks/onnx_node_models.py --board pynq-z2 --match conv --jobs 2 --json
    .venv/bin/python benchmarks/onnx_node_models.py --board pynq-z2 --match _relu --build --policy support

The cases are the ones onnx's backend tests generate (``onnx.backend.test.case.node.collect_testcases``: one op
each, at the opsets the installed onnx writes, about 1,900 of them), each saved to a file and planned for the board
under the latency policy (``--policy``), in worker processes, with ``--timeout`` seconds each. A case ends as:

- "planned": a plan, and how many of its nodes run on the FPGA;
- "refused": hetdeploy's one-line error (``UserError``), as the CLI prints it with exit 2;
- "finding": anything else: an exception that is not a ``UserError`` (the CLI prints its traceback: a bug of
  hetdeploy's, or a library's failure it did not turn into one line), or no answer within the timeout.

With ``--build`` each case is built instead (`hetdeploy build -q`, in a child process; with ``--policy support``
every node the FPGA runs goes there, generated through hls4ml or the top, C-simulated and compared with
onnxruntime) and ends
as "built" (exit 0, verified), "refused" (exit 2, one line), "out of tolerance" (exit 3: the build's comparison
failed, and says so), "tool failed" (exit 1, one line naming the log), or "finding" (a traceback, another exit
code, more than one line on stderr, or the timeout).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def plan_case(name: str, model_bytes: bytes, board: str, timeout: int, policy: str) -> dict:
    """One case planned in this worker: its outcome and, for a refusal or a finding, what was said."""
    from hetdeploy.core.errors import UserError
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.steps.build import plan_stages

    signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / f"{name}.onnx"
        model.write_bytes(model_bytes)
        signal.alarm(timeout)
        try:
            _, loaded_board, plan = plan_stages(BuildOptions(model=model, board=board, out_dir=Path(folder) / "out",
                                                             policy=policy),
                                                lambda kind, what: None)
            fpga = {d.name for d in loaded_board.devices if d.kind == "fpga"}
            on_fpga = sum(len(s.nodes) for s in plan.subfunctions if s.device in fpga)
            return {"case": name, "outcome": "planned", "fpga_nodes": on_fpga}
        except UserError as err:
            return {"case": name, "outcome": "refused", "said": str(err)}
        except _Timeout:
            return {"case": name, "outcome": "finding", "said": f"no answer in {timeout} s"}
        except Exception as err:  # noqa: BLE001 - every other exception is what this script looks for
            where = traceback.extract_tb(err.__traceback__)[-1]
            return {"case": name, "outcome": "finding",
                    "said": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''} "
                            f"({os.path.relpath(where.filename, ROOT)}:{where.lineno})"}
        finally:
            signal.alarm(0)


def build_case(name: str, model_bytes: bytes, board: str, timeout: int, policy: str) -> dict:
    """One case built by the CLI in a child process: its outcome by exit code and what stderr said."""
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / f"{name}.onnx"
        model.write_bytes(model_bytes)
        command = [sys.executable, "-m", "hetdeploy", "build", str(model), "--board", board, "--policy", policy,
                   "-o", str(Path(folder) / "out"), "-q"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=folder)
        except subprocess.TimeoutExpired:
            return {"case": name, "outcome": "finding", "said": f"no answer in {timeout} s"}
    said = done.stderr.strip()
    one_line = len(said.splitlines()) == 1 and said.startswith("hetdeploy: error:")
    outcome = {0: "built", 2: "refused", 3: "out of tolerance", 1: "tool failed"}.get(done.returncode, "finding")
    if outcome != "built" and not one_line:
        outcome = "finding"
    return {"case": name, "outcome": outcome, "exit": done.returncode, "said": said.splitlines()[-1] if said else ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="kv260")
    parser.add_argument("--match", default="", help="only the cases whose name this regular expression finds in")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=120, help="seconds a case may take")
    parser.add_argument("--policy", default="latency", help="the partitioning policy (support: every node the FPGA "
                                                             "runs goes there)")
    parser.add_argument("--build", action="store_true", help="build each case instead of planning it")
    parser.add_argument("--json", action="store_true", help="print the outcomes as a JSON list")
    args = parser.parse_args()

    from onnx.backend.test.case import node

    with warnings.catch_warnings():  # the cases' own reference arithmetic warns of its infinities
        warnings.simplefilter("ignore")
        cases = [c for c in node.collect_testcases(None) if re.search(args.match, c.name)]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        run_case = build_case if args.build else plan_case
        futures = [pool.submit(run_case, c.name, c.model.SerializeToString(), args.board, args.timeout,
                               args.policy) for c in cases]
        outcomes = [f.result() for f in futures]
    if args.json:
        print(json.dumps(outcomes, indent=1))
        return 0
    counts = collections.Counter(o["outcome"] for o in outcomes)
    if args.build:
        print("| board | cases | built and verified | refused in one line | out of tolerance | tool failed "
              "| findings |\n|---|---|---|---|---|---|---|\n"
              f"| {args.board} | {len(outcomes)} | {counts['built']} | {counts['refused']} | "
              f"{counts['out of tolerance']} | {counts['tool failed']} | {counts['finding']} |")
    else:
        with_fpga = sum(1 for o in outcomes if o.get("fpga_nodes"))
        print("| board | cases | planned | with FPGA nodes | refused in one line | findings |\n"
              "|---|---|---|---|---|---|\n"
              f"| {args.board} | {len(outcomes)} | {counts['planned']} | {with_fpga} | {counts['refused']} | "
              f"{counts['finding']} |")
    for o in outcomes:
        if o["outcome"] not in ("planned", "built", "refused"):
            print(f"{o['outcome']}: {o['case']}: {o['said']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
