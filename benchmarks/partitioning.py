"""Partitioning benchmark: the latency policy against all-on-CPU and the support policy, on every board.

Run by hand (prints tables; nothing here is a test):

    .venv/bin/python benchmarks/partitioning.py            # everything (about 3 minutes)
    .venv/bin/python benchmarks/partitioning.py --quick    # fewer random graphs

1. Published architectures (benchmarks/graphs.py) and the end-to-end networks
   (examples/*.onnx through hetdeploy's intake), on each board: estimated
   latency of all-CPU, support and latency plans, the speed-up of latency over
   each, and planning time. 'fits' says whether the support plan's devices can
   hold what it gives them (when not, it is not a plan the board can run).
2. Planning time on graphs of 1,000 nodes and more.
3. Optimality: on random DAGs of 10 to 16 nodes, the exhaustive optimum over
   every cycle-free cut (partition.optimal_solution) against the latency
   policy, as a ratio optimum / latency (1.0 = optimal), with and without the
   local search the policy runs on graphs of up to 64 nodes, and against the
   integer programme (--partitioner ilp) started from the search without its
   local search.
4. --partitioner ilp against the search on the published architectures, the
   examples and the large graphs: both latencies, both times, the ILP's proven
   gap (--ilp-time-limit S, default 30 s a plan; --json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import graphs  # noqa: E402

from hetdeploy.core.board import available_boards, load_board  # noqa: E402
from hetdeploy.intake.model import load_model  # noqa: E402
from hetdeploy.planning.ilp import ilp_solution  # noqa: E402
from hetdeploy.planning.cost import CostModel  # noqa: E402
from hetdeploy.planning.partition import (  # noqa: E402
                                          allowed_devices,
                                          latency_solution,
                                          optimal_solution,
                                          partition_graph,
                                          solution_seconds,
                                          )


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def architectures(boards) -> None:
    networks = {name: make() for name, make in graphs.ARCHITECTURES.items() if name != "densenet264"}
    for example in sorted((ROOT / "examples").glob("*.onnx")):
        networks[example.stem] = load_model(example).graph
    print("## Estimated latency at batch one (ms), per board and network\n")
    print("| board | network | nodes | all-CPU | support | fits | latency | x all-CPU | x support | subfunctions "
          "| plan ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    worse = 0
    for board in boards:
        for name, graph in networks.items():
            started = time.perf_counter()
            try:
                result = partition_graph(graph, board)
            except Exception as err:  # a model the board cannot hold: say so in the table
                print(f"| {board.name} | {name} | {len(graph.nodes)} | {str(err)[:90]} |")
                continue
            elapsed = time.perf_counter() - started
            cpu, support = result.all_host_latency_s, result.support_latency_s
            if cpu is not None and result.latency_s > cpu * (1 + 1e-9) or (
                    result.support_fits and result.latency_s > support * (1 + 1e-9)):
                worse += 1
            devices = "/".join(sorted({c.device for c in result.cuts}))
            print(f"| {board.name} | {name} | {len(graph.nodes)} | {_ms(cpu)} | {_ms(support)} | "
                  f"{'yes' if result.support_fits else 'no'} | {_ms(result.latency_s)} | "
                  f"{cpu / result.latency_s:.2f} | {support / result.latency_s:.2f} | {len(result.cuts)} ({devices}) | "
                  f"{elapsed * 1e3:.0f} |")
    print(f"\nplans estimated slower than all-CPU or than a fitting support plan: {worse}\n")


def large(boards) -> None:
    print("## Planning time on large graphs (s)\n")
    cases = {"densenet264": graphs.densenet264(), "random-1000": graphs.random_dag(1, 1000),
             "random-2000": graphs.random_dag(2, 2000)}
    print("| graph | nodes | " + " | ".join(b.name for b in boards) + " |")
    print("|---|---|" + "---|" * len(boards))
    for name, graph in cases.items():
        times = []
        for board in boards:
            started = time.perf_counter()
            partition_graph(graph, board)
            times.append(f"{time.perf_counter() - started:.2f}")
        print(f"| {name} | {len(graph.nodes)} | " + " | ".join(times) + " |")
    print()


def optimality(boards, count: int) -> None:
    print(f"## Optimum / latency policy on {count} random DAGs of 10-16 nodes per board\n")
    print("| board | min ratio | mean ratio | optimal in | min without local search | mean without | ILP min ratio "
          "| ILP optimal in | ILP max s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for board in boards:
        ratios, plain, exact, times = [], [], [], []
        for seed in range(count):
            graph = graphs.random_dag(seed, 10 + seed % 7)
            cost = CostModel(graph, board)
            best = solution_seconds(cost, optimal_solution(graph, board, cost))
            ratios.append(best / solution_seconds(cost, latency_solution(graph, board, cost)))
            start = latency_solution(graph, board, cost, local_search_nodes=0)
            plain.append(best / solution_seconds(cost, start))
            result = ilp_solution(graph, cost, allowed_devices(graph, board, cost), board.host, start, 60.0)
            exact.append(best / solution_seconds(cost, result.solution))
            times.append(result.seconds)
        optimal = sum(r > 1 - 1e-9 for r in ratios)
        print(f"| {board.name} | {min(ratios):.4f} | {statistics.mean(ratios):.4f} | {optimal}/{count} | "
              f"{min(plain):.4f} | {statistics.mean(plain):.4f} | {min(exact):.4f} | "
              f"{sum(r > 1 - 1e-9 for r in exact)}/{count} | {max(times):.2f} |")
    print()


def ilp_against_search(boards, time_limit_s: float) -> list[dict]:
    """--partitioner ilp and the search on every network and board: a row each."""
    networks = {name: make() for name, make in graphs.ARCHITECTURES.items()}
    for example in sorted((ROOT / "examples").glob("*.onnx")):
        networks[example.stem] = load_model(example).graph
    networks["random-1000"] = graphs.random_dag(1, 1000)
    rows = []
    for board in boards:
        for name, graph in networks.items():
            try:
                began = time.perf_counter()
                search = partition_graph(graph, board)
                search_s = time.perf_counter() - began
                began = time.perf_counter()
                exact = partition_graph(graph, board, partitioner="ilp", ilp_time_limit_s=time_limit_s)
                exact_s = time.perf_counter() - began
            except Exception as err:  # a model the board cannot hold: say so in the row
                rows.append({"board": board.name, "network": name, "nodes": len(graph.nodes), "error": str(err)[:90]})
                continue
            rows.append({"board": board.name, "network": name, "nodes": len(graph.nodes),
                         "search_latency_s": search.latency_s, "ilp_latency_s": exact.latency_s,
                         "ratio": exact.latency_s / search.latency_s, "search_time_s": search_s,
                         "ilp_time_s": exact_s, "status": exact.ilp.status, "gap": exact.ilp.gap,
                         "slots": exact.ilp.slots, "chosen": exact.ilp.chosen})
    return rows


def print_ilp(rows: list[dict], time_limit_s: float) -> None:
    print(f"## --partitioner ilp against the search (latency at batch one, ms; time limit {time_limit_s:g} s)\n")
    print("| board | network | nodes | search | ILP | ILP / search | search s | ILP s | status | gap | slots |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['board']} | {r['network']} | {r['nodes']} | {r['error']} |")
            continue
        gap = "-" if r["gap"] is None else f"{r['gap']:.2%}"
        print(f"| {r['board']} | {r['network']} | {r['nodes']} | {_ms(r['search_latency_s'])} | "
              f"{_ms(r['ilp_latency_s'])} | {r['ratio']:.4f} | {r['search_time_s']:.2f} | {r['ilp_time_s']:.1f} | "
              f"{r['status']} | {gap} | {r['slots']} |")
    worse = sum(1 for r in rows if "ratio" in r and r["ratio"] > 1 + 1e-9)
    print(f"\nILP plans estimated slower than the search's: {worse}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 random graphs per board instead of 40")
    parser.add_argument("--ilp-time-limit", type=float, default=30.0, metavar="S",
                        help="seconds the integer programme may take per plan (default 30)")
    parser.add_argument("--ilp-only", action="store_true", help="only the ILP against the search (section 4)")
    parser.add_argument("--json", action="store_true", help="print section 4's rows as JSON only")
    args = parser.parse_args()
    boards = [load_board(name) for name in available_boards()]
    if args.json:
        print(json.dumps(ilp_against_search(boards, args.ilp_time_limit), indent=1))
        return
    if not args.ilp_only:
        architectures(boards)
        large(boards)
        optimality(boards, 10 if args.quick else 40)
    print_ilp(ilp_against_search(boards, args.ilp_time_limit), args.ilp_time_limit)


if __name__ == "__main__":
    main()
