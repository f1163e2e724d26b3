"""Which host-side subfunctions take a batch of samples in one onnxruntime call.

A model's batch axis is the one its exporter wrote, 1, and a subfunction's model keeps it. A CPU or GPU
subfunction therefore ran a sample a call. Where every node of a subfunction treats axis 0 as separate samples,
its model with that axis left open (``subgraph.with_open_batch``) runs a whole batch in one call. A stream
then pays a call's fixed cost (the board file's ``invocation_overhead_s``: 100 us for onnxruntime on the
PYNQ-Z2's A9) once a batch, as an FPGA call does. That matters most for the few value-only nodes a quantized
export leaves on the host (its input quantizer: ``input_codes.input_quantizers``).

A node takes a batch when its tensors have the batch axis first (1 in the model) and its op computes each index of
that axis from the same index of its inputs: an elementwise op whose constants broadcast over it, a layer whose
constants are its weights, an op along another axis. Anything else (a Shape, a Reshape's shape from a tensor, an
axis or a set of axes the model gives as a tensor, a recurrent layer, DynamicQuantizeLinear's scale over the
whole tensor) keeps a sample a call. Pure: over ``core.graph`` nodes, tested without onnx.
"""

from __future__ import annotations

from typing import Iterable

from ..core.graph import Graph, Node

# Each output index from the same index of the inputs, the constants broadcast (ONNX's multidirectional rule)
ELEMENTWISE = frozenset({
    "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitShift", "BitwiseAnd", "BitwiseNot",
    "BitwiseOr", "BitwiseXor", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "Div", "Dropout", "Elu",
    "Equal", "Erf", "Exp", "Floor", "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity",
    "IsInf", "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mish", "Mod", "Mul", "Neg",
    "Not", "Or", "PRelu", "Pow", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh",
    "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Where", "Xor",
    # per-tensor or per-axis (not axis 0: ``_axis_free``) quantizers; QONNX's become the ops above on the host
    "QuantizeLinear", "DequantizeLinear", "Quant", "BipolarQuant", "Trunc",
})
# Layers: each sample computed alone, their constants (weights, biases, statistics) never broadcast over axis 0
LAYERS = frozenset({
    "AveragePool", "BatchNormalization", "Conv", "ConvInteger", "ConvTranspose", "DepthToSpace", "GlobalAveragePool",
    "GlobalLpPool", "GlobalMaxPool", "InstanceNormalization", "LpPool", "LRN", "MaxPool", "QLinearConv",
    "SpaceToDepth",
})
# Ops along one axis, its attribute's default where the model gives none: any axis but 0
ALONG_AXIS = {"ArgMax": 0, "ArgMin": 0, "Concat": None, "Flatten": 1, "Gather": 0, "Hardmax": -1,
              "LayerNormalization": -1, "LogSoftmax": -1, "LpNormalization": -1, "Softmax": -1, "Split": 0,
              "TopK": -1}
# Ops over a set of axes, an attribute or (newer opsets) input 1: none of them 0
OVER_AXES = frozenset({"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                       "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Squeeze", "Unsqueeze"})
# Matrix products whose second operand (at this input) is a constant: each row of the first alone
MATRIX = {"Gemm": 1, "MatMul": 1, "MatMulInteger": 1, "QLinearMatMul": 3}


def takes_batch(node: Node) -> bool:
    """Whether ``node`` computes each sample of a stack along axis 0 as it computes it alone (the module's
    docstring)."""
    shapes = node.input_shapes + node.output_shapes
    if not shapes or any(len(s) == 0 or s[0] != 1 for s in shapes):
        return False
    rank = len(node.output_shapes[0]) if node.output_shapes else 0
    op = node.op
    if op in ELEMENTWISE:
        return all(len(s) == rank for s in node.input_shapes) and \
            all(len(s) < rank or (s and s[0] == 1) for s in node.constant_shapes.values()) and _axis_free(node, 1)
    if op in LAYERS:  # its data its one tensor input (a weight the model takes as an input is each sample's own);
        # a MaxPool's Indices count the elements of the whole stack, the samples before too
        return len(node.inputs) == 1 and (op != "MaxPool" or len(node.outputs) == 1)
    if op == "Reshape":  # its shape a constant: subgraph.with_open_batch opens its first entry
        return 1 in node.constants
    if op == "Transpose":
        return bool(node.attrs.get("perm")) and node.attrs["perm"][0] == 0
    if op in ALONG_AXIS:  # a Concat's constants would not be stacked; a Gather's indices must be a constant
        return (not node.constants if op == "Concat" else op != "Gather" or 1 in node.constants) and \
            _axis_free(node, ALONG_AXIS[op])
    if op in OVER_AXES:
        return _axes_free(node)
    if op in MATRIX:
        return MATRIX[op] in node.constants and 0 not in node.constants and \
            (op != "Gemm" or not node.attrs.get("transA", 0))
    return False


def _axis_free(node: Node, default) -> bool:
    """Whether the node's ``axis`` (``default`` where it has none; None: it must have one) is not axis 0."""
    axis = node.attrs.get("axis", default)
    if axis is None:
        return False
    rank = len(node.input_shapes[0]) if node.input_shapes else 0
    return axis % rank != 0 if rank else False


def _axes_free(node: Node) -> bool:
    """Whether a reduction's, Squeeze's or Unsqueeze's axes, from its attribute or a one-value constant input 1,
    leave axis 0 alone; all axes (none given) do not."""
    if "axes" in node.attrs:
        axes = node.attrs["axes"]
    elif 1 in node.scalars:
        axes = [int(node.scalars[1])]
    else:
        return False
    rank = len(node.output_shapes[0]) if node.op == "Unsqueeze" else len(node.input_shapes[0])
    return bool(axes) and all(a % rank != 0 for a in axes)


def takes_batches(graph: Graph, nodes: Iterable[int]) -> bool:
    """Whether a subfunction of ``nodes`` (indices into ``graph``) runs a batch a call."""
    return all(takes_batch(graph.nodes[i]) for i in nodes)
