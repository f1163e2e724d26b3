"""Host subfunctions that take a batch a call: which nodes allow it (planning.batching), what the cost model and
the partitioner make of it, and the model whose batch axis is left open (subgraph.with_open_batch) against
onnxruntime a sample a call."""

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from hetdeploy.core.board import load_board
from hetdeploy.core.graph import Graph, Node
from hetdeploy.intake.subgraph import BATCH_AXIS, with_open_batch
from hetdeploy.planning.batching import takes_batch
from hetdeploy.planning.cost import CostModel


def node(op, shapes=((1, 8),), out=(1, 8), **kw):
    return Node(op.lower(), op, [f"x{k}" for k in range(len(shapes))], ["y"], input_shapes=[list(s) for s in shapes],
                output_shapes=[list(out)], **kw)


@pytest.mark.parametrize("case, takes", [
    (node("Relu"), True),
    (node("Mul", constants={1: "c"}, constant_shapes={1: [8]}), True),  # broadcast over the samples
    (node("Mul", constants={1: "c"}, constant_shapes={1: [1, 8]}), True),
    (node("Add", [(1, 8), (1, 8)]), True),  # two samples' tensors, index by index
    (node("Add", [(1, 8), (8,)]), False),  # an activation without the batch axis
    (node("QuantizeLinear", attrs={"axis": 0}, constants={1: "s"}, constant_shapes={1: [1]}), False),
    (node("Quant", constants={1: "s", 2: "z", 3: "b"}, constant_shapes={1: [1, 8], 2: [], 3: []}), True),
    (node("Softmax", attrs={"axis": 1}), True),
    (node("Softmax", attrs={"axis": 0}), False),
    (node("Softmax", attrs={"axis": -2}), False),  # -2 of rank 2 is axis 0
    (node("Flatten", [(1, 2, 4)], attrs={"axis": 0}), False),
    (node("Flatten", [(1, 2, 4)]), True),
    (node("Transpose", [(1, 2, 4)], (1, 4, 2), attrs={"perm": [0, 2, 1]}), True),
    (node("Transpose", [(1, 2, 4)], (4, 2, 1)), False),  # no perm: reversed
    (node("ReduceMean", [(1, 2, 4)], (1, 2, 1), attrs={"axes": [2]}), True),
    (node("ReduceMean", [(1, 2, 4)], (1, 1, 1)), False),  # every axis
    (node("ReduceSum", [(1, 2, 4)], (1, 1, 4), constants={1: "a"}, scalars={1: 1.0}), True),
    (node("ReduceSum", [(1, 2, 4)], (1, 1, 4), constants={1: "a"}), False),  # axes whose values intake kept not
    (node("Squeeze", [(1, 2, 1)], (1, 2), attrs={"axes": [2]}), True),
    (node("Gemm", constants={1: "w"}), True),
    (node("Gemm", constants={1: "w"}, attrs={"transA": 1}), False),
    (node("MatMul", [(1, 8), (8, 8)]), False),  # both operands activations
    (node("Gather", constants={1: "i"}, attrs={"axis": 1}), True),
    (node("Gather", [(1, 8), (1, 3)], (1, 1, 3), attrs={"axis": 1}), False),  # the indices a tensor
    (node("Concat", [(1, 8), (1, 8)], (1, 16), attrs={"axis": 1}), True),
    (node("Concat", [(1, 8)], (1, 16), attrs={"axis": 1}, constants={1: "c"}), False),
    (node("Reshape", [(1, 2, 4)], (1, 8), constants={1: "shape"}), True),
    (node("Shape", [(1, 8)], (2,)), False),
    (node("LSTM", [(5, 1, 8)], (5, 1, 1, 4)), False),
    (node("DynamicQuantizeLinear"), False),  # its scale is over the whole tensor
    (node("Conv", [(1, 3, 8, 8)], (1, 4, 8, 8), constants={1: "w"}), True),
    (node("Conv", [(1, 1, 7, 5), (1, 1, 3, 3)], (1, 1, 3, 2)), False),  # its weights an input (onnx's test_conv_*)
    (node("MaxPool", [(1, 3, 8, 8)], (1, 3, 4, 4)), True),
    # its Indices count the whole stack's elements (onnx's test_maxpool_with_argmax cases)
    (Node("maxpool", "MaxPool", ["x0"], ["y", "i"], input_shapes=[[1, 3, 8, 8]],
          output_shapes=[[1, 3, 4, 4], [1, 3, 4, 4]]), False),
])
def test_a_node_takes_a_batch_where_each_sample_is_computed_alone(case, takes):
    assert takes_batch(case) is takes


def test_a_host_subfunction_that_takes_batches_pays_its_call_once_a_batch():
    """Its call's overhead and each node's kernel dispatch (the board file's per_op_s) once a batch; with a node
    that takes a sample a call (a Shape), both once a sample, as at a batch of one."""
    board = load_board("pynq-z2")
    nodes = [Node("q", "Mul", ["x"], ["m"], constants={1: "c"}, constant_shapes={1: []}, input_shapes=[[1, 8]],
                  output_shapes=[[1, 8]]),
             Node("s", "Shape", ["m"], ["y"], input_shapes=[[1, 8]], output_shapes=[[2]])]
    cost = CostModel(Graph(nodes, ["x"], ["y"]), board)
    overhead = board.device("arm_cpu").invocation_overhead_s
    assert cost.segment([0], "arm_cpu", batch=10).overhead_s == pytest.approx(overhead / 10)
    assert cost.segment([0, 1], "arm_cpu", batch=10).overhead_s == pytest.approx(overhead)  # Shape: a sample a call
    dispatch = board.device("arm_cpu").compute.per_op_s
    assert dispatch > 0
    assert cost.segment([0], "arm_cpu", batch=1).compute_s - cost.segment([0], "arm_cpu", batch=10).compute_s == \
        pytest.approx(dispatch * 9 / 10)
    assert cost.segment([0, 1], "arm_cpu", batch=10).compute_s == \
        pytest.approx(cost.segment([0, 1], "arm_cpu").compute_s)


def _reshape_model(shape: list[int], allowzero: int) -> onnx.ModelProto:
    """x [1, 2, 4] -> Mul by a per-column constant -> Reshape to ``shape`` -> Softmax over axis 1."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "c"], ["m"]),
         helper.make_node("Reshape", ["m", "shape"], ["r"], allowzero=allowzero),
         helper.make_node("Softmax", ["r"], ["y"], axis=1)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(np.arange(1, 5, dtype=np.float32) / 4, "c"),
         numpy_helper.from_array(np.array(shape, np.int64), "shape")])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("shape, allowzero", [([1, 8], 0), ([1, -1], 1), ([-1, 8], 0), ([0, 8], 0)])
def test_the_open_batch_model_runs_a_batch_as_the_model_runs_each_sample(shape, allowzero):
    model = _reshape_model(shape, allowzero)
    opened = with_open_batch(model)
    assert opened.graph.input[0].type.tensor_type.shape.dim[0].dim_param == BATCH_AXIS
    assert numpy_helper.to_array(model.graph.initializer[1]).tolist() == shape  # the model given is unchanged
    x = np.random.default_rng(0).normal(size=(5, 2, 4)).astype(np.float32)
    alone = onnxruntime.InferenceSession(model.SerializeToString())
    batch = onnxruntime.InferenceSession(opened.SerializeToString())
    expected = np.concatenate([alone.run(None, {"x": x[k:k + 1]})[0] for k in range(5)])
    assert np.array_equal(batch.run(None, {"x": x})[0], expected)
