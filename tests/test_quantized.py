"""Quantized models on the FPGA: QONNX quantizers (as Brevitas exports them) and onnxruntime's QDQ
pairs become the layers' precisions, verified in C-simulation against the quantized model's own
reference (qonnx's execution, onnxruntime)."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import quantized_models
from hetdeploy.commands.cli import main
from hetdeploy.core.board import load_board
from hetdeploy.core.graph import Graph, Node
from hetdeploy.core.precision import Quantizer, exact_fixed, node_widths
from hetdeploy.intake.model import load_model
from hetdeploy.running.emulate import emulate
from hetdeploy.steps.build import BuildOptions, build


def test_exact_fixed_is_the_narrowest_type_holding_every_value():
    assert exact_fixed(np.array([-1, -0.5, 0.25, 0.875]), 16) == (4, 1)  # codes -8..7 at 2**-3
    assert exact_fixed(np.array([64.0, 128.0]), 16) == (3, 9)  # multiples of 64
    assert exact_fixed(np.array([0.5, -0.5]), 16) == (2, 1)  # codes -1, 1 at 2**-1: [-1, 0.5]
    assert exact_fixed(np.array([0.1]), 16) is None  # not a binary fraction
    assert exact_fixed(np.array([1.0]), 1) is None  # needs a sign bit more
    # int8 codes at their ends, -128 too (two's complement: 8 bits, not the 9 that +128 would take); and at 2**-7
    assert exact_fixed(np.array([-128.0, 127.0, 1.0]), 8) == (8, 8)
    assert exact_fixed(np.array([-1.0, 127 / 128, 2.0 ** -7]), 8) == (8, 1)
    assert exact_fixed(np.array([128.0, 1.0]), 8) is None
    assert exact_fixed(np.random.default_rng(0).normal(size=10_000).astype(np.float32), 16) is None


def test_quantizer_types():
    relu = Quantizer(4, 0.25, 0.0, signed=False, narrow=False, rounding="ROUND")
    assert relu.exact_in_fixed_point and relu.hls4ml_precision() == "ufixed<4,2,RND_CONV,SAT>"
    weights = Quantizer(8, 2.0 ** -4, 0.0, signed=True, narrow=True, rounding="ROUND")
    assert weights.hls4ml_precision() == "fixed<8,4,RND_CONV,SAT_SYM>"
    assert not Quantizer(8, 0.0235, 0.0, True, False, "ROUND").exact_in_fixed_point
    assert not Quantizer(8, 0.25, 3.0, False, False, "ROUND").exact_in_fixed_point


def test_node_widths_follow_quantizers_through_value_keeping_ops():
    nodes = [Node("q", "Quant", ["x"], ["a"], constants={1: "s", 2: "z", 3: "b"}, scalars={1: 0.5, 2: 0.0, 3: 6.0}),
             Node("pool", "MaxPool", ["a"], ["p"]), Node("flat", "Flatten", ["p"], ["f"]),
             Node("fc", "Gemm", ["f"], ["y"], constants={1: "w"}, weight_bits=4),
             Node("float_fc", "Gemm", ["y"], ["z"], constants={1: "w2"}, weight_bits=None)]
    assert node_widths(Graph(nodes, ["x"], ["z"]), 16) == [16, 6, 6, 6, 16]


@pytest.fixture(scope="module")
def quantized_builds(tmp_path_factory):
    """The QONNX MLP and CNN and onnxruntime's QDQ MLP, each built once for pynq-z2, all on the FPGA."""
    root = tmp_path_factory.mktemp("quantized")
    paths = {"qonnx_mlp": root / "qonnx_mlp.onnx", "qonnx_cnn": root / "qonnx_cnn.onnx",
             "qdq_mlp": quantized_models.onnxruntime_qdq_mlp(root)}
    onnx.save(quantized_models.qonnx_mlp(), str(paths["qonnx_mlp"]))
    onnx.save(quantized_models.qonnx_cnn(), str(paths["qonnx_cnn"]))
    builds = {}
    for name, path in paths.items():
        out = root / f"{name}_build"
        plan = build(BuildOptions(model=path, board="pynq-z2", out_dir=out, policy="support"),
                     progress=lambda message: None)
        builds[name] = (path, out, plan)
    return builds


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qonnx_mlp", "qonnx_cnn"])
def test_qonnx_quantizers_are_exact_fixed_point_on_the_fpga(quantized_builds, name):
    """Every execution unit whose output is quantized (power-of-two scales) matches qonnx's
    execution of its ONNX model exactly; the float last layer within tolerance; the estimate
    takes the quantizers' widths, not 16 bits."""
    _, out, plan = quantized_builds[name]
    assert [s.kind for s in plan.subfunctions] == ["cpu", "fpga"]  # the input's first codes on the host
    fpga = plan.subfunctions[1]
    units = fpga.execution_units
    quantized = [u for u in units if "RND_CONV" in u.precision]
    assert len(quantized) >= 2
    for unit in quantized:
        assert unit.verification.passed and unit.verification.max_abs_error == 0.0, unit.name
        assert [t.agreement for t in unit.verification.outputs] == ["bit-exact"]
    assert fpga.verification.passed and fpga.verification.flip_samples == 256 and fpga.verification.flipped == 0
    widths = {u.name: u.estimate for u in units if u.pe in ("dense", "conv")}
    assert all(e["dsp"] == 0 for e in widths.values())  # 8-bit x 4-bit products fit LUTs
    result = emulate(out, None, 5)
    assert result.comparison.passed, result.table()


@pytest.mark.slow
def test_onnxruntime_qdq_model_runs_on_the_fpga(quantized_builds):
    """QuantizeLinear/DequantizeLinear pairs become quantizers (traced to the pair); their
    non-power-of-two scales run as affine steps around an integer quantizer, within tolerance of
    onnxruntime's run of the QDQ model."""
    _, out, plan = quantized_builds["qdq_mlp"]
    assert [s.kind for s in plan.subfunctions] == ["cpu", "fpga"]  # the input's first codes on the host
    assert plan.node_map["x_QuantizeLinear"]["folded_into"] == plan.node_map["x_DequantizeLinear"]["folded_into"]
    result = emulate(out, None, 5)
    assert result.comparison.passed, result.table()


def test_the_qdq_reference_is_the_onnx_standards_on_any_cpu(tmp_path):
    """onnxruntime's fused u8s8 kernels saturate on x86 CPUs without VNNI (this suite's machine
    among them): the reference that checks a build runs a QDQ model as the standard defines it
    (onnxruntime with no graph optimisation), exactly, on every sample."""
    import onnxruntime as ort

    from hetdeploy.intake.ort_adapter import OrtModel

    path = quantized_models.onnxruntime_qdq_mlp(tmp_path)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    standard = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    reference = OrtModel(path)
    rng = np.random.default_rng(0)
    for _ in range(300):
        x = rng.normal(0, 1.5, [1, 16]).astype(np.float32)
        np.testing.assert_array_equal(reference.run({"x": x})["fc1_out"], standard.run(None, {"x": x})[0])


def _quant_model(tmp_path, scale_is_input: bool = False, bits: float = 4.0):
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
             (("zero", 0.0), ("bits", bits))] + ([] if scale_is_input else
                                                  [numpy_helper.from_array(np.array(0.25, np.float32), "s")])
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8])]
    if scale_is_input:
        inputs.append(helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, [1]))  # a sample's row
    node = helper.make_node("Quant", ["x", "s", "zero", "bits"], ["y"], name="act_quant",
                            domain=quantized_models.QONNX_DOMAIN, signed=1, narrow=0, rounding_mode="ROUND")
    graph = helper.make_graph([node], "q", inputs, [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT,
                                                                                  [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(quantized_models.QONNX_DOMAIN, 1)])
    model.ir_version = 8
    path = tmp_path / "quant.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("case,expected", [
    ({"scale_is_input": True}, "node 'act_quant' (Quant): its parameter input 1 's' is not a constant"),
    ({"bits": 2.5}, "node 'act_quant' (Quant): bit width [2.5] is not one whole number"),
])
def test_bad_quantizers_get_one_line_naming_the_node(tmp_path, capsys, case, expected):
    path = _quant_model(tmp_path, **case)
    assert main(["plan", str(path), "--board", "pynq-z2"]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1


def test_an_activation_quantizer_per_channel_runs_on_the_fpga_and_one_per_element_does_not(tmp_path):
    """One scale per channel (axis 1): affine steps around a quantizer of codes, on the FPGA; a scale
    per element of another axis (Brevitas' NHWC layouts): not one hls4ml's channels-last buffer holds
    per channel, so off the FPGA, the reason named."""
    path = _quant_model(tmp_path)
    model = onnx.load(str(path))
    fpga = next(d for d in load_board("pynq-z2").devices if d.kind == "fpga")
    for scale, reason in ((np.full([1, 8], 0.25, np.float32), None),
                          (np.full([8, 1], 0.25, np.float32), "not one or one per channel (axis 1)")):
        model.graph.initializer[2].CopyFrom(numpy_helper.from_array(scale, "s"))
        onnx.save(model, str(path))
        why = fpga.why_not(load_model(path).graph.nodes[0])
        assert (why is None) if reason is None else (reason in why), why


# ---------------------------------------------------------------- models as the exporters write them
# tests/data/quantized: trained on the digits and exported by benchmarks/quantized_exports.py (Brevitas
# 0.13 export_qonnx / export_onnx_qcdq, onnxruntime's quantize_static), each with the framework's own
# outputs on its first test images (NAME.npz: x, y, accuracy).
EXPORTS = Path(__file__).resolve().parent / "data" / "quantized"
EXPORTED = ["tfc_bn_qonnx", "tfc_bn_qcdq", "tfc_qonnx", "cnv_qonnx", "cnv_qcdq", "ort_static", "ort_static_pre",
            "ort_static_cnn", "ort_qop_cnn", "ort_w4_cnn"]
CALIBRATION = 8  # the first images size the build; the rest check it


@pytest.mark.parametrize("name", EXPORTED)
def test_every_matrix_layer_of_an_export_plans_onto_the_fpga(name, capsys):
    """Brevitas' default float-scale quantizers and onnxruntime's QDQ, as written: every Gemm and
    Conv on the FPGA under the support policy (quant_pre_process's repeated value_info taken in)."""
    import json

    assert main(["plan", str(EXPORTS / f"{name}.onnx"), "--board", "pynq-z2", "--policy", "support", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    on_fpga = {n for s in plan["subfunctions"] if s["kind"] == "fpga" for n in s["nodes"]}
    layers = [n.name for n in load_model(EXPORTS / f"{name}.onnx").graph.nodes if n.op in ("Gemm", "Conv")]
    assert layers and set(layers) <= on_fpga


@pytest.mark.parametrize("name", ["ort_static_cnn", "ort_qop_cnn", "ort_w4_cnn"])
def test_the_model_intake_makes_of_an_onnxruntime_export_answers_as_onnxruntime(name):
    """onnxruntime's quantize_static of the residual CNN in the QDQ format, the QOperator format and with 4-bit
    weights (int4 codes, com.microsoft's QuantizeLinear/DequantizeLinear): the model intake makes of each (its
    quantizers qonnx's, the weights' folded), on qonnx's execution, gives onnxruntime's outputs within one step of
    the output's quantizer on every image, none of which it saw."""
    from hetdeploy.intake.ort_adapter import open_in_memory
    from hetdeploy.running.verify import quantizer_steps

    data = np.load(EXPORTS / f"{name}.npz")
    loaded = load_model(EXPORTS / f"{name}.onnx")
    normalised = open_in_memory(loaded.model, name)
    step = quantizer_steps(EXPORTS / f"{name}.onnx")["y"]
    got = np.concatenate([normalised.run({"x": x[None]})["y"] for x in data["x"]])
    assert got.shape == data["y"].shape and np.all(np.isfinite(got))
    assert np.max(np.abs(got - data["y"])) <= step * 1.01


def _calibration(samples: np.ndarray):
    """onnxruntime's calibration reader of ``samples`` (input 'x'), one a call."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter({"x": x} for x in samples)

        def get_next(self):
            return next(self.feeds, None)

    return Reader()


def _onnxruntime_quantized(folder: Path, name: str, **options) -> tuple[Path, np.ndarray]:
    """onnxruntime's quantize_static (per channel, uint8 activations, calibrated on 8 samples; ``options`` change
    it) of a float model of two convolutions reading one bias, LeakyRelu, Sigmoid, Mul, AveragePool, MaxPool,
    Concat, GlobalAveragePool, Flatten, a MatMul and a Gemm output; its path and 24 samples (the first 8 its
    calibration's)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(0)

    def weights(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["conv"], ["leaky"], alpha=0.1),
             helper.make_node("Conv", ["leaky", "w0", "b"], ["t"], pads=[1, 1, 1, 1]),  # b: one bias read twice
             helper.make_node("Sigmoid", ["t"], ["s"]), helper.make_node("Mul", ["t", "s"], ["m"]),
             helper.make_node("AveragePool", ["m"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxPool", ["m"], ["q"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Concat", ["p", "q"], ["c"], axis=1), helper.make_node("GlobalAveragePool", ["c"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]), helper.make_node("MatMul", ["f", "w1"], ["y1"]),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y2"], transB=1)]
    graph = helper.make_graph(nodes, "convolutions", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                                     [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y1", onnx.TensorProto.FLOAT, [1, 10]),
                               helper.make_tensor_value_info("y2", onnx.TensorProto.FLOAT, [1, 6])],
                              [weights("w", [8, 4, 3, 3]), weights("b", [8]), weights("w0", [8, 8, 3, 3]),
                               weights("w1", [16, 10]), weights("w2", [6, 16]), weights("b2", [6])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "float.onnx")
    samples = rng.standard_normal((24, 1, 4, 8, 8)).astype(np.float32)

    path = folder / f"{name}.onnx"
    quantize_static(str(folder / "float.onnx"), str(path), _calibration(samples[:8]), **{
        "quant_format": QuantFormat.QDQ, "activation_type": QuantType.QUInt8, "weight_type": QuantType.QInt8,
        "per_channel": True, **options})
    return path, samples


def _output_steps(model: onnx.ModelProto) -> dict[str, float]:
    """Each graph output's step: the scale of the DequantizeLinear that writes it."""
    scales = {t.name: float(numpy_helper.to_array(t)) for t in model.graph.initializer if not t.dims}
    outputs = {o.name for o in model.graph.output}
    return {n.output[0]: scales[n.input[1]] for n in model.graph.node if n.output[0] in outputs}


def _within_a_step_of_onnxruntime(run, path: Path, samples: np.ndarray) -> None:
    """``run`` (feeds -> outputs by name) gives each output of the model at ``path`` as onnxruntime does within one
    step of the output's quantizer, on samples 8 on (none the calibration saw)."""
    import onnxruntime

    written = onnx.load(path)
    reference = onnxruntime.InferenceSession(written.SerializeToString())
    for output, step in _output_steps(written).items():
        for x in samples[8:]:
            got, want = run({"x": x})[output], reference.run([output], {"x": x})[0]
            assert np.all(np.isfinite(got)) and np.max(np.abs(got - want)) <= step * 1.01, output


def test_onnxruntimes_qoperator_format_is_its_qdq_format(tmp_path, capsys):
    """onnxruntime's quantize_static in the QOperator format, of a float model whose ops it writes as QLinearConv,
    QLinearLeakyRelu, QLinearSigmoid, QLinearMul, QLinearAveragePool, QLinearConcat, QLinearGlobalAveragePool,
    QLinearMatMul and QGemm (weights per channel; two convolutions read one bias), with a MaxPool and a Flatten on
    the codes: rewritten as the QDQ format, onnxruntime (optimisations off: the float ops themselves) and the model
    intake makes of it give each output within one step of the model as written, and every node but the input's
    quantizer plans onto the FPGA."""
    import json

    import onnxruntime
    from onnxruntime.quantization import QuantFormat

    from hetdeploy.intake import rewrites
    from hetdeploy.intake.ort_adapter import open_in_memory

    # 7-bit weights (reduce_range): onnxruntime's QLinearConv on a CPU without VNNI sums pairs of uint8 x int8
    # products in 16 bits, saturating (its quantization guide's reason for reduce_range), which the QDQ format's
    # float ops do not; this AVX2 machine's QOperator outputs were three steps off the exact sums
    path, samples = _onnxruntime_quantized(tmp_path, "qop", quant_format=QuantFormat.QOperator, reduce_range=True)
    written = onnx.load(path)
    assert {n.op_type for n in written.graph.node} >= set(rewrites.QOPERATOR_OPS) - {"QLinearAdd"} | {"MaxPool"}
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(written)
    assert rewrites.qoperator_as_qdq(rewritten)
    assert not {n.op_type for n in rewritten.graph.node} & set(rewrites.QOPERATOR_OPS)
    assert {n.domain for n in rewritten.graph.node} == {""}
    onnx.checker.check_model(rewritten, full_check=True)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    as_qdq = onnxruntime.InferenceSession(rewritten.SerializeToString(), options)
    _within_a_step_of_onnxruntime(lambda feeds: dict(zip(("y1", "y2"), as_qdq.run(["y1", "y2"], feeds))), path,
                                  samples)
    # the whole intake (the QDQ format's pairs as quantizers, the weights' folded, the bias both convolutions
    # read at its own scale in each) on qonnx's execution
    _within_a_step_of_onnxruntime(open_in_memory(load_model(path).model, "normalised").run, path, samples)

    assert main(["plan", str(path), "--board", "pynq-z2", "--policy", "support", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["kind"] for s in plan["subfunctions"]] == ["cpu", "fpga"]
    assert len(plan["subfunctions"][0]["nodes"]) == 1


def test_asymmetric_weights_of_onnxruntimes_quantizer_keep_their_values(tmp_path):
    """quantize_static with uint8 weights (QUInt8: per channel, a zero point other than 0): the model intake makes
    of it gives each output within one step of onnxruntime's (qonnx's QCDQToQuant alone subtracts the zero point
    from the uint8 codes in uint8, which wraps: hundreds of steps off)."""
    from onnxruntime.quantization import QuantType

    from hetdeploy.intake.ort_adapter import open_in_memory

    path, samples = _onnxruntime_quantized(tmp_path, "asymmetric", weight_type=QuantType.QUInt8)
    zero_points = [numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer
                   if t.name.endswith("zero_point") and t.data_type == onnx.TensorProto.UINT8 and t.dims]
    assert zero_points and any(np.any(z != 0) for z in zero_points)
    _within_a_step_of_onnxruntime(open_in_memory(load_model(path).model, "normalised").run, path, samples)


@pytest.fixture(scope="module")
def quantized_mbv2_blocks(tmp_path_factory):
    """MobileNetV2's stem and two inverted residual blocks as torch.onnx.export writes them (tests/data/torch, 3 x 32 x
    32), quantized by onnxruntime (quant_pre_process, then quantize_static: QDQ, uint8 activations at float scales,
    int8 weights per channel) on 8 samples; the model's path and 16 samples it did not see."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    folder = tmp_path_factory.mktemp("mbv2_qdq")
    samples = np.random.default_rng(4).standard_normal((24, 1, 3, 32, 32)).astype(np.float32)

    quant_pre_process(str(Path(__file__).parent / "data" / "torch" / "mbv2_blocks.onnx"), str(folder / "pre.onnx"))
    quantize_static(str(folder / "pre.onnx"), str(folder / "mbv2_qdq.onnx"), _calibration(samples[:8]),
                    quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=True)
    return folder / "mbv2_qdq.onnx", samples[8:]


def test_a_layer_before_a_quantizer_no_fixed_point_type_gives_exactly_may_run_on_the_engine(quantized_mbv2_blocks):
    """onnxruntime's float scales: no fixed-point unit gives a quantizer's codes exactly, so a layer before one may
    run on the KV260's engine, its quantizer a unit after it, and the latency policy puts the network's FPGA part
    there (before, every layer of it stayed on hls4ml, and the whole network on the A53s). With its quantizers made
    fixed-point casts (power-of-two scales), or 4-bit ones, the same layers stay whole with them on hls4ml."""
    from hetdeploy.commands.api import plan
    from hetdeploy.planning.cost import engine_capable

    path, _ = quantized_mbv2_blocks
    graph = load_model(path).graph
    fpga = load_board("kv260").device("fpga")
    convolutions = {n.name for n in graph.nodes if n.op == "Conv"}
    assert convolutions <= {graph.nodes[i].name for i in engine_capable(fpga, graph, [16] * len(graph.nodes))}
    quantizers = [node for node in graph.nodes if node.op == "Quant"]
    for node in quantizers:
        node.scalars.update({1: 2.0 ** -5, 2: 0.0})
    assert not convolutions & {graph.nodes[i].name for i in engine_capable(fpga, graph, [16] * len(graph.nodes))}
    for node in quantizers:  # float scales again, in 4 bits: a flipped code would be its whole tolerance
        node.scalars.update({1: 0.0235, 3: 4.0})
    assert not convolutions & {graph.nodes[i].name for i in engine_capable(fpga, graph, [16] * len(graph.nodes))}
    result = plan(path, "kv260").plan
    strategies = [u.strategy for s in result.subfunctions if s.kind == "fpga" for u in s.execution_units]
    assert "Engine" in strategies
    # the quantizers after the engine's layers: the top's (one scale, one zero point, a word a cycle), not hls4ml's
    fpga = [u for s in result.subfunctions if s.kind == "fpga" for u in s.execution_units]
    after_engine = [fpga[k + 1] for k, u in enumerate(fpga[:-1]) if u.strategy == "Engine"
                    and fpga[k + 1].nodes[0] in {n.name for n in quantizers}]
    assert after_engine and {u.pe for u in after_engine} == {"quant"}


@pytest.mark.slow
def test_a_quantized_cnn_with_engine_units_answers_as_onnxruntime(quantized_mbv2_blocks, tmp_path):
    """The quantized MobileNetV2 blocks built for the KV260 under the latency policy: some of its convolutions on
    the engine, their quantizers units after them; the pipeline's outputs on samples the build neither sized nor
    verified on within tolerance of onnxruntime's, and within three steps of the output's quantizer."""
    from hetdeploy.running.verify import quantizer_steps

    path, samples = quantized_mbv2_blocks
    np.save(tmp_path / "calibration.npy", np.random.default_rng(5).standard_normal((8, 3, 32, 32)).astype(np.float32))
    np.save(tmp_path / "check.npy", samples[:, 0])
    out = tmp_path / "out"
    result = build(BuildOptions(model=path, board="kv260", out_dir=out, calibration=tmp_path / "calibration.npy"),
                   progress=lambda message: None)
    engine = [u for s in result.subfunctions for u in s.execution_units if u.strategy == "Engine"]
    assert engine and all(u.verification.passed for u in engine)
    # the top's quantizers (arena.h's quantize) each within tolerance of qonnx's on the unit's inputs
    quant = [u for s in result.subfunctions for u in s.execution_units if u.pe == "quant"]
    assert quant and all(u.quantizer is not None and u.verification.passed for u in quant)
    emulated = emulate(out, str(tmp_path / "check.npy"))
    assert emulated.comparison.passed, emulated.table()
    got = emulated.comparison.outputs["y"]
    import onnxruntime

    # onnxruntime's optimisations off: its QDQ pairs as the float ops they stand for (optimised, it fuses them into
    # QLinearConv, whose uint8 x int8 kernel on a CPU without VNNI sums pairs of products in 16 bits, saturating)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    reference = onnxruntime.InferenceSession(str(path), options)
    want = np.concatenate([reference.run(["y"], {"x": x})[0] for x in samples])
    # a code may flip at each quantizer a layer's fixed-point output reaches near its rounding's tie (float scales
    # are no fixed-point grid): 2 output steps here, within 3
    assert np.all(np.isfinite(got)) and np.max(np.abs(got - want)) <= 3 * quantizer_steps(path)["y"]


@pytest.fixture(scope="module")
def export_builds(tmp_path_factory):
    """A Brevitas QONNX MLP with BatchNorm, a Brevitas QCDQ CNN and onnxruntime's QDQ and QOperator formats of a
    residual CNN (weights per channel; QDQ: a dequantizer a reader), built for pynq-z2 under the support policy on
    their first images."""
    root = tmp_path_factory.mktemp("exports")
    builds = {}
    for name in ("tfc_bn_qonnx", "cnv_qcdq", "ort_static_cnn", "ort_qop_cnn"):
        data = np.load(EXPORTS / f"{name}.npz")
        np.save(root / f"{name}_calibration.npy", data["x"][:CALIBRATION])
        np.save(root / f"{name}_check.npy", data["x"][CALIBRATION:])
        out = root / name
        plan = build(BuildOptions(model=EXPORTS / f"{name}.onnx", board="pynq-z2", out_dir=out, policy="support",
                                  calibration=root / f"{name}_calibration.npy"), progress=lambda message: None)
        builds[name] = (out, plan, root / f"{name}_check.npy", data["y"][CALIBRATION:])
    return builds


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tfc_bn_qonnx", "cnv_qcdq", "ort_static_cnn", "ort_qop_cnn"])
def test_an_export_on_the_fpga_answers_as_its_framework(export_builds, name):
    """On images the build did not size on: every layer on the FPGA (the input's first codes on the
    host), the emulation within 1 % of the output's peak (or one step of the quantizer that writes the
    output) of the framework's own outputs (Brevitas', onnxruntime's) and the same class; every unit
    bit-exact, within one step of its quantizer or within tolerance, some of them bit-exact or on their
    quantizer's codes."""
    from hetdeploy.running.verify import quantizer_steps

    out, plan, check, framework = export_builds[name]
    assert [s.kind for s in plan.subfunctions] == ["cpu", "fpga"]
    assert {f.reason for f in plan.fpga_fallbacks} == {"input quantizer"}
    agreements = {t.agreement for u in plan.subfunctions[1].execution_units for t in u.verification.outputs}
    assert "" not in agreements and agreements & {"bit-exact", "same codes"}
    result = emulate(out, str(check))
    assert result.comparison.passed, result.table()
    output = plan.outputs[0].name
    got = result.comparison.outputs[output]
    assert got.shape == framework.shape and np.all(np.isfinite(got))
    step = quantizer_steps(EXPORTS / f"{name}.onnx").get(output, 0.0)
    # one step of the output's quantizer, and the rounding of (code - zero point) x scale to the output's
    # fixed-point type (its 16 bits: under 1 % of a step)
    assert np.max(np.abs(got - framework)) <= max(0.01 * np.max(np.abs(framework)), step * 1.01)
    assert np.array_equal(np.argmax(got, axis=1), np.argmax(framework, axis=1))


@pytest.fixture(scope="module")
def arm_build(tmp_path_factory):
    """The Brevitas QONNX MLP with BatchNorm under the latency policy: every layer on the ARM cores."""
    out = tmp_path_factory.mktemp("arm") / "tfc_bn_qonnx"
    plan = build(BuildOptions(model=EXPORTS / "tfc_bn_qonnx.onnx", board="pynq-z2", out_dir=out),
                 progress=lambda message: None)
    return out, plan


@pytest.mark.slow
def test_quantizers_on_the_arm_are_standard_onnx_that_run_py_runs_as_on_the_board(arm_build, tmp_path):
    """The CPU subfunction holds no QONNX op (the board has onnxruntime, not qonnx); the build ran
    deploy/run.py --emulate with qonnx, onnx and hetdeploy unimportable and got its emulation's
    outputs; emulate on images the build did not see agrees with qonnx on the user's model."""
    from hetdeploy.core.graph import QONNX_DOMAINS
    from hetdeploy.running.deploy import check_package

    out, plan = arm_build
    assert [s.kind for s in plan.subfunctions] == ["cpu"]
    deployed = onnx.load(str(out / "deploy" / "models" / f"{plan.subfunctions[0].name}.onnx"))
    assert not any(n.domain in QONNX_DOMAINS for n in deployed.graph.node)
    data = np.load(EXPORTS / "tfc_bn_qonnx.npz")
    np.save(tmp_path / "x.npy", data["x"])
    result = emulate(out, str(tmp_path / "x.npy"))
    assert result.comparison.passed and result.comparison.max_abs_error <= 1e-5, result.table()
    samples = [{"input": data["x"][k:k + 1]} for k in range(len(data["x"]))]
    expected = {plan.outputs[0].name: result.comparison.outputs[plan.outputs[0].name]}
    check_package(plan, out, samples, expected)
    run_py = out / "deploy" / "run.py"
    original = run_py.read_text()
    try:  # what the board lacks is unimportable in that child: a run.py that needs qonnx fails there
        run_py.write_text(original.replace("import argparse\n", "import argparse\nimport qonnx\n", 1))
        with pytest.raises(RuntimeError, match="No module named 'qonnx' \\(not on the board\\)"):
            check_package(plan, out, samples, expected)
    finally:
        run_py.write_text(original)
    wrong = {name: value + 1 for name, value in expected.items()}
    with pytest.raises(RuntimeError, match="other than the build's emulation"):
        check_package(plan, out, samples, wrong)


@pytest.mark.slow
def test_a_quantizer_only_qonnx_runs_is_refused_on_the_cpu_at_build(tmp_path, capsys):
    """A Trunc with a zero point (intake makes the others Quants, which the FPGA takes), which the FPGA
    does not take, would run on the ARM, which has no qonnx: one line naming the node, exit 2, before
    any HLS."""
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
             (("scale", 0.25), ("zero", 1.0), ("in_bits", 8.0), ("out_bits", 4.0))]
    trunc = helper.make_node("Trunc", ["x", "scale", "zero", "in_bits", "out_bits"], ["y"], name="avg_trunc",
                             domain=quantized_models.QONNX_DOMAIN, rounding_mode="FLOOR")
    graph = helper.make_graph([trunc], "t", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(quantized_models.QONNX_DOMAIN, 1)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "trunc.onnx"))
    assert main(["build", str(tmp_path / "trunc.onnx"), "--board", "pynq-z2", "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "node 'avg_trunc' (Trunc)" in err and "only qonnx runs it" in err


def test_a_target_rate_folds_the_tfc_export_to_the_fewest_resources_that_reach_it(capsys, tmp_path):
    """FINN's target_fps on the Brevitas TFC-like export: 150,000 samples/s of batches of 1000 on the
    PYNQ-Z2 with no DSP but the input quantizer's (the top's: its two products by constants, its scale no power of
    two, on two DSPs each) and under 2x the 2,190 LUT finn-plus estimates for it; without a target the
    units of a sequential top fold to the least latency the chip holds (many more LUT). A config file's
    target_rate too."""
    import json

    # the input quantizer on the FPGA, as FINN has it: on the host (the default, exact codes) its
    # per-sample onnxruntime call would bound the stream near 10,000 samples/s
    common = [str(EXPORTS / "tfc_bn_qonnx.onnx"), "--board", "pynq-z2", "--policy", "support", "--objective",
              "throughput", "--batch", "1000", "--json", "--device", "node__symbolic=fpga"]
    assert main(["plan", *common, "--target-rate", "150000"]) == 0
    plan = json.loads(capsys.readouterr().out)
    used = plan["fpga_resources"]["fpga"]["used"]
    assert plan["estimate"]["throughput_per_s"] >= 150_000 and used["dsp"] == 4 and used["lut"] <= 4_400
    units = [u for s in plan["subfunctions"] for u in s["execution_units"]]
    assert [u["estimate"]["dsp"] for u in units if u["pe"] == "quant"] == [4]
    assert all(u["rate_per_s"] >= 150_000 for s in plan["subfunctions"] for u in s["execution_units"])
    assert main(["plan", *common, "--top", "sequential"]) == 0  # as a dataflow they fold balanced instead
    fastest = json.loads(capsys.readouterr().out)
    assert fastest["fpga_resources"]["fpga"]["used"]["lut"] > 4 * used["lut"]
    config = tmp_path / "rate.yaml"
    config.write_text("target_rate: 150000\n")
    assert main(["plan", *common, "--config", str(config)]) == 0
    assert json.loads(capsys.readouterr().out)["fpga_resources"]["fpga"]["used"] == used
    config.write_text("target_rate: fast\n")
    assert main(["plan", *common, "--config", str(config)]) == 2
    assert "target_rate" in capsys.readouterr().err


def test_a_target_rate_out_of_reach_folds_a_dataflow_as_fast_as_the_chip_goes(capsys):
    """TFC-w1a1 (Brevitas) at FINN's 1,562,500 samples/s in batches of 1000: the PYNQ-Z2's 900 us a call alone
    takes more than a sample's share, so no folding reaches it; its dataflow is folded as without a target (the
    least interval the chip reaches, balanced), not unfolded unit by unit past what the chip holds (it was: an
    interval of 102 cycles for more LUTs than the 33 cycles without a target take)."""
    import json

    common = [str(Path(__file__).parent / "data" / "brevitas" / "tfc_1w1a.onnx"), "--board", "pynq-z2",
              "--objective", "throughput", "--batch", "1000", "--json"]
    plans = []
    for extra in ([], ["--target-rate", "1562500"]):
        assert main(["plan", *common, *extra]) == 0
        plans.append(json.loads(capsys.readouterr().out))
    free, targeted = ([s for s in p["subfunctions"] if s["kind"] == "fpga"][0] for p in plans)
    assert targeted["top"]["kind"] == "dataflow"
    assert targeted["top"]["dataflow_interval_cycles"] == free["top"]["dataflow_interval_cycles"]
    assert plans[1]["fpga_resources"]["fpga"]["used"] == plans[0]["fpga_resources"]["fpga"]["used"]
