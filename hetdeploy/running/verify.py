"""Compare each subfunction on its emulated device with onnxruntime on the same inputs.

Every output tensor is judged on its own: it passes when every value is finite (a NaN or Inf in the
result or in the reference fails it) and its largest error is at most ``relative`` times the
largest magnitude of its own reference, or one step of the quantizer that writes it (a QONNX Quant
or a DequantizeLinear, through ops that keep values), whichever is larger: a quantized output
rounded at a tie the other way is one step off, however small a share of the peak a step is. A
quantized FPGA output is that step times its code written in its fixed-point type, which rounds it
to its own grid: half a step of that grid more. An
output whose reference is all zeros must come out all zeros. A check passes only when every tensor
it saw passed, and one that saw no tensor fails.
An execution unit's outputs also count their saturations: reference values beyond what the
output's fixed-point type holds (it saturates to its rails), so that overflow is never silent.
A build whose units fail widens them (``widen``) and runs again from their folding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import onnx

from ..core.csim import CSimCrash
from ..core.errors import VerificationError
from ..core.plan import Plan, Subfunction, TensorVerification, Verification, Widening
from ..core.progress import Progress
from ..fpga.packing import precision_grid
from ..intake.ort_adapter import OrtModel, open_model
from . import runtime


@dataclass
class TensorCheck:
    """One tensor against its reference, over every sample seen."""

    tensor: str
    relative: float
    max_abs_error: float = 0.0
    peak: float = 0.0  # the reference's largest magnitude
    nonfinite: int = 0  # NaN or Inf in the result
    reference_nonfinite: int = 0  # NaN or Inf in the reference
    values: int = 0
    # the result's fixed-point type: its step, least and largest value
    grid: Optional[tuple[float, float, float]] = None
    saturated: int = 0  # reference values outside ``range``: the result holds the rail instead
    beyond: float = 0.0  # the reference value farthest outside ``range`` (when ``saturated``)
    step: float = 0.0  # the largest step of the quantizer that writes it (0: not quantized)
    # the most error the build's own verification makes plausible here (``drift_limit``); inf: no bound
    drift_limit: float = float("inf")
    verified_error: float = 0.0  # the error the build recorded, which ``drift_limit`` was set from

    def add(self, got: np.ndarray, want: np.ndarray) -> None:
        got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        if got.shape != want.shape:
            raise ValueError(f"tensor '{self.tensor}': result of shape {list(got.shape)}, reference "
                             f"{list(want.shape)}")
        finite = np.isfinite(got) & np.isfinite(want)
        self.nonfinite += int(np.count_nonzero(~np.isfinite(got)))
        self.reference_nonfinite += int(np.count_nonzero(~np.isfinite(want)))
        self.values += got.size
        if finite.any():
            self.max_abs_error = max(self.max_abs_error, float(np.max(np.abs(got[finite] - want[finite]))))
            self.peak = max(self.peak, float(np.max(np.abs(want[finite]))))
        if self.grid is not None:
            _, low, high = self.grid
            outside = want[(want < low) | (want > high)]
            self.saturated += outside.size
            if outside.size and np.max(np.abs(outside)) > abs(self.beyond):
                self.beyond = float(outside[np.argmax(np.abs(outside))])

    @property
    def range(self) -> Optional[tuple[float, float]]:
        """What the result's fixed-point type holds (None: not a fixed-point type)."""
        return None if self.grid is None else self.grid[1:]

    @property
    def quantized_tolerance(self) -> float:
        """A quantized output's: its quantizer's step, and half its fixed-point type's (the code times
        the step rounded to that type's grid); 0 where it is not quantized."""
        return self.step + (self.grid[0] / 2 if self.step and self.grid is not None else 0.0)

    @property
    def tolerance(self) -> float:
        return max(self.relative * self.peak, self.quantized_tolerance)

    @property
    def passed(self) -> bool:
        return self.values > 0 and self.nonfinite == 0 and self.reference_nonfinite == 0 and \
            self.max_abs_error <= min(self.tolerance, self.drift_limit)

    @property
    def relative_error(self) -> float:
        """The measure the tolerance applies to, as one number: the max abs error over the peak; inf
        for a NaN or Inf on either side, for a tensor never compared, and for any error against an
        all-zero reference (which must come out all zeros)."""
        if self.values == 0 or self.nonfinite or self.reference_nonfinite:
            return float("inf")
        if self.peak == 0:
            return 0.0 if self.max_abs_error == 0 else float("inf")
        return self.max_abs_error / self.peak

    def problem(self) -> str:
        """What is wrong, in words ("" when it passed)."""
        if self.values == 0:
            return f"output '{self.tensor}' was never compared"
        if self.reference_nonfinite:
            return (f"output '{self.tensor}' of the reference (onnxruntime) has {self.reference_nonfinite} NaN or "
                    f"Inf values on these inputs; give inputs from the model's domain (--calibration)")
        if self.nonfinite:
            return f"output '{self.tensor}' has {self.nonfinite} NaN or Inf values"
        if self.max_abs_error > self.drift_limit and self.max_abs_error <= self.tolerance:
            times = f"{self.max_abs_error / self.verified_error:.3g} times" if self.verified_error else "above"
            return (f"output '{self.tensor}' differs by {self.max_abs_error:.4g}, {times} the "
                    f"{self.verified_error:.4g} the build measured when it verified (at most {self.drift_limit:.4g} "
                    f"here): within its tolerance "
                    f"{self.tolerance:.4g}, but not what this build computes on inputs like its own")
        if self.max_abs_error > self.tolerance:
            rule = ("one step of its quantizer" + (" and half a step of its type" if self.grid is not None else "")
                    if self.quantized_tolerance > self.relative * self.peak else
                    f"{self.relative:g} of its peak {self.peak:.4g}")
            return (f"output '{self.tensor}' differs by {self.max_abs_error:.4g} (tolerance {self.tolerance:.4g}, "
                    f"{rule})")
        return ""

    def record(self) -> TensorVerification:
        return TensorVerification(self.tensor, self.max_abs_error, self.peak, self.tolerance,
                                  self.nonfinite + self.reference_nonfinite, self.passed, self.saturated, self.step)


@dataclass
class SubfunctionCheck:
    """A subfunction (or execution unit, or the whole pipeline): one TensorCheck per output."""

    name: str
    kind: str
    relative: float
    tensors: dict[str, TensorCheck] = field(default_factory=dict)
    grids: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # tensor -> its type's (precision_grid)
    steps: dict[str, float] = field(default_factory=dict)  # tensor -> its quantizer's step (quantizer_steps)

    def add(self, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
        for name, value in want.items():
            self.tensors.setdefault(name, TensorCheck(name, self.relative, grid=self.grids.get(name),
                                                      step=self.steps.get(name, 0.0))).add(got[name], value)

    @property
    def worst(self) -> Optional[TensorCheck]:
        """The failing tensor, else the one nearest its tolerance."""
        def badness(t: TensorCheck) -> tuple:
            return (not t.passed, t.max_abs_error / t.tolerance if t.tolerance else float(t.max_abs_error > 0))

        return max(self.tensors.values(), key=badness, default=None)

    @property
    def max_abs_error(self) -> float:
        return self.worst.max_abs_error if self.worst else 0.0

    @property
    def tolerance(self) -> float:
        return self.worst.tolerance if self.worst else 0.0

    @property
    def passed(self) -> bool:
        return bool(self.tensors) and all(t.passed for t in self.tensors.values())

    def problem(self) -> str:
        return "; ".join(t.problem() for t in self.tensors.values() if not t.passed) if self.tensors \
            else "no output was compared"

    @property
    def relative_error(self) -> float:
        """The largest of its tensors' (inf when it compared none)."""
        return max((t.relative_error for t in self.tensors.values()), default=float("inf"))

    def record(self, samples: int) -> Verification:
        return Verification(samples, self.max_abs_error, self.tolerance, self.passed,
                            [t.record() for t in self.tensors.values()])


@dataclass
class Comparison:
    outputs: dict[str, np.ndarray]  # the emulated pipeline's final outputs
    reference: dict[str, np.ndarray]  # the user's model on onnxruntime
    subfunctions: list[SubfunctionCheck]
    pipeline: SubfunctionCheck  # the final outputs against the user's model
    engines: list[str]  # per subfunction, what ran it (for onnxruntime, the provider its session used)

    @property
    def max_abs_error(self) -> float:
        return self.pipeline.max_abs_error

    @property
    def tolerance(self) -> float:
        return self.pipeline.tolerance

    @property
    def passed(self) -> bool:
        return self.pipeline.passed and all(s.passed for s in self.subfunctions)


# Ops whose outputs are some of their input's values: a quantized input stays on its quantizer's grid.
_VALUE_KEEPING_OPS = {"Relu", "MaxPool", "GlobalMaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
                      "Identity", "Concat", "Slice", "Gather", "Pad", "DepthToSpace", "SpaceToDepth"}


# Quantizers and the input holding their step (by their number of inputs: qonnx's Trunc v1 steps at
# its input scale, v2 at its output scale). Not BipolarQuant: one step of its two values is its whole
# range, and a tolerance of one step would pass any output; a binary output must be exact.
_STEP_INPUT = {"Quant": {4: 1}, "DequantizeLinear": {2: 1, 3: 1}, "Trunc": {5: 1, 6: 4}}


# An FPGA output's error on inputs within the build's calibration ranges may grow to DRIFT times the
# largest error its verification recorded (on the held-out samples and, for a quantized network, the
# further samples of count_flips; more samples find larger ones), or one quantizer step (and half its
# type's, as ``TensorCheck.quantized_tolerance``), or DRIFT_FLOOR
# of its tolerance, whichever is largest; past that, what runs is not what was verified (a damaged
# file, another library) even when it is within the tolerance.
DRIFT, DRIFT_FLOOR = 20.0, 0.01


def bound_drift(check: SubfunctionCheck, verification: Verification) -> None:
    """Each of ``check``'s tensors held to the error ``verification`` (the build's) recorded for it."""
    for recorded in verification.outputs:
        tensor = check.tensors.get(recorded.tensor)
        if tensor is not None:
            tensor.verified_error = max(recorded.max_abs_error, recorded.further_error)
            tensor.drift_limit = max(DRIFT * tensor.verified_error, recorded.step, tensor.quantized_tolerance,
                                     DRIFT_FLOOR * recorded.tolerance)


def quantizer_steps(path: Path) -> dict[str, float]:
    """Every tensor of the model at ``path`` that a quantizer writes: a QONNX Quant or Trunc or a
    DequantizeLinear, or an op that keeps its input's values reading one; the quantizer's
    largest step (per-channel scales: the largest)."""
    model = onnx.load(str(path), load_external_data=False)
    constants = {t.name: t for t in model.graph.initializer}
    steps: dict[str, float] = {}
    for node in model.graph.node:  # topological order: a value-keeping op's input is known first
        step = 0.0
        index = _STEP_INPUT.get(node.op_type, {}).get(len(node.input))
        if index is not None and node.input[index] in constants:
            tensor = constants[node.input[index]]
            if tensor.data_location != onnx.TensorProto.EXTERNAL and np.prod(tensor.dims):
                step = float(np.max(np.abs(onnx.numpy_helper.to_array(tensor))))
        elif node.op_type in _VALUE_KEEPING_OPS and node.input and node.input[0] in steps:
            step = steps[node.input[0]]
        if step > 0:
            steps.update({t: step for t in node.output[:1] if t})
    return steps


def build_steps(build_dir: Path) -> dict[str, float]:
    """``quantizer_steps`` of a build's normalised model (its units' and subfunctions' tensors) and of
    the user's model (the pipeline's outputs)."""
    return {**quantizer_steps(build_dir / "model.onnx"), **quantizer_steps(build_dir / "source.onnx")}


def output_grids(sub, tensors: Optional[list[str]] = None) -> dict[str, tuple[float, float, float]]:
    """The grids of an FPGA subfunction's output buffers' fixed-point types (``precision_grid``), or of its buffers
    of ``tensors`` (a unit's outputs), so that its check counts the reference values beyond them and allows a
    quantized output its type's rounding; none for a CPU or GPU subfunction."""
    grids = {}
    for buffer in sub.memory.buffers if sub.hls is not None and sub.memory is not None else []:
        if buffer.tensor in (sub.outputs if tensors is None else tensors):
            try:
                grids[buffer.tensor] = precision_grid(buffer.precision)
            except ValueError:  # not an ap_fixed type (a one-bit or integer buffer): nothing to count
                pass
    return grids


def compare(plan: Plan, device, reference, source: OrtModel, samples: list[dict[str, np.ndarray]], batch: int = 1,
            pipelined: bool = True, times: Optional[runtime.StreamTimes] = None,
            steps: Optional[dict[str, float]] = None) -> Comparison:
    """Run ``samples`` through the pipeline on ``device`` executors as a stream of batches of
    ``batch`` (``runtime.stream``); check every subfunction against its ``reference`` executor on
    the very inputs it got (so an error upstream is not counted against it), and the final outputs
    against the user's model. ``steps``: the quantized tensors' steps (``build_steps``)."""
    steps = steps or {}
    checks = [SubfunctionCheck(s.name, s.kind, plan.relative_tolerance, grids=output_grids(s), steps=steps)
              for s in plan.subfunctions]
    pipeline = SubfunctionCheck("overall", "pipeline", plan.relative_tolerance, steps=steps)
    envs = runtime.stream(plan, device, samples, batch, pipelined, times)
    names = [o.name for o in plan.outputs]
    expected: list[dict[str, np.ndarray]] = []
    for env, feeds in zip(envs, runtime.batches(samples, batch)):
        for check, sub, execute in zip(checks, plan.subfunctions, reference):
            check.add({t: env[t] for t in sub.outputs}, execute({t: env[t] for t in sub.inputs}))
        want = runtime.per_sample(source.run, feeds)
        pipeline.add({name: env[name] for name in names}, {name: want[name] for name in names})
        expected.append(want)
    got = {name: np.concatenate([env[name] for env in envs]) for name in names}
    want = {name: np.concatenate([w[name] for w in expected]) for name in names}
    return Comparison(got, want, checks, pipeline, [e.engine for e in device])


def check_build(plan: Plan, build_dir: Path, samples: list[dict[str, np.ndarray]],
                libraries: Optional[runtime.CSimLibraries] = None, batch: int = 1, pipelined: bool = True,
                times: Optional[runtime.StreamTimes] = None) -> Comparison:
    """``compare`` for a build folder: each subfunction on its emulated device against the same nodes
    of the build's normalised model on the CPU (``runtime.reference_executors``: never the file the
    device runs, nor the device's provider), the pipeline against source.onnx. ``libraries``: the
    C-simulation libraries to run (a build's own check shares them with ``check_units``; default:
    started here, their output kept out of the build folder)."""
    return compare(
        plan,
        runtime.device_executors(libraries or runtime.CSimLibraries(build_dir), plan),
        runtime.reference_executors(build_dir, plan),
        open_model(build_dir / "source.onnx"),
        samples, batch, pipelined, times, build_steps(build_dir),
    )


# Further samples a build compares an FPGA subfunction's quantized outputs on, code by code: a
# threshold that flips now and then shows on a few hundred inputs where the handful held out may not
FLIP_SAMPLES = 256


def flip_checked(plan: Plan, build_dir: Path) -> list[tuple[int, Subfunction]]:
    """(index, subfunction) of each generated FPGA subfunction of a quantized network: a quantizer writes
    one of its tensors."""
    steps = build_steps(build_dir)

    def quantized(sub: Subfunction) -> bool:
        tensors = [b.tensor for b in sub.memory.buffers] if sub.memory is not None else sub.outputs
        return any(steps.get(t, 0.0) > 0 for t in tensors)

    return [(k, sub) for k, sub in enumerate(plan.subfunctions)
            if sub.hls is not None and quantized(sub)]


def count_flips(plan: Plan, build_dir: Path, samples: list[dict[str, np.ndarray]],
                libraries: runtime.CSimLibraries) -> dict[str, tuple[int, dict[str, float]]]:
    """Per verified FPGA subfunction of a quantized network (a quantizer writes one of its tensors),
    how many of ``samples`` it answers otherwise than the reference on (a quantized output off by half
    a step or more, another beyond the tolerance its verification held it to, or a NaN or Inf), and
    each output's largest error on them; each subfunction on the inputs the float pipeline gives it."""
    chosen = flip_checked(plan, build_dir)
    if not chosen:
        return {}
    seen = runtime.subfunction_inputs(build_dir, plan, samples)
    reference = runtime.reference_executors(build_dir, plan)
    flipped = {}
    for k, sub in chosen:
        allowed = {o.tensor: (o.step / 2, True) if o.step else (o.tolerance, False) for o in sub.verification.outputs}
        device = runtime.subfunction_executor(libraries, sub)
        count, largest = 0, dict.fromkeys(allowed, 0.0)
        for feeds in seen[k]:
            got, want = device(feeds), reference[k](feeds)
            errors = {t: np.abs(np.asarray(got[t], np.float64) - want[t]) for t in allowed}
            count += any(not np.all(errors[t] < bound if strict else errors[t] <= bound)
                         for t, (bound, strict) in allowed.items())
            largest = {t: max(largest[t], float(np.max(errors[t], initial=0.0))) for t in allowed}
        flipped[sub.name] = (count, largest)
    return flipped


def check_units(plan: Plan, build_dir: Path, samples: list[dict[str, np.ndarray]],
                libraries: runtime.CSimLibraries) -> dict[str, SubfunctionCheck]:
    """Every execution unit of every FPGA subfunction in C-simulation against its ONNX model on
    onnxruntime, on the float values the unit sees in the reference pipeline."""
    seen = runtime.subfunction_inputs(build_dir, plan, samples)
    steps = build_steps(build_dir)
    checks = {}
    for index, sub in enumerate(plan.subfunctions):
        if sub.hls is None:
            continue
        for unit, (csim, reference) in zip(sub.execution_units, runtime.unit_executors(libraries, sub)):
            # (an hls4ml unit's output types are its ports'; a unit the top computes writes its buffers')
            grids = {p.tensor: precision_grid(p.precision) for p in unit.hls.outputs} if unit.hls else \
                output_grids(sub, unit.outputs)
            check = checks[unit.name] = SubfunctionCheck(unit.name, "fpga", plan.relative_tolerance, grids=grids,
                                                         steps=steps)
            for env in seen[index]:
                want = reference.run(env)
                try:
                    got = csim(env)
                except CSimCrash as crash:
                    ops = sorted({n.op_type for n in onnx.load(str(build_dir / unit.onnx)).graph.node})
                    raise CSimCrash(f"unit {unit.name} ({', '.join(ops)}; nodes {', '.join(unit.nodes)}): "
                                    f"{crash}") from None
                check.add(got, want)
                env.update(want)
    return checks


# Automatic widening of a unit out of tolerance: this many bits at a time (one under
# --error-budget), up to MAX_WIDTH.
WIDEN_STEP, MAX_WIDTH = 4, 32


def widen(plan: Plan, failure: VerificationError, unit_widths: dict[str, int],
          precisions: dict[str, tuple[int, int]], progress: Progress) -> list[str]:
    """Give each execution unit that ``failure`` names, and the units writing its inputs,
    WIDEN_STEP more bits (one under --error-budget; up to MAX_WIDTH) and
    record it in the plan; returns those widened (none: the failure is not a unit's, or none can
    widen). Units with a node in ``precisions`` (--precision) keep theirs."""
    widened = []
    pinned = {u.name for s in plan.subfunctions for u in s.execution_units if set(u.nodes) & precisions.keys()}
    errors = {check.name: check.max_abs_error for check in failure.units if not check.passed}
    stuck = [name for name, error in errors.items() if _widening_left(plan, name, error)]
    for name in stuck:
        last = _last_widening(plan, name)
        progress(f"      not widening {name} again: from {last.from_bits} to {last.to_bits} bits its error stayed "
                 f"{errors[name]:.4g} (was {last.error:.4g}), so it is not a matter of precision")
    for name, why in _with_writers_of_inputs(plan, [c for c in failure.units if c.name not in stuck]):
        before = unit_widths[name]
        if before >= MAX_WIDTH or name in pinned:  # --precision is the user's word
            continue
        # the search's widths missed only by what its simulation leaves out: a bit at a time
        unit_widths[name] = min(MAX_WIDTH, before + (1 if plan.precision_search else WIDEN_STEP))
        plan.widened.append(Widening(name, before, unit_widths[name], why, errors.get(name)))
        progress(f"      widening {name} from {before} to {unit_widths[name]} bits: {why}")
        widened.append(name)
    return widened


def _last_widening(plan: Plan, unit: str) -> Optional[Widening]:
    """The last widening of ``unit`` for its own check (not as the writer of another's input)."""
    return next((w for w in reversed(plan.widened) if w.unit == unit and w.error is not None), None)


def _widening_left(plan: Plan, unit: str, error: float) -> bool:
    """Whether the last widening of ``unit`` left its error where it was (within a part in a thousand):
    bits do not mend what they did not move (a layer computed wrongly, not too coarsely)."""
    last = _last_widening(plan, unit)
    return last is not None and error >= last.error * (1 - 1e-3)


def _with_writers_of_inputs(plan: Plan, failed: list) -> list[tuple[str, str]]:
    """(unit, why) for each failed unit check, and before each the units that write its inputs: the
    data units (Flatten, Reshape, ...: moved by the top, no logic) that carry them and the unit that
    computes them. A value rounded there to their width, say one near a binary quantizer's threshold,
    stays rounded however wide the unit after them grows."""
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    writer = {t: u for u in units.values() for t in u.outputs}
    chosen: dict[str, str] = {}
    for check in failed:
        why = check.problem() if not check.passed else "its subfunction's outputs are out of tolerance"
        tensors = list(units[check.name].inputs) if check.name in units else []
        while tensors:
            source = writer.get(tensors.pop())
            if source is None or source.name in chosen:
                continue
            chosen[source.name] = f"it writes the input of {check.name}"
            if source.pe == "data":
                tensors.extend(source.inputs)
        chosen[check.name] = why
    return list(chosen.items())
