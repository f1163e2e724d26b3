"""Graph rewrites of intake: what exporters write, turned into the plain forms the devices run.

One small named transformation per rewrite, in the manner of qonnx's and onnx-simplifier's: each
takes the model (shapes inferred) and rewrites it in place, returning whether it changed anything.
``PASSES`` lists them in the order intake applies them; constant folding and opset conversion are
the libraries' (onnxruntime, onnx's version converter), called from ``model.py``.

A rewritten node keeps the name of the user's node it replaces (a Gemm made of MatMul + Add is named
after the MatMul), so that ``trace_nodes`` can say where every node of the user's model went.
Problems the user must fix raise ``RewriteError`` naming the node.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..core.graph import QONNX_DOMAINS as QONNX_QUANT_DOMAINS
from ..core.precision import exact_fixed

# The opset intake converts older models to (onnx's version converter); newer ones are kept.
MIN_OPSET = 13


# Weights exact in this many bits or fewer are a quantizer's codes: no scale is folded into them.
QUANTIZED_WEIGHT_BITS = 8


class RewriteError(ValueError):
    """The model cannot be normalised; the message names the node and the reason."""


class ModelIndex:
    """An ONNX model's graph with the look-ups the rewrites share (rebuilt by each pass); not the
    partitioner's ``graph.Graph``."""

    def __init__(self, model: onnx.ModelProto, shapes: Optional[dict[str, list[int]]] = None):
        """``shapes``: the index's before a rewrite that added constants (through add_constant, which
        records theirs) and removed or rewired nodes, and so changed no tensor's shape: reading them
        again from the model is most of the index's time."""
        self.model = model
        self.g = model.graph
        self.inits = {t.name: t for t in self.g.initializer}
        self.shapes = tensor_shapes(model) if shapes is None else shapes
        self.outputs = {o.name for o in self.g.output}
        self.inputs = {i.name for i in self.g.input}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        self.producer: dict[str, onnx.NodeProto] = {}
        for node in self.g.node:
            for t in node.input:
                self.consumers.setdefault(t, []).append(node)
            for t in node.output:
                self.producer[t] = node

    def constant(self, name: str) -> Optional[np.ndarray]:
        return numpy_helper.to_array(self.inits[name]) if name in self.inits else None

    def fresh(self, name: str) -> str:
        """``name``, or ``name_k``, which no tensor of the graph has."""
        taken = self.inits.keys() | self.producer.keys() | self.inputs | self.consumers.keys() | self.outputs
        unique, k = name, 1
        while unique in taken:
            unique, k = f"{name}_{k}", k + 1
        return unique

    def add_constant(self, name: str, value: np.ndarray) -> str:
        """A new initializer ``name`` (made unique) holding ``value``."""
        unique = self.fresh(name)
        tensor = numpy_helper.from_array(value, unique)
        self.g.initializer.append(tensor)
        self.inits[unique] = tensor
        self.shapes[unique] = list(tensor.dims)
        return unique

    def sole_consumer(self, tensor: str) -> Optional[onnx.NodeProto]:
        """The one node reading ``tensor`` when nothing else (no graph output) does."""
        users = self.consumers.get(tensor, [])
        if len(users) != 1 or tensor in self.outputs:
            return None
        return users[0]

    def remove(self, node: onnx.NodeProto) -> None:
        self.g.node.remove(node)


def attribute(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def set_attribute(node: onnx.NodeProto, name: str, value) -> None:
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)
    if value is not None:
        node.attribute.append(helper.make_attribute(name, value))


def tensor_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Tensor name -> its shape as the model records it (-1 for a dimension it does not fix)."""
    result = {}
    g = model.graph
    for v in list(g.value_info) + list(g.input) + list(g.output):
        t = v.type.tensor_type
        if v.type.HasField("tensor_type") and t.HasField("shape"):
            result[v.name] = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
    for init in g.initializer:
        result[init.name] = list(init.dims)
    return result


def default_opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


Replacement = Callable[[ModelIndex, onnx.NodeProto, list[int]], Optional[list[onnx.NodeProto]]]


def _replace_each(model: onnx.ModelProto, ops: set[str], replacement: Replacement, min_rank: int = 2) -> bool:
    """Every node of ``ops`` whose input has a known shape of rank ``min_rank`` or more becomes the
    nodes ``replacement(graph, node, shape)`` gives (None: it stays)."""
    graph = ModelIndex(model)
    changed = False
    for node in list(graph.g.node):
        shape = graph.shapes.get(node.input[0]) if node.op_type in ops else None
        nodes = replacement(graph, node, shape) if shape is not None and len(shape) >= min_rank else None
        if nodes is not None:
            _splice(graph, node, nodes)
            changed = True
    return changed


def _splice(graph: ModelIndex, node: onnx.NodeProto, nodes: list[onnx.NodeProto]) -> None:
    """``nodes`` in ``node``'s place."""
    position = list(graph.g.node).index(node)
    graph.remove(node)
    for k, new in enumerate(nodes):
        graph.g.node.insert(position + k, new)



# ---------------------------------------------------------------- the passes


# Ops of any number of inputs that pass their tensor through when given one (torchvision's DenseNet concatenates its
# block's first layer's one input feature)
_OF_ONE = {"Concat", "Sum", "Max", "Min", "Mean"}
# Arithmetic that passes its tensor through when the constant is all this value (x + 0, x * 1, ...),
# and the inputs the constant may be at.
_NEUTRAL = {"Add": (0.0, (0, 1)), "Sub": (0.0, (1,)), "Mul": (1.0, (0, 1)), "Div": (1.0, (1,))}


def _passed_through(graph: ModelIndex, node: onnx.NodeProto) -> Optional[str]:
    """The input ``node`` passes through unchanged, else None."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Identity" or (node.op_type in _OF_ONE and len(node.input) == 1):
        return node.input[0]
    if node.op_type == "Dropout":  # inference: its input, unless its mask is read
        mask_read = len(node.output) > 1 and node.output[1] and \
            (graph.consumers.get(node.output[1]) or node.output[1] in graph.outputs)
        return None if mask_read else node.input[0]
    if node.op_type not in _NEUTRAL or len(node.input) != 2:
        return None
    neutral, positions = _NEUTRAL[node.op_type]
    for k in positions:
        value, other = graph.constant(node.input[k]), node.input[1 - k]
        if value is not None and np.all(value == neutral) and graph.constant(other) is None and \
                graph.shapes.get(other) is not None and graph.shapes.get(other) == graph.shapes.get(node.output[0]):
            return other
    return None


def eliminate_identity(model: onnx.ModelProto) -> bool:
    """Identity, Dropout whose mask is unused (inference: Dropout passes its input through), a Concat,
    Sum, Max, Min or Mean of one tensor, and arithmetic with a neutral constant (x + 0, x - 0, x * 1,
    x / 1, as BNN-PYNQ's TensorNorm exports with its default statistics; the result of the input's
    shape) are removed; their readers read the input."""
    graph = ModelIndex(model)
    changed = False
    for node in list(graph.g.node):
        source, result = _passed_through(graph, node), node.output[0]
        if source is None:
            continue
        if result in graph.outputs:
            producer = graph.producer.get(source)
            # the graph output keeps its name: its producer writes it directly
            if producer is None or source in graph.outputs or len(graph.consumers.get(source, [])) != 1:
                continue
            producer.output[list(producer.output).index(source)] = result
        else:
            for user in graph.consumers.get(result, []):
                for k, t in enumerate(user.input):
                    if t == result:
                        user.input[k] = source
        graph.remove(node)
        graph = ModelIndex(model)
        changed = True
    return changed


def explicit_attributes(model: onnx.ModelProto) -> bool:
    """Every attribute a standard op leaves optional gets its ONNX default written out (from the
    op's schema), and the ones without a schema default are derived: a convolution's
    ``kernel_shape`` from its weights, ``strides``/``dilations``/``pads`` of convolutions and
    pooling, and ``auto_pad`` turned into explicit ``pads`` from the input's size."""
    graph = ModelIndex(model)
    opset = default_opset(model)
    changed = False
    for node in graph.g.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        present = {a.name for a in node.attribute}
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "")
        except onnx.defs.SchemaError:
            continue
        for name, spec in schema.attributes.items():
            if name not in present and spec.default_value.type != onnx.AttributeProto.UNDEFINED:
                node.attribute.append(_copy_attribute(spec.default_value, name))
                changed = True
        if node.op_type in ("Conv", "MaxPool", "AveragePool", "LpPool"):
            changed |= _explicit_window(graph, node)
    return changed


def _copy_attribute(default: onnx.AttributeProto, name: str) -> onnx.AttributeProto:
    copy = onnx.AttributeProto()
    copy.CopyFrom(default)
    copy.name = name
    return copy


def _explicit_window(graph: ModelIndex, node: onnx.NodeProto) -> bool:
    shape = graph.shapes.get(node.input[0])
    kernel = attribute(node, "kernel_shape")
    if kernel is None and node.op_type == "Conv":
        weights = graph.shapes.get(node.input[1])
        if weights is None or len(weights) < 3 or min(weights[2:]) <= 0:
            raise RewriteError(f"node '{node.name}' (Conv): no kernel_shape and the weights' shape is unknown")
        kernel = weights[2:]
        set_attribute(node, "kernel_shape", list(kernel))
    if kernel is None:
        raise RewriteError(f"node '{node.name}' ({node.op_type}): kernel_shape is required")
    dims = len(kernel)
    strides = list(attribute(node, "strides", [1] * dims))
    dilations = list(attribute(node, "dilations", [1] * dims))
    set_attribute(node, "strides", strides)
    if node.op_type in ("Conv", "MaxPool"):
        set_attribute(node, "dilations", dilations)
    auto_pad = attribute(node, "auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        set_attribute(node, "pads", list(attribute(node, "pads", [0] * (2 * dims))))
        return True
    if auto_pad == "VALID":
        pads = [0] * (2 * dims)
    else:  # SAME_UPPER / SAME_LOWER: output size ceil(input / stride)
        if shape is None or len(shape) != dims + 2 or min(shape[2:]) <= 0:
            raise RewriteError(f"node '{node.name}' ({node.op_type}): auto_pad={auto_pad} needs the input's size")
        begin, end = [], []
        for size, k, s, d in zip(shape[2:], kernel, strides, dilations):
            total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        pads = begin + end
    set_attribute(node, "auto_pad", "NOTSET")
    set_attribute(node, "pads", pads)
    return True


def normalise_gemm(model: onnx.ModelProto) -> bool:
    """Gemm's ``alpha`` and ``beta`` go into constant B and C; ``transA`` becomes a Transpose of A
    before it. What remains is Y = A B' + C, which every device runs."""
    graph = ModelIndex(model)
    changed = False
    for node in list(graph.g.node):
        if node.op_type != "Gemm" or node.domain not in ("", "ai.onnx"):
            continue
        alpha, beta = attribute(node, "alpha", 1.0), attribute(node, "beta", 1.0)
        b = graph.constant(node.input[1])
        if alpha != 1.0 and b is not None:
            node.input[1] = graph.add_constant(f"{node.name}.B", (b * alpha).astype(b.dtype))
            set_attribute(node, "alpha", 1.0)
            changed = True
        has_c = len(node.input) > 2 and node.input[2]
        c = graph.constant(node.input[2]) if has_c else None
        if beta != 1.0 and (not has_c or c is not None):
            if has_c:
                node.input[2] = graph.add_constant(f"{node.name}.C", (c * beta).astype(c.dtype))
            set_attribute(node, "beta", 1.0)
            changed = True
        if attribute(node, "transA", 0) and graph.constant(node.input[0]) is None:
            transposed = f"{node.name}.transA_output"
            graph.g.node.insert(list(graph.g.node).index(node),
                                helper.make_node("Transpose", [node.input[0]], [transposed], name=f"{node.name}.transA",
                                                 perm=[1, 0]))
            node.input[0] = transposed
            set_attribute(node, "transA", 0)
            changed = True
    return changed


def matmul_add_to_gemm(model: onnx.ModelProto) -> bool:
    """MatMul of a 2-D activation by a constant matrix, followed by the Add of a constant bias along
    its last axis (skl2onnx, Keras and the model-zoo MNIST write dense layers so): one Gemm, named
    after the MatMul."""
    graph = ModelIndex(model)
    changed = False
    for node in list(graph.g.node):
        if node.op_type != "MatMul" or graph.constant(node.input[1]) is None:
            continue
        a, b = graph.shapes.get(node.input[0]), graph.shapes[node.input[1]]
        add = graph.sole_consumer(node.output[0])
        if a is None or len(a) != 2 or len(b) != 2 or add is None or add.op_type != "Add":
            continue
        other = add.input[1] if add.input[0] == node.output[0] else add.input[0]
        bias = graph.constant(other)
        if bias is None or bias.size != b[1] or (bias.ndim == 2 and bias.shape[0] != 1) or bias.ndim > 2:
            continue
        gemm = helper.make_node("Gemm", [node.input[0], node.input[1],
                                         graph.add_constant(f"{node.name}.bias", bias.reshape(-1))],
                                [add.output[0]], name=node.name, alpha=1.0, beta=1.0, transA=0, transB=0)
        position = list(graph.g.node).index(node)
        graph.remove(node)
        graph.remove(add)
        graph.g.node.insert(position, gemm)
        graph = ModelIndex(model)
        changed = True
    return changed


def fold_batchnorm(model: onnx.ModelProto) -> bool:
    """A BatchNormalization (constant statistics) right after a Conv or a 2-D Gemm with constant
    weights, and read by nothing else, is folded into that layer's weights and bias; right after
    another BatchNormalization, merged into it (one affine step)."""
    graph = ModelIndex(model)
    changed = False
    for bn in list(graph.g.node):
        if bn.op_type != "BatchNormalization" or len([t for t in bn.output if t]) != 1:
            continue
        affine = _affine_of(graph, bn)
        layer = graph.producer.get(bn.input[0])
        if affine is None or layer is None or graph.sole_consumer(bn.input[0]) is not bn:
            continue
        folded = _fold_scale_into(graph, layer, *affine)
        if not folded:
            continue
        layer.output[0] = bn.output[0]
        graph.remove(bn)
        graph = ModelIndex(model, graph.shapes)
        changed = True
    return changed


def _affine_of(graph: ModelIndex, node: onnx.NodeProto) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """A BatchNormalization with constant statistics as (factor, shift) per channel, else None."""
    params = [graph.constant(t) for t in node.input[1:5]]
    if node.op_type != "BatchNormalization" or any(p is None for p in params):
        return None
    scale, shift, mean, var = (p.astype(np.float64).reshape(-1) for p in params)
    factor = scale / np.sqrt(var + attribute(node, "epsilon", 1e-5))
    return factor, shift - mean * factor


def _fold_scale_into(graph: ModelIndex, layer: onnx.NodeProto, factor: np.ndarray, shift: np.ndarray) -> bool:
    """Rewrite ``layer`` (Conv, Gemm or a BatchNormalization) to compute factor * layer(x) + shift
    per output channel. Weights that are exact in a few bits (a quantizer's integer codes) are never
    scaled: that would make them full-width; the scale stays a step of its own."""
    before = _affine_of(graph, layer)
    if before is not None and before[0].size in (1, factor.size):  # two affine steps: one
        inner_factor, inner_shift = before
        _set_affine(graph, layer, inner_factor * factor, inner_shift * factor + shift)
        return True
    if layer.op_type not in ("Conv", "Gemm"):  # an activation or a quantizer: nothing to fold into
        return False
    weights = graph.constant(layer.input[1])
    if weights is None or exact_fixed(weights, QUANTIZED_WEIGHT_BITS) is not None:
        return False
    channels = factor.size
    if layer.op_type == "Conv" and weights.shape[0] == channels:
        w = weights * factor.reshape(-1, *[1] * (weights.ndim - 1))
    elif layer.op_type == "Gemm" and weights.ndim == 2 and len(graph.shapes.get(layer.input[0], [])) == 2 \
            and not attribute(layer, "transA", 0) and attribute(layer, "alpha", 1.0) == 1.0:
        w = weights * (factor.reshape(-1, 1) if attribute(layer, "transB", 0) else factor.reshape(1, -1))
        if w.shape[1 if not attribute(layer, "transB", 0) else 0] != channels:
            return False
    else:
        return False
    bias = np.zeros(channels)
    if len(layer.input) > 2 and layer.input[2]:
        given = graph.constant(layer.input[2])
        if given is None or given.size not in (1, channels):
            return False
        bias = np.broadcast_to(given.reshape(-1) * attribute(layer, "beta", 1.0), (channels,))
    layer.input[1] = graph.add_constant(f"{layer.name}.weight_folded", w.astype(weights.dtype))
    new_bias = graph.add_constant(f"{layer.name}.bias_folded", (bias * factor + shift).astype(weights.dtype))
    if len(layer.input) > 2:
        layer.input[2] = new_bias
    else:
        layer.input.append(new_bias)
    if layer.op_type == "Gemm":
        set_attribute(layer, "beta", 1.0)
    return True


def _set_affine(graph: ModelIndex, node: onnx.NodeProto, factor: np.ndarray, shift: np.ndarray) -> None:
    """BatchNormalization ``node`` made factor * x + shift per channel (mean 0, variance 1, epsilon 0)."""
    channels = np.asarray(factor).size
    for k, (key, value) in enumerate((("scale", factor), ("shift", shift), ("mean", np.zeros(channels)),
                                      ("variance", np.ones(channels))), start=1):
        node.input[k] = graph.add_constant(f"{node.name}.{key}", np.asarray(value, dtype=np.float32))
    set_attribute(node, "epsilon", 0.0)


def _integer_range(bits: int, signed: bool, narrow: bool) -> tuple[int, int]:
    """The codes a QONNX quantizer of ``bits`` bits takes (qonnx's min_int and max_int)."""
    if signed:
        return -(2 ** (bits - 1)) + int(narrow), 2 ** (bits - 1) - 1
    return 0, 2 ** bits - 1 - int(narrow)


def _output_channel_scale(layer: onnx.NodeProto, weights_shape: list[int], scale: np.ndarray) -> Optional[np.ndarray]:
    """A weight quantizer's scale as one value per output channel of ``layer``, if it is per tensor
    or per output channel (Conv: axis 0; Gemm: axis 0 with transB, else axis 1)."""
    if scale.size == 1:
        channels = weights_shape[0] if layer.op_type == "Conv" or attribute(layer, "transB", 0) else weights_shape[1]
        return np.full(channels, float(scale.reshape(-1)[0]))
    axis = 0 if layer.op_type == "Conv" or attribute(layer, "transB", 0) else 1
    if scale.ndim != len(weights_shape) or any(d != 1 for k, d in enumerate(scale.shape) if k != axis):
        return None
    return scale.reshape(-1).astype(np.float64) if scale.shape[axis] == weights_shape[axis] else None


def _constant_value(graph: ModelIndex, tensor: str) -> Optional[np.ndarray]:
    """An initializer's value, or a DequantizeLinear's of constants (onnxruntime's quantized biases)."""
    if tensor in graph.inits:
        return graph.constant(tensor)
    node = graph.producer.get(tensor)
    if node is not None and node.op_type == "Quant" and node.domain in QONNX_QUANT_DOMAINS:
        return _quant_of_constants(graph, node)
    if node is None or node.op_type != "DequantizeLinear" or len(node.input) < 2:
        return None
    values = [graph.constant(t) for t in node.input[:3] if t]
    if any(v is None for v in values) or attribute(node, "axis", 1) != 1 and values[1].size > 1:
        return None
    codes, scale = values[0].astype(np.float64), values[1].astype(np.float64)
    zero = values[2].astype(np.float64) if len(values) > 2 else 0.0
    return (codes - zero) * scale


def _quant_of_constants(graph: ModelIndex, node: onnx.NodeProto) -> Optional[np.ndarray]:
    """What a QONNX Quant of constants gives, by the op's definition (round half to even, clamp to
    the integer range, back to scale), for its ROUND mode and 2 bits or more; else None."""
    values = [graph.constant(t) for t in node.input[:4]]
    if any(v is None for v in values) or attribute(node, "rounding_mode", "ROUND") != "ROUND" or values[3].size != 1 \
            or float(values[3].reshape(-1)[0]) < 2:
        return None
    x, scale, zero = (v.astype(np.float64) for v in values[:3])
    bits = int(values[3].reshape(-1)[0])
    low, high = _integer_range(bits, attribute(node, "signed", 1), attribute(node, "narrow", 0))
    return (np.clip(np.round(x / scale + zero), low, high) - zero) * scale


def quantized_weights_as_codes(model: onnx.ModelProto) -> bool:
    """A Conv or Gemm whose weights a QONNX Quant or BipolarQuant or a DequantizeLinear of integers (zero
    point 0, a positive per-tensor or per-output-channel scale) quantizes computes on the integer codes, its
    scale and bias an affine step after it: scale * (x * codes) + bias, FINN's streamlining. The
    layer keeps the quantizer's few bits (Brevitas' float scales and a BatchNormalization after the
    layer no longer widen them: the BatchNormalization merges into that step), and
    ``fold_batchnorm`` never folds into codes."""
    graph = ModelIndex(model)
    changed = False
    for quant in list(graph.g.node):
        quantizer = (quant.op_type in ("Quant", "BipolarQuant") and quant.domain in QONNX_QUANT_DOMAINS) or \
            (quant.op_type == "DequantizeLinear" and quant.domain in ("", "ai.onnx"))
        inputs = list(quant.input[:3]) + [""] * (3 - len(quant.input))  # a DequantizeLinear may lack a zero point
        params = [graph.constant(t) if t else np.zeros(1) for t in inputs]
        layer = graph.sole_consumer(quant.output[0]) if quantizer else None
        if layer is None or any(p is None for p in params) or layer.op_type not in ("Conv", "Gemm") \
                or list(layer.input[1:2]) != [quant.output[0]] or np.any(params[2] != 0) or np.any(params[1] <= 0):
            continue
        if layer.op_type == "Gemm" and (attribute(layer, "transA", 0) or attribute(layer, "alpha", 1.0) != 1.0):
            continue
        scale = _output_channel_scale(layer, list(params[0].shape), params[1])
        bias = _constant_value(graph, layer.input[2]) if len(layer.input) > 2 and layer.input[2] else np.zeros(1)
        if scale is None or bias is None or bias.size not in (1, scale.size):
            continue
        bias = np.broadcast_to(bias.reshape(-1) * (attribute(layer, "beta", 1.0) if layer.op_type == "Gemm" else 1),
                               scale.shape)
        # Quant(w, s) = s * Quant(w / s, 1), BipolarQuant(w, s) = s * BipolarQuant(w, 1); a DequantizeLinear
        # reads codes already
        if quant.op_type == "Quant":
            quant.input[0] = graph.add_constant(f"{quant.name}.in_steps", (params[0] / params[1]).astype(np.float32))
        quant.input[1] = graph.add_constant(f"{quant.name}.unit_scale", np.ones_like(params[1]))
        del layer.input[2:]
        result, codes_result = layer.output[0], f"{layer.output[0]}.on_codes"
        layer.output[0] = codes_result
        position = list(graph.g.node).index(layer)
        graph.g.node.insert(position + 1, _affine(graph, f"{layer.name}.weight_scale", codes_result, result, scale,
                                                  bias))
        changed = True
    return changed


def _trunc_as_quants(graph: ModelIndex, node: onnx.NodeProto) -> Optional[list[onnx.NodeProto]]:
    """qonnx's Trunc (v1: 5 inputs; v2: 6) with zero point 0 as Quants; None for another."""
    values = [graph.constant(t) for t in node.input[1:]]
    if len(values) not in (4, 5) or any(v is None or v.size != 1 for v in values) or float(values[1]) != 0:
        return None
    scale, in_bits = float(values[0].reshape(-1)[0]), int(values[2].reshape(-1)[0])
    if len(values) == 4:  # v1: floor(codes / 2^(in - out)), back at the input's scale
        out_scale, out_bits = scale, int(values[3].reshape(-1)[0])
        step, signed, narrow = 2.0 ** (in_bits - out_bits), 1, 0
        out_bits += 1  # v1 clamps nothing: a sign bit more than the truncated codes need
    else:
        out_scale, out_bits = float(values[3].reshape(-1)[0]), int(values[4].reshape(-1)[0])
        step = 2.0 ** round(math.log2(out_scale / scale))
        signed, narrow = attribute(node, "signed", 1), attribute(node, "narrow", 0)
    const = lambda key, value: graph.add_constant(f"{node.name}.{key}", np.asarray(value, np.float32))  # noqa: E731
    codes, truncated = graph.fresh(f"{node.name}.on_grid"), graph.fresh(f"{node.name}.truncated")
    quant = lambda inputs, result, name, **attrs: helper.make_node(  # noqa: E731
        "Quant", inputs, [result], name=name, domain=node.domain, **attrs)
    nodes = [quant([node.input[0], node.input[1], const("zero", 0.0), const("grid_bits", in_bits + 1)], codes,
                   f"{node.name}.grid", signed=1, narrow=0, rounding_mode="ROUND"),
             quant([codes, const("step", scale * step), const("zero_out", 0.0), const("bits", out_bits)],
                   truncated, node.name, signed=signed, narrow=narrow,
                   rounding_mode=attribute(node, "rounding_mode", "FLOOR").upper())]
    factor = out_scale / (scale * step)
    if factor == 1.0:
        nodes[-1].output[0] = node.output[0]
    else:
        nodes.append(helper.make_node("Mul", [truncated, const("rescale", factor)], [node.output[0]],
                                      name=f"{node.name}.rescale"))
    return nodes


def _replace_qonnx(model: onnx.ModelProto, ops: set[str],
                   replacement: Callable[[ModelIndex, onnx.NodeProto], Optional[list[onnx.NodeProto]]]) -> bool:
    """Every QONNX node of ``ops`` becomes the nodes ``replacement(graph, node)`` gives (None: it stays)."""
    graph = ModelIndex(model)
    changed = False
    for node in list(graph.g.node):
        nodes = replacement(graph, node) if node.op_type in ops and node.domain in QONNX_QUANT_DOMAINS else None
        if nodes is not None:
            _splice(graph, node, nodes)
            changed = True
    return changed


def trunc_as_quants(model: onnx.ModelProto) -> bool:
    """qonnx's Trunc (Brevitas' TruncAvgPool2d, truncating accumulators) with constant parameters and
    zero point 0 is two Quants, as qonnx computes it: the input rounded onto its own grid (scale s, the
    input's bits and a sign bit more: clamps nothing), then onto the output's (s times the power of two
    2^round(log2(s_out / s)), the output's bits, sign and narrow range, Trunc's rounding mode, FLOOR by
    default); then times s_out over that scale where they differ (v1: back at s, unclamped)."""
    return _replace_qonnx(model, {"Trunc"}, _trunc_as_quants)


def _multithreshold_as_signs(graph: ModelIndex, node: onnx.NodeProto) -> Optional[list[onnx.NodeProto]]:
    thresholds, shape = graph.constant(node.input[1]), graph.shapes.get(node.input[0])
    if thresholds is None or thresholds.ndim != 2 or not thresholds.shape[1] or shape is None:
        return None
    rank, (channels, count) = len(shape), thresholds.shape
    layout = attribute(node, "data_layout", "") or {2: "NC", 3: "NWC", 4: "NCHW"}.get(rank, "")
    axis = layout.index("C") if "C" in layout else 1  # qonnx's: the layout's C, else axis 1
    if channels != 1 and (axis >= rank or shape[axis] != channels):
        return None
    name = node.name
    const = lambda key, value: graph.add_constant(f"{name}.{key}", np.asarray(value, np.float32))  # noqa: E731
    unit = const("unit_scale", 1.0)
    nodes, signs = [], []
    for t in range(count):
        value = thresholds[:, t].reshape([channels] + [1] * (rank - 1 - axis)) if channels > 1 else thresholds[0, t]
        over, sign = graph.fresh(f"{name}.over{t}"), graph.fresh(f"{name}.sign{t}")
        nodes += [helper.make_node("Sub", [node.input[0], const(f"threshold{t}", value)], [over], name=over),
                  helper.make_node("BipolarQuant", [over, unit], [sign], name=sign, domain=node.domain)]
        if signs:
            total = graph.fresh(f"{name}.signs{t}")
            nodes.append(helper.make_node("Add", [signs[-1], sign], [total], name=total))
        signs.append(nodes[-1].output[0])
    # count = (sum of signs + n) / 2; the output out_scale * count + out_bias
    scale, bias = float(attribute(node, "out_scale", 1.0)), float(attribute(node, "out_bias", 0.0))
    steps = [(op, value) for op, value, neutral in (("Mul", scale / 2, 1.0), ("Add", scale * count / 2 + bias, 0.0))
             if value != neutral]
    if not steps:
        nodes[-1].output[0] = node.output[0]
    for k, (op, value) in enumerate(steps):
        result = node.output[0] if k == len(steps) - 1 else graph.fresh(f"{name}.scaled")
        nodes.append(helper.make_node(op, [nodes[-1].output[0], const(op.lower(), value)], [result],
                                      name=f"{name}.{op.lower()}"))
    return nodes


def multithreshold_as_signs(model: onnx.ModelProto) -> bool:
    """qonnx's (FINN's) MultiThreshold with constant thresholds T (one set, or one per channel) is
    out_scale * #{t: x >= T_t} + out_bias, and x >= T is sign(x - T) = +1 (float subtraction keeps
    the order of x and T): (sum of the BipolarQuants of x - T_t + n) / 2, then the output's affine
    step; ops the FPGA and the CPU both run."""
    return _replace_qonnx(model, {"MultiThreshold"}, _multithreshold_as_signs)


def _subpixel_kernel(weights: np.ndarray, stride: int, taps: tuple[int, int]) -> np.ndarray:
    """ConvTranspose weights [C_in, C_out, kh, kw] as one Conv's [s*s*C_out, C_in, Mh, Mw]: output
    channel (a*s + b)*C_out + o computes phase (a, b) of the transposed convolution's output (rows
    s*q + a, columns s*r + b), kernel tap (j, i) being the transposed one's (a + s*(Mh-1-j), b + s*(Mw-1-i))
    (flipped: a correlation), zero where that lies outside the kernel."""
    c_in, c_out, kh, kw = weights.shape
    kernel = np.zeros((stride, stride, c_out, c_in, *taps), weights.dtype)
    for a in range(stride):
        for b in range(stride):
            for j in range(taps[0]):
                for i in range(taps[1]):
                    ky, kx = a + stride * (taps[0] - 1 - j), b + stride * (taps[1] - 1 - i)
                    if ky < kh and kx < kw:
                        kernel[a, b, :, :, j, i] = weights[:, :, ky, kx].T
    return kernel.reshape(stride * stride * c_out, c_in, *taps)


def _conv_transpose_as_conv(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
    weights_source = graph.producer.get(node.input[1])
    quant = weights_source if weights_source is not None and weights_source.op_type in ("Quant", "BipolarQuant") and \
        weights_source.domain in QONNX_QUANT_DOMAINS and graph.sole_consumer(node.input[1]) is node else None
    weights = graph.constant(quant.input[0] if quant is not None else node.input[1])
    params = [graph.constant(t) for t in quant.input[1:4]] if quant is not None else []
    strides = attribute(node, "strides", [1, 1])
    if weights is None or weights.ndim != 4 or len(shape) != 4 or any(p is None for p in params) or \
            attribute(node, "group", 1) != 1 or any(d != 1 for d in attribute(node, "dilations", [1, 1])) or \
            attribute(node, "output_shape") or attribute(node, "auto_pad", "NOTSET") != "NOTSET" or \
            len(set(strides)) != 1:
        return None
    stride, kernel = strides[0], weights.shape[2:]
    pads = attribute(node, "pads", [0, 0, 0, 0])
    extra = attribute(node, "output_padding", [0, 0])
    taps = tuple(-(-k // stride) for k in kernel)
    out = [(shape[2 + d] - 1) * stride - pads[d] - pads[2 + d] + kernel[d] + extra[d] for d in (0, 1)]
    # the phases' rows q cover the transposed output's rows pads[d] .. pads[d] + out[d] - 1 (as s*q + a)
    rows = [-(-(pads[d] + out[d]) // stride) for d in (0, 1)]
    conv_pads = [taps[0] - 1, taps[1] - 1, max(rows[0] - shape[2], 0), max(rows[1] - shape[3], 0)]
    c_out = weights.shape[1]
    name = node.name
    scale = np.broadcast_to(params[0], weights.shape) if params and params[0].size > 1 else None
    if quant is not None and (any(p.size != 1 for p in params[1:2]) or (scale is not None and (
            params[0].shape[1] != c_out or np.any(scale != scale[:, :, :1, :1])))):
        return None  # a zero point, or a scale, that is not one or one per output channel
    bias = graph.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros(0)
    if bias is None:
        return None
    binary = quant is not None and quant.op_type == "BipolarQuant"
    if binary:  # the kernel's missing taps are zeros, which a sign would make +1: its +-scale values instead
        weights = np.where(weights >= 0, 1.0, -1.0).astype(np.float32) * np.broadcast_to(params[0], weights.shape)
    kernel_value = _subpixel_kernel(weights, stride, taps)
    nodes = []
    if quant is not None:  # the same quantizer over the rearranged weights: one scale per new output channel
        const = lambda key, value: graph.add_constant(f"{name}.{key}", np.asarray(value, np.float32))  # noqa: E731
        if binary:  # a narrow 2-bit Quant of the same scale (codes -1, 0, +1)
            quant_inputs = [const("ternary_zero", 0.0), const("ternary_bits", 2.0)]
            quant_attributes = dict(signed=1, narrow=1, rounding_mode="ROUND")
        else:
            quant_inputs = list(quant.input[2:])
            quant_attributes = {a.name: helper.get_attribute_value(a) for a in quant.attribute}
        # per output channel (axis 1): repeated for each phase
        new_scale = params[0] if scale is None else np.tile(scale[0, :, 0, 0], stride * stride).reshape(-1, 1, 1, 1)
        weight_name = graph.fresh(f"{name}.subpixel_weights")
        nodes.append(helper.make_node("Quant", [const("subpixel_float", kernel_value),
                                                const("subpixel_scale", new_scale), *quant_inputs], [weight_name],
                                      name=f"{quant.name}.subpixel", domain=quant.domain, **quant_attributes))
    else:
        weight_name = graph.add_constant(f"{name}.subpixel_weights", kernel_value)
    inputs = [node.input[0], weight_name]
    if bias.size:
        inputs.append(graph.add_constant(f"{name}.subpixel_bias", np.tile(bias, stride * stride)))
    phases, full = graph.fresh(f"{name}.phases"), graph.fresh(f"{name}.full")
    nodes += [helper.make_node("Conv", inputs, [phases], name=name, kernel_shape=list(taps), pads=conv_pads,
                               strides=[1, 1], dilations=[1, 1], group=1),
              helper.make_node("DepthToSpace", [phases], [full], name=f"{name}.interleave", blocksize=stride,
                               mode="DCR")]
    full_rows = [stride * (shape[2 + d] + conv_pads[2 + d]) for d in (0, 1)]
    if list(pads[:2]) == [0, 0] and full_rows == out:
        nodes[-1].output[0] = node.output[0]
        return nodes
    const = lambda key, value: graph.add_constant(f"{name}.{key}", np.asarray(value, np.int64))  # noqa: E731
    nodes.append(helper.make_node("Slice", [full, const("crop_starts", pads[:2]),
                                            const("crop_ends", [pads[0] + out[0], pads[1] + out[1]]),
                                            const("crop_axes", [2, 3])], list(node.output), name=f"{name}.crop"))
    return nodes


def conv_transpose_as_conv(model: onnx.ModelProto) -> bool:
    """A 2-D ConvTranspose of stride s (one group, no dilation, explicit pads) is one Conv with s*s
    phases of output channels (``_subpixel_kernel``; its weights' quantizer over the rearranged
    weights, so that the Conv computes on codes), a DepthToSpace that interleaves the phases, and a
    Slice that crops the pads: the sub-pixel form of the transposed convolution, in ops the FPGA runs
    (hls4ml 1.3 has no ConvTranspose from ONNX)."""
    changed = _replace_each(model, {"ConvTranspose"}, _conv_transpose_as_conv, 4)
    if changed:  # the replaced weight quantizers
        graph = ModelIndex(model)
        for node in list(graph.g.node):
            if node.op_type in ("Quant", "BipolarQuant") and not graph.consumers.get(node.output[0]) and \
                    node.output[0] not in graph.outputs:
                graph.remove(node)
    return changed


def _channel_axis(shape: list[int], *values: np.ndarray) -> Optional[int]:
    """The one axis other than 0 along which ``values`` (broadcast against ``shape``) vary, if one."""
    axes = set()
    for value in values:
        if value.ndim > len(shape):
            return None
        aligned = [1] * (len(shape) - value.ndim) + list(value.shape)
        axes |= {k for k, d in enumerate(aligned) if d != 1}
    return axes.pop() if len(axes) == 1 and 0 not in axes else None


def _quant_on_axis_one(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
    if node.domain not in QONNX_QUANT_DOMAINS:
        return None
    params = [graph.constant(t) for t in node.input[1:3]]
    axis = _channel_axis(shape, *params) if all(p is not None for p in params) else None
    if axis is None or axis == 1:
        return None
    perm = [0, axis] + [k for k in range(1, len(shape)) if k != axis]
    back = [perm.index(k) for k in range(len(shape))]
    name = node.name
    moved, quantized = graph.fresh(f"{name}.channels_first"), graph.fresh(f"{name}.on_axis_one")

    def per_channel(value: np.ndarray, key: str) -> str:
        aligned = value.reshape([1] * (len(shape) - value.ndim) + list(value.shape))
        return graph.add_constant(f"{name}.{key}", np.transpose(aligned, perm).astype(np.float32))

    quant = helper.make_node("Quant", [moved, per_channel(params[0], "scale"), per_channel(params[1], "zero_point"),
                                       node.input[3]], [quantized], name=name, domain=node.domain)
    quant.attribute.extend(node.attribute)
    return [helper.make_node("Transpose", [node.input[0]], [moved], name=f"{name}.to_channels", perm=perm), quant,
            helper.make_node("Transpose", [quantized], list(node.output), name=f"{name}.back", perm=back)]


def channel_quantizer_on_axis_one(model: onnx.ModelProto) -> bool:
    """A Quant whose scale or zero point varies along one axis other than 1 (Brevitas' per-channel
    quantizers of channels-last tensors, NHWC or NWC) quantizes between two Transposes that move that
    axis to 1 and back: per channel on axis 1, which the FPGA's quantizer takes (the Transposes are
    relayouts its top moves)."""
    return _replace_each(model, {"Quant"}, _quant_on_axis_one, 2)


# QONNX rounding modes by the standard op that rounds the same way (qonnx: ROUND and HALF_EVEN are np.round).
_ROUNDING_OPS = {"ROUND": "Round", "HALF_EVEN": "Round", "FLOOR": "Floor", "CEIL": "Ceil"}


def _quant_as_arithmetic(graph: ModelIndex, node: onnx.NodeProto) -> Optional[list[onnx.NodeProto]]:
    """A QONNX Quant (constant parameters) as the standard ops that compute it as qonnx's execution
    does, in float32 and in its order: x / scale + zero point, clamped to the integer range, rounded,
    less the zero point, times the scale; 1-bit signed: the sign (+-1) times the scale."""
    values = [graph.constant(t) for t in node.input[1:4]]
    mode = attribute(node, "rounding_mode", "ROUND").upper()
    if any(v is None for v in values) or values[2].size != 1 or mode not in _ROUNDING_OPS:
        return None
    scale, zero, bits = values[0], values[1], int(values[2].reshape(-1)[0])
    signed, narrow = attribute(node, "signed", 1), attribute(node, "narrow", 0)
    name, x, y = node.name, node.input[0], node.output[0]
    if bits == 1 and signed:
        return _sign_times(graph, name, x, y, scale)
    low, high = _integer_range(bits, signed, narrow)
    const = lambda key, value: graph.add_constant(f"{name}.{key}", np.asarray(value, np.float32))  # noqa: E731
    steps = [("Div", [x, const("scale", scale)]), ("Add", [const("zero_point", zero)]),
             ("Clip", [const("low", low), const("high", high)]), (_ROUNDING_OPS[mode], []),
             ("Sub", [const("zero_point_back", zero)]), ("Mul", [const("scale_back", scale)])]
    nodes, previous = [], None
    for k, (op, operands) in enumerate(steps):
        inputs = operands if previous is None else [previous] + operands
        previous = y if k == len(steps) - 1 else f"{name}.{op.lower()}"
        nodes.append(helper.make_node(op, inputs, [previous], name=f"{name}.{op.lower()}" if k else name))
    return nodes


def _sign_times(graph: ModelIndex, name: str, x: str, y: str, scale: np.ndarray) -> list[onnx.NodeProto]:
    """scale where x >= 0, else -scale (qonnx's BipolarQuant and 1-bit signed Quant)."""
    positive = graph.add_constant(f"{name}.plus", np.asarray(scale, np.float32))
    negative = graph.add_constant(f"{name}.minus", -np.asarray(scale, np.float32))
    zero = graph.add_constant(f"{name}.zero", np.zeros((), np.float32))
    return [helper.make_node("GreaterOrEqual", [x, zero], [f"{name}.not_negative"], name=name),
            helper.make_node("Where", [f"{name}.not_negative", positive, negative], [y], name=f"{name}.where")]


def _quant_as_qdq(graph: ModelIndex, node: onnx.NodeProto, zero_points: bool) -> Optional[list[onnx.NodeProto]]:
    """An 8-bit, per-tensor, ROUND, full-range QONNX Quant as a QuantizeLinear -> DequantizeLinear pair
    (int8 or uint8), which onnxruntime fuses into integer kernels: qonnx's results where the zero point
    is 0; with another (``zero_points``) QuantizeLinear's, which round x / scale before adding the zero
    point (qonnx rounds after: the two differ at ties when it is odd) and so those of a QDQ model's own
    pairs. None where the Quant is not of that kind."""
    values = [graph.constant(t) for t in node.input[1:4]]
    if any(v is None or v.size != 1 for v in values) or float(values[2].reshape(-1)[0]) != 8 or \
            attribute(node, "narrow", 0) or attribute(node, "rounding_mode", "ROUND") != "ROUND":
        return None
    signed = bool(attribute(node, "signed", 1))
    zero = float(values[1].reshape(-1)[0])
    low, high = _integer_range(8, signed, False)
    if zero != round(zero) or not low <= zero <= high or (zero != 0 and not zero_points):
        return None
    scale = graph.add_constant(f"{node.name}.scale", np.asarray(values[0].reshape(-1)[0], np.float32))
    zero_point = graph.add_constant(f"{node.name}.zero_point",
                                    np.asarray(int(zero), np.int8 if signed else np.uint8))
    codes = f"{node.name}.codes"
    return [helper.make_node("QuantizeLinear", [node.input[0], scale, zero_point], [codes], name=node.name),
            helper.make_node("DequantizeLinear", [codes, scale, zero_point], [node.output[0]],
                             name=f"{node.name}.dequantize")]


def quantizers_as_standard_onnx(model: onnx.ModelProto, zero_points_as_qdq: bool = False) -> bool:
    """Every QONNX Quant and BipolarQuant with constant parameters as standard ONNX, so that
    onnxruntime alone runs the model (a CPU subfunction on the board): a QuantizeLinear/DequantizeLinear
    pair where one computes it (``_quant_as_qdq``; with a zero point only for a model that was QDQ,
    ``zero_points_as_qdq``), else qonnx's own arithmetic (``_quant_as_arithmetic``, ``_sign_times``);
    other QONNX ops stay (the caller refuses them for the board)."""
    def standard(graph: ModelIndex, node: onnx.NodeProto) -> Optional[list[onnx.NodeProto]]:
        if node.op_type == "Quant":
            return _quant_as_qdq(graph, node, zero_points_as_qdq) or _quant_as_arithmetic(graph, node)
        scale = graph.constant(node.input[1])
        return None if scale is None else _sign_times(graph, node.name, node.input[0], node.output[0], scale)

    changed = _replace_qonnx(model, {"Quant", "BipolarQuant"}, standard)
    if changed:
        g = model.graph
        read = {t for n in g.node for t in n.input}
        kept_constants = [t for t in g.initializer if t.name in read]
        del g.initializer[:]
        g.initializer.extend(kept_constants)
        used = {n.domain for n in g.node} | {"", "ai.onnx"}
        kept = [o for o in model.opset_import if o.domain in used]
        del model.opset_import[:]
        model.opset_import.extend(kept)
    return changed


def _axes(graph: ModelIndex, node: onnx.NodeProto) -> Optional[list[int]]:
    """An Unsqueeze's or Squeeze's axes: its attribute (opset < 13) or its constant input."""
    if len(node.input) > 1:
        value = graph.constant(node.input[1])
        return None if value is None else [int(a) for a in value.reshape(-1)]
    return attribute(node, "axes")


def batchnorm_without_squeezes(model: onnx.ModelProto) -> bool:
    """Unsqueeze -> BatchNormalization -> Squeeze over the same trailing axes (FINN's tidied models
    normalise [N, C] as [N, C, 1]) is the BatchNormalization on [N, C]: the channels stay axis 1."""
    graph = ModelIndex(model)
    changed = False
    for squeeze in list(graph.g.node):
        bn = graph.producer.get(squeeze.input[0]) if squeeze.op_type == "Squeeze" else None
        unsqueeze = graph.producer.get(bn.input[0]) if bn is not None and bn.op_type == "BatchNormalization" else None
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or graph.sole_consumer(bn.output[0]) is not squeeze \
                or graph.sole_consumer(unsqueeze.output[0]) is not bn:
            continue
        axes, rank = _axes(graph, unsqueeze), len(graph.shapes.get(unsqueeze.input[0], []))
        if not axes or not rank or axes != _axes(graph, squeeze) or any(a < 2 or a < rank for a in axes):
            continue
        bn.input[0], bn.output[0] = unsqueeze.input[0], squeeze.output[0]
        graph.remove(unsqueeze)
        graph.remove(squeeze)
        graph = ModelIndex(model)
        changed = True
    return changed


def channel_arithmetic_as_batchnorm(model: onnx.ModelProto) -> bool:
    """A feature map (rank 3 or more) added to, multiplied or divided by a constant per channel (or one constant;
    Caffe2's scale and bias after a BatchNormalization, as the model zoo's DenseNet-121 has them) is the
    BatchNormalization of that scale or shift (``constant_arithmetic_to_affine``'s): folded into the layer or
    normalisation before it where there is one (``fold_batchnorm``), else computed as one."""
    return _replace_each(model, {"Add", "Sub", "Mul", "Div"},
                         functools.partial(_arithmetic_as_affine, min_rank=3), 0)


def fold_bias_add(model: onnx.ModelProto) -> bool:
    """Conv or Gemm followed by the Add of a constant per output channel: the constant joins the
    layer's bias."""
    graph = ModelIndex(model)
    changed = False
    for node in list(graph.g.node):
        if node.op_type not in ("Conv", "Gemm") or graph.constant(node.input[1]) is None:
            continue
        add = graph.sole_consumer(node.output[0])
        out = graph.shapes.get(node.output[0])
        if add is None or add.op_type != "Add" or out is None or len(out) < 2:
            continue
        other = add.input[1] if add.input[0] == node.output[0] else add.input[0]
        value = graph.constant(other)
        channels = out[1]
        if value is None or value.size != channels:
            continue
        aligned = [1] * (len(out) - value.ndim) + list(value.shape)
        if len(aligned) != len(out) or aligned[1] != channels:
            continue
        if node.op_type == "Gemm" and (attribute(node, "transA", 0) or attribute(node, "beta", 1.0) != 1.0):
            continue
        bias = value.reshape(channels)
        if len(node.input) > 2 and node.input[2]:
            given = graph.constant(node.input[2])
            if given is None or given.size not in (1, channels):
                continue
            bias = bias + np.broadcast_to(given.reshape(-1), (channels,))
            node.input[2] = graph.add_constant(f"{node.name}.bias", bias.astype(value.dtype))
        else:
            node.input.append(graph.add_constant(f"{node.name}.bias", bias.astype(value.dtype)))
        node.output[0] = add.output[0]
        graph.remove(add)
        graph = ModelIndex(model)
        changed = True
    return changed


def reshape_to_flatten(model: onnx.ModelProto) -> bool:
    """A Reshape of (N, C, ...) to (N, C x ...) by a constant shape (torch's flatten, and the old
    Shape -> Gather -> Concat -> Reshape once folded) is a Flatten."""
    graph = ModelIndex(model)
    changed = False
    for node in graph.g.node:
        if node.op_type != "Reshape" or graph.constant(node.input[1]) is None:
            continue
        source, result = graph.shapes.get(node.input[0]), graph.shapes.get(node.output[0])
        if source is None or result is None or len(source) < 3 or len(result) != 2 or min(source) <= 0:
            continue
        if result != [source[0], math.prod(source[1:])]:
            continue
        node.op_type = "Flatten"
        del node.input[1:]
        del node.attribute[:]
        node.attribute.append(helper.make_attribute("axis", 1))
        changed = True
    return changed


def reduce_mean_to_global_average_pool(model: onnx.ModelProto) -> bool:
    """ReduceMean over every spatial axis is GlobalAveragePool (followed by a Flatten when it drops
    the reduced axes)."""
    def replacement(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
        axes = attribute(node, "axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            given = graph.constant(node.input[1])
            axes = None if given is None else given.tolist()
        if axes is None or sorted(a % len(shape) for a in axes) != list(range(2, len(shape))):
            return None
        if attribute(node, "keepdims", 1):
            return [helper.make_node("GlobalAveragePool", [node.input[0]], list(node.output[:1]), name=node.name)]
        pooled = f"{node.name}.pooled"
        return [helper.make_node("GlobalAveragePool", [node.input[0]], [pooled], name=node.name),
                helper.make_node("Flatten", [pooled], list(node.output[:1]), name=f"{node.name}.flatten", axis=1)]

    return _replace_each(model, {"ReduceMean"}, replacement, 3)


def sum_to_add(model: onnx.ModelProto) -> bool:
    """Sum of two tensors is Add; of more, a chain of Adds (the last keeps the name)."""
    def replacement(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
        if node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            return None
        return _pairs(node, "Add", node.input[0], 1, {})

    return _replace_each(model, {"Sum"}, replacement, 0)


def split_concat(model: onnx.ModelProto) -> bool:
    """A Concat of three or more tensors becomes a chain of two-input Concats (hls4ml merges two
    tensors at a time); the last keeps the name. The chain starts from the output of an earlier Concat
    (or chain part) along the same axis of the longest prefix of its inputs, where there is one: a
    DenseNet as torchvision writes it concatenates all of a block's features before each layer (the
    k-th layer's Concat would be k - 1 Concats, the block's quadratic in its layers), now one Concat
    a layer, of the previous layer's and the newest feature, the same values in the same order."""
    made: dict[tuple[int, tuple[str, ...]], str] = {}  # (axis, inputs) of a Concat seen -> its output

    def replacement(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
        if node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            return None
        axis, inputs = attribute(node, "axis") % len(shape), tuple(node.input)
        start = next((j for j in range(len(inputs) - 1, 1, -1) if (axis, inputs[:j]) in made), 1)
        chain = _pairs(node, "Concat", made[(axis, inputs[:start])] if start > 1 else inputs[0], start,
                       {"axis": axis})
        made.update({(axis, inputs[:start + k + 1]): part.output[0] for k, part in enumerate(chain)})
        return chain if len(inputs) > 2 or start > 1 else None

    return _replace_each(model, {"Concat"}, replacement, 1)


def _pairs(node: onnx.NodeProto, pair_op: str, left: str, start: int,
           attributes: dict) -> list[onnx.NodeProto]:
    """``left``, then ``node``'s inputs from ``start`` on one at a time, joined by two-input ``pair_op``
    nodes of ``attributes``: part k's output ``<node>.part<k>_output``, the last one ``node``'s
    output and name."""
    chain = []
    for k in range(start, len(node.input)):
        last = k == len(node.input) - 1
        out = node.output[0] if last else f"{node.name}.part{k}_output"
        chain.append(helper.make_node(pair_op, [left, node.input[k]], [out],
                                      name=node.name if last else f"{node.name}.part{k}", **attributes))
        left = out
    return chain


def zipmap_to_tensor(model: onnx.ModelProto) -> bool:
    """A ZipMap (ai.onnx.ml: skl2onnx's classifiers) that makes a graph output turns a probability
    tensor into a sequence of {class: probability} maps, which no device passes on: the output
    becomes that tensor itself, its columns in the classes' order (``OrtModel.run`` gives the user's
    model's maps the same form, so the two compare)."""
    graph = ModelIndex(model)
    changed = False
    for node in list(graph.g.node):
        if node.op_type != "ZipMap" or node.output[0] not in graph.outputs:
            continue
        source, result = node.input[0], node.output[0]
        shape = graph.shapes.get(source)
        graph.remove(node)
        graph.g.node.append(helper.make_node("Identity", [source], [result], name=node.name))
        for k, value in enumerate(graph.g.output):
            if value.name == result:
                graph.g.output[k].CopyFrom(helper.make_tensor_value_info(result, onnx.TensorProto.FLOAT, shape))
        changed = True
    return changed


def cast_like_of_constant_as_cast(model: onnx.ModelProto) -> bool:
    """A CastLike of a constant (an initializer, or a Constant's output) is a Cast to its second input's type, which
    constant folding makes a constant: onnxruntime's folding leaves a CastLike alone while its second input is a
    tensor the model computes, and onnx's function bodies (Celu, Gelu, HardSwish...) cast their constants so. Left
    as it is, such a scalar crossed a cut between subfunctions, where no batch axis stacks it."""
    graph = ModelIndex(model)
    types = {v.name: v.type.tensor_type.elem_type for v in (*graph.g.value_info, *graph.g.input, *graph.g.output)}
    types.update({t.name: t.data_type for t in graph.g.initializer})
    changed = False
    for k, node in enumerate(graph.g.node):
        made = graph.producer.get(node.input[0]) if node.input else None
        constant = node.input and (node.input[0] in graph.inits or made is not None and made.op_type == "Constant")
        if node.op_type != "CastLike" or node.domain not in ("", "ai.onnx") or not constant or \
                not types.get(node.input[1]):
            continue
        cast = helper.make_node("Cast", [node.input[0]], list(node.output), name=node.name, to=types[node.input[1]])
        cast.attribute.extend(a for a in node.attribute if a.name != "to")
        graph.g.node[k].CopyFrom(cast)
        changed = True
    return changed



def shared_dequantizers(model: onnx.ModelProto) -> bool:
    """DequantizeLinear nodes of the same inputs and attributes as one node, its output read by all their readers:
    onnxruntime's ``quantize_static`` (QDQ) gives each reader of a quantized tensor a DequantizeLinear of its own
    (".../duplicated"), and qonnx's QCDQToQuant turns one QuantizeLinear with one of them into a Quant, leaving the
    others reading a tensor no node writes. A twin whose output is a graph output, or in a model with subgraphs
    (which may read it by name), is left alone."""
    graph = ModelIndex(model)
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in graph.g.node
           for a in n.attribute):
        return False
    outputs = {o.name for o in graph.g.output}
    first: dict[bytes, onnx.NodeProto] = {}
    renamed: dict[str, str] = {}
    kept = []
    for node in graph.g.node:
        if node.op_type == "DequantizeLinear" and node.domain in ("", "ai.onnx") and node.output[0] not in outputs:
            key = onnx.NodeProto(input=node.input, attribute=node.attribute).SerializeToString(deterministic=True)
            if key in first:
                renamed[node.output[0]] = first[key].output[0]
                continue
            first[key] = node
        kept.append(node)
    if not renamed:
        return False
    for node in kept:
        node.input[:] = [renamed.get(name, name) for name in node.input]
    del graph.g.node[:]
    graph.g.node.extend(kept)
    return True


# Integer types under a byte and the byte-wide type of the same signedness that holds their values
_SUB_BYTE = {getattr(onnx.TensorProto, name): getattr(onnx.TensorProto, wide)
             for name, wide in (("INT4", "INT8"), ("UINT4", "UINT8"), ("INT2", "INT8"), ("UINT2", "UINT8"))
             if hasattr(onnx.TensorProto, name)}


def onnxruntime_quantizers_as_standard(model: onnx.ModelProto) -> bool:
    """onnxruntime's ``quantize_static`` with 4-bit weights (``weight_type`` QInt4, QUInt4) as standard ONNX: their
    codes (and zero points), constants only DequantizeLinear nodes read, held in 8-bit integers of the same
    signedness (the same values), and the QuantizeLinear and DequantizeLinear nodes it writes in its com.microsoft
    domain (at an opset whose own take no 4-bit type) of 8-bit codes then in the standard domain, whose ops compute
    the same: onnx's shape inference follows those, and qonnx's QCDQToQuant knows no type under 8 bits."""
    graph = ModelIndex(model)
    held = [t for t in graph.g.initializer if t.data_type in _SUB_BYTE and all(
        node.op_type == "DequantizeLinear" and node.input[0] in graph.inits and
        all(k in (0, 2) for k, name in enumerate(node.input) if name == t.name)
        for node in graph.consumers.get(t.name, []))]
    for tensor in held:
        values = np.asarray(numpy_helper.to_array(tensor), dtype=helper.tensor_dtype_to_np_dtype(
            _SUB_BYTE[tensor.data_type]))
        tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))
    moved = False
    for node in graph.g.node:
        if node.domain != "com.microsoft" or node.op_type not in ("QuantizeLinear", "DequantizeLinear") or \
                any(a.name != "axis" for a in node.attribute):
            continue
        codes = node.input[2] if len(node.input) > 2 and node.input[2] else \
            node.input[0] if node.op_type == "DequantizeLinear" else None
        if codes in graph.inits and graph.inits[codes].data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8):
            node.domain = ""
            moved = True
    return bool(held) or moved


class _QOperator(NamedTuple):
    """An op of onnxruntime's QOperator format as the float op between dequantizers and a quantizer: its quantized
    operands' (codes, scale, zero point) inputs, the inputs of its output's scale and zero point (None: its output
    is float), an int32 bias's input (its scale the first two operands' product, its zero point 0) and the axis of
    the second operand's per-channel scale (by the float op's attributes)."""
    float_op: str
    operands: tuple[tuple[int, int, int], ...]
    output: Optional[tuple[int, int]]
    bias: Optional[int] = None
    weight_axis: Callable[[dict], int] = lambda attrs: 0


_UNARY = ((0, 1, 2),), (3, 4)
_BINARY = ((0, 1, 2), (3, 4, 5)), (6, 7)
# onnxruntime's QOperator ops (quantize_static with QuantFormat.QOperator: QLinearConv and QLinearMatMul of the
# standard domain, the rest of com.microsoft) whose float forms are standard ONNX ops (QLinearSoftmax's axis
# follows an opset attribute, QLinearWhere and the rest are not here); QLinearConcat's operands are as many as its
# inputs give, after the output's scale and zero point
QOPERATOR_OPS = {
    "QLinearConv": _QOperator("Conv", ((0, 1, 2), (3, 4, 5)), (6, 7), bias=8),
    "QLinearMatMul": _QOperator("MatMul", *_BINARY, weight_axis=lambda attrs: -1),
    "QGemm": _QOperator("Gemm", ((0, 1, 2), (3, 4, 5)), (7, 8), bias=6,
                        weight_axis=lambda attrs: 0 if attrs.get("transB", 0) else 1),
    "QLinearAdd": _QOperator("Add", *_BINARY),
    "QLinearMul": _QOperator("Mul", *_BINARY),
    "QLinearGlobalAveragePool": _QOperator("GlobalAveragePool", *_UNARY),
    "QLinearAveragePool": _QOperator("AveragePool", *_UNARY),
    "QLinearLeakyRelu": _QOperator("LeakyRelu", *_UNARY),
    "QLinearSigmoid": _QOperator("Sigmoid", *_UNARY),
    "QLinearConcat": _QOperator("Concat", (), (0, 1)),
}
# Ops onnxruntime's QOperator format runs on the codes themselves, which commute with dequantization
# (a monotonic affine map per tensor): as the float op between a dequantizer and a quantizer of the same scale
# and zero point they give the same codes, and qonnx's QCDQToQuant finds every quantizer's dequantizer
CODE_OPS = {"MaxPool", "GlobalMaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity",
            "DepthToSpace", "SpaceToDepth", "Slice"}


def _qoperator_as_qdq(graph: ModelIndex, node: onnx.NodeProto) -> Optional[list[onnx.NodeProto]]:
    """``node`` (an op of QOPERATOR_OPS) as dequantizers, the float op and a quantizer, as ``quantize_static``
    writes the QDQ format; None where this cannot be said exactly (a scale that is not a constant, an operand's
    per-channel scale other than the weights', a zero point left out of an output, channels-last data, a QGemm
    alpha other than 1): the op then stays, and no device runs it."""
    spec = QOPERATOR_OPS[node.op_type]
    base = node.name or node.output[0]  # the new nodes' and tensors' names
    inputs = list(node.input)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    operands = spec.operands or tuple((k, k + 1, k + 2) for k in range(2, len(inputs) - 2, 3))
    # QGemm's output is float where it has no scale
    output = spec.output if spec.output and len(inputs) > spec.output[0] and inputs[spec.output[0]] else None
    if attrs.pop("channels_last", 0) or attrs.get("alpha", 1.0) != 1.0 and node.op_type == "QGemm" or \
            output and (len(inputs) <= output[1] or not inputs[output[1]]) or spec.output and not output and \
            node.op_type != "QGemm":
        return None
    scales = [graph.constant(inputs[s]) if s < len(inputs) and inputs[s] else None for _, s, _ in operands]
    if any(scale is None for scale in scales):
        return None
    nodes, float_inputs = [], []
    for k, ((value, scale, zero), scale_value) in enumerate(zip(operands, scales)):
        dequantize = helper.make_node("DequantizeLinear", [inputs[value], inputs[scale],
                                                          inputs[zero] if zero < len(inputs) else ""],
                                      [graph.fresh(f"{base}/dequantized_{k}")], name=f"{base}/dequantize_{k}")
        if scale_value.size > 1:
            if k != 1 or inputs[value] not in graph.inits or spec.float_op not in ("Conv", "MatMul", "Gemm"):
                return None
            set_attribute(dequantize, "axis", spec.weight_axis(attrs))
        graph.producer[dequantize.output[0]] = dequantize
        nodes.append(dequantize)
        float_inputs.append(dequantize.output[0])
    if spec.bias is not None and spec.bias < len(inputs) and inputs[spec.bias]:
        bias_scale = graph.add_constant(f"{base}/bias_scale", (scales[0].reshape(-1)[:1] * scales[1]).astype(
            np.float32).reshape(scales[1].shape))
        zero = graph.add_constant(f"{base}/bias_zero_point", np.zeros(scales[1].shape, np.int32))
        bias = helper.make_node("DequantizeLinear", [inputs[spec.bias], bias_scale, zero],
                                [graph.fresh(f"{base}/dequantized_bias")], name=f"{base}/dequantize_bias")
        if scales[1].size > 1:
            set_attribute(bias, "axis", 0)
        graph.producer[bias.output[0]] = bias
        nodes.append(bias)
        float_inputs.append(bias.output[0])
    result = graph.fresh(f"{base}/float") if output else node.output[0]
    nodes.append(helper.make_node(spec.float_op, float_inputs, [result], name=node.name, **attrs))
    graph.producer[result] = nodes[-1]
    if output:
        scale, zero = output
        nodes.append(helper.make_node("QuantizeLinear", [result, inputs[scale], inputs[zero]], list(node.output),
                                      name=f"{base}/quantize"))
    return nodes


def _codes_as_qdq(graph: ModelIndex, node: onnx.NodeProto, scale: str, zero: str) -> list[onnx.NodeProto]:
    """A CODE_OPS node on the codes of a quantizer of ``scale`` and ``zero`` as that op between a dequantizer and a
    quantizer of them."""
    base = node.name or node.output[0]
    dequantized, result = graph.fresh(f"{base}/dequantized"), graph.fresh(f"{base}/float")
    graph.producer[dequantized] = graph.producer[result] = node
    floating = onnx.NodeProto()
    floating.CopyFrom(node)
    floating.input[0], floating.output[0] = dequantized, result
    return [helper.make_node("DequantizeLinear", [node.input[0], scale, zero], [dequantized],
                             name=f"{base}/dequantize"),
            floating,
            helper.make_node("QuantizeLinear", [result, scale, zero], [node.output[0]], name=f"{base}/quantize")]


def qoperator_as_qdq(model: onnx.ModelProto) -> bool:
    """onnxruntime's QOperator format (QLinearConv, QLinearAdd, QGemm...; ``QOPERATOR_OPS``) as its QDQ format: each
    such op the float op between dequantizers of its operands (weights per channel on their axis, an int32 bias at
    the product of its operands' scales) and a quantizer of its output, and each op of the codes (``CODE_OPS``: a
    MaxPool, a Flatten) that op between a dequantizer and a quantizer of the codes' own scale. onnx's shape inference
    does not follow the com.microsoft ops, and no device runs them; the QDQ form is what intake takes for every
    quantized model. The reference the builds compare with stays the model as written, which onnxruntime runs."""
    graph = ModelIndex(model)
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in graph.g.node
           for a in n.attribute):
        return False
    changed = False
    for node in list(graph.g.node):
        if node.op_type in QOPERATOR_OPS and node.domain in ("", "ai.onnx", "com.microsoft") and \
                (node.domain == "com.microsoft") == (node.op_type not in ("QLinearConv", "QLinearMatMul")):
            nodes = _qoperator_as_qdq(graph, node)
            if nodes is not None:
                _splice(graph, node, nodes)
                changed = True
    if not changed:
        return False
    codes: dict[str, tuple[str, str]] = {}  # a quantizer's output -> its scale and zero point
    for node in list(graph.g.node):
        if node.op_type == "QuantizeLinear" and len(node.input) == 3 and node.input[2] and \
                all(t in graph.inits and list(graph.inits[t].dims) in ([], [1]) for t in node.input[1:]):
            codes[node.output[0]] = (node.input[1], node.input[2])
        elif node.op_type in CODE_OPS and node.domain in ("", "ai.onnx") and len(node.output) == 1 and \
                node.input[0] in codes and not any(t in codes for t in node.input[1:]):
            nodes = _codes_as_qdq(graph, node, *codes[node.input[0]])
            _splice(graph, node, nodes)
            codes[node.output[0]] = codes[node.input[0]]
    return True


Pass = Callable[[onnx.ModelProto], bool]
# In order: attributes first (later passes read them), then the fusions, then the op renamings.
PASSES: list[Pass] = [
    zipmap_to_tensor,
    eliminate_identity,
    explicit_attributes,
    normalise_gemm,
    matmul_add_to_gemm,
    conv_transpose_as_conv,
    batchnorm_without_squeezes,
    channel_arithmetic_as_batchnorm,
    fold_batchnorm,
    fold_bias_add,
    reshape_to_flatten,
    reduce_mean_to_global_average_pool,
    sum_to_add,
    split_concat,
]


# ---------------------------------------------------------------- lowerings for hls4ml
# Exact rewrites of ops hls4ml 1.3 cannot convert (or converts wrongly) into ops it converts right;
# applied to an execution unit's model just before hls4ml (its ONNX reference keeps the op).

def _affine(graph: ModelIndex, name: str, source: str, result: str, scale, shift) -> onnx.NodeProto:
    """scale * x + shift per channel, as the BatchNormalization hls4ml converts (mean 0, variance 1,
    epsilon 0: exactly that)."""
    node = helper.make_node("BatchNormalization", [source, "", "", "", ""], [result], name=name)
    _set_affine(graph, node, scale, shift)
    return node


def _average_as_depthwise_conv(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
    if node.op_type == "GlobalAveragePool":
        kernel, strides, pads = shape[2:], [1] * (len(shape) - 2), [0] * (2 * (len(shape) - 2))
    elif attribute(node, "ceil_mode", 0) or (any(attribute(node, "pads", [])) and
                                             not attribute(node, "count_include_pad", 0)):
        return None  # the divisor changes at the borders
    else:
        kernel = attribute(node, "kernel_shape")
        strides = attribute(node, "strides", [1] * len(kernel))
        pads = attribute(node, "pads", [0] * (2 * len(kernel)))
    weights = np.full([shape[1], 1, *kernel], 1.0 / math.prod(kernel), dtype=np.float32)
    return [helper.make_node("Conv", [node.input[0], graph.add_constant(f"{node.name}.average", weights)],
                             list(node.output[:1]), name=node.name, kernel_shape=list(kernel), strides=list(strides),
                             pads=list(pads), dilations=[1] * len(kernel), group=shape[1])]


def average_pool_to_depthwise_conv(model: onnx.ModelProto) -> bool:
    """GlobalAveragePool and AveragePool (no padding, or padding counted) are depthwise
    convolutions with weights 1/(kernel size): hls4ml averages a channels-last buffer as if it were
    channels-first, and has no channels-last AveragePool at all."""
    return _replace_each(model, {"GlobalAveragePool", "AveragePool"}, _average_as_depthwise_conv, 3)


def global_max_pool_to_max_pool(model: onnx.ModelProto) -> bool:
    """GlobalMaxPool is a MaxPool whose kernel and strides are the input's spatial size (hls4ml's
    global pooling reads a channels-last buffer as channels-first)."""
    return _replace_each(model, {"GlobalMaxPool"}, lambda graph, node, shape: [
        helper.make_node("MaxPool", [node.input[0]], list(node.output), name=node.name, kernel_shape=shape[2:],
                         strides=shape[2:], pads=[0] * (2 * (len(shape) - 2)))], 3)


def _per_channel(value: np.ndarray, rank: int, channels: int) -> Optional[np.ndarray]:
    """``value`` as one number per channel when it broadcasts along axis 1 only, else None."""
    if value.ndim > rank:
        return None
    aligned = value.reshape([1] * (rank - value.ndim) + list(value.shape))
    if any(d != 1 for k, d in enumerate(aligned.shape) if k != 1) or aligned.shape[1] not in (1, channels):
        return None
    return np.broadcast_to(aligned.reshape(-1), (channels,)).astype(np.float32)


def _arithmetic_as_affine(graph: ModelIndex, node: onnx.NodeProto, shape: list[int], min_rank: int = 2):
    """``node``'s arithmetic of a constant per channel as a BatchNormalization, where its other input's rank is
    ``min_rank`` or more (at least 2: axis 1 its channels)."""
    if len(node.input) != 2:
        return None
    constant = [k for k in (0, 1) if graph.constant(node.input[k]) is not None]
    if len(constant) != 1 or (node.op_type in ("Sub", "Div") and constant != [1]):
        return None
    source = node.input[1 - constant[0]]
    shape = graph.shapes.get(source, [])
    value = _per_channel(graph.constant(node.input[constant[0]]), len(shape), shape[1]) \
        if len(shape) >= max(2, min_rank) else None
    if value is None:
        return None
    ones, zeros = np.ones_like(value), np.zeros_like(value)
    scale, shift = {"Add": (ones, value), "Sub": (ones, -value), "Mul": (value, zeros),
                    "Div": (1.0 / value, zeros)}[node.op_type]
    return [_affine(graph, node.name, source, node.output[0], scale, shift)]


def constant_arithmetic_to_affine(model: onnx.ModelProto) -> bool:
    """Add, Sub, Mul or Div of a tensor by a constant per channel (or one constant) is a
    BatchNormalization without statistics, which hls4ml converts and folds into the layer before.
    (The constant may come first: the shape looked at is the tensor's.)"""
    return _replace_each(model, {"Add", "Sub", "Mul", "Div"}, _arithmetic_as_affine, 0)


def _clip_as_relus(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
    bounds = [graph.constant(node.input[k]) if len(node.input) > k and node.input[k] else np.array(default)
              for k, default in ((1, -np.inf), (2, np.inf))]
    if any(b is None or b.size != 1 for b in bounds):
        return None
    lo, hi = (float(b.reshape(-1)[0]) for b in bounds)
    ones = np.ones(shape[1])
    step = lambda k: f"{node.name}.clip{k}"  # noqa: E731
    nodes, x, offset = [], node.input[0], 0.0
    if math.isfinite(lo):  # relu(x - lo); its offset lo goes into the next step
        nodes += [_affine(graph, step(0), x, f"{step(0)}_output", ones, -lo * ones),
                  helper.make_node("Relu", [f"{step(0)}_output"], [f"{step(1)}_output"], name=step(1))]
        x, offset = f"{step(1)}_output", lo
    if math.isfinite(hi):  # hi - relu(hi - (x + offset))
        return nodes + [_affine(graph, step(2), x, f"{step(2)}_output", -ones, (hi - offset) * ones),
                        helper.make_node("Relu", [f"{step(2)}_output"], [f"{step(3)}_output"], name=step(3)),
                        _affine(graph, step(4), f"{step(3)}_output", node.output[0], -ones, hi * ones)]
    return nodes + [_affine(graph, step(4), x, node.output[0], ones, offset * ones)]


def clip_to_relus(model: onnx.ModelProto) -> bool:
    """Clip(x, lo, hi) = hi - relu(hi - lo - relu(x - lo)): affine steps and ReLUs, each exact in
    fixed point (hls4ml has no Clip, and its ReLU6 is not streamed). A missing bound drops its
    half."""
    return _replace_each(model, {"Clip"}, _clip_as_relus)


def hard_sigmoid_to_clip(model: onnx.ModelProto) -> bool:
    """HardSigmoid(x) = Clip(alpha x + beta, 0, 1) (hls4ml's ONNX frontend has no HardSigmoid)."""
    def replacement(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
        scaled, ones = f"{node.name}.affine_output", np.ones(shape[1])
        bounds = [graph.add_constant(f"{node.name}.{k}", np.array(v, np.float32))
                  for k, v in (("lo", 0.0), ("hi", 1.0))]
        return [_affine(graph, f"{node.name}.affine", node.input[0], scaled, attribute(node, "alpha", 0.2) * ones,
                        attribute(node, "beta", 0.5) * ones),
                helper.make_node("Clip", [scaled, *bounds], list(node.output), name=node.name)]

    return _replace_each(model, {"HardSigmoid"}, replacement)


def pad_value_to_zero(model: onnx.ModelProto) -> bool:
    """Pad with a constant c other than 0 is c + Pad(x - c, 0) (hls4ml pads with zeros only)."""
    def replacement(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
        value = graph.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if value is None or value.size != 1 or float(value.reshape(-1)[0]) == 0.0:
            return None
        c, ones = float(value.reshape(-1)[0]), np.ones(shape[1])
        shifted, padded = f"{node.name}.shifted", f"{node.name}.padded"
        return [_affine(graph, f"{node.name}.shift", node.input[0], shifted, ones, -c * ones),
                helper.make_node("Pad", [shifted, node.input[1]], [padded], name=node.name, mode="constant"),
                _affine(graph, f"{node.name}.unshift", padded, node.output[0], ones, c * ones)]

    return _replace_each(model, {"Pad"}, replacement)


def gemm_bias(model: onnx.ModelProto) -> bool:
    """A Gemm without C gets a zero bias (qonnx's GemmToMatMul, on the way to hls4ml, needs one)."""
    def replacement(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
        out = graph.shapes.get(node.output[0])
        if (len(node.input) > 2 and node.input[2]) or out is None or len(out) != 2:
            return None
        gemm = onnx.NodeProto()
        gemm.CopyFrom(node)
        del gemm.input[2:]
        gemm.input.append(graph.add_constant(f"{node.name}.zero_bias", np.zeros(out[1], np.float32)))
        return [gemm]

    return _replace_each(model, {"Gemm"}, replacement)


def _quant_on_integer_codes(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
    parameters = [graph.constant(t) for t in node.input[1:3]]
    if any(p is None for p in parameters):
        return None
    scale, zero_point = (_per_channel(p, len(shape), shape[1]) for p in parameters)
    if scale is None or zero_point is None:
        return None  # neither one value nor one per channel: the board's limits keep it off the FPGA
    if parameters[0].size == 1 and math.frexp(float(scale[0]))[0] == 0.5 and not np.any(zero_point):
        return None  # a fixed-point cast already
    codes, quantized = graph.fresh(f"{node.name}.codes"), graph.fresh(f"{node.name}.quantized")
    unit_scale, no_zero = (graph.add_constant(f"{node.name}.{k}", np.array(v, np.float32))
                           for k, v in (("unit_scale", 1.0), ("zero", 0.0)))
    quant = helper.make_node("Quant", [codes, unit_scale, no_zero, node.input[3]], [quantized], name=node.name,
                             domain=node.domain)
    quant.attribute.extend(node.attribute)
    ones = np.ones_like(scale)
    return [_affine(graph, f"{node.name}.to_codes", node.input[0], codes, ones / scale, zero_point), quant,
            _affine(graph, f"{node.name}.from_codes", quantized, node.output[0], scale, -zero_point * scale)]


def quant_scale_to_affine(model: onnx.ModelProto) -> bool:
    """A QONNX Quant whose scale is not one power of two (or whose zero point is not 0), as
    onnxruntime's quantizer and Brevitas' float and per-channel scales write them, is
    scale * (Quant_1(x / scale + zero point) - zero point) per channel:
    affine steps around a quantizer of integer codes, which is a fixed-point cast. Not exact: 1 / scale
    and scale are themselves rounded to fixed point."""
    return _replace_each(model, {"Quant"}, _quant_on_integer_codes)


def _narrow_unsigned_as_clip(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
    values = [graph.constant(t) for t in node.input[1:4]]
    if attribute(node, "signed", 1) or not attribute(node, "narrow", 0) or \
            any(v is None or v.size != 1 for v in values):
        return None
    scale, zero_point, bits = (float(v.reshape(-1)[0]) for v in values)
    full_range = graph.fresh(f"{node.name}.full_range")
    graph.g.value_info.append(helper.make_tensor_value_info(full_range, onnx.TensorProto.FLOAT, shape))
    top = graph.add_constant(f"{node.name}.top", np.asarray((2.0 ** bits - 2 - zero_point) * scale, np.float32))
    quant = helper.make_node("Quant", list(node.input), [full_range], name=node.name, domain=node.domain)
    quant.attribute.extend(a for a in node.attribute if a.name != "narrow")
    quant.attribute.append(helper.make_attribute("narrow", 0))
    return [quant, helper.make_node("Clip", [full_range, "", top], list(node.output), name=f"{node.name}.narrow")]


def narrow_unsigned_quant_as_clip(model: onnx.ModelProto) -> bool:
    """An unsigned narrow-range Quant (codes 0 .. 2^bits - 2), which hls4ml refuses ("Narrow mode is
    only supported for signed numbers"), is the full-range Quant clipped at its top code: the same
    values. After ``quant_scale_to_affine``, so that the clip works on codes (times a power of two),
    exactly, and merges with no rescaling step."""
    return _replace_each(model, {"Quant"}, _narrow_unsigned_as_clip, 1)


def _bipolar_times_scale(graph: ModelIndex, node: onnx.NodeProto, shape: list[int]):
    scale = graph.constant(node.input[1])
    factor = _per_channel(scale, len(shape), shape[1]) if scale is not None else None
    if factor is None or np.all(factor == 1.0):
        return None
    signs = graph.fresh(f"{node.name}.signs")
    unit = graph.add_constant(f"{node.name}.unit_scale", np.array(1.0, np.float32))
    return [helper.make_node("BipolarQuant", [node.input[0], unit], [signs], name=node.name, domain=node.domain),
            _affine(graph, f"{node.name}.scaled", signs, node.output[0], factor, np.zeros_like(factor))]


def bipolar_scale_to_affine(model: onnx.ModelProto) -> bool:
    """A BipolarQuant of scale s (one, or one per channel) is s * BipolarQuant_1: hls4ml converts only
    the unit scale (its binary_tanh, +1 where x >= 0, else -1, as qonnx)."""
    return _replace_each(model, {"BipolarQuant"}, _bipolar_times_scale)


def batchnorm_before_sign_as_threshold(model: onnx.ModelProto) -> bool:
    """An affine step a * x + b read only by a unit-scale BipolarQuant (a BatchNormalization before a
    binary activation, as FINN's thresholds compute it) becomes sign(a) * x + b / |a|: the same sign
    (a positive factor does not change it), and a comparison of the layer's exact result with a
    threshold -b / a instead of a product rounded to fixed point near 0. A zero a: b, whose sign it is."""
    graph = ModelIndex(model)
    changed = False
    for node in graph.g.node:
        reader = graph.sole_consumer(node.output[0]) if node.op_type == "BatchNormalization" else None
        affine = _affine_of(graph, node) if reader is not None and reader.op_type == "BipolarQuant" else None
        scale = graph.constant(reader.input[1]) if affine is not None else None
        if scale is None or np.any(scale != 1.0):
            continue
        factor, shift = affine
        if np.all(np.abs(factor) == 1.0):
            continue  # a threshold already
        magnitude = np.where(factor == 0, 1.0, np.abs(factor))
        _set_affine(graph, node, np.sign(factor), shift / magnitude)
        changed = True
    return changed


def positive_scale_before_relu(model: onnx.ModelProto) -> bool:
    """relu(x) * c + d is relu(c * x) + d for c > 0: a quantizer's scaling step (an affine step with
    positive factors) moves before the ReLU that feeds it, where it merges with the layer's own
    affine step (``fold_batchnorm``), so that one multiply-and-round per channel requantizes."""
    graph = ModelIndex(model)
    changed = False
    for relu in list(graph.g.node):
        step = graph.sole_consumer(relu.output[0]) if relu.op_type == "Relu" else None
        affine = _affine_of(graph, step) if step is not None else None
        if affine is None or np.any(affine[0] <= 0):
            continue
        factor, shift = affine
        channels = factor.size
        scaled = f"{relu.input[0]}.scaled"
        position = list(graph.g.node).index(relu)
        graph.g.node.insert(position, _affine(graph, f"{step.name}.before_relu", relu.input[0], scaled, factor,
                                              np.zeros(channels)))
        relu.input[0] = scaled
        if np.any(shift != 0):
            _set_affine(graph, step, np.ones(channels), shift)
        else:
            relu.output[0] = step.output[0]
            graph.remove(step)
        graph = ModelIndex(model)
        changed = True
    return changed


HLS4ML_LOWERINGS: list[Pass] = [average_pool_to_depthwise_conv, global_max_pool_to_max_pool,
                                quant_scale_to_affine, narrow_unsigned_quant_as_clip, bipolar_scale_to_affine,
                                hard_sigmoid_to_clip, clip_to_relus, positive_scale_before_relu,
                                constant_arithmetic_to_affine,
                                # what hls4ml would fold itself, after its weights' precision was chosen;
                                # also two affine steps in a row as one (hls4ml's own merge keeps the
                                # second one's precision, sized for its factor alone)
                                fold_batchnorm, batchnorm_before_sign_as_threshold, pad_value_to_zero, gemm_bias]


def trace_nodes(before: onnx.ModelProto, after: onnx.ModelProto) -> dict[str, Optional[str]]:
    """For every node of ``before`` (in its order), the node of ``after`` it is or went into: itself
    when ``after`` has a node of its name; else the one that now writes its result (a fused
    BatchNormalization: its Conv), else the first that reads its result (a folded constant: the
    layer that reads it; a removed Identity: its reader), else where its readers went. None: its
    result reaches nothing (dead code)."""
    kept = {n.name for n in after.graph.node}
    producer_after = {t: n.name for n in after.graph.node for t in n.output}
    readers_after: dict[str, list[str]] = {}
    for n in after.graph.node:
        for t in n.input:
            readers_after.setdefault(t, []).append(n.name)
    readers_before: dict[str, list[onnx.NodeProto]] = {}
    for n in before.graph.node:
        for t in n.input:
            readers_before.setdefault(t, []).append(n)
    found: dict[str, Optional[str]] = {}

    def target(node: onnx.NodeProto) -> Optional[str]:
        if node.name in kept:
            return node.name
        if node.name in found:
            return found[node.name]
        found[node.name] = None  # a cycle guard; the graph is acyclic
        outputs = [t for t in node.output if t]
        where = next((producer_after[t] for t in outputs if t in producer_after), None)
        where = where or next((readers_after[t][0] for t in outputs if t in readers_after), None)
        if where is None:
            where = next((w for t in outputs for r in readers_before.get(t, []) if (w := target(r))), None)
        if where is None:  # its input's producer took over (a pass-through at the end of the graph)
            where = next((producer_after[t] for t in node.input if t in producer_after), None)
        found[node.name] = where
        return where

    return {n.name: target(n) for n in before.graph.node}
