"""Partitioning as a pure function over hand-made graphs (no onnx, no hls4ml)."""

import networkx as nx
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
