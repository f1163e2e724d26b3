"""Run a built plan on this host: CPU/GPU subfunctions on onnxruntime, FPGA
subfunctions through their C-simulation libraries, in plan order (``run``), or as run.py runs a
stream of batches (``stream``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Mapping, Optional

import numpy as np

from ..core.board_runtime import (Stage, StreamTimes, channels_first, channels_last, from_port, per_sample, port_values,
                                  resource_of, run_stream, stored_shape, to_port)
from ..core.csim import CSimLibrary
from ..core.plan import InputReshape, Plan, Subfunction
from ..intake.ort_adapter import OrtModel, open_in_memory, open_model, read_built_model
from ..intake.subgraph import extract

Executor = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


class CSimLibraries:
    """The C-simulation libraries of a build folder, each started once (a process per FPGA
    subfunction, whose start costs a tenth of a second) and shared by the executors made from them.
    ``keep_log``: the C-simulation's output into the build folder (a build's own runs)."""

    def __init__(self, build_dir: Path, keep_log: bool = False):
        self.build_dir, self.keep_log = build_dir, keep_log
        self._started: dict[str, CSimLibrary] = {}

    def of(self, sub: Subfunction) -> CSimLibrary:
        if sub.name not in self._started:
            library = CSimLibrary(self.build_dir / sub.hls.project, self.build_dir / sub.hls.library,
                                  [f"units/{u.name}/firmware/weights" for u in sub.execution_units
                                   if u.hls is not None], self.keep_log)
            if sub.hls.ddr_image:  # the DDR weights, as the host writes them before the first call
                library.load_ddr(f"{sub.hls.top}_load_ddr", self.build_dir / sub.hls.ddr_image)
            self._started[sub.name] = library
        return self._started[sub.name]


class CSimExecutor:
    """One entry point of a C-simulation library with ONNX-layout tensors in and out, the samples
    stacked on axis 0; ports of rank >= 3 are channels-last on the C side. ``max_batch`` > 0: the
    batched entry of a subfunction's top, called once per ``max_batch`` samples; else a one-sample
    entry (a unit's), called once per sample."""

    def __init__(self, library: CSimLibrary, entry: str, inputs: list[tuple[str, list[int]]],
                 outputs: list[tuple[str, list[int]]], max_batch: int = 0, compressed: frozenset[str] = frozenset(),
                 codes: Optional[Mapping[str, dict]] = None):
        """``compressed``: the tensors whose ports are zero-compressed (board_runtime.to_port, from_port);
        ``codes``: the inputs whose ports take codes, each its plan.json "codes" (board_runtime.to_codes)."""
        self.inputs, self.outputs, self.per_call = inputs, outputs, max(1, max_batch)
        self.compressed, self.codes = compressed, dict(codes or {})
        self.call = library.entry(entry, [port_values(int(np.prod(s)), t in compressed, self.codes.get(t))
                                          for t, s in inputs],
                                  [port_values(int(np.prod(s)), t in compressed) for t, s in outputs], max_batch)

    engine = "C-simulation (g++)"

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        count = feeds[self.inputs[0][0]].shape[0]
        results: dict[str, list[np.ndarray]] = {t: [] for t, _ in self.outputs}
        for start in range(0, count, self.per_call):
            end = min(count, start + self.per_call)
            arrays = [to_port(channels_last(feeds[t][start:end]), t in self.compressed, self.codes.get(t))
                      .view(np.float32) for t, _ in self.inputs]  # a compressed or codes port's words as float32 bits
            for (tensor, shape), port in zip(self.outputs, self.call(arrays, end - start)):
                flat = from_port(port, end - start, int(np.prod(shape)), tensor in self.compressed)
                results[tensor].append(channels_first(flat.reshape(stored_shape(shape, end - start))))
        return {t: np.concatenate(v) for t, v in results.items()}


def subfunction_executor(libraries: CSimLibraries, sub: Subfunction) -> CSimExecutor:
    hls = sub.hls
    return CSimExecutor(libraries.of(sub), f"{hls.top}_float", [(p.tensor, p.shape) for p in hls.inputs],
                        [(p.tensor, p.shape) for p in hls.outputs], hls.max_batch,
                        frozenset(p.tensor for p in hls.inputs + hls.outputs if p.compressed),
                        {p.tensor: dataclasses.asdict(p.codes) for p in hls.inputs if p.codes is not None})


def unit_executors(libraries: CSimLibraries, sub: Subfunction) -> list[tuple[CSimExecutor, OrtModel]]:
    """Each execution unit of an FPGA subfunction on its own: in C-simulation, and its ONNX model on
    onnxruntime (the reference)."""
    library = libraries.of(sub)
    pairs = []
    for unit in sub.execution_units:
        reference = open_model(libraries.build_dir / unit.onnx)
        pairs.append((CSimExecutor(library, f"{unit.name}_float", reference.inputs, reference.outputs), reference))
    return pairs


class ModelExecutor:
    """A model on onnxruntime (or qonnx), a sample a call (its batch axis fixed at 1), or the whole batch in one
    call where its batch axis is open (``batched``: a CPU or GPU subfunction's file, ``subgraph.with_open_batch``)."""

    def __init__(self, model, batched: bool = False):
        self.model = model
        self.engine = model.engine
        self.batched = batched

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.model.run(feeds) if self.batched else per_sample(self.model.run, feeds)


def device_executors(libraries: CSimLibraries, plan: Plan) -> list[Executor]:
    """Each subfunction on its emulated device: FPGA in C-simulation, the rest on onnxruntime with
    their device's provider (CUDA for a GPU, when this onnxruntime has it)."""
    return [subfunction_executor(libraries, s) if s.hls is not None else
            ModelExecutor(open_model(libraries.build_dir / s.onnx, s.kind), s.batched) for s in plan.subfunctions]


def file_executors(build_dir: Path, plan: Plan) -> list[Executor]:
    """Every subfunction's own model file on the CPU: the float pipeline the build sizes on and
    whose chain it checks against the source model."""
    return [ModelExecutor(open_model(build_dir / s.onnx), s.batched) for s in plan.subfunctions]


def reference_executors(build_dir: Path, plan: Plan) -> list[Executor]:
    """Each subfunction's reference: its nodes cut afresh from the build's normalised model
    (model.onnx, which the build checked against the user's model), on the CPU provider, or on
    qonnx where QONNX quantizers are left. Never the file the device runs (a CPU subfunction's has
    its quantizers rewritten, and could be damaged) nor the device's provider (a GPU subfunction is
    CUDA against the CPU)."""
    model = read_built_model(build_dir / plan.model)
    return [ModelExecutor(open_in_memory(extract(model, s), f"{plan.model}'s nodes of {s.name}"))
            for s in plan.subfunctions]


def model_feeds(input_reshapes: list[InputReshape], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The user's inputs (samples on axis 0) as the normalised model takes them: the leading reshapes
    absorbed at intake applied."""
    env = dict(feeds)
    for r in input_reshapes:
        x = env.pop(r.original.name)
        env[r.tensor.name] = x.reshape([len(x), *r.tensor.shape[1:]])
    return env


def batches(samples: list[dict[str, np.ndarray]], batch: int) -> list[dict[str, np.ndarray]]:
    """One-sample feeds stacked into feeds of ``batch`` samples (the last one what is left)."""
    return [{name: np.concatenate([s[name] for s in samples[i:i + batch]]) for name in samples[0]}
            for i in range(0, len(samples), batch)]


def largest_batch(plan: Plan) -> Optional[int]:
    """The most samples the plan's FPGA cores take a call (None: no FPGA subfunction); run.py's
    ``board_runtime.largest_batch`` reads the same from plan.json."""
    return min((s.hls.max_batch for s in plan.subfunctions if s.hls is not None), default=None)


def stream(plan: Plan, executors: list[Executor], samples: list[dict[str, np.ndarray]], batch: int = 1,
           pipelined: bool = True, times: Optional[StreamTimes] = None) -> list[dict[str, np.ndarray]]:
    """``samples`` (one feeds dict each, the user's inputs) through the plan in batches of ``batch``,
    as run.py runs them (``board_runtime.run_stream``: the subfunctions a pipeline of threads when
    ``pipelined``); per batch, every tensor computed."""
    stages = [Stage(s.name, resource_of(s.kind, s.device, s.name), s.inputs, execute)
              for s, execute in zip(plan.subfunctions, executors)]
    return run_stream(stages, [model_feeds(plan.input_reshapes, b) for b in batches(samples, batch)], pipelined,
                      times)


def run(plan: Plan, executors: list[Executor], feeds: dict[str, np.ndarray],
        observe: Callable[[int, dict[str, np.ndarray], dict[str, np.ndarray]], None] | None = None
        ) -> dict[str, np.ndarray]:
    """Chain the subfunctions. ``observe(index, inputs, outputs)`` sees each step.
    Returns every tensor computed (the plan's outputs among them)."""
    env = model_feeds(plan.input_reshapes, feeds)
    for index, (sub, execute) in enumerate(zip(plan.subfunctions, executors)):
        inputs = {t: env[t] for t in sub.inputs}
        outputs = execute(inputs)
        if observe is not None:
            observe(index, inputs, outputs)
        env.update(outputs)
    return env


def subfunction_inputs(build_dir: Path, plan: Plan, samples: list[dict[str, np.ndarray]]
                       ) -> dict[int, list[dict[str, np.ndarray]]]:
    """Per subfunction index, the inputs it gets for each sample on the float pipeline (every
    subfunction on onnxruntime)."""
    seen: dict[int, list[dict[str, np.ndarray]]] = {}

    def collect(index, inputs, outputs):
        seen.setdefault(index, []).append(dict(inputs))

    chain = file_executors(build_dir, plan)
    for feeds in samples:
        run(plan, chain, feeds, collect)
    return seen
