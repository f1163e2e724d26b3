"""Open tools behind one module: an execution unit's arithmetic -> da4ml's Verilog -> Icarus Verilog's
simulation -> Yosys's synthesis (``build --open-synth``).

The arithmetic is the hls4ml adapter's record of the converted unit (``write_arithmetic``): the layers as
its C-simulation computes them, weights as that holds them. ``trace`` rebuilds it with da4ml 0.6's
tracer (the distributed-arithmetic compiler hls4ml 1.3 uses for its distributed_arithmetic strategy):
products and sums exact, each layer's result cast to its type with the type's rounding and overflow, a
multiply-accumulate layer's sum first to its accumulator type (hls4ml casts every product and the bias to
it: only where those casts drop no bit is it traced; a layer under hls4ml's distributed_arithmetic strategy
sums exactly into its result type). The Verilog is cut into pipeline stages by da4ml, as many adder levels
a stage as hetdeploy's timing rule puts in a cycle of the board's clock (an estimate: no timing is closed).
Round-to-even (AP_RND_CONV, QONNX's ROUND), which da4ml 0.6 has not, is built as
hardware builds it (``_towards_even``). What da4ml 0.6 cannot express is refused, naming the layer: other
rounding modes where they drop bits, overflow modes other than wrap and saturation, lookup-table
activations, layers other than Dense, Conv2D, DepthwiseConv2D (average pooling's too), max pooling,
BatchNormalization, ReLU and linear activations and a Merge (add, subtract, maximum, minimum) of two tensors.

A unit is traced whole (``kernel`` "unit": a chain of Dense and element-wise layers, a vector in and
one out, or element-wise layers alone on maps, channels-last, several inputs one after the other) or,
for a unit that starts with a 2-D (or depthwise) convolution or an unpadded max pooling followed by
element-wise layers only, as the window's kernel
(``kernel`` "pixel": one output pixel's channels from its window, the window's channels-last values in,
as hls4ml's streamed layers compute each pixel): ``vectors`` makes the input vectors and the
C-simulation's matching outputs from whole tensors. A unit hetdeploy's own top implements (arena.h: a relayout,
a window op) has no hls4ml record: ``trace_top`` traces it whole from what its C++ is made of.

Yosys (``synth_xilinx``) maps to the 7-series cells for the Zynq-7000 boards (``-family xc7``) and to
UltraScale+'s for the Zynq UltraScale+ ones, the K26 SOM's and Alveo's (``-family xcup``; Yosys 0.23 still
builds its carry chains of CARRY4 there, not UltraScale's CARRY8); its counts are Yosys's, not Vivado's.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..core.errors import UserError
from ..core.precision import CppFixed
from ..core import processes
from ..planning import units
from .templates import template

# The extra's pin: hls4ml 1.3's distributed_arithmetic strategy is built on da4ml 0.6.
DA4ML_VERSION = "0.6"
# Units larger than this are not traced (da4ml's trace and Yosys grow with the constant multiplications):
# at 8-bit weights, 16 x 64 took 1.1 s to trace and 2 min in Yosys 0.23 on this project's host.
MAX_WEIGHTS = 4096
MAX_COST = 40_000  # da4ml's estimate (LUT-equivalent adder bits) above which Yosys is not run
MAX_TOP_READS = 65_536  # a window op of the top's is traced whole: at most this many window reads
SYNTH_TIMEOUT_S = 600
SIMULATE_TIMEOUT_S = 300
# Layers that act on each value alone, and that follow a traced multiply-accumulate.
_ELEMENTWISE = {"Activation", "BatchNormalization", "Merge"}
_WINDOWED = {"Conv2D", "DepthwiseConv2D", "Pooling2D"}  # traced as the kernel of one output pixel
_MERGES = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "maximum": np.maximum, "minimum": np.minimum}
_SIDES = ("top", "bottom", "left", "right")
_TRACED_ACTIVATIONS = {"relu", "linear"}
_ROUNDING = {"TRN": "TRN", "RND": "RND"}  # ap_fixed's modes da4ml 0.6 has, by their da4ml names
_OVERFLOW = {"WRAP", "SAT", "SAT_SYM"}
# In an RTL folder: the module's port layout and files (``Written``), the vectors and the testbench.
MANIFEST, INPUT_VECTORS, EXPECTED, SIMULATED, TESTBENCH = ("rtl.json", "inputs.hex", "expected.hex", "simulated.hex",
                                                           "testbench.v")
# Yosys's synth_xilinx family per part prefix.
_FAMILIES = (("xc7", "xc7"), ("xczu", "xcup"), ("xck26", "xcup"), ("xcu", "xcup"), ("xcvu", "xcup"))


class NotTraced(Exception):
    """The unit's arithmetic holds something da4ml 0.6 cannot express: the message names it."""


class TooLarge(NotTraced):
    """The unit has more weights than are traced (MAX_WEIGHTS): skipped for size."""


def missing_tools() -> list[str]:
    """What ``--open-synth`` needs and this machine lacks, each with how to install it."""
    missing = []
    try:
        version = importlib.metadata.version("da4ml")
        if not version.startswith(DA4ML_VERSION + "."):
            missing.append(f"da4ml {DA4ML_VERSION} (this is {version}: pip install 'hetdeploy[open-synth]')")
    except importlib.metadata.PackageNotFoundError:
        missing.append("da4ml (pip install 'hetdeploy[open-synth]')")
    if shutil.which("yosys") is None:
        missing.append("Yosys (apt-get install yosys)")
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        missing.append("Icarus Verilog's iverilog and vvp (apt-get install iverilog)")
    return missing


def check_tools() -> None:
    missing = missing_tools()
    if missing:
        raise UserError(f"--open-synth needs {', '.join(missing)}")


def yosys_family(part: str) -> str:
    for prefix, family in _FAMILIES:
        if part.lower().startswith(prefix):
            return family
    raise UserError(f"--open-synth: no Yosys family for part {part} (Yosys's synth_xilinx: 7-series and "
                    f"UltraScale+ here)")


@dataclass
class Arithmetic:
    """The hls4ml adapter's record of a unit (``write_arithmetic``)."""

    layers: list[dict]
    weights: dict[str, np.ndarray]  # "<layer>/<kind>" -> the values its C-simulation holds

    @staticmethod
    def load(path: Path) -> "Arithmetic":
        with np.load(path, allow_pickle=False) as data:
            return Arithmetic(json.loads(str(data["layers"])), {k: data[k] for k in data.files if k != "layers"})


@dataclass
class Window:
    """A convolution's geometry, for the windows of a "pixel" kernel (hls4ml's attribute names)."""

    filt_height: int
    filt_width: int
    stride_height: int
    stride_width: int
    pad_top: int
    pad_left: int

    def patches(self, x: np.ndarray, out_height: int, out_width: int) -> np.ndarray:
        """Every output pixel's window of ``x`` (H, W, C channels-last), zero outside the map, as rows
        (out_height * out_width, filt_height * filt_width * C) in hls4ml's weight order (row, column, channel)."""
        height, width, channels = x.shape
        padded = np.zeros((max(height + self.pad_top, (out_height - 1) * self.stride_height + self.filt_height),
                           max(width + self.pad_left, (out_width - 1) * self.stride_width + self.filt_width),
                           channels), dtype=x.dtype)
        padded[self.pad_top:self.pad_top + height, self.pad_left:self.pad_left + width] = x
        rows = [padded[r * self.stride_height:r * self.stride_height + self.filt_height,
                       c * self.stride_width:c * self.stride_width + self.filt_width].reshape(-1)
                for r in range(out_height) for c in range(out_width)]
        return np.stack(rows)


@dataclass
class Traced:
    """A unit's arithmetic as da4ml's logic (combinational until ``write_verilog`` pipelines it)."""

    logic: object  # da4ml.types.CombLogic
    kernel: str  # "unit" or "pixel"
    input_types: list[CppFixed]  # each input's values' (a "pixel" kernel has one input)
    window: Optional[Window] = None  # the convolution's, for a "pixel" kernel

    @property
    def cost(self) -> float:
        return float(self.logic.cost)

    def vectors(self, inputs: list[np.ndarray], outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(input vectors, expected output vectors) from one sample's unit inputs and C-simulated output
        (ONNX layout, batch of one): each input cast to its type as the C-simulation casts it."""
        xs = [fixed.quantize(x[0]) for fixed, x in zip(self.input_types, inputs)]
        y = np.asarray(outputs[0], dtype=np.float64)
        if self.kernel == "unit":  # maps (element-wise layers only) channels-last, as the unit holds them, in turn
            return (np.concatenate([(np.moveaxis(x, 0, -1) if x.ndim > 1 else x).reshape(-1) for x in xs])[None],
                    (np.moveaxis(y, 0, -1) if y.ndim > 1 else y).reshape(1, -1))
        return (self.window.patches(np.moveaxis(xs[0], 0, -1), *y.shape[1:]),
                np.moveaxis(y, 0, -1).reshape(-1, y.shape[0]))


def trace(arithmetic: Arithmetic, pad_top: Optional[int] = None) -> Traced:
    """The unit's arithmetic through da4ml's tracer; NotTraced naming what stops it. ``pad_top``: the
    map's top padding where the unit's convolution was converted for a band of it (the band's is 0)."""
    from da4ml.trace import FixedVariableArray, HWConfig, comb_trace

    layers = arithmetic.layers
    if not layers or layers[0]["class"] != "Input":
        raise NotTraced("no input layer")
    sources = [layer for layer in layers if layer["class"] == "Input"]  # in the unit's inputs' order
    body = [layer for layer in layers if layer["class"] != "Input"]
    input_types = [CppFixed.parse(s["output_type"]) for s in sources]
    window = None
    if len(body) > 1 and body[0]["class"] == "ZeroPadding2D" and body[1]["class"] in _WINDOWED:
        # hls4ml's streamed layers pad in a layer of their own: the window's padding
        body = [{**body[1], **{f"pad_{side}": int(body[0].get(f"pad_{side}", 0)) for side in _SIDES},
                 "inputs": body[0]["inputs"]}] + body[2:]
    if body and body[0]["class"] in _WINDOWED:
        head = body[0]
        if len(sources) > 1:
            raise NotTraced(f"layer {head['name']} ({head['class']}) in a unit of {len(sources)} inputs")
        if head["class"] == "Pooling2D" and (head.get("pool_op") != "Max" or
                                             any(head.get(f"pad_{side}", 0) for side in _SIDES)):
            raise NotTraced(f"layer {head['name']} ({head.get('pool_op')} pooling"
                            f"{', padded' if head.get('pool_op') == 'Max' else ''}): max pooling without padding "
                            f"is traced")
        prefix = "pool" if head["class"] == "Pooling2D" else "filt"
        window = Window(int(head[f"{prefix}_height"]), int(head[f"{prefix}_width"]), int(head["stride_height"]),
                        int(head["stride_width"]), int(head.get("pad_top", 0)), int(head.get("pad_left", 0)))
        width = window.filt_height * window.filt_width * int(head["n_chan"] if prefix == "filt" else head["n_filt"])
        if any(layer["class"] not in _ELEMENTWISE for layer in body[1:]):
            stop = next(layer for layer in body[1:] if layer["class"] not in _ELEMENTWISE)
            raise NotTraced(f"layer {stop['name']} ({stop['class']}) after a window layer (a pixel's kernel is "
                            f"traced only with element-wise layers after it)")
        widths = [width]
    else:
        flat = [layer for layer in body if layer["class"] not in _ELEMENTWISE]
        shaped = [s["output_shape"] for s in sources if len(s["output_shape"]) != 1]
        if shaped and flat:
            raise NotTraced(f"layer {flat[0]['name']} ({flat[0]['class']}) on an input of shape {shaped[0]}")
        widths = [int(np.prod(s["output_shape"])) for s in sources]
    weights = sum(arithmetic.weights[f"{layer['name']}/weight"].size for layer in body
                  if f"{layer['name']}/weight" in arithmetic.weights)
    if weights > MAX_WEIGHTS:
        raise TooLarge(f"{weights} weights, above the {MAX_WEIGHTS} traced")
    k, i, f = (np.concatenate([np.full(n, part) for n, part in zip(widths, parts)])
               for parts in zip(*(_kif(fixed) for fixed in input_types)))
    inputs = FixedVariableArray.from_kif(k, i, f, HWConfig(1, -1, -1), solver_options={"hard_dc": 2})
    starts = np.cumsum([0] + widths)
    values = {s["outputs"][0]: inputs[start:end] for s, start, end in zip(sources, starts, starts[1:])}
    for layer in body:
        read = [values.get(t) for t in layer["inputs"]]
        if any(v is None for v in read) or (len(read) != 1 and layer["class"] != "Merge"):
            raise NotTraced(f"layer {layer['name']} ({layer['class']}) reads {', '.join(layer['inputs'])}, not "
                            f"the unit's layers before it")
        value = _merge(layer, read) if layer["class"] == "Merge" else _layer(layer, read[0], arithmetic.weights)
        values[layer["outputs"][0]] = value
    if window is not None and pad_top is not None:
        window.pad_top = pad_top
    return Traced(comb_trace(inputs, value), "pixel" if window else "unit", input_types, window)


def _merge(layer: dict, values: list):
    """hls4ml's Merge of two tensors of one shape (nnet_merge): the exact sum, difference, maximum or minimum
    of each pair of values, cast to the result type."""
    op = str(layer.get("op", "")).lower()
    if op not in _MERGES or len(values) != 2:
        raise NotTraced(f"layer {layer['name']} (Merge {op or 'of no recorded op'} of {len(values)} tensors)")
    return _cast(_MERGES[op](*values), layer["output_type"], layer)


def trace_top(name: str, value_type: str, inputs: int, index: Optional[np.ndarray] = None,
              window=None) -> Traced:
    """A unit hetdeploy's top implements (arena.h), whole, as its C++ computes it on ``inputs`` values of
    ``value_type`` (its input buffer's type, which it writes to its output buffer), channels-last as the buffers
    hold them: a relayout (``index``) moves input value index[j] to output value j; a window op (``window``,
    plan.Window) reduces channel c of each output pixel's window over the input pixels inside the map: "max" the
    largest (exact), "mean" the exact sum times the inverse of the kernel's size as ap_ufixed<48, 1, AP_RND> holds
    it, cast to the type. TooLarge above MAX_TOP_READS reads; NotTraced for a window wholly in padding (its 0)."""
    from da4ml.trace import FixedVariableArray, HWConfig, comb_trace

    fixed = CppFixed.parse(value_type)
    k, i, f = _kif(fixed)
    source = FixedVariableArray.from_kif(np.full(inputs, k), np.full(inputs, i), np.full(inputs, f),
                                         HWConfig(1, -1, -1), solver_options={"hard_dc": 2})
    if window is None:
        return Traced(comb_trace(source, source[np.asarray(index, dtype=np.int64)]), "unit", [fixed])
    reads = _window_reads(window)
    if reads.size > MAX_TOP_READS:
        raise TooLarge(f"{reads.size} window reads, above the {MAX_TOP_READS} traced")
    inside = reads >= 0
    if not np.all(np.any(inside, axis=1)):
        raise NotTraced(f"{name}: a window wholly in the padding")
    if window.reduce == "mean" and not np.all(inside):
        raise NotTraced(f"{name}: a mean over a padded window")
    first = reads[np.arange(len(reads)), np.argmax(inside, axis=1)]  # each window's first read inside the map
    value = source[first]
    for position in range(reads.shape[1]):
        if np.array_equal(reads[:, position], first):
            continue
        # a position outside the map reads the window's first inside it again: the same maximum
        column = np.where(inside[:, position], reads[:, position], first)
        value = np.maximum(value, source[column]) if window.reduce == "max" else value + source[column]
    if window.reduce == "max":
        return Traced(comb_trace(source, value), "unit", [fixed])
    size = window.kernel[0] * window.kernel[1]
    inverse = math.floor(2 ** 47 / size + 0.5) / 2 ** 47  # 1.0 / size rounded to ap_ufixed<48, 1, AP_RND>
    return Traced(comb_trace(source, _cast(value * inverse, value_type, {"name": name, "class": "mean"})), "unit",
                  [fixed])


def _window_reads(window) -> np.ndarray:
    """(output values channels-last, kernel positions): the channels-last input value each window position of
    each output value reads, -1 where that position lies outside the map (arena.h's window_op)."""
    rows, columns = np.meshgrid(np.arange(window.output[0]), np.arange(window.output[1]), indexing="ij")
    channels = np.arange(window.channels)
    reads = []
    for i in range(window.kernel[0]):
        for m in range(window.kernel[1]):
            row = rows * window.strides[0] - window.pads[0] + i * window.dilations[0]
            column = columns * window.strides[1] - window.pads[1] + m * window.dilations[1]
            inside = (row >= 0) & (row < window.input[0]) & (column >= 0) & (column < window.input[1])
            at = np.where(inside, row * window.input[1] + column, -1)[..., None]
            reads.append(np.where(at >= 0, at * window.channels + channels, -1).reshape(-1))
    return np.stack(reads, axis=1)


def _kif(fixed: CppFixed) -> tuple[int, int, int]:
    """da4ml's (keep sign, integer bits less the sign, fraction bits) of a type."""
    return int(fixed.signed), fixed.integer - int(fixed.signed), fixed.fraction


def _cast(value, cpp: str, layer: dict):
    """``value`` cast to C++ type ``cpp`` as ap_fixed casts it; NotTraced where da4ml cannot."""
    fixed = CppFixed.parse(cpp)
    if fixed.overflow not in _OVERFLOW:
        raise NotTraced(f"layer {layer['name']} ({layer['class']}) overflows to {cpp}: AP_{fixed.overflow}, which "
                        f"da4ml {DA4ML_VERSION} has not")
    k, i, f = _kif(fixed)
    fractions = np.asarray(value.kif[2]).reshape(value.shape)
    if fixed.rounding == "RND_CONV" and np.any(fractions > f):
        value = _towards_even(value, f, fractions)
        rounding = "TRN"
    elif np.all(fractions <= f):
        rounding = "TRN"  # no bit dropped: every rounding mode is the same
    elif fixed.rounding in _ROUNDING:
        rounding = _ROUNDING[fixed.rounding]
    else:
        raise NotTraced(f"layer {layer['name']} ({layer['class']}) rounds to {cpp}: AP_{fixed.rounding}, which "
                        f"da4ml {DA4ML_VERSION} has not")
    return value.quantize(k=k, i=i, f=f, overflow_mode=fixed.overflow, round_mode=rounding)


def _towards_even(value, f: int, fractions: np.ndarray):
    """``value`` plus what makes truncation to ``f`` fraction bits round to nearest, ties to even
    (AP_RND_CONV, QONNX's ROUND), as convergent rounding is built in hardware: add half of the kept
    step less one step of the value's own, and one of its own more where the kept part is odd. Values
    with no more than ``f`` fraction bits are left as they are."""
    dropping = fractions > f
    own_step = np.where(dropping, 2.0 ** -fractions.astype(np.float64), 0.0)
    k, i, _ = value.kif
    kept = value.quantize(k=k, i=i, f=np.full(value.shape, f), overflow_mode="WRAP", round_mode="TRN")
    odd = kept - kept.quantize(k=k, i=i, f=np.full(value.shape, f - 1), overflow_mode="WRAP", round_mode="TRN")
    # ``odd`` is 2^-f where the kept part's last bit is set: scaled to the value's own step
    return value + np.where(dropping, 2.0 ** -(f + 1), 0.0) - own_step + odd * (own_step * 2.0 ** f)


def _layer(layer: dict, value, weights: dict[str, np.ndarray]):
    kind, name = layer["class"], layer["name"]
    held = {key.rsplit("/", 1)[1]: array for key, array in weights.items() if key.rsplit("/", 1)[0] == name}
    if set(layer["weights"]) - set(held):
        raise NotTraced(f"layer {name} ({kind}) holds weights of a type that is not fixed-point")
    if kind in ("Dense", "Conv2D") and layer.get("strategy") == "distributed_arithmetic":
        # hls4ml's distributed_arithmetic: da4ml's exact sum of the exact weights, cast to the result type
        total = value @ held["weight"].reshape(-1, held["weight"].shape[-1])
        if "bias" in held:
            total = total + held["bias"].reshape(-1)
        return _cast(total, layer["output_type"], layer)
    if kind in ("Dense", "Conv2D", "DepthwiseConv2D"):
        kernel = held["weight"].reshape(-1, held["weight"].shape[-1])
        accum = CppFixed.parse(layer["accum_type"])
        product_bits = int(np.max(value.kif[2])) + CppFixed.parse(layer["weights"]["weight"]).fraction
        if product_bits > accum.fraction:
            raise NotTraced(f"layer {name} ({kind}) casts its products ({product_bits} fraction bits) to "
                            f"{layer['accum_type']}, dropping bits")
        # a depthwise convolution's window (row, column, channel) by its (row, column, 1, channel) weights, summed
        # per channel; the others' a product sum over the window or vector
        total = np.sum(value.reshape(kernel.shape) * kernel, axis=0) if kind == "DepthwiseConv2D" else value @ kernel
        if "bias" in held:
            if CppFixed.parse(layer["weights"]["bias"]).fraction > accum.fraction:
                raise NotTraced(f"layer {name} ({kind}) casts its bias to {layer['accum_type']}, dropping bits")
            total = total + held["bias"].reshape(-1)
        return _cast(_cast(total, layer["accum_type"], layer), layer["output_type"], layer)
    if kind == "Pooling2D":  # the window's values, (row, column, channel): the largest per channel
        channels = int(layer["n_filt"])
        return _cast(np.amax(value.reshape(-1, channels), axis=0), layer["output_type"], layer)
    if kind == "BatchNormalization":  # per channel, the last axis of a channels-last tensor
        repeat = value.size // held["scale"].size
        return _cast(value * np.tile(held["scale"].reshape(-1), repeat) + np.tile(held["bias"].reshape(-1), repeat),
                     layer["output_type"], layer)
    if kind == "Activation":
        activation = str(layer.get("activation", "")).lower()
        if activation not in _TRACED_ACTIVATIONS:
            raise NotTraced(f"layer {name}: activation {activation} (a lookup table)")
        return _cast(value.relu() if activation == "relu" else value, layer["output_type"], layer)
    raise NotTraced(f"layer {name} ({kind})")


@dataclass
class Written:
    """A traced unit's Verilog in its folder, with the layout of its ports (``MANIFEST``): what
    ``simulate`` and ``synthesise`` need, from the folder alone."""

    folder: Path
    module: str
    sources: list[str]  # file names in ``folder``
    inputs: list[tuple[bool, int, int]]  # each input value's (signed, bits, fraction bits), LSB first
    outputs: list[tuple[bool, int, int]]
    stages: int  # pipeline stages: an input registered on a clock edge is at the output ``stages`` edges later

    def save(self) -> None:
        (self.folder / MANIFEST).write_text(json.dumps({"module": self.module, "sources": self.sources,
                                                         "inputs": self.inputs, "outputs": self.outputs,
                                                         "stages": self.stages}) + "\n")

    @staticmethod
    def load(folder: Path) -> "Written":
        manifest = json.loads((folder / MANIFEST).read_text())
        return Written(folder, manifest["module"], manifest["sources"], [tuple(f) for f in manifest["inputs"]],
                       [tuple(f) for f in manifest["outputs"]], manifest["stages"])


def adder_levels_per_cycle(clock_mhz: float) -> float:
    """The adder levels one clock cycle holds, by hetdeploy's own timing rule (``units.ADDER_LEVELS_PER_CYCLE``
    at ``units.REFERENCE_CLOCK_MHZ``, more at a slower clock): where the RTL is cut into pipeline stages."""
    return units.ADDER_LEVELS_PER_CYCLE * units.REFERENCE_CLOCK_MHZ / clock_mhz


def write_verilog(traced: Traced, folder: Path, module: str, clock_mhz: float) -> Written:
    """The traced logic as Verilog module ``module`` in ``folder`` (a clock ``clk``, ``model_inp``,
    ``model_out``), cut by da4ml into pipeline stages of ``adder_levels_per_cycle`` adder levels, registered
    at its input, between stages and at its output as hls4ml's pipelined designs are; with da4ml's building
    blocks it uses."""
    from da4ml.codegen.rtl import verilog
    from da4ml.codegen.rtl.verilog.pipeline import pipeline_logic_gen
    from da4ml.trace import to_pipeline

    folder.mkdir(parents=True, exist_ok=True)
    pipeline = to_pipeline(traced.logic, adder_levels_per_cycle(clock_mhz), verbose=False)
    modules = pipeline_logic_gen(pipeline, module)
    sources = []
    for name, code in modules.items():
        (folder / f"{name}.v").write_text(code)
        sources.append(f"{name}.v")
    code = "\n".join(modules.values())
    for block in sorted((Path(verilog.__file__).parent / "source").glob("*.v")):
        if re.search(rf"\b{block.stem}\s*(#|\w+\s*\()", code):
            shutil.copy(block, folder / block.name)
            sources.append(block.name)
    written = Written(folder, module, sources, _port_fields(traced.logic.inp_qint),
                      _port_fields(traced.logic.out_qint), len(pipeline.solutions))
    written.save()
    return written


def _port_fields(qints) -> list[tuple[bool, int, int]]:
    """(signed, bits, fraction bits) of each value of a port, LSB first, as da4ml packs them."""
    from da4ml.types import minimal_kif

    fields = []
    for qint in qints:
        k, i, f = minimal_kif(qint)
        fields.append((bool(k), int(k) + int(i) + int(f), int(f)))
    return fields


def pack(values: np.ndarray, fields: list[tuple[bool, int, int]]) -> list[str]:
    """Each row of ``values`` as the hex of its codes packed LSB first."""
    lines = []
    for row in values:
        word, offset = 0, 0
        for value, (_, bits, fraction) in zip(row, fields):
            if bits:
                code = value * 2.0 ** fraction
                if code != np.round(code):
                    raise ValueError(f"{value} is not on its port's grid of 2^-{fraction}")
                word |= (int(code) & ((1 << bits) - 1)) << offset
                offset += bits
        lines.append(f"{word:x}")
    return lines


def unpack(lines: list[str], fields: list[tuple[bool, int, int]]) -> np.ndarray:
    rows = []
    for line in lines:
        word, offset, row = int(line, 16), 0, []
        for signed, bits, fraction in fields:
            code = (word >> offset) & ((1 << bits) - 1) if bits else 0
            if signed and bits and code >> (bits - 1):
                code -= 1 << bits
            row.append(code * 2.0 ** -fraction)
            offset += bits
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(fields))


def write_vectors(written: Written, inputs: np.ndarray, expected: np.ndarray) -> None:
    """The input vectors and the C-simulation's outputs for them, in the RTL folder, with the testbench
    that applies them (``simulate`` runs it)."""
    in_fields, out_fields = written.inputs, written.outputs
    (written.folder / INPUT_VECTORS).write_text("\n".join(pack(inputs, in_fields)) + "\n")
    (written.folder / EXPECTED).write_text("\n".join(pack(expected, out_fields)) + "\n")
    (written.folder / TESTBENCH).write_text(template("rtl_testbench.v.in").substitute(
        module=written.module, inputs=INPUT_VECTORS, outputs=SIMULATED, vectors=len(inputs), stages=written.stages,
        input_bits=max(1, sum(bits for _, bits, _ in in_fields)),
        output_bits=max(1, sum(bits for _, bits, _ in out_fields))))


@dataclass
class Simulated:
    values: int
    mismatches: int
    first_mismatch: str


def simulate(folder: Path) -> Simulated:
    """Icarus Verilog runs the RTL folder's testbench over its input vectors; its outputs against the
    expected ones, value by value (each bit: both are codes on the same port)."""
    written = Written.load(folder)
    log = folder / "simulate.log"
    log.write_text("")
    (folder / SIMULATED).unlink(missing_ok=True)  # a run's own outputs only
    try:
        for command in (["iverilog", "-g2012", "-o", "simulation.vvp", TESTBENCH, *written.sources],
                        ["vvp", "-n", "simulation.vvp"]):
            _run(command, folder, log, SIMULATE_TIMEOUT_S)
    finally:  # Icarus's compiled program holds its own memory addresses: the folder keeps the same bytes without it
        (folder / "simulation.vvp").unlink(missing_ok=True)
    out_fields = written.outputs
    got = unpack((folder / SIMULATED).read_text().split(), out_fields)
    want = unpack((folder / EXPECTED).read_text().split(), out_fields)
    if got.shape != want.shape:
        return Simulated(want.size, want.size, f"{len(got)} output vectors for {len(want)} inputs")
    differ = np.argwhere(got != want)
    first = ""
    if len(differ):
        row, column = differ[0]
        first = f"vector {row}, output {column}: RTL {got[row, column]:g}, C-simulation {want[row, column]:g}"
    return Simulated(want.size, len(differ), first)


SYNTHESIS_FILES = ("synth.ys", "synth.log", "yosys_stat.txt")  # what ``synthesise`` writes into the RTL folder


def write_synthesis_script(written: Written, family: str) -> None:
    """synth.ys: Yosys's synth_xilinx of the module for ``family``, its statistics into yosys_stat.txt."""
    (written.folder / "synth.ys").write_text(template("rtl_synth.ys.in").substitute(
        module=written.module, family=family, sources=" ".join(written.sources), statistics="yosys_stat.txt"))


def synthesise(written: Written) -> dict[str, int]:
    """Yosys runs the RTL folder's synth.ys (``write_synthesis_script``); its cell counts: lut, carry, ff, dsp,
    bram18, lutram."""
    folder = written.folder
    (folder / "synth.log").write_text("")
    _run(["yosys", "-q", "-s", "synth.ys"], folder, folder / "synth.log", SYNTH_TIMEOUT_S)
    return synthesised_counts(written)


def synthesised_counts(written: Written) -> dict[str, int]:
    """The cell counts of the RTL folder's last synthesis (its yosys_stat.txt)."""
    return cell_counts((written.folder / "yosys_stat.txt").read_text())


@functools.cache  # asked for every unit's synthesis; the tool does not change while hetdeploy runs
def yosys_version() -> str:
    """What ``yosys -V`` says (a synthesis is cached under it)."""
    return processes.run(["yosys", "-V"], timeout=60).stdout.strip()


def cell_counts(statistics: str) -> dict[str, int]:
    """Yosys ``stat`` output's cells grouped: LUT1..6, CARRY4/8, flip-flops (FD*), DSP48E1/2, block RAM
    in 18 Kb halves, LUT RAM."""
    counts = {"lut": 0, "carry": 0, "ff": 0, "dsp": 0, "bram18": 0, "lutram": 0}
    for cell, number in re.findall(r"^\s+(\w+)\s+(\d+)\s*$", statistics, re.MULTILINE):
        n = int(number)
        if re.fullmatch(r"LUT[1-6](_2)?", cell):
            counts["lut"] += n
        elif cell.startswith("CARRY"):
            counts["carry"] += n
        elif re.fullmatch(r"FD[RSCPE]{2}(_1)?", cell):
            counts["ff"] += n
        elif cell.startswith("DSP48"):
            counts["dsp"] += n
        elif cell.startswith("RAMB18"):
            counts["bram18"] += n
        elif cell.startswith("RAMB36"):
            counts["bram18"] += 2 * n
        elif cell.startswith(("RAM32", "RAM64", "RAM128", "RAM256", "RAMS", "RAMD", "SRL")):
            counts["lutram"] += n
    return counts


class ToolFailed(Exception):
    """A tool exited non-zero or ran past its time: the message names it and its log."""


def _run(command: list[str], folder: Path, log: Path, timeout: float) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        try:
            result = processes.run(command, timeout=timeout, cwd=folder)
        except subprocess.TimeoutExpired:
            out.write(f"stopped after {timeout:.0f} s\n")
            raise ToolFailed(f"{command[0]} ran past {timeout:.0f} s; see {log}") from None
        out.write(result.stdout + result.stderr)
    if result.returncode != 0:
        raise ToolFailed(f"{command[0]} exited {result.returncode}; see {log}")

