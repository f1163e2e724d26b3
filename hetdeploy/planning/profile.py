"""Profiles (``hetdeploy plan|build --profile FILE.json``): what a run measured, in place of the
board file's figures for the nodes, FPGA calls and links it covers.

``run.py --profile`` on the board and ``hetdeploy emulate --profile`` on a host write the format
(``board_runtime.profile_document``; docs/memory.md: Profiles). What the cost model takes from it:

- every CPU or GPU node the profile timed (onnxruntime's profiler), by name, as that node's seconds
  a sample on that device, whoever measured it (an emulation's are the host's, standing in for the
  board's cores: ``plan`` says so);
- per CPU or GPU device, what a call of its subfunctions took beyond their nodes' times (the mean
  call less its samples' node seconds: onnxruntime's session and the copies around it), measured
  the same way, in place of the board file's ``invocation_overhead_s``;
- measured on the board only (``on_board``): each FPGA subfunction's core time against the compute
  its build estimated, as a factor on the estimates of its nodes on that FPGA, its call's time beyond
  the core and the host's copies as that FPGA's call overhead, and each link's seconds per byte (the
  host's copies into and out of the core's buffers) in place of the board file's bandwidth and
  latency. An emulation's FPGA figures are C-simulation's and never used.

A profile of an older build of the model is used for the nodes it names that the model still has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core.errors import UserError
from ..core.plan import MeasuredFigures, load_json

FORMAT, VERSION = "hetdeploy-profile", 1
HOST = "host"  # a link's end on the board's host CPU, whatever the board names it


@dataclass(frozen=True)
class Measured:
    """A profile's figures as the cost model takes them (``read_profile``)."""

    node_seconds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # device -> node -> s a sample
    fpga_factors: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # device -> node -> measured/estimated
    link_seconds_per_byte: Mapping[tuple[str, str], float] = field(default_factory=dict)  # (source, target)
    call_overhead_s: Mapping[str, float] = field(default_factory=dict)  # device -> seconds a call
    figures: MeasuredFigures | None = None  # what plan.json and ``plan`` say of it


NOTHING_MEASURED = Measured()


def read_profile(path: Path | str, board: str, host: str, devices: Sequence[str], nodes: Sequence[str]) -> Measured:
    """The profile at ``path`` for a plan of ``nodes`` on board ``board`` (its host CPU ``host``, its
    ``devices``); one line naming the file and the key for anything wrong."""
    data = load_json(Path(path), "profile", "no such file (--profile)")
    return measured(data, str(path), board, host, devices, nodes)


def measured(data: Any, file: str, board: str, host: str, devices: Sequence[str], nodes: Sequence[str]) -> Measured:
    """``read_profile`` of the profile's parsed JSON ``data`` (``file`` names it in errors)."""
    def wrong(key: str, problem: str) -> UserError:
        return UserError(f"{file}: key '{key}': {problem}")

    if not isinstance(data, dict):
        raise UserError(f"{file}: not a hetdeploy profile (expected an object with format '{FORMAT}')")
    if data.get("format") != FORMAT:
        raise wrong("format", f"{data.get('format')!r}, expected '{FORMAT}' (written by run.py --profile or "
                              f"hetdeploy emulate --profile)")
    if data.get("version") != VERSION:
        raise wrong("version", f"{data.get('version')!r}, this hetdeploy reads {VERSION}")
    if data.get("board") != board:
        raise wrong("board", f"a profile of board {data.get('board')!r}, not of '{board}' (this plan's): record one "
                             f"on {board}")
    on_board = _typed(data, "on_board", bool, wrong)
    recorded_by = _typed(data, "recorded_by", str, wrong)
    machine = _typed(data, "machine", dict, wrong)
    subs = _typed(data, "subfunctions", list, wrong)
    links = _typed(data, "links", list, wrong)
    known = set(nodes)
    named: set[str] = set()
    node_seconds: dict[str, dict[str, float]] = {}
    fpga_factors: dict[str, dict[str, float]] = {}
    overheads: dict[str, list[float]] = {}
    for k, sub in enumerate(subs):
        where = f"subfunctions[{k}]"
        if not isinstance(sub, dict):
            raise wrong(where, "expected an object")
        device = _typed(sub, "device", str, wrong, where)
        if device not in devices:
            raise wrong(f"{where}.device", f"no device '{device}' on board '{board}' (its devices: "
                                           f"{', '.join(devices)})")
        kind = _typed(sub, "kind", str, wrong, where)
        if kind == "fpga":
            listed = _typed(sub, "nodes", list, wrong, where)
            if not all(isinstance(n, str) for n in listed):
                raise wrong(f"{where}.nodes", "expected a list of node names")
            named.update(listed)
            core = _time(sub, "core_seconds", wrong, where, optional=True)
            estimated = _time(sub, "estimated_compute_seconds", wrong, where)
            per_call = _time(sub, "samples_per_call", wrong, where)
            if on_board and core is not None and estimated > 0 and per_call > 0:
                factor = core / per_call / estimated
                fpga_factors.setdefault(device, {}).update({n: factor for n in listed if n in known})
            call = _time(sub, "call_seconds", wrong, where, optional=True)
            copies = [_time(sub, key, wrong, where, optional=True) for key in ("copy_in_seconds", "copy_out_seconds")]
            if on_board and None not in (call, core, *copies):  # the call less its core and the host's copies
                overheads.setdefault(device, []).append(max(0.0, call - core - sum(copies)))
        else:
            timed = _typed(sub, "nodes", dict, wrong, where)
            for node in timed:
                seconds = _time(timed, node, wrong, f"{where}.nodes")
                named.add(node)
                if node in known:
                    node_seconds.setdefault(device, {})[node] = seconds
            call = _time(sub, "call_seconds", wrong, where, optional=True)
            per_call = _time(sub, "samples_per_call", wrong, where)
            if call is not None and timed and per_call > 0:  # the profiler's pass is its own: never below 0
                overheads.setdefault(device, []).append(max(0.0, call - per_call * sum(timed.values())))
    if not named & known:
        some = ", ".join(sorted(named)[:3]) or "none"
        raise UserError(f"{file}: names no node of this model (it times {some}{', ...' if len(named) > 3 else ''}); "
                        f"a profile of another model?")
    link_seconds: dict[tuple[str, str], list[float]] = {}
    for k, link in enumerate(links):
        where = f"links[{k}]"
        if not isinstance(link, dict):
            raise wrong(where, "expected an object")
        ends = []
        for end in ("from", "to"):
            name = _typed(link, end, str, wrong, where)
            if name != HOST and name not in devices:
                raise wrong(f"{where}.{end}", f"no device '{name}' on board '{board}'")
            ends.append(host if name == HOST else name)
        moved = _time(link, "bytes", wrong, where)
        seconds = _time(link, "seconds", wrong, where, optional=True)
        compressed = link.get("compressed_tensors", 0)
        if isinstance(compressed, bool) or not isinstance(compressed, int) or compressed < 0:
            raise wrong(f"{where}.compressed_tensors", f"expected a whole number of at least 0, got {compressed!r}")
        # a zero-compressed tensor's copies hold the codec's time and its bytes are the raw ones: no link figure
        if on_board and seconds is not None and moved > 0 and not compressed:
            total = link_seconds.setdefault((ends[0], ends[1]), [0.0, 0.0])
            total[0] += seconds
            total[1] += moved
    where_measured = (f"on the board ({recorded_by})" if on_board else
                      f"on the host {machine.get('host', '?')} ({machine.get('machine', '?')}, {recorded_by}), "
                      f"standing in for the board's CPUs")
    call_overhead = {d: sum(o) / len(o) for d, o in sorted(overheads.items())}
    figures = MeasuredFigures(
        file=Path(file).name, recorded_by=recorded_by, measured_on=where_measured,
        nodes={d: sorted(n) for d, n in node_seconds.items()},
        fpga_nodes={d: dict(sorted(n.items())) for d, n in fpga_factors.items()},
        links=sorted(f"{a}->{b}" for a, b in link_seconds),
        ignored_nodes=sorted(named - known), call_overhead_s=call_overhead)
    return Measured({d: dict(n) for d, n in node_seconds.items()}, fpga_factors,
                    {ends: s / b for ends, (s, b) in link_seconds.items()}, call_overhead, figures)


def _typed(data: dict, key: str, kind: type, wrong, where: str = "") -> Any:
    full = f"{where}.{key}" if where else key
    if key not in data:
        raise wrong(full, "missing")
    if not isinstance(data[key], kind):
        raise wrong(full, f"{data[key]!r}: expected {'true or false' if kind is bool else 'a ' + kind.__name__}")
    return data[key]


def _time(data: dict, key: str, wrong, where: str, optional: bool = False) -> float | None:
    """A measured figure: a finite number, 0 or more (None where ``optional`` allows null)."""
    full = f"{where}.{key}"
    if key not in data:
        raise wrong(full, "missing")
    value = data[key]
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise wrong(full, f"{value!r}: expected a finite number, 0 or more")
    return float(value)
