"""Quantized models as the exporters write them, trained on scikit-learn's bundled digits (8 x 8
images, 10 classes), for tests/data/quantized/ and benchmarks/quantized.py.

    pip install -e ".[bench]"    # the benchmark extra: PyTorch, Brevitas, scikit-learn
    python benchmarks/quantized_exports.py [--out tests/data/quantized] [--framework onnxruntime]

Writes, per model, NAME.onnx and NAME.npz (``x``: the first test images, ``y``: the framework's own
outputs on them, ``accuracy``: the framework's accuracy on the whole digits test set):
- tfc_bn_qonnx / tfc_bn_qcdq: a TFC-like MLP (FINN's TFC shape, 64 inputs): QuantIdentity (8 bits) ->
  (QuantLinear 2-bit weights -> BatchNorm1d -> QuantReLU 4 bits) x 2 -> QuantLinear, Brevitas' default
  float-scale quantizers, exported by Brevitas' ``export_qonnx`` and ``export_onnx_qcdq``;
- tfc_qonnx: the same MLP without BatchNorm;
- cnv_qonnx / cnv_qcdq: a CNV-like CNN: QuantConv2d 4-bit -> BatchNorm2d -> QuantReLU -> MaxPool, twice,
  -> QuantLinear;
- ort_static / ort_static_pre: a float MLP (torch.onnx) quantized by onnxruntime's ``quantize_static``
  (QDQ, uint8 activations, int8 weights), without and with ``quant_pre_process``;
- ort_static_cnn: a float CNN with a residual block (conv -> ReLU, then conv -> ReLU -> conv added to that ReLU's
  output, ReLU, MaxPool, Linear) quantized so after ``quant_pre_process``, its weights per channel: the tensor two
  layers read gets a DequantizeLinear for each (onnxruntime's ".../duplicated");
- ort_qop_cnn: the same CNN in onnxruntime's QOperator format (QLinearConv, QLinearAdd of its com.microsoft domain,
  MaxPool on the codes);
- ort_w4_cnn: the same CNN in the QDQ format with 4-bit weights (``weight_type`` QInt4: int4 codes, and
  QuantizeLinear/DequantizeLinear of onnxruntime's com.microsoft domain at the model's opset 17).
Deterministic: seeded training on one thread.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = 16  # test images kept with each model, with the framework's outputs on them


def digits():
    """The digits split the same way every time: (x_train, x_test, y_train, y_test), x in [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]  # N, 1, 8, 8
    return train_test_split(x, data.target, test_size=0.3, random_state=0, stratify=data.target)


def tfc(batchnorm: bool):
    import torch.nn as nn
    from brevitas import nn as qnn

    layers = [qnn.QuantIdentity(bit_width=8, return_quant_tensor=True), nn.Flatten()]
    for n_in in (64, 64):
        layers.append(qnn.QuantLinear(n_in, 64, bias=True, weight_bit_width=2))
        if batchnorm:
            layers.append(nn.BatchNorm1d(64))
        layers.append(qnn.QuantReLU(bit_width=4, return_quant_tensor=True))
    layers.append(qnn.QuantLinear(64, 10, bias=True, weight_bit_width=2))
    return nn.Sequential(*layers)


def cnv():
    import torch.nn as nn
    from brevitas import nn as qnn

    return nn.Sequential(
        qnn.QuantIdentity(bit_width=8, return_quant_tensor=True),
        qnn.QuantConv2d(1, 8, 3, padding=1, weight_bit_width=4), nn.BatchNorm2d(8),
        qnn.QuantReLU(bit_width=4, return_quant_tensor=True), nn.MaxPool2d(2),
        qnn.QuantConv2d(8, 16, 3, padding=1, weight_bit_width=4), nn.BatchNorm2d(16),
        qnn.QuantReLU(bit_width=4, return_quant_tensor=True), nn.MaxPool2d(2),
        nn.Flatten(), qnn.QuantLinear(16 * 2 * 2, 10, bias=True, weight_bit_width=4))


def float_mlp():
    import torch.nn as nn

    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def residual_cnn():
    import torch.nn as nn

    class ResidualCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
            self.branch = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
            self.head = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))

        def forward(self, x):
            x = self.stem(x)
            return self.head(x + self.branch(x))

    return ResidualCNN()


def train(make, x, y, epochs: int = 30):
    """The model ``make()`` builds, initialised and trained from seed 0."""
    import torch

    torch.manual_seed(0)
    model = make()
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y).long()
    model.train()
    for _ in range(epochs):
        for k in torch.randperm(len(xs), generator=torch.Generator().manual_seed(len(xs))).split(64):
            optimiser.zero_grad()
            torch.nn.functional.cross_entropy(model(xs[k]), ys[k]).backward()
            optimiser.step()
    model.eval()
    return model


def outputs(model, x) -> np.ndarray:
    import torch

    with torch.no_grad():
        result = model(torch.from_numpy(x))
    return np.asarray(getattr(result, "value", result), dtype=np.float32)


def save(folder: Path, name: str, x_test, y_test, predictions: np.ndarray) -> None:
    accuracy = float(np.mean(np.argmax(predictions, axis=1) == y_test))
    np.savez(folder / f"{name}.npz", x=x_test[:SAMPLES], y=predictions[:SAMPLES], accuracy=accuracy)
    print(f"{name:16s} accuracy {accuracy:.4f}")


def export_brevitas(folder: Path, data) -> None:
    import torch
    from brevitas.export import export_onnx_qcdq, export_qonnx

    x_train, x_test, y_train, y_test = data
    example = torch.from_numpy(x_test[:1])
    for name, make in (("tfc_bn", lambda: tfc(True)), ("tfc", lambda: tfc(False)), ("cnv", cnv)):
        model = train(make, x_train, y_train)
        predictions = outputs(model, x_test)
        exports = (("qonnx", export_qonnx), ("qcdq", export_onnx_qcdq)) if name != "tfc" else (
            ("qonnx", export_qonnx),)
        for kind, export in exports:
            export(model, example, export_path=str(folder / f"{name}_{kind}.onnx"))
            save(folder, f"{name}_{kind}", x_test, y_test, predictions)


def export_onnxruntime(folder: Path, data) -> None:
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from hetdeploy.intake.ort_adapter import OrtModel  # the reference hetdeploy verifies against

    x_train, x_test, y_train, y_test = data

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter({"x": x_train[k:k + 1]} for k in range(128))

        def get_next(self):
            return next(self.feeds, None)

    # per model: (name, whether after quant_pre_process, format, weights' type) per export
    qdq, qop, int8, int4 = QuantFormat.QDQ, QuantFormat.QOperator, QuantType.QInt8, QuantType.QInt4
    for make, exports, per_channel in (
            (float_mlp, (("ort_static", False, qdq, int8), ("ort_static_pre", True, qdq, int8)), False),
            (residual_cnn, (("ort_static_cnn", True, qdq, int8), ("ort_qop_cnn", True, qop, int8),
                            ("ort_w4_cnn", True, qdq, int4)), True)):
        model = train(make, x_train, y_train)
        float_path, pre_path = folder / "float.onnx", folder / "float_pre.onnx"
        torch.onnx.export(model, (torch.from_numpy(x_test[:1]),), str(float_path), input_names=["x"],
                          output_names=["y"], dynamo=False)
        quant_pre_process(str(float_path), str(pre_path))
        for name, prepared, quant_format, weight_type in exports:
            path = folder / f"{name}.onnx"
            quantize_static(str(pre_path if prepared else float_path), str(path), Reader(), quant_format=quant_format,
                            activation_type=QuantType.QUInt8, weight_type=weight_type, per_channel=per_channel)
            reference = OrtModel(path)
            predictions = np.concatenate([reference.run({"x": x_test[k:k + 1]})["y"] for k in range(len(x_test))])
            save(folder, name, x_test, y_test, predictions)
        float_path.unlink()
        pre_path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "quantized")
    parser.add_argument("--framework", action="append", choices=("brevitas", "onnxruntime"),
                        help="only this framework's exports (repeatable; default: both)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    args.out.mkdir(parents=True, exist_ok=True)
    data = digits()
    frameworks = args.framework or ("brevitas", "onnxruntime")
    if "brevitas" in frameworks:
        export_brevitas(args.out, data)
    if "onnxruntime" in frameworks:
        export_onnxruntime(args.out, data)


if __name__ == "__main__":
    main()
