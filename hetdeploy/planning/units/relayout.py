"""A relayout's steps: how the top moves a Reshape, Transpose, Flatten ... a word a cycle (arena.h's relayout).

A relayout's output value j is its input value index[j] (buffers of rank >= 3 channels-last). Read a value at a time,
an output word of L lanes would take L word reads (a channel shuffle's or a Flatten's lanes each lie in another
input word). The top instead keeps a few input words in registers and runs a table of steps, each reading at most one
input word into a register and writing at most one output word, each of whose lanes is a register's lane:

- the output words are taken in the order of the input words they need (each's sorted list of them), so that the
  words of a transpose's block (L pixels by L channels) are read once for all the block's outputs;
- a needed word not in the registers is read into a free one, else into the one whose word is needed furthest ahead
  (Belady's rule), never one a waiting output word needs;
- an output word whose words are in the registers waits for a step that reads (the next outputs' words); where none
  comes, or the registers are all needed, the oldest waiting word is written in a step of its own.

Its steps are its cycles (a pipelined loop of an iteration a step, C-simulation counts them): about one an output
word where each input word is read once. It holds the fewest registers, a multiple of half a word's lanes from the
most input words an output word needs up to 2 L, whose steps are within REGISTERS_SLACK of 2 L's (a 3-group channel
shuffle's: L, a Flatten's: 2 L at 8 bits), each bit of the output word multiplexed over their values at its place
(``held``: the multiplexers, some 1,300 LUTs at 8 bits and L registers, 2,800 at 2 L). Folded, it holds one input word
a step, each of whose lanes an output lane takes going into a register of that lane (a lane's multiplexer over the
word's lanes), and an output word is written with the step that reads the last input word it needs; its steps, each
output word's input words, are as many as those (a Flatten's: a word's lanes). A map whose output words are input
words as they are is a copy, a word a step, no register or multiplexer. ``index_of`` reads the map back from the
steps.

``chain_index`` is the map of a chain of relayouts at planning, from its nodes' shapes, attributes and one-value
constants (what the estimate needs before any op runs); the build's steps come from the map the model's own nodes
give on onnxruntime."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import deque
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ...core.board import RELAYOUT_OPS
from ...core.board_runtime import channels_first, channels_last, stored_shape
from ...core.graph import Node

# the output words a period of steps writes at least (``period``): a ROM of that many steps
PERIOD_WORDS = 64
# the steps fewer registers may add to 2 L's (``relayout_steps``): a share of them
REGISTERS_SLACK = 0.01


@dataclass(frozen=True)
class RelayoutSteps:
    """A relayout's steps, one entry each (arena.h's relayout_step), run ``repeat`` times, the n-th time its reads
    and writes ``n * source_words`` and ``n * target_words`` words on (a map the same at each pixel: ``period``)."""

    reads: np.ndarray  # the input word it reads into register ``slots`` (-1: none)
    slots: np.ndarray
    writes: np.ndarray  # the output word it writes (-1: none), after its read
    selects: np.ndarray  # [step, lane]: register * lanes + lane of the output lane's value (-1: zero, past the end)
    repeat: int = 1
    source_words: int = 0
    target_words: int = 0
    # the input words it keeps in registers (1: folded, each output word assembled a lane at a time; 0: a copy of whole
    # words, each output word an input word as it is)
    held: int = 1

    def __len__(self) -> int:
        return len(self.reads)

    @property
    def iterations(self) -> int:
        """The steps it runs: its loop's iterations."""
        return self.repeat * len(self)


def relayout_steps(index: np.ndarray, lanes: int, folded: bool) -> RelayoutSteps:
    """The steps that move output value j from input value ``index[j]``, ``lanes`` values a word, those of its
    ``period`` repeated: folded, one input word held; else the fewest registers within REGISTERS_SLACK of 2 L's
    steps."""
    copy = _whole_words(index, lanes)
    target, source = period(index, lanes, 1 if copy else PERIOD_WORDS)
    repeat = index.size // target
    if copy:
        first = _copied(index[:target], lanes)
    elif folded:
        first = _assembled(index[:target], lanes)
    else:
        most = max(len(words) for words in _needs(index[:target], lanes)[1])
        half = max(1, lanes // 2)
        first = widest = _steps(index[:target], lanes, 2 * lanes)
        for held in range(-(-most // half) * half, 2 * lanes, half):
            fewer = _steps(index[:target], lanes, held)
            if len(fewer) <= len(widest) * (1 + REGISTERS_SLACK):
                first = fewer
                break
    return dataclasses.replace(first, repeat=repeat, source_words=source // lanes if repeat > 1 else 0,
                               target_words=target // lanes if repeat > 1 else 0)


def period(index: np.ndarray, lanes: int, least_words: int) -> tuple[int, int]:
    """(T, S): output values T, a multiple of ``lanes`` dividing the map's, after which the map repeats S input values
    on (index[j + T] = index[j] + S, S a multiple of ``lanes`` too; a channel shuffle's: a pixel's channels, or two
    pixels' where they fill no whole words): the fewest such, times the fewest repeats that make ``least_words``
    output words at least (PERIOD_WORDS: the words a period ends with writing alone, a few, then weigh little; a copy
    writes none so: 1); (n, 0) where none."""
    n = index.size
    for target in range(lanes, n // 2 + 1, lanes):
        if n % target:
            continue
        rows = index.reshape(-1, target)
        source = int(rows[1, 0] - rows[0, 0])
        if source % lanes == 0 and np.array_equal(rows, rows[:1] + source * np.arange(len(rows))[:, None]):
            times = next(m for m in range(1, len(rows) + 1) if len(rows) % m == 0 and
                         (m * target // lanes >= least_words or m == len(rows)))
            return times * target, times * source
    return n, 0


def _needs(index: np.ndarray, lanes: int) -> tuple[np.ndarray, list[list[int]]]:
    """The map padded to whole output words (-1 past its end), and each output word's input words, in order."""
    words = -(-index.size // lanes)
    padded = np.full(words * lanes, -1, dtype=np.int64)
    padded[:index.size] = index
    source = np.where(padded >= 0, padded // lanes, -1).reshape(words, lanes)
    return padded, [sorted(set(row[row >= 0].tolist())) for row in source]


def _whole_words(index: np.ndarray, lanes: int) -> bool:
    """Whether each output word is an input word as it is (a Flatten after a global pooling, a Reshape that keeps the
    channels-last order, a Slice of whole pixels): the values whole words, each word's ``lanes`` values one input
    word's in order."""
    if index.size % lanes:
        return False
    words = index.reshape(-1, lanes)
    return bool(np.all(words[:, :1] % lanes == 0) and np.array_equal(words, words[:, :1] + np.arange(lanes)))


def _copied(index: np.ndarray, lanes: int) -> RelayoutSteps:
    """No input word held (held 0): each output word a step, the input word it is, read and written as it is."""
    words = index.reshape(-1, lanes)
    return RelayoutSteps(words[:, 0] // lanes, np.zeros(len(words), dtype=np.int64), np.arange(len(words)),
                         np.tile(np.arange(lanes), (len(words), 1)), held=0)


def _assembled(index: np.ndarray, lanes: int) -> RelayoutSteps:
    """One input word held: each output word in order, a step an input word it needs, each lane of the output it
    gives taking its lane, the word written with the last."""
    padded, needs = _needs(index, lanes)
    rows = [(s, w if k == len(words) - 1 else -1, np.where(padded[w * lanes:(w + 1) * lanes] // lanes == s,
                                                           padded[w * lanes:(w + 1) * lanes] % lanes, -1))
            for w, words in enumerate(needs) for k, s in enumerate(words)]
    return RelayoutSteps(np.array([r[0] for r in rows]), np.zeros(len(rows), dtype=np.int64),
                         np.array([r[1] for r in rows]), np.array([r[2] for r in rows]).reshape(len(rows), lanes))


def _steps(index: np.ndarray, lanes: int, slots: int) -> RelayoutSteps:
    """``slots`` input words held (at least the most an output word needs): the module's rules."""
    padded, needs = _needs(index, lanes)
    order = _order(needs, slots)
    uses: dict[int, deque] = {}
    for position, w in enumerate(order):
        for s in needs[w]:
            uses.setdefault(s, deque()).append(position)
    held: list[Optional[int]] = [None] * slots
    where: dict[int, int] = {}
    waiting: deque = deque()  # output words whose inputs are held, oldest first
    steps: list[tuple[int, int, int]] = []  # (read, slot, write)
    select_rows: list[np.ndarray] = []

    def selects(w: int) -> np.ndarray:
        row = padded[w * lanes:(w + 1) * lanes]
        return np.array([where[v // lanes] * lanes + v % lanes if v >= 0 else -1 for v in row.tolist()])

    def step(read: int, slot: int, write: Optional[int]) -> None:
        steps.append((read, slot, -1 if write is None else write))
        select_rows.append(selects(write) if write is not None else np.full(lanes, -1))

    for position, w in enumerate(order):
        for s in needs[w]:
            uses[s].popleft()
        for s in needs[w]:
            if s in where:
                continue
            while True:
                kept = set(needs[w]).union(*(needs[x] for x in waiting))
                free = [k for k in range(slots) if held[k] is None or held[k] not in kept]
                if free:
                    break
                step(-1, 0, waiting.popleft())  # every register needed: the oldest waiting word alone
            slot = max(free, key=lambda k: math.inf if held[k] is None or not uses[held[k]] else uses[held[k]][0])
            if held[slot] is not None:
                del where[held[slot]]
            held[slot], where[s] = s, slot
            step(s, slot, waiting.popleft() if waiting else None)
        waiting.append(w)
        if len(waiting) > lanes:  # more waiting than reads to come for them
            step(-1, 0, waiting.popleft())
    while waiting:
        step(-1, 0, waiting.popleft())
    reads, slot_of, writes = (np.array(column, dtype=np.int64) for column in zip(*steps))
    return RelayoutSteps(reads, slot_of, writes, np.array(select_rows, dtype=np.int64).reshape(len(steps), lanes),
                         held=slots)


def _order(needs: list[list[int]], held: int) -> list[int]:
    """The output words in the order their steps write them: next, of those needing a word among the last ``held``
    distinct input words read, the one needing the fewest others (then the most of them, then the least words); where
    none, the first left in the order of the words they need."""
    users: dict[int, list[int]] = {}
    for w, words in enumerate(needs):
        for s in words:
            users.setdefault(s, []).append(w)
    by_words = iter(sorted(range(len(needs)), key=lambda w: (needs[w], w)))
    recent: dict[int, None] = {}  # the last ``held`` input words read, oldest first
    done = [False] * len(needs)
    order: list[int] = []
    while len(order) < len(needs):
        candidates = {w for s in recent for w in users[s] if not done[w]}
        if candidates:
            def rank(w: int) -> tuple:
                kept = sum(s in recent for s in needs[w])
                return len(needs[w]) - kept, -kept, needs[w], w
            w = min(candidates, key=rank)
        else:
            w = next(x for x in by_words if not done[x])
        done[w] = True
        order.append(w)
        for s in needs[w]:
            recent.pop(s, None)
            recent[s] = None
        while len(recent) > held:
            del recent[next(iter(recent))]
    return order


def index_of(steps: RelayoutSteps, lanes: int, values: int) -> np.ndarray:
    """The map ``steps`` move: output value j from input value index[j] (their C++ run in numpy's terms)."""
    held = steps.held
    words = np.full(max(1, held), -1, dtype=np.int64)
    assembled = np.full(lanes, -1, dtype=np.int64)  # (one word held) the output word's lanes so far
    index = np.full(-(-values // lanes) * lanes, -1, dtype=np.int64)
    for n in range(steps.repeat):
        for read, slot, write, select in zip(steps.reads, steps.slots, steps.writes, steps.selects):
            if read >= 0:
                words[slot] = read + n * steps.source_words
            if held <= 1:
                assembled = np.where(select >= 0, words[0] * lanes + select, assembled)
            if write >= 0:
                at = (write + n * steps.target_words) * lanes
                index[at:at + lanes] = assembled if held <= 1 else \
                    np.where(select >= 0, words[select // lanes] * lanes + select % lanes, -1)
                assembled = np.full(lanes, -1, dtype=np.int64)
    return index[:values]


def chain_of(nodes: Sequence[Node]) -> tuple:
    """A chain of relayouts as ``relayout_cost`` reads it: its first input's ONNX shape, then each node's op, the
    attributes and constants that say what it moves, and its output's shape; () where planning cannot know its map (a
    node not of RELAYOUT_OPS, a Slice whose starts, ends, axes or steps are no single values, a shape not inferred)."""
    if not nodes or not nodes[0].input_shapes or not all(n.op in RELAYOUT_OPS and n.output_shapes for n in nodes):
        return ()
    chain: list = [tuple(nodes[0].input_shapes[0])]
    for node in nodes:
        moves: tuple = ()
        if node.op == "Transpose":
            moves = tuple(node.attrs.get("perm") or ())
        elif node.op in ("DepthToSpace", "SpaceToDepth"):
            moves = (node.attrs["blocksize"], node.attrs.get("mode", "DCR"))
        elif node.op == "Slice":
            moves = _slice_of(node)
            if not moves:
                return ()
        chain.append((node.op, moves, tuple(node.output_shapes[0])))
    return tuple(chain)


def _slice_of(node: Node) -> tuple:
    """A Slice of one axis: (axis, start, end, step); () otherwise. Opset 1's in attributes, later ones' in inputs
    (1 .. 4: a one-value initializer's value each, ``Node.scalars``)."""
    if "starts" in node.attrs:
        starts, ends, axes = node.attrs["starts"], node.attrs["ends"], node.attrs.get("axes") or [0]
        steps = [1]
    else:
        if any(i in node.constants and i not in node.scalars for i in range(1, 5)) or not {1, 2} <= node.scalars.keys():
            return ()
        starts, ends = [node.scalars[1]], [node.scalars[2]]
        axes, steps = [node.scalars.get(3, 0)], [node.scalars.get(4, 1)]
    if len(starts) != 1:
        return ()
    return int(axes[0]), int(starts[0]), int(max(min(ends[0], 2 ** 62), -2 ** 62)), int(steps[0])


def chain_index(chain: tuple) -> np.ndarray:
    """The map of a chain of relayouts (``chain_of``'s, not ()): output value j from input value index[j], the
    buffers channels-last at rank >= 3 as the arena holds them."""
    stored, *nodes = chain
    positions = channels_first(np.arange(math.prod(stored)).reshape(stored_shape(list(stored), stored[0])))
    for op, moves, shape in nodes:
        positions = _moved(op, moves, positions).reshape(shape)
    return channels_last(positions).reshape(-1)


@functools.lru_cache(maxsize=256)
def relayout_cost(chain: tuple, lanes: int, folded: bool) -> tuple[int, int, int]:
    """(iterations, steps, held) of the chain's relayout, ``lanes`` values a word, folded or not: its loop's, its
    table's, and the input words it keeps."""
    steps = relayout_steps(chain_index(chain), lanes, folded)
    return steps.iterations, len(steps), steps.held


def _moved(op: str, moves: tuple, x: np.ndarray) -> np.ndarray:
    """ONNX's ``op`` on ``x`` (those that only reshape it: ``x``, which the caller reshapes)."""
    if op == "Transpose":
        return np.transpose(x, moves or None)
    if op == "Slice":
        axis, start, end, step = moves
        return x[(slice(None),) * (axis % x.ndim) + (slice(start, end, step),)]
    if op in ("DepthToSpace", "SpaceToDepth"):
        (b, c, h, w), (size, mode) = x.shape, moves
        if op == "SpaceToDepth":
            return x.reshape(b, c, h // size, size, w // size, size).transpose(0, 3, 5, 1, 2, 4)
        if mode == "CRD":
            return x.reshape(b, c // size ** 2, size, size, h, w).transpose(0, 1, 4, 2, 5, 3)
        return x.reshape(b, size, size, c // size ** 2, h, w).transpose(0, 3, 4, 1, 5, 2)
    return x
