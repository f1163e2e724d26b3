"""``hetdeploy report DIR`` (and every build): DIR/report.html, a build a person can read.

One self-contained HTML page: the network drawn as a graph coloured by subfunction (and so by
device), the latency breakdown, a table of the FPGA execution units (reuse factor, precision,
estimates, verified error), the chip totals against each FPGA's budget, and each FPGA
subfunction's memory map (schedule step across, address up, one labelled rectangle per buffer, a
legend). Pictures are matplotlib SVG, written without dates or random ids (the same build gives
the same bytes); every name from the model or the board is escaped for HTML and for matplotlib's
mathtext.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from ..core.plan import MemoryPlan, Plan, Subfunction, Top, duration, time_unit
from ..core.plan_text import (ESTIMATE_COLUMNS, OPEN_SYNTH_CAVEAT, YOSYS_COLUMNS, open_synth_totals, open_synth_verdict,
                              top_lines)

# A subfunction's colour is its own, from a qualitative palette in plan order (two FPGA
# subfunctions must not read as one); its device kind is the graph's node marker.
_KIND_MARKERS = {"fpga": "s", "cpu": "o", "gpu": "^"}
_MEMORY_COLOURS = {"bram": "#f4b183", "uram": "#a9d18e", "reserved": "#ffd966", "ddr": "#b4a7d6",
                   "weights": "#8e7cc3"}
_MEMORY_NAMES = {"bram": "on-chip BRAM", "uram": "on-chip URAM", "reserved": "reserved BRAM",
                 "ddr": "DDR (spilled)",
                 "weights": "DDR weights of a unit"}
RESOURCES = ("dsp", "bram18", "lut", "ff")
# beyond this many nodes the graph is drawn without labels
LABELLED_NODES = 80

_STYLE = """body{font-family:sans-serif;margin:24px;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px;display:block;overflow-x:auto;max-width:100%}
th,td{border:1px solid #bbb;padding:3px 8px;text-align:right}
th{background:#eee}td.name,th.name{text-align:left;font-family:monospace}
.fail{color:#b00;font-weight:bold}.pass{color:#070}svg{max-width:100%;height:auto}"""


def _mathtext_safe(text: str) -> str:
    """Names as matplotlib text: a ``$`` would start mathtext, and a control character (a NUL a model's
    name may hold) has no glyph: written out as ``\\x00``."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text).replace("$", r"\$")


def svg(figure: Figure) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "hetdeploy", "svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def subfunction_colours(plan: Plan) -> dict[str, tuple]:
    """A colour per subfunction, each its own: tab10 in plan order (tab20 beyond ten)."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if len(plan.subfunctions) <= 10 else "tab20"]
    return {s.name: palette(k % palette.N) for k, s in enumerate(plan.subfunctions)}


def _subfunction_label(sub: Subfunction) -> str:
    count = len(sub.nodes)
    return _mathtext_safe(f"{sub.name} ({sub.device}, {count} node{'s' if count > 1 else ''})")


def graph_figure(plan: Plan, edges: list[tuple[str, str]], ops: dict[str, str]) -> Figure:
    """The model's nodes in layers (longest path from the inputs), coloured by subfunction."""
    where = {n: s.name for s in plan.subfunctions for n in s.nodes}
    nodes = [n for n in ops if n in where]
    depth = {n: 0 for n in nodes}
    for source, target in edges:  # ``edges`` in the model's (topological) node order
        if source in depth and target in depth:
            depth[target] = max(depth[target], depth[source] + 1)
    layers: dict[int, list[str]] = {}
    for n in nodes:
        layers.setdefault(depth[n], []).append(n)
    position = {n: (k - (len(layer) - 1) / 2, -d) for d, layer in layers.items() for k, n in enumerate(layer)}
    widest = max((len(layer) for layer in layers.values()), default=1)
    labelled = len(nodes) <= LABELLED_NODES
    figure = Figure(figsize=(min(14, 3 + 2.2 * widest), min(40, 1.5 + (0.55 if labelled else 0.08) * len(layers))))
    axes = figure.add_subplot()
    colours = subfunction_colours(plan)
    for source, target in edges:
        if source in position and target in position:
            (x0, y0), (x1, y1) = position[source], position[target]
            axes.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "-|>", "color": "#888", "lw": 0.6,
                                                               "shrinkA": 9, "shrinkB": 9})
    kinds = {s.name: s.kind for s in plan.subfunctions}
    for n in nodes:
        x, y = position[n]
        axes.scatter([x], [y], s=260 if labelled else 18, color=colours[where[n]], edgecolors="#333",
                     marker=_KIND_MARKERS.get(kinds[where[n]], "D"), linewidths=0.5, zorder=3)
        if labelled:
            axes.text(x + 0.12, y, _mathtext_safe(f"{ops[n]}  {n[:28]}"), fontsize=7, va="center", zorder=4)
    axes.legend(handles=[Line2D([], [], color=colours[s.name], marker=_KIND_MARKERS.get(s.kind, "D"), ls="",
                                markersize=9, markeredgecolor="#333", label=_subfunction_label(s))
                         for s in plan.subfunctions], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
                title="subfunction (device):\nsquare FPGA, circle CPU, triangle GPU")
    axes.set_axis_off()
    axes.set_xlim(min((p[0] for p in position.values()), default=0) - 0.6,
                  max((p[0] for p in position.values()), default=0) + (2.6 if labelled else 0.6))
    axes.set_title("the network, coloured by subfunction; inputs at the top", fontsize=10)
    return figure


def latency_figure(plan: Plan) -> Figure:
    """Per subfunction, its estimated time as compute, transfers, call overhead and DDR traffic, each
    bar's total written at its end, in the one unit the longest reads best in."""
    subs = [s for s in plan.subfunctions if s.estimate is not None]
    figure = Figure(figsize=(10, 1.0 + 0.45 * len(subs)))
    axes = figure.add_subplot()
    longest = max((s.estimate.latency_s for s in subs), default=0.0)
    unit, scale = time_unit(longest or 1e-6)
    parts = [("compute", "#5b9bd5", lambda e: e.compute_s), ("transfers", "#a5a5a5", lambda e: e.transfer_s),
             ("call overhead", "#ffc000", lambda e: e.overhead_s),
             ("DDR traffic", "#8e7cc3", lambda e: max(0.0, e.latency_s - e.compute_s - e.transfer_s - e.overhead_s))]
    left = [0.0] * len(subs)
    for label, colour, value in parts:
        widths = [value(s.estimate) / scale for s in subs]
        axes.barh(range(len(subs)), widths, left=left, color=colour, label=label)
        left = [a + b for a, b in zip(left, widths)]
    for row, sub in enumerate(subs):  # the total beside its bar, inside the frame
        axes.text(left[row], row, f"  {duration(sub.estimate.latency_s)}", va="center", fontsize=8)
    axes.set_xlim(0, max(left, default=0.0) * 1.18 or 1.0)
    axes.set_yticks(range(len(subs)), [_mathtext_safe(f"{s.name} ({s.device})") for s in subs], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel(f"estimated time per call ({unit})")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes.set_title(f"estimated latency {duration(plan.estimate.latency_s)} a sample, the subfunctions in turn "
                   f"({plan.policy} policy)", fontsize=10)
    return figure


def resources_figure(plan: Plan, device: str, colours: dict[str, tuple]) -> Figure:
    """Each resource as a share of the budget, a segment per subfunction."""
    totals = plan.fpga_resources[device]
    figure = Figure(figsize=(10, 2.4))
    axes = figure.add_subplot()
    left = [0.0] * len(RESOURCES)
    for sub in (s for s in plan.subfunctions if s.name in totals.subfunctions):
        name, used = sub.name, sub.resources
        shares = [100.0 * used[k] / max(1, totals.budget[k]) for k in RESOURCES]
        axes.barh(range(len(RESOURCES)), shares, left=left, color=colours[name], edgecolor="#333", linewidth=0.4,
                  label=_mathtext_safe(name))
        left = [a + b for a, b in zip(left, shares)]
    for row, k in enumerate(RESOURCES):
        axes.text(max(left[row], 0) + 1, row, f"{totals.used[k]:,} of {totals.budget[k]:,}", va="center",
                  fontsize=8)
    axes.axvline(100, color="red", lw=1)
    axes.set_yticks(range(len(RESOURCES)), [k.upper() for k in RESOURCES])
    axes.invert_yaxis()
    axes.set_xlim(0, max(110.0, max(left) + 25))
    axes.set_xlabel("% of the budget (the FPGA's resources minus the board's reserve); estimates")
    axes.legend(fontsize=8, loc="lower right", title="subfunction")
    axes.set_title(_mathtext_safe(f"{device}: the chip's total over {len(totals.subfunctions)} subfunction(s)"),
                   fontsize=10)
    return figure


def memory_figure(sub: Subfunction, memory: MemoryPlan) -> Figure:
    """Schedule step across, address up; on chip (BRAM, the reserve above it) and DDR in panels of
    their own. Each buffer a rectangle with its key (b0, b1, ...; the table under it names them)."""
    def top(b) -> int:  # a buffer's end address in its panel (the reserve sits above the BRAM target)
        return (memory.target_bytes if b.memory == "reserved" else 0) + b.offset + b.size

    panels = [(title, memories, max((top(b) for b in memory.buffers if b.memory in memories), default=0))
              for title, memories in (("on chip", ("bram", "reserved")), ("URAM", ("uram",)), ("DDR", ("ddr",)))]
    panels = [p for p in panels if p[2] > 0]
    steps = max(1, len(sub.execution_units))
    figure = Figure(figsize=(10, 1.2 + 2.8 * max(1, len(panels))))
    for row, (title, memories, used) in enumerate(panels):
        axes = figure.add_subplot(len(panels), 1, row + 1)
        # the BRAM target is drawn when it is in sight; far above the buffers it would flatten them
        target_shown = "bram" in memories and memory.target_bytes <= 3 * used
        extent = 1.08 * max(used, memory.target_bytes if target_shown else 0)
        for key, b in enumerate(memory.buffers):
            if b.memory not in memories or b.view_of:  # (a view lies within the buffer it is of)
                continue
            base = memory.target_bytes if b.memory == "reserved" else 0
            kind = "weights" if b.kind == "weights" else b.memory
            axes.add_patch(Rectangle((b.first - 0.45, base + b.offset), b.last - b.first + 0.9, b.size,
                                     facecolor=_MEMORY_COLOURS[kind], edgecolor="#333", linewidth=0.5,
                                     gid=f"buffer-{key}"))
            if b.size / extent > 0.04:
                axes.text((b.first + b.last) / 2, base + b.offset + b.size / 2, f"b{key}", ha="center",
                          va="center", fontsize=7)
        if target_shown:
            axes.axhline(memory.target_bytes, color="red", lw=0.8, ls="--")
            axes.text(steps - 0.45, memory.target_bytes, "BRAM target (reserve above)", color="red", fontsize=7,
                      ha="right", va="bottom")
        axes.set_xlim(-0.6, steps - 0.4)
        axes.set_ylim(0, extent)
        axes.set_ylabel(f"{title}: address (bytes)", fontsize=8)
        axes.set_xticks(range(steps), [_mathtext_safe(u.name) for u in sub.execution_units] or ["0"], fontsize=7,
                        rotation=30 if steps > 6 else 0)
        used = sorted({"weights" if b.kind == "weights" else b.memory for b in memory.buffers if b.memory in memories})
        axes.legend(handles=[Patch(color=_MEMORY_COLOURS[k], label=_MEMORY_NAMES[k]) for k in used], fontsize=7,
                    loc="upper right")
    figure.axes[-1].set_xlabel("schedule step (the execution unit running)")
    figure.suptitle(_mathtext_safe(f"{sub.name}: memory map ({memory.strategy})"), fontsize=10)
    return figure


def _table(header: list[str], rows: list[list], names: int = 1) -> str:
    """An HTML table; the first ``names`` columns are names (left-aligned, monospace)."""
    head = "".join(f"<th class='name'>{html.escape(h)}</th>" if i < names else f"<th>{html.escape(h)}</th>"
                   for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(
        (f"<td class='name'>{html.escape(str(v))}</td>" if i < names else
         f"<td>{v if isinstance(v, _Html) else html.escape(str(v))}</td>") for i, v in enumerate(row)) + "</tr>"
        for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


class _Html(str):
    """A table cell already written as HTML."""


def _verdict(v) -> str:
    if v is None:
        return "-"
    mark = "<span class='pass'>pass</span>" if v.passed else "<span class='fail'>FAIL</span>"
    return _Html(f"{v.max_abs_error:.3g} / {v.tolerance:.3g} {mark}")


def units_table(plan: Plan) -> str:
    rows = []
    for sub in plan.subfunctions:
        for u in sub.execution_units:
            e = u.estimate
            rows.append([sub.name, u.name, ", ".join(u.nodes[:4]) + (", ..." if len(u.nodes) > 4 else ""), u.pe,
                         u.reuse_factor, u.strategy, "DDR" if u.weights_in_ddr else "on chip",
                         f"{u.band.count} x {u.band.rows} rows" if u.band else "whole", u.precision,
                         e.get("dsp"), e.get("bram18"), e.get("lut"), e.get("ff"),
                         *[e.get(k) if e.get(k) is not None else "-" for k in
                           ("latency_cycles", "compute_cycles", "buffer_cycles", "ddr_cycles")],
                         f"{u.rate_per_s:,.0f}" if u.rate_per_s else "-", _verdict(u.verification)])
            rows += [["", f"{u.name}: {part}", "", "", "", "", "", "", "",
                      *[used.get(k, 0) for k in RESOURCES], "", "", "", "", "", ""]
                     for part, used in u.listed_parts().items()]  # as the plan lists them
    return _table(["subfunction", "unit", "nodes", "PE", "reuse", "strategy", "weights", "bands", "precision", "DSP",
                   "BRAM18", "LUT", "FF", "cycles", "compute", "buffers", "DDR", "samples/s",
                   "C-sim max abs error / tolerance"],
                  rows, names=3)


def top_section(name: str, top: Top) -> list[str]:
    """How an FPGA subfunction's top runs its units, as the plan prints it (``plan_text.top_lines``), its
    dataflow's FIFOs a table."""
    first, *_ = top_lines(name, top)
    parts = [f"<h2>{html.escape(name)}: top</h2>", f"<p>{html.escape(first.strip().removeprefix(name + ': '))}</p>"]
    if top.kind == "dataflow":
        parts.append(_table(["FIFO", "writer", "reader", "depth (tokens)", "token bits", "BRAM18", "LUT", "FF"],
                            [[f.name, f.writer, f.reader, f.depth, f.token_bits, f.bram18, f.lut, f.ff]
                             for f in top.fifos], names=3))
    return parts


def open_synth_section(plan: Plan) -> list[str]:
    """build --open-synth's figures, what they are said first; none when the build did not run it."""
    units = [(s, u) for s in plan.subfunctions for u in s.execution_units if u.open_synthesis is not None]
    if not units:
        return []
    rows = []
    for sub, unit in units:
        record = unit.open_synthesis
        verdict = open_synth_verdict(record)
        mark = "pass" if record.bit_exact else "fail" if record.values else ""
        rows.append([sub.name, unit.name, _Html(f"<span class='{mark}'>{html.escape(verdict)}</span>") if mark
                     else verdict, record.vectors or "-",
                     *[f"{record.yosys[k]:,}" if record.yosys else "-" for k in YOSYS_COLUMNS],
                     f"{record.da4ml_cost:,.0f}" if record.da4ml_cost else "-",
                     *[f"{unit.estimate.get(k, 0):,}" for k in ESTIMATE_COLUMNS],
                     record.why or record.rtl])
    parts = ["<h2>Open synthesis: da4ml, Icarus Verilog, Yosys</h2>", f"<p>{html.escape(OPEN_SYNTH_CAVEAT)}.</p>",
             _table(["subfunction", "unit", "RTL against C-sim", "vectors",
                     *[f"Yosys {k.upper()}" for k in YOSYS_COLUMNS], "da4ml",
                     *[f"est. {k.upper()}" for k in ESTIMATE_COLUMNS], "RTL folder, or why none"], rows, names=2)]
    for device, total in open_synth_totals(plan).items():
        chip = total["chip"]
        parts.append(_table([f"{device}: {total['units']} synthesised unit(s)", *[k.upper() for k in YOSYS_COLUMNS]],
                            [["Yosys", *[f"{total['yosys'][k]:,}" for k in YOSYS_COLUMNS]],
                             ["hetdeploy's estimate", *[f"{total['estimate'].get(k, 0):,}" if k in total['estimate']
                                                        else "-" for k in YOSYS_COLUMNS]],
                             ["chip", *[f"{chip[k]:,}" if k in chip else "-" for k in YOSYS_COLUMNS]]]))
    return parts


def buffers_table(memory: MemoryPlan) -> str:
    return _table(["key", "tensor", "memory", "offset (B)", "size (B)", "steps", "element type"],
                  [[f"b{k}", b.tensor, f"{b.memory}, in {b.view_of}" if b.view_of else b.memory, f"{b.offset:,}",
                    f"{b.size:,}", f"{b.first}..{b.last}", b.precision]
                   for k, b in enumerate(memory.buffers)], names=2)


def write_report(build_dir: Path) -> Path:
    from .emulate import load_build
    from ..intake.ort_adapter import graph_edges

    build_dir = Path(build_dir)
    plan = load_build(build_dir)
    edges, ops = graph_edges(build_dir / plan.model)
    colours = subfunction_colours(plan)
    e = plan.estimate
    summary = [f"estimated latency <b>{duration(e.latency_s)}</b> ({html.escape(plan.policy)} policy)"]
    if e.all_cpu_latency_s:
        summary.append(f"all on the host CPU {duration(e.all_cpu_latency_s)}")
    summary.append(f"support policy {duration(e.support_latency_s)}" + ("" if e.support_fits else " (does not fit)"))
    summary.append(f"a pipelined stream of batches of {e.batch}: <b>{e.throughput_per_s:,.0f} samples/s</b> "
                   f"(objective {html.escape(e.objective)})")
    parts = [f"<h1>{html.escape(plan.source_model)} on {html.escape(plan.board)}</h1>",
             f"<p>{'; '.join(summary)}. Resource and time figures are estimates, not synthesis results.</p>",
             "<h2>The network</h2>", svg(graph_figure(plan, edges, ops)),
             "<h2>Latency breakdown</h2>", svg(latency_figure(plan)),
             _table(["subfunction", "device", "nodes", "time (us)", "compute", "transfers", "overhead",
                     "C-sim or emulation max abs error / tolerance"],
                    [[s.name, s.device, len(s.nodes), f"{s.estimate.latency_s * 1e6:.4g}",
                      f"{s.estimate.compute_s * 1e6:.4g}", f"{s.estimate.transfer_s * 1e6:.4g}",
                      f"{s.estimate.overhead_s * 1e6:.4g}", _verdict(s.verification)]
                     for s in plan.subfunctions if s.estimate], names=2)]
    if any(s.execution_units for s in plan.subfunctions):
        parts += ["<h2>FPGA execution units</h2>", units_table(plan)]
    for device, totals in plan.fpga_resources.items():
        subs = [s for s in plan.subfunctions if s.name in totals.subfunctions]
        parts += [f"<h2>{html.escape(device)}: chip totals</h2>", svg(resources_figure(plan, device, colours)),
                  _table(["subfunction", *[k.upper() for k in RESOURCES]],
                         [[s.name, *[f"{s.resources[k]:,}" for k in RESOURCES]] for s in subs]
                         + [["total", *[f"{totals.used[k]:,}" for k in RESOURCES]],
                            ["budget", *[f"{totals.budget[k]:,}" for k in RESOURCES]],
                            ["chip", *[f"{totals.resources[k]:,}" for k in RESOURCES]]])]
    parts += open_synth_section(plan)
    for sub in (s for s in plan.subfunctions if s.top is not None):
        parts += top_section(sub.name, sub.top)
    for sub in plan.subfunctions:
        if sub.memory is None:
            continue
        m = sub.memory
        parts += [f"<h2>{html.escape(sub.name)}: memory map</h2>",
                  f"<p>BRAM {m.bram_bytes:,} of {m.target_bytes:,} B; "
                  + (f"URAM {m.uram_bytes:,} of {m.uram_target_bytes:,} B; " if m.uram_target_bytes else "")
                  + f"reserve {m.reserved_used_bytes:,} of "
                  f"{m.reserved_bytes:,} B; DDR {m.ddr_bytes:,} B; lower bound {m.lower_bound_bytes:,} B "
                  f"(strategy {html.escape(m.strategy)})</p>",
                  svg(memory_figure(sub, m)), buffers_table(m)]
    path = build_dir / "report.html"
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>hetdeploy report: "
                    f"{html.escape(plan.source_model)}</title><style>{_STYLE}</style></head><body>"
                    + "\n".join(parts) + "</body></html>\n", encoding="utf-8")
    return path
