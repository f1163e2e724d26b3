"""The model input's first quantizer: the nodes that take a model input to it, which run on the host
(``input_quantizers``), and the codes its output travels to an FPGA as, a few bits a value instead of a float
(``port_codes``). Pure, over ``core.graph``."""

from __future__ import annotations

import numpy as np

from ..core.graph import Graph
from ..core.precision import quantizer_codes
from ..core.plan import PortCodes

# Ops that only move or scale values (their other operands constants): what exporters put between a
# model's input and its first quantizer (Brevitas' BNN-PYNQ 2x - 1, a Flatten)
_VALUE_OPS = {"Mul", "Add", "Sub", "Div", "Reshape", "Flatten", "Transpose", "Identity", "Squeeze", "Unsqueeze"}
QUANTIZERS = {"Quant", "BipolarQuant"}


def input_quantizers(graph: Graph) -> list[int]:
    """The nodes that take a model input to its first quantizer's codes: a quantizer whose input
    comes from a graph input through value-only ops (one activation input each), and those ops.
    They run on the host, as the reference computes them, and the FPGA receives the codes: a float
    input rounded to the FPGA's fixed point before the quantizer rounds it again lands on the other
    side of a tie or a threshold now and then, and no exact arithmetic after it undoes that."""
    producers = graph.producers()
    chosen: set[int] = set()
    for i, node in enumerate(graph.nodes):
        if node.op not in QUANTIZERS or not node.inputs:
            continue
        path, tensor = [i], node.inputs[0]
        while tensor not in graph.inputs:
            writer = producers.get(tensor)
            if writer is None or graph.nodes[writer].op not in _VALUE_OPS or len(graph.nodes[writer].inputs) != 1:
                break
            path.append(writer)
            tensor = graph.nodes[writer].inputs[0]
        else:
            chosen.update(path)
    return sorted(chosen)


PORT_CODE_BITS = (1, 2, 4, 8)  # a code's bits on a port: 64-bit words hold whole codes
CODE_WORD_BITS = 64  # a codes port's word (hls/arena.h's codes_t)


def port_codes(graph: Graph) -> dict[str, PortCodes]:
    """Each tensor an input quantizer (``input_quantizers``) gives whose values are a few codes' values: a Quant of
    one scale, an integer zero point and at most 8 bits (its codes q, low..high, are (q - zero point) * scale in
    float32, as qonnx and the host's QuantizeLinear/DequantizeLinear or arithmetic compute them), or a 1-bit
    signed Quant or a BipolarQuant of one scale (-scale or scale). Its values, indexed low first, at the fewest
    of PORT_CODE_BITS bits that index them all (the entries past them repeat the last), and its integer codes."""
    result = {}
    for i in input_quantizers(graph):
        node = graph.nodes[i]
        if node.op not in QUANTIZERS or 1 not in node.scalars:
            continue
        scale = np.float32(node.scalars[1])
        if not np.isfinite(scale) or scale <= 0:
            continue
        if node.op == "BipolarQuant" or (node.scalars.get(3) == 1 and node.attrs.get("signed", 1)):
            values, first, step = np.array([-scale, scale], np.float32), -1, 2
        elif node.op == "Quant" and {2, 3} <= node.scalars.keys():
            zero, bits = node.scalars[2], node.scalars[3]
            if bits != int(bits) or not 1 <= bits <= 8 or zero != int(zero):
                continue
            low, high = quantizer_codes(int(bits), bool(node.attrs.get("signed", 1)), bool(node.attrs.get("narrow", 0)))
            values, first, step = (np.arange(low, high + 1, dtype=np.float32) - np.float32(zero)) * scale, low, 1
        else:
            continue
        bits = next(b for b in PORT_CODE_BITS if 2 ** b >= len(values))
        padded = np.concatenate([values, np.repeat(values[-1:], 2 ** bits - len(values))])
        result[node.outputs[0]] = PortCodes(bits, [float(v) for v in padded], first, step)
    return result
