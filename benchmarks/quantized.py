"""Quantized models built and emulated against their own quantized reference (qonnx's execution for
QONNX, onnxruntime for QDQ).

First the exports of tests/data/quantized (benchmarks/quantized_exports.py: Brevitas' export_qonnx and
export_onnx_qcdq, onnxruntime's quantize_static, trained on scikit-learn's digits), each built with
``--policy support`` on its first 8 test images: nodes on the FPGA, FPGA units bit-exact (error 0 against
their ONNX model), on the same codes (off by under half a step of their quantizer) and within one step,
the DSP and LUT estimates, and the accuracy on the whole digits test set emulated beside the framework's
own (Brevitas', onnxruntime's). Then the
Brevitas-exported models qonnx ships (the ESPCN super-resolution networks, the FP8 linear layer) and
benchmarks/quantized_models.py's QONNX MLP and CNN and QDQ MLP, per policy: where they ran, the bit-exact
units, and the emulated pipeline's error per output.

    pip install scikit-learn   # the digits
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

from hetdeploy.core.errors import UserError  # noqa: E402
from hetdeploy.running.emulate import emulate  # noqa: E402
from hetdeploy.steps.build import BuildOptions, build  # noqa: E402

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


EXPORTS = Path(__file__).resolve().parent.parent / "tests" / "data" / "quantized"
EXPORTED = ["tfc_bn_qonnx", "tfc_bn_qcdq", "tfc_qonnx", "cnv_qonnx", "cnv_qcdq", "ort_static", "ort_static_pre",
            "ort_static_cnn", "ort_qop_cnn", "ort_w4_cnn"]
CALIBRATION = 8  # test images the build sizes on (as the tests do)


def exports(board: str, folder: Path) -> list[dict]:
    """Each export built under the support policy and emulated on the whole digits test set."""
    import numpy as np

    from hetdeploy.core.plan_text import AGREEMENTS
    from quantized_exports import digits

    _, x_test, _, y_test = digits()
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "x_test.npy", x_test)
    np.save(folder / "y_test.npy", y_test.astype(np.int64))
    np.save(folder / "calibration.npy", x_test[:CALIBRATION])
    np.save(folder / "check.npy", x_test[CALIBRATION:2 * CALIBRATION])  # the build's own check: images it did not size on
    rows = []
    for name in EXPORTED:
        out = folder / name
        row = {"model": name, "framework_accuracy": float(np.load(EXPORTS / f"{name}.npz")["accuracy"])}
        try:
            plan = build(BuildOptions(model=EXPORTS / f"{name}.onnx", board=board, out_dir=out, policy="support",
                                      calibration=folder / "calibration.npy", verify_input=folder / "check.npy"),
                         progress=lambda message: None)
        except UserError as err:
            rows.append({**row, "error": str(err)})
            continue
        units = [u for s in plan.subfunctions if s.kind == "fpga" for u in s.execution_units if u.hls is not None]
        agreement = [min((t.agreement for t in u.verification.outputs), key=AGREEMENTS.index) for u in units]
        used = next(iter(plan.fpga_resources.values())).used if plan.fpga_resources else {}
        result = emulate(out, str(folder / "x_test.npy"), labels_path=str(folder / "y_test.npy"))
        layers = [n for s in plan.subfunctions for n in s.nodes]
        counts = {f"{kind.replace(' ', '_').replace('-', '_')}_units": agreement.count(kind)
                  for kind in AGREEMENTS[1:]}
        rows.append({**row, "fpga_nodes": sum(len(s.nodes) for s in plan.subfunctions if s.kind == "fpga"),
                     "nodes": len(layers), "fpga_units": len(units), **counts, "dsp": used.get("dsp", 0),
                     "lut": used.get("lut", 0), "accuracy": result.accuracy.emulated,
                     "model_accuracy": result.accuracy.model, "passed": result.comparison.passed})
    return rows


def print_exports(rows: list[dict]) -> None:
    print("the exports of tests/data/quantized, --policy support; units: bit-exact, same codes (off by under half a "
          "step), within one step; accuracy on the digits test set: emulated, the reference's, the framework's")
    print(f"{'export':<16} {'FPGA nodes':>10} {'units':>5} {'exact':>5} {'codes':>5} {'1 step':>6} "
          f"{'DSP':>5} {'LUT':>7}  {'accuracy':>8} {'reference':>9} {'framework':>9}")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<16} not built: {r['error']}")
            continue
        print(f"{r['model']:<16} {r['fpga_nodes']:>4} of {r['nodes']:<3} {r['fpga_units']:>5} "
              f"{r['bit_exact_units']:>5} {r['same_codes_units']:>5} {r['within_one_step_units']:>6} {r['dsp']:>5} "
              f"{r['lut']:>7,}  {100 * r['accuracy']:>7.2f}% {100 * r['model_accuracy']:>8.2f}% "
              f"{100 * r['framework_accuracy']:>8.2f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="pynq-z2")
    parser.add_argument("--samples", type=int, default=3, help="random inputs emulated per build (default 3)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        exported = exports(args.board, Path(folder) / "exports")
        rows = run(args.board, args.samples, Path(folder))
    if args.json:
        print(json.dumps({"exports": exported, "models": rows}, indent=2))
        return 0
    print_exports(exported)
    print()
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
