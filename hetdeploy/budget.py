"""--error-budget: the fewest bits per layer that keep the model's error within a budget.

The search runs on a fixed-point simulation of the model, not on hls4ml: each layer the FPGA could
run rounds and saturates its outputs and its weights to the type the build would give it at a
candidate width (integer bits from the calibration range, as ``hls4ml_adapter`` sizes them; weights
by ``precision.weight_fixed``), as Brevitas and QKeras simulate quantization in training; the
simulated model runs on onnxruntime. Accumulators are exact in the generated HLS, as here. The build
then verifies the chosen widths in C-simulation, which has the last word (and widens a unit that
misses its tolerance).

``search_widths`` is the search itself, over any error function (pure, tested without onnx).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .graph import Graph
from .precision import fixed_grid, integer_bits, quantize, weight_fixed
from .verify import SubfunctionCheck

# Ops that hls4ml fuses into the layer before them (one execution unit, one width).
_FOLLOWERS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "PRelu", "HardSigmoid", "Clip", "Elu", "Selu", "Softsign",
              "Softplus", "BatchNormalization", "Quant"}
_WEIGHTED = {"Conv", "Gemm", "MatMul"}
LEAST_WIDTH = 2


@dataclass
class SearchResult:
    widths: dict[str, int]  # layer (its first node) -> bits
    error: float  # the simulated relative error at those widths (largest over outputs)
    evaluations: int


def layer_groups(graph: Graph, runs_on_fpga: Callable[[int], bool]) -> dict[str, list[str]]:
    """The model's FPGA layers as the build fuses them: a node the FPGA runs starts a layer, and an
    activation (or normalisation) that alone reads it joins its layer. First node -> its nodes."""
    consumers = graph.consumers()
    producers = graph.producers()
    groups: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for index, node in enumerate(graph.nodes):
        if not runs_on_fpga(index):
            continue
        source = producers.get(node.inputs[0]) if node.inputs else None
        if node.op in _FOLLOWERS and source is not None and graph.nodes[source].name in owner \
                and consumers.get(node.inputs[0]) == [index]:
            first = owner[graph.nodes[source].name]
        else:
            first = node.name
            groups[first] = []
        groups[first].append(node.name)
        owner[node.name] = first
    return groups


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


def _fake_fixed(nodes: list, inits: list, tensor: str, width: int, integer: int, name: str) -> str:
    """Nodes computing ``tensor`` as the build's ap_fixed<width, integer> holds it (precision's
    BUILD_ROUNDING and BUILD_OVERFLOW, RND and SAT): rounded half up, floor(x + 1/2) (ONNX's Round would
    take halves to even), and saturated."""
    step, low, high = fixed_grid(width, integer)
    constants = {k: f"{name}.{k}" for k in ("inverse_step", "half", "step", "low", "high")}
    for key, value in zip(constants.values(), (1.0 / step, 0.5, step, low, high)):
        inits.append(numpy_helper.from_array(np.array(value, np.float32), key))
    nodes += [helper.make_node("Mul", [tensor, constants["inverse_step"]], [f"{name}.codes"]),
              helper.make_node("Add", [f"{name}.codes", constants["half"]], [f"{name}.shifted"]),
              helper.make_node("Floor", [f"{name}.shifted"], [f"{name}.rounded"]),
              helper.make_node("Mul", [f"{name}.rounded", constants["step"]], [f"{name}.value"]),
              helper.make_node("Clip", [f"{name}.value", constants["low"], constants["high"]], [f"{name}.out"])]
    return f"{name}.out"


def fixed_point_model(model: onnx.ModelProto, groups: dict[str, list[str]], widths: dict[str, int],
                      max_abs: dict[str, float]) -> onnx.ModelProto:
    """``model`` with each layer's outputs (and what it reads from off the FPGA) rounded to the width chosen
    for it, integer bits from ``max_abs`` (one bit of headroom), and its weights and biases rounded
    as the build rounds them."""
    layer_of = {node: first for first, nodes in groups.items() for node in nodes}
    simulated = onnx.ModelProto()
    simulated.CopyFrom(model)
    graph = simulated.graph
    constants = {t.name: t for t in graph.initializer}
    on_fpga = {t for node in graph.node if node.name in layer_of for t in node.output}
    nodes, inits, renamed = [], [], {}
    for node in graph.node:
        layer = layer_of.get(node.name)
        if layer is not None:
            width = widths[layer]
            for k, tensor in enumerate(node.input):
                if not tensor or tensor in constants:
                    pass
                elif tensor not in on_fpga:  # written into the FPGA in this layer's type
                    if tensor not in renamed:
                        integer = min(integer_bits(max_abs.get(tensor, 0.0)), width - 1)
                        renamed[tensor] = _fake_fixed(nodes, inits, tensor, width, integer, f"{tensor}.fixed")
                if node.op_type in _WEIGHTED and k in (1, 2) and tensor in constants:
                    values = numpy_helper.to_array(constants[tensor]).astype(np.float64)
                    rounded = quantize(values, *weight_fixed(values, width))  # as the build's weight type
                    inits.append(numpy_helper.from_array(rounded.astype(np.float32), f"{tensor}.fixed_{layer}"))
                    renamed[(node.name, k)] = f"{tensor}.fixed_{layer}"
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for k, tensor in enumerate(copy.input):
            copy.input[k] = renamed.get((node.name, k), renamed.get(tensor, tensor))
        nodes.append(copy)
        if layer is not None:
            for tensor in node.output:
                if tensor:
                    integer = min(integer_bits(max_abs.get(tensor, 0.0)), widths[layer] - 1)
                    renamed[tensor] = _fake_fixed(nodes, inits, tensor, widths[layer], integer, f"{tensor}.fixed")
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
                   ) -> Callable[[dict[str, int]], float]:
    """widths -> the simulated model's relative error against ``model`` on ``samples``; ``run`` runs
    a model on samples, every tensor of it (``run(model, samples)`` gives each node output)."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    known = {o.name for o in exposed.graph.output}
    for node in exposed.graph.node:
        exposed.graph.output.extend(helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None)
                                    for t in node.output if t and t not in known)
    values = run(exposed, samples)
    max_abs: dict[str, float] = {}
    for sample, computed in zip(samples, values):
        for name, value in list(sample.items()) + list(computed.items()):
            if np.asarray(value).dtype.kind == "f" and np.size(value):
                max_abs[name] = max(max_abs.get(name, 0.0), float(np.max(np.abs(value))))
    outputs = [o.name for o in model.graph.output]
    want = [{o: v[o] for o in outputs} for v in values]

    def error(widths: dict[str, int]) -> float:
        simulated = fixed_point_model(model, groups, widths, max_abs)
        got = run(simulated, samples)
        return relative_error([{o: g.get(f"{o}.simulated", g.get(o)) for o in outputs} for g in got], want)

    return error


def chosen_node_widths(groups: dict[str, list[str]], result: SearchResult) -> dict[str, int]:
    """Every node of every layer -> its layer's width."""
    return {node: result.widths[first] for first, nodes in groups.items() for node in nodes}
