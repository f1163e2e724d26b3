"""What a unit costs in hardware: the constants the estimates were set on, the ``Shape`` of a unit they read,
and the arithmetic every kind of unit shares (``kinds``). The model they make up is the package's doc
(``units``)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional, Sequence

from ...core.board import LAYER_ENGINE_ACTIVATIONS, LAYER_ENGINE_FUSED_OPS, RELAYOUT_OPS, VITIS_HLS
from ...core.graph import QUANTIZER_OPS

RESOURCES = ("dsp", "bram18", "lut", "ff")
# the parts of a unit's resources (``units.resource_parts``), in the order a plan lists them
RESOURCE_PARTS = ("arithmetic", "control", "input registers", "window registers", "line buffers", "FIFOs",
                  "lookup tables")
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
# multiply-accumulators (``EngineSize``) that every such unit of the subfunction shares, one unit after another,
# its weights read from DDR once a run (a Conv, Gemm or MatMul, BatchNormalizations, a ReLU: ``engine_refusal``)
ENGINE = "Engine"
# hetdeploy's XNOR-popcount kernel of a layer of signs (hls/xnor_popcount.h, the dense kernel of an hls4ml Dense or
# streamed convolution): ``Shape.bipolar``
XNOR_POPCOUNT = "XnorPopcount"
STRATEGIES = ("Latency", "Resource", DISTRIBUTED_ARITHMETIC, ENGINE, XNOR_POPCOUNT)
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
LUTRAM_DEPTH = 64  # the words a LUT6 holds a bit of as a ROM (a 64 x 1 distributed ROM)
# FF: a combinational hls4ml design's control state (its io_parallel MaxPooling and Dense(1 -> 64) + ReLU
# baselines take exactly 16 FF an input value and 2 more)
UNIT_CONTROL_LUT, UNIT_CONTROL_FF = 300, 2
# The adder tree of a dense product: this many levels a cycle at the reference clock (hls4ml's Latency designs
# at its default 5 ns); a multiplication takes about as long as these levels (one cycle of the reference clock).
ADDER_LEVELS_PER_CYCLE = 3
REFERENCE_CLOCK_MHZ = 200.0
# The engine's size: its lanes (output channels computed at once, a multiply-accumulator each, ``EngineSize``)
# and the values each takes a cycle, chosen for the FPGA by the folding (``engine_sizes``). It may take these shares
# of the FPGA's DSP, BRAM18 and URAM budgets: the most multiply-accumulators a cycle whose multipliers and weight
# buffers fit them, fewer where the other units then do not fit (the folding's); the rest is the hls4ml units' and
# the activations' (URAM the memory plan's level after BRAM). Three quarters of the DSPs: a CNN's layers are mostly
# the engine's (at half, the KV260's ResNet-50 engine at two pixels at once had 68 lanes, at three quarters 104; at
# nine tenths the latency policy moved benchmarks/graphs.py's DenseNet-121's Concats and BatchNormalizations from
# the KV260's FPGA to its A53s, and with them most of its MACs). The partition prices the engine in these shares;
# plan_model.folded_plan folds its partition once more with all of the DSP budget the engine's, and keeps the
# faster plan (ResNet-50 at 8 bits on the KV260: 128 lanes, not 104)
ENGINE_SHARES = {"dsp": 0.75, "bram18": 0.75, "uram": 0.75}
# ... and the plan is folded again with the engine in these shares of the URAM where it took more
# (plan_model.folded_plan), the faster kept: the URAM its weight buffers leave is the memory plan's, after BRAM, and
# maps it holds need not spill to DDR (ResNet-50 at 16 bits on the ZCU104: 25.10 ms at 0.6, not 25.54; at 8 bits on
# the KV260 14.55 at 0.3, not 15.45; a lower share may cost lanes where the BRAM cannot take their buffers)
ENGINE_URAM_SHARES = (0.6, 0.3)
# The subfunction's memories (hls/arena.h) are arrays of words of this many bytes (its WORD_BYTES), each element in
# a lane of ``element_bytes``; a unit moves whole words, ARENA_PORTS a cycle (a true dual-port BRAM gives two
# accesses, shared by a unit's reads and writes). 128 bits: a Zynq UltraScale+ HP port's (UG1085), so that a DDR
# word is one beat, and twice the values a cycle of a memory's ports that 64-bit words gave the engine, whose layers
# those ports bound (a 1 x 1 convolution's output words, a residual's words beside them)
ARENA_WORD_BYTES = 16
ARENA_PORTS = 2
# The engine's weights port is at most this many words wide (512 bits: the widest AXI data bus of the boards'
# memory ports, an Alveo card's DDR; a Zynq UltraScale+ HP port is 128 bits, a Zynq-7000's 64: UG1085, UG585)
ENGINE_PORT_MAX_WORDS = 512 // (8 * ARENA_WORD_BYTES)
# ... and at most this many m_axi bundles (engine.h's w0 .. w3), a DDR port each
ENGINE_PORT_MAX_BUNDLES = 4
# The engine takes a layer whose window its buffers hold at one value a cycle in this many lanes (``engine_holds``)
# A dense layer's window takes at most this many values of the lanes' buffers (``engine_window``): one longer runs in
# chunks of the buffers' depth (hls/engine.h), each weight read once a sample either way, so a deeper buffer would take
# lanes and gain nothing (VGG-19's first Gemm of 25,088 inputs: 50 KB a lane at 16 bits, no engine the KV260 holds)
ENGINE_DENSE_CHUNK = 4096
ENGINE_HOLD_LANES = 32
# A URAM288 block: 4,096 words of 72 bits, two ports (UG573); the engine puts two lanes' weight buffers in one, a
# port each (Vitis HLS's ram_t2p on URAM, UG1399), where a lane's entries are at most half its depth
URAM_DEPTH, URAM_BITS = 4096, 72
# A lane's control and logic: hetdeploy's model of hls/engine.h, not a synthesis result (no HLS tool here): a lane's
# 64-bit sum and its product's register, its rounding and saturation; the control's address arithmetic and loop
# counters
ENGINE_CONTROL_LUT, ENGINE_CONTROL_FF, ENGINE_CONTROL_DSP = 1500, 1500, 4
# An engine that runs a depthwise convolution has its loop too (engine_depthwise_accumulate): a word's values of
# multipliers, and a lane's second adder of its 64-bit sum and the selection of its weight (LUTs a lane)
ENGINE_DEPTHWISE_LANE_LUT = 96
ENGINE_LANE_LUT, ENGINE_LANE_FF = 64, 64
# An engine of two pixels at once shares a pair's windows among the tiles it holds (engine_shares_windows): a lane's
# biases of those tiles (ENGINE_MAX_TILES slots of 64 bits: a LUT6 a bit, 64 deep, LUTs a lane), the tile before's
# sums (a register a lane a pixel, as ENGINE_LANE_FF) and the window buffer, ENGINE_SHARED_STEPS words a pixel in
# LUTRAM of a write port and a read port (a RAM64X1D, two LUT6s, a bit of 64 words: LUTs a word)
ENGINE_BIAS_SLOTS_LUT = 64
ENGINE_WINDOW_WORD_LUT = 2 * 8 * ARENA_WORD_BYTES // 64
# The depths of the engine's pipelined loops (hls/engine.h's ENGINE_MOVE_DEPTH and ENGINE_MAC_DEPTH): a word
# moved (read, then written), and a window value's (its address, the read, the product, the sum): hetdeploy's
# model of the schedule, not a synthesis result
ENGINE_MOVE_DEPTH, ENGINE_MAC_DEPTH = 2, 6
# hls/engine.h's ENGINE_MAX_TILES: the most tiles of a layer whose weights (and biases) its buffers hold at once
ENGINE_MAX_TILES = 64
# ... and ENGINE_SHARED_STEPS: the steps of a pair's windows its window buffer keeps (engine_shares_windows)
ENGINE_SHARED_STEPS = 512
# An engine of two pixels at once streams a layer's weights from DDR while it computes (hls/engine.h's engine_stream)
# where the layer's pairs of output pixels are at most one of ENGINE_STREAM_PAIRS (the most that fits the LUTs:
# ResNet-50's 14 x 14 maps, 98 pairs, or its 7 x 7 ones, 25): each lane's sums of that many pairs in LUTRAM (a
# RAM32M, four LUT6s, 6 bits of 32 words: LUTs a bit of a pair's sums, as wide as a window of the engine's largest at
# ``width``-bit products needs) and a step's weights and the next step's in registers (ENGINE_STREAM_ENTRY_FF a
# lane); a step at least ENGINE_STREAM_MIN_SPAN iterations (its MAC depth: a pair's kept sums read back no sooner
# than they are written)
ENGINE_STREAM_PAIRS = (128, 64, 32)
ENGINE_STREAM_LUT_A_BIT = 4 / 6
ENGINE_STREAM_ENTRY_FF = 2 * 64
ENGINE_STREAM_MIN_SPAN = ENGINE_MAC_DEPTH
# The top's LRN (arena.h's lrn): a float power a value, pipelined at II 1 (its log, product and exp), in these
# resources and this pipeline's depth: hetdeploy's model, not checked against a synthesis report
LRN_POWER_DSP, LRN_POWER_LUT, LRN_POWER_FF, LRN_POWER_DEPTH = 20, 6000, 8000, 40
# The top's window ops (arena.h's window_op): the columns of a window its sliding form keeps in a ring, the outputs of
# a row it reduces at a time, and its pipelined loops' depths (a column's: the address, the read, the reduction, the
# ring; a move's): hetdeploy's model of the schedule
WINDOW_RING, WINDOW_CHUNK, WINDOW_DEPTH, WINDOW_MOVE_DEPTH = 16, 256, 4, 2
# The top's Quant (arena.h's quantize): a product by a 40-bit constant (a value by 1 / scale, a code by the scale)
# takes two DSPs (a DSP48's 25- or 27-bit port twice); hetdeploy's model, not a synthesis report
QUANT_DSPS_A_PRODUCT = 2
# Ops an engine unit may end with after its main node (BatchNormalizations are folded into its weights), and its
# last op, its output stage
ENGINE_FUSED_OPS = LAYER_ENGINE_FUSED_OPS
ENGINE_ACTIVATIONS = LAYER_ENGINE_ACTIVATIONS
# Softmax's pipeline after its exponentials' table reads (the sum, the inverse's read, the products): cycles at
# the reference clock
SOFTMAX_REFERENCE_CYCLES = 2
# Vitis HLS builds each of a Softmax's tables in twice the BRAM18s its entries need: set on the hls4ml tutorial's
# jet taggers under Vitis HLS 2024.1 (8 for 5 outputs), where Vivado HLS 2019.2 and 2020.1 build them, and both
# tools the table activations' tables, in what the entries need; reports held out agree (a QKeras 400-10-10-10 MLP
# under 2023.2: 12 for 10; a streamed Conv1D under 2024.1). Vitis HLS 2025.1 and 2025.2 reports (an AXI-wrapped
# iris MLP, a streamed jet tagger) show the single figure; hetdeploy's scripts are written for 2022.1 to 2023.2.
VITIS_SOFTMAX_TABLE_BRAM18 = 2
# band_out's II a value where a row is no whole words: the target word read, its lane set, the word written back
BAND_VALUE_II = 3
# arena.h's relayout: its loop's depth (a step's entry read, the input word read, the output word written) and the
# bits of a step in its table's ROM (relayout_step: two ints, a register's char and a short a lane)
RELAYOUT_DEPTH = 3
RELAYOUT_STEP_BITS = 2 * 32 + 8 + 16 * ARENA_WORD_BYTES
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


@dataclass(frozen=True)
class EngineSize:
    """An engine's lanes, of which ``uram_lanes`` (an even number) hold their weights in URAM, two a block, the
    others in BRAM, the values each lane takes a cycle, and the words its weights port reads a cycle (the board's
    DDR ports': ``engine_ports``), one word to each of as many lanes."""

    lanes: int
    uram_lanes: int
    vector: int
    port_words: int = 1
    pixels: int = 1  # output pixels at once: 1, or 2 (hls/engine.h's engine_pairs; each lane's multipliers twice)
    bundles: int = 1  # the m_axi bundles its weights port is, port_words / bundles words each, a DDR port each
    window: int = 0  # the largest window its buffers hold (values: engine_window), their depth
    # at two pixels, whether its pairs share their windows among the tiles it holds (hls/engine.h's SHARED: its
    # window buffer, bias slots and kept sums besides)
    shared: bool = False
    # at two pixels, the most pairs of a layer whose weights it streams (hls/engine.h's STREAM: engine_streams); 0:
    # none
    stream: int = 0


@dataclass(frozen=True)
class Shape:
    """What the estimates need of a unit's main node."""

    # 'kernel' (multiply-accumulate layer), 'window' (hls4ml's pooling), 'gather' (the top's window op), 'add' (the
    # top's Add of n_in buffers), 'concat' (the top's Concat), 'affine' (the top's BatchNormalization), 'quant' (the
    # top's Quant),
    # 'elementwise', 'data' (the top's relayout)
    kind: str  # the name of its kind (kinds.KINDS)
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
    # run in bands: a band's input rows and the values of each, and its output rows and theirs (``banded``)
    band_rows: tuple[int, ...] = ()
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
    # a streamed window layer's (a convolution's, a pooling's) input map as its loop reads it, a pixel an iteration
    # (rows, columns, channels; hls4ml's conv/pooling stream functions' ReadInputHeight x ReadInputWidth loops), and
    # whether hls4ml pads it first in a ZeroPadding layer of its own (a padded convolution); () for other layers
    input_map: tuple[int, ...] = ()
    padded: bool = False
    # its window over that map: (k_h, k_w, s_h, s_w, pad top, left, bottom, right); a 1-D one a row of one
    window_geometry: tuple[int, ...] = ()
    # a window op the top reduces: its geometry (plan.Window.values, arena.h's window_geometry)
    pool: tuple[int, ...] = ()
    column_dilation: int = 1  # a convolution's, along its rows
    # on the engine, its size (``engine_sizes``, the folding's choice)
    engine: EngineSize = EngineSize(ENGINE_HOLD_LANES, 0, 1)
    # a dense layer or an unpadded convolution whose inputs and weights are each -1 or +1
    # (``graph.Node.bipolar_weights``, its input a BipolarQuant's of scale 1): its products are XNORs of sign bits
    # (XNOR_POPCOUNT may compute it)
    bipolar: bool = False
    # an Add of another map of its output's shape ends it before its activation (a residual connection the engine
    # adds as it writes its outputs: ``residual_input``)
    residual: bool = False
    # a relayout the top moves: its chain of nodes as planning reads it (relayout.chain_of; () where it cannot)
    relayout: tuple = ()

    def replaced(self, **changes) -> "Shape":
        """``dataclasses.replace(self, **changes)`` without running ``__init__`` over every field again: planning
        replaces shapes hundreds of thousands of times (DenseNet-121 on every board), about 13 us each that way, 2
        this way."""
        unknown = changes.keys() - self.__dataclass_fields__.keys()
        if unknown:
            raise TypeError(f"Shape has no field {', '.join(sorted(unknown))}")
        shape = object.__new__(Shape)
        shape.__dict__.update(self.__dict__, **changes)
        return shape


def valid_reuse_factors(n_in: int, n_out: int) -> list[int]:
    """The reuse factors hls4ml 1.3 accepts for an n_in x n_out layer (its _validate_reuse_factor)."""
    return list(_valid_reuse_factors(n_in, n_out))


@functools.cache  # the folding asks it of every unit at every step
def _valid_reuse_factors(n_in: int, n_out: int) -> tuple[int, ...]:
    total = n_in * n_out
    result = []
    for rf in range(1, int(math.isqrt(total)) + 1):
        if total % rf == 0:
            result += [rf, total // rf] if rf != total // rf else [rf]
    return tuple(sorted(rf for rf in result if _hls4ml_accepts(n_in, n_out, rf)))


def _hls4ml_accepts(n_in: int, n_out: int, rf: int) -> bool:
    limit = math.ceil(n_in * n_out / min(n_in, rf))
    return (limit % n_out == 0 or rf >= n_in) and (rf % n_in == 0 or rf < n_in) and (n_in * n_out) % rf == 0


def element_bytes(width: int) -> int:
    """Bytes a W-bit fixed-point element takes in any of a subfunction's memories: the next power of
    two of whole bytes (a lane of an arena word; how an m_axi port lays out an array of them)."""
    return 1 << max(0, math.ceil(math.log2(-(-width // 8))))


def word_values(width: int) -> int:
    """The ``width``-bit values an arena word holds (arena.h's lane<T>::per_word)."""
    return ARENA_WORD_BYTES // element_bytes(width)


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


def bound_products(count: int, width: int, bits: int, dsp_binding: tuple[int, int]) -> tuple[int, int]:
    """(DSPs, LUTs) of ``count`` products of ``width``-bit data by constants of ``bits`` magnitude bits, as synthesis
    binds them: under either of ``dsp_binding``'s least data and constant bits, shifts and adds in LUTs; else a DSP
    each (two past 18 bits)."""
    if width < dsp_binding[0] or bits < dsp_binding[1]:
        return 0, count * width * bits // 2
    return count * dsps_a_product(width), 0


def engine_cycles(window: int, filters: int, pixels: int, width: int, lanes: int, vector: int = 1,
                  channels: int = 0, groups: int = 1, port_words: int = 1, row: int = 0,
                  staging: Sequence[int] = (), pixels_at_once: int = 1, buffer_window: int = 0,
                  output_in_ddr: bool = False, residual: bool = False, shared: bool = False,
                  stream: int = 0) -> dict[str, int]:
    """hls/engine.h's cycles for a layer (``held_cycles``, its weights held in the lanes' buffers), or, on an engine
    that streams the weights of layers of at most ``stream`` pairs of output pixels, where the layer may
    (``engine_streams``) and that takes fewer cycles with its output on chip (the build's choice, made before its
    output's place is known), ``streamed_cycles``; ``streamed``: which."""
    held = dict(window=window, filters=filters, pixels=pixels, width=width, lanes=lanes, vector=vector,
                channels=channels, groups=groups, port_words=port_words, row=row, staging=staging,
                pixels_at_once=pixels_at_once, buffer_window=buffer_window, residual=residual, shared=shared)
    if not engine_streams(window, filters, pixels, width, lanes, vector, channels, groups, port_words, row, staging,
                          pixels_at_once, buffer_window, stream):
        return held_cycles(**held, output_in_ddr=output_in_ddr) | {"streamed": False}
    streamed = dict(window=window, filters=filters, pixels=pixels, width=width, lanes=lanes, vector=vector,
                    port_words=port_words, residual=residual)
    on_chip = {True: streamed_cycles(**streamed, output_in_ddr=False), False: held_cycles(**held)}
    pays = on_chip[True]["cycles"] < on_chip[False]["cycles"]
    if not output_in_ddr:
        return on_chip[pays] | {"streamed": pays}
    return (streamed_cycles(**streamed, output_in_ddr=True) if pays
            else held_cycles(**held, output_in_ddr=True)) | {"streamed": pays}


def engine_streams(window: int, filters: int, pixels: int, width: int, lanes: int, vector: int, channels: int,
                   groups: int, port_words: int, row: int, staging: Sequence[int], pixels_at_once: int,
                   buffer_window: int, stream: int) -> bool:
    """Whether hls/engine.h's engine_stream may run a layer (``engine_cycles``' arguments): on an engine of two pixels
    at once that streams layers of at most ``stream`` pairs, a layer of one group of whole words of channels (an entry
    of ``vector`` values a DDR word of weights), not walked along its rows, its input on chip, its tiles' outputs
    whole words, every tile's filters beginning a read of the port, its window no wider than the buffers' (the kept
    sums' bits), its pairs at most ``stream``."""
    per_word = word_values(width)
    return bool(stream) and pixels_at_once == 2 and groups == 1 and not row and not staging and \
        vector == per_word and (channels or window) % vector == 0 and lanes % per_word == 0 and \
        filters % per_word == 0 and lanes % port_words == 0 and window <= buffer_window and -(-pixels // 2) <= stream


def streamed_cycles(window: int, filters: int, pixels: int, width: int, lanes: int, vector: int, port_words: int,
                    residual: bool, output_in_ddr: bool) -> dict[str, int]:
    """hls/engine.h's engine_stream's cycles for a layer (``engine_streams``): per tile of ``lanes`` filters, a cycle,
    its biases (a read each for ``port_words`` filters), its first step's words (as many reads), one loop of the
    window's steps (``vector`` values each), a step as many iterations as the most of the tile's reads, its pairs and
    ENGINE_STREAM_MIN_SPAN, then one loop of its pairs' output words, ``written`` an iteration (``held_cycles``)."""
    per_word = word_values(width)
    written = 1 if output_in_ddr or residual else 2
    steps, pairs = window // vector, -(-pixels // 2)
    cycles = weight_words = weight_cycles = 0
    for first in range(0, filters, lanes):
        tile = min(lanes, filters - first)
        reads = weight_reads(first, tile, port_words)
        span = max(reads, pairs, ENGINE_STREAM_MIN_SPAN)
        cycles += 1 + 2 * loop_cycles(reads, ENGINE_MOVE_DEPTH) + loop_cycles(steps * span, ENGINE_MAC_DEPTH) \
            + loop_cycles(pairs * -(-2 * (tile // per_word) // written), ENGINE_MOVE_DEPTH)
        weight_words += reads * port_words * (steps + 1)
        weight_cycles += reads * (steps + 1)
    return {"cycles": cycles, "weight_words": weight_words, "weight_cycles": weight_cycles}


def held_cycles(window: int, filters: int, pixels: int, width: int, lanes: int, vector: int = 1,
                channels: int = 0, groups: int = 1, port_words: int = 1, row: int = 0,
                staging: Sequence[int] = (), pixels_at_once: int = 1, buffer_window: int = 0,
                output_in_ddr: bool = False, residual: bool = False, shared: bool = False) -> dict[str, int]:
    """hls/engine.h's cycles for a layer of ``filters`` output channels over ``pixels`` output pixels, ``window``
    products each over ``channels`` input channels of its group (0: the window's), in ``groups`` groups, its weights and
    values ``width`` bits, on ``lanes`` x ``vector`` multipliers whose weights port reads ``port_words`` DDR words a
    cycle: its loops as C-simulation counts them (engine_counted), each pipelined loop's iterations at II 1 and its
    depth once, and a cycle an iteration of the loops around them. The tiles of a group's filters, ``lanes`` at a time,
    in groups of as many as the lanes' buffers hold at once (their depth: a ``buffer_window`` of values, the engine's
    largest; ``engine_resident``) where the input is staged or the pairs share their windows (an engine ``shared``),
    else one: per group, each tile's weights (its filters', a word of ``port_words`` filters' windows a read:
    ``weight_reads``); then per pass of pixels, each tile's biases (a read each for ``port_words`` filters) and its
    pixels' windows, ``vector`` values an iteration when the channels are a multiple of it (else one), or, where the
    engine walks the window along its rows (``row``: a row's values, ``engine_row_values``), a row's values padded to
    whole words of weights ``vector`` an iteration after one iteration reading the row's first word. Output words are
    written two an iteration where the iteration reads nothing (one where the output lies in DDR, ``output_in_ddr``: its
    one port; one, its residual's word read beside it, where the layer adds a ``residual``). Where every tile's outputs
    are whole words (the lanes and a group's filters multiples of a word's outputs) one loop a pixel of a window's
    iterations, the previous pixel's words written during it a word each (none where a residual is added), then its
    words past them, then the pass's last pixel's words, or, on an engine of two pixels at once (``pixels_at_once``)
    where that is shorter (``engine_pairs``), one loop of a window's iterations and both pixels' words a pair of pixels
    (the pass's last alone where its pixels are odd); else per pixel a cycle, the window, then the words its outputs lie
    in, one an iteration (two cycles each where a residual's word is read beside the shared word). A depthwise
    convolution (a group a channel) whose channels and lanes are whole words: ``lanes`` channels a tile, a lane each, a
    pixel's window place after place, each place's input words of the tile one an iteration (of both pixels of a pair),
    its output words written as above. Where a pair's windows are shared among the group's tiles
    (``engine_shares_windows``, ``engine_group_shares``): each pass, the tiles' biases, then one loop of its pairs,
    each the first tile's steps (at least ENGINE_MAC_DEPTH iterations), then each other tile's, as long as the tile
    before's words where they are more, then the last tile's words. The
    pixels in one pass; or, where its input is staged from DDR (``staging``: each output row's staging cycles,
    ``staging_cycles``), a pass a row of output pixels, the row's staging, then each tile's pixels of the row.
    ``weight_words``: the DDR words of weights and biases it reads."""
    per_word = word_values(width)
    written = 1 if output_in_ddr or residual else 2  # output words an iteration that reads nothing
    whole_steps = (channels or window) % vector == 0  # a step a group of ``vector`` channels (else one value)
    steps = window // vector if whole_steps else window
    stored = stored_window(window, row, width)
    if row:  # each of its rows: its first word's iteration, then its padded values ``vector`` an iteration
        rows = window // row
        steps = rows * (1 + stored // rows // vector)
    group_filters = filters // groups
    aligned = lanes % per_word == 0 and group_filters % per_word == 0
    depthwise = groups == filters > 1 and channels == 1 and filters % per_word == 0 and lanes % per_word == 0
    filter_words = -(-stored // per_word)  # each filter's window in words of its own
    filter_entries = filter_words * (per_word // vector)
    passes = list(staging) or [0]  # each pass's staging cycles
    pass_pixels = pixels // len(passes)
    shares = engine_shares_windows(shared and pixels_at_once == 2, aligned, depthwise, bool(row), groups,
                                   whole_steps, steps, lanes // per_word, written, residual)
    resident = engine_resident(bool(staging), shares, -(-buffer_window // per_word) * (per_word // vector),
                               filter_entries)
    cycles = weight_words = weight_cycles = 0
    chunk_words = -(-buffer_window // per_word)  # the lanes' buffers' words
    if buffer_window and filter_words > chunk_words:  # a dense layer deeper than them: in chunks
        return _chunked_cycles(window, filters, vector, channels, port_words, lanes, per_word, chunk_words,
                               filter_words, staging, residual)
    firsts = range(0, filters, lanes) if depthwise else [g * group_filters + t for g in range(groups)
                                                          for t in range(0, group_filters, lanes)]
    tile_filters = [min(lanes, filters - first) if depthwise else min(lanes, group_filters - first % group_filters)
                    for first in firsts]
    tiles = [(first, tile, weight_reads(first, tile, port_words)) for first, tile in zip(firsts, tile_filters)]
    for held in (tiles[k:k + resident] for k in range(0, len(tiles), resident)):
        cycles += 1
        for _, _, reads in held:  # its weights into its slot
            cycles += 1 + loop_cycles(reads * filter_entries, ENGINE_MOVE_DEPTH)
            weight_words += reads * port_words * filter_words
            weight_cycles += reads * filter_entries
        cycles += sum(1 + staged for staged in passes)
        full, last = (-(-2 * (tile // per_word) // written) for tile in (lanes, held[-1][1]))
        if shares and engine_group_shares(len(held), steps, full):  # each pass: the tiles' biases, one loop of pairs
            for _, _, reads in held:
                cycles += len(passes) * (1 + loop_cycles(reads, ENGINE_MOVE_DEPTH))
                weight_words += len(passes) * reads * port_words
                weight_cycles += len(passes) * reads
            pair_span = max(steps, ENGINE_MAC_DEPTH) + (len(held) - 1) * max(steps, full) + last
            cycles += len(passes) * loop_cycles(-(-pass_pixels // 2) * pair_span, ENGINE_MAC_DEPTH)
            continue
        for first, tile, reads in held:  # each pass's pixels of it, after its biases
            cycles += len(passes) * (1 + loop_cycles(reads, ENGINE_MOVE_DEPTH))
            weight_words += len(passes) * reads * port_words
            weight_cycles += len(passes) * reads
            outputs = tile // per_word  # (where they are whole words)
            pixel_steps = window * tile // per_word if depthwise else steps  # (a depthwise tile's places' words)
            if (depthwise or aligned) and pixels_at_once == 2 and engine_pairs(pixel_steps, outputs, written,
                                                                                residual):
                cycles += len(passes) * loop_cycles(-(-pass_pixels // 2) * (pixel_steps + -(-2 * outputs // written)),
                                                    ENGINE_MAC_DEPTH)
            elif depthwise or aligned:
                overlap = 0 if residual else min(outputs, pixel_steps)  # the words written during the next window
                span = pixel_steps + -(-(outputs - overlap) // written)
                cycles += len(passes) * (loop_cycles(pass_pixels * span, ENGINE_MAC_DEPTH)
                                         + loop_cycles(-(-outputs // written), ENGINE_MOVE_DEPTH))
            else:
                shared = _output_words(first, tile, filters, pixels, per_word)  # (each read, then written)
                ii = 2 if residual else 1  # its residual's word read too: two reads and a write a word
                cycles += pixels * (1 + loop_cycles(steps, ENGINE_MAC_DEPTH)) + ii * shared \
                    + pixels * (ENGINE_MOVE_DEPTH - ii)
    return {"cycles": cycles, "weight_words": weight_words, "weight_cycles": weight_cycles}


def _chunked_cycles(window: int, filters: int, vector: int, channels: int, port_words: int, lanes: int,
                    per_word: int, chunk_words: int, filter_words: int, staging: Sequence[int], residual: bool
                    ) -> dict[str, int]:
    """``engine_cycles`` of a dense layer whose ``filter_words`` words a filter are more than the lanes' buffers'
    ``chunk_words`` (hls/engine.h's dense_tiles): its input staged once where it lies in DDR; each tile of ``lanes``
    filters, its biases, then each chunk of its window, the chunk's weights, then its values ``vector`` an iteration
    (one where the channels are no multiple of it), then the words its outputs lie in, one an iteration (two cycles
    each where a residual's word is read beside the shared word)."""
    step = vector if (channels or window) % vector == 0 else 1
    cycles = sum(1 + staged for staged in staging)
    weight_words = weight_cycles = 0
    for first in range(0, filters, lanes):
        tile = min(lanes, filters - first)
        reads = weight_reads(first, tile, port_words)
        cycles += 1 + loop_cycles(reads, ENGINE_MOVE_DEPTH)
        weight_words += reads * port_words
        weight_cycles += reads
        for word0 in range(0, filter_words, chunk_words):
            words = min(chunk_words, filter_words - word0)
            entries = reads * words * (per_word // vector)
            values = min(words * per_word, window - word0 * per_word)
            cycles += 1 + loop_cycles(entries, ENGINE_MOVE_DEPTH) + loop_cycles(-(-values // step), ENGINE_MAC_DEPTH)
            weight_words += reads * port_words * words
            weight_cycles += entries
        # (a residual's word read beside each shared word: II 2)
        cycles += loop_cycles(_output_words(first, tile, filters, 1, per_word), ENGINE_MOVE_DEPTH, 2 if residual else 1)
    return {"cycles": cycles, "weight_words": weight_words, "weight_cycles": weight_cycles}


def engine_resident(staged: bool, shares: bool, entries: int, filter_entries: int) -> int:
    """hls/engine.h's engine_resident: the tiles whose weights a layer keeps in the lanes' buffers of ``entries`` at
    once, each in ``filter_entries``: where its input is staged, as many as fit; where its pairs share their windows
    (``shares``), as many up to ENGINE_MAX_TILES (the slots of their biases); else one."""
    fit = entries // filter_entries
    if fit <= 1:
        return 1
    return fit if staged else min(fit, ENGINE_MAX_TILES) if shares else 1


def engine_shares_windows(pairs: bool, aligned: bool, depthwise: bool, rows: bool, groups: int, whole_steps: bool,
                          steps: int, words: int, written: int, residual: bool) -> bool:
    """hls/engine.h's engine_shares_windows: whether a layer's pairs of output pixels (on an engine of two,
    ``pairs``) may read their windows once for all the tiles the buffers hold at once, each step's input words kept in
    the window buffer for the other tiles, whose steps leave the memories' ports to the tile before's output words:
    a layer of one group walked a channel group a step (``whole_steps``), its outputs whole words (``words`` a pixel
    of a full tile), of at most ENGINE_SHARED_STEPS steps, whose tiles would run in pairs (``engine_pairs``) or whose
    words are written two an iteration (then never slower than the tiles' own loops but by the first phase's idle
    iterations, which ``engine_group_shares`` weighs)."""
    return pairs and aligned and not depthwise and not rows and groups == 1 and whole_steps and \
        steps <= ENGINE_SHARED_STEPS and (written == 2 or engine_pairs(steps, words, written, residual))


def engine_group_shares(held: int, steps: int, full: int) -> bool:
    """hls/engine.h's engine_group_shares: whether a group of ``held`` tiles of a layer that may share its pairs'
    windows (``engine_shares_windows``) does: two tiles or more, at most ENGINE_MAX_TILES (the biases' slots), where
    its first phase, a window's ``steps`` but at least ENGINE_MAC_DEPTH (a word kept is read a phase after it was
    written), idles no more iterations than the other tiles' phases save on their own loops (each the shorter of its
    steps and its ``full`` iterations of words, which its phase overlaps)."""
    return 1 < held <= ENGINE_MAX_TILES and ENGINE_MAC_DEPTH - steps <= (held - 1) * min(steps, full)


def engine_pairs(steps: int, words: int, written: int, residual: bool = False) -> bool:
    """hls/engine.h's engine_pairs: whether a tile of whole output words (``words`` a pixel, ``written`` an iteration
    that reads nothing) runs two pixels at a time on an engine built for pairs: its pair's loop (its window's
    ``steps``, a depthwise tile's its places' input words, then both pixels' words) shorter than two pixels' loops;
    always where a ``residual`` is added (a pixel's words then all past its steps)."""
    return residual or steps * written > 2 * words


def staging_bundles(read_words: int, bundles: int) -> int:
    """hls/engine.h's ENGINE_STAGING_BUNDLES: the bundles of an engine's weights port (``bundles`` of them, each
    ``read_words`` DDR words a read) a staged row is read through at once: two where a read is one word (the staging
    memory's two ports take a word of each a cycle), else one."""
    return 2 if bundles >= 2 and read_words == 1 else 1


def staging_cycles(input_map: Sequence[int], channels: int, kernel: Sequence[int], strides: Sequence[int],
                   pads: Sequence[int], dilations: Sequence[int], output_map: Sequence[int], width: int,
                   read_words: int = 1, first_word: int = 0, bundles: int = 1) -> tuple[int, ...]:
    """hls/engine.h's engine_stage's cycles for each row of output pixels of a layer whose ``width``-bit input (rows
    x columns of ``channels``) lies in DDR from word ``first_word`` of the DDR region on, on an engine whose weights
    port is ``bundles`` bundles of ``read_words`` DDR words a read: a cycle for each of its window's k_h rows but those
    the row before staged (its slots a ring: where the window's rows are one apart, the k_h - s_h the rows share), and
    for each inside the map a loop over the n reads that the row's words lie in (in_w x in_c values, and the DDR word
    after them where the row does not begin a word; those in the input), S (``staging_bundles``) of them an
    iteration, one of each bundle, each bundle ceil((n + S - 1) / S) of them (a bundle past the first primes its
    first), an iteration every ceil(S x read_words / 2) cycles (the staging memory's two ports), and an iteration
    more where the row's last word lies past the input's last read."""
    per_word = word_values(width)
    row_values = input_map[1] * channels
    slot_words = -(-row_values // per_word)
    last_read = (first_word + -(-input_map[0] * row_values // per_word) - 1) // read_words
    kept = kernel[0] - strides[0] if dilations[0] == 1 and strides[0] < kernel[0] else 0
    parts = staging_bundles(read_words, bundles)
    ii = -(-parts * read_words // 2)
    result = []
    for y in range(output_map[0]):
        cycles = 0
        for ky in range(kept if y else 0, kernel[0]):
            row = y * strides[0] - pads[0] + ky * dilations[0]
            cycles += 1
            if 0 <= row < input_map[0]:
                word0 = first_word + row * row_values // per_word
                lead = word0 % read_words + (1 if row * row_values % per_word else 0)
                reads = (lead + slot_words - 1) // read_words + 1
                in_input = min(reads, last_read - word0 // read_words + 1)
                cycles += loop_cycles((in_input + 2 * parts - 2) // parts, ENGINE_MOVE_DEPTH, ii) \
                    + (ii if in_input < reads else 0)
        result.append(cycles)
    return tuple(result)


def band_copy_cycles(rows: int, row_values: int, width: int, out: bool) -> int:
    """The cycles of arena.h's band_in (``out``: band_out) over ``rows`` rows of ``row_values`` values at ``width``
    bits: where a row is whole words, a word read and written an iteration; else band_in a band word an iteration,
    each of its lanes' values a read of its own and the word written (lanes + 1 accesses of a memory of two ports),
    band_out a value an iteration, its target word read and written back, the next value's read of that word
    waiting on the write (BAND_VALUE_II: hetdeploy's model, no HLS tool ran)."""
    lanes = word_values(width)
    if row_values % lanes == 0:
        return loop_cycles(rows * row_values // lanes, ENGINE_MOVE_DEPTH)
    if out:
        return loop_cycles(rows * row_values, ENGINE_MOVE_DEPTH, BAND_VALUE_II)
    return loop_cycles(arena_words(rows * row_values, width), ENGINE_MOVE_DEPTH, -(-(lanes + 1) // ARENA_PORTS))


def copy_cycles(size: int) -> int:
    """The cycles of arena.h's copy_words over a buffer of ``size`` bytes: a word an iteration, one pipelined loop."""
    return loop_cycles(size // ARENA_WORD_BYTES, ENGINE_MOVE_DEPTH)


def engine_row_values(kernel_width: int, channels: int, groups: int, column_dilation: int, width: int) -> int:
    """The values of a window row hls/engine.h walks along (``engine_rows``: one group, columns one apart, channels
    no whole word of ``width``-bit weights: a first layer's three); 0 where it walks the window a place at a
    time."""
    per_word = word_values(width)
    return kernel_width * channels if groups == 1 and column_dilation == 1 and channels % per_word else 0


def stored_window(window: int, row: int, width: int) -> int:
    """The values a filter's ``window`` takes in the engine's weights and a lane's buffer at ``width`` bits: each of
    its rows of ``row`` values padded to whole words of weights where the engine walks it along its rows (``row``:
    ``engine_row_values``, 0 where it does not)."""
    per_word = word_values(width)
    return window // row * -(-row // per_word) * per_word if row else window


def engine_window(shape: Shape, width: int) -> int:
    """The values of a unit's window the lanes' buffers must hold: its ``stored_window``, a dense layer's at most
    ENGINE_DENSE_CHUNK (a longer one runs in chunks)."""
    return buffered_window(stored_window(shape.n_in, _row_values(shape, width), width), not shape.input_map)


def buffered_window(stored: int, dense: bool) -> int:
    """The values of a layer's ``stored`` window the lanes' buffers must hold: a ``dense`` layer's at most
    ENGINE_DENSE_CHUNK."""
    return min(stored, ENGINE_DENSE_CHUNK) if dense else stored


def _window_channels(shape: Shape) -> tuple[int, int, int]:
    """A unit's layer's input channels of a group, its groups and its kernel's width (a dense layer: one row of its
    inputs, one group)."""
    if not shape.input_map:
        return shape.n_in, 1, 1
    channels = shape.n_in // (shape.window_geometry[0] * shape.window_geometry[1])
    return channels, shape.input_map[2] // channels, shape.window_geometry[1]


def _row_values(shape: Shape, width: int) -> int:
    """``engine_row_values`` of a unit's layer."""
    channels, groups, kernel_width = _window_channels(shape)
    return engine_row_values(kernel_width, channels, groups, shape.column_dilation, width)


def weight_reads(first: int, tile: int, port_words: int) -> int:
    """The port's words a tile of filters ``first`` .. ``first + tile - 1`` reads for each word of their windows
    (hls/engine.h's weights layout: a port's word holds ``port_words`` consecutive filters' words, from filter 0)."""
    return (first + tile - 1) // port_words - first // port_words + 1


def engine_sizes(width: int, allowance: dict[str, int], window: int, port_words: int = 1,
                 bundles: int = 1) -> list[EngineSize]:
    """The engine sizes to weigh at ``width`` bits where the engine may take ``allowance`` (DSPs, BRAM18s and URAM
    blocks), its largest window is ``window`` values and its weights port reads ``port_words`` words a cycle
    (through ``bundles`` bundles): for each number of values a lane takes a cycle (a power of two up to a word's),
    the most lanes whose multipliers, control and weight buffers fit (URAM's first, then BRAM's), a multiple of the
    outputs a word holds, and the most whose buffers are all URAM, each of those also down to a multiple of each
    power of two up to it (whole tiles of filters that come in powers of two), then each half of those down to one
    word's; each
    at one output pixel at once and, where the DSPs allow, at two (the pair's multipliers sharing each weight read:
    no more weight buffers); the most multiply-accumulators a cycle first; at least one lane of one value (none of
    them ``shared``: the folding shares an engine's pairs' windows after it, ``steps.plan_model._add_engine_loops``)."""
    sizes = []
    vector = multiple = word_values(width)
    while vector >= 1:
        held, uram_most = buffer_lanes(width, allowance, window, vector)
        for pixels in (1, 2):
            most = min(held, (allowance.get("dsp", 0) - ENGINE_CONTROL_DSP) * _engine_products_a_dsp(width) // (
                vector * pixels * dsps_a_product(width)))
            # (a multiple of a power of two: more of a layer's tiles full where its filters are one, 128 lanes,
            # not 136, for ResNet's 64 x 2^k)
            tops = {most, min(most, uram_most)}
            for lanes in {top - top % step for top in tops for step in _powers_of_two(multiple, most)}:
                while lanes >= multiple:  # then their halves
                    sizes.append(EngineSize(lanes, min(lanes, uram_most), vector, port_words, pixels, bundles,
                                            window))
                    lanes = lanes // 2 - lanes // 2 % multiple
        vector //= 2
    most_first = sorted(set(sizes), key=lambda size: (-size.lanes * size.vector * size.pixels, -size.vector,
                                                      size.lanes - size.uram_lanes, size.pixels))
    return most_first or [EngineSize(1, 0, 1, port_words, 1, bundles, window)]


def _powers_of_two(least: int, most: int) -> list[int]:
    """The powers of two from ``least`` (one) up to ``most``."""
    powers = [least]
    while powers[-1] * 2 <= most:
        powers.append(powers[-1] * 2)
    return powers


def buffer_lanes(width: int, allowance: dict[str, int], window: int, vector: int) -> tuple[int, int]:
    """The lanes of ``vector`` values a cycle whose weight buffers for a ``window`` of ``width``-bit weights the
    URAM blocks and BRAM18s of ``allowance`` hold (unbounded, 2^30, where a lane's buffer takes no BRAM18: LUTRAM),
    and how many of them are URAM's, two a block."""
    uram = 2 * (allowance.get("uram", 0) // _uram_blocks_a_pair(window, width, vector))
    bram_each = _bram18_a_lane(window, width, vector)
    return uram + (allowance.get("bram18", 0) // bram_each if bram_each else 1 << 30), uram


def engine_buffers(window: int, width: int, size: EngineSize) -> dict[str, int]:
    """The BRAM18s and URAM blocks of an engine's weight buffers: each lane's window (its whole DDR words) in
    entries of its values a cycle, one read a cycle; two lanes' in a URAM block's two ports (cascaded where they
    are deeper than one), the other lanes' in BRAM."""
    return {"bram18": (size.lanes - size.uram_lanes) * _bram18_a_lane(window, width, size.vector),
            "uram": size.uram_lanes // 2 * _uram_blocks_a_pair(window, width, size.vector)}


def _lane_entries(window: int, width: int, vector: int) -> int:
    """A lane's weight buffer's entries: its window's DDR words, each ``vector`` values an entry."""
    per_word = word_values(width)
    return -(-window // per_word) * (per_word // vector)


def _bram18_a_lane(window: int, width: int, vector: int) -> int:
    return bram18_blocks(_lane_entries(window, width, vector), vector * 8 * element_bytes(width))


def _uram_blocks_a_pair(window: int, width: int, vector: int) -> int:
    """URAM blocks two lanes' buffers take: the two lanes' entries one after the other, an entry wider than a
    block's URAM_BITS in blocks side by side."""
    side_by_side = -(-vector * 8 * element_bytes(width) // URAM_BITS)
    return side_by_side * -(-2 * _lane_entries(window, width, vector) // URAM_DEPTH)


def _engine_products_a_dsp(width: int) -> int:
    """Two where the engine packs two lanes' products of ``width``-bit values and weights into one DSP48
    (hls/engine.h's ENGINE_PACKED: a product within 18 bits signed, Xilinx WP486), else one."""
    return 2 if 2 * width <= 17 else 1


def dsps_a_product(width: int) -> int:
    """DSPs one product of ``width``-bit data takes: a DSP48 multiplies 27 x 18 (25 x 18) bits, two past 18."""
    return 2 if width > 18 else 1


def window_cycles(pool: Sequence[int], width: int, rows: int = 1) -> int:
    """arena.h's window_op over the geometry ``pool`` (plan.Window.values) at ``width`` bits, built for ``rows``
    output rows at once (``window_rows``): where the channels fill whole words and a window spans at most
    WINDOW_RING columns (window_columns), per pass of one output row or two (``rows`` 2 where
    ``window_row_pairs``), per chunk of its outputs (WINDOW_CHUNK), per channel word, a cycle, then a pipelined loop
    of an iteration per column the chunk's windows span and pair of the rows the pass reads (from the first inside
    the input either window takes to the last; one iteration where there are at most two), then, for each of its
    output rows, one writing the chunk's outputs two an iteration; else (window_values), per output word, per group
    of its lanes (as many as the largest power of two dividing the channels: all of them where they fill whole words),
    a cycle, then a pipelined loop of a window position an iteration (its rows' and columns' loops one)."""
    channels, in_h, _, out_h, out_w, k_h, k_w, s_h, s_w, pad_top, _, d_h, d_w = pool
    lanes = word_values(width)
    span = (k_w - 1) * d_w + 1
    if not window_by_columns(pool, width):
        together = math.gcd(channels, lanes)  # (lanes a power of two)
        return arena_words(out_h * out_w * channels, width) * lanes // together * \
            (1 + loop_cycles(k_h * k_w, WINDOW_DEPTH))

    def rows_of(y: int) -> tuple[int, int]:  # output row y's first input row inside the input, and how many
        row0 = y * s_h - pad_top
        first = -(row0 // d_h) if row0 < 0 else 0
        end = 0 if row0 >= in_h else -(-(in_h - row0) // d_h)
        return row0 + first * d_h, max(0, min(end, k_h) - first)

    together = 2 if rows == 2 and window_row_pairs(pool) else 1
    cycles = 0
    for y in range(0, out_h, together):
        windows = [rows_of(y + b) for b in range(together) if y + b < out_h]
        taken = [(row0, count) for row0, count in windows if count]  # (two rows: d_h 1)
        read = max(row0 + count for row0, count in taken) - taken[0][0] if taken else 0
        iterations = -(-read // 2) if read > 2 else 1
        for x0 in range(0, out_w, WINDOW_CHUNK):
            outs = min(WINDOW_CHUNK, out_w - x0)
            cycles += channels // lanes * (1 + loop_cycles(((outs - 1) * s_w + span) * iterations, WINDOW_DEPTH)
                                           + len(windows) * loop_cycles(-(-outs // 2), WINDOW_MOVE_DEPTH))
    return cycles


def window_by_columns(pool: Sequence[int], width: int) -> bool:
    """Whether arena.h's window_op reduces the geometry ``pool`` at ``width`` bits a column at a time
    (window_columns): its channels whole words, its windows at most WINDOW_RING columns wide."""
    channels, k_w, d_w = pool[0], pool[6], pool[12]
    return channels % word_values(width) == 0 and (k_w - 1) * d_w + 1 <= WINDOW_RING


def window_rows(pool: Sequence[int], width: int, reuse_factor: int) -> int:
    """The output rows arena.h's window_op is built to reduce at once (its ROWS) for a window op of geometry ``pool``
    at ``width`` bits and a unit's ``reuse_factor``: two at 1 where it reduces a column at a time
    (``window_by_columns``: window_values reduces a row at a time) and two rows' windows share their reads
    (``window_row_pairs``), else one (more cycles for half the reductions' registers and comparators, the folding's
    choice)."""
    return 2 if reuse_factor == 1 and window_by_columns(pool, width) and window_row_pairs(pool) else 1


def window_row_pairs(pool: Sequence[int]) -> bool:
    """arena.h's window_row_pairs: whether window_columns reduces two output rows at once (rows not dilated, two
    rows' windows overlapping or meeting, their rows together read in fewer iterations than each row's apart)."""
    _, _, _, out_h, _, k_h, _, s_h, _, _, _, d_h, _ = pool

    def iterations(rows: int) -> int:
        return -(-rows // 2) if rows > 2 else 1
    return out_h > 1 and d_h == 1 and s_h <= k_h and iterations(k_h + s_h) < 2 * iterations(k_h)


def loop_cycles(iterations: int, depth: int, ii: int = 1) -> int:
    """A pipelined loop's cycles: its iterations at its II, and its pipeline's depth once (arena.h's loop_cycles)."""
    return (iterations - 1) * ii + depth if iterations > 0 else 0


def _output_words(first: int, tile: int, filters: int, pixels: int, per_word: int) -> int:
    """The words a tile's outputs lie in, summed over its pixels: pixel p's are elements p * filters + first
    onwards, ``tile`` of them; the count repeats every ``per_word`` pixels."""
    def words(p: int) -> int:
        start = p * filters + first
        return (start + tile - 1) // per_word - start // per_word + 1

    period = [words(p) for p in range(min(pixels, per_word))]
    whole, rest = divmod(pixels, len(period))
    return whole * sum(period) + sum(period[:rest])


def engine_estimate(shape: Shape, width: int, ddr_bytes_per_cycle: Optional[float]) -> dict[str, int]:
    """A unit on the subfunction's engine (hls/engine.h, of the shape's size): what it adds beside the engine
    (nothing: the engine's resources are ``engine_resources``, once for all its units), and its cycles
    (``engine_cycles``), at least the DDR's time for its weights' words when that is longer than the loops that
    read them (``ddr_bytes_per_cycle`` through each of its weights port's bundles, a DDR port each). It reads and
    writes its buffers itself: no moves besides. A grouped convolution runs as one group where that is faster
    (``engine_dense_groups``)."""
    return _engine_choice(shape, width, ddr_bytes_per_cycle)[0]


def _engine_estimate(shape: Shape, width: int, ddr_bytes_per_cycle: Optional[float],
                     dense_groups: bool) -> dict[str, int]:
    """``engine_estimate``, a grouped convolution's groups run as one (``dense_groups``) or each its own."""
    counted = _engine_counted(shape, width, dense_groups)
    cycles = counted["cycles"]
    ddr = 0 if ddr_bytes_per_cycle is None else max(
        0, math.ceil(counted["weight_words"] * ARENA_WORD_BYTES / (ddr_bytes_per_cycle * shape.engine.bundles))
        - counted["weight_cycles"])
    return {"dsp": 0, "bram18": 0, "lut": 0, "ff": 0, "latency_cycles": cycles + ddr, "compute_cycles": cycles + ddr,
            "buffer_cycles": 0, "ddr_cycles": ddr}


def engine_dense_groups(shape: Shape, width: int, ddr_bytes_per_cycle: Optional[float]) -> bool:
    """Whether a grouped convolution, not a depthwise one, runs on the engine as a convolution of one group, its
    weights block-diagonal (each filter's window over every input channel, zeros past its group's): where that
    takes fewer cycles (``engine_estimate``'s, its weights read from DDR at ``ddr_bytes_per_cycle``; the zeros'
    products and weights are more, but whole tiles of whole words: a group of channels or filters no whole word
    walks its window a value a cycle and writes its outputs into words it shares) and its window fits the lanes'
    buffers."""
    return _engine_choice(shape, width, ddr_bytes_per_cycle)[1]


def _engine_choice(shape: Shape, width: int, ddr_bytes_per_cycle: Optional[float]) -> tuple[dict[str, int], bool]:
    """``engine_estimate`` and ``engine_dense_groups``: each grouping's estimate computed once."""
    channels, groups, kernel_width = _window_channels(shape)
    as_groups = _engine_estimate(shape, width, ddr_bytes_per_cycle, False)
    if groups == 1 or depthwise_on_engine(shape) or \
            stored_window(shape.n_in * groups, engine_row_values(kernel_width, channels * groups, 1,
                                                                 shape.column_dilation, width), width) \
            > shape.engine.window:
        return as_groups, False
    as_one = _engine_estimate(shape, width, ddr_bytes_per_cycle, True)
    return (as_one, True) if as_one["latency_cycles"] < as_groups["latency_cycles"] else (as_groups, False)


def _engine_counted(shape: Shape, width: int, dense_groups: bool) -> dict[str, int]:
    """``engine_cycles`` of a unit on the engine of its shape's size, its groups run as one (``dense_groups``:
    ``engine_dense_groups``) or each its own."""
    channels, groups, kernel_width = _window_channels(shape)
    window = shape.n_in
    if dense_groups:
        channels, window, groups = channels * groups, window * groups, 1
    return engine_cycles(window, shape.n_out, shape.vectors, width, shape.engine.lanes, vector=shape.engine.vector,
                         channels=channels, groups=groups, port_words=shape.engine.port_words,
                         row=engine_row_values(kernel_width, channels, groups, shape.column_dilation, width),
                         pixels_at_once=shape.engine.pixels, buffer_window=shape.engine.window,
                         residual=shape.residual, shared=shape.engine.shared, stream=shape.engine.stream)


def depthwise_on_engine(shape: Shape) -> bool:
    """Whether a unit's layer is a depthwise convolution (a group a channel), which the engine runs a lane a channel
    (hls/engine.h's depthwise tiles) where its channels and lanes are whole words."""
    return bool(shape.input_map) and shape.n_in == shape.window_geometry[0] * shape.window_geometry[1] and \
        shape.input_map[2] == shape.n_out > 1


def engine_resources(window: int, width: int, size: EngineSize, depthwise: bool = False) -> dict[str, int]:
    """The resources of a subfunction's engine of ``size``, whose largest layer window (k x k x input channels) is
    ``window``, at ``width`` bits: a DSP a multiplier (two beyond 18 bits; two lanes' products a DSP at 8 bits and
    fewer, engine.h's ENGINE_PACKED) and the control's, the lanes' weight
    buffers (``engine_buffers``), each lane's sum and the control in LUT and FF (hetdeploy's model, see
    ENGINE_SHARES); ``depthwise``: one of its layers a depthwise convolution, its loop too (a word's values of
    multipliers a pixel at once, ENGINE_DEPTHWISE_LANE_LUT a lane). At two output pixels at once, each lane's
    multipliers and sum twice."""
    products = size.lanes * size.vector * size.pixels
    packed = _engine_products_a_dsp(width) == 2 and size.lanes % 2 == 0
    depthwise_dsp = word_values(width) * dsps_a_product(width) * size.pixels \
        if depthwise else 0
    shares = size.shared and size.pixels == 2  # its pairs' windows shared (engine_shares_windows): biases, sums
    lane_lut = ENGINE_LANE_LUT * size.pixels + (ENGINE_DEPTHWISE_LANE_LUT if depthwise else 0) \
        + (ENGINE_BIAS_SLOTS_LUT if shares else 0)
    window_lut = size.pixels * min(_lane_entries(window, width, size.vector), ENGINE_SHARED_STEPS) \
        * ENGINE_WINDOW_WORD_LUT if shares else 0
    streams = size.stream and size.pixels == 2  # its streamed layers' kept sums and entries (ENGINE_STREAM_PAIRS)
    kept_bits = 2 * width + 1 + math.ceil(math.log2(max(2, window)))
    stream_lut = math.ceil(size.pixels * kept_bits * ENGINE_STREAM_LUT_A_BIT) * -(-size.stream // 32) \
        if streams else 0
    logic = {"dsp": (-(-products // 2) if packed else products * dsps_a_product(width)) + ENGINE_CONTROL_DSP
             + depthwise_dsp,
             "lut": ENGINE_CONTROL_LUT + size.lanes * (lane_lut + stream_lut) + window_lut,
             "ff": ENGINE_CONTROL_FF + size.lanes * (ENGINE_LANE_FF * size.pixels * (2 if shares else 1) + 2 * width
                                                     + (ENGINE_STREAM_ENTRY_FF if streams else 0))}
    return logic | engine_buffers(window, width, size)


def adder_levels_a_cycle(shape: Shape) -> int:
    """The adder tree's levels one cycle of the unit's clock holds (ADDER_LEVELS_PER_CYCLE at the reference clock)."""
    return max(1, math.floor(ADDER_LEVELS_PER_CYCLE * REFERENCE_CLOCK_MHZ / shape.clock_mhz))


def first_product_cycles(shape: Shape) -> int:
    """What the first product's pipeline (multiply, then the adder tree) adds to a kernel unit's vectors' cycles."""
    tree = 1 + math.log2(max(1, shape.n_in)) / ADDER_LEVELS_PER_CYCLE  # n_in = 1: its bias added in the product's cycle
    return pipeline_cycles(tree, shape.clock_mhz) - 1


def pipeline_cycles(reference_cycles: float, clock_mhz: float) -> int:
    """Cycles at ``clock_mhz`` of logic that takes ``reference_cycles`` at REFERENCE_CLOCK_MHZ: its delay
    fixed in time, so a slower clock fits more of it in a cycle and a faster one less (at least one cycle).
    Set at hls4ml's default 5 ns; the table's published points at 10 ns are streamed or AXI-wrapped designs
    whose latency the estimate misses under either rule (benchmarks/estimates.py)."""
    return max(1, math.ceil(round(reference_cycles * clock_mhz / REFERENCE_CLOCK_MHZ, 9)))


def weight_codes(shape: Shape, width: int) -> list[tuple[int, int]]:
    """(magnitude bits of the code, weights) of each octave of a kernel unit's weights at W bits
    (``Shape.weight_octaves``: W - 1 - d for the octave d under the top; a quantized model's weights
    keep their own bits at any W); none when its weights are not known."""
    code = weight_type_bits(shape, width)
    return [(code - 1 - depth, count) for depth, count in enumerate(shape.weight_octaves) if count]


def accumulator_bits(shape: Shape, width: int) -> int:
    """Bits of a kernel unit's accumulator (hls4ml's accum_t): ``Shape.accum_bits``, else what hls4ml infers for an
    "auto" accumulator, as hetdeploy's units have (InferPrecisionTypes: the input's W, the weight type's bits, a
    carry bit for each doubling of the n_in products summed, and a sign bit; a 12-bit Dense 256 -> 10 with 12-bit
    weights sums in ap_fixed<33,13>)."""
    return shape.accum_bits or width + weight_type_bits(shape, width) + math.ceil(math.log2(max(1, shape.n_in))) + 1


def weight_type_bits(shape: Shape, width: int) -> int:
    """The bits of a kernel unit's weight type: its quantizer's (``Shape.weight_bits``, hls4ml's weight precision
    of a quantized layer, whatever the data's W: a binary input times 6-bit weights is 6-bit products), else W."""
    return shape.weight_bits or width


def distributed_arithmetic_lut(shape: Shape, width: int) -> int:
    """LUTs of a kernel unit's constant multiplications as da4ml lays them out (hls4ml's distributed_arithmetic):
    ``DA_COST_PER_DIGIT_BIT`` times each weight's canonical signed digits (about a third of its magnitude bits,
    plus one, for random codes) times the bits its products add on to the W-bit input (its magnitude bits)."""
    codes = weight_codes(shape, width) or [(width - 1, shape.n_in * shape.n_out)]
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


def mux_lut(inputs: int) -> int:
    """LUTs of a bit's multiplexer over ``inputs`` values: a tree of LUT6s, four inputs and two select bits each."""
    return -(-(inputs - 1) // 3)


def popcount_lut(bits: int) -> int:
    """LUTs of a popcount of ``bits`` one-bit values as an HLS tool builds hls/xnor_popcount.h's unrolled sum: a
    balanced tree of adders, each of two halves' counts, a LUT a bit of its sum (a carry chain's)."""
    if bits <= 1:
        return 0
    return popcount_lut(bits // 2) + popcount_lut(bits - bits // 2) + bits.bit_length()


def streams(shape: Shape) -> tuple[tuple[int, int], ...]:
    """(pixels, channels) of each FIFO of a streamed unit: its padding layer's output (``Shape.padded``), then the
    FIFO after each of its layers but the last."""
    padding = ((shape.input_map[0] * shape.input_map[1], shape.input_map[2]),) if shape.padded else ()
    return padding + shape.fifos


def iterations(shape: Shape) -> int:
    """The iterations of a streamed unit's main loop: each pixel of a window layer's input map (``Shape.input_map``:
    hls4ml's conv and pooling stream functions read a pixel an iteration, and compute an output where a window is
    complete), else each output vector."""
    return shape.input_map[0] * shape.input_map[1] if shape.streamed and shape.input_map else shape.vectors


def fifo_bram18(fifos: Sequence[tuple[int, int]], width: int) -> int:
    """BRAM18s of FIFOs of (pixels, channels) W-bit values, a pixel's channels a word."""
    return sum(bram18_blocks(pixels, channels * width) for pixels, channels in fifos)
