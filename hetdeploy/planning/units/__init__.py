"""Stage 3b: execution units of FPGA subfunctions, their resource estimates, and folding.

Pure functions over ``graph`` and ``board`` data (no onnx, no hls4ml).

A unit is one op that a processing-element kind of the board computes, followed
by the chain of ops that kind fuses after it (each reading the previous one's
output and its only reader). Its parallelism is hls4ml's ReuseFactor R: a layer
with n_in x n_out multiplications per output vector uses ceil(n_in x n_out / R)
multipliers and takes about R cycles per output vector.

Estimates (per unit, at R and a fixed-point width W), from how hls4ml 1.3 lays
out its layers:
- DSP: one per multiplier (two when W > 18: a DSP48 multiplies 27x18 / 25x18); below
  DSP_MIN_WIDTH bits Vivado builds the multiplier from LUTs instead (about W x b / 2 LUTs for
  b-bit weights). Unrolled (R = 1), each multiplier has one constant weight and the HLS folds it
  in, so the layer's own weights decide: one that rounds to 0 costs nothing, one whose code has
  fewer than DSP_MIN_CONSTANT_BITS bits is a few shifts and adds in LUTs; folded (R > 1), the Latency
  strategy still leaves out the products by zero weights (hls4ml's multiplier_limit,
  ceil(n_in x n_out / R) - zeros // R);
- BRAM18 (each array in whichever of a BRAM18's shapes, 16K x 1 to 512 x 36, takes
  fewest: ``bram18_blocks``): weights, when the Resource strategy keeps them in banks
  of depth R; the FIFOs between a streamed unit's layers, and its padding layer's
  before a padded convolution (hls4ml sizes each to the whole tensor, a pixel's
  channels a word: so many blocks side by side for the word's width, so many deep
  for the pixels);
  the lookup tables of Softmax and of the table activations (TABLE_OPS), LOOKUP_TABLE_SIZE
  entries of 18 bits each: hls4ml 1.3 pipelines these layers at one vector a cycle
  whatever the reuse factor, reading a table once per value, so each table is copied
  until the reads fit the copies' two ports (ceil(n / 2) copies); Softmax adds the
  inverse of the exponentials' sum, read once, and Vitis HLS builds each of its tables in
  VITIS_SOFTMAX_TABLE_BRAM18 times the blocks;
- DSP also: Softmax's products of each exponential by the inverse of their sum
  (18 x 18 bits), one per output;
- LUT: per multiplier the accumulation adder (about a LUT a bit of the accumulator, hls4ml's accum_t:
  ``accumulator_bits``), weights held in LUTs under the
  Latency strategy (W / 2 LUT each), the line buffers of streamed convolutions and pooling
  ((k - 1) rows of the input in hls4ml's shift registers, which Vivado builds from 32-bit
  shift-register LUTs, not BRAM), pooling's comparators (io_parallel: copied for every
  output pixel), each table read's index (about 3W LUT a value of a table layer, and of
  Softmax's n + 1), and a fixed control cost per unit;
- FF, the registers at the pipeline's cuts (W bits a value): an io_parallel unit's input
  vector; under the Latency strategy, synthesised by Vivado HLS, every product a sum waits for (hls4ml keeps
  its products in a completely partitioned array, and at R > 1 they wait for the last ones), by Vitis HLS
  only each sum's partial sums after the adder levels a cycle holds (the board's ``hls_tool``),
  under the Resource strategy each multiplier's, about W / 2 a product (a product with no
  sum, n_in = 1, feeds its output combinationally); a streamed layer's output word (not an activation
  without a table's: combinational between two FIFOs) and its
  window (k x k x input channels; a dense layer's input vector); a table layer's read, and
  the input beside it where the output chooses between the two (ELU, SELU); a few for the
  control state. Plain
  activations and io_parallel pooling are combinational;
- latency in cycles: R per iteration of the unit's loop (a dense layer's vector; an io_parallel
  convolution's output pixels; a streamed convolution's or pooling's input pixels, its map padded
  first where hls4ml pads it, whatever the stride: ``iterations``; pooling at II 1), plus the pipeline
  of the product and its adder tree
  and Softmax's, in cycles of the unit's clock (``pipeline_cycles``: a product and three adder levels a
  cycle at 200 MHz, proportionally more or fewer at a slower or faster clock), a cycle
  for each lookup table's registered read, a cycle for each FIFO between a streamed unit's layers (each layer
  a dataflow process that reads a word the cycle after it was written); none for io_parallel pooling,
  activations without a table and a product with no sum at R = 1 (combinational: hls4ml's io_parallel
  MaxPooling and Dense(1 -> 64) + ReLU baselines report 0); plus moving the unit's inputs and outputs
  through the subfunction's word-wide arena (two 128-bit words a cycle, each holding 16 / E values of E
  bytes): after the arithmetic for an io_parallel unit or a single vector, beside it for a streamed one.
A multiply-accumulate unit may instead keep its weights in DDR (when the FPGA's BRAM cannot hold
them): no weight BRAM or LUTs, and every output vector reads all the weights through the DDR port,
so a vector takes at least weight bytes / DDR bytes per cycle; its reuse factor is the least that
keeps its multipliers no faster than that.
The subfunction's top implements some units itself (board PEs of ``engine: top``): a relayout moves its
values by a table of steps, an input word read and an output word written a step, a step a cycle
(``relayout``); a window op (MaxPool, GlobalAveragePool: kind 'gather') reads each
output value's window values, a word read for a word of lanes when the channels fill whole words, two
reads a cycle, with a comparator or adder a lane; an Add of two buffers (kind 'add') reads a word of each for a
word of output, with an adder a lane; a Concat (kind 'concat') a word of one input's for a word of output
when both inputs' channels fill whole words, else each output value's, two a cycle; a BatchNormalization (kind
'affine') a word for a word, with a multiplier (a DSP) and an adder a lane.
A unit run in bands (``band_of``, ``chosen_band``) is priced as one band (its FIFOs, vectors and values:
its resources) run once a band, plus the top's copies of each band in and out of its band buffers.
Folding (``fold``, ``fold_for_rate``) chooses each unit's reuse factor and, where the user pins none,
hls4ml's strategy and io type (``by_cost``: weights in the fabric or in BRAM, values as arrays or streams,
whichever lets the units together be faster, or as fast with fewer BRAM18s, then less of the chip; for a
rate, the least share of the chip).
Where synthesis decides (a product's binding to a DSP or to LUTs near the thresholds above; where the
HLS tool cuts a Latency layer's pipeline, which moves its FFs), the estimate also gives a range
(``estimate_range``).
These are estimates, not synthesis results; benchmarks/estimates.py puts them
beside published synthesis results (benchmarks/published_synthesis.csv), on whose
points marked "fit" the constants above were set (hls4ml tutorial jet tagger and
SVHN CNN reports); the points marked "holdout" check them.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable, Mapping, NamedTuple, Optional, Sequence

from ...core.board import LAYER_ENGINE_OPS, RELAYOUT_OPS, VITIS_HLS, VIVADO_HLS, Device
from ...core.errors import UserError
from ...core.graph import Graph, Node
from ...core.precision import DEFAULT_WIDTH, SIGN_KEEPING_OPS, CppFixed, source_quantizer
from ...core.plan import Band, EngineLayer, ExecutionUnit, Fifo, Subfunction, Window
from ..dataflow import DataflowError, Op, Process, check, fifo_depths, free_schedule
from ..input_codes import CODE_WORD_BITS
# the cost model's constants and shared arithmetic, read by the stages as units.NAME
from .costs import (ADDER_LEVELS_PER_CYCLE, ARENA_PORTS, ARENA_WORD_BYTES, BANDED_OPS, BAND_FIFO_SHARE, BRAM18_SHAPES,
                    BRAM_MIN_BITS, BRAM_MIN_DEPTH, CYCLES, DA_COST_PER_DIGIT_BIT, DA_MAX_INPUTS, DA_MAX_PRODUCTS,
                    DISTRIBUTED_ARITHMETIC, DSP_MIN_CONSTANT_BITS, DSP_MIN_WIDTH, ENGINE, ENGINE_ACTIVATIONS,
                    ENGINE_CONTROL_DSP, ENGINE_CONTROL_FF, ENGINE_CONTROL_LUT, ENGINE_DENSE_CHUNK, ENGINE_FUSED_OPS,
                    ENGINE_HOLD_LANES,
                    ENGINE_LANE_FF, ENGINE_LANE_LUT, ENGINE_MAC_DEPTH, ENGINE_MOVE_DEPTH, ENGINE_PORT_MAX_BUNDLES,
                    ENGINE_PORT_MAX_WORDS, ENGINE_SHARES, ENGINE_STREAM_PAIRS, ENGINE_URAM_SHARES,
                    FOLDED_STRATEGIES, IO_TYPES, LOOKUP_TABLE_BITS, LOOKUP_TABLE_SIZE, NOT_HLS4ML_LAYER_OPS,
                    NOT_PER_PIXEL_OPS, REFERENCE_CLOCK_MHZ, RESOURCES, RESOURCE_PARTS, SOFTMAX_REFERENCE_CYCLES,
                    STRATEGIES, SYNTHESIS_LUT_SHARE, TABLE_INDEX_LUT_PER_BIT, TABLE_OPS, TABLE_SELECT_OPS, TABLE_SIZES,
                    UNIT_CONTROL_FF, UNIT_CONTROL_LUT, VITIS_SOFTMAX_TABLE_BRAM18, EngineSize, Shape, accumulator_bits,
                    arena_words, band_copy_cycles, bram18_blocks, buffer_bytes, buffer_lanes, copy_cycles,
                    ddr_cycles_per_vector,
                    depthwise_on_engine,
                    distributed_arithmetic_lut, element_bytes, engine_buffers, engine_cycles, engine_dense_groups,
                    engine_estimate,
                    buffered_window, engine_row_values, engine_window, staging_cycles, stored_window,
                    engine_resources, engine_sizes, fifo_bram18, iterations, pipeline_cycles, strategy_for, streams,
                    valid_reuse_factors, weight_reads, word_values, XNOR_POPCOUNT)
from .kinds import KINDS, Arithmetic, UnitKind, kind_of, token_interval
from .relayout import chain_of


@dataclass
class Unit:
    pe: str
    nodes: list[int]  # node indices, in execution order
    inputs: list[str] = field(default_factory=list)  # tensors it reads that it does not write
    output: str = ""  # the one tensor it writes that others read
    engine: str = "hls4ml"  # who implements it (board.ENGINES): a unit of the top's holds its one op alone


def node_unit(graph: Graph, index: int, device: Device) -> Unit:
    """Node ``index`` as an execution unit of its own on the FPGA ``device``, on the PE that runs it: the first, in
    the board file's order, that holds it alone fully folded, where several run it (a global average pool over
    thousands of channels, which hls4ml's pooling computes as a depthwise convolution of that many weights, goes to
    the top's window PE, which sums it in place); else the first. The engine's PEs are not weighed here: the cost
    model chooses which nodes run on the engine (``cost.engine_capable``)."""
    node = graph.nodes[index]
    kinds = device.pes_for(node)

    def on(pe: str) -> Unit:
        return Unit(pe, [index], list(dict.fromkeys(node.inputs)), node.outputs[0] if node.outputs else "",
                    device.pes[pe].engine if pe else "hls4ml")

    weighed = [pe for pe in kinds if device.pes[pe].engine != "engine"]
    if len(weighed) > 1 and device.why_not(node) is None:  # a node the FPGA does not run may have no unit's shape
        return next((on(pe) for pe in weighed if _holds_alone(graph, on(pe), device)), on(kinds[0]))
    return on(kinds[0] if kinds else "")


def _holds_alone(graph: Graph, unit: Unit, device: Device) -> bool:
    """Whether ``unit``, folded as far as it goes (its weights in DDR where it may put them there), fits the FPGA's
    budget by itself at the default width."""
    shape = unit_shape(graph, unit, device.clock_mhz, hls_tool=device.hls_tool)
    rate = ddr_bytes_per_cycle(device)
    most = folded_estimate(shape, folding_options(shape, DEFAULT_WIDTH, rate)[-1], DEFAULT_WIDTH, rate)
    budget = device.budget()
    return all(most[k] <= budget.get(k, 0) for k in RESOURCES)


def split_units(graph: Graph, nodes: Sequence[int], device: Device, keep: set[str] = frozenset(),
                engine: Collection[int] = (), residual: Collection[int] = ()) -> list[Unit]:
    """Cut an FPGA subfunction (``nodes`` in execution order) into units. ``keep``: tensors read
    outside the subfunction, which a fusion must not swallow; ``engine``: nodes that may run on the engine, whose units
    fuse only what it computes (ENGINE_FUSED_OPS, a ReLU or a Clip last); ``residual``: nodes that may be fused into
    a unit that adds a residual map: such a unit of ``engine`` fuses an Add of another map of its output's shape
    before its activation (``adds_residual``), and then runs on the engine alone."""
    consumers = graph.consumers()
    outputs = set(graph.outputs) | set(keep)
    units: list[Unit] = []
    for i in nodes:
        node = graph.nodes[i]
        own = node_unit(graph, i, device)
        if units:
            unit = units[-1]
            last = graph.nodes[unit.nodes[-1]]
            if unit.nodes[0] in engine and {unit.nodes[0], i} <= set(residual) and \
                    adds_residual(graph, unit, node) and consumers.get(last.outputs[0]) == [i] and \
                    last.outputs[0] not in outputs:
                unit.nodes.append(i)
                unit.inputs += [t for t in node.inputs if t != last.outputs[0] and t not in unit.inputs]
                unit.output = node.outputs[0]
                unit.engine = "engine"
                continue
            # a PE fuses what its fuse list names (the top's: a ReLU after its Add or BatchNormalization, relayouts
            # after a relayout, one table moving the chain's values), whoever runs that op alone; hls4ml has no
            # relayout layer
            fusible = node.op in device.pes[unit.pe].fuse and node.inputs == last.outputs[:1] and \
                (node.op not in RELAYOUT_OPS or last.op in RELAYOUT_OPS) and \
                (unit.nodes[0] not in engine or node.op in ENGINE_FUSED_OPS and last.op not in ENGINE_ACTIVATIONS)
            if fusible and consumers.get(last.outputs[0]) == [i] and last.outputs[0] not in outputs:
                unit.nodes.append(i)
                unit.output = node.outputs[0]
                continue
        if not own.pe:
            raise ValueError(f"node '{node.name}': no PE of {device.name} runs {node.op} within its limits")
        if len(node.outputs) != 1:
            raise ValueError(f"node '{node.name}': {node.op} with {len(node.outputs)} outputs on the FPGA")
        units.append(own)
    return _joined_concats(graph, units, outputs)


def concat_slices(graph: Graph, unit: Unit) -> list[str]:
    """The tensors a unit of the top's Concats writes side by side along the channels, in order: its first Concat's
    inputs, then each later one's second (its first the Concat before's output, ``_joined_concats``)."""
    first, *later = (graph.nodes[i] for i in unit.nodes)
    return list(first.inputs) + [node.inputs[1] for node in later]


def _joined_concats(graph: Graph, units: list[Unit], outputs: Collection[str]) -> list[Unit]:
    """``units`` with each chain of the top's two-input Concats along the channels (intake's split of a Concat of
    three or more tensors: Inception's four branches) one unit, in the chain's last one's place: its Concats' first
    input the output of the one before, which nothing else reads, and every tensor a whole number of words at any
    width (channels a multiple of ARENA_WORD_BYTES), so that the top moves each tensor once, into its channels of
    the last output (arena.h's concat_slice), not each part's output again into the next. Its inputs are its
    tensors in order (none twice)."""
    consumers = graph.consumers()

    def joinable(unit: Unit) -> bool:
        nodes = [graph.nodes[i] for i in unit.nodes]
        return unit.engine == "top" and all(
            n.op == "Concat" and len(n.inputs) == 2 and len(n.input_shapes) == 2 and
            all(s and len(s) > 1 and n.attrs.get("axis", 0) % len(s) == 1 and s[1] % ARENA_WORD_BYTES == 0
                for s in n.input_shapes) for n in nodes)

    joined: list[Unit] = []
    for unit in units:
        source = graph.nodes[unit.nodes[0]].inputs[0] if joinable(unit) else None
        before = next((k for k, u in enumerate(joined) if u.output == source), None)
        if before is not None and joinable(joined[before]) and consumers.get(source) == [unit.nodes[0]] and \
                source not in outputs:
            chain = joined[before]
            tensors = chain.inputs + [t for t in unit.inputs if t != source]
            if tensors == concat_slices(graph, Unit(unit.pe, chain.nodes + unit.nodes)):  # (each read once)
                del joined[before]
                unit = Unit(unit.pe, chain.nodes + unit.nodes, tensors, unit.output, unit.engine)
        joined.append(unit)
    return joined


def concat_channels(unit: ExecutionUnit, shapes: Mapping[str, list[int]]) -> list[tuple[str, int]]:
    """A Concat unit's inputs (its tensors side by side, a chain's too: ``_joined_concats``) with the first of their
    channels in its output."""
    return list(zip(unit.inputs, itertools.accumulate((shapes[t][1] for t in unit.inputs), initial=0)))


def concat_moved_channels(unit: ExecutionUnit, shapes: Mapping[str, list[int]]) -> int:
    """The channels a Concat unit moves into its output itself: its inputs' but those written in place."""
    return sum(shapes[t][1] for t in unit.inputs if t not in unit.in_place)


def concats_in_place(graph: Graph, sub: Subfunction, device: Device, typed: Collection[str]) -> None:
    """Each Concat the top runs in ``sub`` (a chain of them too), where ``sub`` has engine units (its top then
    sequential): each input whose engine unit or Concat unit could write it straight into its channels of the
    Concat's output does (the Concat's ``in_place``), and the top moves only the Concat's other inputs, its cycles
    theirs (none: it runs no loop). The memory plan puts such an input's buffer in the output's (``memory``; a
    Concat's output written into a later Concat's in turn, DenseNet's block: each layer's features a slice of the
    block's last Concat's, the root), an engine unit writing its output pixels the root's channels apart (its
    layer's ``out_stride``), a Concat its inputs' (``Buffer.view_of``). SqueezeNet's and Inception's branches,
    DenseNet's features. An input is written in place where the Concat reads it once and nothing else reads it but
    the top's BatchNormalizations (which read a slice of a wider buffer: DenseNet's, before each layer), the host
    neither; its unit adds no residual (whose words it reads where it writes its own) and is one whose output type
    the build sets (``typed``, or a Concat: its type becomes the root's, which holds its values) at the Concat's
    precision; and it, its first channel and the output are whole words a pixel at that precision (``whole_words``:
    8 channels of 16 bits a 128-bit word; generation moves them all after all where a width changes since)."""
    if not any(u.engine is not None for u in sub.execution_units):
        return
    index, consumers, shapes = graph.node_index(), graph.consumers(), _tensor_shapes(graph)

    def concat(unit: ExecutionUnit) -> bool:
        return device.pes[unit.pe].engine == "top" and all(graph.nodes[index[n]].op == "Concat" for n in unit.nodes)

    # (a Concat writes its output into a wider buffer where it moves whole words: each input a slice of its own)
    writers = {u.outputs[0]: u for u in sub.execution_units if u.name in typed and u.engine is not None
               or concat(u) and all(whole_words(shapes[t][1], u.precision) for t in u.inputs)}
    scales = {u.nodes[0] for u in sub.execution_units if device.pes[u.pe].engine == "top"
              and graph.nodes[index[u.nodes[0]]].op == "BatchNormalization"}
    for unit in (u for u in sub.execution_units if concat(u)):
        nodes = {index[n] for n in unit.nodes}
        (output,) = unit.outputs
        if any(len(shapes[output]) < 2 or graph.nodes[i].attrs.get("axis", 0) % len(shapes[output]) != 1
               for i in nodes) or not whole_words(shapes[output][1], unit.precision) or \
                len(set(unit.inputs)) < len(unit.inputs):
            continue
        for tensor, first in concat_channels(unit, shapes):
            writer = writers.get(tensor)
            if writer is not None and not (writer.engine is not None and writer.engine.residual) and \
                    writer.precision == unit.precision and tensor not in sub.outputs and \
                    all(i in nodes or graph.nodes[i].name in scales for i in consumers.get(tensor, ())) and \
                    whole_words(first, unit.precision) and whole_words(shapes[tensor][1], unit.precision):
                unit.in_place.append(tensor)
        if unit.in_place:  # its loops move the other inputs' words alone
            moved = concat_moved_channels(unit, shapes)
            for key in ("latency_cycles", "compute_cycles"):
                unit.estimate[key] = unit.estimate[key] * moved // shapes[output][1]
    for tensor, (root, _) in concat_views(sub.execution_units, shapes).items():
        if writers[tensor].engine is not None:
            writers[tensor].engine.out_stride = shapes[root][1]


def whole_words(channels: int, precision: str) -> bool:
    """Whether ``channels`` values of C++ type ``precision`` fill whole arena words."""
    return channels % word_values(CppFixed.parse(precision).width) == 0


def concat_views(execution_units: Sequence[ExecutionUnit], shapes: Mapping[str, list[int]]
                 ) -> dict[str, tuple[str, int]]:
    """Each Concat input written in place (``concats_in_place``): the tensor whose buffer holds it, the root (the
    last Concat output of the chain of those it is written into, each into the next), and its first channel there."""
    outer = {x: (u.outputs[0], first) for u in execution_units for x, first in concat_channels(u, shapes)
             if x in u.in_place}
    views = {}
    for tensor, (root, first) in outer.items():
        while root in outer:
            root, first = outer[root][0], first + outer[root][1]
        views[tensor] = (root, first)
    return views


def unit_shape(graph: Graph, unit: Unit, clock_mhz: float, io_type: Optional[str] = None,
               hls_tool: str = VITIS_HLS) -> Shape:
    """``_main_shape`` with the values the unit reads (every activation input of its main node) and the FIFO
    hls4ml puts after each of its layers but the last when it streams, at the FPGA's clock ``clock_mhz``,
    synthesised by ``hls_tool`` (HLS_TOOLS).
    ``io_type``: the one the user pinned (IO_TYPES); None: io_stream for spatial data, io_parallel for flat
    (``_main_shape``; the folding may choose the other, ``by_cost``)."""
    main = graph.nodes[unit.nodes[0]]
    read = sum(math.prod(s or [1]) for s in main.input_shapes)
    tables = sum(graph.nodes[i].op in TABLE_OPS for i in unit.nodes)
    layers = sum(graph.nodes[i].op not in NOT_HLS4ML_LAYER_OPS for i in unit.nodes)
    selects = sum(graph.nodes[i].op in TABLE_SELECT_OPS for i in unit.nodes)
    normalizations = sum(graph.nodes[i].op == "BatchNormalization" for i in unit.nodes[1:])
    fifos = tuple(f for i in unit.nodes[:-1] for f in output_fifo(graph, i))  # counted where it streams
    shape = _main_shape(graph, unit).replaced(
        input_values=read, table_layers=tables, table_selects=selects, layers=max(1, layers),
        normalizations=normalizations, weight_octaves=main.weight_octaves, weight_bits=main.weight_bits,
        weight_integer=main.weight_integer, clock_mhz=clock_mhz, hls_tool=hls_tool,
        bipolar=_signs_by_signs(graph, main), residual=residual_input(graph, unit) is not None, fifos=fifos)
    return with_io_type(shape, io_type)


def _signs_by_signs(graph: Graph, main: Node) -> bool:
    """Whether ``main`` is a dense layer or an unpadded convolution (of one group: no zero of the padding in its
    windows) whose weights are each -1 or +1 and whose input is a BipolarQuant's of scale 1 (through ops that keep
    each value, ``SIGN_KEEPING_OPS``): each product a sign, as the XNOR of the two signs gives it."""
    unpadded_conv = main.op == "Conv" and main.attrs.get("group", 1) == 1 and not any(main.attrs.get("pads") or [])
    if main.op not in ("MatMul", "Gemm") and not unpadded_conv or not main.bipolar_weights \
            or main.attrs.get("alpha", 1.0) != 1.0 or not main.inputs:
        return False
    quantizer = source_quantizer(graph, main.inputs[0], graph.producers(), SIGN_KEEPING_OPS)
    return quantizer is not None and quantizer.op == "BipolarQuant" and quantizer.scalars.get(1) == 1.0


def with_io_type(shape: Shape, io_type: Optional[str]) -> Shape:
    """``shape`` under hls4ml's IOType ``io_type`` (IO_TYPES; None: as it is)."""
    return shape if io_type is None else shape.replaced(streamed=io_type == "io_stream")


def takes_either_io_type(shape: Shape) -> bool:
    """Whether ``by_cost`` may weigh both of hls4ml's io types for a unit: a Dense, a Conv (tried under both here,
    each verified) or a max pooling, not run in bands (each band streams) and not a depthwise convolution (whose
    io_parallel form hls4ml's Latency strategy has not been verified here)."""
    return kind_of(shape).either_io_type and shape.bands == 1 and not shape.latency_only


def output_fifo(graph: Graph, index: int) -> tuple[tuple[int, int], ...]:
    """(pixels, channels) of the FIFO hls4ml streams a node's spatial output through to the next layer
    of its unit; none for a flat output."""
    node = graph.nodes[index]
    shape = node.output_shapes[0] if node.output_shapes else None
    return ((math.prod(shape[2:]), shape[1]),) if shape and len(shape) > 2 else ()


def _main_shape(graph: Graph, unit: Unit) -> Shape:
    main = graph.nodes[unit.nodes[0]]
    # a scalar (rank 0) counts as one value
    first = (main.input_shapes[0] if main.input_shapes else None) or [1]
    out = (graph.nodes[unit.nodes[-1]].output_shapes[0] if graph.nodes[unit.nodes[-1]].output_shapes else None) or [1]
    main_out = (main.output_shapes[0] if main.output_shapes else None) or [1]
    streamed = len(first) > 2
    softmax = any(graph.nodes[i].op == "Softmax" for i in unit.nodes)
    output_values = math.prod(out)
    if main.op in RELAYOUT_OPS:  # values moved by the top: no logic, no buffer of its own
        return Shape("data", 0, 0, 0, False, 0, 0, softmax,
                     relayout=chain_of([graph.nodes[i] for i in unit.nodes]))
    channels = main_out[1] if len(main_out) > 1 else main_out[0]  # a shape intake could not infer: one value
    if unit.engine == "top" and main.op == "Add":  # the top's Add: an output value of two reads
        return Shape("add", len(main.inputs), channels, math.prod(main_out[2:]), False, 0, output_values, softmax)
    if unit.engine == "top" and main.op == "BatchNormalization":  # the top's scale and shift: a product a value
        return Shape("affine", 1, channels, math.prod(main_out[2:]), False, 0, output_values, softmax)
    if unit.engine == "top" and main.op == "Quant":  # the top's quantizer: n_in, its products a value by constants
        # no power of two (a product by 2^k is a shift); the PE's limits: one scale
        products = 0 if math.frexp(main.scalars[1])[0] == 0.5 else 2
        return Shape("quant", products, channels, math.prod(main_out[2:]), False, 0, output_values, softmax)
    if unit.engine == "top" and main.op == "LRN":  # the top's LRN: n_in, the channels of a value's window
        return Shape("lrn", main.attrs.get("size", 1), channels, math.prod(main_out[2:]), False, 0, output_values,
                     softmax)
    if unit.engine == "top" and main.op == "Concat":  # the top's Concat: n_in, the channels all its tensors' divide
        channels_of = {t: s[1] for i in unit.nodes for t, s in zip(graph.nodes[i].inputs, graph.nodes[i].input_shapes)}
        return Shape("concat", math.gcd(*[channels_of[t] for t in concat_slices(graph, unit)]), out[1],
                     math.prod(out[2:]), False, 0, output_values, softmax)
    if unit.engine == "top":  # a window the top reduces (arena.h): each output value reads its window's values
        kernel = first[2:] if main.op.startswith("Global") else main.attrs.get("kernel_shape") or [1]
        return Shape("gather", math.prod(kernel), main_out[1], math.prod(main_out[2:]), False, 0, output_values,
                     softmax, pool=tuple(Window.of(main).values()))
    if main.op == "Conv":
        kernel = main.attrs.get("kernel_shape") or [1] * (len(first) - 2)
        group = main.attrs.get("group", 1)
        n_in = (first[1] // group) * math.prod(kernel)
        return windowed(Shape("kernel", n_in, main_out[1], math.prod(main_out[2:]), True, 0, output_values, softmax,
                              latency_only=group > 1 and group == first[1],
                              column_dilation=(main.attrs.get("dilations") or [1])[-1]), first, kernel,
                        main.attrs.get("strides"), main.attrs.get("pads"))
    if main.op in ("Gemm", "MatMul"):  # streamed, hls4ml's dense wrapper copies its input word into an array
        return Shape("kernel", first[-1], main_out[-1], 1, False, 0, output_values, softmax, window_values=first[-1])
    if main.op == "MaxPool":
        kernel = main.attrs.get("kernel_shape") or [1]
        return windowed(Shape("window", math.prod(kernel), main_out[1], math.prod(main_out[2:]), True, 0,
                              output_values, softmax), first, kernel, main.attrs.get("strides"))
    if main.op in ("AveragePool", "GlobalAveragePool"):  # a depthwise convolution on the FPGA
        kernel = main.attrs.get("kernel_shape") or first[2:]
        return windowed(Shape("kernel", math.prod(kernel), main_out[1], math.prod(main_out[2:]), True, 0,
                              output_values, softmax, latency_only=True), first, kernel, main.attrs.get("strides"),
                        main.attrs.get("pads"))
    channels = main_out[1] if len(main_out) > 1 else main_out[0]
    return Shape("elementwise", 1, channels, max(1, math.prod(main_out) // max(1, channels)), streamed, 0,
                 output_values, softmax)


def band_of(graph: Graph, unit: Unit, rows: int) -> Optional[Band]:
    """``unit`` run in bands of ``rows`` output rows (plan.Band); None when one band holds the whole map.
    ValueError (why) for a unit that cannot be banded: an hls4ml unit on one 4-D input, starting with a
    layer of BANDED_OPS (a window over rows) or with an op that computes each pixel on its own, every op
    after it computing each pixel on its own (the PE's fusions)."""
    main, last = graph.nodes[unit.nodes[0]], graph.nodes[unit.nodes[-1]]
    first = main.input_shapes[0] if main.input_shapes else []
    out = last.output_shapes[0] if last.output_shapes else []
    per_pixel = main.op not in BANDED_OPS and main.op not in NOT_PER_PIXEL_OPS and first[2:] == out[2:]
    if unit.engine != "hls4ml" or len(first) != 4 or len(unit.inputs) != 1 or \
            not (main.op in BANDED_OPS or per_pixel):
        raise ValueError(f"its unit starts with a {main.op} on the {unit.pe} PE; bands are for hls4ml units on one "
                         f"4-D input that start with a {' or '.join(BANDED_OPS)} or compute each pixel on its own")
    (_, channels, height, width), (_, out_channels, out_height, out_width) = first, out
    if rows >= out_height:
        return None
    kernel, stride = ((main.attrs["kernel_shape"][0], (main.attrs.get("strides") or [1, 1])[0])
                      if main.op in BANDED_OPS else (1, 1))
    pad_top = (main.attrs.get("pads") or [0, 0, 0, 0])[0] if main.op in BANDED_OPS else 0
    return Band(rows, -(-out_height // rows), (rows - 1) * stride + kernel, rows * stride, pad_top, height,
                out_height, width * channels, out_width * out_channels)


def chosen_band(graph: Graph, unit: Unit, shape: Shape, budget: Mapping[str, int], width: int,
                reader_fifos: Sequence[tuple[int, int]] = ()) -> Optional[Band]:
    """The bands a unit no one gave bands runs in: none while the FIFOs hls4ml sizes to its whole map (between
    its layers, and ``reader_fifos``, (pixels, channels) of those to a reader fused after it) take at most
    BAND_FIFO_SHARE of the chip's BRAM18 ``budget``; else the fewest bands (the least halo read again) with
    which one band's do; if none do (a FIFO is a pixel's channels wide, whatever its rows), the fewest bands
    whose FIFOs take the least."""
    def fifo_bram18_of(candidate: Shape) -> int:
        return fifo_bram18(list(streams(candidate)) + [(pixels // candidate.bands, channels)
                                                    for pixels, channels in reader_fifos], width)

    limit = BAND_FIFO_SHARE * budget.get("bram18", 0)
    if not shape.streamed or fifo_bram18_of(shape) <= limit:
        return None
    try:
        tallest = band_of(graph, unit, 1)
    except ValueError:  # not a unit bands are for
        return None
    if tallest is None:
        return None
    least = (fifo_bram18_of(shape), None)  # the fewest FIFO BRAM18s, in the fewest bands that take them
    for count in sorted({-(-tallest.output_height // rows) for rows in range(1, tallest.output_height)}):
        band = band_of(graph, unit, -(-tallest.output_height // count))
        fifos = fifo_bram18_of(banded(shape, band))
        if fifos <= limit:
            return band
        if fifos < least[0]:
            least = (fifos, band)
    return least[1]


def banded(shape: Shape, band: Band) -> Shape:
    """``shape`` of a unit run in ``band``s: one band's values, vectors and FIFOs (its resources), ``count`` runs."""
    columns = band.output_row_values // max(1, shape.n_out)
    # hls4ml's project of one band reads ``input_rows`` rows, its padding above and below dropped (band_model)
    return shape.replaced(vectors=band.rows * columns, output_values=band.rows * band.output_row_values,
                          input_values=band.input_rows * band.input_row_values,
                          fifos=tuple((band.rows * columns, channels) for _, channels in shape.fifos),
                          bands=band.count, band_rows=(band.input_rows, band.input_row_values, band.rows,
                                                       band.output_row_values),
                          input_map=(band.input_rows, *shape.input_map[1:]) if shape.input_map else ())


def windowed(shape: Shape, first: Sequence[int], kernel: Sequence[int], strides: Optional[Sequence[int]] = None,
             pads: Optional[Sequence[int]] = None) -> Shape:
    """``shape`` of a window op (a convolution, a pooling) over its input ``first`` (N, C, ...) with ``strides``
    (ONNX's default: 1) and ``pads`` (ONNX's: each axis's start, then each end; a convolution's): the map its
    streamed loop reads, padded (hls4ml pads a convolution's input in a ZeroPadding layer of its own under
    io_stream: InsertZeroPaddingBeforeConv1D/2D, backends/vivado/passes/conv_same_pad.py), its window's geometry
    over it, its line buffer ((k - 1) rows of that map) and its window in registers (k x k x C)."""
    spatial = list(first[2:]) or [1]
    ends = list(pads or [0] * (2 * len(spatial)))
    padded = [n + ends[k] + ends[k + len(spatial)] for k, n in enumerate(spatial)]
    rows, columns = math.prod(padded[:-1]), padded[-1]
    line = (kernel[0] - 1) * (columns if len(first) > 3 else 1) * first[1]
    steps = list(strides or [1] * len(spatial))
    geometry = (kernel[0], kernel[-1], steps[0], steps[-1], ends[0], ends[len(spatial) - 1], ends[len(spatial)],
                ends[-1]) if len(spatial) > 1 else (1, kernel[0], 1, steps[0], 0, ends[0], 0, ends[1])
    return shape.replaced(line_buffer_values=line, window_values=first[1] * math.prod(kernel),
                          input_map=(rows, columns, first[1]), padded=any(ends), window_geometry=geometry)


class Folding(NamedTuple):
    """How a unit is folded: hls4ml's ReuseFactor, where its weights live, hls4ml's Strategy (one of
    STRATEGIES; None: by the reuse factor, ``strategy_for``) and its IOType (one of IO_TYPES; None: its shape's,
    ``unit_shape``)."""

    reuse_factor: int
    weights_in_ddr: bool = False
    strategy: Optional[str] = None
    io_type: Optional[str] = None

    @property
    def hls_strategy(self) -> str:
        """The Strategy hls4ml is given: weights in DDR are read a bank at a time, never partitioned into
        registers (Resource)."""
        if self.strategy == ENGINE:
            return ENGINE
        return "Resource" if self.weights_in_ddr else self.strategy or strategy_for(self.reuse_factor)


ENGINE_FOLDING = Folding(1, True, ENGINE)  # a unit run on its subfunction's engine, its weights in DDR


def engine_allowance(device: Device, dsp_share: Optional[float] = None,
                     uram_share: Optional[float] = None) -> dict[str, int]:
    """The DSPs, BRAM18s and URAM blocks an FPGA's engine may take: ENGINE_SHARES of its budget's, or ``dsp_share``
    of its DSPs and ``uram_share`` of its URAM blocks."""
    budget = device.budget()
    shares = ENGINE_SHARES | ({} if dsp_share is None else {"dsp": dsp_share}) | \
        ({} if uram_share is None else {"uram": uram_share})
    return {k: int(budget.get(k, 0) * share) for k, share in shares.items()}


def engine_holds(device: Device, window: int, width: int) -> bool:
    """Whether the engine on ``device`` can hold a layer's ``window`` of ``width``-bit weights in ENGINE_HOLD_LANES
    lanes' buffers within its BRAM18 and URAM allowance, taking one value a cycle (the fewest blocks): the engine is
    sized to its largest window, so one layer past it (the model zoo's ZFNet-512's Gemm of 18,432 inputs: 576
    BRAM18s) would leave no room for the engine and the rest of the chip."""
    return buffer_lanes(width, engine_allowance(device), window, 1)[0] >= ENGINE_HOLD_LANES


def engine_sizes_for(device: Device, width: int, shapes: Sequence[Shape],
                     allowance: Optional[Mapping[str, int]] = None,
                     cycles: Optional[Callable[[EngineSize], int]] = None) -> list[EngineSize]:
    """The engine sizes the folding tries on ``device`` for units of ``shapes`` at ``width`` bits (``engine_sizes``
    in ``allowance``, by default its share of the FPGA, for their largest window), the fewest cycles of theirs first
    (``engine_cycles_of``, or ``cycles``, the caller's memo of it): more lanes share each value read, more values a
    lane load its weights in fewer cycles, two pixels at once share each weight read."""
    window = max(engine_window(s, width) for s in shapes)
    allowance = dict(allowance or engine_allowance(device))
    sizes = []
    for port_words, bundles in engine_ports(device):
        if device.engine_size is not None:  # its lanes and values pinned; two pixels at once too where the DSPs allow
            pinned = pinned_engine_size(device, width, window, port_words, bundles)
            pair = dataclasses.replace(pinned, pixels=2)
            of_port = [pinned] + [pair] * (engine_resources(window, width, pair)["dsp"] <= allowance.get("dsp", 0))
        else:
            of_port = engine_sizes(width, allowance, window, port_words, bundles)
        # a port of words no power of two only on lanes a multiple of them, on which its layers may stream (the
        # sizes are weighed without streaming, which the folding adds after: ``engine_streams``)
        sizes += [s for s in of_port if port_words & (port_words - 1) == 0 or s.lanes % port_words == 0]
    # (of two sizes as fast, the one of a pixel at once: fewer DSPs)
    cycles = cycles or (lambda size: engine_cycles_of(device, width, shapes, size))
    return sorted(sizes, key=lambda size: (cycles(size), size.pixels))


class PinnedEngineRefused(UserError):
    """The engine the board file or --engine pins cannot be built: the plan is refused, not made without it."""


def pinned_engine_size(device: Device, width: int, window: int, port_words: int, bundles: int) -> EngineSize:
    """The engine ``device.engine_size`` pins (its lanes and values a cycle; the board file's engine key, or
    --engine), for a largest window of ``window`` values at ``width`` bits, its weights port of ``port_words`` words
    in ``bundles`` bundles (one of ``engine_ports``): as many of its lanes' buffers in URAM as
    the FPGA's URAM budget holds, the others in BRAM. UserError where a lane takes more values a cycle than a word
    holds at that width, or where its multipliers and buffers alone exceed the FPGA's budget (PinnedEngineRefused)."""
    lanes, vector = device.engine_size
    pinned = f"the engine pinned on {device.name} ({lanes} lanes of {vector} values a cycle)"
    per_word = word_values(width)
    if vector > per_word:
        raise PinnedEngineRefused(f"{pinned} takes more values a cycle than a word holds at {width} bits "
                                  f"({per_word})")
    budget = device.budget()
    uram = min(lanes, buffer_lanes(width, {"uram": budget.get("uram", 0)}, window, vector)[1])
    size = EngineSize(lanes, uram - uram % 2, vector, port_words, bundles=bundles, window=window)
    needs = engine_resources(window, width, size)
    over = [f"{needs[k]:,} {k.upper() if k != 'bram18' else 'BRAM18'}s of {budget.get(k, 0):,}" for k in needs
            if k in ("dsp", "bram18", "uram") and needs[k] > budget.get(k, 0)]
    if over:
        raise PinnedEngineRefused(f"{pinned} does not fit it at {width} bits: it takes {', '.join(over)} (its largest "
                                  f"window {window:,} values)")
    return size


def engine_cycles_of(device: Device, width: int, shapes: Sequence[Shape], size: EngineSize) -> int:
    """The cycles of units of ``shapes`` on an engine of ``size`` (``engine_estimate``)."""
    rate = ddr_bytes_per_cycle(device)
    return sum(_engine_latency(s, width, rate, size) for s in shapes)


@functools.lru_cache(maxsize=None)
def _engine_latency(shape: Shape, width: int, rate: float, size: EngineSize) -> int:
    """A unit's cycles on an engine of ``size``: cached, the folding weighing every size for every unit."""
    return engine_estimate(shape.replaced(engine=size), width, rate)["latency_cycles"]


def engine_layer_cycles(layer: EngineLayer, width: int, staged: bool, output_in_ddr: bool = False,
                        first_word: int = 0) -> int:
    """``engine_cycles`` of a unit's engine layer at ``width`` bits, its input on chip, or ``staged`` from DDR (from
    word ``first_word`` of the DDR region on), its output on chip or in DDR (``output_in_ddr``): at most a word's
    values a lane a cycle, as the build's engine function of such buffers takes (``hls_top._engines``: a quantized
    model's 8-bit engine whose buffers the memory plan holds at ``width``)."""
    return _engine_layer_counted(layer, width, staged, output_in_ddr, first_word)["cycles"]


def engine_layer_streams(layer: EngineLayer, width: int) -> bool:
    """Whether a unit's engine layer at ``width`` bits streams its weights (``engine_cycles``' choice, its input where
    the layer says, hls/engine.h's engine_stream): the build lays its weights region out for it and tells the engine
    so (``EngineLayer.streamed``)."""
    return _engine_layer_counted(layer, width, layer.staged)["streamed"]


def _engine_layer_counted(layer: EngineLayer, width: int, staged: bool, output_in_ddr: bool = False,
                          first_word: int = 0) -> dict[str, int]:
    """``engine_cycles`` of ``engine_layer_cycles``."""
    channels = layer.channels // layer.groups
    vector = min(layer.vector, word_values(width))
    staging = staging_cycles(layer.input, layer.channels, layer.kernel, layer.strides, layer.pads, layer.dilations,
                             layer.output, width, layer.port_words // layer.bundles, first_word, layer.bundles
                             ) if staged else ()
    return engine_cycles(layer.window, layer.filters, layer.output[0] * layer.output[1], width, layer.lanes,
                         vector=vector, channels=channels, groups=layer.groups, port_words=layer.port_words,
                         row=engine_row_values(layer.kernel[1], channels, layer.groups, layer.dilations[1], width),
                         staging=staging, pixels_at_once=layer.pixels, buffer_window=layer.buffer_window,
                         output_in_ddr=output_in_ddr, residual=layer.residual, shared=layer.shared,
                         stream=layer.stream)


def engine_staging_cycles(layer: EngineLayer, width: int, first_word: int = 0) -> int:
    """The cycles staging a unit's ``width``-bit input from DDR (from word ``first_word`` of the DDR region on) adds
    to its engine layer's (``engine_layer_cycles`` staged, less on chip)."""
    return engine_layer_cycles(layer, width, True, first_word=first_word) - engine_layer_cycles(layer, width, False)


def engine_ddr_output_cycles(layer: EngineLayer, width: int) -> int:
    """The cycles a unit's engine layer of ``width``-bit values adds where its output lies in DDR: its words written
    one a cycle, not two, where a cycle reads nothing (``engine_layer_cycles``, its input as the layer says)."""
    return engine_layer_cycles(layer, width, layer.staged, True) - engine_layer_cycles(layer, width, layer.staged)


def staging_bytes(layer: EngineLayer, element: int) -> int:
    """Bytes of the staging buffer a unit's engine layer needs, its input of ``element``-byte values in DDR
    (hls/engine.h's engine_stage): its window's k_h rows of the input, each in whole words."""
    return layer.kernel[0] * buffer_bytes(layer.input[1] * layer.channels, element)


def engine_ports(device: Device) -> list[tuple[int, int]]:
    """The weights ports an engine on ``device`` may have: the words it reads a cycle and the m_axi bundles it is, a
    bundle on each of as many DDR ports of the FPGA's but the first (its cores' other bundle's: ``Memory.ports``) up
    to ENGINE_PORT_MAX_BUNDLES, each reading the most words, a power of two, that a port delivers a cycle (one, 128
    bits, on a Zynq UltraScale+ HP port at 3.2 GB/s and 200 MHz), at least one (the PYNQ-Z2's 64-bit port's reads
    then wait on it, ``engine_estimate``), ENGINE_PORT_MAX_WORDS in all at most: the most bundles (one, the first
    port's, where it has one) and, where that is no power of two, the most that is (the KV260's and ZCU104's three
    and two): a port of P words reads P lanes' weights at once, and a layer streams its weights only on lanes a
    multiple of P (``engine_streams``), so the folding weighs both (``engine_sizes_for``)."""
    words = 1
    while 2 * words <= ENGINE_PORT_MAX_WORDS and 2 * words * ARENA_WORD_BYTES <= ddr_bytes_per_cycle(device):
        words *= 2
    most = max(1, min(ENGINE_PORT_MAX_BUNDLES, device.memory.ports - 1, ENGINE_PORT_MAX_WORDS // words))
    power = 1 << (most.bit_length() - 1)
    return [(words * bundles, bundles) for bundles in dict.fromkeys((most, power))]


def ddr_bytes_per_cycle(device: Device) -> float:
    """What the FPGA's DDR port delivers per clock cycle (an FPGA's board entry requires its clock)."""
    return device.memory.bandwidth_bytes_per_s / (device.clock_mhz * 1e6)


def reuse_factors_for(shape: Shape, strategy: str) -> list[int]:
    """The reuse factors hls4ml 1.3 accepts for a kernel unit under ``strategy`` (STRATEGIES): Resource's
    must divide the layer (``valid_reuse_factors``, which the folding chooses from under either); Latency
    checks none (hls4ml's ``init_dense``/``init_conv*`` validate the reuse factor for the Resource strategy
    only): any from 1 to the layer's products."""
    if strategy == "Latency":
        return list(range(1, shape.n_in * shape.n_out + 1))
    if strategy in (DISTRIBUTED_ARITHMETIC, ENGINE):
        return [1]
    if strategy == XNOR_POPCOUNT:  # an output's inputs in whole iterations, or inputs in whole passes (its kernel's)
        return [rf for rf in valid_reuse_factors(shape.n_in, shape.n_out) if shape.n_in % rf == 0
                or rf % shape.n_in == 0]
    return valid_reuse_factors(shape.n_in, shape.n_out)


def estimate(shape: Shape, reuse_factor: int, width: int,
             ddr_bytes_per_cycle: Optional[float] = None, strategy: Optional[str] = None,
             dsp_binding: tuple[int, int] = (DSP_MIN_WIDTH, DSP_MIN_CONSTANT_BITS),
             products_registered: Optional[bool] = None) -> dict[str, int]:
    """DSP, BRAM18, LUT, FF and latency in cycles of a unit (see the module doc), and the latency's
    parts: ``compute_cycles`` (its arithmetic, DDR weights' reads within: a vector waits for its
    weights), ``buffer_cycles`` (moving its inputs and outputs through the subfunction's word-wide
    arena, ARENA_PORTS words a cycle) and ``ddr_cycles`` (what the DDR weights' reads add to the
    arithmetic). An io_parallel unit reads, computes and writes in turn, as does a streamed one of one
    vector; a streamed one of several overlaps the three (dataflow). ``ddr_bytes_per_cycle``: the unit's
    weights are in DDR, read at this rate; None: on chip. ``strategy``: hls4ml's Strategy (STRATEGIES;
    None: ``strategy_for`` the reuse factor). ``dsp_binding``: the least data bits and constant weight bits
    a product takes a DSP at (below either, LUTs). ``products_registered``: the HLS tool cuts a Latency
    layer's pipeline after its products (Vivado HLS's designs); False: within its adder tree only, each
    sum's partial sums after the levels a cycle holds (Vitis HLS's, at a fraction of the FFs); None: as the
    unit's ``Shape.hls_tool`` does."""
    if products_registered is None:
        products_registered = shape.hls_tool == VIVADO_HLS
    if strategy == ENGINE:
        return engine_estimate(shape, width, ddr_bytes_per_cycle)
    kind = kind_of(shape)
    own = kind.arithmetic(shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered)
    dsp = bram18 = lut = ff = 0
    for part in _resource_parts(shape, kind, own, width).values():
        dsp, bram18, lut, ff = dsp + part[0], bram18 + part[1], lut + part[2], ff + part[3]
    cycles, ddr = own.cycles, own.ddr
    if shape.streamed:  # a cycle a FIFO between its layers (each a dataflow process; its padding layer one)
        cycles += shape.layers - 1 + shape.padded
    cycles += shape.table_layers  # each table's read registered (the BRAM's output register)
    if shape.softmax:
        cycles += pipeline_cycles(SOFTMAX_REFERENCE_CYCLES, shape.clock_mhz)
    read = 0 if kind.reads_are_its_work else arena_words(shape.input_values, width)
    moved = -(-(read + arena_words(kind.moved_out(shape), width)) // ARENA_PORTS)
    # a stream overlaps the moves of one vector with the arithmetic of another: one vector (a dense layer's) waits
    latency = max(cycles, moved) if shape.streamed and shape.vectors > 1 else cycles + moved
    if shape.bands > 1:  # the top copies each band in and out around its run, and the unit runs once a band
        in_rows, in_values, out_rows, out_values = shape.band_rows
        copies = band_copy_cycles(in_rows, in_values, width, False) + \
            band_copy_cycles(out_rows, out_values, width, True)
        cycles, ddr, latency = cycles * shape.bands, ddr * shape.bands, (latency + copies) * shape.bands
    return {"dsp": dsp, "bram18": bram18, "lut": lut, "ff": ff, "latency_cycles": latency, "compute_cycles": cycles,
            "buffer_cycles": latency - cycles, "ddr_cycles": ddr}


def _resource_parts(shape: Shape, kind: UnitKind, own: Arithmetic, width: int) -> dict[str, tuple[int, int, int, int]]:
    """(DSP, BRAM18, LUT, FF) of each part of a unit (RESOURCE_PARTS; ``own``: its kind's arithmetic), whose sum
    is its estimate."""
    parts = {"arithmetic": (own.dsp, own.bram18, own.lut, own.ff),
             "control": (0, 0, UNIT_CONTROL_LUT, UNIT_CONTROL_FF)}
    if shape.streamed:
        # hls4ml's io_stream layers copy each window (nnet_conv_stream.h's kernel_data: k x k x channels; a dense
        # layer's input word) and each output word (``registers_output``) into completely partitioned arrays
        held = shape.n_out * kind.registers_output(shape) + shape.window_values
        parts["window registers"] = (0, 0, 0, held * width)
        # (k - 1) rows of the input: nnet_conv_stream.h's ap_shift_reg line_buffer (hls4ml 1.3: line 217), which
        # Vivado builds from 32-bit shift-register LUTs (SRLC32E), not BRAM
        parts["line buffers"] = (0, 0, math.ceil(shape.line_buffer_values * width / 32), 0)
        # the streams between its layers, each as deep as the map's pixels (hls4ml 1.3's StreamVariable,
        # backends/fpga/fpga_types.py line 364: depth = values / channels) and a pixel's channels wide
        parts["FIFOs"] = (0, fifo_bram18(streams(shape), width), 0, 0)
    elif kind.holds_its_input:  # an io_parallel hls4ml unit holds its input vector in registers
        parts["input registers"] = (0, 0, 0, shape.input_values * width)
    if shape.table_layers or shape.softmax:
        # hls4ml pipelines its table layers at a vector a cycle whatever the reuse factor, each table read
        # once per value: copied until the reads fit the copies' two ports
        table = bram18_blocks(shape.table_entries, LOOKUP_TABLE_BITS)
        copies = math.ceil(shape.n_out / 2)
        bram18, dsp = shape.table_layers * copies * table, 0
        lookups = shape.table_layers * shape.n_out
        # each read registered, and the input beside it where the output may be the input
        ff = (shape.table_layers + shape.table_selects) * shape.n_out * width
        if shape.softmax:  # the exponential's copies and the inverse's one; a product an output
            bram18 += (copies + 1) * table * (VITIS_SOFTMAX_TABLE_BRAM18 if shape.hls_tool == VITIS_HLS else 1)
            lookups += shape.n_out + 1
            dsp += shape.n_out
        parts["lookup tables"] = (dsp, bram18, lookups * TABLE_INDEX_LUT_PER_BIT * width, ff)
    return parts


def resource_parts(shape: Shape, folding: Folding, width: int,
                   ddr_bytes_per_cycle: Optional[float]) -> dict[str, dict[str, int]]:
    """A unit's estimated resources (``folded_estimate``'s) by part, in RESOURCE_PARTS' order, each part's non-zero
    resources: what its arithmetic takes (products, adders, weights), its control, the registers that hold its
    window and output word (streamed) or its input (io_parallel), its line buffers, the FIFOs between its layers
    and its lookup tables. Empty for a unit on the engine (the engine's resources are counted once)."""
    if folding.hls_strategy == ENGINE:
        return {}
    shape, reuse_factor, ddr_bytes_per_cycle = _folded(shape, folding, ddr_bytes_per_cycle)
    own = kind_of(shape).arithmetic(shape, reuse_factor, width, ddr_bytes_per_cycle, folding.hls_strategy,
                                    (DSP_MIN_WIDTH, DSP_MIN_CONSTANT_BITS), shape.hls_tool == VIVADO_HLS)
    parts = _resource_parts(shape, kind_of(shape), own, width)
    return {name: {k: v for k, v in zip(RESOURCES, parts[name]) if v} for name in RESOURCE_PARTS
            if any(parts.get(name, ()))}


def tokens_of(shape: Sequence[int]) -> tuple[int, int]:
    """A tensor of ``shape`` as a dataflow's FIFO carries it: its tokens (a map's pixels; a flat tensor is one) and
    each token's values (a pixel's channels)."""
    tokens = math.prod(shape[2:]) if len(shape) > 2 else 1
    return tokens, math.prod(shape) // tokens


def token_words(values: int, lane_bytes: int) -> int:
    """The words a token of ``values`` lanes of ``lane_bytes`` takes (its values from the first)."""
    return -(-values * lane_bytes // ARENA_WORD_BYTES)


def dataflow_processes(graph: Graph, sub: Subfunction, clock_mhz: float, hls_tool: str = VITIS_HLS,
                       lane_bytes: int = 2) -> list[Process]:
    """The execution units of FPGA subfunction ``sub`` as concurrent processes of a dataflow (planning/dataflow.py),
    linked by a FIFO for each tensor a unit reads: each unit as its kind runs it (``UnitKind.dataflow_ops``, at its
    folding and its estimate's compute cycles), a token a pixel of a map (a flat tensor: one; ``tokens_of``) of
    values ``lane_bytes`` each, the subfunction's inputs written by a process "input" and its outputs read by
    "output". DataflowError for a unit that runs in bands or on the engine (no dataflow process: it reads its input
    whole from memory)."""
    shapes = _tensor_shapes(graph)

    def tokens(tensor: str) -> int:
        return tokens_of(shapes.get(tensor) or [1])[0]

    def words(tensor: str) -> int:
        return token_words(tokens_of(shapes.get(tensor) or [1])[1], lane_bytes)

    fifos: dict[str, list[str]] = {}
    for u in sub.execution_units:
        for t in u.inputs:
            fifos.setdefault(t, []).append(fifo_name(t, u.name))
    for t in sub.outputs:
        fifos.setdefault(t, []).append(fifo_name(t, "output"))
    written = {t for u in sub.execution_units for t in u.outputs}
    processes = []
    for u in sub.execution_units:
        if u.band is not None or u.engine is not None:
            raise DataflowError(f"unit '{u.name}' runs {'in bands' if u.band else 'on the engine'}: it reads its "
                                f"input whole from memory, no dataflow process")
        shape = _planned_shape(graph, u, clock_mhz, hls_tool)
        ops = kind_of(shape).dataflow_ops(shape, u.reuse_factor, u.estimate["compute_cycles"],
                                          [(fifo_name(t, u.name), tokens(t), words(t)) for t in u.inputs],
                                          fifos.get(u.outputs[0], []), tokens(u.outputs[0]), words(u.outputs[0]))
        processes.append(Process(u.name, ops))
    # "input" converts each float port's sample into a buffer (a word of its floats a cycle, ``port_cycles``), then
    # copies its tokens out of it, a word a cycle (as the top's buffered ops do: ``dataflow.whole_ops``), or
    # assembles a codes port's tokens as its words come (``code_token_gaps``); the tokens spread over a sample each
    # slowest unit's interval (the units' back-pressure paces it so)
    cycles_of = port_cycles(graph, sub, lane_bytes)
    ports = [t for t in dict.fromkeys(sub.inputs) if t in fifos and t not in written]
    gaps = {t: _input_token_gaps(t, sub, cycles_of, shapes, lane_bytes) for t in ports}
    sources = [(t, k) for t in ports for k in range(tokens(t))]
    own = sum(sum(g) for g in gaps.values())
    pace = max([p.interval for p in processes] + [own])
    spread = (pace - own) // max(1, len(sources))
    given = []
    for n, (t, k) in enumerate(sources):
        gap = gaps[t][k] + spread + ((pace - own) % max(1, len(sources)) if n == 0 else 0)
        given += [Op(f, True, gap if j == 0 else 0) for j, f in enumerate(fifos[t])]
    return [Process("input", tuple(given)), *processes, _output_process(sub, cycles_of, shapes, lane_bytes)]


def _output_process(sub: Subfunction, cycles: Mapping[str, int], shapes: Mapping[str, list[int]],
                    lane_bytes: int) -> Process:
    """The dataflow's "output" process: it copies each output's tokens into a buffer, a word a cycle, then
    converts the sample to the float ports (``cycles``, ``port_cycles``')."""
    outputs = list(dict.fromkeys(sub.outputs))
    taken = []
    for t in outputs:
        tokens, values = tokens_of(shapes.get(t) or [1])
        taken += [Op(fifo_name(t, "output"), False, token_words(values, lane_bytes))] * tokens
    return Process("output", tuple(taken), tail=sum(cycles[t] for t in outputs))


def _input_token_gaps(tensor: str, sub: Subfunction, cycles: Mapping[str, int], shapes: Mapping[str, list[int]],
                      lane_bytes: int) -> list[int]:
    """The cycles the dataflow's input process takes before each token of ``sub``'s input ``tensor``: a float
    port's sample converted first (``cycles``, ``port_cycles``'), then its tokens copied out a word a cycle; a
    codes port's tokens assembled as its words come (``code_token_gaps``)."""
    tokens, values = tokens_of(shapes.get(tensor) or [1])
    if tensor in sub.input_codes:
        return code_token_gaps(tokens, values, sub.input_codes[tensor].bits)
    words = token_words(values, lane_bytes)
    return [cycles[tensor] + words] + [words] * (tokens - 1)


def code_token_gaps(tokens: int, values: int, bits: int) -> list[int]:
    """The cycles before each of ``tokens`` tokens of ``values`` values a codes port's sample gives, its 64-bit
    words read one a cycle (64 // ``bits`` codes each) and each token written as its last code comes, at most one
    a cycle (hls/dataflow.cpp.in's codes_tokens)."""
    per_word = CODE_WORD_BITS // bits
    gaps, at = [], 0
    for k in range(tokens):
        whole = ((k + 1) * values - 1) // per_word + 1  # the words read when token k is whole
        gaps.append(max(1, whole - at))
        at += gaps[-1]
    return gaps


def port_cycles(graph: Graph, sub: Subfunction, lane_bytes: int = 2) -> dict[str, int]:
    """Each port of an FPGA subfunction (a tensor it takes from or gives to the host): the cycles the top's loop
    converting a sample of it into or out of a buffer of ``lane_bytes`` lanes takes. A float port moves its floats
    ``Subfunction.floats_a_word`` at a time (``port_floats``; else one), a word a cycle (hls/arena.h's
    from_float_words and to_float_words); a zero-compressed port a value a cycle (from_zero_compressed and
    to_zero_compressed: compressing saves the link's bytes, not these cycles, its m_axi reads and writes 32 bits
    wide). A port of an input quantizer's codes (``Subfunction.input_codes``) reads a 64-bit word of codes a cycle
    and writes the buffer a word a cycle (from_codes). These cycles, not the link's bandwidth, bound how fast a
    sample gets in and out."""
    shapes = _tensor_shapes(graph)
    cycles = {}
    for t in (*sub.outputs, *sub.inputs):
        values = math.prod(shapes.get(t) or [1])
        codes = sub.input_codes.get(t)
        cycles[t] = -(-values // sub.floats_a_word.get(t, 1)) if codes is None else \
            max(-(-values * codes.bits // CODE_WORD_BITS), token_words(values, lane_bytes))
    return cycles


# The most floats a word of an FPGA top's float port holds: a 128-bit word, a Zynq UltraScale+ HP port's width
# (UG1085)
FLOAT_PORT_MAX_FLOATS = 4


def port_floats(values: int, bytes_per_cycle: float) -> int:
    """The floats a word of an FPGA top's float port of ``values`` values a sample holds (hls/arena.h's
    from_float_words and to_float_words): a power of two, at most FLOAT_PORT_MAX_FLOATS and what the board's DDR
    port delivers a cycle (``ddr_bytes_per_cycle``: four at 16 bytes, a Zynq UltraScale+ HP port at 200 MHz; two at
    the PYNQ-Z2's 12), that divides ``values``, so that every sample of a batch, which the host lays one after
    another, begins a word."""
    floats = 1
    while 2 * floats <= FLOAT_PORT_MAX_FLOATS and 8 * floats <= bytes_per_cycle and values % (2 * floats) == 0:
        floats *= 2
    return floats


def port_interval(graph: Graph, sub: Subfunction, lane_bytes: int = 2) -> int:
    """The least cycles between samples a dataflow of FPGA subfunction ``sub`` can have for its ports: its input
    process converts every float input's values, a word of them a cycle, and copies out their tokens, a word a cycle,
    and assembles a codes input's tokens as its words come; its output process copies in the outputs' tokens and
    converts their values (``dataflow_processes``)."""
    cycles, shapes = port_cycles(graph, sub, lane_bytes), _tensor_shapes(graph)
    taken = sum(sum(_input_token_gaps(t, sub, cycles, shapes, lane_bytes)) for t in dict.fromkeys(sub.inputs))
    return max(taken, _output_process(sub, cycles, shapes, lane_bytes).interval)


# the estimate's cycles of a unit as a dataflow's process takes them a sample: its compute (it moves no buffer of the
# top's; its tokens in and out are a cycle each, or a word a cycle for the top's own ops)
DATAFLOW_MEASURE = "compute_cycles"
# samples the dataflow's free schedule and its check run: the steady state is reached by the second, the rest see
# that each sample keeps to it
DATAFLOW_SAMPLES = 6


@dataclass(frozen=True)
class DataflowTop:
    """A subfunction's units as a dataflow (``dataflow_top``): a sample's cycles alone and between samples in a
    stream, its FIFOs, the BRAM18s they and its buffered processes' copies take, and the LUTs and FFs of the FIFOs
    too small for BRAM."""

    latency_cycles: int
    interval_cycles: int
    fifos: list[Fifo]
    bram18: int
    lut: int
    ff: int


def dataflow_top(graph: Graph, sub: Subfunction, clock_mhz: float, hls_tool: str = VITIS_HLS,
                 lane_bytes: int = 2) -> DataflowTop:
    """FPGA subfunction ``sub``'s units as a dataflow: its processes' free schedule at the slowest's interval, each
    FIFO as deep as it holds there, checked by simulating those depths (DataflowError: no process for a unit, or
    a deadlock or stall naming the FIFO). Its memory: each FIFO (a token ``token_words`` wide; in BRAM18s, or
    shift-register LUTs, or registers), and each copy of a buffer that the input and output processes and the top's
    own ops hold, but for those a token at a time, and a codes input's, whose tokens come straight from the port
    (hls/dataflow_top.cpp.in)."""
    processes = dataflow_processes(graph, sub, clock_mhz, hls_tool, lane_bytes)
    schedule = free_schedule(processes, DATAFLOW_SAMPLES)
    depths = fifo_depths(schedule)
    problem = check(processes, depths, DATAFLOW_SAMPLES)
    if problem:
        raise DataflowError(problem)
    shapes = _tensor_shapes(graph)
    writer = {op.fifo: p.name for p in processes for op in p.ops if op.write}
    fifos = []
    for fifo, depth in depths.items():
        tensor, reader = fifo.rsplit(">", 1)
        bits = token_words(tokens_of(shapes[tensor])[1], lane_bytes) * 8 * ARENA_WORD_BYTES
        blocks = bram18_blocks(depth, bits)
        # under BRAM: Vivado's shift-register LUTs (SRLC32E, a bit 32 deep each), or registers two deep or less
        lut, ff = (0, 0) if blocks else (0, depth * bits) if depth <= 2 else (bits * -(-depth // 32), 0)
        fifos.append(Fifo(fifo, tensor, writer[fifo], reader, depth, bits, blocks, lut, ff))
    buffered = [u for u in sub.execution_units if not u.io_type and not kind_of(
        shape := _planned_shape(graph, u, clock_mhz, hls_tool)).per_token(shape)]
    copied = [t for u in buffered for t in (*u.inputs, *u.outputs)]
    copied += [t for t in dict.fromkeys(sub.inputs) if t not in sub.input_codes] + list(sub.outputs)
    copies = sum(bram18_blocks(-(-math.prod(shapes[t]) * lane_bytes // ARENA_WORD_BYTES), 8 * ARENA_WORD_BYTES)
                 for t in copied)
    # the schedule's latency is from the first token on: before that, "input" converts its first float port's
    # sample and copies out its first token, or reads a codes port's words up to its first token's last code
    cycles = port_cycles(graph, sub, lane_bytes)
    lead = next((_input_token_gaps(t, sub, cycles, shapes, lane_bytes)[0] for t in sub.inputs), 0)
    return DataflowTop(schedule.latency + lead, schedule.interval, fifos, sum(f.bram18 for f in fifos) + copies,
                       sum(f.lut for f in fifos), sum(f.ff for f in fifos))


def _tensor_shapes(graph: Graph) -> dict[str, list[int]]:
    """Every tensor of ``graph``: its shape, as the first node that meets it has it."""
    shapes: dict[str, list[int]] = {}
    for n in graph.nodes:
        for t, shape in (*zip(n.inputs, n.input_shapes), *zip(n.outputs, n.output_shapes)):
            shapes.setdefault(t, shape)
    return shapes


def _planned_shape(graph: Graph, unit: ExecutionUnit, clock_mhz: float, hls_tool: str) -> Shape:
    """A plan's execution unit's shape, at its io type."""
    index = graph.node_index()
    found = Unit(unit.pe, [index[n] for n in unit.nodes], list(unit.inputs), unit.outputs[0])
    return unit_shape(graph, found, clock_mhz, unit.io_type or None, hls_tool)


def fifo_name(tensor: str, reader: str) -> str:
    """The dataflow's FIFO of ``tensor`` to ``reader`` (a unit, or "output")."""
    return f"{tensor}>{reader}"


def adds_residual(graph: Graph, unit: Unit, node: Node) -> bool:
    """Whether ``node``, after ``unit`` (a layer the engine computes, its BatchNormalizations after it and no
    activation yet), adds another map of the unit's output's shape to its output (a residual connection: ResNet's,
    MobileNetV2's, ShuffleNet's after a grouped convolution), which the engine adds as it writes its outputs."""
    last = graph.nodes[unit.nodes[-1]]
    return node.op == "Add" and len(node.inputs) == 2 and not node.constants and last.outputs[0] in node.inputs \
        and node.inputs[0] != node.inputs[1] and bool(node.output_shapes and node.output_shapes[0]) \
        and all(s == node.output_shapes[0] for s in node.input_shapes) \
        and all(graph.nodes[k].op == "BatchNormalization" for k in unit.nodes[1:]) \
        and engine_refusal(graph, unit) is None


def residual_input(graph: Graph, unit: Unit) -> Optional[str]:
    """The map an Add of ``unit`` adds to its layer's output (``adds_residual``: the unit's last input, which may be
    its layer's input too); None: none."""
    for before, k in zip(unit.nodes, unit.nodes[1:]):
        node = graph.nodes[k]
        if node.op == "Add" and len(node.inputs) == 2:
            return next((t for t in node.inputs if t != graph.nodes[before].outputs[0]), None)
    return None


def engine_refusal(graph: Graph, unit: Unit) -> Optional[str]:
    """Why ``unit`` cannot run on the engine; None: it can. The engine computes a Conv (1-D or 2-D, of any groups),
    a Gemm or a MatMul of a flat input, each BatchNormalization after it folded into its weights, then an Add of
    another map (``adds_residual``), then a ReLU or a Clip."""
    main, *after = (graph.nodes[i] for i in unit.nodes)
    if main.op not in LAYER_ENGINE_OPS:
        return f"the engine computes a {', '.join(LAYER_ENGINE_OPS)}, not {main.op}"
    if main.op == "Conv" and len(main.input_shapes[0]) not in (3, 4):
        return "the engine computes 1-D and 2-D convolutions"
    if main.op != "Conv" and len(main.input_shapes[0]) != 2:
        return f"the engine computes a {main.op} of a flat (N, C) input"
    if residual_input(graph, unit) is not None:  # its Add, fused only where adds_residual said so
        after = [n for n in after if n.op != "Add"]
    ops = [n.op for n in after]
    if any(op not in ENGINE_FUSED_OPS or op in ENGINE_ACTIVATIONS and k < len(ops) - 1 for k, op in enumerate(ops)):
        unfused = next(op for k, op in enumerate(ops)
                       if op not in ENGINE_FUSED_OPS or op in ENGINE_ACTIVATIONS and k < len(ops) - 1)
        return (f"its unit goes on with {unfused}; the engine folds in BatchNormalizations and ends with a ReLU or a "
                f"Clip only")
    return None


def registers_output(shape: Shape) -> bool:
    """Whether a streamed unit holds its output word in registers (its kind says: all but an activation without a
    table)."""
    return kind_of(shape).registers_output(shape)


def candidate_reuse_factors(shape: Shape, width: int) -> list[int]:
    return kind_of(shape).reuse_factors(shape, width)


def folding_options(shape: Shape, width: int, ddr_bytes_per_cycle: Optional[float] = None,
                    strategy: Optional[str] = None) -> list[Folding]:
    """A unit's foldings, least folded first: every reuse factor with the weights on chip, then (for a
    multiply-accumulate unit, given the DDR rate, under no strategy or Resource) the weights in DDR at the
    least reuse factor that the DDR keeps busy. ``strategy``: the unit's (STRATEGIES); None: by the reuse
    factor (``strategy_for``); a unit hls4ml computes only under Latency (``Shape.latency_only``): Latency, unless on
    the engine."""
    if strategy == ENGINE:
        return [Folding(1, True, strategy)]
    strategy = "Latency" if shape.latency_only else strategy
    if strategy == DISTRIBUTED_ARITHMETIC:
        return [Folding(1, False, strategy)]
    if strategy == XNOR_POPCOUNT:  # its weights on chip
        return [Folding(rf, False, strategy) for rf in reuse_factors_for(shape, strategy)]
    options = [Folding(rf, False, strategy) for rf in candidate_reuse_factors(shape, width)]
    if kind_of(shape).foldable and ddr_bytes_per_cycle is not None and strategy != "Latency":
        options.append(ddr_folding(shape, width, ddr_bytes_per_cycle))
    return options


def ddr_folding(shape: Shape, width: int, ddr_bytes_per_cycle: float) -> Folding:
    """A multiply-accumulate unit with its weights in DDR, at the least reuse factor that the DDR keeps busy."""
    rate = ddr_cycles_per_vector(shape, width, ddr_bytes_per_cycle)
    valid = candidate_reuse_factors(shape, width)
    return Folding(next((rf for rf in valid if rf >= rate), valid[-1]), True)


def folded_estimate(shape: Shape, folding: Folding, width: int, ddr_bytes_per_cycle: Optional[float],
                    dsp_binding: tuple[int, int] = (DSP_MIN_WIDTH, DSP_MIN_CONSTANT_BITS),
                    products_registered: Optional[bool] = None) -> dict[str, int]:
    """``estimate`` of ``shape`` folded as ``folding``, under its io type (a copy: the caller's to change)."""
    return dict(_folded_estimate(shape, folding, width, ddr_bytes_per_cycle, dsp_binding, products_registered))


# The partitioner folds the same units again for each cut it weighs (DenseNet-121's 120 convolutions some 260 times a
# plan): an estimate is a pure function of its arguments, computed once.
@functools.lru_cache(maxsize=1 << 16)
def _folded_estimate(shape: Shape, folding: Folding, width: int, ddr_bytes_per_cycle: Optional[float],
                     dsp_binding: tuple[int, int], products_registered: Optional[bool]) -> dict[str, int]:
    shape, reuse_factor, ddr_bytes_per_cycle = _folded(shape, folding, ddr_bytes_per_cycle)
    return estimate(shape, reuse_factor, width, ddr_bytes_per_cycle, strategy=folding.hls_strategy,
                    dsp_binding=dsp_binding, products_registered=products_registered)


def _folded(shape: Shape, folding: Folding, ddr_bytes_per_cycle: Optional[float]) -> tuple[Shape, int, Optional[float]]:
    """``estimate``'s shape, reuse factor and DDR rate of ``shape`` folded as ``folding``."""
    return (with_io_type(shape, folding.io_type), folding.reuse_factor,
            ddr_bytes_per_cycle if folding.weights_in_ddr else None)


def estimate_range(shape: Shape, folding: Folding, width: int,
                   ddr_bytes_per_cycle: Optional[float]) -> dict[str, list[int]]:
    """What synthesis decides and the estimate cannot know: whether Vivado binds a product to a DSP or to LUTs
    near the rule's thresholds (DSP_MIN_WIDTH data bits, DSP_MIN_CONSTANT_BITS bits of a constant weight,
    set on published points, not read from the tool), and where the HLS tool cuts a Latency layer's pipeline
    (``estimate``'s ``products_registered``: the same jet tagger MLP at reuse factor 1 took 26,905 to 102,521 FF
    under Vivado HLS 2019.2 and 9,363 under Vitis HLS 2024.1, benchmarks/published_synthesis.csv). Each resource
    whose estimate moves when either threshold moves one bit either way, or with the cut, as [least, most]; the
    others are not listed. The LUTs (the HLS report's, as the estimate counts them) reach down to what Vivado's
    synthesis keeps of them (``synthesized_lut``)."""
    variants = [folded_estimate(shape, folding, width, ddr_bytes_per_cycle,
                                (DSP_MIN_WIDTH + w, DSP_MIN_CONSTANT_BITS + c), registered)
                for w in (-1, 0, 1) for c in (-1, 0, 1) for registered in (True, False)]
    ranges = {k: [min(v[k] for v in variants), max(v[k] for v in variants)] for k in RESOURCES}
    ranges["lut"][0] = synthesized_lut(ranges["lut"][0])
    return {k: low_high for k, low_high in ranges.items() if low_high[0] != low_high[1]}


def synthesized_lut(hls_lut: int) -> int:
    """The LUTs Vivado's synthesis keeps of ``hls_lut`` that the HLS report counts (SYNTHESIS_LUT_SHARE)."""
    return round(hls_lut * SYNTHESIS_LUT_SHARE)


def fold_for_rate(shapes: Sequence[Shape], budget: dict[str, int], width: int | Sequence[int],
                  groups: Sequence[Sequence[int]], cycles: Sequence[float],
                  pinned: Optional[dict[int, Folding]] = None, ddr_bytes_per_cycle: Optional[float] = None,
                  strategies: Optional[dict[int, str]] = None, distributed_arithmetic: bool = False,
                  io_fixed: Collection[int] = (), measure: str = "latency_cycles") -> Optional[list[Folding]]:
    """``_fold_for_rate_under`` the strategies the user pinned (the others by reuse factor), then each unit's
    strategy and io type ``by_cost`` (``distributed_arithmetic`` and ``io_fixed`` as there): the least cycles over
    each group's rate, then the least share of the budget (the fewest resources, as FINN's target_fps asks, BRAM
    counted in its share). ``measure``: the estimate's cycles a unit takes a sample (its latency, one after
    another; its compute, in a dataflow, where it moves no buffer of the top's)."""
    widths = _per_unit(width, shapes)
    unit_estimate = _unit_estimates(shapes, widths, ddr_bytes_per_cycle)
    foldings = _fold_for_rate_under(shapes, budget, widths, groups, cycles, unit_estimate, pinned, strategies,
                                    measure)
    if foldings is None:
        return None

    def missed_then_share(used: Sequence[dict[str, int]]) -> tuple[float, float]:
        missed = sum(max(0.0, sum(used[u][measure] for u in group) - allowed)
                     for group, allowed in zip(groups, cycles))
        return missed, budget_share(used, budget)

    foldings = by_cost(foldings, shapes, widths, budget, unit_estimate, missed_then_share,
                       set(strategies or {}) | set(pinned or {}), ddr_bytes_per_cycle, distributed_arithmetic, io_fixed)
    if measure == DATAFLOW_MEASURE:  # fold_for_interval's trials: its bisection finds the least interval
        return foldings
    return _unfolded_for_rate(foldings, shapes, widths, budget, groups, cycles, unit_estimate, set(pinned or {}),
                              ddr_bytes_per_cycle, measure)


def _unfolded_for_rate(foldings: list[Folding], shapes: Sequence[Shape], widths: Sequence[int],
                       budget: dict[str, int], groups: Sequence[Sequence[int]], cycles: Sequence[float],
                       unit_estimate: Callable[[int, Folding], dict[str, int]], pinned: Collection[int],
                       ddr_bytes_per_cycle: Optional[float], measure: str) -> list[Folding]:
    """``foldings`` (``by_cost``'s) with, while a group misses its cycles, the unit of it whose one step less folded
    under its own strategy and io type saves the most cycles per share of the budget it adds and still fits, so
    unfolded: the strategies by_cost chose may free what the greedy's held (Resource's LUTs for Latency's), which
    another unit's step then takes. The units not ``pinned``."""
    foldings = list(foldings)
    used = [unit_estimate(u, f) for u, f in enumerate(foldings)]

    def less_folded(u: int) -> Optional[Folding]:
        options = [o._replace(io_type=foldings[u].io_type)
                   for o in folding_options(shapes[u], widths[u], ddr_bytes_per_cycle, foldings[u].strategy)]
        k = options.index(foldings[u]) if foldings[u] in options else 0
        return options[k - 1] if k > 0 and hls4ml_builds(shapes[u], options[k - 1]) else None

    for group, allowed in zip(groups, cycles):
        while sum(used[u][measure] for u in group) > allowed:
            steps = ((u, step) for u in group if u not in pinned and foldings[u].strategy != ENGINE
                     for step in [less_folded(u)] if step is not None)
            best = _gainful_step(((u, step, unit_estimate(u, step)) for u, step in steps), used, budget, measure)
            if best is None:
                break
            u, foldings[u], used[u] = best
    return foldings


def _gainful_step(candidates: Iterable[tuple[int, Any, dict[str, int]]], used: Sequence[dict[str, int]],
                  budget: dict[str, int], measure: str) -> Optional[tuple[int, Any, dict[str, int]]]:
    """Of ``candidates`` (a unit, a step less folded, the step's estimate), the first of those that save the most
    ``measure`` cycles per share of ``budget`` they add to the unit's estimate in ``used`` and still fit beside the
    other units; None where none saves a cycle and fits."""
    totals = {k: sum(e[k] for e in used) for k in RESOURCES}
    best, best_gain = None, 0.0
    for u, step, trial in candidates:
        if any(totals[k] - used[u][k] + trial[k] > budget.get(k, 0) for k in RESOURCES):
            continue  # the chip holds no less folded a unit
        saved = used[u][measure] - trial[measure]
        gain = saved / max(_share_added(used[u], trial, budget), 1e-9)
        if saved > 0 and gain > best_gain:
            best, best_gain = (u, step, trial), gain
    return best


def fold_for_interval(shapes: Sequence[Shape], budget: dict[str, int], width: int | Sequence[int],
                      pinned: Optional[dict[int, Folding]] = None, ddr_bytes_per_cycle: Optional[float] = None,
                      strategies: Optional[dict[int, str]] = None, distributed_arithmetic: bool = False,
                      io_fixed: Collection[int] = (), floors: Sequence[int] = ()) -> Optional[list[Folding]]:
    """Foldings for units that run as a dataflow, each its own process: the fewest resources (``fold_for_rate``,
    each unit a group of its own) that reach the least interval, its slowest unit's cycles, the budget lets them
    all reach, found by bisection over that interval (FINN's folding to a target rate, balanced: no unit faster
    than the slowest needs), or ``fold``'s least-latency folding where its slowest unit is faster or the most
    folded design does not fit (``fold``'s units then ``_slowed_to`` its interval); None when neither fits.
    ``floors``: per unit, an interval its dataflow cannot beat anyway (its float ports', ``port_interval``), which no
    unit of it need be faster than."""
    widths = _per_unit(width, shapes)
    alone = [[u] for u in range(len(shapes))]
    floors = list(floors) or [0] * len(shapes)

    def folded(cycles: float) -> Optional[list[Folding]]:
        return fold_for_rate(shapes, budget, widths, alone, [max(cycles, f) for f in floors], pinned,
                             ddr_bytes_per_cycle, strategies, distributed_arithmetic, io_fixed, DATAFLOW_MEASURE)

    def slowest(foldings: list[Folding]) -> int:  # the interval they give, at least the floors
        return max((max(folded_estimate(s, f, w, ddr_bytes_per_cycle)[DATAFLOW_MEASURE], floor)
                    for s, f, w, floor in zip(shapes, foldings, widths, floors)), default=0)

    def reaches(foldings: list[Folding], cycles: int) -> bool:
        return all(folded_estimate(s, f, w, ddr_bytes_per_cycle)[DATAFLOW_MEASURE] <= max(cycles, floor)
                   for s, f, w, floor in zip(shapes, foldings, widths, floors))

    best = folded(math.inf)
    low, high = 0, slowest(best) if best is not None else 0
    while low < high:
        middle = (low + high) // 2
        foldings = folded(middle)
        if foldings is not None and reaches(foldings, middle):
            best, high = foldings, middle
        else:
            low = middle + 1
    # the greedy steps through reuse factors under the strategies they imply; the least-latency folding may reach
    # a shorter interval with other strategies or io types, or fit where the most folded design does not (a unit's
    # BRAM18s more at a larger reuse factor: its banks' shapes)
    fastest = fold(shapes, budget, widths, pinned, ddr_bytes_per_cycle, strategies, distributed_arithmetic, io_fixed)
    if fastest is None or best is not None and slowest(fastest) >= slowest(best):
        return best
    # ``fold``'s least latency leaves the units it need not slow as fast as the budget let them be
    return _slowed_to(shapes, fastest, widths, slowest(fastest), budget, ddr_bytes_per_cycle, set(pinned or {}))


def _slowed_to(shapes: Sequence[Shape], foldings: list[Folding], widths: Sequence[int], cycles: int,
               budget: dict[str, int], ddr_bytes_per_cycle: Optional[float], fixed: Collection[int]) -> list[Folding]:
    """A dataflow's units, one after another but the ``fixed``, each at its folding under its strategy, io type and
    weights' place that takes the least share of ``budget`` within ``cycles`` a sample, the units together within
    ``budget``: a process faster than its dataflow's interval holds resources for nothing."""
    foldings = list(foldings)
    used = [folded_estimate(s, f, w, ddr_bytes_per_cycle) for s, f, w in zip(shapes, foldings, widths)]
    for u, (shape, folding, width) in enumerate(zip(shapes, foldings, widths)):
        if u in fixed:
            continue
        others = {k: sum(e[k] for e in used) - used[u][k] for k in RESOURCES}
        options = {o: folded_estimate(shape, o, width, ddr_bytes_per_cycle)
                   for o in (o._replace(io_type=folding.io_type)
                             for o in folding_options(shape, width, ddr_bytes_per_cycle, folding.strategy))
                   if o.weights_in_ddr == folding.weights_in_ddr}
        within = [o for o, e in options.items() if e[DATAFLOW_MEASURE] <= cycles
                  and all(others[k] + e[k] <= budget.get(k, 0) for k in RESOURCES)]
        foldings[u] = min(within, key=lambda o: budget_share([options[o]], budget), default=folding)
        used[u] = options.get(foldings[u], used[u])
    return foldings


def fold(shapes: Sequence[Shape], budget: dict[str, int], width: int | Sequence[int],
         pinned: Optional[dict[int, Folding]] = None, ddr_bytes_per_cycle: Optional[float] = None,
         strategies: Optional[dict[int, str]] = None, distributed_arithmetic: bool = False,
         io_fixed: Collection[int] = (), engine: Mapping[int, Shape] = {}) -> Optional[list[Folding]]:
    """``_fold_under`` the strategies the user pinned (the others by reuse factor), then each unit's
    strategy and io type ``by_cost`` (the least total latency, then the fewest BRAM18 (``_units_bram18``), then
    the least share of the budget; ``distributed_arithmetic`` and ``io_fixed`` as there), then less folding
    wherever what that freed lets a unit unfold under its strategy and io type (``_give_back``). ``engine``: the
    units that may run on the engine (the budget is what it leaves), each its whole shape (the engine reads whole
    buffers: a unit in bands leaves them there): the engine is their most folded option."""
    widths = _per_unit(width, shapes)
    unit_estimate = _unit_estimates(shapes, widths, ddr_bytes_per_cycle, engine)
    strategies = strategies or {}
    foldings = _fold_under(shapes, budget, widths, unit_estimate, pinned, ddr_bytes_per_cycle, strategies,
                           [u for u in engine if u not in strategies and u not in (pinned or {})])
    if foldings is None:
        return None

    def latency_then_bram_then_share(used: Sequence[dict[str, int]]) -> tuple[float, ...]:
        return sum(e["latency_cycles"] for e in used), _units_bram18(used), budget_share(used, budget)

    pinned = pinned or {}
    foldings = by_cost(foldings, shapes, widths, budget, unit_estimate, latency_then_bram_then_share,
                       set(strategies or {}) | set(pinned), ddr_bytes_per_cycle, distributed_arithmetic, io_fixed)

    def cycles(u: int, folding: Folding) -> int:
        return unit_estimate(u, folding)["latency_cycles"]

    movable = [u for u in engine if u not in strategies and u not in pinned]
    for u in movable:  # the engine takes nothing of the budget: a unit it runs faster goes to it
        if cycles(u, ENGINE_FOLDING) < cycles(u, foldings[u]):
            foldings[u] = ENGINE_FOLDING
    # a unit on the engine unfolds back to hls4ml only to a faster folding, if that fits (``_give_back``); a
    # pinned unit keeps its folding as ``by_cost`` left it (the strategy and io type it chose where not pinned)
    options = [[f] if u in pinned else
               [o._replace(io_type=f.io_type) for o in folding_options(s, widths[u], ddr_bytes_per_cycle, f.strategy)]
               if f.strategy != ENGINE or u in strategies else
               [o for o in folding_options(s, widths[u], ddr_bytes_per_cycle) if cycles(u, o) < cycles(u, f)] + [f]
               for u, (s, f) in enumerate(zip(shapes, foldings))]
    # from these foldings, and from the most folded, every unit unfolding again (a unit the engine gave back may put
    # what another unit's earlier unfolding took to better use)
    starts = [[o.index(f) for o, f in zip(options, foldings)], [len(o) - 1 for o in options]]
    return _give_back(options, starts, budget, lambda u, k: unit_estimate(u, options[u][k]))


def takes_distributed_arithmetic(shape: Shape) -> bool:
    """Whether ``by_cost`` may weigh hls4ml's distributed_arithmetic for a unit: a multiply-accumulate unit whose
    weights are a quantizer's codes (da4ml builds each constant's shifts and adds from its exact code; float
    weights are not what it is for), which hls4ml 1.3 computes right under it (not a depthwise convolution) and
    whose solve takes at most about half a minute (DA_MAX_INPUTS, DA_MAX_PRODUCTS)."""
    return (kind_of(shape).foldable and shape.weight_bits is not None and not shape.latency_only
            and shape.n_in <= DA_MAX_INPUTS and shape.n_in * shape.n_out <= DA_MAX_PRODUCTS)


def takes_xnor_popcount(shape: Shape) -> bool:
    """Whether a unit may run under XNOR_POPCOUNT: a layer of signs (``Shape.bipolar``), a dense one or a streamed
    convolution (``hls4ml_builds``)."""
    return kind_of(shape).foldable and shape.bipolar and not shape.latency_only and \
        hls4ml_builds(shape, Folding(1, False, XNOR_POPCOUNT))


def by_cost(foldings: list[Folding], shapes: Sequence[Shape], widths: Sequence[int], budget: dict[str, int],
            unit_estimate: Callable[[int, Folding], dict[str, int]],
            cost: Callable[[Sequence[dict[str, int]]], tuple[float, ...]], fixed: set[int],
            ddr_bytes_per_cycle: Optional[float], distributed_arithmetic: bool = False,
            io_fixed: Collection[int] = ()) -> list[Folding]:
    """hls4ml's Strategy and IOType as folding choices: each multiply-accumulate unit whose strategy is not
    ``fixed`` (by the user, or a pinned folding), one after another, takes whichever of its foldings under Latency
    or under Resource (a folded unit), or under distributed_arithmetic (with ``distributed_arithmetic``, a unit
    that ``takes_distributed_arithmetic``, folded or not), each of them and its folding as it is under either io
    type (a unit that ``takes_either_io_type`` whose io type is not in ``io_fixed``, pinned by the user), gives all
    the units together the least ``cost`` (their estimates) within ``budget``, the other units as they are. A unit
    the folding leaves unfolded otherwise keeps its strategy: at reuse factor 1 Latency and Resource both keep the
    weights as constants. ``widths``: each unit's fixed-point bits."""
    used = [unit_estimate(u, f) for u, f in enumerate(foldings)]
    totals = {k: sum(e[k] for e in used) for k in RESOURCES}
    best = cost(used)
    for u, shape in enumerate(shapes):
        options: list[Folding] = []
        if kind_of(shape).foldable and u not in fixed:
            weighed = list(FOLDED_STRATEGIES) if foldings[u].reuse_factor > 1 else []
            if distributed_arithmetic and takes_distributed_arithmetic(shape):
                weighed.append(DISTRIBUTED_ARITHMETIC)
            if takes_xnor_popcount(shape):
                weighed.append(XNOR_POPCOUNT)
            # folding_options keeps a latency-only unit under Latency
            options = [o for strategy in weighed for o in folding_options(shape, widths[u], ddr_bytes_per_cycle,
                                                                          strategy)]
        # io_type None: the shape's own, the only one distributed_arithmetic takes (its convolutions are verified
        # streamed only, tests/test_open_synth.py); the engine has no hls4ml io type
        if u not in io_fixed and takes_either_io_type(shape) and foldings[u].strategy != ENGINE:
            options = [o._replace(io_type=None if io == IO_TYPES[shape.streamed] else io)
                       for o in [foldings[u], *options] for io in IO_TYPES
                       if o.strategy != DISTRIBUTED_ARITHMETIC or io == IO_TYPES[shape.streamed]]
        for option in (o for o in options if hls4ml_builds(shape, o)):
            trial = unit_estimate(u, option)
            if any(totals[k] - used[u][k] + trial[k] > budget.get(k, 0) for k in RESOURCES):
                continue
            trial_cost = cost(used[:u] + [trial] + used[u + 1:])
            if trial_cost < best:
                totals = {k: totals[k] - used[u][k] + trial[k] for k in RESOURCES}
                foldings = foldings[:u] + [option] + foldings[u + 1:]
                used, best = used[:u] + [trial] + used[u + 1:], trial_cost
    return foldings


def hls4ml_builds(shape: Shape, folding: Folding) -> bool:
    """Whether hls4ml 1.3 computes ``shape`` folded so: its io_parallel convolution under the Resource strategy
    (nnet_conv1d_resource.h and nnet_conv2d_resource.h) asserts a reuse factor of at most its window's products,
    filt_height x filt_width x n_chan (``Shape.n_in``), and aborts the C-simulation beyond; and it multiplies in
    loops of its own, not through the dense kernel the XNOR-popcount kernel stands in for (only its streamed
    convolutions call that kernel, a window at a time: nnet_conv_stream.h)."""
    parallel_window = bool(shape.input_map) and not with_io_type(shape, folding.io_type).streamed
    if folding.hls_strategy == XNOR_POPCOUNT:
        return not parallel_window
    return not (parallel_window and folding.hls_strategy == "Resource" and folding.reuse_factor > shape.n_in)


def _per_unit(width: int | Sequence[int], shapes: Sequence[Shape]) -> list[int]:
    """The fixed-point bits of each unit: ``width`` for every one, or each its own."""
    return [width] * len(shapes) if isinstance(width, int) else list(width)


def _unit_estimates(shapes: Sequence[Shape], widths: Sequence[int], ddr_bytes_per_cycle: Optional[float],
                    whole: Mapping[int, Shape] = {}) -> Callable[[int, Folding], dict[str, int]]:
    """``folded_estimate`` of unit u under a folding, each computed once (the folding's greedy steps and
    ``by_cost`` look at the same options again and again); on the engine, of its ``whole`` shape where given."""

    @functools.cache
    def unit_estimate(u: int, folding: Folding) -> dict[str, int]:
        shape = whole.get(u, shapes[u]) if folding.strategy == ENGINE else shapes[u]
        return folded_estimate(shape, folding, widths[u], ddr_bytes_per_cycle)

    return unit_estimate


def _units_bram18(used: Sequence[dict[str, int]]) -> int:
    """BRAM18 the units take together: what they leave holds the subfunctions' buffers (the memory plan
    comes after the folding), so at equal cycles the least-latency folding keeps weights out of BRAM."""
    return sum(e["bram18"] for e in used)


def budget_share(used: Sequence[dict[str, int]], budget: dict[str, int]) -> float:
    """The sum over resources of the share of ``budget`` the units take together."""
    return sum(sum(e[k] for e in used) / max(1, budget.get(k, 0)) for k in RESOURCES)


def _fold_for_rate_under(shapes: Sequence[Shape], budget: dict[str, int], widths: Sequence[int],
                         groups: Sequence[Sequence[int]], cycles: Sequence[float],
                         unit_estimate: Callable[[int, Folding], dict[str, int]],
                         pinned: Optional[dict[int, Folding]] = None,
                         strategies: Optional[dict[int, str]] = None,
                         measure: str = "latency_cycles") -> Optional[list[Folding]]:
    """Foldings, one per unit, with the fewest resources that let each group of units (an FPGA
    subfunction, whose units run one after another) take at most ``cycles[g]`` cycles a sample, as
    FINN's ``target_fps`` folds; None when even the most folded design does not fit ``budget``.
    A group that cannot reach its cycles within the budget ends as unfolded as the budget lets it
    (the caller says so).

    Greedy, from the most folded design (weights on chip): while a group takes more cycles than it
    may, unfold the unit of it whose next step saves the most cycles per share of the budget it adds
    and still fits the budget; then fold back, most resources freed first, what the rate lets fold.
    ``unit_estimate``: unit u's estimate under a folding (pinned ones with their weights in DDR at the
    FPGA's DDR rate); ``strategies`` as ``_fold_under``'s; ``measure`` as ``fold_for_rate``'s."""
    pinned = pinned or {}
    strategies = strategies or {}
    options = [[pinned[u]] if u in pinned else folding_options(s, widths[u], strategy=strategies.get(u))
               for u, s in enumerate(shapes)]

    def estimate_of(u: int, k: int) -> dict[str, int]:
        return unit_estimate(u, options[u][k])

    choice = [len(o) - 1 for o in options]
    current = [estimate_of(u, choice[u]) for u in range(len(shapes))]
    if any(sum(e[k] for e in current) > budget.get(k, 0) for k in RESOURCES):
        return None
    for group, allowed in zip(groups, cycles):
        while sum(current[u][measure] for u in group) > allowed:
            best = _gainful_step(((u, choice[u] - 1, estimate_of(u, choice[u] - 1)) for u in group if choice[u] > 0),
                                 current, budget, measure)
            if best is None:
                break
            u, choice[u], current[u] = best
        # The steps are coarse: fold back what the rate lets fold, the most resources freed first.
        while sum(current[u][measure] for u in group) <= allowed:
            took = sum(current[u][measure] for u in group)
            steps = []
            for u in (u for u in group if choice[u] + 1 < len(options[u])):
                more = estimate_of(u, choice[u] + 1)
                freed = _share_added(more, current[u], budget)
                if freed > 0 and took - current[u][measure] + more[measure] <= allowed:
                    steps.append((freed, -u, more))
            if not steps:
                break
            _, u, more = max(steps)
            choice[-u] += 1
            current[-u] = more
    return [o[c] for o, c in zip(options, choice)]


def _fold_under(shapes: Sequence[Shape], budget: dict[str, int], widths: Sequence[int],
                unit_estimate: Callable[[int, Folding], dict[str, int]],
                pinned: Optional[dict[int, Folding]] = None, ddr_bytes_per_cycle: Optional[float] = None,
                strategies: Optional[dict[int, str]] = None, engine: Collection[int] = ()) -> Optional[list[Folding]]:
    """Foldings, one per unit, with the least total latency that fit ``budget`` together; None when
    even the most folded design does not fit. ``widths``: each unit's fixed-point bits; ``unit_estimate``:
    unit u's estimate under a folding. ``pinned``: unit index -> a folding the user fixed; ``strategies``:
    unit index -> the unit's strategy (its reuse factor still folded).
    ``ddr_bytes_per_cycle``: the FPGA's DDR rate, which lets units keep their weights in DDR (their
    last, most folded option); None: never. ``engine``: units whose most folded option is the engine.

    Greedy: start unfolded; while over budget, raise the reuse factor of the unit whose next step
    frees the most over-budget resource per added cycle; then lower reuse factors again where the
    design still fits, the step that saves the most cycles first (``_unfolded``; weights come back on chip whenever
    they fit, even at some cycles: DDR traffic competes with the host's)."""
    pinned, strategies = pinned or {}, strategies or {}
    options = [[pinned[u]] if u in pinned else folding_options(s, widths[u], ddr_bytes_per_cycle, strategies.get(u))
               + ([ENGINE_FOLDING] if u in engine else []) for u, s in enumerate(shapes)]

    def estimate_of(u: int, k: int) -> dict[str, int]:
        return unit_estimate(u, options[u][k])

    # No design fits where the units' least of a resource, each over its options, already exceeds the budget: the
    # greedy below would find that only when stuck, after every step (the engine sizes the folding tries that leave
    # the other units too little, hundreds on a large FPGA)
    least = [[unit_estimate(u, pinned[u])[k] for k in RESOURCES] if u in pinned else
             [min(n, unit_estimate(u, ENGINE_FOLDING)[k]) if u in engine else n
              for k, n in zip(RESOURCES, _least_resources(s, widths[u], ddr_bytes_per_cycle, strategies.get(u)))]
             for u, s in enumerate(shapes)]
    if any(sum(column) > budget.get(k, 0) for k, column in zip(RESOURCES, zip(*least))):
        return None
    choice = [0] * len(shapes)
    current = [estimate_of(u, 0) for u in range(len(shapes))]
    totals = {k: sum(e[k] for e in current) for k in RESOURCES}

    def over() -> tuple[str, ...]:
        return tuple(k for k in RESOURCES if totals[k] > budget.get(k, 0))

    def gain(u: int, excess: tuple[str, ...]) -> float:
        """What unit u's next folding step frees of the over-budget resources per cycle it adds (0: nothing)."""
        if choice[u] + 1 >= len(options[u]):
            return 0.0
        nxt = estimate_of(u, choice[u] + 1)
        freed = sum((current[u][k] - nxt[k]) / max(1, budget[k]) for k in excess)
        return freed / max(1, nxt["latency_cycles"] - current[u]["latency_cycles"]) if freed > 0 else 0.0

    # The steps wait in a heap by gain (the lower unit first on a tie). A unit's gain changes only when it steps
    # or the set of resources over budget changes (then every gain is weighed again), so a network of hundreds of
    # units folds in a few of their steps each, not in all of them each.
    excess, steps = over(), []
    while excess:
        if not steps:
            steps = [(-g, u, choice[u]) for u in range(len(shapes)) if (g := gain(u, excess)) > 0]
            heapq.heapify(steps)
        while steps and steps[0][2] != choice[steps[0][1]]:  # a unit's step weighed before it stepped
            heapq.heappop(steps)
        if not steps:
            # Stuck (a step can cost BRAM, as weights move from LUTs into banks): start again from the
            # most folded design, which is the only one left to try, and unfold from there.
            choice = [len(o) - 1 for o in options]
            current = [estimate_of(u, len(o) - 1) for u, o in enumerate(options)]
            if any(sum(e[k] for e in current) > budget.get(k, 0) for k in RESOURCES):
                return None
            break
        _, best, _ = heapq.heappop(steps)
        choice[best] += 1
        stepped = estimate_of(best, choice[best])
        totals = {k: totals[k] - current[best][k] + stepped[k] for k in RESOURCES}
        current[best] = stepped
        now = over()
        if now != excess:
            excess, steps = now, []
        elif (g := gain(best, excess)) > 0:
            heapq.heappush(steps, (-g, best, choice[best]))
    # the step that saves the most cycles first: the rule by share here, where the engine's units still take
    # nothing, unfolds units into BRAM the memory plan's maps wanted (the model zoo's SqueezeNet on the Ultra96 at 8
    # bits: 12.11 ms, its maps' DDR time 0.87 -> 2.22 ms, not 10.81)
    return _unfolded(options, choice, budget, estimate_of, False)[0]


@functools.lru_cache(maxsize=1 << 14)
def _least_resources(shape: Shape, width: int, ddr_bytes_per_cycle: Optional[float], strategy: Optional[str]
                     ) -> tuple[int, ...]:
    """The least of each resource (RESOURCES' order) that a unit takes under any of its ``folding_options``."""
    estimates = [folded_estimate(shape, folding, width, ddr_bytes_per_cycle)
                 for folding in folding_options(shape, width, ddr_bytes_per_cycle, strategy)]
    return tuple(min(e[k] for e in estimates) for k in RESOURCES)


def _share_added(before: dict[str, int], after: dict[str, int], budget: dict[str, int]) -> float:
    """The shares of ``budget`` that a unit's estimate ``after`` takes more of than ``before``, summed."""
    return sum(max(0, after[k] - before[k]) / max(1, budget.get(k, 0)) for k in RESOURCES)


def _give_back(options: list[list[Folding]], choices: Sequence[list[int]], budget: dict[str, int],
               estimate_of: Callable[[int, int], dict[str, int]]) -> list[Folding]:
    """The foldings each of ``choices`` picks of each unit's ``options`` (least folded first), unfolded one step
    at a time where the units still fit ``budget`` (``_unfolded``): by each of two rules, the step that saves the
    most cycles first, or the step that saves the most cycles for the share of the budget it adds (the folding's
    steps are coarse: one large step, a relayout's multiplexers, can take what several convolutions' smaller steps
    would have put to better use, or the other way round); whichever leaves the fewest cycles in all (the first on
    a tie). The first of ``choices`` must fit ``budget``; a later one that does not is left out (``_unfolded``: the
    most folded options need not take the least of every resource, a unit with its weights in DDR holds their fetch
    in flip-flops)."""
    unfolded = (_unfolded(options, choice, budget, estimate_of, per_share)
                for choice in choices for per_share in (False, True))
    return min((design for design in unfolded if design is not None), key=lambda design: design[1])[0]


def _unfolded(options: list[list[Folding]], choice: list[int], budget: dict[str, int],
              estimate_of: Callable[[int, int], dict[str, int]], per_share: bool
              ) -> Optional[tuple[list[Folding], int]]:
    """The foldings ``choice`` picks of each unit's ``options``, unfolded one step at a time where the units still
    fit ``budget``, the step that saves the most cycles first (``per_share``: the most cycles over the share of the
    budget it adds; the lower unit on a tie), and the units' cycles then; None where ``choice`` does not fit
    ``budget`` (no start)."""
    choice = list(choice)
    current = [estimate_of(u, c) for u, c in enumerate(choice)]
    totals = [sum(e[k] for e in current) for k in RESOURCES]
    limits = [budget.get(k, 0) for k in RESOURCES]
    if any(total > limit for total, limit in zip(totals, limits)):
        return None

    def next_step(u: int) -> Optional[tuple[float, list[int]]]:
        """Unit u's next step, weighed (the cycles it saves, or those over the share it adds), and the resources it
        adds; None for a unit unfolded in full. A unit's step changes only when it steps: each is weighed once."""
        if choice[u] == 0:
            return None
        previous = estimate_of(u, choice[u] - 1)
        saved = current[u]["latency_cycles"] - previous["latency_cycles"]
        share = _share_added(current[u], previous, budget)
        weight = saved / share if per_share and share > 0 else math.inf if per_share else saved
        return weight, [previous[k] - current[u][k] for k in RESOURCES]

    steps = [next_step(u) for u in range(len(options))]
    while True:
        best = None
        for u, step in enumerate(steps):
            if step is not None and (best is None or step[0] > steps[best][0]) and \
                    all(total + added <= limit for total, added, limit in zip(totals, step[1], limits)):
                best = u
        if best is None:
            return [o[c] for o, c in zip(options, choice)], sum(e["latency_cycles"] for e in current)
        totals = [total + added for total, added in zip(totals, steps[best][1])]
        choice[best] -= 1
        current[best] = estimate_of(best, choice[best])
        steps[best] = next_step(best)
