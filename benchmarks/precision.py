"""--error-budget on a trained digits classifier: accuracy and estimated resources at 16 bits and at
the widths the budget search chooses.

An MLP (64 -> 32 ReLU -> 10) is trained with scikit-learn on its bundled 8x8 digits (1,437 training
images, 360 held out), written as ONNX (Gemm, Relu, Gemm), and built for a board with the support
policy: at --width 16, and with each --error-budget E at the reuse factors the 16-bit build chose (so
that the resources differ by the widths alone). Both builds are emulated (C-simulation) on the
360 held-out images with their labels: the float model's accuracy beside the emulated pipeline's.

    pip install scikit-learn   # the benchmark's only extra
    python benchmarks/precision.py [--board pynq-z2] [--error-budgets 0.05,0.1,0.15,0.2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hetdeploy.running.emulate import emulate
from hetdeploy.steps.build import BuildOptions, build


def digits_classifier(folder: Path) -> tuple[Path, Path, Path, Path]:
    """Train the MLP; write its ONNX model, 64 calibration images (from the training split) and the
    held-out images and labels into ``folder``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(images, digits.target, test_size=360, random_state=0,
                                                        stratify=digits.target)
    classifier = MLPClassifier(hidden_layer_sizes=(32,), max_iter=600, random_state=0).fit(x_train, y_train)
    inits = []
    for k, (weights, bias) in enumerate(zip(classifier.coefs_, classifier.intercepts_)):
        inits += [numpy_helper.from_array(weights.astype(np.float32), f"fc{k}.weight"),
                  numpy_helper.from_array(bias.astype(np.float32), f"fc{k}.bias")]
    nodes = [helper.make_node("Gemm", ["image", "fc0.weight", "fc0.bias"], ["hidden"], name="fc0"),
             helper.make_node("Relu", ["hidden"], ["hidden_relu"], name="relu0"),
             helper.make_node("Gemm", ["hidden_relu", "fc1.weight", "fc1.bias"], ["logits"], name="fc1")]
    graph = helper.make_graph(nodes, "digits_mlp", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    paths = folder / "digits_mlp.onnx", folder / "calibration.npy", folder / "test.npy", folder / "labels.npy"
    onnx.save(model, str(paths[0]))
    np.save(paths[1], x_train[:64])
    np.save(paths[2], x_test)
    np.save(paths[3], y_test)
    return paths


def run(board: str, error_budgets: list[float], folder: Path) -> list[dict]:
    model, calibration, test, labels = digits_classifier(folder)
    rows, reuse_factors = [], {}
    builds = [("16 bits", {"width": 16})] + [(f"--error-budget {e:g}", {"error_budget": e, "relative_tolerance": e})
                                             for e in error_budgets]
    for name, extra in builds:
        out = folder / name.replace(" ", "_").replace("-", "")
        plan = build(BuildOptions(model=model, board=board, out_dir=out, policy="support", calibration=calibration,
                                  reuse_factors=reuse_factors, **extra), progress=lambda message: None)
        units = [u for s in plan.subfunctions if s.kind == "fpga" for u in s.execution_units]
        if not reuse_factors:  # the 16-bit build's folding, pinned for the budget's
            reuse_factors = {u.nodes[0]: u.reuse_factor for u in units if u.pe in ("dense", "conv")}
        totals = {k: sum(u.estimate[k] for u in units) for k in ("lut", "dsp", "ff", "bram18", "latency_cycles")}
        result = emulate(out, str(test), labels_path=str(labels))
        search = plan.precision_search
        rows.append({
            "build": name,
            "layer_widths": search.layer_widths if search else {},
            "unit_precisions": {u.name: u.precision for u in units},
            "widened": [f"{w.unit} {w.from_bits}->{w.to_bits}" for w in plan.widened],
            "reuse_factors": {u.name: u.reuse_factor for u in units},
            **totals,
            "lut_plus_dsp": totals["lut"] + totals["dsp"],
            "float_accuracy": result.accuracy.model,
            "emulated_accuracy": result.accuracy.emulated,
            "max_relative_error": max(t.max_abs_error / t.peak for t in result.comparison.pipeline.tensors.values()),
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="pynq-z2")
    parser.add_argument("--error-budgets", default="0.05,0.1,0.15,0.2",
                        help="comma-separated budgets, one build each (default 0.05,0.1,0.15,0.2)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = run(args.board, [float(e) for e in args.error_budgets.split(",")], Path(folder))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'build':<22} {'LUT':>7} {'DSP':>5} {'LUT+DSP':>8} {'FF':>7} {'cycles':>7} {'float acc':>9} "
          f"{'emulated acc':>12} {'rel. error':>10}")
    for r in rows:
        print(f"{r['build']:<22} {r['lut']:>7} {r['dsp']:>5} {r['lut_plus_dsp']:>8} {r['ff']:>7} "
              f"{r['latency_cycles']:>7} {r['float_accuracy']:>9.4f} {r['emulated_accuracy']:>12.4f} "
              f"{r['max_relative_error']:>10.4f}")
    base = rows[0]
    print()
    for searched in rows[1:]:
        print(f"{searched['build']}: LUT+DSP cut {base['lut_plus_dsp'] / searched['lut_plus_dsp']:.2f}x, accuracy "
              f"drop {100 * (base['float_accuracy'] - searched['emulated_accuracy']):.2f} points (float -> build); "
              f"layer widths {searched['layer_widths']}; widened: {', '.join(searched['widened']) or 'none'}")
    print(f"reuse factors (the 16-bit build's, pinned for all): {base['reuse_factors']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
