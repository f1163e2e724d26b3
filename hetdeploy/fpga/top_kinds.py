"""How the FPGA's C++ makes and runs each kind of execution unit: one class a kind, its C++ (the statement that
runs it, and the constants and declarations it needs) in one template file, hls/kinds/<kind>.cpp.in, as hls4ml
keeps a template per layer call.

Generating a unit, the first kind in ``TOP_KINDS`` that makes it (``makes``: the unit has an engine layer, its PE
is hls4ml's, or the top computes its first op) writes what the top needs of it (``generate``: hls4ml's project,
the engine's weights, a relayout's steps or a scale table) and the type of its output buffer. Afterwards a unit is of
the first kind that says it is one (``is_one``, read from what the plan holds of it), and that kind writes the
statement that runs it on the buffers of the top (``run``), in the top's schedule and in its own C-simulation
entry alike. A new kind of unit is a class here and its template file; what planning knows of it (its estimate
and folding) is its class in ``planning.units.kinds``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Mapping, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..core.board import TOP_WINDOW_OPS
from ..core.board_runtime import channels_first, channels_last, stored_shape
from ..core.graph import Node
from ..core.plan import ExecutionUnit, LocalResponse as LocalResponseAttributes, Quantizer, UnitHls, WeightPort, \
    Window as WindowGeometry
from ..core.precision import CppFixed, quantizer_codes, weight_fixed
from ..intake.ort_adapter import OrtModel
from ..planning.units import ENGINE_PORT_MAX_BUNDLES, XNOR_POPCOUNT, arena_words, concat_channels, \
    token_interval as schedule_interval, tokens_of, word_values
from ..planning.units.costs import window_rows
from ..planning.units.relayout import RelayoutSteps, index_of, relayout_steps
from .engine import affine as engine_affine, layer_values as engine_layer_values, quantized as engine_quantized, \
    weights_bytes as engine_weights_bytes
from . import open_synth
from .hls4ml_adapter import ARITHMETIC_FILE, fixed_precision
from .packing import UNIT_WEIGHTS_FILE
from .templates import line, statement

if TYPE_CHECKING:
    from .hls_top import EngineCall


@dataclass(frozen=True)
class Buffers:
    """Where a unit's statement finds its tensors: ``at(tensor)`` the word it starts at, ``types`` their C++
    element types, ``shapes`` their ONNX shapes; the unit's DDR weight ports, and its engine call if it has one."""

    at: Callable[[str], str]
    types: dict[str, str]
    shapes: dict[str, list[int]]
    weights: list[WeightPort]
    engine: Optional["EngineCall"] = None
    # the tensors their units wrote into a Concat's output already (the top's: ``ExecutionUnit.in_place``; none where
    # a unit is checked alone, on buffers of its own), and the elements from one pixel to the next of those that lie
    # in another's buffer (a view's: its root's channels, ``Buffer.view_of``)
    in_place: frozenset[str] = frozenset()
    strides: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def stride(self, tensor: str) -> int:
        """The elements from one of ``tensor``'s pixels to the next in the buffer that holds it."""
        return self.strides.get(tensor, self.shapes[tensor][1])


@dataclass
class UnitSource:
    """What generating a unit reads, and the types of the subfunction's buffers, which it adds its output's to."""

    model: onnx.ModelProto  # the unit as ONNX (one band's, when it runs in bands)
    reference: OrtModel  # the whole unit on onnxruntime
    nodes: list[Node]  # its nodes, in order
    samples: list[dict[str, np.ndarray]]  # its inputs on the float pipeline (each band's, when it runs in bands)
    envs: list[dict[str, np.ndarray]]  # every tensor's values on the float pipeline so far, its outputs' too
    width: int  # its bits
    project: Path  # the subfunction's HLS project
    config_types: dict[str, str]  # tensor -> the type of its buffer, as an hls4ml config string
    cpp_types: dict[str, str]  # the same, as a C++ type
    # hls4ml's project of the unit's model on the samples (the stage's settings and cache); None: hls4ml left no
    # layer of it
    convert: Callable[[ExecutionUnit, onnx.ModelProto, list[dict[str, np.ndarray]]], Optional[UnitHls]]

    def size(self, tensor: str, values: list[dict[str, np.ndarray]]) -> None:
        """``tensor``'s buffer typed for the largest of its ``values``, at the unit's bits."""
        self.config_types[tensor], self.cpp_types[tensor] = fixed_precision(
            max(float(np.max(np.abs(v[tensor]))) for v in values), self.width)

    def size_inputs(self, unit: ExecutionUnit) -> None:
        """A subfunction input ``unit`` reads first: its buffer typed on the unit's samples."""
        for tensor in unit.inputs:
            if tensor not in self.cpp_types:
                self.size(tensor, self.samples)

    def write(self, unit: ExecutionUnit, file: str, contents: str | bytes) -> str:
        """``file`` of the unit's folder of the project, written; its path relative to the project."""
        path = Path("units") / unit.name / file
        (self.project / path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(contents, bytes):
            (self.project / path).write_bytes(contents)
        else:
            (self.project / path).write_text(contents)
        return str(path)


class TopKind:
    """One kind of unit as the FPGA's C++ makes and runs it."""

    name: ClassVar[str]
    how: ClassVar[str] = "implemented by the top"  # what the build's progress says of such a unit
    ops: ClassVar[tuple[str, ...]] = ()  # the first ops of the units it makes, where the top computes them

    def makes(self, unit: ExecutionUnit, op: str, engine: str) -> bool:
        """Whether it makes ``unit``, whose first op is ``op``, on a PE of ``engine`` (``board.ENGINES``)."""
        return op in self.ops

    def generate(self, unit: ExecutionUnit, source: UnitSource) -> None:
        """What the top needs of ``unit`` into the plan and the project; its output buffer's type into ``source``."""
        raise NotImplementedError

    def is_one(self, unit: ExecutionUnit) -> bool:
        raise NotImplementedError

    def trace(self, unit: ExecutionUnit, project: Path, types: dict[str, str],
              input_shape: tuple[int, ...]) -> open_synth.Traced:
        """``unit``'s arithmetic traced for open synthesis (``build --open-synth``), from what its C++ is made of
        in ``project`` (the subfunction's), its buffers of C++ ``types``; raises ``open_synth.NotTraced``."""
        raise open_synth.NotTraced(f"{self.traced_as(unit)}: hetdeploy's own C++, which open synthesis does not "
                                   f"trace")

    def ddr_weights(self, unit: ExecutionUnit, width: int) -> tuple[int, str]:
        """The bytes of the weights a unit of this kind keeps in DDR (``weights_in_ddr``), made at ``width`` bits,
        and the C++ type of their buffer."""
        raise NotImplementedError(f"a unit of kind {self.name} keeps no weights in DDR")

    def traced_as(self, unit: ExecutionUnit) -> str:
        """What the unit is, in the line saying it is not traced."""
        return f"the top's {' + '.join(unit.elementwise)}"

    def run(self, unit: ExecutionUnit, buffers: Buffers) -> str:
        """The lines that run ``unit``: its template (its kind's name) filled with ``values``."""
        return self.line(self.name, **self.values(unit, buffers))

    def values(self, unit: ExecutionUnit, buffers: Buffers) -> dict:
        raise NotImplementedError

    def token_op(self, unit: ExecutionUnit, tokens: dict[str, str], buffers: Buffers) -> Optional[str]:
        """In a dataflow top (fpga/dataflow_top.py), the C++ expression of its output token from a token of each
        input (``tokens``: tensor -> the variable holding it); None: it runs over whole buffers of its own."""
        return None

    def token_interval(self, unit: ExecutionUnit, tokens: int) -> int:
        """In a dataflow top, the cycles between two of its ``tokens`` output tokens (its token loop's II)."""
        return 1

    def line(self, name: str, /, **values) -> str:
        """Its template ``name`` filled with ``values``, as lines of a function's body."""
        return line(name, f"kinds/{self.name}.cpp.in", **values)

    def statement(self, name: str, /, **values) -> str:
        """Its template ``name`` filled with ``values``."""
        return statement(name, f"kinds/{self.name}.cpp.in", **values)


def values_of(shape: list[int]) -> int:
    """The values of a tensor of ``shape``."""
    return int(math.prod(shape))


# the top's ports the engine units read their weights through, each an m_axi bundle of its own (ENGINE_BUNDLE, then
# ENGINE_BUNDLE1 ..: the block design puts each on a DDR port of its own)
ENGINE_PORT, ENGINE_BUNDLE = "engine_weights", "gmem_engine"


def engine_port_names(bundles: int) -> list[tuple[str, str]]:
    """The engines' weights ports and their bundles, where the port is ``bundles`` bundles: engine_weights,
    engine_weights1, ..: no port's name is another's and a register suffix (the host writes a 64-bit pointer's
    <port>_1 and <port>_2: board_runtime)."""
    return [(ENGINE_PORT + (str(b) if b else ""), ENGINE_BUNDLE + (str(b) if b else "")) for b in range(bundles)]


def engine_weights_pointers(reads: tuple[int, ...]) -> list[str]:
    """engine.h's w0 .. w3 of a call: each bundle's port at the call's first read of it (``reads``), then the first
    again for each bundle the engine has not (never read): engine.h's w0 .. w3, the most bundles a port is."""
    pointers = [f"{port} + {read}" for (port, _), read in zip(engine_port_names(len(reads)), reads)]
    return pointers + pointers[:1] * (ENGINE_PORT_MAX_BUNDLES - len(pointers))


class Engine(TopKind):
    name = "engine"
    how = "on the engine"

    def makes(self, unit, op, engine):
        return unit.engine is not None

    def generate(self, unit, source):
        """Its weights and biases (BatchNormalizations folded in) at the unit's bits into its DDR weights file, its
        layer's binary points set (its residual's too, the map its Add adds: its second input); its output's type
        sized on the values it gave on the float pipeline."""
        x, (y,) = unit.inputs[0], unit.outputs
        source.size_inputs(unit)
        source.size(y, source.envs)
        weights, bias = engine_affine(source.model)
        unit.engine, packed = engine_quantized(unit.engine, weights, bias, source.width, source.cpp_types[x],
                                               source.cpp_types[y], source.cpp_types.get(unit.residual))
        source.write(unit, UNIT_WEIGHTS_FILE, packed)

    def is_one(self, unit):
        return unit.engine is not None

    def traced_as(self, unit):
        return "the engine's layer"

    def ddr_weights(self, unit, width):
        """Its weights region, ``width``-bit lanes."""
        return engine_weights_bytes(unit.engine, width), f"ap_int<{width}>"

    def run(self, unit, buffers):
        call = buffers.engine
        before = self.line("copy_input", source=call.copy[0], target=call.copy[1], words=call.copy[2]) if call.copy \
            else ""
        if call.staging[0] >= 0:  # staged through the weights port's first bundles, R words a read
            read = call.port_words // call.bundles
            first, end = call.source[1], call.source[1] + arena_words(values_of(unit.engine.input) *
                                                                      unit.engine.channels, call.bits[0])
            before += self.line("staged_view", port=read, first=first // read, region=ENGINE_PORT,
                                 reads=(end - 1) // read - first // read + 1)
        places = {name: ", ".join(map(str, place)) for name, place in (
            ("source", call.source), ("target", call.target), ("staging", call.staging), ("residual", call.residual))}
        # (a unit checked alone writes its output pixels its own channels apart, into a buffer of its own)
        layer = self.statement("alone", unit=unit.name) if call.alone else f"{unit.name}_layer"
        # the bundles' ports from the DDR region's start: the first two stage its rows (one where the port is one)
        regions = [port for port, _ in engine_port_names(call.bundles)]
        return before + self.line("run_engine", name=call.function, memories=", ".join(call.memories), **places,
                                  region=regions[0], region1=regions[min(1, call.bundles - 1)],
                                  weights=", ".join(engine_weights_pointers(call.weights_reads)), layer=layer)

    def declaration(self, unit: ExecutionUnit, out_bits: int) -> str:
        """``<unit>_layer``, the C++ constant of the unit's layer (engine.h's engine_layer) for its ``out_bits``-bit
        outputs."""
        return self.statement("engine_layer", unit=unit.name,
                              values=", ".join(map(str, engine_layer_values(unit.engine, out_bits))))


class Hls4ml(TopKind):
    name = "hls4ml"
    how = "converted by hls4ml"

    def makes(self, unit, op, engine):
        return engine == "hls4ml"

    def generate(self, unit, source):
        """hls4ml's project of it; its ports' types those of the buffers they meet. A unit hls4ml left no layer of
        (a BatchNormalization of 1 and 0) the top computes as it would that op."""
        unit.hls = source.convert(unit, source.model, source.samples)
        if unit.hls is None:
            kind_to_generate(unit, source.nodes[0].op, "top").generate(unit, source)
            return
        for port in unit.hls.inputs + unit.hls.outputs:
            source.config_types.setdefault(port.tensor, port.config_precision)
            source.cpp_types.setdefault(port.tensor, port.precision)

    def is_one(self, unit):
        return unit.hls is not None

    def ddr_weights(self, unit, width):
        """Its weight arrays, typed as the first (the unit's header says each one's)."""
        return sum(w.size for w in unit.hls.ddr_weights), unit.hls.ddr_weights[0].precision

    def trace(self, unit, project, types, input_shape):
        """What hls4ml's layers compute (``write_arithmetic``'s file in its project), one band's when banded."""
        if unit.strategy == XNOR_POPCOUNT:  # its weights in the file are the kernel's sign bits
            raise open_synth.NotTraced(f"unit {unit.name}: hetdeploy's XNOR-popcount kernel in an hls4ml layer, "
                                       f"which open synthesis does not trace")
        return open_synth.trace(open_synth.Arithmetic.load(project / "units" / unit.name / ARITHMETIC_FILE),
                                unit.band.pad_top if unit.band is not None else None)

    def run(self, unit, buffers):
        arguments = [buffers.at(t) for t in unit.inputs + unit.outputs] + [p.port for p in buffers.weights]
        return self.line("run_step", unit=unit.name, arguments=", ".join(arguments))


class Banded(Hls4ml):
    """An hls4ml unit's step on each band, between the band buffers and its own."""

    name = "banded"

    def makes(self, unit, op, engine):
        return engine == "hls4ml" and unit.band is not None

    def is_one(self, unit):
        return unit.band is not None

    def run(self, unit, buffers):
        (band_in, _), (band_out, _) = unit.band_buffers().items()
        b, (x,), (y,), at, types = unit.band, unit.inputs, unit.outputs, buffers.at, buffers.types
        return self.line("band_loop", count=b.count, in_type=types[x], source=at(x), band_in=at(band_in),
                         in_height=b.input_height, in_row_values=b.input_row_values, in_step=b.input_step,
                         pad_top=b.pad_top, in_rows=b.input_rows, unit=unit.name,
                         arguments=", ".join([at(band_in), at(band_out)] + [p.port for p in buffers.weights]),
                         out_type=types[y], band_out=at(band_out), target=at(y), out_height=b.output_height,
                         out_row_values=b.output_row_values, rows=b.rows)


class _Computed(TopKind):
    """An op the top computes itself over whole buffers (arena.h's add, concat, affine), a ReLU after it fused:
    its output's type sized on the values it gave on the float pipeline."""

    def generate(self, unit, source):
        source.size_inputs(unit)
        source.size(unit.outputs[0], source.envs)
        unit.elementwise = [node.op for node in source.nodes]


class _Moved(TopKind):
    """An op the top runs by moving or comparing its input's values: its output is of its input's type."""

    def generate(self, unit, source):
        source.size_inputs(unit)
        (x,), (y,) = unit.inputs, unit.outputs
        source.config_types[y], source.cpp_types[y] = source.config_types[x], source.cpp_types[x]

    def trace(self, unit, project, types, input_shape):
        """``open_synth.trace_top`` of the values it moves, ``moved`` says where from."""
        (x,), (y,) = unit.inputs, unit.outputs
        if types[x] != types[y]:
            raise open_synth.NotTraced(f"the top writes {types[x]} values into a {types[y]} buffer")
        return open_synth.trace_top(unit.name, types[x], values_of(list(input_shape)),
                                    **self.moved(unit, project, input_shape))

    def moved(self, unit: ExecutionUnit, project: Path, input_shape: tuple[int, ...]) -> dict:
        """``trace_top``'s window or index (each output value's input position)."""
        raise NotImplementedError


class Affine(_Computed):
    """A BatchNormalization: a channels-last buffer's axis 1 is its channels."""

    name = "affine"
    ops = ("BatchNormalization",)

    def generate(self, unit, source):
        """Its per-channel scale and shift (scale / sqrt(var + epsilon), bias - mean * that) as one fixed-point
        type of the unit's bits that holds the larger of them (``weight_fixed``, rounded to the nearest), in a
        C++ header."""
        super().generate(unit, source)
        (node, *_), constants = source.model.graph.node, {t.name: numpy_helper.to_array(t).astype(np.float64)
                                                          for t in source.model.graph.initializer}
        eps = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "epsilon"), 1e-5)
        gamma, beta, mean, var = (constants[name] for name in node.input[1:5])
        scale = gamma / np.sqrt(var + eps)
        shift = beta - mean * scale
        bits, integer = weight_fixed(np.concatenate([scale, shift]), source.width)
        held = CppFixed(True, bits, integer, "RND", "SAT")
        unit.affine = source.write(unit, "affine.h", self.statement(
            "affine_table", unit=unit.name, type=f"ap_fixed<{bits},{integer},AP_RND,AP_SAT>", channels=scale.size,
            scale=", ".join(map(repr, held.quantize(scale).tolist())),
            shift=", ".join(map(repr, held.quantize(shift).tolist()))) + "\n")

    def is_one(self, unit):
        return bool(unit.affine)

    def values(self, unit, buffers):
        (x,), (y,), at, types, shapes = unit.inputs, unit.outputs, buffers.at, buffers.types, buffers.shapes
        return dict(in_type=types[x], unit=unit.name, type=types[y], source=at(x), target=at(y),
                    channels=shapes[y][1], values=values_of(shapes[y]), relu=str("Relu" in unit.elementwise).lower(),
                    reuse=unit.reuse_factor, stride=buffers.stride(x))

    def token_op(self, unit, tokens, buffers):
        """A pixel's channels (a flat tensor's values: its channels) at a time."""
        return self.statement("affine_token", **self.values(unit, dataclasses.replace(buffers, at=tokens.get)))

    def token_interval(self, unit, tokens):
        """A token's words, each at its reuse factor's cycles (its estimate's, the dataflow schedule's interval):
        its multipliers a word's lanes over its reuse factor, as over whole buffers."""
        return schedule_interval(unit.estimate["compute_cycles"], tokens)


class Concat(_Computed):
    """A channels-last buffer's channels are its axis 1; Concat(x, x) reads x twice. A unit of a chain of Concats
    (``units.concat_slices``: intake's split of one of three or more tensors, each a whole number of words) moves
    each of its tensors, its inputs in order, into its channels of the output (arena.h's concat_slice)."""

    name = "concat"
    ops = ("Concat",)

    def is_one(self, unit):
        return bool(unit.elementwise) and set(unit.elementwise) == {"Concat"}

    def run(self, unit, buffers):
        """Its inputs moved into their channels of the output, but those their units wrote there already; each a
        slice of its own where its output lies in a wider buffer (a later Concat's, written in place)."""
        (y,) = unit.outputs
        if len(unit.elementwise) == 1 and not buffers.in_place & set(unit.inputs) and \
                buffers.stride(y) == buffers.shapes[y][1]:
            return super().run(unit, buffers)
        at, types, shapes = buffers.at, buffers.types, buffers.shapes
        return "".join(self.line("concat_slice", in_type=types[x], type=types[y], source=at(x), target=at(y),
                                 pixels=values_of(shapes[y][2:]), in_channels=shapes[x][1], first=first,
                                 channels=buffers.stride(y))
                       for x, first in concat_channels(unit, shapes) if x not in buffers.in_place) or \
            self.line("concat_in_place")

    def values(self, unit, buffers):
        (a, b), (y,), at, types, shapes = (unit.inputs * 2)[:2], unit.outputs, buffers.at, buffers.types, \
            buffers.shapes
        return dict(first_type=types[a], second_type=types[b], type=types[y], first=at(a), second=at(b),
                    target=at(y), pixels=values_of(shapes[y][2:]), first_channels=shapes[a][1],
                    second_channels=shapes[b][1])

    def token_op(self, unit, tokens, buffers):
        """A pixel's channels of each input at a time: of a chain, the channels so far (at the output's type)
        beside the next tensor's."""
        tensors, (y,), types, shapes = (unit.inputs * 2)[:max(2, len(unit.inputs))], unit.outputs, buffers.types, \
            buffers.shapes
        expression, channels, kind = tokens[tensors[0]], shapes[tensors[0]][1], types[tensors[0]]
        for x in tensors[1:]:
            expression = self.statement("concat_token", first_type=kind, second_type=types[x], type=types[y],
                                        first=expression, second=tokens[x], first_channels=channels,
                                        second_channels=shapes[x][1])
            channels, kind = channels + shapes[x][1], types[y]
        return expression


class LocalResponse(_Computed):
    """An LRN: a channels-last buffer's axis 1 is its channels."""

    name = "lrn"
    ops = ("LRN",)

    def generate(self, unit, source):
        super().generate(unit, source)
        attrs = source.nodes[0].attrs
        unit.local_response = LocalResponseAttributes(attrs["size"], attrs.get("alpha", 1e-4), attrs.get("beta", 0.75),
                                                      attrs.get("bias", 1.0))

    def is_one(self, unit):
        return unit.local_response is not None

    def values(self, unit, buffers):
        (x,), (y,), at, types, shapes = unit.inputs, unit.outputs, buffers.at, buffers.types, buffers.shapes
        lrn = unit.local_response
        return dict(in_type=types[x], type=types[y], size=lrn.size, source=at(x), target=at(y),
                    channels=shapes[y][1], values=values_of(shapes[y]), alpha=repr(float(lrn.alpha)),
                    beta=repr(float(lrn.beta)), bias=repr(float(lrn.bias)), reuse=unit.reuse_factor)


class Quantize(_Computed):
    """A Quant of one scale and one zero point (an integer), rounding to the nearest or down: its 1 / scale and its
    scale as fixed-point constants of QUANT_CONSTANT_BITS bits, rounded to the nearest (exact where the scale is a
    power of two: then the product by its inverse is a shift)."""

    name = "quant"
    ops = ("Quant",)

    def generate(self, unit, source):
        super().generate(unit, source)
        node = source.nodes[0]
        scale, zero_point, bits = (node.scalars[k] for k in (1, 2, 3))  # (the PE's limits: one each, an integer)
        least, most = quantizer_codes(int(bits), bool(node.attrs.get("signed", 1)), bool(node.attrs.get("narrow", 0)))
        unit.quantizer = Quantizer(float(scale), int(zero_point), least, most,
                                   node.attrs.get("rounding_mode", "ROUND").upper() == "FLOOR")

    def is_one(self, unit):
        return unit.quantizer is not None

    def values(self, unit, buffers):
        (x,), (y,), at, types, shapes = unit.inputs, unit.outputs, buffers.at, buffers.types, buffers.shapes
        q = unit.quantizer
        return dict(in_type=types[x], type=types[y], source=at(x), target=at(y), values=values_of(shapes[y]),
                    inverse_type=_constant_type(1.0 / q.scale), inverse=repr(1.0 / q.scale),
                    scale_type=_constant_type(q.scale), scale=repr(q.scale), zero_point=q.zero_point,
                    least=q.least, most=q.most, floor=str(q.floor).lower(), reuse=unit.reuse_factor)


# The bits of a quantizer's constants (its scale and 1 / scale): past float32's 24 of a value's significand, so that
# a product by them rounds where the model's float32 arithmetic does, but for ties
QUANT_CONSTANT_BITS = 40


def _constant_type(value: float) -> str:
    """An unsigned fixed-point type of QUANT_CONSTANT_BITS bits whose integer bits just hold ``value`` (> 0),
    rounding to the nearest."""
    return f"ap_ufixed<{QUANT_CONSTANT_BITS},{math.floor(math.log2(value)) + 1},AP_RND>"


class Add(_Computed):
    """x + x reads one buffer twice."""

    name = "add"
    ops = ("Add",)

    def is_one(self, unit):
        return bool(unit.elementwise)

    def values(self, unit, buffers):
        (a, b), (y,), at, types, shapes = (unit.inputs * 2)[:2], unit.outputs, buffers.at, buffers.types, \
            buffers.shapes
        return dict(first_type=types[a], second_type=types[b], type=types[y], first=at(a), second=at(b),
                    target=at(y), values=values_of(shapes[y]), relu=str("Relu" in unit.elementwise).lower())

    def token_op(self, unit, tokens, buffers):
        """A token of each input at a time."""
        return self.statement("add_token", **self.values(unit, dataclasses.replace(buffers, at=tokens.get))
                              | {"values": tokens_of(buffers.shapes[unit.outputs[0]])[1]})


class Window(_Moved):
    """A window op the top reduces (a MaxPool, an AveragePool, a GlobalAveragePool)."""

    name = "window"
    ops = TOP_WINDOW_OPS

    def generate(self, unit, source):
        super().generate(unit, source)
        unit.window = WindowGeometry.of(source.nodes[0])

    def is_one(self, unit):
        return unit.window is not None

    def moved(self, unit, project, input_shape):
        return dict(window=unit.window)

    def run(self, unit, buffers):
        (x,), (y,) = unit.inputs, unit.outputs
        # (its precision: its input's type, its output's too; window_op's lanes are its)
        return self.reduction(unit.name, unit.window, buffers.types[x], buffers.at(x), buffers.at(y),
                              window_rows(unit.window.values(), CppFixed.parse(unit.precision).width,
                                          unit.reuse_factor))

    def reduction(self, name: str, window: WindowGeometry, value_type: str, source: str, target: str,
                  rows: int) -> str:
        """The lines of arena.h's window_op over ``window`` (its constants unit ``name``'s: ``declaration``) from the
        ``value_type`` values at ``source`` to ``target``, built for ``rows`` output rows at once."""
        mean = window.reduce != "max"
        return self.line("window_mean" if mean else "window_max", type=value_type, source=source, target=target,
                         unit=name, rows=rows, by_count=str(len(window.inverse_counts()) > 1).lower())

    def declaration(self, unit: ExecutionUnit) -> str:
        """``<unit>_window``, the C++ constant of its window (arena.h's window_geometry, in its field order), and a
        mean's ``<unit>_inverses``, those of its ``inverse_counts`` (1.0 / n, as the compiler folds it; 0 for none)."""
        geometry = self.statement("window_geometry", unit=unit.name, values=", ".join(map(str, unit.window.values())))
        if unit.window.reduce == "max":
            return geometry
        inverses = ", ".join(f"hetdeploy::window_inverse_t({f'1.0 / {n}' if n else 0})"
                             for n in unit.window.inverse_counts())
        return geometry + "\n" + self.statement("window_inverses", unit=unit.name, inverses=inverses)


# an entry of a relayout's steps as index.h writes it (arena.h's relayout_step): {read, write, slot, {select ...}}
STEP_ENTRY = re.compile(r"\{(-?\d+), (-?\d+), (-?\d+), \{([-\d, ]+)\}\}")


class Gather(_Moved):
    """Any op that only moves values (a relayout: Flatten, Reshape, Transpose, Slice ...; a chain of them one unit),
    by a table of steps (planning/units/relayout.py) that reads each input word about once."""

    name = "gather"

    def makes(self, unit, op, engine):
        return True

    def generate(self, unit, source):
        """Its steps, from where each output value comes from (buffers of rank >= 3 are channels-last), found by
        running the unit's own ONNX model on the input buffer's positions, so any op that only moves values is right
        by construction."""
        super().generate(unit, source)
        (name, in_shape), = source.reference.inputs
        (_, out_shape), = source.reference.outputs
        positions = np.arange(values_of(in_shape), dtype=np.float32)  # exact up to 2**24 values
        moved = source.reference.run({name: channels_first(positions.reshape(stored_shape(in_shape, in_shape[0])))})
        index = channels_last(next(iter(moved.values())).reshape(out_shape)).reshape(-1).astype(np.int64)
        steps = relayout_steps(index, word_values(CppFixed.parse(source.cpp_types[unit.inputs[0]]).width),
                               unit.reuse_factor > 1)
        unit.index_table = source.write(unit, "index.h", self.table(unit.name, steps))

    def table(self, name: str, steps: RelayoutSteps) -> str:
        """units/<unit>/index.h of unit ``name``: its ``steps`` as C++ constants (arena.h's relayout_step)."""
        entries = (f"{{{read}, {write}, {slot}, {{{', '.join(map(str, select))}}}}}" for read, write, slot, select
                   in zip(steps.reads.tolist(), steps.writes.tolist(), steps.slots.tolist(), steps.selects.tolist()))
        return self.statement("index_table", unit=name, size=len(steps), repeat=steps.repeat,
                              source_words=steps.source_words, target_words=steps.target_words, held=steps.held,
                              values=", ".join(entries)) + "\n"

    def is_one(self, unit):
        return bool(unit.index_table)

    def moved(self, unit, project, input_shape):
        """The map the steps generate wrote move (units/<unit>/index.h)."""
        table = (project / unit.index_table).read_text()
        entries = STEP_ENTRY.findall(table)
        selects = np.array([[int(v) for v in select.split(",")] for *_, select in entries])
        reads, writes, slots = (np.array([int(entry[k]) for entry in entries]) for k in range(3))
        repeat, source_words, target_words, held = (int(re.search(rf"{unit.name}_{name} = (\d+)", table).group(1))
                                                    for name in ("repeat", "source_words", "target_words", "held"))
        steps = RelayoutSteps(reads, slots, writes, selects, repeat, source_words, target_words, held)
        return dict(index=index_of(steps, selects.shape[1], values_of(list(input_shape))))

    def values(self, unit, buffers):
        (x,), (y,) = unit.inputs, unit.outputs
        return dict(type=buffers.types[x], source=buffers.at(x), target=buffers.at(y), unit=unit.name)


ENGINE, BANDED, HLS4ML, AFFINE, CONCAT, LOCAL_RESPONSE, QUANTIZE, ADD, WINDOW, GATHER = (
    Engine(), Banded(), Hls4ml(), Affine(), Concat(), LocalResponse(), Quantize(), Add(), Window(), Gather())
# In the order a unit is tried against them: the first that makes it, or says it is one, is its kind.
TOP_KINDS = (ENGINE, BANDED, HLS4ML, AFFINE, CONCAT, LOCAL_RESPONSE, QUANTIZE, ADD, WINDOW, GATHER)


def kind_to_generate(unit: ExecutionUnit, op: str, engine: str) -> TopKind:
    """The kind that makes ``unit``, whose first op is ``op``, on a PE of ``engine``."""
    return next(kind for kind in TOP_KINDS if kind.makes(unit, op, engine))


def top_kind(unit: ExecutionUnit) -> TopKind:
    """The kind the top runs ``unit`` as."""
    return next(kind for kind in TOP_KINDS if kind.is_one(unit))
