"""``hetdeploy emulate``: the built pipeline on this host against the model on onnxruntime."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..core.board_runtime import (Problem, StreamTimes, batch_problem, check_manifest, one_sample_feeds,
                                  profile_document, profiled_node_seconds, resource_of, stream_summary, stream_table,
                                  write_profile)
from ..core.checkpoint import CHECKPOINT, STATE, read_checkpoint
from ..core.errors import UserError
from ..core.plan import Plan, Verification
from ..intake.ort_adapter import providers_for
from . import runtime, verify
from .runtime import largest_batch
from .samples import EMULATION, input_ranges, load_labels, load_samples, random_samples, uniform_samples


@dataclass
class Accuracy:
    """Classification accuracy on labelled samples: the class is the argmax of ``output``'s last axis."""

    output: str
    samples: int
    emulated: float  # the emulated pipeline's
    model: float  # the user's model's on its reference, on the same samples


@dataclass
class EmulationResult:
    plan: Plan
    comparison: verify.Comparison
    notes: list[str]
    engines: list[str]  # per subfunction: what ran it here
    accuracy: Optional[Accuracy] = None
    benchmark: Optional[dict] = None  # board_runtime.stream_summary of the run, when asked for

    def to_dict(self) -> dict:
        c = self.comparison
        return {
            "board": self.plan.board,
            "subfunctions": [
                {"name": s.name, "kind": s.kind, "engine": engine, "max_abs_error": check.max_abs_error,
                 "tolerance": check.tolerance, "passed": check.passed, "outputs": _outputs(check)}
                for s, check, engine in zip(self.plan.subfunctions, c.subfunctions, self.engines)
            ],
            "max_abs_error": c.max_abs_error,
            "tolerance": c.tolerance,
            "passed": c.passed,
            "outputs": _outputs(c.pipeline),
            "accuracy": asdict(self.accuracy) if self.accuracy else None,
            "benchmark": self.benchmark,
            "notes": self.notes,
        }

    def table(self) -> str:
        """A row per subfunction (its worst output), then one per output of the model, each against
        its own tolerance, and what failed."""
        c = self.comparison
        lines = [f"{'subfunction':<16} {'device':<10} {'engine':<22} {'max abs error':>13} {'tolerance':>9}"]
        for s, check, engine in zip(self.plan.subfunctions, c.subfunctions, self.engines):
            lines.append(f"{s.name:<16} {s.device:<10} {engine:<22} {check.max_abs_error:>13.4g} "
                         f"{check.tolerance:>9.4g}{'' if check.passed else '  OUT OF TOLERANCE'}")
        for t in c.pipeline.tensors.values():
            verdict = "within tolerance" if t.passed else "OUT OF TOLERANCE"
            lines.append(f"{'output ' + t.tensor:<27} {'vs the model':<22} {t.max_abs_error:>13.4g} "
                         f"{t.tolerance:>9.4g}  {verdict}")
        problems = [f"{s.name}: {check.problem()}" for s, check in zip(self.plan.subfunctions, c.subfunctions)
                    if not check.passed] + ([f"overall: {c.pipeline.problem()}"] if not c.pipeline.passed else [])
        lines.append(f"overall: {'within tolerance' if c.passed else 'OUT OF TOLERANCE'}")
        if self.accuracy is not None:
            a = self.accuracy
            lines.append(f"accuracy on {a.samples} labelled samples (argmax of '{a.output}'): emulated "
                         f"{100 * a.emulated:.2f} %, the model {100 * a.model:.2f} %")
        if self.benchmark is not None:
            lines += ["", *stream_table(self.benchmark)]
        return "\n".join(lines + [f"failed: {p}" for p in problems] + [f"note: {n}" for n in self.notes])


def _outputs(check: verify.SubfunctionCheck) -> list[dict]:
    return [{"tensor": t.tensor, "max_abs_error": t.max_abs_error, "peak": t.peak, "tolerance": t.tolerance,
             "nonfinite": t.nonfinite + t.reference_nonfinite, "passed": t.passed} for t in check.tensors.values()]


def load_build(build_dir: Path) -> Plan:
    """The plan of a build folder ``hetdeploy build`` wrote; one line when ``build_dir`` is not one
    (its deployment package, which holds plan.json too, included)."""
    build_dir = Path(build_dir)
    if (build_dir / "run.py").is_file() and not (build_dir / "source.onnx").is_file():
        raise UserError(f"{build_dir}: a deployment package (run it with run.py); emulation takes the build folder "
                        f"that holds it, {build_dir.resolve().parent}")
    if not (build_dir / "plan.json").exists() and (build_dir / CHECKPOINT / STATE).is_file():
        checkpoint = read_checkpoint(build_dir)[0]
        raise UserError(f"{build_dir}: a build that stopped after step {checkpoint.steps[-1]} (--to-step), not a "
                        f"finished one; finish it with hetdeploy build ... -o {build_dir} --from-step "
                        f"{checkpoint.remaining[0] if checkpoint.remaining else checkpoint.steps[-1]}")
    plan = Plan.load(build_dir / "plan.json")
    _check_paths(plan, build_dir)
    _check_tensors(plan, build_dir)
    try:
        check_manifest(build_dir, emulate=True)
    except Problem as problem:
        raise UserError(str(problem)) from None
    return plan


def _check_tensors(plan: Plan, build_dir: Path) -> None:
    """The subfunctions chain: each reads what the model's inputs or an earlier one give, its HLS
    ports are its own inputs and outputs, and the model's outputs are made (a damaged plan.json fails
    here, in one line, not while running)."""
    def damaged(problem: str) -> UserError:
        return UserError(f"{build_dir / 'plan.json'}: {problem}; plan.json is damaged")

    if not 0 < plan.relative_tolerance < 1:
        raise damaged(f"relative_tolerance {plan.relative_tolerance:g} is not a share of a peak (above 0, below 1)")
    known = {r.tensor.name for r in plan.input_reshapes} | {t.name for t in plan.inputs}
    # values per sample of the tensors whose shape plan.json says: the model's inputs and outputs, and
    # what an FPGA core's ports hold (its C-simulation library was compiled for them)
    values = {t.name: math.prod(t.shape[1:]) for t in [*plan.inputs, *(r.tensor for r in plan.input_reshapes)]}
    for r in plan.input_reshapes:
        if math.prod(r.original.shape[1:]) != values[r.tensor.name]:
            raise damaged(f"input '{r.original.name}' {r.original.shape} does not reshape to {r.tensor.shape}")
    for sub in plan.subfunctions:
        missing = [t for t in sub.inputs if t not in known]
        if missing:
            raise damaged(f"subfunction {sub.name} reads '{missing[0]}', which nothing before it makes")
        if sub.kind == "fpga" and sub.hls is None:  # never run on another engine in its place
            raise damaged(f"FPGA subfunction {sub.name} has no HLS section")
        if sub.hls is not None and sub.hls.max_batch < 1:
            raise damaged(f"subfunction {sub.name}'s max_batch is {sub.hls.max_batch}")
        if sub.hls is not None:  # the top's ports are the subfunction's inputs and outputs, in order (build.py)
            for kind, ports, tensors in (("inputs", sub.hls.inputs, sub.inputs),
                                         ("outputs", sub.hls.outputs, sub.outputs)):
                named = [p.tensor for p in ports]
                if named != tensors:
                    raise damaged(f"subfunction {sub.name}'s HLS {kind} {named} are not its {kind} {tensors}")
                for port in ports:
                    if not port.shape or port.shape[0] != 1 or any(d < 1 for d in port.shape):
                        raise damaged(f"subfunction {sub.name}'s HLS port '{port.tensor}' has shape {port.shape}, "
                                      f"not one sample of positive sizes")
                    size = math.prod(port.shape[1:])
                    if values.setdefault(port.tensor, size) != size:
                        raise damaged(f"subfunction {sub.name}'s HLS port '{port.tensor}' holds {port.shape}, "
                                      f"{values[port.tensor]} values a sample elsewhere in the plan")
        known.update(sub.outputs)
    for output in plan.outputs:
        size = math.prod(output.shape[1:])
        if values.get(output.name, size) != size:
            raise damaged(f"the model's output '{output.name}' {output.shape} is not what its FPGA core makes")
    missing = [t.name for t in plan.outputs if t.name not in known]
    if missing:
        raise damaged(f"the model's output '{missing[0]}' is made by no subfunction")


def _check_paths(plan: Plan, build_dir: Path) -> None:
    """Every file plan.json names (models, libraries, projects) inside the build folder: a damaged
    or hostile plan.json must not load a library or model from elsewhere."""
    root = build_dir.resolve()
    named = [("model", plan.model)]
    for sub in plan.subfunctions:
        named.append((f"{sub.name} onnx", sub.onnx))
        if sub.hls is not None:
            named += [(f"{sub.name} project", sub.hls.project), (f"{sub.name} library", sub.hls.library),
                      (f"{sub.name} ddr_image", sub.hls.ddr_image)]
        for unit in sub.execution_units:
            named.append((f"{unit.name} onnx", unit.onnx))
            if unit.hls is not None:
                named.append((f"{unit.name} project", unit.hls.project))
    for what, path in named:
        try:
            inside = not Path(path).is_absolute() and (root / path).resolve().is_relative_to(root)
        except (OSError, ValueError):  # a name too long, a NUL
            inside = False
        if path and not inside:
            raise UserError(f"{build_dir / 'plan.json'}: {what} '{path}' is outside the build folder; plan.json is "
                            f"damaged")


def emulate(build_dir: Path, input_path: Optional[str], seed: int = 0, labels_path: Optional[str] = None,
            batch: int = 1, pipelined: bool = True, benchmark: bool = False, profile: Optional[str] = None
            ) -> EmulationResult:
    """The build on the samples of ``input_path`` (else one seeded random sample), run as run.py runs
    them: in batches of ``batch`` samples (an FPGA call each), the subfunctions a pipeline when
    ``pipelined`` and there is more than one batch; ``benchmark``: with its timings; ``profile``: a
    file to write what the run measured to (``record_profile``)."""
    plan = load_build(build_dir)
    if labels_path and not input_path:
        raise UserError("--labels needs --input: the samples the labels are for")
    problem = batch_problem(batch, largest_batch(plan))
    if problem:
        raise UserError(problem)
    notes = []
    if input_path:
        samples = load_samples(input_path, plan.inputs)
    else:
        samples, note = unseen_sample(plan, seed)
        notes.append(note)
        if benchmark:
            notes.append("--benchmark timed that one sample: its percentiles are one call's; give --input with many "
                         "samples for a distribution")
    labels = load_labels(labels_path) if labels_path else None
    count = len(samples) * plan.inputs[0].shape[0]  # each feed holds the model's batch of samples
    if labels is not None and len(labels) != count:
        raise UserError(f"{labels_path}: {len(labels)} labels for {count} samples")
    return emulate_samples(build_dir, plan, samples, labels, notes, batch, pipelined, benchmark, profile)


def emulate_samples(build_dir: Path, plan: Plan, samples: list[dict[str, np.ndarray]], labels: Optional[np.ndarray],
                    notes: list[str], batch: int = 1, pipelined: bool = True, benchmark: bool = False,
                    profile: Optional[str] = None) -> EmulationResult:
    """``emulate`` on samples in hand (one feeds dict each) and their labels, if any."""
    times = StreamTimes()
    comparison = verify.check_build(plan, build_dir, samples, batch=batch, pipelined=pipelined, times=times)
    beyond = inputs_beyond_calibration(plan, samples)
    for sub, check in zip(plan.subfunctions, comparison.subfunctions):
        if sub.kind == "fpga" and sub.verification is not None and not beyond:  # inputs like the build's own
            verify.bound_drift(check, sub.verification)
    if any(s.kind == "gpu" and not engine.endswith("CUDA")
           for s, engine in zip(plan.subfunctions, comparison.engines)):
        notes.append("no CUDA provider in this onnxruntime: GPU subfunctions ran on the CPU provider")
    if not comparison.passed:
        notes += why_out_of_tolerance(plan, samples, comparison)
        notes += first_differing_units(build_dir, plan, samples, comparison)
    accuracy = None
    if labels is not None:
        output = plan.outputs[0].name
        got, want = comparison.outputs[output], comparison.reference[output]
        accuracy = Accuracy(output, len(labels), _hits(got, labels), _hits(want, labels))
    summary = stream_summary([s.name for s in plan.subfunctions],
                             [resource_of(s.kind, s.device, s.name) for s in plan.subfunctions], times) \
        if benchmark else None
    if profile:
        record_profile(build_dir, plan, samples, times, profile)
        notes.append(f"profile written to {profile}: this host's figures (CPU nodes by onnxruntime's profiler, "
                     f"FPGA calls in C-simulation), not the board's; 'hetdeploy plan --profile' uses its CPU nodes")
    return EmulationResult(plan, comparison, notes, comparison.engines, accuracy, summary)


def record_profile(build_dir: Path, plan: Plan, samples: list[dict[str, np.ndarray]], times: StreamTimes,
                   path: str) -> None:
    """What the emulation measured (``times``: its calls), as run.py --profile records it, into
    ``path``: each CPU or GPU subfunction's nodes timed by onnxruntime's profiler on the inputs they
    get in the float pipeline, a second pass; the FPGA calls are C-simulation's, timed as calls."""
    executors = runtime.file_executors(build_dir, plan)
    envs = [runtime.run(plan, executors, feeds) for feeds in samples]
    nodes = {s.name: profiled_node_seconds(str(build_dir / s.onnx), one_sample_feeds(envs, s.inputs),
                                           providers_for(s.kind))
             for s in plan.subfunctions if s.kind != "fpga"}
    document = profile_document(json.loads((build_dir / "plan.json").read_text()), "hetdeploy emulate", False,
                                times, envs, nodes, {})
    try:
        write_profile(path, document)
    except Problem as problem:
        raise UserError(str(problem)) from None


def why_out_of_tolerance(plan: Plan, samples: list[dict[str, np.ndarray]], comparison: verify.Comparison
                         ) -> list[str]:
    """What can be known of why an emulation is out of tolerance: inputs beyond the ranges the build
    sized its fixed-point types on, and FPGA outputs whose reference goes beyond what their types hold."""
    reasons = []
    calibration = plan.calibration
    for name, (least, most), (low, high) in inputs_beyond_calibration(plan, samples):
        sized = (f"{calibration.samples} samples of {calibration.file}" if calibration.source == "file" else
                 f"{calibration.samples} synthetic N(0, 1) samples")
        reasons.append(f"input '{name}' spans {least:.4g} to {most:.4g} here, beyond the {low:.4g} to "
                       f"{high:.4g} of the {sized} the FPGA's types were sized on: rebuild with --calibration "
                       f"X.npy holding inputs like these")
    for sub, check in zip(plan.subfunctions, comparison.subfunctions):
        for tensor in (t for t in check.tensors.values() if t.saturated):
            low, high = tensor.range
            reasons.append(f"{sub.name}: {tensor.saturated} of {tensor.values} values of '{tensor.tensor}' go beyond "
                           f"what its type holds ({low:g} to {high:g}; the reference reaches {tensor.beyond:g}), "
                           f"so they saturate")
    return reasons


def first_differing_units(build_dir: Path, plan: Plan, samples: list[dict[str, np.ndarray]],
                          comparison: verify.Comparison) -> list[str]:
    """For each FPGA subfunction out of tolerance, the first of its units whose output, its units
    chained in C-simulation from the subfunction's reference inputs, parts from the reference chain:
    a quantizer's codes that matched when the build verified now flip, or another output goes beyond
    its tolerance or what the build measured (``verify.bound_drift``)."""
    failed = [k for k, (s, c) in enumerate(zip(plan.subfunctions, comparison.subfunctions))
              if s.hls is not None and not c.passed]
    if not failed:
        return []
    seen = runtime.subfunction_inputs(build_dir, plan, samples)
    libraries = runtime.CSimLibraries(build_dir)
    steps = verify.build_steps(build_dir)
    found = []
    for k in failed:
        sub = plan.subfunctions[k]
        chained, reference = [dict(feeds) for feeds in seen[k]], [dict(feeds) for feeds in seen[k]]
        for unit, (csim, model) in zip(sub.execution_units, runtime.unit_executors(libraries, sub)):
            names = [n for n, _ in model.inputs]
            check = verify.SubfunctionCheck(unit.name, "fpga", plan.relative_tolerance, steps=steps)
            differing = 0
            for got_env, want_env in zip(chained, reference):
                got, want = csim({n: got_env[n] for n in names}), model.run({n: want_env[n] for n in names})
                check.add(got, want)
                differing += any(not np.array_equal(got[t], want[t]) for t in want)
                got_env.update(got)
                want_env.update(want)
            parted = _parted(check, unit.verification)
            if parted:
                found.append(f"{sub.name}: the first unit that parts from the reference is {unit.name} (nodes "
                             f"{', '.join(unit.nodes)}): {parted}; {differing} of {len(chained)} samples differ there")
                break
    return found


def _parted(check: verify.SubfunctionCheck, verified: Optional[Verification]) -> str:
    """How ``check`` (a unit's, chained) parts from what the build verified ("" when it does not)."""
    recorded = {o.tensor: o for o in verified.outputs} if verified is not None else {}
    if verified is not None:
        verify.bound_drift(check, verified)
    for tensor in check.tensors.values():
        then = recorded.get(tensor.tensor)
        if then is not None and then.step and then.max_abs_error < then.step / 2 <= tensor.max_abs_error:
            return (f"output '{tensor.tensor}' was on its quantizer's codes when the build verified, and is off by "
                    f"{tensor.max_abs_error:.4g} here (its step {then.step:.4g}): codes flip")
        if not tensor.passed:
            return tensor.problem()
    return ""


def inputs_beyond_calibration(plan: Plan, samples: list[dict[str, np.ndarray]]
                              ) -> list[tuple[str, tuple[float, float], tuple[float, float]]]:
    """Each input whose values in ``samples`` go beyond the range the build sized its types on: its
    name, its range here and the calibration's."""
    if plan.calibration is None:
        return []
    seen = input_ranges(samples)
    return [(name, seen[name], (low, high)) for name, (low, high) in plan.calibration.input_ranges.items()
            if seen[name][0] < low or seen[name][1] > high]


def unseen_sample(plan: Plan, seed: int) -> tuple[list[dict[str, np.ndarray]], str]:
    """One sample the build neither sized on nor verified on (a stream of ``seed`` of its own), of
    the kind it sized on: uniform within its calibration file's ranges, else N(0, 1); and a note
    saying so."""
    calibration = plan.calibration
    if calibration is not None and calibration.source == "file":
        return (uniform_samples(plan.inputs, 1, calibration.input_ranges, seed, EMULATION),
                f"no --input: 1 sample drawn uniformly within the ranges of {calibration.file} (seed {seed}), "
                f"which the build neither sized nor verified on; give --input with real inputs")
    return (random_samples(plan.inputs, 1, seed, EMULATION),
            f"no --input: 1 synthetic N(0, 1) sample (seed {seed}) that the build neither sized nor verified on")


def _hits(scores: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(scores.reshape(len(labels), -1), axis=-1) == labels))
