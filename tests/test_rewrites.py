"""Each rewrite of intake on its own (the model before and after agree on onnxruntime), then the
whole intake on what exporters write, and the ONNX model-zoo topologies the onnx package ships."""

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper, shape_inference

from hetdeploy.core.board import available_boards, load_board
from hetdeploy.core.errors import UserError
from hetdeploy.intake import rewrites
from hetdeploy.intake.model import load_model

RNG = np.random.default_rng(0)


def const(name, shape, scale=1.0):
    return numpy_helper.from_array((RNG.normal(size=shape) * scale).astype(np.float32), name)


def model_of(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def feeds_for(model):
    return {i.name: RNG.normal(size=[d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def rewritten(model, rewrite):
    """Apply one rewrite; check it changed the model and that onnxruntime agrees before and after."""
    before = onnx.ModelProto()
    before.CopyFrom(model)
    after = shape_inference.infer_shapes(model)
    assert rewrite(after)
    onnx.checker.check_model(after)
    feeds = feeds_for(before)
    for got, want in zip(run(after, feeds), run(before, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    return after


def ops(model):
    return [n.op_type for n in model.graph.node]


def test_eliminate_identity_and_dropout_with_unused_mask():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Dropout", ["a"], ["b", "mask"], name="drop"),
             helper.make_node("Identity", ["b"], ["y"], name="id")]
    after = rewritten(model_of(nodes, [("x", [1, 4])], [("y", [1, 4])]), rewrites.eliminate_identity)
    assert ops(after) == ["Relu"] and after.graph.node[0].output[0] == "y"


@pytest.mark.parametrize("op", ["Concat", "Sum", "Max", "Min", "Mean"])
def test_an_op_of_any_number_of_tensors_given_one_is_removed(op):
    """torchvision's DenseNet concatenates its block's first input alone (hls4ml's Concat of one fails)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node(op, ["a"], ["b"], name="one", **({"axis": 1} if op == "Concat" else {})),
             helper.make_node("Neg", ["b"], ["y"], name="neg")]
    after = rewritten(model_of(nodes, [("x", [1, 4])], [("y", [1, 4])]), rewrites.eliminate_identity)
    assert ops(after) == ["Relu", "Neg"] and after.graph.node[1].input[0] == "a"


def test_conv_without_kernel_shape_and_same_upper_padding_get_explicit_attributes():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", auto_pad="SAME_UPPER", strides=[2, 2]),
             helper.make_node("MaxPool", ["c"], ["y"], name="pool", kernel_shape=[2, 2], auto_pad="SAME_LOWER")]
    model = model_of(nodes, [("x", [1, 2, 7, 7])], [("y", [1, 3, 4, 4])], [const("w", [3, 2, 4, 4])])
    after = rewritten(model, rewrites.explicit_attributes)
    conv, pool = after.graph.node
    assert rewrites.attribute(conv, "kernel_shape") == [4, 4]
    assert rewrites.attribute(conv, "pads") == [1, 1, 2, 2] and rewrites.attribute(conv, "auto_pad") == "NOTSET"
    assert rewrites.attribute(conv, "dilations") == [1, 1] and rewrites.attribute(conv, "group") == 1
    assert rewrites.attribute(pool, "pads") == [1, 1, 0, 0] and rewrites.attribute(pool, "strides") == [1, 1]


def test_gemm_alpha_beta_and_trans_a_are_normalised():
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", alpha=0.5, beta=2.0, transA=1, transB=1)]
    model = model_of(nodes, [("x", [6, 1])], [("y", [1, 3])], [const("w", [3, 6]), const("b", [3])])
    after = rewritten(model, rewrites.normalise_gemm)
    assert ops(after) == ["Transpose", "Gemm"]
    gemm = after.graph.node[1]
    assert (rewrites.attribute(gemm, "alpha"), rewrites.attribute(gemm, "beta"), rewrites.attribute(gemm, "transA")) \
        == (1.0, 1.0, 0)


def test_matmul_and_bias_add_become_gemm():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="dense"),
             helper.make_node("Add", ["m", "b"], ["y"], name="bias")]
    model = model_of(nodes, [("x", [1, 5])], [("y", [1, 3])], [const("w", [5, 3]), const("b", [1, 3])])
    after = rewritten(model, rewrites.matmul_add_to_gemm)
    assert ops(after) == ["Gemm"] and after.graph.node[0].name == "dense"


@pytest.mark.parametrize("layer", ["Conv", "Gemm"])
def test_batchnorm_folds_into_the_layer_before(layer):
    if layer == "Conv":
        first = helper.make_node("Conv", ["x", "w"], ["c"], name="layer", kernel_shape=[3, 3])
        shapes, inits = ([("x", [1, 2, 5, 5])], [("y", [1, 4, 3, 3])]), [const("w", [4, 2, 3, 3])]
    else:
        first = helper.make_node("Gemm", ["x", "w", "wb"], ["c"], name="layer", transB=1)
        shapes, inits = ([("x", [1, 6])], [("y", [1, 4])]), [const("w", [4, 6]), const("wb", [4])]
    bn = helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], name="bn", epsilon=1e-3)
    stats = [const("s", [4]), const("b", [4]), const("m", [4]),
             numpy_helper.from_array(RNG.uniform(0.5, 2, 4).astype(np.float32), "v")]
    after = rewritten(model_of([first, bn], *shapes, inits + stats), rewrites.fold_batchnorm)
    assert ops(after) == [layer]


def test_bias_add_after_conv_joins_its_bias():
    nodes = [helper.make_node("Conv", ["x", "w", "cb"], ["c"], name="conv", kernel_shape=[3, 3]),
             helper.make_node("Add", ["b", "c"], ["y"], name="bias")]
    model = model_of(nodes, [("x", [1, 1, 6, 6])], [("y", [1, 4, 4, 4])],
                     [const("w", [4, 1, 3, 3]), const("cb", [4]), const("b", [4, 1, 1])])
    assert ops(rewritten(model, rewrites.fold_bias_add)) == ["Conv"]


def test_reshape_that_flattens_is_flatten():
    shape = numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="flat")]
    after = rewritten(model_of(nodes, [("x", [1, 2, 3, 3])], [("y", [1, 18])], [shape]), rewrites.reshape_to_flatten)
    assert ops(after) == ["Flatten"] and after.graph.node[0].name == "flat"


@pytest.mark.parametrize("keepdims", [1, 0])
def test_reduce_mean_over_space_is_global_average_pool(keepdims):
    nodes = [helper.make_node("ReduceMean", ["x"], ["y"], name="gap", axes=[2, 3], keepdims=keepdims)]
    out = [1, 3, 1, 1] if keepdims else [1, 3]
    after = rewritten(model_of(nodes, [("x", [1, 3, 4, 4])], [("y", out)]),
                      rewrites.reduce_mean_to_global_average_pool)
    assert ops(after) == (["GlobalAveragePool"] if keepdims else ["GlobalAveragePool", "Flatten"])


def test_reduce_mean_with_axes_as_input_opset_18():
    axes = numpy_helper.from_array(np.array([-1, -2], dtype=np.int64), "axes")
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="gap")]
    model = model_of(nodes, [("x", [1, 3, 4, 4])], [("y", [1, 3, 1, 1])], [axes], opset=18)
    assert ops(rewritten(model, rewrites.reduce_mean_to_global_average_pool)) == ["GlobalAveragePool"]


def test_sum_of_three_is_a_chain_of_adds_and_concat_of_three_a_chain_of_pairs():
    nodes = [helper.make_node("Sum", ["a", "b", "c"], ["s"], name="sum"),
             helper.make_node("Concat", ["a", "s", "c"], ["y"], name="cat", axis=1)]
    model = model_of(nodes, [(n, [1, 2, 3, 3]) for n in "abc"], [("y", [1, 6, 3, 3])])
    after = rewritten(model, rewrites.sum_to_add)
    assert ops(after) == ["Add", "Add", "Concat"]
    after = rewritten(after, rewrites.split_concat)
    assert ops(after) == ["Add", "Add", "Concat", "Concat"]
    assert [n.name for n in after.graph.node][-1] == "cat"


def test_a_concat_of_an_earlier_concats_inputs_and_more_starts_from_that_concats_output():
    """torchvision's DenseNet concatenates all of a block's features before each layer: Concat(x0, x1), then
    Concat(x0, x1, x2), ... Each becomes one Concat of the longest earlier Concat of a prefix of its inputs (along
    the same axis: -3 is 1 at rank 4) and the rest, the same values; a Concat along another axis starts afresh."""
    nodes = [helper.make_node("Concat", ["a", "b"], ["ab"], name="first", axis=1),
             helper.make_node("Concat", ["a", "b", "c"], ["abc"], name="second", axis=-3),
             helper.make_node("Concat", ["a", "b", "c", "d"], ["y"], name="third", axis=1),
             helper.make_node("Concat", ["a", "b", "c"], ["z"], name="across", axis=2)]
    model = model_of(nodes, [(n, [1, 2, 3, 3]) for n in "abcd"], [("ab", [1, 4, 3, 3]), ("abc", [1, 6, 3, 3]),
                                                                     ("y", [1, 8, 3, 3]), ("z", [1, 2, 9, 3])])
    after = rewritten(model, rewrites.split_concat)
    assert [(n.name, list(n.input)) for n in after.graph.node] == [
        ("first", ["a", "b"]), ("second", ["ab", "c"]), ("third", ["abc", "d"]),
        ("across.part1", ["a", "b"]), ("across", ["across.part1_output", "c"])]


def save(tmp_path, model, name="m.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def test_old_pytorch_flatten_and_constant_subgraphs_fold_and_are_traced(tmp_path):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (older torch.onnx flatten), weights made by
    ConstantOfShape and a Dropout, at opset 9: intake gives Conv, Relu, Flatten, Gemm, and node_map
    says where each removed node went."""
    scalar = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)  # noqa: E731
    nodes = [
        helper.make_node("ConstantOfShape", ["wshape"], ["w"], name="make_w",
                         value=numpy_helper.from_array(np.array([0.1], dtype=np.float32))),
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Dropout", ["r"], ["d"], name="drop"),
        helper.make_node("Shape", ["d"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["n"], ["n1"], name="unsqueeze", axes=[0]),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["d", "target"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["y"], name="fc", transB=1),
    ]
    inits = [scalar("wshape", [4, 2, 3, 3]), scalar("zero", 0), scalar("minus_one", [-1]),
             const("fc", [5, 4 * 4 * 4]), const("fcb", [5])]
    model = model_of(nodes, [("x", [1, 2, 6, 6])], [("y", [1, 5])], inits, opset=9)
    model.ir_version = 4
    loaded = load_model(save(tmp_path, model))
    assert [n.op for n in loaded.graph.nodes] == ["Conv", "Relu", "Flatten", "Gemm"]
    assert rewrites.default_opset(loaded.model) == rewrites.MIN_OPSET
    assert loaded.traced["make_w"] == "conv" and loaded.traced["drop"] in ("relu", "flatten")
    assert loaded.traced["gather"] == "flatten" and loaded.traced["concat"] == "flatten"
    feeds = feeds_for(model)
    np.testing.assert_allclose(run(loaded.model, feeds)[0], run(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_ir3_model_zoo_style_initializer_inputs_load(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3])]
    model = model_of(nodes, [("x", [1, 1, 5, 5])], [("y", [1, 2, 3, 3])], [const("w", [2, 1, 3, 3])], opset=8)
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 1, 3, 3]))
    model.ir_version = 3
    loaded = load_model(save(tmp_path, model))
    assert [i.name for i in loaded.inputs] == ["x"] and loaded.graph.nodes[0].constants == {1: "w"}


def test_sklearn_style_classifier_with_ml_ops_runs_on_the_cpu(tmp_path):
    """MatMul + Add dense layers (skl2onnx) become Gemms; ai.onnx.ml's ArgMax-like
    ArrayFeatureExtractor stays and is given to the CPU, which runs onnxruntime."""
    from hetdeploy.planning.partition import partition_graph

    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="MatMul"),
             helper.make_node("Add", ["m", "b"], ["h"], name="Add"),
             helper.make_node("Relu", ["h"], ["r"], name="Relu"),
             helper.make_node("ArrayFeatureExtractor", ["r", "idx"], ["y"], name="pick", domain="ai.onnx.ml")]
    idx = numpy_helper.from_array(np.array([0, 2], dtype=np.int64), "idx")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
                              [const("w", [8, 4]), const("b", [4]), idx])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    loaded = load_model(save(tmp_path, model))
    assert [n.op for n in loaded.graph.nodes] == ["Gemm", "Relu", "ArrayFeatureExtractor"]
    result = partition_graph(loaded.graph, load_board("pynq-z2"), "support")
    assert result.cuts[-1].device == "arm_cpu" and "pick" in result.cuts[-1].nodes


@pytest.mark.slow
def test_a_zipmap_classifier_gives_its_probabilities_as_a_tensor_and_builds(tmp_path):
    """skl2onnx's classifier pattern: dense layers, Softmax, ArgMax for the label and ZipMap for the
    probabilities (a sequence of maps). The probabilities become a tensor output; the build's
    reference gives the user's model's maps the same form and the two agree."""
    from hetdeploy.commands.cli import main

    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="MatMul"),
             helper.make_node("Add", ["m", "b"], ["h"], name="Add"),
             helper.make_node("Softmax", ["h"], ["p"], name="Softmax", axis=1),
             helper.make_node("ArgMax", ["p"], ["label"], name="ArgMax", axis=1, keepdims=0),
             helper.make_node("ZipMap", ["p"], ["probabilities"], name="ZipMap", domain="ai.onnx.ml",
                              classlabels_int64s=[0, 1, 2])]
    seq = helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64,
                                                                     helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [1]),
                               helper.make_value_info("probabilities", seq)], [const("w", [6, 3]), const("b", [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)])
    model.ir_version = 8
    path = save(tmp_path, model)
    loaded = load_model(path)
    assert [o.name for o in loaded.outputs] == ["label", "probabilities"] and loaded.outputs[1].shape == [1, 3]
    assert "ZipMap" not in [n.op for n in loaded.graph.nodes]  # an Identity where Softmax has other readers
    out = tmp_path / "build"
    assert main(["build", str(path), "--board", "pynq-z2", "-o", str(out)]) == 0
    assert main(["emulate", str(out)]) == 0


def test_a_sequence_output_is_refused_in_one_line(tmp_path):
    nodes = [helper.make_node("SplitToSequence", ["x"], ["y"], name="split", axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_value_info("y", helper.make_sequence_type_proto(
                                  helper.make_tensor_type_proto(TensorProto.FLOAT, None)))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    with pytest.raises(UserError, match=r"node 'split' \(SplitToSequence\): its output 'y' is not a tensor"):
        load_model(save(tmp_path, model))


ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.mark.parametrize("name", sorted(p.stem for p in ZOO.glob("light_*.onnx")))
def test_model_zoo_topologies_plan_on_every_board_with_every_node_accounted_for(name):
    """Every node of the user's model placed, folded into one placed, or removed; and the latency policy's
    plan, folded and estimated as `plan` does, never estimated slower than a support plan that fits nor
    than all on the host CPU; on the KV260, most of its MACs on the FPGA (``_keeps_its_macs_on_the_kv260s_fpga``)."""
    from hetdeploy.steps.build import BuildOptions
    from hetdeploy.steps.plan_model import against_baselines, folded_plan, map_nodes

    loaded = load_model(ZOO / f"{name}.onnx")
    user_nodes = [n.name or f"{n.op_type}_{k}" for k, n in enumerate(onnx.load(str(ZOO / f"{name}.onnx")).graph.node)]
    assert list(loaded.traced) == user_nodes
    for board_name in available_boards():
        board = load_board(board_name)
        options = BuildOptions(model=ZOO / f"{name}.onnx", board=board_name, out_dir=Path("."))
        try:
            plan = against_baselines(folded_plan(loaded, board, options), loaded, board, options)
        except UserError as error:
            # refused only where its float32 weights exceed the host's memory and the FPGA cannot take the
            # rest (VGG-19 on a PYNQ-Z2: 548 MiB; its 25,088-input dense layer needs 401,408 FF of input
            # registers under io_parallel)
            weights = sum(node.constant_elements for node in loaded.graph.nodes) * 4
            assert "does not fit" in str(error) and weights > board.device(board.host).memory.bytes, error
            continue
        estimate = plan.estimate
        assert not estimate.support_fits or estimate.latency_s <= estimate.support_latency_s * (1 + 1e-12)
        assert estimate.all_cpu_latency_s is None or estimate.latency_s <= estimate.all_cpu_latency_s * (1 + 1e-12)
        if board_name == "kv260":
            _keeps_its_macs_on_the_kv260s_fpga(name, loaded.graph, plan, board)
        node_map = map_nodes(plan, loaded)
        assert list(node_map) == user_nodes
        placed = {n for s in plan.subfunctions for n in s.nodes}
        for where in node_map.values():
            assert where.get("subfunction") or where.get("folded_into") or where.get("removed")
            if "folded_into" in where:
                assert where["folded_into"] in placed


def _keeps_its_macs_on_the_kv260s_fpga(name, graph, plan, board):
    """The model zoo's CNNs as the onnx package ships them (exported from Caffe2: DenseNet-121's BatchNormalizations
    followed by a Mul and an Add a channel, which intake makes one BatchNormalization; Inception v2's and
    ShuffleNet's average pooling over padding it does not count, on the top; ShuffleNet's and AlexNet's grouped
    convolutions and AlexNet's 11 x 11 stem on the engine alone; AlexNet's and ZFNet's LRNs on the top): at least
    90 % of their convolution and matrix MACs on the KV260's FPGA, estimated at least 2x faster than all on the A53s
    (ShuffleNet 1.1x: its 140 M multiply-accumulates are mostly depthwise convolutions, a group's one filter a tile
    of the engine's lanes); its engine holds weights in URAM, and the memory plan puts activations only in the URAM
    the engine leaves."""
    from hetdeploy.core.board import URAM_BYTES
    from hetdeploy.planning.cost import node_work

    macs = {n.name: node_work(n).macs for n in graph.nodes}
    assert sum(macs[n] for s in plan.subfunctions if s.kind == "fpga" for n in s.nodes) >= 0.9 * sum(macs.values())
    assert plan.estimate.all_cpu_latency_s >= (1.1 if name == "light_shufflenet" else 2) * plan.estimate.latency_s
    fpga_subs = [s for s in plan.subfunctions if s.kind == "fpga"]
    engine_uram = sum(u.estimate.get("uram", 0) for s in fpga_subs for u in s.execution_units)
    assert any(u.engine.uram_lanes for s in fpga_subs for u in s.execution_units if u.engine) and engine_uram > 0
    assert fpga_subs[0].memory.uram_target_bytes == (board.device("fpga").budget()["uram"] - engine_uram) * URAM_BYTES


@pytest.mark.parametrize("opset", [7, 9, 11, 13, 17, 21])
def test_every_opset_from_7_to_21_loads_and_plans(tmp_path, opset):
    from hetdeploy.steps.build import BuildOptions, plan_stages

    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], name="fc", transB=1)]
    model = model_of(nodes, [("x", [1, 2, 6, 6])], [("y", [1, 3])],
                     [const("w", [4, 2, 3, 3]), const("b", [4]), const("fc", [3, 36]), const("fcb", [3])], opset=opset)
    path = save(tmp_path, model)
    loaded = load_model(path)
    assert [n.op for n in loaded.graph.nodes] == ["Conv", "Relu", "MaxPool", "Flatten", "Gemm"]
    assert rewrites.default_opset(loaded.model) == max(opset, rewrites.MIN_OPSET)
    _, _, plan = plan_stages(BuildOptions(model=path, board="pynq-z2", out_dir=tmp_path, policy="support"),
                             lambda k, what: None)
    assert {s.kind for s in plan.subfunctions} == {"fpga"}
    feeds = feeds_for(model)
    np.testing.assert_allclose(run(loaded.model, feeds)[0], run(model, feeds)[0], rtol=1e-5, atol=1e-5)


QONNX = "qonnx.custom_op.general"


def _quant_model(bits, signed, narrow, mode, scale, zero_point, shape=(4, 16)):
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in
             (("scale", scale), ("zero_point", zero_point), ("bits", bits))]
    node = helper.make_node("Quant", ["x", "scale", "zero_point", "bits"], ["y"], name="q", domain=QONNX,
                            signed=signed, narrow=narrow, rounding_mode=mode)
    model = model_of([node], [("x", list(shape))], [("y", list(shape))], inits)
    model.opset_import.append(helper.make_opsetid(QONNX, 1))
    return model


@pytest.mark.parametrize("bits,signed,narrow,mode,scale,zero_point", [
    (4, 0, 0, "ROUND", 0.1726, 0), (8, 0, 0, "ROUND", 0.195, 164), (8, 1, 1, "ROUND", 0.0093, 0),
    (8, 1, 0, "ROUND", 0.0093, 0), (8, 0, 0, "ROUND", 0.1726, 0),
    (2, 1, 1, "ROUND", [[0.3], [0.2], [0.1], [0.5]], 0), (3, 1, 0, "FLOOR", 0.25, 0), (5, 0, 1, "CEIL", 0.3, 2),
    (1, 1, 0, "ROUND", 0.5, 0)])
def test_quantizers_as_standard_onnx_compute_what_qonnx_does(tmp_path, bits, signed, narrow, mode, scale, zero_point):
    """A CPU subfunction's Quant as a QuantizeLinear/DequantizeLinear pair (8 bits, full range, zero
    point 0) or Div/Add/Clip/Round/Sub/Mul (1-bit: the sign times the scale), run on onnxruntime alone:
    equal to qonnx's execution, ties at every half step and both rails included."""
    from hetdeploy.intake.qonnx_adapter import QonnxModel

    model = _quant_model(bits, signed, narrow, mode, scale, zero_point)
    onnx.save(model, str(tmp_path / "quant.onnx"))
    standard = onnx.ModelProto()
    standard.CopyFrom(model)
    assert rewrites.quantizers_as_standard_onnx(standard)
    assert all(n.domain == "" for n in standard.graph.node) and {o.domain for o in standard.opset_import} == {""}
    pair = bits == 8 and not narrow and zero_point == 0
    assert ([n.op_type for n in standard.graph.node] == ["QuantizeLinear", "DequantizeLinear"]) == pair
    reference = QonnxModel(tmp_path / "quant.onnx")
    step = float(np.max(scale))
    ties = (np.arange(-40, 40, dtype=np.float32) + np.float32(0.5)) * np.float32(step)  # every half step
    for x in [ties[:64].reshape(4, 16), RNG.normal(0, 20 * step, (4, 16)).astype(np.float32)]:
        np.testing.assert_array_equal(run(standard, {"x": x})[0], reference.run({"x": x})["y"])


@pytest.mark.parametrize("scale,zero_point,signed", [(0.195, 164, 0), (0.0273, 143, 0), (0.3, -5, 1)])
def test_a_qdq_models_quantizers_go_back_to_its_own_pairs(scale, zero_point, signed):
    """A QDQ model's quantizer with a zero point, back on the CPU, is the QuantizeLinear/DequantizeLinear
    pair it was (which rounds before adding the zero point; qonnx's Quant after: at a tie with an odd zero
    point they differ), equal to that pair on onnxruntime at every half step."""
    model = _quant_model(8, signed, 0, "ROUND", scale, zero_point)
    assert rewrites.quantizers_as_standard_onnx(model, zero_points_as_qdq=True)
    codes = TensorProto.INT8 if signed else TensorProto.UINT8
    pair = model_of([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                     helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], [("x", [4, 16])], [("y", [4, 16])],
                    [numpy_helper.from_array(np.array(scale, np.float32), "s"),
                     helper.make_tensor("z", codes, [], [zero_point])])
    ties = ((np.arange(64, dtype=np.float32) - 32 + np.float32(0.5)) * np.float32(scale)).reshape(4, 16)
    for x in [ties, RNG.normal(0, 40 * scale, (4, 16)).astype(np.float32)]:
        np.testing.assert_array_equal(run(model, {"x": x})[0], run(pair, {"x": x})[0])


def _qonnx_agree(tmp_path, model, rewrite, inputs, exact=True):
    """``rewrite`` changes ``model``, and qonnx's execution gives the same outputs before and after on
    each of ``inputs`` (exactly, or within float32 rounding)."""
    from hetdeploy.intake.qonnx_adapter import QonnxModel

    onnx.save(model, str(tmp_path / "before.onnx"))
    after = shape_inference.infer_shapes(model)
    assert rewrite(after)
    onnx.save(after, str(tmp_path / "after.onnx"))
    before, now = QonnxModel(tmp_path / "before.onnx"), QonnxModel(tmp_path / "after.onnx")
    name = model.graph.output[0].name
    for x in inputs:
        want, got = before.run({"x": x})[name], now.run({"x": x})[name]
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    return after


def _qonnx_model(nodes, shape, inits, opset=2):
    model = model_of(nodes, [("x", list(shape))], [("y", list(shape))],
                     [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in inits])
    model.opset_import.append(helper.make_opsetid(QONNX, opset))
    return model


@pytest.mark.parametrize("signed,narrow,out_scale,out_bits", [(0, 0, 0.25, 4), (1, 0, 0.5, 3), (1, 1, 0.125, 6),
                                                              (0, 0, 2.0 ** -5, 8)])
def test_trunc_is_two_quants_as_qonnx_computes_it(tmp_path, signed, narrow, out_scale, out_bits):
    """qonnx's Trunc v2 (Brevitas' TruncAvgPool2d: an input of 8-bit codes at scale 1/32, floored to
    the output's bits at its scale) as two Quants, equal to qonnx's own on every code of the input,
    a float32 step off the grid included; v1 the same."""
    node = helper.make_node("Trunc", ["x", "s", "z", "in_bits", "out_s", "out_bits"], ["y"], name="t", domain=QONNX,
                            signed=signed, narrow=narrow, rounding_mode="FLOOR")
    model = _qonnx_model([node], (1, 512), [("s", 2.0 ** -5), ("z", 0.0), ("in_bits", 8.0), ("out_s", out_scale),
                                            ("out_bits", float(out_bits))])
    codes = np.arange(-256, 256, dtype=np.float32).reshape(1, 512) * np.float32(2.0 ** -5)
    after = _qonnx_agree(tmp_path, model, rewrites.trunc_as_quants, [codes, np.nextafter(codes, np.float32(-9))])
    assert {n.op_type for n in after.graph.node} <= {"Quant", "Mul"}
    v1 = helper.make_node("Trunc", ["x", "s", "z", "in_bits", "out_bits"], ["y"], name="t", domain=QONNX,
                          rounding_mode="FLOOR")
    model = _qonnx_model([v1], (1, 512), [("s", 2.0 ** -5), ("z", 0.0), ("in_bits", 9.0),
                                          ("out_bits", float(out_bits))], opset=1)
    _qonnx_agree(tmp_path, model, rewrites.trunc_as_quants, [codes])


@pytest.mark.parametrize("bits,scale", [(2, 0.3), (4, 0.0714), (8, 2.0 ** -6)])
def test_an_unsigned_narrow_quant_is_the_full_range_one_clipped_at_its_top_code(tmp_path, bits, scale):
    """hls4ml refuses narrow unsigned quantizers: the full-range Quant and a Clip at the top code,
    equal to qonnx's narrow one at every half step and past both rails."""
    model = _quant_model(bits, 0, 1, "ROUND", scale, 0, shape=(1, 640))
    ties = ((np.arange(-64, 576, dtype=np.float32) + np.float32(0.5)) * np.float32(scale)).reshape(1, 640)
    after = _qonnx_agree(tmp_path, model, rewrites.narrow_unsigned_quant_as_clip, [ties])
    assert ops(after) == ["Quant", "Clip"] and rewrites.attribute(after.graph.node[0], "narrow") == 0


def test_a_batchnorm_before_a_sign_becomes_a_threshold_with_the_same_signs(tmp_path):
    """sign(a x + b) = sign(sign(a) x + b / |a|): negative, zero and positive factors; on integer
    accumulators, ties (a x + b = 0) included."""
    factor = np.array([0.5, -0.25, 0.0, 3.0, -1.0, 0.0], np.float32)
    shift = np.array([1.0, 0.75, -2.0, -6.0, 2.0, 0.0], np.float32)
    nodes = [helper.make_node("BatchNormalization", ["x", "a", "b", "m", "v"], ["t"], name="bn", epsilon=0.0),
             helper.make_node("BipolarQuant", ["t", "one"], ["y"], name="sign", domain=QONNX)]
    model = _qonnx_model(nodes, (9, 6), [("a", factor), ("b", shift), ("m", np.zeros(6)), ("v", np.ones(6)),
                                         ("one", 1.0)])
    accumulators = np.arange(-4, 5, dtype=np.float32)[:, None] * np.ones((1, 6), np.float32)
    after = _qonnx_agree(tmp_path, model, rewrites.batchnorm_before_sign_as_threshold, [accumulators])
    factor_name = after.graph.node[0].input[1]
    threshold = numpy_helper.to_array(next(t for t in after.graph.initializer if t.name == factor_name))
    assert set(np.abs(threshold).tolist()) <= {0.0, 1.0}


def test_a_bipolar_quant_of_another_scale_is_a_unit_one_and_an_affine_step(tmp_path):
    node = helper.make_node("BipolarQuant", ["x", "s"], ["y"], name="sign", domain=QONNX)
    model = _qonnx_model([node], (2, 3, 4, 4), [("s", np.array([0.5, 2.0, 0.125]).reshape(1, 3, 1, 1))])
    after = _qonnx_agree(tmp_path, model, rewrites.bipolar_scale_to_affine,
                         [RNG.normal(size=(2, 3, 4, 4)).astype(np.float32)])
    assert ops(after) == ["BipolarQuant", "BatchNormalization"]


@pytest.mark.parametrize("scale", [[0.3, 0.07, 0.5, 0.125], [0.25, 0.5, 0.125, 1.0]])
def test_a_per_channel_quant_is_one_of_codes_between_affine_steps(tmp_path, scale):
    """Brevitas' per-channel activation quantizers (scales [1, C, 1, 1]): codes by a per-channel affine
    step, a unit-scale Quant, back by another; qonnx's results off its rounding points (where x * (1 /
    s) and x / s may round apart in float32)."""
    model = _quant_model(4, 0, 0, "ROUND", np.array(scale).reshape(1, 4, 1, 1), 0, shape=(2, 4, 3, 3))
    x = RNG.uniform(0, 20, (2, 4, 3, 3)).astype(np.float32) * np.array(scale, np.float32).reshape(1, 4, 1, 1)
    x = np.where(np.abs(x / np.array(scale, np.float32).reshape(1, 4, 1, 1) % 1 - 0.5) < 0.01, 0, x)
    after = _qonnx_agree(tmp_path, model, rewrites.quant_scale_to_affine, [x.astype(np.float32)], exact=False)
    assert ops(after) == ["BatchNormalization", "Quant", "BatchNormalization"]


def test_arithmetic_with_a_neutral_constant_is_removed():
    """x - 0, x * 1 (BNN-PYNQ's TensorNorm at its default statistics): removed; 0 - x and x + 0 that
    broadcasts to a larger shape stay."""
    zero, one = numpy_helper.from_array(np.zeros(1, np.float32), "zero"), numpy_helper.from_array(
        np.ones(1, np.float32), "one")
    nodes = [helper.make_node("Sub", ["x", "zero"], ["a"], name="minus_zero"),
             helper.make_node("Mul", ["one", "a"], ["b"], name="times_one"),
             helper.make_node("Sub", ["zero", "b"], ["y"], name="negate")]
    after = rewritten(model_of(nodes, [("x", [1, 4])], [("y", [1, 4])], [zero, one]), rewrites.eliminate_identity)
    assert [n.name for n in after.graph.node] == ["negate"] and after.graph.node[0].input[1] == "x"
    widening = [helper.make_node("Add", ["x", "zeros"], ["y"], name="broadcast")]
    model = shape_inference.infer_shapes(model_of(widening, [("x", [1, 4])], [("y", [3, 4])],
                                                  [numpy_helper.from_array(np.zeros((3, 4), np.float32), "zeros")]))
    assert not rewrites.eliminate_identity(model)


@pytest.mark.parametrize("shape,layout,channels,count,scale,bias", [
    ((2, 6), "", 6, 3, 1.0, 0.0), ((2, 4, 3, 3), "", 4, 2, 0.5, -1.0), ((2, 3, 3, 4), "NHWC", 4, 3, 1.0, 0.0),
    ((2, 5), "", 1, 1, 2.0, -1.0)])
def test_a_multithreshold_is_a_sum_of_signs_as_qonnx_counts(tmp_path, shape, layout, channels, count, scale, bias):
    """FINN's MultiThreshold (thresholds per channel or shared, as many as the output has levels less
    one; FINN's bipolar form: one threshold, out_scale 2, out_bias -1) as Sub, BipolarQuant, Add and
    an affine step: qonnx's counts, the inputs on the thresholds included."""
    thresholds = np.sort(RNG.integers(-4, 5, (channels, count)).astype(np.float32), axis=1)
    attrs = {"out_dtype": "UINT2", "out_scale": scale, "out_bias": bias, **({"data_layout": layout} if layout else {})}
    node = helper.make_node("MultiThreshold", ["x", "t"], ["y"], name="mt", domain=QONNX, **attrs)
    model = _qonnx_model([node], shape, [("t", thresholds)], opset=1)
    x = RNG.integers(-5, 6, shape).astype(np.float32)
    after = _qonnx_agree(tmp_path, model, rewrites.multithreshold_as_signs, [x, x + np.float32(0.5)])
    assert "MultiThreshold" not in ops(after) and ops(after).count("BipolarQuant") == count


def test_a_batchnorm_between_unsqueeze_and_squeeze_is_one_on_the_tensor():
    """FINN's tidied models normalise [N, C] as [N, C, 1]: the BatchNormalization alone, on [N, C]."""
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    stats = [const(n, [5]) for n in ("g", "b", "m")] + [numpy_helper.from_array(np.ones(5, np.float32), "v")]
    nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["u"], name="unsqueeze"),
             helper.make_node("BatchNormalization", ["u", "g", "b", "m", "v"], ["n"], name="bn"),
             helper.make_node("Squeeze", ["n", "axes"], ["y"], name="squeeze")]
    after = rewritten(model_of(nodes, [("x", [1, 5])], [("y", [1, 5])], [axes, *stats]),
                      rewrites.batchnorm_without_squeezes)
    assert ops(after) == ["BatchNormalization"] and list(after.graph.node[0].input[:1]) == ["x"]


@pytest.mark.parametrize("kernel,stride,pads,extra,bias", [
    (3, 2, [0, 0, 0, 0], [0, 0], True), (3, 2, [1, 1, 1, 1], [1, 1], False), (4, 2, [1, 1, 1, 1], [0, 0], True),
    (2, 2, [0, 0, 0, 0], [0, 0], True), (5, 3, [2, 1, 0, 2], [0, 1], True), (3, 1, [1, 1, 1, 1], [0, 0], False),
    ((2, 3), 2, [0, 1, 0, 1], [0, 0], True)])
def test_a_conv_transpose_is_a_subpixel_conv_interleaved_and_cropped(kernel, stride, pads, extra, bias):
    """torch's and Brevitas' ConvTranspose2d (kernel, stride, padding, output_padding) as Conv ->
    DepthToSpace -> Slice: onnxruntime's ConvTranspose outputs."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    h, w = 5, 4
    out = [(h - 1) * stride - pads[0] - pads[2] + kh + extra[0], (w - 1) * stride - pads[1] - pads[3] + kw + extra[1]]
    inits = [const("w", [3, 2, kh, kw])] + ([const("b", [2])] if bias else [])
    node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if bias else []), ["y"], name="up",
                            strides=[stride, stride], pads=pads, output_padding=extra, kernel_shape=[kh, kw])
    after = rewritten(model_of([node], [("x", [1, 3, h, w])], [("y", [1, 2, *out])], inits),
                      rewrites.conv_transpose_as_conv)
    assert "ConvTranspose" not in ops(after) and ops(after)[:2] == ["Conv", "DepthToSpace"]


@pytest.mark.parametrize("binary", [False, True])
def test_a_quantized_conv_transpose_keeps_its_weight_quantizer_over_the_conv(tmp_path, binary):
    """Brevitas' QuantConvTranspose2d (its weight Quant per output channel): the Conv's weights are the
    same quantizer's, so that intake turns them into codes; binary weights (a BipolarQuant) a ternary
    Quant of their +-scale values, the kernel's missing taps 0; qonnx's outputs."""
    scale = np.array([0.25, 0.1], np.float32).reshape(1, 2, 1, 1)
    weight_quant = helper.make_node("BipolarQuant", ["w", "s"], ["wq"], name="wq", domain=QONNX) if binary else \
        helper.make_node("Quant", ["w", "s", "z", "bits"], ["wq"], name="wq", domain=QONNX, signed=1, narrow=1,
                         rounding_mode="ROUND")
    nodes = [weight_quant,
             helper.make_node("ConvTranspose", ["x", "wq"], ["y"], name="up", strides=[2, 2], pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3])]
    model = model_of(nodes, [("x", [1, 3, 4, 4])], [("y", [1, 2, 7, 7])],
                     [const("w", [3, 2, 3, 3]), numpy_helper.from_array(scale, "s"),
                      numpy_helper.from_array(np.array(0.0, np.float32), "z"),
                      numpy_helper.from_array(np.array(4.0, np.float32), "bits")])
    model.opset_import.append(helper.make_opsetid(QONNX, 1))
    after = _qonnx_agree(tmp_path, model, rewrites.conv_transpose_as_conv,
                         [RNG.normal(size=(1, 3, 4, 4)).astype(np.float32)], exact=False)
    assert ops(after) == ["Quant", "Conv", "DepthToSpace", "Slice"]


@pytest.mark.parametrize("shape,scale_shape", [((2, 5, 5, 4), (1, 1, 1, 4)), ((2, 6, 4), (1, 1, 4)),
                                               ((2, 5, 3, 4), (1, 5, 1, 1))])
def test_a_channels_last_quantizer_quantizes_on_axis_one_between_transposes(tmp_path, shape, scale_shape):
    """Brevitas' per-channel quantizers of NHWC and NWC tensors (scales along the last axis): between
    two Transposes that move that axis to 1 and back, as qonnx computes them; one on axis 1 stays."""
    scale = RNG.uniform(0.05, 0.5, scale_shape).astype(np.float32)
    model = _quant_model(4, 1, 0, "ROUND", scale, 0, shape=shape)
    if scale_shape[1] != 1:
        assert not rewrites.channel_quantizer_on_axis_one(shape_inference.infer_shapes(model))
        return
    after = _qonnx_agree(tmp_path, model, rewrites.channel_quantizer_on_axis_one,
                         [RNG.normal(0, 2, shape).astype(np.float32)])
    assert ops(after) == ["Transpose", "Quant", "Transpose"]
    assert list(numpy_helper.to_array(next(t for t in after.graph.initializer
                                           if t.name == after.graph.node[1].input[1])).shape[:2]) == [1, scale_shape[-1]]
