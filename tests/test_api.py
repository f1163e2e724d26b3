"""The Python API: plan, build, load, predict; predict equals `hetdeploy emulate --output`."""

import html

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import hetdeploy
import networks
from hetdeploy.emulate import emulate


def test_plan_shows_the_cli_table_and_mistakes_raise_user_error(tmp_path):
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    view = hetdeploy.plan(model, "pynq-z2", policy="support", width=8)
    assert view.plan.width == 8 and [s.kind for s in view.plan.subfunctions] == ["fpga"]
    assert "execution units (estimates, not synthesis results)" in str(view)
    assert view._repr_html_() == f"<pre>{html.escape(str(view))}</pre>"  # a notebook shows the same table
    with pytest.raises(hetdeploy.UserError, match="unknown board 'pynq'"):
        hetdeploy.plan(model, "pynq")
    with pytest.raises(hetdeploy.UserError, match="no plan.json here"):
        hetdeploy.load(tmp_path)
    with pytest.raises(hetdeploy.UserError, match="unknown option 'widht'; did you mean 'width'"):
        hetdeploy.plan(model, "pynq-z2", widht=8)
    with pytest.raises(hetdeploy.UserError, match="option width: '40': expected a whole number of bits from 4 to 32"):
        hetdeploy.plan(model, "pynq-z2", width=40)
    # a config file, the keyword options over it (as on the command line)
    (tmp_path / "c.yaml").write_text("model: jet.onnx\nboard: pynq-z2\npolicy: support\nwidth: 12\n")
    view = hetdeploy.plan(config=tmp_path / "c.yaml", width=10)
    assert view.plan.width == 10 and view.plan.policy == "support" and view.plan.config["width"] == 10


def test_build_predict_and_load_match_emulate(built, tmp_path):
    """predict runs the build as emulate does, in fixed point: within the build's tolerance of the
    model on onnxruntime, not equal to it."""
    model, out = built("small_cnn")
    x = np.random.default_rng(3).normal(size=(3, 1, 28, 28)).astype(np.float32)
    pipeline = hetdeploy.load(out)
    (y,) = pipeline.predict(x)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {session.get_inputs()[0].name: x[i : i + 1]})[0] for i in range(3)])
    assert y.shape == want.shape and 0 < np.max(np.abs(y - want)) <= pipeline.plan.relative_tolerance * \
        np.max(np.abs(want))
    np.save(tmp_path / "x.npy", x)
    emulated = emulate(out, str(tmp_path / "x.npy"))
    np.testing.assert_array_equal(y, next(iter(emulated.comparison.outputs.values())))
    assert "on the FPGA" in repr(pipeline)
    with pytest.raises(hetdeploy.UserError, match="has shape"):
        pipeline.predict(x[..., :20])
    rebuilt = hetdeploy.build(model, "pynq-z2", tmp_path / "again", policy="support")
    np.testing.assert_array_equal(rebuilt.predict(x)[0], y)  # same inputs, same bytes out
