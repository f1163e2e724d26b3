"""``hetdeploy report DIR``: a build's plan as pictures (SVG in one HTML page).

Three kinds of picture: the partition (one box per subfunction, in run order, on its device), the
resource use of each FPGA subfunction against its budget, and the memory map of each FPGA
subfunction (schedule step across, address down, a rectangle per buffer; on-chip memories and DDR
apart). Every name from the model or board is escaped.
"""

from __future__ import annotations

import html
from pathlib import Path

from .plan import MemoryPlan, Plan, Subfunction

COLOURS = {"cpu": "#8fb8de", "gpu": "#9fd89f", "fpga": "#f4b183", "bram": "#f4b183", "reserved": "#ffd966",
           "ddr": "#b4a7d6", "weights": "#8e7cc3"}
WIDTH = 900


def _text(x: float, y: float, text: str, size: int = 12, anchor: str = "start") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-family="sans-serif">{html.escape(text)}</text>')


def _rect(x: float, y: float, w: float, h: float, fill: str, title: str) -> str:
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{max(h, 0.5):.1f}" fill="{fill}" '
            f'stroke="#333" stroke-width="0.5"><title>{html.escape(title)}</title></rect>')


def _svg(height: float, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
            f'viewBox="0 0 {WIDTH} {height:.0f}">' + "".join(body) + "</svg>")


def partition_svg(plan: Plan) -> str:
    total = sum(s.estimate.latency_s for s in plan.subfunctions if s.estimate) or 1.0
    body, x = [_text(10, 16, f"estimated latency {plan.estimate.latency_s * 1e3:.3g} ms; width = share of it")], 10.0
    for sub in plan.subfunctions:
        w = (WIDTH - 20) * (sub.estimate.latency_s if sub.estimate else 0) / total
        body.append(_rect(x, 26, w, 40, COLOURS.get(sub.kind, "#ccc"),
                          f"{sub.name} on {sub.device}: {len(sub.nodes)} nodes"))
        if w > 60:
            body.append(_text(x + 4, 50, f"{sub.name} ({sub.device})", 11))
        x += w
    return _svg(80, body)


def resources_svg(sub: Subfunction) -> str:
    body = []
    for row, key in enumerate(("dsp", "bram18", "lut", "ff")):
        used, budget = sub.resources[key], sub.budget[key] or 1
        y = 10 + row * 26
        body.append(_text(10, y + 14, key.upper()))
        body.append(_rect(80, y, WIDTH - 300, 18, "#eee", f"budget {budget}"))
        body.append(_rect(80, y, (WIDTH - 300) * min(1.0, used / budget), 18, COLOURS["fpga"], f"{used}"))
        body.append(_text(WIDTH - 210, y + 14, f"{used:,} of {budget:,} ({used / budget:.0%})"))
    return _svg(10 + 4 * 26, body)


def memory_svg(memory: MemoryPlan, steps: int) -> str:
    """One panel per memory region: on chip (BRAM then the reserve below it) and DDR."""
    panels = [("on chip", ("bram", "reserved"), memory.target_bytes + memory.reserved_used_bytes),
              ("DDR", ("ddr",), memory.ddr_bytes)]
    body, top = [], 10.0
    column = (WIDTH - 140) / max(1, steps)
    for title, memories, extent in panels:
        if extent == 0:
            continue
        height = 220.0
        body.append(_text(10, top + 12, f"{title}: {extent:,} B"))
        body.append(_rect(120, top, column * steps, height, "#f7f7f7", title))
        for b in (b for b in memory.buffers if b.memory in memories):
            base = memory.target_bytes if b.memory == "reserved" else 0
            y = top + height * (base + b.offset) / extent
            body.append(_rect(120 + column * b.first, y, column * (b.last - b.first + 1), height * b.size / extent,
                              COLOURS["weights" if b.kind == "weights" else b.memory],
                              f"{b.tensor}: {b.size:,} B at {b.memory} + {b.offset:,}, steps {b.first}..{b.last}"))
        if "bram" in memories and memory.reserved_used_bytes:
            y = top + height * memory.target_bytes / extent
            body.append(f'<line x1="120" x2="{120 + column * steps:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="red"/>')
        top += height + 30
    body.append(_text(120, top, "schedule step ->", 11))
    return _svg(top + 10, body)


def write_report(build_dir: Path) -> Path:
    plan = Plan.load(build_dir / "plan.json")
    parts = [f"<h1>hetdeploy build of {html.escape(plan.source_model)} for {html.escape(plan.board)}</h1>",
             "<h2>Partition</h2>", partition_svg(plan)]
    for sub in plan.subfunctions:
        if sub.resources is None or sub.memory is None:
            continue
        m = sub.memory
        parts += [f"<h2>{html.escape(sub.name)}: resources (estimates) against the budget</h2>", resources_svg(sub),
                  f"<h2>{html.escape(sub.name)}: memory map ({html.escape(m.strategy)})</h2>",
                  f"<p>BRAM {m.bram_bytes:,} of {m.target_bytes:,} B; reserve {m.reserved_used_bytes:,} of "
                  f"{m.reserved_bytes:,} B; DDR {m.ddr_bytes:,} B (units' weights, darker, and spilled buffers); "
                  f"lower bound {m.lower_bound_bytes:,} B</p>",
                  memory_svg(m, len(sub.execution_units))]
    path = build_dir / "report.html"
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>hetdeploy report</title></head><body>"
                    + "\n".join(parts) + "</body></html>\n")
    return path
