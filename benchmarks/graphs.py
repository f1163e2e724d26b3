"""Graphs of published architectures and random DAGs, as hetdeploy.core.graph.Graph (no onnx, no weights).

The partitioning and memory benchmarks and the property tests run on these.
Each architecture follows its paper's layer table at batch one, with
BatchNormalization kept as its own node (as exported models have it before
fusion):

- resnet50: He et al. 2015, bottleneck blocks [3, 4, 6, 3], residual Add.
- googlenet: Szegedy et al. 2014 (Inception v1), nine inception modules with
  four concatenated branches, LRN in the stem.
- densenet121 / densenet264: Huang et al. 2017, growth 32, blocks [6, 12, 24,
  16] / [6, 12, 64, 48], every layer concatenated onto its block's input.
- vgg16, squeezenet (1.0, fire modules), shufflenet (v1, g = 3, channel
  shuffle as Reshape-Transpose-Reshape).
"""

from __future__ import annotations

import math
import random

from hetdeploy.core.graph import Graph, Node


class Builder:
    def __init__(self, shape: list[int]):
        self.nodes: list[Node] = []
        self.shapes: dict[str, list[int]] = {"input": list(shape)}

    def op(self, op: str, inputs: list[str], shape: list[int], weights: int = 0, **attrs) -> str:
        name = f"{op}_{len(self.nodes)}"
        out = f"{name}_out"
        self.shapes[out] = shape
        self.nodes.append(Node(name, op, list(inputs), [out], attrs=attrs, constants={1: f"{name}_w"} if weights else {},
                               constant_elements=weights, input_shapes=[self.shapes[t] for t in inputs],
                               output_shapes=[shape]))
        return out

    def conv(self, x: str, out_channels: int, kernel: int, stride: int = 1, pad: int | None = None,
             group: int = 1) -> str:
        n, c, h, w = self.shapes[x]
        pad = kernel // 2 if pad is None else pad
        oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
        return self.op("Conv", [x], [n, out_channels, oh, ow], out_channels * (c // group) * kernel * kernel + out_channels,
                       kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4, group=group)

    def unary(self, op: str, x: str, **attrs) -> str:
        shape = self.shapes[x]
        return self.op(op, [x], list(shape), 4 * shape[1] if op == "BatchNormalization" else 0, **attrs)

    def conv_bn_relu(self, x: str, out_channels: int, kernel: int, stride: int = 1, relu: bool = True,
                     group: int = 1) -> str:
        y = self.unary("BatchNormalization", self.conv(x, out_channels, kernel, stride, group=group))
        return self.unary("Relu", y) if relu else y

    def pool(self, op: str, x: str, kernel: int, stride: int, pad: int = 0) -> str:
        n, c, h, w = self.shapes[x]
        oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
        return self.op(op, [x], [n, c, oh, ow], kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4)

    def add(self, a: str, b: str) -> str:
        return self.op("Add", [a, b], list(self.shapes[a]))

    def concat(self, xs: list[str]) -> str:
        n, _, h, w = self.shapes[xs[0]]
        return self.op("Concat", xs, [n, sum(self.shapes[x][1] for x in xs), h, w], axis=1)

    def head(self, x: str, classes: int) -> str:
        n, c = self.shapes[x][:2]
        x = self.op("GlobalAveragePool", [x], [n, c, 1, 1])
        x = self.op("Flatten", [x], [n, c], axis=1)
        x = self.op("Gemm", [x], [n, classes], c * classes + classes, transB=1)
        return self.op("Softmax", [x], [n, classes], axis=1)

    def graph(self, output: str) -> Graph:
        return Graph(self.nodes, ["input"], [output])


def resnet8(size: int = 32, widths: tuple[int, int, int] = (16, 32, 64), classes: int = 10) -> Graph:
    """MLPerf Tiny's image classification ResNet-8 (mlcommons/tiny) on size x size x 3: a stem of widths[0], three
    residual stacks of ``widths``, the last two strided with a 1 x 1 shortcut, each Add and its ReLU, then global
    average pooling and a dense classifier."""
    b = Builder([1, 3, size, size])
    x = b.conv_bn_relu("input", widths[0], 3)
    for width, stride in zip(widths, (1, 2, 2)):
        y = b.conv_bn_relu(b.conv_bn_relu(x, width, 3, stride), width, 3, relu=False)
        shortcut = x if stride == 1 else b.conv(x, width, 1, stride, pad=0)
        x = b.unary("Relu", b.add(y, shortcut))
    return b.graph(b.head(x, classes))


def resnet50() -> Graph:
    b = Builder([1, 3, 224, 224])
    x = b.pool("MaxPool", b.conv_bn_relu("input", 64, 7, 2), 3, 2, 1)
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 0 else 1
            y = b.conv_bn_relu(x, width, 1)
            y = b.conv_bn_relu(y, width, 3, stride)
            y = b.conv_bn_relu(y, width * 4, 1, relu=False)
            shortcut = b.conv_bn_relu(x, width * 4, 1, stride, relu=False) if block == 0 else x
            x = b.unary("Relu", b.add(y, shortcut))
    return b.graph(b.head(x, 1000))


def googlenet() -> Graph:
    b = Builder([1, 3, 224, 224])
    x = b.pool("MaxPool", b.unary("Relu", b.conv("input", 64, 7, 2)), 3, 2, 1)
    x = b.unary("LRN", x, size=5)
    x = b.unary("Relu", b.conv(b.unary("Relu", b.conv(x, 64, 1)), 192, 3))
    x = b.pool("MaxPool", b.unary("LRN", x, size=5), 3, 2, 1)
    modules = {  # (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj), Szegedy et al. table 1
        "3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
        "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64), "4c": (128, 128, 256, 24, 64, 64),
        "4d": (112, 144, 288, 32, 64, 64), "4e": (256, 160, 320, 32, 128, 128),
        "5a": (256, 160, 320, 32, 128, 128), "5b": (384, 192, 384, 48, 128, 128),
    }
    for name, (c1, r3, c3, r5, c5, pp) in modules.items():
        if name in ("4a", "5a"):
            x = b.pool("MaxPool", x, 3, 2, 1)
        branches = [
            b.unary("Relu", b.conv(x, c1, 1)),
            b.unary("Relu", b.conv(b.unary("Relu", b.conv(x, r3, 1)), c3, 3)),
            b.unary("Relu", b.conv(b.unary("Relu", b.conv(x, r5, 1)), c5, 5)),
            b.unary("Relu", b.conv(b.pool("MaxPool", x, 3, 1, 1), pp, 1)),
        ]
        x = b.concat(branches)
    return b.graph(b.head(x, 1000))


def _densenet(blocks: list[int], growth: int = 32) -> Graph:
    b = Builder([1, 3, 224, 224])
    x = b.pool("MaxPool", b.conv_bn_relu("input", 2 * growth, 7, 2), 3, 2, 1)
    for index, layers in enumerate(blocks):
        for _ in range(layers):
            y = b.conv(b.unary("Relu", b.unary("BatchNormalization", x)), 4 * growth, 1)
            y = b.conv(b.unary("Relu", b.unary("BatchNormalization", y)), growth, 3)
            x = b.concat([x, y])
        if index < len(blocks) - 1:
            channels = b.shapes[x][1] // 2
            x = b.conv(b.unary("Relu", b.unary("BatchNormalization", x)), channels, 1)
            x = b.pool("AveragePool", x, 2, 2)
    return b.graph(b.head(b.unary("Relu", b.unary("BatchNormalization", x)), 1000))


def densenet121() -> Graph:
    return _densenet([6, 12, 24, 16])


def densenet264() -> Graph:
    return _densenet([6, 12, 64, 48])


def _classifier(b: Builder, x: str) -> str:
    """AlexNet's and VGG's head: Flatten, two 4096-wide Gemm + Relu, Gemm to 1000 classes, Softmax."""
    x = b.op("Flatten", [x], [1, math.prod(b.shapes[x][1:])], axis=1)
    for width in (4096, 4096):
        x = b.unary("Relu", b.op("Gemm", [x], [1, width], b.shapes[x][1] * width + width, transB=1))
    x = b.op("Gemm", [x], [1, 1000], 4096 * 1000 + 1000, transB=1)
    return b.op("Softmax", [x], [1, 1000], axis=1)


def vgg16() -> Graph:
    b = Builder([1, 3, 224, 224])
    x = "input"
    for widths in ([64, 64], [128, 128], [256] * 3, [512] * 3, [512] * 3):
        for width in widths:
            x = b.unary("Relu", b.conv(x, width, 3))
        x = b.pool("MaxPool", x, 2, 2)
    return b.graph(_classifier(b, x))


def alexnet() -> Graph:
    b = Builder([1, 3, 224, 224])
    x = b.pool("MaxPool", b.unary("Relu", b.conv("input", 64, 11, 4, pad=2)), 3, 2)
    x = b.pool("MaxPool", b.unary("Relu", b.conv(x, 192, 5)), 3, 2)
    for width in (384, 256, 256):
        x = b.unary("Relu", b.conv(x, width, 3))
    x = b.pool("MaxPool", x, 3, 2)
    return b.graph(_classifier(b, x))


def resnet18(size: int = 224, widths: tuple[int, ...] = (64, 128, 256, 512), classes: int = 1000) -> Graph:
    """ResNet-18 on 3 x ``size`` x ``size``, its four stages ``widths`` channels wide (the paper's by default)."""
    b = Builder([1, 3, size, size])
    x = b.pool("MaxPool", b.conv_bn_relu("input", widths[0], 7, 2), 3, 2, 1)
    for stage, width in enumerate(widths):
        for block_stride in (1 if stage == 0 else 2, 1):
            y = b.conv_bn_relu(b.conv_bn_relu(x, width, 3, block_stride), width, 3, relu=False)
            shortcut = x if block_stride == 1 and b.shapes[x][1] == width else \
                b.conv_bn_relu(x, width, 1, block_stride, relu=False)
            x = b.unary("Relu", b.add(y, shortcut))
    return b.graph(b.head(x, classes))


# MobileNetV2's inverted-residual stages (expansion t, output channels c, repeats n, first stride s)
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))


def mobilenet_v2(size: int = 224, stages: tuple[tuple[int, int, int, int], ...] = MOBILENET_V2, stem: int = 32,
                 last: int = 1280, classes: int = 1000) -> Graph:
    """MobileNetV2 on 3 x ``size`` x ``size``: a strided stem, then per stage (t, c, n, s) n inverted residual
    blocks (1 x 1 expansion by t, 3 x 3 depthwise, 1 x 1 projection to c; an Add where the shape is kept), a
    1 x 1 convolution to ``last`` channels and the head. ReLU where the paper has ReLU6 (a Clip)."""
    b = Builder([1, 3, size, size])
    x = b.conv_bn_relu("input", stem, 3, 2)
    for expansion, channels, repeats, first_stride in stages:
        for k in range(repeats):
            stride = first_stride if k == 0 else 1
            wide = b.shapes[x][1] * expansion
            y = b.conv_bn_relu(x, wide, 1) if expansion != 1 else x
            y = b.conv_bn_relu(y, wide, 3, stride, group=wide)
            y = b.conv_bn_relu(y, channels, 1, relu=False)
            x = b.add(x, y) if stride == 1 and b.shapes[x][1] == channels else y
    return b.graph(b.head(b.conv_bn_relu(x, last, 1), classes))


def squeezenet() -> Graph:
    b = Builder([1, 3, 224, 224])
    x = b.pool("MaxPool", b.unary("Relu", b.conv("input", 96, 7, 2, pad=0)), 3, 2)
    fires = [(16, 64), (16, 64), (32, 128), "pool", (32, 128), (48, 192), (48, 192), (64, 256), "pool", (64, 256)]
    for fire in fires:
        if fire == "pool":
            x = b.pool("MaxPool", x, 3, 2)
            continue
        squeeze, expand = fire
        s = b.unary("Relu", b.conv(x, squeeze, 1))
        x = b.concat([b.unary("Relu", b.conv(s, expand, 1)), b.unary("Relu", b.conv(s, expand, 3))])
    x = b.unary("Relu", b.conv(x, 1000, 1))
    n, c = b.shapes[x][:2]
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x], [n, c, 1, 1])], [n, c], axis=1)
    return b.graph(b.op("Softmax", [x], [n, c], axis=1))


def shufflenet() -> Graph:
    groups = 3
    b = Builder([1, 3, 224, 224])
    x = b.pool("MaxPool", b.conv_bn_relu("input", 24, 3, 2), 3, 2, 1)

    def shuffle(y: str) -> str:
        n, c, h, w = b.shapes[y]
        y = b.op("Reshape", [y], [n, groups, c // groups, h, w])
        y = b.op("Transpose", [y], [n, c // groups, groups, h, w], perm=[0, 2, 1, 3, 4])
        return b.op("Reshape", [y], [n, c, h, w])

    for stage, (repeats, width) in enumerate(zip([4, 8, 4], [240, 480, 960])):
        for unit in range(repeats):
            stride = 2 if unit == 0 else 1
            channels = b.shapes[x][1]
            out = width - channels if stride == 2 else width
            first_groups = 1 if stage == 0 and unit == 0 else groups
            y = b.conv_bn_relu(x, width // 4, 1, group=first_groups)
            y = shuffle(y)
            y = b.conv_bn_relu(y, width // 4, 3, stride, relu=False, group=width // 4)
            y = b.conv_bn_relu(y, out, 1, relu=False, group=groups)
            if stride == 2:
                x = b.unary("Relu", b.concat([b.pool("AveragePool", x, 3, 2, 1), y]))
            else:
                x = b.unary("Relu", b.add(x, y))
    return b.graph(b.head(x, 1000))


ARCHITECTURES = {"resnet50": resnet50, "resnet18": resnet18, "googlenet": googlenet, "densenet121": densenet121,
                 "vgg16": vgg16, "alexnet": alexnet, "squeezenet": squeezenet, "shufflenet": shufflenet,
                 "mobilenet_v2": mobilenet_v2, "densenet264": densenet264}


def random_dag(seed: int, nodes: int) -> Graph:
    """A random convolutional DAG of ``nodes`` nodes on one tensor shape: chains, residual Adds and
    branches, with ops an FPGA runs (Conv, Relu, MaxPool, BatchNormalization, Add) and one it does not (LRN)."""
    rng = random.Random(seed)
    channels, size = rng.choice([4, 8, 16, 32, 64]), rng.choice([8, 16, 32])
    b = Builder([1, channels, size, size])
    tensors = ["input"]
    for _ in range(nodes):
        recent = tensors[-4:]
        kind = rng.choices(["Conv", "Relu", "MaxPool", "BatchNormalization", "LRN", "Add"], [4, 3, 1, 1, 1, 2])[0]
        x = rng.choice(recent)
        if kind == "Conv":
            y = b.conv(x, channels, rng.choice([1, 3]))
        elif kind == "MaxPool":
            y = b.pool("MaxPool", x, 3, 1, 1)
        elif kind == "Add" and len(recent) > 1:
            y = b.add(x, rng.choice([t for t in recent if t != x]))
        elif kind == "LRN":
            y = b.unary("LRN", x, size=3)
        else:
            y = b.unary("Relu" if kind == "Add" else kind, x)
        tensors.append(y)
    consumed = {t for n in b.nodes for t in n.inputs}
    outputs = [t for t in tensors[1:] if t not in consumed]
    return Graph(b.nodes, ["input"], outputs)


def parameter_count(graph: Graph) -> int:
    return sum(n.constant_elements for n in graph.nodes)


def describe(graph: Graph) -> str:
    return f"{len(graph.nodes)} nodes, {parameter_count(graph) / 1e6:.1f} M parameters, " \
           f"{sum(math.prod(n.output_shapes[0]) for n in graph.nodes) * 4 / 2**20:.0f} MiB of activations"


def to_onnx(graph: Graph, seed: int = 0):
    """``graph`` as an ONNX model (opset 13) with seeded random weights (He-scaled, so the values stay in range
    through the layers; BatchNormalization near identity): what the planning benchmarks that need a real model
    (its memory plan, a build) run on. Written with onnx.helper; imported here only, so the rest of this module
    needs no onnx."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def constant(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32 if array.dtype.kind == "f"
                                                        else np.int64), name))
        return name

    for node in graph.nodes:
        inputs, attrs = list(node.inputs), dict(node.attrs)
        first, out = node.input_shapes[0], node.output_shapes[0]
        if node.op == "Conv":
            fan_in = first[1] // attrs.get("group", 1) * math.prod(attrs["kernel_shape"])
            inputs += [constant(f"{node.name}.w", rng.normal(0, math.sqrt(2 / fan_in),
                                                             [out[1], fan_in // math.prod(attrs["kernel_shape"]),
                                                              *attrs["kernel_shape"]])),
                       constant(f"{node.name}.b", rng.normal(0, 0.05, out[1]))]
        elif node.op == "Gemm":
            inputs += [constant(f"{node.name}.w", rng.normal(0, math.sqrt(1 / first[1]), [out[1], first[1]])),
                       constant(f"{node.name}.b", rng.normal(0, 0.05, out[1]))]
        elif node.op == "BatchNormalization":
            c = first[1]
            inputs += [constant(f"{node.name}.{k}", v) for k, v in
                       (("scale", rng.uniform(0.8, 1.2, c)), ("bias", rng.normal(0, 0.05, c)),
                        ("mean", rng.normal(0, 0.05, c)), ("var", rng.uniform(0.8, 1.2, c)))]
        elif node.op == "Reshape":
            inputs.append(constant(f"{node.name}.shape", np.array(out, dtype=np.int64)))
        nodes.append(helper.make_node(node.op, inputs, list(node.outputs), name=node.name, **attrs))
    shapes = {t: shape for n in graph.nodes for t, shape in zip(n.inputs + n.outputs, n.input_shapes + n.output_shapes)}
    graph_proto = helper.make_graph(
        nodes, "graph", [helper.make_tensor_value_info(t, TensorProto.FLOAT, shapes[t]) for t in graph.inputs],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, shapes[t]) for t in graph.outputs], inits)
    model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
