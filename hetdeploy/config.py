"""Build configurations: every option of ``hetdeploy build`` and ``plan`` as one YAML file, per-node
settings included, in the habit of hls4ml's ``config.yml`` and FINN's ``dataflow_build_config.json``.

    model: small_cnn.onnx          # paths are relative to this file's folder
    board: pynq-z2
    policy: latency
    objective: latency             # or throughput (a pipelined stream of batches)
    batch: 1                       # samples per FPGA call
    target_rate: null              # samples/s: FPGA units folded to the fewest resources that reach it
    width: 16
    tolerance: 0.05
    cache: build-cache             # the build cache's folder; null: none
    cache_limit: 5G                # the most it keeps (least recently used evicted); null: $HETDEPLOY_CACHE_LIMIT or 5G
    nodes:                         # by ONNX node name (``hetdeploy plan --nodes`` lists them)
      conv1: {reuse_factor: 4, precision: "ap_fixed<12,4>", weights_in_ddr: true, device: fpga}

plan.json's ``config`` holds the resolved configuration of the build (every key, defaults included,
paths absolute); ``hetdeploy config DIR`` writes it back as YAML (``--folding``: with every FPGA
unit's reuse factor and weight placement pinned, for editing), and ``build --config`` replays it.

The checks of option values live here too, shared by the CLI's arguments, config files and the
Python API: one line naming the option or key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import yaml

from .cache import default_root, parse_size
from .cost import OBJECTIVES
from .errors import UserError
from .memory import STRATEGIES
from .partition import POLICIES
from .yamlfile import YamlFile

MEMORY_STRATEGIES = ("auto", *STRATEGIES)
DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class BuildOptions:
    """Every setting of a build, as the user gave them (the command line, a config file, the Python
    API); frozen: ``settle_options`` and ``planning.model_node_names`` give settled copies."""

    model: Path
    board: str
    out_dir: Path
    calibration: Optional[Path] = None  # samples that size the FPGA's types (a quarter held out to verify on)
    verify_input: Optional[Path] = None  # samples to verify on instead (never used for sizing)
    samples: int = 4
    seed: int = 0
    # allowed max abs error per output, as a fraction of its peak; None: error_budget's, else DEFAULT_TOLERANCE
    relative_tolerance: Optional[float] = None
    width: int = 16
    policy: str = "latency"
    objective: str = "latency"  # what the latency policy minimises (cost.OBJECTIVES)
    batch: int = 1  # samples per call: the FPGA cores' largest batch, and the stream the throughput is for
    # samples per second of that stream the FPGA units must reach, with the fewest resources (FINN's
    # target_fps); None: folded to the least latency that fits
    target_rate: Optional[float] = None
    reuse_factors: dict[str, int] = field(default_factory=dict)  # ONNX node name -> pinned ReuseFactor
    # every foldable unit's ReuseFactor (hls4ml's model-wide one): the valid one nearest it; None: folded to fit
    model_reuse_factor: Optional[int] = None
    weights_in_ddr: list[str] = field(default_factory=list)  # ONNX nodes whose unit keeps its weights in DDR
    # ONNX node -> (W, I): its unit's output is ap_fixed<W,I>, its other values W bits wide (--precision)
    precisions: dict[str, tuple[int, int]] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)  # ONNX node -> the board device it must run on
    memory_strategy: str = "auto"  # or one of memory.STRATEGIES
    # the largest relative error per output the FPGA's fixed point may add (--error-budget): each
    # FPGA layer gets the fewest bits that keep it (budget.py); None: --width everywhere
    error_budget: Optional[float] = None
    synth: bool = False  # run the HLS and Vivado scripts when the tools are on PATH
    # the build cache's folder (cache.py: hls4ml conversions and compiled libraries); None: no cache
    cache: Optional[Path] = field(default_factory=default_root)
    # the most bytes the cache keeps (least recently used entries evicted); None: $HETDEPLOY_CACHE_LIMIT, else 5 GiB
    cache_limit: Optional[int] = None
    # "FLAG NODE" (say "--reuse-factor conv1") -> (where a config file set it: "c.yaml: line 5:
    # nodes.conv1.reuse_factor", the value set there): a mistake in it names the file and line (``said``)
    origins: dict[str, tuple[str, Any]] = field(default_factory=dict)


def said(options: BuildOptions, flag: str, node: str, value: Any, typed: str) -> str:
    """Where the user gave ``flag``'s setting ``value`` of ``node``, for an error line: the config file's
    line when the setting still is the file's, else ``typed`` (the command line's wording)."""
    where = options.origins.get(f"{flag} {node}")
    return where[0] if where is not None and where[1] == value else typed


# ------------------------------------------------------------------ values (ValueError: what is wrong)

def width(value: Any) -> int:
    if not _whole(value) or not 4 <= int(value) <= 32:
        raise ValueError(f"'{value}': expected a whole number of bits from 4 to 32")
    return int(value)


def precision(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_whole(v) for v in value):
        bits, integer = int(value[0]), int(value[1])
    else:
        match = re.fullmatch(r"(?:ap_)?fixed<\s*(\d+)\s*,\s*(-?\d+)\s*>", str(value).strip())
        if match is None:
            raise ValueError(f"'{value}': expected ap_fixed<W,I>")
        bits, integer = int(match.group(1)), int(match.group(2))
    if not 2 <= bits <= 32 or not -bits < integer <= bits:
        raise ValueError(f"'{value}': W must be 2 to 32 bits and I from {1 - bits} to {bits}")
    return bits, integer


def positive_int(value: Any) -> int:
    if not _whole(value) or int(value) < 1:
        raise ValueError(f"'{value}': expected a whole number of at least 1")
    return int(value)


# Synthetic samples to size on (and as many to verify on): each runs through every unit's
# C-simulation, so more than this is a mistake, not a wish.
MAX_SAMPLES = 100_000
# A local Dask cluster's worker processes: each holds a Python with onnx and hls4ml.
MAX_WORKERS = 256


def sample_count(value: Any) -> int:
    if not _whole(value) or not 1 <= int(value) <= MAX_SAMPLES:
        raise ValueError(f"'{value}': expected a whole number of samples from 1 to {MAX_SAMPLES:,}")
    return int(value)


def worker_count(value: Any) -> int:
    if not _whole(value) or not 1 <= int(value) <= MAX_WORKERS:
        raise ValueError(f"'{value}': expected a whole number of worker processes from 1 to {MAX_WORKERS}")
    return int(value)


def seed(value: Any) -> int:
    if not _whole(value, signed=True) or not 0 <= int(value) < 2 ** 32:
        raise ValueError(f"'{value}': expected a whole number from 0 to 2^32 - 1")
    return int(value)


def fraction(value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not 0 < number < 1:
        raise ValueError(f"'{value}': expected a fraction above 0 and below 1 (0.02: 2 %)")
    return number


def rate(value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not 0 < number < math.inf:
        raise ValueError(f"'{value}': expected samples per second, a number above 0")
    return number


def choice(options: tuple[str, ...]):
    def check(value: Any) -> str:
        if value not in options:
            raise ValueError(f"'{value}': expected one of {', '.join(options)}")
        return value
    return check


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"'{value}': expected true or false")
    return value


def text(value: Any) -> str:
    if not isinstance(value, str) or not value or "\0" in value:
        raise ValueError(f"'{value}': expected a non-empty string")
    return value


def _whole(value: Any, signed: bool = False) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and re.fullmatch(r"-?\d{1,12}" if signed else r"\d{1,12}", value) is not None


# ------------------------------------------------------------------ the file

# top-level key -> (BuildOptions field, check); paths are resolved against the file's folder
_KEYS = {
    "model": ("model", text), "board": ("board", text), "policy": ("policy", choice(POLICIES)),
    "memory_strategy": ("memory_strategy", choice(MEMORY_STRATEGIES)), "width": ("width", width),
    "error_budget": ("error_budget", fraction), "calibration": ("calibration", text),
    "verify_input": ("verify_input", text), "samples": ("samples", sample_count), "seed": ("seed", seed), "tolerance": ("relative_tolerance", fraction),
    "synth": ("synth", flag), "cache": ("cache", text), "model_reuse_factor": ("model_reuse_factor", positive_int),
    "objective": ("objective", choice(OBJECTIVES)), "batch": ("batch", positive_int),
    "target_rate": ("target_rate", rate), "cache_limit": ("cache_limit", parse_size),
}
_PATHS = ("model", "calibration", "verify_input", "cache")
# per-node key -> check
_NODE_KEYS = {"reuse_factor": positive_int, "precision": precision, "weights_in_ddr": flag, "device": text}
# per-node key -> the command-line flag that sets the same
_NODE_FLAGS = {"reuse_factor": "--reuse-factor", "precision": "--precision", "weights_in_ddr": "--weights-in-ddr",
               "device": "--device"}


def load_config(path: str | Path) -> dict[str, Any]:
    """BuildOptions' fields (those the file gives) from a config file; one line naming the file,
    line and key when something is wrong. Paths in it are relative to its folder."""
    source = YamlFile(Path(path), "config file")
    data, base = source.data, Path(path).resolve().parent
    if not isinstance(data, dict):
        source.fail("", "expected a mapping of option: value (as 'hetdeploy config DIR' writes)")
    options: dict[str, Any] = {}
    for key, value in data.items():
        if key == "nodes":
            continue
        if key not in _KEYS:
            source.fail(str(key), f"unknown key; expected one of: {', '.join([*_KEYS, 'nodes'])}")
        name, check = _KEYS[key]
        if value is None:  # the option's default; for the cache, none
            if key == "cache":
                options[name] = None
            continue
        options[name] = _checked(check, value, source, key)
        if key in _PATHS:
            options[name] = base / Path(options[name]).expanduser()
    nodes = data.get("nodes") or {}
    if not isinstance(nodes, dict):
        source.fail("nodes", "expected a mapping of ONNX node name to its settings")
    for node, settings in nodes.items():
        where = f"nodes.{node}"
        if not isinstance(settings, dict):
            source.fail(where, f"expected a mapping of {', '.join(_NODE_KEYS)}")
        for key, value in settings.items():
            if key not in _NODE_KEYS:
                source.fail(f"{where}.{key}", f"unknown key; expected one of: {', '.join(_NODE_KEYS)}")
            value = _checked(_NODE_KEYS[key], value, source, f"{where}.{key}")
            options.setdefault("origins", {})[f"{_NODE_FLAGS[key]} {node}"] = (
                f"{path}: line {source.lines[f'{where}.{key}']}: {where}.{key}", None if key == "weights_in_ddr" else value)
            if key == "reuse_factor":
                options.setdefault("reuse_factors", {})[str(node)] = value
            elif key == "precision":
                options.setdefault("precisions", {})[str(node)] = value
            elif key == "device":
                options.setdefault("devices", {})[str(node)] = value
            elif value:
                options.setdefault("weights_in_ddr", []).append(str(node))
    return options


def _checked(check, value: Any, source: YamlFile, where: str) -> Any:
    try:
        return check(value)
    except ValueError as err:
        source.fail(where, str(err))


def _check_option(check, value: Any, where: str) -> Any:
    try:
        return check(value)
    except ValueError as err:
        raise UserError(f"{where}: {err}") from None


def settle_options(options: BuildOptions) -> BuildOptions:
    """``options`` (from the CLI, a config file or the Python API) checked before any work, with the
    defaults that follow others filled (the tolerance follows the error budget)."""
    if options.relative_tolerance is None:
        options = replace(options, relative_tolerance=options.error_budget or DEFAULT_TOLERANCE)
    for key, (name, check) in _KEYS.items():
        value = getattr(options, name)
        if value is not None and key not in _PATHS:
            _check_option(check, value, f"option {name}")
    for node, value in options.reuse_factors.items():
        _check_option(positive_int, value, f"reuse factor of node '{node}'")
    for node, value in options.precisions.items():
        _check_option(precision, value, f"precision of node '{node}'")
    return options


def resolved_config(options: BuildOptions) -> dict[str, Any]:
    """Every option of a build, defaults included, in the config file's form (plan.json ``config``)."""
    config: dict[str, Any] = {}
    for key, (name, _) in _KEYS.items():
        value = getattr(options, name)
        config[key] = str(Path(value).resolve()) if key in _PATHS and value is not None else value
    nodes: dict[str, dict[str, Any]] = {}
    for node, value in options.reuse_factors.items():
        nodes.setdefault(node, {})["reuse_factor"] = value
    for node, (bits, integer) in options.precisions.items():
        nodes.setdefault(node, {})["precision"] = f"ap_fixed<{bits},{integer}>"
    for node in options.weights_in_ddr:
        nodes.setdefault(node, {})["weights_in_ddr"] = True
    for node, device in options.devices.items():
        nodes.setdefault(node, {})["device"] = device
    config["nodes"] = {node: nodes[node] for node in sorted(nodes)}
    return config


def config_yaml(config: dict[str, Any], header: str) -> str:
    """``config`` as a YAML file, ``header`` as its opening comment."""
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    return comment + yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
