"""``build --open-synth`` on the quantized examples and the jet tagger: per FPGA unit, its RTL's verdict
against the unit's C-simulation, Yosys's counts, da4ml's estimate and hetdeploy's own, the ratio of
hetdeploy's LUT estimate to Yosys's, and the time each stage took.

The models: the exports of tests/data/quantized (Brevitas' QONNX, onnxruntime's QDQ), benchmarks/
quantized_models.py's QONNX MLP and CNN, and examples/jet_tagger_mlp.onnx (float) at --width 8; each built
for the board under ``--policy support`` (every node the FPGA runs on it).

What the figures are: Yosys's cells for the unit's arithmetic as da4ml compiles it (constant
multiplications as shifts and adds, no DSP; pipelined at the board's clock by hetdeploy's timing rule), not
for the design Vivado HLS makes from hls4ml's C++, which hetdeploy's estimate is of (its Latency and Resource
strategies put wide products on DSPs and schedule their own pipeline). The two are closest where
hetdeploy's estimate has no DSP either (every product in LUTs: ``LUT-only``); the ratio column is printed for
every unit.

    pip install -e ".[open-synth]"; apt-get install yosys iverilog
    python benchmarks/open_synth.py [--board pynq-z2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import quantized_models  # noqa: E402

from hetdeploy.steps.build import BuildOptions, build  # noqa: E402

QUANTIZED = ROOT / "tests" / "data" / "quantized"


def models(folder: Path) -> list[tuple[str, Path, int]]:
    """(name, path, --width) of each model built."""
    written = [("qonnx_mlp", quantized_models.qonnx_mlp()), ("qonnx_cnn", quantized_models.qonnx_cnn())]
    paths = []
    for name, model in written:
        onnx.save(model, str(folder / f"{name}.onnx"))
        paths.append((name, folder / f"{name}.onnx", 16))
    for export in ("tfc_qonnx", "tfc_bn_qonnx", "tfc_bn_qcdq", "cnv_qonnx", "ort_static"):
        paths.append((export, QUANTIZED / f"{export}.onnx", 16))
    paths.append(("jet_tagger_mlp (--width 8)", ROOT / "examples" / "jet_tagger_mlp.onnx", 8))
    return paths


def run(board: str, folder: Path) -> list[dict]:
    rows = []
    for name, path, width in models(folder):
        started = time.monotonic()
        plan = build(BuildOptions(model=path, board=board, out_dir=folder / f"{len(rows)}_build", policy="support",
                                  width=width, open_synth=True), progress=lambda message: None)
        print(f"  {name}: built in {time.monotonic() - started:.0f} s", file=sys.stderr)
        for sub in plan.subfunctions:
            for unit in sub.execution_units:
                record = unit.open_synthesis
                lut = record.yosys.get("lut", 0)
                rows.append({
                    "model": name, "unit": unit.name, "nodes": len(unit.nodes), "strategy": unit.strategy,
                    "status": record.status, "why": record.why, "kernel": record.kernel, "vectors": record.vectors,
                    "values": record.values, "mismatches": record.mismatches, "yosys": record.yosys,
                    "da4ml_cost": record.da4ml_cost, "estimate": {k: unit.estimate.get(k, 0)
                                                                 for k in ("lut", "ff", "dsp", "bram18")},
                    "estimate_over_yosys_lut": unit.estimate.get("lut", 0) / lut if lut else None,
                    "lut_only": bool(lut) and unit.estimate.get("dsp", 0) == 0,
                    "seconds": record.seconds})
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'model':<27} {'unit':<13} {'status':<17} {'RTL = C-sim':>13} {'Yosys LUT':>10} {'CARRY':>7} "
             f"{'FF':>6} {'DSP':>4} {'da4ml':>8} {'est. LUT':>9} {'est. FF':>8} {'est. DSP':>8} {'est/Yosys':>9} "
             f"{'LUT-only':>8} "
             f"{'trace s':>7} {'sim s':>6} {'Yosys s':>7}"]
    for row in rows:
        exact = f"{row['values'] - row['mismatches']}/{row['values']}" if row["values"] else "-"
        yosys = row["yosys"]
        ratio = f"{row['estimate_over_yosys_lut']:.2f}" if row["estimate_over_yosys_lut"] else "-"
        seconds = row["seconds"]
        lines.append(
            f"{row['model']:<27} {row['unit']:<13} {row['status']:<17} {exact:>13} "
            f"{yosys.get('lut', '-'):>10} {yosys.get('carry', '-'):>7} {yosys.get('ff', '-'):>6} "
            f"{yosys.get('dsp', '-'):>4} {row['da4ml_cost'] or '-':>8} {row['estimate']['lut']:>9} "
            f"{row['estimate']['ff']:>8} {row['estimate']['dsp']:>8} {ratio:>9} "
            f"{'yes' if row['lut_only'] else '':>8} {seconds.get('trace', 0):>7.2f} "
            f"{seconds.get('simulate', 0):>6.2f} {seconds.get('synthesise', 0):>7.1f}")
    synthesised = [r for r in rows if r["yosys"]]
    same = [r["estimate_over_yosys_lut"] for r in synthesised if r["lut_only"]]
    lines.append(f"{len(synthesised)} units synthesised of {len(rows)}; RTL equal to the C-simulation on "
                 f"{sum(r['values'] > 0 and r['mismatches'] == 0 for r in rows)} of "
                 f"{sum(r['values'] > 0 for r in rows)} simulated")
    if same:
        lines.append(f"where both are LUT-only (the estimate has no DSP): hetdeploy's LUT estimate / Yosys's, "
                     f"median {sorted(same)[len(same) // 2]:.2f}, range {min(same):.2f} to {max(same):.2f} over "
                     f"{len(same)} units")
    for row in rows:
        if not row["values"]:
            lines.append(f"  {row['model']} {row['unit']}: {row['status']}: {row['why']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="pynq-z2")
    parser.add_argument("--json", action="store_true", help="the rows as JSON instead of the table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = run(args.board, Path(folder))
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()
