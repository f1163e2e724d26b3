"""onnxruntime behind one small interface."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterable

import numpy as np
import onnx
import onnxruntime as ort

from ..core.errors import UserError, first_line


def providers_for(kind: str) -> list[str]:
    """GPU subfunctions use CUDA when this onnxruntime has it, else the CPU."""
    available = ort.get_available_providers()
    if kind == "gpu" and "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def session_options(log_severity_level: int = 4) -> ort.SessionOptions:
    """onnxruntime's options for every run of a model: its integer kernels exact on any x86 CPU.
    On x86 without VNNI, onnxruntime's u8s8 matrix kernels (the QDQ Gemm/Conv/MatMul it fuses) add
    pairs of products in 16 bits, which saturate (onnxruntime PR #12088); ``session.x64quantprecision``
    makes them u8u8, which does not, so a QDQ model runs as the ONNX standard defines it, as it does on
    the board's ARM cores, whatever CPU runs the check."""
    options = ort.SessionOptions()
    options.log_severity_level = log_severity_level
    options.add_session_config_entry("session.x64quantprecision", "1")
    return options


class OrtModel:
    """A model on onnxruntime; what onnxruntime refuses (a model it cannot load, a node that fails
    on the inputs given) is a UserError naming the model."""

    def __init__(self, path: Path | str | bytes, kind: str = "cpu", name: str = "the model"):
        options = session_options()  # what fails is reported below, in one line
        source = path if isinstance(path, bytes) else str(path)
        self.name = name if isinstance(path, bytes) else str(path)
        try:
            self.session = ort.InferenceSession(source, options, providers=providers_for(kind))
        except Exception as err:  # onnxruntime raises its own Fail / InvalidGraph / NotImplemented kinds
            raise UserError(f"{self.name}: onnxruntime cannot load it: {first_line(err)}") from None
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        # (name, shape) where every dimension is fixed (the model's batch is fixed at intake)
        self.inputs = [(i.name, list(i.shape)) for i in self.session.get_inputs()]
        self.outputs = [(o.name, list(o.shape)) for o in self.session.get_outputs()]

    @property
    def engine(self) -> str:
        """What runs it, as its session reports (a provider it could not start is not listed)."""
        return "onnxruntime " + self.session.get_providers()[0].replace("ExecutionProvider", "")

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            results = self.session.run(None, {n: feeds[n] for n in self.input_names})
        except Exception as err:
            raise UserError(f"{self.name}: onnxruntime failed to run it: {first_line(err)}") from None
        return {name: _as_array(value) for name, value in zip(self.output_names, results)}


def _as_array(value):
    """A ZipMap's sequence of {class: probability} maps as the (samples, classes) array intake makes
    of it (rewrites.zipmap_to_tensor); tensors as they are."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return np.array([list(row.values()) for row in value], dtype=np.float32)
    return value




# onnxruntime's optimizers left off on a quantized model: the fusions that scale a Conv's weights (its
# weights keep their codes; rewrites.quantized_weights_as_codes puts the scale after the layer), and
# WeightBiasQuantization, which rounds a float bias beside quantized inputs to int32 codes (a
# DequantizeLinear of computed codes without a zero point): the model adds the float bias.
_OFF_FOR_QUANTIZED = ["ConvBNFusion", "ConvAddFusion", "ConvMulFusion", "WeightBiasQuantization"]


def fold_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnxruntime's offline graph optimisation at its basic level: constant folding (constant
    subgraphs, and Shape of statically shaped tensors), redundant nodes (Identity, Dropout, no-op
    Unsqueeze/Slice) removed, and the semantics-preserving Conv + Add / Mul / BatchNormalization
    fusions. In a quantized model (QuantizeLinear/DequantizeLinear nodes) the weights stay
    DequantizeLinear of integers and no fusion scales them. Only standard opsets stay imported."""
    quantized = any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)
    options = session_options()  # a model it refuses is reported by the caller, in one line
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.add_session_config_entry("session.disable_quant_qdq", "0" if quantized else "1")
    with tempfile.TemporaryDirectory() as folder:
        options.optimized_model_filepath = str(Path(folder) / "folded.onnx")
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"],
                             disabled_optimizers=_OFF_FOR_QUANTIZED if quantized else None)
        folded = onnx.load(options.optimized_model_filepath)
    used = {n.domain for n in folded.graph.node} | {""}
    kept = [o for o in folded.opset_import if o.domain in used]
    del folded.opset_import[:]
    folded.opset_import.extend(kept)
    folded.ir_version = model.ir_version
    return folded


def read_built_model(path: Path | str) -> onnx.ModelProto:
    """A model a build wrote (its external data embedded); a damaged or missing one is one line."""
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as err:  # protobuf's DecodeError, a missing file
        raise UserError(f"{path}: not a readable ONNX model ({type(err).__name__}); rebuild with 'hetdeploy "
                        f"build'") from None


def holds_qonnx_ops(path: Path | str) -> bool:
    """Whether the model at ``path`` has QONNX ops, which onnxruntime cannot run."""
    from ..core.graph import QONNX_DOMAINS

    return any(n.domain in QONNX_DOMAINS for n in read_built_model(path).graph.node)


def graph_edges(path: Path | str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The model's node-to-node edges (producer, consumer; in node order) and each node's op."""
    graph = read_built_model(path).graph
    producer = {t: node.name for node in graph.node for t in node.output}
    edges = [(producer[t], node.name) for node in graph.node for t in node.input if t in producer]
    return edges, {node.name: node.op_type for node in graph.node}


def open_model(path: Path | str, kind: str = "cpu"):
    """The model at ``path`` on onnxruntime, or on qonnx's execution when it holds QONNX ops."""
    if holds_qonnx_ops(path):
        from .qonnx_adapter import QonnxModel

        return QonnxModel(path)
    return OrtModel(path, kind)


def open_in_memory(model: onnx.ModelProto, name: str):
    """``open_model`` for a model built in memory (``name`` says what it is in errors); on the CPU."""
    from ..core.graph import QONNX_DOMAINS

    if any(n.domain in QONNX_DOMAINS for n in model.graph.node):
        from .qonnx_adapter import QonnxModel

        return QonnxModel(model, name)
    return OrtModel(model.SerializeToString(), "cpu", name)


def with_outputs(model: onnx.ModelProto, tensors: Iterable[str]) -> onnx.ModelProto:
    """A copy of ``model`` whose outputs also hold ``tensors`` (those not already an input or output of it),
    each with its value_info's type where the model describes it, moved out of value_info (qonnx takes one
    description a tensor)."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    known = {o.name for o in exposed.graph.output} | {i.name for i in exposed.graph.input}
    added = [t for t in dict.fromkeys(tensors) if t and t not in known]
    described = {v.name: v for v in exposed.graph.value_info}
    exposed.graph.output.extend(described.get(t) or onnx.ValueInfoProto(name=t) for t in added)
    moved = set(added)
    kept = [v for v in exposed.graph.value_info if v.name not in moved]
    del exposed.graph.value_info[:]
    exposed.graph.value_info.extend(kept)
    return exposed


def run_in_memory(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Every output of an in-memory model (one built for a search, never saved) on each of ``feeds``."""
    session = ort.InferenceSession(model.SerializeToString(), session_options(3), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return [dict(zip(names, session.run(names, feed))) for feed in feeds]
