"""The MLPerf Tiny reference architectures on the PYNQ-Z2 under each of hetdeploy's tops: the sequential (its units
one after another a sample) and the dataflow (its units at once on successive samples, linked by FIFOs: issue 66),
as `hetdeploy plan --top` plans them, with the published MLPerf Tiny figures of hls4ml's and FINN's PYNQ-Z2
submissions beside them. Estimates only: nothing here is measured or synthesised.

Run by hand (prints a table; nothing here is a test):

    .venv/bin/python benchmarks/tiny.py [--width 8] [--batch 100] [--json]

The networks, written here with benchmarks/graphs.py and seeded random weights (graphs.to_onnx), as the MLPerf Tiny
v0.7 reference models define them (mlcommons/tiny, benchmark/training): anomaly detection's fully connected
autoencoder 640-128-128-128-128-8-128-128-128-128-640 (each hidden layer with its BatchNormalization and ReLU),
keyword spotting's DS-CNN on 49 x 10 MFCCs (a 10 x 4 convolution of stride 2, four depthwise-separable blocks of
64 channels, average pooling, 12 classes), image classification's ResNet-8 on 32 x 32 x 3 (a 16-channel stem, three
residual stacks of 16, 32 and 64 channels, the last two strided with a 1 x 1 shortcut) and visual wake words'
MobileNetV1 0.25 on 96 x 96 x 3. Each is planned on the PYNQ-Z2 at ``--width`` bits (8 by default, as the quantized
submissions are) three ways (``PLANS``): for one sample (``--policy support --objective latency --top sequential``:
everything the FPGA takes on it, folded for the least latency, the figure to set beside a single-stream latency),
and by the latency policy for a stream (``--objective throughput``, ``--batch``: 100 by default) once with ``--top
sequential`` and once with ``--top dataflow``; a network that has no dataflow top (a unit on the engine, or in
bands) says why. A stream's plan may cut the FPGA's share into several cores with ARM work between them: its
latency column is its FPGA cores' latencies summed, not a sample's time.

Per model and plan: the FPGA nodes, the units, the FPGA's resources (the dataflow's FIFOs and buffer copies in its
BRAM18, LUT and FF), the FPGA's cycles a sample at the board file's clock alone and between samples in a stream (the
sequential top's are both its units' latencies summed; the dataflow's from its processes' free schedule, the
interval its slowest unit's), the FPGA's samples/s, and the plan's end to end (the call overhead, the DMA's bytes
and the ARM's subfunctions included, batches pipelined), and so with its input given as its quantizer's codes
("codes in": ``run.py --codes``, the ARM's quantizer not run; "-" where the plan has no such input); then the
published figure. The published designs are not
the reference architectures' builds: hls4ml's AD08 is a smaller autoencoder (64 inputs, 72 wide) and FINN's keyword
spotting submission a W3A3 MLP, not the DS-CNN (both are rows of their own, below); hls4ml's RN07 and RN08 are
ResNet-7/8 variants of its own; FINN's CNV-W1A1 is BNN-PYNQ's CIFAR-10 network (a row of its own, below); no PYNQ-Z2
visual wake words figure is published. The published latency is MLPerf Tiny's single-stream figure, a sample's time on the board with
its host's calls; hetdeploy's is the FPGA's alone.

Beside the reference architectures, the two submissions whose networks and quantizations are public, as Brevitas
exports them (QONNX, untrained, seed 0; tests/data/brevitas, written by ``python benchmarks/brevitas_layers.py
--export tests/data/brevitas --only '^mlperf_tiny'``; their quantizers set their precisions, not ``--width``):
hls4ml's AD08 (``ad08_w12a6``: 64-72-72-8-72-72-64, 12-bit weights, 6-bit ReLUs, 8-bit input:
mlcommons/tiny_results_v0.7, open/hls4ml-finn/code/ad/AD08, training/ad08.yml and inference/hls4ml_config.yml) and
FINN's keyword spotting MLP (``kws_mlp_w3a3``: 490-256-256-256-12, 3-bit weights and activations, 8-bit input:
code/kws/KWS-W3A3, training/const_QMLP.yaml and its QMLP). And FINN's image classification submission, CNV-W1A1
(``cnv_w1a1``: BNN-PYNQ's CIFAR-10 network, binary weights and activations, whose layers of signs take hetdeploy's
XNOR-popcount kernel), exported by Brevitas here when the bench extra is installed (its 6 MB of float weights are
not committed).
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

from hetdeploy.core.errors import UserError  # noqa: E402
from hetdeploy.planning import units  # noqa: E402
from hetdeploy.planning.config import BuildOptions  # noqa: E402
from hetdeploy.steps.build import plan_stages  # noqa: E402

BOARD = "pynq-z2"
DATA = ROOT / "tests" / "data" / "brevitas"
# MLPerf Tiny's published PYNQ-Z2 latencies (a sample, single stream): mlcommons/tiny_results_v0.7 and v1.0
PUBLISHED = {
    "anomaly_detection": [("hls4ml AD08 (v0.7; the smaller network below)", 18.7e-6)],
    "ad08_w12a6": [("hls4ml AD08 (v0.7)", 18.7e-6)],
    "keyword_spotting": [("FINN KWS W3A3 MLP (v0.7; the network below)", 17.5e-6)],
    "kws_mlp_w3a3": [("FINN KWS W3A3 MLP (v0.7)", 17.5e-6)],
    "image_classification": [("hls4ml RN07 (v0.7)", 27.3e-3), ("hls4ml RN08 (v1.0)", 7.64e-3),
                             ("FINN CNV-W1A1 (v0.7; the network below)", 1.51e-3)],
    "cnv_w1a1": [("FINN CNV-W1A1 (v0.7)", 1.51e-3)],
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
    return graphs.resnet8()


def visual_wake_words() -> graphs.Graph:
    b = graphs.Builder([1, 3, 96, 96])
    x = b.conv_bn_relu("input", 8, 3, 2)
    for width, stride in ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), *[(128, 1)] * 5, (256, 2), (256, 1)):
        channels = b.shapes[x][1]
        x = b.conv_bn_relu(b.conv_bn_relu(x, channels, 3, stride, group=channels), width, 1)
    return b.graph(b.head(x, 2))


def finn_cnv_w1a1(folder: Path) -> Path:
    """FINN's CNV-W1A1 as Brevitas exports it (brevitas_examples' bnn_pynq cnv_1w1a, untrained, seed 0:
    ``brevitas_layers.export``), into ``folder``: some 6 MB of float weights, so not committed; it needs the bench
    extra (PyTorch and Brevitas)."""
    import brevitas_layers

    return brevitas_layers.export("cnv_1w1a", brevitas_layers.cases()["cnv_1w1a"], folder)


MODELS = {"anomaly_detection": anomaly_detection, "ad08_w12a6": DATA / "mlperf_tiny_ad08.onnx",
          "keyword_spotting": keyword_spotting, "kws_mlp_w3a3": DATA / "mlperf_tiny_kws_w3a3.onnx",
          "image_classification": image_classification, "cnv_w1a1": finn_cnv_w1a1,
          "visual_wake_words": visual_wake_words}


# The plans of each network: a sample alone (everything the FPGA takes on it, folded for the least latency, its units
# one after another: what a single-stream latency measures), and a stream of batches under each top (the latency
# policy for samples/s)
PLANS = {"one sample": {"policy": "support", "objective": "latency", "top": "sequential", "stream": False},
         "stream, sequential": {"policy": "latency", "objective": "throughput", "top": "sequential", "stream": True},
         "stream, dataflow": {"policy": "latency", "objective": "throughput", "top": "dataflow", "stream": True}}


def measure(name: str, folder: Path, width: int, batch: int) -> dict:
    model = MODELS[name]
    row = {"model": name, "width": width, "batch": batch,
           "published": [{"design": design, "latency_s": seconds} for design, seconds in PUBLISHED[name]]}
    if model is finn_cnv_w1a1:
        try:
            model = finn_cnv_w1a1(folder)
        except ImportError as why:
            return {**row, **{label: {"no_plan": f"not exported: {why} (pip install -e '.[bench]')"}
                              for label in PLANS}}
    elif callable(model):
        model = folder / f"{name}.onnx"
        onnx.save(graphs.to_onnx(MODELS[name]()), str(model))
    for label, settings in PLANS.items():
        try:
            loaded, board, plan = plan_stages(BuildOptions(
                model=model, board=BOARD, out_dir=folder, width=width, batch=batch if settings["stream"] else 1,
                **{k: v for k, v in settings.items() if k != "stream"}), lambda k, what: None)
        except UserError as why:
            row[label] = {"no_plan": str(why)}
            continue
        fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
        clock = board.device("fpga").clock_mhz * 1e6
        # the FPGA subfunctions one after another a sample; in a stream each its own core, the slowest the pace
        latency = sum(s.top.latency_cycles for s in fpga)
        interval = max((s.top.interval_cycles for s in fpga), default=0)
        # the chip's totals: its units' and its dataflow tops' FIFOs and buffer copies
        resources = {k: sum(r.used.get(k, 0) for r in plan.fpga_resources.values()) for k in units.RESOURCES}
        row[label] = {"fpga_nodes": sum(len(s.nodes) for s in fpga), "nodes": len(loaded.graph.nodes),
                    "units": sum(len(s.execution_units) for s in fpga), "resources": resources,
                    "latency_cycles": latency, "interval_cycles": interval, "latency_s": latency / clock,
                    "samples_per_s": clock / interval if interval else 0.0,
                    "end_to_end_samples_per_s": plan.estimate.throughput_per_s,
                    # given its input quantizer's codes (run.py --codes): the host's quantizer not run
                    "codes_in_samples_per_s": plan.codes_input.throughput_per_s if plan.codes_input else None,
                    "fifo_tokens": sum(f.depth for s in fpga for f in s.top.fifos if s.top.kind == "dataflow")}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=8, help="fixed-point bits of the plans (default 8)")
    parser.add_argument("--batch", type=int, default=100, help="samples an FPGA call, the stream's (default 100)")
    parser.add_argument("--json", action="store_true", help="one JSON list of the rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = [measure(name, Path(folder), args.width, args.batch) for name in MODELS]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"MLPerf Tiny networks on the {BOARD} at {args.width} bits (the submissions' exports at theirs): one "
          f"sample (support policy, objective latency, sequential top), and a stream of batches of {args.batch} "
          f"(latency policy, objective throughput) under each top: hetdeploy's estimates at the board file's clock "
          f"(cycles a sample alone and between samples: the FPGA's alone; end to end: with the call overhead, the "
          f"DMA and the ARM's share); nothing measured or synthesised")
    print(f"{'model':<22} {'plan':<18} {'FPGA nodes':>10} {'units':>5} {'DSP':>5} {'BRAM18':>6} {'LUT':>7} "
          f"{'FF':>7} {'latency':>9} {'cycles':>8} {'interval':>8} {'samples/s':>10} {'end to end':>10} "
          f"{'codes in':>10} {'FIFO tok':>8}  published (PYNQ-Z2)")
    for row in rows:
        published = "; ".join(f"{p['design']} {_time(p['latency_s'])}" for p in row["published"]) or "none published"
        for label in PLANS:
            r = row[label]
            if "no_plan" in r:
                print(f"{row['model']:<22} {label:<18} no plan: {r['no_plan']}")
                continue
            used = r["resources"]
            tokens = r["fifo_tokens"] if label.endswith("dataflow") else "-"
            codes_in = "-" if r["codes_in_samples_per_s"] is None else f"{r['codes_in_samples_per_s']:,.0f}"
            print(f"{row['model']:<22} {label:<18} {r['fpga_nodes']:>4} of {r['nodes']:>3} {r['units']:>5} "
                  f"{used['dsp']:>5} {used['bram18']:>6} {used['lut']:>7} {used['ff']:>7} "
                  f"{_time(r['latency_s']):>9} {r['latency_cycles']:>8} {r['interval_cycles']:>8} "
                  f"{r['samples_per_s']:>10,.0f} {r['end_to_end_samples_per_s']:>10,.0f} {codes_in:>10} {tokens!s:>8}  "
                  f"{published}")
    print("sources: mlcommons/tiny_results_v0.7 and tiny_results_v1.0, closed division, PYNQ-Z2")


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


if __name__ == "__main__":
    main()
