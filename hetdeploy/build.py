"""The build pipeline, top to bottom: an ordered list of named steps over one state ``STEPS``, as
FINN's build_dataflow_steps are.

    load_model -> load_board -> search_widths -> partition            PLAN_STEPS: hetdeploy plan
    -> write_subfunctions -> unit_widths -> generate_hls -> verify -> package

The progress numbers come from the list; a unit out of tolerance in ``verify`` is widened and the
list runs again from ``unit_widths`` ``RerunFrom``. The writing steps write into a staging folder
of the build's own beside the destination, moved into place only when every step passed, so a
failed build leaves nothing that looks complete; a failed build is kept as DIR.failed, with its
logs. One build at a time writes to a destination a lock beside it.
"""

from __future__ import annotations

import dataclasses
import difflib
import shutil
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import onnx

from . import budget, memory, rewrites, runtime, units, verify
from .precision import node_widths
from .board import Board, load_board
from .config import BuildOptions, resolved_config, said, settle_options
from .board_runtime import resource_of
from .cost import stream_seconds
from .cache import BuildCache, digest, toolchain
from .deploy import check_package, synthesize, write_package
from .errors import UserError, VerificationError
from .graph import QONNX_DOMAINS
from .model import QUANTIZER_OPS, LoadedModel, load_model
from .ort_adapter import open_model, run_in_memory
from .partition import partition_graph
from .plan_text import empty_fpga_note
from .plan import (Calibration, ExecutionUnit, FpgaFallback, FpgaResources, Plan, PlanEstimate, PrecisionSearch,
                   Subfunction, SubfunctionEstimate, Widening)
from .samples import VERIFICATION, edge_sample, hold_out, input_ranges, load_samples, random_samples
from .subgraph import extract
from .progress import Progress, Reporter, stderr_progress
from .output import check_output, output_lock, staging
from .fpga import generate_hls, verify_csim

# Chaining the subfunctions on onnxruntime must reproduce the model; only
# float reassociation inside onnxruntime's kernels may differ.
CHAIN_TOLERANCE = 1e-5


@dataclasses.dataclass
class BuildState:
    """What the steps of a build hand on, each step reading some of it and setting more."""

    options: BuildOptions
    note: Callable[[str], None]  # what intake changed that the user should hear of
    progress: Optional[Reporter] = None  # a build's reporting (planning alone has none)
    loaded: Optional[LoadedModel] = None
    board: Optional[Board] = None
    samples: Optional[BuildSamples] = None  # loaded while planning when it needs them, else by the build
    search: Optional[PrecisionSearch] = None
    plan: Optional[Plan] = None
    build_dir: Optional[Path] = None  # the staging folder the build writes into
    cache: Optional[BuildCache] = None
    unit_widths: dict[str, int] = dataclasses.field(default_factory=dict)  # FPGA unit -> its bits
    emulated: Optional[list] = None  # the pipeline's outputs on the verification samples, C-simulated


@dataclasses.dataclass(frozen=True)
class Step:
    """One named step of a build: ``run`` takes the state to the next; ``says`` is its progress line."""

    name: str
    run: Callable[[BuildState], BuildState]
    says: Callable[[BuildState], str]


class RerunFrom(Exception):
    """Raised by a step to run the list again from the step named ``step`` (a widened unit: its
    folding, HLS and check anew)."""

    def __init__(self, step: str):
        super().__init__(step)
        self.step = step


def run_steps(steps: list[Step], state: BuildState, announce: Callable[[int, str], None], first: int = 0
              ) -> BuildState:
    """``steps`` in order over ``state``; ``announce(number, line)`` before each (``first`` + its index +
    1), again before a step that a ``RerunFrom`` names."""
    names = [s.name for s in steps]
    k = 0
    while k < len(steps):
        announce(first + k + 1, steps[k].says(state))
        try:
            state = steps[k].run(state)
        except RerunFrom as again:
            k = names.index(again.step)
            continue
        k += 1
    return state


def build(options: BuildOptions, progress: Progress = stderr_progress, verbose: bool = False) -> Plan:
    """Every step (``STEPS``) into ``options.out_dir``. ``progress`` gets each line to show (the default
    prints it to stderr and draws progress bars on long steps); ``verbose``: each unit's line too."""
    started = time.monotonic()
    progress = Reporter(progress, verbose, bars=progress is stderr_progress)
    last = [0, started]  # the step running and when it began

    def announce(k: int, what: str) -> None:
        now = time.monotonic()
        if last[0]:  # the step before ends with its own time, under its own lines
            progress(f"      step {last[0]} took {now - last[1]:.1f} s")
        last[:] = [k, now]
        progress(f"[{k}/{len(STEPS)}] {what}")

    check_output(Path(options.out_dir))  # before any work
    if (Path(options.out_dir) / "plan.json").is_file():
        progress(f"      {options.out_dir} holds an earlier build: this one replaces it once complete (if this one "
                 f"fails, it stays as it is)")
    state = BuildState(options, lambda note: progress(f"      {note}"), progress)
    with output_lock(Path(options.out_dir)):
        state = run_steps(PLAN_STEPS, state, announce)
        note = empty_fpga_note(state.plan, state.board)
        if note:
            progress(f"      {note}")
        with staging(options.out_dir, progress.log) as state.build_dir:
            state = run_steps(WRITE_STEPS, state, announce, first=len(PLAN_STEPS))
    progress(f"      step {last[0]} took {time.monotonic() - last[1]:.1f} s")
    progress(f"built {options.out_dir} in {time.monotonic() - started:.1f} s")
    if options.synth:
        progress(synthesize(state.plan, options.out_dir, progress))
    return state.plan


def plan_stages(options: BuildOptions, step: Callable[[int, str], None],
                note: Callable[[str], None] = lambda line: None) -> tuple[LoadedModel, Board, Plan]:
    """``PLAN_STEPS``, which ``hetdeploy plan`` runs on their own: (the model, the board, the plan);
    ``step`` gets each step's number and line, ``note`` what intake changed that the user should hear
    of (a symbolic batch axis fixed to 1)."""
    state = run_steps(PLAN_STEPS, BuildState(options, note), step)
    return state.loaded, state.board, state.plan


def _load_model(state: BuildState) -> BuildState:
    settle_options(state.options)
    state.loaded = load_model(state.options.model)
    for line in state.loaded.notes:
        state.note(line)
    return state


def _load_board(state: BuildState) -> BuildState:
    options = state.options
    state.board = load_board(options.board)
    _model_node_names(options, state.loaded, state.board)
    # a sample file that is missing or of the wrong shape is a mistake now, for `plan` too, not at build time
    if options.calibration or options.verify_input or options.error_budget is not None:
        state.samples = build_samples(options, state.loaded.inputs)
    return state


def _search_widths(state: BuildState) -> BuildState:
    if state.options.error_budget is not None:
        state.search = search_layer_widths(state.loaded, state.board, state.options, state.samples)
    return state


def _search_says(state: BuildState) -> str:
    if state.options.error_budget is None:
        return f"every FPGA layer at --width {state.options.width} bits, or its quantizer's (no --error-budget)"
    return f"searching the fewest bits per FPGA layer within a relative error of {state.options.error_budget:g}"


def _partition(state: BuildState) -> BuildState:
    loaded, board, options = state.loaded, state.board, state.options
    plan = folded_plan(loaded, board, options)
    if options.policy == "support":  # its own figure: the board holds it, folded
        plan.estimate.support_latency_s, plan.estimate.support_fits = plan.estimate.latency_s, True
    else:
        plan = against_baselines(plan, loaded, board, options)
    plan.precision_search = state.search
    plan.node_map = map_nodes(plan, loaded)
    state.plan = plan
    return state


def _write_subfunctions(state: BuildState) -> BuildState:
    options, plan = state.options, state.plan
    state.samples = state.samples or build_samples(options, plan.inputs)
    plan.calibration = state.samples.calibration
    write_subfunctions(plan, state.loaded, state.build_dir, state.samples.sizing[0])
    state.progress(_calibration_note(plan.calibration, options.seed))
    state.cache = BuildCache(options.cache, options.cache_limit) if options.cache is not None else None
    return state


def _fpga(plan: Plan) -> list[Subfunction]:
    return [s for s in plan.subfunctions if s.kind == "fpga"]


def _unit_widths(state: BuildState) -> BuildState:
    """Each unit's bits where no quantizer sets them: --width's or the search's, more once widened;
    after a widening, the units folded anew (the wider take more) and their HLS cleared."""
    loaded, plan = state.loaded, state.plan
    if state.unit_widths:  # a re-run after ``_verify``'s widening
        fold_units(plan, loaded, state.board, state.options)
        for sub in _fpga(plan):
            shutil.rmtree(state.build_dir / "hls" / sub.name, ignore_errors=True)
            shutil.rmtree(state.build_dir / "subfunctions" / sub.name, ignore_errors=True)
    index = loaded.graph.node_index()
    state.unit_widths = {u.name: loaded.graph.nodes[index[u.nodes[0]]].width or state.options.width
                         for s in _fpga(plan) for u in s.execution_units}
    return state


def _generate_hls(state: BuildState) -> BuildState:
    generate_hls(state.plan, state.loaded, state.board, state.options, state.build_dir, state.samples.sizing,
                 state.progress, state.unit_widths, state.cache)
    return state


def _verify(state: BuildState) -> BuildState:
    """The C-simulation against onnxruntime; a unit out of tolerance widened (``_widen``) and the build
    run again from its unit widths, or the failure raised where none can widen."""
    plan = state.plan
    try:
        state.emulated = verify_csim(plan, state.build_dir, state.samples.verification, state.progress)
    except VerificationError as err:
        widened = _widen(plan, err, state.unit_widths, state.options.precisions, state.progress)
        if not widened:
            raise
        index = state.loaded.graph.node_index()
        for unit in (u for s in _fpga(plan) for u in s.execution_units if u.name in widened):
            for node in unit.nodes:
                state.loaded.graph.nodes[index[node]].width = state.unit_widths[unit.name]
        raise RerunFrom("unit_widths") from None
    return state


def _package(state: BuildState) -> BuildState:
    plan, stage_dir, progress, cache = state.plan, state.build_dir, state.progress, state.cache
    write_package(plan, state.board, stage_dir)
    plan.save(stage_dir / "plan.json")
    shutil.copy(stage_dir / "plan.json", stage_dir / "deploy" / "plan.json")
    check_package(plan, stage_dir, state.samples.verification, state.emulated)
    progress(f"      deploy/run.py --emulate, run as on the board (no hetdeploy, onnx, qonnx or hls4ml): the "
             f"build's outputs on its {len(state.samples.verification)} verification samples")
    _write_report(plan, stage_dir, cache)
    if cache is not None:
        cache.evict()  # once, now that this build stored what it made: past its limit, the least recently used
        moved = sum(u.hls is None for s in _fpga(plan) for u in s.execution_units)  # the top moves them: no hls4ml
        progress.detail(f"      from the build cache {state.options.cache}: {cache.summary()}" +
                        (f" ({moved} unit{'s' if moved > 1 else ''} moved by the top, not converted)"
                         if moved else ""))
    return state


# The build, step by step: ``hetdeploy plan`` runs PLAN_STEPS; ``hetdeploy build`` all of STEPS, the
# writing steps in a staging folder moved into place when the last is done.
PLAN_STEPS = [
    Step("load_model", _load_model, lambda s: f"loading model {s.options.model}"),
    Step("load_board", _load_board, lambda s: f"loading board {s.options.board}"),
    Step("search_widths", _search_widths, _search_says),
    Step("partition", _partition, lambda s: f"partitioning ({s.options.policy} policy) and folding FPGA execution "
                                            f"units"),
]
WRITE_STEPS = [
    Step("write_subfunctions", _write_subfunctions, lambda s: f"writing {len(s.plan.subfunctions)} subfunction "
                                                              f"models"),
    Step("unit_widths", _unit_widths, lambda s: "settling each FPGA unit's bits" +
         (" (widened: folded anew)" if s.unit_widths else "")),
    Step("generate_hls", _generate_hls, lambda s: f"generating HLS through hls4ml for {len(_fpga(s.plan))} FPGA "
                                                  f"subfunction(s)"),
    Step("verify", _verify, lambda s: f"verifying in C-simulation against onnxruntime on "
                                      f"{len(s.samples.verification)} samples it did not size on"),
    Step("package", _package, lambda s: f"writing the deployment package and {s.options.out_dir}"),
]
STEPS = PLAN_STEPS + WRITE_STEPS


def _write_report(plan: Plan, build_dir: Path, cache: Optional[BuildCache]) -> None:
    """report.html, drawn from plan.json and the model alone: the cache keeps it under their bytes
    (drawing it, and importing matplotlib, cost a second)."""
    key = digest((build_dir / "plan.json").read_bytes(), (build_dir / plan.model).read_bytes(), toolchain())
    if cache is not None and cache.fetch("report", key, build_dir) is not None:
        return
    from .report import write_report

    write_report(build_dir)
    if cache is not None:
        cache.store("report", key, build_dir, [build_dir / "report.html"], {})


# Automatic widening of a unit out of tolerance: this many bits at a time (one under
# --error-budget), up to MAX_WIDTH.
WIDEN_STEP, MAX_WIDTH = 4, 32


def _widen(plan: Plan, failure: VerificationError, unit_widths: dict[str, int],
           precisions: dict[str, tuple[int, int]], progress: Progress) -> list[str]:
    """Give each execution unit that ``failure`` names, and the units writing its inputs,
    WIDEN_STEP more bits (one under --error-budget; up to MAX_WIDTH) and
    record it in the plan; returns those widened (none: the failure is not a unit's, or none can
    widen). Units with a node in ``precisions`` (--precision) keep theirs."""
    widened = []
    pinned = {u.name for s in plan.subfunctions for u in s.execution_units if set(u.nodes) & precisions.keys()}
    for name, why in _with_writers_of_inputs(plan, failure.units):
        before = unit_widths[name]
        if before >= MAX_WIDTH or name in pinned:  # --precision is the user's word
            continue
        # the search's widths missed only by what its simulation leaves out: a bit at a time
        unit_widths[name] = min(MAX_WIDTH, before + (1 if plan.precision_search else WIDEN_STEP))
        plan.widened.append(Widening(name, before, unit_widths[name], why))
        progress(f"      widening {name} from {before} to {unit_widths[name]} bits: {why}")
        widened.append(name)
    return widened


def _with_writers_of_inputs(plan: Plan, failed: list) -> list[tuple[str, str]]:
    """(unit, why) for each failed unit check, and before each the units that write its inputs: the
    data units (Flatten, Reshape, ...: moved by the top, no logic) that carry them and the unit that
    computes them. A value rounded there to their width, say one near a binary quantizer's threshold,
    stays rounded however wide the unit after them grows."""
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    writer = {t: u for u in units.values() for t in u.outputs}
    chosen: dict[str, str] = {}
    for check in failed:
        why = check.problem() if not check.passed else "its subfunction's outputs are out of tolerance"
        tensors = list(units[check.name].inputs) if check.name in units else []
        while tensors:
            source = writer.get(tensors.pop())
            if source is None or source.name in chosen:
                continue
            chosen[source.name] = f"it writes the input of {check.name}"
            if source.pe == "data":
                tensors.extend(source.inputs)
        chosen[check.name] = why
    return list(chosen.items())


@dataclasses.dataclass
class BuildSamples:
    """What a build sizes its fixed-point types on and what it verifies on: never the same samples."""

    sizing: list[dict[str, np.ndarray]]
    verification: list[dict[str, np.ndarray]]
    held_out: list[int]  # the --calibration samples verified on (their indices), when held out of it
    calibration: Calibration


def build_samples(options: BuildOptions, specs) -> BuildSamples:
    """--calibration's samples less a held-out quarter (``samples.hold_out``), which verification
    takes, or all of them when --verify-input gives those; without --calibration, --samples random
    ones (stream SIZING of --seed), verified on as many of another stream (VERIFICATION) and one
    stretched onto the edges of the sized ranges (``samples.edge_sample``)."""
    held: list[int] = []
    if options.calibration:
        given = load_samples(options.calibration, specs)
        name = Path(options.calibration).name
        if options.verify_input:
            sizing, verification = given, load_samples(options.verify_input, specs)
            where = f"the {len(verification)} samples of {Path(options.verify_input).name}"
        elif len(given) < 2:
            raise UserError(f"{options.calibration}: holds one sample; a build sizes its types on some samples and "
                            f"verifies on others: give two or more (a quarter are held out) or --verify-input Y.npy")
        else:
            sizing, held = hold_out(given, options.seed)
            verification = [given[i] for i in held]
            where = f"{len(held)} of the {len(given)} samples of {name}, held out (never sized on)"
        return BuildSamples(sizing, verification, held,
                            Calibration("file", len(sizing), name, input_ranges(sizing), len(verification), where))
    sizing = random_samples(specs, options.samples, options.seed)
    ranges = input_ranges(sizing)
    if options.verify_input:
        verification = load_samples(options.verify_input, specs)
        where = f"the {len(verification)} samples of {Path(options.verify_input).name}"
    else:
        verification = random_samples(specs, options.samples, options.seed, VERIFICATION)
        where = f"{len(verification)} other synthetic samples (seed {options.seed}, another stream)"
        if any(s.dtype.startswith("float") for s in specs):
            verification.append(edge_sample(verification[0], ranges))
            where += " and 1 stretched onto the edges of the sized ranges"
    return BuildSamples(sizing, verification, held,
                        Calibration("synthetic", len(sizing), "", ranges, len(verification), where))


def _calibration_note(calibration: Calibration, seed: int) -> str:
    """Where the FPGA's fixed-point ranges come from, said plainly (synthetic data is a guess), and
    what the build verifies on."""
    ranges = ", ".join(f"'{name}' {low:.3g} to {high:.3g}" for name, (low, high) in calibration.input_ranges.items())
    verified = f"; verified on {calibration.verification}"
    if calibration.source == "file":
        return f"      precision sized on {calibration.samples} samples of {calibration.file}: {ranges}{verified}"
    return (f"      precision sized on {calibration.samples} SYNTHETIC N(0, 1) samples (seed {seed}), not on your "
            f"data: it assumes inputs like {ranges}; pass --calibration X.npy with real inputs{verified}")


def folded_plan(loaded: LoadedModel, board: Board, options: BuildOptions) -> Plan:
    """The partition by ``options.policy``, its FPGA units folded together and their memory planned,
    its estimate from the folded units' cycles (``fpga_times``)."""
    plan = partition(loaded, board, options)
    fold_units(plan, loaded, board, options)
    index = loaded.graph.node_index()
    memory.plan_memory(plan, loaded.graph, loaded.tensor_shapes(), board, options.memory_strategy, options.width,
                       options.batch, lambda t: units.element_bytes(options.width),
                       lambda u: units.element_bytes(options.width) * sum(loaded.graph.nodes[index[n]].constant_elements
                                                                          for n in u.nodes))
    fpga_times(plan, board)
    return plan


def against_baselines(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions) -> Plan:
    """The latency policy's plan beside the support policy's and all on the host, each folded and
    estimated alike (the partitioner prices each FPGA node at the least folding that fits the FPGA
    alone; folding the units together can cost more, or fit with weights in DDR what it could not):
    the support figure the plan reports is that plan's own, as `plan --policy support` prints it, and
    under the latency objective the latency policy takes the support plan, or everything on the host,
    where that is faster, so it is never estimated slower than either. Where the support plan cannot
    be folded to fit, the partitioner's figure stays, marked as not fitting."""
    support = _folded_or_none(loaded, board, options, "support")
    if support is not None:
        plan.estimate.support_latency_s, plan.estimate.support_fits = support.estimate.latency_s, True
    if options.objective != "latency":
        return plan
    host = None
    if plan.estimate.all_cpu_latency_s is not None and plan.estimate.all_cpu_latency_s < plan.estimate.latency_s \
            and all(n.device in (None, board.host) for n in loaded.graph.nodes):
        host = _folded_or_none(loaded, board, options, "host")
    best = min((p for p in (plan, support, host) if p is not None), key=lambda p: p.estimate.latency_s)
    if best is not plan:
        best.policy, best.config = plan.policy, plan.config  # the latency policy's choice, as asked
        best.estimate.support_latency_s = plan.estimate.support_latency_s
        best.estimate.support_fits = plan.estimate.support_fits
    return best


def _folded_or_none(loaded: LoadedModel, board: Board, options: BuildOptions, policy: str) -> Optional[Plan]:
    """``folded_plan`` by ``policy``, or None where it cannot be had: it does not fit even fully
    folded, or a setting of the user's (a pin, a reuse factor) names a node it does not put on an FPGA."""
    try:
        return folded_plan(loaded, board, dataclasses.replace(options, policy=policy))
    except UserError:
        return None


def _model_node_names(options: BuildOptions, loaded: LoadedModel, board: Board) -> None:
    """Every per-node setting of ``options`` renamed, in place, as the normalised graph names its node
    (a node intake folded into another, say a BatchNormalization into its Conv, stands for that
    one); the device pins set on the graph's nodes."""
    index = loaded.graph.node_index()

    def node(flag: str, name: str, value=None) -> str:
        found = name if name in index else loaded.traced.get(name)
        if found not in index:
            near = difflib.get_close_matches(name, list(index), n=1)
            raise UserError(f"{said(options, flag, name, value, flag)}: the model has no node '{name}'" +
                            (f"; did you mean '{near[0]}'?" if near else " ('hetdeploy plan --nodes' lists them)"))
        if found != name and f"{flag} {name}" in options.origins:  # its config file line follows it
            options.origins[f"{flag} {found}"] = options.origins[f"{flag} {name}"]
        return found

    devices = {d.name for d in board.devices}
    for name, device in options.devices.items():
        if device not in devices:
            setting = said(options, "--device", name, device, f"--device {name}={device}")
            raise UserError(f"{setting}: board {board.name} has no device "
                            f"'{device}' (it has {', '.join(sorted(devices))})")
        loaded.graph.nodes[index[node("--device", name, device)]].device = device
    options.reuse_factors = {node("--reuse-factor", n, v): v for n, v in options.reuse_factors.items()}
    options.weights_in_ddr = [node("--weights-in-ddr", n) for n in options.weights_in_ddr]
    options.precisions = {node("--precision", n, v): v for n, v in options.precisions.items()}
    options.devices = {node("--device", n, v): v for n, v in options.devices.items()}


def search_layer_widths(loaded: LoadedModel, board: Board, options: BuildOptions,
                        samples: BuildSamples) -> PrecisionSearch:
    """--error-budget: the fewest bits for each layer an FPGA of the board could run that keep the
    simulated fixed-point model within the budget on the calibration samples (``budget.py``); the
    widths go onto the graph's nodes, which the partitioner, folding and HLS generation read."""
    if any(n.op in QUANTIZER_OPS for n in loaded.graph.nodes):
        raise UserError("--error-budget: the model is quantized already; its quantizers set the FPGA's precisions")
    fpgas = [d for d in board.devices if d.kind == "fpga"]
    if not fpgas:
        raise UserError(f"--error-budget: board {board.name} has no FPGA, which is what the budget sizes")
    fpga = fpgas[0]
    groups = budget.layer_groups(loaded.graph, lambda i: fpga.why_not(loaded.graph.nodes[i]) is None, fpga)
    feeds = [runtime.model_feeds(loaded.input_reshapes, sample) for sample in samples.sizing]
    error = budget.error_function(loaded.model, groups, feeds, run_in_memory)
    result = budget.search_widths(list(groups), budget.weighted_cost(loaded.graph, groups), error,
                                  options.error_budget, options.width)
    if result.error > options.error_budget:
        raise UserError(f"--error-budget {options.error_budget:g}: even at --width {options.width} bits the "
                        f"simulated relative error is {result.error:.3g}; give a larger budget or --width")
    chosen = budget.chosen_node_widths(groups, result)
    for node in loaded.graph.nodes:
        node.width = chosen.get(node.name)
    return PrecisionSearch(options.error_budget, result.error, result.evaluations, len(samples.sizing), result.widths)


def map_nodes(plan: Plan, loaded: LoadedModel) -> dict[str, dict[str, str]]:
    """Where every node of the user's model went (plan.json's ``node_map``)."""
    place: dict[str, dict[str, str]] = {}
    for sub in plan.subfunctions:
        for name in sub.nodes:
            place[name] = {"subfunction": sub.name}
        for unit in sub.execution_units:
            for name in unit.nodes:
                place[name]["unit"] = unit.name
    result = {}
    for name, target in loaded.traced.items():
        if target is None:
            result[name] = {"removed": "its result reaches no output"}
        elif target == name and name in place:
            result[name] = place[name]
        else:  # folded into another node (or into the input, for an absorbed leading Reshape)
            result[name] = {"folded_into": target, **place.get(target, {})}
    return result


def fpga_times(plan: Plan, board: Board) -> None:
    """Each FPGA subfunction's compute time becomes the sum of its folded units' cycles at the FPGA's
    clock (what the partitioner priced each node at, folded as the chip's units share it), and the
    DDR traffic of its spilled buffers adds to its transfers; the plan's estimate follows, so it
    equals the sum of its tables."""
    for sub in plan.subfunctions:
        if sub.kind != "fpga" or sub.estimate is None:
            continue
        clock_hz = board.device(sub.device).clock_mhz * 1e6
        for unit in sub.execution_units:
            unit.rate_per_s = clock_hz / max(1, unit.estimate["latency_cycles"])
        compute = sum(u.estimate["latency_cycles"] for u in sub.execution_units) / clock_hz
        spilled = sub.memory.ddr_transfer_s if sub.memory is not None else 0.0
        change = compute - sub.estimate.compute_s + spilled
        sub.estimate.compute_s = compute
        sub.estimate.transfer_s += spilled
        sub.estimate.latency_s += change
        sub.estimate.batch_s += plan.estimate.batch * change
        plan.estimate.latency_s += change
    plan.estimate.throughput_per_s = 1.0 / stream_seconds(
        [(s.estimate.resource, s.estimate.batch_s) for s in plan.subfunctions], plan.estimate.batch)


def partition(loaded: LoadedModel, board: Board, options: BuildOptions) -> Plan:
    result = partition_graph(loaded.graph, board, options.policy, options.width, options.objective, options.batch)
    kinds = {d.name: d.kind for d in board.devices}
    subfunctions = [
        Subfunction(c.name, c.device, kinds[c.device], c.nodes, c.inputs, c.outputs,
                    estimate=SubfunctionEstimate(e.total_s, e.compute_s, e.transfer_s, e.overhead_s,
                                                 e.in_bytes, e.out_bytes, batch_s,
                                                 resource_of(kinds[c.device], c.device, c.name)))
        for c, e, batch_s in zip(result.cuts, result.costs, result.batch_seconds)
    ]
    return Plan(
        board=board.name,
        model="model.onnx",
        source_model=options.model.name,
        inputs=loaded.inputs,
        outputs=loaded.outputs,
        subfunctions=subfunctions,
        policy=options.policy,
        estimate=PlanEstimate(result.latency_s, result.all_host_latency_s, result.support_latency_s,
                              result.support_fits, options.objective, options.batch, 1.0 / result.stream_s,
                              1.0 / result.all_host_stream_s if result.all_host_stream_s else None),
        fpga_fallbacks=[FpgaFallback(loaded.graph.nodes[i].name, device, fpga, reason, detail)
                        for i, device, fpga, reason, detail in result.fpga_fallbacks],
        input_reshapes=loaded.input_reshapes,
        relative_tolerance=options.relative_tolerance,
        seed=options.seed,
        width=options.width,
        config=resolved_config(options),
    )


def fold_units(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions) -> None:
    """Split each FPGA subfunction into execution units and fold all the units of one FPGA
    together into its budget (the partitioner only gives an FPGA what fits it fully folded)."""
    index = loaded.graph.node_index()
    where = {n: s.device for s in plan.subfunctions for n in s.nodes}
    for flag, nodes in (("--reuse-factor", options.reuse_factors), ("--weights-in-ddr", options.weights_in_ddr),
                        ("--precision", options.precisions)):
        for node in nodes:  # named as the graph names them (_model_node_names)
            if board.device(where[node]).kind != "fpga":
                value = nodes[node] if isinstance(nodes, dict) else None
                raise UserError(f"{said(options, flag, node, value, flag)}: node '{node}' runs on {where[node]}, "
                                f"not on an FPGA")
    for device in (d for d in board.devices if d.kind == "fpga"):
        subs = [s for s in plan.subfunctions if s.device == device.name]
        split = [(sub, units.split_units(loaded.graph, [index[n] for n in sub.nodes], device, set(sub.outputs)))
                 for sub in subs]
        found = [u for _, units_of_sub in split for u in units_of_sub]
        shapes = [units.unit_shape(loaded.graph, u) for u in found]
        rate = units.ddr_bytes_per_cycle(device)
        widths = [_pinned_precision(loaded, u, options)[0] for u in found]
        pinned = {k: folding for k, (u, shape) in enumerate(zip(found, shapes))
                  if (folding := _pinned_folding(loaded, u, shape, options, rate)) is not None}
        if options.target_rate is not None:  # the fewest resources that reach the rate (FINN's target_fps)
            groups, start = [], 0
            for _, units_of_sub in split:
                groups.append(range(start, start + len(units_of_sub)))
                start += len(units_of_sub)
            cycles = [_cycles_for_rate(sub, options, device.clock_mhz) for sub in subs]
            foldings = units.fold_for_rate(shapes, device.budget(), widths, groups, cycles, pinned, rate)
        else:
            foldings = units.fold(shapes, device.budget(), widths, pinned, rate)
        if foldings is None:  # pinned foldings, or the support policy (which does not weigh capacity)
            folded = [units.folded_estimate(s, pinned.get(k) or units.folding_options(s, widths[k], rate)[-1],
                                            widths[k], rate) for k, s in enumerate(shapes)]
            over = [f"{k.upper()} {sum(e[k] for e in folded)} > {device.budget()[k]}" for k in units.RESOURCES
                    if sum(e[k] for e in folded) > device.budget()[k]]
            if pinned:
                raise UserError(f"the FPGA units do not fit {device.name} with the foldings given by "
                                f"--reuse-factor, --model-reuse-factor and --weights-in-ddr, even with every other unit fully folded "
                                f"({', '.join(over)})")
            raise UserError(f"the {options.policy} policy gives {device.name} more than it holds even fully "
                            f"folded ({', '.join(over)}); the latency policy moves what does not fit elsewhere")
        chip_budget = {k: device.budget().get(k, 0) for k in units.RESOURCES}
        budget = chip_budget | {"latency_cycles": None}
        choices = iter(zip(shapes, foldings, widths))
        for sub, units_of_sub in split:
            sub.execution_units = []
            for k, unit in enumerate(units_of_sub):
                shape, folding, width = next(choices)
                sub.execution_units.append(ExecutionUnit(
                    name=f"{sub.name}_u{k}", nodes=[loaded.graph.nodes[i].name for i in unit.nodes], pe=unit.pe,
                    reuse_factor=folding.reuse_factor,
                    # weights in DDR are read a bank at a time, never partitioned into registers
                    strategy="Resource" if folding.weights_in_ddr else units.strategy_for(folding.reuse_factor),
                    precision=_unit_precision(loaded, unit, options),
                    estimate=units.folded_estimate(shape, folding, width, rate),
                    weights_in_ddr=folding.weights_in_ddr, foldable=shape.kind == "kernel", inputs=unit.inputs,
                    outputs=[unit.output]))
            sub.resources = _unit_totals(sub)
            sub.budget = budget
        if not subs:
            continue
        plan.fpga_resources[device.name] = FpgaResources(
            [s.name for s in subs], {k: sum(s.resources[k] for s in subs) for k in units.RESOURCES},
            chip_budget, {k: device.resources.get(k, 0) for k in units.RESOURCES})


def _cycles_for_rate(sub: Subfunction, options: BuildOptions, clock_mhz: float) -> float:
    """The cycles a sample that FPGA subfunction ``sub``'s units may take together for a stream of
    ``options.batch`` samples a call to reach ``options.target_rate``: a sample's share of the time
    less what its call overhead and transfers take (none left: 0, as fast as it goes)."""
    other_s = sub.estimate.batch_s / options.batch - sub.estimate.compute_s
    return max(0.0, 1.0 / options.target_rate - other_s) * clock_mhz * 1e6


def _unit_totals(sub: Subfunction) -> dict[str, int]:
    return {k: sum(u.estimate[k] for u in sub.execution_units) for k in (*units.RESOURCES, *units.CYCLES)}


def _pinned_precision(loaded: LoadedModel, unit: units.Unit, options: BuildOptions) -> tuple[int, Optional[int]]:
    """(bits, integer bits or None) of ``unit``'s values: --precision's for a node of it, else its
    quantizers' in a quantized model, else --width's."""
    given = [(n, options.precisions[n]) for n in (loaded.graph.nodes[i].name for i in unit.nodes)
             if n in options.precisions]
    if len(given) > 1:
        raise UserError(f"--precision: nodes '{given[0][0]}' and '{given[1][0]}' are one execution unit; "
                        f"give one of them")
    return given[0][1] if given else (node_widths(loaded.graph, options.width)[unit.nodes[0]], None)


def _unit_precision(loaded: LoadedModel, unit: units.Unit, options: BuildOptions) -> str:
    """The unit's output type as far as planning knows it (HLS generation sizes unpinned ones)."""
    width, integer = _pinned_precision(loaded, unit, options)
    return f"ap_fixed<{width},{6 if integer is None else integer}>"


def _pinned_folding(loaded: LoadedModel, unit: units.Unit, shape: units.Shape, options: BuildOptions,
                    rate: float) -> Optional[units.Folding]:
    """What --reuse-factor, --model-reuse-factor and --weights-in-ddr fix of ``unit``'s folding; None:
    nothing."""
    names = [loaded.graph.nodes[i].name for i in unit.nodes]
    in_ddr = [n for n in names if n in options.weights_in_ddr]
    given = [(n, options.reuse_factors[n]) for n in names if n in options.reuse_factors]
    if not given and not in_ddr and options.model_reuse_factor is not None and shape.kind == "kernel":
        valid = units.candidate_reuse_factors(shape)  # the nearest valid one, as hls4ml picks (ties: the smaller)
        return units.Folding(min(valid, key=lambda rf: (abs(rf - options.model_reuse_factor), rf)))
    if not given and not in_ddr:
        return None
    if len(given) > 1:
        raise UserError(f"--reuse-factor: nodes '{given[0][0]}' and '{given[1][0]}' are one execution unit; "
                        f"give one of them")
    if shape.kind != "kernel":
        flag, node, value = ("--reuse-factor", *given[0]) if given else ("--weights-in-ddr", in_ddr[0], None)
        raise UserError(f"{said(options, flag, node, value, flag)}: node '{node}' has no multiplications to fold and "
                        f"no weights to move (its unit runs on the {unit.pe} PE)")
    if not given:
        return units.folding_options(shape, options.width, rate)[-1]  # a kernel unit's last: weights in DDR
    node, rf = given[0]
    valid = units.candidate_reuse_factors(shape)
    if rf not in valid:
        setting = said(options, "--reuse-factor", node, rf, f"--reuse-factor {node}={rf}")
        raise UserError(f"{setting}: {rf} does not divide the layer ({shape.n_in} inputs x {shape.n_out} outputs = "
                        f"{shape.n_in * shape.n_out} products) as hls4ml requires; valid: {', '.join(map(str, valid))}")
    return units.Folding(rf, bool(in_ddr))


def write_subfunctions(plan: Plan, loaded: LoadedModel, build_dir: Path, sample: dict[str, np.ndarray]) -> None:
    """source.onnx (the reference), model.onnx (normalised) and one model per subfunction;
    then check that chaining them on onnxruntime reproduces the source model on ``sample`` (one of
    the user's inputs, or a synthetic one)."""
    onnx.save(loaded.source, str(build_dir / "source.onnx"))
    onnx.save(loaded.model, str(build_dir / plan.model))
    (build_dir / "subfunctions").mkdir()
    qdq = any(n.op_type == "QuantizeLinear" for n in loaded.source.graph.node)
    for sub in plan.subfunctions:
        sub.onnx = f"subfunctions/{sub.name}.onnx"
        model = extract(loaded.model, sub)
        if sub.kind != "fpga":  # the board runs it on onnxruntime alone; a QDQ model's pairs stay pairs
            rewrites.quantizers_as_standard_onnx(model, zero_points_as_qdq=qdq)
            left = next((n for n in model.graph.node if n.domain in QONNX_DOMAINS), None)
            if left is not None:
                raise UserError(f"node '{left.name}' ({left.op_type}) would run on {sub.device} (subfunction "
                                f"{sub.name}), where only qonnx runs it and the board has onnxruntime alone: put it "
                                f"on an FPGA that takes it (--device NODE=DEVICE) or export it as standard ONNX")
        onnx.save(model, str(build_dir / sub.onnx))
    chain = runtime.file_executors(build_dir, plan)
    source = open_model(build_dir / "source.onnx")
    # Intake's rewrites (a BatchNormalization folded into a convolution) reorder float arithmetic;
    # a quantizer after them turns a last-bit difference into one of its steps, now and then.
    quantized = any(n.op in QUANTIZER_OPS for n in loaded.graph.nodes)
    check = verify.SubfunctionCheck("chain", "pipeline", plan.relative_tolerance if quantized else CHAIN_TOLERANCE)
    got, want = runtime.run(plan, chain, sample), source.run(sample)
    check.add({t: got[t] for t in want}, want)
    if any(t.reference_nonfinite for t in check.tensors.values()):
        where = "a --calibration sample" if plan.calibration.source == "file" else "a random sample"
        raise UserError(f"the model on {where}: {check.problem()}")
    if not check.passed:
        raise RuntimeError(f"the subfunction chain on onnxruntime against the model: {check.problem()}")
