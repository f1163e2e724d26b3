"""Stage 3: cut the graph into subfunctions, one device each, with no cycle between them.

Pure functions over ``graph.Graph``; devices only need ``name`` and
``why_not(node)``.

The seed method (``support``): every node goes to the first device in the
board's order that runs it; same-device nodes are then contracted into groups
by a topological walk that keeps taking ready nodes of the current device
before it switches (the "waves" of ONNX Runtime's partitioning_utils). Each
group is a contiguous stretch of one topological order, so every edge between
groups points forward: the group graph cannot have a cycle, whatever the DAG
(residual, multi-branch, dense concatenation).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Protocol, Sequence

from .errors import UserError
from .graph import Graph, Node
from .names import identifier


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
