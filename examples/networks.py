"""The reference networks of hetdeploy's end-to-end tests, built with onnx.helper.

Run as a script to (re)write the shipped examples/*.onnx:

    python examples/networks.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array.astype(np.float32), name)


def _model(nodes, name, inputs, outputs, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hetdeploy-examples")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def jet_tagger_mlp(seed: int = 0) -> onnx.ModelProto:
    """hls4ml's jet-tagging MLP 16-64-32-32-5, ReLU, final Softmax, as PyTorch exports it
    (Gemm with transB=1, symbolic batch, '/fc1/Gemm'-style names)."""
    rng = np.random.default_rng(seed)
    dims = [16, 64, 32, 32, 5]
    nodes, inits, x = [], [], "input"
    for i, (fan_in, fan_out) in enumerate(zip(dims, dims[1:])):
        w, b = f"fc{i + 1}.weight", f"fc{i + 1}.bias"
        inits += [_init(w, rng.normal(0, np.sqrt(2 / fan_in), (fan_out, fan_in))), _init(b, rng.normal(0, 0.1, fan_out))]
        nodes.append(helper.make_node("Gemm", [x, w, b], [f"/fc{i + 1}/Gemm_output_0"], name=f"/fc{i + 1}/Gemm",
                                      alpha=1.0, beta=1.0, transB=1))
        x = f"/fc{i + 1}/Gemm_output_0"
        if i < len(dims) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"/act{i + 1}/Relu_output_0"], name=f"/act{i + 1}/Relu"))
            x = f"/act{i + 1}/Relu_output_0"
    nodes.append(helper.make_node("Softmax", [x], ["output"], name="/softmax/Softmax", axis=1))
    return _model(nodes, "jet_tagger", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 16])],
                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 5])], inits)


def small_cnn(seed: int = 0) -> onnx.ModelProto:
    """1x1x28x28: Conv 5x5 (8) - ReLU - MaxPool - Conv 5x5 (16) - ReLU - MaxPool - Flatten - Gemm (10)."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("conv1.weight", rng.normal(0, 0.2, (8, 1, 5, 5))), _init("conv1.bias", rng.normal(0, 0.1, 8)),
        _init("conv2.weight", rng.normal(0, 0.07, (16, 8, 5, 5))), _init("conv2.bias", rng.normal(0, 0.1, 16)),
        _init("fc.weight", rng.normal(0, 0.09, (10, 256))), _init("fc.bias", rng.normal(0, 0.1, 10)),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", kernel_shape=[5, 5]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", kernel_shape=[5, 5]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["output"], name="fc", transB=1),
    ]
    return _model(nodes, "small_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 28, 28])],
                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])], inits)


def split_by_lrn(seed: int = 0) -> onnx.ModelProto:
    """Conv-ReLU | LRN (no FPGA support) | Conv-ReLU-MaxPool-Flatten-Gemm:
    the plan must be FPGA, CPU, FPGA."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("conv1.weight", rng.normal(0, 0.3, (8, 3, 3, 3))), _init("conv1.bias", rng.normal(0, 0.1, 8)),
        _init("conv2.weight", rng.normal(0, 0.15, (8, 8, 3, 3))), _init("conv2.bias", rng.normal(0, 0.1, 8)),
        _init("fc.weight", rng.normal(0, 0.1, (10, 8 * 6 * 6))), _init("fc.bias", rng.normal(0, 0.1, 10)),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("LRN", ["r1"], ["n1"], name="lrn", size=3, alpha=1e-2, beta=0.75, bias=1.0),
        helper.make_node("Conv", ["n1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["output"], name="fc", transB=1),
    ]
    return _model(nodes, "split_by_lrn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 14, 14])],
                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])], inits)


def alexnet_style(seed: int = 0) -> onnx.ModelProto:
    """AlexNet's pattern at 3x32x32: Conv-ReLU-MaxPool | LRN | Conv-ReLU-MaxPool-Flatten-Gemm. Large enough
    that the latency policy puts both convolution stages on a PYNQ-Z2's FPGA and the LRN on its ARM cores."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("conv1.weight", rng.normal(0, 0.2, (32, 3, 3, 3))), _init("conv1.bias", rng.normal(0, 0.1, 32)),
        _init("conv2.weight", rng.normal(0, 0.06, (32, 32, 3, 3))), _init("conv2.bias", rng.normal(0, 0.1, 32)),
        _init("fc.weight", rng.normal(0, 0.03, (10, 32 * 8 * 8))), _init("fc.bias", rng.normal(0, 0.1, 10)),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("LRN", ["p1"], ["n1"], name="lrn", size=5, alpha=1e-4, beta=0.75, bias=2.0),
        helper.make_node("Conv", ["n1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["output"], name="fc", transB=1),
    ]
    return _model(nodes, "alexnet_style", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])], inits)


def four_conv64(seed: int = 0) -> onnx.ModelProto:
    """Four 3x3 convolutions of 64 channels (with ReLU) on 3x32x32: hls4ml keeps each layer's whole 32x32x64
    output in its stream FIFO, more than a PYNQ-Z2's FPGA holds for four of them, so each runs in bands."""
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], "input"
    for k, fan_in in enumerate([3, 64, 64, 64]):
        w, b = f"conv{k + 1}.weight", f"conv{k + 1}.bias"
        inits += [_init(w, rng.normal(0, np.sqrt(2 / (9 * fan_in)), (64, fan_in, 3, 3))),
                  _init(b, rng.normal(0, 0.1, 64))]
        nodes += [helper.make_node("Conv", [x, w, b], [f"c{k + 1}"], name=f"conv{k + 1}", kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{k + 1}"], [f"r{k + 1}"], name=f"relu{k + 1}")]
        x = f"r{k + 1}"
    nodes[-1].output[0] = "output"
    return _model(nodes, "four_conv64", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 64, 32, 32])], inits)


def wide_mlp(seed: int = 0) -> onnx.ModelProto:
    """MLP 640-512-10, ReLU, final Softmax: the first layer's 327,680 weights (640 KiB at 16 bits) are more
    than a PYNQ-Z2's BRAM holds, so they stay in DDR."""
    rng = np.random.default_rng(seed)
    dims = [640, 512, 10]
    inits = [_init("fc1.weight", rng.normal(0, np.sqrt(2 / dims[0]), (dims[1], dims[0]))),
             _init("fc1.bias", rng.normal(0, 0.1, dims[1])),
             _init("fc2.weight", rng.normal(0, np.sqrt(1 / dims[1]), (dims[2], dims[1]))),
             _init("fc2.bias", rng.normal(0, 0.1, dims[2]))]
    nodes = [helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["h1"], name="fc1", transB=1),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("Gemm", ["a1", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
             helper.make_node("Softmax", ["logits"], ["output"], name="softmax", axis=1)]
    return _model(nodes, "wide_mlp", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, dims[0]])],
                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, dims[2]])], inits)


NETWORKS = {"jet_tagger_mlp": jet_tagger_mlp, "small_cnn": small_cnn, "split_by_lrn": split_by_lrn,
            "alexnet_style": alexnet_style, "four_conv64": four_conv64, "wide_mlp": wide_mlp}


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    for name, make in NETWORKS.items():
        onnx.save(make(), str(here / f"{name}.onnx"))
        print(here / f"{name}.onnx")
