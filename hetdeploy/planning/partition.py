"""Stage 3: cut the graph into subfunctions, one device each, with no cycle between them.

Pure functions over ``graph.Graph`` and board data (no onnx).

Either policy makes every group a contiguous stretch of one topological order,
so every edge between groups points forward and the group graph cannot have a
cycle, whatever the DAG (residual, multi-branch, dense concatenation).

``support`` (the seed method): every node goes to the first device in the
board's order that runs it; same-device nodes are then contracted into groups
by a topological walk that keeps taking ready nodes of the current device
before it switches (the "waves" of ONNX Runtime's partitioning_utils).

``latency`` (the default): the least estimated latency under ``cost.CostModel``
with every device holding what it is given. For one topological order the cost
of a group depends only on its nodes and device (see ``cost``), so cutting the
order into groups is an exact dynamic programme over cut points; it runs on a
few orders (the model's, and device-sticky walks of the support and of the
fastest-device assignments, then of its own result) and keeps the best. The
capacities shared by a device's groups are met by pricing usage (a Lagrangian
multiplier, bisected). The all-host plan and the support plan (when it fits)
are candidates too, so the result is never estimated slower than either. On
graphs of up to LOCAL_SEARCH_NODES nodes a local search follows: every
single-node move to another device, taken as it is and re-cut, which closes
most of the gap that orders and pricing leave (benchmarks/partitioning.py
measures it against ``optimal_solution``, the exhaustive optimum).
"""

from __future__ import annotations

import copy
import heapq
import math
from dataclasses import dataclass
from typing import Collection, Mapping, Optional, Protocol, Sequence

import numpy as np

from ..core.errors import UserError
from ..core.graph import Graph, Node
from ..core.names import identifier
from ..core.plan import IlpRun
from ..core.precision import DEFAULT_WIDTH, NO_LAYER_WIDTHS
from . import batching, units
from .cost import NO_PINS, NO_ZEROS, CostModel
from .ilp import ilp_solution
from .input_codes import input_quantizers
from .profile import NOTHING_MEASURED, Measured

POLICIES = ("latency", "support")
PARTITIONERS = ("search", "ilp")  # how the latency policy cuts: the search below, or planning.ilp's programme
ILP_TIME_LIMIT_S = 30.0


class DeviceLike(Protocol):
    name: str
    kind: str

    def why_not(self, node: Node) -> str | None: ...


@dataclass
class Group:
    device: str
    nodes: list[int]  # node indices, in execution order


def why_not(device: DeviceLike, node: Node, pins: Mapping[str, str]) -> str | None:
    """None when ``device`` may run ``node``: it runs the op and ``pins`` (node -> device, --device)
    does not put the node elsewhere."""
    pinned = pins.get(node.name)
    if pinned is not None and pinned != device.name:
        return f"the node is pinned to {pinned}"
    return device.why_not(node)


def assign_by_support(graph: Graph, devices: Sequence[DeviceLike], board: str = "the board",
                      pins: Mapping[str, str] = NO_PINS) -> list[str]:
    """The first device (board order) that runs each node (and ``pins`` allows)."""
    assignment = []
    for node in graph.nodes:
        reasons = []
        for device in devices:
            reason = why_not(device, node, pins)
            if reason is None:
                assignment.append(device.name)
                break
            reasons.append(f"{device.name}: {reason}")
        else:
            raise UserError(
                f"node '{node.name}': op '{node.op}' is not run by any device of {board} ({'; '.join(reasons)})"
            )
    return assignment


def contract(graph: Graph, assignment: Sequence[str], first: Optional[str] = None) -> list[Group]:
    """Contract same-device nodes into groups that form a DAG (see module doc).
    ``first``: the device to start with when it has a ready node."""
    producers = graph.producers()
    successors: list[set[int]] = [set() for _ in graph.nodes]
    indegree = [0] * len(graph.nodes)
    for i, node in enumerate(graph.nodes):
        preds = {producers[t] for t in node.inputs if t in producers}
        indegree[i] = len(preds)
        for p in preds:
            successors[p].add(i)
    ready: dict[str, list[int]] = {}
    for i, d in enumerate(indegree):
        if d == 0:
            heapq.heappush(ready.setdefault(assignment[i], []), i)
    groups: list[Group] = []
    current = None
    if ready.get(first):
        current = first
        groups.append(Group(first, []))
    while any(ready.values()):
        if not ready.get(current):
            # switch to the device whose earliest ready node comes first: stable and order-preserving
            current = min((heap[0], dev) for dev, heap in ready.items() if heap)[1]
            groups.append(Group(current, []))
        i = heapq.heappop(ready[current])
        groups[-1].nodes.append(i)
        for s in sorted(successors[i]):
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready.setdefault(assignment[s], []), s)
    return groups


@dataclass
class Cut:
    """A group with its boundary tensors, ready to become a plan.Subfunction."""

    name: str
    device: str
    nodes: list[str]
    inputs: list[str]
    outputs: list[str]


def boundaries(graph: Graph, groups: Sequence[Group]) -> list[Cut]:
    """Inputs: tensors a group reads but does not write (first-use order).
    Outputs: tensors it writes that another group or the graph output reads."""
    owner = {}
    for g_index, group in enumerate(groups):
        for i in group.nodes:
            for t in graph.nodes[i].outputs:
                owner[t] = g_index
    read_elsewhere: set[tuple[int, str]] = set()
    for g_index, group in enumerate(groups):
        for i in group.nodes:
            for t in graph.nodes[i].inputs:
                if t in owner and owner[t] != g_index:
                    read_elsewhere.add((owner[t], t))
    graph_outputs = set(graph.outputs)
    cuts = []
    for g_index, group in enumerate(groups):
        inputs: list[str] = []
        outputs: list[str] = []
        for i in group.nodes:
            node = graph.nodes[i]
            for t in node.inputs:
                if owner.get(t) != g_index and t not in inputs:
                    inputs.append(t)
            for t in node.outputs:
                if (t in graph_outputs or (g_index, t) in read_elsewhere) and t not in outputs:
                    outputs.append(t)
        name = f"sf{g_index}_{identifier(group.device, 'dev')}"
        cuts.append(Cut(name, group.device, [graph.nodes[i].name for i in group.nodes], inputs, outputs))
    return cuts


# ---------------------------------------------------------------- latency policy

Solution = list[tuple[str, list[int]]]  # (device, node indices in execution order), in execution order


def allowed_devices(graph: Graph, board, cost: CostModel) -> list[list[str]]:
    """Per node, the devices (preference order) that run it and can hold it alone."""
    result = []
    for i, node in enumerate(graph.nodes):
        names, reasons = [], []
        for device in board.devices:
            reason = why_not(device, node, cost.pins)
            if reason is None:
                reason = cost.off_engine.get(device.name, {}).get(i)
            if reason is None:
                over = [k for k, v in cost.usage[device.name][i].items() if v > cost.capacity[device.name][k]]
                if over:
                    reason = f"needs {cost.usage[device.name][i][over[0]]:.4g} {over[0]}, holds " \
                             f"{cost.capacity[device.name][over[0]]:.4g}"
            if reason is None:
                names.append(device.name)
            else:
                reasons.append(f"{device.name}: {reason}")
        if not names:
            raise UserError(f"node '{node.name}': op '{node.op}' cannot run on any device of board "
                            f"'{board.name}' ({'; '.join(reasons)})")
        result.append(names)
    return result


def solution_seconds(cost: CostModel, solution: Solution) -> float:
    return cost.objective_seconds(solution)


# Graphs up to this size also get a local search: every single-node move to another device,
# re-cut on the new assignment's walk orders.
LOCAL_SEARCH_NODES = 64
LOCAL_SEARCH_PASSES = 32
# Steps of the bisection on the capacity price, and how many orders get one.
BISECTIONS = 12
PRICED_ORDERS = 1


def latency_solution(graph: Graph, board, cost: CostModel, local_search_nodes: int = LOCAL_SEARCH_NODES) -> Solution:
    allowed = allowed_devices(graph, board, cost)
    n = len(graph.nodes)
    everything = list(range(n))
    devices = [d.name for d in board.devices]
    candidates: list[Solution] = []
    if all(board.host in names for names in allowed):
        candidates.append([(board.host, everything)])
    support = [n_[0] for n_ in allowed]
    candidates.append([(g.device, g.nodes) for g in contract(graph, support)])
    fastest = [min(names, key=lambda d: cost.seconds[d][i]) for i, names in enumerate(allowed)]
    orders: list[list[int]] = [everything]
    for assignment in (support, fastest):
        for start in devices:
            orders.append(_walk_order(graph, assignment, start))
    orders = [o for k, o in enumerate(orders) if o not in orders[:k]]
    searched = {tuple(o) for o in orders}
    # Cut every order with capacities free; where that does not fit, price capacity on the
    # PRICED_ORDERS orders whose free cut is cheapest (pricing costs a bisection of cuts).
    free = [(_cut(cost, _tables(graph, cost, allowed, o), o, 0.0), o) for o in orders]
    candidates += [solution for solution, _ in free]
    unfit = sorted((item for item in free if not cost.fits(item[0])), key=lambda item: solution_seconds(cost, item[0]))
    price = 0.0
    for _, order in unfit[:PRICED_ORDERS]:
        priced, price = _cut_order(graph, cost, allowed, order)
        if priced:
            candidates.append(priced)
    fitting = [c for c in candidates if cost.fits(c)]
    if not fitting:  # cuts of orders missed every packing that fits: pack the largest nodes first
        packed = [(g.device, g.nodes) for g in contract(graph, _packed_assignment(cost, allowed))]
        fitting = [packed] if cost.fits(packed) else []
    if not fitting:
        raise UserError(f"the model does not fit board '{board.name}': {_capacity_summary(graph, board, cost)}")
    best = min(fitting, key=lambda c: solution_seconds(cost, c))
    best_s = solution_seconds(cost, best)
    small = n <= local_search_nodes
    improved, passes = True, 0
    # Then the best plan's own walk orders and, on small graphs, single-node moves (each taken
    # as it is and re-cut on its walk orders), first improvement first, while they help.
    while improved and passes < (LOCAL_SEARCH_PASSES if small else 2):
        improved, passes = False, passes + 1
        assignment = _assignment(n, best)
        trials = [assignment]
        if small:
            trials += [assignment[:i] + [d] + assignment[i + 1:]
                       for i in range(n) for d in allowed[i] if d != assignment[i]]
        for trial in trials:
            for start in devices:
                groups = contract(graph, trial, start)
                options = [[(g.device, g.nodes) for g in groups]] if small else []
                order = [i for g in groups for i in g.nodes]
                if tuple(order) not in searched:
                    searched.add(tuple(order))
                    # small graphs price each order anew; large ones reuse the price found above
                    options.append(_cut_order(graph, cost, allowed, order, None if small else price)[0])
                for option in options:
                    if option and cost.fits(option) and solution_seconds(cost, option) < best_s - 1e-12:
                        best, best_s, improved = option, solution_seconds(cost, option), True
            if improved and small:
                break
    return best


def _packed_assignment(cost: CostModel, allowed: list[list[str]]) -> list[str]:
    """First fit decreasing: nodes by the largest share of a capacity they take, each onto its
    fastest allowed device that still has room (else its fastest), so that a plan which fits is
    found where one node alone decides it (VGG's first dense layer: its weights fit only the FPGA's
    DDR, and then the other dense layers fit only the CPU)."""
    left = {d: dict(caps) for d, caps in cost.capacity.items()}

    def share(i: int) -> float:
        return max((v / cost.capacity[d][k] for d in allowed[i] for k, v in cost.usage[d][i].items()
                    if cost.capacity[d][k] > 0), default=0.0)

    assignment = [""] * len(allowed)
    for i in sorted(range(len(allowed)), key=lambda i: (-share(i), i)):
        by_speed = sorted(allowed[i], key=lambda d: cost.seconds[d][i])
        room = [d for d in by_speed if all(v <= left[d][k] for k, v in cost.usage[d][i].items())]
        assignment[i] = (room or by_speed)[0]
        for k, v in cost.usage[assignment[i]][i].items():
            left[assignment[i]][k] -= v
    return assignment


def _capacity_summary(graph: Graph, board, cost: CostModel) -> str:
    weights = sum(cost.work[i].weight_elements for i in range(len(graph.nodes)))
    held = []
    for device in board.devices:
        cap = cost.capacity[device.name]
        if device.kind == "fpga":
            usage = cost.usage[device.name]
            needs = {k: sum(usage[i].get(k, 0) for i in range(len(graph.nodes))) for k in units.RESOURCES}
            over = [f"{needs[k]:.0f} {k.upper()}" for k in units.RESOURCES if needs[k] > cap[k]]
            held.append(f"{device.name} holds {', '.join(f'{cap[k]:.0f} {k.upper()}' for k in units.RESOURCES)} "
                        f"with its reserve kept free (and {cap['ddr_bytes'] / 2**20:.4g} MiB of DDR for weights)"
                        + (f", and needs {', '.join(over)} for all of it folded" if over else ""))
        else:
            held.append(f"{device.name} holds {device.memory.bytes / 2**20:.4g} MiB")
    return f"its {weights / 1e6:.4g} M weights take {weights * 4 / 2**20:.4g} MiB as float32; " + "; ".join(held)


def _assignment(n: int, solution: Solution) -> list[str]:
    result = [""] * n
    for device, nodes in solution:
        for i in nodes:
            result[i] = device
    return result


def _walk_order(graph: Graph, assignment: Sequence[str], first: Optional[str] = None) -> list[int]:
    return [i for group in contract(graph, assignment, first) for i in group.nodes]


@dataclass
class _Tables:
    """Per-position arrays of one topological order for the cut programme."""

    seconds: dict[str, np.ndarray]  # prefix sums of node seconds per device
    dispatch: dict[str, np.ndarray]  # ... and of their kernel dispatch (CostModel.dispatch), once a call
    usage: dict[str, dict[str, np.ndarray]]  # prefix sums per device and capacity key
    last_allowed: dict[str, np.ndarray]  # per start i: the largest end j such that i..j-1 all run on the device
    in_edges: list[tuple[int, int, int]]  # (prev, consumer position, bytes): see _cut
    produced_bytes: np.ndarray  # prefix sums of bytes produced per position
    produced_count: np.ndarray
    outputs: list[tuple[int, int, int]]  # (producer position, last reader position or n, bytes)


def _tables(graph: Graph, cost: CostModel, allowed: list[list[str]], order: list[int]) -> _Tables:
    n = len(order)
    position = {node: p for p, node in enumerate(order)}
    devices = list(cost.seconds)
    seconds, dispatch = ({d: np.concatenate([[0.0], np.cumsum([each[d][i] if d in allowed[i] else 0.0 for i in order])])
                         for d in devices} for each in (cost.seconds, cost.dispatch))
    usage = {d: {k: np.concatenate([[0.0], np.cumsum([cost.usage[d][i][k] for i in order])])
                 for k in cost.capacity[d]} for d in devices}
    last_allowed = {}
    for d in devices:
        ends = np.empty(n, dtype=np.int64)
        end = n
        for p in range(n - 1, -1, -1):
            if d not in allowed[order[p]]:
                end = p
            ends[p] = end
        last_allowed[d] = ends
    producer = {t: position[i] for t, i in cost.producers.items()}
    readers: dict[str, set[int]] = {}
    for t, nodes in cost.consumers.items():
        readers[t] = {position[i] for i in nodes}
    in_edges = []
    for t, positions in readers.items():
        prev = producer.get(t, -1)
        for c in sorted(positions):
            in_edges.append((prev, c, cost.tensor_bytes[t]))
            prev = c
    graph_outputs = set(graph.outputs)
    produced = np.zeros(n)
    produced_n = np.zeros(n)
    outputs = []
    for t, p in producer.items():
        last = n if t in graph_outputs else max(readers.get(t, {p}))
        produced[p] += cost.tensor_bytes[t]
        produced_n[p] += 1
        outputs.append((p, last, cost.tensor_bytes[t]))
    return _Tables(seconds, dispatch, usage, last_allowed, in_edges,
                   np.concatenate([[0.0], np.cumsum(produced)]), np.concatenate([[0.0], np.cumsum(produced_n)]),
                   outputs)


def _cut(cost: CostModel, tables: _Tables, order: list[int], price: float) -> Solution:
    """The cheapest cut of ``order`` into groups, usage priced at ``price`` seconds per full capacity.

    The inputs of a group [i, j) are the tensors with a reader in it and their
    previous reader (or producer) before i: edge (prev, c) counts when
    prev < i <= c < j, the c being each tensor's first reader from i on. Its
    outputs are the tensors produced in it and read at or after j (or graph
    outputs). Both are kept as histograms (bytes, count) over c and over the
    last reader, updated as i moves, so every end j of one start i is priced
    at once.
    """
    n = len(order)
    board = cost.board
    best = np.full(n + 1, math.inf)
    best[0] = 0.0
    back_start = np.zeros(n + 1, dtype=np.int64)
    back_device = np.zeros(n + 1, dtype=np.int64)
    # rows: input bytes and count per first reader; output bytes and count per last reader
    # (of the tensors produced at or after i)
    hist = np.zeros((4, n + 1))
    edges_by_prev: dict[int, list[tuple[int, int]]] = {}
    edges_by_reader: dict[int, list[tuple[int, int]]] = {}
    for prev, c, b in tables.in_edges:
        edges_by_prev.setdefault(prev, []).append((c, b))
        edges_by_reader.setdefault(c, []).append((c, b))
    outputs_by_producer: dict[int, list[tuple[int, int]]] = {}
    for p, last, b in tables.outputs:
        outputs_by_producer.setdefault(p, []).append((last, b))
        hist[2:, last] += (b, 1)
    for c, b in edges_by_prev.get(-1, []):
        hist[:2, c] += (b, 1)
    # per start i, the end up to which every node takes a batch a call (batching.takes_batch): a host device's
    # group [i, j) pays its call's overhead once a batch where j reaches no further
    batched_to = np.full(n + 1, n, dtype=np.int64)
    for k in range(n - 1, -1, -1):
        batched_to[k] = batched_to[k + 1] if batching.takes_batch(cost.graph.nodes[order[k]]) else k
    stream_batch = cost.batch if cost.objective == "throughput" else 1
    devices = []
    for index, device in enumerate(board.devices):
        d = device.name
        capacity = cost.capacity[d]
        # Per end j, the part of a group's cost that is a prefix sum: node seconds, the transfer
        # of everything produced before j and, when priced, usage; the histograms take off what
        # was produced before i or is read inside the group.
        prefix = tables.seconds[d].copy()
        weights = np.zeros(4)
        calls = cost.calls_per_sample(d, stream_batch)
        if d != board.host:
            to, back = cost.link_terms(board.host, d, calls), cost.link_terms(d, board.host, calls)
            weights = np.array([to[0], to[1], -back[0], -back[1]])
            prefix += tables.produced_bytes * back[0] + tables.produced_count * back[1]
        if price:  # capacity 0: allowed_devices already keeps nodes that use any of it away
            prefix += price * sum(tables.usage[d][k] / capacity[k] for k in capacity if capacity[k])
        ends = tables.last_allowed[d].copy()
        for k, cap in capacity.items():
            used = tables.usage[d][k]
            ends = np.minimum(ends, np.searchsorted(used, used[:-1] + cap * (1 + 1e-9), side="right") - 1)
        # a host device's overhead, and its nodes' dispatch, once a batch while its group takes batches
        # (calls_per_sample of such nodes): what that saves on each end's prefix
        batched = None
        if device.kind != "fpga" and stream_batch > 1:
            share = cost.calls_per_sample(d, stream_batch, batched=True)
            batched = (share * cost.invocation_overhead_s(d), (1.0 - share) * tables.dispatch[d])
        devices.append((index, prefix, calls * cost.invocation_overhead_s(d), batched, weights if weights.any() else
                        None, ends))
    for i in range(n):
        if i > 0:  # move the start from i - 1 to i
            for c, b in edges_by_reader.get(i - 1, ()):
                hist[:2, c] -= (b, 1)
            for c, b in edges_by_prev.get(i - 1, ()):
                hist[:2, c] += (b, 1)
            for last, b in outputs_by_producer.get(i - 1, ()):
                hist[2:, last] -= (b, 1)
        reach = max(int(dev[5][i]) for dev in devices)
        if reach <= i:
            continue
        running = np.cumsum(hist[:, i:reach], axis=1)  # column j - i - 1: sums over [i, j)
        for index, prefix, overhead, batched, weights, ends in devices:
            end = int(ends[i])
            if end <= i:
                continue
            total = prefix[i + 1:end + 1] + (best[i] + overhead - prefix[i])
            if batched is not None and batched_to[i] > i:  # ends j = i + 1 .. batched_to[i] take batches
                last = min(end, batched_to[i])
                once, dispatch = batched
                total[:last - i] += once - overhead - (dispatch[i + 1:last + 1] - dispatch[i])
            if weights is not None:
                total += weights @ running[:, :end - i]
            current = best[i + 1:end + 1]
            better = total < current - 1e-15
            current[better] = total[better]
            back_start[i + 1:end + 1][better] = i
            back_device[i + 1:end + 1][better] = index
    solution: Solution = []
    j = n
    while j > 0:
        i, d = int(back_start[j]), board.devices[back_device[j]].name
        if solution and solution[0][0] == d:
            solution[0] = (d, order[i:j] + solution[0][1])
        else:
            solution.insert(0, (d, order[i:j]))
        j = i
    return solution


def _cut_order(graph: Graph, cost: CostModel, allowed: list[list[str]], order: list[int],
               known_price: Optional[float] = None) -> tuple[Optional[Solution], float]:
    """The cheapest cut of ``order`` whose devices hold their groups (or None), and the capacity
    price it took. With ``known_price``, that price is tried instead of a bisection."""
    tables = _tables(graph, cost, allowed, order)
    free = _cut(cost, tables, order, 0.0)
    if cost.fits(free):
        return free, 0.0
    if known_price is not None:
        candidate = _cut(cost, tables, order, known_price) if known_price else None
        return (candidate, known_price) if candidate and cost.fits(candidate) else (None, known_price)
    # Price usage until the groups fit: the smallest price that fits loses the least time.
    low, high = 0.0, solution_seconds(cost, free)
    fitting = None
    for _ in range(40):
        candidate = _cut(cost, tables, order, high)
        if cost.fits(candidate):
            fitting = candidate
            break
        low, high = high, high * 4
    if fitting is None:
        return None, 0.0
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        candidate = _cut(cost, tables, order, middle)
        if cost.fits(candidate):
            fitting, high = candidate, middle
        else:
            low = middle
    return fitting, high


# ---------------------------------------------------------------- the stage


@dataclass
class Partition:
    cuts: list[Cut]
    costs: list  # cost.SegmentCost per cut: one sample at batch one
    batch_seconds: list[float]  # per cut: one call on a batch of ``batch`` samples
    batch: int
    latency_s: float
    stream_s: float  # the plan as a pipelined stream at ``batch``: seconds per sample
    all_host_latency_s: Optional[float]  # None when the host cannot run every node
    all_host_stream_s: Optional[float]
    support_latency_s: float
    support_fits: bool
    # (node index, device it runs on, FPGA that could run it, "capacity" or "latency")
    fpga_fallbacks: list[tuple[int, str, str, str, str]]  # node, device, fpga, reason, detail
    ilp: Optional[IlpRun] = None  # the exact partitioner's run, where it ran


def fpga_fallbacks(graph: Graph, board, cost: CostModel, solution: Solution, on_host: frozenset[str] = frozenset()
                   ) -> list[tuple[int, str, str, str, str]]:
    """Every node the plan puts off the board's FPGAs, and why: "unsupported" when the FPGA does not
    run it (the detail names the op or the limit of the board file it breaks), "input quantizer" for
    the nodes ``on_host`` (``input_quantizers``), "pinned" for --device's, "capacity" when that
    FPGA could not hold the node beside what it was given (each unit folded as far as hls4ml
    allows), "latency" when it could but the estimate is lower elsewhere."""
    fpgas = [d for d in board.devices if d.kind == "fpga"]
    fits = cost.fits(solution)
    totals = cost.totals(solution)
    result = []
    for device, nodes in solution:
        if board.device(device).kind == "fpga":
            continue
        for i in nodes:
            for fpga in fpgas:
                why = fpga.why_not(graph.nodes[i])
                if why is not None:
                    result.append((i, device, fpga.name, "unsupported", why))
                    continue
                if graph.nodes[i].name in on_host:
                    result.append((i, device, fpga.name, "input quantizer", ""))
                    continue
                if graph.nodes[i].name in cost.pins:
                    result.append((i, device, fpga.name, "pinned", f"--device {cost.pins[graph.nodes[i].name]}"))
                    continue
                used = totals.get(fpga.name, dict.fromkeys(cost.capacity[fpga.name], 0.0))
                room = fits and all(used[k] + v <= cost.capacity[fpga.name][k]
                                    for k, v in cost.usage[fpga.name][i].items())
                result.append((i, device, fpga.name, "latency" if room else "capacity", ""))
    return result


def partition_graph(graph: Graph, board, policy: str = "latency", width: int = DEFAULT_WIDTH,
                    objective: str = "latency", batch: int = 1, layer_widths: Mapping[str, int] = NO_LAYER_WIDTHS,
                    pins: Mapping[str, str] = NO_PINS, measured: Measured = NOTHING_MEASURED,
                    partitioner: str = "search", ilp_time_limit_s: float = ILP_TIME_LIMIT_S,
                    zero_shares: Mapping[str, float] = NO_ZEROS, compress: str = "none",
                    engine: bool | Collection[str] = False) -> Partition:
    """Cut ``graph`` for ``board`` by ``policy`` (the latency policy minimising ``objective`` at
    ``batch`` samples a call; "host", everything on the host, is the baseline the build compares a
    folded plan with), with the estimates of the plan and of both baselines; ``layer_widths``: the
    bits of the nodes --error-budget sized (``precision.node_widths``); ``pins``: node -> the device
    --device puts it on; ``measured``: a profile's figures (``profile``); ``partitioner`` "ilp": the
    latency policy's plan (either objective) is ``ilp.ilp_solution``'s within ``ilp_time_limit_s``, from
    the search's (never a plan estimated slower than the search's); ``zero_shares`` and ``compress``: the
    tensors' shares of zeros and --compress-transfers, and ``engine``: each FPGA has its engine, for the nodes it
    names where it names some (``CostModel``)."""
    on_host = {graph.nodes[i].name: board.host for i in input_quantizers(graph)} \
        if any(d.kind == "fpga" for d in board.devices) else {}
    user_pins, pins = pins, {**on_host, **pins}  # --device still places any of them
    cost = CostModel(graph, board, width, objective, batch, layer_widths, pins, measured, zero_shares, compress,
                     engine)
    support = [(g.device, g.nodes) for g in contract(graph, assign_by_support(graph, board.devices,
                                                                              f"board '{board.name}'", pins))]
    everything = [(board.host, list(range(len(graph.nodes))))]
    solution = latency_solution(graph, board, cost) if policy == "latency" else \
        everything if policy == "host" else support
    ilp = None
    if policy == "latency" and partitioner == "ilp":
        solution, ilp = _exact(graph, board, cost, solution, ilp_time_limit_s)
    if policy == "latency" and objective == "throughput":  # the latency plan is a stream too: never do worse
        for_latency = copy.copy(cost)
        for_latency.objective = "latency"
        solution = min(solution, latency_solution(graph, board, for_latency), key=cost.objective_seconds)
    host = board.device(board.host)
    runs_all = all(host.why_not(node) is None for node in graph.nodes)
    groups = [Group(device, nodes) for device, nodes in solution]
    costs = [cost.segment(nodes, device) for device, nodes in solution]
    return Partition(
        cuts=boundaries(graph, groups),
        costs=costs,
        batch_seconds=[batch * cost.segment(nodes, device, batch).total_s for device, nodes in solution],
        batch=batch,
        latency_s=sum(c.total_s for c in costs),
        stream_s=cost.stream_seconds(solution, batch),
        all_host_latency_s=cost.segment(everything[0][1], board.host).total_s if runs_all else None,
        all_host_stream_s=cost.stream_seconds(everything, batch) if runs_all else None,
        support_latency_s=sum(cost.segment(nodes, device).total_s for device, nodes in support),
        support_fits=cost.fits(support),
        fpga_fallbacks=fpga_fallbacks(graph, board, cost, solution, frozenset(on_host) - set(user_pins)),
        ilp=ilp,
    )


def _exact(graph: Graph, board, cost: CostModel, search: Solution, time_limit_s: float) -> tuple[Solution, IlpRun]:
    """The integer programme's plan where it is estimated faster than ``search`` and fits, else
    ``search``; and what the solver did."""
    result = ilp_solution(graph, cost, allowed_devices(graph, board, cost), board.host, search, time_limit_s)
    search_s = solution_seconds(cost, search)
    better = result.solution is not None and cost.fits(result.solution) and \
        solution_seconds(cost, result.solution) < search_s * (1 - 1e-9)
    chosen = result.solution if better else search
    bound = result.bound_s if math.isfinite(result.bound_s) else None
    latency = solution_seconds(cost, chosen)
    gap = None if bound is None else max(0.0, latency - bound) / latency if latency > 0 else 0.0
    return chosen, IlpRun(result.status, result.slots, bound, gap, result.seconds, time_limit_s, search_s,
                          "ilp" if better else "search")


# ---------------------------------------------------------------- exact search (small graphs)


def optimal_solution(graph: Graph, board, cost: CostModel) -> Solution:
    """The least-latency plan over every cycle-free cut, by exhaustive search: for checking
    ``latency_solution`` on graphs of up to about 16 nodes (the search is exponential).

    Any cut whose group graph has no cycle runs its groups in some order, each
    group being the difference of two downsets (predecessor-closed node sets)
    of the graph; so a shortest path over downsets, with a group's cost
    depending only on its nodes and device, is the optimum. Shared capacities
    are kept exact by carrying the Pareto set of (seconds, usage) per downset.
    """
    n = len(graph.nodes)
    allowed = allowed_devices(graph, board, cost)
    producers = graph.producers()
    preds = [sum(1 << producers[t] for t in node.inputs if t in producers) for node in graph.nodes]
    devices = [d.name for d in board.devices]
    allowed_mask = {d: sum(1 << i for i in range(n) if d in allowed[i]) for d in devices}
    # Only capacities that everything together could exceed need tracking.
    keys = [(d, k) for d in devices for k, cap in cost.capacity[d].items()
            if sum(cost.usage[d][i][k] for i in range(n)) > cap]
    downsets, frontier = {0}, [0]
    while frontier:
        current = frontier.pop()
        for v in range(n):
            if not current >> v & 1 and preds[v] & ~current == 0 and current | 1 << v not in downsets:
                downsets.add(current | 1 << v)
                frontier.append(current | 1 << v)
    ordered = sorted(downsets, key=lambda m: (bin(m).count("1"), m))
    # label: (seconds, usage tuple, parent label, group mask, device)
    labels: dict[int, list[tuple]] = {0: [(0.0, (0.0,) * len(keys), None, 0, "")]}
    for start in ordered:
        for stop in ordered:
            group = stop & ~start
            if stop & start != start or not group:
                continue
            nodes = [i for i in range(n) if group >> i & 1]
            for d in devices:
                if group & ~allowed_mask[d]:
                    continue
                seconds = cost.segment(nodes, d).total_s
                used = [sum(cost.usage[d][i][k] for i in nodes) if kd == d else 0.0 for kd, k in keys]
                for label in labels.get(start, ()):
                    total = tuple(a + b for a, b in zip(label[1], used))
                    if any(t > cost.capacity[kd][k] for t, (kd, k) in zip(total, keys)):
                        continue
                    _add_label(labels.setdefault(stop, []), (label[0] + seconds, total, label, group, d))
    full = (1 << n) - 1
    if not labels.get(full):
        raise UserError(f"the model does not fit board '{board.name}': {_capacity_summary(graph, board, cost)}")
    label = min(labels[full], key=lambda item: item[0])
    solution: Solution = []
    while label[2] is not None:
        solution.insert(0, (label[4], [i for i in range(n) if label[3] >> i & 1]))
        label = label[2]
    return solution


def _add_label(labels: list[tuple], new: tuple) -> None:
    """Keep ``labels`` a Pareto set over (seconds, usage)."""
    for old in labels:
        if old[0] <= new[0] and all(a <= b for a, b in zip(old[1], new[1])):
            return
    labels[:] = [old for old in labels if not (new[0] <= old[0] and all(a <= b for a, b in zip(new[1], old[1])))]
    labels.append(new)
