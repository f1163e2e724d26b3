"""The cost model: what a node costs on a device, what a subfunction costs, what it holds.

Pure functions over ``graph`` and ``board`` data (no onnx).

The execution model is the runtime's (``hetdeploy emulate`` and the board
script alike): subfunctions run one after the other at batch one; a call on a
device other than the host gets its inputs from the host over the link
host -> device and returns its outputs over device -> host. A subfunction's
cost therefore depends only on its own nodes and device:

    invocation overhead + its nodes' times + its input and output transfers

and a plan's estimated latency is the sum over its subfunctions.

A stream (``objective`` "throughput") runs the subfunctions as a pipeline over batches of
``batch`` samples. An FPGA core takes a batch in one call, so its invocation overhead and each
tensor's link latency are paid once a batch, its compute and bytes once a sample; a CPU or GPU
subfunction whose nodes all take a batch (``batching``) does too, its call's overhead and each node's
fixed cost (its kernel dispatch, ``CostModel.dispatch``) once a batch; another one takes a sample a call
(its batch axis fixed at intake), so it pays them per sample. Stages on
one CPU or GPU share it; each FPGA subfunction is a core of its own (hls/design.tcl.in places one
per subfunction), so it is a resource alone. The stream's time per sample is its busiest
resource's time per batch over the batch (``stream_seconds``). The host's CPU drives each accelerator call:
the call's overhead loads it too (``driven_stages``); the copies into the call's buffers are taken as overlapped.

On a CPU or GPU a node's time is a roofline: its operations over the device's
peak times the efficiency of the node's op class, or its bytes over the memory
bandwidth, whichever is longer, plus a fixed per-node cost (once a call). On an FPGA it is
the node's execution-unit estimate (``units.estimate``: its arithmetic, moving
its buffers, and waiting for weights kept in DDR) at the FPGA's clock, at the
fastest folding that fits the FPGA by itself, under either io type (``fpga_seconds``); the plan then
takes the folded units' cycles, the same function.

A profile (``--profile``, ``profile.py``) replaces these figures where it measured them: a CPU or GPU
node's seconds and a call's overhead on its device, an FPGA node's estimate scaled by its measured calls
against their estimate, a link's seconds per byte.

A tensor an FPGA subfunction takes from the host or gives it may travel zero-compressed
(--compress-transfers, ``compression.py``): given each tensor's share of zeros on the samples, its link
time is the compressed bytes' plus the codec's on both sides where that is less (``crossing``); the
partitioner's local search, the ILP and the plan's estimate price it so; the search's first cut (its
dynamic programme) prices every tensor raw.

Capacity: the FPGA subfunctions together must fit the budget (resources minus
the reserve: DSP, BRAM18, LUT, FF) with every node folded as far as hls4ml
allows (``units.estimate``; weights in DDR for the nodes above), so that the
folding stage can always find reuse factors that fit; a CPU or GPU must hold
the float32 weights of everything it runs in its memory. All subfunctions of a device are resident together, so
capacities are shared; an FPGA's DDR holds the weights kept there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Collection, Iterable, Mapping, Optional, Sequence

from ..core.board import Board, Device
from ..core.board_runtime import resource_of
from ..core.graph import QUANTIZER_OPS, Graph, Node
from ..core.precision import DEFAULT_WIDTH, NO_LAYER_WIDTHS, Quantizer, node_widths
from . import batching, compression, units
from .input_codes import port_codes
from .profile import NOTHING_MEASURED, Measured

FLOAT_BYTES = 4  # tensors cross links as float32 (hls4ml's AXI-stream wrapper takes float too)

OP_CLASS = {
    **dict.fromkeys(("Conv", "ConvTranspose", "ConvInteger", "QLinearConv"), "conv"),
    **dict.fromkeys(("Gemm", "MatMul", "MatMulInteger", "QLinearMatMul"), "dense"),
    **dict.fromkeys(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool"), "pool"),
    **dict.fromkeys(("BatchNormalization", "LRN", "InstanceNormalization", "LayerNormalization",
                     "GroupNormalization"), "normalization"),
    **dict.fromkeys(("Softmax", "LogSoftmax"), "softmax"),
    **dict.fromkeys(("Reshape", "Flatten", "Concat", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Split",
                     "Slice", "Gather", "Pad", "Expand", "Tile", "DepthToSpace", "SpaceToDepth"), "data"),
    **dict.fromkeys(("Relu", "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Elu", "Selu",
                     "Clip", "Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "Abs", "Neg", "Exp", "Log",
                     "Sqrt", "Pow", "Erf", "Softplus", "Dropout"), "elementwise"),
}
# Operations per output value of the classes node_work does not count from kernels or inputs.
_OPS_PER_VALUE = {"normalization": 2, "softmax": 5, "data": 0, "other": 1}


@dataclass(frozen=True)
class Work:
    op_class: str
    ops: float  # arithmetic operations; a multiply-add counts 2
    macs: float  # multiply-adds (what DSPs do)
    activation_bytes: float  # inputs and outputs at float32
    weight_elements: int


def _elements(shape: Sequence[int]) -> int:
    return math.prod(shape) if shape else 1


def node_work(node: Node) -> Work:
    op_class = OP_CLASS.get(node.op, "other")
    outputs = sum(_elements(s) for s in node.output_shapes)
    inputs = sum(_elements(s) for s in node.input_shapes)
    first = node.input_shapes[0] if node.input_shapes else []
    macs = 0.0
    if op_class == "conv" and len(first) > 2:
        kernel = node.attrs.get("kernel_shape")
        if kernel:
            macs = outputs * (first[1] // max(1, node.attrs.get("group", 1))) * _elements(kernel)
        elif node.output_shapes and len(node.output_shapes[0]) > 1:  # kernel size from the weights
            macs = outputs * (node.constant_elements // node.output_shapes[0][1])
    elif op_class == "dense" and first:
        macs = outputs * first[-1]
    if op_class == "pool":
        kernel = node.attrs.get("kernel_shape") or first[2:]
        ops = outputs * _elements(kernel)
    elif op_class == "normalization" and node.op == "LRN":
        ops = outputs * (node.attrs.get("size", 1) + 3)
    elif op_class == "elementwise":
        ops = outputs * max(1, len(node.inputs) + len(node.constants) - 1)
    else:
        ops = 2 * macs or outputs * _OPS_PER_VALUE.get(op_class, 1)
    return Work(op_class, float(ops), float(macs), float((inputs + outputs) * FLOAT_BYTES), node.constant_elements)


def node_seconds(device: Device, work: Work) -> float:
    """A node's roofline on a CPU or GPU (an FPGA's: ``fpga_seconds``)."""
    compute = work.ops / device.compute.ops_per_s(work.op_class)
    memory = (work.activation_bytes + work.weight_elements * FLOAT_BYTES) / device.memory.bandwidth_bytes_per_s
    return max(compute, memory) + device.compute.per_op_s


def capacity(device: Device) -> dict[str, float]:
    """What a device holds for all its subfunctions together."""
    if device.kind == "fpga":
        budget = device.budget()
        return {k: float(budget.get(k, 0)) for k in units.RESOURCES} | {"ddr_bytes": float(device.memory.bytes)}
    return {"memory_bytes": float(device.memory.bytes)}


def node_shape(device: Device, graph: Graph, index: int, width: int) -> units.Shape:
    """An FPGA node as its own execution unit, in the bands ``units.chosen_band`` gives it; a relayout with the
    relayouts ``units.split_units`` fuses after it (one table moves the chain's values: theirs take no time of their
    own, ``fused_into``)."""
    unit = units.node_unit(graph, index, device)
    while graph.nodes[index].op in units.RELAYOUT_OPS:
        after = graph.consumers().get(graph.nodes[index].outputs[0], [])
        if len(after) != 1 or graph.nodes[after[0]].op not in units.RELAYOUT_OPS or \
                _fused_after(device, graph, after[0]) != index:
            break
        index = after[0]
        unit.nodes.append(index)
    shape = units.unit_shape(graph, unit, device.clock_mhz, hls_tool=device.hls_tool)
    band = units.chosen_band(graph, unit, shape, device.budget(), width, reader_fifo(device, graph, index))
    return units.banded(shape, band) if band is not None else shape


def reader_fifo(device: Device, graph: Graph, index: int) -> tuple[tuple[int, int], ...]:
    """The FIFO from an FPGA node to its reader should the folding stage put the two in one unit: its one
    reader, an op the PE of the unit the node is in fuses (``unit_head``'s; the top's units fuse nothing)."""
    unit = units.node_unit(graph, unit_head(device, graph, index), device)
    readers = graph.consumers().get(graph.nodes[index].outputs[0], [])
    if not unit.pe or unit.engine != "hls4ml" or len(readers) != 1 or graph.nodes[index].outputs[0] in graph.outputs:
        return ()
    return units.output_fifo(graph, index) if graph.nodes[readers[0]].op in device.pes[unit.pe].fuse else ()


def unit_head(device: Device, graph: Graph, index: int) -> int:
    """The first node of the unit ``units.split_units`` puts node ``index`` in, were the chain before it one
    subfunction: back along single readers while the node's op is one the PE of the chain's first node fuses
    (a quantizer after a convolution's weight scale is fused by the convolution's PE, whatever the scale's own)."""
    producers, consumers = graph.producers(), graph.consumers()
    chain = [index]
    while True:
        node = graph.nodes[chain[-1]]
        source = node.inputs[0] if len(node.inputs) == 1 else None
        if source not in producers or consumers.get(source) != [chain[-1]] or source in graph.outputs or \
                node.op in units.RELAYOUT_OPS:
            break
        chain.append(producers[source])
    head = chain.pop()
    while chain:  # forwards from the farthest node that may head it: the first its head's PE does not fuse
        pe = units.node_unit(graph, head, device).pe
        if not pe or graph.nodes[chain[-1]].op not in device.pes[pe].fuse:
            head = chain[-1]
        chain.pop()
    return head


def node_foldings(shape: units.Shape, width: int, rate: float) -> list[units.Folding]:
    """A node's foldings as its own unit, least folded first (``units.folding_options``), under each io type it
    takes (``units.takes_either_io_type``: the folding stage weighs both, ``units.by_cost``; the partitioner prices
    the node as that stage may build it)."""
    options = units.folding_options(shape, width, rate)
    if not units.takes_either_io_type(shape):
        return options
    return [o._replace(io_type=io) for o in options for io in units.IO_TYPES]


def most_folded(device: Device, graph: Graph, index: int, width: int) -> tuple[units.Shape, units.Folding]:
    """An FPGA node as its own execution unit, folded as far as hls4ml allows, its weights on chip
    unless that overflows the BRAM budget alone (fusion and less folding are for the folding stage), under its
    shape's own io type: the folding stage fits the units under theirs before it weighs the other
    (``units.fold``), so the capacity the partitioner counts is what that first fit needs."""
    shape = node_shape(device, graph, index, width)
    rate = units.ddr_bytes_per_cycle(device)
    *on_chip, last = units.folding_options(shape, width, rate)
    if not last.weights_in_ddr:
        return shape, last
    if units.folded_estimate(shape, on_chip[-1], width, rate)["bram18"] <= device.budget().get("bram18", 0):
        return shape, on_chip[-1]
    return shape, last


def _fused_after(device: Device, graph: Graph, index: int) -> Optional[int]:
    """The node before node ``index`` when ``units.split_units`` fuses ``index`` into that node's unit (its one
    reader, its op in that node's PE's fuse list); None: it does not."""
    node = graph.nodes[index]
    producers = graph.producers()
    if len(node.inputs) != 1 or node.inputs[0] not in producers or node.inputs[0] in graph.outputs or \
            graph.consumers().get(node.inputs[0]) != [index]:
        return None
    before = producers[node.inputs[0]]
    unit = units.node_unit(graph, before, device)
    return before if unit.pe and node.op in device.pes[unit.pe].fuse else None


def fused_into(device: Device, graph: Graph, index: int, on_engine: Collection[int] = ()) -> bool:
    """Whether the folding stage fuses node ``index`` into a unit before it that computes it in what it has:
    a ReLU after the top's Add (``units.split_units``), a relayout after a relayout, or, where ``on_engine`` holds
    the nodes that may run on the engine, a BatchNormalization, ReLU or Clip after one of them (through
    BatchNormalizations, the ReLU or Clip last): nothing more of the chip, no cycle more."""
    before = _fused_after(device, graph, index)
    if before is None:
        return False
    if graph.nodes[index].op in units.RELAYOUT_OPS and graph.nodes[before].op in units.RELAYOUT_OPS:
        return True  # a chain of relayouts is one table, its first node's (``node_shape``)
    # the top's, unless that op is itself fused into a unit before it (a BatchNormalization after a convolution),
    # whose the ReLU then is
    if units.node_unit(graph, before, device).engine == "top" and _fused_after(device, graph, before) is None:
        return True
    if graph.nodes[index].op not in units.ENGINE_FUSED_OPS:
        return False
    return before in on_engine or (graph.nodes[before].op == "BatchNormalization"
                                   and fused_into(device, graph, before, on_engine))


def usage(device: Device, graph: Graph, index: int, width: int, on_engine: Collection[int] = ()
          ) -> dict[str, float]:
    """What one node takes of ``capacity(device)``: on an FPGA, ``most_folded`` (and its DDR weights),
    and the FIFO to its reader should the folding stage put the two in one unit; nothing where it is
    ``fused_into`` the unit before it (``on_engine``: as there)."""
    if device.kind == "fpga" and fused_into(device, graph, index, on_engine):
        return dict.fromkeys(units.RESOURCES, 0.0) | {"ddr_bytes": 0.0}
    if device.kind == "fpga":
        shape, folding = most_folded(device, graph, index, width)
        least = units.folded_estimate(shape, folding, width, units.ddr_bytes_per_cycle(device))
        # the FIFO to its reader, in bands a band's rows of it; in io_parallel the map waits in registers
        between = [(pixels // shape.bands, channels) for pixels, channels in reader_fifo(device, graph, index)]
        if units.with_io_type(shape, folding.io_type).streamed:
            least["bram18"] += units.fifo_bram18(between, width)
        else:
            least["ff"] += sum(pixels * channels for pixels, channels in between) * width
        in_ddr = graph.nodes[index].constant_elements * units.element_bytes(width) if folding.weights_in_ddr else 0
        return {k: float(least[k]) for k in units.RESOURCES} | {"ddr_bytes": float(in_ddr)}
    return {"memory_bytes": float(graph.nodes[index].constant_elements * FLOAT_BYTES)}


def engine_capable(device: Device, graph: Graph, widths: Sequence[int]) -> list[int]:
    """The nodes of ``graph`` the FPGA ``device`` may run on its engine (``units.engine_refusal``; the board file's
    limits still decide which nodes it runs at all) whose window its buffers hold at the node's bits of ``widths``
    (``units.engine_holds``; a dense layer's at most the values it takes of them, ``units.buffered_window``), but
    for one that hls4ml's unit would fuse a quantizer after (``_holds_its_layer``):
    cut off it, the quantizer would round values already rounded at the unit's output (a step off where the two
    roundings disagree), so the layer stays whole with its quantizer on hls4ml."""
    consumers = graph.consumers()
    found = []
    for index in range(len(graph.nodes)):
        if device.why_not(graph.nodes[index]) is not None:
            continue
        unit = units.node_unit(graph, index, device)
        if not unit.pe or unit.engine not in ("hls4ml", "engine") or units.engine_refusal(graph, unit) is not None:
            continue
        shape = units.unit_shape(graph, unit, device.clock_mhz, hls_tool=device.hls_tool)
        if not units.engine_holds(device, units.buffered_window(shape.n_in, not shape.input_map), widths[index]):
            continue
        at, quantized = index, False
        while not quantized:  # along the chain hls4ml's unit would fuse
            readers = consumers.get(graph.nodes[at].outputs[0], [])
            if len(readers) != 1 or graph.nodes[readers[0]].op not in device.pes[unit.pe].fuse:
                break
            at = readers[0]
            quantized = graph.nodes[at].op in QUANTIZER_OPS and _holds_its_layer(graph.nodes[at])
        if not quantized:
            found.append(index)
    return found


# The fewest bits of a quantizer whose layer may run on the engine, the quantizer a unit after it: a code the two
# roundings flip is one step off, which the verification's relative tolerance covers where a step is a 255th of the
# range, and where the codes are a few bits the step is the tolerance itself (a 4-bit ESPCN failed its build so)
ENGINE_QUANTIZER_BITS = 8


def _holds_its_layer(quantizer: Node) -> bool:
    """Whether a quantizer after a layer keeps the layer whole with it on hls4ml: one that is a fixed-point cast (a
    power-of-two scale, zero point 0), whose codes hls4ml's unit gives exactly, one of fewer than
    ENGINE_QUANTIZER_BITS bits, a BipolarQuant, or a Quant whose parameters are not one value each. Of any other
    (onnxruntime's and Brevitas' 8-bit float scales) no fixed-point unit gives the codes exactly: its layer may run
    on the engine."""
    scale, zero, bits = (quantizer.scalars.get(k) for k in (1, 2, 3))
    if quantizer.op != "Quant" or scale is None or zero is None or bits is None or bits < ENGINE_QUANTIZER_BITS:
        return True
    return Quantizer(int(bits), scale, zero, True, False, "ROUND").exact_in_fixed_point


def engine_shape(device: Device, graph: Graph, index: int) -> units.Shape:
    """An FPGA node as a unit on its engine, whole (the engine reads whole buffers)."""
    return units.unit_shape(graph, units.node_unit(graph, index, device), device.clock_mhz, hls_tool=device.hls_tool)


def engine_seconds(device: Device, shape: units.Shape, width: int, size: units.EngineSize) -> float:
    """A unit's time on an engine of ``size`` (``units.engine_estimate``)."""
    shape = replace(shape, engine=size)
    cycles = units.engine_estimate(shape, width, units.ddr_bytes_per_cycle(device))["latency_cycles"]
    return cycles / (device.clock_mhz * 1e6)


def fpga_seconds(device: Device, graph: Graph, index: int, width: int,
                 budget: Optional[Mapping[str, float]] = None, on_engine: Collection[int] = ()) -> float:
    """An FPGA node's time: the execution-unit estimate (units.estimate: arithmetic, DDR weights,
    moving its buffers, the pipeline's depth) of the node as its own unit at its fastest folding (under either
    io type it takes, ``node_foldings``) that fits the FPGA by itself, at the FPGA's clock. The folding stage
    folds units further where they share the chip; the plan then takes their cycles (planning.fpga_times): one
    cost for the FPGA everywhere. ``budget``: what the node may take alone (None: the FPGA's); a node
    ``fused_into`` the unit before it (``on_engine``: as there) takes no time of its own."""
    if fused_into(device, graph, index, on_engine):
        return 0.0
    shape = node_shape(device, graph, index, width)
    rate = units.ddr_bytes_per_cycle(device)
    budget = device.budget() if budget is None else budget
    estimates = [units.folded_estimate(shape, f, width, rate) for f in node_foldings(shape, width, rate)]
    fitting = [e["latency_cycles"] for e in estimates if all(e[k] <= budget.get(k, 0) for k in units.RESOURCES)]
    if not fitting:  # as the partitioner's capacity takes it
        shape, folding = most_folded(device, graph, index, width)
        fitting = [units.folded_estimate(shape, folding, width, rate)["latency_cycles"]]
    return min(fitting) / (device.clock_mhz * 1e6)


@dataclass(frozen=True)
class Crossing:
    """A tensor a subfunction off the host takes from it or gives it, as the cost model weighs it for
    travelling zero-compressed (``compression.weigh``), and whether it does (--compress-transfers)."""

    tensor: str
    source: str
    target: str
    weighed: compression.Weighed
    compressed: bool


@dataclass
class SegmentCost:
    compute_s: float
    transfer_s: float
    overhead_s: float
    in_bytes: int
    out_bytes: int
    crossings: list[Crossing] = field(default_factory=list)  # its FPGA ports' tensors weighed (none: not weighed)

    @property
    def total_s(self) -> float:
        return self.compute_s + self.transfer_s + self.overhead_s


OBJECTIVES = ("latency", "throughput")
STREAM_TIE_BREAK = 1e-3  # the share of a stream plan's total work per sample added to its pace


def driven_stages(stages: Iterable[tuple[str, str, float, float]], host: str) -> list[tuple[str, float]]:
    """A stream's stages as ``stream_seconds`` takes them, from each subfunction's (kind, resource, seconds a batch,
    its call's overhead): an FPGA call's overhead loads the host's CPU too, which runs the driver (pynq's register
    writes, cache maintenance and polling: two cores of one chip are not driven for free at once)."""
    result = []
    for kind, resource, batch_s, overhead_s in stages:
        result.append((resource, batch_s))
        if kind == "fpga":
            result.append((host, overhead_s))
    return result


def stream_seconds(stages: Iterable[tuple[str, float]], batch: int) -> float:
    """A pipelined stream's time per sample: ``stages`` are (resource, seconds of one call on a batch
    of ``batch``); the busiest resource sets the pace."""
    busy: dict[str, float] = {}
    for resource, seconds in stages:
        busy[resource] = busy.get(resource, 0.0) + seconds
    return max(busy.values(), default=0.0) / batch


def link_terms(board: Board, measured: Measured, source: str, target: str, calls: float = 1.0) -> tuple[float, float]:
    """A link's (seconds a byte, seconds a tensor) at ``calls`` calls a sample: the profile's seconds per byte
    where it measured the link (its latencies inside), else the board file's bandwidth and latency."""
    per_byte = measured.link_seconds_per_byte.get((source, target))
    if per_byte is not None:
        return per_byte, 0.0
    link = board.link(source, target)
    return 1 / link.bandwidth_bytes_per_s, calls * link.latency_s


# no tensor's zeros counted (nothing weighed for compression)
NO_ZEROS: Mapping[str, float] = MappingProxyType({})
# no node pinned to a device (--device)
NO_PINS: Mapping[str, str] = MappingProxyType({})


class CostModel:
    """Per-node times and usages of one graph on one board, priced for an ``objective`` at ``batch``
    samples a call: "latency" is one sample through the subfunctions in turn (``batch`` 1 is what
    it means; a larger one only sizes the calls), "throughput" a pipelined stream of batches."""

    def __init__(self, graph: Graph, board: Board, width: int = DEFAULT_WIDTH, objective: str = "latency",
                 batch: int = 1, layer_widths: Mapping[str, int] = NO_LAYER_WIDTHS, pins: Mapping[str, str] = NO_PINS,
                 measured: Measured = NOTHING_MEASURED, zero_shares: Mapping[str, float] = NO_ZEROS,
                 compress: str = "none", engine: bool | Collection[str] = False):
        """``width``: the fixed-point bits of FPGA values (--width); a quantized model's layers take
        their quantizers', a node of ``layer_widths`` (--error-budget's) its own (``precision.node_widths``);
        ``pins``: node -> the device --device puts it on; ``measured``: a profile's figures, in place of
        the board file's where it has them (``profile``); ``zero_shares``: tensor -> its share of zeros on
        the samples, and ``compress`` (compression.MODES): which tensors an FPGA subfunction takes or gives
        travel zero-compressed ("auto": where that saves time; "none": none, nothing weighed); ``engine``: each
        FPGA has its engine (``units.ENGINE``), whose resources come off its capacity, and a node it can compute
        (of those ``engine`` names, where it names some) takes its time there where that is faster and nothing of
        the chip's (its weights in DDR): the engine is its most folded design."""
        self.graph, self.board, self.pins, self.measured = graph, board, pins, measured
        self.zero_shares, self.compress = zero_shares, compress
        self._weighed: dict[tuple[str, str, str], Optional[Crossing]] = {}  # None: a link to no FPGA
        self.objective, self.batch = objective, batch
        self.widths = node_widths(graph, width, layer_widths)
        self.work = [node_work(n) for n in graph.nodes]
        self.tensor_bytes: dict[str, int] = {}
        for node in graph.nodes:
            for t, s in list(zip(node.inputs, node.input_shapes)) + list(zip(node.outputs, node.output_shapes)):
                self.tensor_bytes[t] = _elements(s) * FLOAT_BYTES
        # an input quantizer's codes reach an FPGA a few bits a value (input_codes.port_codes), in whole 64-bit words
        self.code_bytes = {t: -(-self.tensor_bytes[t] // FLOAT_BYTES * codes.bits // 64) * 8
                           for t, codes in port_codes(graph).items() if t in self.tensor_bytes} \
            if any(d.kind == "fpga" for d in board.devices) else {}
        self.capacity = {d.name: capacity(d) for d in board.devices}
        on_engine: dict[str, set[int]] = {}
        engine_times: dict[str, dict[int, float]] = {}
        for d in (d for d in board.devices if d.kind == "fpga" and engine):
            on_engine[d.name] = {i for i in engine_capable(d, graph, self.widths)
                                 if isinstance(engine, bool) or graph.nodes[i].name in engine}
            if on_engine[d.name]:  # one engine of the size the folding would give all of them
                shapes = {i: engine_shape(d, graph, i) for i in on_engine[d.name]}
                width = max(self.widths[i] for i in shapes)
                window = max(units.engine_window(s, width) for s in shapes.values())
                size = units.engine_sizes_for(d, width, list(shapes.values()))[0]
                lump = units.engine_resources(window, width, size,
                                              any(units.depthwise_on_engine(s) for s in shapes.values()))
                self.capacity[d.name] = {k: v - lump.get(k, 0) for k, v in self.capacity[d.name].items()}
                engine_times[d.name] = {i: engine_seconds(d, s, self.widths[i], size) for i, s in shapes.items()}
        # an FPGA's figures for the nodes it runs only: a node it does not run may have no shape its units can take,
        # and ``allowed_devices`` keeps it off that FPGA (its zeros only fill the partitioner's prefix sums)
        runs = {d.name: [d.why_not(node) is None for node in graph.nodes] for d in board.devices if d.kind == "fpga"}
        self.seconds = {d.name: [(fpga_seconds(d, graph, i, self.widths[i], self.capacity[d.name],
                                               on_engine.get(d.name, ())) if runs[d.name][i] else 0.0)
                                 if d.kind == "fpga" else node_seconds(d, w) for i, w in enumerate(self.work)]
                        for d in board.devices}
        # a node only the engine computes (its PE's: hls4ml has no layer for it) is on the FPGA only on the engine
        engine_only = {d.name: {i for i in range(len(graph.nodes)) if runs[d.name][i]
                                and units.node_unit(graph, i, d).engine == "engine"}
                       for d in board.devices if d.kind == "fpga"}
        for name, times in engine_times.items():
            for i, seconds in times.items():
                self.seconds[name][i] = seconds if i in engine_only[name] else min(self.seconds[name][i], seconds)
        # why each of them is not on the FPGA (partition.allowed_devices): no engine in this partition, or not on it
        self.off_engine = {name: {i: "only the engine computes it (hls4ml has no layer for it)" + (
            ", and the engine does not take it (its window past the engine's buffers, or a quantizer after it)"
            if engine else "") for i in only - set(engine_times.get(name, {}))}
            for name, only in engine_only.items()}
        for device, timed in measured.node_seconds.items():
            for i, node in enumerate(graph.nodes):
                if node.name in timed:
                    self.seconds[device][i] = timed[node.name]
        # each node's kernel dispatch on a CPU or GPU (the board file's per_op_s, in its ``seconds``): once a call,
        # so a sample's share of a call on a batch; a node whose time a profile measured keeps it as measured
        self.dispatch = {d.name: [0.0 if d.kind == "fpga" or node.name in measured.node_seconds.get(d.name, {})
                                  else d.compute.per_op_s for node in graph.nodes] for d in board.devices}
        for device, factors in measured.fpga_factors.items():
            for i, node in enumerate(graph.nodes):
                self.seconds[device][i] *= factors.get(node.name, 1.0)
        self.usage = {d.name: [usage(d, graph, i, self.widths[i], on_engine.get(d.name, ()))
                               if d.kind != "fpga" or runs[d.name][i]
                               else dict.fromkeys(units.RESOURCES, 0.0) | {"ddr_bytes": 0.0}
                               for i in range(len(graph.nodes))] for d in board.devices}
        for name, capable in on_engine.items():
            for i in capable:  # on the engine: its weights in DDR, nothing of the chip's
                self.usage[name][i] = dict.fromkeys(units.RESOURCES, 0.0) | {
                    "ddr_bytes": float(graph.nodes[i].constant_elements * units.element_bytes(self.widths[i]))}
        self.producers = graph.producers()
        self.consumers = graph.consumers()

    def transfer_seconds(self, source: str, target: str, tensors: int, nbytes: float, calls: float = 1.0) -> float:
        """A link's time for ``tensors`` tensors of ``nbytes`` together (``link_terms``)."""
        per_byte, per_tensor = self.link_terms(source, target, calls)
        return tensors * per_tensor + nbytes * per_byte

    def link_terms(self, source: str, target: str, calls: float = 1.0) -> tuple[float, float]:
        """``link_terms`` of this model's board and profile."""
        return link_terms(self.board, self.measured, source, target, calls)

    def crossing(self, tensor: str, source: str, target: str) -> Optional[Crossing]:
        """``tensor`` over the link ``source`` -> ``target`` between the host and an FPGA, weighed for travelling
        zero-compressed, or None where nothing is weighed (not an FPGA's link, --compress-transfers none, or
        its zeros not counted)."""
        if self.compress == "none" or tensor not in self.zero_shares or tensor in self.code_bytes:
            return None  # (the partitioner's hot path: at once) a quantizer's codes travel as codes
        key = (tensor, source, target)
        if key not in self._weighed:
            device = self.board.device(target if source == self.board.host else source)
            self._weighed[key] = None
            if device.kind == "fpga":
                per_byte, _ = self.link_terms(source, target)  # a tensor's latency is the same either way
                weighed = compression.weigh(self.tensor_bytes[tensor] // FLOAT_BYTES, self.zero_shares[tensor],
                                            lambda nbytes: nbytes * per_byte,
                                            self.board.device(self.board.host).memory.bandwidth_bytes_per_s,
                                            device.clock_mhz * 1e6)
                self._weighed[key] = Crossing(tensor, source, target, weighed,
                                              self.compress == "all" or weighed.pays)
        return self._weighed[key]

    def crossing_seconds(self, tensor: str, source: str, target: str, calls: float = 1.0) -> float:
        """``tensor``'s time over a link between the host and a device, zero-compressed where ``crossing`` says."""
        seconds = self.transfer_seconds(source, target, 1, self.port_bytes(tensor, target), calls)
        crossing = self.crossing(tensor, source, target)
        return seconds - crossing.weighed.saved_s if crossing is not None and crossing.compressed else seconds

    def port_bytes(self, tensor: str, device: str) -> int:
        """``tensor``'s bytes a sample into ``device``: an input quantizer's codes into an FPGA, else its floats."""
        if tensor in self.code_bytes and self.board.device(device).kind == "fpga":
            return self.code_bytes[tensor]
        return self.tensor_bytes.get(tensor, 0)

    def invocation_overhead_s(self, device: str) -> float:
        """A subfunction call's fixed cost on ``device``: the profile's where it measured that device's calls,
        else the board file's."""
        measured = self.measured.call_overhead_s.get(device)
        return self.board.device(device).invocation_overhead_s if measured is None else measured

    def calls_per_sample(self, device: str, batch: int, nodes: Optional[Iterable[int]] = None,
                         batched: bool = False) -> float:
        """Calls a subfunction on ``device`` makes per sample of a stream of ``batch`` samples a call: an FPGA's
        a batch a call; a host device's too where all its ``nodes`` take a batch (``batching.takes_batches``; or
        the caller says they do, ``batched``), else a sample a call."""
        if self.board.device(device).kind == "fpga" or batched or \
                (nodes is not None and batching.takes_batches(self.graph, nodes)):
            return 1.0 / batch
        return 1.0

    def segment(self, nodes: Iterable[int], device: str, batch: int = 1) -> SegmentCost:
        """The cost per sample of running ``nodes`` as one subfunction on ``device`` in calls of
        ``batch`` samples (an FPGA call shares its overhead and link latencies over its batch)."""
        members = set(nodes)
        calls = self.calls_per_sample(device, batch, members)
        inputs: dict[str, int] = {}
        outputs: dict[str, int] = {}
        graph_outputs = set(self.graph.outputs)
        for i in sorted(members):
            node = self.graph.nodes[i]
            for t in node.inputs:
                if self.producers.get(t) not in members:
                    inputs[t] = self.port_bytes(t, device)
            for t in node.outputs:
                if t in graph_outputs or any(c not in members for c in self.consumers.get(t, [])):
                    outputs[t] = self.tensor_bytes[t]
        compute = sum(self.seconds[device][i] for i in members) - \
            (1.0 - calls) * sum(self.dispatch[device][i] for i in members)
        transfer, crossings = 0.0, []
        if device != self.board.host:
            host = self.board.host
            transfer = (self.transfer_seconds(host, device, len(inputs), sum(inputs.values()), calls)
                        + self.transfer_seconds(device, host, len(outputs), sum(outputs.values()), calls))
            crossings = [c for c in [self.crossing(t, host, device) for t in inputs] +
                         [self.crossing(t, device, host) for t in outputs] if c is not None]
            transfer -= sum(c.weighed.saved_s for c in crossings if c.compressed)
        overhead = calls * self.invocation_overhead_s(device)
        return SegmentCost(compute, transfer, overhead, sum(inputs.values()), sum(outputs.values()), crossings)

    def stream_seconds(self, groups: Sequence[tuple[str, Iterable[int]]], batch: int) -> float:
        """``stream_seconds`` of the subfunctions ``groups`` (device, nodes) at ``batch`` samples a call."""
        stages = []
        for k, (device, nodes) in enumerate(groups):
            kind, segment = self.board.device(device).kind, self.segment(nodes, device, batch)
            stages.append((kind, resource_of(kind, device, str(k)), batch * segment.total_s,
                           batch * segment.overhead_s))
        return stream_seconds(driven_stages(stages, self.board.host), batch)

    def objective_seconds(self, groups: Sequence[tuple[str, Iterable[int]]]) -> float:
        """What the partitioner minimises: the latency (the subfunctions' sum) or the stream's time
        per sample at this model's batch."""
        if self.objective == "throughput":  # ties (one stage sets the pace) go to less work per sample
            work = sum(self.segment(nodes, device, self.batch).total_s for device, nodes in groups)
            return self.stream_seconds(groups, self.batch) + STREAM_TIE_BREAK * work
        return sum(self.segment(nodes, device).total_s for device, nodes in groups)

    def totals(self, groups: Iterable[tuple[str, Iterable[int]]]) -> dict[str, dict[str, float]]:
        """Per device given nodes, what they use of each of its capacities."""
        totals: dict[str, dict[str, float]] = {}
        for device, nodes in groups:
            total = totals.setdefault(device, dict.fromkeys(self.capacity[device], 0.0))
            for i in nodes:
                for key, value in self.usage[device][i].items():
                    total[key] += value
        return totals

    def fits(self, groups: Iterable[tuple[str, Iterable[int]]]) -> bool:
        """Whether every device holds all the nodes given to it."""
        return all(total[k] <= self.capacity[d][k] for d, total in self.totals(groups).items() for k in total)
