"""Throughput benchmark: the throughput objective (a pipelined stream of batches) against the latency
objective and against all on the host CPU. Estimates of hetdeploy's cost model (cost.py), not
measurements on a board.

Run by hand (prints tables; nothing here is a test):

    .venv/bin/python benchmarks/throughput.py [--batch 1000] [--json]

1. The jet-tagger MLP and the small CNN (examples/) on the PYNQ-Z2, planned in full (hetdeploy.core.plan:
   partition, folding, memory): with ``--objective throughput --batch N``, where their nodes go and the
   estimated samples per second, against all on the ARM cores, against the same objective at batch
   one, and against the latency objective's plan run as a stream of the same batches.
2. The published architectures of benchmarks/graphs.py (and the examples) on every board, partitioned
   (partition.partition_graph, before folding): samples per second of the throughput objective's plan
   and of the latency objective's plan, both as streams of batches of N, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import graphs  # noqa: E402

import hetdeploy  # noqa: E402
from hetdeploy.core.board import available_boards, load_board  # noqa: E402
from hetdeploy.core.errors import UserError  # noqa: E402
from hetdeploy.intake.model import load_model  # noqa: E402
from hetdeploy.planning.partition import partition_graph  # noqa: E402


def _fpga_nodes(plan) -> int:
    return sum(len(s.nodes) for s in plan.subfunctions if s.kind == "fpga")


def examples(batch: int) -> list[dict]:
    rows = []
    for name in ("jet_tagger_mlp", "small_cnn"):
        model = ROOT / "examples" / f"{name}.onnx"
        plans = {(objective, b): hetdeploy.plan(str(model), "pynq-z2", objective=objective, batch=b).plan
                 for objective, b in (("throughput", batch), ("throughput", 1), ("latency", batch))}
        chosen = plans[("throughput", batch)]
        e = chosen.estimate
        rows.append({
            "network": name, "board": "pynq-z2", "batch": batch,
            "nodes": sum(len(s.nodes) for s in chosen.subfunctions), "fpga_nodes": _fpga_nodes(chosen),
            "subfunctions": [f"{s.name} ({len(s.nodes)})" for s in chosen.subfunctions],
            "throughput_per_s": e.throughput_per_s,
            "all_arm_per_s": e.all_cpu_throughput_per_s,
            "batch_one_per_s": plans[("throughput", 1)].estimate.throughput_per_s,
            "latency_plan_per_s": plans[("latency", batch)].estimate.throughput_per_s,
            "latency_plan_fpga_nodes": _fpga_nodes(plans[("latency", batch)]),
            "latency_s": e.latency_s,
        })
    return rows


def architectures(batch: int) -> list[dict]:
    networks = {name: make() for name, make in graphs.ARCHITECTURES.items() if name != "densenet264"}
    for example in sorted((ROOT / "examples").glob("*.onnx")):
        networks[example.stem] = load_model(example).graph
    rows = []
    for board_name in available_boards():
        board = load_board(board_name)
        for name, graph in networks.items():
            row = {"board": board_name, "network": name, "batch": batch}
            try:
                stream = partition_graph(graph, board, "latency", 16, "throughput", batch)
                latency = partition_graph(graph, board, "latency", 16, "latency", batch)
            except UserError as err:
                row["error"] = str(err)[:80]
                rows.append(row)
                continue
            row.update(throughput_per_s=1 / stream.stream_s, latency_plan_per_s=1 / latency.stream_s,
                       all_cpu_per_s=1 / stream.all_host_stream_s if stream.all_host_stream_s else None,
                       subfunctions=len(stream.cuts), latency_plan_subfunctions=len(latency.cuts))
            rows.append(row)
    return rows


def _rate(value) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000, help="samples per FPGA call (default 1000)")
    parser.add_argument("--json", action="store_true", help="print {examples, architectures} as JSON")
    args = parser.parse_args()
    first, second = examples(args.batch), architectures(args.batch)
    if args.json:
        print(json.dumps({"examples": first, "architectures": second}, indent=2))
        return
    print(f"## 1. --objective throughput --batch {args.batch} on the PYNQ-Z2 (estimated samples/s)\n")
    print("| network | FPGA nodes | subfunctions | throughput | all on ARM | x ARM | batch 1 | x batch 1 "
          "| latency plan as a stream | x latency plan |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in first:
        print(f"| {r['network']} | {r['fpga_nodes']} of {r['nodes']} | {', '.join(r['subfunctions'])} | "
              f"{_rate(r['throughput_per_s'])} | {_rate(r['all_arm_per_s'])} | "
              f"{r['throughput_per_s'] / r['all_arm_per_s']:.1f} | {_rate(r['batch_one_per_s'])} | "
              f"{r['throughput_per_s'] / r['batch_one_per_s']:.1f} | {_rate(r['latency_plan_per_s'])} "
              f"({r['latency_plan_fpga_nodes']} FPGA nodes) | {r['throughput_per_s'] / r['latency_plan_per_s']:.1f} |")
    print(f"\n## 2. Throughput objective against the latency objective's plan, both streams of batches of "
          f"{args.batch} (estimated samples/s, before folding)\n")
    print("| board | network | throughput plan | subfunctions | latency plan | subfunctions | x latency plan "
          "| all CPU |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for r in second:
        if "error" in r:
            print(f"| {r['board']} | {r['network']} | {r['error']} | | | | | |")
            continue
        ratio = r["throughput_per_s"] / r["latency_plan_per_s"]
        ratios.append(ratio)
        print(f"| {r['board']} | {r['network']} | {_rate(r['throughput_per_s'])} | {r['subfunctions']} | "
              f"{_rate(r['latency_plan_per_s'])} | {r['latency_plan_subfunctions']} | {ratio:.2f} | "
              f"{_rate(r['all_cpu_per_s'])} |")
    ratios.sort()
    print(f"\n{len(ratios)} plans: throughput / latency plan ratio min {ratios[0]:.2f}, median "
          f"{ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f}; below 1.0 in {sum(x < 0.999 for x in ratios)}")


if __name__ == "__main__":
    main()
