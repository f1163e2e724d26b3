"""hls4ml (and qonnx) behind one function: the ONNX model of an execution unit -> hls4ml project.

What hls4ml 1.3's ONNX frontend needs, and what it gets wrong by default
(found on this project's host, hls4ml 1.3.0), is handled here and in ``hls4ml_passes``, nowhere else:
- ops it converts wrongly or not at all, rewritten exactly into ops it converts right
  (``rewrites.HLS4ML_LOWERINGS``: average pooling, arithmetic with constants, Clip);
- a QONNX-cleaned, channels-last model (inputs and outputs NHWC: the transposes qonnx adds to
  return outputs to ONNX order are dropped, since units pass channels-last buffers);
- hls4ml's own passes that get hetdeploy's layers wrong, replaced in hetdeploy's copy of its flows
  (``hls4ml_passes``);
- the "stable" Softmax's lookup tables are too coarse and their config keys ignored: sized on the layer;
- several projects linked into one program share hls4ml's weight loader: each unit's files get a prefix;
- a unit whose weights stay in DDR gets them as arguments of its top (hls4ml's BramFactor 0), and
  its weights packed for DDR (weights.bin) instead of hls4ml's weight files;
- a global fixed<16,6> overflows and truncation biases every dot product:
  each layer's integer bits come from activations profiled on sample inputs,
  and results round (RND) and saturate (SAT).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np
import onnx
import onnx.numpy_helper

from ..core.board_runtime import channels_last
from ..core.capture import captured_stdout
from ..core.plan import UnitHls, UnitPort, UnitWeight
from ..core.precision import (BUILD_OVERFLOW, BUILD_ROUNDING, DEFAULT_WIDTH, Quantizer, SoftmaxTables, integer_bits,
                              weight_fixed)
from ..intake.rewrites import HLS4ML_LOWERINGS
from ..planning import units
from . import hls4ml_passes
from .packing import UNIT_WEIGHTS_FILE, pack_fixed
from .templates import TEMPLATES

# Layers whose parallelism the unit's ReuseFactor and Strategy set (after qonnx's GemmToMatMul).
_FOLDED_OPS = {"Conv", "MatMul", "Gemm"}
# Ops whose output hls4ml merges into the preceding layer's result (bias add, scale).
_MERGED_INTO_PREVIOUS = {"Add", "Mul", "BatchNormalization"}
_ROUNDING = f"{BUILD_ROUNDING},{BUILD_OVERFLOW}"  # precision.quantize simulates the same
BINARY_PRECISION = "fixed<2,2>"  # -1 and +1: a BipolarQuant's output (``_binary_as_two_bits``)
FLOAT32_MANTISSA_BITS = 24
# The table activations (units.TABLE_OPS) whose outputs lie within (-1, 1).
_BOUNDED_TABLE_OPS = {"Tanh", "Sigmoid", "Softsign"}
CHANNELS_LAST_DOMAIN = "qonnx.custom_op.channels_last"
HLS4ML_LOG = "hls4ml_convert.log"  # in the unit's project folder
ARITHMETIC_FILE = "arithmetic.npz"  # in the unit's project folder: ``write_arithmetic``
# The layer attributes ``write_arithmetic`` keeps: those of windows (convolution and pooling) and activations.
_ARITHMETIC_ATTRIBUTES = ("activation", "n_in", "n_out", "n_chan", "n_filt", "in_height", "in_width", "out_height",
                          "out_width", "filt_height", "filt_width", "stride_height", "stride_width", "pad_top",
                          "pad_bottom", "pad_left", "pad_right", "pool_height", "pool_width", "pool_op", "data_format",
                          "op")


@dataclass
class HlsOptions:
    part: str
    clock_period_ns: float
    width: int = DEFAULT_WIDTH


class UnitIsACopy(Exception):
    """hls4ml removed every layer of the unit (a BatchNormalization of scale 1 and shift 0, say): its
    output would be its input, and its top would name both ports alike; the caller copies it instead."""


@dataclass
class UnitSettings:
    reuse_factor: int
    strategy: str
    # per unit input: the precision (hls4ml config string) its producing unit writes, or None to size it
    input_precisions: list[Optional[str]]
    weights_in_ddr: bool = False
    output_precision: Optional[str] = None  # hls4ml config string the unit's outputs take (--precision)
    table_size: int = 0  # entries of each lookup table (ExecutionUnit.table_size; 0: the unit has none)
    io_type: str = "io_parallel"  # hls4ml's IOType (ExecutionUnit.io_type)
    # hls4ml config strings of its multiply-accumulate layers' weight, bias and accum types (--precision)
    layer_types: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def _log_to(path: Path, log: io.StringIO) -> Iterator[None]:
    """What hls4ml and qonnx print goes to ``path``, whether the conversion succeeds or not (with
    the exception that ended it)."""
    try:
        yield
    except Exception:
        log.write(traceback.format_exc())
        raise
    finally:
        path.write_text(log.getvalue())


def _output_layers(wrapper) -> list[str]:
    """The layers whose result is a unit output: each output's producer, and the layer before it when
    hls4ml merges that producer into it (a bias Add, a scale, a BatchNormalization)."""
    names = []
    for value in wrapper.graph.output:
        node = wrapper.find_producer(value.name)
        while node is not None:
            names.append(node.name)
            node = wrapper.find_producer(node.input[0]) if node.op_type in _MERGED_INTO_PREVIOUS else None
    return names


def _constant_precisions(wrapper, width: int) -> dict[str, dict[str, str]]:
    """Per hls4ml layer, the precision of its constants from their values: a Conv's or MatMul's
    weight and bias (a MatMul's bias is the constant of the Add after it, which hls4ml merges into
    it), a BatchNormalization's scale and bias as hls4ml folds them."""
    result: dict[str, dict[str, str]] = {}
    constant = wrapper.get_initializer
    for node in wrapper.graph.node:
        values = [constant(t) if t else None for t in node.input]
        if node.op_type in ("Conv", "MatMul") and len(values) > 1 and values[1] is not None:
            kinds = {"weight": weight_precision(values[1], width)}
            bias = values[2] if len(values) > 2 else None
            if node.op_type == "MatMul":
                users = wrapper.find_consumers(node.output[0]) or []
                add = users[0] if len(users) == 1 and users[0].op_type == "Add" else None
                bias = next((constant(t) for t in add.input if constant(t) is not None), None) if add else None
            if bias is not None:
                kinds["bias"] = weight_precision(bias, width)
            result[node.name] = kinds
        if node.op_type == "BatchNormalization" and all(v is not None for v in values[1:5]):
            gamma, beta, mean, var = (v.astype(np.float64) for v in values[1:5])
            epsilon = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
            scale = gamma / np.sqrt(var + epsilon)
            result[node.name] = {"scale": weight_precision(scale, width),
                                 "bias": weight_precision(beta - mean * scale, width)}
    return result


def _prepare_for_hls4ml(wrapper) -> None:
    """What hls4ml 1.3's ONNX frontend reads differently from ONNX, done after profiling (which runs the
    ONNX model). Its Pad and Resize handlers take the data to be channels-last only when a node of the
    graph is in qonnx's channels-last domain; a unit's tensors always are, so those nodes are marked.
    It looks up a shape for every input of a Resize, so an omitted or empty RoI becomes a constant (of
    one zero: hls4ml tests its truth value). It scales a channels-last (H, W, C) tensor's width by
    scales[1] and height by scales[2] (``hls4ml_passes``' ResizeHeightFirst), so those two swap."""
    for node in wrapper.graph.node:
        if node.op_type in ("Pad", "Resize"):
            node.domain = CHANNELS_LAST_DOMAIN
        if node.op_type != "Resize":
            continue
        roi = wrapper.get_initializer(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        if len(node.input) > 1 and (roi is None or roi.size == 0):
            empty, node.input[1] = node.input[1], f"{node.name}_roi"
            wrapper.set_initializer(node.input[1], np.zeros(1, dtype=np.float32))
            if roi is not None and not wrapper.find_consumers(empty):  # hls4ml would make it a layer of no value
                wrapper.del_initializer(empty)
        scales = wrapper.get_initializer(node.input[2]).copy()
        if scales.size == 4:
            scales[[1, 2]] = scales[[2, 1]]
            wrapper.set_initializer(node.input[2], scales)


def lower_for_hls4ml(model: onnx.ModelProto) -> onnx.ModelProto:
    """``rewrites.HLS4ML_LOWERINGS`` on a unit's model: ops hls4ml gets wrong, as ops it gets right."""
    model = onnx.shape_inference.infer_shapes(model)
    for lowering in HLS4ML_LOWERINGS:
        if lowering(model):
            model = onnx.shape_inference.infer_shapes(model)
    return model


def weight_precision(values: np.ndarray, width: int) -> str:
    """The hls4ml precision for a constant (``precision.weight_fixed``), rounded and saturating."""
    bits, integer = weight_fixed(values, width)
    return f"fixed<{bits},{integer},{_ROUNDING}>"


def fixed_config(width: int, integer: int) -> str:
    """The hls4ml config string of ``width`` bits, ``integer`` of them above the binary point (at
    most width - 1: what needs more saturates, and the C-simulation counts it), rounded and saturating."""
    return f"fixed<{width},{min(integer, width - 1)},{_ROUNDING}>"


def fixed_precision(max_abs: float, width: int) -> tuple[str, str]:
    """The fixed-point type for values up to ``max_abs``: (hls4ml config string, C++ type)."""
    from hls4ml.backends import get_backend
    from hls4ml.backends.fpga.fpga_types import APTypeConverter

    config = fixed_config(width, integer_bits(max_abs))
    return config, APTypeConverter().convert(get_backend("Vivado").convert_precision_string(config)).definition_cpp()


def ap_types_headers() -> Path:
    """The ap_fixed/ap_int headers hls4ml ships (and copies into each of its projects); found without
    importing hls4ml (a tenth of a second a build served whole by the cache need not spend)."""
    import importlib.util

    return Path(importlib.util.find_spec("hls4ml").submodule_search_locations[0]) / "templates" / "vivado" / "ap_types"


def generate_unit(
    unit_model: onnx.ModelProto,
    project_dir: Path,
    namespace: str,
    samples: Sequence[dict[str, np.ndarray]],
    settings: UnitSettings,
    options: HlsOptions,
) -> UnitHls:
    """Convert one execution unit with hls4ml into ``project_dir`` (not compiled: the subfunction's
    Makefile builds every unit together with our top).

    The project's code sits in C++ namespace ``namespace`` (its top function too), so that all the
    units of a subfunction link into one program. ``samples``: the unit's inputs (ONNX layout) on the
    float pipeline, which size each layer's integer bits. Ports of rank >= 3 are channels-last on
    both sides: the Transpose back to ONNX order that qonnx appends to outputs is dropped, since the
    next unit reads channels-last.
    """
    import hls4ml
    import onnxruntime

    conversion_flow, writer_flow = hls4ml_passes.register()
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    model = lower_for_hls4ml(unit_model)
    onnx_inputs = [v.name for v in model.graph.input]
    onnx_outputs = [v.name for v in model.graph.output]
    onnx_shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                   for v in list(model.graph.input) + list(model.graph.output)}
    io_type = settings.io_type

    project_dir.mkdir(parents=True)
    # qonnx runs single-node opset-1 models through onnxruntime, which warns on each one
    onnxruntime.set_default_logger_severity(3)
    log = io.StringIO()
    with _log_to(project_dir / HLS4ML_LOG, log), captured_stdout(log):
        wrapper = ModelWrapper(model)
        wrapper = cleanup_model(wrapper)
        wrapper = wrapper.transform(ConvertToChannelsLastAndClean(make_input_channels_last=True))
        wrapper = _every_input_channels_last(wrapper)
        wrapper = wrapper.transform(GemmToMatMul())
        wrapper = cleanup_model(wrapper)
        _drop_output_transposes(wrapper)
        cleaned_inputs = [v.name for v in wrapper.graph.input]

        max_abs: dict[str, float] = {}
        for sample in samples:
            feed = {c: channels_last(sample[o]) for c, o in zip(cleaned_inputs, onnx_inputs)}
            context = execute_onnx(wrapper, feed, return_full_exec_context=True)
            for name, value in context.items():
                if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    max_abs[name] = max(max_abs.get(name, 0.0), float(np.max(np.abs(value))) if value.size else 0.0)

        _prepare_for_hls4ml(wrapper)
        config = hls4ml.utils.config_from_onnx_model(
            wrapper, granularity="name", backend="Vivado", default_precision=fixed_config(options.width, 6)
        )
        layer_precision = _choose_precisions(wrapper.graph, max_abs, options.width)
        written = {name for name, p in zip(cleaned_inputs, settings.input_precisions) if p is not None}
        layer_precision.update(_quantized_precisions(wrapper, written))
        for name, given in zip(cleaned_inputs, settings.input_precisions):
            if given is not None:  # what the producing unit writes
                layer_precision[name] = given
        if settings.output_precision is not None:
            for layer in _output_layers(wrapper):
                layer_precision[layer] = settings.output_precision
        for name, precision in layer_precision.items():
            if name in config["LayerName"]:
                config["LayerName"][name].setdefault("Precision", {})["result"] = precision
        for name, kinds in _constant_precisions(wrapper, options.width).items():
            if name in config["LayerName"]:  # a copy: hls4ml's config shares one dict between layers
                config["LayerName"][name]["Precision"] = {**config["LayerName"][name]["Precision"], **kinds}
        config["Flows"] = [conversion_flow]
        if settings.weights_in_ddr:  # every weight array an argument of the top (none inside the project)
            config["Model"]["BramFactor"] = 0
        for node in wrapper.graph.node:
            layer = config["LayerName"].get(node.name)
            if layer is None:
                continue
            if node.op_type in _FOLDED_OPS:
                # under xnor_popcount hls4ml's resource strategy lays out the weights, the kernel hetdeploy's
                xnor = settings.strategy == units.XNOR_POPCOUNT
                layer.update(ReuseFactor=settings.reuse_factor, Strategy="Resource" if xnor else settings.strategy)
                if xnor:
                    layer[hls4ml_passes.XNOR_CONFIG_KEY] = True
                layer["Precision"] = {**layer.get("Precision", {}), **settings.layer_types}
            if node.op_type == "BatchNormalization":  # a scale kept after the layer (a quantized layer's) folds with
                # it: its products share ceil(n / R) multipliers, as fast as the layer (units.estimate counts them)
                layer.update(ReuseFactor=settings.reuse_factor)
            if node.op_type in units.TABLE_OPS:  # the unit's (default 4096: hls4ml's 1024 err by up to ~0.004)
                layer.update(TableSize=settings.table_size)
                if node.op_type in _BOUNDED_TABLE_OPS:  # outputs within (-1, 1): 16 fraction bits, not 10
                    layer["Precision"] = {**layer["Precision"], "table": f"fixed<18,2,{_ROUNDING}>"}
            if node.op_type == "Softmax":  # its inverse table's size given, hls4ml keeps the sizes we give
                layer.update(Implementation="stable", TableSize=settings.table_size, InvTableSize=settings.table_size)
                n = wrapper.get_tensor_shape(node.input[0])[-1]
                layer["Precision"]["accum"] = SoftmaxTables(0, 0, n, settings.table_size).accumulator()

        hls_model = hls4ml.converters.convert_from_onnx_model(
            wrapper,
            output_dir=str(project_dir),
            project_name=namespace,
            namespace=namespace,
            backend="Vivado",
            io_type=io_type,
            part=options.part,
            clock_period=options.clock_period_ns,
            hls_config=config,
        )
        _merged_result(hls_model, wrapper, layer_precision)
        for layer in hls_model.get_layers():
            if layer.class_name == "Softmax":
                _size_softmax_tables(layer, hls_model.config.backend)
            _binary_as_two_bits(layer)
        in_vars, out_vars = hls_model.get_input_variables(), hls_model.get_output_variables()
        if {v.name for v in out_vars} & {v.name for v in in_vars}:
            raise UnitIsACopy(namespace)
        hls_model.apply_flow(writer_flow)  # hls_model.write() would run the backend's own flows first
        write_arithmetic(hls_model, project_dir / ARITHMETIC_FILE)
        ddr_vars = [(v.name, v.type.precision.definition_cpp(), v.data_length)
                    for v in hls_model.get_weight_variables() if v.storage.lower() == "bram"]
    if settings.strategy == units.XNOR_POPCOUNT:
        header = hls4ml_passes.XNOR_HEADER
        shutil.copy(TEMPLATES / header, project_dir / "firmware" / "nnet_utils" / header)
    _make_relocatable(project_dir)
    _prefix_weight_files(project_dir / "firmware" / f"{namespace}.cpp")
    _distributed_arithmetic_in_namespace(project_dir, namespace)
    return UnitHls(
        project=str(project_dir),
        io_type=io_type,
        layer_precision=dict(sorted(layer_precision.items())),
        inputs=_unit_ports(onnx_inputs, onnx_shapes, in_vars, io_type, project_dir),
        outputs=_unit_ports(onnx_outputs, onnx_shapes, out_vars, io_type, project_dir),
        ddr_weights=_pack_ddr_weights(project_dir, namespace, ddr_vars),
    )


def _distributed_arithmetic_in_namespace(project_dir: Path, namespace: str) -> None:
    """hls4ml writes the distributed_arithmetic strategy's code (da4ml's) into the project's own namespace,
    where it calls ``bit_shift``, which hls4ml's nnet_function_stubs.h declares in ``nnet`` only (a project
    in the default namespace does not see the difference): brought into the project's namespace."""
    generated = project_dir / "firmware" / "nnet_utils" / "nnet_code_gen.h"
    text = generated.read_text() if generated.is_file() else ""
    if "bit_shift<" in text:
        opening = f"namespace {namespace} {{\n"
        generated.write_text(text.replace(opening, opening + "using nnet::bit_shift;\n", 1))


def write_arithmetic(hls_model, path: Path) -> None:
    """What each layer of the converted unit computes, as its C-simulation does, into ``path`` (an npz:
    ``layers``, a JSON list of each layer's class, name, input and output tensors, output type and
    shape, accumulator type and window attributes; ``<layer>/<weight>`` arrays): for an RTL model of
    the same arithmetic (``fpga/open_synth.py``). Weights are the values the C-simulation holds: the
    text hls4ml writes of each (its ``precision_fmt``), read as a double and cast to the weight's type
    (nnet_helpers' loader), in the layer's logical layout (the Resource strategy's transposes undone); under the
    distributed_arithmetic strategy, the layer's own floats (da4ml's code holds them exactly)."""
    from ..core.precision import CppFixed

    layers, arrays = [], {}
    for layer in hls_model.get_layers():
        output = layer.get_output_variable()
        record = {"class": layer.class_name, "name": layer.name, "inputs": list(layer.inputs),
                  "outputs": list(layer.outputs), "output_type": output.type.precision.definition_cpp(),
                  "output_shape": [int(d) for d in output.shape], "weights": {}}
        for key in _ARITHMETIC_ATTRIBUTES:
            value = layer.get_attr(key)
            if value is not None:
                record[key] = value if isinstance(value, str) else int(value)
        accum = layer.get_attr("accum_t")
        if accum is not None:
            record["accum_type"] = accum.precision.definition_cpp()
        if layer.get_attr("strategy") == "distributed_arithmetic":  # its weights in da4ml's code, exact floats
            record["strategy"] = "distributed_arithmetic"
            for kind, kept in hls4ml_passes.DA_KEPT.items():
                if layer.get_attr(kept) is not None:
                    record["weights"][kind] = "exact"
                    arrays[f"{layer.name}/{kind}"] = layer.get_attr(kept)
        for kind, variable in layer.weights.items():
            if kind in record["weights"] or variable.data is None or not variable.precision_fmt:
                continue
            cpp = variable.type.precision.definition_cpp()
            text = np.vectorize(lambda v, fmt=variable.precision_fmt: float(fmt.format(v)), otypes=[np.float64])
            held = CppFixed.parse(cpp).quantize(text(np.asarray(variable.data, dtype=np.float64)))
            if layer.get_attr("_weights_transposed") and kind == "weight":
                held = np.transpose(held) if held.ndim == 2 else np.moveaxis(held, 0, -1)  # (F, ..., C) back
            record["weights"][kind] = cpp
            arrays[f"{layer.name}/{kind}"] = held
        layers.append(record)
    with path.open("wb") as out:
        np.savez(out, layers=np.array(json.dumps(layers)), **arrays)


def _binary_as_two_bits(layer) -> None:
    """hls4ml's binary_tanh (a BipolarQuant) writes hls4ml's XNOR type, one bit meaning -1 or +1,
    which hetdeploy's ports and the layers after it would read as 0 or 1: it writes -1 and +1 in a
    signed two-bit fixed-point type instead (binary_tanh casts +-1 to it exactly)."""
    from hls4ml.backends.fpga.fpga_types import APTypeConverter
    from hls4ml.model.types import FixedPrecisionType, XnorPrecisionType

    if layer.get_attr("activation") == "binary_tanh" and isinstance(layer.get_output_variable().type.precision,
                                                                    XnorPrecisionType):
        # the type BINARY_PRECISION names
        layer.get_output_variable().type.precision = APTypeConverter().convert(FixedPrecisionType(2, 2, signed=True))


def _pack_ddr_weights(project_dir: Path, namespace: str, variables: list[tuple[str, str, int]]) -> list[UnitWeight]:
    """The weight arrays hls4ml made arguments of the unit's top, in its argument order, packed one
    after the other, each from an arena word (arena.h), into ``weights.bin`` as the DDR holds them
    (``pack_fixed``) from the values hls4ml wrote; its own files for them are removed, and its
    C-simulation no longer loads them, so that the DDR contents are all the unit computes with."""
    if not variables:
        return []
    weights, packed = [], []
    offset = 0
    folder = project_dir / "firmware" / "weights"
    top = project_dir / "firmware" / f"{namespace}.cpp"
    text = top.read_text()
    for name, precision, values in variables:
        txt = folder / f"{name}.txt"
        data = np.array([float(x) for x in txt.read_text().split(",")], dtype=np.float64)
        if data.size != values:
            raise RuntimeError(f"{txt}: {data.size} values, hls4ml's array holds {values}")
        words = pack_fixed(data, precision)
        words += bytes(units.buffer_bytes(len(words), 1) - len(words))  # each array on whole arena words
        weights.append(UnitWeight(name, precision, values, offset, len(words)))
        packed.append(words)
        offset += len(words)
        txt.unlink()
        (folder / f"{name}.h").unlink()
        text, loads = re.subn(rf"\n[ \t]*nnet::load_weights_from_txt<[^;]*\({re.escape(name)}, [^;]*;", "", text)
        if loads != 1:
            raise RuntimeError(f"{top}: expected one load of weight array {name}, found {loads}")
    top.write_text(text)
    (project_dir / UNIT_WEIGHTS_FILE).write_bytes(b"".join(packed))
    return weights


def _every_input_channels_last(wrapper):
    """qonnx makes only the first graph input channels-last; a unit with several (Add, Concat)
    reads every buffer channels-last: give each input its turn as the first."""
    from qonnx.transformation.channels_last import RemoveConsecutiveChanFirstAndChanLastTrafos
    from qonnx.transformation.make_input_chanlast import MakeInputChannelsLast

    names = [v.name for v in wrapper.graph.input]
    for name in names[1:]:
        inputs = sorted(wrapper.graph.input, key=lambda v: v.name != name)
        del wrapper.graph.input[:]
        wrapper.graph.input.extend(inputs)
        wrapper = wrapper.transform(MakeInputChannelsLast())
        wrapper = wrapper.transform(RemoveConsecutiveChanFirstAndChanLastTrafos())
    inputs = sorted(wrapper.graph.input, key=lambda v: names.index(v.name))
    del wrapper.graph.input[:]
    wrapper.graph.input.extend(inputs)
    _sink_transposes(wrapper)
    return wrapper


# Ops that act on each value alone: a layout transpose commutes with them.
_PER_VALUE_OPS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "ThresholdedRelu", "HardSigmoid", "Clip",
                  "Softsign", "Softplus", "Quant", "BipolarQuant"}
# Ops over several tensors of one shape (or constants broadcast against it): the transpose commutes
# when every tensor input comes through the same transpose and every constant is transposed alike.
_BROADCAST_OPS = {"Add", "Sub", "Mul", "Div", "PRelu", "Max", "Min", "Concat"}
# Ops with a constant vector of one entry per axis (Pad's begins then ends, Resize's scales): the
# transpose commutes when the vector is permuted alike.
_PER_AXIS_OPS = {"Pad": 1, "Resize": 2}  # op -> the input holding the vector


def _sink_transposes(wrapper) -> None:
    """qonnx moves its transposes back to ONNX order only past some ops, and never one that reads
    a graph input: every elementwise op of a unit (activations, Add and Concat of channels-last
    inputs, Mul or Add by a constant) would then run on a buffer in ONNX order while the unit's
    ports are channels-last. Move each such Transpose past the op (transposing its constants
    with it) until it reaches a graph output, where ``_drop_output_transposes`` drops it."""

    graph = wrapper.graph
    moved = True
    while moved:
        moved = False
        for node in list(graph.node):
            if node.op_type not in _PER_VALUE_OPS | _BROADCAST_OPS | _PER_AXIS_OPS.keys():
                continue
            rank = len(wrapper.get_tensor_shape(node.output[0]))
            if rank < 3:
                continue
            back_to_onnx = [0, rank - 1, *range(1, rank - 1)]
            to_last = [0, *range(2, rank), 1]
            tensors = [k for k, t in enumerate(node.input) if t and wrapper.get_initializer(t) is None]
            if node.op_type in _PER_VALUE_OPS | _PER_AXIS_OPS.keys():
                tensors = tensors[:1]
            producers = [wrapper.find_producer(node.input[k]) for k in tensors]
            if not tensors or not all(
                    p is not None and p.op_type == "Transpose" and
                    list(onnx.helper.get_attribute_value(p.attribute[0])) == back_to_onnx and
                    len(wrapper.find_consumers(p.output[0])) == 1 for p in producers):
                continue
            for k, producer in zip(tensors, producers):
                node.input[k] = producer.input[0]
            if node.op_type in _BROADCAST_OPS:
                for k, t in enumerate(node.input):
                    value = wrapper.get_initializer(t) if t else None
                    if value is not None and value.ndim > 0 and value.size > 1:
                        aligned = value.reshape([1] * (rank - value.ndim) + list(value.shape))
                        name = f"{t}_channels_last"
                        wrapper.set_initializer(name, np.ascontiguousarray(aligned.transpose(to_last)))
                        node.input[k] = name
            if node.op_type in _PER_AXIS_OPS:
                k = _PER_AXIS_OPS[node.op_type]
                vector = wrapper.get_initializer(node.input[k])
                halves = vector.reshape(-1, rank)  # Pad: begins and ends; Resize: the scales
                name = f"{node.input[k]}_channels_last"
                wrapper.set_initializer(name, np.ascontiguousarray(halves[:, to_last]).reshape(-1))
                node.input[k] = name
            if node.op_type == "Concat":
                axis = onnx.helper.get_attribute_value(node.attribute[0]) % rank
                node.attribute[0].i = to_last.index(axis)
            result = node.output[0]
            shape = wrapper.get_tensor_shape(result)
            node.output[0] = f"{result}_channels_last"
            wrapper.set_tensor_shape(node.output[0], [shape[0], *shape[2:], shape[1]])
            graph.node.insert(list(graph.node).index(node) + 1,
                              onnx.helper.make_node("Transpose", [node.output[0]], [result], perm=back_to_onnx))
            for producer in producers:
                graph.node.remove(producer)
            moved = True


def _drop_output_transposes(wrapper) -> None:
    """Make every channels-last tensor that qonnx transposes back to ONNX order just before a graph
    output the output itself."""
    outputs = []
    for value in wrapper.graph.output:
        producer = wrapper.find_producer(value.name)
        rank = len(wrapper.get_tensor_shape(value.name))
        back_to_onnx = [0, rank - 1, *range(1, rank - 1)]
        if producer is not None and producer.op_type == "Transpose" and \
                list(onnx.helper.get_attribute_value(producer.attribute[0])) == back_to_onnx:
            source = producer.input[0]
            shape = wrapper.get_tensor_shape(source)
            wrapper.graph.node.remove(producer)
            for info in [v for v in wrapper.graph.value_info if v.name == source]:
                wrapper.graph.value_info.remove(info)
            value = onnx.helper.make_tensor_value_info(source, value.type.tensor_type.elem_type, shape)
        outputs.append(value)
    del wrapper.graph.output[:]
    wrapper.graph.output.extend(outputs)


_WEIGHT_LOAD = re.compile(r'(nnet::load_weights_from_txt<[^;]*?\([^,;]+, )"')


def _prefix_weight_files(source: Path) -> None:
    """hls4ml's weight loader is one inline template for every project linked into a program, which
    reads WEIGHTS_DIR/<file>: give each unit's files its own folder prefix (empty by default, so
    the project still builds on its own)."""
    text = source.read_text()
    text = _WEIGHT_LOAD.sub(r'\1HETDEPLOY_WEIGHTS_PREFIX "', text)
    default = '#ifndef HETDEPLOY_WEIGHTS_PREFIX\n#define HETDEPLOY_WEIGHTS_PREFIX ""\n#endif\n'
    source.write_text(default + text)


def _unit_ports(names: list[str], shapes: dict[str, list[int]], variables, io_type: str,
                project_dir: Path) -> list[UnitPort]:
    if len(names) != len(variables):
        raise RuntimeError(f"{project_dir}: hls4ml top has {len(variables)} ports, the unit {len(names)} tensors")
    ports = []
    for name, var in zip(names, variables):
        shape = shapes[name]
        if int(np.prod(shape)) != var.size():
            raise RuntimeError(f"{project_dir}: port for '{name}' holds {var.size()} values, the tensor {shape}")
        pack = int(var.shape[-1]) if io_type == "io_stream" else 1
        ports.append(UnitPort(name, shape, "channels_last" if len(shape) >= 3 else "onnx", var.type.name, pack,
                              var.type.precision.definition_cpp(), str(var.type.precision)))
    return ports


def _merged_result(hls_model, wrapper, layer_precision: dict[str, str]) -> None:
    """hls4ml merges a bias or scale layer into the Conv or Dense before it only when that one's
    result precision is unset ("auto", exact), and keeps it exact after: give it the merged
    layer's, so that the pair rounds once, to the type sized for the pair's output."""
    from hls4ml.backends.fpga.fpga_types import APTypeConverter

    kept = {layer.name for layer in hls_model.get_layers()}
    for layer in hls_model.get_layers():
        name = layer.name.removeprefix("Dense_")  # hls4ml's name for a Dense made of a MatMul
        if layer_precision.get(name) != "auto":
            continue
        node = wrapper.get_node_from_name(name)
        users = wrapper.find_consumers(node.output[0]) if node is not None else []
        merged = users[0].name if len(users) == 1 else None
        if merged is None or merged in kept or layer_precision.get(merged, "auto") == "auto":
            continue  # not merged: it stays exact and the layer after it rounds
        precision = hls_model.config.backend.convert_precision_string(layer_precision[merged])
        layer.get_output_variable().type.precision = APTypeConverter().convert(precision)


def _size_softmax_tables(layer, backend) -> None:
    """hls4ml's stable Softmax indexes a table of 1/sum over fixed<18,8> (steps of 1/8 for sums near
    1: up to 12 % error), holds max - x in an ap_ufixed one bit narrower than the input, which wraps
    where the inputs spread over more than half their range, and its "Precision" config keys for the
    tables are not applied. Size them on the layer, after ``_merged_result`` has settled its input's
    type, as ``precision.SoftmaxTables`` describes: max - x exact, exp(x - max) in (0, 1], 1/sum in
    (0, 1]; the sum's exact accumulator is set before converting (its name is hls4ml's then)."""
    from hls4ml.backends.vivado.passes.core_templates import SoftmaxConfigTemplate
    from hls4ml.model.optimizer import get_optimizer
    from hls4ml.model.types import NamedType

    data = layer.get_input_variable().type.precision
    n_slice = layer.get_attr("n_in") // layer.get_attr("n_inner", 1) // layer.get_attr("n_outer", 1)
    tables = SoftmaxTables(data.width, data.integer, n_slice, layer.get_attr("table_size"))  # the unit's TableSize
    width, integer = SoftmaxTables.TABLE_WIDTH, SoftmaxTables.TABLE_INTEGER
    types = {
        "exp_table_t": f"fixed<{width},{integer},{_ROUNDING}>",
        "inv_table_t": f"fixed<{width},{integer},{_ROUNDING}>",
        "inv_inp_t": f"ufixed<{width},{tables.sum_bits},{_ROUNDING}>",
        "inp_norm_t": f"ufixed<{data.width},{data.integer},{_ROUNDING}>",
    }
    for attr, precision in types.items():
        layer.set_attr(attr, NamedType(f"{layer.name}_{attr}", backend.convert_precision_string(precision)))
    layer.set_attr("exp_table_size", tables.exp_size)
    layer.set_attr("inv_table_size", tables.table_size)
    # turn the plain types into the backend's (as hls4ml's own flow does after conversion), and write
    # the layer's config again: conversion wrote it with the sizes and the inp_norm_t it had then
    get_optimizer("vivado:transform_types").transform(layer.model, layer)
    layer.set_attr("config_cpp", SoftmaxConfigTemplate().format(layer))


def _choose_precisions(graph: onnx.GraphProto, max_abs: dict[str, float], width: int) -> dict[str, str]:
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for t in node.input:
            consumers.setdefault(t, []).append(node)
    result = {}
    for value in graph.input:
        result[value.name] = fixed_config(width, integer_bits(max_abs.get(value.name, 0.0)))
    for node in graph.node:
        seen = [max_abs.get(t, 0.0) for t in node.output]
        users = consumers.get(node.output[0], [])
        if len(users) == 1 and users[0].op_type in _MERGED_INTO_PREVIOUS:
            # exact, so that hls4ml merges the layer after it (``_merged_result``); not when that
            # one is followed by another layer hls4ml would merge too (with a bias sized before)
            after = consumers.get(users[0].output[0], [])
            if node.op_type in _FOLDED_OPS and not any(n.op_type in _MERGED_INTO_PREVIOUS for n in after):
                result[node.name] = "auto"
                continue
            seen += [max_abs.get(t, 0.0) for t in users[0].output]
        result[node.name] = fixed_config(width, integer_bits(max(seen, default=0.0)))
    return result


# Ops that commute with a rounding, saturating cast (monotone, mapping the grid onto itself): a
# quantizer after them may as well cast their outputs.
_COMMUTE_WITH_CAST = {"Relu", "MaxPool"}
# Layers hls4ml sizes exactly (no rounding) when their result precision is "auto".
_EXACT_WHEN_AUTO = {"Conv", "MatMul", "Add", "Mul", "BatchNormalization"}


def _quantizer(wrapper, node) -> Optional[Quantizer]:
    """The Quant node's quantizer (constant parameters, one scale and zero point), else None."""
    values = [wrapper.get_initializer(t) for t in node.input[1:4]]
    if node.op_type != "Quant" or any(v is None or v.size != 1 for v in values):
        return None
    scale, zero_point, bits = (float(v.reshape(-1)[0]) for v in values)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    rounding = attrs.get("rounding_mode", b"ROUND")
    return Quantizer(int(bits), scale, zero_point, bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0)),
                     rounding.decode() if isinstance(rounding, bytes) else rounding)


def _exact_float_input(quantizer: Quantizer) -> str:
    """A type that float32 inputs convert to without changing the quantizer's result: one integer
    bit more than its range (what saturates there saturates in it too), and fraction bits to hold a
    float32 (24-bit mantissa) at its rounding points (half its step) exactly."""
    width, integer = quantizer.fixed()
    fraction = width - integer + FLOAT32_MANTISSA_BITS
    return f"fixed<{integer + 1 + fraction},{integer + 1},{_ROUNDING}>"


def _quantized_precisions(wrapper, given: set[str]) -> dict[str, str]:
    """Precisions that make each fixed-point quantizer (power-of-two scale, zero point 0) exact:
    the one rounding happens where the quantizer is, on exact values. Going back from it through the
    ops that commute with its cast (ReLU, max pooling), each of those casts to the quantizer's type;
    the layer before them rounds to it too, and layers further back compute exactly ("auto"), a ReLU
    before a scaling step (a quantizer's scale as an affine step) among them; those
    ops after it keep its type (a max of 4-bit values needs no 16 bits). A unit
    input read first by the quantizer (unless another unit writes it) holds every float32 value
    near the quantizer's rounding points exactly (``_exact_float_input``), so it rounds once. A
    BipolarQuant's sign is taken of an exact value the same way."""
    result: dict[str, str] = {}
    for node in wrapper.graph.node:
        quantizer = _quantizer(wrapper, node)
        if quantizer is None or not quantizer.exact_in_fixed_point:
            continue
        precision, tensor = quantizer.hls4ml_precision(), node.input[0]
        rounded = False  # whether a layer on the way already casts to the quantizer's type
        while len(wrapper.find_consumers(tensor) or []) == 1:
            producer = wrapper.find_producer(tensor)
            if producer is None:
                if tensor not in given:
                    result[tensor] = _exact_float_input(quantizer)
                break
            if not rounded:  # the layer that rounds, or a ReLU / max pool between it and the quantizer
                result[producer.name] = precision
            elif producer.op_type in _EXACT_WHEN_AUTO | _COMMUTE_WITH_CAST:  # before the rounding: exact
                result[producer.name] = "auto"
            else:
                break
            rounded = rounded or producer.op_type not in _COMMUTE_WITH_CAST
            if producer.op_type in ("Conv", "MatMul") or producer.op_type not in _COMMUTE_WITH_CAST | _EXACT_WHEN_AUTO:
                break
            tensor = producer.input[0]
        _keep_type_after(wrapper, node, precision, result)
    for node in wrapper.graph.node:
        if node.op_type == "BipolarQuant":  # its sign exact: the layers before it exact, back to a Conv or MatMul
            _keep_type_after(wrapper, node, BINARY_PRECISION, result)  # a max of +-1 is +-1
            producer = wrapper.find_producer(node.input[0])
            while producer is not None and producer.op_type in _EXACT_WHEN_AUTO | _COMMUTE_WITH_CAST and \
                    len(wrapper.find_consumers(producer.output[0]) or []) == 1:
                result[producer.name] = "auto"
                if producer.op_type in ("Conv", "MatMul"):
                    break
                producer = wrapper.find_producer(producer.input[0])
    return result


def _keep_type_after(wrapper, quantizer, precision: str, result: dict[str, str]) -> None:
    """The ops after ``quantizer`` that commute with its cast (ReLU, max pooling) keep its type."""
    users = wrapper.find_consumers(quantizer.output[0]) or []
    while len(users) == 1 and users[0].op_type in _COMMUTE_WITH_CAST:
        result.setdefault(users[0].name, precision)
        users = wrapper.find_consumers(users[0].output[0]) or []


def _make_relocatable(project_dir: Path) -> None:
    """Drop what ties the project to this folder or to a random stamp (builds must be
    byte-for-byte reproducible): hls4ml's own build_lib.sh (replaced by
    build_csim.sh), the random library Stamp and the absolute OutputDir."""
    (project_dir / "build_lib.sh").unlink(missing_ok=True)
    config = project_dir / "hls4ml_config.yml"
    if config.exists():
        lines = [("OutputDir: ." if line.startswith("OutputDir:") else line)
                 for line in config.read_text().splitlines() if not line.startswith("Stamp:")]
        config.write_text("\n".join(lines) + "\n")
