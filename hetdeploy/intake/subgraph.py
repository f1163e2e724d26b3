"""Write each subfunction of the normalised model as its own ONNX model."""

from __future__ import annotations

from typing import Protocol, Sequence

import onnx


class Piece(Protocol):
    """What is cut out: a partition's cut, a subfunction or an execution unit."""
    name: str
    nodes: Sequence[str]
    inputs: Sequence[str]
    outputs: Sequence[str]


def extract(model: onnx.ModelProto, cut: Piece) -> onnx.ModelProto:
    g = model.graph
    wanted = set(cut.nodes)
    nodes = [n for n in g.node if n.name in wanted]
    used = {t for n in nodes for t in n.input}
    values = {v.name: v for v in list(g.input) + list(g.value_info) + list(g.output)}
    produced = {t for n in nodes for t in n.output}
    inits = [t for t in g.initializer if t.name in used]
    graph = onnx.helper.make_graph(
        nodes,
        cut.name,
        inputs=[values[t] for t in cut.inputs],
        outputs=[values[t] for t in cut.outputs],
        initializer=inits,
        value_info=[v for v in g.value_info if v.name in produced and v.name not in cut.outputs],
    )
    sub = onnx.helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="hetdeploy")
    sub.ir_version = model.ir_version
    return sub
