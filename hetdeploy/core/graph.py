"""A plain view of the model graph: what partitioning and op checks need.

Built by ``model.load_model`` from ONNX; free of onnx so that the algorithms
over it can be tested with hand-written graphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# Op domains onnxruntime's CPU provider implements (the standard ones, ai.onnx.ml, its contrib ops):
# what a device that runs onnxruntime (``ops: all``) runs.
ONNXRUNTIME_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})
# QONNX's ops (Quant, BipolarQuant, Trunc, FloatQuant), as Brevitas, QKeras and qonnx write them: a CPU
# device runs them on qonnx's execution.
QONNX_DOMAINS = frozenset({"onnx.brevitas", "qonnx.custom_op.general", "finn.custom_op.general"})
# QONNX's quantizer ops (and FINN's MultiThreshold)
QUANTIZER_OPS = frozenset({"Quant", "BipolarQuant", "Trunc", "FloatQuant", "MultiThreshold"})


@dataclass
class Node:
    name: str
    op: str
    inputs: list[str]  # activation inputs only (initializers are in ``constants``)
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    constants: dict[int, str] = field(default_factory=dict)  # input index -> initializer name
    constant_elements: int = 0  # values held in the initializers (weights, biases)
    constant_shapes: dict[int, list[int]] = field(default_factory=dict)  # input index -> its initializer's shape
    scalars: dict[int, float] = field(default_factory=dict)  # input index -> the value of a one-value initializer
    # bits that hold every value of the constant at input 1 (a layer's weights) exactly: a quantized
    # model's; None: more than 16, or no such constant
    weight_bits: Optional[int] = None
    # its weights (the constant at input 1) counted by octave under the top of the fixed-point format
    # hetdeploy gives them (precision.weight_octaves), ap_fixed<W, weight_integer>; () when it has none
    weight_octaves: tuple[int, ...] = ()
    weight_integer: Optional[int] = None
    bipolar_weights: bool = False  # its weights (the constant at input 1) each -1 or +1
    input_shapes: list[list[int]] = field(default_factory=list)  # one per ``inputs``
    output_shapes: list[list[int]] = field(default_factory=list)
    dtype: str = "float32"
    domain: str = ""


@dataclass
class Graph:
    nodes: list[Node]  # in a topological order
    inputs: list[str]
    outputs: list[str]
    # ``consumers`` and ``producers`` as made from the first so many nodes: the cost loops ask them for every node,
    # and a graph only ever grows (benchmarks' graphs.Builder appends to the list a Graph holds)
    _consumers: Optional[tuple[int, dict[str, list[int]]]] = field(default=None, init=False, repr=False,
                                                                   compare=False)
    _producers: Optional[tuple[int, dict[str, int]]] = field(default=None, init=False, repr=False, compare=False)

    def node_index(self) -> dict[str, int]:
        """Node name -> its index."""
        return {n.name: i for i, n in enumerate(self.nodes)}

    def producers(self) -> dict[str, int]:
        """Tensor name -> index of the node that writes it (the same dict each call while the nodes are as many:
        not to be changed)."""
        if self._producers is None or self._producers[0] != len(self.nodes):
            self._producers = (len(self.nodes), {t: i for i, n in enumerate(self.nodes) for t in n.outputs})
        return self._producers[1]

    def consumers(self) -> dict[str, list[int]]:
        """Tensor name -> indices of the nodes that read it (the same dict each call while the nodes are as many:
        not to be changed)."""
        if self._consumers is None or self._consumers[0] != len(self.nodes):
            result: dict[str, list[int]] = {}
            for i, n in enumerate(self.nodes):
                for t in n.inputs:
                    result.setdefault(t, []).append(i)
            self._consumers = (len(self.nodes), result)
        return self._consumers[1]
