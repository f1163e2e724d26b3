"""Zero-compressed transfers: whether a tensor crossing a link pays for travelling zero-compressed
(``board_runtime.zero_compress``'s form: a count, a bitmap, the kept values), from its share of
zeros on the samples.

A tensor of N float32 values with a share z of zeros takes 4 (1 + ceil(N / 32) + (1 - z) N) bytes
instead of 4 N. What it costs: the host encodes or decodes it in numpy (about three passes over
the raw values at the host's memory bandwidth: compare, pack, gather or scatter), and the FPGA's top
decodes or encodes it a value a cycle where a plain copy moves a 64-bit word, two values, a cycle.
It pays where the link time saved is more than both. The cost model weighs every tensor an FPGA
subfunction takes from the host or gives it (``CostModel.crossing``) from the zeros the partition step
counts (steps/transfers.py); the top (arena.h's from_zero_compressed, to_zero_compressed) and run.py and
emulate (board_runtime.to_port, from_port) do the two ends of the ones it compresses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

MODES = ("auto", "all", "none")  # --compress-transfers: where it pays, every FPGA port, none
VALUE_BYTES = 4
HOST_PASSES = 3  # numpy's passes over the raw values to encode or decode
WORD_VALUES = 2  # float32 values a plain 64-bit copy moves a cycle


def compressed_bytes(values: int, kept: float) -> float:
    """Bytes of one sample of ``values`` values of which ``kept`` are not zero, zero-compressed."""
    return VALUE_BYTES * (1 + math.ceil(values / 32) + kept)


@dataclass(frozen=True)
class Weighed:
    values: int  # a sample's
    zero_share: float  # mean over the samples
    raw_bytes: float
    compressed_bytes: float
    link_saved_s: float  # the link time the smaller tensor saves
    codec_s: float  # the host's and the FPGA's encoding and decoding
    pays: bool

    @property
    def saved_s(self) -> float:
        return self.link_saved_s - self.codec_s


def weigh(values: int, zero_share: float, link_seconds: Callable[[float], float], host_bytes_per_s: float,
          fpga_clock_hz: float) -> Weighed:
    """A tensor of ``values`` values a sample whose share of zeros is ``zero_share``, over a link
    taking ``link_seconds(bytes)``, between a host of memory bandwidth ``host_bytes_per_s`` and an
    FPGA clocked at ``fpga_clock_hz``."""
    raw = float(VALUE_BYTES * values)
    packed = compressed_bytes(values, (1.0 - zero_share) * values)
    link_saved = link_seconds(raw) - link_seconds(packed)
    codec = HOST_PASSES * raw / host_bytes_per_s + (values - values / WORD_VALUES) / fpga_clock_hz
    return Weighed(values, zero_share, raw, packed, link_saved, codec, link_saved > codec)
