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
  of depth R; the FIFOs between a streamed unit's layers (hls4ml sizes each to the
  whole tensor, a pixel's channels a word: so many blocks side by side for the
  word's width, so many deep for the pixels);
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
- latency in cycles: R per output vector (one vector for a dense layer, one
  per output pixel for a streamed convolution), plus the pipeline of the product and its adder tree
  and Softmax's, in cycles of the unit's clock (``pipeline_cycles``: a product and three adder levels a
  cycle at 200 MHz, proportionally more or fewer at a slower or faster clock), the line-buffer fill, a cycle
  for each lookup table's registered read, a cycle for each FIFO between a streamed unit's layers (each layer
  a dataflow process that reads a word the cycle after it was written); none for io_parallel pooling,
  activations without a table and a product with no sum at R = 1 (combinational: hls4ml's io_parallel
  MaxPooling and Dense(1 -> 64) + ReLU baselines report 0); plus moving the unit's inputs and outputs
  through the subfunction's word-wide arena (two 64-bit words a cycle, each holding 8 / E values of E
  bytes): after the arithmetic for an io_parallel unit or a single vector, beside it for a streamed one.
A multiply-accumulate unit may instead keep its weights in DDR (when the FPGA's BRAM cannot hold
them): no weight BRAM or LUTs, and every output vector reads all the weights through the DDR port,
so a vector takes at least weight bytes / DDR bytes per cycle; its reuse factor is the least that
keeps its multipliers no faster than that.
The subfunction's top implements some units itself (board PEs of ``engine: top``): a relayout moves its
values (reads and writes, no logic); a window op (MaxPool, GlobalAveragePool: kind 'gather') reads each
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
import math
from dataclasses import dataclass, field
from typing import Callable, Collection, Mapping, NamedTuple, Optional, Sequence

from ..core.board import RELAYOUT_OPS, VITIS_HLS, VIVADO_HLS, Device
from ..core.graph import QUANTIZER_OPS, Graph
from ..core.plan import Band

RESOURCES = ("dsp", "bram18", "lut", "ff")
# a unit's nodes that are no layer of its hls4ml project: relayouts, and quantizers (its layers' precisions)
NOT_HLS4ML_LAYER_OPS = frozenset(RELAYOUT_OPS) | QUANTIZER_OPS
# The layers a unit may start with to run band by band (``band_of``): a window over rows, hls4ml's
BANDED_OPS = ("Conv", "MaxPool")
# Ops that change a map's rows or mix them (beyond BANDED_OPS' windows): a unit starting with one is not banded
NOT_PER_PIXEL_OPS = ("Resize", "Pad", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Concat", "Softmax")
# A unit whose FIFOs (hls4ml sizes them to the whole map) take more than this share of the chip's BRAM18 budget
# runs in the fewest bands whose FIFOs take at most this share (``chosen_band``): a choice, not a measured optimum
BAND_FIFO_SHARE = 0.125
# hls4ml's Strategy of a multiply-accumulate layer, as its config spells it (hls4ml takes any case, and
# DistributedArithmetic as its distributed_arithmetic: constant multiplications as shifts and adds by da4ml, at
# reuse factor 1 only; --strategy pins it, and ``by_cost`` weighs it when asked, ``takes_distributed_arithmetic``)
DISTRIBUTED_ARITHMETIC = "DistributedArithmetic"
# Not hls4ml's: the unit runs on the subfunction's layer-sequential engine (hls/engine.h), one array of
# ENGINE_LANES multiply-accumulators that every such unit of the subfunction shares, one unit after another,
# its weights read from DDR once a run (a Conv, Gemm or MatMul, BatchNormalizations, a ReLU: ``engine_refusal``)
ENGINE = "Engine"
STRATEGIES = ("Latency", "Resource", DISTRIBUTED_ARITHMETIC, ENGINE)
FOLDED_STRATEGIES = ("Latency", "Resource")  # what ``by_cost`` weighs for a folded unit
# The largest kernel (inputs a product sum, and products) ``by_cost`` weighs distributed_arithmetic for: hls4ml
# runs da4ml's solve at conversion, whose time grows with the inputs faster than their square (here: 128x64
# 8-bit weights 20 s, 128x128 4-bit 19 s, 256x64 4-bit 27 s, 784x64 2-bit 414 s; benchmarks/da_solve_time.py)
DA_MAX_INPUTS = 256
DA_MAX_PRODUCTS = 16_384
# da4ml's cost (its LUT-equivalent adder bits, which Yosys's LUT counts of its RTL follow within 10 % on the
# quantized examples: benchmarks/open_synth.py) over the canonical signed digits of the constant weights times
# the bits each product adds on: 0.40 to 0.50 on 14 random layers of 8x8 to 64x32, 2- to 8-bit weights, 4- to
# 16-bit inputs (its common subexpressions save the rest)
DA_COST_PER_DIGIT_BIT = 0.45
# hls4ml's IOType of a unit's project: its values as arrays (registers) or as streams of words (FIFOs)
IO_TYPES = ("io_parallel", "io_stream")
# a unit's latency and its parts (``estimate``)
CYCLES = ("latency_cycles", "compute_cycles", "buffer_cycles", "ddr_cycles")
# Weight banks shallower than this stay in LUTs (Vivado maps small arrays to LUTRAM).
BRAM_MIN_DEPTH = 64
# FF: a combinational hls4ml design's control state (its io_parallel MaxPooling and Dense(1 -> 64) + ReLU
# baselines take exactly 16 FF an input value and 2 more)
UNIT_CONTROL_LUT, UNIT_CONTROL_FF = 300, 2
# The adder tree of a dense product: this many levels a cycle at the reference clock (hls4ml's Latency designs
# at its default 5 ns); a multiplication takes about as long as these levels (one cycle of the reference clock).
ADDER_LEVELS_PER_CYCLE = 3
REFERENCE_CLOCK_MHZ = 200.0
# The engine's lanes (output channels computed at once, a multiply-accumulator each), its control and a lane's
# logic: hetdeploy's model of hls/engine.h, not a synthesis result (no HLS tool here): a lane's 64-bit sum and its
# product's register, its rounding and saturation; the control's address arithmetic and loop counters
ENGINE_LANES = 32
ENGINE_CONTROL_LUT, ENGINE_CONTROL_FF, ENGINE_CONTROL_DSP = 1500, 1500, 4
ENGINE_LANE_LUT, ENGINE_LANE_FF = 64, 64
# The cycles between an engine's output pixel's first window value read and its sum ready (the read, the
# product, the add): hetdeploy's model of its pipeline, not a synthesis result
ENGINE_PIPELINE_CYCLES = 6
# Ops an engine unit may end with after its main node (BatchNormalizations are folded into its weights)
ENGINE_FUSED_OPS = ("BatchNormalization", "Relu")
# Softmax's pipeline after its exponentials' table reads (the sum, the inverse's read, the products): cycles at
# the reference clock
SOFTMAX_REFERENCE_CYCLES = 2
# Vitis HLS builds each of a Softmax's tables in twice the BRAM18s its entries need: set on the hls4ml tutorial's
# jet taggers under Vitis HLS 2024.1 (8 for 5 outputs), where Vivado HLS 2019.2 and 2020.1 build them, and both
# tools the table activations' tables, in what the entries need; reports held out agree (a QKeras 400-10-10-10 MLP
# under 2023.2: 12 for 10; a streamed Conv1D under 2024.1). Vitis HLS 2025.1 and 2025.2 reports (an AXI-wrapped
# iris MLP, a streamed jet tagger) show the single figure; hetdeploy's scripts are written for 2022.1 to 2023.2.
VITIS_SOFTMAX_TABLE_BRAM18 = 2
# The subfunction's memories (hls/arena.h) are arrays of words of this many bytes, each element in a
# lane of ``element_bytes``; a unit moves whole words, ARENA_PORTS a cycle (a true dual-port BRAM gives
# two accesses, shared by a unit's reads and writes).
ARENA_WORD_BYTES = 8
ARENA_PORTS = 2
# Entries of the lookup tables hetdeploy gives hls4ml's Softmax and TABLE_OPS unless --table-size pins
# others (its TableSize; hls4ml's own default, 1024, errs by up to ~0.004), each 18 bits wide.
TABLE_OPS = frozenset({"Tanh", "Sigmoid", "Softsign", "Softplus", "Elu", "Selu"})
# ... of which these output the input itself (scaled) where it is not negative, the table elsewhere: the input
# waits beside the table read
TABLE_SELECT_OPS = frozenset({"Elu", "Selu"})
LOOKUP_TABLE_SIZE = 4096
# the sizes --table-size takes: hetdeploy's Softmax tables index by the top bits of a value (a power of two)
TABLE_SIZES = tuple(2 ** k for k in range(4, 17))
LOOKUP_TABLE_BITS = 18
# Each table read's index: the value scaled and offset (an adder) and clamped to the table at both ends
# (two comparators, a multiplexer): about this many LUTs a bit of the value (set on hls4ml's Dense + sigmoid
# and Dense + ELU baselines).
TABLE_INDEX_LUT_PER_BIT = 3
# The shapes (depth, bits) a BRAM18 takes, widest last; a smaller array is LUTRAM or registers.
BRAM18_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))
BRAM_MIN_BITS = 1024
# Narrower products go to fabric LUTs (Vivado's binding; the published 6-bit jet tagger used 9 DSPs).
DSP_MIN_WIDTH = 10
# A constant weight whose code needs fewer magnitude bits than this is a shift or two and an adder in LUTs
# (set on hls4ml's Vivado Conv2D baseline: 740 DSPs for 1,536 products of weights drawn from N(0, 0.05^2) in
# ap_fixed<16,6>, of which about 54 % need 6 bits or more).
DSP_MIN_CONSTANT_BITS = 6
# The share of an HLS report's LUTs that Vivado's synthesis keeps (it merges and trims logic the report counts
# op by op): 0.50 and 0.45 on the hls4ml tutorial's pruned and quantized SVHN CNNs (245,466 -> 123,948 and
# 263,280 -> 118,931 LUT; benchmarks/published_synthesis.csv)
SYNTHESIS_LUT_SHARE = 0.5


@dataclass
class Unit:
    pe: str
    nodes: list[int]  # node indices, in execution order
    inputs: list[str] = field(default_factory=list)  # tensors it reads that it does not write
    output: str = ""  # the one tensor it writes that others read
    engine: str = "hls4ml"  # who implements it (board.ENGINES): a unit of the top's holds its one op alone


def node_unit(graph: Graph, index: int, device: Device) -> Unit:
    """Node ``index`` as an execution unit of its own on the FPGA ``device``, on the PE that runs it."""
    node = graph.nodes[index]
    pe = device.pe_for(node)
    return Unit(pe or "", [index], list(dict.fromkeys(node.inputs)), node.outputs[0] if node.outputs else "",
                device.pes[pe].engine if pe else "hls4ml")


def split_units(graph: Graph, nodes: Sequence[int], device: Device, keep: set[str] = frozenset(),
                engine: Collection[int] = ()) -> list[Unit]:
    """Cut an FPGA subfunction (``nodes`` in execution order) into units. ``keep``: tensors read
    outside the subfunction, which a fusion must not swallow; ``engine``: nodes that may run on the engine, whose units
    fuse only what it computes (ENGINE_FUSED_OPS, a ReLU last)."""
    consumers = graph.consumers()
    outputs = set(graph.outputs) | set(keep)
    units: list[Unit] = []
    for i in nodes:
        node = graph.nodes[i]
        own = node_unit(graph, i, device)
        if units:
            unit = units[-1]
            last = graph.nodes[unit.nodes[-1]]
            # a PE fuses what its fuse list names (the top's: a ReLU after its Add or BatchNormalization), whoever
            # runs that op alone; hls4ml has no relayout layer
            fusible = node.op in device.pes[unit.pe].fuse and node.inputs == last.outputs[:1] and \
                node.op not in RELAYOUT_OPS and \
                (unit.nodes[0] not in engine or node.op in ENGINE_FUSED_OPS and last.op != "Relu")
            if fusible and consumers.get(last.outputs[0]) == [i] and last.outputs[0] not in outputs:
                unit.nodes.append(i)
                unit.output = node.outputs[0]
                continue
        if not own.pe:
            raise ValueError(f"node '{node.name}': no PE of {device.name} runs {node.op} within its limits")
        if len(node.outputs) != 1:
            raise ValueError(f"node '{node.name}': {node.op} with {len(node.outputs)} outputs on the FPGA")
        units.append(own)
    return units


@dataclass(frozen=True)
class Shape:
    """What the estimates need of a unit's main node."""

    # 'kernel' (multiply-accumulate layer), 'window' (hls4ml's pooling), 'gather' (the top's window op), 'add' (the
    # top's Add of n_in buffers), 'concat' (the top's Concat), 'affine' (the top's BatchNormalization),
    # 'elementwise', 'data' (the top's relayout)
    kind: str
    n_in: int  # multiplications per output value
    n_out: int  # output values per vector (channels)
    vectors: int  # output vectors (pixels; 1 for a dense layer)
    streamed: bool  # io_stream (spatial data) rather than io_parallel
    line_buffer_values: int  # values a streamed window keeps ((k - 1) rows x width x channels)
    output_values: int
    softmax: bool  # a Softmax in the unit (lookup tables)
    input_values: int = 0  # the values it reads from the subfunction's memories per run (every input)
    fifos: tuple[tuple[int, int], ...] = ()  # (pixels, channels) of each stream between its layers, if it streams
    table_layers: int = 0  # layers of TABLE_OPS in the unit (a lookup table each)
    # a kernel's weights by octave under their format's top (graph.Node.weight_octaves; () unknown) and the
    # bits that hold them exactly (Node.weight_bits; None: float weights, as wide as the unit)
    weight_octaves: tuple[int, ...] = ()
    weight_bits: Optional[int] = None
    weight_integer: Optional[int] = None  # the integer bits of the format weight_octaves count under (Node's)
    # values a streamed layer holds in its window: a convolution's or pooling's k x k x input channels, a dense
    # layer's input vector
    window_values: int = 0
    # hls4ml 1.3 computes it right only under its Latency strategy: a depthwise convolution, whose Resource
    # path (depthwise_product_resource) C-simulates wrong outputs at every reuse factor (tests/test_fpga_ops.py)
    latency_only: bool = False
    table_selects: int = 0  # table layers of TABLE_SELECT_OPS in the unit
    table_entries: int = LOOKUP_TABLE_SIZE  # entries of each lookup table (Softmax's, TABLE_OPS'): hls4ml's TableSize
    clock_mhz: float = REFERENCE_CLOCK_MHZ  # the clock the unit runs at (the board's FPGA clock: hls4ml's ClockPeriod)
    bands: int = 1  # runs of the unit, one band of rows each (``banded``): the other fields are one band's
    hls_tool: str = VITIS_HLS  # the HLS tool that synthesises it (HLS_TOOLS: the board's FPGA's)
    # bits of the accumulator a kernel's products are summed in (hls4ml's accum_t); None: the one hls4ml infers for
    # hetdeploy's units, whose accum precision is "auto" (``accumulator_bits``)
    accum_bits: Optional[int] = None
    # hls4ml layers in the unit; streamed, each is a dataflow process, and the next reads a word from the FIFO
    # between them a cycle after it was written
    layers: int = 1
    # BatchNormalization layers after a kernel unit's main node that hls4ml keeps as layers (rewrites.fold_batchnorm
    # folds none into a quantized layer's weights): each a product by its channel's scale and a sum a value
    normalizations: int = 0


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
    shape = dataclasses.replace(_main_shape(graph, unit), input_values=read, table_layers=tables, table_selects=selects,
                                layers=max(1, layers), normalizations=normalizations,
                                weight_octaves=main.weight_octaves, weight_bits=main.weight_bits,
                                weight_integer=main.weight_integer, clock_mhz=clock_mhz,
                                hls_tool=hls_tool)
    fifos = tuple(f for i in unit.nodes[:-1] for f in output_fifo(graph, i))  # counted where it streams
    return with_io_type(dataclasses.replace(shape, fifos=fifos), io_type)


def with_io_type(shape: Shape, io_type: Optional[str]) -> Shape:
    """``shape`` under hls4ml's IOType ``io_type`` (IO_TYPES; None: as it is)."""
    return shape if io_type is None else dataclasses.replace(shape, streamed=io_type == "io_stream")


def takes_either_io_type(shape: Shape) -> bool:
    """Whether ``by_cost`` may weigh both of hls4ml's io types for a unit: a Dense, a Conv (tried under both here,
    each verified) or a max pooling, not run in bands (each band streams) and not a depthwise convolution (whose
    io_parallel form hls4ml's Latency strategy has not been verified here)."""
    return shape.kind in ("kernel", "window") and shape.bands == 1 and not shape.latency_only


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
        return Shape("data", 0, 0, 0, False, 0, 0, softmax)
    channels = main_out[1] if len(main_out) > 1 else main_out[0]  # a shape intake could not infer: one value
    if unit.engine == "top" and main.op == "Add":  # the top's Add: an output value of two reads
        return Shape("add", len(main.inputs), channels, math.prod(main_out[2:]), False, 0, output_values, softmax)
    if unit.engine == "top" and main.op == "BatchNormalization":  # the top's scale and shift: a product a value
        return Shape("affine", 1, channels, math.prod(main_out[2:]), False, 0, output_values, softmax)
    if unit.engine == "top" and main.op == "Concat":  # the top's Concat: n_in, the channels both inputs' divide
        return Shape("concat", math.gcd(*[s[1] for s in main.input_shapes]), main_out[1], math.prod(main_out[2:]),
                     False, 0, output_values, softmax)
    if unit.engine == "top":  # a window the top reduces (arena.h): each output value reads its window's values
        kernel = first[2:] if main.op.startswith("Global") else main.attrs.get("kernel_shape") or [1]
        return Shape("gather", math.prod(kernel), main_out[1], math.prod(main_out[2:]), False, 0, output_values,
                     softmax)
    if main.op == "Conv":
        kernel = main.attrs.get("kernel_shape") or [1] * (len(first) - 2)
        group = main.attrs.get("group", 1)
        n_in = (first[1] // group) * math.prod(kernel)
        line, window = _window_values(first, kernel)
        return Shape("kernel", n_in, main_out[1], math.prod(main_out[2:]), True, line, output_values, softmax,
                     window_values=window, latency_only=group > 1 and group == first[1])
    if main.op in ("Gemm", "MatMul"):  # streamed, hls4ml's dense wrapper copies its input word into an array
        return Shape("kernel", first[-1], main_out[-1], 1, False, 0, output_values, softmax, window_values=first[-1])
    if main.op == "MaxPool":
        kernel = main.attrs.get("kernel_shape") or [1]
        line, window = _window_values(first, kernel)
        return Shape("window", math.prod(kernel), main_out[1], math.prod(main_out[2:]), True, line, output_values,
                     softmax, window_values=window)
    if main.op in ("AveragePool", "GlobalAveragePool"):  # a depthwise convolution on the FPGA
        kernel = main.attrs.get("kernel_shape") or first[2:]
        line, window = _window_values(first, kernel)
        return Shape("kernel", math.prod(kernel), main_out[1], math.prod(main_out[2:]), True, line, output_values,
                     softmax, window_values=window, latency_only=True)
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
        return fifo_bram18(list(candidate.fifos) + [(pixels // candidate.bands, channels)
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
    return dataclasses.replace(shape, vectors=band.rows * columns, output_values=band.rows * band.output_row_values,
                               input_values=band.input_rows * band.input_row_values,
                               fifos=tuple((band.rows * columns, channels) for _, channels in shape.fifos),
                               bands=band.count)


def _window_values(first: Sequence[int], kernel: Sequence[int]) -> tuple[int, int]:
    """A streamed window op's values held over its input ``first`` (N, C, ...): its line buffer ((k - 1) rows of
    the input) and its window in registers (k x k x C)."""
    line = (kernel[0] - 1) * (first[-1] if len(first) > 3 else 1) * first[1]
    return line, first[1] * math.prod(kernel)


def valid_reuse_factors(n_in: int, n_out: int) -> list[int]:
    """The reuse factors hls4ml 1.3 accepts for an n_in x n_out layer (its _validate_reuse_factor)."""
    total = n_in * n_out
    result = []
    for rf in range(1, int(math.isqrt(total)) + 1):
        if total % rf == 0:
            result += [rf, total // rf] if rf != total // rf else [rf]
    return sorted(rf for rf in result if _hls4ml_accepts(n_in, n_out, rf))


def _hls4ml_accepts(n_in: int, n_out: int, rf: int) -> bool:
    limit = math.ceil(n_in * n_out / min(n_in, rf))
    return (limit % n_out == 0 or rf >= n_in) and (rf % n_in == 0 or rf < n_in) and (n_in * n_out) % rf == 0


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


def ddr_bytes_per_cycle(device: Device) -> float:
    """What the FPGA's DDR port delivers per clock cycle (an FPGA's board entry requires its clock)."""
    return device.memory.bandwidth_bytes_per_s / (device.clock_mhz * 1e6)


def element_bytes(width: int) -> int:
    """Bytes a W-bit fixed-point element takes in any of a subfunction's memories: the next power of
    two of whole bytes (a lane of an arena word; how an m_axi port lays out an array of them)."""
    return 1 << max(0, math.ceil(math.log2(-(-width // 8))))


def buffer_bytes(values: int, element: int) -> int:
    """Bytes a buffer of ``values`` elements of ``element`` bytes takes: whole arena words."""
    return -(-values * element // ARENA_WORD_BYTES) * ARENA_WORD_BYTES


def arena_words(values: int, width: int) -> int:
    """Arena words a unit moves for ``values`` W-bit values."""
    return buffer_bytes(values, element_bytes(width)) // ARENA_WORD_BYTES


def strategy_for(reuse_factor: int) -> str:
    """The strategy of a unit folded to ``reuse_factor`` that no one chose one for (the folding's starting
    point, which ``by_cost`` improves on; a reuse factor the user pins without a strategy; the partitioner's
    estimate of a node alone): hls4ml's Latency strategy unrolls into registers; beyond a small reuse factor,
    Resource keeps weights in BRAM banks."""
    return "Latency" if reuse_factor < BRAM_MIN_DEPTH else "Resource"


def reuse_factors_for(shape: Shape, strategy: str) -> list[int]:
    """The reuse factors hls4ml 1.3 accepts for a kernel unit under ``strategy`` (STRATEGIES): Resource's
    must divide the layer (``valid_reuse_factors``, which the folding chooses from under either); Latency
    checks none (hls4ml's ``init_dense``/``init_conv*`` validate the reuse factor for the Resource strategy
    only): any from 1 to the layer's products."""
    if strategy == "Latency":
        return list(range(1, shape.n_in * shape.n_out + 1))
    if strategy in (DISTRIBUTED_ARITHMETIC, ENGINE):
        return [1]
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
    bram18, lut, ff = 0, UNIT_CONTROL_LUT, UNIT_CONTROL_FF
    cycles = 0
    dsp = ddr = 0
    if shape.kind == "kernel" and strategy == DISTRIBUTED_ARITHMETIC:
        lut += distributed_arithmetic_lut(shape, width)
        ff += shape.n_out * width  # its outputs registered; the adders between are combinational
        cycles += shape.vectors + _first_product_cycles(shape)
    elif shape.kind == "kernel":
        held = shape.n_in * shape.n_out  # weights
        # hls4ml's Latency strategy keeps the weights as constants: their values count (none known: all W bits)
        latency_strategy = ddr_bytes_per_cycle is None and (strategy or strategy_for(reuse_factor)) == "Latency"
        codes = _weight_codes(shape, width) if latency_strategy else []
        zeros = sum(count for bits, count in codes if bits < 0)  # weights under half a step: they round to 0
        if reuse_factor == 1 and codes:  # each multiplier one constant weight, which the HLS folds in (+-1: a wire)
            factors = [(bits, count) for bits, count in codes if bits > 0]
        else:  # the weights in turn, each of its type's bits (a quantizer's, else W); hls4ml's multiplier_limit
            # leaves out the products by a zero weight
            factors = [(_weight_type_bits(shape, width), math.ceil(held / reuse_factor) - zeros // reuse_factor)]
        held -= zeros
        multipliers = sum(count for _, count in factors)
        for bits, count in factors:
            on_dsps, in_luts = _bound_products(count, width, bits, dsp_binding)
            dsp, lut = dsp + on_dsps, lut + in_luts
        lut += multipliers * accumulator_bits(shape, width)  # each product's adder, as wide as the accumulator
        if shape.n_in > 1 and latency_strategy and not products_registered:
            ff += min(held, shape.n_out * math.ceil(shape.n_in / 2 ** _adder_levels_a_cycle(shape))) * width
        elif shape.n_in > 1:  # products wait for their sum: all of them under Latency, each multiplier's else
            ff += (held if latency_strategy else multipliers) * width // 2
        cycles_per_vector = reuse_factor
        if ddr_bytes_per_cycle is not None:
            cycles_per_vector = max(reuse_factor, ddr_cycles_per_vector(shape, width, ddr_bytes_per_cycle))
            ddr = shape.vectors * (cycles_per_vector - reuse_factor)
        elif not latency_strategy and reuse_factor > 1:  # Resource: a bank per multiplier, R deep, bound to
            # BRAM however shallow (hls4ml's ROM_nP_BRAM binding of its weights); at R = 1 they are constants
            bram18 += bram18_blocks(reuse_factor, multipliers * width, bound=True)
        else:
            lut += held * width // 2
        # unfolded in io_parallel, a product with no sum (n_in = 1) is combinational (hls4ml's Dense(1 -> 64) +
        # ReLU baselines report no cycle)
        if shape.n_in > 1 or shape.streamed or cycles_per_vector > 1:
            cycles += shape.vectors * cycles_per_vector + _first_product_cycles(shape)
    elif shape.kind == "window" and shape.streamed:  # one output pixel a cycle
        lut += shape.n_out * width * shape.n_in
        cycles += shape.vectors * max(1, shape.n_in // 4)
    elif shape.kind == "window":  # io_parallel: every output pixel's comparators at once, combinational
        lut += shape.vectors * shape.n_out * width * shape.n_in
    elif shape.kind == "elementwise":
        lut += shape.n_out * width  # compares, shifts: io_parallel, combinational but for table reads
        cycles += shape.vectors if shape.streamed or shape.table_layers else 0
    elif shape.kind == "gather":  # the top (arena.h's window_op): each output value reads its n_in window values,
        # a word read serving a whole word of lanes when the channels fill whole words
        lanes = ARENA_WORD_BYTES // element_bytes(width)
        together = lanes if shape.n_out % lanes == 0 else 1
        lut += lanes * width * 2  # a comparator (or adder) and a multiplexer a lane
        ff += lanes * width
        cycles += -(-shape.output_values * shape.n_in // (together * ARENA_PORTS))
    elif shape.kind == "add":  # the top (arena.h's add): a word of each input for a word of the output's lanes
        lanes = ARENA_WORD_BYTES // element_bytes(width)
        lut += lanes * width * 2  # an adder and the ReLU's multiplexer a lane
        ff += lanes * width
        cycles += -(-arena_words(shape.output_values, width) * shape.n_in // ARENA_PORTS)
    elif shape.kind == "affine":  # the top (arena.h's affine): a word read and a word written a cycle
        lanes = ARENA_WORD_BYTES // element_bytes(width)
        dsp += lanes * (2 if width > 18 else 1)
        lut += lanes * width * 2  # the adder and the ReLU's multiplexer a lane
        ff += lanes * width * 2
        cycles += arena_words(shape.output_values, width)
    elif shape.kind == "concat":  # the top (arena.h's concat): a word of lanes from one input's run (its words
        # read, the output's written: two words a cycle) when the inputs' channels fill whole words, else a read a value
        lanes = ARENA_WORD_BYTES // element_bytes(width)
        lut += lanes * width  # a multiplexer a lane
        ff += lanes * width
        words = arena_words(shape.output_values, width)
        cycles += words if shape.n_in % lanes == 0 else -(-shape.output_values // ARENA_PORTS)
    if shape.kind == "kernel" and shape.normalizations:  # nnet_batchnorm's normalize at the unit's reuse factor R
        # (hls4ml_adapter gives it the layer's): a product by a constant of W bits and its sum a value, ceil(n / R)
        # multipliers for the n of a word (streamed) or of the vector (io_parallel: R cycles more); its sums registered
        values = shape.n_out * (1 if shape.streamed else shape.vectors)
        products = shape.normalizations * math.ceil(values / reuse_factor)
        if not shape.streamed:
            cycles += shape.normalizations * (reuse_factor - 1)
        on_dsps, in_luts = _bound_products(products, width, width, dsp_binding)  # its scales W bits: unknown
        dsp, lut = dsp + on_dsps, lut + in_luts + products * width  # and an adder a product
        ff += shape.normalizations * shape.n_out * width
    if shape.streamed:  # its window and its output word in registers (``registers_output``); a cycle a FIFO
        # between its layers
        ff += (shape.n_out * registers_output(shape) + shape.window_values) * width
        lut += math.ceil(shape.line_buffer_values * width / 32)
        bram18 += fifo_bram18(shape.fifos, width)
        cycles += shape.line_buffer_values // max(1, shape.n_out) + shape.layers - 1
    elif shape.kind not in ("data", "gather", "add", "concat", "affine"):  # an io_parallel hls4ml unit holds
        # its input vector in registers
        ff += shape.input_values * width
        if shape.kind == "kernel" and shape.vectors > 1:  # computed a pixel at a time, each map between its
            # layers waits whole in a completely partitioned array (where a stream has FIFOs; the last layer's
            # goes out through the project's port: hls4ml's io_parallel Conv2D baselines count none for it)
            ff += sum(pixels * channels for pixels, channels in shape.fifos) * width
    # hls4ml pipelines its table layers at a vector a cycle whatever the reuse factor, each table read
    # once per value: copied until the reads fit the copies' two ports
    table = bram18_blocks(shape.table_entries, LOOKUP_TABLE_BITS)
    copies = math.ceil(shape.n_out / 2)
    bram18 += shape.table_layers * copies * table
    lookups = shape.table_layers * shape.n_out
    cycles += shape.table_layers  # each table's read registered (the BRAM's output register)
    # each read registered, and the input beside it where the output may be the input
    ff += (shape.table_layers + shape.table_selects) * shape.n_out * width
    if shape.softmax:
        blocks = table * (VITIS_SOFTMAX_TABLE_BRAM18 if shape.hls_tool == VITIS_HLS else 1)
        bram18 += (copies + 1) * blocks  # the exponential's copies and the inverse's one
        lookups += shape.n_out + 1
        dsp += shape.n_out
        cycles += pipeline_cycles(SOFTMAX_REFERENCE_CYCLES, shape.clock_mhz)
    lut += lookups * TABLE_INDEX_LUT_PER_BIT * width
    written = shape.input_values if shape.kind == "data" else shape.output_values  # the top moves a relayout
    # a gather's and an add's reads: their compute
    read = 0 if shape.kind in ("gather", "add", "concat", "affine") else arena_words(shape.input_values, width)
    moved = -(-(read + arena_words(written, width)) // ARENA_PORTS)
    # a stream overlaps the moves of one vector with the arithmetic of another: one vector (a dense layer's) waits
    latency = max(cycles, moved) if shape.streamed and shape.vectors > 1 else cycles + moved
    if shape.bands > 1:  # the top copies each band in and out around its run, and the unit runs once a band
        copies = -(-(arena_words(shape.input_values, width) + arena_words(shape.output_values, width)) // ARENA_PORTS)
        cycles, ddr, latency = cycles * shape.bands, ddr * shape.bands, (latency + copies) * shape.bands
    return {"dsp": dsp, "bram18": bram18, "lut": lut, "ff": ff, "latency_cycles": latency, "compute_cycles": cycles,
            "buffer_cycles": latency - cycles, "ddr_cycles": ddr}


def _bound_products(count: int, width: int, bits: int, dsp_binding: tuple[int, int]) -> tuple[int, int]:
    """(DSPs, LUTs) of ``count`` products of ``width``-bit data by constants of ``bits`` magnitude bits, as synthesis
    binds them: under either of ``dsp_binding``'s least data and constant bits, shifts and adds in LUTs; else a DSP
    each (two past 18 bits)."""
    if width < dsp_binding[0] or bits < dsp_binding[1]:
        return 0, count * width * bits // 2
    return count * (2 if width > 18 else 1), 0


def engine_refusal(graph: Graph, unit: Unit) -> Optional[str]:
    """Why ``unit`` cannot run on the engine; None: it can. The engine computes a Conv (one group, 1-D or 2-D),
    a Gemm or a MatMul of a flat input, each BatchNormalization after it folded into its weights, then a ReLU."""
    main, *after = (graph.nodes[i] for i in unit.nodes)
    if main.op not in ("Conv", "Gemm", "MatMul"):
        return f"the engine computes a Conv, Gemm or MatMul, not {main.op}"
    if main.op == "Conv" and main.attrs.get("group", 1) != 1:
        return "the engine computes convolutions of one group (not depthwise or grouped ones)"
    if main.op == "Conv" and len(main.input_shapes[0]) not in (3, 4):
        return "the engine computes 1-D and 2-D convolutions"
    if main.op != "Conv" and len(main.input_shapes[0]) != 2:
        return f"the engine computes a {main.op} of a flat (N, C) input"
    ops = [n.op for n in after]
    if any(op not in ENGINE_FUSED_OPS for op in ops) or "Relu" in ops[:-1]:
        unfused = next(op for k, op in enumerate(ops)
                       if op not in ENGINE_FUSED_OPS or op == "Relu" and k < len(ops) - 1)
        return f"its unit goes on with {unfused}; the engine folds in BatchNormalizations and ends with a ReLU only"
    return None


def engine_estimate(shape: Shape, width: int, ddr_bytes_per_cycle: Optional[float]) -> dict[str, int]:
    """A unit on the subfunction's engine (hls/engine.h, ENGINE_LANES lanes): what it adds beside the engine
    (nothing: the engine's resources are ``engine_resources``, once for all its units), and its cycles: per tile
    of lanes output channels, its weights read one a cycle (at least the DDR's time for their bytes) and a bias a
    lane, then per output pixel its window's values one a cycle, the pipeline's depth, and one cycle a lane to
    round and write the outputs. It reads and writes its buffers itself: no moves besides."""
    lanes = ENGINE_LANES
    tiles = -(-shape.n_out // lanes)
    read = tiles * lanes * shape.n_in  # a weight a cycle, the last tile's missing filters' zeros too
    ddr = 0 if ddr_bytes_per_cycle is None else \
        max(0, math.ceil(shape.n_in * shape.n_out * element_bytes(width) / ddr_bytes_per_cycle) - read)
    cycles = tiles * lanes + read + ddr + tiles * shape.vectors * (shape.n_in + ENGINE_PIPELINE_CYCLES + lanes)
    return {"dsp": 0, "bram18": 0, "lut": 0, "ff": 0, "latency_cycles": cycles, "compute_cycles": cycles,
            "buffer_cycles": 0, "ddr_cycles": ddr}


def engine_resources(window: int, width: int) -> dict[str, int]:
    """The resources of a subfunction's engine, whose largest layer window (k x k x input channels) is ``window``,
    at ``width`` bits: a DSP a lane (two beyond 18 bits) and the control's, each lane's weight buffer (``window``
    weights deep) in BRAM18, each lane's sum and the control in LUT and FF (hetdeploy's model, see ENGINE_LANES)."""
    lanes = ENGINE_LANES
    return {"dsp": lanes * (2 if width > 18 else 1) + ENGINE_CONTROL_DSP,
            "bram18": lanes * bram18_blocks(window, width), "lut": ENGINE_CONTROL_LUT + lanes * ENGINE_LANE_LUT,
            "ff": ENGINE_CONTROL_FF + lanes * (ENGINE_LANE_FF + 2 * width)}


def registers_output(shape: Shape) -> bool:
    """Whether a streamed unit holds its output word in registers: all but an activation without a table, which
    only compares or shifts between two FIFOs (combinational: a ReLU's module holds 3 FF in a Vitis HLS 2025.2
    report of hls4ml's io_stream MLP, benchmarks/estimates.py's taitashaw rows)."""
    return shape.kind != "elementwise" or shape.table_layers > 0


def _adder_levels_a_cycle(shape: Shape) -> int:
    """The adder tree's levels one cycle of the unit's clock holds (ADDER_LEVELS_PER_CYCLE at the reference clock)."""
    return max(1, math.floor(ADDER_LEVELS_PER_CYCLE * REFERENCE_CLOCK_MHZ / shape.clock_mhz))


def _first_product_cycles(shape: Shape) -> int:
    """What the first product's pipeline (multiply, then the adder tree) adds to a kernel unit's vectors' cycles."""
    tree = 1 + math.log2(max(1, shape.n_in)) / ADDER_LEVELS_PER_CYCLE  # n_in = 1: its bias added in the product's cycle
    return pipeline_cycles(tree, shape.clock_mhz) - 1


def pipeline_cycles(reference_cycles: float, clock_mhz: float) -> int:
    """Cycles at ``clock_mhz`` of logic that takes ``reference_cycles`` at REFERENCE_CLOCK_MHZ: its delay
    fixed in time, so a slower clock fits more of it in a cycle and a faster one less (at least one cycle).
    Set at hls4ml's default 5 ns; the table's published points at 10 ns are streamed or AXI-wrapped designs
    whose latency the estimate misses under either rule (benchmarks/estimates.py)."""
    return max(1, math.ceil(round(reference_cycles * clock_mhz / REFERENCE_CLOCK_MHZ, 9)))


def _weight_codes(shape: Shape, width: int) -> list[tuple[int, int]]:
    """(magnitude bits of the code, weights) of each octave of a kernel unit's weights at W bits
    (``Shape.weight_octaves``: W - 1 - d for the octave d under the top; a quantized model's weights
    keep their own bits at any W); none when its weights are not known."""
    code = _weight_type_bits(shape, width)
    return [(code - 1 - depth, count) for depth, count in enumerate(shape.weight_octaves) if count]


def accumulator_bits(shape: Shape, width: int) -> int:
    """Bits of a kernel unit's accumulator (hls4ml's accum_t): ``Shape.accum_bits``, else what hls4ml infers for an
    "auto" accumulator, as hetdeploy's units have (InferPrecisionTypes: the input's W, the weight type's bits, a
    carry bit for each doubling of the n_in products summed, and a sign bit; a 12-bit Dense 256 -> 10 with 12-bit
    weights sums in ap_fixed<33,13>)."""
    return shape.accum_bits or width + _weight_type_bits(shape, width) + math.ceil(math.log2(max(1, shape.n_in))) + 1


def _weight_type_bits(shape: Shape, width: int) -> int:
    """The bits of a kernel unit's weight type: its quantizer's (``Shape.weight_bits``, hls4ml's weight precision
    of a quantized layer, whatever the data's W: a binary input times 6-bit weights is 6-bit products), else W."""
    return shape.weight_bits or width


def distributed_arithmetic_lut(shape: Shape, width: int) -> int:
    """LUTs of a kernel unit's constant multiplications as da4ml lays them out (hls4ml's distributed_arithmetic):
    ``DA_COST_PER_DIGIT_BIT`` times each weight's canonical signed digits (about a third of its magnitude bits,
    plus one, for random codes) times the bits its products add on to the W-bit input (its magnitude bits)."""
    codes = _weight_codes(shape, width) or [(width - 1, shape.n_in * shape.n_out)]
    return round(DA_COST_PER_DIGIT_BIT * sum(count * (bits / 3 + 1) * (width + bits)
                                            for bits, count in codes if bits >= 0))


def ddr_cycles_per_vector(shape: Shape, width: int, ddr_bytes_per_cycle: float) -> int:
    """Cycles to read a kernel unit's weights once from DDR."""
    return math.ceil(shape.n_in * shape.n_out * element_bytes(width) / ddr_bytes_per_cycle)


def bram18_blocks(depth: int, bits: int, bound: bool = False) -> int:
    """BRAM18s an array of ``depth`` words of ``bits`` takes: the fewest over the shapes a BRAM18
    can take, blocks side by side for the width and stacked for the depth; none under
    BRAM_MIN_BITS (LUTRAM) or two words deep (registers) unless the HLS source ``bound`` it to BRAM."""
    if not bound and (depth <= 2 or depth * bits < BRAM_MIN_BITS):
        return 0
    return min(math.ceil(bits / wide) * math.ceil(depth / deep) for deep, wide in BRAM18_SHAPES)


def fifo_bram18(fifos: Sequence[tuple[int, int]], width: int) -> int:
    """BRAM18s of FIFOs of (pixels, channels) W-bit values, a pixel's channels a word."""
    return sum(bram18_blocks(pixels, channels * width) for pixels, channels in fifos)


def candidate_reuse_factors(shape: Shape) -> list[int]:
    if shape.kind != "kernel":
        return [1]
    return valid_reuse_factors(shape.n_in, shape.n_out)


def folding_options(shape: Shape, width: int, ddr_bytes_per_cycle: Optional[float] = None,
                    strategy: Optional[str] = None) -> list[Folding]:
    """A unit's foldings, least folded first: every reuse factor with the weights on chip, then (for a
    multiply-accumulate unit, given the DDR rate, under no strategy or Resource) the weights in DDR at the
    least reuse factor that the DDR keeps busy. ``strategy``: the unit's (STRATEGIES); None: by the reuse
    factor (``strategy_for``); a unit hls4ml computes only under Latency (``Shape.latency_only``): Latency."""
    strategy = "Latency" if shape.latency_only else strategy
    if strategy == DISTRIBUTED_ARITHMETIC:
        return [Folding(1, False, strategy)]
    if strategy == ENGINE:
        return [Folding(1, True, strategy)]
    options = [Folding(rf, False, strategy) for rf in candidate_reuse_factors(shape)]
    if shape.kind == "kernel" and ddr_bytes_per_cycle is not None and strategy != "Latency":
        options.append(ddr_folding(shape, width, ddr_bytes_per_cycle))
    return options


def ddr_folding(shape: Shape, width: int, ddr_bytes_per_cycle: float) -> Folding:
    """A multiply-accumulate unit with its weights in DDR, at the least reuse factor that the DDR keeps busy."""
    rate = ddr_cycles_per_vector(shape, width, ddr_bytes_per_cycle)
    valid = candidate_reuse_factors(shape)
    return Folding(next((rf for rf in valid if rf >= rate), valid[-1]), True)


def folded_estimate(shape: Shape, folding: Folding, width: int, ddr_bytes_per_cycle: Optional[float],
                    dsp_binding: tuple[int, int] = (DSP_MIN_WIDTH, DSP_MIN_CONSTANT_BITS),
                    products_registered: Optional[bool] = None) -> dict[str, int]:
    """``estimate`` of ``shape`` folded as ``folding``, under its io type."""
    return estimate(with_io_type(shape, folding.io_type), folding.reuse_factor, width,
                    ddr_bytes_per_cycle if folding.weights_in_ddr else None, strategy=folding.hls_strategy,
                    dsp_binding=dsp_binding, products_registered=products_registered)


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
                  io_fixed: Collection[int] = ()) -> Optional[list[Folding]]:
    """``_fold_for_rate_under`` the strategies the user pinned (the others by reuse factor), then each unit's
    strategy and io type ``by_cost`` (``distributed_arithmetic`` and ``io_fixed`` as there): the least cycles over
    each group's rate, then the least share of the budget (the fewest resources, as FINN's target_fps asks, BRAM
    counted in its share)."""
    widths = _per_unit(width, shapes)
    unit_estimate = _unit_estimates(shapes, widths, ddr_bytes_per_cycle)
    foldings = _fold_for_rate_under(shapes, budget, widths, groups, cycles, unit_estimate, pinned, strategies)
    if foldings is None:
        return None

    def missed_then_share(used: Sequence[dict[str, int]]) -> tuple[float, float]:
        missed = sum(max(0.0, sum(used[u]["latency_cycles"] for u in group) - allowed)
                     for group, allowed in zip(groups, cycles))
        return missed, _share(used, budget)

    return by_cost(foldings, shapes, widths, budget, unit_estimate, missed_then_share,
                   set(strategies or {}) | set(pinned or {}), ddr_bytes_per_cycle, distributed_arithmetic, io_fixed)


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
        return sum(e["latency_cycles"] for e in used), _units_bram18(used), _share(used, budget)

    pinned = pinned or {}
    foldings = by_cost(foldings, shapes, widths, budget, unit_estimate, latency_then_bram_then_share,
                       set(strategies or {}) | set(pinned), ddr_bytes_per_cycle, distributed_arithmetic, io_fixed)
    on_engine = Folding(1, True, ENGINE)

    def cycles(u: int, folding: Folding) -> int:
        return unit_estimate(u, folding)["latency_cycles"]

    movable = [u for u in engine if u not in strategies and u not in pinned]
    for u in movable:  # the engine takes nothing of the budget: a unit it runs faster goes to it
        if cycles(u, on_engine) < cycles(u, foldings[u]):
            foldings[u] = on_engine
    # a unit on the engine unfolds back to hls4ml only to a faster folding, if that fits (``_give_back``)
    options = [[pinned[u]] if u in pinned else
               [o._replace(io_type=f.io_type) for o in folding_options(s, widths[u], ddr_bytes_per_cycle, f.strategy)]
               if f.strategy != ENGINE or u in strategies else
               [o for o in folding_options(s, widths[u], ddr_bytes_per_cycle) if cycles(u, o) < cycles(u, f)] + [f]
               for u, (s, f) in enumerate(zip(shapes, foldings))]
    choice = [o.index(f) for o, f in zip(options, foldings)]
    return _give_back(options, choice, budget, lambda u, k: unit_estimate(u, options[u][k]))


def takes_distributed_arithmetic(shape: Shape) -> bool:
    """Whether ``by_cost`` may weigh hls4ml's distributed_arithmetic for a unit: a multiply-accumulate unit whose
    weights are a quantizer's codes (da4ml builds each constant's shifts and adds from its exact code; float
    weights are not what it is for), which hls4ml 1.3 computes right under it (not a depthwise convolution) and
    whose solve takes at most about half a minute (DA_MAX_INPUTS, DA_MAX_PRODUCTS)."""
    return (shape.kind == "kernel" and shape.weight_bits is not None and not shape.latency_only
            and shape.n_in <= DA_MAX_INPUTS and shape.n_in * shape.n_out <= DA_MAX_PRODUCTS)


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
        if shape.kind == "kernel" and u not in fixed:
            weighed = list(FOLDED_STRATEGIES) if foldings[u].reuse_factor > 1 else []
            if distributed_arithmetic and takes_distributed_arithmetic(shape):
                weighed.append(DISTRIBUTED_ARITHMETIC)
            # folding_options keeps a latency-only unit under Latency
            options = [o for strategy in weighed for o in folding_options(shape, widths[u], ddr_bytes_per_cycle,
                                                                          strategy)]
        # io_type None: the shape's own, the only one distributed_arithmetic takes (its convolutions are verified
        # streamed only, tests/test_open_synth.py); the engine has no hls4ml io type
        if u not in io_fixed and takes_either_io_type(shape) and foldings[u].strategy != ENGINE:
            options = [o._replace(io_type=None if io == IO_TYPES[shape.streamed] else io)
                       for o in [foldings[u], *options] for io in IO_TYPES
                       if o.strategy != DISTRIBUTED_ARITHMETIC or io == IO_TYPES[shape.streamed]]
        for option in options:
            trial = unit_estimate(u, option)
            if any(totals[k] - used[u][k] + trial[k] > budget.get(k, 0) for k in RESOURCES):
                continue
            trial_cost = cost(used[:u] + [trial] + used[u + 1:])
            if trial_cost < best:
                totals = {k: totals[k] - used[u][k] + trial[k] for k in RESOURCES}
                foldings = foldings[:u] + [option] + foldings[u + 1:]
                used, best = used[:u] + [trial] + used[u + 1:], trial_cost
    return foldings


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


def _share(used: Sequence[dict[str, int]], budget: dict[str, int]) -> float:
    """The sum over resources of the share of ``budget`` the units take together."""
    return sum(sum(e[k] for e in used) / max(1, budget.get(k, 0)) for k in RESOURCES)


def _fold_for_rate_under(shapes: Sequence[Shape], budget: dict[str, int], widths: Sequence[int],
                         groups: Sequence[Sequence[int]], cycles: Sequence[float],
                         unit_estimate: Callable[[int, Folding], dict[str, int]],
                         pinned: Optional[dict[int, Folding]] = None,
                         strategies: Optional[dict[int, str]] = None) -> Optional[list[Folding]]:
    """Foldings, one per unit, with the fewest resources that let each group of units (an FPGA
    subfunction, whose units run one after another) take at most ``cycles[g]`` cycles a sample, as
    FINN's ``target_fps`` folds; None when even the most folded design does not fit ``budget``.
    A group that cannot reach its cycles within the budget ends as unfolded as the budget lets it
    (the caller says so).

    Greedy, from the most folded design (weights on chip): while a group takes more cycles than it
    may, unfold the unit of it whose next step saves the most cycles per share of the budget it adds
    and still fits the budget; then fold back, most resources freed first, what the rate lets fold.
    ``unit_estimate``: unit u's estimate under a folding (pinned ones with their weights in DDR at the
    FPGA's DDR rate); ``strategies`` as ``_fold_under``'s."""
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
        while sum(current[u]["latency_cycles"] for u in group) > allowed:
            best, best_gain = None, 0.0
            totals = {k: sum(e[k] for e in current) for k in RESOURCES}
            for u in (u for u in group if choice[u] > 0):
                nxt = estimate_of(u, choice[u] - 1)
                if any(totals[k] - current[u][k] + nxt[k] > budget.get(k, 0) for k in RESOURCES):
                    continue  # the chip holds no less folded a unit
                saved = current[u]["latency_cycles"] - nxt["latency_cycles"]
                added = sum(max(0, nxt[k] - current[u][k]) / max(1, budget.get(k, 0)) for k in RESOURCES)
                if saved > 0 and saved / max(added, 1e-9) > best_gain:
                    best, best_gain = u, saved / max(added, 1e-9)
            if best is None:
                break
            choice[best] -= 1
            current[best] = estimate_of(best, choice[best])
        # The steps are coarse: fold back what the rate lets fold, the most resources freed first.
        while sum(current[u]["latency_cycles"] for u in group) <= allowed:
            took = sum(current[u]["latency_cycles"] for u in group)
            steps = []
            for u in (u for u in group if choice[u] + 1 < len(options[u])):
                more = estimate_of(u, choice[u] + 1)
                freed = sum(max(0, current[u][k] - more[k]) / max(1, budget.get(k, 0)) for k in RESOURCES)
                if freed > 0 and took - current[u]["latency_cycles"] + more["latency_cycles"] <= allowed:
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
    design still fits, the step that saves the most cycles first (weights come back on chip whenever
    they fit, even at some cycles: DDR traffic competes with the host's)."""
    pinned, strategies = pinned or {}, strategies or {}
    options = [[pinned[u]] if u in pinned else folding_options(s, widths[u], ddr_bytes_per_cycle, strategies.get(u))
               + ([Folding(1, True, ENGINE)] if u in engine else []) for u, s in enumerate(shapes)]

    def estimate_of(u: int, k: int) -> dict[str, int]:
        return unit_estimate(u, options[u][k])

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
    return _give_back(options, choice, budget, estimate_of)


def _give_back(options: list[list[Folding]], choice: list[int], budget: dict[str, int],
               estimate_of: Callable[[int, int], dict[str, int]]) -> list[Folding]:
    """The foldings ``choice`` picks of each unit's ``options`` (least folded first), unfolded one step at a
    time where the units still fit ``budget``, the step that saves the most cycles first (the folding's
    steps are coarse)."""
    choice = list(choice)
    current = [estimate_of(u, c) for u, c in enumerate(choice)]
    while True:
        totals = {k: sum(e[k] for e in current) for k in RESOURCES}
        steps = []
        for u in range(len(options)):
            if choice[u] > 0:
                previous = estimate_of(u, choice[u] - 1)
                if all(totals[k] - current[u][k] + previous[k] <= budget.get(k, 0) for k in RESOURCES):
                    steps.append((current[u]["latency_cycles"] - previous["latency_cycles"], -u, previous))
        if not steps:
            return [o[c] for o, c in zip(options, choice)]
        _, u, previous = max(steps)
        choice[-u] -= 1
        current[-u] = previous
