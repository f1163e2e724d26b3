"""FINN's TFC-w1a1 beside hetdeploy's plans of the same network: FINN's own estimates of its finn-examples design
(cycles between samples, LUTs, BRAM18s) and hetdeploy's, at its own folding for a stream, at FINN's parallelism, and
with the FPGA's LUTs capped at FINN's estimate. Estimates only, FINN's and hetdeploy's; nothing is synthesised.

Run by hand (prints a table; nothing here is a test):

    .venv/bin/python benchmarks/finn_tfc.py [--batch 1000] [--json]

FINN's figures are its formulas evaluated here for the folding finn-examples builds the TFC-w1a1 with on the
Pynq-Z1 (Xilinx/finn-examples, build/bnn-pynq/folding_config/tfc-w1a1_folding_config.json): per matrix-vector
unit (MVAU) of MH outputs and MW inputs with PE x SIMD lanes, MH / PE x MW / SIMD cycles a sample (FINN's
``get_exp_cycles``), and FINN's ``lut_estimation`` and ``bram_estimation`` of the MVAU (Xilinx/finn,
src/finn/custom_op/fpgadataflow/matrixvectoractivation.py: the FINN-R paper's c0 + c1 P (multipliers + adder tree
+ accumulator) + c2 for weights in LUTs; BRAM18s by the weight memory's width and depth), with 1-bit (bipolar)
weights and inputs, the accumulator a popcount's width (FINN's ``minimize_accumulator_width``), the thresholds'
memory FINN's default ("auto", for which its formula counts no LUTs), weights as the folding file stores them
(block, auto, distributed). The network's input
thresholding and its label select are left out on both sides: hetdeploy computes the input's quantizer on the ARM
(``input_codes.input_quantizers``) and Brevitas' export has no TopK.

hetdeploy plans Brevitas' export of the same network (tests/data/brevitas/tfc_1w1a.onnx) on the PYNQ-Z2 (the
Pynq-Z1's xc7z020) for a stream (``--objective throughput``): at the folding it chooses; at FINN's parallelism
(reuse factors giving each layer FINN's PE x SIMD products a cycle: 56, 64, 64 and 8, the first layer's 64
not dividing its 784 inputs as hls4ml's resource strategy needs) under hetdeploy's XNOR-popcount kernel
(``--strategy NODE=xnor_popcount``) and under hls4ml's multiply-accumulate (``resource``); and with the chip's LUTs
capped at FINN's estimate (a copy of the board file whose ``utilisation`` caps them), the fastest it folds to there.
Its LUTs are its units' and its dataflow FIFOs'. "its units" is the slowest unit's cycles a sample (FINN's: its slowest MVAU's).
hetdeploy's samples reach the FPGA as the ARM quantizer's codes, a bit each (``input_codes.port_codes``), 64 to a
64-bit word a cycle: 13 cycles a sample into the dataflow's first token, under any of these intervals (FINN's input
is 784 bits wide too). "sequential ports" is what the sequential top would take for them (196 buffer words of
16-bit values, and the 10 float outputs). At one parallelism, hls4ml's dense adds each product of two-bit values in
an accumulator-wide adder, where FINN's MVAU and hetdeploy's XNOR-popcount kernel XNOR sign bits and add them in a
popcount (docs/estimates.md).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hetdeploy.core.board import load_board  # noqa: E402
from hetdeploy.planning.config import BuildOptions, hls_strategy  # noqa: E402
from hetdeploy.steps.build import plan_stages  # noqa: E402

MODEL = ROOT / "tests" / "data" / "brevitas" / "tfc_1w1a.onnx"
BOARD = "pynq-z2"
# finn-examples' tfc-w1a1 folding: per MVAU (MH outputs, MW inputs, PE, SIMD, weight memory, no activation)
FINN_FOLDING = [(64, 784, 16, 49, "block", False), (64, 64, 8, 8, "auto", False), (64, 64, 8, 8, "auto", False),
                (10, 64, 10, 8, "distributed", True)]
# hls4ml reuse factors with FINN's products a cycle (MH x MW / (PE x SIMD)); 56 where 64 does not divide 784; the
# resource strategy (at a reuse factor past 1 hls4ml's latency strategy's multipliers are not shared alike)
FINN_PARALLEL_REUSE = {"node_linear": 56, "node_linear_1": 64, "node_linear_2": 64, "node_linear_3": 8}


def finn_mvau(mh: int, mw: int, pe: int, simd: int, ram_style: str, no_activation: bool) -> dict:
    """FINN's estimates of one bipolar MVAU (the module docstring)."""
    weight_bits = input_bits = 1
    cycles = (mh // pe) * (mw // simd)
    wmem = mw * mh // (pe * simd)
    accumulator = math.ceil(math.log2(mw + 1))  # a popcount of MW values
    mult = simd * (2 * math.ceil((weight_bits + input_bits) / 6) - 1) * (weight_bits + input_bits)
    adder_tree = (weight_bits + input_bits) * (2 * simd - 1)
    weights_in_luts = pe * simd * weight_bits * math.ceil(wmem / 64) if ram_style == "distributed" else 0
    lut = int(300 + 1.1 * pe * (mult + adder_tree + accumulator) + weights_in_luts)
    width = simd * weight_bits * pe
    if ram_style == "distributed":
        bram18 = 0
    elif width <= 18 or wmem > 512:
        bram18 = math.ceil(wmem / 1024) * math.ceil(width / 18)
    else:
        bram18 = math.ceil(wmem / 512) * math.ceil(width / 36)
    return {"cycles": cycles, "lut": lut, "bram18": bram18, "no_activation": no_activation}


def hetdeploy_plan(folder: Path, batch: int, board: str = BOARD, reuse: dict | None = None,
                   strategy: str = "resource") -> dict:
    """hetdeploy's plan for a stream; ``reuse``: reuse factors pinned, under ``strategy``."""
    reuse = reuse or {}
    options = BuildOptions(model=MODEL, board=board, out_dir=folder, objective="throughput", batch=batch,
                           reuse_factors=dict(reuse), strategies={node: hls_strategy(strategy) for node in reuse})
    _, _, plan = plan_stages(options, lambda k, what: None)
    (fpga,) = [s for s in plan.subfunctions if s.kind == "fpga"]
    used = plan.fpga_resources["fpga"].used
    return {"top": fpga.top.kind, "interval_cycles": fpga.top.interval_cycles, "port_cycles": fpga.top.port_cycles,
            "units_cycles": max(u.estimate["compute_cycles"] for u in fpga.execution_units), "lut": used["lut"],
            "bram18": used["bram18"], "dsp": used["dsp"],
            "reuse_factors": [u.reuse_factor for u in fpga.execution_units]}


def capped_board(folder: Path, lut: int) -> Path:
    """A copy of the board file whose FPGA may use at most ``lut`` LUTs."""
    board = load_board(BOARD)
    data = yaml.safe_load(Path(board.path).read_text())
    fpga = next(d for d in data["devices"] if d["kind"] == "fpga")
    fpga.setdefault("utilisation", {})["lut"] = lut / fpga["resources"]["lut"]
    path = folder / f"{BOARD}-lut{lut}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000, help="samples an FPGA call (default 1000)")
    parser.add_argument("--json", action="store_true", help="the rows as JSON")
    args = parser.parse_args()
    layers = [finn_mvau(*layer) for layer in FINN_FOLDING]
    finn = {"interval_cycles": max(layer["cycles"] for layer in layers), "units_cycles": max(layer["cycles"] for layer
                                                                                               in layers),
            "lut": sum(layer["lut"] for layer in layers),
            "bram18": sum(layer["bram18"] for layer in layers), "dsp": 0, "layers": layers}
    with tempfile.TemporaryDirectory() as folder:
        rows = {"finn": finn,
                "hetdeploy": hetdeploy_plan(Path(folder) / "own", args.batch),
                "hetdeploy_at_finns_parallelism": hetdeploy_plan(Path(folder) / "parallel", args.batch,
                                                                 reuse=FINN_PARALLEL_REUSE, strategy="xnor_popcount"),
                "hetdeploy_at_finns_parallelism_hls4ml": hetdeploy_plan(Path(folder) / "hls4ml", args.batch,
                                                                        reuse=FINN_PARALLEL_REUSE,
                                                                        strategy="resource"),
                "hetdeploy_at_finns_luts": hetdeploy_plan(Path(folder) / "capped", args.batch,
                                                          board=str(capped_board(Path(folder), finn["lut"])))}
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"TFC-w1a1 (784-64-64-64-10, bipolar) on the {BOARD} at 100 MHz: estimates only (FINN's formulas for its "
          f"finn-examples folding; hetdeploy's plans of Brevitas' export, --objective throughput --batch {args.batch})")
    print(f"{'design':<38} {'cycles a sample':>15} {'samples/s':>11} {'its units':>9} {'LUT':>7} {'BRAM18':>6} "
          f"{'DSP':>4}  folding")
    for name, row in rows.items():
        folding = "PE x SIMD " + ", ".join(f"{pe}x{simd}" for _, _, pe, simd, _, _ in FINN_FOLDING) \
            if name == "finn" else f"{row['top']} top, reuse factors {row['reuse_factors']}, sequential ports " \
            f"{row['port_cycles']} cycles a sample"
        print(f"{name:<38} {row['interval_cycles']:>15} {100e6 / row['interval_cycles']:>11,.0f} "
              f"{row['units_cycles']:>9} {row['lut']:>7,} {row['bram18']:>6} {row['dsp']:>4}  {folding}")
    print("sources: Xilinx/finn-examples build/bnn-pynq/folding_config/tfc-w1a1_folding_config.json; Xilinx/finn "
          "src/finn/custom_op/fpgadataflow/matrixvectoractivation.py (lut_estimation, bram_estimation, get_exp_cycles)")


if __name__ == "__main__":
    main()
