"""hetdeploy's layer-sequential engine (hls/engine.h) for one unit: its layer (plan.EngineLayer) from the
graph's node, and its weights and biases as the DDR bytes the engine reads, from the unit's ONNX model (a
Conv, Gemm or MatMul, the BatchNormalizations after it folded in, then a ReLU or a Clip: ``units.engine_refusal``)."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import onnx
from onnx import numpy_helper

from ..core.graph import Node
from ..core.plan import EngineLayer
from ..core.precision import CppFixed, weight_fixed
from ..planning import units

BIAS_BYTES = units.ARENA_WORD_BYTES  # a bias is a word, the sum's 64 bits its low ones, at the sum's binary point


def engine_layer(node: Node, last: Node, size: units.EngineSize, residual: bool = False,
                 dense_groups: bool = False) -> EngineLayer:
    """The engine's layer for ``node`` (its unit's main node; ``last``: the unit's last, a ReLU or a Clip ending it;
    ``residual``: an Add of another map before it, ``units.residual_input``; ``dense_groups``: a grouped
    convolution run as one group, ``units.engine_dense_groups``) on an engine of ``size``, its binary points still
    to be set by the build (``quantized``)."""
    relu = last.op == "Relu"
    clip = [_bound(last.scalars.get(1)), _bound(last.scalars.get(2))] if last.op == "Clip" else None
    if node.op != "Conv":  # a dense layer: a 1 x 1 convolution of one pixel
        (first,), (out,) = node.input_shapes, node.output_shapes
        return EngineLayer(first[-1], [1, 1], out[-1], [1, 1], [1, 1], [1, 1], [0, 0], [1, 1], relu, size.lanes,
                           size.vector, size.uram_lanes, port_words=size.port_words, pixels=size.pixels,
                           bundles=size.bundles, buffer_window=size.window, clip=clip, residual=residual,
                           shared=size.shared, stream=size.stream)
    first, out = node.input_shapes[0], node.output_shapes[0]
    spatial = len(first) - 2

    def as_2d(values, fill=1):  # a 1-D convolution's one row
        return [fill] * (2 - spatial) + list(values)

    pads = node.attrs.get("pads") or [0] * (2 * spatial)
    return EngineLayer(first[1], as_2d(first[2:]), out[1], as_2d(out[2:]), as_2d(node.attrs["kernel_shape"]),
                       as_2d(node.attrs.get("strides") or [1] * spatial), as_2d(pads[:spatial], fill=0),
                       as_2d(node.attrs.get("dilations") or [1] * spatial), relu, size.lanes, size.vector,
                       size.uram_lanes, 1 if dense_groups else node.attrs.get("group", 1), size.port_words,
                       pixels=size.pixels,
                       bundles=size.bundles, buffer_window=size.window, clip=clip, residual=residual,
                       shared=size.shared, stream=size.stream)


def _bound(value: Optional[float]) -> Optional[float]:
    """A Clip's bound; None where it has none (an input left out, or infinite)."""
    return value if value is not None and math.isfinite(value) else None


def layer_values(layer: EngineLayer, out_width: int) -> list[int]:
    """The unit's engine_layer as engine.h's struct takes it, its fields in order: the Clip's bounds as output codes
    (each rounded as the engine rounds its outputs, to the nearest with ties up, so that clamping the rounded
    output to them is rounding the clamped value), else the output type's own range; then its residual's, and the
    elements from one output pixel to the next in its target."""
    least, most = (-(2 ** (out_width - 1)), 2 ** (out_width - 1) - 1) if layer.out_signed else (0, 2 ** out_width - 1)
    low, high = layer.clip or (None, None)
    codes = [least if low is None else max(least, min(most, math.floor(low * 2.0 ** layer.out_fraction + 0.5))),
             most if high is None else max(least, min(most, math.floor(high * 2.0 ** layer.out_fraction + 0.5)))]
    return [layer.channels, *layer.input, layer.filters, *layer.output, *layer.kernel, *layer.strides, *layer.pads,
            *layer.dilations, layer.in_fraction, int(layer.in_signed), layer.weight_fraction, layer.out_fraction,
            int(layer.out_signed), int(layer.relu), layer.groups, *codes, int(layer.residual), layer.residual_fraction,
            int(layer.residual_signed), layer.out_stride or layer.filters, int(layer.streamed)]


def affine(model: onnx.ModelProto) -> tuple[np.ndarray, np.ndarray]:
    """The unit's weights as the engine orders them (filters, k_h, k_w, channels) and its biases, float64, each
    BatchNormalization after its main node folded in."""
    constants = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    main, *after = model.graph.node
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in main.attribute}
    given = [constants[name] if name else None for name in main.input[1:]]
    if main.op_type == "Conv":
        weights = given[0] if given[0].ndim == 4 else given[0][:, :, None, :]  # a 1-D one: a row
        weights = weights.transpose(0, 2, 3, 1)
        bias = given[1] if len(given) > 1 and given[1] is not None else np.zeros(weights.shape[0])
    else:  # Gemm (transA 0: board files' limit) or MatMul: out = x @ B (+ C)
        matrix = given[0].T if attrs.get("transB", 0) else given[0]
        weights = (attrs.get("alpha", 1.0) * matrix.T)[:, None, None, :]
        bias = np.zeros(weights.shape[0])
        if main.op_type == "Gemm" and len(given) > 1 and given[1] is not None:
            bias = attrs.get("beta", 1.0) * np.broadcast_to(given[1], (1, weights.shape[0])).reshape(-1)
    for node in after:
        if node.op_type == "BatchNormalization":
            eps = next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "epsilon"), 1e-5)
            scale, shift, mean, var = (constants[name] for name in node.input[1:5])
            factor = scale / np.sqrt(var + eps)
            weights = weights * factor[:, None, None, None]
            bias = (bias - mean) * factor + shift
    return weights, bias


def quantized(layer: EngineLayer, weights: np.ndarray, bias: np.ndarray, width: int, in_type: str,
              out_type: str, residual_type: Optional[str] = None) -> tuple[EngineLayer, bytes]:
    """``layer`` with its binary points (its weights' at ``width`` bits, ``weight_fixed``; its input's, output's
    and, where it adds one, its residual's from their buffers' C++ types) and the bytes of its weights region
    (engine.h's layout): the weights as ``width``-bit lanes, each filter's window in words of its own (its last
    word's lanes past the window zeros; each row of it padded to whole words where the engine walks it along its
    rows, ``row_values``), word i of filters q * P .. q * P + P - 1 together in the weights port's word (q, i) (P:
    its words, ``layer.port_words``; filters past the last zeros), or, where the layer streams its weights
    (``layer.streamed``, the memory plan's ``units.engine_layer_streams``), each tile's reads (``layer.lanes``
    filters) word after word, the tile's reads of word i one run; then each filter's bias at the sum's binary
    point, as a word (its 64 low bits, sign-extended), P filters' a port's word. Where the port is
    ``layer.bundles`` bundles, its reads in that many blocks, block b each read's words b * P / bundles onwards (a
    bundle's reads one run). Weights of a grouped convolution the layer runs as one group are its ``block_diagonal``
    ones."""
    weights = block_diagonal(weights, layer.channels // layer.groups)
    w_width, w_integer = weight_fixed(weights, width)
    source, target = CppFixed.parse(in_type), CppFixed.parse(out_type)
    added = CppFixed.parse(residual_type) if layer.residual else target
    if added.width != target.width:
        raise ValueError(f"an engine layer's residual of {added.width} bits beside {target.width}-bit outputs: the "
                         f"engine reads it an output word's lanes at a time")
    set_layer = EngineLayer(**{**layer.__dict__, "weight_fraction": w_width - w_integer,
                               "in_fraction": source.fraction, "in_signed": source.signed,
                               "out_fraction": target.fraction, "out_signed": target.signed,
                               "residual_fraction": added.fraction if layer.residual else 0,
                               "residual_signed": added.signed})
    limit = 2 ** (width - 1)
    codes = np.clip(np.round(weights.reshape(len(weights), -1) * 2.0 ** set_layer.weight_fraction), -limit, limit - 1)
    row = row_values(layer, width)
    if row:  # walked along its rows: each row's values padded to whole words
        rows = codes.reshape(len(codes), -1, row)
        per_word = units.word_values(width)
        codes = np.zeros((len(codes), rows.shape[1], -(-row // per_word) * per_word), dtype=codes.dtype)
        codes[:, :, :row] = rows
        codes = codes.reshape(len(codes), -1)
    words, port = _filter_words(layer, width), layer.port_words
    filters = -(-len(codes) // port) * port
    padded = np.zeros((filters, words * units.word_values(width)), dtype=np.int64)
    padded[:len(codes), :codes.shape[1]] = codes
    lanes = padded.astype(f"<i{units.element_bytes(width)}").view(np.uint8).reshape(filters // port, port, words, -1)
    sum_fraction = set_layer.in_fraction + set_layer.weight_fraction
    biases = np.zeros((filters, BIAS_BYTES // 8), dtype="<i8")  # (each sign-extended to the word)
    biases[:len(bias), 0] = np.round(bias * 2.0 ** sum_fraction)
    biases[:, 1:] = np.where(biases[:, :1] < 0, -1, 0)
    return set_layer, _region(set_layer, lanes, biases)


def _region(layer: EngineLayer, lanes: np.ndarray, biases: np.ndarray) -> bytes:
    """``quantized``'s bytes of a weights region: ``lanes`` (each read's filters' words: reads x the port's words x
    a filter's words x a word's bytes) in the layer's layout, then ``biases``, in the port's bundles' blocks."""
    port = layer.port_words
    if layer.streamed:  # each tile's reads of its filters' word i one run, word after word (engine_stream)
        tile_reads = layer.lanes // port
        packed = b"".join(lanes[q:q + tile_reads].transpose(2, 0, 1, 3).tobytes()
                          for q in range(0, len(lanes), tile_reads))
    else:
        packed = lanes.transpose(0, 2, 1, 3).tobytes()  # (q, i, filter q * P + p's word i)
    bundle_bytes = port // layer.bundles * units.ARENA_WORD_BYTES
    reads = np.frombuffer(packed + biases.tobytes(), dtype=np.uint8).reshape(-1, layer.bundles, bundle_bytes)
    return reads.transpose(1, 0, 2).tobytes()


def relaid(layer: EngineLayer, region: bytes, width: int) -> bytes:
    """A weights region ``quantized`` wrote at ``width`` bits in the other layout than ``layer.streamed``'s (held
    where it streams, or streamed where it is held), in the layer's: the memory plan of the buffers' real widths,
    made after the units' weights are written, may decide otherwise than the plan's (a widened unit's input)."""
    port, words = layer.port_words, _filter_words(layer, width)
    reads = -(-layer.filters // port)
    read_bytes = words * port * units.ARENA_WORD_BYTES  # a read's filters' windows
    bundle_bytes = port // layer.bundles * units.ARENA_WORD_BYTES
    blocks = np.frombuffer(region, dtype=np.uint8).reshape(layer.bundles, -1, bundle_bytes)
    flat = blocks.transpose(1, 0, 2).tobytes()
    packed = np.frombuffer(flat[:reads * read_bytes], dtype=np.uint8)
    biases = np.frombuffer(flat[reads * read_bytes:], dtype="<i8").reshape(-1, BIAS_BYTES // 8)
    if layer.streamed:  # written held: (q, i, p, bytes)
        lanes = packed.reshape(reads, words, port, -1).transpose(0, 2, 1, 3)
    else:  # written streamed: each tile's (i, q, p, bytes)
        tile_reads = layer.lanes // port
        lanes = np.concatenate([packed[q * read_bytes:min(q + tile_reads, reads) * read_bytes].reshape(
            words, -1, port, units.ARENA_WORD_BYTES).transpose(1, 2, 0, 3) for q in range(0, reads, tile_reads)])
    return _region(layer, lanes, biases)


def block_diagonal(weights: np.ndarray, channels: int) -> np.ndarray:
    """A grouped convolution's ``weights`` (filters, k_h, k_w, a group's channels) as those of one over ``channels``
    (its groups'): filter o's over its group's (o // (filters / groups)), zeros over the others'; as they are where
    they span ``channels`` already."""
    filters, *kernel, group_channels = weights.shape
    groups = channels // group_channels
    if groups == 1:
        return weights
    whole = np.zeros((filters, *kernel, channels), dtype=weights.dtype)
    for o in range(filters):
        first = o // (filters // groups) * group_channels
        whole[o, ..., first:first + group_channels] = weights[o]
    return whole


def weights_bytes(layer: EngineLayer, width: int) -> int:
    """The bytes of a unit's weights region (``quantized``'s) before it is sized: known from its shape."""
    filters = -(-layer.filters // layer.port_words) * layer.port_words
    return filters * (_filter_words(layer, width) * units.ARENA_WORD_BYTES + BIAS_BYTES)


def row_values(layer: EngineLayer, width: int) -> int:
    """The values of a window row the engine walks along (units.engine_row_values); 0: it walks a place at a time."""
    return units.engine_row_values(layer.kernel[1], layer.channels // layer.groups, layer.groups, layer.dilations[1],
                                   width)


def stored_window(layer: EngineLayer, width: int) -> int:
    """The values a filter's window takes in the weights region and a lane's buffer: its rows padded to whole words
    of ``width``-bit weights where the engine walks it along its rows."""
    return units.stored_window(layer.window, row_values(layer, width), width)


def _filter_words(layer: EngineLayer, width: int) -> int:
    """The words a filter's window takes."""
    return -(-stored_window(layer, width) // units.word_values(width))
