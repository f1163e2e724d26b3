"""Models that installed packages ship, built for pynq-z2 and emulated against onnxruntime: the
ONNX model-zoo MNIST (opset 8, IR 3, initializers as inputs, a leading Reshape, MatMul + Add) and
the Brevitas ESPCN super-resolution float models that qonnx ships (DepthToSpace, Resize)."""

from pathlib import Path

import pytest
import qonnx

from hetdeploy.running.emulate import emulate
from hetdeploy.steps.build import BuildOptions, build

DATA = Path(qonnx.__file__).parent / "data" / "onnx"


@pytest.mark.slow
@pytest.mark.parametrize("model,policy,all_on_fpga", [
    ("mnist-conv/model.onnx", "support", True),
    ("bsd300x3-espcn/subpixel/float_model.onnx", "support", True),
    # in bands (test_fpga_ops builds Resize and units in bands on small maps)
    pytest.param("bsd300x3-espcn/nn_resize/float_model.onnx", "latency", True, marks=pytest.mark.long),
])
def test_shipped_models_build_and_emulate_on_pynq_z2(tmp_path, model, policy, all_on_fpga):
    """One sample to size on (two to verify on: another and one stretched onto its range's edges) and one more
    to emulate: the nn_resize ESPCN's convolutions over 128 x 128 maps take seconds a sample in C-simulation."""
    out = tmp_path / "build"
    plan = build(BuildOptions(model=DATA / model, board="pynq-z2", out_dir=out, policy=policy, samples=1),
                 progress=lambda message: None)
    result = emulate(out, None, 1)
    assert result.comparison.passed, result.table()
    assert all(where.get("subfunction") or where.get("folded_into") for where in plan.node_map.values())
    fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
    assert fpga, "nothing went to the FPGA"
    if all_on_fpga:
        assert [s.kind for s in plan.subfunctions] == ["fpga"]


@pytest.mark.slow
@pytest.mark.long  # (widened units partitioned again: test_end_to_end; the flip samples' cap: test_verify)
def test_a_shipped_qonnx_model_builds_and_emulates_against_its_quantized_reference(tmp_path):
    """The Brevitas-exported ESPCN qonnx ships (Quant in domain onnx.brevitas): planned, built and
    emulated against the quantized model's own reference (qonnx's execution). Its weight quantizers fold
    into its convolutions, its activation quantizers into their units. At 16 bits three of its units are
    a step of their quantizers out of tolerance; widened to 20 bits they no longer fit the PYNQ-Z2, so the
    build partitions again at their widths (what does not fit moves to the A9, where its activation
    quantizers are standard ONNX that onnxruntime runs: the board has no qonnx), and the widenings stay
    on record. Its FPGA convolutions take seconds a sample in C-simulation: the build compares their codes
    on no further samples (generate.flip_samples_to_compare) and says so; one sample sizes it, for the same
    reason (two verify it, one more emulates it)."""
    out, said = tmp_path / "build", []
    plan = build(BuildOptions(model=DATA / "bsd300x3-espcn/subpixel/quant_model.onnx", board="pynq-z2", out_dir=out,
                              samples=1), progress=said.append)
    result = emulate(out, None, 1)
    assert result.comparison.passed, result.table()
    assert {w.from_bits for w in plan.widened} == {16} and {w.to_bits for w in plan.widened} == {20}
    fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
    assert fpga and all(u.verification.passed for s in fpga for u in s.execution_units)
    assert all(s.verification.flip_samples == 0 for s in fpga)
    assert any("codes to compare on 0 further samples, not 256" in line for line in said)
    assert set(result.engines) == {"C-simulation (g++)", "onnxruntime CPU"}
    assert any(w.get("subfunction") for w in plan.node_map.values())


@pytest.mark.slow
def test_a_quantizer_only_qonnx_runs_stops_the_build_in_one_line(tmp_path, capsys):
    """qonnx's FP8 model (FloatQuant, which neither the FPGA nor onnxruntime runs) would run on the ARM
    cores, where the board has no qonnx: refused at build, naming the node, before any HLS."""
    from hetdeploy.commands.cli import main

    model = DATA / "floatquant_exec/qonnx_act_weight_fp8.onnx"
    assert main(["build", str(model), "--board", "pynq-z2", "-o", str(tmp_path / "build"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "(FloatQuant) would run on arm_cpu" in err


@pytest.mark.slow
def test_pytorchs_opset_6_export_of_a_fixed_batch_builds_and_predicts_the_outputs_the_onnx_package_records(tmp_path):
    """PyTorch's Conv2d export that the onnx package ships (opset 6, a fixed batch of 2): converted to opset 13,
    each row a sample, on the PYNQ-Z2's FPGA, its prediction within 0.1 % of the output the package records for
    the package's input (which the build neither sized nor verified on)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    import hetdeploy

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted" / "test_Conv2d"
    pipeline = hetdeploy.build(folder / "model.onnx", "pynq-z2", tmp_path / "out", policy="support")
    assert [s.kind for s in pipeline.plan.subfunctions] == ["fpga"]
    sample, expected = (numpy_helper.to_array(onnx.load_tensor(str(folder / "test_data_set_0" / f"{kind}_0.pb")))
                        for kind in ("input", "output"))
    (got,) = pipeline.predict(sample)
    assert got.shape == expected.shape and np.isfinite(got).all()
    assert np.max(np.abs(got - expected)) <= 1e-3 * np.max(np.abs(expected))
