"""Quantized models built and emulated against their own quantized reference (qonnx's execution for
QONNX, onnxruntime for QDQ): the Brevitas-exported models qonnx ships (the ESPCN super-resolution
networks, the FP8 linear layer), and benchmarks/quantized_models.py's QONNX MLP and CNN and
onnxruntime-quantized QDQ MLP. Prints, per model and policy, where it ran, how many FPGA units are
bit-exact (error 0 against their ONNX model), and the emulated pipeline's error per output.

    python benchmarks/quantized.py [--board pynq-z2] [--samples 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import onnx
import qonnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quantized_models  # noqa: E402

from hetdeploy.build import BuildOptions, build  # noqa: E402
from hetdeploy.emulate import emulate  # noqa: E402
from hetdeploy.errors import UserError  # noqa: E402

SHIPPED = Path(qonnx.__file__).parent / "data" / "onnx"


def models(folder: Path) -> dict[str, Path]:
    written = {"qonnx_mlp (4-bit)": quantized_models.qonnx_mlp(), "qonnx_cnn (4-bit)": quantized_models.qonnx_cnn()}
    paths = {}
    for name, model in written.items():
        paths[name] = folder / f"{name.split()[0]}.onnx"
        onnx.save(model, str(paths[name]))
    paths["onnxruntime QDQ mlp (8-bit)"] = quantized_models.onnxruntime_qdq_mlp(folder)
    for shipped in ("bsd300x3-espcn/subpixel/quant_model.onnx", "bsd300x3-espcn/nn_resize/quant_model.onnx",
                    "floatquant_exec/qonnx_act_weight_fp8.onnx"):
        paths[f"qonnx: {shipped}"] = SHIPPED / shipped
    return paths


def run(board: str, samples: int, folder: Path) -> list[dict]:
    rows = []
    for name, path in models(folder).items():
        for policy in ("latency", "support"):
            out = folder / f"{len(rows)}_build"
            row = {"model": name, "policy": policy}
            try:
                plan = build(BuildOptions(model=path, board=board, out_dir=out, policy=policy),
                             progress=lambda message: None)
            except UserError as err:
                rows.append({**row, "error": str(err)})
                continue
            units = [u for s in plan.subfunctions if s.kind == "fpga" for u in s.execution_units]
            errors = []
            for seed in range(samples):
                result = emulate(out, None, seed)
                errors.append({t.tensor: (t.max_abs_error, t.peak, t.passed)
                               for t in result.comparison.pipeline.tensors.values()})
            rows.append({**row, "devices": [s.kind for s in plan.subfunctions],
                         "fpga_units": len(units),
                         "bit_exact_units": sum(1 for u in units if u.verification.max_abs_error == 0.0),
                         "engines": sorted(set(result.engines)),
                         "outputs": {t: {"max_abs_error": max(e[t][0] for e in errors),
                                         "peak": max(e[t][1] for e in errors),
                                         "passed": all(e[t][2] for e in errors)} for t in errors[0]}})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="pynq-z2")
    parser.add_argument("--samples", type=int, default=3, help="random inputs emulated per build (default 3)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = run(args.board, args.samples, Path(folder))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'model':<52} {'policy':<8} {'devices':<22} {'FPGA units (exact)':>18}  {'max abs error / peak':>22}  "
          f"verdict")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<52} {r['policy']:<8} not built: {r['error']}")
            continue
        for k, (tensor, o) in enumerate(r["outputs"].items()):
            head = (f"{r['model']:<52} {r['policy']:<8} {'+'.join(r['devices']):<22} "
                    f"{r['fpga_units']:>10} ({r['bit_exact_units']:>3})  ") if k == 0 else " " * 107
            print(f"{head}{o['max_abs_error']:>10.3g} / {o['peak']:<9.3g}  "
                  f"{'passed' if o['passed'] else 'OUT OF TOLERANCE'} ({tensor})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
