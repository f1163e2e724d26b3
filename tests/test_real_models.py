"""Models that installed packages ship, built for pynq-z2 and emulated against onnxruntime: the
ONNX model-zoo MNIST (opset 8, IR 3, initializers as inputs, a leading Reshape, MatMul + Add) and
the Brevitas ESPCN super-resolution float models that qonnx ships (DepthToSpace, Resize)."""

from pathlib import Path

import pytest
import qonnx

from hetdeploy.build import BuildOptions, build
from hetdeploy.emulate import emulate

DATA = Path(qonnx.__file__).parent / "data" / "onnx"


@pytest.mark.parametrize("model,policy,all_on_fpga", [
    ("mnist-conv/model.onnx", "support", True),
    ("bsd300x3-espcn/subpixel/float_model.onnx", "support", True),
    ("bsd300x3-espcn/nn_resize/float_model.onnx", "latency", False),
])
def test_shipped_models_build_and_emulate_on_pynq_z2(tmp_path, model, policy, all_on_fpga):
    out = tmp_path / "build"
    plan = build(BuildOptions(model=DATA / model, board="pynq-z2", out_dir=out, policy=policy),
                 progress=lambda message: None)
    result = emulate(out, None, 3)
    assert result.comparison.passed, result.table()
    assert all(where.get("subfunction") or where.get("folded_into") for where in plan.node_map.values())
    fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
    assert fpga, "nothing went to the FPGA"
    if all_on_fpga:
        assert [s.kind for s in plan.subfunctions] == ["fpga"]


@pytest.mark.parametrize("model,on_fpga", [("bsd300x3-espcn/subpixel/quant_model.onnx", True),
                                            ("floatquant_exec/qonnx_act_weight_fp8.onnx", False)])
def test_qonnx_models_build_and_emulate_against_their_quantized_reference(tmp_path, model, on_fpga):
    """The Brevitas-exported QONNX models qonnx ships (Quant, FloatQuant in domain onnx.brevitas):
    planned, built and emulated against the quantized model's own reference (qonnx's execution).
    The ESPCN's weight quantizers fold into its convolutions, one of which the latency policy puts
    on the FPGA; FloatQuant (FP8) runs on the ARM cores on qonnx's execution."""
    out = tmp_path / "build"
    plan = build(BuildOptions(model=DATA / model, board="pynq-z2", out_dir=out), progress=lambda message: None)
    result = emulate(out, None, 3)
    assert result.comparison.passed, result.table()
    assert "qonnx execution" in result.engines
    assert any(s.kind == "fpga" for s in plan.subfunctions) == on_fpga
    assert any(w.get("subfunction") for w in plan.node_map.values())
