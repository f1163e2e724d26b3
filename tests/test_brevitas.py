"""The layers FINN takes from Brevitas, as Brevitas 0.13's export_qonnx writes them, on the FPGA.

tests/data/brevitas: written by ``python benchmarks/brevitas_layers.py --export tests/data/brevitas``
(untrained, seed 0; NAME_qcdq by ``--qcdq``: export_onnx_qcdq through torch's dynamo exporter), each with
Brevitas' own outputs on 16 inputs (NAME.npz: x, y). Builds size on the first 8 inputs and are checked
on the other 8, against Brevitas.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from hetdeploy.commands.api import load
from hetdeploy.commands.cli import main
from hetdeploy.running.verify import quantizer_steps
from hetdeploy.steps.build import BuildOptions, build

DATA = Path(__file__).resolve().parent / "data" / "brevitas"
LAYERS = ["identity_s1", "identity_un4", "relu_pc_nchw", "identity_pc_nhwc", "hardtanh_4", "truncavgpool_4", "linear_w1",
          "conv_w2", "convtranspose_w4",
          # export_onnx_qcdq through torch's dynamo exporter (opset 18, lifted_tensor names, shared constants)
          "linear_w4_qcdq", "conv_w2_qcdq"]
NETWORKS = ["tfc_1w1a", "tfc_1w2a"]
SIZED_ON = 8


def _on_the_fpga(name: str) -> dict[str, str]:
    """--device NODE=fpga for every node of a layer's model: its input quantizer too, which a plan
    left to itself computes on the host (input_codes.input_quantizers), so that the FPGA's is tested."""
    import onnx

    return {n.name: "fpga" for n in onnx.load(str(DATA / f"{name}.onnx"), load_external_data=False).graph.node} \
        if name in LAYERS else {}


@pytest.mark.parametrize("name", LAYERS + NETWORKS)
def test_every_node_of_a_brevitas_layer_plans_onto_the_fpga(name, capsys):
    """BipolarQuant, per-channel activation quantizers, Trunc, unsigned narrow quantizers, binary
    weights, BNN-PYNQ's TensorNorm (Sub, Div, Mul, Add by constants): all on the FPGA, one subfunction
    (a network's input quantizer, 2x - 1 and its Quant, on the host, which sends the FPGA codes)."""
    pins = [f"--device={node}={device}" for node, device in _on_the_fpga(name).items()]
    assert main(["plan", str(DATA / f"{name}.onnx"), "--board", "pynq-z2", "--policy", "support", "--json",
                 *pins]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["kind"] for s in plan["subfunctions"]] in (["fpga"], ["cpu", "fpga"])
    assert {f["reason"] for f in plan["fpga_fallbacks"]} <= {"input quantizer"}
    assert name in LAYERS or plan["fpga_fallbacks"]


def _build(root: Path, name: str):
    data = np.load(DATA / f"{name}.npz")
    np.save(root / f"{name}_calibration.npy", data["x"][:SIZED_ON])
    out = root / name
    build(BuildOptions(model=DATA / f"{name}.onnx", board="pynq-z2", out_dir=out, policy="support",
                       calibration=root / f"{name}_calibration.npy", devices=_on_the_fpga(name)),
          progress=lambda message: None)
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


# ---------------------------------------------------------------- FINN's own model form
FINN_DOMAIN = "finn.custom_op.general"


def finn_form(source: Path, path: Path) -> None:
    """The Brevitas TFC W1A1 export as FINN's QONNX-to-FINN conversion writes it: weight quantizers
    folded into the weights (+-1), each activation's BipolarQuant a MultiThreshold of FINN's domain
    (one threshold at 0, out_dtype BIPOLAR, out_scale 2, out_bias -1), and TopK's class index as the
    output, as FINN's build_dataflow example model has it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(source))
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    kept = []
    for node in model.graph.node:
        if node.op_type == "BipolarQuant" and node.input[0] in constants:
            signs = np.where(constants[node.input[0]] >= 0, 1.0, -1.0) * constants[node.input[1]]
            model.graph.initializer.append(numpy_helper.from_array(signs.astype(np.float32), node.output[0]))
            continue
        if node.op_type == "BipolarQuant":
            zero = f"{node.name}_threshold"
            model.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 1), np.float32), zero))
            node = helper.make_node("MultiThreshold", [node.input[0], zero], list(node.output), name=node.name,
                                    domain=FINN_DOMAIN, out_dtype="BIPOLAR", out_scale=2.0, out_bias=-1.0)
        kept.append(node)
    scores = model.graph.output[0].name
    k = numpy_helper.from_array(np.array([1], np.int64), "top_k")
    model.graph.initializer.append(k)
    kept.append(helper.make_node("TopK", [scores, "top_k"], ["top_score", "global_out"], name="TopK_0", axis=-1))
    del model.graph.node[:]
    model.graph.node.extend(kept)
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("global_out", TensorProto.INT64, [1, 1]))
    used = {t for n in model.graph.node for t in n.input}
    for listed in (model.graph.initializer, model.graph.input):  # the exporter lists weights as inputs too
        live = [t for t in listed if t.name in used]
        del listed[:]
        listed.extend(live)
    kept_imports = [o for o in model.opset_import if o.domain != "qonnx.custom_op.general"]
    del model.opset_import[:]
    model.opset_import.extend(kept_imports + [helper.make_opsetid(FINN_DOMAIN, 1)])
    onnx.save(model, str(path))


def test_a_finn_model_plans_its_thresholds_onto_the_fpga_and_its_topk_onto_the_cpu(tmp_path, capsys):
    finn_form(DATA / "tfc_1w1a.onnx", tmp_path / "tfc_finn.onnx")
    assert main(["plan", str(tmp_path / "tfc_finn.onnx"), "--board", "pynq-z2", "--policy", "support",
                 "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["kind"] for s in plan["subfunctions"]] == ["cpu", "fpga", "cpu"]  # the input's 2x - 1 and codes
    assert plan["subfunctions"][2]["nodes"] == ["TopK_0"]


def test_an_op_only_finn_runs_is_refused_naming_it(tmp_path, capsys):
    import onnx

    finn_form(DATA / "tfc_1w1a.onnx", tmp_path / "tfc_finn.onnx")
    model = onnx.load(str(tmp_path / "tfc_finn.onnx"))
    layer = next(n for n in model.graph.node if n.op_type == "MatMul" or n.op_type == "Gemm")
    layer.op_type, layer.domain = "MatrixVectorActivation", "finn.custom_op.fpgadataflow"
    onnx.save(model, str(tmp_path / "hls.onnx"))
    assert main(["plan", str(tmp_path / "hls.onnx"), "--board", "pynq-z2"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"node '{layer.name}' (MatrixVectorActivation, domain finn.custom_op.fpgadataflow): only FINN runs" \
        in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_a_finn_model_builds_and_classifies_as_qonnx_does(tmp_path):
    """Thresholds on the FPGA (bit-exact units), the class index from the CPU's TopK: the classes qonnx's
    execution of the FINN model gives, and Brevitas' own, on inputs the build did not size on."""
    from hetdeploy.intake.qonnx_adapter import QonnxModel

    finn_form(DATA / "tfc_1w1a.onnx", tmp_path / "tfc_finn.onnx")
    data = np.load(DATA / "tfc_1w1a.npz")
    np.save(tmp_path / "calibration.npy", data["x"][:SIZED_ON])
    plan = build(BuildOptions(model=tmp_path / "tfc_finn.onnx", board="pynq-z2", out_dir=tmp_path / "out",
                              policy="support", calibration=tmp_path / "calibration.npy"), progress=lambda m: None)
    units = next(s for s in plan.subfunctions if s.kind == "fpga").execution_units  # the input's codes: the host's
    assert sum(t.agreement == "bit-exact" for u in units for t in u.verification.outputs) >= 3
    held_out = data["x"][SIZED_ON:]
    got = load(tmp_path / "out").predict(held_out)[0].reshape(-1)
    reference = QonnxModel(tmp_path / "tfc_finn.onnx")
    qonnx = np.concatenate([reference.run({reference.input_names[0]: x[None]})["global_out"] for x in held_out])
    assert np.array_equal(got, qonnx.reshape(-1))
    assert np.array_equal(got, np.argmax(data["y"][SIZED_ON:], axis=1))


def test_the_same_export_loads_to_the_same_bytes():
    """qonnx names the tensors its transformations add by random strings; intake renames them in
    graph order, so a model gives the same reference, the same normalised model (and so the same
    subfunction files) every time."""
    import random

    from hetdeploy.intake.model import load_model

    path = Path(__file__).parent / "data" / "brevitas" / "tfc_1w1a.onnx"
    first = load_model(path)
    random.seed(1)  # another draw of qonnx's names
    again = load_model(path)
    assert first.source.SerializeToString() == again.source.SerializeToString()
    assert first.model.SerializeToString() == again.model.SerializeToString()


@pytest.mark.slow
def test_a_bnn_pynq_network_agrees_with_brevitas_on_finns_test_image_and_more(tmp_path):
    """TFC-w1a2 sized on 16 inputs, emulated on FINN's test image and 63 more (tfc_1w2a_finn.npz:
    ``brevitas_layers.py --export``, Brevitas' outputs): every sample within 0.1 % of the peak of
    Brevitas' scores. With the input's 2x - 1 and its quantizer on the FPGA, the input rounded to
    fixed point before the quantizer flipped its codes on 3 of these 64 (9 of a peak of 22)."""
    data, finn = np.load(DATA / "tfc_1w2a.npz"), np.load(DATA / "tfc_1w2a_finn.npz")
    np.save(tmp_path / "calibration.npy", data["x"])
    out = tmp_path / "tfc"
    plan = build(BuildOptions(model=DATA / "tfc_1w2a.onnx", board="pynq-z2", out_dir=out, policy="support",
                              calibration=tmp_path / "calibration.npy"), progress=lambda message: None)
    assert [s.kind for s in plan.subfunctions] == ["cpu", "fpga"]
    assert (plan.subfunctions[1].verification.flip_samples, plan.subfunctions[1].verification.flipped) == (256, 0)
    # the host quantizer's codes (a 2-bit narrow Quant: -1, 0, 1), two bits each
    assert [(p.codes.bits, sorted(set(p.codes.values))) for p in plan.subfunctions[1].hls.inputs] == [(2, [-1, 0, 1])]
    # the host's quantizer (a Reshape, 2x - 1, a Quant) runs a batch a call: its model's batch axis open
    assert plan.subfunctions[0].batched
    host_model = onnx.load(str(out / plan.subfunctions[0].onnx))
    assert host_model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    got = load(out).predict(finn["x"])[0].reshape(finn["y"].shape)
    assert np.all(np.isfinite(got))
    assert np.max(np.abs(got - finn["y"])) <= 1e-3 * np.max(np.abs(finn["y"]))
    # the input quantizer put on the FPGA: the build counts the samples it flips on, never "bit-exact"
    pinned = build(BuildOptions(model=DATA / "tfc_1w2a.onnx", board="pynq-z2", out_dir=tmp_path / "pinned",
                                policy="support", calibration=tmp_path / "calibration.npy",
                                devices={n: "fpga" for n in ("node_view", "node_mul", "node_sub", "node__symbolic")}),
                   progress=lambda message: None)
    (fpga,) = pinned.subfunctions
    assert fpga.verification.flipped > 0 and fpga.verification.agreement.startswith("codes flip on")


@pytest.mark.slow
def test_a_bnn_pynq_networks_binary_input_reaches_the_fpga_as_codes_and_both_tops_answer_alike(tmp_path):
    """TFC-w1a1's input quantizer (a BipolarQuant on the host) gives the FPGA its codes, a bit a value (13 words for
    784 values, not 784 floats): under the throughput objective its dataflow top assembles the first layer's token
    from them, 64 a cycle, and its units set the interval; the sequential top converts them into its buffer. The
    two answer alike bit for bit, within 0.1 % of Brevitas' peak on the 16 exported samples (the build sized on
    synthetic ones)."""
    data = np.load(DATA / "tfc_1w1a.npz")
    answers, tops = {}, {}
    for top in ("dataflow", "sequential"):
        plan = build(BuildOptions(model=DATA / "tfc_1w1a.onnx", board="pynq-z2", out_dir=tmp_path / top,
                                  objective="throughput", batch=8, top=top), progress=lambda message: None)
        host, fpga = plan.subfunctions
        assert host.kind == "cpu" and [(p.codes.bits, len(set(p.codes.values))) for p in fpga.hls.inputs] == [(1, 2)]
        saved = json.loads((tmp_path / top / "plan.json").read_text())["subfunctions"][1]["hls"]["inputs"][0]
        assert saved["codes"]["values"] == [-1.0, 1.0]
        answers[top], tops[top] = load(tmp_path / top).predict(data["x"])[0].reshape(data["y"].shape), fpga.top
    assert np.array_equal(answers["dataflow"], answers["sequential"])
    assert np.max(np.abs(answers["dataflow"] - data["y"])) <= 1e-3 * np.max(np.abs(data["y"]))
    # on the board (run.py with a stand-in pynq): the port's buffers are the codes' words, packed from the host
    # quantizer's outputs (run.py refuses a value that is not a code)
    from test_deploy import run_on_fake_pynq, run_py

    events = run_on_fake_pynq(tmp_path / "dataflow", tmp_path, data["x"][:5], "--batch", "5")
    assert [e[1:3] for e in events if e[0] == "allocate"][:2] == [[[8 * 2 * 13], "uint32"], [[8 * 10], "float32"]]
    # the input as the quantizer's integer codes (run.py --codes, FINN's driver's way): the same answers, the host's
    # quantizer not run; a code that is none of the quantizer's, or floats, refused in one line
    entry = json.loads((tmp_path / "dataflow" / "plan.json").read_text())["codes_input"]
    assert entry["skipped"] == ["sf0_arm_cpu"] and entry["inputs"][0]["shape"] == [1, 784]
    codes = np.where(2 * data["x"].reshape(len(data["x"]), -1) - 1 >= 0, 1, -1).astype(np.int8)  # 2x - 1, its sign
    for name, array in (("codes", codes), ("zeros", np.zeros_like(codes)), ("floats", codes.astype(np.float32))):
        np.save(tmp_path / f"{name}.npy", array)
    result = run_py(tmp_path / "dataflow", "--emulate", "--codes", "--input", tmp_path / "codes.npy", "--output",
                    tmp_path / "from_codes.npy", "--batch", "8")
    assert result.returncode == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "from_codes.npy").reshape(data["y"].shape), answers["dataflow"])
    for name, why in (("zeros", "code 0 (sample 0, element 0) is not one of its quantizer's codes (-1, 1)"),
                      ("floats", "holds float32: --codes takes the quantizer's integer codes")):
        result = run_py(tmp_path / "dataflow", "--emulate", "--codes", "--input", tmp_path / f"{name}.npy")
        assert result.returncode == 2 and why in result.stderr and len(result.stderr.strip().splitlines()) == 1
    events = run_on_fake_pynq(tmp_path / "dataflow", tmp_path / "board", codes[:5], "--batch", "5", "--codes")
    assert [e[1:3] for e in events if e[0] == "allocate"][:2] == [[[8 * 2 * 13], "uint32"], [[8 * 10], "float32"]]
    # the port's 13 words take 13 cycles: the slowest unit, not the port, sets the interval
    # sequential: 98 buffer words of 16-bit values; 10 floats out, two a word (the PYNQ-Z2's DDR port's 12 bytes)
    assert tops["dataflow"].port_cycles == 98 + 10 // 2
    assert tops["dataflow"].dataflow_interval_cycles < 196


FINN_PARALLEL_REUSE = {"node_linear": 56, "node_linear_1": 64, "node_linear_2": 64, "node_linear_3": 8}


def test_a_dense_layer_of_signs_is_an_xnor_and_a_popcount_and_no_other_is(tmp_path, capsys):
    """TFC-w1a1's four layers multiply signs by signs (weights -1 and +1, inputs a BipolarQuant's): the folding
    gives them hetdeploy's XNOR-popcount kernel, fewer LUTs than hls4ml's multiply-accumulate at the same reuse
    factors (FINN's parallelism). TFC-w1a2's 2-bit activations are no signs: none of its layers takes it, and
    pinning it there is refused in one line."""
    from hetdeploy.planning import units
    from hetdeploy.steps.build import plan_stages

    def fpga_units(model: str, **settings) -> list:
        options = BuildOptions(model=DATA / model, board="pynq-z2", out_dir=tmp_path, objective="throughput",
                               batch=1000, **settings)
        _, _, plan = plan_stages(options, lambda k, what: None)
        return next(s for s in plan.subfunctions if s.kind == "fpga").execution_units

    assert [u.strategy for u in fpga_units("tfc_1w1a.onnx")] == [units.XNOR_POPCOUNT] * 4
    pinned = {strategy: fpga_units("tfc_1w1a.onnx", reuse_factors=FINN_PARALLEL_REUSE,
                                   strategies={n: strategy for n in FINN_PARALLEL_REUSE})
              for strategy in (units.XNOR_POPCOUNT, "Resource")}
    for xnor, resource in zip(pinned[units.XNOR_POPCOUNT], pinned["Resource"]):
        assert (xnor.strategy, xnor.reuse_factor) == (units.XNOR_POPCOUNT, resource.reuse_factor)
        assert xnor.estimate["lut"] < resource.estimate["lut"]
        assert xnor.estimate["compute_cycles"] == resource.estimate["compute_cycles"]
    assert sum(u.estimate["lut"] for u in pinned[units.XNOR_POPCOUNT]) < \
        0.6 * sum(u.estimate["lut"] for u in pinned["Resource"])
    assert units.XNOR_POPCOUNT not in {u.strategy for u in fpga_units("tfc_1w2a.onnx")}
    code = main(["plan", str(DATA / "tfc_1w2a.onnx"), "--board", "pynq-z2", "--objective", "throughput", "--batch",
                 "1000", "--strategy", "node_linear_1=xnor_popcount"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "node 'node_linear_1' is not a layer of signs" in err


@pytest.mark.slow
@pytest.mark.parametrize("network, reuse, resource_kernels, settings", [
    # FINN's parallelism, but the third layer's outputs folded too (128 iterations of its 64 inputs)
    ("tfc_1w1a", {**FINN_PARALLEL_REUSE, "node_linear_2": 128},
     ["DenseResource_rf_leq_nin"] * 2 + ["DenseResource_rf_gt_nin_rem0", "DenseResource_rf_leq_nin"],
     {"objective": "throughput", "batch": 8}),
    # three unpadded binary convolutions (4 of a window's 36 inputs an iteration; a 1 x 1, hls4ml's pointwise layer,
    # its outputs folded in two passes; 2 of 72) and a binary classifier, 8 of its 128 inputs an iteration
    ("binarised_cnn", {"node_Conv_103": 9, "node_Conv_104": 16, "node_Conv_105": 36, "node_linear": 16},
     ["DenseResource_rf_leq_nin", "DenseResource_rf_gt_nin_rem0", "DenseResource_rf_leq_nin",
      "DenseResource_rf_leq_nin"], {"policy": "support"}),
])
def test_the_xnor_popcount_kernel_answers_as_hls4mls_multiply_accumulate_bit_for_bit(
        network, reuse, resource_kernels, settings, tmp_path):
    """A binarised network built under hetdeploy's XNOR-popcount kernel and under hls4ml's resource strategy at the
    same reuse factors, its inputs folded and its outputs too: each unit's C++ names its kernel, the two emulate
    Brevitas' 16 exported samples alike bit for bit, within 0.1 % of Brevitas' peak, and every unit of the XNOR build
    that ends in a sign is bit-exact against onnxruntime."""
    from hetdeploy.planning import units

    data = np.load(DATA / f"{network}.npz")
    answers = {}
    for strategy, kernels in ((units.XNOR_POPCOUNT, ["DenseXnorPopcount"] * len(reuse)),
                              ("Resource", resource_kernels)):
        out = tmp_path / strategy
        plan = build(BuildOptions(model=DATA / f"{network}.onnx", board="pynq-z2", out_dir=out, reuse_factors=reuse,
                                  strategies={n: strategy for n in reuse}, **settings), progress=lambda message: None)
        fpga = next(s for s in plan.subfunctions if s.kind == "fpga")
        kernel_units = [u for u in fpga.execution_units if u.pe in ("dense", "conv")]
        assert [u.strategy for u in kernel_units] == [strategy] * len(reuse)
        for unit, kernel in zip(kernel_units, kernels):
            parameters = (out / unit.hls.project / "firmware" / "parameters.h").read_text()
            assert f"using kernel = nnet::{kernel}<" in parameters
        if strategy == units.XNOR_POPCOUNT:
            assert [u.verification.agreement for u in kernel_units[:-1]] == ["bit-exact"] * (len(reuse) - 1)
        answers[strategy] = load(out).predict(data["x"])[0].reshape(data["y"].shape)
    assert np.array_equal(answers[units.XNOR_POPCOUNT], answers["Resource"])
    assert np.max(np.abs(answers["Resource"] - data["y"])) <= 1e-3 * np.max(np.abs(data["y"]))
