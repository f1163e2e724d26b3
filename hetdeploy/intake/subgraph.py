"""Write each subfunction of the normalised model as its own ONNX model."""

from __future__ import annotations

from typing import Protocol, Sequence

import onnx

from ..core.plan import Band


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


BATCH_AXIS = "batch"


def with_open_batch(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (a subfunction whose nodes all take a batch: ``planning.batching``) with axis 0 of its inputs and
    outputs named ``BATCH_AXIS`` instead of 1, so that one onnxruntime call runs a batch. A Reshape's constant
    shape keeps its other entries and gets -1 first (0, the input's axis 0, where another entry is -1; with
    allowzero off, which only matters for zeros), in an initializer of its own. The shapes within are left to
    onnxruntime (value_info dropped)."""
    opened = onnx.ModelProto()
    opened.CopyFrom(model)
    g = opened.graph
    for value in list(g.input) + list(g.output):
        value.type.tensor_type.shape.dim[0].dim_param = BATCH_AXIS
    del g.value_info[:]
    constants = {t.name: t for t in g.initializer}
    for k, node in enumerate(g.node):
        if node.op_type != "Reshape":
            continue
        shape = onnx.numpy_helper.to_array(constants[node.input[1]]).copy()
        if shape[0] not in (-1, 0):
            shape[0] = 0 if -1 in shape[1:] else -1
        if shape[0] == 0:
            if 0 in shape[1:] and any(a.name == "allowzero" and a.i for a in node.attribute):
                raise ValueError(f"Reshape '{node.name}': a shape of zeros with allowzero takes no batch")
            for attribute in node.attribute:
                if attribute.name == "allowzero":
                    attribute.i = 0
        name = f"{node.name}.batch_shape.{k}"
        g.initializer.append(onnx.numpy_helper.from_array(shape, name))
        node.input[1] = name
    return opened


def band_model(unit_model: onnx.ModelProto, band: Band) -> onnx.ModelProto:
    """``unit_model`` (a unit of ``units.BANDED_OPS``, one input) made for one ``band``: its input ``input_rows``
    rows high, its first layer without padding above and below (the band's rows outside the map carry it), its
    output ``rows`` high; the shapes within inferred anew."""
    banded = onnx.ModelProto()
    banded.CopyFrom(unit_model)
    g = banded.graph
    g.input[0].type.tensor_type.shape.dim[2].dim_value = band.input_rows
    for value in g.output:
        value.type.tensor_type.shape.dim[2].dim_value = band.rows
    main = g.node[0]
    for attribute in main.attribute:
        if attribute.name == "pads":  # [top, left, bottom, right]
            attribute.ints[0] = attribute.ints[2] = 0
    del g.value_info[:]
    return onnx.shape_inference.infer_shapes(banded, strict_mode=True)
