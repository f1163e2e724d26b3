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
are candidates too, so the result is never estimated slower than either.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

import numpy as np

from .cost import CostModel
from .errors import UserError
from .graph import Graph, Node
from .names import identifier

POLICIES = ("latency", "support")


class DeviceLike(Protocol):
    name: str
    kind: str

    def why_not(self, node: Node) -> str | None: ...


@dataclass
class Group:
    device: str
    nodes: list[int]  # node indices, in execution order


def assign_by_support(graph: Graph, devices: Sequence[DeviceLike], board: str = "the board") -> list[str]:
    """The first device (board order) that runs each node."""
    assignment = []
    for node in graph.nodes:
        reasons = []
        for device in devices:
            reason = device.why_not(node)
            if reason is None:
                assignment.append(device.name)
                break
            reasons.append(f"{device.name}: {reason}")
        else:
            raise UserError(
                f"node '{node.name}': op '{node.op}' is not run by any device of {board} ({'; '.join(reasons)})"
            )
    return assignment


def contract(graph: Graph, assignment: Sequence[str]) -> list[Group]:
    """Contract same-device nodes into groups that form a DAG (see module doc)."""
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
            reason = device.why_not(node)
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
    return sum(cost.segment(nodes, device).total_s for device, nodes in solution)


def latency_solution(graph: Graph, board, cost: CostModel) -> Solution:
    allowed = allowed_devices(graph, board, cost)
    candidates: list[Solution] = [[(board.host, list(range(len(graph.nodes))))]]
    support = [g for g in contract(graph, [names[0] for names in allowed])]
    support_solution = [(g.device, g.nodes) for g in support]
    if cost.fits(support_solution):
        candidates.append(support_solution)
    fastest = [min(names, key=lambda d: cost.seconds[d][i]) for i, names in enumerate(allowed)]
    orders = [list(range(len(graph.nodes))), _walk_order(graph, [n[0] for n in allowed]), _walk_order(graph, fastest)]
    seen: list[list[int]] = []
    for order in orders:
        if order not in seen:
            seen.append(order)
            candidates.append(_cut_order(graph, cost, allowed, order))
    best = min((c for c in candidates if c), key=lambda c: solution_seconds(cost, c))
    # The best cut's own walk order can merge groups the first orders kept apart.
    for _ in range(2):
        order = _walk_order(graph, _assignment(len(graph.nodes), best))
        if order in seen:
            break
        seen.append(order)
        better = _cut_order(graph, cost, allowed, order)
        if not better or solution_seconds(cost, better) >= solution_seconds(cost, best):
            break
        best = better
    if not cost.fits(best):
        raise UserError(f"the model does not fit board '{board.name}': "
                        + ", ".join(f"{d}: {', '.join(f'{k} {v:.4g}' for k, v in cap.items())}"
                                    for d, cap in cost.capacity.items()))
    return best


def _assignment(n: int, solution: Solution) -> list[str]:
    result = [""] * n
    for device, nodes in solution:
        for i in nodes:
            result[i] = device
    return result


def _walk_order(graph: Graph, assignment: Sequence[str]) -> list[int]:
    return [i for group in contract(graph, assignment) for i in group.nodes]


@dataclass
class _Tables:
    """Per-position arrays of one topological order for the cut programme."""

    seconds: dict[str, np.ndarray]  # prefix sums of node seconds per device
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
    seconds = {d: np.concatenate([[0.0], np.cumsum([cost.seconds[d][i] if d in allowed[i] else 0.0
                                                    for i in order])]) for d in devices}
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
    return _Tables(seconds, usage, last_allowed, in_edges,
                   np.concatenate([[0.0], np.cumsum(produced)]), np.concatenate([[0.0], np.cumsum(produced_n)]),
                   outputs)


def _cut(cost: CostModel, tables: _Tables, order: list[int], price: float) -> Solution:
    """The cheapest cut of ``order`` into groups, usage priced at ``price`` seconds per full capacity.

    The inputs of a group [i, j) are the tensors with a reader in it and their
    previous reader (or producer) before i: edge (prev, c) counts when
    prev < i <= c < j, the c being each tensor's first reader from i on. Its
    outputs are the tensors produced in it and read at or after j (or graph
    outputs). Both are kept as histograms over c and over the last reader,
    updated as i moves, so every end j of one start i is priced at once.
    """
    n = len(order)
    board = cost.board
    host = board.host
    best = np.full(n + 1, math.inf)
    best[0] = 0.0
    back_start = np.zeros(n + 1, dtype=np.int64)
    back_device = [""] * (n + 1)
    in_bytes, in_count = np.zeros(n), np.zeros(n)
    out_bytes, out_count = np.zeros(n + 1), np.zeros(n + 1)
    edges_by_prev: dict[int, list[tuple[int, int]]] = {}
    edges_by_reader: dict[int, list[tuple[int, int]]] = {}
    for prev, c, b in tables.in_edges:
        edges_by_prev.setdefault(prev, []).append((c, b))
        edges_by_reader.setdefault(c, []).append((c, b))
    outputs_by_producer: dict[int, list[tuple[int, int]]] = {}
    for p, last, b in tables.outputs:
        outputs_by_producer.setdefault(p, []).append((last, b))
        out_bytes[last] += b
        out_count[last] += 1
    for c, b in edges_by_prev.get(-1, []):
        in_bytes[c] += b
        in_count[c] += 1
    devices = []
    for device in board.devices:
        d = device.name
        capacity = cost.capacity[d]
        # capacity 0: allowed_devices already keeps nodes that use any of it away
        weights = sum(tables.usage[d][k] / capacity[k] for k in capacity if capacity[k]) if price else None
        link_in = board.link(host, d) if d != host else None
        link_out = board.link(d, host) if d != host else None
        devices.append((d, device.invocation_overhead_s, capacity, weights, link_in, link_out))
    for i in range(n):
        if i > 0:  # move the start from i - 1 to i
            for c, b in edges_by_reader.get(i - 1, []):
                in_bytes[c] -= b
                in_count[c] -= 1
            for c, b in edges_by_prev.get(i - 1, []):
                in_bytes[c] += b
                in_count[c] += 1
            for last, b in outputs_by_producer.get(i - 1, []):
                out_bytes[last] -= b
                out_count[last] -= 1
        if not math.isfinite(best[i]):
            continue
        for d, overhead, capacity, weights, link_in, link_out in devices:
            end = int(tables.last_allowed[d][i])
            for k, cap in capacity.items():
                prefix = tables.usage[d][k]
                end = min(end, int(np.searchsorted(prefix, prefix[i] + cap * (1 + 1e-9), side="right")) - 1)
            if end <= i:
                continue
            ends = np.arange(i + 1, end + 1)
            total = best[i] + overhead + tables.seconds[d][ends] - tables.seconds[d][i]
            if link_in is not None:
                total += (np.cumsum(in_count[i:end]) * link_in.latency_s
                          + np.cumsum(in_bytes[i:end]) / link_in.bandwidth_bytes_per_s)
                outs_b = tables.produced_bytes[ends] - tables.produced_bytes[i] - np.cumsum(out_bytes[i:end])
                outs_n = tables.produced_count[ends] - tables.produced_count[i] - np.cumsum(out_count[i:end])
                total += outs_n * link_out.latency_s + outs_b / link_out.bandwidth_bytes_per_s
            if weights is not None:
                total += price * (weights[ends] - weights[i])
            better = total < best[ends] - 1e-15
            if better.any():
                improved = ends[better]
                best[improved] = total[better]
                back_start[improved] = i
                for j in improved:
                    back_device[j] = d
    solution: Solution = []
    j = n
    while j > 0:
        i, d = int(back_start[j]), back_device[j]
        if solution and solution[0][0] == d:
            solution[0] = (d, order[i:j] + solution[0][1])
        else:
            solution.insert(0, (d, order[i:j]))
        j = i
    return solution


def _cut_order(graph: Graph, cost: CostModel, allowed: list[list[str]], order: list[int]) -> Optional[Solution]:
    """The cheapest cut of ``order`` whose devices hold their groups, or None."""
    tables = _tables(graph, cost, allowed, order)
    free = _cut(cost, tables, order, 0.0)
    if cost.fits(free):
        return free
    # Price usage until the groups fit: the smallest price that fits loses the least time.
    base = solution_seconds(cost, free)
    low, high = 0.0, base
    fitting = None
    for _ in range(40):
        candidate = _cut(cost, tables, order, high)
        if cost.fits(candidate):
            fitting = candidate
            break
        low, high = high, high * 4
    if fitting is None:
        return None
    for _ in range(12):
        middle = (low + high) / 2
        candidate = _cut(cost, tables, order, middle)
        if cost.fits(candidate):
            fitting, high = candidate, middle
        else:
            low = middle
    return fitting


# ---------------------------------------------------------------- the stage


@dataclass
class Partition:
    cuts: list[Cut]
    costs: list  # cost.SegmentCost per cut
    latency_s: float
    all_host_latency_s: Optional[float]  # None when the host cannot run every node
    support_latency_s: float
    support_fits: bool


def partition_graph(graph: Graph, board, policy: str = "latency", width: int = 16) -> Partition:
    """Cut ``graph`` for ``board`` by ``policy``, with the estimates of the plan and of both baselines."""
    cost = CostModel(graph, board, width)
    support = [(g.device, g.nodes) for g in contract(graph, assign_by_support(graph, board.devices,
                                                                              f"board '{board.name}'"))]
    solution = latency_solution(graph, board, cost) if policy == "latency" else support
    host = board.device(board.host)
    runs_all = all(host.why_not(node) is None for node in graph.nodes)
    groups = [Group(device, nodes) for device, nodes in solution]
    costs = [cost.segment(nodes, device) for device, nodes in solution]
    return Partition(
        cuts=boundaries(graph, groups),
        costs=costs,
        latency_s=sum(c.total_s for c in costs),
        all_host_latency_s=cost.segment(range(len(graph.nodes)), board.host).total_s if runs_all else None,
        support_latency_s=solution_seconds(cost, support),
        support_fits=cost.fits(support),
    )
