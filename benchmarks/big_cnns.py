"""ImageNet-class CNNs on the Zynq boards: how much of them the latency policy puts on the FPGA.

Run by hand (prints a table; nothing here is a test):

    .venv/bin/python benchmarks/big_cnns.py                          # the networks below, every Zynq board
    .venv/bin/python benchmarks/big_cnns.py --board kv260 --width 8  # one board, one width
    .venv/bin/python benchmarks/big_cnns.py --model mine.onnx        # a model of your own too
    .venv/bin/python benchmarks/big_cnns.py --json

The networks: the nine CNNs of the ONNX model zoo as the `onnx` package ships them in its backend test data
(onnx/backend/test/data/light/light_*.onnx: the zoo's graphs as their exporters wrote them, each weight a
ConstantOfShape that loading folds; AlexNet, DenseNet-121, Inception v1 and v2, ResNet-50, ShuffleNet, SqueezeNet,
VGG-19, ZFNet-512), then benchmarks/graphs.py's architectures at 224 x 224 (ResNet-50, DenseNet-121, SqueezeNet
1.0, ShuffleNet v1, Inception v1 / GoogLeNet), written as ONNX with seeded random weights (graphs.to_onnx), and
any --model. Each is planned (`hetdeploy plan`, the latency policy) on the PYNQ-Z2, Ultra96-V2, KV260 and ZCU104;
one a board cannot take (VGG-19's 548 MiB of float weights on the PYNQ-Z2's 512 MiB) is a row saying why.

Per model, board and width (--width 16 and 8 unless --width says): nodes on the FPGA, the share of the model's
convolution and matrix multiply-accumulates run there, the estimated latency and frames a second against all on
the ARM and against the support policy (whose plan may not fit: "fits" says), each FPGA subfunction's engine (its
lanes x the values a lane takes a cycle, x2 where it computes two output pixels at once / the bits its weights port
reads a cycle), the DSPs the engine's multipliers take (its lanes x values a cycle, twice at two pixels, two
products a DSP at 8 bits: the shared-operand packing of Xilinx WP486), the
board's compute bound at that width (the model's MACs at one MAC a DSP a cycle at the FPGA's clock, two at 8 bits),
its roofline at one sample a call (each layer the longer of its MACs at that rate on the DSPs of the FPGA's budget and
its weights, at that width, read once from DDR through the ports the board file gives them: every DDR port but the
first, the cores' buffers'; a bound no design of that clock and those ports beats, whatever its architecture), the
FPGA units run in bands, and the DDR bytes a sample moves (spilled activations written once and
read by each reader, DDR weights read per output vector: the memory plan's traffic); where the Vitis AI 2.5 model
zoo publishes the DPU's frames a second for the network on the board (INT8, single-thread), that figure and its
source beside it. Estimates of hetdeploy's cost
model, not measurements: its hls4ml units' part is the one benchmarks/estimates.py checks against published
synthesis; its engine's part (the units on hetdeploy/hls/engine.h, the top's Add, Concat and BatchNormalization)
is hetdeploy's model of its own C++, which no published or local synthesis checks.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import graphs  # noqa: E402

from hetdeploy.core.board import load_board  # noqa: E402
from hetdeploy.core.errors import UserError  # noqa: E402
from hetdeploy.planning.config import BuildOptions  # noqa: E402
from hetdeploy.planning.cost import node_work  # noqa: E402
from hetdeploy.planning.units.costs import ENGINE_CONTROL_DSP, EngineSize, engine_resources  # noqa: E402
from hetdeploy.steps.build import plan_stages  # noqa: E402

ARCHITECTURES = ("resnet50", "densenet121", "squeezenet", "shufflenet", "googlenet")
ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
BOARDS = ("pynq-z2", "ultra96-v2", "kv260", "zcu104")
WIDTHS = (16, 8)
# The DPU's frames a second, INT8, single-thread, by (model, board): Vitis AI 2.5's model zoo
# (Xilinx/Vitis-AI, tag v2.5, model_zoo/README.md; KV260: one B4096F at 300 MHz, ZCU104: two B4096 at 300 MHz)
DPU_SOURCE = "Vitis AI 2.5 model zoo (Xilinx/Vitis-AI v2.5 model_zoo/README.md), INT8, single-thread"
DPU_FPS = {("resnet50", "kv260"): 84.4, ("resnet50", "zcu104"): 83.6, ("squeezenet", "kv260"): 619.7,
           ("squeezenet", "zcu104"): 599.9}


def measure(model: Path, board_name: str, width: int) -> dict:
    started = time.perf_counter()
    loaded, board, plan = plan_stages(BuildOptions(model=model, board=board_name, out_dir=model.parent,
                                                   policy="latency", width=width), lambda k, what: None)
    elapsed = time.perf_counter() - started
    fpga_subs = [s for s in plan.subfunctions if board.device(s.device).kind == "fpga"]
    on_fpga = {n for s in fpga_subs for n in s.nodes}
    macs = {n.name: node_work(n).macs for n in loaded.graph.nodes}
    traffic = sum((s.memory.ddr_transfer_s + s.memory.ddr_weights_s)
                  * board.device(s.device).memory.bandwidth_bytes_per_s for s in fpga_subs if s.memory is not None)
    e = plan.estimate
    fpga = next(d for d in board.devices if d.kind == "fpga")
    engines = [next(u.engine for u in s.execution_units if u.engine is not None) for s in fpga_subs
               if any(u.engine is not None for u in s.execution_units)]
    products_a_dsp = 2 if width <= 8 else 1
    bound_s = sum(macs.values()) / (fpga.resources["dsp"] * products_a_dsp * fpga.clock_mhz * 1e6)
    rate = fpga.budget()["dsp"] * products_a_dsp * fpga.clock_mhz * 1e6  # MACs a second
    weights_rate = max(1, fpga.memory.ports - 1) * fpga.memory.bandwidth_bytes_per_s  # bytes a second
    roofline_s = sum(max(macs[n.name] / rate, n.constant_elements * width / 8 / weights_rate)
                     for n in loaded.graph.nodes if macs[n.name])
    return {"model": model.stem, "board": board_name, "width": width, "nodes": len(loaded.graph.nodes),
            "fpga_nodes": len(on_fpga), "mac_share": sum(macs[n] for n in on_fpga) / max(1.0, sum(macs.values())),
            "frames_per_s": 1.0 / e.latency_s,
            "engine_dsp": sum(engine_resources(g.window, width, EngineSize(g.lanes, g.uram_lanes, g.vector,
                                                                           pixels=g.pixels))["dsp"]
                              - ENGINE_CONTROL_DSP for g in engines),
            # each FPGA subfunction's engine: lanes x values a lane a cycle (x 2: two output pixels at once), and its
            # weights port's bits
            "engines": [f"{g.lanes}x{g.vector}{'x2' if g.pixels == 2 else ''}/{64 * g.port_words}" for g in engines],
            "compute_bound_s": bound_s, "roofline_s": roofline_s,
            "dpu_frames_per_s": DPU_FPS.get((model.stem.removeprefix("light_"), board_name)),
            "latency_s": e.latency_s, "all_cpu_latency_s": e.all_cpu_latency_s,
            "support_latency_s": e.support_latency_s, "support_fits": e.support_fits,
            "banded_units": sum(u.band is not None for s in fpga_subs for u in s.execution_units),
            "ddr_bytes_per_sample": round(traffic), "plan_s": round(elapsed, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], type=Path, help="an ONNX model of your own")
    parser.add_argument("--board", action="append", choices=BOARDS, help="only these boards (default: all four)")
    parser.add_argument("--width", action="append", type=int, help="only these widths (default: 16 and 8)")
    parser.add_argument("--no-zoo", action="store_true",
                        help="only the --model files (not the model zoo's nor graphs.py's networks)")
    parser.add_argument("--json", action="store_true", help="one JSON list of the rows")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        models = [] if args.no_zoo else sorted(ZOO.glob("light_*.onnx"))
        for name in () if args.no_zoo else ARCHITECTURES:
            path = Path(folder) / f"{name}.onnx"
            onnx.save(graphs.to_onnx(graphs.ARCHITECTURES[name]()), str(path))
            models.append(path)
        models += args.model
        for model in models:
            for board in args.board or BOARDS:
                load_board(board)
                for width in args.width or WIDTHS:
                    try:
                        rows.append(measure(model, board, width))
                    except UserError as why:  # a model the board cannot take (VGG-19's weights on the PYNQ-Z2)
                        rows.append({"model": model.stem, "board": board, "width": width, "refused": str(why)})
                    if not args.json:
                        print_row(rows[-1], first=len(rows) == 1)
    if args.json:
        print(json.dumps(rows, indent=1))


def print_row(r: dict, first: bool) -> None:
    if first:
        print(f"DPU figures: {DPU_SOURCE}")
        print("| model | board | bits | nodes | on FPGA | FPGA MAC share | latency ms | frames/s | x all-ARM | "
              "x support (fits) | engine (lanes x values [x pixels] / port bits) | engine DSP | compute bound ms | "
              "x bound | roofline ms | x roofline | DPU frames/s | banded units | DDR MB a sample | plan s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    if "refused" in r:
        print(f"| {r['model']} | {r['board']} | {r['width']} | not planned: {r['refused']} |", flush=True)
        return
    dpu = f"{r['dpu_frames_per_s']}" if r["dpu_frames_per_s"] else ""
    print(f"| {r['model']} | {r['board']} | {r['width']} | {r['nodes']} | {r['fpga_nodes']} | {r['mac_share']:.1%} | "
          f"{r['latency_s'] * 1e3:.1f} | {r['frames_per_s']:.2f} | {r['all_cpu_latency_s'] / r['latency_s']:.2f} | "
          f"{r['support_latency_s'] / r['latency_s']:.2f} ({'yes' if r['support_fits'] else 'no'}) | "
          f"{', '.join(r['engines'])} | {r['engine_dsp']} | {r['compute_bound_s'] * 1e3:.1f} | "
          f"{r['latency_s'] / r['compute_bound_s']:.2f} | {r['roofline_s'] * 1e3:.1f} | "
          f"{r['latency_s'] / r['roofline_s']:.2f} | {dpu} | {r['banded_units']} | {r['ddr_bytes_per_sample'] / 1e6:.2f} | {r['plan_s']} |", flush=True)


if __name__ == "__main__":
    main()
