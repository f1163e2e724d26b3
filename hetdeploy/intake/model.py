"""Stage 1: load the user's ONNX model and normalise it for partitioning.

What real published models do and how it is handled here:
- initializers also listed as graph inputs (old IR): dropped from the inputs, IR raised to 4;
- a symbolic batch dimension: fixed to 1; other symbolic dimensions are refused;
- a fixed batch of B > 1 rows (an export's dummy input): B samples, the model at batch 1, where each row's
  outputs are its own (``_rows_as_samples``); inputs with no such batch axis are refused;
- nodes with empty or duplicate names: given stable generated names;
- opsets older than 13: converted by onnx's version converter;
- constant subgraphs (ConstantOfShape, Shape -> Gather -> Concat, DequantizeLinear of constant
  weights), Identity and Dropout, Conv + BatchNormalization: folded by onnxruntime's basic graph
  optimisation;
- then the named rewrites of ``rewrites.py`` (attribute defaults, Gemm alpha/beta/transA,
  MatMul + Add, BatchNormalization after Gemm, bias Adds, Reshape as Flatten, ReduceMean as global
  pooling, Sum, n-ary Concat);
- a leading Reshape of a graph input: absorbed (the pipeline takes the reshaped
  tensor; the plan records the reshape so callers still feed the original shape);
- external data: must stay inside the model's folder.

The source model (the reference every check compares with) is the user's, only its batch fixed (and, below
opset 7, which onnxruntime does not run, converted to opset 13 by onnx's version converter, a note says so).
``LoadedModel.traced`` says what became of every node of the user's model.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import shape_inference, version_converter

from ..core.errors import UserError, first_line, input_file
from ..core.graph import ONNXRUNTIME_DOMAINS, QONNX_DOMAINS, QUANTIZER_OPS, Graph, Node
from ..core.plan import InputReshape, TensorSpec
from ..core.precision import exact_fixed, weight_fixed, weight_octaves
from . import rewrites
from .ort_adapter import fold_constants
from .qonnx_adapter import fold_constant_quantizers, known_rounding_mode, qdq_pairs_to_quant
from .qonnx_adapter import infer_shapes as infer_qonnx_shapes

# onnxruntime 1.17+ reads IR 10; newer onnx writes 11+ by default.
MAX_IR_VERSION = 10
# IR 3 lists initializers among the graph inputs; from IR 4 on they need not be.
MIN_IR_VERSION = 4
# The widest weights whose exact bits a node records (Node.weight_bits).
WEIGHT_BITS = 16
# Ops whose constant input 1 is a multiply-accumulate layer's weights (Node.weight_octaves).
WEIGHTED_OPS = frozenset({"Conv", "Gemm", "MatMul"})
# The oldest default-domain opset onnxruntime runs (its operator kernels start at opset 7): an older
# model's reference is the model as onnx's version converter writes it at MIN_OPSET.
OLDEST_OPSET = 7

_DTYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64", onnx.TensorProto.INT64: "int64",
           onnx.TensorProto.INT32: "int32", onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.UINT8: "uint8",
           onnx.TensorProto.INT8: "int8", onnx.TensorProto.BOOL: "bool", onnx.TensorProto.STRING: "string",
           onnx.TensorProto.INT16: "int16", onnx.TensorProto.UINT16: "uint16", onnx.TensorProto.BFLOAT16: "bfloat16"}


# Input types hetdeploy can feed (samples, .npy files); the FPGA takes float32 only (board limits).
NUMERIC_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "uint16", "bool")


@dataclass
class LoadedModel:
    source: onnx.ModelProto  # the user's model, data loaded, batch fixed (the reference)
    model: onnx.ModelProto  # normalised: what the partitioner cuts
    graph: Graph
    inputs: list[TensorSpec]  # what the user feeds (before any absorbed reshape)
    outputs: list[TensorSpec]
    input_reshapes: list[InputReshape]
    # every node of the user's model (named as in ``model``) -> the node of ``model`` it is (same
    # name) or that normalisation folded it into (None: its result reached nothing)
    traced: dict[str, Optional[str]]
    notes: list[str] = field(default_factory=list)  # what intake changed that the user should hear of

    def tensor_shapes(self) -> dict[str, list[int]]:
        """Every tensor of the normalised graph -> its shape (the user's inputs as fed)."""
        shapes = {t.name: t.shape for t in self.inputs}
        for node in self.graph.nodes:
            shapes.update(zip(node.inputs, node.input_shapes))
            shapes.update(zip(node.outputs, node.output_shapes))
        return shapes


def load_model(path: str | Path) -> LoadedModel:
    path = Path(path)
    source = _read(path)
    _finn_ops_as_qonnx(source, path)
    _drop_initializer_inputs(source)
    fixed = _fix_batch(source, path)
    # IR 3 requires initializers among the inputs, which were just dropped
    source.ir_version = max(MIN_IR_VERSION, min(source.ir_version, MAX_IR_VERSION))
    opset = rewrites.default_opset(source)
    if opset < OLDEST_OPSET:  # onnxruntime runs none older: the reference is the converted model
        source = _convert_opset(source, path)
    source = _infer_shapes(source, path, strict=False)
    _check_sizes(source, path)
    _name_nodes(source)  # the reference too: onnxruntime refuses two nodes of one name
    _check_numeric(source, path)
    source, rows = _rows_as_samples(source, path)

    model = onnx.ModelProto()
    model.CopyFrom(source)
    named = onnx.ModelProto()
    named.CopyFrom(model)
    model = _normalise(model, path)
    reshapes = _absorb_leading_reshapes(model)
    inputs = _specs(source, source.graph.input)
    outputs = _specs(model, model.graph.output)  # sizes the source's inference may not reach
    graph = _to_graph(model, path)
    if not graph.nodes:
        raise UserError(f"{path}: no node computes its outputs (once constants are folded they are constants, or its "
                        f"inputs passed through): nothing to deploy")
    notes = [f"input '{name}': its symbolic batch axis '{symbol}' is fixed to 1 (a call takes one sample; emulate "
             f"and run.py take N stacked and run them in batches, --batch N samples an FPGA call)"
             for name, symbol in fixed]
    if rows > 1:
        notes.append(f"the inputs' fixed batch of {rows} (axis 0) is taken as {rows} samples of one row each: the "
                     f"model gives each row the outputs it gives it among the {rows} (checked on a random batch); "
                     f"the reference is the model at batch 1 too")
    if opset < OLDEST_OPSET:
        notes.append(f"opset {opset}: converted to opset {rewrites.MIN_OPSET} by onnx's version converter, the "
                     f"reference every check compares with too (onnxruntime runs opset {OLDEST_OPSET} and later)")
    return LoadedModel(source, model, graph, inputs, outputs, reshapes, rewrites.trace_nodes(named, model), notes)


def _normalise(model: onnx.ModelProto, path: Path) -> onnx.ModelProto:
    """What exporters write, in the forms the devices run: the opset raised to MIN_OPSET (onnx's
    version converter), onnxruntime's QOperator format as its QDQ format, constants folded (onnxruntime; a CastLike
    of a constant first a Cast it folds), then each
    rewrite of ``rewrites.PASSES``."""
    if rewrites.default_opset(model) < rewrites.MIN_OPSET:
        model = _convert_opset(model, path)
    rewrites.cast_like_of_constant_as_cast(model)
    rewrites.qoperator_as_qdq(model)
    if all(n.domain in ONNXRUNTIME_DOMAINS for n in model.graph.node):
        try:
            model = fold_constants(model)
        except Exception as err:
            raise UserError(f"{path}: onnxruntime cannot load the model: {first_line(err)}") from None
        _name_nodes(model)  # nodes onnxruntime made
    model = _infer_shapes(model, path, strict=False)
    model = _quantizers(model, path)
    for rewrite in rewrites.PASSES:
        try:
            changed = rewrite(model)
        except rewrites.RewriteError as err:
            raise UserError(f"{path}: {err}") from None
        if changed:
            model = _infer_shapes(model, path, strict=False)
    try:
        onnx.checker.check_model(model)
    except Exception as err:
        raise UserError(f"{path}: not valid ONNX once normalised: {first_line(err)}") from None
    return _infer_shapes(model, path, strict=True)


# QONNX quantizers: every input but the first is a parameter the FPGA needs as a constant.


def _quantizers(model: onnx.ModelProto, path: Path) -> onnx.ModelProto:
    """Quantized models as one node per quantizer: QuantizeLinear/DequantizeLinear pairs as QONNX
    Quant; every quantizer's parameters constant (else one line naming it); quantizers of constants
    folded into the constants."""
    if any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node):
        if rewrites.onnxruntime_quantizers_as_standard(model):
            model = _infer_shapes(model, path, strict=False)
        rewrites.shared_dequantizers(model)
        try:
            model = qdq_pairs_to_quant(model)
        except Exception as err:
            raise UserError(f"{path}: qonnx cannot turn its QuantizeLinear/DequantizeLinear pairs into "
                            f"quantizers: {first_line(err)}") from None
        _import_domains(model)
        model = _infer_shapes(model, path, strict=False)
        _name_nodes(model)
    quantizers = [n for n in model.graph.node if n.domain in QONNX_DOMAINS and n.op_type in QUANTIZER_OPS]
    if not quantizers:
        return model
    constants = {t.name: t for t in model.graph.initializer}
    for node in quantizers:
        for index, tensor in enumerate(node.input[1:], start=1):
            if tensor and tensor not in constants:
                raise UserError(f"{path}: node '{node.name}' ({node.op_type}): its parameter input {index} "
                                f"'{tensor}' is not a constant; hetdeploy needs a quantizer's scale, zero point "
                                f"and bit width fixed in the model")
        _check_quantizer(node, {i: onnx.numpy_helper.to_array(constants[t]) for i, t in enumerate(node.input)
                                if i and t}, path)
    rewrites.trunc_as_quants(model)
    rewrites.multithreshold_as_signs(model)
    rewrites.conv_transpose_as_conv(model)  # before the weights become codes: its Conv's do
    rewrites.quantized_weights_as_codes(model)
    rewrites.channel_quantizer_on_axis_one(model)
    try:
        return _infer_shapes(fold_constant_quantizers(model), path, strict=False)
    except UserError:
        raise
    except Exception as err:
        raise UserError(f"{path}: qonnx cannot fold the model's quantized constants: {first_line(err)}") from None


# The widest integer a Quant may round to (qonnx computes 2 ** bits in float64).
MAX_QUANT_BITS = 64


def _check_quantizer(node: onnx.NodeProto, params: dict[int, "np.ndarray"], path: Path) -> None:
    """A quantizer's parameters as QONNX defines them: a positive finite scale; for Quant a bit width
    of one whole number from 1 to MAX_QUANT_BITS, whole zero points within that many bits, ``signed``
    and ``narrow`` 0 or 1 and a rounding mode qonnx knows."""
    where = f"{path}: node '{node.name}' ({node.op_type})"
    scale = params.get(1) if node.op_type != "MultiThreshold" else None  # its input 1: thresholds
    if scale is not None and not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
        raise UserError(f"{where}: its scale must be finite and above 0 (found {scale.reshape(-1)[:4].tolist()})")
    if node.op_type != "Quant":
        return
    bits = params[3].reshape(-1)
    if bits.size != 1 or not np.isfinite(bits[0]) or not float(bits[0]).is_integer() or \
            not 1 <= bits[0] <= MAX_QUANT_BITS:
        raise UserError(f"{where}: bit width {bits.tolist()[:4]} is not one whole number from 1 to {MAX_QUANT_BITS}")
    zero = params[2]
    if not (np.all(np.isfinite(zero)) and np.all(zero == np.round(zero)) and np.all(np.abs(zero) < 2.0 ** bits[0])):
        raise UserError(f"{where}: its zero point must be whole numbers within {int(bits[0])} bits (found "
                        f"{zero.reshape(-1)[:4].tolist()})")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    for flag in ("signed", "narrow"):
        if attrs.get(flag, 0) not in (0, 1):
            raise UserError(f"{where}: attribute {flag} = {attrs[flag]}, expected 0 or 1")
    mode = attrs.get("rounding_mode", b"ROUND")
    mode = mode.decode("utf-8", "replace") if isinstance(mode, bytes) else str(mode)
    if not known_rounding_mode(mode):
        raise UserError(f"{where}: rounding mode '{mode[:40]}' is none qonnx knows (ROUND, HALF_EVEN, CEIL, FLOOR, "
                        f"UP, DOWN, HALF_UP, HALF_DOWN)")


def _convert_opset(model: onnx.ModelProto, path: Path) -> onnx.ModelProto:
    """The model at opset MIN_OPSET, by onnx's version converter."""
    opset = rewrites.default_opset(model)
    try:
        converted = version_converter.convert_version(model, rewrites.MIN_OPSET)
    except Exception as err:
        raise UserError(f"{path}: cannot convert opset {opset} to {rewrites.MIN_OPSET}: "
                        f"{first_line(err)}") from None
    converted.ir_version = max(MIN_IR_VERSION, min(converted.ir_version, MAX_IR_VERSION))
    return converted


def _read(path: Path) -> onnx.ModelProto:
    if path.is_dir():
        raise UserError(f"{path}: is a folder; give the ONNX model file (.onnx) in it")
    input_file(path, "model file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # protobuf raises DecodeError and friends
        raise UserError(f"{path}: not a readable ONNX model ({type(err).__name__}: {err})") from None
    if not model.graph.node:
        raise UserError(f"{path}: the ONNX graph has no nodes")
    if not model.graph.output:
        raise UserError(f"{path}: the ONNX graph has no outputs: nothing it computes is read")
    _check_opsets(model, path)
    _name_non_utf8(model.graph)
    base = path.resolve().parent
    for tensor in _all_tensors(model.graph):
        _check_tensor_data(tensor, path)
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = {e.key: e.value for e in tensor.external_data}.get("location", "")
        try:
            target = (base / location).resolve()
            inside = not os.path.isabs(location) and target.is_relative_to(base)
            found = inside and target.is_file()
        except (OSError, ValueError) as err:  # a NUL, a name too long for the file system
            raise UserError(f"{path}: initializer '{tensor.name}': external data location {location[:80]!r} is not "
                            f"a usable file name ({type(err).__name__}: {first_line(err)[:80]})") from None
        if not inside:
            raise UserError(f"{path}: initializer '{tensor.name}' points outside the model's folder ({location!r})")
        if not found:
            raise UserError(f"{path}: initializer '{tensor.name}': external data file {location!r} not found")
    _densify_sparse_initializers(model, path)
    constants = {t.name for t in model.graph.initializer}
    for output in model.graph.output:
        if output.name in constants:
            raise UserError(f"{path}: output '{output.name}' is an initializer, a constant the model does not "
                            f"compute; hetdeploy deploys computed outputs only")
    _import_domains(model)  # exporters of custom ops forget them
    _drop_repeated_outputs(model.graph)
    _drop_repeated_value_info(model.graph)
    try:
        onnx.load_external_data_for_model(model, str(base))
        # the full check includes strict shape inference: outputs or value_info contradicting the graph
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:
        raise UserError(f"{path}: invalid ONNX model: {first_line(err)}") from None
    return model


def _name_non_utf8(graph: onnx.GraphProto) -> None:
    """Each node or tensor name that is not UTF-8 (protobuf hands it over as bytes, which neither
    onnxruntime nor plan.json takes) becomes its bytes written out, ``\\xff`` for each byte that is not
    UTF-8 (and ``_`` after it while that name is taken): one name for the same bytes everywhere, that
    says what it was, and that later stages sanitise as any other."""
    fields = list(_name_fields(graph))
    taken = {name for name in (_field(*f) for f in fields) if isinstance(name, str)}
    renamed: dict[bytes, str] = {}
    for holder, key in fields:
        name = _field(holder, key)
        if not isinstance(name, bytes):
            continue
        if name not in renamed:
            text = name.decode("utf-8", "backslashreplace")
            while text in taken:
                text += "_"
            renamed[name] = text
            taken.add(text)
        if isinstance(key, int):
            holder[key] = renamed[name]
        else:
            setattr(holder, key, renamed[name])


def _name_fields(graph: onnx.GraphProto):
    """Every node and tensor name of ``graph`` and its subgraphs, as (message, field name) or (repeated
    field, index)."""
    for message in [*graph.input, *graph.output, *graph.value_info, *graph.initializer, *graph.node,
                    *(s.values for s in graph.sparse_initializer)]:
        yield message, "name"
    for node in graph.node:
        for names in (node.input, node.output):
            yield from ((names, k) for k in range(len(names)))
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                yield from _name_fields(sub)


def _field(holder, key):
    return holder[key] if isinstance(key, int) else getattr(holder, key)


def _drop_repeated_outputs(graph: onnx.GraphProto) -> None:
    """An output the graph lists again is the same tensor: kept once (the first), as the outputs a
    build returns are keyed by name (run.py's .npz, emulate's --output)."""
    seen: set[str] = set()
    kept = [o for o in graph.output if not (o.name in seen or seen.add(o.name))]
    if len(kept) != len(graph.output):
        del graph.output[:]
        graph.output.extend(kept)


def _drop_repeated_value_info(graph: onnx.GraphProto) -> None:
    """A ``value_info`` for a graph input or output, or a second one for a tensor, says nothing new;
    onnxruntime's ``quant_pre_process`` writes them and qonnx refuses them ("Multiple ValueInfoProto
    found"): keep the first of each tensor, the graph's own inputs and outputs before all."""
    seen = {v.name for v in list(graph.input) + list(graph.output)}
    kept = []
    for value in graph.value_info:
        if value.name not in seen:
            seen.add(value.name)
            kept.append(value)
    if len(kept) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(kept)


def _check_opsets(model: onnx.ModelProto, path: Path) -> None:
    if not any(o.domain in ("", "ai.onnx") for o in model.opset_import):
        # onnx's checker and onnxruntime refuse it too: which version of each op the model means is unknown
        imported = ", ".join(repr(o.domain) for o in model.opset_import) or "nothing"
        raise UserError(f"{path}: the model imports no opset of the default ONNX domain (opset_import: {imported}); "
                        f"export it again, or add the opset its ops were written for")
    newest = onnx.defs.onnx_opset_version()
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and not 1 <= opset.version <= newest:
            raise UserError(f"{path}: opset {opset.version} of the default domain does not exist (onnx "
                            f"{onnx.__version__} knows 1 to {newest})")


def _check_tensor_data(tensor: onnx.TensorProto, path: Path) -> None:
    """Dimensions at least 0 and raw data exactly as long as they say (protobuf checks neither)."""
    if any(d < 0 for d in tensor.dims):
        raise UserError(f"{path}: initializer '{tensor.name}' has a negative dimension {list(tensor.dims)}")
    if not tensor.HasField("raw_data") or tensor.data_type not in _DTYPES or tensor.data_type == onnx.TensorProto.STRING:
        return
    itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    expected = math.prod(tensor.dims) * itemsize
    if len(tensor.raw_data) != expected:
        raise UserError(f"{path}: initializer '{tensor.name}': {len(tensor.raw_data):,} bytes of data for dimensions "
                        f"{list(tensor.dims)} ({expected:,} bytes)")


def _densify_sparse_initializers(model: onnx.ModelProto, path: Path) -> None:
    """Sparse initializers as the dense ones every later stage reads (onnxruntime does the same)."""
    for sparse in list(model.graph.sparse_initializer):
        try:
            values = onnx.numpy_helper.to_array(sparse.values, str(path.resolve().parent))
            indices = onnx.numpy_helper.to_array(sparse.indices, str(path.resolve().parent)).astype(np.int64)
        except Exception as err:  # onnx's ValidationError, a short file, a data type it cannot read
            raise UserError(f"{path}: sparse initializer '{sparse.values.name}': its values or indices cannot be read "
                            f"({first_line(err)})") from None
        dense = np.zeros(math.prod(sparse.dims), values.dtype)
        try:
            flat = indices if indices.ndim == 1 else np.ravel_multi_index(indices.T, tuple(sparse.dims))
            dense[flat] = values
        except (IndexError, ValueError) as err:
            raise UserError(f"{path}: sparse initializer '{sparse.values.name}': its indices do not fit its "
                            f"dimensions {list(sparse.dims)} ({first_line(err)})") from None
        model.graph.initializer.append(onnx.numpy_helper.from_array(dense.reshape(tuple(sparse.dims)),
                                                                    sparse.values.name))
    del model.graph.sparse_initializer[:]


FINN_GENERAL_DOMAIN = "finn.custom_op.general"


def _finn_ops_as_qonnx(model: onnx.ModelProto, path: Path) -> None:
    """A FINN-ONNX model (FINN's tidied or streamlined graphs): the ops of FINN's general domain
    qonnx implements (MultiThreshold, Im2Col, ...; qonnx took them over from FINN) in qonnx's domain;
    an op only FINN runs (its HLS and RTL layers) refused in one line naming it."""
    from .qonnx_adapter import QONNX_GENERAL_DOMAIN, qonnx_general_ops

    finn_nodes = [n for n in model.graph.node if n.domain.startswith("finn.")]
    if not finn_nodes:
        return
    qonnx_ops = qonnx_general_ops()
    for node in finn_nodes:
        if node.domain != FINN_GENERAL_DOMAIN or node.op_type not in qonnx_ops:
            raise UserError(f"{path}: node '{node.name}' ({node.op_type}, domain {node.domain}): only FINN runs this "
                            f"op; give hetdeploy the model as it was before FINN's hardware conversion "
                            f"(after streamlining at the latest)")
        node.domain = QONNX_GENERAL_DOMAIN
    kept = [o for o in model.opset_import if not o.domain.startswith("finn.")]
    del model.opset_import[:]
    model.opset_import.extend(kept)
    _import_domains(model)


def _import_domains(model: onnx.ModelProto) -> None:
    """An opset import (version 1) for every custom domain the nodes use and the model does not import."""
    imported = {o.domain for o in model.opset_import}
    for domain in sorted({n.domain for n in model.graph.node} - imported - {"ai.onnx"}):
        model.opset_import.append(onnx.helper.make_opsetid(domain, 1))


def _all_tensors(graph: onnx.GraphProto):
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                yield from _all_tensors(sub)


def _drop_initializer_inputs(model: onnx.ModelProto) -> None:
    constants = {t.name for t in model.graph.initializer}
    real = [i for i in model.graph.input if i.name not in constants]
    del model.graph.input[:]
    model.graph.input.extend(real)


def _rows_as_samples(model: onnx.ModelProto, path: Path) -> tuple[onnx.ModelProto, int]:
    """A model whose inputs all have one fixed batch of B > 1 rows (axis 0; an exporter's dummy input of B samples),
    at batch 1 (and B), where its outputs, B rows too, are each row's alone: onnxruntime (or qonnx) runs a random
    batch of B, and its first two rows, a middle one and its last at batch 1, to the same values. A sample is one
    row of axis 0 (a call runs samples, stacked on it): inputs whose first axis is not such a batch are refused."""
    inputs = list(model.graph.input)
    firsts = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim][:1] for v in inputs}
    if all(first == [1] for first in firsts.values()):
        return model, 1
    why = ("hetdeploy runs a sample a call, a row of axis 0 of every input; export the model with a batch axis of 1 "
           "or a dynamic one")
    for name, first in firsts.items():
        if not first:
            raise UserError(f"{path}: input '{name}' is a scalar: it has no batch axis; {why}")
    batches = {first[0] for first in firsts.values()}
    if len(batches) > 1:
        raise UserError(f"{path}: the inputs' first axes differ ({', '.join(f'{n}: {f[0]}' for n, f in firsts.items())}"
                        f"): they are no batch axis; {why}")
    (rows,) = batches
    single = onnx.ModelProto()
    single.CopyFrom(model)
    del single.graph.value_info[:]
    for value in (*single.graph.input, *single.graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].Clear()
            dims[0].dim_value = 1
    from .ort_adapter import open_in_memory  # onnxruntime's (or qonnx's) session: only here, where it is needed

    rng = np.random.default_rng(0)
    batch = {v.name: (rng.standard_normal if v.type.tensor_type.elem_type in _FLOAT_TYPES else
                      lambda shape: rng.integers(0, 2, shape))(
                          [d.dim_value for d in v.type.tensor_type.shape.dim]).astype(
                          onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)) for v in inputs}
    whole = open_in_memory(model, str(path)).run(batch)  # a model that fails so fails whatever its batch
    try:
        alone = open_in_memory(single, str(path))
        checked = sorted({0, 1, rows // 2, rows - 1})  # the first rows, a middle one and the last: not B runs
        each = [alone.run({t: x[k:k + 1] for t, x in batch.items()}) for k in checked]
        independent = all(np.shape(whole[t])[:1] == (rows,) and _alike(np.concatenate([e[t] for e in each]),
                                                                       whole[t][checked]) for t in whole)
    except (UserError, ValueError):  # at batch 1 onnxruntime refuses it (a Reshape of B rows), or its rows differ
        independent = False
    if not independent:
        raise UserError(f"{path}: the inputs' axis 0 ({rows}) is no batch axis: the model does not give each of its "
                        f"{rows} rows, run alone, the outputs it gives it among them; {why}")
    return _infer_shapes(single, path, strict=False), rows


def _alike(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two runs' outputs agree: numbers to onnxruntime's rounding, anything else (strings) exactly."""
    if a.dtype.kind in "biufc" and b.dtype.kind in "biufc":
        return np.allclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True)
    return a.shape == b.shape and bool(np.all(a == b))


_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}


def _fix_batch(model: onnx.ModelProto, path: Path) -> list[tuple[str, str]]:
    """Every input's and output's symbolic batch axis (axis 0) fixed to 1; any other symbolic size of
    an input refused. Returns (input, symbol) for each input whose batch axis was symbolic."""
    fixed = []
    for value in list(model.graph.input) + list(model.graph.output):
        dims = value.type.tensor_type.shape.dim
        for axis, dim in enumerate(dims):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                continue
            if axis == 0:
                if value in model.graph.input:
                    fixed.append((value.name, dim.dim_param or "unnamed"))
                dim.Clear()
                dim.dim_value = 1
            elif value in model.graph.input:
                symbol = dim.dim_param or "?"
                raise UserError(
                    f"{path}: input '{value.name}' has a dynamic size '{symbol}' on axis {axis}; "
                    "hetdeploy needs fixed sizes except the batch axis"
                )
            else:
                dim.Clear()  # outputs get their sizes from shape inference
    return fixed


# Initializers of more elements than this lend onnx's shape inference their shapes only: it serialises the model it
# is given, and their data (VGG-19's 548 MB, at each of a load's five inferences) tells it nothing a shape does not.
# The values it reads (a Reshape's shape, a Slice's starts, a Resize's scales) are a handful each, one a dimension.
SHAPE_INFERENCE_ELEMENTS = 4096


def _onnx_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx's shape inference of ``model``, given a copy whose large initializers hold no data, their data copied
    back into what it returns."""
    large = {t.name: t for t in model.graph.initializer
             if t.HasField("raw_data") and math.prod(t.dims) > SHAPE_INFERENCE_ELEMENTS}
    if not large:
        return shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    light = onnx.ModelProto()
    light.CopyFrom(model)
    for tensor in (t for t in light.graph.initializer if t.name in large):
        tensor.ClearField("raw_data")
    inferred = shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    for tensor in (t for t in inferred.graph.initializer if t.name in large):
        tensor.CopyFrom(large[tensor.name])
    return inferred


def _infer_shapes(model: onnx.ModelProto, path: Path, strict: bool) -> onnx.ModelProto:
    """Shape inference; ``strict``: every tensor some node reads, and every graph output, must get
    a fixed shape (an output nothing reads, like Dropout's mask, needs none)."""
    try:
        if any(n.domain in QONNX_DOMAINS for n in model.graph.node):
            inferred = infer_qonnx_shapes(model)
        else:
            inferred = _onnx_shapes(model)
    except Exception as err:
        raise UserError(f"{path}: shape inference failed: {first_line(err)}") from None
    if not strict:
        return inferred
    known = rewrites.tensor_shapes(inferred)
    needed = {t for node in inferred.graph.node for t in node.input} | {o.name for o in inferred.graph.output}
    non_tensor = {v.name for v in list(inferred.graph.value_info) + list(inferred.graph.output)
                  if not v.type.HasField("tensor_type")}
    for node in inferred.graph.node:
        for t in node.output:
            if t in non_tensor:
                raise UserError(f"{path}: node '{node.name}' ({node.op_type}): its output '{t}' is not a tensor "
                                f"(a sequence or map); hetdeploy passes tensors only (skl2onnx: zipmap=False)")
            if t and t in needed and (t not in known or any(d <= 0 for d in known[t])):
                if node.domain not in ("", "ai.onnx", "ai.onnx.ml"):
                    raise UserError(
                        f"{path}: node '{node.name or node.op_type}': op '{node.op_type}' of domain "
                        f"'{node.domain}' is not a standard ONNX op; no device runs it"
                    )
                raise UserError(
                    f"{path}: node '{node.name or node.op_type}' ({node.op_type}): "
                    f"cannot infer a fixed shape for its output '{t}'"
                )
    return inferred


# The most elements of one tensor: int32 indexing in onnxruntime's and hls4ml's kernels.
MAX_ELEMENTS = 2 ** 31 - 1


def _check_sizes(model: onnx.ModelProto, path: Path) -> None:
    for name, shape in rewrites.tensor_shapes(model).items():
        if math.prod(max(d, 1) for d in shape) > MAX_ELEMENTS:
            raise UserError(f"{path}: tensor '{name}' of shape {shape} has more than {MAX_ELEMENTS:,} elements")


# Attributes every kernel needs positive (or, pads, non-negative).
_POSITIVE_INTS = ("kernel_shape", "strides", "dilations", "group", "blocksize")


def _check_attributes(model: onnx.ModelProto, path: Path) -> None:
    """What onnx's checker and shape inference leave to the kernels (which then fail at run time or
    divide by zero): window attributes positive, pads non-negative, a convolution's groups dividing
    its channels."""
    shapes = rewrites.tensor_shapes(model)
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        for name, value in attrs.items():
            values = value if isinstance(value, list) else [value]
            if name in _POSITIVE_INTS and any(not isinstance(v, int) or v < 1 for v in values) \
                    or name == "pads" and any(not isinstance(v, int) or v < 0 for v in values):
                raise UserError(f"{path}: node '{node.name}' ({node.op_type}): attribute {name} = {value} is out of "
                                f"range")
        if node.op_type == "Conv" and len(node.input) > 1:
            x, w, group = shapes.get(node.input[0]), shapes.get(node.input[1]), attrs.get("group", 1)
            if x and w and len(x) > 1 and len(w) > 1 and (x[1] != w[1] * group or w[0] % group):
                raise UserError(f"{path}: node '{node.name}' (Conv): {x[1]} input channels and weights of shape {w} "
                                f"do not make {group} group(s)")


def _dtypes(model: onnx.ModelProto) -> dict[str, str]:
    g = model.graph
    result = {v.name: _DTYPES.get(v.type.tensor_type.elem_type, "other")
              for v in list(g.value_info) + list(g.input) + list(g.output)}
    result.update({i.name: _DTYPES.get(i.data_type, "other") for i in g.initializer})
    return result


def _check_numeric(model: onnx.ModelProto, path: Path) -> None:
    """Every input, and every output whose type the model gives, a tensor of a type hetdeploy feeds and compares
    (NUMERIC_DTYPES, which onnxruntime's Python API takes and gives as numpy arrays): checked before any run."""
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for value in values:
            given = value.type.WhichOneof("value")
            elem = value.type.tensor_type.elem_type
            if kind == "output" and (given != "tensor_type" or not elem):  # a sequence's: its node is named later
                continue
            dtype = _DTYPES.get(elem) or (onnx.TensorProto.DataType.Name(elem).lower()
                                          if elem in onnx.TensorProto.DataType.values() else f"data type {elem}")
            if given != "tensor_type":
                dtype = f"a {given.removesuffix('_type') if given else 'value of no type'}, not a tensor"
            if dtype not in NUMERIC_DTYPES:
                raise UserError(f"{path}: {kind} '{value.name}' is {dtype}; hetdeploy "
                                f"{'feeds' if kind == 'input' else 'gives'} numeric tensors only "
                                f"({', '.join(NUMERIC_DTYPES)})")


def _specs(model: onnx.ModelProto, values) -> list[TensorSpec]:
    shapes, dtypes = rewrites.tensor_shapes(model), _dtypes(model)
    return [TensorSpec(v.name, shapes[v.name], dtypes[v.name]) for v in values]


def _name_nodes(model: onnx.ModelProto) -> None:
    """Empty and repeated names become ``<op>_<index>`` (index in node order: stable)."""
    counts: dict[str, int] = {}
    for node in model.graph.node:
        counts[node.name] = counts.get(node.name, 0) + 1
    taken = set(counts)
    for index, node in enumerate(model.graph.node):
        if node.name and counts[node.name] == 1:
            continue
        base = f"{node.op_type}_{index}"
        name, suffix = base, 1
        while name in taken:
            name, suffix = f"{base}_{suffix}", suffix + 1
        taken.add(name)
        node.name = name


def _consumers(model: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    result: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for t in node.input:
            result.setdefault(t, []).append(node)
    return result


def _absorb_leading_reshapes(model: onnx.ModelProto) -> list[InputReshape]:
    g = model.graph
    inits = {t.name for t in g.initializer}
    consumers = _consumers(model)
    shapes, dtypes = rewrites.tensor_shapes(model), _dtypes(model)
    graph_outputs = {o.name for o in g.output}
    result = []
    for index, value in enumerate(list(g.input)):
        users = consumers.get(value.name, [])
        if value.name in graph_outputs or len(users) != 1 or users[0].op_type != "Reshape":
            continue
        reshape = users[0]
        if reshape.input[0] != value.name or reshape.input[1] not in inits:
            continue
        out = reshape.output[0]
        if out in graph_outputs:
            continue
        new_input = onnx.helper.make_tensor_value_info(out, value.type.tensor_type.elem_type, shapes[out])
        g.input.remove(value)
        g.input.insert(index, new_input)
        g.node.remove(reshape)
        kept = [v for v in g.value_info if v.name != out]
        del g.value_info[:]
        g.value_info.extend(kept)
        result.append(InputReshape(TensorSpec(value.name, shapes[value.name], dtypes[value.name]),
                                   TensorSpec(out, shapes[out], dtypes[out])))
    return result


def _attr_value(attr: onnx.AttributeProto):
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
    if isinstance(value, (int, float, str)):
        return value
    return None  # tensors and graphs: not needed for op limits


def _weight_format(weights: Optional[np.ndarray]) -> tuple[tuple[int, ...], Optional[int]]:
    """A layer's float weights by octave under the top of the format the build gives them
    (``precision.weight_fixed``), and that format's integer bits; ((), None) for none, or for weights not all
    finite (no format holds them)."""
    if weights is None or not np.all(np.isfinite(weights)):
        return (), None
    integer = weight_fixed(weights, WEIGHT_BITS)[1]
    return weight_octaves(weights, integer), integer


def _to_graph(model: onnx.ModelProto, path: Path) -> Graph:
    _check_attributes(model, path)
    shapes, dtypes = rewrites.tensor_shapes(model), _dtypes(model)
    inits = {t.name: math.prod(t.dims) for t in model.graph.initializer}
    values = {t.name: t for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        activations = [t for t in node.input if t and t not in inits]
        # the values intake reads: a layer's weights (input 1) and one-value parameters, no others
        constants = {i: onnx.numpy_helper.to_array(values[t]) for i, t in enumerate(node.input)
                     if t in inits and (i == 1 or inits[t] == 1)}
        weights = constants[1] if 1 in constants and constants[1].dtype.kind == "f" else None
        exact = exact_fixed(weights, WEIGHT_BITS) if weights is not None else None
        octaves, integer = _weight_format(weights if node.op_type in WEIGHTED_OPS else None)
        nodes.append(
            Node(
                name=node.name,
                op=node.op_type,
                inputs=activations,
                outputs=[t for t in node.output if t],
                attrs={a.name: _attr_value(a) for a in node.attribute},
                constants={i: t for i, t in enumerate(node.input) if t in inits},
                constant_shapes={i: shapes[t] for i, t in enumerate(node.input) if t in inits},
                constant_elements=sum(inits[t] for t in set(node.input) if t in inits),
                scalars={i: float(v.reshape(-1)[0]) for i, v in constants.items()
                         if v.size == 1 and v.dtype.kind in "fiub"},  # not a string (ai.onnx.ml's)
                weight_bits=exact[0] if exact else None,
                weight_octaves=octaves,
                weight_integer=integer,
                bipolar_weights=weights is not None and weights.size > 0 and bool(np.all(np.abs(weights) == 1)),
                input_shapes=[shapes[t] for t in activations],
                output_shapes=[shapes[t] for t in node.output if t],
                dtype=dtypes.get(activations[0], "other") if activations else "float32",
                domain=node.domain,
            )
        )
    return Graph(nodes, [i.name for i in model.graph.input], [o.name for o in model.graph.output])
