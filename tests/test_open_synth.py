"""build --open-synth (issue 36): each FPGA unit's arithmetic as da4ml's Verilog, simulated by Icarus
Verilog against the unit's C-simulation bit for bit, synthesised by Yosys.

Needs the open-synth extra (da4ml, installed by the test extra) and Debian's yosys and iverilog, which
the README's test command installs where it can; where they are missing these tests say so and are
skipped."""

import json
import math
import re
import shutil

import numpy as np
import onnx
import pytest

import quantized_models
from hetdeploy.commands.cli import main
from hetdeploy.core.plan import Plan
from hetdeploy.core.precision import CppFixed
from hetdeploy.fpga import open_synth
from hetdeploy.steps.build import BuildOptions, build

da4ml = pytest.importorskip("da4ml", reason="the open-synth extra (da4ml) is not installed")
SIMULATOR = shutil.which("iverilog") and shutil.which("vvp")
needs_simulator = pytest.mark.skipif(not SIMULATOR, reason="no Icarus Verilog (apt-get install iverilog)")
needs_yosys = pytest.mark.skipif(not (SIMULATOR and shutil.which("yosys")),
                                 reason="no Yosys and Icarus Verilog (apt-get install yosys iverilog)")


def _input(width: int, cpp: str):
    from da4ml.trace import FixedVariableArray, HWConfig

    fixed = CppFixed.parse(cpp)
    k, i, f = int(fixed.signed), fixed.integer - int(fixed.signed), fixed.fraction
    return FixedVariableArray.from_kif(np.full(width, k), np.full(width, i), np.full(width, f), HWConfig(1, -1, -1))


def _on_grid(rng, cpp: str, shape) -> np.ndarray:
    """Random values of C++ type ``cpp``, every code reachable."""
    fixed = CppFixed.parse(cpp)
    least = -(2 ** (fixed.width - 1)) if fixed.signed else 0
    codes = rng.integers(least, least + 2 ** fixed.width, shape)
    return codes * 2.0 ** -fixed.fraction


@pytest.mark.parametrize("source,target", [
    ("ap_fixed<12,5>", "ap_ufixed<4,4,AP_RND_CONV,AP_SAT,0>"),  # QONNX's ROUND: ties to even
    ("ap_fixed<12,3>", "ap_fixed<6,2,AP_RND_CONV,AP_SAT,0>"),
    ("ap_fixed<10,5>", "ap_fixed<8,3,AP_RND_CONV,AP_WRAP>"),
    ("ap_fixed<14,6>", "ap_fixed<8,4,AP_RND,AP_SAT,0>"),  # hetdeploy's own rounding
    ("ap_fixed<14,6>", "ap_fixed<8,4,AP_RND,AP_SAT_SYM,0>"),
    ("ap_fixed<14,6>", "ap_fixed<8,3>"),  # truncation and wrap, the auto types' modes
])
def test_a_cast_in_the_rtl_rounds_and_overflows_as_ap_fixed(source, target):
    """Every code of the source type cast to the target, by da4ml's own bit-exact model of the traced
    logic, equals the quantizers library's ap_fixed (tested against the ap_types headers): ties are hit."""
    from da4ml.trace import comb_trace

    rng = np.random.default_rng(0)
    values = _on_grid(rng, source, (300, 32))
    inputs = _input(32, source)
    logic = comb_trace(inputs, open_synth._cast(inputs, target, {"name": "q", "class": "Activation"}))
    np.testing.assert_array_equal(logic.predict(values), CppFixed.parse(target).quantize(values))


def test_what_da4ml_cannot_express_is_named():
    inputs = _input(4, "ap_fixed<12,5>")
    with pytest.raises(open_synth.NotTraced, match=r"layer q \(Activation\) rounds to .*AP_RND_ZERO"):
        open_synth._cast(inputs, "ap_fixed<6,3,AP_RND_ZERO,AP_SAT>", {"name": "q", "class": "Activation"})
    arithmetic = open_synth.Arithmetic([
        {"class": "Input", "name": "x", "inputs": ["x"], "outputs": ["x"], "output_type": "ap_fixed<8,3>",
         "output_shape": [4], "weights": {}},
        {"class": "Activation", "name": "soft", "inputs": ["x"], "outputs": ["y"], "activation": "Softmax",
         "output_type": "ap_fixed<8,1>", "output_shape": [4], "weights": {}}], {})
    with pytest.raises(open_synth.NotTraced, match="layer soft: activation softmax"):
        open_synth.trace(arithmetic)


def _dense_relu(rng, n_in=12, n_out=6) -> open_synth.Arithmetic:
    """Dense -> ReLU as the hls4ml adapter records it: 4-bit weights, an exact accumulator, a result
    type that rounds half up and saturates."""
    weight = rng.integers(-8, 8, (n_in, n_out)) / 8.0
    bias = rng.integers(-16, 16, n_out) / 16.0
    return open_synth.Arithmetic([
        {"class": "Input", "name": "x", "inputs": ["x"], "outputs": ["x"], "output_type": "ap_fixed<8,3,AP_RND,AP_SAT>",
         "output_shape": [n_in], "weights": {}},
        {"class": "Dense", "name": "fc", "inputs": ["x"], "outputs": ["fc_out"], "accum_type": "ap_fixed<24,10>",
         "output_type": "ap_fixed<10,5,AP_RND,AP_SAT>", "output_shape": [n_out],
         "weights": {"weight": "ap_fixed<4,1>", "bias": "ap_fixed<6,1>"}},
        {"class": "Activation", "name": "relu", "inputs": ["fc_out"], "outputs": ["y"], "activation": "ReLU",
         "output_type": "ap_ufixed<6,4,AP_RND_CONV,AP_SAT>", "output_shape": [n_out], "weights": {}}],
        {"fc/weight": weight, "fc/bias": bias})


def _dense_relu_reference(arithmetic, x):
    weight, bias = arithmetic.weights["fc/weight"], arithmetic.weights["fc/bias"]
    dense = CppFixed.parse("ap_fixed<10,5,AP_RND,AP_SAT>").quantize(x @ weight + bias)
    return CppFixed.parse("ap_ufixed<6,4,AP_RND_CONV,AP_SAT>").quantize(np.maximum(dense, 0))


def test_a_traced_unit_computes_what_its_layers_do():
    rng = np.random.default_rng(1)
    arithmetic = _dense_relu(rng)
    traced = open_synth.trace(arithmetic)
    x = _on_grid(rng, "ap_fixed<8,3>", (500, 12))
    np.testing.assert_array_equal(traced.logic.predict(x), _dense_relu_reference(arithmetic, x))
    assert traced.kernel == "unit"


def test_a_convolution_is_traced_as_its_kernel_over_every_window():
    """A padded, strided 3x3 convolution with a per-channel BatchNormalization after it, its kernel applied
    to each output pixel's window, against the convolution computed directly."""
    rng = np.random.default_rng(2)
    channels, filters = 2, 3
    weight = rng.integers(-4, 4, (3, 3, channels, filters)) / 4.0
    scale, shift = rng.integers(1, 8, filters) / 4.0, rng.integers(-4, 4, filters) / 8.0
    arithmetic = open_synth.Arithmetic([
        {"class": "Input", "name": "x", "inputs": ["x"], "outputs": ["x"], "output_type": "ap_fixed<6,2>",
         "output_shape": [7, 6, channels], "weights": {}},
        {"class": "Conv2D", "name": "conv", "inputs": ["x"], "outputs": ["c"], "accum_type": "ap_fixed<20,8>",
         "output_type": "ap_fixed<12,6,AP_RND,AP_SAT>", "output_shape": [4, 3, filters], "filt_height": 3,
         "filt_width": 3, "stride_height": 2, "stride_width": 2, "pad_top": 1, "pad_left": 1, "n_chan": channels,
         "weights": {"weight": "ap_fixed<4,1>"}},
        {"class": "BatchNormalization", "name": "bn", "inputs": ["c"], "outputs": ["y"],
         "output_type": "ap_fixed<8,4,AP_RND,AP_SAT>", "output_shape": [4, 3, filters],
         "weights": {"scale": "ap_fixed<5,2>", "bias": "ap_fixed<4,1>"}}],
        {"conv/weight": weight, "bn/scale": scale, "bn/bias": shift})
    traced = open_synth.trace(arithmetic)
    assert traced.kernel == "pixel"
    x = _on_grid(rng, "ap_fixed<6,2>", (1, channels, 7, 6))  # ONNX layout, as the unit's input
    padded = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    conv = np.zeros((filters, 4, 3))
    for r in range(4):
        for c in range(3):
            window = padded[:, 2 * r:2 * r + 3, 2 * c:2 * c + 3]  # (channels, 3, 3)
            conv[:, r, c] = np.einsum("chw,hwcf->f", window, weight)
    conv = CppFixed.parse("ap_fixed<12,6,AP_RND,AP_SAT>").quantize(conv)
    want = CppFixed.parse("ap_fixed<8,4,AP_RND,AP_SAT>").quantize(conv * scale[:, None, None] + shift[:, None, None])
    inputs, expected = traced.vectors([x], want[None])
    np.testing.assert_array_equal(traced.logic.predict(inputs), expected)
    assert inputs.shape == (12, 3 * 3 * channels)


@needs_simulator
def test_the_verilog_simulates_to_the_expected_codes_and_a_changed_weight_is_seen(tmp_path):
    rng = np.random.default_rng(3)
    arithmetic = _dense_relu(rng)
    traced = open_synth.trace(arithmetic)
    written = open_synth.write_verilog(traced, tmp_path / "rtl", "unit0", clock_mhz=400.0)
    assert written.stages > 1  # 400 MHz: more than one stage
    x = _on_grid(rng, "ap_fixed<8,3>", (64, 12))
    open_synth.write_vectors(written, x, _dense_relu_reference(arithmetic, x))
    simulated = open_synth.simulate(written.folder)
    assert (simulated.values, simulated.mismatches) == (64 * 6, 0)
    _change_a_weight(written.folder)
    changed = open_synth.simulate(written.folder)
    assert changed.mismatches > 0 and "RTL" in changed.first_mismatch


def _change_a_weight(folder):
    """One shift-and-add of the constant multiplications shifted one bit further: a weight doubled."""
    adder = re.compile(r"shift_adder #\((\d+), (\d+), (\d+), (\d+), (\d+), (-?\d+), (\d)\)")
    verilog, match = next((v, m) for v in sorted(folder.glob("*_stage*.v")) if (m := adder.search(v.read_text())))
    text = verilog.read_text()
    values = list(match.groups())
    values[5] = str(int(values[5]) + 1)
    verilog.write_text(text[:match.start()] + f"shift_adder #({', '.join(values)})" + text[match.end():])


def test_yosys_statistics_group_into_the_resources():
    statistics = """
=== unit ===
   Number of cells:               2479
     CARRY4                        445
     FDRE                           10
     FDSE                            2
     IBUF                          144
     LUT2                         1311
     LUT6                          163
     MUXF7                          50
     DSP48E1                         1
     RAMB18E1                        2
     RAMB36E1                        1
     OBUF                           64
"""
    assert open_synth.cell_counts(statistics) == {"lut": 1474, "carry": 445, "ff": 12, "dsp": 1, "bram18": 4,
                                                  "lutram": 0}


def test_every_shipped_fpga_has_a_yosys_family():
    from hetdeploy.core.board import available_boards, load_board

    families = {d.part: open_synth.yosys_family(d.part) for name in available_boards() for d in load_board(name).devices
                if d.kind == "fpga"}
    assert families["xc7z020clg400-1"] == "xc7" and families["xck26-sfvc784-2LV-c"] == "xcup"
    assert set(families.values()) == {"xc7", "xcup"}


@pytest.mark.slow
def test_without_the_tools_open_synth_is_one_line_naming_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(open_synth.shutil, "which", lambda tool: None)
    model = tmp_path / "mlp.onnx"
    onnx.save(quantized_models.qonnx_mlp(), str(model))
    assert main(["build", str(model), "--board", "pynq-z2", "-o", str(tmp_path / "out"), "--open-synth"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--open-synth needs" in err[0] and "apt-get install yosys" in err[0] \
        and "apt-get install iverilog" in err[0], err
    assert not (tmp_path / "out").exists()


def _fpga_units(printed: str) -> list[dict]:
    """The FPGA subfunction's units in a plan --json (the host computes the input's first codes)."""
    return next(s for s in json.loads(printed)["subfunctions"] if s["kind"] == "fpga")["execution_units"]


def test_distributed_arithmetic_is_pinned_at_reuse_factor_one_with_its_own_estimate(tmp_path, capsys, monkeypatch):
    model = tmp_path / "mlp.onnx"
    onnx.save(quantized_models.qonnx_mlp(), str(model))
    plan = ["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--json"]
    assert main(plan + ["--strategy", "fc1=distributed_arithmetic"]) == 0
    units = {tuple(u["nodes"]): u for u in _fpga_units(capsys.readouterr().out)}
    (unit,) = [u for nodes, u in units.items() if "fc1" in nodes]
    assert (unit["strategy"], unit["reuse_factor"], unit["estimate"]["dsp"]) == ("DistributedArithmetic", 1, 0)
    assert main(plan + ["--strategy", "fc1=latency"]) == 0
    latency = next(u for u in _fpga_units(capsys.readouterr().out)
                   if "fc1" in u["nodes"])
    assert latency["estimate"]["lut"] != unit["estimate"]["lut"]
    assert main(plan + ["--strategy", "fc1=distributed_arithmetic", "--reuse-factor", "fc1=2"]) == 2
    assert "reuse factor 1 only" in capsys.readouterr().err
    # weighed by the folding when asked: every quantized layer under it, at fewer LUTs than latency's
    assert main(plan) == 0
    unasked = _fpga_units(capsys.readouterr().out)
    assert main(plan + ["--weigh-distributed-arithmetic"]) == 0
    weighed = _fpga_units(capsys.readouterr().out)
    kernels = [(a, w) for a, w in zip(unasked, weighed) if a["foldable"]]
    assert len(kernels) == 3 and all(a["strategy"] == "Latency" for a, _ in kernels)
    assert all(w["strategy"] == "DistributedArithmetic" and w["estimate"]["lut"] < a["estimate"]["lut"]
               for a, w in kernels)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *args: None if name == "da4ml" else object())
    for flags in (["--strategy", "fc1=distributed_arithmetic"], ["--weigh-distributed-arithmetic"]):
        assert main(plan + flags) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "needs da4ml (pip install 'hetdeploy[open-synth]')" in err[0], err


@pytest.fixture(scope="module")
def open_builds(tmp_path_factory):
    """The quantized MLP (16-16-16-5: Yosys takes about two seconds a thousand LUTs) and CNN (QONNX, as Brevitas
    writes them) built for the PYNQ-Z2 with --open-synth; each again under hls4ml's distributed_arithmetic
    strategy: the MLP's two layers pinned to it, the CNN's layers as the folding weighs it
    (--weigh-distributed-arithmetic), its first convolution pinned streamed (distributed arithmetic is verified
    streamed; on its small map the folding would take io_parallel). Each built when a test first asks for it
    (name -> build folder): under -m "not long" the CNN's distributed-arithmetic build is not made."""
    root = tmp_path_factory.mktemp("open_synth")
    settings = {"mlp": (lambda: quantized_models.qonnx_mlp(hidden=16), {}, {}, False),
                "cnn": (quantized_models.qonnx_cnn, {}, {}, False),
                "mlp_da": (lambda: quantized_models.qonnx_mlp(hidden=16),
                           {"fc0": "DistributedArithmetic", "fc1": "DistributedArithmetic"}, {}, False),
                "cnn_da": (quantized_models.qonnx_cnn, {}, {"conv0": "io_stream"}, True)}
    builds = {}

    def get(name):
        if name not in builds:
            if name.endswith("_da"):  # after its plain build, whose Yosys counts of the same Verilog it reuses
                get(name.removesuffix("_da"))
            model, strategies, io_types, weighed = settings[name]
            path = root / f"{name}.onnx"
            onnx.save(model(), str(path))
            out = root / f"{name}_build"
            build(BuildOptions(model=path, board="pynq-z2", out_dir=out, policy="support", open_synth=True,
                               strategies=strategies, io_types=io_types, weigh_distributed_arithmetic=weighed),
                  progress=lambda message: None)
            builds[name] = out
        return builds[name]

    return get


@pytest.mark.slow
@needs_yosys
# (cnn_da: distributed arithmetic as the folding weighs it, on a CNN; mlp_da builds it pinned)
@pytest.mark.parametrize("name", ["mlp", "cnn", "mlp_da", pytest.param("cnn_da", marks=pytest.mark.long)])
def test_every_unit_of_a_quantized_build_is_rtl_equal_to_its_c_simulation(open_builds, name):
    """The done-when: each unit with arithmetic traced, its Verilog equal to its C-simulation on every
    verification sample (every output pixel of the convolutions), Yosys's counts recorded, no DSP (da4ml
    makes constant multiplications of shifts and adds); a weight changed in a unit's Verilog is seen."""
    out = open_builds(name)
    plan = Plan.load(out / "plan.json")
    units = [u for s in plan.subfunctions for u in s.execution_units]
    traced = [u for u in units if u.hls is not None]  # and the top's relayouts, wires
    assert traced and all(u.open_synthesis is not None for u in units)
    for unit in units:
        record = unit.open_synthesis
        assert record.status == "synthesised", (unit.name, record.why)
        assert record.bit_exact and record.values >= 5 * len(unit.outputs), (unit.name, record)
        assert (record.yosys["lut"] > 0) == (unit.hls is not None) and record.yosys["dsp"] == 0, (unit.name,
                                                                                                  record.yosys)
        assert record.stages >= 1 and record.yosys["ff"] > 0, (unit.name, record)  # registered as hls4ml's
        manifest = json.loads((out / record.rtl / open_synth.MANIFEST).read_text())
        assert manifest["module"] == unit.name
    if name == "cnn":
        assert any(u.open_synthesis.kernel == "pixel" and u.open_synthesis.vectors > 5 for u in traced)
    if name.endswith("_da"):  # hls4ml's code for them came from da4ml (streamed convolutions too); C-simulated
        distributed = [u for u in traced if u.strategy == "DistributedArithmetic"]  # and verified as every unit
        # the MLP's two pinned; the CNN's as the folding weighs them: its first convolution and its dense at least
        # (its second convolution runs as fast io_parallel under Latency, where the stream adds two FIFOs' cycles)
        assert len(distributed) == 2 if name == "mlp_da" else len(distributed) >= 2, [u.name for u in distributed]
        assert all(u.verification.passed for u in distributed)
        assert all(u.estimate["dsp"] == 0 for u in distributed)
    if name == "mlp_da":
        for unit in distributed:
            assert 0.5 < unit.estimate["lut"] / unit.open_synthesis.yosys["lut"] < 2, (unit.estimate,
                                                                                         unit.open_synthesis.yosys)
        # the same arithmetic as the MLP's under Latency, so the same Verilog: Yosys's counts came from the build
        # cache the MLP's build stored them in (the session's), the same counts
        plain = {u.name: u.open_synthesis.yosys for s in Plan.load(open_builds("mlp") / "plan.json").subfunctions
                 for u in s.execution_units}
        assert all(u.open_synthesis.yosys == plain[u.name] for u in units)
        assert f"{len(units)} of {len(units)} Yosys syntheses" in (out / "build.log").read_text()
    unit = max(traced, key=lambda u: u.open_synthesis.da4ml_cost)
    folder = out / unit.open_synthesis.rtl
    _change_a_weight(folder)
    assert open_synth.simulate(folder).mismatches > 0


@pytest.mark.slow
@needs_yosys
def test_the_units_the_top_implements_and_depthwise_convolutions_are_traced_and_rtl_equal(tmp_path):
    """A padded, strided MaxPool, a 1-D MaxPool with a stride of 1, a 1-D global average (the top's window PE),
    a Reshape between them and a Flatten (channels-last to ONNX's order), each by its relayout's steps: each traced
    from what the top's C++ is made of (the window's geometry, the steps' table), its RTL equal to the unit's
    C-simulation on every verification sample; a changed read in a relayout's Verilog is seen. Before them hls4ml's
    depthwise convolutions, a padded one and an AveragePool (rewritten as one), traced per pixel as the others. A
    residual Add with the ReLU after it runs on the top's own add (arena.h), which open synthesis says it does not
    trace."""
    from onnx import TensorProto, helper, shape_inference

    from op_models import Builder

    b = Builder(1)
    x = b.node("Conv", ["input", b.random("dw.w", [2, 1, 3, 3]), b.random("dw.b", [2])], "dw", kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], group=2)
    x = b.node("Relu", [b.node("Add", [x, "input"], "add")], "add.relu")
    x = b.node("AveragePool", [x], "avg", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = b.node("Reshape", [x, b.const("rows", [1, 2, 9])], "rows")
    x = b.node("MaxPool", [x], "pool1d", kernel_shape=[3], strides=[1], pads=[1, 1])
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], "gap")], "flat")
    b.node("Gemm", [x, b.random("fc.w", [3, 2]), b.random("fc.b", [3])], "fc", transB=1)
    graph = helper.make_graph(b.nodes, "top", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                             [1, 2, 12, 12])],
                              [helper.make_tensor_value_info(b.nodes[-1].output[0], TensorProto.FLOAT, None)],
                              b.inits)
    model = shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                                                           ir_version=8))
    onnx.save(model, str(tmp_path / "top.onnx"))
    out = tmp_path / "build"
    plan = build(BuildOptions(model=tmp_path / "top.onnx", board="pynq-z2", out_dir=out, policy="support",
                              open_synth=True, width=8), progress=lambda message: None)
    units = {n: u for s in plan.subfunctions for u in s.execution_units for n in u.nodes}
    top = [units[n] for n in ("pool", "rows", "pool1d", "gap", "flat")]
    assert all(u.hls is None for u in top) and [u.window.reduce for u in top if u.window] == ["max", "max", "mean"]
    assert units["rows"].index_table and units["flat"].index_table
    for unit in top:
        record = unit.open_synthesis
        assert record.status == "synthesised" and record.bit_exact, (unit.nodes, record)
        assert record.values == 5 * _output_values(out, unit), (unit.nodes, record.values)
        assert record.yosys["dsp"] == 0
    assert units["gap"].open_synthesis.yosys["lut"] > 0 and units["rows"].open_synthesis.yosys["lut"] == 0
    residual = units["add"].open_synthesis
    assert units["add"].elementwise == ["Add", "Relu"] and residual.status == "not traced", residual
    assert "hetdeploy's own C++" in residual.why
    for unit in (units["dw"], units["avg"]):
        record = unit.open_synthesis
        assert unit.hls is not None and record.bit_exact and record.kernel == "pixel", (unit.nodes, record)
        assert record.vectors == 5 * _output_values(out, unit) // 2, (unit.nodes, record.vectors)  # every pixel
    folder = out / units["rows"].open_synthesis.rtl
    _change_a_read(folder)
    assert open_synth.simulate(folder).mismatches > 0


def _output_values(out, unit):
    """The values of ``unit``'s output, from its reference model."""
    model = onnx.load(str(out / unit.onnx))
    return math.prod(d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim)


def _change_a_read(folder):
    """The first output value of a relayout's Verilog read from the input value after the one it reads."""
    read = re.compile(r"(assign model_out\[\d+:\d+\] = v)(\d+)\[")
    verilog, match = next((v, m) for v in sorted(folder.glob("*_stage*.v")) if (m := read.search(v.read_text())))
    text = verilog.read_text()
    verilog.write_text(text[:match.start()] + f"{match.group(1)}{int(match.group(2)) + 1}[" + text[match.end():])


@pytest.mark.slow
@needs_yosys
def test_the_build_prints_the_rtl_verdicts_beside_the_estimates_and_the_report_shows_them(open_builds):
    from hetdeploy.core.plan_text import open_synth_table

    mlp = Plan.load(open_builds("mlp") / "plan.json")
    text = open_synth_table(mlp)
    assert "not the RTL Vivado HLS makes" in text and "Yosys LUT" in text and "est. LUT" in text
    synthesised = [u for s in mlp.subfunctions for u in s.execution_units
                   if u.open_synthesis is not None and u.open_synthesis.yosys]
    assert len(synthesised) == 3, synthesised  # its three layers (the input's first codes are the host's)
    assert f"the {len(synthesised)} synthesised unit(s) take, by Yosys: LUT" in text
    report = (open_builds("cnn") / "report.html").read_text()
    assert "Open synthesis: da4ml, Icarus Verilog, Yosys" in report and "not the RTL Vivado HLS makes" in report
    cnn = Plan.load(open_builds("cnn") / "plan.json")
    assert report.count("equal on") == sum(len(s.execution_units) for s in cnn.subfunctions if s.hls is not None)
