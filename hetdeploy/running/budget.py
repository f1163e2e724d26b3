"""--error-budget: the fewest bits per layer that keep the model's error within a budget.

The search runs on a fixed-point simulation of the model, not on hls4ml: each layer the FPGA could
run rounds and saturates its outputs and its weights to the type the build would give it at a
candidate width (integer bits from the calibration range, as ``hls4ml_adapter`` sizes them; weights
by ``precision.weight_fixed``), as Brevitas and QKeras simulate quantization in training; the
simulated model runs on onnxruntime. The layers are the build's execution units (``units.split_units``
on the board's FPGA), accumulators are exact in the generated HLS as here, and a Softmax reads the
lookup tables the build gives hls4ml's stable Softmax (``precision.SoftmaxTables``), so for the widths the
build ends with the simulated error is the C-simulation's on the same samples. Not simulated
bit for bit: the table activations (``units.TABLE_OPS``: Sigmoid, Tanh, ...), rounded at their
output as any layer; the build verifies the chosen widths in C-simulation, which has the last word
(and widens a unit that misses its tolerance).

``search_widths`` is the search itself, over any error function (pure, tested without onnx).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..core.board import Device
from ..core.graph import Graph
from ..core.precision import SoftmaxTables, fixed_grid, integer_bits, quantize, weight_fixed
from ..fpga.packing import precision_width
from ..intake.ort_adapter import with_outputs
from ..intake.rewrites import tensor_shapes
from ..planning.units import LOOKUP_TABLE_SIZE, split_units
from .verify import SubfunctionCheck

_WEIGHTED = {"Conv", "Gemm", "MatMul"}
LEAST_WIDTH = 2


@dataclass
class SearchResult:
    widths: dict[str, int]  # layer (its first node) -> bits
    error: float  # the simulated relative error at those widths (largest over outputs)
    evaluations: int


def layer_groups(graph: Graph, runs_on_fpga: Callable[[int], bool], device: Device) -> dict[str, list[str]]:
    """The model's FPGA layers as the build cuts them into execution units on ``device``
    (``units.split_units``: a layer and the ops its processing element fuses after it share one
    width). First node -> its nodes."""
    nodes = [i for i in range(len(graph.nodes)) if runs_on_fpga(i)]
    return {graph.nodes[unit.nodes[0]].name: [graph.nodes[i].name for i in unit.nodes]
            for unit in split_units(graph, nodes, device)}


def search_widths(layers: Sequence[str], cost: dict[str, float], error: Callable[[dict[str, int]], float],
                  budget: float, start: int, least: int = LEAST_WIDTH) -> SearchResult:
    """Every layer at ``start`` bits, then the least width for all layers together that keeps
    ``error`` within ``budget`` (bisection: error falls as bits grow), then each layer, costliest
    first, narrowed one bit at a time while the error stays within budget."""
    evaluations = 0

    def measure(widths: dict[str, int]) -> float:
        nonlocal evaluations
        evaluations += 1
        return error(widths)

    widths = {layer: start for layer in layers}
    worst = measure(widths)
    if worst > budget or not layers:
        return SearchResult(widths, worst, evaluations)
    low, high = least, start  # ``high`` keeps the error within budget
    while low < high:
        middle = (low + high) // 2
        trial = measure({layer: middle for layer in layers})
        if trial <= budget:
            high, worst = middle, trial
        else:
            low = middle + 1
    widths = {layer: high for layer in layers}
    for layer in sorted(layers, key=lambda name: (-cost.get(name, 0.0), name)):
        while widths[layer] > least:
            trial_widths = {**widths, layer: widths[layer] - 1}
            trial = measure(trial_widths)
            if trial > budget:
                break
            widths, worst = trial_widths, trial
    return SearchResult(widths, worst, evaluations)


def _fake_fixed(nodes: list, inits: list, tensor: str, width: int, integer: int, name: str,
                signed: bool = True, dtype: type = np.float32) -> str:
    """Nodes computing ``tensor`` as the build's ap_fixed<width, integer> (ap_ufixed when not
    ``signed``) holds it (precision's BUILD_ROUNDING and BUILD_OVERFLOW, RND and SAT): rounded half
    up, floor(x + 1/2) (ONNX's Round would take halves to even), and saturated; ``dtype`` is ``tensor``'s."""
    step, low, high = fixed_grid(width, integer, signed)
    constants = {k: f"{name}.{k}" for k in ("inverse_step", "half", "step", "low", "high")}
    for key, value in zip(constants.values(), (1.0 / step, 0.5, step, low, high)):
        inits.append(numpy_helper.from_array(np.array(value, dtype), key))
    nodes += [helper.make_node("Mul", [tensor, constants["inverse_step"]], [f"{name}.codes"]),
              helper.make_node("Add", [f"{name}.codes", constants["half"]], [f"{name}.shifted"]),
              helper.make_node("Floor", [f"{name}.shifted"], [f"{name}.rounded"]),
              helper.make_node("Mul", [f"{name}.rounded", constants["step"]], [f"{name}.value"]),
              helper.make_node("Clip", [f"{name}.value", constants["low"], constants["high"]], [f"{name}.out"])]
    return f"{name}.out"


def _reduce(op: str, tensor: str, axis: int, output: str, opset: int) -> onnx.NodeProto:
    """``op`` over ``axis``, kept; its axes an input from ReduceSum's opset 13 and the others' 18."""
    if opset >= (13 if op == "ReduceSum" else 18):
        return helper.make_node(op, [tensor, f"{output}.axes"], [output], keepdims=1)
    return helper.make_node(op, [tensor], [output], axes=[axis], keepdims=1)


def _table_softmax(nodes: list, inits: list, tensor: str, axis: int, tables: SoftmaxTables, name: str,
                   opset: int) -> str:
    """Nodes computing hls4ml's stable Softmax of ``tensor`` (already in its fixed-point type) with
    ``tables``, in float64 (every value on its grid exactly), before the rounding to its result type."""
    exp_shift, sum_shift = 1.0 / tables.exp_step, 1.0 / tables.sum_step  # value -> table index
    constants = {f"{name}.exp_table": tables.exp_table(), f"{name}.inverse_table": tables.inverse_table(),
                 f"{name}.exp_shift": exp_shift, f"{name}.sum_shift": sum_shift,
                 f"{name}.max.axes": np.array([axis], np.int64), f"{name}.sum.axes": np.array([axis], np.int64)}
    for key, value in constants.items():
        array = np.asarray(value)
        inits.append(numpy_helper.from_array(array if array.dtype == np.int64 else array.astype(np.float64), key))
    nodes += [helper.make_node("Cast", [tensor], [f"{name}.x"], to=onnx.TensorProto.DOUBLE),
              _reduce("ReduceMax", f"{name}.x", axis, f"{name}.max", opset),
              helper.make_node("Sub", [f"{name}.max", f"{name}.x"], [f"{name}.d"]),
              helper.make_node("Mul", [f"{name}.d", f"{name}.exp_shift"], [f"{name}.d_scaled"]),
              helper.make_node("Floor", [f"{name}.d_scaled"], [f"{name}.d_floor"]),
              helper.make_node("Cast", [f"{name}.d_floor"], [f"{name}.d_index"], to=onnx.TensorProto.INT64),
              helper.make_node("Gather", [f"{name}.exp_table", f"{name}.d_index"], [f"{name}.exp"]),
              _reduce("ReduceSum", f"{name}.exp", axis, f"{name}.sum", opset)]
    held = _fake_fixed(nodes, inits, f"{name}.sum", tables.TABLE_WIDTH, tables.sum_bits, f"{name}.sum_fixed",
                       signed=False, dtype=np.float64)
    nodes += [helper.make_node("Mul", [held, f"{name}.sum_shift"], [f"{name}.s_scaled"]),
              helper.make_node("Floor", [f"{name}.s_scaled"], [f"{name}.s_floor"]),
              helper.make_node("Cast", [f"{name}.s_floor"], [f"{name}.s_index"], to=onnx.TensorProto.INT64),
              helper.make_node("Gather", [f"{name}.inverse_table", f"{name}.s_index"], [f"{name}.inverse"]),
              helper.make_node("Mul", [f"{name}.exp", f"{name}.inverse"], [f"{name}.product"]),
              helper.make_node("Cast", [f"{name}.product"], [f"{name}.out"], to=onnx.TensorProto.FLOAT)]
    return f"{name}.out"


def fixed_point_model(model: onnx.ModelProto, groups: dict[str, list[str]], widths: dict[str, int],
                      max_abs: dict[str, float], table_sizes: Mapping[str, int]) -> onnx.ModelProto:
    """``model`` with each layer's outputs (and what it reads from off the FPGA) rounded to the width chosen
    for it, integer bits from ``max_abs`` (one bit of headroom), its weights and biases rounded
    as the build rounds them, and a Softmax through the build's tables (``SoftmaxTables``), of the entries
    ``table_sizes`` gives its layer (LOOKUP_TABLE_SIZE where it gives none: --table-size)."""
    layer_of = {node: first for first, nodes in groups.items() for node in nodes}
    simulated = onnx.ModelProto()
    simulated.CopyFrom(model)
    graph = simulated.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    constants = {t.name: t for t in graph.initializer}
    shapes: dict[str, list[int]] = {}  # inferred at the first Softmax (none in most models)
    on_fpga = {t for node in graph.node if node.name in layer_of for t in node.output}
    nodes, inits, renamed = [], [], {}
    types: dict[str, tuple[int, int]] = {}  # a tensor the FPGA holds -> (width, integer) of its type

    def hold(tensor: str, width: int) -> None:
        integer = min(integer_bits(max_abs.get(tensor, 0.0)), width - 1)
        renamed[tensor] = _fake_fixed(nodes, inits, renamed.get(tensor, tensor), width, integer, f"{tensor}.fixed")
        types[tensor] = (width, integer)

    for node in graph.node:
        layer = layer_of.get(node.name)
        if layer is not None:
            width = widths[layer]
            for k, tensor in enumerate(node.input):
                if tensor and tensor not in constants and tensor not in on_fpga and tensor not in types:
                    hold(tensor, width)  # written into the FPGA in this layer's type
                if node.op_type in _WEIGHTED and k in (1, 2) and tensor in constants:
                    values = numpy_helper.to_array(constants[tensor]).astype(np.float64)
                    rounded = quantize(values, *weight_fixed(values, width))  # as the build's weight type
                    inits.append(numpy_helper.from_array(rounded.astype(np.float32), f"{tensor}.fixed_{layer}"))
                    renamed[(node.name, k)] = f"{tensor}.fixed_{layer}"
        if layer is not None and node.op_type == "Softmax":
            source = node.input[0]
            axis = next((a.i for a in node.attribute if a.name == "axis"), -1 if opset >= 13 else 1)
            shapes = shapes or tensor_shapes(onnx.shape_inference.infer_shapes(model))
            shape = shapes[source]
            tables = SoftmaxTables(*types[source], shape[axis], table_sizes.get(layer, LOOKUP_TABLE_SIZE))
            out = _table_softmax(nodes, inits, renamed.get(source, source), axis % len(shape), tables,
                                 f"{node.output[0]}.table", opset)
            nodes.append(helper.make_node("Identity", [out], [node.output[0]]))
        else:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            for k, tensor in enumerate(copy.input):
                copy.input[k] = renamed.get((node.name, k), renamed.get(tensor, tensor))
            nodes.append(copy)
        if layer is not None:
            for tensor in node.output:
                if tensor:
                    hold(tensor, widths[layer])
    outputs = [o.name for o in graph.output]
    for output in outputs:  # the model's outputs under their own names, simulated
        if output in renamed:
            nodes.append(helper.make_node("Identity", [renamed[output]], [f"{output}.simulated"]))
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(inits)
    del graph.output[:]
    graph.output.extend(helper.make_tensor_value_info(f"{o}.simulated" if o in renamed else o,
                                                      onnx.TensorProto.FLOAT, None) for o in outputs)
    del graph.value_info[:]
    return simulated


def relative_error(got: Sequence[dict[str, np.ndarray]], want: Sequence[dict[str, np.ndarray]]) -> float:
    """The largest, over outputs, of verify's measure (``verify.TensorCheck.relative_error``: the
    max abs error over the output's own peak; inf for a NaN or Inf on either side, and for any error
    against an all-zero output)."""
    check = SubfunctionCheck("budget", "pipeline", 0.0)
    for ours, theirs in zip(got, want):
        check.add(ours, theirs)
    return check.relative_error


def weighted_cost(graph: Graph, groups: dict[str, list[str]]) -> dict[str, float]:
    """A layer's weight count: what its multipliers (LUT and DSP) scale with."""
    index = graph.node_index()
    return {first: float(sum(graph.nodes[index[n]].constant_elements for n in nodes))
            for first, nodes in groups.items()}


def error_function(model: onnx.ModelProto, groups: dict[str, list[str]], samples: list[dict[str, np.ndarray]],
                   run: Callable[[onnx.ModelProto, list[dict[str, np.ndarray]]], list[dict[str, np.ndarray]]],
                   measured_on: Optional[list[dict[str, np.ndarray]]] = None,
                   table_sizes: Mapping[str, int] = MappingProxyType({})) -> Callable[[dict[str, int]], float]:
    """widths -> the simulated model's relative error against ``model``, its types sized on ``samples``
    as the build sizes them, measured on ``measured_on`` (``samples`` when not given); ``run`` runs a
    model on samples, every tensor of it (``run(model, samples)`` gives each node output); ``table_sizes``:
    a layer (its first node) -> the entries of its lookup tables (``fixed_point_model``)."""
    values = run(with_outputs(model, (t for node in model.graph.node for t in node.output)), samples)
    max_abs: dict[str, float] = {}
    for sample, computed in zip(samples, values):
        for name, value in list(sample.items()) + list(computed.items()):
            if np.asarray(value).dtype.kind == "f" and np.size(value):
                max_abs[name] = max(max_abs.get(name, 0.0), float(np.max(np.abs(value))))
    outputs = [o.name for o in model.graph.output]
    measured_on = samples if measured_on is None else measured_on
    want = [{o: v[o] for o in outputs} for v in (values if measured_on is samples else run(model, measured_on))]

    def error(widths: dict[str, int]) -> float:
        simulated = fixed_point_model(model, groups, widths, max_abs, table_sizes)
        got = run(simulated, measured_on)
        return relative_error([{o: g.get(f"{o}.simulated", g.get(o)) for o in outputs} for g in got], want)

    return error


def built_layers(units: Sequence) -> tuple[dict[str, list[str]], dict[str, int], dict[str, int]]:
    """A built subfunction's execution units as the simulation's layers: (first node -> its nodes,
    first node -> the width the build ended with, first node -> its tables' entries where it has tables),
    for ``error_function`` at a build's widths and table sizes."""
    return ({u.nodes[0]: u.nodes for u in units},
            {u.nodes[0]: precision_width(u.precision) for u in units},
            {u.nodes[0]: u.table_size for u in units if u.table_size})


def chosen_node_widths(groups: dict[str, list[str]], result: SearchResult) -> dict[str, int]:
    """Every node of every layer -> its layer's width."""
    return {node: result.widths[first] for first, nodes in groups.items() for node in nodes}
