"""How long da4ml 0.6 takes to lay out one multiply-accumulate layer's constant products as hls4ml 1.3's
distributed_arithmetic strategy asks it (``hard_dc`` 2, every decomposition searched), by layer size: the
figure behind ``units.DA_MAX_PRODUCTS``, the largest layer the folding weighs distributed_arithmetic for
(``--weigh-distributed-arithmetic``). hls4ml runs this solve at conversion, once per layer, so a build that
picks distributed_arithmetic for a layer pays it.

Weights are random codes of the given bits (a quantizer's), inputs signed fixed point of the given bits;
the cost is da4ml's (LUT-equivalent adder bits).

    pip install -e ".[open-synth]"
    python benchmarks/da_solve_time.py [--sizes 16x64x8x8,256x64x4x8] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

# inputs x outputs x weight bits x input bits; 784x64x2x2 (a FINN TFC layer) took 414 s here
SIZES = "16x64x8x8,64x64x8x8,128x64x8x8,256x64x4x8"


def solve(n_in: int, n_out: int, weight_bits: int, input_bits: int, seed: int = 0) -> tuple[float, float]:
    """(seconds, da4ml's cost) of one layer's solve."""
    from da4ml.trace import FixedVariableArray, HWConfig, comb_trace

    rng = np.random.default_rng(seed)
    top = 2 ** (weight_bits - 1)
    weights = rng.integers(-top, top, size=(n_in, n_out)).astype(float) / top
    start = time.perf_counter()
    inputs = FixedVariableArray.from_kif(np.ones(n_in), np.zeros(n_in), np.full(n_in, input_bits - 1),
                                         HWConfig(1, -1, -1), solver_options={"hard_dc": 2,
                                                                              "search_all_decompose_dc": True})
    logic = comb_trace(inputs, inputs @ weights)
    return time.perf_counter() - start, float(logic.cost)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=SIZES, help=f"comma-separated INxOUTxWBITSxXBITS (default {SIZES})")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    rows = []
    for size in args.sizes.split(","):
        n_in, n_out, weight_bits, input_bits = (int(part) for part in size.split("x"))
        seconds, cost = solve(n_in, n_out, weight_bits, input_bits)
        rows.append({"inputs": n_in, "outputs": n_out, "products": n_in * n_out, "weight_bits": weight_bits,
                     "input_bits": input_bits, "seconds": round(seconds, 1), "da4ml_cost": round(cost)})
        if not args.json:
            print(f"{n_in:>6} x {n_out:<5} {n_in * n_out:>8} products  w{weight_bits} x{input_bits}  "
                  f"{seconds:7.1f} s  cost {cost:,.0f}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
