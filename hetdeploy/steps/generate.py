"""FPGA subfunctions into C++ and C-simulation: each execution unit through hls4ml ``hls4ml_adapter``,
our top over them ``hls_top``, compiled with g++ ``csim``; then the pipeline checked in C-simulation against
onnxruntime, output by output ``verify``."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

import numpy as np
import onnx

from ..core.board import Board
from ..core.cache import BuildCache, digest, toolchain
from ..core.csim import compile_library
from ..core.errors import ToolError, UserError, VerificationError, first_line, raised_in_hetdeploy
from ..core.graph import Graph, Node
from ..core.plan import Band, ExecutionUnit, HlsPort, HlsProject, Plan, PlanFormatError, Subfunction, UnitHls, from_dict
from ..core.precision import CppFixed
from ..core.progress import Progress, Reporter, stderr_progress
from ..fpga.hls4ml_adapter import (HLS4ML_LOG, HlsOptions, UnitIsACopy, UnitSettings, ap_types_headers, fixed_config,
                                   generate_unit)
from ..fpga.hls_top import DDR_IMAGE, SYNTHESIS_SCRIPT, SubfunctionSource, library_name, write_project
from ..fpga.engine import relaid as relaid_weights
from ..fpga.packing import precision_bytes, unit_weights_path
from ..fpga.top_kinds import UnitSource, kind_to_generate, top_kind
from ..intake.model import LoadedModel
from ..intake.ort_adapter import open_model
from ..intake.subgraph import band_model, extract
from ..planning import memory
from ..planning.config import BuildOptions
from ..planning.cost import node_work
from ..planning.units import concat_views, whole_words
from ..running import runtime, verify
from ..running.deploy import write_manifests
from ..running.samples import FLIPS, uniform_samples


def generate_hls(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions, build_dir: Path,
                 samples, progress: Reporter, unit_widths: dict[str, int], cache: Optional[BuildCache] = None) -> None:
    """Each FPGA subfunction into hls/<name>/: every execution unit through hls4ml (units/<unit>/),
    our top over them, compiled for C-simulation. Each unit's layer precisions are sized on the
    values it sees on the float pipeline (onnxruntime) for ``samples``, at its bits in ``unit_widths``."""
    envs = runtime.subfunction_inputs(build_dir, plan, samples)
    shapes = loaded.tensor_shapes()
    precision: dict[str, str] = {}  # tensor -> the C++ type of its buffer
    fpga = [(index, sub) for index, sub in enumerate(plan.subfunctions) if sub.kind == "fpga"]
    # a step per unit converted and per subfunction compiled (the compile, of the whole top, the longest)
    with progress.bar(sum(len(s.execution_units) + 1 for _, s in fpga), "hls4ml and g++", "step") as done:
        for index, sub in fpga:
            started = time.monotonic()
            precision |= _generate_units(sub, loaded, board.device(sub.device), options, build_dir, envs[index],
                                         unit_widths, progress, done, cache)
            progress.detail(f"      {sub.name}: {len(sub.execution_units)} execution units converted by hls4ml in "
                            f"{time.monotonic() - started:.1f} s")
        # the same plan as `hetdeploy plan` made, on the buffers' real element sizes; an engine layer it streams where
        # the plan held it, or holds where the plan streamed it (a widened unit's), has its weights laid out anew
        written_streamed = {u.name: u.engine.streamed for _, s in fpga for u in s.execution_units if u.engine}
        memory.plan_memory(plan, loaded.graph, loaded.tensor_shapes(), board, options.memory_strategy, options.width,
                           options.batch, lambda t: precision_bytes(precision[t]),
                           lambda u: top_kind(u).ddr_weights(u, unit_widths[u.name])[0], reorder=False)
        for _, sub in fpga:
            for unit in (u for u in sub.execution_units if u.engine and u.engine.streamed != written_streamed[u.name]):
                path = unit_weights_path(build_dir / "hls" / sub.name, unit.name)
                path.write_bytes(relaid_weights(unit.engine, path.read_bytes(), unit_widths[unit.name]))
        for _, sub in fpga:
            started = time.monotonic()
            weights = {f"{u.name}.weights": top_kind(u).ddr_weights(u, unit_widths[u.name])[1]
                       for u in sub.execution_units if u.weights_in_ddr}
            for b in (b for b in sub.memory.buffers if b.kind not in ("staging", "copy")):  # raw words
                b.precision = weights[b.tensor] if b.kind == "weights" else precision[b.tensor]
            device = board.device(sub.device)
            progress.working(f"{sub.name}: compiling the C-simulation of its top and {len(sub.execution_units)} "
                             f"units (g++)", slow=True)
            sub.hls = _write_top(sub, shapes, device.part, 1000.0 / device.clock_mhz, options.batch, build_dir, cache)
            done()
            progress.detail(f"      {sub.name}: top written and C-simulation compiled in "
                            f"{time.monotonic() - started:.1f} s")


def _generate_units(sub: Subfunction, loaded: LoadedModel, device, options: BuildOptions, build_dir: Path,
                    envs: list[dict[str, np.ndarray]], unit_widths: dict[str, int], progress: Reporter,
                    done: Callable[[], None], cache: Optional[BuildCache]) -> dict[str, str]:
    """Every execution unit of ``sub`` made by its kind (``top_kinds``); returns the C++ type of each buffer."""
    project = build_dir / "hls" / sub.name
    (build_dir / "subfunctions" / sub.name).mkdir()
    config_types: dict[str, str] = {}  # tensor -> what its buffer holds, as an hls4ml config string
    cpp_types: dict[str, str] = {}  # the same, as a C++ type
    nodes = {n.name: n for n in loaded.graph.nodes}

    def convert(unit: ExecutionUnit, model: onnx.ModelProto, samples: list[dict[str, np.ndarray]]) -> Optional[UnitHls]:
        """hls4ml's project of ``unit`` at its settings (the build's pinned precisions for its nodes first)."""
        types = next((options.precisions[n] for n in unit.nodes if n in options.precisions), {})
        result = types.get("result")
        hls_options = HlsOptions(part=device.part, clock_period_ns=1000.0 / device.clock_mhz,
                                 width=result[0] if result else unit_widths[unit.name])
        settings = UnitSettings(unit.reuse_factor, unit.strategy, [config_types.get(t) for t in unit.inputs],
                                unit.weights_in_ddr, fixed_config(*result) if result else None,
                                unit.table_size, unit.io_type,
                                {kind: fixed_config(*t) for kind, t in types.items() if kind != "result"})
        folder = project / "units" / unit.name
        try:
            hls = _converted_unit(model, folder, unit.name, samples, settings, hls_options, cache)
        except UnitIsACopy:
            shutil.rmtree(folder, ignore_errors=True)
            return None
        except UserError:
            raise
        except Exception as err:
            if raised_in_hetdeploy(err):  # our rewrites or precisions: a bug, with its traceback
                raise
            log = folder / HLS4ML_LOG  # hls4ml or qonnx refused the unit
            raise ToolError(f"hls4ml failed on unit {unit.name} ({_ops(unit, nodes)}; "
                            f"nodes {', '.join(unit.nodes)}): {type(err).__name__}: "
                            f"{first_line(err)}; see {log if log.exists() else 'no log was written'}") from None
        return dataclasses.replace(hls, project=os.path.relpath(hls.project, build_dir))

    for unit in sub.execution_units:
        progress.working(f"{unit.name}: converting through hls4ml")
        unit.onnx = f"subfunctions/{sub.name}/{unit.name}.onnx"
        model = extract(loaded.model, unit)
        onnx.save(model, str(build_dir / unit.onnx))
        reference = open_model(build_dir / unit.onnx)
        unit_samples = [{t: env[t] for t in unit.inputs} for env in envs]
        if unit.band is not None:  # hls4ml makes the layer for one band, sized on every band of the samples
            model = band_model(model, unit.band)
            unit_samples = [{t: _band_rows(s[t], unit.band, b)} for s in unit_samples for t in s
                            for b in range(unit.band.count)]
        for env in envs:  # the float values every later unit sees
            env.update(reference.run(env))
        unit_nodes = [nodes[n] for n in unit.nodes]
        kind = kind_to_generate(unit, unit_nodes[0].op, device.pes[unit.pe].engine)
        kind.generate(unit, UnitSource(model, reference, unit_nodes, unit_samples, envs, unit_widths[unit.name],
                                       project, config_types, cpp_types, convert))
        unit.precision = cpp_types[unit.outputs[0]]
        for band, (tensor, _) in unit.band_buffers().items():
            cpp_types[band] = cpp_types[tensor]
        progress.detail(f"        {unit.name} ({_ops(unit, nodes)}): {top_kind(unit).how}, {unit.precision}")
        done()
    _type_in_place(sub, loaded.tensor_shapes(), config_types, cpp_types)
    return cpp_types


def _type_in_place(sub: Subfunction, shapes: dict[str, list[int]], config_types: dict[str, str],
                   cpp_types: dict[str, str]) -> None:
    """Each Concat input written in place (``units.concats_in_place``) of the type of the Concat output whose buffer
    holds it (its root's: sized on all the values it holds), an engine unit writing it at that type's binary point
    and signedness. Where one differs from its root in width (a unit widened since planning), or its channels are no
    longer whole words of its root's type, every Concat moves its inputs after all."""
    views = concat_views(sub.execution_units, shapes)
    roots = {x: root for x, (root, _) in views.items()}
    writers = {u.outputs[0]: u for u in sub.execution_units}
    if any(CppFixed.parse(cpp_types[x]).width != CppFixed.parse(cpp_types[root]).width or
           not all(whole_words(c, cpp_types[root]) for c in (first, shapes[x][1], shapes[root][1]))
           for x, (root, first) in views.items()):
        for unit in sub.execution_units:
            unit.in_place = []
            if unit.engine is not None:
                unit.engine.out_stride = 0
        return
    for tensor, root in roots.items():
        config_types[tensor], cpp_types[tensor] = config_types[root], cpp_types[root]
        writer = writers[tensor]
        writer.precision = cpp_types[root]
        if writer.engine is not None:
            target = CppFixed.parse(cpp_types[root])
            writer.engine = dataclasses.replace(writer.engine, out_fraction=target.fraction, out_signed=target.signed)


def _ops(unit: ExecutionUnit, nodes: dict[str, Node]) -> str:
    """The ops of ``unit``'s nodes, for a message."""
    return ", ".join(sorted({nodes[n].op for n in unit.nodes}))


def _converted_unit(model: onnx.ModelProto, folder: Path, name: str, samples: list[dict[str, np.ndarray]],
                    settings: UnitSettings, hls_options: HlsOptions, cache: Optional[BuildCache]) -> UnitHls:
    """hls4ml's project of one unit in ``folder``: from the cache when everything that determines it
    (the unit's model, its name, the samples that size it, its settings, the toolchain) is as before."""
    if cache is None:
        return generate_unit(model, folder, name, samples, settings, hls_options)
    key = digest(model.SerializeToString(deterministic=True), name, repr(settings), repr(hls_options), toolchain(),
                 *[part for sample in samples for t in sorted(sample)
                   for part in (t, str(sample[t].dtype), str(sample[t].shape), sample[t].tobytes())])
    meta = cache.fetch("unit", key, folder)
    if meta is not None:
        try:
            return dataclasses.replace(from_dict(UnitHls, meta["hls"]), project=str(folder))
        except (PlanFormatError, KeyError, TypeError):  # a foreign manifest: converted anew
            shutil.rmtree(folder)
    hls = generate_unit(model, folder, name, samples, settings, hls_options)
    cache.store("unit", key, folder, [p for p in folder.rglob("*") if p.is_file()], {"hls": dataclasses.asdict(hls)},
                tuple(p for p in folder.rglob("*") if p.is_dir()))
    return hls


def _band_rows(x: np.ndarray, band: Band, b: int) -> np.ndarray:
    """Band ``b``'s input rows of ``x`` (N, C, H, W), zeros outside the map (the layer's padding)."""
    first = b * band.input_step - band.pad_top
    rows = np.zeros(x.shape[:2] + (band.input_rows,) + x.shape[3:], dtype=x.dtype)
    inside = range(max(0, first), min(x.shape[2], first + band.input_rows))
    rows[:, :, inside.start - first:inside.stop - first] = x[:, :, inside.start:inside.stop]
    return rows


def _write_top(sub: Subfunction, shapes: dict[str, list[int]], part: str, clock_period_ns: float, max_batch: int,
               build_dir: Path, cache: Optional[BuildCache] = None) -> HlsProject:
    """Our top over the units' projects, at the memory plan's offsets, compiled for C-simulation."""
    project = build_dir / "hls" / sub.name
    compressed = {t.tensor for t in sub.transfers if t.compressed}
    ports_in, ports_out = ([HlsPort(t, shapes[t], "channels_last" if len(shapes[t]) >= 3 else "onnx", t in compressed,
                                    sub.input_codes.get(t), sub.floats_a_word.get(t, 1))
                            for t in tensors] for tensors in (sub.inputs, sub.outputs))
    weight_ports = write_project(SubfunctionSource(sub.name, sub.execution_units, sub.memory, shapes, ports_in,
                                                   ports_out, part, clock_period_ns, ap_types_headers(), max_batch,
                                                   sub.top),
                                 project)
    compile_library(project, library_name(sub.name), cache)
    return HlsProject(os.path.relpath(project, build_dir), os.path.relpath(project / library_name(sub.name),
                      build_dir), sub.name, SYNTHESIS_SCRIPT, part, clock_period_ns, ports_in, ports_out,
                      os.path.relpath(project / DDR_IMAGE, build_dir) if (project / DDR_IMAGE).is_file() else "",
                      weight_ports,
                      max_batch)


def rewrite_tops(build_dir: Path) -> Plan:
    """Write and compile every FPGA subfunction's top again from the build folder's plan.json (after
    its memory plan was edited): the units' hls4ml projects stay as they are."""
    plan = Plan.load(build_dir / "plan.json")
    for sub in plan.subfunctions:
        if sub.hls is not None:
            shapes = {}
            for unit in sub.execution_units:
                reference = open_model(build_dir / unit.onnx)
                shapes.update(reference.inputs + reference.outputs)
            sub.hls = _write_top(sub, shapes, sub.hls.part, sub.hls.clock_period_ns, sub.hls.max_batch, build_dir)
    write_manifests(plan, build_dir)  # the edited plan and the tops compiled anew are the build's now
    return plan


def verify_csim(plan: Plan, build_dir: Path, samples, progress: Progress = stderr_progress,
                seed: int = 0, flip_samples: int = 0) -> dict[str, np.ndarray]:
    """Each execution unit, then (once every unit passes, or under --error-budget) each subfunction and the
    whole pipeline against onnxruntime, then the quantized outputs code by code on ``flip_samples`` further
    samples (``_count_flips``, drawn from ``seed``); the pipeline's emulated outputs."""
    libraries = runtime.CSimLibraries(build_dir, keep_log=True)  # one process per subfunction for both checks
    unit_checks = verify.check_units(plan, build_dir, samples, libraries)
    for sub in plan.subfunctions:
        for unit in sub.execution_units:
            unit.verification = unit_checks[unit.name].record(len(samples))
    for unit in unit_checks.values():  # overflow is never silent, within tolerance or not
        for tensor in (t for t in unit.tensors.values() if t.saturated):
            progress(f"      {unit.name}: {tensor.saturated} of {tensor.values} values of '{tensor.tensor}' saturate "
                     f"(its type holds {tensor.range[0]:g} to {tensor.range[1]:g}, the reference reaches "
                     f"{tensor.peak:g})")
    failed_units = [u for u in unit_checks.values() if not u.passed]
    if plan.precision_search is None and failed_units:
        # a unit out of tolerance is widened (or stops the build) whatever its subfunction as a whole gives, which
        # runs once every unit passes
        _fail_on_saturation(failed_units, plan)
        error = VerificationError(f"C-simulation of {failed_units[0].name} against onnxruntime: "
                                  f"{failed_units[0].problem()}")
        error.units = failed_units
        raise error
    comparison = verify.check_build(plan, build_dir, samples, libraries)
    for sub, check in zip(plan.subfunctions, comparison.subfunctions):
        sub.verification = check.record(len(samples))
    failed_subs = [(sub, check) for sub, check in zip(plan.subfunctions, comparison.subfunctions) if not check.passed]
    if failed_subs:
        # Under --error-budget the budget is the outputs': a unit may err more on its own as long as its
        # subfunction's outputs stay within it (the units of a failing one are widened, its worst first).
        units = [unit_checks[u.name] for sub, _ in failed_subs for u in sub.execution_units]
        if plan.precision_search is not None:
            _fail_on_saturation(units, plan)
        first = failed_subs[0][1]
        error = VerificationError(f"C-simulation of {first.name} against onnxruntime: {first.problem()}")
        error.units = failed_units or units
        raise error
    if not comparison.passed:
        raise VerificationError(f"the pipeline against the model on onnxruntime: {comparison.pipeline.problem()}")
    _count_flips(plan, build_dir, libraries, seed, flip_samples, progress)
    return comparison.outputs


# The further samples' C-simulation at most (``flip_samples_to_compare``): hls4ml's C++ of a CNN on images takes
# seconds a sample in g++ (the ESPCN that qonnx ships: 0.27 billion operations on the FPGA, 19 s a sample on
# a two-core machine), a quantized MLP a millisecond; within it about half a minute to a few minutes
FLIP_OPERATIONS = 250_000_000


def flip_samples_to_compare(graph: Graph, fpga_nodes: Iterable[str], requested: Optional[int]) -> int:
    """How many further samples ``_count_flips`` compares codes on: ``requested`` (--flip-samples), else
    verify.FLIP_SAMPLES or as many as fit FLIP_OPERATIONS at the operations (``node_work``) the FPGA
    subfunctions' nodes ``fpga_nodes`` take a sample, if fewer."""
    if requested is not None:
        return requested
    index = graph.node_index()
    operations = sum(node_work(graph.nodes[index[n]]).ops for n in fpga_nodes)
    return min(verify.FLIP_SAMPLES, int(FLIP_OPERATIONS // max(1.0, operations)))


def _count_flips(plan: Plan, build_dir: Path, libraries: runtime.CSimLibraries, seed: int, count: int,
                 progress: Progress) -> None:
    """Each FPGA subfunction's quantized outputs compared code by code on ``count`` further samples
    drawn within the ranges its types were sized on (``verify.count_flips``), recorded in its
    verification and said where any flips: it then matches the reference up to flips, not bit for bit."""
    if plan.calibration is None or not plan.calibration.input_ranges or count == 0:
        return
    samples = uniform_samples(plan.inputs, count, plan.calibration.input_ranges, seed, FLIPS)
    flipped = verify.count_flips(plan, build_dir, samples, libraries)
    for sub in plan.subfunctions:
        if sub.name in flipped and sub.verification is not None:
            count, largest = flipped[sub.name]
            sub.verification.flip_samples, sub.verification.flipped = len(samples), count
            for output in sub.verification.outputs:
                output.further_error = largest.get(output.tensor, 0.0)
            if count:
                progress(f"      {sub.name}: answers otherwise than the reference (a code flips) on "
                         f"{count} of {len(samples)} further samples drawn within the sized ranges: it matches the reference "
                         f"up to flips, not bit for bit ('hetdeploy emulate' names the first unit that parts)")


def _fail_on_saturation(failed: list[verify.SubfunctionCheck], plan: Plan) -> None:
    """A unit out of tolerance because samples it was not sized on go beyond its output type's range:
    more bits widen its fraction, never its range, so the build stops naming the unit, the tensor and
    the value (its integer bits come from the sizing samples, which must cover the inputs)."""
    for check in failed:
        for tensor in (t for t in check.tensors.values() if not t.passed and t.saturated):
            low, high = tensor.range
            error = VerificationError(
                f"C-simulation of unit {check.name}: {tensor.problem()}: on samples the build did not size on, "
                f"'{tensor.tensor}' reaches {tensor.beyond:g} ({tensor.saturated} of {tensor.values} values beyond "
                f"its type's {low:g} to {high:g}, sized on {plan.calibration.samples} samples); more bits would not "
                f"widen that range: size on samples that cover your inputs (--calibration)")
            error.units = []  # nothing to widen
            raise error
