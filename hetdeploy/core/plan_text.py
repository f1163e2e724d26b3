"""The plan and the build as the text tables ``hetdeploy plan`` and ``hetdeploy build`` print, and the
Python API shows (``api.PlanView``): views of a ``Plan``, computing nothing of their own."""

from __future__ import annotations

from typing import Optional

from .board import Board
from .plan import IlpRun, Plan, Top, duration


# a unit's latency and its parts (units.estimate), as the plan table's columns: key, width
CYCLE_PARTS = (("latency_cycles", 9), ("compute_cycles", 9), ("buffer_cycles", 8), ("ddr_cycles", 8))


def chip_totals(plan) -> list[str]:
    """A line per FPGA: its resources summed over its subfunctions (their units, and its dataflow tops' FIFOs and
    buffer copies) against its budget (each unit table shows one subfunction against the whole chip's budget)."""
    return [f"{device}: the chip's total over {len(r.subfunctions)} subfunction(s): " + ", ".join(
        f"{k.upper()} {v:,} of {r.budget.get(k, 0):,} ({v / max(1, r.budget.get(k, 0)):.0%})" for k, v in r.used.items())
        + ("" if not r.dataflow else " (its dataflow tops' FIFOs and buffer copies among them: " + ", ".join(
            f"{k.upper()} {v:,}" for k, v in r.dataflow.items()) + ")")
        for device, r in plan.fpga_resources.items()]


def empty_fpga_note(plan: Plan, board: Board) -> Optional[str]:
    """Why a plan for a board with an FPGA puts nothing on it, and what to try; None when it does."""
    fpgas = [d for d in board.devices if d.kind == "fpga"]
    if not fpgas or any(s.kind == "fpga" for s in plan.subfunctions):
        return None
    reasons = {f.reason for f in plan.fpga_fallbacks}
    overhead = max(d.invocation_overhead_s for d in fpgas)
    if reasons <= {"latency"} and reasons:
        why = (f"every part of it is estimated faster elsewhere: an FPGA call costs {overhead * 1e6:.0f} us on "
               f"{board.name}, more than the FPGA saves on this model; --policy support puts on the FPGA what it runs")
    elif reasons <= {"unsupported"}:
        why = "the FPGA runs none of its ops (plan --nodes and the fallbacks above say why, op by op)"
    else:
        why = "what the FPGA runs does not fit it, is estimated faster elsewhere or is pinned elsewhere (see the " \
              "fallbacks)"
    return f"nothing of this model goes to the FPGA: {why}"


def ilp_line(ilp: IlpRun) -> str:
    """What the exact partitioner did (--partitioner ilp)."""
    proven = ("no bound proven" if ilp.bound_s is None else
              f"proven gap {ilp.gap:.2%} (no plan of at most {ilp.slots} subfunctions under {duration(ilp.bound_s)})")
    took = "the ILP's" if ilp.chosen == "ilp" else "the search's, which the ILP did not beat"
    return (f"partitioner ilp (HiGHS): {ilp.status.lower()} in {ilp.seconds:.1f} s of {ilp.time_limit_s:g}, {proven}; "
            f"the plan is {took} (the search's: {duration(ilp.search_s)})")


def measured_lines(plan: Plan) -> list[str]:
    """Which figures of the plan a profile measured (--profile), and which are the board file's."""
    measured = plan.measured
    if measured is None:
        return []
    lines = [f"\nmeasured ({measured.file}, {measured.measured_on}); the rest from the board file:"]
    for device, nodes in measured.nodes.items():
        shown = ", ".join(nodes[:8]) + (", ..." if len(nodes) > 8 else "")
        lines.append(f"  {device}: the times of {len(nodes)} node(s): {shown}")
    for device, factors in measured.fpga_nodes.items():
        scales = ", ".join(f"{f:.2f}x" for f in sorted(set(factors.values())))
        lines.append(f"  {device}: the estimates of {len(factors)} node(s) scaled to its measured calls ({scales})")
    for device, seconds in measured.call_overhead_s.items():
        beyond = "core and copies" if device in measured.fpga_nodes else "nodes"
        lines.append(f"  {device}: a call's overhead beyond its {beyond}, {duration(seconds)} (the board file's "
                     f"invocation_overhead_s left)")
    if measured.links:
        lines.append(f"  links: {', '.join(measured.links)} (seconds per byte)")
    if measured.ignored_nodes:
        lines.append(f"  not in this model, left out: {len(measured.ignored_nodes)} node(s) of the profile: "
                     f"{', '.join(measured.ignored_nodes[:8])}{', ...' if len(measured.ignored_nodes) > 8 else ''}")
    return lines


def top_lines(name: str, top: Top) -> list[str]:
    """How an FPGA subfunction's top runs its units: the choice and why, both tops' cycles, the dataflow's FIFOs."""
    lines = [f"\n{name}: top {top.kind} ({top.why}); cycles a sample alone and between samples: sequential "
             f"{top.sequential_latency_cycles:,} and {top.sequential_interval_cycles:,}, "
             + (f"dataflow {top.dataflow_latency_cycles:,} and {top.dataflow_interval_cycles:,} "
                f"(FIFOs and buffer copies {top.dataflow_bram18} BRAM18, {top.dataflow_lut:,} LUT, "
                f"{top.dataflow_ff:,} FF)"
                if top.dataflow_latency_cycles else
                "no dataflow")
             + (f"; no dataflow top: {top.dataflow_refused}" if top.dataflow_refused else "")
             + (f"; the sequential top's ports take {top.port_cycles:,} of its cycles a sample (a float, or a "
               f"buffer word of codes, a cycle)" if top.port_cycles else "")]
    if top.kind == "dataflow":
        lines.append(f"  {'FIFO':<40} {'writer':<14} {'reader':<14} {'depth':>6} {'bits':>6} {'BRAM18':>6} "
                     f"{'LUT':>6} {'FF':>6}")
        lines += [f"  {f.name:<40} {f.writer:<14} {f.reader:<14} {f.depth:>6} {f.token_bits:>6} {f.bram18:>6} "
                  f"{f.lut:>6} {f.ff:>6}" for f in top.fifos]
    return lines


def plan_table(plan: Plan, board: Board, nodes: bool) -> str:
    """The tables ``hetdeploy plan`` prints (also the Python API's view of a plan); ``nodes``: where
    each model node went, too."""
    lines = []
    lines.append(f"{'subfunction':<16} {'device':<10} {'nodes':>5} {'time':>10} {'compute':>10} {'transfer':>10} "
                 f"{'overhead':>10} {'in bytes':>10} {'out bytes':>10}")
    for sub in plan.subfunctions:
        e = sub.estimate
        lines.append(f"{sub.name:<16} {sub.device:<10} {len(sub.nodes):>5} {duration(e.latency_s):>10} {duration(e.compute_s):>10} "
                     f"{duration(e.transfer_s):>10} {duration(e.overhead_s):>10} {e.in_bytes:>10} {e.out_bytes:>10}")
    for sub in plan.subfunctions:
        if not sub.execution_units:
            continue
        lines.append(f"\n{sub.name}: execution units (estimates, not synthesis results)")
        lines.append(f"  {'unit':<14} {'pe':<12} {'nodes':>5} {'reuse':>6} {'strategy':<9} {'io':<8} {'tables':>6} "
                     f"{'weights':<7} {'DSP':>6} {'BRAM18':>6} {'LUT':>8} {'FF':>8} {'cycles':>9} {'compute':>9} "
                     f"{'buffers':>8} {'DDR':>8} {'samples/s':>11}")
        # io: hls4ml's IOType without its prefix; tables: entries of each lookup table (none: blank)
        rows = [(u.name, u.pe, len(u.nodes), u.reuse_factor, u.strategy, u.io_type.removeprefix("io_"),
                 u.table_size or "", "DDR" if u.weights_in_ddr else "on chip", u.estimate,
                 f"{u.rate_per_s:,.0f}" if u.rate_per_s else "-") for u in sub.execution_units]
        rows += [("total", "", "", "", "", "", "", "", sub.resources, ""),
                 ("budget", "", "", "", "", "", "", "", sub.budget, "")]
        parts = {u.name: u.listed_parts() for u in sub.execution_units}
        for name, pe, count, rf, strategy, io, tables, weights, e, rate in rows:
            lines.append(f"  {name:<14} {pe:<12} {count!s:>5} {rf!s:>6} {strategy:<9} {io:<8} {tables!s:>6} "
                         f"{weights:<7} {e['dsp']:>6} "
                         f"{e['bram18']:>6} {e['lut']:>8} {e['ff']:>8} "
                         + " ".join(f"{e.get(k) if e.get(k) is not None else '':>{w}}" for k, w in CYCLE_PARTS)
                         + f" {rate:>11}")
            for part, used in parts.get(name, {}).items():  # each on its own line
                lines.append(f"    {part:<73} {used.get('dsp', 0):>6} {used.get('bram18', 0):>6} "
                             f"{used.get('lut', 0):>8} {used.get('ff', 0):>8}")
        decided = [f"{u.name} " + ", ".join(f"{k.upper()} {low:,}-{high:,}"
                                            for k, (low, high) in u.estimate_range.items())
                   for u in sub.execution_units if u.estimate_range]
        if decided:  # products near the DSP-or-LUT thresholds: Vivado binds them; the HLS tool cuts the pipeline;
            # synthesis trims the HLS report's LUTs
            lines.append("  synthesis decides (a product near the DSP-or-LUT thresholds; where the HLS tool cuts a "
                         "Latency layer's pipeline; how many of the HLS report's LUTs Vivado keeps): "
                         + "; ".join(decided))
        banded = [f"{u.name} {u.band.count} of {u.band.rows} output rows ({u.band.input_rows} input rows each)"
                  for u in sub.execution_units if u.band]
        if banded:  # the unit's figures are one band's resources and all its bands' cycles
            lines.append("  run in bands (resources of one band, cycles of all): " + "; ".join(banded))
        on_engine = [u for u in sub.execution_units if u.engine is not None]
        if on_engine:  # one engine, its resources with the first of them
            engine = on_engine[0].engine
            in_uram = f", {engine.uram_lanes} of them with their weights in URAM" if engine.uram_lanes else ""
            in_uram += ", two output pixels at once" if engine.pixels == 2 else ""
            lines.append(f"  on the engine ({engine.lanes} lanes of {engine.vector} values a cycle{in_uram}, its "
                         f"weights read {64 * engine.port_words} bits a cycle"
                         + (f" through {engine.bundles} DDR ports" if engine.bundles > 1 else "")
                         + ", one after another; its resources "
                         f"counted with {on_engine[0].name}, hetdeploy's model of it): "
                         + ", ".join(u.name for u in on_engine))
            streamed = [u.name for u in on_engine if u.engine.streamed]
            if streamed:  # (engine.h's engine_stream)
                lines.append(f"  their weights streamed from DDR while the lanes compute (layers of at most "
                             f"{engine.stream} pairs of output pixels): " + ", ".join(streamed))
    for line in chip_totals(plan):
        lines.append(f"\n{line}")
    for sub in plan.subfunctions:
        if sub.memory is not None:
            m = sub.memory
            lines.append(f"\n{sub.name}: memory plan ({m.strategy}; footprints in one memory: "
                         + ", ".join(f"{k} {v:,} B" for k, v in m.footprints.items()) + ")")
            uram = f"URAM {m.uram_target_bytes:,} B, used {m.uram_bytes:,} B; " if m.uram_target_bytes else ""
            lines.append(f"  BRAM target {m.target_bytes:,} B, used {m.bram_bytes:,} B; {uram}reserve "
                         f"{m.reserved_bytes:,} B, used {m.reserved_used_bytes:,} B; DDR {m.ddr_bytes:,} B "
                         f"(spills +{duration(m.ddr_transfer_s)}, "
                         f"weights {sum(b.size for b in m.buffers if b.kind == 'weights'):,} B read in "
                         f"{duration(m.ddr_weights_s)}); "
                         f"lower bound {m.lower_bound_bytes:,} B; batch buffers in DDR {m.batch_bytes:,} B")
            if sub.top is not None and sub.top.kind == "dataflow":
                lines.append(f"  (the sequential top's buffers: the dataflow top it has holds its values in its FIFOs "
                             f"and buffer copies instead, {sub.top.dataflow_bram18} BRAM18, below)")
    for sub in (s for s in plan.subfunctions if s.top is not None):
        lines += top_lines(sub.name, sub.top)
    for sub in (s for s in plan.subfunctions if s.transfers):
        lines.append(f"\n{sub.name}: transfers (zeros on the sizing samples; zero-compressed where marked)")
        for t in sub.transfers:
            saved = f"saves {duration(t.saved_s)}" if t.saved_s >= 0 else f"costs {duration(-t.saved_s)}"
            lines.append(f"  {t.tensor:<24} {t.link:<14} {t.values:>9,} values {t.zero_share:>4.0%} zeros "
                         f"{t.raw_bytes:>10,} B raw {t.compressed_bytes:>10,} B compressed, {saved} a sample: "
                         f"{'COMPRESSED' if t.compressed else 'raw'}")
    for sub in (s for s in plan.subfunctions if s.input_codes):
        lines.append(f"\n{sub.name}: inputs that travel as their quantizer's codes, not floats")
        for tensor, codes in sub.input_codes.items():
            lines.append(f"  {tensor:<24} {codes.bits}-bit codes of {len(set(codes.values))} values, "
                         f"{64 // codes.bits} to a 64-bit word")
    if nodes:
        lines.append(f"\n{'model node':<32} {'where':<24} {'unit':<16} {'folded into'}")
        for name, where in plan.node_map.items():
            lines.append(f"{name:<32} {where.get('subfunction', where.get('removed', '')):<24} {where.get('unit', ''):<16} "
                         f"{where.get('folded_into', '')}")
    for reason, why in (("unsupported", "not run there"),
                        ("capacity", "does not fit beside the units it holds, even fully folded"),
                        ("latency", "estimated faster elsewhere"), ("pinned", "pinned elsewhere by --device"),
                        ("input quantizer", "the model input's first quantizer and the value-only ops before it, "
                                            "computed on the host as the reference computes them (the FPGA "
                                            "receives their values, or their codes)")):
        nodes = [f for f in plan.fpga_fallbacks if f.reason == reason]
        if nodes:
            shown = ", ".join(f"{f.node} ({f.device}{': ' + f.detail if f.detail else ''})" for f in nodes[:8]) \
                + (", ..." if len(nodes) > 8 else "")
            lines.append(f"\noff the FPGA, {why}: {len(nodes)} node(s): {shown}")
    search = plan.precision_search
    if search is not None:
        widths = ", ".join(f"{layer} {bits}" for layer, bits in search.layer_widths.items())
        lines.append(f"\nbits per FPGA layer within a relative error of {search.error_budget:g} (simulated "
                     f"{search.simulated_error:.3g} on {search.samples} samples, {search.evaluations} simulations): {widths}")
    lines += measured_lines(plan)
    if plan.ilp is not None:
        lines.append(f"\n{ilp_line(plan.ilp)}")
    note = empty_fpga_note(plan, board)
    if note:
        lines.append(f"\n{note}")
    est = plan.estimate
    lines.append(f"\nestimated latency ({plan.policy} policy, objective {est.objective}): {duration(est.latency_s)} a sample")
    cpu = (f" (all on the host CPU: {est.all_cpu_throughput_per_s:,.0f}, "
           f"{est.throughput_per_s / est.all_cpu_throughput_per_s:.2f}x)" if est.all_cpu_throughput_per_s else "")
    lines.append(f"estimated throughput, a pipelined stream of batches of {est.batch}: {est.throughput_per_s:,.0f} "
                 f"samples/s{cpu}")
    if plan.codes_input is not None:
        lines.append(f"  with its input as its quantizer's integer codes (run.py --codes, as FINN's driver takes them; "
                     f"{', '.join(plan.codes_input.skipped)} not run): {plan.codes_input.throughput_per_s:,.0f} "
                     f"samples/s")
    calls = [f"{s.name} {'a batch' if s.batched else 'a sample'}" for s in plan.subfunctions if s.kind != "fpga"]
    if calls and est.batch > 1:  # a host subfunction's calls: a batch each where its nodes take one (batching.py)
        lines.append(f"  host subfunctions a call: {', '.join(calls)}")
    target = plan.config.get("target_rate")
    cores = [(est.batch / s.estimate.batch_s, s.name) for s in plan.subfunctions if s.kind == "fpga" and s.estimate]
    if target and cores:
        slowest, name = min(cores)
        verdict = ("reached" if slowest >= target * (1 - 1e-9) else
                   "NOT reached (as unfolded as the chip holds; a larger --batch shares the call overhead more)")
        lines.append(f"  --target-rate {target:,.0f} samples/s: {verdict}; the slowest FPGA core, {name}, "
                     f"{slowest:,.0f} samples/s")
    if est.all_cpu_latency_s is not None:
        lines.append(f"  all on the host CPU: {duration(est.all_cpu_latency_s)} ({est.all_cpu_latency_s / est.latency_s:.2f}x)")
    fits = "" if est.support_fits else " (does not fit the board)"
    lines.append(f"  support policy: {duration(est.support_latency_s)} ({est.support_latency_s / est.latency_s:.2f}x){fits}")
    return "\n".join(lines) + "\n"


def build_table(plan: Plan) -> str:
    """The table ``hetdeploy build`` prints: each subfunction and unit, its precision and its check."""
    lines = []
    lines.append(f"{'subfunction / unit':<18} {'device':<12} {'nodes':>5}  {'precision':<30} {'C-sim max abs error':>20}  "
                 f"{'tolerance':>9}  against its reference")
    for sub in plan.subfunctions:
        rows = [(sub.name, sub.device, len(sub.nodes), "", sub.verification, sub.kind == "fpga")]
        rows += [(f"  {u.name}", u.pe, len(u.nodes), u.precision, u.verification, True) for u in sub.execution_units]
        for name, device, count, precision, v, emulated in rows:
            error = f"{v.max_abs_error:.3g}" if v else "-"
            # the least exact of its outputs (FPGA parts alone: a CPU or GPU subfunction runs the float nodes
            # of its reference)
            agreement = v.agreement if v and emulated else ""
            lines.append(f"{name:<18} {device:<12} {count:>5}  {precision:<30} {error:>20}  {v.tolerance if v else 0:>9.3g}  "
                         f"{agreement}")
    lines += chip_totals(plan)
    return "\n".join(lines) + "\n"


# what build --open-synth's figures are, said wherever they are shown
OPEN_SYNTH_CAVEAT = ("each unit's arithmetic as the same fixed-point operations compiled by da4ml (an open tool) into "
                     "Verilog pipelined by hetdeploy's own timing rule, not the RTL Vivado HLS makes from hls4ml's "
                     "C++; Yosys's cell counts "
                     "(synth_xilinx), not Vivado's; no timing is claimed")
YOSYS_COLUMNS = ("lut", "carry", "ff", "dsp", "bram18")
ESTIMATE_COLUMNS = ("lut", "ff", "dsp", "bram18")


def open_synth_totals(plan: Plan) -> dict[str, dict]:
    """Per FPGA device, over its units that Yosys synthesised: their count, Yosys's counts summed,
    hetdeploy's estimates of the same units summed, and the chip's resources."""
    totals: dict[str, dict] = {}
    for sub in plan.subfunctions:
        for unit in sub.execution_units:
            if unit.open_synthesis is None or not unit.open_synthesis.yosys:
                continue
            chip = plan.fpga_resources[sub.device].resources if sub.device in plan.fpga_resources else {}
            device = totals.setdefault(sub.device, {"units": 0, "yosys": dict.fromkeys(YOSYS_COLUMNS, 0),
                                                    "estimate": dict.fromkeys(ESTIMATE_COLUMNS, 0), "chip": chip})
            device["units"] += 1
            for k in YOSYS_COLUMNS:
                device["yosys"][k] += unit.open_synthesis.yosys[k]
            for k in ESTIMATE_COLUMNS:
                device["estimate"][k] += unit.estimate.get(k, 0)
    return totals


def open_synth_verdict(record) -> str:
    """A unit's RTL against its C-simulation, in a few words."""
    if not record.values:
        return record.status
    return f"equal on {record.values:,}" if record.bit_exact else f"DIFFER {record.mismatches:,}/{record.values:,}"


def open_synth_table(plan: Plan) -> str:
    """build --open-synth's table: each FPGA unit's RTL verdict against its C-simulation, Yosys's counts,
    da4ml's estimate and hetdeploy's own, side by side; the total of what was synthesised against the
    chip; "" when the build did not run it."""
    units = [u for s in plan.subfunctions for u in s.execution_units if u.open_synthesis is not None]
    if not units:
        return ""
    lines = [f"open synthesis: {OPEN_SYNTH_CAVEAT}",
             f"{'unit':<16} {'RTL against C-sim':<22} " + " ".join(f"{'Yosys ' + k.upper():>12}" for k in YOSYS_COLUMNS)
             + f" {'da4ml':>8} " + " ".join(f"{'est. ' + k.upper():>12}" for k in ESTIMATE_COLUMNS)]
    for unit in units:
        record = unit.open_synthesis
        counts = " ".join(f"{record.yosys[k]:>12,}" if record.yosys else f"{'-':>12}" for k in YOSYS_COLUMNS)
        cost = f"{record.da4ml_cost:>8,.0f}" if record.da4ml_cost else f"{'-':>8}"
        estimate = " ".join(f"{unit.estimate.get(k, 0):>12,}" for k in ESTIMATE_COLUMNS)
        lines.append(f"{unit.name:<16} {open_synth_verdict(record):<22} {counts} {cost} {estimate}")
    lines += [f"  {u.name}: {u.open_synthesis.status}: {u.open_synthesis.why}" for u in units
              if not u.open_synthesis.yosys]
    for device, total in open_synth_totals(plan).items():
        chip = total["chip"]
        lines.append(f"{device}: the {total['units']} synthesised unit(s) take, by Yosys: " + ", ".join(
            f"{k.upper()} {v:,}" + (f" of {chip[k]:,} ({v / max(1, chip[k]):.0%})" if k in chip else "")
            for k, v in total["yosys"].items()) + "; by hetdeploy's estimate: " +
            ", ".join(f"{k.upper()} {v:,}" for k, v in total["estimate"].items()))
    return "\n".join(lines) + "\n"
