"""Partitioning as a pure function over hand-made graphs (no onnx, no hls4ml)."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetdeploy.core.errors import UserError
from hetdeploy.core.graph import Graph, Node
from hetdeploy.planning.partition import assign_by_support, boundaries, contract


class FakeDevice:
    def __init__(self, name, kind, ops=None):
        self.name, self.kind, self.ops = name, kind, ops

    def why_not(self, node):
        return None if self.ops is None or node.op in self.ops else "unsupported"


FPGA = FakeDevice("fpga", "fpga", {"Conv", "Relu", "Add", "Gemm"})
CPU = FakeDevice("cpu", "cpu")


def chain(ops):
    nodes = [Node(f"n{i}", op, [f"t{i}"], [f"t{i + 1}"]) for i, op in enumerate(ops)]
    return Graph(nodes, ["t0"], [f"t{len(ops)}"])


def group_graph(graph, groups):
    """The graph between groups, for the cycle check."""
    owner = {i: g for g, grp in enumerate(groups) for i in grp.nodes}
    producers = graph.producers()
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(groups)))
    for i, node in enumerate(graph.nodes):
        for t in node.inputs:
            if t in producers and owner[producers[t]] != owner[i]:
                dag.add_edge(owner[producers[t]], owner[i])
    return dag


def test_fpga_cpu_fpga_split():
    graph = chain(["Conv", "Relu", "LRN", "Conv", "Gemm"])
    assignment = assign_by_support(graph, [FPGA, CPU])
    assert assignment == ["fpga", "fpga", "cpu", "fpga", "fpga"]
    cuts = boundaries(graph, contract(graph, assignment))
    assert [(c.name, c.nodes, c.inputs, c.outputs) for c in cuts] == [
        ("sf0_fpga", ["n0", "n1"], ["t0"], ["t2"]),
        ("sf1_cpu", ["n2"], ["t2"], ["t3"]),
        ("sf2_fpga", ["n3", "n4"], ["t3"], ["t5"]),
    ]


def test_unsupported_everywhere_names_node_and_op():
    graph = chain(["Conv", "Mystery"])
    with pytest.raises(UserError, match=r"node 'n1': op 'Mystery'"):
        assign_by_support(graph, [FPGA])


def test_residual_with_cpu_op_on_skip_path_has_no_cycle():
    # x -> conv -> lrn(cpu) -> conv -> add(x-branch conv)
    nodes = [
        Node("a", "Conv", ["x"], ["a"]),
        Node("b", "LRN", ["a"], ["b"]),
        Node("c", "Conv", ["b"], ["c"]),
        Node("d", "Conv", ["a"], ["d"]),
        Node("e", "Add", ["c", "d"], ["y"]),
    ]
    graph = Graph(nodes, ["x"], ["y"])
    groups = contract(graph, assign_by_support(graph, [FPGA, CPU]))
    assert nx.is_directed_acyclic_graph(group_graph(graph, groups))
    assert sorted(i for g in groups for i in g.nodes) == list(range(5))


@st.composite
def random_dags(draw):
    n = draw(st.integers(2, 16))
    nodes = []
    for i in range(n):
        preds = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        inputs = [f"t{p}" for p in preds] or ["x"]
        op = draw(st.sampled_from(["Conv", "Relu", "Add", "LRN", "Gemm", "Softmax"]))
        nodes.append(Node(f"n{i}", op, inputs, [f"t{i}"]))
    used = {t for nd in nodes for t in nd.inputs}
    outputs = [f"t{i}" for i in range(n) if f"t{i}" not in used]
    return Graph(nodes, ["x"], outputs)


@settings(max_examples=300, deadline=None)
@given(random_dags())
def test_random_dags_give_acyclic_complete_partitions(graph):
    assignment = assign_by_support(graph, [FPGA, CPU])
    groups = contract(graph, assignment)
    assert nx.is_directed_acyclic_graph(group_graph(graph, groups))
    assert sorted(i for g in groups for i in g.nodes) == list(range(len(graph.nodes)))
    for g in groups:
        assert {assignment[i] for i in g.nodes} == {g.device}
    # every tensor a group reads from outside is an input of that group, and was produced earlier
    cuts = boundaries(graph, groups)
    available = set(graph.inputs)
    for cut in cuts:
        assert set(cut.inputs) <= available
        available |= set(cut.outputs)
    assert set(graph.outputs) <= available


def test_a_model_inputs_first_quantizer_and_the_value_only_ops_before_it_go_to_the_host():
    """Brevitas' BNN-PYNQ prefix (Flatten, 2x - 1, Quant) is found; a quantizer after a layer, or
    after an op of two activation inputs, is not the input's."""
    from hetdeploy.planning.partition import input_quantizers

    nodes = [Node("view", "Reshape", ["x"], ["v"], constants={1: "shape"}),
             Node("mul", "Mul", ["v"], ["m"], constants={1: "two"}),
             Node("sub", "Sub", ["m"], ["s"], constants={1: "one"}),
             Node("q0", "Quant", ["s"], ["q"], constants={1: "scale", 2: "zero", 3: "bits"}),
             Node("fc", "Gemm", ["q"], ["g"], constants={1: "w"}),
             Node("q1", "Quant", ["g"], ["h"], constants={1: "scale", 2: "zero", 3: "bits"}),
             Node("add", "Add", ["h", "y"], ["a"]),
             Node("q2", "BipolarQuant", ["a"], ["b"], constants={1: "scale"})]
    assert input_quantizers(Graph(nodes, ["x", "y"], ["b"])) == [0, 1, 2, 3]
    assert input_quantizers(Graph(nodes[4:6], ["q"], ["h"])) == []  # the layer's quantizer is the FPGA's


@pytest.mark.parametrize("op, bits, signed, narrow, scale, zero", [
    ("Quant", 8, 1, 0, 2.0 ** -7, 0), ("Quant", 8, 0, 0, 0.02, 128), ("Quant", 4, 1, 1, 0.3, 0),
    ("Quant", 3, 0, 1, 1.7, 2), ("Quant", 2, 1, 0, 0.5, -1), ("Quant", 1, 0, 0, 0.25, 0), ("Quant", 1, 1, 0, 0.75, 0),
    ("BipolarQuant", None, None, None, 0.125, None)])
def test_an_input_quantizers_values_travel_as_its_codes_and_come_back_as_they_were(op, bits, signed, narrow, scale,
                                                                                   zero):
    """Every value qonnx's quantizer gives (x over its whole range and past it) is one of ``port_codes``' table,
    which ``to_codes`` turns into indices the table gives back as they were (-0.0 as 0.0, as a fixed point takes
    it), at the fewest bits of 1, 2, 4 and 8 that index them; a value no code has, or NaN, is refused in one line."""
    from qonnx.custom_op.general.bipolar_quant import binary_quant
    from qonnx.custom_op.general.quant import quant

    from hetdeploy.core.board_runtime import to_codes
    from hetdeploy.planning.input_codes import port_codes

    scalars = {1: scale} if op == "BipolarQuant" else {1: scale, 2: float(zero), 3: float(bits)}
    node = Node("q", op, ["x"], ["y"], attrs={} if op == "BipolarQuant" else {"signed": signed, "narrow": narrow},
                scalars=scalars)
    (codes,) = port_codes(Graph([node], ["x"], ["y"])).values()
    x = np.linspace(-300 * scale, 300 * scale, 4001, dtype=np.float32)[None]
    y = binary_quant(x, np.float32(scale)) if op == "BipolarQuant" else \
        quant(x, np.float32(scale), np.float32(zero), np.float32(bits), signed, narrow, "ROUND")
    y = np.asarray(y, np.float32)
    levels = 2 if op == "BipolarQuant" or (bits == 1 and signed) else len(np.unique(y))
    assert len(set(codes.values)) == levels and codes.bits == min(b for b in (1, 2, 4, 8) if 2 ** b >= levels)
    words = to_codes(y, {"bits": codes.bits, "values": codes.values}).view("<u8")
    per_word = 64 // codes.bits
    index = (words[:, None] >> (np.arange(per_word, dtype=np.uint64) * np.uint64(codes.bits))) & \
        np.uint64(2 ** codes.bits - 1)
    assert (np.array(codes.values, np.float32)[index.reshape(-1)[: y.size].astype(int)] == y[0]).all()
    # the quantizer's integer codes (run.py --codes) give the same words: q = y / scale + zero point (bipolar: +-1)
    q = np.rint(y / np.float32(scale)).astype(np.int32) + (0 if zero is None else zero)
    assert np.array_equal(to_codes(q, {"bits": codes.bits, "values": codes.values, "first": codes.first,
                                       "step": codes.step}).view("<u8"), words)
    for wrong in (y[0, 0] + scale / 3, np.nan):
        with pytest.raises(ValueError, match="not one of its quantizer's"):
            to_codes(np.array([[y[0, 0], wrong]], np.float32), {"bits": codes.bits, "values": codes.values})


def test_a_quantizer_of_more_than_8_bits_or_of_scales_per_channel_keeps_its_float_port():
    from hetdeploy.planning.input_codes import port_codes

    wide = Node("q", "Quant", ["x"], ["y"], attrs={"signed": 1}, scalars={1: 0.5, 2: 0.0, 3: 9.0})
    per_channel = Node("p", "Quant", ["x"], ["z"], attrs={"signed": 1}, scalars={2: 0.0, 3: 4.0},
                       constants={1: "scales"})
    fraction = Node("f", "Quant", ["x"], ["w"], attrs={"signed": 1}, scalars={1: 0.5, 2: 0.5, 3: 4.0})
    assert port_codes(Graph([wide, per_channel, fraction], ["x"], ["y", "z", "w"])) == {}
