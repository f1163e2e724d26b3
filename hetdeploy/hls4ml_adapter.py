"""hls4ml (and qonnx) behind one function: ONNX subfunction -> compiled HLS project.

What hls4ml 1.3's ONNX frontend needs, and what it gets wrong by default
(FACTS.md section 6), is handled here and nowhere else:
- explicit Conv/MaxPool attributes (it reads them without defaults);
- a QONNX-cleaned, channels-last model (inputs then NHWC, outputs back in ONNX order);
- qonnx's constant folding builds IR-14 models that onnxruntime refuses (shim below);
- the "stable" Softmax is wrong: the legacy one is used;
- a global fixed<16,6> overflows and truncation biases every dot product:
  each layer's integer bits come from activations profiled on sample inputs,
  and results round (RND) and saturate (SAT).
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import onnx

from .csim import compile_library
from .errors import UserError
from .model import MAX_IR_VERSION
from .plan import HlsPort, HlsProject

STREAM_OPS = {"Conv", "MaxPool", "AveragePool", "Concat", "BatchNormalization"}
# Ops whose output hls4ml merges into the preceding layer's result (bias add, scale).
_MERGED_INTO_PREVIOUS = {"Add", "Mul", "BatchNormalization"}
_ROUNDING = "RND,SAT"


@dataclass
class HlsOptions:
    part: str
    clock_period_ns: float
    width: int = 16
    weight_precision: str = "fixed<16,6,RND,SAT>"


@contextlib.contextmanager
def _onnxruntime_readable_models() -> Iterator[None]:
    """qonnx builds single-node models with onnx.helper.make_model, which stamps the
    newest IR version (14 with onnx 1.23); onnxruntime refuses those. Cap it while
    qonnx runs."""
    original = onnx.helper.make_model

    @functools.wraps(original)
    def capped(graph, **kwargs):
        model = original(graph, **kwargs)
        if "ir_version" not in kwargs:
            model.ir_version = min(model.ir_version, MAX_IR_VERSION)
        return model

    onnx.helper.make_model = capped
    try:
        yield
    finally:
        onnx.helper.make_model = original


def _explicit_attributes(model: onnx.ModelProto) -> None:
    for node in model.graph.node:
        attrs = {a.name: a for a in node.attribute}
        if node.op_type not in ("Conv", "MaxPool"):
            continue
        kernel = list(attrs["kernel_shape"].ints) if "kernel_shape" in attrs else None
        if kernel is None:
            raise UserError(f"node '{node.name}' ({node.op_type}): kernel_shape must be given for the FPGA")
        dims = len(kernel)
        defaults = {"strides": [1] * dims, "pads": [0] * (2 * dims)}
        if node.op_type == "Conv":
            defaults.update(dilations=[1] * dims)
        for name, value in defaults.items():
            if name not in attrs:
                node.attribute.append(onnx.helper.make_attribute(name, value))
        if node.op_type == "Conv" and "group" not in attrs:
            node.attribute.append(onnx.helper.make_attribute("group", 1))


def _integer_bits(max_abs: float) -> int:
    """Sign bit + bits for the largest magnitude seen + one bit of headroom."""
    if max_abs <= 0:
        return 1
    return max(1, math.ceil(math.log2(max_abs)) + 2)


def _fixed(width: int, integer: int) -> str:
    return f"fixed<{max(width, integer + 8)},{integer},{_ROUNDING}>"


def channels_last(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1)) if x.ndim >= 3 else x


def generate(
    sub_model: onnx.ModelProto,
    project_dir: Path,
    top: str,
    samples: Sequence[dict[str, np.ndarray]],
    options: HlsOptions,
) -> HlsProject:
    """Convert ``sub_model`` with hls4ml into ``project_dir`` and compile its C-simulation.

    ``samples``: inputs of the subfunction (ONNX layout) used to size each
    layer's fixed-point integer bits.
    """
    import hls4ml
    import onnxruntime
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    model = onnx.ModelProto()
    model.CopyFrom(sub_model)
    _explicit_attributes(model)
    onnx_inputs = [v.name for v in model.graph.input]
    onnx_shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                   for v in list(model.graph.input) + list(model.graph.output)}
    io_type = "io_stream" if any(n.op_type in STREAM_OPS for n in model.graph.node) else "io_parallel"

    project_dir.mkdir(parents=True)
    # qonnx runs single-node opset-1 models through onnxruntime, which warns on each one
    onnxruntime.set_default_logger_severity(3)
    log = io.StringIO()
    with _onnxruntime_readable_models(), contextlib.redirect_stdout(log), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapper = ModelWrapper(model)
        wrapper = cleanup_model(wrapper)
        wrapper = wrapper.transform(ConvertToChannelsLastAndClean(make_input_channels_last=True))
        wrapper = wrapper.transform(GemmToMatMul())
        wrapper = cleanup_model(wrapper)
        cleaned_inputs = [v.name for v in wrapper.graph.input]

        max_abs: dict[str, float] = {}
        for sample in samples:
            feed = {c: channels_last(sample[o]) for c, o in zip(cleaned_inputs, onnx_inputs)}
            context = execute_onnx(wrapper, feed, return_full_exec_context=True)
            for name, value in context.items():
                if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    max_abs[name] = max(max_abs.get(name, 0.0), float(np.max(np.abs(value))) if value.size else 0.0)

        config = hls4ml.utils.config_from_onnx_model(
            wrapper, granularity="name", backend="Vivado", default_precision=options.weight_precision
        )
        layer_precision = _choose_precisions(wrapper.graph, max_abs, options.width)
        for name, precision in layer_precision.items():
            if name in config["LayerName"]:
                config["LayerName"][name].setdefault("Precision", {})["result"] = precision
        for node in wrapper.graph.node:
            if node.op_type == "Softmax" and node.name in config["LayerName"]:
                layer = config["LayerName"][node.name]
                layer.update(Implementation="stable", TableSize=4096)
                layer["Precision"]["accum"] = _fixed(22, _sum_bits(wrapper.get_tensor_shape(node.input[0])[-1]) + 1)

        hls_model = hls4ml.converters.convert_from_onnx_model(
            wrapper,
            output_dir=str(project_dir),
            project_name=top,
            backend="Vivado",
            io_type=io_type,
            part=options.part,
            clock_period=options.clock_period_ns,
            hls_config=config,
        )
        for layer in hls_model.get_layers():
            if layer.class_name == "Softmax":
                _size_softmax_tables(layer, hls_model.config.backend)
        hls_model.write()
        in_vars, out_vars = hls_model.get_input_variables(), hls_model.get_output_variables()
    (project_dir / "hls4ml_convert.log").write_text(log.getvalue())
    _make_relocatable(project_dir)

    inputs = _ports(onnx_inputs, onnx_shapes, [v.size() for v in in_vars], "channels_last", project_dir)
    outputs = _ports([v.name for v in model.graph.output], onnx_shapes, [v.size() for v in out_vars], "onnx", project_dir)
    library = compile_library(project_dir, top)
    return HlsProject(
        project=str(project_dir),
        library=str(library),
        top=top,
        io_type=io_type,
        default_precision=options.weight_precision,
        layer_precision=dict(sorted(layer_precision.items())),
        inputs=inputs,
        outputs=outputs,
    )


def _sum_bits(n: int) -> int:
    """Integer bits (unsigned) for a sum of n values in (0, 1]."""
    return math.ceil(math.log2(n + 1)) + 1


def _size_softmax_tables(layer, backend) -> None:
    from hls4ml.model.optimizer import get_optimizer
    from hls4ml.model.types import NamedType

    """hls4ml's stable Softmax indexes a table of 1/sum over fixed<18,8> (steps of 1/8
    for sums near 1: up to 12 % error), and its "Precision" config keys for the
    tables are not applied. Size the tables on the layer to what they hold:
    exp(x - max) in (0, 1], sums in [1, n]."""
    sum_bits = _sum_bits(layer.get_attr("n_in"))
    types = {
        "exp_table_t": f"fixed<18,2,{_ROUNDING}>",
        "inv_table_t": f"fixed<18,2,{_ROUNDING}>",
        "inv_inp_t": f"ufixed<18,{sum_bits},{_ROUNDING}>",
    }
    for attr, precision in types.items():
        layer.set_attr(attr, NamedType(f"{layer.name}_{attr}", backend.convert_precision_string(precision)))
    # turn the plain types into the backend's (as hls4ml's own flow does after conversion)
    get_optimizer("vivado:transform_types").transform(layer.model, layer)


def _choose_precisions(graph: onnx.GraphProto, max_abs: dict[str, float], width: int) -> dict[str, str]:
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for t in node.input:
            consumers.setdefault(t, []).append(node)
    result = {}
    for value in graph.input:
        result[value.name] = _fixed(width, _integer_bits(max_abs.get(value.name, 0.0)))
    for node in graph.node:
        if node.op_type == "Softmax":
            continue
        seen = [max_abs.get(t, 0.0) for t in node.output]
        users = consumers.get(node.output[0], [])
        if len(users) == 1 and users[0].op_type in _MERGED_INTO_PREVIOUS:
            seen += [max_abs.get(t, 0.0) for t in users[0].output]
        result[node.name] = _fixed(width, _integer_bits(max(seen, default=0.0)))
    return result


def _ports(names: list[str], shapes: dict[str, list[int]], sizes: list[int], layout: str,
           project_dir: Path) -> list[HlsPort]:
    if len(names) != len(sizes):
        raise RuntimeError(f"{project_dir}: hls4ml top has {len(sizes)} ports, the subfunction {len(names)} tensors")
    ports = []
    for name, size in zip(names, sizes):
        shape = shapes[name]
        if int(np.prod(shape)) != size:
            raise RuntimeError(f"{project_dir}: port for '{name}' holds {size} values, the tensor {shape}")
        ports.append(HlsPort(name, shape, layout if len(shape) >= 3 else "onnx"))
    return ports


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
