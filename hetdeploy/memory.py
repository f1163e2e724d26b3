"""Stage 4b: buffers of an FPGA subfunction and where they live in its memories.

Pure functions over plain data (no onnx, no hls4ml; numpy for the lower bound). A subfunction runs its execution units one
after the other (schedule step k = unit k). A buffer is a tensor the units exchange: a subfunction
input (written by the top before step 0), or a unit's output; it is live from the step that writes
it to the last step that reads it, and a subfunction output stays live to the last step (the top
reads it after every unit ran). Two buffers may share bytes only when their lifetimes are disjoint.

Memories, tried in this order for every buffer: the BRAM target memory (what the FPGA's budget
leaves after the units' weights and FIFOs), the reserved pool (the board's reserve: used only when
the target is short, and reported) and DDR (unbounded; its traffic costs time).

Strategies (``place``):
- ``refcount``, the seed's rule: buffers are taken in schedule order; each gets the first block
  (in creation order) whose usage count has dropped to 0 (every consumer of its last buffer ran)
  and which is large enough, else a new block of its size at the end of the pool; a block keeps its
  size for good;
- ``greedy``: offsets, largest buffer first, each into the best-fitting gap left by the buffers
  already placed that are live at the same time (TFLite's arena planner);
- ``fastest``: no reuse: every buffer its own range, in schedule order.
When greedy is above the lower bound, or spills out of a bounded pool, a seeded hill climb over its
order follows (swap two buffers, keep what is no worse).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

import numpy as np

STRATEGIES = ("refcount", "greedy", "fastest")
MEMORIES = ("bram", "reserved", "ddr")
# The hill climb after greedy: at most this many tries, and at most CLIMB_WORK / buffers of them
# (each try is a full greedy pass).
CLIMB_STEPS, CLIMB_WORK = 1000, 200_000


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
    they are first written (inputs first)."""
    end = len(steps) - 1
    first: dict[str, int] = {t: 0 for t in inputs}
    last: dict[str, int] = {t: 0 for t in inputs}
    for step, (reads, writes) in enumerate(steps):
        for t in reads:
            if t not in first:
                raise ValueError(f"step {step} reads '{t}' before any step writes it")
            last[t] = step
        for t in writes:
            first[t], last[t] = step, step
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
          reserved: int = 0) -> list[Placement]:
    """A placement of every request: into BRAM up to ``target`` bytes (None: unbounded), then the
    ``reserved`` pool, then DDR."""
    capacities = [target, reserved, None] if target is not None else [None]
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


def _greedy_search(requests, capacities, memories) -> list[Placement]:
    """Greedy by size, then a hill climb over the order (as TVM's USMP does): swap two buffers in it
    and keep the result when it is no worse; stop at the lower bound (unbounded) or when nothing
    spills out of the first memory, or after a number of tries that shrinks with the buffer count."""
    n = len(requests)
    order = [i for *_, i in sorted((-r.size, r.first, i) for i, r in enumerate(requests))]
    bounded = capacities[0] is not None

    def score(placements) -> tuple[int, int]:
        """Bounded: bytes beyond the first memory, then beyond the second; else the footprint."""
        if not bounded:
            return footprint(requests, placements, memories[0]), 0
        return (sum(r.size for r, p in zip(requests, placements) if p.memory != memories[0]),
                sum(r.size for r, p in zip(requests, placements) if p.memory == "ddr"))

    best = _greedy(requests, order, capacities, memories)
    best_score = score(best)
    goal = (0, 0) if bounded else (lower_bound(requests), 0)
    rng = random.Random(0)
    for _ in range(min(CLIMB_STEPS, CLIMB_WORK // max(1, n))):
        if best_score <= goal or n < 2:
            break
        i, j = rng.sample(range(n), 2)
        candidate_order = list(order)
        candidate_order[i], candidate_order[j] = candidate_order[j], candidate_order[i]
        candidate = _greedy(requests, candidate_order, capacities, memories)
        candidate_score = score(candidate)
        if candidate_score <= best_score:
            order, best, best_score = candidate_order, candidate, candidate_score
    return best


def _greedy(requests, order, capacities, memories) -> list[Placement]:
    result: list[Optional[Placement]] = [None] * len(requests)
    # per pool and step: the placed buffers live then, as (offset, end)
    live: list[dict[int, list[tuple[int, int]]]] = [{} for _ in capacities]
    empty: tuple = ()
    for i in order:
        size, first, last = requests[i]
        for k, cap in enumerate(capacities):
            spans = live[k]
            if first == last:
                taken = sorted(spans.get(first, empty))
            else:
                taken = sorted(set().union(*[spans.get(step, empty) for step in range(first, last + 1)]))
            # best fit: the smallest gap between taken ranges that holds the buffer, else the end
            offset, best_gap, cursor = -1, 0, 0
            for start, end in taken:
                gap = start - cursor
                if gap >= size and (offset < 0 or gap < best_gap):
                    offset, best_gap = cursor, gap
                if end > cursor:
                    cursor = end
            if offset < 0:
                offset = cursor
            if cap is None or offset + size <= cap:
                result[i] = Placement(memories[k], offset)
                span = (offset, offset + size)
                for step in range(first, last + 1):
                    if step in spans:
                        spans[step].append(span)
                    else:
                        spans[step] = [span]
                break
    return result


def schedule(steps: Sequence[tuple[Sequence[str], Sequence[str]]], sizes: dict[str, int],
             inputs: Sequence[str], outputs: Sequence[str]) -> list[int]:
    """An order of the steps (a permutation, topological: a step after the steps writing what it
    reads) with the lower peak of live bytes among two candidates: the given order, and the order
    that always runs next the ready step freeing the most bytes (least newly allocated on ties)."""
    n = len(steps)
    writer = {t: k for k, (_, writes) in enumerate(steps) for t in writes}
    readers: dict[str, int] = {}
    for reads, _ in steps:
        for t in set(reads):
            readers[t] = readers.get(t, 0) + 1
    needs = [{writer[t] for t in reads if t in writer} for reads, _ in steps]
    done: set[int] = set()
    remaining = dict(readers)
    order = []
    while len(order) < n:
        ready = [k for k in range(n) if k not in done and needs[k] <= done]

        def gain(k: int) -> tuple[int, int, int]:
            reads, writes = steps[k]
            freed = sum(sizes[t] for t in set(reads) if remaining[t] == 1 and t not in outputs)
            return (-(freed - sum(sizes[t] for t in writes)), -freed, k)

        k = min(ready, key=gain)
        order.append(k)
        done.add(k)
        for t in set(steps[k][0]):
            remaining[t] -= 1

    def peak(candidate: list[int]) -> int:
        lives = lifetimes([steps[k] for k in candidate], inputs, outputs)
        return lower_bound([Request(sizes[b.tensor], b.first, b.last) for b in lives])

    given = list(range(n))
    return order if peak(order) < peak(given) else given

