"""Stage 4b: buffers of an FPGA subfunction and where they live in its memories.

Pure functions over plain data (no onnx, no hls4ml). A subfunction runs its execution units one
after the other (schedule step k = unit k). A buffer is a tensor the units exchange: a subfunction
input (written by the top before step 0), or a unit's output; it is live from the step that writes
it to the last step that reads it, and a subfunction output stays live to the last step (the top
reads it after every unit ran).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Lifetime:
    tensor: str
    first: int
    last: int


def lifetimes(steps: Sequence[tuple[Sequence[str], Sequence[str]]], inputs: Sequence[str],
              outputs: Sequence[str]) -> list[Lifetime]:
    """``steps``: per schedule step, the tensors its unit reads and writes. Buffers in the order
    they are first written (inputs first)."""
    end = len(steps) - 1
    first: dict[str, int] = {t: 0 for t in inputs}
    last: dict[str, int] = {t: 0 for t in inputs}
    for step, (reads, writes) in enumerate(steps):
        for t in reads:
            if t not in first:
                raise ValueError(f"step {step} reads '{t}' before any step writes it")
            last[t] = step
        for t in writes:
            first[t], last[t] = step, step
    for t in outputs:
        last[t] = end
    return [Lifetime(t, first[t], last[t]) for t in first]


def place_without_reuse(sizes: Sequence[int], alignment: int = 1) -> list[int]:
    """Offsets that give every buffer its own range, in the order given."""
    offsets, top = [], 0
    for size in sizes:
        offsets.append(top)
        top += -(-size // alignment) * alignment
    return offsets
