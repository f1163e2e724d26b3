"""The execution-unit estimator (hetdeploy/units.py) beside published post-synthesis figures.

    .venv/bin/python benchmarks/estimates.py

Prints a table; run by hand. Published figure: the hls4ml jet-tagging MLP 16-64-32-32-5 on a PYNQ-Z2
(FACTS.md section 2: Vivado 2019.2 post-place utilisation, HLS latency; 6-bit QKeras, about 75 %
of the weights pruned, ReuseFactor 1, Latency strategy). The estimator knows neither pruning nor
Vivado's habit of building narrow multipliers from LUTs; the rows show it with and without the
pruning applied (3 of 4 multiplications removed), so the ratios say what the model misses.
"""

from __future__ import annotations

import math

from hetdeploy.units import RESOURCES, Shape, estimate

JET_TAGGER = [(16, 64), (64, 32), (32, 32), (32, 5)]  # dense layers (n_in, n_out)
# LUT 20,668; FF 23,097; BRAM36 7 (= 14 BRAM18); DSP 9; 95 cycles (FACTS.md section 2)
PUBLISHED = {"lut": 20668, "ff": 23097, "bram18": 14, "dsp": 9, "latency_cycles": 95}


def jet_tagger_estimate(width: int, kept: float, softmax: bool = True) -> dict[str, int]:
    """Sum over the four dense units at ReuseFactor 1; ``kept``: fraction of multiplications left
    after pruning (folded into n_in)."""
    totals = dict.fromkeys((*RESOURCES, "latency_cycles"), 0)
    for k, (n_in, n_out) in enumerate(JET_TAGGER):
        effective = max(1, math.ceil(n_in * kept))
        shape = Shape("kernel", effective, n_out, 1, False, 0, n_out, softmax and k == len(JET_TAGGER) - 1)
        for key, value in estimate(shape, 1, width).items():
            totals[key] += value
    return totals


def main() -> None:
    rows = [
        ("published (6-bit, pruned)", PUBLISHED),
        ("estimate 6-bit, unpruned", jet_tagger_estimate(6, 1.0)),
        ("estimate 6-bit, 25 % kept", jet_tagger_estimate(6, 0.25)),
        ("estimate 16-bit, unpruned", jet_tagger_estimate(16, 1.0)),
    ]
    keys = (*RESOURCES, "latency_cycles")
    print("hls4ml jet tagger 16-64-32-32-5 on a PYNQ-Z2, ReuseFactor 1, Latency strategy")
    print(f"{'':<28}" + "".join(f"{k:>16}" for k in keys))
    for name, figures in rows:
        cells = []
        for k in keys:
            ratio = "" if figures is PUBLISHED else f" ({figures[k] / PUBLISHED[k]:.2f}x)"
            cells.append(f"{str(figures[k]) + ratio:>16}")
        print(f"{name:<28}" + "".join(cells))
    print("ratio = estimate / published")


if __name__ == "__main__":
    main()
