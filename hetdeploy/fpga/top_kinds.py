"""How a subfunction's top runs each kind of execution unit: one class a kind, its C++ (the statement that runs
it, and the constants and declarations it needs) in one template file, hls/kinds/<kind>.cpp.in, as hls4ml keeps
a template per layer call.

A unit is of the first kind in ``TOP_KINDS`` that says it is one (``is_one``, read from what the plan holds
of it: an engine layer, bands, an hls4ml project, or the op the top computes itself), and its kind writes the
statement that runs it on the buffers of the top (``run``), in the top's schedule and in its own C-simulation
entry alike. A new kind of unit is a class here and its template file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, Optional

from ..core.plan import ExecutionUnit, WeightPort
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


class TopKind:
    """One kind of unit as the top runs it."""

    name: ClassVar[str]

    def is_one(self, unit: ExecutionUnit) -> bool:
        raise NotImplementedError

    def run(self, unit: ExecutionUnit, buffers: Buffers) -> str:
        """The lines that run ``unit``: its template (its kind's name) filled with ``values``."""
        return self.line(self.name, **self.values(unit, buffers))

    def values(self, unit: ExecutionUnit, buffers: Buffers) -> dict:
        raise NotImplementedError

    def line(self, name: str, /, **values) -> str:
        """Its template ``name`` filled with ``values``, as lines of a function's body."""
        return line(name, f"kinds/{self.name}.cpp.in", **values)

    def statement(self, name: str, /, **values) -> str:
        """Its template ``name`` filled with ``values``."""
        return statement(name, f"kinds/{self.name}.cpp.in", **values)


def values_of(shape: list[int]) -> int:
    """The values of a tensor of ``shape``."""
    return int(math.prod(shape))


class Engine(TopKind):
    name = "engine"

    def is_one(self, unit):
        return unit.engine is not None

    def run(self, unit, buffers):
        (x,), (y,), at = unit.inputs, unit.outputs, buffers.at
        return self.line("run_engine", name=buffers.engine.function, source=at(x), target=at(y),
                         word=buffers.engine.weights_word, unit=unit.name)

    def declaration(self, unit: ExecutionUnit) -> str:
        """``<unit>_layer``, the C++ constant of the unit's layer (engine.h's engine_layer, its field order)."""
        layer = unit.engine
        values = [layer.channels, *layer.input, layer.filters, *layer.output, *layer.kernel, *layer.strides,
                  *layer.pads, *layer.dilations, layer.in_fraction, int(layer.in_signed), layer.weight_fraction,
                  layer.out_fraction, int(layer.out_signed), int(layer.relu)]
        return self.statement("engine_layer", unit=unit.name, values=", ".join(map(str, values)))


class Banded(TopKind):
    """The unit's step on each band, between the band buffers and its own."""

    name = "banded"

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


class Hls4ml(TopKind):
    name = "hls4ml"

    def is_one(self, unit):
        return unit.hls is not None

    def run(self, unit, buffers):
        arguments = [buffers.at(t) for t in unit.inputs + unit.outputs] + [p.port for p in buffers.weights]
        return self.line("run_step", unit=unit.name, arguments=", ".join(arguments))


class Affine(TopKind):
    """A channels-last buffer's axis 1 is its channels."""

    name = "affine"

    def is_one(self, unit):
        return bool(unit.affine)

    def values(self, unit, buffers):
        (x,), (y,), at, types, shapes = unit.inputs, unit.outputs, buffers.at, buffers.types, buffers.shapes
        return dict(in_type=types[x], unit=unit.name, type=types[y], source=at(x), target=at(y),
                    channels=shapes[y][1], values=values_of(shapes[y]), relu=str("Relu" in unit.elementwise).lower())


class Concat(TopKind):
    """A channels-last buffer's channels are its axis 1; Concat(x, x) reads x twice."""

    name = "concat"

    def is_one(self, unit):
        return unit.elementwise == ["Concat"]

    def values(self, unit, buffers):
        (a, b), (y,), at, types, shapes = (unit.inputs * 2)[:2], unit.outputs, buffers.at, buffers.types, \
            buffers.shapes
        return dict(first_type=types[a], second_type=types[b], type=types[y], first=at(a), second=at(b),
                    target=at(y), pixels=values_of(shapes[y][2:]), first_channels=shapes[a][1],
                    second_channels=shapes[b][1])


class Add(TopKind):
    """x + x reads one buffer twice."""

    name = "add"

    def is_one(self, unit):
        return bool(unit.elementwise)

    def values(self, unit, buffers):
        (a, b), (y,), at, types, shapes = (unit.inputs * 2)[:2], unit.outputs, buffers.at, buffers.types, \
            buffers.shapes
        return dict(first_type=types[a], second_type=types[b], type=types[y], first=at(a), second=at(b),
                    target=at(y), values=values_of(shapes[y]), relu=str("Relu" in unit.elementwise).lower())


class Gather(TopKind):
    name = "gather"

    def is_one(self, unit):
        return bool(unit.index_table)

    def values(self, unit, buffers):
        (x,), (y,) = unit.inputs, unit.outputs
        return dict(type=buffers.types[x], source=buffers.at(x), target=buffers.at(y), unit=unit.name,
                    values=values_of(buffers.shapes[y]))


class Window(TopKind):
    name = "window"

    def is_one(self, unit):
        return unit.window is not None

    def run(self, unit, buffers):
        (x,), (y,) = unit.inputs, unit.outputs
        return self.line(f"window_{unit.window.reduce}", type=buffers.types[x], source=buffers.at(x),
                         target=buffers.at(y), unit=unit.name)

    def declaration(self, unit: ExecutionUnit) -> str:
        """``<unit>_window``, the C++ constant of its window (arena.h's window_geometry, in its field order)."""
        w = unit.window
        values = [w.channels, *w.input, *w.output, *w.kernel, *w.strides, *w.pads, *w.dilations]
        return self.statement("window_geometry", unit=unit.name, values=", ".join(map(str, values)))


def flatten_geometry(shape: list[int]) -> tuple[int, int]:
    """(channels, pixels) arena.h's flatten_channels_last reorders a buffer of ``shape`` by: channels-last when
    its rank is >= 3, else one channel (a plain copy)."""
    return (shape[1], values_of(shape[2:])) if len(shape) >= 3 else (1, values_of(shape))


class Flatten(TopKind):
    """What is left: a Flatten (or a copy, as a unit hls4ml left no layer of)."""

    name = "flatten"

    def is_one(self, unit):
        return True

    def run(self, unit, buffers):
        (x,), (y,) = unit.inputs, unit.outputs
        channels, pixels = flatten_geometry(buffers.shapes[x])
        return "    " + self.statement("flatten", type=buffers.types[x], source=buffers.at(x),
                                       target=buffers.at(y), pixels=pixels, channels=channels) + "\n"


ENGINE, BANDED, HLS4ML, AFFINE, CONCAT, ADD, GATHER, WINDOW, FLATTEN = (
    Engine(), Banded(), Hls4ml(), Affine(), Concat(), Add(), Gather(), Window(), Flatten())
# In the order a unit is tried against them: the first that says it is one is its kind.
TOP_KINDS = (ENGINE, BANDED, HLS4ML, AFFINE, CONCAT, ADD, GATHER, WINDOW, FLATTEN)


def top_kind(unit: ExecutionUnit) -> TopKind:
    """The kind the top runs ``unit`` as."""
    return next(kind for kind in TOP_KINDS if kind.is_one(unit))
