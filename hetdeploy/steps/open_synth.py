"""``build --open-synth``: every FPGA execution unit's arithmetic as RTL from open tools, simulated against
the unit's own C-simulation on the build's verification samples, bit for bit, and synthesised by Yosys
(``fpga/open_synth.py`` runs the tools). Each unit's record goes to plan.json (``ExecutionUnit.
open_synthesis``); its Verilog, vectors, testbench, Yosys script and logs to ``rtl/<unit>/``.

This is the same arithmetic compiled by an open tool (da4ml), not the RTL Vivado HLS makes from
hls4ml's C++: the two agree value for value where the simulation says so, and Yosys's cell counts are
Yosys's, not Vivado's; no timing is claimed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np

from ..core.cache import BuildCache, digest, toolchain
from ..core.plan import ExecutionUnit, OpenSynthesis, Plan, Subfunction
from ..core.progress import Reporter
from ..fpga import open_synth
from ..fpga.top_kinds import top_kind
from ..running import runtime

RTL_FOLDER = "rtl"  # in the build folder: one folder per unit


def open_synthesis(plan: Plan, build_dir: Path, samples: list[dict[str, np.ndarray]], progress: Reporter,
                   cache: Optional[BuildCache] = None) -> None:
    """Each FPGA execution unit of ``plan`` traced, simulated and synthesised (or why not), recorded on it; a
    synthesis of the same Verilog by the same Yosys taken from ``cache``."""
    libraries = runtime.CSimLibraries(build_dir)
    seen = runtime.subfunction_inputs(build_dir, plan, samples)
    for index, sub in enumerate(plan.subfunctions):
        if sub.hls is None:
            continue
        family = open_synth.yosys_family(sub.hls.part)
        pairs = {}  # unit -> [(its inputs, its C-simulated outputs)] per sample
        for unit, (csim, reference) in zip(sub.execution_units, runtime.unit_executors(libraries, sub)):
            pairs[unit.name] = []
            for env in seen[index]:
                pairs[unit.name].append(({t: env[t] for t in unit.inputs}, csim(env)))
                env.update(reference.run(env))
        for unit in sub.execution_units:
            progress.working(f"{unit.name}: da4ml, Icarus Verilog, Yosys")
            unit.open_synthesis = _unit(unit, sub, build_dir, pairs[unit.name], family,
                                        1000.0 / sub.hls.clock_period_ns, cache)
            progress(f"      {unit.name}: {summary(unit.open_synthesis)}")


def _unit(unit: ExecutionUnit, sub: Subfunction, build_dir: Path, pairs: list, family: str,
          clock_mhz: float, cache: Optional[BuildCache]) -> OpenSynthesis:
    if len(unit.outputs) != 1:
        return OpenSynthesis("not traced", f"{len(unit.outputs)} outputs (one is traced)")
    seconds = {}
    started = time.monotonic()
    try:
        types = {b.tensor: b.precision for b in sub.memory.buffers}
        traced = top_kind(unit).trace(unit, build_dir / sub.hls.project, types, pairs[0][0][unit.inputs[0]].shape)
    except open_synth.NotTraced as why:
        return OpenSynthesis("skipped for size" if isinstance(why, open_synth.TooLarge) else "not traced", str(why))
    seconds["trace"] = time.monotonic() - started
    folder = build_dir / RTL_FOLDER / unit.name
    written = open_synth.write_verilog(traced, folder, unit.name, clock_mhz)
    (result,) = unit.outputs
    vectors = [traced.vectors([inputs[t] for t in unit.inputs], outputs[result]) for inputs, outputs in pairs]
    open_synth.write_vectors(written, np.concatenate([v[0] for v in vectors]),
                             np.concatenate([v[1] for v in vectors]))
    record = OpenSynthesis("synthesised", rtl=str(folder.relative_to(build_dir)), kernel=traced.kernel,
                           stages=written.stages,
                           vectors=sum(len(v[0]) for v in vectors), da4ml_cost=traced.cost, seconds=seconds)
    started = time.monotonic()
    simulated = open_synth.simulate(folder)
    seconds["simulate"] = time.monotonic() - started
    record.values, record.mismatches, record.first_mismatch = (simulated.values, simulated.mismatches,
                                                               simulated.first_mismatch)
    if traced.cost > open_synth.MAX_COST:
        record.status, record.why = "skipped for size", (f"da4ml's estimate {traced.cost:.0f} above the "
                                                         f"{open_synth.MAX_COST} synthesised")
        return record
    started = time.monotonic()
    try:
        record.yosys = _synthesised(written, family, cache)
    except open_synth.ToolFailed as failed:
        record.status, record.why = "not synthesised", str(failed)
    seconds["synthesise"] = time.monotonic() - started
    return record


def _synthesised(written: open_synth.Written, family: str, cache: Optional[BuildCache]) -> dict[str, int]:
    """Yosys's counts of the unit's Verilog (``open_synth.synthesise``): from ``cache`` when the same sources and
    script went through the same Yosys (a unit of the same arithmetic under another hls4ml strategy, a rebuild)."""
    open_synth.write_synthesis_script(written, family)
    if cache is None:
        return open_synth.synthesise(written)
    key = digest(toolchain(), open_synth.yosys_version(),
                 *[part for name in sorted({*written.sources, "synth.ys"})
                   for part in (name, (written.folder / name).read_bytes())])
    if cache.fetch("synthesis", key, written.folder) is not None:
        return open_synth.synthesised_counts(written)
    counts = open_synth.synthesise(written)
    cache.store("synthesis", key, written.folder, [written.folder / name for name in open_synth.SYNTHESIS_FILES], {})
    return counts


def summary(record: OpenSynthesis) -> str:
    """One line: the RTL's verdict against the C-simulation and Yosys's counts, or why there are none."""
    if record.values == 0:
        return f"{record.status}: {record.why}"
    verdict = (f"RTL equals its C-simulation on all {record.values} values ({record.vectors} vectors)"
               if record.bit_exact else
               f"RTL DIFFERS from its C-simulation on {record.mismatches} of {record.values} values "
               f"({record.first_mismatch})")
    if record.yosys:
        counts = ", ".join(f"{key.upper()} {value:,}" for key, value in record.yosys.items())
        return f"{verdict}; Yosys: {counts}"
    return f"{verdict}; {record.status}: {record.why}"
