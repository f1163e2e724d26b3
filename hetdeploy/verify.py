"""Compare each subfunction on its emulated device with onnxruntime on the same inputs."""

from __future__ import annotations

from dataclasses import dataclass, field

from pathlib import Path

import numpy as np
import onnx

from . import runtime
from .csim import CSimCrash
from .ort_adapter import OrtModel
from .plan import Plan


def tolerance(reference: list[np.ndarray], relative: float) -> float:
    """Absolute tolerance: ``relative`` of the reference's largest magnitude (at least of 1.0).
    Fixed-point error scales with the range a layer is sized for, not with each value."""
    peak = max((float(np.max(np.abs(r))) for r in reference if r.size), default=0.0)
    return relative * max(1.0, peak)


def max_abs_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    return max((float(np.max(np.abs(got[t].astype(np.float64) - want[t]))) for t in want if want[t].size), default=0.0)


@dataclass
class SubfunctionCheck:
    name: str
    kind: str
    max_abs_error: float = 0.0
    tolerance: float = 0.0
    peak: list[np.ndarray] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.max_abs_error <= self.tolerance


@dataclass
class Comparison:
    outputs: dict[str, np.ndarray]  # the emulated pipeline's final outputs
    reference: dict[str, np.ndarray]  # the user's model on onnxruntime
    subfunctions: list[SubfunctionCheck]
    max_abs_error: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_abs_error <= self.tolerance and all(s.passed for s in self.subfunctions)


def compare(plan: Plan, device, reference, source: OrtModel, samples: list[dict[str, np.ndarray]]) -> Comparison:
    """Run ``samples`` through the pipeline on ``device`` executors; check every
    subfunction against its ``reference`` executor on the very inputs it got, and
    the final outputs against the user's model."""
    checks = [SubfunctionCheck(s.name, s.kind) for s in plan.subfunctions]
    references: list[list[np.ndarray]] = [[] for _ in plan.subfunctions]

    def observe(index, inputs, outputs):
        want = reference[index](inputs)
        checks[index].max_abs_error = max(checks[index].max_abs_error, max_abs_error(outputs, want))
        references[index].extend(want.values())

    outputs: dict[str, list[np.ndarray]] = {o.name: [] for o in plan.outputs}
    expected: dict[str, list[np.ndarray]] = {o.name: [] for o in plan.outputs}
    for feeds in samples:
        env = runtime.run(plan, device, feeds, observe)
        want = source.run(feeds)
        for name in outputs:
            outputs[name].append(env[name])
            expected[name].append(want[name])
    for check, refs in zip(checks, references):
        check.tolerance = tolerance(refs, plan.relative_tolerance)
    got = {k: np.concatenate(v) for k, v in outputs.items()}
    want = {k: np.concatenate(v) for k, v in expected.items()}
    return Comparison(got, want, checks, max_abs_error(got, want),
                      tolerance(list(want.values()), plan.relative_tolerance))


def check_build(plan: Plan, build_dir: Path, samples: list[dict[str, np.ndarray]]) -> Comparison:
    """``compare`` for a build folder: each subfunction on its emulated device
    against onnxruntime, the pipeline against source.onnx."""
    return compare(
        plan,
        runtime.device_executors(build_dir, plan),
        runtime.reference_executors(build_dir, plan),
        OrtModel(build_dir / "source.onnx"),
        samples,
    )


def check_units(plan: Plan, build_dir: Path, samples: list[dict[str, np.ndarray]]) -> dict[str, SubfunctionCheck]:
    """Every execution unit of every FPGA subfunction in C-simulation against its ONNX model on
    onnxruntime, on the float values the unit sees in the reference pipeline."""
    seen = runtime.subfunction_inputs(build_dir, plan, samples)
    checks = {}
    for index, sub in enumerate(plan.subfunctions):
        if sub.hls is None:
            continue
        for unit, (csim, reference) in zip(sub.execution_units, runtime.unit_executors(build_dir, sub)):
            check = checks[unit.name] = SubfunctionCheck(unit.name, "fpga")
            wanted = []
            for env in seen[index]:
                want = reference.run(env)
                try:
                    got = csim(env)
                except CSimCrash as crash:
                    ops = sorted({n.op_type for n in onnx.load(str(build_dir / unit.onnx)).graph.node})
                    raise CSimCrash(f"unit {unit.name} ({', '.join(ops)}; nodes {', '.join(unit.nodes)}): "
                                    f"{crash}") from None
                check.max_abs_error = max(check.max_abs_error, max_abs_error(got, want))
                wanted.extend(want.values())
                env.update(want)
            check.tolerance = tolerance(wanted, plan.relative_tolerance)
    return checks
