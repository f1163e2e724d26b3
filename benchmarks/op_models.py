"""Single-op ONNX models for checking FPGA op coverage, written with onnx.helper.

Each op is placed standalone (it reads the model's input) or after a layer (a 3x3 Conv on a 4-D
input, a Gemm on a 2-D one), at 4-D (1, C, H, W) and, where the op has a 2-D form, at 2-D (1, F).
Used by benchmarks/ops.py (the per-op table) and the tests.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHANNELS, SIZE, FEATURES = 4, 8, 16
OPSET, IR_VERSION = 13, 8


class Builder:
    """Collects nodes and constants; ``op`` functions below add one op reading ``x``."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value) -> str:
        array = np.asarray(value)
        self.inits.append(numpy_helper.from_array(array.astype(np.int64 if array.dtype.kind == "i" else np.float32),
                                                  name))
        return name

    def random(self, name: str, shape, scale: float = 0.3) -> str:
        return self.const(name, self.rng.normal(0, scale, shape))

    def node(self, op: str, inputs: list[str], name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"


def _per_channel(rank: int) -> list[int]:
    return [CHANNELS, 1, 1] if rank == 4 else [FEATURES]


# op -> (ranks it has, function adding it: (builder, x, rank) -> output tensor)
OPS: dict[str, tuple[tuple[int, ...], Callable[[Builder, str, int], str]]] = {
    "Relu": ((4, 2), lambda b, x, r: b.node("Relu", [x], "op")),
    "Sigmoid": ((4, 2), lambda b, x, r: b.node("Sigmoid", [x], "op")),
    "Tanh": ((4, 2), lambda b, x, r: b.node("Tanh", [x], "op")),
    "LeakyRelu": ((4, 2), lambda b, x, r: b.node("LeakyRelu", [x], "op", alpha=0.1)),
    "PRelu": ((4, 2), lambda b, x, r: b.node("PRelu", [x, b.const("slope", b.rng.uniform(0.05, 0.3, _per_channel(r)))],
                                             "op")),
    "HardSigmoid": ((4, 2), lambda b, x, r: b.node("HardSigmoid", [x], "op", alpha=0.2, beta=0.5)),
    "Elu": ((4, 2), lambda b, x, r: b.node("Elu", [x], "op", alpha=0.5)),
    "Selu": ((4, 2), lambda b, x, r: b.node("Selu", [x], "op")),
    "Softsign": ((4, 2), lambda b, x, r: b.node("Softsign", [x], "op")),
    "Softplus": ((4, 2), lambda b, x, r: b.node("Softplus", [x], "op")),
    "Clip": ((4, 2), lambda b, x, r: b.node("Clip", [x, b.const("lo", 0.0), b.const("hi", 6.0)], "op")),
    "Clip_narrow": ((4, 2), lambda b, x, r: b.node("Clip", [x, b.const("lo", -0.5), b.const("hi", 0.75)], "op")),
    "BatchNormalization": ((4, 2), lambda b, x, r: b.node(
        "BatchNormalization", [x, b.random("s", [_per_channel(r)[0]]), b.random("bias", [_per_channel(r)[0]]),
                               b.random("mean", [_per_channel(r)[0]]),
                               b.const("var", b.rng.uniform(0.5, 2, [_per_channel(r)[0]]))], "op")),
    "Mul": ((4, 2), lambda b, x, r: b.node("Mul", [x, b.random("scale", _per_channel(r), 1.0)], "op")),
    "Add": ((4, 2), lambda b, x, r: b.node("Add", [x, b.random("shift", _per_channel(r), 1.0)], "op")),
    "Add2": ((4, 2), lambda b, x, r: b.node("Add", [x, b.node("Relu", [x], "other")], "op")),
    "Sub2": ((4, 2), lambda b, x, r: b.node("Sub", [x, b.node("Relu", [x], "other")], "op")),
    "Mul2": ((4, 2), lambda b, x, r: b.node("Mul", [x, b.node("Sigmoid", [x], "other")], "op")),
    "Max2": ((4, 2), lambda b, x, r: b.node("Max", [x, b.node("Sigmoid", [x], "other")], "op")),
    "Min2": ((4, 2), lambda b, x, r: b.node("Min", [x, b.node("Sigmoid", [x], "other")], "op")),
    "Concat": ((4, 2), lambda b, x, r: b.node("Concat", [x, b.node("Sigmoid", [x], "other")], "op", axis=1)),
    "Gemm_nobias": ((2,), lambda b, x, r: b.node("Gemm", [x, b.random("fc", [FEATURES, FEATURES])], "op", transB=1)),
    "Softmax": ((2,), lambda b, x, r: b.node("Softmax", [x], "op", axis=-1)),
    "Flatten": ((4,), lambda b, x, r: b.node("Flatten", [x], "op", axis=1)),
    "MaxPool": ((4,), lambda b, x, r: b.node("MaxPool", [x], "op", kernel_shape=[2, 2], strides=[2, 2])),
    "AveragePool": ((4,), lambda b, x, r: b.node("AveragePool", [x], "op", kernel_shape=[2, 2], strides=[2, 2])),
    "GlobalAveragePool": ((4,), lambda b, x, r: b.node("GlobalAveragePool", [x], "op")),
    "GlobalMaxPool": ((4,), lambda b, x, r: b.node("GlobalMaxPool", [x], "op")),
    "Resize": ((4,), lambda b, x, r: b.node("Resize", [x, "", b.const("scales", [1.0, 1.0, 2.0, 3.0])], "op",
                                            mode="nearest")),
    "Pad": ((4,), lambda b, x, r: b.node("Pad", [x, b.const("pads", [0, 0, 1, 2, 0, 0, 0, 1])], "op",
                                         mode="constant")),
    "Pad_value": ((4,), lambda b, x, r: b.node("Pad", [x, b.const("pads", [0, 0, 2, 1, 0, 0, 1, 0]),
                                                       b.const("value", 1.5)], "op", mode="constant")),
    "Transpose": ((4,), lambda b, x, r: b.node("Transpose", [x], "op", perm=[0, 1, 3, 2])),
    "Reshape": ((4,), lambda b, x, r: b.node("Reshape", [x, b.const("shape", [1, CHANNELS * 2, SIZE // 2, SIZE])],
                                             "op")),
    # what hls4ml 1.3 cannot do: the board files keep them on the CPU
    "ThresholdedRelu": ((4, 2), lambda b, x, r: b.node("ThresholdedRelu", [x], "op", alpha=0.3)),
    "MaxPool_stride": ((4,), lambda b, x, r: b.node("MaxPool", [x], "op", kernel_shape=[3, 3], strides=[2, 2])),
    "MaxPool_padded": ((4,), lambda b, x, r: b.node("MaxPool", [x], "op", kernel_shape=[2, 2], strides=[2, 2],
                                                    pads=[1, 1, 1, 1])),
    "Conv_dilated": ((4,), lambda b, x, r: b.node("Conv", [x, b.random("dw", [CHANNELS, CHANNELS, 3, 3])], "op",
                                                  kernel_shape=[3, 3], dilations=[2, 2])),
}
POSITIONS = ("standalone", "after_layer")


def op_model(op: str, rank: int, position: str, seed: int = 0) -> Optional[onnx.ModelProto]:
    """The model for ``op`` at ``rank`` in ``position``; None when the op has no such form."""
    ranks, add = OPS[op]
    if rank not in ranks:
        return None
    b = Builder(seed)
    shape = [1, CHANNELS, SIZE, SIZE] if rank == 4 else [1, FEATURES]
    x = "input"
    if position == "after_layer":
        if rank == 4:
            x = b.node("Conv", [x, b.random("w", [CHANNELS, CHANNELS, 3, 3]), b.random("b", [CHANNELS])], "layer",
                       kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        else:
            x = b.node("Gemm", [x, b.random("w", [FEATURES, FEATURES]), b.random("b", [FEATURES])], "layer",
                       transB=1)
    add(b, x, rank)
    b.nodes[-1].output[0] = "output"
    graph = helper.make_graph(b.nodes, f"{op}_{rank}d_{position}",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hetdeploy-ops")
    model.ir_version = IR_VERSION
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    return model
