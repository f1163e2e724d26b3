"""Model intake on the shapes real published models come in."""

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import networks
from hetdeploy.core.errors import UserError
from hetdeploy.core.precision import octaves_moved
from hetdeploy.intake import rewrites
from hetdeploy.intake.model import load_model


def save(tmp_path, model, name="m.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_symbolic_batch_fixed_to_one(tmp_path, capsys):
    """Fixed to 1, and said (plan on stderr, so --json stays JSON; build among its progress lines); a
    model whose batch is fixed already says nothing."""
    from hetdeploy.commands.cli import main

    model = networks.jet_tagger_mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    loaded = load_model(save(tmp_path, model))
    assert loaded.inputs[0].shape == [1, 16]
    assert loaded.outputs[0].shape == [1, 5]
    note = ("input 'input': its symbolic batch axis 'N' is fixed to 1 (a call takes one sample; emulate and run.py "
            "take N stacked and run them in batches, --batch N samples an FPGA call)")
    assert loaded.notes == [note]
    assert main(["plan", str(tmp_path / "m.onnx"), "--board", "pynq-z2", "--json"]) == 0
    printed = capsys.readouterr()
    assert printed.err == f"note: {note}\n" and json.loads(printed.out)["inputs"][0]["shape"] == [1, 16]
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    assert load_model(save(tmp_path, model)).notes == []


def test_initializers_listed_as_inputs_are_not_data_inputs(tmp_path):
    model = networks.small_cnn()
    weights = [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims)) for t in model.graph.initializer]
    model.graph.input.insert(0, weights[0])  # the data input is not first
    model.graph.input.extend(weights[1:])
    loaded = load_model(save(tmp_path, model))
    assert [i.name for i in loaded.inputs] == ["input"]


def test_empty_and_duplicate_names_get_stable_generated_names(tmp_path):
    model = networks.small_cnn()
    model.graph.node[1].name = ""
    model.graph.node[4].name = "conv1"  # duplicate of node 0
    a = load_model(save(tmp_path, model)).graph
    b = load_model(save(tmp_path, model, "again.onnx")).graph
    names = [n.name for n in a.nodes]
    assert len(set(names)) == len(names)
    assert names == [n.name for n in b.nodes]
    assert names[1] == "Relu_1" and names[4] == "Relu_4"


def test_the_reference_gets_the_same_names_and_onnxruntime_runs_it(tmp_path):
    """Names ['same', '', 'same', 'same', '']: planned, and the reference (source.onnx) renamed alike, so
    that onnxruntime loads it (it refuses two nodes of one name) and a build can check against it."""
    model = networks.jet_tagger_mlp()
    for node, name in zip(model.graph.node, ["same", "", "same", "same", ""]):
        node.name = name
    loaded = load_model(save(tmp_path, model))
    names = [n.name for n in loaded.source.graph.node]
    assert names[:5] == ["Gemm_0", "Relu_1", "Gemm_2", "Relu_3", "Gemm_4"] and len(set(names)) == len(names)
    x = np.ones([1, 16], np.float32)
    session = ort.InferenceSession(loaded.source.SerializeToString(), providers=["CPUExecutionProvider"])
    want = ort.InferenceSession(networks.jet_tagger_mlp().SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"input": x})[0], want.run(None, {"input": x})[0])


def test_a_graph_without_outputs_and_an_opset_the_converter_cannot_raise_are_refused(tmp_path):
    model = networks.jet_tagger_mlp()
    del model.graph.output[:]
    with pytest.raises(UserError, match="the ONNX graph has no outputs: nothing it computes is read"):
        load_model(save(tmp_path, model))
    model = networks.jet_tagger_mlp()
    model.opset_import[0].version = 1  # opset 1's Gemm has no adapter onwards: onnx's converter refuses it
    with pytest.raises(UserError, match="cannot convert opset 1 to 13: "):
        load_model(save(tmp_path, model))
    model.opset_import[0].version = 7  # converted to 13, as the README says
    assert load_model(save(tmp_path, model)).graph.nodes


@pytest.mark.parametrize("case", ["pytorch-converted/test_Conv2d_groups", "pytorch-operator/test_operator_maxpool"])
def test_a_model_older_than_onnxruntimes_opsets_is_converted_and_its_reference_is_the_converted_model(case):
    """PyTorch's opset-6 exports that the onnx package ships: onnx's version converter raises them to opset 13,
    the reference (the source) too, which onnxruntime then runs to the outputs the package records."""
    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / case
    loaded = load_model(folder / "model.onnx")
    assert rewrites.default_opset(loaded.source) == rewrites.default_opset(loaded.model) == 13
    assert any("opset 6: converted to opset 13 by onnx's version converter, the reference" in n for n in loaded.notes)
    sample, expected = (numpy_helper.to_array(onnx.load_tensor(str(folder / "test_data_set_0" / f"{kind}_0.pb")))
                        for kind in ("input", "output"))
    session = ort.InferenceSession(loaded.source.SerializeToString(), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name  # the export's batch of rows, a sample each (a row a run)
    got = np.concatenate([session.run(None, {name: sample[k:k + 1]})[0] for k in range(len(sample))])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_an_exports_fixed_batch_is_taken_as_its_rows_where_the_model_computes_each_row_alone(tmp_path):
    """torch.onnx.export without dynamic axes fixes the dummy input's batch (PyTorch's Conv2d export that the onnx
    package ships: 2 rows): each row is a sample, the model and its reference at batch 1, and said; the outputs
    those give each row are the export's own."""
    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted" / "test_Conv2d_groups"
    loaded = load_model(folder / "model.onnx")
    assert [t.shape[0] for t in loaded.inputs] == [1] and all(
        v.type.tensor_type.shape.dim[0].dim_value == 1 for v in (*loaded.source.graph.input, *loaded.model.graph.input))
    assert any("the inputs' fixed batch of 2 (axis 0) is taken as 2 samples of one row each" in n for n in loaded.notes)


@pytest.mark.parametrize("case", ["reshape", "softmax", "first_axes", "scalar"])
def test_inputs_whose_first_axis_is_no_batch_are_refused_in_one_line(tmp_path, case):
    """A sample is a row of axis 0 of every input: a model that bakes its batch into a Reshape, mixes its rows
    (a Softmax over axis 0), has inputs whose first axes differ, or a scalar input, is refused, not built to fail
    later on onnxruntime."""
    value = helper.make_tensor_value_info
    if case == "reshape":
        nodes, inputs, outputs = [helper.make_node("Reshape", ["x", "s"], ["y"])], [value("x", 1, [4, 2, 5])], \
            [value("y", 1, [4, 10])]
        constants = [numpy_helper.from_array(np.array([4, 10], np.int64), "s")]
    elif case == "softmax":
        nodes, inputs, outputs = [helper.make_node("Softmax", ["x"], ["y"], axis=0)], [value("x", 1, [4, 10])], \
            [value("y", 1, [4, 10])]
        constants = []
    else:
        second = [10] if case == "first_axes" else []
        nodes, inputs, outputs = [helper.make_node("Add", ["x", "z"], ["y"])], \
            [value("x", 1, [1, 10]), value("z", 1, second)], [value("y", 1, [1, 10])]
        constants = []
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, constants),
                              opset_imports=[helper.make_opsetid("", 13)])
    message = {"reshape": "the inputs' axis 0 \\(4\\) is no batch axis: the model does not give each of its 4 rows",
               "softmax": "the inputs' axis 0 \\(4\\) is no batch axis",
               "first_axes": "the inputs' first axes differ \\(x: 1, z: 10\\): they are no batch axis",
               "scalar": "input 'z' is a scalar: it has no batch axis"}[case]
    with pytest.raises(UserError, match=message + ".*export the model with a batch axis of 1 or a dynamic one"):
        load_model(save(tmp_path, model))


@pytest.mark.parametrize("case", ["strings", "bfloat16", "constant"])
def test_a_model_of_types_it_does_not_feed_or_of_constants_is_refused_in_one_line(tmp_path, case):
    """The onnx package's single-op cases (benchmarks/onnx_node_models.py): a fixed batch of two rows of strings,
    and a Cast of two rows to bfloat16, which onnxruntime's Python API cannot give, refused by type before any run
    (their rows were compared as numbers, or fetched, and failed); a model whose one output is a Constant (no
    input, no node left to run once folded)."""
    value = helper.make_tensor_value_info
    if case == "strings":
        nodes, inputs = [helper.make_node("Identity", ["x"], ["y"])], [value("x", TensorProto.STRING, [2, 3])]
        outputs, message = [value("y", TensorProto.STRING, [2, 3])], "input 'x' is string; hetdeploy feeds numeric"
    elif case == "bfloat16":
        nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)]
        inputs, outputs = [value("x", TensorProto.FLOAT, [2, 3])], [value("y", TensorProto.BFLOAT16, [2, 3])]
        message = "output 'y' is bfloat16; hetdeploy gives numeric tensors only"
    else:
        nodes = [helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(np.ones((1, 3), np.float32)))]
        inputs, outputs = [], [value("y", TensorProto.FLOAT, [1, 3])]
        message = "no node computes its outputs .*: nothing to deploy"
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UserError, match=message):
        load_model(save(tmp_path, model))


def test_a_castlike_of_a_constant_is_folded_into_a_constant(tmp_path):
    """onnx's function body of Celu (its test_celu_expanded): CastLike(alpha, X) with X a tensor the model takes,
    which onnxruntime's folding leaves alone. Intake makes it a Cast of the constant, folded: no node is left that
    computes a scalar (it crossed a cut between subfunctions, where no batch axis stacks it), and the model computes
    what it did."""
    alpha = numpy_helper.from_array(np.array(2.0, np.float32))
    nodes = [helper.make_node("Constant", [], ["a"], value=alpha),
             helper.make_node("CastLike", ["a", "x"], ["ac"]),
             helper.make_node("Div", ["x", "ac"], ["xs"]),
             helper.make_node("Elu", ["xs"], ["e"], alpha=1.0),
             helper.make_node("Mul", ["ac", "e"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 3, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 3, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    loaded = load_model(save(tmp_path, model))
    assert "CastLike" not in [n.op for n in loaded.graph.nodes]
    assert all(len(s) == 4 for n in loaded.graph.nodes for s in n.input_shapes + n.output_shapes)
    x = np.random.default_rng(0).normal(size=(1, 3, 3, 1)).astype(np.float32)
    np.testing.assert_allclose(run(loaded.model, {"x": x})[0], run(model, {"x": x})[0], rtol=1e-6)


@pytest.mark.parametrize("special", ["fifo", "folder", "/dev/zero"])
def test_a_model_path_that_is_no_regular_file_is_refused_without_reading_it(tmp_path, special):
    path = tmp_path / "model.onnx"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "folder":
        path.mkdir()
    else:
        path.symlink_to(special)
    with pytest.raises(UserError, match="is a folder|is not a regular file \\(a pipe, socket or device\\)"):
        load_model(path)


def test_bias_add_after_conv_is_folded(tmp_path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(4, 1, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(size=(4, 1, 1)).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
             helper.make_node("Add", ["c", "b"], ["y"], name="bias")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    loaded = load_model(save(tmp_path, model))
    assert [n.op for n in loaded.graph.nodes] == ["Conv"]
    x = rng.normal(size=(1, 1, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run(loaded.model, {"x": x})[0], run(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_a_feature_maps_scale_and_shift_per_channel_are_one_batchnormalization(tmp_path):
    """Caffe2's BatchNormalization followed by its scale (Mul) and bias (Add) per channel, after a Concat, as the
    model zoo's DenseNet-121 has them: one BatchNormalization (the top's affine on an FPGA), equal to the model's
    on onnxruntime; a Mul by a constant per column (not per channel) stays a Mul."""
    rng = np.random.default_rng(0)
    c = [numpy_helper.from_array(rng.normal(size=shape).astype(np.float32), name) for name, shape in
         (("scale", [1, 6, 1, 1]), ("bias", [6, 1, 1]), ("half", []), ("column", [5]))]
    bn = [numpy_helper.from_array(v.astype(np.float32), name) for name, v in
          (("g", rng.uniform(0.5, 2, 6)), ("b", rng.normal(size=6)), ("m", rng.normal(size=6)),
           ("v", rng.uniform(0.5, 2, 6)))]
    nodes = [helper.make_node("Concat", ["x1", "x2"], ["cat"], name="cat", axis=1),
             helper.make_node("BatchNormalization", ["cat", "g", "b", "m", "v"], ["n"], name="bn"),
             helper.make_node("Mul", ["n", "scale"], ["s"], name="scale"),
             helper.make_node("Add", ["bias", "s"], ["t"], name="shift"),
             helper.make_node("Div", ["t", "half"], ["h"], name="halve"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Mul", ["r", "column"], ["y"], name="by_column")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 4, 5])
                                           for x in ("x1", "x2")],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4, 5])], c + bn)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    loaded = load_model(save(tmp_path, model))
    assert [n.op for n in loaded.graph.nodes] == ["Concat", "BatchNormalization", "Relu", "Mul"]
    feeds = {x: rng.normal(size=(1, 3, 4, 5)).astype(np.float32) for x in ("x1", "x2")}
    np.testing.assert_allclose(run(loaded.model, feeds)[0], run(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_leading_reshape_is_absorbed(tmp_path):
    model = networks.small_cnn()
    shape = numpy_helper.from_array(np.array([1, 1, 28, 28], dtype=np.int64), "shape")
    model.graph.initializer.append(shape)
    model.graph.node.insert(0, helper.make_node("Reshape", ["flat_in", "shape"], ["input"], name="reshape_in"))
    del model.graph.input[:]
    model.graph.input.append(helper.make_tensor_value_info("flat_in", TensorProto.FLOAT, [1, 784]))
    loaded = load_model(save(tmp_path, model))
    assert loaded.inputs[0].name == "flat_in" and loaded.inputs[0].shape == [1, 784]
    assert [r.tensor.name for r in loaded.input_reshapes] == ["input"]
    assert "Reshape" not in [n.op for n in loaded.graph.nodes]


def test_dynamic_spatial_size_refused(tmp_path):
    model = networks.small_cnn()
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "H"
    with pytest.raises(UserError, match=r"input 'input' has a dynamic size 'H' on axis 2"):
        load_model(save(tmp_path, model))


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(UserError, match="model file not found"):
        load_model(tmp_path / "nope.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not protobuf\xff\xff")
    with pytest.raises(UserError, match="bad.onnx: not a readable ONNX model"):
        load_model(bad)


def test_external_data_must_stay_in_model_folder(tmp_path):
    model = networks.jet_tagger_mlp()
    inside = tmp_path / "model"
    inside.mkdir()
    onnx.save(model, str(inside / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    assert load_model(inside / "m.onnx").graph.nodes  # inside: fine
    stored = onnx.load(str(inside / "m.onnx"), load_external_data=False)
    for t in stored.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../../etc/passwd"
    onnx.save(stored, str(inside / "evil.onnx"))
    with pytest.raises(UserError, match="points outside the model's folder"):
        load_model(inside / "evil.onnx")


@pytest.mark.slow
def test_integer_inputs_are_fed_and_run_on_the_cpu(tmp_path):
    """An embedding lookup (int64 indices) then a ReLU: the Gather runs on the ARM cores, random
    samples are valid indices, and the build emulates within tolerance."""
    from hetdeploy.commands.cli import main

    values = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    table = numpy_helper.from_array(values, "table")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed", axis=0),
             helper.make_node("Relu", ["e"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])], [table])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = save(tmp_path, model)
    assert load_model(path).inputs[0].dtype == "int64"
    out = tmp_path / "build"
    assert main(["build", str(path), "--board", "pynq-z2", "--policy", "support", "-o", str(out)]) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert {n: s["device"] for s in plan["subfunctions"] for n in s["nodes"]}["embed"] == "arm_cpu"
    ids = np.array([[9, 0, 4], [1, 1, 2]], dtype=np.int64)
    np.save(tmp_path / "ids.npy", ids)
    assert main(["emulate", str(out), "--input", str(tmp_path / "ids.npy"), "--output", str(tmp_path / "y.npy")]) == 0
    y, want = np.load(tmp_path / "y.npy"), np.maximum(values[ids], 0)  # the rows the ids name, ReLU'd
    assert y.shape == (2, 3, 4) and np.max(np.abs(y - want)) <= 0.05 * np.max(want)


def test_a_layers_weights_are_counted_by_octave_under_their_formats_top(tmp_path):
    """What the estimator needs of an unrolled layer's constant weights: how many bits each one's code takes
    (``precision.weight_octaves`` in the format the build gives the weights: here ap_fixed<W, 1>, top 1)."""
    def gemm(weights):
        w = numpy_helper.from_array(np.asarray(weights, dtype=np.float32), "w")
        node = helper.make_node("Gemm", ["x", "w"], ["y"], name="fc")
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [w])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        return load_model(save(tmp_path, model)).graph.nodes[0]

    octaves = gemm([[0.75, -0.3], [0.001, 0.0]]).weight_octaves
    # 0.75 under 1, 0.3 one octave under, 0.001 (in [2**-10, 2**-9)) nine under; 0 past every width
    assert {d: n for d, n in enumerate(octaves) if n} == {0: 1, 1: 1, 9: 1, len(octaves) - 1: 1}
    assert gemm([[np.nan, 1.0], [0.5, 0.25]]).weight_octaves == ()  # no format holds a NaN: none counted
    # under the top of ap_fixed<W, 4> instead (a pinned weight type): each three octaves deeper, zeros still last
    moved = octaves_moved(octaves, gemm([[0.75, -0.3], [0.001, 0.0]]).weight_integer, 4)
    assert {d: n for d, n in enumerate(moved) if n} == {3: 1, 4: 1, 12: 1, len(octaves) - 1: 1}
    assert {d: n for d, n in enumerate(octaves_moved(octaves, 1, -1)) if n} == {0: 2, 7: 1, len(octaves) - 1: 1}


def test_weight_octaves_count_each_value_by_its_exponent_in_any_float_type():
    """Octaves from the values' exponent fields equal frexp's on float32 and float64 alike, zeros and
    subnormals past the last octave, Infs and NaNs left out."""
    from hetdeploy.core.precision import OCTAVES, weight_octaves

    values = [0.75, -0.3, 0.001, 0.0, -0.0, 2.0 ** -130, 2.0 ** 10, np.inf, np.nan, 0.5, 2.0 ** -31]
    for dtype in (np.float32, np.float64):
        octaves = weight_octaves(np.asarray(values, dtype=dtype), 1)
        # under 1: 0.75 and 0.5 at the top, 0.3 one under, 0.001 nine, 2**-31 thirty; 2**10 saturates into
        # the first; zeros and 2**-130 past the last; Inf and NaN not counted
        assert {d: n for d, n in enumerate(octaves) if n} == {0: 3, 1: 1, 9: 1, 30: 1, OCTAVES - 1: 3}, dtype


def test_shape_inference_without_large_constants_data_infers_what_it_would_with_it():
    """Shape inference sees large initializers without their data (onnx's serialises the model it is given):
    the same shapes as with it, a Reshape's small shape constant read, and the data back in what it returns."""
    from hetdeploy.intake.model import _onnx_shapes

    weights = numpy_helper.from_array(np.arange(6000, dtype=np.float32).reshape(100, 60), "w")
    shape = numpy_helper.from_array(np.array([2, 3, 60], dtype=np.int64), "shape")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
             helper.make_node("Reshape", ["h", "shape"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 100])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weights, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    inferred = _onnx_shapes(model)
    assert rewrites.tensor_shapes(inferred)["r"] == [2, 3, 60]
    assert inferred.SerializeToString() == onnx.shape_inference.infer_shapes(
        model, strict_mode=False, data_prop=True).SerializeToString()
    assert np.array_equal(numpy_helper.to_array(model.graph.initializer[0]), np.arange(6000).reshape(100, 60))


def test_what_issue_68_found_at_intake(tmp_path, capsys):
    """A model importing no default-domain opset (onnx's checker and onnxruntime refuse it) and a
    sparse initializer whose values are external data at an absolute path are one line each; names
    that are not UTF-8 are written out and reach plan.json; a repeated graph output is kept once."""
    from hetdeploy.commands.cli import main

    model = networks.jet_tagger_mlp()
    del model.opset_import[:]
    with pytest.raises(UserError, match="imports no opset of the default ONNX domain"):
        load_model(save(tmp_path, model))

    model = networks.jet_tagger_mlp()
    weight = next(t for t in model.graph.initializer if len(t.dims) == 2)
    values = numpy_helper.to_array(weight).reshape(-1)
    indices = np.nonzero(values)[0][:4].astype(np.int64)
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(values[indices], weight.name),
                                       numpy_helper.from_array(indices, ""), list(weight.dims))
    sparse.values.data_location = TensorProto.EXTERNAL
    sparse.values.external_data.add(key="location", value="/etc/hostname")
    sparse.values.ClearField("raw_data")
    model.graph.initializer.remove(weight)
    model.graph.sparse_initializer.append(sparse)
    with pytest.raises(UserError, match=f"initializer '{weight.name}' points outside the model's folder"):
        load_model(save(tmp_path, model))

    model = networks.jet_tagger_mlp()
    model.graph.node[0].name = "QQQQ"
    model.graph.output.append(model.graph.output[0])
    (tmp_path / "named.onnx").write_bytes(model.SerializeToString().replace(b"QQQQ", b"a\xff\xfeb", 1))
    loaded = load_model(tmp_path / "named.onnx")
    assert loaded.graph.nodes[0].name == "a\\xff\\xfeb"
    assert [o.name for o in loaded.outputs] == [model.graph.output[0].name]
    capsys.readouterr()
    assert main(["plan", str(tmp_path / "named.onnx"), "--board", "pynq-z2", "--json"]) == 0
    assert "a\\xff\\xfeb" in json.loads(capsys.readouterr().out)["node_map"]
