"""Verification cannot be fooled: every output against its own scale, NaN and Inf fail, nothing
compared is no pass."""

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from hetdeploy.commands.cli import main
from hetdeploy.core.board import load_board
from hetdeploy.running.verify import SubfunctionCheck, TensorCheck


def check(got, want, relative=0.05):
    c = SubfunctionCheck("sf", "fpga", relative)
    c.add(got, want)
    return c


def test_nan_or_inf_in_any_output_fails_and_names_it():
    want = {"a": np.ones(4), "b": np.ones(4)}
    c = check({"a": np.ones(4), "b": np.array([1, 1, np.nan, 1])}, want)
    assert not c.passed and "output 'b' has 1 NaN or Inf values" in c.problem()
    c = check({"a": np.array([np.inf, 1, 1, 1]), "b": np.ones(4)}, want)
    assert not c.passed and "output 'a'" in c.problem()
    c = check({"a": np.ones(4), "b": np.ones(4)}, {"a": np.ones(4), "b": np.array([np.nan, 1, 1, 1])})
    assert not c.passed and "of the reference (onnxruntime) has 1 NaN" in c.problem()


def test_each_output_is_judged_against_its_own_scale():
    """Outputs peaking at 78 and 0.058: the small one 53 % wrong fails, though its error is tiny
    beside the large one's scale."""
    rng = np.random.default_rng(0)
    big, small = rng.uniform(-78, 78, 10), rng.uniform(-0.058, 0.058, 10)
    big[0], small[0] = 78, 0.058
    c = check({"big": big + 0.5, "small": small * 0.47}, {"big": big, "small": small})
    assert c.tensors["big"].passed and not c.tensors["small"].passed and not c.passed
    assert "output 'small' differs by" in c.problem() and c.worst.tensor == "small"
    assert c.max_abs_error == c.tensors["small"].max_abs_error


def test_an_all_zero_result_for_a_tiny_reference_fails_and_zero_for_zero_passes():
    assert not check({"y": np.zeros(5)}, {"y": np.full(5, 1e-6)}).passed
    assert check({"y": np.zeros(5)}, {"y": np.zeros(5)}).passed
    assert not check({"y": np.full(5, 1e-9)}, {"y": np.zeros(5)}).passed


def test_a_check_that_saw_nothing_does_not_pass():
    assert not SubfunctionCheck("sf", "fpga", 0.05).passed
    assert not TensorCheck("y", 0.05).passed


@pytest.mark.slow
def test_tiny_inputs_that_the_fpga_rounds_to_zero_fail_emulation(tmp_path):
    """A bias-free dense layer sized for N(0, 1) inputs, fed values of about 1e-6: the fixed-point
    input rounds them to zero, and the all-zero output no longer passes."""
    w = numpy_helper.from_array(np.random.default_rng(1).normal(0, 0.5, (4, 8)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    out = tmp_path / "build"
    assert main(["build", str(tmp_path / "m.onnx"), "--board", "pynq-z2", "--policy", "support", "-o", str(out)]) == 0
    np.save(tmp_path / "normal.npy", np.random.default_rng(2).normal(size=(3, 8)).astype(np.float32))
    assert main(["emulate", str(out), "--input", str(tmp_path / "normal.npy")]) == 0
    np.save(tmp_path / "tiny.npy", np.random.default_rng(2).normal(0, 1e-6, size=(3, 8)).astype(np.float32))
    assert main(["emulate", str(out), "--input", str(tmp_path / "tiny.npy")]) == 3


def test_saturations_are_counted_against_the_output_type():
    from hetdeploy.fpga.packing import precision_grid

    assert precision_grid("ap_fixed<8,3,AP_RND,AP_SAT,0>") == (2 ** -5, -4.0, 4.0 - 2 ** -5)
    assert precision_grid("ap_ufixed<4,-1>") == (2 ** -5, 0.0, 0.5 - 2 ** -5)
    # symmetric saturation (a narrow signed quantizer) never reaches the most negative code
    assert precision_grid("ap_fixed<8,3,AP_RND,AP_SAT_SYM,0>") == (2 ** -5, -(4.0 - 2 ** -5), 4.0 - 2 ** -5)
    assert precision_grid("ap_ufixed<8,3,AP_RND,AP_SAT_SYM,0>") == (2 ** -5, 0.0, 8.0 - 2 ** -5)
    c = SubfunctionCheck("u", "fpga", 0.05, grids={"y": precision_grid("ap_fixed<8,3>")})
    c.add({"y": np.array([3.96875, 0.5, -4.0])}, {"y": np.array([7.0, 0.5, -9.0])})
    assert c.tensors["y"].saturated == 2 and c.record(1).outputs[0].saturated == 2
    symmetric = SubfunctionCheck("u", "fpga", 0.05, grids={"y": precision_grid("ap_fixed<8,3,AP_RND,AP_SAT_SYM,0>")})
    symmetric.add({"y": np.array([-(4.0 - 2 ** -5), 0.5])}, {"y": np.array([-9.0, 0.5])})
    assert symmetric.tensors["y"].saturated == 1  # at its negative limit, one step above -4


def test_a_quantized_output_one_code_off_passes_with_its_types_rounding_and_no_more():
    """A quantizer's output of step 0.046125 written in ap_fixed<16,2> (a grid of 2^-14): its code one off and
    the code times the step rounded to the grid is the step and up to half a grid step off, and passes;
    a whole grid step more, or a second code, fails. Without a fixed-point type (a CPU's output) the step alone."""
    from hetdeploy.fpga.packing import precision_grid

    step, grid = 0.046125, 2.0 ** -14
    want = np.array([7 * step, 0.0, -3 * step])

    def verdict(got, grids):
        c = SubfunctionCheck("u", "fpga", 1e-6, grids=grids, steps={"y": step})
        c.add({"y": got}, {"y": want})
        return c.tensors["y"]

    fixed = {"y": precision_grid("ap_fixed<16,2,AP_RND,AP_SAT,0>")}
    written = np.round(np.array([8 * step, 0.0, -3 * step]) / grid) * grid  # code 8 for 7, on the type's grid
    assert abs(written[0] - want[0]) > step  # the rounding is past the step
    assert verdict(written, fixed).passed and verdict(written, fixed).record().agreement == "within one step"
    assert not verdict(written + np.array([grid, 0, 0]), fixed).passed
    assert not verdict(np.array([9 * step, 0.0, -3 * step]), fixed).passed
    assert not verdict(written, {}).passed and verdict(np.array([8 * step, 0.0, -3 * step]), {}).passed
    assert "one step of its quantizer and half a step of its type" in verdict(written + grid, fixed).problem()


@pytest.mark.slow
def test_width_option_sets_every_fpga_type_and_is_checked(tmp_path, capsys):
    import json
    from pathlib import Path

    jet = str(Path(__file__).resolve().parent.parent / "examples" / "jet_tagger_mlp.onnx")
    with pytest.raises(SystemExit) as stop:
        main(["plan", jet, "--board", "pynq-z2", "--width", "3"])
    assert stop.value.code == 2
    assert "--width: '3': expected a whole number of bits from 4 to 32" in capsys.readouterr().err
    out = tmp_path / "w10"
    # 10 bits are 3.7 % of the peak off on samples the build did not size on: within 10 %, none is widened
    assert main(["build", jet, "--board", "pynq-z2", "--policy", "support", "--width", "10", "--tolerance", "0.1",
                 "-o", str(out)]) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["width"] == 10
    units = plan["subfunctions"][0]["execution_units"]
    assert all(u["precision"].startswith("ap_fixed<10,") for u in units)
    defines = (out / units[0]["hls"]["project"] / "firmware" / "defines.h").read_text()
    assert "weight_t;" in defines and "ap_fixed<10," in defines.split("weight_t;")[0].splitlines()[-1]


@pytest.mark.slow
def test_units_out_of_tolerance_are_widened_and_the_build_says_so(tmp_path, capsys):
    """The jet tagger at 6 bits is out of tolerance: each failing unit, and the unit writing its
    input, gets 4 more bits at a time until it passes; the build prints which and why, and plan.json
    records each step."""
    import json
    from pathlib import Path

    jet = str(Path(__file__).resolve().parent.parent / "examples" / "jet_tagger_mlp.onnx")
    out = tmp_path / "w6"
    assert main(["build", jet, "--board", "pynq-z2", "--policy", "support", "--width", "6", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["widened"]
    failed = [w for w in plan["widened"] if "differs by" in w["reason"]]
    assert failed
    bits = {}
    for w in plan["widened"]:
        assert w["from_bits"] == bits.get(w["unit"], 6) and w["to_bits"] == w["from_bits"] + 4
        bits[w["unit"]] = w["to_bits"]
        assert f"widening {w['unit']} from {w['from_bits']} to {w['to_bits']} bits: {w['reason']}" in err
        assert w in failed or any(w["reason"] == f"it writes the input of {f['unit']}" for f in failed)
    units = {u["name"]: u for u in plan["subfunctions"][0]["execution_units"]}
    assert all(units[name]["precision"].startswith(f"ap_fixed<{width},") for name, width in bits.items())
    assert all(u["verification"]["passed"] for u in units.values())
    # the units folded anew at their widths are timed anew: each its rate, the subfunction their sum and its float
    # ports' cycles
    clock_hz = 1e6 * next(d.clock_mhz for d in load_board("pynq-z2").devices if d.kind == "fpga")
    for unit in units.values():
        assert unit["rate_per_s"] == pytest.approx(clock_hz / max(1, unit["estimate"]["latency_cycles"]))
    ports = plan["subfunctions"][0]["top"]["port_cycles"]
    assert ports == 16 // 2 + 5  # its 16 inputs two a cycle, its 5 outputs one
    compute_s = (sum(u["estimate"]["latency_cycles"] for u in units.values()) + ports) / clock_hz
    assert plan["subfunctions"][0]["estimate"]["compute_s"] == pytest.approx(compute_s)


@pytest.mark.slow
def test_precision_pins_a_units_output_type_and_bad_ones_are_one_line(tmp_path, capsys):
    import json
    from pathlib import Path

    jet = str(Path(__file__).resolve().parent.parent / "examples" / "jet_tagger_mlp.onnx")
    out = tmp_path / "pinned"
    assert main(["build", jet, "--board", "pynq-z2", "--policy", "support", "--precision", "/fc2/Gemm=ap_fixed<12,4>",
                 "-o", str(out)]) == 0
    units = json.loads((out / "plan.json").read_text())["subfunctions"][0]["execution_units"]
    (fc2,) = [u for u in units if "/fc2/Gemm" in u["nodes"]]
    assert fc2["precision"].startswith("ap_fixed<12,4,")
    assert all(u["precision"].startswith("ap_fixed<16,") for u in units if u is not fc2)
    assert main(["plan", jet, "--board", "pynq-z2", "--precision", "nope=ap_fixed<8,4>"]) == 2
    assert "--precision: the model has no node 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plan", jet, "--board", "pynq-z2", "--precision", "/fc2/Gemm=ap_fixed<40,4>"])
    assert "W must be 2 to 32 bits" in capsys.readouterr().err


JET = Path(__file__).resolve().parent.parent / "examples" / "jet_tagger_mlp.onnx"


@pytest.mark.slow
def test_the_build_verifies_on_samples_it_did_not_size_on_and_says_so(tmp_path, capsys):
    """--calibration: a seeded quarter of the samples is held out, never sized on, and is what
    C-simulation checks; plan.json and the build's lines say both counts. Without --calibration the
    verification samples come from another seed stream, with one at the edges of the sized range;
    emulate without --input draws a sample of a third stream and says so."""
    from hetdeploy.intake.model import load_model
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.running.samples import build_samples
    from hetdeploy.running.samples import hold_out

    x = np.random.default_rng(1).normal(size=(8, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    specs = load_model(JET).inputs
    split = build_samples(BuildOptions(JET, "pynq-z2", tmp_path, calibration=tmp_path / "x.npy"), specs)
    assert len(split.sizing) == 6 and len(split.verification) == 2 == len(split.held_out)
    sized = {s["input"].tobytes() for s in split.sizing}
    assert not sized & {s["input"].tobytes() for s in split.verification}
    assert split.held_out == hold_out(list(range(8)), 0)[1]
    assert split.calibration.input_ranges["input"] == [float(np.min(x[[i for i in range(8) if i not in
                                                                          split.held_out]])),
                                                       float(np.max(np.delete(x, split.held_out, axis=0)))]
    synthetic = build_samples(BuildOptions(JET, "pynq-z2", tmp_path), specs)
    sized = {s["input"].tobytes() for s in synthetic.sizing}
    assert len(synthetic.verification) == 5 and not sized & {s["input"].tobytes() for s in synthetic.verification}
    edge = synthetic.verification[-1]["input"]  # stretched onto the sized range, both ends reached
    assert [float(edge.min()), float(edge.max())] == pytest.approx(synthetic.calibration.input_ranges["input"])
    with pytest.raises(Exception, match="holds one sample"):
        np.save(tmp_path / "one.npy", x[:1])
        build_samples(BuildOptions(JET, "pynq-z2", tmp_path, calibration=tmp_path / "one.npy"), specs)

    out = tmp_path / "held"
    assert main(["build", str(JET), "--board", "pynq-z2", "--policy", "support", "--calibration",
                 str(tmp_path / "x.npy"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    calibration = json.loads((out / "plan.json").read_text())["calibration"]
    assert calibration["samples"] == 6 and calibration["verified_on"] == 2
    assert "precision sized on 6 samples of x.npy" in err and "verified on 2 of the 8 samples of x.npy, held out" in err
    assert main(["emulate", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["notes"] == ["no --input: 1 sample drawn uniformly within the ranges of x.npy (seed 0), which the "
                               "build neither sized nor verified on; give --input with real inputs"]


@pytest.mark.slow
def test_held_out_samples_beyond_the_sized_range_stop_the_build_naming_the_unit(tmp_path, capsys):
    """Sized on samples within +-1, verified on samples 20 times larger: the first layer's output
    saturates, which more bits cannot mend: exit 3 naming the unit, the tensor and the value. The
    same build checked on its sizing samples (the old behaviour) passes."""
    small = np.random.default_rng(2).uniform(-1, 1, size=(6, 16)).astype(np.float32)
    np.save(tmp_path / "small.npy", small)
    np.save(tmp_path / "large.npy", 20 * small[:2])
    assert main(["build", str(JET), "--board", "pynq-z2", "--policy", "support", "--calibration",
                 str(tmp_path / "small.npy"), "--verify-input", str(tmp_path / "large.npy"),
                 "-o", str(tmp_path / "large")]) == 3
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "C-simulation of unit sf0_fpga_u0" in error and "on samples the build did not size on, " \
        "'/act1/Relu_output_0' reaches" in error and "more bits would not widen that range" in error
    assert not (tmp_path / "large").exists() and (tmp_path / "large.failed").is_dir()
    assert main(["build", str(JET), "--board", "pynq-z2", "--policy", "support", "--calibration",
                 str(tmp_path / "small.npy"), "--verify-input", str(tmp_path / "small.npy"),
                 "-o", str(tmp_path / "small")]) == 0


@pytest.mark.slow
def test_an_emulation_out_of_tolerance_says_why_when_it_can_be_known(built, tmp_path, capsys):
    """Inputs 100 times the range the build sized its types on: emulate fails and says so, names the
    FPGA outputs that saturate on them (with the value reached) and the fix; in range, no such note."""
    _, out = built("split_by_lrn")
    x = np.random.default_rng(4).normal(size=(2, 3, 14, 14)).astype(np.float32)
    np.save(tmp_path / "large.npy", 100 * x)
    capsys.readouterr()
    assert main(["emulate", str(out), "--input", str(tmp_path / "large.npy"), "--json"]) == 3
    notes = json.loads(capsys.readouterr().out)["notes"]
    sized = json.loads((out / "plan.json").read_text())["calibration"]["input_ranges"]["input"]
    assert any(n.startswith(f"input 'input' spans {float(np.min(100 * x)):.4g} to {float(np.max(100 * x)):.4g} here, "
                            f"beyond the {sized[0]:.4g} to {sized[1]:.4g} of the 4 synthetic N(0, 1) samples")
               and "--calibration" in n for n in notes)
    assert any(n.startswith("sf0_fpga: ") and "go beyond what its type holds" in n and "the reference reaches" in n
               for n in notes)
    np.save(tmp_path / "small.npy", 0.5 * x)
    assert main(["emulate", str(out), "--input", str(tmp_path / "small.npy"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []


def test_a_unit_whose_error_widening_left_where_it_was_is_not_widened_again(tmp_path):
    """Bits do not mend a layer computed wrongly: once a widening leaves a unit's error where it was,
    widen gives it (and its writers) no more bits and says why, so the failure stands; a unit whose
    error fell is widened again."""
    from types import SimpleNamespace

    from hetdeploy.core.errors import VerificationError
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.running.verify import widen
    from hetdeploy.steps.build import plan_stages

    jet = Path(__file__).resolve().parent.parent / "examples" / "jet_tagger_mlp.onnx"
    _, _, plan = plan_stages(BuildOptions(model=jet, board="pynq-z2", out_dir=tmp_path, policy="support"),
                             lambda k, line: None)
    units = [u.name for u in plan.subfunctions[0].execution_units]
    widths, said = dict.fromkeys(units, 16), []

    def failing(errors):
        failure = VerificationError("out of tolerance")
        failure.units = [SimpleNamespace(name=name, passed=False, max_abs_error=error,
                                         problem=lambda e=error: f"output differs by {e}")
                         for name, error in errors.items()]
        return failure

    assert widen(plan, failing({units[2]: 0.5, units[3]: 2.0}), widths, {}, said.append) == units[1:4]
    assert widths == {units[0]: 16, units[1]: 20, units[2]: 20, units[3]: 20}
    assert [(w.unit, w.error) for w in plan.widened] == [(units[1], None), (units[2], 0.5), (units[3], 2.0)]
    assert widen(plan, failing({units[2]: 0.1, units[3]: 2.0}), widths, {}, said.append) == units[1:3]
    assert widths == {units[0]: 16, units[1]: 24, units[2]: 24, units[3]: 20}
    assert f"      not widening {units[3]} again: from 16 to 20 bits its error stayed 2 (was 2), so it is not a " \
           f"matter of precision" in said
    assert widen(plan, failing({units[3]: 2.0}), widths, {}, said.append) == []


def test_an_error_far_above_what_the_build_verified_fails_within_tolerance():
    """A float output the build verified at 1e-4 (tolerance 0.05) that comes out 0.03 off is within
    its tolerance but not what was verified: it fails and says both; up to 20 times passes."""
    from hetdeploy.core.plan import TensorVerification, Verification
    from hetdeploy.running.verify import bound_drift

    verified = Verification(4, 1e-4, 0.05, True, [TensorVerification("y", 1e-4, 1.0, 0.05, 0, True)])
    for error, passes in ((1.9e-3, True), (0.03, False)):
        c = check({"y": np.array([1.0, -1.0 + error])}, {"y": np.array([1.0, -1.0])})
        assert c.passed
        bound_drift(c, verified)
        assert c.passed is passes
    assert "300 times the 0.0001 the build measured when it verified" in c.problem()


def test_a_subfunction_whose_codes_flip_on_further_samples_is_never_bit_exact():
    from hetdeploy.core.plan import TensorVerification, Verification

    exact = Verification(4, 0.0, 1.0, True, [TensorVerification("y", 0.0, 3.0, 1.0, 0, True, step=1.0)], 256, 0)
    assert exact.agreement == "bit-exact"
    exact.flipped = 3
    assert exact.agreement == "codes flip on 3 of 256 samples"


def test_the_further_samples_are_as_many_as_their_c_simulation_allows():
    """256 for an MLP (120,000 operations a sample); none for the ESPCN that qonnx ships, whose
    FPGA convolutions take a quarter of a billion operations a sample (19 s in C-simulation here);
    what the user asks for (--flip-samples) either way."""
    import qonnx

    from hetdeploy.intake.model import load_model
    from hetdeploy.steps.generate import FLIP_OPERATIONS, flip_samples_to_compare

    mlp = load_model(Path(__file__).parent / "data" / "brevitas" / "tfc_1w2a.onnx").graph
    assert flip_samples_to_compare(mlp, [n.name for n in mlp.nodes], None) == 256
    assert flip_samples_to_compare(mlp, [n.name for n in mlp.nodes], 3) == 3
    espcn = load_model(Path(qonnx.__file__).parent / "data" / "onnx" / "bsd300x3-espcn" / "subpixel" /
                       "quant_model.onnx").graph
    first_and_last = [n.name for n in espcn.nodes if n.op == "Conv"][::3]
    assert flip_samples_to_compare(espcn, first_and_last, None) == 0
    assert flip_samples_to_compare(espcn, first_and_last[1:], None) == FLIP_OPERATIONS // 113_246_208 == 2
    assert flip_samples_to_compare(espcn, first_and_last, 5) == 5


def test_an_engine_unit_that_adds_a_residual_map_is_as_wide_as_the_maps_writer():
    """The engine reads a residual map an output word's lanes at a time, so a unit that adds one and the unit that
    writes the map get the wider of their bits, along a chain of blocks (each block's output the next one's map),
    and a map that is its subfunction's input is as wide as each unit reading it (the first types it)."""
    from types import SimpleNamespace

    from hetdeploy.core.plan import EngineLayer, ExecutionUnit
    from hetdeploy.steps.build import residual_widths

    def unit(name, inputs, output, adds=False):
        engine = EngineLayer(8, [4, 4], 8, [4, 4], [1, 1], [1, 1], [0, 0], [1, 1], True, 8, residual=adds)
        return ExecutionUnit(name, [f"{name}_node"], "conv", 1, "Engine", "", {}, inputs=inputs, outputs=[output],
                             engine=engine)

    # stem -> a -> block1 (adds stem's) -> b -> block2 (adds block1's); c reads input w, d adds it
    units = [unit("stem", ["x"], "s"), unit("a", ["s"], "h"), unit("block1", ["h", "s"], "y1", adds=True),
             unit("b", ["y1"], "h2"), unit("block2", ["h2", "y1"], "y2", adds=True),
             unit("c", ["w"], "k"), unit("d", ["k", "w"], "z", adds=True)]
    plan = SimpleNamespace(subfunctions=[SimpleNamespace(kind="fpga", execution_units=units)])
    widths = {"block2_node": 20, "c_node": 18}
    said = residual_widths(plan, widths, 16)
    assert {n: widths.get(f"{n}_node", 16) for n in ("stem", "a", "block1", "b", "block2", "c", "d")} == \
        {"stem": 20, "a": 16, "block1": 20, "b": 16, "block2": 20, "c": 18, "d": 18}
    assert len(said) == 3 and all("as wide as its own outputs" in line for line in said)
    assert residual_widths(plan, widths, 16) == []  # settled
