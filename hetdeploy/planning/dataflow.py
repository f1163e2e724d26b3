"""Stage 3c: an FPGA subfunction's units as a dataflow, concurrent processes linked by FIFOs: each FIFO's depth
from the processes' schedules, and a cycle-level simulation that checks them (no RTL).

hls4ml's io_stream and FINN's dataflow designs run their layers at once, a sample (or a pixel) in flight in each,
linked by FIFOs whose depths both tools find by simulating the RTL, which takes hours or times out (FINN issues
1435 and 1457). hetdeploy knows each process's schedule instead: the order in which it reads and writes tokens (a
pixel's word, a flat tensor's vector) and the least cycles between two of them (its loop's II, its pipeline's
depth), the same each sample. From that, with the time of an op the later of its process's previous op plus its
gap and what its FIFO allows (a read the cycle after its token was written; a write, when the FIFO is full, the
cycle after the read that freed a slot):

- ``free_schedule``: every op's time when no FIFO is ever full, each process in topological order, every
  process paced at the dataflow's interval (a sample no sooner than that after its previous one: the slowest
  process's own cycles a sample, at which the processes, making no cycle but each its own, run in the steady
  state; a faster one would only fill its FIFO and wait);
- ``fifo_depths``: each FIFO's depth, the most tokens it holds in that schedule (a skip connection's FIFO holds
  what its writer writes while the longer path catches up: their latency difference at its rate);
- ``simulate``: the schedule under given depths, each process advancing while its FIFOs allow, every op as early
  as they do; ``check``: a deadlock (no process can go on), or an op later than in the paced free schedule (so a
  sample later, or the slowest process starved: a stall), reported by the FIFO's name.
Pure functions over plain data (no onnx, no hls4ml).
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence


@dataclass(frozen=True)
class Op:
    """A process's read or write of one token of ``fifo``, at least ``gap`` cycles after its previous op."""

    fifo: str
    write: bool
    gap: int = 1


@dataclass(frozen=True)
class Process:
    """A unit as a dataflow process: its ops for one sample, in order, repeated for each sample, and the cycles it
    works on a sample after its last op (``tail``: the output process converting a sample's values to floats)."""

    name: str
    ops: tuple[Op, ...]
    tail: int = 0

    @property
    def interval(self) -> int:
        """Its cycles a sample when no FIFO holds it back: the gaps of a sample's ops and its tail."""
        return sum(op.gap for op in self.ops) + self.tail


def whole_ops(reads: Sequence[tuple[str, int, int]], writes: Sequence[str], tokens: int, compute: int,
              words: int = 0) -> tuple[Op, ...]:
    """A process that reads every token of its inputs (``reads``: each FIFO, its tokens a sample and the words of
    a token), computes ``compute`` cycles, then writes its ``tokens`` output tokens, each to every FIFO of
    ``writes`` (its readers'): an io_parallel unit, or an op over whole buffers. A token a cycle; ``words`` (an
    output token's) given, a word a cycle, each token copied to or from a buffer of words (the top's own ops)."""
    ops = [Op(fifo, False, size if words else 1) for fifo, count, size in reads for _ in range(count)]
    step = max(1, words)
    for k in range(tokens):
        gap = compute + step - 1 if k == 0 else step
        ops += [Op(fifo, True, gap if j == 0 else 0) for j, fifo in enumerate(writes)]
    return tuple(ops)


def loop_ops(iterations: int, interval: int, lag: int, reads: Sequence[tuple[str, Sequence[int]]],
             writes: Sequence[str], emits: Sequence[int]) -> tuple[Op, ...]:
    """A pipelined loop of ``iterations`` at ``interval`` cycles (its II) that reads a token of each FIFO of
    ``reads`` at the iterations listed beside it, and writes an output token (to every FIFO of ``writes``) ``lag``
    iterations after each iteration of ``emits`` (its pipeline's depth); iterations that neither read nor write
    still take their cycles."""
    reading: dict[int, list[str]] = {}
    for fifo, at in reads:
        for i in at:
            reading.setdefault(i, []).append(fifo)
    emitting: dict[int, int] = {}
    for i in emits:
        emitting[i + lag] = emitting.get(i + lag, 0) + 1
    ops: list[Op] = []
    waited = 0
    for i in range(max(iterations, max(emitting, default=-1) + 1)):  # the drain's iterations after the loop's
        waited += interval
        for fifo in reading.get(i, []):
            ops.append(Op(fifo, False, waited))
            waited = 0
        for _ in range(emitting.get(i, 0)):
            ops += [Op(fifo, True, waited if j == 0 else 0) for j, fifo in enumerate(writes)]
            waited = 0
    if waited and ops:  # the last iterations' cycles before the next sample's first op
        ops[0] = Op(ops[0].fifo, ops[0].write, ops[0].gap + waited)
    return tuple(ops)


@dataclass
class Schedule:
    """The ops' times of ``samples`` samples: each FIFO's writes and reads in token order, each process's first
    and last op of each sample; under ``simulate``, the cycles writes waited for a full FIFO (by FIFO) and why no
    process could go on ("" when every process finished)."""

    samples: int
    writes: dict[str, list[int]]
    reads: dict[str, list[int]]
    starts: dict[str, list[int]]
    ends: dict[str, list[int]]
    stalls: dict[str, int] = field(default_factory=dict)
    deadlock: str = ""

    @property
    def latency(self) -> int:
        """Cycles from the first op of the first sample to its last op anywhere."""
        return max(e[0] for e in self.ends.values()) - min(s[0] for s in self.starts.values())

    @property
    def interval(self) -> int:
        """Cycles between the last two samples' ends (the steady state's interval; the latency for one sample)."""
        if self.samples < 2:
            return self.latency
        return max(e[-1] for e in self.ends.values()) - max(e[-2] for e in self.ends.values())


class DataflowError(ValueError):
    """Processes that are no dataflow: a FIFO with no writer or reader or two of either, tokens written and read
    in different numbers a sample, or a cycle of FIFOs."""


def _links(processes: Sequence[Process]) -> tuple[dict[str, str], dict[str, str]]:
    """Each FIFO's writer and reader, checked: one of each, as many tokens written as read a sample."""
    writer: dict[str, str] = {}
    reader: dict[str, str] = {}
    counts: dict[str, list[int]] = {}
    for p in processes:
        for op in p.ops:
            ends = writer if op.write else reader
            if ends.setdefault(op.fifo, p.name) != p.name:
                raise DataflowError(f"FIFO '{op.fifo}' has two {'writers' if op.write else 'readers'}: "
                                    f"'{ends[op.fifo]}' and '{p.name}'")
            counts.setdefault(op.fifo, [0, 0])[op.write] += 1
    for fifo, (read, written) in counts.items():
        if fifo not in writer or fifo not in reader:
            raise DataflowError(f"FIFO '{fifo}' has no {'writer' if fifo not in writer else 'reader'}")
        if read != written:
            raise DataflowError(f"FIFO '{fifo}': '{writer[fifo]}' writes {written} tokens a sample, '{reader[fifo]}' "
                                f"reads {read}")
    return writer, reader


def _topological(processes: Sequence[Process], writer: Mapping[str, str]) -> list[Process]:
    """The processes, each after the writers of the FIFOs it reads (DataflowError on a cycle)."""
    after = {p.name: {writer[op.fifo] for op in p.ops if not op.write} for p in processes}
    done: set[str] = set()
    order: list[Process] = []
    while len(order) < len(processes):
        ready = [p for p in processes if p.name not in done and after[p.name] <= done]
        if not ready:
            raise DataflowError("the FIFOs make a cycle through " + ", ".join(
                sorted(p.name for p in processes if p.name not in done)))
        for p in ready:
            done.add(p.name)
            order.append(p)
    return order


def free_schedule(processes: Sequence[Process], samples: int) -> Schedule:
    """Every op's time for ``samples`` samples when no FIFO is ever full, each process starting a sample no sooner
    than the dataflow's interval (its slowest process's) after its previous one."""
    writer, _ = _links(processes)
    pace = max(p.interval for p in processes)
    schedule = Schedule(samples, {f: [] for f in writer}, {f: [] for f in writer}, {}, {})
    for p in _topological(processes, writer):
        time = 0
        starts, ends = schedule.starts.setdefault(p.name, []), schedule.ends.setdefault(p.name, [])
        for sample in range(samples):
            for k, op in enumerate(p.ops):
                time += op.gap
                if k == 0 and sample:
                    time = max(time, starts[0] + sample * pace)
                if op.write:
                    schedule.writes[op.fifo].append(time)
                else:
                    reads = schedule.reads[op.fifo]
                    time = max(time, schedule.writes[op.fifo][len(reads)] + 1)
                    reads.append(time)
                if k == 0:
                    starts.append(time)
            time += p.tail
            ends.append(time)
    return schedule


def fifo_depths(schedule: Schedule) -> dict[str, int]:
    """Each FIFO's depth: the most tokens it holds at a write of ``schedule`` (a slot is free the cycle after its
    token was read), at least one."""
    depths = {}
    for fifo, writes in schedule.writes.items():
        reads = schedule.reads[fifo]
        depths[fifo] = max([1] + [n + 1 - bisect.bisect_right(reads, at - 1) for n, at in enumerate(writes)])
    return depths


def simulate(processes: Sequence[Process], depths: Mapping[str, int], samples: int) -> Schedule:
    """The schedule of ``samples`` samples with FIFOs of ``depths`` tokens: each process advances while its FIFOs
    allow, until all finish or none can go on (``Schedule.deadlock``); a write that waited for a full FIFO is a
    stall of that FIFO."""
    writer, reader = _links(processes)
    schedule = Schedule(samples, {f: [] for f in writer}, {f: [] for f in writer},
                        {p.name: [] for p in processes}, {p.name: [] for p in processes})
    by_name = {p.name: p for p in processes}
    position = {p.name: 0 for p in processes}  # ops done, over all samples
    time = {p.name: 0 for p in processes}
    waiting: dict[str, str] = {}  # FIFO -> the process waiting for it
    runnable = deque(p.name for p in processes)
    while runnable:
        name = runnable.popleft()
        p = by_name[name]
        while position[name] < samples * len(p.ops):
            k = position[name] % len(p.ops)
            op = p.ops[k]
            writes, reads = schedule.writes[op.fifo], schedule.reads[op.fifo]
            earliest = time[name] + op.gap
            if op.write:
                freed = len(writes) - depths[op.fifo]  # the token whose read frees the slot
                if freed >= 0 and len(reads) <= freed:
                    waiting[op.fifo] = name
                    break
                at = max(earliest, reads[freed] + 1) if freed >= 0 else earliest
                if at > earliest:
                    schedule.stalls[op.fifo] = schedule.stalls.get(op.fifo, 0) + at - earliest
                writes.append(at)
                other = reader[op.fifo]
            else:
                if len(writes) <= len(reads):
                    waiting[op.fifo] = name
                    break
                at = max(earliest, writes[len(reads)] + 1)
                reads.append(at)
                other = writer[op.fifo]
            time[name] = at
            position[name] += 1
            if k == 0:
                schedule.starts[name].append(at)
            if k == len(p.ops) - 1:
                time[name] += p.tail
                schedule.ends[name].append(time[name])
            if waiting.get(op.fifo) == other:  # the process waiting on the other end of this FIFO may go on
                del waiting[op.fifo]
                runnable.append(other)
    if waiting:
        schedule.deadlock = _deadlock(waiting, writer, reader, depths)
    return schedule


def _deadlock(waiting: Mapping[str, str], writer: Mapping[str, str], reader: Mapping[str, str],
              depths: Mapping[str, int]) -> str:
    """What a deadlock's waits come down to: each full FIFO whose reader waits to read another one (the
    writers behind it wait on those)."""
    reading = {name: f for f, name in waiting.items() if reader[f] == name}
    full = sorted(f for f, name in waiting.items() if writer[f] == name)
    causes = [f for f in full if reader[f] in reading] or full
    return "deadlock: " + "; ".join(
        f"FIFO '{f}' full at its depth {depths[f]}: '{writer[f]}' waits to write it"
        + (f" while '{reader[f]}' waits to read FIFO '{reading[reader[f]]}'" if reader[f] in reading else "")
        for f in causes)


def check(processes: Sequence[Process], depths: Mapping[str, int], samples: int = 6) -> Optional[str]:
    """Why FIFOs of ``depths`` do not carry the processes' paced free schedule over ``samples`` samples: a deadlock,
    or a stall (ops later than there: a sample later, or the slowest process starved) naming the FIFOs too shallow
    for it; None when they carry it (every op as soon, a sample each slowest process's interval)."""
    run = simulate(processes, depths, samples)
    if run.deadlock:
        return run.deadlock
    free = free_schedule(processes, samples)
    writer, _ = _links(processes)
    # too shallow: a FIFO whose write came later than in the free schedule, the cycle after the read that freed its
    # slot, that read on time (a FIFO whose reader was late only passes the wait on)
    full = []
    for fifo, writes in run.writes.items():
        reads, depth = run.reads[fifo], depths[fifo]
        freed = [(n, at, reads[n - depth]) for n, at in enumerate(writes) if n >= depth]
        if any(at > free.writes[fifo][n] and at == read + 1 and read <= free.reads[fifo][n - depth]
               for n, at, read in freed):
            full.append(fifo)
    if full:
        return "stall: " + "; ".join(f"FIFO '{f}' full at its depth {depths[f]}: '{writer[f]}' waited "
                                     f"{run.stalls.get(f, 0)} cycles to write it" for f in full)
    return None
