"""The memory planner (hetdeploy/planning/memory.py) on published architectures, at scale, and on MiniMalloc.

    .venv/bin/python benchmarks/memory.py

Prints three tables; run by hand (tests check behaviour, never time).
1. Footprint over the lower bound (most bytes live at once) per strategy, with planning time: every
   activation of each network in benchmarks/graphs.py as a float32 buffer, schedule = node order,
   batch 1 (the setting of FACTS.md section 3).
2. Planning time of 10,000 buffers (a chain with short skips).
3. The MiniMalloc "challenging" instances (../shared/benchmarks/minimalloc): how many fit 1 MiB.
4. The unit schedule: peak live bytes of the node order against memory.schedule's choice.
"""

from __future__ import annotations

import csv
import math
import random
import statistics
import time
from pathlib import Path

import graphs
from hetdeploy.planning.memory import SEARCH_NODES, STRATEGIES, Request, footprint, lifetimes, lower_bound, place, schedule

MINIMALLOC = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "minimalloc"


def network_steps(graph) -> tuple[list, dict[str, int]]:
    """Per node what it reads and writes, and each tensor's float32 bytes."""
    shapes = {t: s for n in graph.nodes for t, s in zip(n.outputs, n.output_shapes)}
    shapes.update({t: s for n in graph.nodes for t, s in zip(n.inputs, n.input_shapes)})
    return [(n.inputs, n.outputs[:1]) for n in graph.nodes], {t: 4 * math.prod(s) for t, s in shapes.items()}


def network_requests(graph, order=None) -> list[Request]:
    steps, sizes = network_steps(graph)
    steps = [steps[k] for k in order] if order is not None else steps
    return [Request(sizes[b.tensor], b.first, b.last) for b in lifetimes(steps, graph.inputs, graph.outputs)]


def timed(requests, strategy, **capacity):
    started = time.perf_counter()
    placements = place(requests, strategy, **capacity)
    return placements, time.perf_counter() - started


def architectures() -> None:
    print("1. footprint / lower bound (planning ms), float32 activations, node order")
    print(f"{'network':<12} {'buffers':>7} {'lower bound MB':>14}" + "".join(f"{s:>20}" for s in STRATEGIES))
    on_bound = {s: 0 for s in STRATEGIES}
    ratios = {s: [] for s in STRATEGIES}
    for name, make in graphs.ARCHITECTURES.items():
        requests = network_requests(make())
        bound = lower_bound(requests)
        cells = []
        for strategy in STRATEGIES:
            placements, seconds = timed(requests, strategy)
            ratio = footprint(requests, placements, "bram") / bound
            ratios[strategy].append(ratio)
            on_bound[strategy] += ratio == 1.0
            cells.append(f"{ratio:>11.4f} ({seconds * 1e3:>5.1f})")
        print(f"{name:<12} {len(requests):>7} {bound / 2**20:>14.2f}" + "".join(f"{c:>20}" for c in cells))
    for strategy in STRATEGIES:
        values = ratios[strategy]
        print(f"  {strategy}: on the bound for {on_bound[strategy]} of {len(values)}, mean "
              f"+{(sum(values) / len(values) - 1) * 100:.1f} %, max +{(max(values) - 1) * 100:.1f} %")


def schedules() -> None:
    print("\n4. schedule: peak live bytes of the node order and of memory.schedule's pick (ms to choose)")
    print(f"{'network':<12} {'node order MB':>13} {'schedule MB':>11} {'change':>8} {'ms':>7}")
    for name, make in graphs.ARCHITECTURES.items():
        graph = make()
        steps, sizes = network_steps(graph)
        started = time.perf_counter()
        order = schedule(steps, sizes, graph.inputs, graph.outputs)
        seconds = time.perf_counter() - started
        given, chosen = lower_bound(network_requests(graph)), lower_bound(network_requests(graph, order))
        print(f"{name:<12} {given / 2**20:>13.2f} {chosen / 2**20:>11.2f} {(chosen / given - 1) * 100:>7.1f}% "
              f"{seconds * 1e3:>7.0f}")


def at_scale() -> None:
    rng = random.Random(1)
    n = 10_000
    requests = [Request(rng.randint(1, 1000) * 64, i, min(n - 1, i + rng.choice([1, 1, 1, 2, 4]))) for i in range(n)]
    print(f"\n2. {n:,} buffers (chain with skips of up to 4 steps): planning ms, best of 5")
    for strategy in STRATEGIES:
        best = min(timed(requests, strategy)[1] for _ in range(5))
        print(f"  {strategy:<9} {best * 1e3:7.1f} ms")


def minimalloc() -> None:
    """Each instance twice: with its own times, and with its times renumbered as consecutive steps
    (the same overlaps, as hetdeploy's buffers come); the planner's answer must not differ."""
    files = sorted(MINIMALLOC.glob("benchmarks_challenging_*.csv"))
    print(f"\n3. MiniMalloc challenging instances, capacity 1 MiB: the planner unbounded (footprint as a multiple of the "
          f"capacity), then the planner bounded to 1 MiB (greedy, its exact search of up to {SEARCH_NODES:,} nodes, "
          f"the hill climb), with the instance's own times and renumbered")
    print(f"{'instance':<9} {'buffers':>7} {'lower bound':>11} {'unbounded':>10} {'own: fits':>10} {'s':>6} "
          f"{'renumbered: fits':>17} {'s':>6}  same answer")
    fitted, seconds_all = {"own": 0, "renumbered": 0}, {"own": [], "renumbered": []}
    for path in files:
        with path.open() as f:
            rows = [(int(r["lower"]), int(r["upper"]), int(r["size"])) for r in csv.DictReader(f)]
        capacity = int(path.suffixes[0].lstrip("."))
        times = {t: k for k, t in enumerate(sorted({t for lower, upper, _ in rows for t in (lower, upper)}))}
        cells, answers = [], []
        for clock, number in (("own", lambda t: t), ("renumbered", times.__getitem__)):
            requests = [Request(size, number(lower), number(upper) - 1) for lower, upper, size in rows]  # [lower, upper)
            placements, seconds = timed(requests, "greedy", target=capacity, reserved=0)
            fits = all(p.memory == "bram" for p in placements)
            fitted[clock] += fits
            seconds_all[clock].append(seconds)
            answers.append(placements)
            cells.append(f"{'yes' if fits else 'no':>{10 if clock == 'own' else 17}} {seconds:>6.1f}")
        plain = footprint(requests, place(requests, "greedy"), "bram")
        print(f"{path.stem.split('_')[-1].split('.')[0]:<9} {len(rows):>7} {lower_bound(requests):>11} "
              f"{plain / capacity:>9.3f}x {cells[0]} {cells[1]}  {answers[0] == answers[1]}", flush=True)
    for clock in fitted:
        print(f"  {clock}: fit 1 MiB {fitted[clock]} of {len(files)}; median {statistics.median(seconds_all[clock]):.1f} s, "
              f"longest {max(seconds_all[clock]):.1f} s")


if __name__ == "__main__":
    architectures()
    at_scale()
    minimalloc()
    schedules()
