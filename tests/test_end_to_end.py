"""The reference networks through build and emulate, and every bad input of the CLI."""

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import networks
from conftest import BATCHES
from hetdeploy.commands.cli import main
from hetdeploy.core.board import BOARDS_DIR
from hetdeploy.core.plan import Plan
from hetdeploy.running.deploy import write_manifests
from hetdeploy.running.samples import hold_out
from hetdeploy.steps.build import STEPS


def hetdeploy(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "hetdeploy", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def reference(model_path, x):
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.slow
@pytest.mark.parametrize("name, devices", [
    ("jet_tagger_mlp", ["fpga"]),
    ("small_cnn", ["fpga"]),
    ("split_by_lrn", ["fpga", "arm_cpu", "fpga"]),
    ("alexnet_style", ["fpga", "arm_cpu", "fpga"]),  # chosen by the latency policy
    ("four_conv64", ["fpga"]),  # its maps in bands, whole in DDR
])
def test_build_and_emulate(built, tmp_path, capsys, name, devices):
    model, out = built(name)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["board"] == "pynq-z2"
    assert [s["device"] for s in plan["subfunctions"]] == devices
    all_nodes = []
    for sub in plan["subfunctions"]:
        assert {"name", "device", "nodes", "inputs", "outputs", "onnx"} <= set(sub)
        assert sub["device"] in sub["name"]
        assert (out / sub["onnx"]).is_file()
        all_nodes += sub["nodes"]
        if sub["kind"] == "fpga":
            project = out / sub["hls"]["project"]
            assert (out / sub["hls"]["library"]).is_file()
            top = (project / f"{sub['hls']['top']}_top.cpp").read_text()
            assert (project / sub["hls"]["synthesis_script"]).is_file()
            v = sub["verification"]
            assert v["passed"] and 0 < v["max_abs_error"] <= v["tolerance"]
            units = sub["execution_units"]
            assert units and [n for u in units for n in u["nodes"]] == sub["nodes"]
            steps = [line for line in top.splitlines() if line.strip().startswith("// step ")]
            assert [s.split()[3] for s in steps] == [u["name"] for u in units]  # the top runs them in order
            for unit in units:
                assert {"name", "nodes", "pe", "reuse_factor", "strategy", "precision", "estimate"} <= set(unit)
                e = unit["estimate"]
                assert set(e) - {"uram"} == {"dsp", "bram18", "lut", "ff", "latency_cycles", "compute_cycles",
                                             "buffer_cycles", "ddr_cycles"}
                assert "uram" not in e or unit["engine"] is not None  # the engine's weight buffers', with its first unit
                assert e["latency_cycles"] == e["compute_cycles"] + e["buffer_cycles"]
                assert unit["verification"]["passed"] and unit["verification"]["samples"] > 0
                assert unit["precision"].startswith("ap_fixed<")
                if unit["hls"] is not None:  # an hls4ml project of its own, with the folding applied
                    code = (out / unit["hls"]["project"] / "firmware" / "parameters.h").read_text()
                    if unit["pe"] in ("conv", "dense"):
                        assert f"reuse_factor = {unit['reuse_factor']};" in code
                        assert f"strategy = nnet::{unit['strategy'].lower()};" in code
            buffers = sub["memory"]["buffers"]
            assert {b["tensor"] for b in buffers} == set(sub["inputs"]) | {t for u in units for t in u["outputs"]} | \
                {f"{u['name']}.band_{end}" for u in units if u["band"] for end in ("in", "out")} | \
                {f"{u['name']}.weights" for u in units if u["weights_in_ddr"]}
            for key in ("dsp", "bram18", "lut", "ff"):
                assert sub["resources"][key] == sum(u["estimate"][key] for u in units) <= sub["budget"][key]
        else:
            assert sub["execution_units"] == [] and sub["resources"] is None
    assert len(all_nodes) == len(set(all_nodes)) == len(onnx.load(str(out / "model.onnx")).graph.node)

    spec = onnx.load(str(model)).graph.input[0].type.tensor_type.shape
    shape = [d.dim_value or 1 for d in spec.dim]
    x = np.random.default_rng(7).normal(size=shape).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    capsys.readouterr()
    code = main(["emulate", str(out), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["passed"]
    assert [s["name"] for s in report["subfunctions"]] == [s["name"] for s in plan["subfunctions"]]
    y = np.load(tmp_path / "y.npy")
    want = reference(model, x)
    error = float(np.max(np.abs(y - want)))
    assert error == pytest.approx(report["max_abs_error"], rel=1e-5, abs=1e-7)
    assert error <= report["tolerance"]
    assert error > 0  # fixed point really ran: not onnxruntime under another name
    for sub in report["subfunctions"]:
        if sub["kind"] == "cpu":  # the same float nodes as its reference, cut from model.onnx, on the same provider
            assert sub["outputs"] and sub["max_abs_error"] == 0 and sub["engine"] == "onnxruntime CPU"
    # the board script, emulated, gives exactly what `hetdeploy emulate` gave
    board_run = subprocess.run([sys.executable, str(out / "deploy" / "run.py"), "--input", str(tmp_path / "x.npy"),
                                "--output", str(tmp_path / "run.npy"), "--emulate"], capture_output=True, text=True,
                               cwd=out)
    assert board_run.returncode == 0, board_run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "run.npy"), y)


@pytest.mark.slow
def test_a_network_whose_maps_exceed_the_chip_runs_in_bands_with_its_activations_in_ddr(built, capsys):
    """Four 3 x 3 convolutions of 64 channels on 32 x 32: hls4ml's FIFOs hold a layer's whole 32 x 32 x 64 map, and
    its padding layer's the padded 34 x 34 one (57 BRAM18s each, past an eighth of the PYNQ-Z2's budget), so each
    hls4ml unit runs in bands (the same for each: 3 x 3 windows, a row above and below each band), those the
    folding finds faster on the engine reading the whole maps there; the maps themselves sit in DDR, and the whole
    network is one FPGA call (built and emulated within tolerance in test_build_and_emulate). Its first convolution
    is pinned to hls4ml (conftest's OPTIONS): the engine, faster, would take all four."""
    model, out = built("four_conv64")
    plan = json.loads((out / "plan.json").read_text())
    (fpga,) = plan["subfunctions"]
    on_hls4ml = [u for u in fpga["execution_units"] if u["engine"] is None]
    assert on_hls4ml and all(u["band"] is None for u in fpga["execution_units"] if u["engine"])
    bands = {(u["band"]["count"], u["band"]["rows"], u["band"]["input_rows"]) for u in on_hls4ml}
    (count, rows, input_rows), = bands
    assert count >= 2 and input_rows == rows + 2 and count * rows >= 32 > (count - 1) * rows
    assert fpga["memory"]["ddr_bytes"] > 0 and all(u["verification"]["passed"] for u in fpga["execution_units"])
    capsys.readouterr()
    assert main(["plan", str(model), "--board", "pynq-z2", "--strategy", "conv1=resource"]) == 0  # as it was built
    assert f"run in bands (resources of one band, cycles of all): sf0_fpga_u0 {count} of {rows} output rows" in \
        capsys.readouterr().out


def test_network_larger_than_the_fpga_is_folded_and_the_rest_moves_off_it(tmp_path, capsys):
    """A PYNQ-Z2 with 90 BRAM18s: beside the first convolution's unit, the others' hls4ml units do not fit even
    fully folded and in bands; without the engine (--no-engine) they move to the ARM, each with its reason; with
    it, every convolution runs on the FPGA, those hls4ml cannot hold on the engine."""
    model = tmp_path / "four_conv64.onnx"
    onnx.save(networks.four_conv64(), str(model))
    shipped = (BOARDS_DIR / "pynq-z2.yaml").read_text()
    assert "bram18: 280," in shipped
    board = tmp_path / "pynq-z2-90.yaml"
    board.write_text(shipped.replace("bram18: 280,", "bram18: 90,"))
    assert main(["plan", str(model), "--board", str(board), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    fpga = [s for s in plan["subfunctions"] if s["kind"] == "fpga"]
    assert {"conv1", "conv2", "conv3", "conv4"} <= {n for s in fpga for n in s["nodes"]}
    assert any(u["engine"] for s in fpga for u in s["execution_units"]) and not plan["fpga_fallbacks"]
    assert main(["plan", str(model), "--board", str(board), "--json", "--no-engine"]) == 0
    plan = json.loads(capsys.readouterr().out)
    fpga = plan["subfunctions"][0]
    assert fpga["nodes"][:2] == ["conv1", "relu1"]
    assert max(u["reuse_factor"] for u in fpga["execution_units"]) > 1  # folded to fit
    fallbacks = {f["node"]: f for f in plan["fpga_fallbacks"]}
    assert {"conv3", "conv4"} <= set(fallbacks) and fallbacks["conv4"]["reason"] == "capacity"
    assert all(f["device"] == "arm_cpu" and f["fpga"] == "fpga" for f in fallbacks.values())
    assert main(["plan", str(model), "--board", str(board), "--no-engine"]) == 0
    text = capsys.readouterr().out
    assert "off the FPGA, does not fit beside the units it holds, even fully folded" in text and "conv4" in text


@pytest.mark.slow
def test_subfunction_chain_on_onnxruntime_equals_model(built):
    model, out = built("split_by_lrn")
    plan = json.loads((out / "plan.json").read_text())
    x = np.random.default_rng(3).normal(size=(1, 3, 14, 14)).astype(np.float32)
    env = {"input": x}
    for sub in plan["subfunctions"]:
        session = ort.InferenceSession(str(out / sub["onnx"]), providers=["CPUExecutionProvider"])
        results = session.run(None, {i.name: env[i.name] for i in session.get_inputs()})
        env.update(zip([o.name for o in session.get_outputs()], results))
    np.testing.assert_array_equal(env["output"], reference(model, x))


@pytest.mark.slow
def test_emulate_out_of_tolerance_exits_3(built, tmp_path):
    _, out = built("jet_tagger_mlp")
    copy = tmp_path / "strict"
    subprocess.run(["cp", "-r", str(out), str(copy)], check=True)
    plan = json.loads((copy / "plan.json").read_text())
    plan["relative_tolerance"] = 1e-9
    (copy / "plan.json").write_text(json.dumps(plan))
    write_manifests(Plan.load(copy / "plan.json"), copy)  # as if built so strict (an edit alone is damage)
    result = hetdeploy("emulate", copy)
    assert result.returncode == 3
    assert "OUT OF TOLERANCE" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("ports", [[], "reversed"])
def test_a_plan_whose_fpga_ports_are_not_its_tensors_is_refused_in_one_line(built, tmp_path, ports):
    """The top's ports are the subfunction's inputs, in order: a damaged plan.json that leaves one out
    (found by tests/fuzz.py) or swaps two is refused before anything runs."""
    _, out = built("alexnet_style")
    copy = tmp_path / "damaged"
    subprocess.run(["cp", "-r", str(out), str(copy)], check=True)
    plan = json.loads((copy / "plan.json").read_text())
    hls = next(s["hls"] for s in plan["subfunctions"] if s["hls"])
    if ports == "reversed":
        hls["outputs"], hls["inputs"] = hls["inputs"], hls["outputs"]
    else:
        hls["inputs"] = ports
    (copy / "plan.json").write_text(json.dumps(plan))
    one_line_error(hetdeploy("emulate", copy), "plan.json is damaged", "HLS inputs")


@pytest.mark.slow
def test_build_is_byte_for_byte_reproducible(built, tmp_path):
    model, first = built("jet_tagger_mlp")
    second = tmp_path / "again"
    assert main(["build", str(model), "--board", "pynq-z2", "-o", str(second), "--policy", "support", "--batch",
                 str(BATCHES["jet_tagger_mlp"])]) == 0
    comparison = filecmp.dircmp(first, second, ignore=["build.log"])  # a record of the run: its times and paths

    def differing(c):
        return c.diff_files + c.left_only + c.right_only + [f for sub in c.subdirs.values() for f in differing(sub)]

    assert differing(comparison) == []


@pytest.mark.slow
def test_build_folder_survives_being_moved(built, tmp_path):
    _, out = built("small_cnn")
    moved = tmp_path / "moved"
    subprocess.run(["cp", "-r", str(out), str(moved)], check=True)
    result = hetdeploy("emulate", moved, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["passed"]


def mlp_with_names(names):
    model = networks.jet_tagger_mlp()
    for node, name in zip(model.graph.node, names):
        node.name = name
    return model


@pytest.mark.slow
def test_hostile_names_never_reach_paths_or_code(tmp_path):
    hostile = ["../../x", 'a"; system("touch /tmp/pwned");', "$(reboot)", "`id`"]
    model_path = tmp_path / "m.onnx"
    onnx.save(mlp_with_names(hostile), str(model_path))
    board = (tmp_path / "b.yaml")
    text = open(__import__("hetdeploy.core.board", fromlist=["x"]).BOARDS_DIR / "pynq-z2.yaml").read()
    evil = "'../fpga\"$(id)'"
    for old, new in [("name: fpga\n", f"name: {evil}\n"), ("[fpga,", f"[{evil},"), ("to: fpga,", f"to: {evil},"),
                     ("from: fpga,", f"from: {evil},")]:
        assert old in text
        text = text.replace(old, new)
    board.write_text(text)
    out = tmp_path / "out"
    # a board file's names reach C++, Tcl and scripts: refused, not escaped
    one_line_error(hetdeploy("build", model_path, "--board", board, "-o", out, "--policy", "support"),
                   "b.yaml: line", "devices[1].name: expected a name of letters")
    result = hetdeploy("build", model_path, "--board", "pynq-z2", "-o", out, "--policy", "support")
    assert result.returncode == 0, result.stderr
    written = [p for p in tmp_path.rglob("*")]
    assert all(p.resolve().is_relative_to(tmp_path.resolve()) for p in written)
    assert not any(set(p.name) & set('"$`;') for p in written)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["subfunctions"][0]["nodes"][:2] == hostile[:2]  # the user's names, kept for the user
    for source in (out / "hls").rglob("*"):
        if source.suffix in (".cpp", ".h", ".tcl", ".sh", ".yml"):
            text = source.read_text()
            assert not any(h in text for h in hostile), source
            assert "$(id)" not in text and "system(" not in text


def one_line_error(result, *fragments):
    assert result.returncode == 2, result.stdout + result.stderr
    *progress, error = result.stderr.strip().splitlines()
    assert error.startswith("hetdeploy: error: "), result.stderr
    # only progress before it: "[k/N] ..." and their indented notes
    assert all(line.startswith(("[", "      ")) for line in progress), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in error, error


def model_with_custom_op(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("FancyGlow", ["r"], ["y"], name="glow", domain="com.example")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    path = tmp_path / "custom.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.slow
def test_bad_inputs_end_with_one_line_and_no_build_folder(tmp_path):
    good = tmp_path / "good.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(good))
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"not an onnx model at all \x00\xff")
    bad_board = tmp_path / "bad.yaml"
    bad_board.write_text(open(__import__("hetdeploy.core.board", fromlist=["x"]).BOARDS_DIR / "pynq-z2.yaml").read()
                         .replace("dsp: 220", "dsp: many"))
    cases = [
        ((tmp_path / "missing.onnx", "pynq-z2"), ["missing.onnx", "not found"]),
        ((corrupt, "pynq-z2"), ["corrupt.onnx", "not a readable ONNX model"]),
        ((good, "pynq-z9"), ["unknown board 'pynq-z9'"]),
        ((good, bad_board), ["bad.yaml", "line", "resources.dsp", "integer"]),
        ((model_with_custom_op(tmp_path), "pynq-z2"), ["glow", "FancyGlow"]),
    ]
    for (model, board), fragments in cases:
        out = tmp_path / f"out_{len(list(tmp_path.iterdir()))}"
        one_line_error(hetdeploy("build", model, "--board", board, "-o", out), *fragments)
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") or p.name.endswith(".failed")]


@pytest.mark.slow
def test_reuse_factor_and_calibration_mistakes_are_one_line(tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    out = tmp_path / "out"
    support = ("--policy", "support")
    one_line_error(hetdeploy("build", model, "--board", "pynq-z2", "-o", out, *support, "--reuse-factor", "/fc1/Gemm=7",
                             "--strategy", "/fc1/Gemm=resource"),
                   "--reuse-factor /fc1/Gemm=7", "does not divide the layer", "16 inputs x 64 outputs",
                   "under the resource strategy", "valid: 1, 2, 4")
    cnn = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(cnn))
    one_line_error(hetdeploy("plan", cnn, "--board", "pynq-z2", *support, "--reuse-factor", "pool1=2"),
                   "'pool1'", "no multiplications")
    one_line_error(hetdeploy("plan", cnn, "--board", "pynq-z2", *support, "--weights-in-ddr", "pool1"),
                   "--weights-in-ddr", "'pool1'", "no weights to move")
    one_line_error(hetdeploy("plan", cnn, "--board", "pynq-z2", *support, "--weights-in-ddr", "conv9"),
                   "--weights-in-ddr", "no node 'conv9'")
    one_line_error(hetdeploy("build", model, "--board", "pynq-z2", "-o", out, "--reuse-factor", "/fc1/Gemm=4"),
                   "'/fc1/Gemm' runs on arm_cpu, not on an FPGA")  # the latency policy keeps it on the A9
    np.save(tmp_path / "calibration.npy", np.zeros((3, 15), dtype=np.float32))
    one_line_error(hetdeploy("build", model, "--board", "pynq-z2", "-o", out, *support, "--calibration",
                             tmp_path / "calibration.npy"), "calibration.npy", "shape [3, 15]", "[1, 16]")
    assert not out.exists()
    for flag in ("--calibration", "--verify-input"):  # `plan` reads them too: a mistake is not left to `build`
        one_line_error(hetdeploy("plan", model, "--board", "pynq-z2", flag, tmp_path / "calibration.npy"),
                       "calibration.npy", "shape [3, 15]")
        one_line_error(hetdeploy("plan", model, "--board", "pynq-z2", flag, tmp_path / "missing.npy"),
                       "missing.npy: input file not found")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    one_line_error(hetdeploy("build", model, "--board", "pynq-z2", "-o", a_file / "sub"), "a_file is a file, not a folder")
    one_line_error(hetdeploy("plan", tmp_path, "--board", "pynq-z2"), "is a folder; give the ONNX model file")
    for flag, value in (("--samples", "0"), ("--tolerance", "-1")):  # argparse's mistakes are one line too
        result = hetdeploy("build", model, "--board", "pynq-z2", "-o", out, flag, value)
        assert result.returncode == 2 and f"error: argument {flag}: '{value}'" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
    for args, expected in ((["--board", "pynq-z2", "--policy", "fast"], "invalid choice: 'fast'"),
                           ([], "--board is required")):
        result = hetdeploy("plan", model, *args)
        assert result.returncode == 2 and [line for line in result.stderr.splitlines() if line] == [
            f"hetdeploy: error: {result.stderr.split('error: ')[1].strip()}"] and expected in result.stderr
    result = hetdeploy("plan", model, "--board", "pynq-z2", *support, "--reuse-factor", "/fc1/Gemm=16", "--json")
    assert result.returncode == 0, result.stderr
    (unit,) = [u for u in json.loads(result.stdout)["subfunctions"][0]["execution_units"] if "/fc1/Gemm" in u["nodes"]]
    assert unit["reuse_factor"] == 16


@pytest.mark.slow
def test_calibration_data_sizes_each_unit_and_the_error_is_reported(built, tmp_path):
    def integer_bits(precision):  # ap_fixed<W,I,...>
        return int(precision.split("<")[1].split(",")[1])

    model, default = built("jet_tagger_mlp")
    wide = np.random.default_rng(2).normal(0, 40, size=(8, 16)).astype(np.float32)  # far beyond N(0, 1)
    np.save(tmp_path / "calibration.npy", wide)
    out = tmp_path / "calibrated"
    result = hetdeploy("build", model, "--board", "pynq-z2", "-o", out, "--policy", "support",
                       "--calibration", tmp_path / "calibration.npy")
    assert result.returncode == 0, result.stderr
    assert "sf0_fpga_u0" in result.stdout and "ap_fixed<" in result.stdout  # per-unit precision and error
    plans = [json.loads((d / "plan.json").read_text())["subfunctions"][0] for d in (default, out)]
    first_input = [p["memory"]["buffers"][0] for p in plans]
    assert integer_bits(first_input[1]["precision"]) >= integer_bits(first_input[0]["precision"]) + 4
    for unit in plans[1]["execution_units"]:  # checked on the 2 of 8 samples held out of sizing
        assert unit["verification"]["samples"] == 2 and unit["verification"]["passed"]
    # each step's time under its own lines, never on the next step's line (it read as that step's time)
    lines = result.stderr.splitlines()
    steps = [k for k, line in enumerate(lines) if line.startswith("[")]
    assert len(steps) == len(STEPS) and all(lines[k - 1] == f"      step {n} took {lines[k - 1].split()[3]} s"
                                               for n, k in enumerate(steps[1:], start=1))
    assert not any("(step" in line for line in lines)
    # a log (stderr not a terminal) gets a line per unit and one before the long compile, never a silent minute
    assert all(f"sf0_fpga_u{k} (Gemm" in result.stderr for k in range(4))
    assert "      sf0_fpga: compiling the C-simulation of its top and 4 units (g++) ..." in lines
    # where the ranges came from, said in the build and kept in plan.json
    assert "precision sized on 6 samples of calibration.npy" in result.stderr
    calibrations = [json.loads((d / "plan.json").read_text())["calibration"] for d in (default, out)]
    assert calibrations[0]["source"] == "synthetic" and calibrations[0]["samples"] == 4
    assert calibrations[0]["verified_on"] == 5  # 4 of another seed stream and 1 at the edges of the sized range
    sized = np.delete(wide, hold_out(list(wide), 0)[1], axis=0)
    assert calibrations[1] == {"source": "file", "samples": 6, "file": "calibration.npy",
                               "input_ranges": {"input": [float(sized.min()), float(sized.max())]},
                               "verified_on": 2,
                               "verification": "2 of the 8 samples of calibration.npy, held out (never sized on)"}


@pytest.mark.slow
def test_failed_verification_leaves_previous_build_untouched_and_keeps_its_evidence(tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.json").write_text('{"previous": true}')  # stands in for an earlier build
    # at 32 bits no unit can be widened further: the failure stands
    result = hetdeploy("build", model, "--board", "pynq-z2", "-o", out, "--tolerance", "1e-9", "--policy", "support",
                       "--width", "32")
    assert result.returncode == 3
    assert "against onnxruntime: output" in result.stderr.strip().splitlines()[-1]
    assert "differs by" in result.stderr.strip().splitlines()[-1]
    assert [p.name for p in out.iterdir()] == ["plan.json"]
    assert (out / "plan.json").read_text() == '{"previous": true}'
    # the failed build is kept beside it, for its logs, and the message says where
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out", "out.failed"]
    assert f"kept in {tmp_path / 'out.failed'}; its log: {tmp_path / 'out.failed' / 'build.log'}" in result.stderr
    assert (tmp_path / "out.failed" / "hls").is_dir()
    log = (tmp_path / "out.failed" / "build.log").read_text().splitlines()
    # the earlier build was named as replaced once this one completes, which it did not
    assert log[0] == f"      {out} holds an earlier build: this one replaces it once complete (if this one fails, " \
                     f"it stays as it is)"
    assert log[1].startswith(f"[1/{len(STEPS)}] loading model") and log[-1].startswith("error: C-simulation of")


@pytest.mark.slow
def test_what_fuzzing_found_in_emulate_and_run_py_is_one_line(built, tmp_path):
    """Object arrays (.npy and .npz), an empty file, a pipe, a negative seed, a plan.json whose input
    no longer matches its C-simulation library: one line and exit 2 from emulate and from run.py; a
    C-simulation that crashes keeps what it printed in the build folder, never in the system's
    temporary folder."""
    import tempfile

    _, out = built("jet_tagger_mlp")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "objects.npz", input=np.array([{"a": 1}], dtype=object))
    (tmp_path / "empty.npy").write_bytes(b"")
    os.mkfifo(tmp_path / "pipe.npy")
    for name, expected in (("objects.npy", "Object arrays cannot be loaded"), ("objects.npz", "Object arrays"),
                           ("empty.npy", "not a readable .npy/.npz file of numbers"),
                           ("pipe.npy", "is not a regular file (a pipe, socket or device)")):
        one_line_error(hetdeploy("emulate", out, "--input", tmp_path / name), f"{tmp_path / name}: ", expected)
        result = subprocess.run([sys.executable, "deploy/run.py", "--emulate", "--input", str(tmp_path / name)],
                                cwd=out, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and result.stderr.startswith(f"run.py: error: {tmp_path / name}: "), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    result = hetdeploy("emulate", out, "--seed", "-5")
    assert result.returncode == 2 and result.stderr.startswith("hetdeploy: error: argument --seed: '-5'")
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    plan = json.loads((damaged / "plan.json").read_text())
    plan["inputs"][0]["shape"] = [1, 17]
    (damaged / "plan.json").write_text(json.dumps(plan))
    one_line_error(hetdeploy("emulate", damaged), "plan.json: subfunction sf0_fpga's HLS port 'input' holds [1, 16], "
                                                  "17 values a sample elsewhere in the plan; plan.json is damaged")
    crashing = tmp_path / "crashing"
    shutil.copytree(out, crashing)
    library = crashing / "hls" / "sf0_fpga" / "libsf0_fpga.so"
    library.write_bytes(library.read_bytes()[: library.stat().st_size // 2])
    write_manifests(Plan.load(crashing / "plan.json"), crashing)  # a library that crashes as it was built
    before = set(Path(tempfile.gettempdir()).glob("hetdeploy-csim-*"))
    result = hetdeploy("emulate", crashing)
    assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    log = crashing / "hls" / "sf0_fpga" / "csim_crash.log"
    assert f"; see {log}" in result.stderr and log.is_file()
    assert set(Path(tempfile.gettempdir()).glob("hetdeploy-csim-*")) == before


@pytest.mark.slow
def test_emulate_bad_inputs(built, tmp_path):
    _, out = built("jet_tagger_mlp")
    np.save(tmp_path / "wrong.npy", np.zeros((1, 15), dtype=np.float32))
    one_line_error(hetdeploy("emulate", out, "--input", tmp_path / "wrong.npy"), "shape [1, 15]", "[1, 16]")
    one_line_error(hetdeploy("emulate", tmp_path), "no plan.json")
    one_line_error(hetdeploy("emulate", out / "deploy"), "a deployment package (run it with run.py)",
                   f"takes the build folder that holds it, {out.resolve()}")


@pytest.mark.slow
def test_every_command_has_help():
    for command in ([], ["build"], ["plan"], ["emulate"], ["boards"], ["report"], ["sweep"], ["config"], ["cache"]):
        result = hetdeploy(*command, "--help")
        assert result.returncode == 0 and "usage: hetdeploy" in result.stdout


@pytest.mark.slow
def test_the_build_is_a_list_of_named_steps_its_help_lists():
    """Progress numbers come from the list; a verify that widens a unit runs the widening fixpoint again from
    unit_widths until none widens, the numbers as the list has them; build --help names every step, and says
    which plan runs."""
    from hetdeploy.steps.build import PLAN_STEPS, BuildState, Step, run_steps

    ran, announced = [], []

    def record(name):
        def run(state):
            ran.append(name)
            state.widened = ["sf0_fpga_u0"] if name == "verify" and ran.count("verify") == 1 else []
            return state
        return Step(name, run, lambda state: f"{name} now")

    steps = [record(s.name) for s in STEPS]
    run_steps(steps, BuildState(None, print), lambda k, line: announced.append((k, line)), len(PLAN_STEPS))
    assert ran == ["write_subfunctions", "unit_widths", "generate_hls", "verify", "unit_widths", "generate_hls",
                   "verify", "open_synth", "package"]
    assert [k for k, _ in announced] == [5, 6, 7, 8, 6, 7, 8, 9, 10] and announced[0] == (5, "write_subfunctions now")
    result = hetdeploy("build", "--help")
    assert f"hetdeploy plan runs the first {len(PLAN_STEPS)}" in result.stdout
    assert all(step.name in result.stdout for step in STEPS)


def test_units_widened_beyond_their_fpga_are_partitioned_again_at_their_widths(tmp_path):
    """small_cnn runs wholly on the FPGA of a PYNQ-Z2 with 25 BRAM18s (and a tenth of its measured call overhead,
    so that the FPGA's tens of microseconds decide; without the engine, on which its first convolution would fit
    at 32 bits too) at 16 bits, and at 32 bits does not fit it even fully folded
    (23 BRAM18s of its 22): a verification that widens its units to 32 bits sends the build back to the
    partition, which now places them at 32 bits (the first convolution and its pooling on the FPGA, the rest on the
    ARM); a fold
    that fails at the widths it was partitioned at is the error it is (no loop)."""
    from hetdeploy.core.plan import Widening
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.steps.build import PLAN_STEPS, BuildState, run_steps
    from hetdeploy.steps.plan_model import UnitsDoNotFit

    said, board = [], tmp_path / "pynq-z2-25.yaml"
    board.write_text((BOARDS_DIR / "pynq-z2.yaml").read_text().replace("bram18: 280,", "bram18: 25,")
                     .replace("    invocation_overhead_s: 9.0e-4", "    invocation_overhead_s: 9.0e-5"))
    options = BuildOptions(model=Path("examples/small_cnn.onnx"), board=str(board), out_dir=tmp_path, width=16,
                           no_engine=True)
    state = run_steps(PLAN_STEPS, BuildState(options, said.append, said.append), lambda k, line: None)
    assert [s.device for s in state.plan.subfunctions] == ["fpga"]
    by_name = {s.name: s for s in STEPS}
    state.build_dir = tmp_path
    (tmp_path / "hls" / "sf0_fpga").mkdir(parents=True)
    state.unit_widths = by_name["unit_widths"].run(state).unit_widths  # as built: every unit at 16 bits
    assert set(state.unit_widths.values()) == {16}
    state.layer_widths = {node: 32 for node in state.plan.subfunctions[0].nodes}  # as verify widens them
    state.plan.widened = [Widening("sf0_fpga_u0", 16, 32, "output 'x' differs by 1", 1.0)]
    assert by_name["unit_widths"].run(state).outgrown  # the partition fixpoint runs again from partition
    assert not (tmp_path / "hls").exists()
    assert any("the widened units do not fit: partitioning again at their widths" in line for line in said)
    state = by_name["unit_widths"].run(by_name["partition"].run(state))
    assert [(s.device, len(s.nodes)) for s in state.plan.subfunctions] == [("fpga", 3), ("arm_cpu", 5)]
    assert state.unit_widths == {"sf0_fpga_u0": 32, "sf0_fpga_u1": 32}
    assert [w.unit for w in state.plan.widened] == ["sf0_fpga_u0"]  # what the build widened stays on record
    # the plan's FPGA units at the widths it was partitioned at, widened past it: the fold's own error
    fpga = run_steps(PLAN_STEPS, BuildState(options, said.append, said.append), lambda k, line: None)
    fpga.build_dir, fpga.unit_widths = tmp_path, {"sf0_fpga_u0": 32}
    fpga.layer_widths = fpga.partitioned_widths = {node: 32 for node in fpga.plan.subfunctions[0].nodes}
    with pytest.raises(UnitsDoNotFit, match="more than it holds even fully folded"):
        by_name["unit_widths"].run(fpga)


def _same_files(one: Path, other: Path) -> list[str]:
    """The files of build folder ``one`` that ``other`` lacks or holds other bytes of, and those only
    ``other`` holds, but for their logs (each its own run's)."""
    def files(root):
        return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != "build.log"}
    a, b = files(one), files(other)
    return sorted(str(p) for p in a.keys() | b.keys() if a.get(p) != b.get(p))


@pytest.mark.slow
def test_a_build_stops_after_a_step_and_goes_on_from_one(built, tmp_path):
    """--to-step leaves the steps' files and a checkpoint, no plan.json (emulate refuses it in one
    line naming the step to go on from); --from-step goes on from the checkpoint, and a build stopped
    and gone on, or a finished one gone on from verify, is the same bytes as the build made at once.
    A changed setting, another board, an unknown step or a step the folder has not reached: one line."""
    model, finished = built("jet_tagger_mlp")
    settings = [str(model), "--board", "pynq-z2", "--policy", "support", "--batch", "50", "-q"]
    again = tmp_path / "again"
    shutil.copytree(finished, again)
    assert main(["build", *settings, "-o", str(again), "--from-step", "verify"]) == 0
    assert _same_files(finished, again) == []

    stopped = tmp_path / "stopped"
    assert main(["build", *settings, "-o", str(stopped), "--to-step", "generate_hls"]) == 0
    assert (stopped / "checkpoint" / "state.json").is_file() and (stopped / "hls").is_dir()
    assert not (stopped / "plan.json").exists() and not (stopped / "deploy").exists()
    result = hetdeploy("emulate", str(stopped))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "stopped after step generate_hls" in result.stderr and "--from-step verify" in result.stderr
    for args, says in ((["--from-step", "verify", "--width", "12"], "built with width 16, this command gives 12"),
                       (["--from-step", "package"], "stopped after step generate_hls; go on from a step up to "
                                                     "verify"),
                       (["--from-step", "verify", "--to-step", "unit_widths"], "comes after --to-step"),
                       (["--from-step", "checks"], "--from-step checks: no such step")):
        result = hetdeploy("build", *settings, "-o", str(stopped), *args)
        assert result.returncode == 2 and says in result.stderr.splitlines()[-1], (args, result.stderr)
    result = hetdeploy("build", *settings[:2], "zcu104", *settings[3:], "-o", str(stopped), "--from-step", "verify")
    assert result.returncode == 2 and "built for board pynq-z2, not zcu104" in result.stderr
    assert main(["build", *settings, "-o", str(stopped), "--from-step", "verify"]) == 0
    assert _same_files(finished, stopped) == []


@pytest.mark.slow
def test_a_damaged_checkpoint_is_one_line_naming_it(tmp_path):
    jet = str(Path(__file__).resolve().parent.parent / "examples" / "jet_tagger_mlp.onnx")
    out = tmp_path / "out"
    (out / "checkpoint").mkdir(parents=True)
    for content, says in (("{", "line 1: not valid JSON"), ('{"format": 9}', "checkpoint format 9, this hetdeploy "
                                                                              "reads 1"),
                          ('{"format": 1, "steps": 3}', "not a checkpoint this hetdeploy wrote: steps: expected a list")):
        (out / "checkpoint" / "state.json").write_text(content)
        result = hetdeploy("build", jet, "--board", "pynq-z2", "-o", str(out), "--from-step", "verify", "-q")
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"{out / 'checkpoint' / 'state.json'}: {says}" in result.stderr


@pytest.mark.slow
def test_help_shows_what_is_required_and_every_option_in_the_same_place():
    """The usage line names the model and the board as required (they may come from --config instead,
    which the description says), and build, plan and sweep list the options they share in one order,
    in the same sections."""
    from hetdeploy.commands.cli import parser

    commands = parser()._subparsers._group_actions[0].choices
    usage = {name: commands[name].format_usage() for name in ("build", "plan", "sweep", "emulate")}
    assert usage["build"] == "usage: hetdeploy build MODEL.onnx --board BOARD -o DIR [options]\n"
    assert usage["plan"] == "usage: hetdeploy plan MODEL.onnx --board BOARD [options]\n"
    assert usage["sweep"] == "usage: hetdeploy sweep MODEL.onnx --boards B1,B2 -o DIR [options]\n"
    assert usage["emulate"] == "usage: hetdeploy emulate DIR [options]\n"

    def layout(name):  # (section, option) in the order --help prints them
        return [(group.title, action.option_strings[-1] if action.option_strings else action.metavar)
                for group in commands[name]._action_groups for action in group._group_actions]

    shared = set(layout("build")) & set(layout("plan")) & set(layout("sweep"))
    assert len(shared) > 15
    orders = [[entry for entry in layout(name) if entry in shared] for name in ("build", "plan", "sweep")]
    assert orders[0] == orders[1] == orders[2]
    for name in ("build", "plan", "sweep", "emulate"):  # a placeholder names what to give, never the option again
        for group in commands[name]._action_groups:
            for action in group._group_actions:
                if action.option_strings and action.nargs is None and action.type is not None:
                    assert action.metavar is not None, (name, action.option_strings)


@pytest.mark.slow
def test_leading_reshape_model_builds_and_emulates_with_original_input(tmp_path):
    model = networks.small_cnn()
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([1, 1, 28, 28], dtype=np.int64), "shape"))
    model.graph.node.insert(0, helper.make_node("Reshape", ["flat_in", "shape"], ["input"], name="reshape_in"))
    del model.graph.input[:]
    model.graph.input.append(helper.make_tensor_value_info("flat_in", TensorProto.FLOAT, ["N", 784]))
    path = tmp_path / "reshape.onnx"
    onnx.save(model, str(path))
    out = tmp_path / "out"
    assert main(["build", str(path), "--board", "pynq-z2", "-o", str(out), "--policy", "support"]) == 0
    x = np.random.default_rng(5).normal(size=(2, 784)).astype(np.float32)  # two samples stacked
    np.save(tmp_path / "x.npy", x)
    assert main(["emulate", str(out), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    want = np.concatenate([reference(path, x[i : i + 1]) for i in range(2)])
    assert y.shape == (2, 10) and 0 < np.max(np.abs(y - want)) < 0.05 * max(1.0, np.max(np.abs(want)))


@pytest.mark.slow
def test_a_changed_weight_in_a_cpu_subfunction_fails_emulation_naming_it(tmp_path, capsys):
    """Each subfunction is checked against its nodes cut afresh from the build's normalised model,
    never against its own file: one weight changed in a CPU subfunction's ONNX (the jet tagger's last
    layer pinned to the A9) and emulate fails, naming that subfunction with a non-zero error."""
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    out = tmp_path / "jet"
    assert main(["build", str(model), "--board", "pynq-z2", "--policy", "support", "--device", "/fc4/Gemm=arm_cpu",
                 "--device", "/softmax/Softmax=arm_cpu", "-o", str(out)]) == 0
    plan = json.loads((out / "plan.json").read_text())
    (cpu,) = [s for s in plan["subfunctions"] if s["kind"] == "cpu"]
    capsys.readouterr()
    assert main(["emulate", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"]
    path = out / cpu["onnx"]
    changed = onnx.load(str(path))
    weights = next(t for t in changed.graph.initializer if len(t.dims) == 2)
    values = numpy_helper.to_array(weights).copy()
    values.flat[0] += 0.5
    weights.CopyFrom(numpy_helper.from_array(values, weights.name))
    onnx.save(changed, str(path))
    assert main(["emulate", str(out), "--json"]) == 2  # changed since the build: its manifest says so
    assert f"{cpu['onnx']}: changed since the build" in capsys.readouterr().err
    write_manifests(Plan.load(out / "plan.json"), out)  # as if the build had written it so
    assert main(["emulate", str(out), "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    (sub,) = [s for s in report["subfunctions"] if s["name"] == cpu["name"]]
    assert not sub["passed"] and sub["max_abs_error"] > 0
    assert all(s["passed"] for s in report["subfunctions"] if s["name"] != cpu["name"])


@pytest.mark.slow
def test_workstation_board_runs_gpu_part_on_onnxruntime_and_says_which_provider(tmp_path, capsys, monkeypatch):
    """The engine column is the provider the GPU subfunction's session used: here an onnxruntime that
    claims CUDA but cannot start it runs the GPU part on the CPU provider, and emulate says so."""
    import onnxruntime

    model = tmp_path / "split.onnx"
    onnx.save(networks.split_by_lrn(), str(model))
    out = tmp_path / "ws"
    assert main(["build", str(model), "--board", "workstation", "-o", str(out), "--policy", "support"]) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["subfunctions"]] == ["fpga", "gpu", "fpga"]
    assert plan["subfunctions"][0]["hls"] and plan["subfunctions"][1]["hls"] is None
    has_cuda = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    for claims_cuda in (False, True):
        if claims_cuda and not has_cuda:  # asked for, then refused: the session falls back to the CPU
            listed = onnxruntime.get_available_providers()
            monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", *listed])
        capsys.readouterr()
        assert main(["emulate", str(out), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        gpu = report["subfunctions"][1]
        if has_cuda:  # CUDA, checked against the CPU provider's run of the same nodes
            assert gpu["engine"] == "onnxruntime CUDA" and len(report["notes"]) == 1
        else:
            assert gpu["engine"] == "onnxruntime CPU"
            assert report["notes"][1:] == ["no CUDA provider in this onnxruntime: GPU subfunctions ran on the CPU "
                                           "provider"]
        assert gpu["outputs"] and gpu["passed"] and report["passed"]
    # run.py runs the GPU part on onnxruntime's CPU provider: its profile leaves those nodes untimed
    np.save(tmp_path / "x.npy", np.random.default_rng(1).normal(size=(2, 3, 14, 14)).astype(np.float32))
    ran = subprocess.run([sys.executable, "deploy/run.py", "--emulate", "--input", str(tmp_path / "x.npy"),
                          "--profile", str(tmp_path / "p.json")], capture_output=True, text=True, cwd=out)
    assert ran.returncode == 0, ran.stderr
    gpu = json.loads((tmp_path / "p.json").read_text())["subfunctions"][1]
    assert gpu["device"] == "gpu" and gpu["nodes"] == {}
    assert gpu["measured_on"] == "not timed: run.py --emulate runs it on onnxruntime's CPU provider, not on gpu"


@pytest.mark.slow
def test_weights_larger_than_the_bram_stay_in_ddr_and_csimulation_reads_them_there(built, tmp_path):
    """wide_mlp's first layer (640 x 512 weights) overflows a PYNQ-Z2's BRAM: it stays on the FPGA with
    its weights in DDR, packed where the memory plan puts them, and C-simulation computes with what
    is in the DDR image (a corrupted image: out of tolerance)."""
    from hetdeploy.fpga.packing import pack_fixed

    model, out = built("wide_mlp")
    plan = json.loads((out / "plan.json").read_text())
    (sub,) = plan["subfunctions"]
    assert sub["kind"] == "fpga" and sub["verification"]["passed"]
    first, second = sub["execution_units"]
    assert first["weights_in_ddr"] and not second["weights_in_ddr"] and first["strategy"] == "Resource"
    assert first["verification"]["passed"]
    arrays = first["hls"]["ddr_weights"]
    (weights,) = [b for b in sub["memory"]["buffers"] if b["kind"] == "weights"]
    assert (weights["tensor"], weights["memory"], weights["offset"]) == (f"{first['name']}.weights", "ddr", 0)
    assert weights["size"] == sum(a["size"] for a in arrays) and arrays[0]["values"] == 640 * 512
    assert sub["memory"]["ddr_bytes"] >= weights["size"] and sub["memory"]["ddr_weights_s"] > 0
    assert [(p["port"], p["offset"]) for p in sub["hls"]["weight_ports"]] == \
        [(f"{first['name']}_w{k}", weights["offset"] + a["offset"]) for k, a in enumerate(arrays)]
    # hls4ml's project keeps none of them: the DDR image is all the unit computes with
    project = out / first["hls"]["project"]
    assert not list((project / "firmware" / "weights").iterdir())
    assert "load_weights_from_txt" not in (project / "firmware" / f"{first['name']}.cpp").read_text()
    # the image holds fc1's weights as hls4ml's Resource-strategy Dense reads them (n_out x n_in: fc1's own
    # layout) at the fraction bits their values leave (hls4ml writes them in decimal, so a value on a tie
    # may round to the other neighbour: one code apart at most)
    image = (out / sub["hls"]["ddr_image"]).read_bytes()
    fc1 = next(numpy_helper.to_array(t) for t in onnx.load(str(model)).graph.initializer if t.name == "fc1.weight")
    packed = image[arrays[0]["offset"]: arrays[0]["offset"] + arrays[0]["size"]]
    width, integer = (int(x) for x in arrays[0]["precision"].split("<")[1].split(",")[:2])
    assert width == 16 and integer < 6  # sized from fc1's values, not hls4ml's default fixed<16,6>
    codes = np.frombuffer(packed, "<i2").astype(np.int64)
    assert np.max(np.abs(codes - np.frombuffer(pack_fixed(fc1.reshape(-1), arrays[0]["precision"]), "<i2"))) <= 1
    lsb = 2.0 ** (integer - width)
    np.testing.assert_allclose(codes * lsb, fc1.reshape(-1), atol=lsb + 1e-9)

    corrupted = tmp_path / "corrupted"
    shutil.copytree(out, corrupted)
    flipped = bytearray(image)
    flipped[1: arrays[0]["size"]: 2] = bytes(b ^ 0x40 for b in flipped[1: arrays[0]["size"]: 2])
    (corrupted / sub["hls"]["ddr_image"]).write_bytes(bytes(flipped))
    one_line_error(hetdeploy("emulate", corrupted), f"{sub['hls']['ddr_image']}: changed since the build")
    write_manifests(Plan.load(corrupted / "plan.json"), corrupted)  # as if built so: C-simulation must read it
    np.save(tmp_path / "x.npy", np.random.default_rng(3).normal(size=(2, 640)).astype(np.float32))
    good = subprocess.run([sys.executable, "-m", "hetdeploy", "emulate", str(out), "--input", str(tmp_path / "x.npy")],
                          capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    bad = subprocess.run([sys.executable, "-m", "hetdeploy", "emulate", str(corrupted), "--input",
                          str(tmp_path / "x.npy")], capture_output=True, text=True)
    assert bad.returncode == 3 and "OUT OF TOLERANCE" in bad.stdout


@pytest.mark.slow
def test_weights_in_ddr_on_request_for_a_streamed_convolution(tmp_path):
    """--weights-in-ddr conv2: the io_stream convolution takes its weights from the DDR image (--no-engine: the
    folding would give the convolutions the engine, whose weights are in DDR anyway)."""
    model, out = tmp_path / "cnn.onnx", tmp_path / "out"
    onnx.save(networks.small_cnn(), str(model))
    result = hetdeploy("build", model, "--board", "pynq-z2", "-o", out, "--policy", "support",
                       "--weights-in-ddr", "conv2", "--no-engine")
    assert result.returncode == 0, result.stderr
    (sub,) = json.loads((out / "plan.json").read_text())["subfunctions"]
    (unit,) = [u for u in sub["execution_units"] if u["weights_in_ddr"]]
    assert "conv2" in unit["nodes"] and unit["hls"]["io_type"] == "io_stream" and unit["verification"]["passed"]
    (weights,) = [b for b in sub["memory"]["buffers"] if b["kind"] == "weights"]
    kernel = unit["hls"]["ddr_weights"][0]
    assert kernel["values"] == 16 * 8 * 5 * 5 and weights["size"] == sum(a["size"] for a in unit["hls"]["ddr_weights"])
    image = out / sub["hls"]["ddr_image"]
    np.save(tmp_path / "x.npy", np.random.default_rng(5).normal(size=(2, 1, 28, 28)).astype(np.float32))
    assert hetdeploy("emulate", out, "--input", tmp_path / "x.npy").returncode == 0
    data = bytearray(image.read_bytes())
    start = weights["offset"] + kernel["offset"]
    data[start + 1: start + kernel["size"]: 2] = bytes(b ^ 0x10 for b in data[start + 1: start + kernel["size"]: 2])
    image.write_bytes(bytes(data))
    assert hetdeploy("emulate", out, "--input", tmp_path / "x.npy").returncode == 2  # the manifest sees it
    write_manifests(Plan.load(out / "plan.json"), out)  # as if built so: C-simulation must read it
    assert hetdeploy("emulate", out, "--input", tmp_path / "x.npy").returncode == 3


@pytest.mark.slow
def test_emulate_with_labels_prints_the_accuracy_beside_the_models(built, tmp_path):
    model, out = built("jet_tagger_mlp")
    x = np.random.default_rng(5).normal(size=(20, 16)).astype(np.float32)
    reference = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    labels = np.argmax(reference.run(None, {"input": x})[0], axis=1)  # the model's own classes: 100 %
    labels[:4] = (labels[:4] + 1) % 5  # four wrong labels: the model's accuracy is 80 %
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", labels)
    result = hetdeploy("emulate", out, "--input", tmp_path / "x.npy", "--labels", tmp_path / "y.npy", "--json")
    assert result.returncode == 0, result.stderr
    accuracy = json.loads(result.stdout)["accuracy"]
    assert accuracy["samples"] == 20 and accuracy["model"] == pytest.approx(0.8)
    assert 0.7 <= accuracy["emulated"] <= 0.9 and accuracy["output"] == "output"
    np.save(tmp_path / "short.npy", labels[:5])
    one_line_error(hetdeploy("emulate", out, "--input", tmp_path / "x.npy", "--labels", tmp_path / "short.npy"),
                   "5 labels for 20 samples")
    one_line_error(hetdeploy("emulate", out, "--labels", tmp_path / "y.npy"), "--labels needs --input")


def test_plan_says_why_nothing_goes_to_the_fpga_and_shows_the_chips_total(tmp_path, capsys):
    from hetdeploy.commands.cli import main

    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    assert main(["plan", str(model), "--board", "pynq-z2"]) == 0
    out = capsys.readouterr().out
    assert "nothing of this model goes to the FPGA" in out and "an FPGA call costs 900 us on pynq-z2" in out
    alexnet = tmp_path / "alexnet.onnx"
    onnx.save(networks.alexnet_style(), str(alexnet))
    assert main(["plan", str(alexnet), "--board", "pynq-z2"]) == 0
    out = capsys.readouterr().out
    assert "fpga: the chip's total over 2 subfunction(s): DSP 180 of 198 (91%)" in out
    assert "nothing of this model goes to the FPGA" not in out
    assert main(["plan", str(alexnet), "--board", "pynq-z2", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    fpga = [s for s in plan["subfunctions"] if s["kind"] == "fpga"]
    assert plan["fpga_resources"] == {"fpga": {
        "subfunctions": [s["name"] for s in fpga],
        "used": {k: sum(s["resources"][k] for s in fpga) for k in ("dsp", "bram18", "lut", "ff")},
        "budget": {"dsp": 198, "bram18": 252, "lut": 47880, "ff": 95760},
        "resources": {"dsp": 220, "bram18": 280, "lut": 53200, "ff": 106400},
        "dataflow": {},  # sequential tops: no FIFOs
        # (its engine within ENGINE_SHARES' three quarters: the faster plan; the PYNQ-Z2 has no URAM)
        "engine_dsp_share": None, "engine_uram_share": None}}


@pytest.mark.slow
def test_a_damaged_build_is_refused_before_anything_runs(built, tmp_path):
    """What issue 68's fuzzing found passing: a unit's weights file emptied or set to garbage, a
    weights file missing, a top function renamed in plan.json, a NaN tolerance, an FPGA subfunction
    without its HLS section; each is one line naming the file or the field and exit 2, from emulate
    and, for the package's own files, from run.py. --output onto a folder is refused before the run."""
    _, out = built("jet_tagger_mlp")
    weights = sorted((out / "hls" / "sf0_fpga" / "units").rglob("w*.txt"))[0]
    relative = weights.relative_to(out)

    def damaged(name, change):
        copy = tmp_path / name
        shutil.copytree(out, copy)
        change(copy)
        return copy

    for name, change, fragments in (
            ("emptied", lambda d: (d / relative).write_text(""), (f"{relative}: changed since the build",)),
            ("garbage", lambda d: (d / relative).write_text("zz,1e999,nan"), (f"{relative}: changed since the build",)),
            ("missing", lambda d: (d / relative).unlink(), (f"{relative}: missing; the build is damaged",)),
            ("renamed", lambda d: (d / "plan.json").write_text((d / "plan.json").read_text().replace(
                '"top": "sf0_fpga"', '"top": "sf0_fpgb"')), ("plan.json: changed since the build",)),
            ("nan", lambda d: (d / "plan.json").write_text((d / "plan.json").read_text().replace(
                '"relative_tolerance": 0.05', '"relative_tolerance": NaN')),
             ("relative_tolerance: nan, not a finite",)),
            ("no_hls", lambda d: _set_hls_null(d / "plan.json"), ("FPGA subfunction sf0_fpga has no HLS section",))):
        one_line_error(hetdeploy("emulate", damaged(name, change)), *fragments)
    garbled = damaged("garbled_package", lambda d: (d / "deploy" / "run.py").write_text(
        (d / "deploy" / "run.py").read_text() + "\n"))
    np.save(tmp_path / "x.npy", np.zeros((1, 16), np.float32))
    for folder, fragment in ((tmp_path / "garbage", "hls/sf0_fpga/units/"), (garbled, "deploy/run.py: changed")):
        result = subprocess.run([sys.executable, str(folder / "deploy" / "run.py"), "--emulate", "--input",
                                 str(tmp_path / "x.npy")], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and fragment in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    (tmp_path / "folder").mkdir()
    one_line_error(hetdeploy("emulate", out, "--output", tmp_path / "folder"), "is a folder")
    assert not (tmp_path / "folder.npy").exists()


def _set_hls_null(path):
    plan = json.loads(path.read_text())
    plan["subfunctions"][0]["hls"] = None
    path.write_text(json.dumps(plan))
