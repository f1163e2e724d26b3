"""The Python API: plan, build, load, predict; predict equals `hetdeploy emulate --output`."""

import html
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import hetdeploy
import networks
from hetdeploy.planning.units import RESOURCES
from hetdeploy.running.emulate import emulate


def test_a_streamed_cnns_plan_shows_each_units_fifos_and_line_buffers_on_lines_of_their_own():
    """The plan lists a streamed unit's resources by part under it (units.resource_parts), the same figures in
    plan.json's ``resource_parts``, and the parts add up to the unit's row (its convolutions hls4ml's, streamed:
    off the engine, which the folding would give them)."""
    view = hetdeploy.plan(Path(__file__).resolve().parent.parent / "examples" / "small_cnn.onnx", "pynq-z2",
                          no_engine=True)
    text = str(view).splitlines()
    streamed = [u for s in view.plan.subfunctions for u in s.execution_units if u.io_type == "io_stream"]
    convolutions = [u for u in streamed if "FIFOs" in u.resource_parts and "line buffers" in u.resource_parts]
    assert convolutions
    for unit in streamed:
        row = next(k for k, line in enumerate(text) if line.startswith(f"  {unit.name} "))
        below = {}
        for line in text[row + 1:]:
            if not line.startswith("    "):
                break
            *words, dsp, bram18, lut, ff = line.split()
            below[" ".join(words)] = dict(zip(RESOURCES, map(int, (dsp, bram18, lut, ff))))
        assert list(below) == list(unit.resource_parts)
        for part, used in unit.resource_parts.items():
            assert below[part] == {k: used.get(k, 0) for k in RESOURCES}
        assert {k: sum(p[k] for p in below.values()) for k in RESOURCES} == {k: unit.estimate[k] for k in RESOURCES}


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
    # values as a user writes them, per node too, in the form the config file and the command line take
    view = hetdeploy.plan(model, "pynq-z2", policy="support", width="12", precisions={"/fc1/Gemm": "ap_fixed<8,3>"})
    units = view.plan.subfunctions[0].execution_units
    assert view.plan.width == 12 and units[0].precision == "ap_fixed<8,3>" and units[1].precision == "ap_fixed<12,6>"
    assert view.plan.config["nodes"] == {"/fc1/Gemm": {"precision": "ap_fixed<8,3>"}}
    with pytest.raises(hetdeploy.UserError, match="reuse factor of node '/fc1/Gemm': '0': expected a whole number"):
        hetdeploy.plan(model, "pynq-z2", reuse_factors={"/fc1/Gemm": 0})


def test_the_board_files_fpga_clock_reaches_every_unit_estimate(tmp_path):
    """The same plan on a PYNQ-Z2 whose fabric is clocked at 200 MHz instead of 100: each multiply-accumulate
    unit's pipeline takes as many cycles or more (``units.pipeline_cycles``), none fewer, its resources the
    same but the partial sums Vitis HLS (the board's hls_tool) registers between adder levels, more at the
    faster clock, and its seconds come from the board's clock. Under Vivado HLS (``hls_tool: vivado_hls``), which
    registers every product, the FFs are the clock's no more and at least Vitis HLS's."""
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    board = (Path(hetdeploy.__file__).parent / "boards" / "pynq-z2.yaml").read_text()
    assert board.count("clock_mhz: 100 ") == 1 and board.count("hls_tool: vitis_hls ") == 1
    (tmp_path / "fast.yaml").write_text(board.replace("clock_mhz: 100 ", "clock_mhz: 200 "))
    for name, clock in (("vivado.yaml", 100), ("vivado-fast.yaml", 200)):
        (tmp_path / name).write_text(board.replace("clock_mhz: 100 ", f"clock_mhz: {clock} ")
                                     .replace("hls_tool: vitis_hls ", "hls_tool: vivado_hls "))
    slow, fast, vivado, vivado_fast = (
        hetdeploy.plan(model, b, policy="support", width=16).plan.subfunctions[0].execution_units
        for b in ("pynq-z2", str(tmp_path / "fast.yaml"), str(tmp_path / "vivado.yaml"),
                  str(tmp_path / "vivado-fast.yaml")))
    assert [u.nodes for u in slow] == [u.nodes for u in fast] == [u.nodes for u in vivado]
    deeper = [f.estimate["compute_cycles"] - s.estimate["compute_cycles"] for s, f in zip(slow, fast)]
    assert min(deeper) >= 0 and max(deeper) > 0
    assert all({k: s.estimate[k] for k in RESOURCES if k != "ff"} == {k: f.estimate[k] for k in RESOURCES if k != "ff"}
               for s, f in zip(slow, fast))
    assert all(f.estimate["ff"] >= s.estimate["ff"] for s, f in zip(slow, fast))
    assert any(f.estimate["ff"] > s.estimate["ff"] for s, f in zip(slow, fast))
    assert all(f.rate_per_s == pytest.approx(200e6 / f.estimate["latency_cycles"]) for f in fast)
    assert all({k: v.estimate[k] for k in RESOURCES} == {k: w.estimate[k] for k in RESOURCES}
               for v, w in zip(vivado, vivado_fast))
    assert all(v.estimate["ff"] >= f.estimate["ff"] for v, f in zip(vivado, fast))
    assert any(v.estimate["ff"] > s.estimate["ff"] for v, s in zip(vivado, slow))


@pytest.mark.slow
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


@pytest.mark.slow  # the README's example builds
def test_the_readme_python_example_runs_as_a_script_and_from_standard_input(tmp_path):
    """The README's "From Python" block, as a user saves it (a script without a __main__ guard) and as they
    pipe it into python: Dask's worker processes must not run it again (they did: 'Nanny failed to start',
    and '<stdin>' not found)."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    code = (root / "README.md").read_text().split("### From Python")[1].split("```python\n")[1].split("```")[0]
    (tmp_path / "examples").mkdir()
    shutil.copy(root / "examples" / "small_cnn.onnx", tmp_path / "examples")
    (tmp_path / "example.py").write_text(code)
    for how, extra in (("script", {"args": [sys.executable, "example.py"]}),
                       ("standard input", {"args": [sys.executable, "-"], "input": code})):
        run = subprocess.run(cwd=tmp_path, capture_output=True, text=True, timeout=900, **extra)
        assert run.returncode == 0, f"{how}: {run.stderr[-3000:]}"
        assert "execution units (estimates, not synthesis results)" in run.stdout  # the plan it printed
        records = json.loads((tmp_path / "sweep" / "results.json").read_text())
        assert len(records) == 8 and all(r["status"] == "ok" for r in records), how
        shutil.rmtree(tmp_path / "sweep")
        shutil.rmtree(tmp_path / "out")
