"""The exact partitioner (``--partitioner ilp``): the latency policy's objective as a mixed-integer
programme, solved by HiGHS (``highspy``) within a time limit, started from the search's plan.

The programme prices a plan exactly as ``cost.CostModel.objective_seconds`` does, so its optimum is
the cost model's optimum over the plans it can express:

- subfunctions are ``slots`` 0..K-1 in order; ``z[i, k, d]`` puts node i in slot k on device d
  (only devices that run it and hold it alone, ``partition.allowed_devices``); ``y[k, d]`` gives
  slot k device d, at most one a slot, and slots are used from the first on (symmetry);
- no cycle: for every edge u -> v and every k, v sits in a slot at most k only if u does, so every
  edge points forward and the slots in order are a topological order of subfunctions;
- cost: each node's seconds on its device (a node that takes a batch, its dispatch once a batch), each used
  slot's call overhead, and for a slot off the
  host each tensor it takes in (consumed there, produced elsewhere or a model input) and gives out
  (produced there, consumed elsewhere or a model output) at the link's seconds for one tensor of
  its bytes (``CostModel.crossing_seconds``, a profile's where measured, zero-compressed where that pays);
- capacity: every device's usages (an FPGA's resources fully folded, DDR, memory) within it, as
  the search checks them.
- under the throughput objective (a stream of batches of ``cost.batch``), each of those terms a sample
  at that batch (an FPGA call's overhead and link latencies shared by its batch) loads the resource
  its slot occupies (its CPU or GPU, shared by its slots; an FPGA slot is a core of its own, whose call's
  overhead loads the host's CPU too), and the
  objective is the busiest resource's load plus the tie-break share of all of them
  (``cost.stream_seconds``, ``cost.STREAM_TIE_BREAK``).

K is the node count on graphs of up to ``EXACT_NODES`` nodes, where the optimum is over every
cycle-free cut; above it, the search's subfunctions plus ``EXTRA_SLOTS``, and the optimum (and its
proven gap) is over plans of at most K subfunctions. The search's plan is the solver's starting
point and stays the answer unless the solver finds a better one that ``CostModel.fits``, so the
ILP's plan is never estimated slower than the search's.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..core.graph import Graph
from . import batching
from .cost import STREAM_TIE_BREAK, CostModel

EXACT_NODES = 24
EXTRA_SLOTS = 6
SECONDS = 1e6  # the programme's unit: microseconds (coefficients near 1 for HiGHS's tolerances)
Solution = list  # [(device, [node indices])], as partition's


@dataclass(frozen=True)
class IlpResult:
    solution: Optional[Solution]  # the solver's best plan (None: it found none within the limit)
    status: str  # HiGHS's model status: "Optimal", "Time limit reached", ...
    objective_s: Optional[float]  # its plan's seconds as the programme prices them
    bound_s: float  # the proven lower bound on any plan of at most ``slots`` subfunctions (-inf: none)
    slots: int
    seconds: float  # solving time


class _Programme:
    """Columns and rows of a mixed-integer programme, built up and handed to HiGHS at once."""

    def __init__(self):
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.integer: list[bool] = []
        self.rows: list[tuple[list[int], list[float], float, float]] = []

    def column(self, cost: float = 0.0, binary: bool = True, upper: float = 1.0) -> int:
        self.cost.append(cost)
        self.upper.append(upper)
        self.integer.append(binary)
        return len(self.cost) - 1

    def row(self, columns: list[int], values: list[float], lower: float, upper: float) -> None:
        if columns:
            self.rows.append((columns, values, lower, upper))

    def solve(self, time_limit_s: float, start: Optional[np.ndarray]):
        import highspy

        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = len(self.cost), len(self.rows)
        lp.col_cost_ = np.array(self.cost)
        lp.col_lower_ = np.zeros(len(self.cost))
        lp.col_upper_ = np.array([inf if u == np.inf else u for u in self.upper])
        lp.row_lower_ = np.array([-inf if r[2] == -np.inf else r[2] for r in self.rows])
        lp.row_upper_ = np.array([inf if r[3] == np.inf else r[3] for r in self.rows])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.cumsum([0] + [len(r[0]) for r in self.rows]).astype(np.int32)
        lp.a_matrix_.index_ = np.array([c for r in self.rows for c in r[0]], dtype=np.int32)
        lp.a_matrix_.value_ = np.array([v for r in self.rows for v in r[1]], dtype=float)
        lp.integrality_ = [highspy.HighsVarType.kInteger if b else highspy.HighsVarType.kContinuous
                           for b in self.integer]
        solver = _quiet_solver()
        solver.setOptionValue("output_flag", False)
        solver.setOptionValue("time_limit", float(time_limit_s))
        solver.setOptionValue("threads", 1)
        solver.setOptionValue("random_seed", 0)  # same inputs, same plan
        solver.passModel(lp)
        if start is not None:
            given = highspy.HighsSolution()
            given.col_value = list(start)
            given.value_valid = True
            solver.setSolution(given)
        solver.run()
        return solver


def _quiet_solver():
    """A HiGHS instance. The first one made in a process prints HiGHS's banner on the C-level stdout,
    where it would spoil ``plan --json``: that is sent to /dev/null meanwhile."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def ilp_solution(graph: Graph, cost: CostModel, allowed: list[list[str]], host: str, start: Solution,
                 time_limit_s: float) -> IlpResult:
    """The plan of ``graph`` that minimises ``cost``'s objective as the programme above, from the plan
    ``start``."""
    n = len(graph.nodes)
    slots = n if n <= EXACT_NODES else min(n, len(start) + EXTRA_SLOTS)
    order = [x.name for x in cost.board.devices]
    devices = sorted({d for names in allowed for d in names}, key=order.index)
    stream = cost.objective == "throughput"
    batch = cost.batch if stream else 1
    calls = {d: cost.calls_per_sample(d, batch) for d in devices}
    # a CPU's or GPU's group a batch a call unless it holds a node that takes none (batching.takes_batch): its
    # overhead once a batch, plus the rest of a sample's where such a node is in it (a column at least each of
    # theirs). Its link latencies stay a sample's (a GPU's; an upper bound on what cost.segment prices)
    batched = {d: cost.calls_per_sample(d, batch, batched=True) for d in devices}
    p = _Programme()
    loads: dict[object, tuple[list[int], list[float]]] = {}  # a stream's resource -> its columns and seconds

    def priced(seconds: float, device: str, k: int, binary: bool = True) -> int:
        """A column of ``seconds`` a sample on ``device`` in slot k: the latency's term, or under the
        throughput objective its tie-break share and a load on the resource the slot occupies."""
        column = p.column(seconds * (STREAM_TIE_BREAK if stream else 1.0) * SECONDS, binary)
        if stream:
            resource = (device, k) if cost.board.device(device).kind == "fpga" else device
            columns, values = loads.setdefault(resource, ([], []))
            columns.append(column)
            values.append(seconds * SECONDS)
        return column

    # a node that takes a batch pays its dispatch once a batch (a lower bound where a node that takes none shares
    # its group)
    z = {(i, k, d): priced(cost.seconds[d][i] - (1.0 - batched[d]) * cost.dispatch[d][i] *
                           batching.takes_batch(graph.nodes[i]), d, k)
         for i in range(n) for k in range(slots) for d in allowed[i]}
    y = {(k, d): priced(batched[d] * cost.invocation_overhead_s(d), d, k)
         for k in range(slots) for d in devices}
    if stream:  # an FPGA call's overhead loads the host's CPU too, which drives it (cost.driven_stages)
        for (k, d), column in y.items():
            if cost.board.device(d).kind == "fpga":
                columns, values = loads.setdefault(host, ([], []))
                columns.append(column)
                values.append(batched[d] * cost.invocation_overhead_s(d) * SECONDS)
    for d in (d for d in devices if calls[d] > batched[d]):
        alone = [i for i in range(n) if d in allowed[i] and not batching.takes_batch(graph.nodes[i])]
        for k in range(slots if alone else 0):
            unbatched = priced((calls[d] - batched[d]) * cost.invocation_overhead_s(d), d, k, binary=False)
            for i in alone:
                p.row([unbatched, z[i, k, d]], [1.0, -1.0], 0.0, np.inf)
    for i in range(n):  # every node in one slot on one device
        cols = [z[i, k, d] for k in range(slots) for d in allowed[i]]
        p.row(cols, [1.0] * len(cols), 1.0, 1.0)
    for k in range(slots):
        p.row([y[k, d] for d in devices], [1.0] * len(devices), -np.inf, 1.0)
        if k:  # slots used from the first on
            p.row([y[k, d] for d in devices] + [y[k - 1, d] for d in devices],
                  [1.0] * len(devices) + [-1.0] * len(devices), -np.inf, 0.0)
        for i in range(n):
            for d in allowed[i]:
                p.row([z[i, k, d], y[k, d]], [1.0, -1.0], -np.inf, 0.0)

    # by[i, k]: node i sits in a slot up to k (a running sum, so that each edge's rows stay short)
    by = {(i, k): p.column(binary=False) for i in range(n) for k in range(slots - 1)}
    for i in range(n):
        for k in range(slots - 1):
            here = [z[i, k, d] for d in allowed[i]]
            earlier = [by[i, k - 1]] if k else []
            p.row([by[i, k]] + here + earlier, [1.0] + [-1.0] * (len(here) + len(earlier)), 0.0, 0.0)
    producers, consumers = graph.producers(), graph.consumers()
    for v, node in enumerate(graph.nodes):  # every edge forward: v up to slot k only where u is too
        for u in {producers[t] for t in node.inputs if producers.get(t) is not None}:
            for k in range(slots - 1):
                p.row([by[v, k], by[u, k]], [1.0, -1.0], -np.inf, 0.0)
    outputs = set(graph.outputs)
    tensors = {t for node in graph.nodes for t in list(node.inputs) + list(node.outputs)}
    for t in sorted(tensors):
        producer = producers.get(t)
        readers = sorted(set(consumers.get(t, [])))
        for k in range(slots):
            for d in (d for d in devices if d != host):
                here = [z[producer, k, e] for e in allowed[producer]] if producer is not None else []
                if readers:  # taken in: read in slot k on d, made elsewhere
                    taken = priced(cost.crossing_seconds(t, host, d, calls[d]), d, k, binary=False)
                    for c in (c for c in readers if d in allowed[c]):
                        p.row([taken, z[c, k, d]] + here, [1.0, -1.0] + [1.0] * len(here), 0.0, np.inf)
                if producer is not None and d in allowed[producer]:  # given out: made in k on d, read elsewhere
                    given = priced(cost.crossing_seconds(t, d, host, calls[d]), d, k, binary=False)
                    if t in outputs:
                        p.row([given, z[producer, k, d]], [1.0, -1.0], 0.0, np.inf)
                    for c in readers:
                        there = [z[c, k, e] for e in allowed[c]]
                        p.row([given, z[producer, k, d]] + there, [1.0, -1.0] + [1.0] * len(there), 0.0, np.inf)
    for d in devices:  # capacities
        for key, held in cost.capacity[d].items():
            cols, values = [], []
            for i in range(n):
                used = cost.usage[d][i].get(key, 0.0)
                if used and d in allowed[i]:
                    for k in range(slots):
                        cols.append(z[i, k, d])
                        values.append(used)
            if cols and sum(values) / slots > held:
                p.row(cols, values, -np.inf, held)
    if stream:  # the pace: the busiest resource's seconds a sample (cost.stream_seconds)
        pace = p.column(1.0, binary=False, upper=np.inf)
        for columns, values in loads.values():
            p.row([pace] + columns, [1.0] + [-v for v in values], 0.0, np.inf)
    solver = p.solve(time_limit_s, _start(p, z, y, start, slots))
    info = solver.getInfo()
    status = solver.modelStatusToString(solver.getModelStatus())
    values = np.array(solver.getSolution().col_value) if info.primal_solution_status == 2 else None
    solution = _plan_of(values, z, n, slots) if values is not None and len(values) == len(p.cost) else None
    return IlpResult(solution, status, info.objective_function_value / SECONDS if solution else None,
                     info.mip_dual_bound / SECONDS, slots, solver.getRunTime())


def _start(p: _Programme, z: dict, y: dict, start: Solution, slots: int) -> Optional[np.ndarray]:
    """The plan ``start`` as the programme's columns: its slots and nodes, and each transfer column
    at the least its rows allow (each such row: the column minus what it must cover, at least 0)."""
    if len(start) > slots:
        return None
    values = np.zeros(len(p.cost))
    for k, (device, nodes) in enumerate(start):
        values[y[k, device]] = 1.0
        for i in nodes:
            values[z[i, k, device]] = 1.0
    for columns, coefficients, _, _ in p.rows:  # in the order made: a running sum after what it sums
        if not p.integer[columns[0]]:
            covered = -sum(v * values[c] for c, v in zip(columns[1:], coefficients[1:]))
            values[columns[0]] = max(values[columns[0]], covered)
    return values


def _plan_of(values: np.ndarray, z: dict, n: int, slots: int) -> Solution:
    """The solution's slots in order, each (device, its nodes in graph order)."""
    groups: dict[int, tuple[str, list[int]]] = {}
    for (i, k, d), column in z.items():
        if values[column] > 0.5:
            groups.setdefault(k, (d, []))[1].append(i)
    return [(d, sorted(nodes)) for _, (d, nodes) in sorted(groups.items())]
