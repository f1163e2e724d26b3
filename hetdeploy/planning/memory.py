"""Stage 4b: buffers of an FPGA subfunction and where they live in its memories.

``plan_memory`` is the policy over a plan: the BRAM the units leave free is the target memory of the
device's subfunctions, in plan order; then its URAM (UltraScale+ parts); then the reserve; then DDR.
Below it, pure functions over plain data (no onnx, no hls4ml; numpy for the lower bound). A
subfunction runs its execution units one after the other (schedule step k = unit k). A buffer is a
tensor the units exchange: a subfunction input (written by the top before step 0), or a unit's
output; it is live from the step that writes it to the last step that reads it, and a subfunction
output stays live to the last step (the top reads it after every unit ran). Two buffers may share
bytes only when their lifetimes are disjoint.

Memories, tried in this order for every buffer: the BRAM target memory (what the FPGA's budget
leaves after the units' weights and FIFOs), the URAM (the budget's URAM288 blocks, 32 KiB each: 4,096
of its 72-bit words' 64 data bits, a 128-bit arena word in two side by side, less those of the engines'
weight buffers: no hls4ml unit uses them), the reserved pool (the board's reserve: used only when the
target is short, and reported) and DDR (unbounded; its traffic costs time).

Strategies (``place``):
- ``refcount``, the seed's rule: buffers are taken in schedule order; each gets the first block
  (in creation order) whose usage count has dropped to 0 (every consumer of its last buffer ran)
  and which is large enough, else a new block of its size at the end of the pool; a block keeps its
  size for good;
- ``greedy``: offsets, largest buffer first, each into the best-fitting gap left by the buffers
  already placed that are live at the same time (TFLite's arena planner);
- ``fastest``: no reuse: every buffer its own range, in schedule order.
When greedy spills out of a bounded pool that the lower bound says could hold everything, or
(unbounded) is above the lower bound, an exact depth-first search (``fit``, after MiniMalloc,
Moffitt, ASPLOS 2023; C++ compiled with g++, exact_packing.cpp) looks for a placement within the
pool, or on the lower bound; when that search runs out of nodes, a seeded hill climb over greedy's
order follows (swap two buffers, keep what is no worse; greedy and the climb in C++ as well,
greedy_packing.cpp).
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from ..core.board import BRAM18_BITS, URAM_BYTES, Board
from ..core.board_runtime import port_values
from ..core.errors import UserError
from ..core.graph import Graph
from ..core.plan import Buffer, ExecutionUnit, MemoryPlan, Plan, Subfunction
from . import packing, units
from .cost import FLOAT_BYTES

STRATEGIES = ("refcount", "greedy", "fastest")
MEMORIES = ("bram", "uram", "reserved", "ddr")
# The bytes each unit's DDR weights region starts on: a word of the engine's widest weights port
WEIGHTS_ALIGNMENT = units.ENGINE_PORT_MAX_WORDS * units.ARENA_WORD_BYTES
# The hill climb after greedy: at most this many tries, and at most CLIMB_WORK / buffers of them
# (each try is a full greedy pass).
CLIMB_STEPS, CLIMB_WORK = 1000, 200_000
# The exact search: at most this many nodes (one buffer placed each) over all its orders.
SEARCH_NODES = 1_000_000
# ... and when only the footprint is at stake (no pool to fit), a shorter one at the lower bound.
FOOTPRINT_SEARCH_NODES = 20_000
# The static orders the search takes turns with (ties in offset go to the buffer first in the
# order), in exact_packing.cpp's keys, compared in turn, each largest first: T the most unplaced
# bytes in one section of the buffer's lifetime, C the sections it spans (a section: a maximal set
# of buffers live at one moment), A its size x sections, L its first section (earliest first).
# Every key counts sections, never raw time: the search, like greedy, gives the same answer however
# time is numbered. MiniMalloc's orders are these with raw lifetimes for C and A.
SEARCH_ORDERS = ("TCA", "TAC", "CAT", "TC", "LCA")


@dataclass(frozen=True)
class Lifetime:
    tensor: str
    first: int
    last: int


class Request(NamedTuple):
    size: int
    first: int
    last: int  # inclusive


class Placement(NamedTuple):  # a tuple: built once per buffer, on the planner's hot path
    memory: str  # one of MEMORIES
    offset: int


def lifetimes(steps: Sequence[tuple[Sequence[str], Sequence[str]]], inputs: Sequence[str],
              outputs: Sequence[str]) -> list[Lifetime]:
    """``steps``: per schedule step, the tensors its unit reads and writes. Buffers in the order
    they are first written (inputs first), each live from its first write to its last read."""
    end = len(steps) - 1
    first: dict[str, int] = {t: 0 for t in inputs}
    last: dict[str, int] = {t: 0 for t in inputs}
    for step, (reads, writes) in enumerate(steps):
        for t in reads:
            if t not in first:
                raise ValueError(f"step {step} reads '{t}' before any step writes it")
            last[t] = step
        for t in writes:  # (a Concat's output written in place is written by several: live from the first)
            first.setdefault(t, step)
            last[t] = step
    for t in outputs:
        last[t] = end
    return [Lifetime(t, first[t], last[t]) for t in first]


def lower_bound(requests: Sequence[Request]) -> int:
    """The most bytes live at one step: no placement can use less."""
    if not requests:
        return 0
    sizes, firsts, lasts = (np.array(column, dtype=np.int64) for column in zip(*requests))
    change = np.zeros(int(lasts.max()) + 2, dtype=np.int64)
    np.add.at(change, firsts, sizes)
    np.add.at(change, lasts + 1, -sizes)
    return int(np.cumsum(change).max())


def footprint(requests: Sequence[Request], placements: Sequence[Placement], memory: str) -> int:
    return max((p.offset + r.size for r, p in zip(requests, placements) if p.memory == memory), default=0)


def place(requests: Sequence[Request], strategy: str, target: Optional[int] = None,
          reserved: int = 0, uram: int = 0) -> list[Placement]:
    """A placement of every request: into BRAM up to ``target`` bytes (None: unbounded), then ``uram``
    bytes of URAM, then the ``reserved`` pool, then DDR."""
    capacities = [target, uram, reserved, None] if target is not None else [None]
    memories = MEMORIES if target is not None else MEMORIES[:1]
    if strategy == "refcount":
        return _refcount(requests, capacities, memories)
    if strategy == "fastest":
        return _fastest(requests, capacities, memories)
    if strategy == "greedy":
        return _greedy_search(requests, capacities, memories)
    raise ValueError(f"unknown memory strategy '{strategy}' (known: {', '.join(STRATEGIES)})")


def _schedule_order(requests: Sequence[Request]) -> list[int]:
    return sorted(range(len(requests)), key=lambda i: (requests[i].first, i))


def _fits(capacity: Optional[int], end: int) -> bool:
    return capacity is None or end <= capacity


def _fastest(requests, capacities, memories) -> list[Placement]:
    result: list[Optional[Placement]] = [None] * len(requests)
    tops = [0] * len(capacities)
    for i in _schedule_order(requests):
        size = requests[i].size
        pool = next(k for k, cap in enumerate(capacities) if _fits(cap, tops[k] + size))
        result[i] = Placement(memories[pool], tops[pool])
        tops[pool] += size
    return result


def _refcount(requests, capacities, memories) -> list[Placement]:
    result: list[Optional[Placement]] = [None] * len(requests)
    # per pool: blocks [offset, size, step after which it is free again]
    blocks: list[list[list[int]]] = [[] for _ in capacities]
    tops = [0] * len(capacities)
    for i in _schedule_order(requests):
        r = requests[i]
        for k, cap in enumerate(capacities):
            block = next((b for b in blocks[k] if b[2] < r.first and b[1] >= r.size), None)
            if block is not None:
                block[2] = r.last
                result[i] = Placement(memories[k], block[0])
                break
            if _fits(cap, tops[k] + r.size):
                blocks[k].append([tops[k], r.size, r.last])
                result[i] = Placement(memories[k], tops[k])
                tops[k] += r.size
                break
    return result


def _event_numbers(requests: Sequence[Request]) -> dict[int, int]:
    """Each step where a buffer starts or follows one that ends, numbered in time order: between two
    consecutive ones the same buffers are live."""
    return {t: k for k, t in enumerate(sorted({t for r in requests for t in (r.first, r.last + 1)}))}


def _greedy_search(requests, capacities, memories) -> list[Placement]:
    """Greedy by size; when it misses its goal (nothing spilled out of the first memory, or unbounded
    the lower bound), the exact search for that goal; when that runs out of nodes, a hill climb over
    greedy's order (as TVM's USMP does): swap two buffers in it and keep the result when it is no
    worse, until the goal or a number of tries that shrinks with the buffer count. Greedy: each
    buffer, in turn, into the first memory it fits, in the smallest gap the buffers placed there
    and live beside it leave (TFLite's arena planner). Its score: bounded, the bytes beyond the
    first memory, then those in DDR; else the footprint (greedy_packing.cpp, as the climb)."""
    n = len(requests)
    # largest first, then earliest (a stable sort keeps the buffers' order on ties); one integer key
    # per buffer sorts faster than tuples
    steps = 1 + max((r.last for r in requests), default=0)
    order = sorted(range(n), key=[r.first - r.size * steps for r in requests].__getitem__)
    bounded = capacities[0] is not None
    packed = requests
    if steps > 2 * n:
        # sparse time (buffers from another tool's clock): greedy keeps a list per step, so it runs
        # on the events' numbers instead (the same buffers overlap); the search keeps the real times
        events = _event_numbers(requests)
        packed = [Request(r.size, events[r.first], events[r.last + 1] - 1) for r in requests]
    columns = ([r.size for r in packed], [r.first for r in packed], [r.last for r in packed], capacities,
               memories.index("ddr") if "ddr" in memories else -1)
    pools, offsets, score = packing.greedy_climb(*columns, order)
    bound = lower_bound(requests)
    goal = (0, 0) if bounded else (bound, 0)
    pool = capacities[0] if bounded else bound  # bounded: all in the first memory; else on the bound
    if score > goal and bound <= pool:
        found = fit(requests, pool, SEARCH_NODES if bounded else FOOTPRINT_SEARCH_NODES)
        if found is not None:
            return [Placement(memories[0], offset) for offset in found]
    if score > goal and n >= 2:
        rng = random.Random(0)
        swaps = [rng.sample(range(n), 2) for _ in range(min(CLIMB_STEPS, CLIMB_WORK // n))]
        pools, offsets, score = packing.greedy_climb(*columns, order, swaps, goal)
    return [Placement(memories[k], offset) for k, offset in zip(pools, offsets)]


def fit(requests: Sequence[Request], capacity: int, nodes: int = SEARCH_NODES) -> Optional[list[int]]:
    """Offsets that put every request below ``capacity`` with no two live at one step sharing a
    byte; None when there is none, or none was found within ``nodes``: the exact search of
    exact_packing.cpp (canonical placements, section floors and inference, dominance,
    decomposition; after MiniMalloc), compiled with g++, taking turns over ``SEARCH_ORDERS`` with a
    node limit that doubles each round."""
    if not requests:
        return []
    if lower_bound(requests) > capacity:  # also covers a buffer larger than the capacity
        return None
    return packing.search([r.size for r in requests], [r.first for r in requests],
                          [r.last for r in requests], capacity, SEARCH_ORDERS, nodes)


# Seeded random topological orders the schedule also tries, at most this many and at most
# SCHEDULE_WORK / steps of them.
SCHEDULE_SAMPLES, SCHEDULE_WORK = 16, 20_000


def schedule(steps: Sequence[tuple[Sequence[str], Sequence[str]]], sizes: dict[str, int],
             inputs: Sequence[str], outputs: Sequence[str]) -> list[int]:
    """An order of the steps (a permutation, topological: a step after the steps writing what it
    reads) with the lowest peak of live bytes among candidates (the seed's idea of generating
    candidate orders and keeping the one with the least peak; the units run one after another, so
    the order changes memory, not compute time): the given order; the order that always runs next
    the ready step freeing the most bytes (least newly allocated on ties); depth first (the ready
    step reading what was written last, finishing one branch before the next); and seeded random
    topological orders. The given order wins ties."""
    n = len(steps)
    writer = {t: k for k, (_, writes) in enumerate(steps) for t in writes}
    readers: dict[str, int] = {}
    for reads, _ in steps:
        for t in set(reads):
            readers[t] = readers.get(t, 0) + 1
    needs = [{writer[t] for t in reads if t in writer} for reads, _ in steps]
    dependents: list[list[int]] = [[] for _ in steps]
    for k, need in enumerate(needs):
        for w in need:
            dependents[w].append(k)

    def topological(pick) -> list[int]:
        """Run the steps, choosing each time among the ready ones with ``pick(ready, remaining)``;
        ``remaining``: each tensor's readers that have not run."""
        waiting = [len(need) for need in needs]
        ready = [k for k in range(n) if not waiting[k]]
        remaining = dict(readers)
        order: list[int] = []
        while ready:
            k = pick(ready, remaining)
            ready.remove(k)
            order.append(k)
            for t in set(steps[k][0]):
                remaining[t] -= 1
            for d in dependents[k]:
                waiting[d] -= 1
                if not waiting[d]:
                    ready.append(d)
        return order

    def freeing_most(ready, remaining) -> int:
        def gain(k: int) -> tuple[int, int, int]:
            reads, writes = steps[k]
            freed = sum(sizes[t] for t in set(reads) if remaining[t] == 1 and t not in outputs)
            return (-(freed - sum(sizes[t] for t in writes)), -freed, k)
        return min(ready, key=gain)

    def depth_first(ready, remaining) -> int:
        return ready[-1]  # the last to become ready: it reads what the last step wrote

    rng = random.Random(0)
    candidates = [list(range(n)), topological(freeing_most), topological(depth_first)]
    candidates += [topological(lambda ready, remaining: ready[rng.randrange(len(ready))])
                   for _ in range(min(SCHEDULE_SAMPLES, SCHEDULE_WORK // max(1, n)))]

    def peak(candidate: list[int]) -> int:
        lives = lifetimes([steps[k] for k in candidate], inputs, outputs)
        return lower_bound([Request(sizes[b.tensor], b.first, b.last) for b in lives])

    return min(candidates, key=peak)  # min keeps the first of equals: the given order on ties


BRAM18_BYTES = BRAM18_BITS // 8


def _ddr_reads(unit: ExecutionUnit, tensor: str) -> int:
    """The reads of ``tensor``'s bytes ``unit`` makes where the tensor lies in DDR, beside its cycles: one of an input
    of a unit the top or hls4ml runs; none of an engine unit's, whose loops move its words a cycle each (an input
    staged or copied: the staging's or the copy's cycles; the residual map it adds: a word read beside each output
    word, in its own loops' cycles), a word a cycle being at most a port's bandwidth (16 bytes: the board files'
    3.2 GB/s at 200 MHz; where a port delivers less, plan_memory stretches those words' cycles)."""
    return int(unit.engine is None and tensor in unit.inputs)


def plan_memory(plan: Plan, graph: Graph, shapes: dict[str, list[int]], board: Board, policy: str, width: int,
                batch: int, element_bytes_of: Callable[[str], int], weights_bytes_of: Callable[[ExecutionUnit], int],
                reorder: bool = True) -> None:
    """The memory policy, per FPGA subfunction of ``plan``: the unit schedule (``reorder``: the order with the lower
    peak) and where each buffer lives by ``policy`` (a strategy, or "auto": the smallest footprint), ``width``
    the bits of a value (its placeholder type), ``batch`` the samples a batch buffer holds (``shapes``: each
    tensor's). the unit schedule (``reorder``: the order with the lower
    peak) and where each buffer lives. The BRAM the units leave free is the target memory of the
    device's subfunctions, in plan order; then the reserve; then DDR. The weights of units folded
    with their weights in DDR come first in the DDR region (``weights_bytes_of``: a unit's bytes),
    resident for good; spilled buffers follow them."""
    index = graph.node_index()
    for device in (d for d in board.devices if d.kind == "fpga"):
        subs = [s for s in plan.subfunctions if s.device == device.name]
        budget = device.budget()["bram18"]
        used = sum(u.estimate["bram18"] for s in subs for u in s.execution_units)
        target = max(0, budget - used) * BRAM18_BYTES
        reserve = (device.resources["bram18"] - budget) * BRAM18_BYTES
        # the URAM the engines' weight buffers leave (units.engine_buffers: an engine's resources are its first
        # unit's)
        uram = max(0, device.budget().get("uram", 0)
                   - sum(u.estimate.get("uram", 0) for s in subs for u in s.execution_units)) * URAM_BYTES
        for sub in subs:
            sizes = {t: units.buffer_bytes(math.prod(shapes[t]), element_bytes_of(t))
                     for t in sub.inputs + [t for u in sub.execution_units for t in u.outputs]}
            # a banded unit's band buffers: written and read within its own step
            sizes |= {name: units.buffer_bytes(values, element_bytes_of(tensor))
                      for u in sub.execution_units for name, (tensor, values) in u.band_buffers().items()}
            steps = [(u.inputs, u.outputs + list(u.band_buffers())) for u in sub.execution_units]
            if reorder:
                order = schedule(steps, sizes, sub.inputs, sub.outputs)
                sub.execution_units = [sub.execution_units[k] for k in order]
                steps = [steps[k] for k in order]
            # a Concat's inputs written in place lie in its output's buffer, a chain of them in its last output's
            # (the root: ``Buffer.view_of``), from their first channel there on: the root live from the first of
            # those writes on, the inputs no buffers of their own
            views = units.concat_views(sub.execution_units, shapes)
            lives = lifetimes([([views.get(t, (t,))[0] for t in reads], [views.get(t, (t,))[0] for t in writes])
                               for reads, writes in steps], sub.inputs, sub.outputs)
            requests = [Request(sizes[b.tensor], b.first, b.last) for b in lives]
            footprints = {s: footprint(requests, place(requests, s), "bram")
                          for s in STRATEGIES}
            strategy = policy
            if strategy == "auto":  # the smallest footprint; greedy on a tie
                strategy = min(STRATEGIES, key=lambda s: (footprints[s], s != "greedy"))
            copies, placements, staging, staging_memory = _place_staged(
                sub, lives, requests, strategy, {"bram": target, "uram": uram, "reserved": reserve}, element_bytes_of)
            placed = list(requests) + [request for _, request in copies]  # the buffers, then the copies
            used_in = {m: footprint(placed, placements, m) for m in MEMORIES}
            # each copy on chip, used (the others' requests dropped: their bytes stay unused)
            word_type = f"ap_uint<{8 * units.ARENA_WORD_BYTES}>"
            copy_buffers = [Buffer(f"{unit.name}.copy", p.memory, p.offset, r.size, r.first, r.last, word_type,
                                   kind="copy") for (unit, r), p in zip(copies, placements[len(lives):])
                            if unit.engine.copied]
            staging_buffers = [Buffer(f"{sub.name}.staging", staging_memory, used_in[staging_memory], staging, 0,
                                      len(steps) - 1, word_type, kind="staging")] if staging else []
            if staging:
                used_in[staging_memory] += staging
            weights, weights_end, weight_traffic = [], 0, 0
            for unit in (u for u in sub.execution_units if u.weights_in_ddr):
                size = units.buffer_bytes(weights_bytes_of(unit), 1)
                # each from a word of the widest weights port, and an engine unit's from a read of its engine's
                # port (which reads its region in such reads: three words where the port is three bundles)
                align = WEIGHTS_ALIGNMENT if unit.engine is None else \
                    math.lcm(WEIGHTS_ALIGNMENT, unit.engine.port_words * units.ARENA_WORD_BYTES)
                weights_end = -(-weights_end // align) * align
                weights.append(Buffer(f"{unit.name}.weights", "ddr", weights_end, size, 0,
                                      len(sub.execution_units) - 1, f"ap_fixed<{width},6>", kind="weights"))
                weights_end += size
                # read once per output vector (per pixel of a convolution); the engine's once a run, through each
                # of its weights port's bundles, a DDR port each (a share of its bytes each)
                unit_graph = units.Unit(unit.pe, [index[n] for n in unit.nodes])
                weight_traffic += size / unit.engine.bundles if unit.engine is not None else \
                    size * units.unit_shape(graph, unit_graph, device.clock_mhz).vectors
            # an engine unit reads a DDR input in its staging loops (through its weights port, from the DDR region's
            # start: the input's first word there), or the top's copy of it (a word a cycle): their cycles, not its
            # bytes
            memory_of = {b.tensor: p for b, p in zip(lives, placements)}
            memory_of |= {x: memory_of[o] for x, (o, _) in views.items()}
            staged_cycles = sum(units.engine_staging_cycles(
                u.engine, 8 * element_bytes_of(u.inputs[0]),
                (weights_end + memory_of[u.inputs[0]].offset) // units.ARENA_WORD_BYTES)
                for u in sub.execution_units if u.engine is not None and u.engine.staged)
            staged_cycles += sum(units.copy_cycles(b.size) for b in copy_buffers)
            # an engine unit writes an output in DDR a word a cycle, not two (its estimate's): the cycles that adds
            ddr_output_cycles = sum(units.engine_ddr_output_cycles(u.engine, 8 * element_bytes_of(u.outputs[0]))
                                    for u in sub.execution_units
                                    if u.engine is not None and u.outputs[0] in memory_of
                                    and memory_of[u.outputs[0]].memory == "ddr")
            # each buffer in DDR written once (but by an engine unit, whose loops write its words: its cycles and
            # ddr_output_cycles; of a root, the channels its Concats move themselves) and read by each of its
            # readers (_ddr_reads; a view's bytes where it is read)
            engine_written = {u.outputs[0] for u in sub.execution_units if u.engine is not None}
            written = {t: float(t not in engine_written) for t in sizes}
            for root in {r for r, _ in views.values()}:
                written[root] = sum(units.concat_moved_channels(u, shapes) for u in sub.execution_units
                                    if views.get(u.outputs[0], (u.outputs[0],))[0] == root) / shapes[root][1]
            in_ddr = {b.tensor for b, p in zip(lives, placements) if p.memory == "ddr"}
            ddr_traffic = sum(sizes[t] * ((t in in_ddr) * written[t] + sum(_ddr_reads(u, t)
                                                                           for u in sub.execution_units))
                              for t in sizes if views.get(t, (t,))[0] in in_ddr)
            # a DDR port that delivers less than an arena word a cycle (the PYNQ-Z2's 12 bytes at 100 MHz) makes
            # each word the engine's loops move there a cycle each take longer: its staged or copied inputs' (their
            # cycles at most), its outputs' and the residuals it reads there
            slower = max(0.0, units.ARENA_WORD_BYTES / units.ddr_bytes_per_cycle(device) - 1)
            engine_ddr_words = sum(sizes[t] for u in sub.execution_units if u.engine is not None
                                   for t in u.outputs[:1] + u.inputs[1:2] * u.engine.residual
                                   if t in memory_of and memory_of[t].memory == "ddr") // units.ARENA_WORD_BYTES
            ddr_output_cycles += slower * engine_ddr_words
            staging_s = staged_cycles * (1 + slower) / (device.clock_mhz * 1e6)
            activations = [Buffer(b.tensor, p.memory, p.offset + (weights_end if p.memory == "ddr" else 0), r.size,
                                  b.first, b.last, f"ap_fixed<{width},6>")
                           for b, r, p in zip(lives, requests, placements)]
            of = {b.tensor: b for b in activations}
            activations += [Buffer(x, of[o].memory, of[o].offset + first * element_bytes_of(x), sizes[x], of[o].first,
                                   of[o].last, of[o].precision, view_of=o) for x, (o, first) in views.items()]
            sub.memory = MemoryPlan(
                strategy=strategy, target_bytes=target, reserved_bytes=reserve,
                reserved_used_bytes=used_in["reserved"], bram_bytes=used_in["bram"], uram_target_bytes=uram,
                uram_bytes=used_in["uram"],
                # whole reads of the widest weights port: the engine stages its DDR inputs through it
                ddr_bytes=-(-(weights_end + used_in["ddr"]) // WEIGHTS_ALIGNMENT) * WEIGHTS_ALIGNMENT,
                lower_bound_bytes=lower_bound(requests),
                ddr_transfer_s=ddr_traffic / device.memory.bandwidth_bytes_per_s + staging_s
                + ddr_output_cycles / (device.clock_mhz * 1e6),
                engine_staging_s=staging_s,
                ddr_weights_s=weight_traffic / device.memory.bandwidth_bytes_per_s, footprints=footprints,
                buffers=weights + activations + copy_buffers + staging_buffers,
                batch_bytes=batch_bytes(sub, shapes, batch))
            target -= used_in["bram"]
            reserve -= used_in["reserved"]
            uram -= used_in["uram"]
        _check_ddr(device, subs, shapes, batch)


class StagingDoesNotFit(UserError):
    """No on-chip memory left holds the buffer an engine unit stages its DDR input in."""


def _place_staged(sub: Subfunction, lives: Sequence[Lifetime], requests: Sequence[Request], strategy: str,
                  pools: dict[str, int], element_bytes_of: Callable[[str], int]
                  ) -> tuple[list[tuple[ExecutionUnit, Request]], list[Placement], int, Optional[str]]:
    """The requests of the copies of engine units' inputs, with the unit of each; the placement of ``sub``'s
    buffers (``requests``, then those copies) in ``pools`` (the target's, the URAM's and the reserve's bytes, tried
    in that order, then DDR); the bytes of its staging buffer and the memory it is carved from (0 and None: none).

    An engine unit whose input lands in DDR and would stage it in more than twice the cycles a copy takes (its
    rows staged again for each group of the tiles of its output channels whose weights the engine holds at once,
    hls/engine.h's engine_resident) asks for a copy of it live over its own step
    (``<unit>.copy``): where that lands on chip, the top copies the input there in one burst before the unit runs,
    and the unit reads it there, every tile (its engine layer ``copied``); else the unit stages its rows a pass at a
    time in the staging buffer (``staged``), as large as the largest such unit's (``units.staging_bytes``) and
    carved from the first pool that holds it. Copies and the carving may spill more, so the buffers are placed again
    until the units that asked and the staging buffer are what the placement gives."""
    engine = [u for u in sub.execution_units if u.engine is not None]
    step = {u.name: k for k, u in enumerate(sub.execution_units)}
    copy_bytes = {u.name: units.buffer_bytes(math.prod(u.engine.input) * u.engine.channels,
                                             element_bytes_of(u.inputs[0])) for u in engine}

    def copy_pays(unit: ExecutionUnit) -> bool:
        staging_cycles = units.engine_staging_cycles(unit.engine, 8 * element_bytes_of(unit.inputs[0]))
        return staging_cycles > 2 * units.copy_cycles(copy_bytes[unit.name])

    asked: list[ExecutionUnit] = []  # the units with a copy's request, in the order they asked
    staging, memory = 0, None
    while True:
        copies = [(u, Request(copy_bytes[u.name], step[u.name], step[u.name])) for u in asked]
        left = dict(pools)
        if staging:
            memory = next((m for m in ("bram", "uram", "reserved") if left[m] >= staging), None)
            if memory is None:
                raise StagingDoesNotFit(f"{sub.name}: no on-chip memory is left for the {staging:,} bytes an engine "
                                        f"unit stages its input from DDR in (BRAM {pools['bram']:,}, URAM "
                                        f"{pools['uram']:,}, reserve {pools['reserved']:,} bytes free)")
            left[memory] -= staging
        placements = place(list(requests) + [r for _, r in copies], strategy, left["bram"], left["reserved"],
                           left["uram"])
        where = {b.tensor: p.memory for b, p in zip(lives, placements)}
        copied = {u.name for (u, _), p in zip(copies, placements[len(lives):]) if p.memory != "ddr"}
        in_ddr = {u.name for u in engine if where.get(u.inputs[0]) == "ddr"}
        for unit in engine:
            unit.engine.copied = unit.name in in_ddr and unit.name in copied
            unit.engine.staged = unit.name in in_ddr and unit.name not in copied
            # (a staged input is read row by row: its weights are held, never streamed; engine_stream takes one
            # width, its input's, its outputs' and its weights', which are its outputs': a layer whose input a
            # widening made wider or narrower than its own values runs held)
            unit.engine.streamed = element_bytes_of(unit.inputs[0]) == element_bytes_of(unit.outputs[0]) and \
                units.engine_layer_streams(unit.engine, 8 * element_bytes_of(unit.inputs[0]))
        needed = max([staging] + [units.staging_bytes(u.engine, element_bytes_of(u.inputs[0]))
                                  for u in engine if u.engine.staged])
        newly = [u for u in engine if u.name in in_ddr and u.name not in {a.name for a in asked} and copy_pays(u)]
        if needed == staging and not newly:
            return copies, placements, staging, memory
        asked += newly
        staging = needed


def batch_bytes(sub: Subfunction, shapes: dict[str, list[int]], batch: int) -> int:
    """The two sets of a batch of ``batch`` samples of an FPGA subfunction's ports (its zero-compressed ones
    at the most words a sample can take, its codes inputs at their words)."""
    compressed = {t.tensor for t in sub.transfers if t.compressed}
    codes = {t: dataclasses.asdict(c) for t, c in sub.input_codes.items()}
    return 2 * batch * FLOAT_BYTES * sum(port_values(math.prod(shapes[t]), t in compressed, codes.get(t))
                                         for t in sub.inputs + sub.outputs)


def _check_ddr(device, subs: list[Subfunction], shapes: dict[str, list[int]], batch: int) -> None:
    """The FPGA's DDR holds its subfunctions' DDR weights, spills and batch buffers, and every batched
    port stays within the C int indices of the top (one line naming --batch when not)."""
    largest = max((math.prod(shapes[t]) for s in subs for t in s.inputs + s.outputs), default=0)
    if batch * largest * FLOAT_BYTES >= 2 ** 31:
        raise UserError(f"--batch {batch}: a port of {largest:,} values takes {batch * largest * FLOAT_BYTES:,} bytes "
                        f"a batch, more than an FPGA core's port addresses (2 GiB); take a smaller batch")
    needed = sum(s.memory.ddr_bytes + s.memory.batch_bytes for s in subs)
    if needed > device.memory.bytes:
        batches = sum(s.memory.batch_bytes for s in subs)
        raise UserError(f"--batch {batch}: {device.name}'s DDR holds {device.memory.bytes / 2**20:,.4g} MiB, its "
                        f"subfunctions need {needed / 2**20:,.4g} MiB ({batches / 2**20:,.4g} MiB of it the batch "
                        f"buffers, two sets); take a smaller batch")
