"""--error-budget: the search on its own (pure), the fixed-point simulation against onnxruntime, and the
search on the jet-tagger MLP through plan and build."""

import json

import numpy as np
import onnx
import pytest

import networks
from hetdeploy.commands.cli import main
from hetdeploy.core.board import load_board
from hetdeploy.core.graph import Graph, Node
from hetdeploy.intake.model import load_model
from hetdeploy.intake.ort_adapter import run_in_memory
from hetdeploy.planning.config import settle_options
from hetdeploy.running import budget, runtime
from hetdeploy.running.samples import build_samples
from hetdeploy.steps.build import BuildOptions, build


def test_search_finds_the_least_bits_per_layer_within_budget():
    """An error that each layer adds 2**-bits of, weighted: the search lowers the cheap-to-lower
    layer further and stays within budget; every evaluation it makes is counted."""
    weight = {"a": 1.0, "b": 8.0}

    def error(widths):
        return sum(weight[layer] * 2.0 ** -bits for layer, bits in widths.items())

    result = budget.search_widths(["a", "b"], {"a": 10.0, "b": 1.0}, error, budget=0.05, start=16)
    assert result.error == error(result.widths) <= 0.05
    assert result.widths["a"] < result.widths["b"]  # "b" errs 8x more per bit
    for layer in result.widths:  # one bit fewer anywhere breaks the budget
        assert error({**result.widths, layer: result.widths[layer] - 1}) > 0.05
    assert result.evaluations > 2


def test_search_reports_a_budget_missed_at_the_start_width():
    result = budget.search_widths(["a"], {}, lambda widths: 1.0, budget=0.05, start=16)
    assert result.widths == {"a": 16} and result.error == 1.0


def test_layers_are_the_execution_units_the_board_cuts():
    """A layer is a unit of the FPGA's processing elements: an activation, a Softmax after a Gemm, join
    the layer before them; a node the FPGA does not run starts none."""
    fpga = next(d for d in load_board("pynq-z2").devices if d.kind == "fpga")
    nodes = [Node("fc", "Gemm", ["x"], ["a"]), Node("act", "Relu", ["a"], ["b"]),
             Node("lrn", "LRN", ["b"], ["c"]), Node("fc2", "Gemm", ["c"], ["d"]), Node("sm", "Softmax", ["d"], ["e"])]
    graph = Graph(nodes, ["x"], ["e"])
    assert budget.layer_groups(graph, lambda i: nodes[i].op != "LRN", fpga) == \
        {"fc": ["fc", "act"], "fc2": ["fc2", "sm"]}


@pytest.fixture(scope="module")
def jet_tagger(tmp_path_factory):
    path = tmp_path_factory.mktemp("budget") / "jet_tagger_mlp.onnx"
    onnx.save(networks.NETWORKS["jet_tagger_mlp"](), str(path))
    return path


def test_fixed_point_simulation_converges_on_the_model(jet_tagger):
    """The simulated model at 24 bits is the float model to within the Softmax tables' resolution
    (2e-3 of the output's peak); at 4 bits it is far off: the simulation sees the width."""
    loaded = load_model(jet_tagger)
    fpga = next(d for d in load_board("pynq-z2").devices if d.kind == "fpga")
    groups = budget.layer_groups(loaded.graph, lambda i: fpga.why_not(loaded.graph.nodes[i]) is None, fpga)
    samples = [{"input": np.random.default_rng(k).normal(size=[1, 16]).astype(np.float32)} for k in range(4)]
    error = budget.error_function(loaded.model, groups, samples, run_in_memory)
    assert error({layer: 24 for layer in groups}) < 2e-3
    assert error({layer: 4 for layer in groups}) > 0.05
    # the Softmax through tables of the entries --table-size gives its layer: 16 are coarse
    (softmax_layer,) = [first for first, nodes in groups.items()
                        if any(loaded.graph.nodes[loaded.graph.node_index()[n]].op == "Softmax" for n in nodes)]
    coarse = budget.error_function(loaded.model, groups, samples, run_in_memory, table_sizes={softmax_layer: 16})
    assert coarse({layer: 24 for layer in groups}) > 10 * error({layer: 24 for layer in groups})


@pytest.mark.slow
def test_error_budget_on_the_jet_tagger(jet_tagger, tmp_path, capsys):
    """plan --error-budget gives every layer fewer than 16 bits and the estimate follows; the build
    then holds the budget in C-simulation (widening where the simulation was optimistic)."""
    assert main(["plan", str(jet_tagger), "--board", "pynq-z2", "--policy", "support", "--json",
                 "--error-budget", "0.05"]) == 0
    plan = json.loads(capsys.readouterr().out)
    widths = plan["precision_search"]["layer_widths"]
    assert widths and all(bits < 16 for bits in widths.values())
    # the search simulates the Softmax at the table size given: 16 entries miss the budget at any width
    assert main(["plan", str(jet_tagger), "--board", "pynq-z2", "--policy", "support", "--error-budget", "0.05",
                 "--table-size", "/softmax/Softmax=16"]) == 2
    assert "even at --width 16 bits the simulated relative error is" in capsys.readouterr().err
    assert plan["precision_search"]["simulated_error"] <= 0.05
    built = build(BuildOptions(model=jet_tagger, board="pynq-z2", out_dir=tmp_path / "b", policy="support",
                               error_budget=0.05, relative_tolerance=0.05), progress=lambda message: None)
    check = built.subfunctions[0].verification
    assert check.passed and all(o.max_abs_error <= 0.05 * o.peak for o in check.outputs)
    assert all(u.precision.startswith("ap_fixed<") and int(u.precision[9:].split(",")[0]) < 16
               for u in built.subfunctions[0].execution_units)

    # the search's simulation at the widths the build ended with (after its widening), sized on the
    # build's sizing samples and run on its verification samples: the C-simulation's error exactly
    options = BuildOptions(model=jet_tagger, board="pynq-z2", out_dir=tmp_path / "b", policy="support")
    options = settle_options(options)
    loaded = load_model(jet_tagger)
    samples = build_samples(options, loaded.inputs)
    feeds = [[runtime.model_feeds(loaded.input_reshapes, s) for s in chosen]
             for chosen in (samples.sizing, samples.verification)]
    groups, widths, table_sizes = budget.built_layers(built.subfunctions[0].execution_units)
    simulated = budget.error_function(loaded.model, groups, feeds[0], run_in_memory, measured_on=feeds[1],
                                      table_sizes=table_sizes)
    built_error = max(o.max_abs_error / o.peak for o in check.outputs)
    assert built_error > 0
    assert simulated(widths) == pytest.approx(built_error, rel=1e-9)


def test_error_budget_mistakes_are_one_line(jet_tagger, tmp_path, capsys):
    import quantized_models

    with pytest.raises(SystemExit) as exit_code:
        main(["plan", str(jet_tagger), "--board", "pynq-z2", "--error-budget", "1.5"])
    assert exit_code.value.code == 2 and "expected a fraction above 0 and below 1" in capsys.readouterr().err
    quantized = tmp_path / "q.onnx"
    onnx.save(quantized_models.qonnx_mlp(), str(quantized))
    assert main(["plan", str(quantized), "--board", "pynq-z2", "--error-budget", "0.05"]) == 2
    err = capsys.readouterr().err
    assert "quantized already" in err and len(err.strip().splitlines()) == 1


def test_the_budget_measures_error_as_verify_does():
    """One measure (verify's): the worst output's max abs error over its own peak; a NaN or Inf on either
    side is an infinite error (a NaN in the reference used to score 0), and so is any error against an
    all-zero output (which used to be judged against a peak of 1)."""
    ones, zeros = np.ones((1, 4), np.float32), np.zeros((1, 4), np.float32)
    assert budget.relative_error([{"y": 0.9 * ones}], [{"y": ones}]) == pytest.approx(0.1)
    assert budget.relative_error([{"y": ones, "z": 100 * ones}], [{"y": ones, "z": 50 * ones}]) == 1.0
    with_nan = ones.copy()
    with_nan[0, 1] = np.nan
    assert budget.relative_error([{"y": ones}], [{"y": with_nan}]) == float("inf")
    assert budget.relative_error([{"y": with_nan}], [{"y": ones}]) == float("inf")
    assert budget.relative_error([{"y": 0.01 * ones}], [{"y": zeros}]) == float("inf")
    assert budget.relative_error([{"y": zeros}], [{"y": zeros}]) == 0.0


def test_the_simulation_rounds_and_saturates_as_the_build_does():
    """The search's fixed-point graph holds a value as the build's ap_fixed<W,I,AP_RND,AP_SAT> does
    (precision.quantize): halves round up (ONNX's Round would take 2.5 steps to 2), beyond the range
    saturates."""
    from onnx import TensorProto, helper

    from hetdeploy.core.precision import quantize

    nodes, inits = [], []
    out = budget._fake_fixed(nodes, inits, "x", 8, 3, "x.fixed")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 9])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 9])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    step = 2.0 ** -5
    x = np.array([[2.5 * step, -2.5 * step, 3.5 * step, -0.5 * step, 0.5 * step, 0.3, 100.0, -100.0, 0.0]],
                 np.float32)
    (result,) = run_in_memory(model, [{"x": x}])
    np.testing.assert_array_equal(result[out].reshape(-1), quantize(x.reshape(-1), 8, 3))
    assert quantize(np.array([2.5 * step]), 8, 3)[0] == 3 * step  # half up, not to even
