"""Quantized ONNX models as the quantizers users run write them.

- QONNX as Brevitas exports it (``Quant`` nodes of domain qonnx.custom_op.general on weights and
  activations, power-of-two scales, weights Gemm-transposed), written with onnx.helper since
  Brevitas needs PyTorch, which the test machines do not have: an MLP and a CNN.
- QDQ from onnxruntime's own static quantizer (``onnxruntime.quantization.quantize_static``,
  QuantizeLinear/DequantizeLinear pairs, int8 weights per tensor, uint8 activations), on a float MLP.

Used by the tests and benchmarks/quantized.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QONNX_DOMAIN = "qonnx.custom_op.general"


class QuantBuilder:
    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def quant(self, x: str, name: str, bits: int, scale: float, signed: bool = True, narrow: bool = False) -> str:
        """A QONNX Quant of ``bits`` bits with a power-of-two ``scale`` and zero point 0."""
        inputs = [x, self.const(f"{name}_scale", scale), self.const(f"{name}_zeropt", 0.0),
                  self.const(f"{name}_bitwidth", float(bits))]
        self.nodes.append(helper.make_node("Quant", inputs, [f"{name}_out"], name=name, domain=QONNX_DOMAIN,
                                           signed=int(signed), narrow=int(narrow), rounding_mode="ROUND"))
        return f"{name}_out"

    def node(self, op: str, inputs: list[str], name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"

    def quant_weight(self, name: str, shape, bits: int) -> str:
        """A float weight (as training leaves it) behind a narrow signed Quant, scale 2^-(bits-1)."""
        weight = self.const(name, self.rng.normal(0, 0.4, shape))
        return self.quant(weight, f"{name}_quant", bits, 2.0 ** -(bits - 1), narrow=True)

    def model(self, x_shape, out: str, out_shape) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "quantized", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                          x_shape)],
                                  [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                        helper.make_opsetid(QONNX_DOMAIN, 1)])
        model.ir_version = 8
        return model


def qonnx_mlp(bits: int = 4, features: int = 16, hidden: int = 32, classes: int = 5) -> onnx.ModelProto:
    """Brevitas's QuantIdentity -> (QuantLinear -> QuantReLU) x 2 -> QuantLinear: 8-bit input,
    ``bits``-bit weights and activations, float bias and output."""
    b = QuantBuilder()
    x = b.quant("x", "input_quant", 8, 2.0 ** -4)
    for k, (n_in, n_out) in enumerate([(features, hidden), (hidden, hidden)]):
        x = b.node("Gemm", [x, b.quant_weight(f"fc{k}_weight", [n_out, n_in], bits),
                            b.const(f"fc{k}_bias", b.rng.normal(0, 0.1, n_out))], f"fc{k}", transB=1)
        x = b.node("Relu", [x], f"relu{k}")
        x = b.quant(x, f"relu{k}_quant", bits, 2.0 ** -2, signed=False)
    out = b.node("Gemm", [x, b.quant_weight("fc_out_weight", [classes, hidden], bits),
                          b.const("fc_out_bias", b.rng.normal(0, 0.1, classes))], "fc_out", transB=1)
    return b.model([1, features], out, [1, classes])


def qonnx_cnn(bits: int = 4, channels: int = 3, size: int = 8, filters: int = 4,
              classes: int = 4) -> onnx.ModelProto:
    """QuantIdentity -> QuantConv2d -> QuantReLU -> MaxPool -> QuantConv2d -> QuantReLU -> flatten ->
    QuantLinear, as Brevitas's CNV-style networks."""
    b = QuantBuilder(1)
    x = b.quant("x", "input_quant", 8, 2.0 ** -4)
    for k, c_in in enumerate([channels, filters]):
        x = b.node("Conv", [x, b.quant_weight(f"conv{k}_weight", [filters, c_in, 3, 3], bits),
                            b.const(f"conv{k}_bias", b.rng.normal(0, 0.1, filters))], f"conv{k}",
                   kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        x = b.node("Relu", [x], f"relu{k}")
        x = b.quant(x, f"relu{k}_quant", bits, 2.0 ** -2, signed=False)
        if k == 0:
            x = b.node("MaxPool", [x], "pool0", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Flatten", [x], "flatten")
    flat = filters * (size // 2) ** 2
    out = b.node("Gemm", [x, b.quant_weight("fc_weight", [classes, flat], bits),
                          b.const("fc_bias", b.rng.normal(0, 0.1, classes))], "fc", transB=1)
    return b.model([1, channels, size, size], out, [1, classes])


def float_mlp(features: int = 16, hidden: int = 32, classes: int = 5, seed: int = 2) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for k, (n_in, n_out) in enumerate([(features, hidden), (hidden, classes)]):
        inits += [numpy_helper.from_array(rng.normal(0, 0.4, [n_in, n_out]).astype(np.float32), f"w{k}"),
                  numpy_helper.from_array(rng.normal(0, 0.1, n_out).astype(np.float32), f"b{k}")]
        nodes.append(helper.make_node("Gemm", [x, f"w{k}", f"b{k}"], [f"fc{k}_out"], name=f"fc{k}"))
        x = f"fc{k}_out"
        if k == 0:
            nodes.append(helper.make_node("Relu", [x], ["relu0_out"], name="relu0"))
            x = "relu0_out"
    graph = helper.make_graph(nodes, "float_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 [1, features])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def onnxruntime_qdq_mlp(folder: Path, samples: int = 32) -> Path:
    """``float_mlp`` quantized by onnxruntime's static quantizer (QDQ format, MinMax calibration on
    N(0, 1) inputs): the path of the quantized model written in ``folder``."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    float_path, quantized_path = folder / "float_mlp.onnx", folder / "qdq_mlp.onnx"
    model = float_mlp()
    onnx.save(model, str(float_path))
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter({"x": rng.normal(0, 1, shape).astype(np.float32)} for _ in range(samples))

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(str(float_path), str(quantized_path), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return quantized_path
