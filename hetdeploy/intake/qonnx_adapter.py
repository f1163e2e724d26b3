"""qonnx behind one small interface: models with QONNX ops (Quant, BipolarQuant, Trunc, FloatQuant)
run on qonnx's execution, which onnxruntime cannot; their shapes come from qonnx's inference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from ..core.capture import captured_stdout
from ..core.errors import UserError, first_line


def _transform(model: onnx.ModelProto, transformation) -> onnx.ModelProto:
    """``model`` through a qonnx transformation, the tensors it names anew renamed in the order the
    graph reaches them: qonnx names them by random strings (``util.basic.random_string``), and the
    same model must give the same bytes."""
    from qonnx.core.modelwrapper import ModelWrapper

    graph = model.graph
    before = {t for n in graph.node for t in list(n.input) + list(n.output)} | \
        {t.name for t in list(graph.initializer) + list(graph.input) + list(graph.output) + list(graph.value_info)}
    with captured_stdout():
        result = ModelWrapper(model).transform(transformation).model
    graph = result.graph
    reached = [t for n in graph.node for t in list(n.input) + list(n.output)] + \
        [t.name for t in list(graph.initializer) + list(graph.value_info)]
    new = [t for t in dict.fromkeys(reached) if t and t not in before]
    taken = before | set(reached)
    renamed, k = {}, 0
    for name in new:
        while f"qonnx_{k}" in taken:
            k += 1
        renamed[name] = f"qonnx_{k}"
        taken.add(renamed[name])
    for node in graph.node:
        node.input[:] = [renamed.get(t, t) for t in node.input]
        node.output[:] = [renamed.get(t, t) for t in node.output]
    for value in list(graph.initializer) + list(graph.value_info) + list(graph.input) + list(graph.output):
        value.name = renamed.get(value.name, value.name)
    for annotation in graph.quantization_annotation:  # qonnx's datatypes, by tensor
        annotation.tensor_name = renamed.get(annotation.tensor_name, annotation.tensor_name)
    return result


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """qonnx's shape inference, which stands each custom op in with a standard one of its shape."""
    from qonnx.transformation.infer_shapes import InferShapes

    return _transform(model, InferShapes())


class QonnxModel:
    """The OrtModel interface (``inputs``, ``outputs``, ``run``) on qonnx's execution."""

    engine = "qonnx execution"

    def __init__(self, path: Path | str | onnx.ModelProto, name: str = ""):
        from qonnx.core.modelwrapper import ModelWrapper

        self.name = name or str(path)
        try:
            model = path if isinstance(path, onnx.ModelProto) else onnx.load(str(path))
            self.wrapper = ModelWrapper(infer_shapes(model))
        except Exception as err:
            raise UserError(f"{self.name}: qonnx cannot load it: {first_line(err)}") from None
        initializers = {t.name for t in self.wrapper.graph.initializer}
        # FINN annotates its inputs' data type (UINT8 for MNIST's 0..255); qonnx would round the inputs
        # to it and stop when that changes them much: the model runs on the inputs as given, as ONNX does
        inputs = {i.name for i in self.wrapper.graph.input}
        kept = [a for a in self.wrapper.graph.quantization_annotation if a.tensor_name not in inputs]
        del self.wrapper.graph.quantization_annotation[:]
        self.wrapper.graph.quantization_annotation.extend(kept)
        self.input_names = [i.name for i in self.wrapper.graph.input if i.name not in initializers]
        self.output_names = [o.name for o in self.wrapper.graph.output]
        self.inputs = [(n, list(self.wrapper.get_tensor_shape(n))) for n in self.input_names]
        self.outputs = [(n, list(self.wrapper.get_tensor_shape(n))) for n in self.output_names]
        self._empty_context, self._node_executors = None, None  # made on the first run
        # the tensors qonnx's execution rounds to their annotated integer type (looked up once; none where
        # its SANITIZE_QUANT_TENSORS turns that off)
        from qonnx.util.basic import get_sanitize_quant_tensors

        self._integer_tensors = {a.tensor_name for a in self.wrapper.graph.quantization_annotation
                                 if self.wrapper.get_tensor_datatype(a.tensor_name).is_integer()} \
            if get_sanitize_quant_tensors() != 0 else set()

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """qonnx's ``execute_onnx`` node by node (its custom ops, its sanitising of annotated integer
        tensors), each standard node's onnxruntime session made once: qonnx makes one per node per
        call, which cost a quantized MLP 20 ms a sample and most of its build's further samples."""
        try:  # NaN or overflow in a quantizer is judged on the outputs, not printed as numpy warnings
            with captured_stdout(), np.errstate(all="ignore"):
                context = self._context(feeds)
                for node, execute in zip(self.wrapper.graph.node, self._executors()):
                    self._sanitize(node.input, context)
                    execute(context)
                    self._sanitize(node.output, context)
        except Exception as err:
            raise UserError(f"{self.name}: qonnx's execution failed: {first_line(err)}") from None
        return {n: context[n] for n in self.output_names}

    def _context(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self._empty_context is None:
            from qonnx.analysis.topology import nodes_topologically_sorted

            if not self.wrapper.check_all_tensor_shapes_specified():
                raise ValueError("found unspecified tensor shapes")
            if not nodes_topologically_sorted(self.wrapper)["nodes_topologically_sorted"]:
                raise ValueError("its nodes are not topologically sorted")
            self._empty_context = self.wrapper.make_empty_exec_context()
        context = dict(self._empty_context)  # the nodes replace tensors, never write into them
        for name in self.input_names:
            if context[name].shape != feeds[name].shape:
                raise ValueError(f"input '{name}' has shape {feeds[name].shape}, the model {context[name].shape}")
            context[name] = feeds[name]
        return context

    def _sanitize(self, tensors, context: dict[str, np.ndarray]) -> None:
        integer = [t for t in tensors if t in self._integer_tensors]
        if integer:
            from qonnx.util.basic import sanitize_quant_values

            sanitize_quant_values(self.wrapper, integer, context)

    def _executors(self) -> list:
        """Per node, a function of the execution context that runs it as qonnx's ``execute_node``
        does: a custom op through qonnx's registry, a standard one alone on onnxruntime."""
        if self._node_executors is None:
            from qonnx.custom_op.registry import getCustomOp, is_custom_op
            from qonnx.util.basic import get_preferred_qonnx_opset

            opsets = self.wrapper.get_opset_imports()
            graph = self.wrapper.graph
            executors = []
            for node in graph.node:
                opset = opsets.get(node.domain, get_preferred_qonnx_opset())
                if is_custom_op(node.domain, node.op_type):
                    op = getCustomOp(node, onnx_opset_version=opset)
                    executors.append(lambda context, op=op: op.execute_node(context, graph))
                else:
                    executors.append(_standard_node_executor(node, graph, opset))
            self._node_executors = executors
        return self._node_executors


def _standard_node_executor(node: onnx.NodeProto, graph: onnx.GraphProto, opset: int):
    """A standard node as a one-node model on onnxruntime, its inputs and outputs typed from the
    graph as qonnx's ``execute_node`` types them (a subgraph's inputs too)."""
    import onnxruntime as ort
    from qonnx.util.basic import qonnx_make_model

    def typed(names, values):
        return [v for v in values if v.name in names]

    inputs = typed(node.input, graph.input) + typed(node.input, graph.output) + typed(node.input, graph.value_info)
    outputs = typed(node.output, graph.output) + typed(node.output, graph.value_info)
    for attribute in (a for a in node.attribute if a.type == onnx.AttributeProto.GRAPH):
        for inner in attribute.g.node:
            inputs += [v for v in typed(inner.input, graph.value_info) if v not in inputs]
    model = qonnx_make_model(onnx.helper.make_graph([node], "single-node-exec", inputs, outputs))
    model.opset_import[0].version = opset
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in outputs]
    missing = [t for t in node.output if t and t not in names]
    if missing:
        raise ValueError(f"node {node.name}: output {missing[0]} has no type in the graph")

    def execute(context: dict[str, np.ndarray]) -> None:
        context.update(zip(names, session.run(None, {t: context[t] for t in node.input if t})))
    return execute


QONNX_GENERAL_DOMAIN = "qonnx.custom_op.general"


def qonnx_general_ops() -> set[str]:
    """The ops of qonnx's general domain (its quantizers, MultiThreshold, Im2Col, ...)."""
    import qonnx.custom_op.general as general

    return {name.split("_v")[0] for name in general.__all__}


def known_rounding_mode(mode: str) -> bool:
    """Whether qonnx's quantizers know the rounding mode ``mode``."""
    from qonnx.custom_op.general.intquant import resolve_rounding_mode

    try:
        resolve_rounding_mode(mode)
    except ValueError:
        return False
    return True


def qdq_pairs_to_quant(model: onnx.ModelProto) -> onnx.ModelProto:
    """Each QuantizeLinear -> (Clip ->) DequantizeLinear pair as one QONNX Quant (qonnx's
    QCDQToQuant): one node that fixes a tensor's precision, which the FPGA takes as that."""
    from qonnx.transformation.qcdq_to_qonnx import QCDQToQuant

    model = _per_axis_weights_broadcast(_drop_per_tensor_axes(model))
    return _transform(_own_dequantized_constants(_zero_pointed_codes_widened(model)), QCDQToQuant())


def _zero_pointed_codes_widened(model: onnx.ModelProto) -> onnx.ModelProto:
    """A DequantizeLinear of constant codes with a zero point other than 0 (onnxruntime's ``quantize_static`` with
    ``weight_type`` QUInt8: asymmetric weights) reads its codes and zero point as new int32 constants of the same
    values: qonnx's QCDQToQuant subtracts the zero point in the codes' own type, which wraps around (uint8 3 - 128
    is 131: a convolution's weights 244 output steps off). Its Quant, 32 bits wide, is folded into the weights'
    values, which it leaves as they are."""
    from .rewrites import ModelIndex

    graph = ModelIndex(onnx.ModelProto.FromString(model.SerializeToString()))
    for node in graph.g.node:
        if node.op_type != "DequantizeLinear" or len(node.input) < 3 or \
                any(name not in graph.inits for name in (node.input[0], node.input[2])):
            continue
        zero = graph.constant(node.input[2])
        if not np.any(zero != 0) or zero.dtype.kind not in "iu" or zero.dtype.itemsize > 2:
            continue
        for k in (0, 2):
            node.input[k] = graph.add_constant(f"{node.input[k]}_int32_{node.name}",
                                               graph.constant(node.input[k]).astype(np.int32))
    return graph.model


def _own_dequantized_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Each DequantizeLinear of constant codes that another node reads too reads a copy of its own: qonnx's
    QCDQToQuant writes the dequantized values over the codes' initializer, so a second reader got values in place of
    codes (torch.onnx writes equal constants once: onnxruntime's QOperator format of a ResNet-18 has the zero bias of
    eight convolutions as one int32 tensor, each dequantized at its own scale)."""
    from .rewrites import ModelIndex

    graph = ModelIndex(onnx.ModelProto.FromString(model.SerializeToString()))
    readers: dict[str, int] = {}
    for node in graph.g.node:
        for name in set(node.input):
            readers[name] = readers.get(name, 0) + 1
    for node in graph.g.node:
        codes = node.input[0] if node.op_type == "DequantizeLinear" and node.input else None
        if codes not in graph.inits or readers[codes] < 2:
            continue
        readers[codes] -= 1
        node.input[0] = graph.add_constant(f"{codes}_{node.name}", graph.constant(codes))
    return graph.model


def fold_constant_quantizers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Quantizers of constants (weights, biases) replaced by the values they give: the layers then read quantized
    constants. The QONNX ops of constants are run by qonnx's own execution in one pass, in the graph's order (qonnx's
    FoldConstants folds one node a pass and infers every shape after each: minutes for a QDQ MobileNetV2's hundred
    weight quantizers); any other node of constants left then goes through FoldConstants, quantizers included."""
    from qonnx.core.execute_custom_node import execute_custom_node
    from qonnx.custom_op.registry import is_custom_op
    from qonnx.transformation.fold_constants import FoldConstants
    from qonnx.transformation.general import RemoveUnusedTensors

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    constants = {t.name: t for t in graph.initializer}

    def of_constants(node: onnx.NodeProto) -> bool:
        return bool(node.input) and all(not t or t in constants for t in node.input)

    folded = []
    for node in graph.node:
        if is_custom_op(node.domain, node.op_type) and len(node.output) == 1 and of_constants(node):
            context = {t: onnx.numpy_helper.to_array(constants[t]) for t in node.input if t}
            with captured_stdout():
                execute_custom_node(node, context, graph, onnx_opset_version=opset)
            value = onnx.numpy_helper.from_array(np.asarray(context[node.output[0]]), node.output[0])
            graph.initializer.append(value)
            constants[value.name] = value
            folded.append(node)
    for node in folded:
        graph.node.remove(node)
    if any(of_constants(n) for n in graph.node):
        return _transform(model, FoldConstants(exclude_op_types=[]))
    return _transform(model, RemoveUnusedTensors())


def _per_axis_weights_broadcast(model: onnx.ModelProto) -> onnx.ModelProto:
    """A DequantizeLinear of constant codes with a scale per element of ``axis`` (onnxruntime's ``quantize_static``
    with ``per_channel``: a 1-D scale on the weights' axis 0) with its scale and zero point shaped to broadcast along
    that axis and no ``axis``: qonnx's QCDQToQuant multiplies the codes by the 1-D scale before it reshapes it (a
    broadcast error for a convolution's weights), and takes a broadcasting scale as the Quant's. New initializers,
    so a tensor another node reads keeps its shape."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    constants = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        axis = next((a.i for a in node.attribute if a.name == "axis"), None)
        if node.op_type != "DequantizeLinear" or axis is None or node.input[0] not in constants or \
                any(name not in constants for name in node.input[1:3]):
            continue
        rank = len(constants[node.input[0]].dims)
        shape = [1] * rank
        shape[axis % rank] = -1
        for k in (1, 2):
            value = onnx.numpy_helper.to_array(constants[node.input[k]]).reshape(shape)
            name = f"{node.input[k]}_broadcast_{node.name}"
            model.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
            node.input[k] = name
        kept = [a for a in node.attribute if a.name != "axis"]
        del node.attribute[:]
        node.attribute.extend(kept)
    return model


def _drop_per_tensor_axes(model: onnx.ModelProto) -> onnx.ModelProto:
    """An ``axis`` on a QuantizeLinear/DequantizeLinear with one scale means nothing (the scale
    applies to every value), and qonnx's QCDQToQuant reads it as a per-channel axis: drop it."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    scalar = {t.name for t in model.graph.initializer if np.prod(t.dims) == 1}
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and node.input[1] in scalar:
            kept = [a for a in node.attribute if a.name != "axis"]
            del node.attribute[:]
            node.attribute.extend(kept)
    return model
