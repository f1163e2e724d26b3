"""The MLPerf Tiny reference architectures on the PYNQ-Z2: hetdeploy's sequential top beside its units as a
dataflow (estimates only: hetdeploy builds the sequential top; the dataflow top of issue 66 is not built yet),
with the published MLPerf Tiny figures of hls4ml's and FINN's PYNQ-Z2 submissions beside them.

Run by hand (prints a table; nothing here is a test):

    .venv/bin/python benchmarks/tiny.py [--width 8] [--json]

The networks, written here with benchmarks/graphs.py and seeded random weights (graphs.to_onnx), as the MLPerf Tiny
v0.7 reference models define them (mlcommons/tiny, benchmark/training): anomaly detection's fully connected
autoencoder 640-128-128-128-128-8-128-128-128-128-640 (each hidden layer with its BatchNormalization and ReLU),
keyword spotting's DS-CNN on 49 x 10 MFCCs (a 10 x 4 convolution of stride 2, four depthwise-separable blocks of
64 channels, average pooling, 12 classes), image classification's ResNet-8 on 32 x 32 x 3 (a 16-channel stem, three
residual stacks of 16, 32 and 64 channels, the last two strided with a 1 x 1 shortcut) and visual wake words'
MobileNetV1 0.25 on 96 x 96 x 3. Each is planned on the PYNQ-Z2 under the latency policy (``--width``: the
fixed-point bits, 8 by default, as the quantized submissions are); the table says how many nodes went to the FPGA.

Per model: the units, the FPGA's resources, and per top the FPGA's cycles a sample at the board file's clock (the
sequential top: its units' latencies summed, as the plan estimates it; the dataflow: its slowest unit's interval,
and its latency, from units.dataflow_processes and planning/dataflow.py's free schedule, and the FIFO tokens its
depths hold), with samples/s of the FPGA alone; then the published figure. The published designs are not these
networks' builds: hls4ml's AD08 is this autoencoder quantized to 8 bits; FINN's keyword spotting submission is a
W3A3 MLP, not the DS-CNN; hls4ml's RN07 and RN08 are ResNet-7/8 variants of its own; FINN's CNV-W1A1 is BNN-PYNQ's
CIFAR-10 network; no PYNQ-Z2 visual wake words figure is published. Nothing here is measured or synthesised.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import graphs  # noqa: E402

from hetdeploy.planning import units  # noqa: E402
from hetdeploy.planning.config import BuildOptions  # noqa: E402
from hetdeploy.planning.dataflow import DataflowError, check, fifo_depths, free_schedule  # noqa: E402
from hetdeploy.steps.build import plan_stages  # noqa: E402

BOARD = "pynq-z2"
# MLPerf Tiny's published PYNQ-Z2 latencies (a sample, single stream): mlcommons/tiny_results_v0.7 and v1.0
PUBLISHED = {
    "anomaly_detection": [("hls4ml AD08 (v0.7)", 18.7e-6)],
    "keyword_spotting": [("FINN KWS W3A3 MLP (v0.7; another network)", 17.5e-6)],
    "image_classification": [("hls4ml RN07 (v0.7)", 27.3e-3), ("hls4ml RN08 (v1.0)", 7.64e-3),
                             ("FINN CNV-W1A1 (v0.7; another network)", 1.51e-3)],
    "visual_wake_words": [],
}


def anomaly_detection() -> graphs.Graph:
    b = graphs.Builder([1, 640])
    x = "input"
    for width in (128, 128, 128, 128, 8, 128, 128, 128, 128):
        x = b.unary("Relu", b.unary("BatchNormalization", _dense(b, x, width)))
    return b.graph(_dense(b, x, 640))


def _dense(b: graphs.Builder, x: str, width: int) -> str:
    n, inputs = b.shapes[x]
    return b.op("Gemm", [x], [n, width], inputs * width + width, transB=1)


def keyword_spotting() -> graphs.Graph:
    b = graphs.Builder([1, 1, 49, 10])
    # 'same' padding of a 10 x 4 kernel at stride 2: 25 x 5 outputs, 4 rows above and 5 below, a column each side
    x = b.op("Conv", ["input"], [1, 64, 25, 5], 64 * 10 * 4 + 64, kernel_shape=[10, 4], strides=[2, 2],
             pads=[4, 1, 5, 1])
    x = b.unary("Relu", b.unary("BatchNormalization", x))
    for _ in range(4):
        x = b.conv_bn_relu(b.conv_bn_relu(x, 64, 3, group=64), 64, 1)
    x = b.op("GlobalAveragePool", [x], [1, 64, 1, 1])  # the reference's 25 x 5 average pooling: the whole map
    x = b.op("Flatten", [x], [1, 64], axis=1)
    return b.graph(b.op("Softmax", [_dense(b, x, 12)], [1, 12], axis=1))


def image_classification() -> graphs.Graph:
    b = graphs.Builder([1, 3, 32, 32])
    x = b.conv_bn_relu("input", 16, 3)
    for width, stride in ((16, 1), (32, 2), (64, 2)):
        y = b.conv_bn_relu(b.conv_bn_relu(x, width, 3, stride), width, 3, relu=False)
        shortcut = x if stride == 1 else b.conv(x, width, 1, stride, pad=0)
        x = b.unary("Relu", b.add(y, shortcut))
    return b.graph(b.head(x, 10))


def visual_wake_words() -> graphs.Graph:
    b = graphs.Builder([1, 3, 96, 96])
    x = b.conv_bn_relu("input", 8, 3, 2)
    for width, stride in ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), *[(128, 1)] * 5, (256, 2), (256, 1)):
        channels = b.shapes[x][1]
        x = b.conv_bn_relu(b.conv_bn_relu(x, channels, 3, stride, group=channels), width, 1)
    return b.graph(b.head(x, 2))


MODELS = {"anomaly_detection": anomaly_detection, "keyword_spotting": keyword_spotting,
          "image_classification": image_classification, "visual_wake_words": visual_wake_words}


def measure(name: str, folder: Path, width: int) -> dict:
    model = folder / f"{name}.onnx"
    onnx.save(graphs.to_onnx(MODELS[name]()), str(model))
    loaded, board, plan = plan_stages(BuildOptions(model=model, board=BOARD, out_dir=folder, policy="latency",
                                                   width=width), lambda k, what: None)
    fpga = [s for s in plan.subfunctions if board.device(s.device).kind == "fpga"]
    row = {"model": name, "width": width, "fpga_nodes": sum(len(s.nodes) for s in fpga),
           "nodes": len(loaded.graph.nodes), "units": sum(len(s.execution_units) for s in fpga),
           "resources": {k: sum(s.resources.get(k, 0) for s in fpga) for k in units.RESOURCES},
           "published": [{"design": design, "latency_s": seconds} for design, seconds in PUBLISHED[name]]}
    clock = board.device("fpga").clock_mhz * 1e6
    sequential = sum(u.estimate["latency_cycles"] for s in fpga for u in s.execution_units)
    row["sequential"] = {"cycles": sequential, "latency_s": sequential / clock, "samples_per_s": clock / sequential}
    try:
        interval = latency = tokens = 0
        for sub in fpga:  # subfunctions one after another: their intervals' slowest, their latencies summed
            processes = units.dataflow_processes(loaded.graph, sub, board.device(sub.device).clock_mhz,
                                                 board.device(sub.device).hls_tool)
            schedule = free_schedule(processes, 6)
            depths = fifo_depths(schedule)
            problem = check(processes, depths)
            if problem:
                raise DataflowError(problem)
            interval, latency = max(interval, schedule.interval), latency + schedule.latency
            tokens += sum(depths.values())
        row["dataflow"] = {"interval_cycles": interval, "latency_s": latency / clock,
                           "samples_per_s": clock / interval, "fifo_tokens": tokens}
    except DataflowError as why:
        row["dataflow"] = {"not_a_dataflow": str(why)}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=8, help="fixed-point bits of the plans (default 8)")
    parser.add_argument("--json", action="store_true", help="one JSON list of the rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = [measure(name, Path(folder), args.width) for name in MODELS]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"MLPerf Tiny reference architectures on the {BOARD} at {args.width} bits (latency policy): hetdeploy's "
          f"estimates at the board file's clock, the FPGA alone (no DMA, no call overhead); the dataflow top is "
          f"an estimate of the units overlapped, not built yet")
    print(f"{'model':<22} {'FPGA nodes':>10} {'units':>5} {'DSP':>5} {'BRAM18':>6} {'LUT':>7} {'FF':>7} "
          f"{'sequential':>11} {'samples/s':>10} {'dataflow':>9} {'latency':>9} {'samples/s':>10} {'FIFO tok':>8}  "
          f"published (PYNQ-Z2)")
    for row in rows:
        r, seq, flow = row["resources"], row["sequential"], row["dataflow"]
        dataflow = (f"{flow['interval_cycles']:>9} {_time(flow['latency_s']):>9} {flow['samples_per_s']:>10,.0f} "
                    f"{flow['fifo_tokens']:>8}" if "interval_cycles" in flow else f"{'-':>9} {'-':>9} {'-':>10} "
                                                                                 f"{'-':>8}")
        published = "; ".join(f"{p['design']} {_time(p['latency_s'])}" for p in row["published"]) or "none published"
        print(f"{row['model']:<22} {row['fpga_nodes']:>4} of {row['nodes']:>3} {row['units']:>5} {r['dsp']:>5} "
              f"{r['bram18']:>6} {r['lut']:>7} {r['ff']:>7} {_time(seq['latency_s']):>11} "
              f"{seq['samples_per_s']:>10,.0f} {dataflow}  {published}")
        if "not_a_dataflow" in flow:
            print(f"  {row['model']}: no dataflow estimate: {flow['not_a_dataflow']}")
    print("dataflow: cycles a sample (its slowest unit's interval); sources: mlcommons/tiny_results_v0.7 and "
          "tiny_results_v1.0, closed division, PYNQ-Z2")


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


if __name__ == "__main__":
    main()
