"""Run a built plan on this host: CPU/GPU subfunctions on onnxruntime, FPGA
subfunctions through their C-simulation libraries, in plan order."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from .csim import CSimLibrary
from .hls4ml_adapter import channels_last
from .ort_adapter import OrtModel
from .plan import HlsProject, Plan, Subfunction

Executor = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


class CSimExecutor:
    """A subfunction's C-simulation library with ONNX-layout tensors in and out."""

    def __init__(self, build_dir: Path, hls: HlsProject):
        self.hls = hls
        self.library = CSimLibrary(
            build_dir / hls.project,
            build_dir / hls.library,
            hls.top,
            [int(np.prod(p.shape)) for p in hls.inputs],
            [int(np.prod(p.shape)) for p in hls.outputs],
        )

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        batch = feeds[self.hls.inputs[0].tensor].shape[0]
        results: dict[str, list[np.ndarray]] = {p.tensor: [] for p in self.hls.outputs}
        for b in range(batch):  # the bridge takes one sample per call
            arrays = []
            for port in self.hls.inputs:
                x = feeds[port.tensor][b : b + 1]
                arrays.append(channels_last(x) if port.layout == "channels_last" else x)
            for port, flat in zip(self.hls.outputs, self.library(arrays)):
                results[port.tensor].append(flat.reshape([1] + port.shape[1:]))
        return {t: np.concatenate(v) for t, v in results.items()}


def ort_executor(build_dir: Path, sub: Subfunction) -> Executor:
    return OrtModel(build_dir / sub.onnx, sub.kind).run


def device_executors(build_dir: Path, plan: Plan) -> list[Executor]:
    """Each subfunction on its emulated device: FPGA in C-simulation, the rest on onnxruntime."""
    return [CSimExecutor(build_dir, s.hls) if s.hls is not None else ort_executor(build_dir, s)
            for s in plan.subfunctions]


def reference_executors(build_dir: Path, plan: Plan) -> list[Executor]:
    """Every subfunction on onnxruntime: the float reference for each one."""
    return [ort_executor(build_dir, s) for s in plan.subfunctions]


def user_feeds(plan: Plan, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Apply the leading reshapes absorbed at intake to the user's inputs."""
    env = dict(feeds)
    for r in plan.input_reshapes:
        env[r.tensor.name] = env.pop(r.original.name).reshape(r.tensor.shape)
    return env


def run(plan: Plan, executors: list[Executor], feeds: dict[str, np.ndarray],
        observe: Callable[[int, dict[str, np.ndarray], dict[str, np.ndarray]], None] | None = None
        ) -> dict[str, np.ndarray]:
    """Chain the subfunctions. ``observe(index, inputs, outputs)`` sees each step.
    Returns every tensor computed (the plan's outputs among them)."""
    env = user_feeds(plan, feeds)
    for index, (sub, execute) in enumerate(zip(plan.subfunctions, executors)):
        inputs = {t: env[t] for t in sub.inputs}
        outputs = execute(inputs)
        if observe is not None:
            observe(index, inputs, outputs)
        env.update(outputs)
    return env
