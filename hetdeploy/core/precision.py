"""Fixed-point precisions from values and from quantizers: pure arithmetic, no hls4ml or onnx.

A precision is (width, integer): ``width`` bits in all, ``integer`` of them above the binary point
counting the sign (ap_fixed<width, integer>); integer may be negative or exceed width.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Collection, Mapping, Optional

import numpy as np

from .graph import Graph, Node

# fixed-point bits of an FPGA value that neither a quantizer nor --width sets
DEFAULT_WIDTH = 16

# Ops whose outputs hold values of their input (moved, or picked by max/ReLU): a quantizer's
# precision reaches through them.
VALUE_KEEPING_OPS = {"Relu", "MaxPool", "GlobalMaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
                     "DepthToSpace", "SpaceToDepth"}
# ... and those whose outputs are values of their input each: a ReLU makes a sign -1 a 0
SIGN_KEEPING_OPS = VALUE_KEEPING_OPS - {"Relu"}


def source_quantizer(graph: Graph, tensor: str, producers: Mapping[str, int],
                     through: Collection[str] = VALUE_KEEPING_OPS) -> Optional[Node]:
    """The Quant or BipolarQuant whose values ``tensor`` holds, reached back through ops of ``through``
    (``producers``: the graph's); None where another op writes them first, or none does."""
    while tensor in producers:
        node = graph.nodes[producers[tensor]]
        if node.op in ("Quant", "BipolarQuant"):
            return node
        if node.op not in through or not node.inputs:
            return None
        tensor = node.inputs[0]
    return None


def quantizer_codes(bits: int, signed: bool, narrow: bool) -> tuple[int, int]:
    """The least and the most integer code of a QONNX Quant of ``bits`` bits (qonnx's min_int and max_int): a
    narrow one leaves out the most negative (signed) or the largest (unsigned) code."""
    if signed:
        return -(2 ** (bits - 1)) + narrow, 2 ** (bits - 1) - 1
    return 0, 2 ** bits - 1 - narrow


@dataclass(frozen=True)
class Quantizer:
    """A QONNX Quant (and a QuantizeLinear/DequantizeLinear pair) with constant parameters:
    y = scale * (clip(round(x / scale + zero_point), lo, hi) - zero_point)."""

    bits: int
    scale: float
    zero_point: float
    signed: bool
    narrow: bool
    rounding: str  # "ROUND" (to nearest, ties to even) or "FLOOR"

    @property
    def exponent(self) -> Optional[int]:
        """log2(scale) when the scale is a power of two, else None."""
        mantissa, exponent = math.frexp(self.scale)
        return exponent - 1 if mantissa == 0.5 else None

    @property
    def exact_in_fixed_point(self) -> bool:
        """A power-of-two scale and zero point 0: the quantizer is a fixed-point cast."""
        return self.exponent is not None and self.zero_point == 0

    def fixed(self) -> tuple[int, int]:
        """(width, integer) of the fixed-point type its outputs are (exact when
        ``exact_in_fixed_point``; else the integer codes' range at this scale)."""
        exponent = self.exponent if self.exponent is not None else math.ceil(math.log2(self.scale))
        return self.bits, self.bits + exponent

    def hls4ml_precision(self) -> str:
        """The hls4ml config string of that type, rounding and saturating as the quantizer does."""
        width, integer = self.fixed()
        rounding = "RND_CONV" if self.rounding == "ROUND" else "TRN"
        saturation = "SAT_SYM" if self.narrow and self.signed else "SAT"
        return f"{'' if self.signed else 'u'}fixed<{width},{integer},{rounding},{saturation}>"


# How the build rounds and saturates every value it sizes (hls4ml's "fixed<W,I,RND,SAT>"): round half
# up, saturate. The budget search simulates the same.
BUILD_ROUNDING, BUILD_OVERFLOW = "RND", "SAT"


def fixed_grid(width: int, integer: int, signed: bool = True, overflow: str = BUILD_OVERFLOW
               ) -> tuple[float, float, float]:
    """(step, least, largest value) of ap_fixed<width, integer> (ap_ufixed when not ``signed``); a
    signed type saturating symmetrically (SAT_SYM, a narrow quantizer's) stops one step above the most
    negative code."""
    step = 2.0 ** (integer - width)
    if not signed:
        return step, 0.0, 2.0 ** integer - step
    largest = 2.0 ** (integer - 1) - step
    return step, -largest if overflow.removeprefix("AP_") == "SAT_SYM" else -(2.0 ** (integer - 1)), largest


def quantize(values: np.ndarray, width: int, integer: int, signed: bool = True, rounding: str = BUILD_ROUNDING,
             overflow: str = BUILD_OVERFLOW) -> np.ndarray:
    """``values`` as ap_fixed<width, integer, AP_<rounding>, AP_<overflow> (ap_ufixed when not
    ``signed``) holds them, as float64: by ``quantizers``, hls4ml's own fixed-point library (tested
    against the ap_types headers). Modes: TRN, TRN_ZERO, RND, RND_ZERO, RND_MIN_INF, RND_INF,
    RND_CONV; WRAP, SAT, SAT_SYM, WRAP_SM (the AP_ prefix optional)."""
    from quantizers import get_fixed_quantizer_np

    try:
        quantizer = get_fixed_quantizer_np(rounding.removeprefix("AP_"), overflow.removeprefix("AP_"))
    except KeyError:
        raise ValueError(f"fixed-point mode {rounding}/{overflow} is not one ap_fixed has") from None
    sign = 1 if signed else 0
    return quantizer(np.asarray(values, dtype=np.float64), sign, integer - sign, width - integer)


@dataclass(frozen=True)
class CppFixed:
    """A C++ fixed-point type as hls4ml writes it: ap_fixed<W,I[,Q[,O[,N]]]>, ap_ufixed<...> (modes
    with or without the AP_ prefix, kept without it; defaults TRN, WRAP), ap_int<W>, ap_uint<W> (an
    integer: I = W, and a double converts to it as C++ does: toward zero, wrapped)."""

    signed: bool
    width: int
    integer: int
    rounding: str = "TRN"
    overflow: str = "WRAP"

    _TYPE = re.compile(r"ap_(u?)fixed<(\d+),(-?\d+)(?:,(?:AP_)?(\w+?))?(?:,(?:AP_)?(\w+?))?(?:,\d+)?>$")
    _INT = re.compile(r"ap_(u?)int<(\d+)>$")

    @classmethod
    def parse(cls, definition: str) -> "CppFixed":
        text = definition.replace(" ", "")
        if (match := cls._TYPE.match(text)) is not None:
            unsigned, width, integer, rounding, overflow = match.groups()
            return cls(not unsigned, int(width), int(integer), rounding or "TRN", overflow or "WRAP")
        if (match := cls._INT.match(text)) is not None:
            return cls(not match.group(1), int(match.group(2)), int(match.group(2)), "TRN_ZERO")
        raise ValueError(f"not an ap_fixed or ap_int type: {definition}")

    @property
    def fraction(self) -> int:
        return self.width - self.integer

    def quantize(self, values: np.ndarray) -> np.ndarray:
        """``values`` as this type holds them (float64)."""
        return quantize(values, self.width, self.integer, self.signed, self.rounding, self.overflow)


@dataclass(frozen=True)
class SoftmaxTables:
    """What hls4ml's stable Softmax computes with, as ``hls4ml_adapter`` configures it for an input of
    ap_fixed<input_width, input_integer> and ``n`` values per slice: d = max - x held exactly
    (ap_ufixed<input_width, input_integer>), an exp table indexed by d's top bits, the sum of the
    exponentials exact, an inverse table indexed by the top bits of that sum as ap_ufixed<18, sum_bits>."""

    input_width: int
    input_integer: int
    n: int
    table_size: int  # the unit's TableSize (units.LOOKUP_TABLE_SIZE unless --table-size pins another)

    TABLE_WIDTH, TABLE_INTEGER = 18, 2  # both tables: values in (0, 1] and 1/sum in (0, 1]

    @property
    def exp_size(self) -> int:
        return min(self.table_size, 2 ** self.input_width)

    @property
    def sum_bits(self) -> int:
        """Integer bits (unsigned) of a sum of n values in (0, 1]."""
        return math.ceil(math.log2(self.n + 1)) + 1

    def accumulator(self) -> str:
        """The hls4ml precision that sums the n table values exactly: signed, the sum's integer bits,
        every fraction bit of the table's."""
        return f"fixed<{self.sum_bits + 1 + self.TABLE_WIDTH - self.TABLE_INTEGER},{self.sum_bits + 1}," \
               f"{BUILD_ROUNDING},{BUILD_OVERFLOW}>"

    @property
    def exp_step(self) -> float:
        """The d one exp-table index spans: d's top log2(exp_size) bits index it."""
        return 2.0 ** (self.input_integer - (self.exp_size.bit_length() - 1))

    @property
    def sum_step(self) -> float:
        """The sum one inverse-table index spans: the top log2(table_size) bits of ap_ufixed<18, sum_bits>."""
        return 2.0 ** (self.sum_bits - (self.table_size.bit_length() - 1))

    def exp_table(self) -> np.ndarray:
        """exp(-d) at each index's least d, as float32 (the C++ fills it with std::exp on floats)."""
        d = np.arange(self.exp_size) * self.exp_step
        return quantize(np.exp(-d.astype(np.float32)), self.TABLE_WIDTH, self.TABLE_INTEGER)

    def inverse_table(self) -> np.ndarray:
        """1 / s at each index's least s (index 0: 1/0, saturated to the largest value)."""
        s = np.arange(self.table_size) * self.sum_step
        with np.errstate(divide="ignore"):
            inverse = np.float32(1.0) / s.astype(np.float32)
        return quantize(inverse, self.TABLE_WIDTH, self.TABLE_INTEGER)


def integer_bits(max_abs: float, headroom: int = 1) -> int:
    """Sign bit + bits for the largest magnitude seen + ``headroom`` bits (activations: one, as
    unseen inputs may be larger; weights: none, their values are known). Negative for values
    below 1/2 (ap_fixed<16,-3> holds magnitudes under 1/16)."""
    if max_abs <= 0:
        return 1
    return math.ceil(math.log2(max_abs)) + 1 + headroom


def weight_fixed(values: np.ndarray, width: int) -> tuple[int, int]:
    """(width, integer) for a constant: exact in the fewest bits when at most ``width`` hold it
    (quantized weights); else ``width`` bits, the largest magnitude setting the integer bits (one
    more when rounding the largest would saturate it)."""
    exact = exact_fixed(values, width)
    if exact is not None:
        return exact
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    integer = max(integer_bits(peak, headroom=0), 1 - width)
    if peak > 2.0 ** (integer - 1) - 2.0 ** (integer - width - 1):  # rounds past the largest code
        integer += 1
    return width, min(integer, width - 1)  # what needs more saturates (and C-simulation counts it)


# Octaves ``weight_octaves`` tells apart: one more than the widest fixed-point type hetdeploy builds
# (--width 32) has magnitude bits.
OCTAVES = 33


def weight_octaves(values: np.ndarray, integer: int) -> tuple[int, ...]:
    """How many of a layer's weights lie each octave under the top of their fixed-point format
    ap_fixed<W, ``integer``> (whose magnitudes stay under 2**(integer - 1)): entry d counts those in
    [2**(integer - 2 - d), 2**(integer - 1 - d)), whose codes need W - 1 - d magnitude bits at any W;
    the last entry (OCTAVES - 1) those further under, zeros included, which round to nothing at any
    width up to OCTAVES - 1. An estimate of a multiplication by a constant needs these bits, not W."""
    values = np.asarray(values).reshape(-1)
    if values.dtype not in (np.float32, np.float64):
        values = values.astype(np.float64)
    # counted by the values' exponent fields (a pass over their bits, not over copies of them): a normal
    # value's field f puts it in [2**(f - bias), 2**(f - bias + 1)); zeros and subnormals (f = 0) lie past
    # the last octave; f all ones is an Inf or a NaN, left out
    info = np.finfo(values.dtype)
    field_bits, bias = info.nexp, info.maxexp - 1
    fields = (values.view(np.uint32 if values.dtype == np.float32 else np.uint64) >> info.nmant) & (2 ** field_bits - 1)
    counts = np.bincount(fields.astype(np.int64), minlength=2 ** field_bits)[:-1]
    depths = np.clip(integer - 2 - (np.arange(len(counts)) - bias), 0, OCTAVES - 1)
    depths[0] = OCTAVES - 1
    return tuple(int(n) for n in np.bincount(depths, weights=counts, minlength=OCTAVES).astype(np.int64))


def octaves_moved(octaves: tuple[int, ...], integer: int, to_integer: int) -> tuple[int, ...]:
    """``weight_octaves`` counted under the top of ap_fixed<W, ``integer``>, counted instead under the top of
    ap_fixed<W, ``to_integer``> (a weight type pinned by the user): each octave ``to_integer - integer`` deeper
    (a wider integer part leaves fewer fraction bits to each code), those past the last entry in it, those over
    the new top saturating into its first; the last entry's (zeros among them) stay under any top."""
    if not octaves:
        return ()
    depths = np.clip(np.arange(len(octaves)) + (to_integer - integer), 0, OCTAVES - 1)
    depths[OCTAVES - 1:] = OCTAVES - 1
    return tuple(int(n) for n in np.bincount(depths, weights=octaves, minlength=OCTAVES).astype(np.int64))


def exact_fixed(values: np.ndarray, max_width: int) -> Optional[tuple[int, int]]:
    """The narrowest signed (width, integer) that holds every value exactly, if one of at most
    ``max_width`` bits does (quantized weights: a 4-bit weight needs 4 bits, not 16); else None."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size > 4096 and exact_fixed(values[:4096], max_width) is None:  # float weights: no need to look on
        return None
    if values.size == 0 or not np.all(np.isfinite(values)):
        return None
    nonzero = values[values != 0]
    if nonzero.size == 0:
        return 2, 2
    # the least fraction bits that make every value an integer code: a value m * 2**e (m in
    # [1/2, 1)) needs at least 1 - e; the largest needs e + fraction + 1 bits, at most max_width, but -2**(e - 1)
    # e + fraction (an int8 code of -128: 8 bits), which the count of the codes' bits below settles
    exponents = np.frexp(nonzero)[1]
    least, most = 1 - int(np.min(exponents)), max_width - int(np.max(exponents))
    for fraction in range(least, most + 1):
        codes = np.ldexp(values, fraction)
        if np.all(codes == np.round(codes)):
            break
    else:
        return None
    low, high = float(np.min(codes)), float(np.max(codes))
    bits = max(math.ceil(math.log2(high + 1)) + 1 if high > 0 else 1,
               math.ceil(math.log2(-low)) + 1 if low < 0 else 1)
    bits = max(bits, 2)  # hls4ml takes a 1-bit type for a binary (XNOR) one
    if bits > max_width:
        return None
    return bits, bits - fraction


# no node's width chosen by --error-budget's search: each takes its quantizers' or --width's
NO_LAYER_WIDTHS: Mapping[str, int] = MappingProxyType({})


def node_widths(graph: Graph, default: int, layer_widths: Mapping[str, int] = NO_LAYER_WIDTHS) -> list[int]:
    """Per node, the bits its multipliers and buffers take: ``layer_widths``' (node name -> bits) when
    --error-budget's search chose them (widened where verification widened them); in a quantized model, a layer whose inputs come from quantizers
    (through ops that keep values) and whose weights are exact in few bits takes the widest of
    those; every other node ``default`` (--width)."""
    producers = graph.producers()

    def quantized_bits(tensor: str) -> Optional[int]:
        quantizer = source_quantizer(graph, tensor, producers)
        if quantizer is None:
            return None
        if quantizer.op == "BipolarQuant":  # -1 and +1, in the two-bit type the FPGA holds them in
            return 2
        return int(quantizer.scalars[3]) if 3 in quantizer.scalars else None

    widths = []
    for node in graph.nodes:
        bits = [quantized_bits(t) for t in node.inputs] + ([node.weight_bits] if 1 in node.constants else [])
        widths.append(layer_widths.get(node.name) or (max(bits) if bits and None not in bits else default))
    return widths
