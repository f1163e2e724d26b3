"""The build pipeline, top to bottom: an ordered list of named steps over one state ``STEPS``, as
FINN's build_dataflow_steps are.

    load_model -> load_board -> search_widths -> partition            PLAN_STEPS: hetdeploy plan
    -> write_subfunctions -> unit_widths -> generate_hls -> verify -> open_synth -> package

The progress numbers come from the list. Two stretches of it repeat until the build settles (``FIXPOINTS``):
a unit out of tolerance in ``verify`` is widened, and ``unit_widths`` to ``verify`` run again at the new
widths until none widens; widened units that no longer fit send ``partition`` to ``unit_widths`` round again.
The writing steps write into a staging folder
of the build's own beside the destination, moved into place only when every step passed, so a
failed build leaves nothing that looks complete; a failed build is kept as DIR.failed, with its
logs. One build at a time writes to a destination a lock beside it.

A build may stop after a named step (``--to-step``: the folder then holds its checkpoint and what the
steps wrote, no plan.json) and go on from one (``--from-step``): ``load_model`` and ``load_board`` run
again (they settle the options and load what the steps read), the steps between them and the one
named are taken from the folder's checkpoint (``checkpoint.py``), and the named step and those after
it run anew on a copy of the folder without what they write (``Step.writes``).
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..core.board import Board, load_board
from ..core.cache import BuildCache, digest, toolchain
from ..core.checkpoint import CHECKPOINT, STATE, Checkpoint, read_checkpoint, write_checkpoint
from ..core.errors import UserError, VerificationError
from ..core.output import BUILD_LOG, check_output, output_lock, staging
from ..core.plan import Plan, PrecisionSearch, Subfunction
from ..core.plan_text import empty_fpga_note
from ..core.progress import Progress, Reporter, stderr_progress
from ..fpga.open_synth import check_tools
from ..intake.model import LoadedModel, load_model
from ..planning.config import BuildOptions, resolved_config, settle_options
from ..running.deploy import check_package, synthesize, write_manifests, write_package
from ..running.samples import BuildSamples, build_samples, calibration_note
from ..running import verify
from .generate import FLIP_OPERATIONS, flip_samples_to_compare, generate_hls, verify_csim
from .open_synth import open_synthesis
from .plan_model import (UnitsDoNotFit, against_baselines, choose_tops, fold_units, folded_plan, fpga_times, map_nodes,
                         model_node_names, search_layer_widths)
from .subfunctions import write_subfunctions
from .transfers import count_zeros

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
    searched_widths: dict[str, int] = dataclasses.field(default_factory=dict)  # node -> --error-budget's bits
    layer_widths: dict[str, int] = dataclasses.field(default_factory=dict)  # node -> those bits, widened by verify
    partitioned_widths: Optional[dict[str, int]] = None  # the layer widths the plan was partitioned at
    unit_widths: dict[str, int] = dataclasses.field(default_factory=dict)  # FPGA unit -> its bits
    widened: list[str] = dataclasses.field(default_factory=list)  # the units verify widened on its last run
    outgrown: bool = False  # unit_widths found the widened units too big for their FPGA: to be partitioned again
    zero_shares: Optional[dict[str, float]] = None  # tensor -> its share of zeros on the sizing samples
    emulated: Optional[list] = None  # the pipeline's outputs on the verification samples, C-simulated


@dataclasses.dataclass(frozen=True)
class Step:
    """One named step of a build: ``run`` takes the state to the next; ``says`` is its progress line;
    ``writes`` the paths in the build folder it makes (glob patterns; one ending in / names folders)."""

    name: str
    run: Callable[[BuildState], BuildState]
    says: Callable[[BuildState], str]
    writes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Fixpoint:
    """Steps ``first`` to ``last`` of the list, run again from ``first`` until ``last`` leaves the state
    ``settled``."""

    first: str
    last: str
    settled: Callable[[BuildState], bool]


# What repeats until the build settles. Widening: a unit out of tolerance gets more bits (``verify.widen``) and
# the units are folded, generated and checked anew, until none widens; its widths only grow, up to
# verify.MAX_WIDTH, so it ends. Partitioning again: the widened units outgrow their FPGA, and the partition
# runs anew at the widths they now need (the widenings stand), once for each time they outgrow it.
FIXPOINTS = (
    Fixpoint("unit_widths", "verify", lambda state: not state.widened),
    Fixpoint("partition", "unit_widths", lambda state: not state.outgrown),
)


def run_steps(steps: list[Step], state: BuildState, announce: Callable[[int, str], None], start: int = 0,
              stop: Optional[int] = None) -> BuildState:
    """``steps[start:stop]`` in order over ``state``, each stretch of FIXPOINTS again until it settles;
    ``announce(number, line)`` before each step (its index in ``steps`` + 1)."""
    names = [s.name for s in steps]
    k, stop = start, len(steps) if stop is None else stop
    while k < stop:
        announce(k + 1, steps[k].says(state))
        state = steps[k].run(state)
        again = next((f.first for f in FIXPOINTS if f.last == names[k] and not f.settled(state)), None)
        k = names.index(again) if again is not None else k + 1
    return state


def build(options: BuildOptions, progress: Progress = stderr_progress, verbose: bool = False,
          from_step: Optional[str] = None, to_step: Optional[str] = None) -> Optional[Plan]:
    """Every step (``STEPS``) into ``options.out_dir``, or those from ``from_step`` (the earlier ones
    taken from the folder's checkpoint) up to ``to_step``: the plan, None when the build stopped
    before ``partition``. ``progress`` gets each line to show (the default prints it to stderr and
    draws progress bars on long steps); ``verbose``: each unit's line too."""
    first, last = _step_range(from_step, to_step)
    started = time.monotonic()
    progress = Reporter(progress, verbose, bars=progress is stderr_progress)
    running = [0, started]  # the step running and when it began

    def announce(k: int, what: str) -> None:
        now = time.monotonic()
        if running[0]:  # the step before ends with its own time, under its own lines
            progress(f"      step {running[0]} took {now - running[1]:.1f} s")
        running[:] = [k, now]
        progress(f"[{k}/{len(STEPS)}] {what}")

    out_dir = Path(options.out_dir)
    check_output(out_dir, ("plan.json", f"{CHECKPOINT}/{STATE}"))  # before any work
    if options.open_synth:
        check_tools()
    if (out_dir / "plan.json").is_file() and first <= _SETTLING:
        progress(f"      {out_dir} holds an earlier build: this one replaces it once complete (if this one "
                 f"fails, it stays as it is)")
    state = BuildState(options, lambda note: progress(f"      {note}"), progress)
    with output_lock(out_dir):
        state = run_steps(STEPS, state, announce, 0, min(last + 1, _SETTLING))
        if first > _SETTLING:
            state = _resume(state, out_dir, first)
        state = run_steps(STEPS, state, announce, max(first, _SETTLING), min(last + 1, len(PLAN_STEPS)))
        note = empty_fpga_note(state.plan, state.board) if state.plan is not None and first <= len(PLAN_STEPS) \
            else None
        if note:
            progress(f"      {note}")
        state.cache = BuildCache(options.cache, options.cache_limit) if options.cache is not None else None
        with staging(out_dir, progress.log) as state.build_dir:
            if first > _SETTLING:
                _keep_earlier_outputs(out_dir, state.build_dir, STEPS[first:])
            state = run_steps(STEPS, state, announce, max(first, len(PLAN_STEPS)), last + 1)
            write_checkpoint(state.build_dir, _checkpoint(state, last + 1), state.plan, state.emulated)
    progress(f"      step {running[0]} took {time.monotonic() - running[1]:.1f} s")
    if last + 1 < len(STEPS):
        progress(f"stopped after step {STEPS[last].name} (--to-step): {out_dir} holds its checkpoint; go on with "
                 f"--from-step {STEPS[last + 1].name}")
        return state.plan
    progress(f"built {out_dir} in {time.monotonic() - started:.1f} s")
    if options.synth:
        progress(synthesize(state.plan, state.board, out_dir, progress))
    return state.plan


# load_model and load_board: run by every build, --from-step or not (they settle the options and load
# what later steps read, and write nothing)
_SETTLING = 2


def _step_range(from_step: Optional[str], to_step: Optional[str]) -> tuple[int, int]:
    """The indices in STEPS of the first step to run and the last."""
    names = [s.name for s in STEPS]
    for flag, name in (("--from-step", from_step), ("--to-step", to_step)):
        if name is not None and name not in names:
            raise UserError(f"{flag} {name}: no such step; the build's steps: {', '.join(names)}")
    first = names.index(from_step) if from_step is not None else 0
    last = names.index(to_step) if to_step is not None else len(STEPS) - 1
    if first > last:
        raise UserError(f"--from-step {from_step} comes after --to-step {to_step} in the build's steps: "
                        f"{', '.join(names)}")
    return first, last


# Settings that change no step's result: a resumed build may give other ones.
_RESUMABLE_SETTINGS = ("model", "cache", "cache_limit", "synth")


def _checkpoint(state: BuildState, done: int) -> Checkpoint:
    """The checkpoint of ``state`` once ``STEPS[:done]`` ran."""
    return Checkpoint(
        steps=[s.name for s in STEPS[:done]], remaining=[s.name for s in STEPS[done:]],
        model_digest=_model_digest(state.loaded), board=state.board.name if state.board is not None else "",
        config=resolved_config(state.options), searched_widths=state.searched_widths,
        layer_widths=state.layer_widths, unit_widths=state.unit_widths, search=state.search)


def _model_digest(loaded: LoadedModel) -> str:
    return digest(loaded.source.SerializeToString())


def _resume(state: BuildState, out_dir: Path, first: int) -> BuildState:
    """The state after ``STEPS[_SETTLING:first]`` as ``out_dir``'s checkpoint holds it, once it is
    the checkpoint of this model, board and settings, with those steps done."""
    checkpoint, plan, emulated = read_checkpoint(out_dir)
    named, skipped = STEPS[first].name, [s.name for s in STEPS[_SETTLING:first]]
    if not set(skipped) <= set(checkpoint.steps):
        stopped = f"stopped after step {checkpoint.steps[-1]}" if checkpoint.steps else "did no step"
        raise UserError(f"--from-step {named}: the build in {out_dir} {stopped}; go on from a step up to "
                        f"{STEPS[len(checkpoint.steps)].name}")
    if checkpoint.model_digest != _model_digest(state.loaded):
        raise UserError(f"--from-step {named}: {out_dir} was built from another model than {state.options.model}; "
                        f"build it from the start (leave --from-step out)")
    if checkpoint.board != state.board.name:
        raise UserError(f"--from-step {named}: {out_dir} was built for board {checkpoint.board}, not "
                        f"{state.board.name}; build it from the start (leave --from-step out)")
    given = resolved_config(state.options)
    changed = [k for k in sorted(given.keys() | checkpoint.config.keys())
               if k not in _RESUMABLE_SETTINGS and given.get(k) != checkpoint.config.get(k)]
    if changed:
        key = changed[0]
        raise UserError(f"--from-step {named}: {out_dir} was built with {key} {checkpoint.config.get(key)!r}, this "
                        f"command gives {given.get(key)!r}; a build that goes on keeps its settings: build it from "
                        f"the start to change them (leave --from-step out)")
    # the plan after partition holds the units as widened; a partition run anew starts from the search's
    state.layer_widths = dict(checkpoint.layer_widths if "partition" in skipped else checkpoint.searched_widths)
    state.searched_widths = checkpoint.searched_widths
    state.search, state.plan = checkpoint.search, plan
    if "unit_widths" in skipped:
        state.unit_widths = checkpoint.unit_widths
    if "verify" in skipped:
        state.emulated = emulated
    if "write_subfunctions" in skipped:
        state.samples = state.samples or build_samples(state.options, plan.inputs)
    state.progress(f"      step{'s' if len(skipped) > 1 else ''} {', '.join(skipped)}: from {out_dir / CHECKPOINT} "
                   f"(--from-step {named})")
    return state


def _keep_earlier_outputs(out_dir: Path, stage_dir: Path, rerun: list[Step]) -> None:
    """``out_dir``'s files into the staging folder, but for what the steps in ``rerun`` write, its log
    and its checkpoint (written anew), which are not copied."""
    written = {path for pattern in [p for step in rerun for p in step.writes] + [BUILD_LOG, CHECKPOINT]
               for path in out_dir.glob(pattern.rstrip("/"))
               if not pattern.endswith("/") or (path.is_dir() and not path.is_symlink())}
    shutil.copytree(out_dir, stage_dir, symlinks=True, dirs_exist_ok=True,
                    ignore=lambda folder, names: [n for n in names if Path(folder) / n in written])


def plan_stages(options: BuildOptions, step: Callable[[int, str], None],
                note: Callable[[str], None] = lambda line: None) -> tuple[LoadedModel, Board, Plan]:
    """``PLAN_STEPS``, which ``hetdeploy plan`` runs on their own: (the model, the board, the plan);
    ``step`` gets each step's number and line, ``note`` what intake changed that the user should hear
    of (a symbolic batch axis fixed to 1)."""
    state = run_steps(PLAN_STEPS, BuildState(options, note), step)
    return state.loaded, state.board, state.plan


def _load_model(state: BuildState) -> BuildState:
    state.options = settle_options(state.options)
    state.loaded = load_model(state.options.model)
    for line in state.loaded.notes:
        state.note(line)
    return state


def _load_board(state: BuildState) -> BuildState:
    options = state.options
    state.board = load_board(options.board)
    if options.engine_size is not None:  # --engine: every FPGA's engine, over the board file's
        state.board = dataclasses.replace(state.board, devices=[
            dataclasses.replace(d, engine_size=options.engine_size) if d.kind == "fpga" else d
            for d in state.board.devices])
    state.options = options = model_node_names(options, state.loaded, state.board)
    # a sample file that is missing or of the wrong shape is a mistake now, for `plan` too, not at build time
    if options.calibration or options.verify_input or options.error_budget is not None:
        state.samples = build_samples(options, state.loaded.inputs)
    return state


def _search_widths(state: BuildState) -> BuildState:
    if state.options.error_budget is not None:
        state.search, state.searched_widths = search_layer_widths(state.loaded, state.board, state.options,
                                                                  state.samples)
        state.layer_widths = dict(state.searched_widths)
    return state


def _search_says(state: BuildState) -> str:
    if state.options.error_budget is None:
        return f"every FPGA layer at --width {state.options.width} bits, or its quantizer's (no --error-budget)"
    return f"searching the fewest bits per FPGA layer within a relative error of {state.options.error_budget:g}"


def _partition(state: BuildState) -> BuildState:
    loaded, board, options = state.loaded, state.board, state.options
    if state.zero_shares is None:  # what --compress-transfers weighs: the tensors' zeros on the sizing samples
        if options.compress_transfers != "none":
            state.samples = state.samples or build_samples(options, loaded.inputs)
        try:
            state.zero_shares = count_zeros(loaded, board, options, state.samples.sizing if state.samples else [])
        except UserError as err:  # the partition says what no device runs; the build's reference says the rest
            state.zero_shares = {}
            state.note(f"transfers weighed uncompressed: the tensors' zeros could not be counted ({err})")
    plan = folded_plan(loaded, board, options, state.layer_widths, state.zero_shares)
    if options.policy == "support":  # its own figure: the board holds it, folded
        plan.estimate.support_latency_s, plan.estimate.support_fits = plan.estimate.latency_s, True
    else:
        plan = against_baselines(plan, loaded, board, options, state.layer_widths, state.zero_shares)
    plan.precision_search = state.search
    plan.node_map = map_nodes(plan, loaded)
    if state.partitioned_widths is not None:  # again, after a widening (``_unit_widths``): the widenings stand
        plan.widened = state.plan.widened
    state.plan = plan
    state.partitioned_widths = dict(state.layer_widths)
    return state


def _write_subfunctions(state: BuildState) -> BuildState:
    options, plan = state.options, state.plan
    state.samples = state.samples or build_samples(options, plan.inputs)
    plan.calibration = state.samples.calibration
    chained = state.samples.sizing[:2]  # two where there are, so that a batched subfunction runs a batch
    write_subfunctions(plan, state.loaded, state.build_dir,
                       {t: np.concatenate([s[t] for s in chained]) for t in chained[0]})
    state.progress(calibration_note(plan.calibration, options.seed))
    return state


def _fpga(plan: Plan) -> list[Subfunction]:
    return [s for s in plan.subfunctions if s.kind == "fpga"]


def _unit_widths(state: BuildState) -> BuildState:
    """Each unit's bits where no quantizer sets them: --width's or the search's, more once widened, an engine unit
    that adds a residual map as wide as the map's writer (``residual_widths``); after a widening, or where that
    made a unit wider, the units folded anew (the wider take more) and their HLS cleared."""
    loaded, plan = state.loaded, state.plan
    state.outgrown = False
    matched = residual_widths(plan, state.layer_widths, state.options.width)
    for line in matched:
        state.progress(f"      {line}")
    if matched or state.unit_widths:
        # (the engines in the shares of the DSPs and URAM the plan sized them in, Concat inputs written in place where it
        # wrote them so)
        shares = {(r.engine_dsp_share, r.engine_uram_share) for r in plan.fpga_resources.values()}
        dsp_share, uram_share = shares.pop() if len(shares) == 1 else (None, None)
        folding = dataclasses.replace(state.options, engine_dsp_share=dsp_share, engine_uram_share=uram_share,
                                      concats_in_place=any(u.in_place for s in plan.subfunctions
                                                           for u in s.execution_units))
        try:
            fold_units(plan, loaded, state.board, folding, state.layer_widths)
        except UnitsDoNotFit as err:
            if state.layer_widths == state.partitioned_widths:
                raise
            # the widened units outgrow their FPGA: the partition again, at the widths they now need
            state.progress(f"      the widened units do not fit: partitioning again at their widths ({err})")
            for folder in ("hls", "subfunctions"):
                shutil.rmtree(state.build_dir / folder, ignore_errors=True)
            state.unit_widths, state.outgrown = {}, True  # the new plan comes folded at these widths
            return state
        choose_tops(plan, loaded, state.board, state.options)
        fpga_times(plan, state.board, first=False)
        for sub in _fpga(plan):
            shutil.rmtree(state.build_dir / "hls" / sub.name, ignore_errors=True)
            shutil.rmtree(state.build_dir / "subfunctions" / sub.name, ignore_errors=True)
    state.unit_widths = {u.name: state.layer_widths.get(u.nodes[0]) or state.options.width
                         for s in _fpga(plan) for u in s.execution_units}
    return state


def residual_widths(plan: Plan, layer_widths: dict[str, int], width: int) -> list[str]:
    """Each FPGA engine unit that adds a residual map and the unit that writes the map (where the map is its
    subfunction's input, each other unit that reads it: the first types it) at the wider of their bits
    (``layer_widths``: node name -> bits, by a unit's first node; else ``width``), until none differs: the engine
    reads the map an output word's lanes at a time (hls/engine.h), so the two are as wide. What it widened, a line
    each."""
    pairs = []
    for sub in _fpga(plan):
        writer = {t: u for u in sub.execution_units for t in u.outputs}
        for adder in (u for u in sub.execution_units if u.residual is not None):
            pairs += [(adder, writer[adder.residual])] if adder.residual in writer else \
                [(adder, u) for u in sub.execution_units if u is not adder and adder.residual in u.inputs]

    def bits(unit) -> int:
        return layer_widths.get(unit.nodes[0]) or width

    said: list[str] = []
    while any(bits(adder) != bits(source) for adder, source in pairs):  # a chain of blocks widens along it
        for adder, source in pairs:
            if bits(adder) != bits(source):
                narrower, wider = sorted((adder, source), key=bits)
                said.append(f"widening {narrower.name} from {bits(narrower)} to {bits(wider)} bits: {adder.name} "
                            f"adds the map {source.name} writes, as wide as its own outputs")
                layer_widths[narrower.nodes[0]] = bits(wider)
    return said


def _generate_hls(state: BuildState) -> BuildState:
    generate_hls(state.plan, state.loaded, state.board, state.options, state.build_dir, state.samples.sizing,
                 state.progress, state.unit_widths, state.cache)
    return state


def _verify(state: BuildState) -> BuildState:
    """The C-simulation against onnxruntime; a unit out of tolerance widened (``verify.widen``: the widening
    fixpoint runs again from its unit widths), or the failure raised where none can widen."""
    plan = state.plan
    state.widened = []
    flips = flip_samples_to_compare(state.loaded.graph, [n for sub in _fpga(plan) for n in sub.nodes],
                              state.options.flip_samples)
    capped = flips < verify.FLIP_SAMPLES and state.options.flip_samples is None
    if capped and verify.flip_checked(plan, state.build_dir):
        state.progress(f"      codes to compare on {flips} further samples, not {verify.FLIP_SAMPLES}: their "
                       f"C-simulation would pass {FLIP_OPERATIONS:,} operations (--flip-samples N sets N)")
    try:
        state.emulated = verify_csim(plan, state.build_dir, state.samples.verification, state.progress,
                                     state.options.seed, flips)
    except VerificationError as err:
        widened = verify.widen(plan, err, state.unit_widths, state.options.precisions, state.progress)
        if not widened:
            raise
        for unit in (u for s in _fpga(plan) for u in s.execution_units if u.name in widened):
            for node in unit.nodes:
                state.layer_widths[node] = state.unit_widths[unit.name]
        state.widened = sorted(widened)
    return state


def _open_synth(state: BuildState) -> BuildState:
    if state.options.open_synth:
        open_synthesis(state.plan, state.build_dir, state.samples.verification, state.progress, state.cache)
    return state


def _open_synth_says(state: BuildState) -> str:
    if not state.options.open_synth:
        return "open synthesis: not asked (--open-synth)"
    return (f"each FPGA unit's arithmetic as RTL by da4ml, simulated by Icarus Verilog against its C-simulation on "
            f"{len(state.samples.verification)} samples, synthesised by Yosys")


def _package(state: BuildState) -> BuildState:
    plan, stage_dir, progress, cache = state.plan, state.build_dir, state.progress, state.cache
    write_package(plan, state.board, stage_dir)
    plan.save(stage_dir / "plan.json")
    shutil.copy(stage_dir / "plan.json", stage_dir / "deploy" / "plan.json")
    write_manifests(plan, stage_dir)
    check_package(plan, stage_dir, state.samples.verification, state.emulated)
    progress(f"      deploy/run.py --emulate, run as on the board (no hetdeploy, onnx, qonnx or hls4ml): the "
             f"build's outputs on its {len(state.samples.verification)} verification samples")
    _write_report(plan, stage_dir, cache)
    if cache is not None:
        cache.evict()  # once, now that this build stored what it made: past its limit, the least recently used
        moved = sum(u.hls is None for s in _fpga(plan) for u in s.execution_units)  # the top implements them
        progress.detail(f"      from the build cache {state.options.cache}: {cache.summary()}" +
                        (f" ({moved} unit{'s' if moved > 1 else ''} implemented by the top, not converted)"
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
                                                              f"models", ("source.onnx", "model.onnx", "subfunctions")),
    Step("unit_widths", _unit_widths, lambda s: "settling each FPGA unit's bits" +
         (" (widened: folded anew)" if s.unit_widths else "")),
    Step("generate_hls", _generate_hls, lambda s: f"generating HLS through hls4ml for {len(_fpga(s.plan))} FPGA "
                                                  f"subfunction(s)", ("hls", "subfunctions/*/")),
    Step("verify", _verify, lambda s: f"verifying in C-simulation against onnxruntime on "
                                      f"{len(s.samples.verification)} samples it did not size on",
         ("hls/*/csim_run.log",)),
    Step("open_synth", _open_synth, _open_synth_says, ("rtl",)),
    Step("package", _package, lambda s: f"writing the deployment package and {s.options.out_dir}",
         ("deploy", "plan.json", "report.html", "manifest.json")),
]
STEPS = PLAN_STEPS + WRITE_STEPS


def _write_report(plan: Plan, build_dir: Path, cache: Optional[BuildCache]) -> None:
    """report.html, drawn from plan.json and the model alone: the cache keeps it under their bytes
    (drawing it, and importing matplotlib, cost a second)."""
    key = digest((build_dir / "plan.json").read_bytes(), (build_dir / plan.model).read_bytes(), toolchain())
    if cache is not None and cache.fetch("report", key, build_dir) is not None:
        return
    from ..running.report import write_report

    write_report(build_dir)
    if cache is not None:
        cache.store("report", key, build_dir, [build_dir / "report.html"], {})
