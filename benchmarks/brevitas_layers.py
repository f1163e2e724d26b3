"""Every layer FINN takes from Brevitas, exported by Brevitas' ``export_qonnx`` and built for the FPGA.

Layer kinds at FINN's test settings (QuantIdentity, QuantReLU, QuantHardTanh at 1, 2, 4 and 8 bits, signed,
unsigned and narrow, per tensor and per channel in the NCHW, NHWC, NCW and NWC layouts; QuantLinear,
QuantConv2d and QuantConvTranspose2d with 1- to 8-bit weights; TruncAvgPool2d) and the BNN-PYNQ
topologies (TFC, SFC, LFC, CNV at W1A1, W1A2, W2A2), untrained, from seed 0. Per case: planned, built
with ``--policy support`` (sized on the first half of the samples), the nodes on the FPGA, and the
pipeline's error on the other half against Brevitas' own outputs, in steps of the output's quantizer;
for the fully connected networks also on FINN's test image (qonnx's MNIST input) and 63 uniform images.

    pip install -e ".[bench]"     # PyTorch and Brevitas
    python benchmarks/brevitas_layers.py [--only relu] [--plan-only] [--json]
    python benchmarks/brevitas_layers.py --export tests/data/brevitas --only SMALL   # ONNX + outputs for tests
    python benchmarks/brevitas_layers.py --export tests/data/brevitas --only '^(linear_w4|conv_w2)$' --qcdq
    python benchmarks/brevitas_layers.py --finn-example FINN/src/finn/qnn-data/build_dataflow

``--finn-example``: FINN's build_dataflow example (a FINN checkout's folder: model.onnx, the TFC W1A1 with
MultiThreshold nodes and a TopK, its four MNIST digits input.npy and their classes expected_output.npy),
built with ``--policy support`` sized on 8 random 0..255 images, then its four digits classified.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

SAMPLES = 16  # inputs per case: the first half sizes the build, the second half checks it
LAYOUTS = {"nchw": ((1, 4, 5, 5), 1), "nhwc": ((1, 5, 5, 4), 3), "ncw": ((1, 4, 6), 1), "nwc": ((1, 6, 4), 2)}


def _act_quant(signed: bool, narrow: bool, bits: int):
    from brevitas.quant import Int8ActPerTensorFloat, SignedBinaryActPerTensorConst, Uint8ActPerTensorFloat

    if bits == 1:
        return SignedBinaryActPerTensorConst
    base = Int8ActPerTensorFloat if signed else Uint8ActPerTensorFloat
    return base.let(bit_width=bits, narrow_range=narrow)


def _weight_quant(bits: int):
    from brevitas.quant import Int8WeightPerTensorFloat, SignedBinaryWeightPerTensorConst

    return SignedBinaryWeightPerTensorConst if bits == 1 else Int8WeightPerTensorFloat.let(bit_width=bits)


def _per_channel(layout: str) -> dict:
    shape, axis = LAYOUTS[layout]
    broadcast = [1] * len(shape)
    broadcast[axis] = shape[axis]
    permute = [axis] + [d for d in range(len(shape)) if d != axis]
    return dict(scaling_per_output_channel=True, per_channel_broadcastable_shape=tuple(broadcast),
                scaling_stats_permute_dims=tuple(permute))


def _sequential(*layers):
    import torch.nn as nn

    return nn.Sequential(*layers)


def _input_quant(bits: int = 8):
    from brevitas import nn as qnn

    return qnn.QuantIdentity(act_quant=_act_quant(True, False, bits), return_quant_tensor=True)


def _output_quant():
    return _input_quant(8)


def _bnn_pynq(name: str):
    from brevitas_examples.bnn_pynq.models import model_with_cfg

    model, cfg = model_with_cfg(name, pretrained=False)
    channels = cfg.getint("MODEL", "IN_CHANNELS")
    return model, ((1, channels, 32, 32) if name.startswith("cnv") else (1, 1, 28, 28))


def _kws_mlp():
    """FINN's MLPerf Tiny v0.7 keyword spotting submission (KWS-W3A3, its training code's QMLP at
    const_QMLP.yaml's settings): 49 x 10 MFCCs quantized to 8 bits, three bias-free 256-wide layers of 3-bit
    weights (scaled per output channel), each with its BatchNorm1d and a 3-bit QuantReLU, and a 3-bit 12-class
    classifier."""
    import torch.nn as nn
    from brevitas import nn as qnn

    layers, features = [_input_quant(8)], 490
    for _ in range(3):
        layers += [qnn.QuantLinear(features, 256, bias=False, weight_quant=_weight_quant(3).let(
            scaling_per_output_channel=True)), nn.BatchNorm1d(256), qnn.QuantReLU(bit_width=3)]
        features = 256
    return _sequential(*layers, qnn.QuantLinear(features, 12, bias=False, weight_quant=_weight_quant(3)))


def _ad08():
    """hls4ml's MLPerf Tiny v0.7 anomaly detection submission (AD08: its training code's ad08.yml): 64 inputs
    (8-bit, as its hls4ml configuration's input precision), 72-72-8-72-72 hidden layers of 12-bit weights and
    biases, each with its batch normalization and a 6-bit ReLU, and a 12-bit 64-wide output layer."""
    import torch.nn as nn
    from brevitas import nn as qnn

    layers, features = [_input_quant(8)], 64
    for width in (72, 72, 8, 72, 72):
        layers += [qnn.QuantLinear(features, width, bias=True, weight_quant=_weight_quant(12)),
                   nn.BatchNorm1d(width), qnn.QuantReLU(bit_width=6)]
        features = width
    return _sequential(*layers, qnn.QuantLinear(features, 64, bias=True, weight_quant=_weight_quant(12)))


def _binarised_cnn():
    """Binary convolutions as FINN's CNV stacks them (no padding, no bias, 1-bit weights), smaller: a binary input,
    a 3 x 3, a 1 x 1 (hls4ml's pointwise layer) and a 3 x 3 convolution of 8 channels, each with its BatchNorm2d
    (statistics drawn at random, so that each sign's threshold is one of its own) and a binary activation, then a
    binary 10-way classifier."""
    import torch.nn as nn
    from brevitas import nn as qnn

    def normalized(channels: int) -> nn.BatchNorm2d:
        batchnorm = nn.BatchNorm2d(channels)
        batchnorm.weight.data.uniform_(0.5, 1.5)
        batchnorm.bias.data.normal_(0.0, 0.5)
        batchnorm.running_mean.normal_(0.0, 2.0)
        batchnorm.running_var.uniform_(0.5, 4.0)
        return batchnorm

    layers, channels = [_input_quant(1)], 4
    for kernel in (3, 1, 3):
        layers += [qnn.QuantConv2d(channels, 8, kernel, bias=False, weight_quant=_weight_quant(1)), normalized(8),
                   _input_quant(1)]
        channels = 8
    return _sequential(*layers, nn.Flatten(), qnn.QuantLinear(8 * 4 * 4, 10, bias=False, weight_quant=_weight_quant(1)))


def cases() -> dict:
    """Case name -> a function returning (the torch module, its input shape, the input's range)."""
    from brevitas import nn as qnn

    made = {}
    for bits in (1, 2, 4, 8):
        for kind, signed, narrow in (("s", True, False), ("u", False, False), ("n", True, True),
                                     ("un", False, True)):
            if bits == 1 and kind != "s":
                continue  # a 1-bit quantizer is binary (bipolar, +-1) only
            made[f"identity_{kind}{bits}"] = lambda s=signed, n=narrow, b=bits: (_sequential(
                qnn.QuantIdentity(act_quant=_act_quant(s, n, b))), (1, 16), "normal")
        if bits > 1:
            made[f"relu_{bits}"] = lambda b=bits: (_sequential(_input_quant(), qnn.QuantReLU(bit_width=b)),
                                                   (1, 16), "normal")
            made[f"hardtanh_{bits}"] = lambda b=bits: (_sequential(_input_quant(), qnn.QuantHardTanh(
                bit_width=b, min_val=-1.0, max_val=1.0)), (1, 16), "normal")
            made[f"hardtanh_const_{bits}"] = lambda b=bits: (_sequential(_input_quant(), qnn.QuantHardTanh(
                bit_width=b, min_val=-2.0, max_val=2.0, scaling_impl_type="const")), (1, 16), "normal")
        made[f"linear_w{bits}"] = lambda b=bits: (_sequential(
            _input_quant(), qnn.QuantLinear(16, 8, bias=b > 1, weight_quant=_weight_quant(b)), _output_quant()),
            (1, 16), "normal")
        made[f"conv_w{bits}"] = lambda b=bits: (_sequential(
            _input_quant(), qnn.QuantConv2d(3, 4, 3, bias=b > 1, weight_quant=_weight_quant(b)),
            _output_quant()), (1, 3, 6, 6), "normal")
        made[f"convtranspose_w{bits}"] = lambda b=bits: (_sequential(
            _input_quant(), qnn.QuantConvTranspose2d(3, 4, 3, stride=2, bias=b > 1, weight_quant=_weight_quant(b)),
            _output_quant()), (1, 3, 4, 4), "normal")
    for layout, (shape, _) in LAYOUTS.items():
        made[f"relu_pc_{layout}"] = lambda lay=layout, s=shape: (_sequential(
            _input_quant(), qnn.QuantReLU(bit_width=4, **_per_channel(lay))), s, "normal")
        made[f"identity_pc_{layout}"] = lambda lay=layout, s=shape: (_sequential(
            qnn.QuantIdentity(bit_width=4, **_per_channel(lay))), s, "normal")
    for bits in (2, 4, 8):
        made[f"truncavgpool_{bits}"] = lambda b=bits: (_sequential(
            qnn.QuantReLU(bit_width=b, return_quant_tensor=True),
            qnn.TruncAvgPool2d(kernel_size=2, stride=2, float_to_int_impl_type="floor")), (1, 4, 6, 6), "normal")
    made["mlperf_tiny_kws_w3a3"] = lambda: (_kws_mlp(), (1, 490), "normal")
    made["binarised_cnn"] = lambda: (_binarised_cnn(), (1, 4, 8, 8), "normal")
    made["mlperf_tiny_ad08"] = lambda: (_ad08(), (1, 64), "normal")
    for net in ("tfc", "sfc", "lfc", "cnv"):
        for precision in ("1w1a", "1w2a", "2w2a"):
            if (net, precision) != ("lfc", "2w2a"):  # BNN-PYNQ has no LFC W2A2
                made[f"{net}_{precision}"] = lambda n=f"{net}_{precision}": (*_bnn_pynq(n), "unit")
    return made


def export(name: str, make, folder: Path, qcdq: bool = False) -> Path:
    """NAME.onnx (Brevitas' export_qonnx; ``qcdq``: export_onnx_qcdq through torch's dynamo exporter,
    NAME_qcdq.onnx) and NAME.npz (x: the inputs, y: Brevitas' outputs on them)."""
    import torch
    from brevitas.export import export_onnx_qcdq, export_qonnx

    torch.manual_seed(0)
    module, shape, kind = make()
    module.eval()
    generator = np.random.default_rng(0)
    x = (generator.uniform(0, 1, (SAMPLES, *shape[1:])) if kind == "unit"
         else generator.normal(0, 1, (SAMPLES, *shape[1:]))).astype(np.float32)
    with torch.no_grad():
        module(torch.from_numpy(x))  # sets the statistics-initialised scales, as a first batch would
        y = np.concatenate([_value(module(torch.from_numpy(x[k:k + 1]))) for k in range(SAMPLES)])
    if qcdq:
        name = f"{name}_qcdq"
        path = folder / f"{name}.onnx"
        export_onnx_qcdq(module, torch.from_numpy(x[:1]), export_path=str(path), dynamo=True)
    else:
        path = folder / f"{name}.onnx"
        export_qonnx(module, torch.from_numpy(x[:1]), export_path=str(path))
    _one_file(path)
    np.savez(folder / f"{name}.npz", x=x, y=y)
    return path


def export_finn_inputs(name: str, make, folder: Path, count: int = 64) -> None:
    """NAME_finn.npz beside an export: x, FINN's test image (qonnx's MNIST test input, scaled to the
    [0, 1] the BNN-PYNQ FC networks take) and ``count`` - 1 uniform images (seed 5); y, Brevitas'
    outputs on them, from the module ``export`` made (the same seed, its scales set by the same batch)."""
    import onnx
    import qonnx
    import torch

    tensor = onnx.TensorProto()
    tensor.ParseFromString((Path(qonnx.__file__).parent / "data/onnx/mnist-conv/test_data_set_0/input_0.pb")
                           .read_bytes())
    image = onnx.numpy_helper.to_array(tensor).astype(np.float32).reshape(1, 1, 28, 28) / 255.0
    x = np.concatenate([image, np.random.default_rng(5).uniform(0, 1, (count - 1, 1, 28, 28))]).astype(np.float32)
    torch.manual_seed(0)
    module, _, _ = make()
    module.eval()
    with torch.no_grad():
        module(torch.from_numpy(np.load(folder / f"{name}.npz")["x"]))  # the scales export() set
        y = _value(module(torch.from_numpy(x)))
    np.savez(folder / f"{name}_finn.npz", x=x, y=y)


def _one_file(path: Path) -> None:
    """The export as one file: torch's exporter writes the weights beside it (NAME.onnx.data)."""
    import onnx

    onnx.save(onnx.load(str(path)), str(path))
    path.with_name(path.name + ".data").unlink(missing_ok=True)


def _value(result) -> np.ndarray:
    return np.asarray(getattr(result, "value", result).detach().numpy(), dtype=np.float32)


def output_step(path: Path) -> float | None:
    """The step of the quantizer that writes the model's output (a BipolarQuant's: the distance of its
    two values, twice its scale); None where no quantizer does."""
    import onnx

    from hetdeploy.running.verify import quantizer_steps

    model = onnx.load(str(path), load_external_data=False)
    output = model.graph.output[0].name
    writer = next((n for n in model.graph.node if output in n.output), None)
    if writer is not None and writer.op_type == "BipolarQuant":
        scale = next(t for t in model.graph.initializer if t.name == writer.input[1])
        return 2.0 * float(np.max(np.abs(onnx.numpy_helper.to_array(scale))))
    return quantizer_steps(path).get(output)


def run_case(name: str, path: Path, folder: Path, plan_only: bool, board: str) -> dict:
    from hetdeploy.commands import api
    from hetdeploy.core.errors import UserError
    from hetdeploy.steps.build import BuildOptions, build, plan_stages

    data = np.load(folder / f"{name}.npz")
    half = SAMPLES // 2
    np.save(folder / f"{name}_calibration.npy", data["x"][:half])
    np.save(folder / f"{name}_check.npy", data["x"][half:])  # what the build verifies on: the half compared below
    row: dict = {"case": name}
    options = BuildOptions(model=path, board=board, out_dir=folder / f"{name}_build", policy="support",
                           calibration=folder / f"{name}_calibration.npy", verify_input=folder / f"{name}_check.npy")
    try:
        loaded, _, plan = plan_stages(options, lambda number, message: None)
        if not plan_only:
            plan = build(options, progress=lambda message: None)
    except UserError as err:
        return {**row, "error": str(err)}
    except Exception as err:  # a bug of ours: shown in the table, the traceback on stderr
        import traceback

        traceback.print_exc()
        return {**row, "error": f"BUG {type(err).__name__}: {err}"}
    row["nodes"] = sum(len(s.nodes) for s in plan.subfunctions)
    row["fpga_nodes"] = sum(len(s.nodes) for s in plan.subfunctions if s.kind == "fpga")
    index = loaded.graph.node_index()
    row["off_fpga"] = sorted({loaded.graph.nodes[index[n]].op for s in plan.subfunctions if s.kind != "fpga"
                              for n in s.nodes})
    row["resources"] = next(iter(plan.fpga_resources.values())).used if plan.fpga_resources else {}
    if plan_only:
        return row
    emulated = api.load(options.out_dir).predict(data["x"][half:])[0]
    expected = data["y"][half:]
    error = float(np.max(np.abs(emulated.reshape(expected.shape) - expected)))
    step = output_step(path)
    row["max_abs_error"] = error
    row["steps"] = error / step if step else None
    row["peak"] = float(np.max(np.abs(expected)))
    finn = folder / f"{name}_finn.npz"
    if finn.is_file():  # FINN's test image and 63 more (export_finn_inputs), against Brevitas
        inputs = np.load(finn)
        got = api.load(options.out_dir).predict(inputs["x"])[0].reshape(inputs["y"].shape)
        row["finn_max_abs_error"] = float(np.max(np.abs(got - inputs["y"])))
        row["finn_peak"] = float(np.max(np.abs(inputs["y"])))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="pynq-z2")
    parser.add_argument("--only", help="a regular expression the case names must match")
    parser.add_argument("--plan-only", action="store_true", help="plan each case, do not build it")
    parser.add_argument("--export", type=Path, help="only export the cases (ONNX, inputs, Brevitas' outputs) here")
    parser.add_argument("--finn-example", type=Path, help="FINN's build_dataflow example folder: build it and "
                        "classify its digits")
    parser.add_argument("--qcdq", action="store_true", help="with --export: Brevitas' QCDQ form (QuantizeLinear, "
                        "Clip, DequantizeLinear) through torch's dynamo exporter, as NAME_qcdq.onnx")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.finn_example:
        return finn_example(args.finn_example, args.board, args.json)
    import torch

    torch.set_num_threads(1)
    chosen = {n: m for n, m in cases().items() if not args.only or re.search(args.only, n)}
    if args.export:
        args.export.mkdir(parents=True, exist_ok=True)
        for name, make in chosen.items():
            export(name, make, args.export, args.qcdq)
            if name.startswith(("tfc", "sfc", "lfc")) and not args.qcdq:
                export_finn_inputs(name, make, args.export)
            print(f"exported {name}")
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in chosen.items():
            path = export(name, make, Path(tmp))
            if name.startswith(("tfc", "sfc", "lfc")):
                export_finn_inputs(name, make, Path(tmp))
            rows.append(run_case(name, path, Path(tmp), args.plan_only, args.board))
            if not args.json:
                print_row(rows[-1])
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


def finn_example(folder: Path, board: str, as_json: bool) -> int:
    from hetdeploy.commands import api
    from hetdeploy.intake.qonnx_adapter import QonnxModel
    from hetdeploy.steps.build import BuildOptions, build

    digits, expected = np.load(folder / "input.npy"), np.load(folder / "expected_output.npy").reshape(-1)
    with tempfile.TemporaryDirectory() as tmp:
        calibration = Path(tmp) / "calibration.npy"
        np.save(calibration, np.random.default_rng(1).integers(0, 256, (8, *digits.shape[1:])).astype(np.float32))
        plan = build(BuildOptions(model=folder / "model.onnx", board=board, out_dir=Path(tmp) / "out", policy="support",
                                  calibration=calibration), progress=lambda message: None)
        classes = api.load(Path(tmp) / "out").predict(digits)[0].reshape(-1)
    reference = QonnxModel(folder / "model.onnx")
    name = reference.input_names[0]
    by_qonnx = np.concatenate([reference.run({name: x[None]})[reference.output_names[0]] for x in digits]).reshape(-1)
    units = [u for s in plan.subfunctions if s.kind == "fpga" for u in s.execution_units]
    row = {"devices": [s.kind for s in plan.subfunctions], "fpga_nodes": sum(len(s.nodes) for s in plan.subfunctions
                                                                            if s.kind == "fpga"),
           "bit_exact_units": sum(u.verification.max_abs_error == 0.0 for u in units), "units": len(units),
           "classes": classes.tolist(), "qonnx": by_qonnx.tolist(), "finn_expected": expected.tolist(),
           "resources": next(iter(plan.fpga_resources.values())).used}
    if as_json:
        print(json.dumps(row, indent=2))
    else:
        print(f"FINN build_dataflow TFC W1A1: {'+'.join(row['devices'])}, {row['fpga_nodes']} nodes on the FPGA, "
              f"{row['bit_exact_units']} of {row['units']} units bit-exact; classes {row['classes']}, qonnx "
              f"{row['qonnx']}, FINN's expected {row['finn_expected']}; estimated LUT {row['resources']['lut']:,}, "
              f"DSP {row['resources']['dsp']}, BRAM18 {row['resources']['bram18']}")
    return 0 if row["classes"] == row["qonnx"] == row["finn_expected"] else 1


def print_row(r: dict) -> None:
    if "error" in r:
        print(f"{r['case']:<22} NOT BUILT: {r['error']}", flush=True)
        return
    steps = "" if "max_abs_error" not in r else (
        f"  error {r['steps']:.3g} steps" if r["steps"] is not None else
        f"  error {r['max_abs_error']:.3g} (peak {r['peak']:.3g}, no output quantizer)")
    if "finn_max_abs_error" in r:
        steps += f"; on FINN's image and 63 more {r['finn_max_abs_error']:.3g} of a peak of {r['finn_peak']:.3g}"
    off = f"  off the FPGA: {', '.join(r['off_fpga'])}" if r["off_fpga"] else ""
    used = r["resources"]
    print(f"{r['case']:<22} FPGA {r['fpga_nodes']:>3} of {r['nodes']:<3} LUT {used.get('lut', 0):>8,} "
          f"BRAM18 {used.get('bram18', 0):>4} DSP {used.get('dsp', 0):>4}{steps}{off}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
