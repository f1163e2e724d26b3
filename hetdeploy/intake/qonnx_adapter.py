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

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from qonnx.core.onnx_exec import execute_onnx

        try:  # NaN or overflow in a quantizer is judged on the outputs, not printed as numpy warnings
            with captured_stdout(), np.errstate(all="ignore"):
                results = execute_onnx(self.wrapper, {n: feeds[n] for n in self.input_names})
        except Exception as err:
            raise UserError(f"{self.name}: qonnx's execution failed: {first_line(err)}") from None
        return {n: results[n] for n in self.output_names}



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

    return _transform(_drop_per_tensor_axes(model), QCDQToQuant())


def fold_constant_quantizers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Quantizers of constants (weights, biases) replaced by the values they give (qonnx's
    FoldConstants, quantizers included): the layers then read quantized constants."""
    from qonnx.transformation.fold_constants import FoldConstants

    return _transform(model, FoldConstants(exclude_op_types=[]))


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
