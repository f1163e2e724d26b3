"""torchvision's ResNet-18 and MobileNetV2 (``--models``: any of MODELS, DenseNet-121 too) at 3 x 64 x 64, as
``torch.onnx.export`` writes them (the TorchScript exporter and the dynamo one), planned for a board at ``--width``
bits and, with ``--build``, built and emulated against PyTorch's own outputs on samples the build did not size on.

Untrained (seed 0), their BatchNormalizations given statistics that are not the identity. Per model and exporter:
the nodes on the FPGA, the share of convolution and matrix multiply-accumulates there, the estimated latency, and
with ``--build`` the build's time and the emulated pipeline's largest error against PyTorch, relative to the
output's largest magnitude. Estimates only: nothing is synthesised.

    pip install -e ".[bench]"        # PyTorch and torchvision
    python benchmarks/torchvision_models.py [--board kv260] [--build] [--samples 4] [--json]
    python benchmarks/torchvision_models.py --models densenet121 --width 8     # its BatchNormalizations alone
    python benchmarks/torchvision_models.py --export tests/data/torch    # the small export the tests build
    python benchmarks/torchvision_models.py --quantize     # each export also as onnxruntime's quantize_static

``--quantize`` adds, per export, onnxruntime's ``quantize_static`` of it (after ``quant_pre_process``: QDQ, uint8
activations, int8 weights per channel, calibrated on 8 random samples), planned (and with ``--build`` built and
emulated, against onnxruntime's outputs of the quantized model) like the float one.

``--export`` writes ``mbv2_blocks.onnx`` (MobileNetV2's stem and two of its inverted residual blocks, torchvision's
own layers, at 3 x 32 x 32: ReLU6 ends its convolutions, a depthwise one among them, and a residual Add) and
``densenet_block.onnx`` (a convolution, then torchvision's DenseNet block of three layers and its transition at 3 x
16 x 16: each layer's BatchNormalization and ReLU before its convolutions, the block's features concatenated anew
before each layer), ``squeezenet_fires.onnx`` (torchvision's SqueezeNet 1.1's first five layers at 3 x 32 x 32: its
stem, its pooling and two Fire modules, each concatenating its two expand convolutions) and ``vgg_head.onnx``
(torchvision's VGG of two convolutions at 3 x 28 x 28, its first Linear of 4,704 inputs: ``VggHead``), each with its
``.npz`` (8 inputs ``x`` and PyTorch's outputs ``y``), with the TorchScript exporter at opset 17.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODELS = ("resnet18", "mobilenet_v2", "densenet121")
SHAPE = (1, 3, 64, 64)


def _with_statistics(model):
    """``model`` in eval mode, its BatchNormalizations' statistics and affine parameters drawn (seed 0), so that
    folding them into the convolutions is not the identity."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    return model.eval()


def export(model, path: Path, shape, dynamo: bool, opset: int | None = None) -> None:
    import torch

    torch.onnx.export(model, (torch.randn(*shape),), str(path), dynamo=dynamo, input_names=["x"],
                      output_names=["y"], **({"opset_version": opset} if opset else {}))


def quantize(source: Path, target: Path) -> None:
    """``source`` as onnxruntime's ``quantize_static`` writes it (the module docstring)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(2)
            self.feeds = iter({"x": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(8))

        def get_next(self):
            return next(self.feeds, None)

    prepared = target.with_name(target.stem + "_pre.onnx")
    quant_pre_process(str(source), str(prepared))
    quantize_static(str(prepared), str(target), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)


def outputs(model, x: np.ndarray) -> np.ndarray:
    """PyTorch's outputs, a sample at a time."""
    import torch

    with torch.no_grad():
        return np.concatenate([model(torch.from_numpy(x[i:i + 1])).numpy() for i in range(len(x))])


def export_blocks(folder: Path) -> None:
    import torch
    import torchvision
    from torchvision.models.densenet import _DenseBlock, _Transition
    from torchvision.models.mobilenetv2 import InvertedResidual
    from torchvision.ops.misc import Conv2dNormActivation

    torch.manual_seed(0)
    model = _with_statistics(torch.nn.Sequential(
        Conv2dNormActivation(3, 16, stride=2, activation_layer=torch.nn.ReLU6),
        InvertedResidual(16, 24, stride=2, expand_ratio=6), InvertedResidual(24, 24, stride=1, expand_ratio=6)))
    folder.mkdir(parents=True, exist_ok=True)
    export(model, folder / "mbv2_blocks.onnx", (1, 3, 32, 32), dynamo=False, opset=17)
    x = np.random.default_rng(0).standard_normal((8, 3, 32, 32)).astype(np.float32)
    np.savez(folder / "mbv2_blocks.npz", x=x, y=outputs(model, x))
    torch.manual_seed(0)
    model = _with_statistics(torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1, bias=False),
        _DenseBlock(num_layers=3, num_input_features=16, bn_size=2, growth_rate=8, drop_rate=0),
        _Transition(16 + 3 * 8, 16)))
    export(model, folder / "densenet_block.onnx", (1, 3, 16, 16), dynamo=False, opset=17)
    x = np.random.default_rng(0).standard_normal((8, 3, 16, 16)).astype(np.float32)
    np.savez(folder / "densenet_block.npz", x=x, y=outputs(model, x))
    torch.manual_seed(0)
    model = torchvision.models.squeezenet1_1(weights=None).features[:5].eval()
    export(model, folder / "squeezenet_fires.onnx", (1, 3, 32, 32), dynamo=False, opset=17)
    x = np.random.default_rng(0).standard_normal((8, 3, 32, 32)).astype(np.float32)
    np.savez(folder / "squeezenet_fires.npz", x=x, y=outputs(model, x))
    torch.manual_seed(0)
    model = VggHead().eval()
    export(model, folder / "vgg_head.onnx", (1, 3, 28, 28), dynamo=False, opset=17)
    x = np.random.default_rng(0).standard_normal((8, 3, 28, 28)).astype(np.float32)
    np.savez(folder / "vgg_head.npz", x=x, y=outputs(model, x))


def VggHead():
    """torchvision's VGG at a small scale (``_vgg``'s layers and forward): two 3 x 3 convolutions, each with its ReLU
    and 2 x 2 max pooling, the adaptive average pooling to 7 x 7, the flattening, and a classifier whose first Linear
    reads 96 x 7 x 7 = 4,704 inputs (more than a dense layer's chunk of the engine's buffers) and whose Dropouts
    are the identity in eval mode."""
    import torch
    from torchvision.models.vgg import VGG

    features = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(inplace=True),
                                   torch.nn.MaxPool2d(2, 2), torch.nn.Conv2d(32, 96, 3, padding=1),
                                   torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(2, 2))
    model = VGG(features, num_classes=10, init_weights=True)
    model.classifier = torch.nn.Sequential(torch.nn.Linear(96 * 7 * 7, 16), torch.nn.ReLU(True), torch.nn.Dropout(),
                                           torch.nn.Linear(16, 10))
    torch.nn.init.normal_(model.classifier[0].weight, 0, 0.02)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="kv260")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS[:2]))
    parser.add_argument("--width", type=int, default=16, help="the units' bits (default 16)")
    parser.add_argument("--build", action="store_true", help="build each and emulate it against PyTorch")
    parser.add_argument("--samples", type=int, default=4, help="samples emulated (default 4)")
    parser.add_argument("--export", type=Path, help="write the tests' small export to this folder, and stop")
    parser.add_argument("--quantize", action="store_true", help="each export also as onnxruntime's quantize_static")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.export:
        export_blocks(args.export)
        return
    import torch
    import torchvision

    import hetdeploy
    from hetdeploy.commands.api import Pipeline
    from hetdeploy.intake.ort_adapter import OrtModel
    from big_cnns import measure

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            torch.manual_seed(0)  # its convolutions' weights drawn the same each run
            model = _with_statistics(getattr(torchvision.models, name)(weights=None))
            x = np.random.default_rng(1).standard_normal((args.samples, *SHAPE[1:])).astype(np.float32)
            want = outputs(model, x) if args.build else None
            for dynamo in (False, True):
                exporter = "dynamo" if dynamo else "torchscript"
                path = Path(folder) / f"{name}_{exporter}.onnx"
                export(model, path, SHAPE, dynamo)
                variants = [(exporter, path, want)]
                if args.quantize:
                    quantized = path.with_name(f"{path.stem}_qdq.onnx")
                    quantize(path, quantized)
                    reference = OrtModel(quantized)
                    variants.append((f"{exporter} + QDQ", quantized, np.concatenate(
                        [reference.run({"x": x[i:i + 1]})["y"] for i in range(len(x))]) if args.build else None))
                for label, source, expected in variants:
                    row = {"exporter": label, **measure(source, args.board, args.width)}
                    if args.build:
                        started = time.perf_counter()
                        hetdeploy.build(source, args.board, Path(folder) / f"{source.stem}_build", width=args.width)
                        row["build_s"] = round(time.perf_counter() - started, 1)
                        started = time.perf_counter()
                        (got,) = Pipeline(Path(folder) / f"{source.stem}_build").predict(x)
                        row["emulate_s_a_sample"] = round((time.perf_counter() - started) / len(x), 1)
                        row["error_relative"] = float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))
                    rows.append(row)
                    if args.json:
                        print(json.dumps(row), flush=True)
    if not args.json:
        print("model | exporter | board | nodes | on FPGA | FPGA MAC share | latency ms | plan s | build s | "
              "emulated s a sample | error / peak")
        for r in rows:
            print(f"{r['model']} | {r['exporter']} | {r['board']} | {r['nodes']} | {r['fpga_nodes']} | "
                  f"{100 * r['mac_share']:.1f} % | {1e3 * r['latency_s']:.2f} | {r['plan_s']} | "
                  f"{r.get('build_s', '-')} | {r.get('emulate_s_a_sample', '-')} | "
                  f"{r.get('error_relative', float('nan')):.1e}")
        print(f"estimates at the board file's clock ({args.width}-bit units); nothing synthesised; errors against "
              "PyTorch's own outputs (a QDQ model's: onnxruntime's) on samples the builds did not size on")


if __name__ == "__main__":
    main()
