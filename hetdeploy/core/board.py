"""Load and validate a board capability file (hetdeploy/boards/*.yaml).

The schema is declared below as data (``_BOARD``) and documented in
hetdeploy/boards/README.md. Every error names the file, the line, the key path and what
was expected.
"""

from __future__ import annotations

import difflib
import importlib.resources
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional


from .errors import UserError
from .graph import ONNXRUNTIME_DOMAINS, QONNX_DOMAINS, Node
from .yamlfile import YamlFile

# package data (pyproject's package-data): found wherever hetdeploy is installed
BOARDS_DIR = Path(str(importlib.resources.files("hetdeploy") / "boards"))
DEVICE_KINDS = ("cpu", "gpu", "fpga")
# Op classes of the cost model (cost.OP_CLASSES maps ops onto them); a device's
# compute efficiency is given per class, 'other' being the fallback.
OP_CLASSES = ("conv", "dense", "pool", "elementwise", "normalization", "softmax", "data", "other")
# Data types a device's compute peak can be given for; compute.dtype names the one
# the model's float32 runs in on that device (an FPGA runs it in fixed point).
COMPUTE_DTYPES = ("float32", "float16", "fixed16", "fixed8", "int8")
# On-chip capacity of a BRAM18 without parity bits: 1024 x 16 bit (Xilinx UG473).
BRAM18_BITS = 16 * 1024
# What a URAM288 block holds: 4,096 words of its 72-bit width, 64 bits of data each (a 128-bit arena word takes two
# blocks side by side; Xilinx UG573, UltraScale+ only).
URAM_BYTES = 4096 * 8
# Who implements a PE's ops: hls4ml (a project per unit), hetdeploy's subfunction top itself
# (hetdeploy/hls/arena.h), which moves values (the relayouts) and reduces windows (the window ops), or hetdeploy's
# layer-sequential engine (hetdeploy/hls/engine.h) alone: the convolutions hls4ml has no layer for (grouped ones,
# kernels past hls4ml's, dilated ones), each BatchNormalization after them folded in, a ReLU or a Clip last
ENGINES = ("hls4ml", "top", "engine")
LAYER_ENGINE_OPS = ("Conv", "Gemm", "MatMul")
LAYER_ENGINE_ACTIVATIONS = ("Relu", "Clip")  # the engine's output stage: the last op of its unit
LAYER_ENGINE_FUSED_OPS = ("BatchNormalization", *LAYER_ENGINE_ACTIVATIONS)
# The largest tensor rank an hls4ml unit takes: its ONNX front end's qonnx channels-last conversion knows ranks 2
# to 4 (a 5-D PRelu stops it with a KeyError)
HLS4ML_MAX_RANK = 4
RELAYOUT_OPS = ("Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "DepthToSpace", "SpaceToDepth", "Slice")
TOP_WINDOW_OPS = ("MaxPool", "AveragePool", "GlobalAveragePool")
# Ops the top computes itself over whole buffers (arena.h's add, concat and affine): a residual Add and a
# BatchNormalization not folded into a layer before it, each with a ReLU after it fused (TOP_FUSED_OPS); a Concat
# along the channels; a local response normalization across the channels (arena.h's lrn); a Quant of one scale and
# one integer zero point (arena.h's quantize)
TOP_ELEMENTWISE_OPS = ("Add", "Concat", "BatchNormalization", "LRN", "Quant")
TOP_FUSING_OPS = ("Add", "BatchNormalization")  # those of them the top fuses a ReLU after
TOP_FUSED_OPS = ("Relu",)


# ---------------------------------------------------------------- data


# The HLS tools an FPGA's cores are synthesised with (a device's ``hls_tool``): they cut a Latency layer's
# pipeline in different places, so its FF estimate follows the tool (planning.units.estimate)
VITIS_HLS, VIVADO_HLS = "vitis_hls", "vivado_hls"
HLS_TOOLS = (VITIS_HLS, VIVADO_HLS)

@dataclass
class Compute:
    dtype: str  # what the model's float32 runs in here: the key of peak_ops_per_s used
    peak_ops_per_s: dict[str, float]  # per data type; a multiply-add counts 2
    efficiency: dict[str, float]  # fraction of the peak reached, per op class ('other' as fallback)
    per_op_s: float = 0.0  # fixed cost of each node (kernel dispatch, pipeline fill)

    def ops_per_s(self, op_class: str) -> float:
        return self.peak_ops_per_s[self.dtype] * self.efficiency.get(op_class, self.efficiency["other"])


@dataclass
class Memory:
    bytes: int  # the device's working memory (an FPGA's: the DDR it reaches)
    bandwidth_bytes_per_s: float  # (an FPGA's: through one of its ports)
    # an FPGA's: the processing system's ports into the DDR its cores master (MEMORY_MAX_PORTS at most), each at
    # bandwidth_bytes_per_s; the cores' DDR buffers go through the first, the engine's weights through the others
    ports: int = 1


@dataclass
class ProcessingElement:
    """A kind of FPGA processing element: the ops it computes and the ops it fuses after them, who
    implements them (ENGINES), and, per op, the limits this PE adds to the device's (a node goes to
    the first PE that runs it within them)."""

    ops: list[str]
    fuse: list[str] = field(default_factory=list)
    engine: str = "hls4ml"
    limits: dict[str, dict] = field(default_factory=dict)

    def why_not(self, node: Node) -> Optional[str]:
        """None when this PE runs ``node`` (one of its ops) within its limits; else the limit it breaks."""
        if self.engine == "hls4ml":
            rank = max((len(s) for s in node.input_shapes + node.output_shapes), default=0)
            if rank > HLS4ML_MAX_RANK:
                return (f"rank-{rank} tensor: hls4ml's ONNX front end (qonnx's channels-last conversion) takes rank "
                        f"{HLS4ML_MAX_RANK} at most")
        return _limit_violation(self.limits.get(node.op, {}), node)


@dataclass
class Device:
    name: str
    kind: str
    description: str
    ops: Optional[dict[str, dict]]  # None: every standard ONNX op (onnxruntime runs it)
    compute: Optional[Compute]  # a CPU's or GPU's; None on an FPGA (its units' estimates time it)
    memory: Memory
    invocation_overhead_s: float  # fixed cost of each subfunction call on this device
    cores: int = 1
    clock_mhz: float = 0.0
    part: str = ""
    # the board files' names for the board around an FPGA part: its processing system's presets (DDR,
    # MIO, clocks) come from them; empty: the bare part
    board_part: str = ""
    hls_tool: str = VITIS_HLS  # an FPGA's cores' synthesis tool (HLS_TOOLS)
    board_connections: list[str] = field(default_factory=list)
    resources: dict[str, int] = field(default_factory=dict)
    reserve_fraction: float = 0.0
    utilisation: dict[str, float] = field(default_factory=dict)  # resource -> the most of it a design may use
    pes: dict[str, ProcessingElement] = field(default_factory=dict)  # FPGA only, in declaration order
    # FPGA only: its layer-sequential engine's lanes and values a lane takes a cycle, pinned (board key engine,
    # option --engine); None: the folding sizes it (planning/units' engine_sizes)
    engine_size: Optional[tuple[int, int]] = None

    def budget(self) -> dict[str, int]:
        """FPGA resources left for the design: each resource less the reserve, and at most its
        utilisation cap."""
        return {k: int(v * min(1.0 - self.reserve_fraction, self.utilisation.get(k, 1.0)))
                for k, v in self.resources.items()}

    def why_not(self, node: Node) -> Optional[str]:
        """None when this device runs ``node``; else the limit it breaks."""
        if self.ops is None:  # onnxruntime: the standard opsets and its own contrib ops; a CPU also qonnx's
            if node.domain in ONNXRUNTIME_DOMAINS or (self.kind == "cpu" and node.domain in QONNX_DOMAINS):
                return None
            return f"custom domain '{node.domain}'"
        if node.domain not in ("", "ai.onnx", *QONNX_DOMAINS):  # a listed QONNX quantizer is a precision
            return f"custom domain '{node.domain}'"
        if self.kind == "fpga":  # its cores take one sample per call: (1, ...) tensors only
            shape = next((s for s in node.input_shapes + node.output_shapes if len(s) < 2 or s[0] != 1), None)
            if shape is not None:
                return f"tensor of shape {shape}: the FPGA takes one sample, (1, ...), per call"
            if len(node.outputs) > 1:  # a unit writes one buffer (MaxPool's Indices, say, are not computed)
                return f"{len(node.outputs)} outputs: an FPGA unit writes one"
        if node.op not in self.ops:
            return f"{self.name} does not list {node.op}"
        broken = _limit_violation(self.ops[node.op], node)
        if broken is None and self.kind == "fpga" and self.pe_for(node) is None:
            return next(pe.why_not(node) for pe in self.pes.values() if node.op in pe.ops)
        return broken

    def pe_for(self, node: Node) -> Optional[str]:
        """The first of this FPGA's PE kinds that runs ``node`` within its limits; None: none does."""
        return next(iter(self.pes_for(node)), None)

    def pes_for(self, node: Node) -> list[str]:
        """This FPGA's PE kinds that run ``node`` within its limits, in the board file's order."""
        return [kind for kind, pe in self.pes.items() if node.op in pe.ops and pe.why_not(node) is None]


@dataclass
class Link:
    source: str
    target: str
    bandwidth_bytes_per_s: float
    latency_s: float


@dataclass
class Board:
    name: str
    path: str
    description: str
    devices: list[Device]  # in preference order: the partitioner tries them first to last
    links: list[Link]
    host: str  # the cpu device that holds the model's inputs and outputs and runs the pipeline

    def device(self, name: str) -> Device:
        return next(d for d in self.devices if d.name == name)

    def link(self, source: str, target: str) -> Link:
        return next(lk for lk in self.links if lk.source == source and lk.target == target)


# ---------------------------------------------------------------- op limits


def _normal_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _kernel(node: Node, shape: list[int]) -> list[int]:
    """A window op's kernel; a global pooling's is its input's spatial size."""
    if node.op.startswith("Global"):
        return list(shape[2:])
    return list(node.attrs.get("kernel_shape") or [])


def _limit_violation(limits: dict, node: Node) -> Optional[str]:
    shape = node.input_shapes[0] if node.input_shapes else []
    rank = len(shape)
    for key, allowed in sorted(limits.items()):
        if key == "dtypes" and node.dtype not in allowed:
            return f"data type {node.dtype} not in {allowed}"
        if key == "spatial_dims" and rank - 2 not in allowed:
            return f"{rank - 2}-D input, supports {allowed}-D"
        if key == "max_kernel" and max(_kernel(node, shape), default=0) > allowed:
            return f"kernel {_kernel(node, shape)} above {allowed}"
        if key == "stride_equals_kernel" and allowed and node.attrs.get("strides") != _kernel(node, shape):
            return f"strides {node.attrs.get('strides')} differ from the kernel {_kernel(node, shape)}"
        if key == "max_channels":
            channels = [s[1] for s in node.input_shapes + node.output_shapes if len(s) > 1]
            if channels and max(channels) > allowed:
                return f"{max(channels)} channels, above {allowed}"
        if key == "max_rank":
            ranks = [len(s) for s in node.input_shapes]
            if ranks and max(ranks) > allowed:
                return f"rank-{max(ranks)} input, supports rank {allowed} at most"
        if key == "groups":
            group = node.attrs.get("group", 1)
            kinds = {"one"} if group == 1 else set()
            out_channels = node.output_shapes[0][1] if node.output_shapes else -1
            if rank > 1 and group == shape[1] == out_channels:
                kinds.add("depthwise")
            elif group > 1:
                kinds.add("grouped")
            if not kinds & set(allowed):
                return f"group={group}, supports {allowed}"
        if key == "axes":
            default = -1 if node.op == "Softmax" else 1
            axis = _normal_axis(node.attrs.get("axis", default), rank)
            if axis not in allowed:
                return f"axis {axis}, supports {allowed}"
        if key == "attributes":
            for attr, values in sorted(allowed.items()):
                if attr in node.attrs and node.attrs[attr] not in values:
                    return f"{attr}={node.attrs[attr]}, supports {values}"
        if key == "constant_inputs":
            missing = [i for i in allowed if i not in node.constants]
            if missing:
                return f"input {missing[0]} is not a constant"
        if key == "activation_inputs" and (len(node.inputs) != allowed or node.constants):
            return f"{len(node.inputs)} tensor inputs and {len(node.constants)} constants, supports {allowed} tensors"
        if key == "same_shape_inputs" and allowed:
            if len({tuple(s) for s in node.input_shapes}) > 1:
                return "inputs of different shapes"
            if node.constants and not limits.get("per_channel_constants"):
                return "constant inputs"
        if key == "scalar_constants":
            several = [i for i in allowed if i in node.constant_shapes and i not in node.scalars]
            if several:
                return f"input {several[0]} holds {node.constant_shapes[several[0]]} values, not one (per tensor)"
        if key == "integer_constants":
            fractional = [i for i in allowed if i in node.scalars and node.scalars[i] != round(node.scalars[i])]
            if fractional:
                return f"input {fractional[0]} is {node.scalars[fractional[0]]:g}, not an integer"
        if key == "channel_constants":
            for k in allowed:
                const = node.constant_shapes.get(k)
                if const is not None and not _one_per_channel(const, rank, shape):
                    return f"input {k} holds {const} values, not one or one per channel (axis 1)"
        if key == "constant_range":
            for index, (low, high) in sorted(allowed.items()):
                value = node.scalars.get(int(index))
                if value is not None and not low <= value <= high:
                    return f"input {index} is {value:g}, outside [{low}, {high}]"
        if key == "finite_attributes" and allowed:
            infinite = next((k for k, v in sorted(node.attrs.items()) if isinstance(v, float) and not math.isfinite(v)),
                            None)
            if infinite is not None:
                return f"attribute {infinite} is {node.attrs[infinite]}, not a finite number"
        if key == "padding_counted" and allowed and any(node.attrs.get("pads") or []) \
                and not node.attrs.get("count_include_pad"):
            return f"pads={node.attrs.get('pads')} with count_include_pad=0"
        if key == "per_channel_constants" and allowed:
            for k, const in sorted(node.constant_shapes.items()):
                if not _one_per_channel(const, rank, shape):
                    return f"constant input {k} of shape {const} is not one value per channel"
    return None


def _one_per_channel(constant_shape: list[int], rank: int, shape: list[int]) -> bool:
    """Whether a constant of ``constant_shape`` broadcast against a rank-``rank`` input of ``shape``
    holds one value, or one per channel (axis 1)."""
    aligned = [1] * (rank - len(constant_shape)) + list(constant_shape)
    return len(aligned) == rank and all(d == 1 for axis, d in enumerate(aligned) if axis != 1) and \
        (rank < 2 or aligned[1] in (1, shape[1] if len(shape) > 1 else 1))


# ---------------------------------------------------------------- schema

# A field spec: (required, check) where check(value) returns None or what was expected.
Check = Callable[[Any], Optional[str]]


def _is(kind: type | tuple, expected: str, cond: Callable[[Any], bool] = lambda v: True) -> Check:
    def check(value: Any) -> Optional[str]:
        if isinstance(value, bool) or not isinstance(value, kind) or not cond(value):
            return expected
        return None

    return check


_HLS_TOOL = _is(str, f"one of {', '.join(HLS_TOOLS)}", lambda v: v in HLS_TOOLS)
_STR = _is(str, "a non-empty string", lambda v: bool(v.strip()))
# Names from a board file reach file names, C++, Tcl and scripts: letters, digits, '_' and '-' only;
# an FPGA part number the same with '.' (xc7z020clg400-1); free text on one line, without control characters.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_NAME = _is(str, "a name of letters, digits, '_' and '-', starting with a letter",
            lambda v: NAME_PATTERN.fullmatch(v) is not None)
_PART = _is(str, "an FPGA part number (letters, digits, '_', '-', '.')",
            lambda v: re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", v) is not None)
# Vivado's board files: a board part is vendor:board:part0:version; a connection, a connector and
# the VLNV of what is plugged into it (a Kria SOM's carrier card). Checked this tightly because
# they go into the block design's Tcl.
_VLNV = r"[A-Za-z0-9][A-Za-z0-9_.-]*(?::[A-Za-z0-9][A-Za-z0-9_.-]*){3}"
_BOARD_PART = _is(str, "a Vivado board part, vendor:board:part0:version (tul.com.tw:pynq-z2:part0:1.0)",
                  lambda v: re.fullmatch(_VLNV, v) is not None)
_BOARD_CONNECTIONS = _is(list, "a list of 'connector vendor:board:connector:version' (a Kria SOM's carrier)",
                         lambda v: all(isinstance(x, str) and re.fullmatch(rf"[A-Za-z0-9_]+ {_VLNV}", x)
                                       for x in v))
_TEXT = _is(str, "one line of text", lambda v: bool(v.strip()) and v.isprintable())
# Figures are physical: finite, at most 1e18, and a positive one at least 1e-15 (so that nothing
# derived from them overflows to inf, which plan.json could not hold).
_PHYSICAL = lambda v: abs(v) <= 1e18 and math.isfinite(v)  # noqa: E731  (the bound first: a 400-digit int overflows isfinite)
_POS_NUM = _is((int, float), "a positive number from 1e-15 to 1e18", lambda v: _PHYSICAL(v) and v >= 1e-15)
_NONNEG_NUM = _is((int, float), "a number >= 0 up to 1e18", lambda v: _PHYSICAL(v) and (v == 0 or v >= 1e-15))
_POS_INT = _is(int, "a positive integer up to 1e18", lambda v: 0 < v <= 10**18)
_NONNEG_INT = _is(int, "an integer >= 0 up to 1e18", lambda v: 0 <= v <= 10**18)
_FRACTION = _is((int, float), "a number from 0 to 1", lambda v: 0 <= v < 1)
_KIND = _is(str, f"one of {', '.join(DEVICE_KINDS)}", lambda v: v in DEVICE_KINDS)
_BOOL = lambda v: None if isinstance(v, bool) else "true or false"  # noqa: E731


def _once(values: list) -> bool:
    """No entry twice (a list that names one twice is a slip: two fuse entries of one op, two axes)."""
    return len({repr(v) for v in values}) == len(values)


def _list_of(allowed: tuple, expected: str) -> Check:
    return _is(list, expected + ", each once",
               lambda v: bool(v) and _once(v) and all(x in allowed and not isinstance(x, bool) for x in v))


def _indices(expected: str) -> Check:
    return _is(list, expected + " (integers >= 0), each once",
               lambda v: _once(v) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_LIMITS = {
    "dtypes": (False, _list_of(("float32",), "a list of data types from: float32")),
    "spatial_dims": (False, _list_of((1, 2, 3), "a list from 1, 2, 3")),
    "max_kernel": (False, _POS_INT),
    "max_channels": (False, _POS_INT),
    "max_rank": (False, _POS_INT),
    "groups": (False, _list_of(("one", "depthwise", "grouped"), "a list from: one, depthwise, grouped")),
    "axes": (False, _indices("a list of axes")),
    # each attribute's allowed values: a list (of values, or of lists for a list-valued attribute)
    "attributes": (False, _is(dict, "a mapping of attribute name to a list of its allowed values",
                              lambda v: all(isinstance(k, str) and isinstance(x, list) and x and _once(x)
                                            for k, x in v.items()))),
    "constant_inputs": (False, _indices("a list of input indices")),
    "same_shape_inputs": (False, _BOOL),
    "activation_inputs": (False, _POS_INT),
    "per_channel_constants": (False, _BOOL),
    "stride_equals_kernel": (False, _BOOL),
    "padding_counted": (False, _BOOL),
    "finite_attributes": (False, _BOOL),
    "scalar_constants": (False, _indices("a list of input indices")),
    "integer_constants": (False, _indices("a list of input indices")),
    "channel_constants": (False, _indices("a list of input indices")),
    "constant_range": (False, _is(dict, "a mapping of input index to [lowest, highest], two numbers in order",
                                  lambda v: all(str(k).isdigit() and isinstance(r, list) and len(r) == 2
                                                and all(map(_number, r)) and r[0] <= r[1] for k, r in v.items()))),
}
_RESOURCES = {k: (True, _NONNEG_INT) for k in ("lut", "ff", "bram18", "dsp", "uram")}
# FINN-style caps: the most of each resource a design may use (FINN's default limits for timing
# closure are LUT 0.7, FF 0.5, BRAM18/URAM/DSP 0.8: finn/util/platforms.py, DEFAULT_RES_LIMITS)
_UTILISATION = {k: (False, _is((int, float), "a fraction above 0 and at most 1", lambda v: 0 < v <= 1))
                for k in _RESOURCES}
MEMORY_MAX_PORTS = 5  # a Zynq UltraScale+'s HP0-HP3 and HPC0 (UG1085); a Zynq-7000 has four HP ports (UG585)
_MEMORY = {"bytes": (True, _POS_INT), "bandwidth_bytes_per_s": (True, _POS_NUM),
           "ports": (False, _is(int, f"a whole number of ports from 1 to {MEMORY_MAX_PORTS}",
                                lambda v: 1 <= v <= MEMORY_MAX_PORTS))}
_EFFICIENCY = {k: (k == "other", _is((int, float), "a number above 0 and at most 1", lambda v: 0 < v <= 1))
               for k in OP_CLASSES}
_COMPUTE = {
    "dtype": (True, _is(str, f"one of {', '.join(COMPUTE_DTYPES)}", lambda v: v in COMPUTE_DTYPES)),
    "peak_ops_per_s": (True, {k: (False, _POS_NUM) for k in COMPUTE_DTYPES}),
    "efficiency": (True, _EFFICIENCY),
    "per_op_s": (False, _NONNEG_NUM),
}
# the keys only an fpga device takes, and why
_FPGA_ONLY_KEYS = {"board_part": "only an fpga device sits on a Vivado board part",
                   "board_connections": "only an fpga device sits on a Vivado board part",
                   "hls_tool": "only an fpga device is synthesised by an HLS tool",
                   "engine": "only an fpga device has the layer-sequential engine"}
# an FPGA's engine pinned: its lanes, and the values a lane takes a cycle (a power of two, at most a 128-bit arena
# word's: 16 at 8 bits)
ENGINE_VALUES, ENGINE_MAX_LANES = (1, 2, 4, 8, 16), 4096
_ENGINE = {"lanes": (True, _is(int, f"a whole number of lanes from 1 to {ENGINE_MAX_LANES}",
                               lambda v: 1 <= v <= ENGINE_MAX_LANES)),
           "values": (True, _is(int, f"one of {', '.join(map(str, ENGINE_VALUES))}", lambda v: v in ENGINE_VALUES))}
_DEVICE = {
    "name": (True, _NAME),
    "kind": (True, _KIND),
    "description": (False, _TEXT),
    "cores": (False, _POS_INT),
    "clock_mhz": (False, _POS_NUM),
    "compute": (False, None),  # a CPU's or GPU's (required there), checked in _validate; an FPGA has none
    "memory": (True, _MEMORY),
    "invocation_overhead_s": (True, _NONNEG_NUM),
    "ops": (True, None),  # 'all' or a mapping of op -> limits; checked in _validate_ops
    "part": (False, _PART),
    "hls_tool": (False, _HLS_TOOL),
    "board_part": (False, _BOARD_PART),
    "board_connections": (False, _BOARD_CONNECTIONS),
    "resources": (False, _RESOURCES),
    "reserve_fraction": (False, _FRACTION),
    "utilisation": (False, _UTILISATION),
    "pes": (False, None),  # a mapping of PE kind -> {ops, fuse}; checked in _validate_pes
    "engine": (False, _ENGINE),
}
_LINK = {
    "from": (True, _NAME),
    "to": (True, _NAME),
    "bandwidth_bytes_per_s": (True, _POS_NUM),
    "latency_s": (True, _NONNEG_NUM),
}
_BOARD = {
    "name": (True, _NAME),
    "description": (False, _TEXT),
    "devices": (True, [_DEVICE]),
    "host": (False, _NAME),
    "preference": (False, _is(list, "a list of device names, each once",
                              lambda v: _once(v) and all(isinstance(x, str) and NAME_PATTERN.fullmatch(x) for x in v))),
    "links": (False, [_LINK]),
}


class _Source(YamlFile):
    """A board file's data with the line of every key path, checked against a spec."""

    def __init__(self, path: Path):
        super().__init__(path, "board file")

    def check(self, value: Any, spec: Any, path: str) -> None:
        if isinstance(spec, list):
            if not isinstance(value, list) or not value:
                self.fail(path, "expected a non-empty list")
            for i, item in enumerate(value):
                self.check(item, spec[0], f"{path}[{i}]")
        elif isinstance(spec, dict):
            if not isinstance(value, dict):
                self.fail(path, "expected a mapping")
            for key in value:
                if key not in spec:
                    self.fail(_join(path, key), f"unknown key '{key}'; expected one of: {', '.join(spec)}")
            for key, (required, sub) in spec.items():
                if key not in value:
                    if required:
                        self.fail(path, f"missing key '{key}'")
                elif sub is not None:
                    self.check(value[key], sub, _join(path, key))
        else:
            expected = spec(value)
            if expected:
                shown = repr(value)
                self.fail(path, f"expected {expected}, got {shown if len(shown) <= 60 else shown[:57] + '...'}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


# QONNX's quantizers a board file may list for an FPGA (hls4ml converts these).
QONNX_QUANTIZERS = {"Quant", "BipolarQuant"}


def _known_onnx_ops() -> set[str]:
    import onnx.defs

    return {s.name for s in onnx.defs.get_all_schemas() if s.domain in ("", "ai.onnx")} | QONNX_QUANTIZERS


def _validate(src: _Source) -> Board:
    data = src.data
    src.check(data, _BOARD, "")
    known_ops = _known_onnx_ops()
    devices = []
    seen = set()
    for i, d in enumerate(data["devices"]):
        path = f"devices[{i}]"
        if d["name"] in seen:
            src.fail(f"{path}.name", f"device name '{d['name']}' is used twice")
        seen.add(d["name"])
        ops = d["ops"]
        if ops == "all":
            ops = None
        elif isinstance(ops, dict) and ops:
            for op, limits in ops.items():
                if op not in known_ops:
                    src.fail(f"{path}.ops.{op}", f"unknown ONNX op '{op}'")
                src.check(limits if limits is not None else {}, _LIMITS, f"{path}.ops.{op}")
            ops = {op: dict(limits or {}) for op, limits in ops.items()}
        else:
            src.fail(f"{path}.ops", "expected 'all' or a mapping of ONNX op to its limits")
        pes = _validate_pes(src, d, path, ops) if d["kind"] == "fpga" else {}
        if d["kind"] == "fpga":
            for key in ("part", "resources", "clock_mhz"):
                if key not in d:
                    src.fail(path, f"missing key '{key}' (required for an fpga device)")
        for key, why in _FPGA_ONLY_KEYS.items():
            if key in d and d["kind"] != "fpga":
                src.fail(f"{path}.{key}", why)
        if "ports" in d["memory"] and d["kind"] != "fpga":
            src.fail(f"{path}.memory.ports", "only an fpga device's cores master the DDR through its ports")
        if "board_connections" in d and "board_part" not in d:
            src.fail(f"{path}.board_connections", "connections need the board_part they connect")
        compute = None
        if d["kind"] == "fpga":
            if "compute" in d:
                src.fail(f"{path}.compute", "an FPGA's time comes from its execution units' estimates at its "
                                            "clock_mhz (hetdeploy/planning/units/); remove this block")
        else:
            if "compute" not in d:
                src.fail(path, "missing key 'compute'")
            src.check(d["compute"], _COMPUTE, f"{path}.compute")
            given = d["compute"]
            if given["dtype"] not in given["peak_ops_per_s"]:
                src.fail(f"{path}.compute.peak_ops_per_s", f"no peak for compute.dtype '{given['dtype']}'")
            compute = Compute(given["dtype"], {k: float(v) for k, v in given["peak_ops_per_s"].items()},
                              {k: float(v) for k, v in given["efficiency"].items()}, float(given.get("per_op_s", 0.0)))
        devices.append(
            Device(
                name=d["name"],
                kind=d["kind"],
                description=d.get("description", ""),
                ops=ops,
                compute=compute,
                memory=Memory(int(d["memory"]["bytes"]), float(d["memory"]["bandwidth_bytes_per_s"]),
                              int(d["memory"].get("ports", 1))),
                invocation_overhead_s=float(d["invocation_overhead_s"]),
                cores=int(d.get("cores", 1)),
                clock_mhz=float(d.get("clock_mhz", 0.0)),
                part=d.get("part", ""),
                hls_tool=d.get("hls_tool", VITIS_HLS),
                board_part=d.get("board_part", ""),
                board_connections=list(d.get("board_connections", [])),
                resources=dict(d.get("resources", {})),
                reserve_fraction=float(d.get("reserve_fraction", 0.0)),
                utilisation={k: float(v) for k, v in d.get("utilisation", {}).items()},
                pes=pes,
                engine_size=(d["engine"]["lanes"], d["engine"]["values"]) if "engine" in d else None,
            )
        )
    links = []
    pairs = set()
    for i, link in enumerate(data.get("links", [])):
        for end in ("from", "to"):
            if link[end] not in seen:
                src.fail(f"links[{i}].{end}", f"link names device '{link[end]}', which the board does not define")
        if (link["from"], link["to"]) in pairs:
            src.fail(f"links[{i}]", f"a second link from {link['from']} to {link['to']}")
        pairs.add((link["from"], link["to"]))
        links.append(Link(link["from"], link["to"], float(link["bandwidth_bytes_per_s"]), float(link["latency_s"])))
    cpus = [d.name for d in devices if d.kind == "cpu"]
    host = data.get("host", cpus[0] if cpus else "")
    if host not in cpus:
        src.fail("host" if "host" in data else "devices",
                 f"the host must be a device of kind cpu; {'got ' + repr(host) if host else 'there is none'}")
    # Every call goes through the host: it holds the inputs and outputs and runs the pipeline.
    for d in devices:
        for a, b in ((host, d.name), (d.name, host)):
            if d.name != host and (a, b) not in pairs:
                src.fail("links", f"no link from {a} to {b}; every device exchanges data with the host ({host})")
    preference = data.get("preference", [d.name for d in devices])
    for i, name in enumerate(preference):
        if name not in seen:
            src.fail(f"preference[{i}]", f"names device '{name}', which the board does not define")
    if sorted(preference) != sorted(seen):
        src.fail("preference", f"must list every device once: {', '.join(sorted(seen))}")
    ordered = [next(d for d in devices if d.name == name) for name in preference]
    return Board(data["name"], str(src.path), data.get("description", ""), ordered, links, host)


_PE = {"ops": (True, _is(list, "a non-empty list of ONNX op names, each once",
                         lambda v: bool(v) and _once(v) and all(isinstance(x, str) for x in v))),
       "fuse": (False, _is(list, "a list of ONNX op names, each once",
                           lambda v: _once(v) and all(isinstance(x, str) for x in v))),
       "engine": (False, _is(str, f"one of {', '.join(ENGINES)}", lambda v: v in ENGINES)),
       "limits": (False, _is(dict, "a mapping of the PE's ops to their limits"))}


def _validate_pes(src: _Source, d: dict, path: str, ops: Optional[dict]) -> dict[str, ProcessingElement]:
    """An FPGA's PE kinds: every op it lists runs on one, and they name only ops it lists."""
    pes = d.get("pes")
    if not isinstance(pes, dict) or not pes:
        src.fail(path if pes is None else f"{path}.pes",
                 "missing key 'pes' (required for an fpga device)" if pes is None
                 else "expected a mapping of PE kind to {ops, fuse}")
    listed = list(ops or {})  # in the file's order
    for kind, spec in pes.items():
        if not isinstance(kind, str) or NAME_PATTERN.fullmatch(kind) is None:  # it names C++ and files
            src.fail(f"{path}.pes", f"PE kind {kind!r}: expected a name of letters, digits, '_' and '-', "
                                    f"starting with a letter")
        src.check(spec, _PE, f"{path}.pes.{kind}")
        for key in ("ops", "fuse"):
            for k, op in enumerate(spec.get(key, [])):
                if op not in listed:
                    src.fail(f"{path}.pes.{kind}.{key}[{k}]", f"'{op}' is not in this device's ops")
        for op, limits in spec.get("limits", {}).items():
            if op not in spec["ops"]:
                src.fail(f"{path}.pes.{kind}.limits.{op}", f"'{op}' is not in this PE's ops")
            src.check(limits if limits is not None else {}, _LIMITS, f"{path}.pes.{kind}.limits.{op}")
        engine = spec.get("engine", "hls4ml")
        # hls4ml has no layer for a relayout; the top implements only its own ops and fuses a ReLU after an Add only
        for k, op in enumerate(spec["ops"]):
            if (op in RELAYOUT_OPS) != (engine == "top") and op not in TOP_WINDOW_OPS + TOP_ELEMENTWISE_OPS:
                src.fail(f"{path}.pes.{kind}.ops[{k}]",
                         f"'{op}' is not implemented by the {engine} engine; the top implements "
                         f"{', '.join(RELAYOUT_OPS + TOP_WINDOW_OPS + TOP_ELEMENTWISE_OPS)}, hls4ml the rest")
        if engine == "engine" and not (set(spec["ops"]) <= set(LAYER_ENGINE_OPS)
                                       and set(spec.get("fuse", [])) <= set(LAYER_ENGINE_FUSED_OPS)):
            src.fail(f"{path}.pes.{kind}", f"the engine computes {', '.join(LAYER_ENGINE_OPS)} and fuses "
                                           f"{', '.join(LAYER_ENGINE_FUSED_OPS)} after them, nothing else")
        fused = set(spec.get("fuse", []))
        fusing = set(spec["ops"]) <= set(TOP_FUSING_OPS) and fused <= set(TOP_FUSED_OPS) or \
            set(spec["ops"]) <= set(RELAYOUT_OPS) and fused <= set(RELAYOUT_OPS)
        if engine == "top" and fused and not fusing:
            src.fail(f"{path}.pes.{kind}.fuse", f"a PE the top implements fuses nothing but "
                                               f"{', '.join(TOP_FUSED_OPS)} after {' or '.join(TOP_FUSING_OPS)}, "
                                               f"and relayouts after relayouts (one table moves them all)")
    covered = {op for spec in pes.values() for op in spec["ops"]}
    for op in (op for op in listed if op not in covered):  # in the file's order: the same error every run
        src.fail(f"{path}.ops.{op}", f"no PE in {path}.pes runs {op}")
    return {kind: ProcessingElement(list(spec["ops"]), list(spec.get("fuse", [])), spec.get("engine", "hls4ml"),
                                    {op: dict(limits or {}) for op, limits in spec.get("limits", {}).items()})
            for kind, spec in pes.items()}


def available_boards() -> list[str]:
    return sorted(p.stem for p in BOARDS_DIR.glob("*.yaml"))


def is_board_file(name_or_path: str) -> bool:
    """Whether ``name_or_path`` names a YAML file rather than a shipped board."""
    candidate = Path(name_or_path)
    return candidate.suffix in (".yaml", ".yml") or candidate.exists() or "/" in name_or_path


def load_board(name_or_path: str) -> Board:
    """``name_or_path``: a board name from boards/ or the path of a YAML file."""
    if is_board_file(name_or_path):
        path = Path(name_or_path)
    else:
        known = available_boards()
        name = next((b for b in known if b.lower() == name_or_path.lower()), name_or_path)  # PYNQ-Z2 is pynq-z2
        path = BOARDS_DIR / f"{name}.yaml"
        if not path.exists():
            near = difflib.get_close_matches(name_or_path.lower(), known, n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise UserError(f"unknown board '{name_or_path}'; {hint}known boards: {', '.join(known)} "
                            f"(or give a .yaml path)")
    return _validate(_Source(path))
