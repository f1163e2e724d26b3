"""The layers FINN takes from Brevitas, as Brevitas 0.13's export_qonnx writes them, on the FPGA.

tests/data/brevitas: written by ``python benchmarks/brevitas_layers.py --export tests/data/brevitas``
(untrained, seed 0), each with Brevitas' own outputs on 16 inputs (NAME.npz: x, y). Builds size on the
first 8 inputs and are checked on the other 8, against Brevitas.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hetdeploy.api import load
from hetdeploy.build import BuildOptions, build
from hetdeploy.cli import main
from hetdeploy.verify import quantizer_steps

DATA = Path(__file__).resolve().parent / "data" / "brevitas"
LAYERS = ["identity_s1", "identity_un4", "relu_pc_nchw", "hardtanh_4", "truncavgpool_4", "linear_w1", "conv_w2"]
NETWORKS = ["tfc_1w1a", "tfc_1w2a"]
SIZED_ON = 8


@pytest.mark.parametrize("name", LAYERS + NETWORKS)
def test_every_node_of_a_brevitas_layer_plans_onto_the_fpga(name, capsys):
    """BipolarQuant, per-channel activation quantizers, Trunc, unsigned narrow quantizers, binary
    weights, BNN-PYNQ's TensorNorm (Sub, Div, Mul, Add by constants): all on the FPGA, one subfunction."""
    assert main(["plan", str(DATA / f"{name}.onnx"), "--board", "pynq-z2", "--policy", "support", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["kind"] for s in plan["subfunctions"]] == ["fpga"], plan["fpga_fallbacks"]


def _build(root: Path, name: str):
    data = np.load(DATA / f"{name}.npz")
    np.save(root / f"{name}_calibration.npy", data["x"][:SIZED_ON])
    out = root / name
    build(BuildOptions(model=DATA / f"{name}.onnx", board="pynq-z2", out_dir=out, policy="support",
                       calibration=root / f"{name}_calibration.npy"), progress=lambda message: None)
    return load(out).predict(data["x"][SIZED_ON:])[0], data["y"][SIZED_ON:]


def _output_step(name: str) -> float:
    import onnx

    output = onnx.load(str(DATA / f"{name}.onnx"), load_external_data=False).graph.output[0].name
    return quantizer_steps(DATA / f"{name}.onnx").get(output, 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", LAYERS)
def test_a_brevitas_layer_on_the_fpga_answers_as_brevitas(tmp_path, name):
    """Within one step of the output's quantizer (as qonnx, Brevitas rounds x / scale in float32:
    a value on a rounding point may go either way); a binary output (no step) exactly."""
    got, brevitas = _build(tmp_path, name)
    got = got.reshape(brevitas.shape)
    assert np.all(np.isfinite(got))
    step = _output_step(name)
    error = np.max(np.abs(got - brevitas))
    assert error <= step * 1.001 if step else error == 0.0, (error, step)


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
def test_a_bnn_pynq_network_on_the_fpga_answers_as_brevitas(tmp_path, name):
    """BNN-PYNQ's TFC, binary (BatchNorm before a sign as a threshold on the exact accumulator) and
    with 2-bit activations (its TensorNorm's x - 0 removed, not a unit that copies): every layer on
    the FPGA, the scores within 0.1 % of their peak of Brevitas', the same class."""
    got, brevitas = _build(tmp_path, name)
    assert np.all(np.isfinite(got)) and got.shape == brevitas.shape
    assert np.max(np.abs(got - brevitas)) <= 1e-3 * np.max(np.abs(brevitas))
    assert np.array_equal(np.argmax(got, axis=1), np.argmax(brevitas, axis=1))
