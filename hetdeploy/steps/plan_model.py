"""Planning: the model cut into subfunctions ``partition_graph`` and assembled into a ``Plan``, the FPGA
subfunctions' execution units folded to fit ``units``, their memory planned ``memory.plan_memory``, the
plan estimated against the support policy's and all on the host; the node settings of the options named as
the normalised graph names its nodes, and the --error-budget search's widths ``budget``."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
import difflib
import importlib.util
import math
from types import MappingProxyType
from typing import Any, Callable, Collection, Mapping, Optional, Sequence

from ..core.board import Board, Device
from ..core.board_runtime import resource_of
from ..core.errors import UserError
from ..core.graph import Graph
from ..core.plan import (Band, CodesInput, ExecutionUnit, FpgaFallback, FpgaResources, Plan, PlanEstimate,
                         PrecisionSearch, Subfunction, SubfunctionEstimate, TensorSpec, Top, Transfer)
from ..core.precision import NO_LAYER_WIDTHS, node_widths, octaves_moved
from ..fpga.engine import engine_layer, weights_bytes as engine_weights_bytes
from ..intake.model import QUANTIZER_OPS, LoadedModel
from ..intake.ort_adapter import run_in_memory
from ..planning import batching, memory, units
from ..planning.config import OPTIONS, BuildOptions, resolved_config, said, strategy_name
from ..planning.cost import (NO_ZEROS, Crossing, driven_stages, engine_capable, link_terms, node_work,
                             stream_seconds)
from ..planning.dataflow import DataflowError
from ..planning.input_codes import input_quantizers, port_codes
from ..planning.partition import partition_graph
from ..planning.profile import NOTHING_MEASURED, Measured, read_profile
from ..running import budget, runtime
from ..running.samples import BuildSamples

# times the units are folded into less BRAM to make room for the dataflow tops wanted (each refold moves the FIFOs'
# depths, so the room is measured again)
DATAFLOW_REFOLDS = 2
NOTHING_KEPT: Mapping[str, int] = MappingProxyType({})  # no BRAM18 of any FPGA kept off the units' budget


def folded_plan(loaded: LoadedModel, board: Board, options: BuildOptions,
                layer_widths: Mapping[str, int] = NO_LAYER_WIDTHS, zero_shares: Mapping[str, float] = NO_ZEROS) -> Plan:
    """The partition by ``options.policy``, its FPGA units folded together and their memory planned,
    its estimate from the folded units' cycles (``fpga_times``); ``layer_widths``: the bits of the
    nodes --error-budget sized (``precision.node_widths``); ``zero_shares``: each tensor's share of zeros
    on the sizing samples (``transfers.zero_shares``), for --compress-transfers. Under the latency policy, unless
    --no-engine, the partition is made twice, without and with each FPGA's engine (``CostModel``), and the plan
    estimated faster kept; with the engine, where the folding took an engine size other than the fastest beside
    which the other units fit, that partition's plan with the fastest that fits too. Each folding is weighed with
    every Concat moving its inputs and, where its engine units may write Concat inputs in place, with them so
    written (``place_concats``: an output written in place is live from its first input's write, which may leave
    other maps to DDR)."""
    plans, refused = [], None
    # each folding with every Concat moving its inputs; ``weigh`` weighs each with the inputs it may write in place
    moving = dataclasses.replace(options, concats_in_place=False)
    # the partition with each FPGA's engine too (its resources off the FPGA's, what it computes there at its
    # time and none of the chip's) where the policy weighs capacity; the faster plan kept (the one without on a tie)
    engine = not options.no_engine and options.policy == "latency" and any(
        engine_capable(d, loaded.graph, node_widths(loaded.graph, options.width, layer_widths))
        for d in board.devices if d.kind == "fpga")
    tries: list[Optional[bool | frozenset[str]]] = [False, True] if engine else [False]
    # a dataflow top, which no unit on the engine takes part in, may make a stream faster, or is asked for: the
    # folding without the engine too (the partition without it)
    folds = {False: moving}
    if engine and (options.top == "dataflow" or options.objective == "throughput" and options.top == "auto"):
        tries.append(None)
        folds[None] = dataclasses.replace(moving, no_engine=True)
    index = loaded.graph.node_index()

    def plan_memory(plan: Plan) -> None:
        memory.plan_memory(plan, loaded.graph, loaded.tensor_shapes(), board, options.memory_strategy, options.width,
                           options.batch, lambda t: units.element_bytes(options.width),
                           lambda u: engine_weights_bytes(u.engine, options.width) if u.engine is not None else
                           units.element_bytes(options.width) * sum(loaded.graph.nodes[index[n]].constant_elements
                                                                    for n in u.nodes))

    def memory_and_times(plan: Plan, fold_options: BuildOptions) -> Optional[Plan]:
        """``plan`` folded: its memory (an engine unit's input in DDR staged where no on-chip memory is left: not
        had), its tops (--top dataflow, where its units cannot run as one: not had) and its estimate."""
        nonlocal refused
        try:
            plan_memory(plan)
            plan = _with_dataflow_room(plan, loaded, board, options, fold_options, layer_widths, plan_memory)
        except UserError as why:
            refused = refused or why
            return None
        fpga_times(plan, board)
        return plan

    def seconds(plan: Plan) -> float:
        """What the objective weighs a plan by: its latency, or its seconds a sample in a stream."""
        return plan.estimate.latency_s if options.objective == "latency" else 1.0 / plan.estimate.throughput_per_s

    def weigh(plan: Plan, fold_options: BuildOptions) -> None:
        """``plan``, folded with every Concat moving its inputs, one of the plans weighed (``memory_and_times``),
        and, unless the options say every Concat moves them, a copy of it whose engine units write the Concat inputs
        they may in place (``place_concats``: the folding is the same), where they may any (the first of two as
        fast kept: the one without)."""
        placed = copy.deepcopy(plan) if options.concats_in_place else None  # (before its memory is planned)
        plans.append(memory_and_times(plan, fold_options))
        if placed is None:
            return
        placing = dataclasses.replace(fold_options, concats_in_place=True)
        place_concats(placed, loaded, board, placing)
        if any(u.in_place for s in placed.subfunctions for u in s.execution_units):
            plans.append(memory_and_times(placed, placing))

    def folded_anew(partitioned: Plan, refold: BuildOptions) -> Optional[Plan]:
        """A copy of the unfolded ``partitioned`` folded with ``refold``; None where its units do not fit so (the
        other plans stand)."""
        folded = copy.deepcopy(partitioned)
        try:
            fold_units(folded, loaded, board, refold, layer_widths)
        except UserError:
            return None
        return folded

    for with_engine in tries:
        plan = None
        fold_options = folds.get(with_engine, moving)
        try:  # a partition that cannot hold the units, or the user's per-node settings (which name nodes the
            # other partition puts on an FPGA: a config written from a plan with the engine; a node --device pins
            # to an FPGA that holds it only on the engine), is not had
            plan = partition(loaded, board, options, layer_widths, zero_shares, with_engine or False)
            partitioned = copy.deepcopy(plan) if with_engine else None
            beyond_first_fit = fold_units(plan, loaded, board, fold_options, layer_widths)
        except units.PinnedEngineRefused:  # the engine asked for, not a plan without it
            raise
        except UserError as why:
            refused = refused or why
            if with_engine is True and isinstance(why, UnitsDoNotFit) and plan is not None:
                tries += _largest_engine_try(plan, loaded, board, options, layer_widths)
            continue
        if with_engine is True and any(sum(any(u.engine for u in s.execution_units) for s in plan.subfunctions
                                           if s.device == d.name) > 1 for d in board.devices):
            tries += _largest_engine_try(plan, loaded, board, options, layer_widths)
        weigh(plan, fold_options)
        if partitioned is not None and beyond_first_fit:
            # the folding weighs engine sizes by the units' cycles, before their memory is planned: the fastest
            # engine beside which the others fit is weighed too, by the plan's estimate, memory included (a smaller
            # engine of fewer cycles may leave the memory plan more to spill)
            first_fit = dataclasses.replace(fold_options, engine_first_fit=True)
            refolded = copy.deepcopy(partitioned)
            fold_units(refolded, loaded, board, first_fit, layer_widths)
            weigh(refolded, first_fit)
        if partitioned is not None:
            # the engine's share of the DSPs (a quarter left to the other units, which the partition priced beside
            # it) weighed against all of them, by the plan's estimate: more lanes are more cycles saved where the
            # other units fit beside them and the buffers leave the memory plan as much (ResNet-50 at 8 bits on
            # the KV260: 128 lanes, not 104); an engine pinned (--engine, the board file) may so take two pixels
            # at once (ResNet-50 at 8 bits on the ZCU104 pinned at 96 x 16: 14.2 ms, not 25.0 at one pixel)
            whole_dsps = dataclasses.replace(fold_options, engine_dsp_share=1.0)
            whole = folded_anew(partitioned, whole_dsps)
            if whole is None:
                continue
            # and so with less of the URAM for its weight buffers (ENGINE_URAM_SHARES), where it took more: their
            # lanes' buffers in BRAM instead, or fewer lanes, leave the memory plan URAM to hold maps it would
            # spill to DDR (ResNet-50 on the ZCU104 at 16 bits: 25.10 ms at 0.6, not 25.54; on the KV260 at 8 bits
            # 14.55 at 0.3, not 15.45)
            shares = [share for share in units.ENGINE_URAM_SHARES if any(
                _engines_uram(whole, d) > units.engine_allowance(d, uram_share=share)["uram"]
                for d in board.devices if d.kind == "fpga")]
            weigh(whole, whole_dsps)
            for less_uram in (dataclasses.replace(whole_dsps, engine_uram_share=share) for share in shares):
                folded = folded_anew(partitioned, less_uram)
                if folded is not None:
                    weigh(folded, less_uram)
    plans = [p for p in plans if p is not None]
    if not plans:
        raise refused
    return min(plans, key=seconds)


def _engines_uram(plan: Plan, device: Device) -> int:
    """The URAM blocks the engines of ``plan``'s subfunctions on ``device`` take (no other unit takes any)."""
    return sum(s.resources.get("uram", 0) for s in plan.subfunctions if s.device == device.name and s.resources)


def _with_dataflow_room(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions,
                        fold_options: BuildOptions, layer_widths: Mapping[str, int],
                        plan_memory: Callable[[Plan], None]) -> Plan:
    """``plan`` with its tops chosen (``choose_tops``); where the dataflow tops wanted do not fit the BRAM18s left
    beside the units, the units folded into that much less, up to twice (a new folding moves the FIFOs' depths).
    Under --top auto, where that still leaves no room, the plan as it was folded, its tops sequential."""
    lacking = choose_tops(plan, loaded, board, options, final=False)
    if not lacking:
        return plan
    folded = copy.deepcopy(plan)  # its tops already those an "auto" plan without room takes
    kept: dict[str, int] = {}
    for refold in range(1, DATAFLOW_REFOLDS + 1):
        kept = {d: kept.get(d, 0) + lacking.get(d, 0) for d in {*kept, *lacking}}
        fold_units(plan, loaded, board, fold_options, layer_widths, kept)
        plan_memory(plan)
        lacking = choose_tops(plan, loaded, board, options, final=refold == DATAFLOW_REFOLDS)
        if not lacking:
            return plan
    return folded if options.top == "auto" else plan


def _largest_engine_try(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions,
                        layer_widths: Mapping[str, int]) -> list[frozenset[str]]:
    """The partition prices one engine an FPGA, the folding gives each FPGA subfunction its own, in what the FPGA's
    engine allowance holds: where several do not fit, or share it, the partition is tried once more with the engine
    for the nodes of the one with the most engine MACs on each FPGA only (the others' then weighed on hls4ml, or
    off the FPGA); no try where there are none."""
    largest = _largest_engine_subfunctions(plan, loaded, board, options, layer_widths)
    return [largest] if largest else []


def _largest_engine_subfunctions(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions,
                                 layer_widths: Mapping[str, int]) -> frozenset[str]:
    """The nodes of each FPGA's subfunction in ``plan`` with the most multiply-accumulates its engine could take."""
    widths = node_widths(loaded.graph, options.width, layer_widths)
    names = set()
    for device in (d for d in board.devices if d.kind == "fpga"):
        capable = set(engine_capable(device, loaded.graph, widths))
        subs = [s for s in plan.subfunctions if s.device == device.name]
        if subs:
            names.update(max(subs, key=lambda s: _engine_macs(s, capable, loaded)).nodes)
    return frozenset(names)


def against_baselines(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions,
                      layer_widths: Mapping[str, int] = NO_LAYER_WIDTHS,
                      zero_shares: Mapping[str, float] = NO_ZEROS) -> Plan:
    """The latency policy's plan beside the support policy's and all on the host, each folded and
    estimated alike (the partitioner prices each FPGA node at the fastest folding that fits the FPGA
    alone; folding the units together can cost more, or fit with weights in DDR what it could not):
    the support figure the plan reports is that plan's own, as `plan --policy support` prints it, and
    the latency policy takes the support plan, or everything on the host, where that is faster under the
    objective (a sample's latency, or a stream's samples/s), so it is never estimated slower than either. (The
    partitioner prices an FPGA subfunction's samples as its nodes one after another; a dataflow top, chosen after
    folding, runs them at its slowest unit's pace, so that one FPGA core can beat the cut into two it found.) Where
    the support plan cannot be folded to fit, the partitioner's figure stays, marked as not fitting."""
    support = _folded_or_none(loaded, board, options, "support", layer_widths, zero_shares)
    if support is not None:
        plan.estimate.support_latency_s, plan.estimate.support_fits = support.estimate.latency_s, True

    def slowness(p: Plan) -> float:
        return -p.estimate.throughput_per_s if options.objective == "throughput" else p.estimate.latency_s

    all_cpu = plan.estimate.all_cpu_latency_s if options.objective == "latency" else \
        None if plan.estimate.all_cpu_throughput_per_s is None else -plan.estimate.all_cpu_throughput_per_s
    host = None
    if all_cpu is not None and all_cpu < slowness(plan) and all(device == board.host
                                                                 for device in options.devices.values()):
        host = _folded_or_none(loaded, board, options, "host", layer_widths, zero_shares)
    best = min((p for p in (plan, support, host) if p is not None), key=slowness)
    if best is not plan:
        best.policy, best.config = plan.policy, plan.config  # the latency policy's choice, as asked
        best.estimate.support_latency_s = plan.estimate.support_latency_s
        best.estimate.support_fits = plan.estimate.support_fits
    return best


def _folded_or_none(loaded: LoadedModel, board: Board, options: BuildOptions, policy: str,
                    layer_widths: Mapping[str, int], zero_shares: Mapping[str, float]) -> Optional[Plan]:
    """``folded_plan`` by ``policy``, or None where it cannot be had: it does not fit even fully
    folded, or a setting of the user's (a pin, a reuse factor) names a node it does not put on an FPGA."""
    try:
        return folded_plan(loaded, board, dataclasses.replace(options, policy=policy), layer_widths, zero_shares)
    except UserError:
        return None


# The per-node settings of an FPGA execution unit (--device places a node, on any device).
_UNIT_SETTINGS = tuple(o for o in OPTIONS if o.per_node and o.field != "devices")


def model_node_names(options: BuildOptions, loaded: LoadedModel, board: Board) -> BuildOptions:
    """``options`` with every per-node setting named as the normalised graph names its node (a node
    intake folded into another, say a BatchNormalization into its Conv, stands for that one), each
    --device naming a device of ``board``."""
    index = loaded.graph.node_index()
    origins = dict(options.origins)

    def node(flag: str, name: str, value=None) -> str:
        found = name if name in index else loaded.traced.get(name)
        if found not in index:
            near = difflib.get_close_matches(name, list(index), n=1)
            raise UserError(f"{said(options, flag, name, value, flag)}: the model has no node '{name}'" +
                            (f"; did you mean '{near[0]}'?" if near else " ('hetdeploy plan --nodes' lists them)"))
        if found != name and f"{flag} {name}" in options.origins:  # its config file line follows it
            origins[f"{flag} {found}"] = options.origins[f"{flag} {name}"]
        return found

    devices, pins = {d.name for d in board.devices}, {}
    for name, device in options.devices.items():  # in the order given: the first mistake is the one named
        if device not in devices:
            setting = said(options, "--device", name, device, f"--device {name}={device}")
            raise UserError(f"{setting}: board {board.name} has no device "
                            f"'{device}' (it has {', '.join(sorted(devices))})")
        pins[node("--device", name, device)] = device
    named = {o.field: [node(o.flag, n) for n in getattr(options, o.field)] if o.listed else
             {node(o.flag, n, v): v for n, v in getattr(options, o.field).items()} for o in _UNIT_SETTINGS}
    return dataclasses.replace(options, **named, devices=pins, origins=origins)


def search_layer_widths(loaded: LoadedModel, board: Board, options: BuildOptions,
                        samples: BuildSamples) -> tuple[PrecisionSearch, dict[str, int]]:
    """--error-budget: the fewest bits for each layer an FPGA of the board could run that keep the
    simulated fixed-point model within the budget on the calibration samples (``budget.py``): the
    search, and the bits of each node it sized, which the partitioner, folding and HLS generation read."""
    if any(n.op in QUANTIZER_OPS for n in loaded.graph.nodes):
        raise UserError("--error-budget: the model is quantized already; its quantizers set the FPGA's precisions")
    fpgas = [d for d in board.devices if d.kind == "fpga"]
    if not fpgas:
        raise UserError(f"--error-budget: board {board.name} has no FPGA, which is what the budget sizes")
    fpga = fpgas[0]
    groups = budget.layer_groups(loaded.graph, lambda i: fpga.why_not(loaded.graph.nodes[i]) is None, fpga)
    feeds = [runtime.model_feeds(loaded.input_reshapes, sample) for sample in samples.sizing]
    # a layer's tables at the size --table-size gives any node of it (as the unit holding them is pinned)
    table_sizes = {first: options.table_sizes[n] for first, nodes in groups.items() for n in nodes
                   if n in options.table_sizes}
    error = budget.error_function(loaded.model, groups, feeds, run_in_memory, table_sizes=table_sizes)
    result = budget.search_widths(list(groups), budget.weighted_cost(loaded.graph, groups), error,
                                  options.error_budget, options.width)
    if result.error > options.error_budget:
        raise UserError(f"--error-budget {options.error_budget:g}: even at --width {options.width} bits the "
                        f"simulated relative error is {result.error:.3g}; give a larger budget or --width")
    return (PrecisionSearch(options.error_budget, result.error, result.evaluations, len(samples.sizing), result.widths),
            budget.chosen_node_widths(groups, result))


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


FIFO_RESOURCES = ("bram18", "lut", "ff")  # what a dataflow top's FIFOs and buffer copies take


def choose_tops(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions,
                final: bool = True) -> dict[str, int]:
    """Each FPGA subfunction's top (``Top``): sequential, its units one after another a sample, or a dataflow, each
    unit a process on its own sample (``units.dataflow_top``), as --top says. Under "auto" the objective weighs
    them: latency, the sequential top (a sample's cycles are about its units' sum either way, and its buffers share
    their memory); throughput, the dataflow where it has a process for every unit, its FIFOs and copies fit the
    FPGA's BRAM18s (its small FIFOs, its LUTs and FFs) beside every unit, and its interval is the shorter. Returns
    the BRAM18s each FPGA lacked for the dataflow tops wanted (asked for, or shorter) that did not fit beside the
    units: folded into that much less, they may (``final`` False: no UserError for those; else UserError where
    --top dataflow cannot be had)."""
    fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
    units_used = {name: {k: sum(s.resources[k] for s in fpga if s.device == name) for k in units.RESOURCES}
                  for name in plan.fpga_resources}
    left = {name: {k: r.budget[k] - units_used[name][k] for k in FIFO_RESOURCES}
            for name, r in plan.fpga_resources.items()}
    lacking: dict[str, int] = {}
    for sub in fpga:
        device = board.device(sub.device)
        ports = sum(units.port_cycles(loaded.graph, sub, units.element_bytes(options.width)).values())
        cycles = sum(u.estimate["latency_cycles"] for u in sub.execution_units) + ports
        top = Top("sequential", "", cycles, cycles, port_cycles=ports)
        short = 0
        try:
            flow = units.dataflow_top(loaded.graph, sub, device.clock_mhz, device.hls_tool,
                                      units.element_bytes(options.width))
            top = dataclasses.replace(top, dataflow_latency_cycles=flow.latency_cycles,
                                      dataflow_interval_cycles=flow.interval_cycles, dataflow_bram18=flow.bram18,
                                      dataflow_lut=flow.lut, dataflow_ff=flow.ff, fifos=flow.fifos)
            room = left[sub.device]
            short = flow.bram18 - max(0, room["bram18"])
            if short > 0:
                top.dataflow_refused = (f"its FIFOs and buffer copies take {flow.bram18} BRAM18s, "
                                        f"{max(0, room['bram18'])} are left beside the units")
            elif flow.lut > room["lut"] or flow.ff > room["ff"]:
                top.dataflow_refused = (f"its small FIFOs take {flow.lut} LUTs and {flow.ff} FFs, "
                                        f"{max(0, room['lut'])} and {max(0, room['ff'])} are left beside the units")
        except DataflowError as why:
            top.dataflow_refused = str(why)
        wanted = options.top == "dataflow" or options.top == "auto" and options.objective == "throughput" and \
            top.dataflow_latency_cycles and top.dataflow_interval_cycles < top.sequential_interval_cycles
        if wanted and short > 0:
            lacking[sub.device] = lacking.get(sub.device, 0) + short
        if options.top == "dataflow" and top.dataflow_refused and (final or short <= 0):
            raise UserError(f"{said(options, '--top', '', 'dataflow', '--top dataflow')}: subfunction {sub.name} "
                            f"has no dataflow top: {top.dataflow_refused}")
        if options.top == "dataflow" and not top.dataflow_refused:
            top.kind, top.why = "dataflow", "--top dataflow"
        elif options.top != "auto":
            top.why = f"--top {options.top}"
        elif options.objective != "throughput":
            top.why = "auto, objective latency: its buffers share their memory"
        elif top.dataflow_refused:
            top.why = "auto: no dataflow top"
        else:
            top.kind = "dataflow" if wanted else "sequential"
            top.why = "auto, objective throughput: the shorter interval"
        if top.kind == "dataflow":
            for k in FIFO_RESOURCES:
                left[sub.device][k] -= getattr(top, f"dataflow_{k}")
        sub.top = top
    for name, r in plan.fpga_resources.items():  # the chip's totals: the units' and the dataflow tops'
        flows = [s.top for s in fpga if s.device == name and s.top.kind == "dataflow"]
        r.dataflow = {k: sum(getattr(t, f"dataflow_{k}") for t in flows) for k in FIFO_RESOURCES} if flows else {}
        r.used = {k: units_used[name][k] + r.dataflow.get(k, 0) for k in units.RESOURCES}
    return lacking


def fpga_times(plan: Plan, board: Board, first: bool = True) -> None:
    """Each FPGA subfunction's compute time becomes its top's: the sum of its folded units' cycles at the FPGA's
    clock (what the partitioner priced each node at, folded as the chip's units share it) and its ports' cycles
    (``Top.port_cycles``: a float a cycle, a buffer word of codes a cycle), one after another, or a dataflow's
    latency and interval. ``first`` (when the memory is planned, not for units folded anew after a widening, whose
    memory plan stands): the DDR traffic of its spilled buffers adds to its transfers, and its ports' bytes leave them
    where the top's loops, moving them, are the slower (the partitioner priced them at the link's bandwidth: counted
    once, at the slower of the two); timed again, those take the place of the ones it counted before
    (``memory_transfer_s``). The plan's estimate follows, so it equals the sum of its tables; a profile measured on
    the board scales each unit's cycles as it scaled its nodes' (``profile``)."""
    for sub in plan.subfunctions:
        if sub.kind != "fpga" or sub.estimate is None:
            continue
        clock_hz = board.device(sub.device).clock_mhz * 1e6
        for unit in sub.execution_units:
            cycles = unit.estimate["latency_cycles"]
            unit.rate_per_s = clock_hz / cycles if cycles else 0.0
        factors = plan.measured.fpga_nodes.get(sub.device, {}) if plan.measured is not None else {}
        ports = (sub.top.port_cycles if sub.top is not None else 0) / clock_hz
        compute = sum(u.estimate["latency_cycles"] * factors.get(u.nodes[0], 1.0)
                      for u in sub.execution_units) / clock_hz + ports
        batch_compute = plan.estimate.batch * compute
        if sub.top is not None and sub.top.kind == "dataflow":  # a sample each interval after the first's latency
            compute = sub.top.latency_cycles / clock_hz
            batch_compute = (sub.top.latency_cycles + (plan.estimate.batch - 1) * sub.top.interval_cycles) / clock_hz
        memory_transfer = sub.estimate.memory_transfer_s
        if first:
            spilled = sub.memory.ddr_transfer_s if sub.memory is not None and \
                (sub.top is None or sub.top.kind == "sequential") else 0.0
            memory_transfer = spilled - min(ports, _port_link_seconds(sub, board, plan))
        memory_change = memory_transfer - sub.estimate.memory_transfer_s
        change = compute - sub.estimate.compute_s + memory_change
        sub.estimate.batch_s += batch_compute - plan.estimate.batch * sub.estimate.compute_s + \
            plan.estimate.batch * memory_change
        sub.estimate.compute_s = compute
        sub.estimate.transfer_s += memory_change
        sub.estimate.memory_transfer_s = memory_transfer
        sub.estimate.latency_s += change
        plan.estimate.latency_s += change
    stages = {s.name: (s.kind, s.estimate.resource, s.estimate.batch_s, s.estimate.overhead_s)
              for s in plan.subfunctions}
    plan.estimate.throughput_per_s = 1.0 / stream_seconds(driven_stages(stages.values(), board.host),
                                                          plan.estimate.batch)
    if plan.codes_input is not None:  # the host's input quantizers not run
        plan.codes_input.throughput_per_s = 1.0 / stream_seconds(driven_stages(
            [stage for name, stage in stages.items() if name not in plan.codes_input.skipped], board.host),
            plan.estimate.batch)


def _port_link_seconds(sub: Subfunction, board: Board, plan: Plan) -> float:
    """A sample's seconds of an FPGA subfunction's float ports' bytes on the board file's links to and from the
    host, as the partitioner priced them (raw): the core's reads and writes, which its top's port loops are. A link a
    profile measured (run.py's copies on the board) is no part of them: 0 where either was."""
    measured = set(plan.measured.links) if plan.measured is not None else set()
    if {f"{board.host}->{sub.device}", f"{sub.device}->{board.host}"} & measured:
        return 0.0
    return sub.estimate.in_bytes * link_terms(board, NOTHING_MEASURED, board.host, sub.device)[0] + \
        sub.estimate.out_bytes * link_terms(board, NOTHING_MEASURED, sub.device, board.host)[0]


def codes_input(subfunctions: list[Subfunction], loaded: LoadedModel) -> Optional[CodesInput]:
    """The plan with its input given as its input quantizer's integer codes (``run.py --codes``, FINN's driver's
    way): where host subfunctions compute nothing but input quantizers (``input_codes.input_quantizers``), every
    other subfunction reads only what the others give or what those give an FPGA input that takes codes, and no
    model output comes from them. None where that is not so. Its throughput is ``fpga_times``'."""
    quantizers = {loaded.graph.nodes[i].name for i in input_quantizers(loaded.graph)}
    skipped = [s for s in subfunctions if s.kind != "fpga" and set(s.nodes) <= quantizers]
    kept = [s for s in subfunctions if s not in skipped]
    given = {t for s in skipped for t in s.outputs}
    made = {t for s in kept for t in s.outputs}
    if not skipped or given & {o.name for o in loaded.outputs} or \
            any(t not in made and not (t in given and t in s.input_codes) for s in kept for t in s.inputs):
        return None
    shapes = loaded.tensor_shapes()
    codes = sorted({t for s in kept for t in s.input_codes if t in given})
    return CodesInput([TensorSpec(t, shapes[t], "int32") for t in codes], [s.name for s in skipped], 0.0)


def transfer_record(crossing: Crossing) -> Transfer:
    """plan.json's record of a tensor crossing a link, as the cost model weighed it."""
    w = crossing.weighed
    return Transfer(crossing.tensor, f"{crossing.source}->{crossing.target}", w.values, w.zero_share,
                    int(w.raw_bytes), int(w.compressed_bytes), w.saved_s, crossing.compressed)


def measured_figures(loaded: LoadedModel, board: Board, options: BuildOptions) -> Measured:
    """What --profile measured for this model on this board (nothing without one)."""
    if options.profile is None:
        return NOTHING_MEASURED
    return read_profile(options.profile, board.name, board.host, [d.name for d in board.devices],
                        [n.name for n in loaded.graph.nodes])


def partition(loaded: LoadedModel, board: Board, options: BuildOptions, layer_widths: Mapping[str, int],
              zero_shares: Mapping[str, float] = NO_ZEROS, engine: bool = False) -> Plan:
    measured = measured_figures(loaded, board, options)
    result = partition_graph(loaded.graph, board, options.policy, options.width, options.objective, options.batch,
                             layer_widths, options.devices, measured, options.partitioner, options.ilp_time_limit,
                             zero_shares, options.compress_transfers, engine)
    kinds = {d.name: d.kind for d in board.devices}
    index = loaded.graph.node_index()
    codes = port_codes(loaded.graph)
    shapes = loaded.tensor_shapes()
    subfunctions = [
        Subfunction(c.name, c.device, kinds[c.device], c.nodes, c.inputs, c.outputs,
                    estimate=SubfunctionEstimate(e.total_s, e.compute_s, e.transfer_s, e.overhead_s,
                                                 e.in_bytes, e.out_bytes, batch_s,
                                                 resource_of(kinds[c.device], c.device, c.name)),
                    batched=kinds[c.device] != "fpga" and batching.takes_batches(loaded.graph,
                                                                                 [index[n] for n in c.nodes]),
                    transfers=[transfer_record(x) for x in e.crossings],
                    input_codes={t: codes[t] for t in c.inputs if t in codes} if kinds[c.device] == "fpga" else {})
        for c, e, batch_s in zip(result.cuts, result.costs, result.batch_seconds)
    ]
    for sub in (s for s in subfunctions if s.kind == "fpga"):  # its float ports moved several floats at a time
        compressed = {t.tensor for t in sub.transfers if t.compressed}
        rate = units.ddr_bytes_per_cycle(board.device(sub.device))
        sub.floats_a_word = {t: floats for t in dict.fromkeys(sub.inputs + sub.outputs) if t not in sub.input_codes
                             and t not in compressed and (floats := units.port_floats(math.prod(shapes[t]), rate)) > 1}
    return Plan(
        codes_input=codes_input(subfunctions, loaded),
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
        measured=measured.figures,
        ilp=result.ilp,
    )


class UnitsDoNotFit(UserError):
    """The FPGA units of a plan do not fit their FPGA even folded as far as the settings allow."""


def fold_units(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions,
               layer_widths: Mapping[str, int] = NO_LAYER_WIDTHS, kept_bram18: Mapping[str, int] = NOTHING_KEPT
               ) -> bool:
    """Split each FPGA subfunction into execution units and fold all the units of one FPGA
    together into its budget (the partitioner only gives an FPGA what fits it fully folded), each at
    its width (``_pinned_precision``): without the engine and, unless --no-engine, with it (``_fold_device``),
    the faster kept. ``kept_bram18``: BRAM18s of an FPGA kept off the units' budget (its dataflow tops'). Whether
    an FPGA took engines other than the fastest beside which its other units fit."""
    beyond_first_fit = False
    where = {n: s.device for s in plan.subfunctions for n in s.nodes}
    node_bits = node_widths(loaded.graph, options.width, layer_widths)
    if options.weigh_distributed_arithmetic and importlib.util.find_spec("da4ml") is None:
        raise UserError("--weigh-distributed-arithmetic: hls4ml's distributed_arithmetic strategy needs da4ml "
                        "(pip install 'hetdeploy[open-synth]')")
    for option in _UNIT_SETTINGS:
        nodes = getattr(options, option.field)
        for node in nodes:  # named as the graph names them (model_node_names)
            if board.device(where[node]).kind != "fpga":
                value = None if option.listed else nodes[node]
                raise UserError(f"{said(options, option.flag, node, value, option.flag)}: node '{node}' runs on "
                                f"{where[node]}, not on an FPGA")
    for device in (d for d in board.devices if d.kind == "fpga"):
        subs = [s for s in plan.subfunctions if s.device == device.name]
        variants, refused = [], None
        # with the engine too (where a unit may take it): its resources come off the budget, so the folding
        # without it is weighed beside it, and the faster kept (the one without on a tie). Each subfunction has
        # its own engine (its top's): where they do not all fit, those with the fewest multiply-accumulates the
        # engine could take do without, one after another; none under --top dataflow (no unit on the engine takes
        # part in a dataflow)
        capable = set(engine_capable(device, loaded.graph, node_bits))
        macs = {s.name: _engine_macs(s, capable, loaded) for s in subs}
        engine_subs = [] if options.no_engine or options.target_rate is not None or options.top == "dataflow" else \
            sorted((s for s in subs if macs[s.name]), key=lambda s: -macs[s.name])
        tries = [set()] + [{s.name for s in engine_subs[:k]} for k in range(len(engine_subs), 0, -1)]
        if any(s.execution_units for s in subs):  # folded anew (a widening): its units stay the units they were
            tries = [{s.name for s in subs if s.engine_weighed}]
        for with_engine in tries:
            try:  # the units do not fit, or the user's per-node settings name a unit the engine's fusion cut
                variant = _fold_device(subs, device, loaded, options, node_bits, capable, with_engine,
                                       kept_bram18.get(device.name, 0))
            except UserError as why:
                refused = refused or why
                continue
            if variant is not None:
                variants.append(variant)
                if with_engine:  # the most subfunctions with their engine that fit
                    break
        if not variants:
            raise refused
        # of two foldings as fast, the one that leaves more of the budget
        best = min(variants, key=lambda v: (_interval_cycles(v, options, loaded.graph),
                                            units.budget_share(v.estimates, device.budget())))
        beyond_first_fit = beyond_first_fit or not best.first_fit
        chip_budget = {k: device.budget().get(k, 0) for k in units.RESOURCES}
        budget = chip_budget | {"latency_cycles": None}
        choices = iter(zip(best.shapes, best.foldings, best.widths, best.bands, best.estimates))
        for sub, units_of_sub in best.split:
            sub.engine_weighed = sub.name in best.with_engine
            sub.execution_units = []
            for k, unit in enumerate(units_of_sub):
                shape, folding, width, band, estimate = next(choices)
                on_engine = folding.strategy == units.ENGINE
                main = loaded.graph.nodes[unit.nodes[0]]
                sub.execution_units.append(ExecutionUnit(
                    name=f"{sub.name}_u{k}", nodes=[loaded.graph.nodes[i].name for i in unit.nodes], pe=unit.pe,
                    reuse_factor=folding.reuse_factor, strategy=folding.hls_strategy,
                    precision=_unit_precision(loaded, unit, options, node_bits),
                    estimate=estimate, estimate_range=units.estimate_range(shape, folding, width, best.rate),
                    resource_parts=units.resource_parts(shape, folding, width, best.rate),
                    weights_in_ddr=folding.weights_in_ddr,
                    table_size=shape.table_entries if shape.table_layers or shape.softmax else 0,
                    io_type="" if unit.engine == "top" or on_engine else
                    folding.io_type or units.IO_TYPES[shape.streamed],
                    foldable=units.kind_of(shape).foldable, inputs=unit.inputs, band=None if on_engine else band,
                    outputs=[unit.output],
                    engine=engine_layer(main, loaded.graph.nodes[unit.nodes[-1]], shape.engine, shape.residual,
                                        units.engine_dense_groups(shape, width, units.ddr_bytes_per_cycle(device)))
                    if on_engine else None))
            sub.resources = _unit_totals(sub)
            sub.budget = budget
        if not subs:
            continue
        plan.fpga_resources[device.name] = FpgaResources(
            [s.name for s in subs], {k: sum(s.resources[k] for s in subs) for k in units.RESOURCES},
            chip_budget, {k: device.resources.get(k, 0) for k in units.RESOURCES},
            engine_dsp_share=options.engine_dsp_share, engine_uram_share=options.engine_uram_share)
    if options.concats_in_place:
        place_concats(plan, loaded, board, options)
    return beyond_first_fit


def place_concats(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions) -> None:
    """In each FPGA subfunction of folded ``plan``, the Concat inputs its engine units may write in place written so
    (``units.concats_in_place``); a unit whose output type --precision pins keeps it: it writes none."""
    for sub in plan.subfunctions:
        device = board.device(sub.device)
        if device.kind == "fpga":
            units.concats_in_place(loaded.graph, sub, device, {u.name for u in sub.execution_units
                                                               if not set(u.nodes) & options.precisions.keys()})


def _stream_may_flow(options: BuildOptions) -> bool:
    """Whether units are folded for a dataflow top where one may run them: a stream, with --top not sequential."""
    return options.objective == "throughput" and options.top != "sequential"


def _interval_cycles(variant: "_DeviceFolding", options: BuildOptions, graph: Graph) -> int:
    """The cycles between samples a folding's units give: their latencies' sum, one after another; for a stream,
    where a dataflow top may run them (none on the engine or in bands), its slowest unit's (``DATAFLOW_MEASURE``), or
    its float ports' where those are slower (``units.port_interval``: no folding makes a sample get in faster)."""
    if _stream_may_flow(options) and not any(f.strategy == units.ENGINE for f in variant.foldings) \
            and not any(variant.bands):
        return max([e[units.DATAFLOW_MEASURE] for e in variant.estimates] +
                   [units.port_interval(graph, sub, units.element_bytes(options.width)) for sub, _ in variant.split],
                   default=0)
    return sum(e["latency_cycles"] for e in variant.estimates)


@dataclass
class _DeviceFolding:
    """One FPGA's subfunctions cut into units (``split``) and folded: per unit its shape (on the engine: whole),
    folding, width, bands and estimate (the first unit on each subfunction's engine with the engine's resources)."""

    split: list[tuple[Subfunction, list[units.Unit]]]
    shapes: list[units.Shape]
    foldings: list[units.Folding]
    widths: list[int]
    bands: list[Optional[Band]]
    estimates: list[dict[str, int]]
    rate: float
    with_engine: Collection[str]  # the subfunctions whose units were cut and folded with the engine weighed
    first_fit: bool = True  # its engines the fastest beside which the other units fit


def _engine_macs(sub: Subfunction, capable: Collection[int], loaded: LoadedModel) -> int:
    """The multiply-accumulates of ``sub``'s nodes the engine could compute (``capable``: their indices)."""
    index = loaded.graph.node_index()
    return sum(node_work(loaded.graph.nodes[index[n]]).macs for n in sub.nodes if index[n] in capable)


def _fold_device(subs: list[Subfunction], device: Device, loaded: LoadedModel, options: BuildOptions,
                 node_bits: Sequence[int], capable: set[int], with_engine: Collection[str],
                 kept_bram18: int = 0) -> Optional[_DeviceFolding]:
    """``device``'s subfunctions cut into units and folded together into its budget; ``capable``: the nodes its
    engine may compute (``engine_capable``); ``with_engine``: the subfunctions where each unit the engine computes
    (``units.engine_refusal``) and the user set nothing of (a strategy, a folding, an io type, bands, a precision, a
    table size) may run on it (its unit fusing only what the engine computes), their engines' resources off the
    budget (None where those subfunctions hold no node the engine computes). Units pinned to the engine run on it
    either way."""
    index = loaded.graph.node_index()
    budget = {k: n - kept_bram18 * (k == "bram18") for k, n in device.budget().items()}
    pinned_engine = {index[n] for n, strategy in options.strategies.items() if strategy == units.ENGINE}
    free = {index[n] for s in subs if s.name in with_engine for n in s.nodes} & capable
    settled = {n for option in _UNIT_SETTINGS for n in getattr(options, option.field)}  # a unit the user set
    # anything of stays as set: a layer the engine may run adds a residual map where neither it nor the Add is set
    unset = {k for k, node in enumerate(loaded.graph.nodes) if node.name not in settled}
    split = [(sub, units.split_units(loaded.graph, [index[n] for n in sub.nodes], device, set(sub.outputs),
                                     pinned_engine | free, unset | pinned_engine)) for sub in subs]
    found = [u for _, units_of_sub in split for u in units_of_sub]
    rate = units.ddr_bytes_per_cycle(device)
    widths = [_pinned_precision(loaded, u, options, node_bits)[0] for u in found]
    bands = [_unit_band(loaded, u, device, width, options) for u, width in zip(found, widths)]
    shapes = [_unit_shape(loaded, u, device, options, band) for u, band in zip(found, bands)]
    strategies = {k: strategy for k, (u, shape) in enumerate(zip(found, shapes))
                  if (strategy := _pinned_strategy(loaded, u, shape, options)) is not None}
    pinned = {k: folding for k, (u, shape) in enumerate(zip(found, shapes))
              if (folding := _pinned_folding(loaded, u, shape, options, rate, strategies.get(k))) is not None}
    io_fixed = {k for k, u in enumerate(found) if _pinned_io_type(loaded, u, options) is not None}
    may = {k for k, u in enumerate(found) if u.nodes[0] in free and units.engine_refusal(loaded.graph, u) is None
           and not settled & {loaded.graph.nodes[i].name for i in u.nodes}}
    if with_engine and not free:
        return None
    # the engine reads whole buffers: a unit on it is priced whole (and leaves its bands)
    whole = {k: _unit_shape(loaded, found[k], device, options) if bands[k] else shapes[k]
             for k in may | {k for k, s in strategies.items() if s == units.ENGINE}}
    # each subfunction with units that may run on the engine has one (its top's): its resources come off the
    # budget the units are folded into. The sizes are tried fastest first (``_engine_sizes``: the engines' own
    # cycles), and of those with which the other units fit, the one of the fewest cycles of all the units is taken,
    # the engine's and the others' as folded beside it (a larger engine may leave the others folded slower: the
    # model zoo's DenseNet-121 at 8 bits on the KV260, 56.8 ms with the fastest engine that fits, 52.9 with one of
    # 80 lanes, its scale and shift units unfolded); the search stops at the first size whose engines alone take
    # as long as the best found (or at the first that fits: folding for a rate, --target-rate, or asked to,
    # engine_first_fit)
    groups, start = [], 0
    for _, units_of_sub in split:
        groups.append(tuple(k for k in range(start, start + len(units_of_sub)) if k in whole))
        start += len(units_of_sub)
    group_of = {k: group for group in groups for k in group}
    best = None  # (the units' cycles, their engines' shapes, the engines' resources, the foldings, the first fit)
    for engine_cycles, sized, engines in _engine_sizes(device, [g for g in groups if g], whole, widths,
                                                       units.engine_allowance(device, options.engine_dsp_share,
                                                                              options.engine_uram_share)):
        if best is not None and (engine_cycles >= best[0] or options.target_rate is not None or
                                 options.engine_first_fit):
            break
        on_engine = {k: s.replaced(engine=sized[group_of[k]]) for k, s in whole.items()}
        # URAM is no budget the units are folded into: the engines' must fit the FPGA's beside each other
        foldings = _fold_beside(shapes, engines, device, split, subs, options, widths, pinned, rate, strategies,
                                io_fixed, {k: on_engine[k] for k in may}, loaded.graph, kept_bram18) \
            if sum(e["uram"] for e in engines.values()) <= device.budget().get("uram", 0) else None
        if foldings is not None:
            cycles = sum(units.folded_estimate(on_engine[k] if f.strategy == units.ENGINE else s, f, w, rate)
                         ["latency_cycles"] for k, (s, f, w) in enumerate(zip(shapes, foldings, widths)))
            if best is None or cycles < best[0]:
                best = (cycles, on_engine, engines, foldings, best is None)
            continue
        if best is not None:
            continue
        folded = [units.folded_estimate(on_engine.get(k, s), pinned.get(k) or (units.folding_options(
            s, widths[k], rate, strategies.get(k)) + [units.ENGINE_FOLDING] * (k in may))[-1],
            widths[k], rate) for k, s in enumerate(shapes)] + list(engines.values())
        used = {k: sum(e.get(k, 0) for e in folded) for k in (*units.RESOURCES, "uram")}
        over = {k: n for k, n in used.items() if n > budget.get(k, 0)}
        if set(over) - {"dsp", "bram18", "uram"}:  # a smaller engine frees only its multipliers and weight buffers
            break
    if best is not None:
        _, whole, engines, foldings, first_fit = best
    else:  # pinned foldings, or the support policy (which does not weigh capacity)
        kept = f" ({kept_bram18} of its BRAM18s kept for the dataflow tops' FIFOs)" if kept_bram18 else ""
        over = [f"{k.upper()} {used} > {budget[k]}" for k, used in over.items()]
        if pinned:
            raise UnitsDoNotFit(f"the FPGA units do not fit {device.name} with the foldings given by "
                                f"--reuse-factor, --model-reuse-factor, --strategy and --weights-in-ddr, even with "
                                f"every other unit fully folded ({', '.join(over)})")
        raise UnitsDoNotFit(f"the {options.policy} policy gives {device.name} more than it holds even fully "
                            f"folded ({', '.join(over)}){kept}; the latency policy moves what does not fit elsewhere")
    shapes = [whole[k] if f.strategy == units.ENGINE else s for k, (s, f) in enumerate(zip(shapes, foldings))]
    estimates = [units.folded_estimate(s, f, w, rate) for s, f, w in zip(shapes, foldings, widths)]
    _add_engine_loops(shapes, foldings, widths, estimates, engines, budget, rate, whole)
    for group, resources in engines.items():  # the engine, with its first unit on it (none on it: none)
        first = next((k for k in group if foldings[k].strategy == units.ENGINE), None)
        if first is not None:
            estimates[first] = estimates[first] | {r: estimates[first].get(r, 0) + n for r, n in resources.items()}
    return _DeviceFolding(split, shapes, foldings, widths, bands, estimates, rate, with_engine, first_fit)


def _add_engine_loops(shapes: list[units.Shape], foldings: list[units.Folding], widths: list[int],
                      estimates: list[dict[str, int]], engines: dict[tuple[int, ...], dict[str, int]],
                      budget: Mapping[str, int], rate: float, whole: Mapping[int, units.Shape]) -> None:
    """Each engine of two pixels at once, folded, made one whose pairs share their windows among the tiles it holds
    (``EngineSize.shared``, hls/engine.h's SHARED), then one that streams the weights of layers of at most as many pairs
    as the first of ENGINE_STREAM_PAIRS that fits (``EngineSize.stream``, hls/engine.h's STREAM), each where the LUTs
    and registers that takes fit the budget beside the units as they are folded, or beside them once units of its
    group that the folding gave hls4ml move onto it (``whole``: each unit of a group priced whole), those holding the
    most of what is over the budget first, where that makes the units' cycles fewer in all (and, streaming, some
    unit on it streams): their units' shapes, foldings and estimates, and its resources (``engines``, each group of
    units' engine), changed in place. After the folding, which weighs engines without them, so that the partition
    and the memory plan are those it gives; only the engine's loops are shorter, and the units moved onto it free
    what they took (the model zoo's ResNet-50 at 8 bits on the ZCU104: a 1 x 1 convolution of 2,048 products in
    178,476 LUTs, 591 cycles faster than on the engine, left no room for either loop, which take 2.3 ms off)."""
    used = {r: sum(e.get(r, 0) for e in estimates) + sum(e.get(r, 0) for e in engines.values()) for r in budget}
    for change in ({"shared": True}, *({"stream": pairs} for pairs in units.ENGINE_STREAM_PAIRS)):
        for group, resources in engines.items():
            on_it = [k for k in group if foldings[k].strategy == units.ENGINE]
            size = shapes[on_it[0]].engine if on_it else None
            if size is None or size.pixels != 2 or "stream" in change and size.stream:  # (the most pairs first)
                continue
            changed = dataclasses.replace(size, **change)
            movable, moved = [k for k in group if foldings[k].strategy != units.ENGINE], []
            while True:
                width = max(widths[k] for k in on_it + moved)
                depthwise = any(units.depthwise_on_engine(whole[k]) for k in on_it + moved)
                more = {r: n - units.engine_resources(size.window, width, size, depthwise).get(r, 0)
                        for r, n in units.engine_resources(size.window, width, changed, depthwise).items()}
                freed = {r: sum(estimates[k].get(r, 0) for k in moved) for r in more}
                over = [r for r, n in more.items() if n > 0 and used.get(r, 0) - freed[r] + n > budget.get(r, 0)]
                holding = max(movable, key=lambda k: sum(estimates[k].get(r, 0) for r in over), default=None)
                if not over or holding is None or not any(estimates[holding].get(r, 0) for r in over):
                    break
                movable.remove(holding)
                moved.append(holding)
            if over:
                continue
            shorter = {k: units.folded_estimate(dataclasses.replace(whole[k], engine=changed),
                                                units.ENGINE_FOLDING if k in moved else foldings[k], widths[k], rate)
                       for k in on_it + moved}
            saved = sum(estimates[k]["latency_cycles"] - shorter[k]["latency_cycles"] for k in shorter)
            if ("stream" in change or moved) and saved <= 0:  # (no loop that none of its layers takes)
                continue
            for k in on_it + moved:
                used = {r: n + shorter[k].get(r, 0) - estimates[k].get(r, 0) for r, n in used.items()}
                shapes[k], estimates[k] = dataclasses.replace(whole[k], engine=changed), shorter[k]
            for k in moved:
                foldings[k] = units.ENGINE_FOLDING
            engines[group] = {r: n + more.get(r, 0) for r, n in resources.items()}
            used = {r: n + more.get(r, 0) for r, n in used.items()}


def _engine_sizes(device: Device, groups: list[tuple[int, ...]], whole: dict[int, units.Shape], widths: list[int],
                  allowance: dict[str, int]
                  ) -> list[tuple[int, dict[tuple[int, ...], units.EngineSize], dict[tuple[int, ...], dict[str, int]]]]:
    """The sizes of the engines of ``groups`` (each a subfunction's units that may run on its engine, priced as
    ``whole``) to try in the FPGA's engine ``allowance``, each after the cycles all those units take on them and with
    the engines' resources, the fewest cycles first: the group of
    the most multiply-accumulates takes each of its sizes (``units.engine_sizes_for``); each other group the fastest
    size in its share, by its multiply-accumulates, of the allowance that leaves, then, in turn, the
    fastest in its share and what the others' shares left unused."""
    if not groups:
        return [(0, {}, {})]

    macs = {g: sum(whole[k].n_in * whole[k].n_out * whole[k].vectors for k in g) for g in groups}
    width = {g: max(widths[k] for k in g) for g in groups}
    window = {g: max(units.engine_window(whole[k], width[g]) for k in g) for g in groups}

    def sizes(group: tuple[int, ...], allowance: Optional[dict[str, int]] = None) -> list[units.EngineSize]:
        return units.engine_sizes_for(device, width[group], [whole[k] for k in group], allowance,
                                      lambda size: cycles(group, size))

    def resources(group: tuple[int, ...], size: units.EngineSize) -> dict[str, int]:
        return units.engine_resources(window[group], width[group], size,
                                      any(units.depthwise_on_engine(whole[k]) for k in group))

    counted: dict[tuple[tuple[int, ...], units.EngineSize], int] = {}

    def cycles(group: tuple[int, ...], size: units.EngineSize) -> int:
        """The group's units' cycles on an engine of ``size``, each pair counted once: the sizes of every share
        of the allowance are sorted by them, many sizes alike."""
        if (group, size) not in counted:
            counted[group, size] = units.engine_cycles_of(device, width[group], [whole[k] for k in group], size)
        return counted[group, size]

    first, *others = sorted(groups, key=macs.get, reverse=True)
    rest = sum(macs[group] for group in others) or 1
    tried = []
    for size in sizes(first, allowance):
        sized = {first: size}
        left = {k: n - resources(first, size).get(k, 0) for k, n in allowance.items()}
        for group in others:
            sized[group] = sizes(group, {k: n * macs[group] // rest for k, n in left.items()})[0]
        used = {group: resources(group, sized[group]) for group in others}
        for group in others:
            spare = {k: n - sum(used[o].get(k, 0) for o in others) + used[group].get(k, 0) for k, n in left.items()}
            sized[group] = min(sizes(group, spare)[0], sized[group], key=lambda s: cycles(group, s))
            used[group] = resources(group, sized[group])
        tried.append((sum(cycles(group, s) for group, s in sized.items()), len(tried), sized,
                      {first: resources(first, size), **used}))
    return [(total, sized, engines) for total, _, sized, engines in sorted(tried, key=lambda t: t[:2])]


def _fold_beside(shapes: list[units.Shape], engines: dict[tuple[int, ...], dict[str, int]], device: Device,
                 split: list, subs: list[Subfunction], options: BuildOptions, widths: list[int], pinned: dict,
                 rate: float, strategies: dict, io_fixed: set, may_engine: dict, graph: Graph,
                 kept_bram18: int = 0) -> Optional[list[units.Folding]]:
    """The units' foldings in what the FPGA's budget leaves beside ``engines`` (their resources) and ``kept_bram18``
    (``fold_units``'); None where they do not fit (``units.fold``'s, ``units.fold_for_rate``'s,
    ``units.fold_for_interval``'s: for a stream, where a dataflow top may run them and no engine does)."""
    budget_left = {k: device.budget().get(k, 0) - sum(e[k] for e in engines.values()) - kept_bram18 * (k == "bram18")
                   for k in units.RESOURCES}
    # units for a dataflow (``choose_tops``), where nothing runs on the engine: each its own process
    dataflow = _stream_may_flow(options) and not engines and not may_engine
    lane_bytes = units.element_bytes(options.width)
    if dataflow:  # balanced at the least interval, no unit faster than its subfunction's ports, nor (--target-rate,
        # FINN's target_fps) than the rate needs: the fewest resources that reach it
        floors = []
        for sub, units_of_sub in split:
            floor = units.port_interval(graph, sub, lane_bytes)
            if options.target_rate is not None:
                floor = max(floor, math.floor(_cycles_for_rate(sub, options, device.clock_mhz)))
            floors += [floor] * len(units_of_sub)
        return units.fold_for_interval(shapes, budget_left, widths, pinned, rate, strategies,
                                       options.weigh_distributed_arithmetic, io_fixed, floors)
    if options.target_rate is not None:  # the fewest resources with which each subfunction's units, one after
        # another, reach the rate (FINN's target_fps); the float ports' cycles come off the units' (the link's bytes
        # the partitioner priced in the rest are the same bytes: counted twice here, a margin)
        cycles = [max(0.0, _cycles_for_rate(sub, options, device.clock_mhz) -
                      sum(units.port_cycles(graph, sub, lane_bytes).values())) for sub, _ in split]
        groups, start = [], 0
        for _, units_of_sub in split:
            groups.append(range(start, start + len(units_of_sub)))
            start += len(units_of_sub)
        return units.fold_for_rate(shapes, budget_left, widths, groups, cycles, pinned, rate, strategies,
                                   options.weigh_distributed_arithmetic, io_fixed)
    return units.fold(shapes, budget_left, widths, pinned, rate, strategies, options.weigh_distributed_arithmetic,
                      io_fixed, may_engine)


def _cycles_for_rate(sub: Subfunction, options: BuildOptions, clock_mhz: float) -> float:
    """The cycles a sample that FPGA subfunction ``sub``'s units may take (together, one after another; each, as a
    dataflow) for a stream of ``options.batch`` samples a call to reach ``options.target_rate``: a sample's share of
    the time less what its call overhead and transfers take (none left: 0, as fast as it goes)."""
    other_s = sub.estimate.batch_s / options.batch - sub.estimate.compute_s
    return max(0.0, 1.0 / options.target_rate - other_s) * clock_mhz * 1e6


def _unit_totals(sub: Subfunction) -> dict[str, int]:
    """The units' resources and cycles; the URAM of an engine's weight buffers where it has some."""
    uram = sum(u.estimate.get("uram", 0) for u in sub.execution_units)
    return {k: sum(u.estimate[k] for u in sub.execution_units) for k in (*units.RESOURCES, *units.CYCLES)} \
        | ({"uram": uram} if uram else {})


def _unit_setting(loaded: LoadedModel, unit: units.Unit, flag: str, settings: Mapping[str, Any]
                  ) -> Optional[tuple[str, Any]]:
    """(node, value) of the one node of ``unit`` that a per-node setting names; None: no node of it. A unit
    takes one value: two nodes of it named is a mistake."""
    given = [(n, settings[n]) for n in (loaded.graph.nodes[i].name for i in unit.nodes) if n in settings]
    if len(given) > 1:
        raise UserError(f"{flag}: nodes '{given[0][0]}' and '{given[1][0]}' are one execution unit; give one of them")
    return given[0] if given else None


def _pinned_precision(loaded: LoadedModel, unit: units.Unit, options: BuildOptions,
                      node_bits: Sequence[int]) -> tuple[int, Optional[int]]:
    """(bits, integer bits or None) of ``unit``'s values: --precision's for a node of it, else its first
    node's ``node_bits`` (``node_widths``: its quantizers' in a quantized model, else --error-budget's, else
    --width's)."""
    given = _unit_setting(loaded, unit, "--precision", options.precisions)
    if given is not None and "result" in given[1]:
        return given[1]["result"]
    return node_bits[unit.nodes[0]], None


def _unit_precision(loaded: LoadedModel, unit: units.Unit, options: BuildOptions,
                    node_bits: Sequence[int]) -> str:
    """The unit's output type as far as planning knows it (HLS generation sizes unpinned ones)."""
    width, integer = _pinned_precision(loaded, unit, options, node_bits)
    return f"ap_fixed<{width},{6 if integer is None else integer}>"


def _unit_shape(loaded: LoadedModel, unit: units.Unit, device: Device, options: BuildOptions,
                band: Optional[Band] = None) -> units.Shape:
    """``unit``'s shape as the estimates see it at the FPGA's clock and HLS tool, run in ``band``s (None: whole),
    with what --io-type, --table-size and --precision's layer types pin of it."""
    shape = units.unit_shape(loaded.graph, unit, device.clock_mhz, _pinned_io_type(loaded, unit, options),
                             device.hls_tool)
    shape = units.banded(shape, band) if band is not None else shape
    return _pinned_layer_types(loaded, unit, _pinned_tables(loaded, unit, shape, options), options)


def _unit_band(loaded: LoadedModel, unit: units.Unit, device: Device, width: int,
               options: BuildOptions) -> Optional[Band]:
    """The bands ``unit`` runs in: --band-rows's, else ``units.chosen_band``'s (for a unit whose whole-map FIFOs
    take too much of the chip's BRAM18s); None: whole."""
    given = _unit_setting(loaded, unit, "--band-rows", options.band_rows)
    on_engine = _unit_setting(loaded, unit, "--strategy", options.strategies)
    if on_engine is not None and on_engine[1] == units.ENGINE:  # the engine reads its buffers wherever they are
        if given is not None:
            node, rows = given
            raise UserError(f"{said(options, '--band-rows', node, rows, f'--band-rows {node}={rows}')}: node "
                            f"'{node}' runs on the engine (--strategy {on_engine[0]}=engine), which needs no bands")
        return None
    if given is None:
        whole = _unit_shape(loaded, unit, device, options)
        return units.chosen_band(loaded.graph, unit, whole, device.budget(), width)
    node, rows = given
    try:
        return units.band_of(loaded.graph, unit, rows)
    except ValueError as why:
        raise UserError(f"{said(options, '--band-rows', node, rows, f'--band-rows {node}={rows}')}: node '{node}' "
                        f"cannot run in bands: {why}") from None


def _pinned_layer_types(loaded: LoadedModel, unit: units.Unit, shape: units.Shape,
                        options: BuildOptions) -> units.Shape:
    """``shape`` with the weights' bits --precision's weight type gives ``unit`` (its weights rounded to
    them, as a quantized model's are, each code's bits counted under that type's integer part) and the
    accumulator's bits its accum type gives; the weight, bias and accum kinds need a multiply-accumulate unit."""
    given = _unit_setting(loaded, unit, "--precision", options.precisions)
    layer_kinds = [kind for kind in (given[1] if given else {}) if kind != "result"]
    if not layer_kinds:
        return shape
    node, types = given
    if not units.kind_of(shape).foldable:
        raise UserError(f"{said(options, '--precision', node, types, '--precision ' + node)}: node '{node}' has no "
                        f"multiply-accumulate layer to give the {layer_kinds[0]} type (its unit runs on the {unit.pe} PE)")
    pinned = {field: types[kind][0] for kind, field in (("weight", "weight_bits"), ("accum", "accum_bits"))
              if kind in types}
    if "weight" in types and shape.weight_integer is not None:
        pinned.update(weight_octaves=octaves_moved(shape.weight_octaves, shape.weight_integer, types["weight"][1]),
                      weight_integer=types["weight"][1])
    return dataclasses.replace(shape, **pinned)


def _pinned_io_type(loaded: LoadedModel, unit: units.Unit, options: BuildOptions) -> Optional[str]:
    """The hls4ml IOType --io-type fixes for ``unit``; None: none."""
    given = _unit_setting(loaded, unit, "--io-type", options.io_types)
    if given is None:
        return None
    node, io_type = given
    if unit.engine == "top":
        setting = said(options, "--io-type", node, io_type, f"--io-type {node}={io_type.removeprefix('io_')}")
        raise UserError(f"{setting}: node '{node}' ({loaded.graph.nodes[unit.nodes[0]].op}) is implemented by the "
                        f"subfunction's top itself (no hls4ml project)")
    return io_type


def _pinned_tables(loaded: LoadedModel, unit: units.Unit, shape: units.Shape, options: BuildOptions) -> units.Shape:
    """``shape`` with the table size --table-size gives a node of ``unit``."""
    given = _unit_setting(loaded, unit, "--table-size", options.table_sizes)
    if given is None:
        return shape
    node, size = given
    if not (shape.table_layers or shape.softmax):
        raise UserError(f"{said(options, '--table-size', node, size, f'--table-size {node}={size}')}: the unit holding "
                        f"node '{node}' has no lookup table (no Softmax or {', '.join(sorted(units.TABLE_OPS))})")
    return dataclasses.replace(shape, table_entries=size)


def _pinned_strategy(loaded: LoadedModel, unit: units.Unit, shape: units.Shape,
                     options: BuildOptions) -> Optional[str]:
    """The hls4ml Strategy --strategy fixes for ``unit``; None: none. A unit of a PE only the engine implements (a
    convolution hls4ml has no layer for) runs on the engine."""
    given = _unit_setting(loaded, unit, "--strategy", options.strategies)
    if unit.engine == "engine":
        main = loaded.graph.nodes[unit.nodes[0]].name
        if options.no_engine:
            raise UserError(f"--no-engine: node '{main}' runs only on the engine (hls4ml has no layer for a "
                            f"{loaded.graph.nodes[unit.nodes[0]].op} like it); let the engine run, or pin the node "
                            f"to a CPU with --device {main}=...")
        if given is not None and given[1] != units.ENGINE:
            raise UserError(f"{said(options, '--strategy', given[0], given[1], f'--strategy {given[0]}')}: node "
                            f"'{given[0]}' runs only on the engine (hls4ml has no layer for it)")
        return units.ENGINE
    if given is None:
        return None
    node, strategy = given
    setting = said(options, '--strategy', node, strategy, f'--strategy {node}={strategy_name(strategy)}')
    if not units.kind_of(shape).foldable:
        raise UserError(f"{setting}: node '{node}' has no multiplications for a strategy to lay out (its unit runs "
                        f"on the {unit.pe} PE)")
    if strategy == units.ENGINE and (why := units.engine_refusal(loaded.graph, unit)) is not None:
        raise UserError(f"{setting}: node '{node}' cannot run on the engine: {why}")
    if strategy == units.ENGINE and (types := _unit_setting(loaded, unit, "--precision", options.precisions)):
        raise UserError(f"{said(options, '--precision', types[0], types[1], '--precision ' + types[0])}: node "
                        f"'{types[0]}' runs on the engine (--strategy {node}=engine), which sizes its weights' and "
                        f"output's binary points itself at the unit's width (--width)")
    if shape.latency_only and strategy not in ("Latency", units.ENGINE):
        raise UserError(f"{setting}: node '{node}' runs as a depthwise convolution (or an average pooling), which "
                        f"hls4ml 1.3 computes right only under the latency strategy; leave it to latency")
    if strategy == units.XNOR_POPCOUNT and not units.takes_xnor_popcount(shape):
        raise UserError(f"{setting}: node '{node}' is not a layer of signs the xnor_popcount kernel computes as XNORs "
                        f"(a dense layer or an unpadded streamed convolution, its weights each -1 or +1, its input a "
                        f"BipolarQuant's of scale 1)")
    if strategy == units.DISTRIBUTED_ARITHMETIC and importlib.util.find_spec("da4ml") is None:
        raise UserError(f"{setting}: hls4ml's distributed_arithmetic strategy needs da4ml (pip install "
                        f"'hetdeploy[open-synth]')")
    return strategy


def _pinned_folding(loaded: LoadedModel, unit: units.Unit, shape: units.Shape, options: BuildOptions,
                    rate: float, strategy: Optional[str]) -> Optional[units.Folding]:
    """What --reuse-factor, --model-reuse-factor and --weights-in-ddr fix of ``unit``'s folding, under the
    ``strategy`` --strategy pinned (None: by the reuse factor); None: nothing."""
    names = [loaded.graph.nodes[i].name for i in unit.nodes]
    in_ddr = [n for n in names if n in options.weights_in_ddr]
    given = _unit_setting(loaded, unit, "--reuse-factor", options.reuse_factors)
    if strategy == units.ENGINE:  # its weights are in DDR; it has no reuse factor
        if given:
            node, rf = given
            raise UserError(f"{said(options, '--reuse-factor', node, rf, f'--reuse-factor {node}={rf}')}: node "
                            f"'{node}' runs on the engine (--strategy engine), which folds by its lanes, not a reuse "
                            f"factor")
        return None
    strategy = "Latency" if shape.latency_only else strategy
    if in_ddr and strategy in ("Latency", units.DISTRIBUTED_ARITHMETIC):
        setting = said(options, "--weights-in-ddr", in_ddr[0], None, "--weights-in-ddr")
        why = ("runs as a depthwise convolution, which hls4ml 1.3 computes right only under the latency strategy"
               if shape.latency_only else f"has --strategy {strategy_name(strategy)}")
        raise UserError(f"{setting}: node '{in_ddr[0]}' {why}, which keeps the weights as constants in the fabric; "
                        f"weights in DDR are read a bank at a time (resource)")
    if not given and not in_ddr and options.model_reuse_factor is not None and units.kind_of(shape).foldable:
        # the nearest valid one, as hls4ml picks (ties: the smaller)
        valid = units.candidate_reuse_factors(shape, options.width)
        return units.Folding(min(valid, key=lambda rf: (abs(rf - options.model_reuse_factor), rf)), False, strategy)
    if not given and not in_ddr:
        return None
    if not units.kind_of(shape).foldable:
        flag, node, value = ("--reuse-factor", *given) if given else ("--weights-in-ddr", in_ddr[0], None)
        valid = units.candidate_reuse_factors(shape, options.width)
        if given and not in_ddr and value in valid:  # a top's op whose lanes share multipliers (the affine's)
            return units.Folding(value, False, strategy)
        what = (f"folds only to reuse factors {', '.join(map(str, valid))} (a word's lanes sharing multipliers) and "
                f"has no weights to move" if len(valid) > 1 else
                "has no multiplications to fold and no weights to move")
        raise UserError(f"{said(options, flag, node, value, flag)}: node '{node}' {what} (its unit runs on the "
                        f"{unit.pe} PE)")
    if not given:
        return units.ddr_folding(shape, options.width, rate)
    node, rf = given
    products = shape.n_in * shape.n_out
    setting = said(options, "--reuse-factor", node, rf, f"--reuse-factor {node}={rf}")
    folding = units.Folding(rf, bool(in_ddr), strategy)
    if folding.hls_strategy == units.DISTRIBUTED_ARITHMETIC and rf != 1:
        raise UserError(f"{setting}: node '{node}' has --strategy distributed_arithmetic, which hls4ml runs at reuse "
                        f"factor 1 only (every product its own shifts and adds)")
    if folding.hls_strategy == "Latency" and rf > products:
        raise UserError(f"{setting}: above the layer's {products} products ({shape.n_in} inputs x {shape.n_out} "
                        f"outputs), the most a reuse factor can fold")
    if rf not in (valid := units.reuse_factors_for(shape, folding.hls_strategy)):
        why = ("" if strategy else " (with its weights in DDR)" if in_ddr else
               f" (the default from reuse factor {units.BRAM_MIN_DEPTH}; --strategy {node}=latency takes any)")
        raise UserError(f"{setting}: {rf} does not divide the layer ({shape.n_in} inputs x {shape.n_out} outputs = "
                        f"{products} products) as hls4ml requires under the resource strategy{why}; valid: "
                        f"{', '.join(map(str, valid))}")
    return folding
