"""Fixed-point values as the FPGA's memories hold them: a C++ type's width, range and bytes an element, and
values packed into the little-endian lanes an m_axi port and arena.h's load_array read."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.precision import CppFixed, fixed_grid
from ..planning import units

UNIT_WEIGHTS_FILE = "weights.bin"  # in a unit's project: its DDR weights, packed (pack_fixed)


def unit_weights_path(project: Path, unit: str) -> Path:
    """The ``UNIT_WEIGHTS_FILE`` of ``unit`` in its subfunction's HLS ``project`` (its folder ``units/<unit>``)."""
    return project / "units" / unit / UNIT_WEIGHTS_FILE


def pack_fixed(values: np.ndarray, precision: str) -> bytes:
    """``values`` as ``precision`` (ap_fixed<W,I,Q,O>, ap_int<W>) converts them from double, each in
    ``units.element_bytes(W)`` little-endian bytes (how an m_axi port lays out an array of them, and
    how arena.h's load_array reads them back); the rounding and overflow are ``precision.quantize``'s."""
    fixed = CppFixed.parse(precision)
    try:
        held = fixed.quantize(values)
    except ValueError as err:
        raise ValueError(f"{precision}: {err}, not packed for DDR") from None
    codes = np.round(held * 2.0 ** fixed.fraction).astype(np.int64)  # on the grid: exact
    return codes.astype(f"<i{units.element_bytes(fixed.width)}").tobytes()  # two's complement, sign-extended


def precision_grid(precision: str) -> tuple[float, float, float]:
    """(step, least, largest value) of ap_fixed<W,I,...> / ap_ufixed<W,I,...> (``precision`` C++): a
    signed type saturating symmetrically (AP_SAT_SYM, a narrow signed quantizer's) stops one step above
    the most negative code."""
    fixed = CppFixed.parse(precision)
    return fixed_grid(fixed.width, fixed.integer, fixed.signed, fixed.overflow)


def precision_width(precision: str) -> int:
    """W of C++ type ``precision`` (ap_fixed<W,...>, ap_ufixed<W,...>, ap_int<W>)."""
    return CppFixed.parse(precision).width


def precision_bytes(precision: str) -> int:
    """Bytes an element of C++ type ``precision`` (ap_fixed<W,...>) takes in a buffer (arena.h's lane)."""
    return units.element_bytes(precision_width(precision))
