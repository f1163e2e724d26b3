"""Typed data passed between pipeline stages, serialised to plan.json.

A stage is a function from plan to plan; each dataclass here is plain data
(no onnx, no hls4ml) so that the algorithms can be tested on their own.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional, get_args, get_origin, get_type_hints

from .precision import DEFAULT_WIDTH

# 2: FPGA tops take a batch (hls.max_batch; their C-simulation entry's first argument is the sample count)
PLAN_FORMAT = 2


@dataclass
class TensorSpec:
    name: str
    shape: list[int]
    dtype: str = "float32"


@dataclass
class InputReshape:
    """A leading Reshape absorbed at intake: the user feeds ``original``,
    the pipeline sees it reshaped (C order, no data movement) to ``tensor``."""

    original: TensorSpec
    tensor: TensorSpec


@dataclass
class PortCodes:
    """An FPGA subfunction's input that travels as its quantizer's codes instead of floats: each value an index of
    ``bits`` bits into ``values`` (2 ** bits float32 values, as the host's quantizer computes them), 64 // bits
    of them to a 64-bit word (board_runtime.to_codes; the top converts an index's value to its fixed point as it
    converts a float, hls/arena.h)."""

    bits: int  # 1, 2, 4 or 8
    values: list[float]
    # the quantizer's integer code of index k is first + k * step (a Quant's q, low first; a BipolarQuant's -1, +1):
    # what ``run.py --codes`` takes
    first: int = 0
    step: int = 1


@dataclass
class CodesInput:
    """The plan with its input given as its input quantizer's integer codes, as FINN's driver takes them
    (``run.py --codes``): each FPGA input that takes them (its codes are its subfunction's ``input_codes``), the
    host subfunctions that only computed them (not run), and the stream's estimate without those."""

    inputs: list[TensorSpec]  # the codes tensors, as run.py reads them
    skipped: list[str]  # the subfunctions not run
    throughput_per_s: float


@dataclass
class HlsPort:
    """One array of the C-simulation library's top function.

    ``layout`` says how the flat C array is ordered: ``channels_last`` means
    the ONNX tensor (N, C, ...) is transposed to (N, ..., C) first.
    """

    tensor: str
    shape: list[int]
    layout: str
    # zero-compressed (the subfunction's "transfers"): a sample takes board_runtime.compressed_words(values)
    # 32-bit words, the most zero_compress's can take, its encoding first
    compressed: bool = False
    codes: Optional[PortCodes] = None  # an input of a quantizer's codes (the subfunction's "input_codes")
    floats: int = 1  # a float port's floats a word (the subfunction's "floats_a_word")


@dataclass
class WeightPort:
    """A DDR weight array of an FPGA subfunction: an m_axi port of its top, pointed at the DDR region
    plus ``offset`` by the host."""

    port: str  # C++ name of the top's argument (<unit>_w<k>)
    unit: str
    precision: str  # element type, C++
    values: int
    offset: int  # bytes into the DDR region


@dataclass
class HlsProject:
    """The HLS project of an FPGA subfunction: our top (hls/top.cpp.in) over its units' hls4ml projects."""

    project: str  # folder, relative to the build folder
    library: str  # C-simulation shared library, relative to the build folder
    top: str  # C++ name of the top function (C-simulation exports top + "_float", and top_<unit>_float)
    synthesis_script: str  # Vivado/Vitis HLS Tcl, relative to the project folder (not run by hetdeploy)
    part: str
    clock_period_ns: float
    inputs: list[HlsPort]
    outputs: list[HlsPort]
    ddr_image: str = ""  # the DDR region's initial contents (the DDR weights), relative to the build folder
    weight_ports: list[WeightPort] = field(default_factory=list)
    # the most samples one call of the top takes (hetdeploy build --batch): its float ports hold that many,
    # its ``samples`` register says how many a call has
    max_batch: int = 1


@dataclass
class UnitPort:
    """One tensor of an execution unit's hls4ml top function."""

    tensor: str
    shape: list[int]  # ONNX shape
    layout: str  # as in HlsPort
    hls_type: str  # the port's C++ type in the unit's namespace (input_t, result_t, ...)
    pack: int  # values per stream word (io_stream: the channels); 1 for io_parallel
    precision: str  # element type, C++ (ap_fixed<16,7,AP_RND,AP_SAT>)
    config_precision: str  # the same as an hls4ml config string (fixed<16,7,RND,SAT,0>)


@dataclass
class UnitWeight:
    """A weight array of an execution unit whose weights are in DDR: an argument of its hls4ml top,
    stored in the unit's weight buffer (``units/<unit>/weights.bin``) at ``offset``."""

    variable: str  # hls4ml's name for it (w2, b2, ...)
    precision: str  # element type, C++
    values: int
    offset: int  # bytes into the unit's weight buffer
    size: int  # bytes


@dataclass
class UnitHls:
    project: str  # hls4ml project folder, relative to the build folder
    io_type: str
    layer_precision: dict[str, str]  # hls4ml layer name -> result precision
    inputs: list[UnitPort]
    outputs: list[UnitPort]
    ddr_weights: list[UnitWeight] = field(default_factory=list)  # empty: the weights are inside the project


@dataclass
class TensorVerification:
    """One output tensor against onnxruntime: passed when every value is finite and the largest
    error is at most the relative tolerance times the largest magnitude of its own reference, or one
    step of the quantizer that writes it (and half a step of its fixed-point type, where it has one),
    whichever is larger (``tolerance``)."""

    tensor: str
    max_abs_error: float
    peak: float  # the reference's largest magnitude
    tolerance: float
    nonfinite: int  # NaN or Inf values (result or reference)
    passed: bool
    saturated: int = 0  # an FPGA unit's output: reference values beyond its fixed-point type's range
    step: float = 0.0  # the step of the quantizer that writes it (0: none)
    further_error: float = 0.0  # its largest error on the build's further samples (verify.count_flips)

    @property
    def agreement(self) -> str:
        """"bit-exact" (error 0); "same codes": every value on its quantizer's code (off by under half a
        step: a float scale times the code, rounded to the output's fixed-point type); "within one step"
        of its quantizer (its nearest code one from the reference's: off by under one and a half steps);
        "within tolerance" (a share of its peak); or "" (failed)."""
        if not self.passed:
            return ""
        if self.max_abs_error == 0.0:
            return "bit-exact"
        if 0 < self.step and self.max_abs_error < self.step / 2:
            return "same codes"
        return "within one step" if 0 < self.step and self.max_abs_error < 1.5 * self.step else "within tolerance"


# how an output agrees with its reference (TensorVerification.agreement), least exact first
AGREEMENTS = ["", "within tolerance", "within one step", "same codes", "bit-exact"]


@dataclass
class Verification:
    """Result of running a subfunction (or unit) on its device model against onnxruntime: per output
    tensor, and the worst of them (its error and tolerance) at the top."""

    samples: int
    max_abs_error: float
    tolerance: float
    passed: bool
    outputs: list[TensorVerification] = field(default_factory=list)
    # an FPGA subfunction with quantized outputs: the further samples its codes were compared on
    # (verify.count_flips) and how many of them a code differs on (by half a step or more)
    flip_samples: int = 0
    flipped: int = 0

    @property
    def agreement(self) -> str:
        """The least exact of its outputs' ``agreement`` (AGREEMENTS), or how many of the further
        samples flip a code, when any does: then it matches up to flips, never bit for bit."""
        if self.flipped:
            return f"codes flip on {self.flipped} of {self.flip_samples} samples"
        return min((t.agreement for t in self.outputs), default="", key=AGREEMENTS.index)


@dataclass
class SubfunctionEstimate:
    """The cost model's figures for one call of a subfunction (see cost.py)."""

    latency_s: float
    compute_s: float
    transfer_s: float
    overhead_s: float
    in_bytes: int
    out_bytes: int
    batch_s: float = 0.0  # one call on a batch of the plan's ``estimate.batch`` samples
    resource: str = ""  # what its calls occupy in a stream: its device, or on an FPGA its own core
    # of an FPGA subfunction's transfer_s, what its memory plan put there (plan_model.fpga_times: its spilled buffers'
    # DDR traffic, less the port bytes its top's loops move), so that timing it again replaces it, not adds it twice
    memory_transfer_s: float = 0.0


@dataclass
class PlanEstimate:
    """Estimated end-to-end latency at batch one, against the two baselines; and the samples per
    second of the plan run as a pipelined stream of batches of ``batch`` (cost.py)."""

    latency_s: float
    all_cpu_latency_s: Optional[float]  # everything on the host CPU; None if it cannot run every node
    support_latency_s: float  # the support policy's plan
    support_fits: bool  # whether the support plan's devices hold what it gives them
    objective: str = "latency"  # what the latency policy minimised (--objective)
    batch: int = 1  # samples per call (--batch): the FPGA cores' largest batch
    throughput_per_s: float = 0.0
    all_cpu_throughput_per_s: Optional[float] = None


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit a duration reads best in (s, ms or us) and its length in seconds: an estimate's
    figures, and a chart's axis, in one unit a person reads at a glance."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return unit, scale
    return "us", 1e-6


def duration(seconds: float) -> str:
    unit, scale = time_unit(seconds)
    return f"{seconds / scale:.3g} {unit}"


@dataclass
class Calibration:
    """The samples the FPGA types were sized on (the user's, ``--calibration``, or synthetic) and
    the others, never used for sizing, that the build verified on."""

    source: str  # "file" or "synthetic"
    samples: int  # sized on
    file: str = ""  # the calibration file's name
    input_ranges: dict[str, list[float]] = field(default_factory=dict)  # input -> [least, largest] value sized on
    verified_on: int = 0  # held-out samples C-simulation checked
    verification: str = ""  # where those came from, in words


@dataclass
class Widening:
    """An execution unit the build widened past --width because it was out of tolerance."""

    unit: str
    from_bits: int
    to_bits: int
    reason: str  # what its check said
    error: Optional[float] = None  # its worst output's max abs error at from_bits (None: widened as a writer)


@dataclass
class PrecisionSearch:
    """What --error-budget's search chose: the fewest bits per FPGA layer (its first node) that
    keep the simulated fixed-point model's relative error per output within the budget."""

    error_budget: float
    simulated_error: float  # at the chosen widths, on the calibration samples
    evaluations: int  # simulated models run
    samples: int
    layer_widths: dict[str, int] = field(default_factory=dict)


@dataclass
class FpgaFallback:
    """A node an FPGA of the board runs that the plan put on another device, and why."""

    node: str
    device: str
    fpga: str
    # "unsupported": the FPGA does not run it (``detail``: the op or the board-file limit it breaks);
    # "capacity": the FPGA cannot hold it beside its units even fully folded; "latency"; "pinned":
    # --device put it elsewhere; "input quantizer": the model input's first codes, computed on the host
    reason: str
    detail: str = ""


@dataclass
class Window:
    """A window op the subfunction's top reduces itself (arena.h's window_op) over a channels-last
    buffer: output pixel (y, x), channel c, reduces channel c of the input pixels (y * strides[0] -
    pads[0] + i * dilations[0], x * strides[1] - pads[1] + j * dilations[1]) for i, j within the kernel
    that lie inside the input (padding: none to a maximum). A 1-D op's rows are one. ``reduce``: "max",
    "mean" (the sum over the whole kernel, divided by its size: padding counted as zeros) or "mean_inside" (the
    mean of the window's values inside the input: AveragePool's count_include_pad=0)."""

    reduce: str
    channels: int
    input: list[int]  # rows, columns
    output: list[int]
    kernel: list[int]
    strides: list[int]
    pads: list[int]  # before the first row and column
    dilations: list[int]

    @classmethod
    def of(cls, node) -> "Window":
        """The geometry of the window op ``node`` (a graph.Node: MaxPool, AveragePool, GlobalAveragePool), from its
        attributes and shapes."""
        first, out = node.input_shapes[0], node.output_shapes[0]
        spatial = len(first) - 2

        def as_2d(values, fill=1):  # a 1-D op's one row
            return [fill] * (2 - spatial) + list(values)

        if node.op == "GlobalAveragePool":
            return cls("mean", first[1], as_2d(first[2:]), as_2d(out[2:]), as_2d(first[2:]), [1, 1], [0, 0], [1, 1])
        pads = node.attrs.get("pads") or [0] * (2 * spatial)
        reduce = "max" if node.op == "MaxPool" else "mean" if node.attrs.get("count_include_pad") else "mean_inside"
        return cls(reduce, first[1], as_2d(first[2:]), as_2d(out[2:]), as_2d(node.attrs["kernel_shape"]),
                   as_2d(node.attrs.get("strides") or [1] * spatial), as_2d(pads[:spatial], fill=0),
                   as_2d(node.attrs.get("dilations") or [1] * spatial))

    def values(self) -> list[int]:
        """arena.h's window_geometry, in its fields' order."""
        return [self.channels, *self.input, *self.output, *self.kernel, *self.strides, *self.pads, *self.dilations]

    def inverse_counts(self) -> list[int]:
        """The window positions whose inverses a mean's table holds (arena.h's window_mean): each count 0 .. k_h x k_w
        where a window's positions inside the input vary ("mean_inside" with a window past the input's edges: its
        padding, or ceil_mode's last windows; 0 never divides), else the kernel's size alone."""
        size = self.kernel[0] * self.kernel[1]
        past_edges = any(pad > 0 or (out - 1) * stride - pad + (k - 1) * dilation > extent - 1 for extent, out, k,
                         stride, pad, dilation in zip(self.input, self.output, self.kernel, self.strides, self.pads,
                                                      self.dilations))
        return list(range(size + 1)) if self.reduce == "mean_inside" and past_edges else [size]


@dataclass
class LocalResponse:
    """A local response normalization (ONNX's LRN) the subfunction's top computes itself (arena.h's lrn) across
    the channels of a channels-last buffer: its attributes."""

    size: int
    alpha: float
    beta: float
    bias: float


@dataclass
class Quantizer:
    """A QONNX Quant the subfunction's top computes itself (arena.h's quantize; onnxruntime's QuantizeLinear and
    DequantizeLinear pairs as intake reads them): its scale and zero point (one each), the least and the most of its
    codes, and whether it rounds down (FLOOR) rather than to the nearest, ties to even (ROUND)."""

    scale: float
    zero_point: int
    least: int
    most: int
    floor: bool = False


@dataclass
class EngineLayer:
    """A convolution or dense unit the subfunction's layer-sequential engine runs (hls/engine.h: one array of
    ``lanes`` multiply-accumulators the top calls once per such unit): its shape over channels-last buffers (a
    dense layer a 1 x 1 convolution of one pixel, a 1-D one a row), its weights' and its buffers' binary points
    and signedness, whether an Add of another map (a residual connection) and whether a ReLU or a Clip ends it
    (BatchNormalizations are folded into its weights). Its
    weights and biases lie in the DDR region (the unit's weights buffer)."""

    channels: int
    input: list[int]  # rows, columns
    filters: int
    output: list[int]
    kernel: list[int]
    strides: list[int]
    pads: list[int]  # before the first row and column
    dilations: list[int]
    relu: bool
    lanes: int  # the engine's multiply-accumulators (one engine per subfunction: the same for all its units)
    vector: int = 1  # the values each lane takes a cycle (units.engine_sizes: its FPGA's budget and the width)
    uram_lanes: int = 0  # the lanes whose weight buffers are URAM, two a block (the others' BRAM)
    groups: int = 1  # a grouped convolution's: output channel o reads group o // (filters // groups)'s channels
    port_words: int = 1  # the words the engine's weights port reads a cycle (units.engine_ports)
    pixels: int = 1  # the output pixels the engine computes at once: 1, or 2 (hls/engine.h's engine_pairs)
    # an engine of two pixels whose pairs share their windows among the tiles it holds (hls/engine.h's SHARED)
    shared: bool = False
    # an engine of two pixels that streams the weights of layers of at most this many pairs (hls/engine.h's STREAM),
    # and whether this layer's stream (engine_stream: the memory plan's units.engine_layer_streams, its input's place
    # known; its weights region laid out so)
    stream: int = 0
    streamed: bool = False
    bundles: int = 1  # the m_axi bundles the weights port is, each on a DDR port of its own (units.engine_ports)
    # the largest window the engine's lanes' buffers hold (values; their depth): a staged layer keeps as many tiles'
    # weights at once as fit (hls/engine.h's engine_resident)
    buffer_window: int = 0
    weight_fraction: int = 0  # set when the build sizes the unit (generate), as the fractions below
    in_fraction: int = 0
    in_signed: bool = True
    out_fraction: int = 0
    out_signed: bool = True
    clip: Optional[list[Optional[float]]] = None  # a Clip that ends it: its low and high bounds (None: no bound)
    # its input lies in DDR: copied whole by the top, one burst, to a buffer on chip of its own step
    # (``<unit>.copy``), which it reads; or, where no copy fits, staged a row of output pixels at a time through its
    # subfunction's staging buffer (the memory plan's, on chip), which its windows read (hls/engine.h's engine_stage)
    copied: bool = False
    staged: bool = False
    # an Add of another map of its output's shape ends it before its ReLU (a residual connection: the unit's second
    # input), added to the sums at the residual buffer's binary point and signedness (hls/engine.h)
    residual: bool = False
    residual_fraction: int = 0
    residual_signed: bool = True
    # where it writes its output straight into its channels of a Concat's (``units.concats_in_place``): the channels
    # of the buffer that holds it (``Buffer.view_of``), the elements from one of its pixels to the next; 0: its own
    out_stride: int = 0

    @property
    def dense(self) -> bool:
        """A dense layer: one output pixel of a 1 x 1 window over a 1 x 1 input (hls/engine.h runs one deeper than the
        lanes' buffers in chunks)."""
        return self.input == self.output == self.kernel == [1, 1]

    @property
    def depthwise(self) -> bool:
        """A depthwise convolution: a group a channel (hls/engine.h runs it a lane a channel)."""
        return self.groups == self.channels == self.filters > 1

    @property
    def window(self) -> int:
        """Values a window holds, each output value's products (its group's channels)."""
        return self.kernel[0] * self.kernel[1] * self.channels // self.groups


@dataclass
class Band:
    """A unit run band by band, its hls4ml project made for one band of rows: band b computes output
    rows b * rows onwards (the last band's rows past the map are computed and dropped) from ``input_rows``
    input rows from b * input_step - pad_top (the kernel's halo; rows outside the map are zeros, the
    layer's padding), which the top copies from the unit's input buffer into a band buffer; it copies the
    output band into the unit's output buffer. Activations stay whole in their buffers (in DDR where the
    memory plan puts them there); only the band buffers need to be on chip."""

    rows: int
    count: int
    input_rows: int
    input_step: int
    pad_top: int
    input_height: int
    output_height: int
    input_row_values: int  # values of an input row (its width x channels, channels-last)
    output_row_values: int

    @property
    def input_values(self) -> int:
        return self.input_rows * self.input_row_values

    @property
    def output_values(self) -> int:
        return self.rows * self.output_row_values


@dataclass
class OpenSynthesis:
    """An FPGA execution unit's arithmetic as RTL from open tools (``build --open-synth``): da4ml's
    Verilog of what its C-simulation computes, simulated by Icarus Verilog against that C-simulation,
    synthesised by Yosys. Not the RTL Vivado HLS makes from hls4ml's C++; Yosys's counts, not Vivado's."""

    status: str  # "synthesised"; "not traced" (``why``: the op or type that stops it); "skipped for size"
    why: str = ""
    rtl: str = ""  # its folder, relative to the build folder
    kernel: str = ""  # "unit": the whole unit a call; "pixel": a convolution's kernel, once an output pixel
    stages: int = 0  # pipeline stages the RTL was cut into (at the board's clock, by hetdeploy's timing rule)
    vectors: int = 0  # input vectors simulated (samples, times output pixels for a kernel)
    values: int = 0  # output values compared with the C-simulation
    mismatches: int = 0  # of those, how many differ in any bit
    first_mismatch: str = ""  # where, and the two values
    da4ml_cost: float = 0.0  # da4ml's own estimate (its adder bits, LUT-equivalent)
    yosys: dict[str, int] = field(default_factory=dict)  # lut, carry, ff, dsp, bram18, lutram
    seconds: dict[str, float] = field(default_factory=dict)  # trace, simulate, synthesise

    @property
    def bit_exact(self) -> bool:
        return self.values > 0 and self.mismatches == 0


@dataclass
class ExecutionUnit:
    """A fused chain of ops on one PE kind of the FPGA, with its folding and estimate."""

    name: str
    nodes: list[str]
    pe: str
    reuse_factor: int
    strategy: str
    precision: str  # of its output (C++ type); "ap_fixed<W,6>" until HLS generation sizes it
    estimate: dict[str, int]  # dsp, bram18, lut, ff, latency_cycles
    # a resource synthesis decides (units.estimate_range): [least, most] around its estimate
    estimate_range: dict[str, list[int]] = field(default_factory=dict)
    # its estimate by part (units.resource_parts: arithmetic, control, registers, line buffers, FIFOs, lookup
    # tables), each part's non-zero resources; empty on the engine
    resource_parts: dict[str, dict[str, int]] = field(default_factory=dict)
    weights_in_ddr: bool = False  # its weights stay in DDR, read by the unit on every run
    table_size: int = 0  # entries of each lookup table of its Softmax or table activations (TableSize); 0: none
    io_type: str = ""  # hls4ml's IOType of its project (units.IO_TYPES); "": none, the top moves its values
    foldable: bool = False  # a multiply-accumulate layer: a reuse factor folds it, its weights may go to DDR
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    onnx: str = ""  # the unit as an ONNX model (the reference it is verified against)
    hls: Optional[UnitHls] = None  # None for a unit our top implements itself (Flatten, Reshape, ..., MaxPool)
    # such a unit that moves values (a relayout): its table of steps (arena.h's relayout), a C++ header relative to
    # the subfunction's HLS project
    index_table: str = ""
    window: Optional[Window] = None  # a window op the top reduces (a MaxPool, an AveragePool, ...): its geometry
    # ops the top computes itself over whole buffers (arena.h's add, concat, affine, lrn, quantize): ["Add"],
    # ["Add", "Relu"], ["Concat"], ["BatchNormalization"], ["BatchNormalization", "Relu"], ["LRN"], ["Quant"]
    elementwise: list[str] = field(default_factory=list)
    # a BatchNormalization's: the C++ header of its per-channel scale and shift, relative to the HLS project
    affine: str = ""
    local_response: Optional[LocalResponse] = None  # an LRN the top computes: its attributes
    quantizer: Optional[Quantizer] = None  # a Quant the top computes: its parameters
    band: Optional[Band] = None  # run band by band, through two band buffers (``band_buffers``)
    # a Concat the top runs: its inputs whose units (engine units, Concats) write them into its output's channels
    # themselves (``units.concats_in_place``); it moves only the others
    in_place: list[str] = field(default_factory=list)
    engine: Optional[EngineLayer] = None  # run on the subfunction's engine (strategy "engine")
    verification: Optional[Verification] = None
    # samples a second it sustains on its own: the FPGA's clock over its cycles a sample (0: it runs no loop, a Concat
    # whose inputs their units wrote in place)
    rate_per_s: float = 0.0
    open_synthesis: Optional[OpenSynthesis] = None  # build --open-synth's

    @property
    def residual(self) -> Optional[str]:
        """The map an engine unit adds to its layer's output (its ``engine.residual``): its last input, which may be
        its layer's input too; None: none."""
        return self.inputs[-1] if self.engine is not None and self.engine.residual else None

    def listed_parts(self) -> dict[str, dict[str, int]]:
        """The parts of its resources the plan and the report list under it: a streamed unit's (its line buffers
        and FIFOs) or a table layer's; none else."""
        return self.resource_parts if self.io_type == "io_stream" or "lookup tables" in self.resource_parts else {}

    def band_buffers(self) -> dict[str, tuple[str, int]]:
        """A banded unit's band buffers: name -> (the tensor whose values it holds a band of, its values)."""
        if self.band is None:
            return {}
        return {f"{self.name}.band_in": (self.inputs[0], self.band.input_values),
                f"{self.name}.band_out": (self.outputs[0], self.band.output_values)}


@dataclass
class Buffer:
    """A tensor of an FPGA subfunction in one of its memories, live over schedule steps first..last;
    or (kind "weights") the DDR weights of an execution unit, resident over every step."""

    tensor: str  # kind "weights": "<unit>.weights"
    memory: str  # bram, reserved or ddr
    offset: int  # bytes
    size: int  # bytes
    first: int
    last: int
    precision: str  # element type, C++
    # or "weights"; or "staging": the on-chip buffer an engine unit whose input lies in DDR stages its rows in
    # (``<subfunction>.staging``, resident over every step); or "copy": the on-chip copy of such an input, live over
    # its unit's step (``<unit>.copy``)
    kind: str = "activation"
    # an input of a Concat written in place (``ExecutionUnit.in_place``): the tensor whose buffer holds its values,
    # its channels a slice of each pixel's (the Concat's output, or the last of a chain of Concats each written into
    # the next, the root; offset: its first channel's in the root's first pixel; first and last: the root's)
    view_of: str = ""


@dataclass
class MemoryPlan:
    """Where an FPGA subfunction's buffers live (see memory.py)."""

    strategy: str
    target_bytes: int  # BRAM left to this subfunction's buffers after the units' weights and FIFOs
    reserved_bytes: int  # the board's reserved BRAM still free when this subfunction was planned
    reserved_used_bytes: int
    bram_bytes: int  # target memory used
    ddr_bytes: int  # spilled buffers and DDR weights
    lower_bound_bytes: int  # most bytes live at one schedule step
    # DDR traffic of the spilled buffers (one write, one read per reader; an engine unit's reads: its staging)
    ddr_transfer_s: float
    # the DDR weights' reads (once per output vector of their unit; the engine's through its bundles' ports at once)
    ddr_weights_s: float
    footprints: dict[str, int]  # every strategy's footprint in one unbounded memory (how the choice was made)
    buffers: list[Buffer]
    # the top's float ports for a batch of ``hls.max_batch`` samples, in DDR the host allocates: two sets
    # (run.py fills one while the core works on the other). The units take one sample at a time, so a
    # batch needs no more on-chip buffers than one sample.
    batch_bytes: int = 0
    uram_target_bytes: int = 0  # the FPGA's URAM still free when this subfunction was planned (after BRAM)
    uram_bytes: int = 0  # URAM used
    # of ddr_transfer_s: the engine units' staging of their inputs in DDR (hls/engine.h's engine_stage, its cycles at
    # the FPGA's clock)
    engine_staging_s: float = 0.0


@dataclass
class Fifo:
    """A FIFO of a dataflow top: tensor ``tensor`` from the process that writes it to one that reads it, ``depth``
    tokens (a pixel's channels, or a flat tensor whole) of ``token_bits`` each (its values' lanes, whole arena
    words), the depth the schedule needs (planning/dataflow.py's ``fifo_depths``)."""

    name: str  # "<tensor>><reader>"
    tensor: str
    writer: str  # a unit, or "input": the top's float ports
    reader: str  # a unit, or "output"
    depth: int
    token_bits: int
    bram18: int  # its BRAM18s (none: shift-register LUTs or registers; units.bram18_blocks)
    lut: int = 0  # a FIFO too small for BRAM: its shift-register LUTs (SRLC32E: 32 deep a bit)
    ff: int = 0  # ... or, two tokens deep or less, its registers


@dataclass
class Top:
    """How an FPGA subfunction's top runs its units: "sequential", one after another a sample over the memory
    plan's buffers (their space reused), or "dataflow", each a process working on its own sample at once, linked by
    FIFOs (hls4ml's io_stream, FINN's dataflow): its interval its slowest process's, its memory every FIFO and each
    top op's own copy of its buffers. Both tops' cycles (a sample alone; between samples in a stream) as the
    planner weighed them, at the FPGA's clock; the dataflow's from its processes' free schedule."""

    kind: str  # TOPS
    why: str  # how it was chosen: --top's, or the objective's figures
    sequential_latency_cycles: int
    sequential_interval_cycles: int
    dataflow_latency_cycles: int = 0  # 0: no dataflow top (``dataflow_refused`` says why)
    dataflow_interval_cycles: int = 0
    dataflow_bram18: int = 0  # its FIFOs' and its top ops' buffers'
    dataflow_lut: int = 0  # its FIFOs' too small for BRAM
    dataflow_ff: int = 0
    dataflow_refused: str = ""
    fifos: list[Fifo] = field(default_factory=list)
    # the cycles a sample's ports take in and out in the sequential top, after its units' (units.port_cycles: a float
    # a cycle, a buffer word of codes a cycle); the dataflow's input and output processes take them as theirs
    port_cycles: int = 0

    @property
    def latency_cycles(self) -> int:
        return self.dataflow_latency_cycles if self.kind == "dataflow" else self.sequential_latency_cycles

    @property
    def interval_cycles(self) -> int:
        return self.dataflow_interval_cycles if self.kind == "dataflow" else self.sequential_interval_cycles


TOPS = ("sequential", "dataflow")


@dataclass
class FpgaResources:
    """One FPGA's resources summed over all its subfunctions (estimates), against its budget."""

    subfunctions: list[str]
    used: dict[str, int]  # dsp, bram18, lut, ff: the units' and ``dataflow``
    budget: dict[str, int]  # the resources less the reserve, within the utilisation caps
    resources: dict[str, int]  # the chip's
    dataflow: dict[str, int] = field(default_factory=dict)  # bram18, lut, ff of its dataflow tops' FIFOs and copies
    # the share of its DSP budget its engines were sized within (units.engine_allowance; None: units.ENGINE_SHARES's,
    # which plan_model.folded_plan weighs against all of them, 1.0)
    engine_dsp_share: Optional[float] = None
    # ... and of its URAM blocks (None: units.ENGINE_SHARES's; plan_model.folded_plan weighs ENGINE_URAM_SHARES too)
    engine_uram_share: Optional[float] = None


@dataclass
class Transfer:
    """A tensor an FPGA subfunction takes from the host or gives it, weighed for travelling zero-compressed
    (planning.compression): its share of zeros on the sizing samples, its bytes a sample raw and compressed at
    that share, the seconds a sample compressing saves (the link's less the codec's; negative: it costs)."""

    tensor: str
    link: str  # "source->target"
    values: int  # a sample's
    zero_share: float
    raw_bytes: int
    compressed_bytes: int
    saved_s: float
    compressed: bool


@dataclass
class Subfunction:
    name: str
    device: str
    kind: str
    nodes: list[str]
    inputs: list[str]
    outputs: list[str]
    onnx: str = ""
    estimate: Optional[SubfunctionEstimate] = None
    # a CPU or GPU subfunction's model runs a batch a call, its batch axis left open (planning.batching); else a
    # sample a call
    batched: bool = False
    execution_units: list[ExecutionUnit] = field(default_factory=list)
    # its units were cut and folded with the engine weighed (a unit it computes fuses only what it computes); a
    # refold after a widening keeps that
    engine_weighed: bool = False
    resources: Optional[dict[str, int]] = None  # the units' totals
    budget: Optional[dict[str, Optional[int]]] = None  # the FPGA's resources minus the reserve
    memory: Optional[MemoryPlan] = None
    top: Optional[Top] = None  # an FPGA subfunction's: how its top runs its units
    hls: Optional[HlsProject] = None
    verification: Optional[Verification] = None
    transfers: list[Transfer] = field(default_factory=list)  # an FPGA subfunction's, weighed for compression
    # an FPGA subfunction's inputs that a quantizer on the host gives, travelling as its codes (1 to 8 bits each,
    # not a float: planning.input_codes.port_codes)
    input_codes: dict[str, PortCodes] = field(default_factory=dict)
    # an FPGA subfunction's float ports (inputs and outputs) that its top reads or writes several floats at a time
    # (units.port_floats): how many
    floats_a_word: dict[str, int] = field(default_factory=dict)


@dataclass
class IlpRun:
    """What the exact partitioner (--partitioner ilp, planning.ilp) did for the plan."""

    status: str  # HiGHS's: "Optimal", "Time limit reached", ...
    slots: int  # the most subfunctions the programme's plans have
    bound_s: Optional[float]  # the proven lower bound on their latency (None: none within the time limit)
    gap: Optional[float]  # (the plan's latency - bound) / the plan's latency, as the partitioner priced it
    seconds: float  # solving time
    time_limit_s: float
    search_s: float  # the search's plan's latency as the partitioner priced it
    chosen: str  # "ilp" where the solver's plan was better, else "search" (the solver's start)


@dataclass
class MeasuredFigures:
    """What a profile (--profile) gave the plan in place of the board file's figures (planning.profile)."""

    file: str
    recorded_by: str  # run.py, run.py --emulate or hetdeploy emulate
    measured_on: str
    nodes: dict[str, list[str]]  # device -> the nodes whose seconds on it were measured
    # FPGA -> node -> the factor its measured calls put on its estimate (measured / estimated core time)
    fpga_nodes: dict[str, dict[str, float]]
    links: list[str]  # "source->target": links whose seconds per byte were measured
    ignored_nodes: list[str]  # nodes the profile names that the model does not have
    # device -> its measured seconds a call beyond its nodes' (an FPGA's: beyond its core and copies), in place
    # of the board file's invocation_overhead_s
    call_overhead_s: dict[str, float] = field(default_factory=dict)


@dataclass
class Plan:
    board: str
    model: str  # the normalised model, relative to the build folder
    source_model: str  # the user's model file name (for reports)
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    subfunctions: list[Subfunction] = field(default_factory=list)
    policy: str = "latency"
    estimate: Optional[PlanEstimate] = None
    fpga_fallbacks: list[FpgaFallback] = field(default_factory=list)
    input_reshapes: list[InputReshape] = field(default_factory=list)
    relative_tolerance: float = 0.05
    seed: int = 0
    width: int = DEFAULT_WIDTH  # fixed-point bits of every FPGA value (--width)
    calibration: Optional[Calibration] = None  # what the FPGA types were sized on (a build's)
    widened: list[Widening] = field(default_factory=list)  # units the build widened to pass
    precision_search: Optional[PrecisionSearch] = None  # --error-budget's
    # every node of the user's model -> where it went: {"subfunction", "unit"} (the unit only on an
    # FPGA), or {"folded_into": node, ...where that node went} for a node intake folded into
    # another, or {"removed": why}
    node_map: dict[str, dict[str, str]] = field(default_factory=dict)
    fpga_resources: dict[str, FpgaResources] = field(default_factory=dict)  # per FPGA device: the chip's totals
    measured: Optional[MeasuredFigures] = None  # the profile's figures the plan used (--profile)
    ilp: Optional[IlpRun] = None  # the exact partitioner's run (--partitioner ilp)
    codes_input: Optional[CodesInput] = None  # where its input may be given as codes (``run.py --codes``)
    # the build's options, defaults included, as a config file holds them (config.resolved_config):
    # ``hetdeploy config DIR`` writes it back for ``build --config``
    config: dict[str, Any] = field(default_factory=dict)
    format: int = PLAN_FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=False, allow_nan=False) + "\n"  # strict JSON: no Infinity

    def save(self, path: Path) -> None:
        Path(path).write_text(self.to_json())

    @staticmethod
    def load(path: Path) -> "Plan":
        return read_json(path, Plan, "plan", PLAN_FORMAT, "no plan.json here; is this a hetdeploy build folder?")


def load_json(path: Path, what: str, missing: str) -> Any:
    """The JSON value in the file ``path`` (the ``what`` it holds); one line naming the file when it
    is missing (``missing`` says what that means), unreadable or not JSON."""
    from .errors import UserError

    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: {missing}") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{path}: line {err.lineno}: not valid JSON ({err.msg})") from None
    except (OSError, UnicodeDecodeError, RecursionError) as err:
        raise UserError(f"{path}: cannot read the {what} ({type(err).__name__})") from None


def read_json(path: Path, cls: type, what: str, version: int, missing: str) -> Any:
    """The dataclass ``cls`` from the JSON file ``path`` hetdeploy wrote (its ``format`` ``version``),
    every value's type checked; one line naming the file when it is missing (``missing`` says what
    that means), not JSON, of another format or damaged."""
    from .errors import UserError

    data = load_json(path, what, missing)
    if not isinstance(data, dict) or data.get("format") != version:
        found = data.get("format") if isinstance(data, dict) else None
        raise UserError(f"{path}: {what} format {found!r}, this hetdeploy reads {version}")
    try:
        return _from_dict(cls, data, "")
    except PlanFormatError as err:
        raise UserError(f"{path}: not a {what} this hetdeploy wrote: {err}") from None


def from_dict(cls: type, data: Any) -> Any:
    """A dataclass of this module from its ``asdict`` form, every value's type checked
    (PlanFormatError when one does not match)."""
    return _from_dict(cls, data, "")


class PlanFormatError(ValueError):
    """A plan.json value of the wrong type, or a field missing: a damaged or foreign file."""


def _from_dict(cls: type, data: Any, where: str) -> Any:
    """Rebuild nested dataclasses from ``asdict`` output, checking every value's type."""
    if not isinstance(data, dict):
        raise PlanFormatError(f"{where or 'top level'}: expected an object")
    hints = get_type_hints(cls)
    kwargs = {}
    for f in fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}" if where else f.name)
    try:
        return cls(**kwargs)
    except TypeError:  # a required field missing
        missing = [f.name for f in fields(cls) if f.name not in kwargs]
        raise PlanFormatError(f"{where or 'top level'}: missing {', '.join(missing)}") from None


_SCALARS = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = get_origin(tp)
    if value is None:
        if origin is not None and type(None) in get_args(tp) or tp is Any:
            return None
        raise PlanFormatError(f"{where}: null")
    if origin is list:
        (item,) = get_args(tp)
        if not isinstance(value, list):
            raise PlanFormatError(f"{where}: expected a list")
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _, item = get_args(tp)
        if not isinstance(value, dict):
            raise PlanFormatError(f"{where}: expected an object")
        return {k: _convert(item, v, f"{where}.{k}") for k, v in value.items()}
    if origin is not None:  # Optional[X]
        inner = [a for a in get_args(tp) if a is not type(None)][0]
        return _convert(inner, value, where)
    if is_dataclass(tp):
        return _from_dict(tp, value, where)
    if tp in _SCALARS and (not isinstance(value, _SCALARS[tp]) or tp is not bool and isinstance(value, bool)):
        raise PlanFormatError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
    if tp is float and not math.isfinite(value):  # hetdeploy writes strict JSON: NaN or Infinity is damage
        raise PlanFormatError(f"{where}: {value}, not a finite number")
    return value
