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

Every option is described once, in ``OPTIONS`` (its field, key, flag, check, default, --help text
and section, the commands that take it, the sweep's axis): the CLI's arguments, the config file's
keys, plan.json's ``config``, the Python API's keywords and the sweep's grid are made from it. The
checks of option values live here too: one line naming the option or key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from ..core.board import ENGINE_MAX_LANES, ENGINE_VALUES
from ..core.cache import LIMIT_VARIABLE, default_root, parse_size
from ..core.errors import UserError
from ..core.plan import TOPS
from ..core.precision import DEFAULT_WIDTH
from ..core.yamlfile import YamlFile
from .compression import MODES as COMPRESSION_MODES
from .cost import OBJECTIVES
from .memory import STRATEGIES
from .partition import ILP_TIME_LIMIT_S, PARTITIONERS, POLICIES
from .units import IO_TYPES, LOOKUP_TABLE_SIZE, TABLE_SIZES
from .units import STRATEGIES as HLS_STRATEGIES

MEMORY_STRATEGIES = ("auto", *STRATEGIES)
TOP_CHOICES = ("auto", *TOPS)
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
    # further samples each quantized FPGA subfunction's output codes are compared on after verification (0: none);
    # None: FLIP_SAMPLES, or fewer where their C-simulation would pass FLIP_OPERATIONS
    # (generate.flip_samples_to_compare)
    flip_samples: Optional[int] = None
    # allowed max abs error per output, as a fraction of its peak; None: error_budget's, else DEFAULT_TOLERANCE
    relative_tolerance: Optional[float] = None
    width: int = DEFAULT_WIDTH
    policy: str = "latency"
    objective: str = "latency"  # what the latency policy minimises (cost.OBJECTIVES)
    batch: int = 1  # samples per call: the FPGA cores' largest batch, and the stream the throughput is for
    # samples per second of that stream the FPGA units must reach, with the fewest resources (FINN's
    # target_fps); None: folded to the least latency that fits
    target_rate: Optional[float] = None
    reuse_factors: dict[str, int] = field(default_factory=dict)  # ONNX node name -> pinned ReuseFactor
    strategies: dict[str, str] = field(default_factory=dict)  # ONNX node name -> pinned hls4ml Strategy
    # the folding also weighs hls4ml's distributed_arithmetic for quantized multiply-accumulate units (needs da4ml)
    weigh_distributed_arithmetic: bool = False
    no_engine: bool = False  # never place a unit on the engine the user did not pin there
    # every FPGA's engine pinned (lanes, values a lane takes a cycle), over the board file's; None: the folding's
    engine_size: Optional[tuple[int, int]] = None
    # (no flag: plan_model.folded_plan's) the folding takes the fastest engine beside which the other units fit, not
    # the size of the fewest cycles of all the units
    engine_first_fit: bool = False
    # (no flag: plan_model.folded_plan's) the share of each FPGA's DSP budget its engine may take (None:
    # units.ENGINE_SHARES's)
    engine_dsp_share: Optional[float] = None
    # (no flag: plan_model.folded_plan's) the share of each FPGA's URAM blocks its engine's weight buffers may take
    # (None: units.ENGINE_SHARES's); the rest is the memory plan's, after BRAM
    engine_uram_share: Optional[float] = None
    # (no flag: plan_model's) engine units may write Concat inputs straight into the Concat's output
    # (units.concats_in_place): folded_plan weighs each folding with them so written and without, the faster kept,
    # and fold_units writes them so; False: every Concat moves its inputs
    concats_in_place: bool = True
    top: str = "auto"  # how each FPGA subfunction's top runs its units (TOP_CHOICES; plan_model.choose_tops)
    table_sizes: dict[str, int] = field(default_factory=dict)  # ONNX node name -> its unit's lookup tables' entries
    io_types: dict[str, str] = field(default_factory=dict)  # ONNX node name -> its unit's hls4ml IOType
    band_rows: dict[str, int] = field(default_factory=dict)  # ONNX node name -> its unit's output rows a band
    # every foldable unit's ReuseFactor (hls4ml's model-wide one): the valid one nearest it; None: folded to fit
    model_reuse_factor: Optional[int] = None
    weights_in_ddr: list[str] = field(default_factory=list)  # ONNX nodes whose unit keeps its weights in DDR
    # ONNX node -> {kind: (W, I)} (--precision), kinds of TYPE_KINDS: hls4ml's types of its unit; one type
    # given is the unit's output ("result"), its other values W bits wide
    precisions: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)  # ONNX node -> the board device it must run on
    profile: Optional[Path] = None  # a run's measured figures, in place of the board file's (planning.profile)
    partitioner: str = "search"  # how the latency policy cuts (partition.PARTITIONERS)
    ilp_time_limit: float = ILP_TIME_LIMIT_S  # seconds the integer programme may take (--partitioner ilp)
    memory_strategy: str = "auto"  # or one of memory.STRATEGIES
    compress_transfers: str = "auto"  # which FPGA ports travel zero-compressed (compression.MODES)
    # the largest relative error per output the FPGA's fixed point may add (--error-budget): each
    # FPGA layer gets the fewest bits that keep it (budget.py); None: --width everywhere
    error_budget: Optional[float] = None
    synth: bool = False  # run the HLS and Vivado scripts when the tools are on PATH
    open_synth: bool = False  # each FPGA unit's arithmetic as RTL by da4ml, simulated and synthesised (Yosys)
    # the build cache's folder (cache.py: hls4ml conversions and compiled libraries); None: no cache
    cache: Optional[Path] = field(default_factory=default_root)
    # the most bytes the cache keeps (least recently used entries evicted); None: $HETDEPLOY_CACHE_LIMIT, else 5 GiB
    cache_limit: Optional[int] = None
    # "FLAG NODE" (say "--reuse-factor conv1") -> (where a config file set it: "c.yaml: line 5:
    # nodes.conv1.reuse_factor", the value set there): a mistake in it names the file and line (``said``)
    origins: dict[str, tuple[str, Any]] = field(default_factory=dict)


def said(options: BuildOptions, flag: str, node: str, value: Any, typed: str) -> str:
    """Where the user gave ``flag``'s setting ``value`` of ``node`` ("" for a top-level option), for an error
    line: the config file's line when the setting still is the file's, else ``typed`` (the command line's
    wording)."""
    where = options.origins.get(f"{flag} {node}")
    return where[0] if where is not None and where[1] == value else typed


# ------------------------------------------------------------------ values (ValueError: what is wrong)

def width(value: Any) -> int:
    if not _whole(value) or not 4 <= int(value) <= 32:
        raise ValueError(f"'{value}': expected a whole number of bits from 4 to 32")
    return int(value)


# The types --precision pins, as hls4ml's layer config names them: the unit's output, and its
# multiply-accumulate layers' weights, biases and accumulators.
TYPE_KINDS = ("result", "weight", "bias", "accum")


def precision(value: Any) -> dict[str, tuple[int, int]]:
    """One type (the unit's output: result), or kinds of TYPE_KINDS with a type each, as
    "weight:ap_fixed<4,1>,accum:ap_fixed<24,12>" or a mapping."""
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, str) and ":" in value:
        pairs = [part.split(":", 1) for part in re.split(r",(?![^<]*>)", value)]  # commas outside <...>
    else:
        return {"result": fixed_type(value)}
    if not pairs or any(len(p) != 2 or str(p[0]).strip() not in TYPE_KINDS for p in pairs):
        raise ValueError(f"'{value}': expected ap_fixed<W,I>, or KIND:ap_fixed<W,I>,... with KIND one of "
                         f"{', '.join(TYPE_KINDS)}")
    kinds = {str(kind).strip(): fixed_type(typed) for kind, typed in pairs}
    if len(kinds) < len(pairs):
        raise ValueError(f"'{value}': a kind given twice")
    return kinds


def fixed_type(value: Any) -> tuple[int, int]:
    """(W, I) of ap_fixed<W,I> (or a pair)."""
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


def flip_sample_count(value: Any) -> int:
    if not _whole(value) or not 0 <= int(value) <= MAX_SAMPLES:
        raise ValueError(f"'{value}': expected a whole number of samples from 0 to {MAX_SAMPLES:,}")
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


def _positive(value: Any, what: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not 0 < number < math.inf:
        raise ValueError(f"'{value}': expected {what}, a number above 0")
    return number


def rate(value: Any) -> float:
    return _positive(value, "samples per second")


def time_limit(value: Any) -> float:
    return _positive(value, "seconds")


def choice(options: tuple[str, ...]):
    def check(value: Any) -> str:
        if value not in options:
            raise ValueError(f"'{value}': expected one of {', '.join(options)}")
        return value
    return check


def hls_strategy(value: Any) -> str:
    """hls4ml's Strategy, in any case and with or without underscores as hls4ml's config takes it
    (distributed_arithmetic), spelt as hetdeploy gives it to hls4ml."""
    def plain(name: str) -> str:
        return name.lower().replace("_", "")

    found = next((s for s in HLS_STRATEGIES if plain(str(value)) == plain(s)), None)
    if found is None:
        raise ValueError(f"'{value}': expected one of {', '.join(strategy_name(s) for s in HLS_STRATEGIES)}")
    return found


def strategy_name(name: str) -> str:
    """A Strategy as hls4ml's docs spell it: latency, resource, distributed_arithmetic."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def io_type(value: Any) -> str:
    """hls4ml's IOType, as io_parallel or parallel, spelt as hls4ml writes it."""
    found = next((t for t in IO_TYPES if str(value).lower() in (t, t.removeprefix("io_"))), None)
    if found is None:
        raise ValueError(f"'{value}': expected one of {', '.join(t.removeprefix('io_') for t in IO_TYPES)}")
    return found


def table_size(value: Any) -> int:
    if not _whole(value) or int(value) not in TABLE_SIZES:
        raise ValueError(f"'{value}': expected a power of two from {TABLE_SIZES[0]} to {TABLE_SIZES[-1]}")
    return int(value)


def engine_size(value: Any) -> tuple[int, int]:
    """An engine's lanes and the values a lane takes a cycle, written LANESxVALUES (64x4)."""
    if isinstance(value, (tuple, list)) and len(value) == 2:  # the API's (lanes, values)
        lanes, values = str(value[0]), str(value[1])
    else:
        lanes, _, values = str(value).lower().partition("x")
    if not _whole(lanes) or not 1 <= int(lanes) <= ENGINE_MAX_LANES or not _whole(values) or \
            int(values) not in ENGINE_VALUES:
        raise ValueError(f"'{value}': expected LANESxVALUES, lanes from 1 to {ENGINE_MAX_LANES} and values a cycle "
                         f"one of {', '.join(map(str, ENGINE_VALUES))} (64x4)")
    return int(lanes), int(values)


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


# ------------------------------------------------------------------ every option, described once

# Which commands take an option: "point" build and plan (a sweep varies it along its ``axis``),
# "shared" build, plan and sweep, "building" build and sweep (they verify and cache), "build" build alone.
SCOPES = ("point", "shared", "building", "build")


@dataclass(frozen=True)
class Option:
    """One setting of a build, described once: its ``BuildOptions`` field (the Python API's keyword),
    its config-file key (top level, or under ``nodes.NODE`` when ``per_node``: NODE=VALUE on the
    command line, repeatable), the check of its values, its --help section and text, and which
    commands take it (``SCOPES``). The CLI's arguments, the config file's keys, plan.json's ``config``,
    the API's keywords and the sweep's axes are all made from ``OPTIONS``; ``OPTIONS``' order is
    --help's."""

    field: str
    key: str
    check: Callable[[Any], Any]
    section: str
    help: str
    scope: str = "shared"
    metavar: Optional[str] = None
    choices: tuple[str, ...] = ()
    per_node: bool = False
    path: bool = False  # resolved against the config file's folder; absolute in plan.json
    axis: Optional[str] = None  # the sweep's list of it (the API's keyword; --axis-name on the command line)
    axis_help: str = ""
    written: Callable[[Any], Any] = lambda value: value  # its value as a config file holds it

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"option {self.field}: scope {self.scope!r}, expected one of {SCOPES}")

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")

    @property
    def listed(self) -> bool:
        """A per-node setting that is a list of nodes (weights_in_ddr: true), not a node -> value mapping."""
        return self.per_node and self.check is flag


def _typed(value: dict[str, tuple[int, int]]) -> str | dict[str, str]:
    """--precision's value as a config file holds it: the one type, or kind -> type."""
    typed = {kind: f"ap_fixed<{bits},{integer}>" for kind, (bits, integer) in value.items()}
    return typed["result"] if list(typed) == ["result"] else typed


OPTIONS = (
    Option("model", "model", text, "what to deploy", "required: the ONNX model file (or 'model:' in --config)",
           metavar="MODEL.onnx", path=True),
    Option("board", "board", text, "what to deploy", "required: a board name (see 'hetdeploy boards') or a .yaml "
           "path (or 'board:' in --config)", scope="point", metavar="BOARD", axis="boards",
           axis_help="required: board names (see 'hetdeploy boards') or .yaml paths"),
    Option("width", "width", width, "precision and verification", "fixed-point width of every FPGA value, 4 to 32 "
           f"(default {DEFAULT_WIDTH}): weights, biases and activations, each with the integer bits its values need; "
           "the resource estimates follow it", scope="point", metavar="BITS", axis="widths",
           axis_help=f"fixed-point widths (--width of each point; default {DEFAULT_WIDTH})"),
    Option("policy", "policy", choice(POLICIES), "partitioning", "latency (default): least estimated end-to-end "
           "latency with the FPGA's reserve kept free; support: each op to the first device in the board's "
           "preference that runs it", scope="point", choices=POLICIES, axis="policies",
           axis_help=f"partitioning policies, of {', '.join(POLICIES)} (default latency)"),
    Option("model_reuse_factor", "model_reuse_factor", positive_int, "folding and memory", "the ReuseFactor of "
           "every foldable FPGA unit (hls4ml's model-wide ReuseFactor): the valid one nearest R for each; "
           "--reuse-factor NODE=R overrides it per unit (default: each folded to fit the FPGA)", scope="point",
           metavar="R", axis="reuse_factors", axis_help="model-wide reuse factors (--model-reuse-factor of each "
           "point); 'auto': each unit folded to fit (the default)"),
    Option("objective", "objective", choice(OBJECTIVES), "partitioning", "what the latency policy minimises: "
           "latency (default), one sample through the subfunctions in turn; throughput, samples per second of a "
           "stream of --batch samples a call run as a pipeline (the busiest device, or FPGA core, sets the pace)",
           choices=OBJECTIVES),
    Option("partitioner", "partitioner", choice(PARTITIONERS), "partitioning", "how the latency policy finds its "
           "plan: search (default: a dynamic programme over cut points on several orders, then a local search), or "
           "ilp: its objective as an integer programme solved by HiGHS from the search's plan within "
           "--ilp-time-limit, exact over every cycle-free cut on graphs of up to 24 nodes; plan prints its proven "
           "gap", choices=PARTITIONERS),
    Option("ilp_time_limit", "ilp_time_limit", time_limit, "partitioning", "seconds the integer programme of "
           f"--partitioner ilp may take (default {ILP_TIME_LIMIT_S:g}); then its best plan, never slower than the "
           "search's, and its gap", metavar="S"),
    Option("compress_transfers", "compress_transfers", choice(COMPRESSION_MODES), "partitioning", "which tensors an "
           "FPGA subfunction takes from the host or gives it travel zero-compressed (a bitmap and the non-zero "
           "values; the top decodes and encodes them, run.py and emulate do the other end): auto (default), each "
           "where its share of zeros on the sizing samples saves more link time than the codec costs; all; none",
           choices=COMPRESSION_MODES),
    Option("profile", "profile", text, "partitioning", "what a run measured (run.py --profile on the board, or "
           "hetdeploy emulate --profile): its CPU/GPU nodes' times, and on the board its FPGA calls' and links', in "
           "place of the board file's estimates for what it covers (docs/memory.md: Profiles)", metavar="FILE.json",
           path=True),
    Option("batch", "batch", positive_int, "partitioning", "samples per call (default 1): the most an FPGA core "
           "takes in one call (its float ports hold N samples, in DDR) and the batch the estimated throughput is "
           "for", metavar="N"),
    Option("devices", "device", text, "partitioning", "run ONNX node NODE on the board's device DEVICE "
           "(repeatable), whatever the policy would choose", metavar="NODE=DEVICE", per_node=True),
    Option("precisions", "precision", precision, "precision and verification", "the output type of the FPGA "
           "execution unit holding ONNX node NODE (repeatable; W from 2 to 32 bits, I integer bits, may be "
           "negative); its other values are W bits wide and it is never widened. Or hls4ml's types by kind, "
           "NODE=result:ap_fixed<W,I>,weight:...,bias:...,accum:... (any of them; weight, bias and accum of its "
           "multiply-accumulate layers)", metavar="NODE=ap_fixed<W,I>", per_node=True, written=_typed),
    Option("error_budget", "error_budget", fraction, "precision and verification", "give each FPGA layer the "
           "fewest bits (from --width down) that keep every output's max abs error within E of its peak magnitude "
           "on the calibration samples, searched on a fixed-point simulation of the model; the build then verifies "
           "at E in C-simulation", metavar="E"),
    Option("calibration", "calibration", text, "precision and verification", "input samples (.npy, or .npz by "
           "input name) that size the fixed-point precisions; a quarter of them (at least one, chosen by --seed) "
           "are held out and never sized on: C-simulation verifies on those. Default: seeded random samples, "
           "verified on others of another seed and one at the edges of their range", metavar="X.npy", path=True),
    Option("verify_input", "verify_input", text, "precision and verification", "input samples to verify on in "
           "C-simulation (never used for sizing); with it, every --calibration sample sizes the types",
           metavar="Y.npy", path=True),
    Option("samples", "samples", sample_count, "precision and verification", "number of random samples to size "
           "on, and as many to verify on, without --calibration (default 4)", metavar="N"),
    Option("seed", "seed", seed, "precision and verification", "seed of the random samples (default 0)",
           metavar="N"),
    Option("flip_samples", "flip_samples", flip_sample_count, "precision and verification", "further samples, "
           "drawn within the sized ranges, that each quantized FPGA subfunction's output codes are compared on "
           "after verification, the samples a code flips on counted (0: none). Default: 256, or fewer where their "
           "C-simulation would pass 250 million operations (a CNN on images takes seconds a sample there)",
           metavar="N"),
    Option("reuse_factors", "reuse_factor", positive_int, "folding and memory", "pin the hls4ml ReuseFactor of the "
           "FPGA execution unit holding ONNX node NODE (repeatable; a BatchNormalization the top computes: R of a "
           "word's lanes a multiplier); the others are folded around it",
           metavar="NODE=R", per_node=True),
    Option("strategies", "strategy", hls_strategy, "folding and memory", "pin the hls4ml Strategy of the FPGA "
           "execution unit holding multiply-accumulate node NODE (repeatable): latency (products in registers, "
           "weights as constants; any reuse factor), resource (weights in banks of depth R; R must divide the "
           "layer), distributed_arithmetic (each constant product as shifts and adds by da4ml, no DSP; reuse factor "
           "1; the open-synth extra) or xnor_popcount (hetdeploy's kernel of a layer of signs, dense or a streamed "
           "unpadded convolution, its weights each -1 or +1 and its input a BipolarQuant's: an XNOR and a popcount "
           "where hls4ml multiplies and adds; R divides its inputs or is a multiple of them); or engine, not "
           "hls4ml's: the subfunction's layer-sequential engine "
           "(a Conv, Gemm or MatMul with BatchNormalizations and a ReLU after it; one array of multiply-accumulators "
           "its units share, weights in DDR); default: the folding chooses the one that lets the units be faster, or "
           "as fast with fewer BRAM18s (with --target-rate: fewer resources)",
           metavar="NODE=S", per_node=True,
           written=str.lower),
    Option("weigh_distributed_arithmetic", "weigh_distributed_arithmetic", flag, "folding and memory", "let the "
           "folding also choose hls4ml's distributed_arithmetic strategy for each FPGA execution unit of a quantized "
           "Dense or Conv (its weights a quantizer's codes) where its estimate (da4ml's cost) makes the units faster "
           "or as fast with a smaller share of the chip; needs da4ml (the open-synth extra)"),
    Option("no_engine", "no_engine", flag, "folding and memory", "never run a unit on the subfunction's "
           "layer-sequential engine (--strategy NODE=engine) unless pinned there; by default the partitioner and the "
           "folding weigh it for every Conv, Gemm and MatMul (with BatchNormalizations and a ReLU) as the most "
           "folded design, beside a plan without it, and keep the faster"),
    Option("engine_size", "engine", engine_size, "folding and memory", "pin the layer-sequential engine of every "
           "FPGA to LANES lanes (output channels at once) of VALUES values a lane a cycle (1, 2, 4, 8 or 16, at most "
           "a 128-bit word's at the width), over the board file's engine key; its weight buffers in the URAM as far as "
           "it holds them, then in BRAM; refused where it alone exceeds the FPGA's budget; at two output pixels at "
           "once where the FPGA's DSPs hold them and that plan is the faster. Default: the folding sizes it, the "
           "fastest for the subfunction's layers within three quarters of the DSPs, BRAM18s and URAM (or all of the "
           "DSPs, and then 0.6 or 0.3 of the URAM, leaving the rest to the maps, where that plan is the faster)",
           metavar="LANESxVALUES", written=lambda value: f"{value[0]}x{value[1]}"),
    Option("top", "top", choice(TOP_CHOICES), "folding and memory", "how each FPGA subfunction's top runs its "
           "units: sequential, one after another a sample over the memory plan's buffers (their space reused); "
           "dataflow, all at once on successive samples linked by FIFOs whose depths come from the units' schedules "
           "(the interval the slowest unit's; every FIFO and buffer held at once; no unit on the engine or in "
           "bands); auto (default): under --objective throughput the dataflow where it fits and its interval is "
           "the shorter (the units then folded to balance it), else sequential", choices=TOP_CHOICES),
    Option("io_types", "io_type", io_type, "folding and memory", "pin hls4ml's IOType of the FPGA execution unit "
           "holding ONNX node NODE (repeatable): parallel (values as arrays in registers) or stream (streams of "
           "words through FIFOs); default: the folding chooses a Dense's, Conv's or max pooling's by cost (the "
           "faster, or as fast with fewer resources), other units stream spatial data", metavar="NODE=T",
           per_node=True, written=lambda value: value.removeprefix("io_")),
    Option("band_rows", "band_rows", positive_int, "folding and memory", "run the FPGA execution unit holding ONNX "
           "node NODE band by band, R of its output rows a band (repeatable): its hls4ml layer is made for one band "
           "(the kernel's halo rows above and below it), the top copies each band in from the unit's input buffer and "
           "out to its output buffer, which may then sit in DDR; for units starting with a 2-D Conv or MaxPool",
           metavar="NODE=R", per_node=True),
    Option("table_sizes", "table_size", table_size, "precision and verification", "entries of each lookup table "
           "(hls4ml's TableSize) of the FPGA execution unit holding ONNX node NODE, a Softmax or a table activation "
           "(Sigmoid, Tanh, Softsign, Softplus, Elu, Selu), or a layer such a node is fused into (repeatable; a power "
           f"of two from {TABLE_SIZES[0]} to {TABLE_SIZES[-1]}; default {LOOKUP_TABLE_SIZE}; hls4ml's own: 1024)",
           metavar="NODE=N", per_node=True),
    Option("target_rate", "target_rate", rate, "folding and memory", "samples per second the FPGA must sustain on "
           "a stream of --batch samples a call: its units folded to the fewest resources that reach N (FINN's "
           "target_fps); default: folded to the least latency that fits", metavar="N"),
    Option("weights_in_ddr", "weights_in_ddr", flag, "folding and memory", "keep the weights of the FPGA execution "
           "unit holding ONNX node NODE in DDR, read on every run, instead of on chip (repeatable); units whose "
           "weights overflow the BRAM go there anyway", metavar="NODE", per_node=True),
    Option("memory_strategy", "memory_strategy", choice(MEMORY_STRATEGIES), "folding and memory", "how FPGA buffers "
           "share memory: refcount (the seed's block reuse), greedy (offsets, largest first, best-fit gaps), "
           "fastest (no reuse); auto (default): the smallest footprint", choices=MEMORY_STRATEGIES),
    Option("relative_tolerance", "tolerance", fraction, "precision and verification", "allowed max abs error per "
           "output, as a fraction of that output's peak magnitude; default: --error-budget's, else 0.05",
           scope="building", metavar="F"),
    Option("cache", "cache", text, "building", "the build cache: hls4ml conversions and compiled C-simulation "
           "libraries, reused when nothing that determines them changed (default: $XDG_CACHE_HOME/hetdeploy or "
           "~/.cache/hetdeploy)", scope="building", metavar="DIR", path=True),
    Option("cache_limit", "cache_limit", parse_size, "building", f"the most the cache keeps, as 5G or 500M: past it "
           f"the least recently used entries go (default: ${LIMIT_VARIABLE}, else 5G); 'hetdeploy cache' shows it",
           scope="building", metavar="SIZE"),
    Option("synth", "synth", flag, "building", "then run HLS synthesis and the Vivado block design to a bitstream "
           "when vitis_hls/vivado_hls and vivado are on PATH; otherwise say how to run them (exit 4)", scope="build"),
    Option("open_synth", "open_synth", flag, "building", "also each FPGA execution unit's arithmetic as Verilog by "
           "da4ml in DIR/rtl/, simulated by Icarus Verilog against the unit's C-simulation bit for bit and "
           "synthesised by Yosys for the board's family (the open-synth extra, and yosys and iverilog on PATH)",
           scope="build"),
)
_TOP_LEVEL = {o.key: o for o in OPTIONS if not o.per_node}  # a config file's keys
_PER_NODE = {o.key: o for o in OPTIONS if o.per_node}  # its keys under nodes.NODE


# ------------------------------------------------------------------ the file

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
        if key not in _TOP_LEVEL:
            source.fail(str(key), f"unknown key; expected one of: {', '.join([*_TOP_LEVEL, 'nodes'])}")
        option = _TOP_LEVEL[key]
        if value is None:  # the option's default; for the cache, none
            if key == "cache":
                options[option.field] = None
            continue
        options[option.field] = _checked(option.check, value, source, key)
        options.setdefault("origins", {})[f"{option.flag} "] = (f"{path}: line {source.lines[key]}: {key}",
                                                                 options[option.field])
        if option.path:
            options[option.field] = base / Path(options[option.field]).expanduser()
    nodes = data.get("nodes") or {}
    if not isinstance(nodes, dict):
        source.fail("nodes", "expected a mapping of ONNX node name to its settings")
    for node, settings in nodes.items():
        where = f"nodes.{node}"
        if not isinstance(settings, dict):
            source.fail(where, f"expected a mapping of {', '.join(_PER_NODE)}")
        for key, value in settings.items():
            if key not in _PER_NODE:
                source.fail(f"{where}.{key}", f"unknown key; expected one of: {', '.join(_PER_NODE)}")
            option = _PER_NODE[key]
            value = _checked(option.check, value, source, f"{where}.{key}")
            options.setdefault("origins", {})[f"{option.flag} {node}"] = (
                f"{path}: line {source.lines[f'{where}.{key}']}: {where}.{key}", None if option.listed else value)
            if not option.listed:
                options.setdefault(option.field, {})[str(node)] = value
            elif value:
                options.setdefault(option.field, []).append(str(node))
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
    """``options`` (from the CLI, a config file or the Python API) checked before any work, each value
    in its checked form (the API's precision "ap_fixed<8,3>" as (8, 3)), with the defaults that follow
    others filled (the tolerance follows the error budget)."""
    if options.relative_tolerance is None:
        options = replace(options, relative_tolerance=options.error_budget or DEFAULT_TOLERANCE)
    settled = {}
    for option in OPTIONS:
        value = getattr(options, option.field)
        if option.per_node and isinstance(value, dict):
            settled[option.field] = {node: _check_option(option.check, setting, f"{option.key.replace('_', ' ')} of "
                                                                                  f"node '{node}'")
                                     for node, setting in value.items()}
        elif not option.per_node and value is not None and not option.path:
            settled[option.field] = _check_option(option.check, value, f"option {option.field}")
    return replace(options, **settled)


def resolved_config(options: BuildOptions) -> dict[str, Any]:
    """Every option of a build, defaults included, in the config file's form (plan.json ``config``)."""
    config: dict[str, Any] = {}
    for option in _TOP_LEVEL.values():
        value = getattr(options, option.field)
        config[option.key] = str(Path(value).resolve()) if option.path and value is not None else value
    nodes: dict[str, dict[str, Any]] = {}
    for option in _PER_NODE.values():
        settings = getattr(options, option.field)
        for node in settings:
            nodes.setdefault(node, {})[option.key] = True if option.listed else option.written(settings[node])
    config["nodes"] = {node: nodes[node] for node in sorted(nodes)}
    return config


def config_yaml(config: dict[str, Any], header: str) -> str:
    """``config`` as a YAML file, ``header`` as its opening comment."""
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    return comment + yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
