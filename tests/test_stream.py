"""Streams of batches (board_runtime.run_stream, shared by run.py, hetdeploy emulate and predict): the
pipelined run gives the sequential run's outputs, in order, whatever the stages' timing; a stage's
failure reaches the caller; a built plan's 1,000-sample stream, batched and pipelined, equals its
per-sample run."""

import random
import threading
import time

import numpy as np
import pytest

from hetdeploy.core.board_runtime import Stage, StreamTimes, run_stream, stream_summary
from hetdeploy.running import runtime
from hetdeploy.running.emulate import load_build
from hetdeploy.running.samples import random_samples


class Jittery:
    """A stage that adds ``k`` to its input after a random pause, and records which threads ran it."""

    def __init__(self, source: str, target: str, k: float, seed: int):
        self.source, self.target, self.k = source, target, k
        self.random = random.Random(seed)
        self.threads = set()

    def __call__(self, feeds):
        self.threads.add(threading.get_ident())
        time.sleep(self.random.uniform(0, 0.002))
        return {self.target: feeds[self.source] * 2 + self.k}


def _stages():
    return [Stage("a", "cpu", ["x"], Jittery("x", "y", 1, 0)), Stage("b", "fpga/b", ["y"], Jittery("y", "z", 2, 1)),
            Stage("c", "cpu", ["z", "x"], lambda f: {"w": f["z"] - f["x"]})]


def test_pipelined_stream_equals_sequential_in_order():
    batches = [{"x": np.full((3, 2), float(k))} for k in range(40)]
    times = StreamTimes()
    stages = _stages()
    piped = run_stream(stages, [dict(b) for b in batches], pipelined=True, times=times)
    plain = run_stream(_stages(), [dict(b) for b in batches], pipelined=False)
    assert [e["w"].tolist() for e in piped] == [e["w"].tolist() for e in plain]
    assert [e["w"][0, 0] for e in piped] == [(4 * k + 4) - k for k in range(40)]
    assert stages[0].run.threads.isdisjoint(stages[1].run.threads)  # a thread per stage
    summary = stream_summary(["a", "b", "c"], ["cpu", "fpga/b", "cpu"], times)
    assert summary["samples"] == 120 and summary["batches"] == 40 and set(summary["busy"]) == {"cpu", "fpga/b"}
    assert len(times.end_to_end) == 40 and all(len(times.stages[s]) == 40 for s in "abc")


def test_a_failing_stage_stops_the_stream_with_its_error():
    def broken(feeds):
        if feeds["y"][0, 0] > 20:
            raise RuntimeError("core did not finish")
        return {"z": feeds["y"]}

    stages = [Stage("a", "cpu", ["x"], Jittery("x", "y", 1, 0)), Stage("b", "fpga/b", ["y"], broken)]
    with pytest.raises(RuntimeError, match="core did not finish"):
        run_stream(stages, [{"x": np.full((1, 1), float(k))} for k in range(30)], pipelined=True)


@pytest.mark.slow
def test_a_1000_sample_stream_batched_and_pipelined_equals_the_per_sample_run(built):
    """split_by_lrn: FPGA, ARM, FPGA, its cores built for 4 samples a call; batches of 4 and of 3 (the
    last one a single sample) through the pipeline give the per-sample sequential run's bytes."""
    _, out = built("split_by_lrn")
    plan = load_build(out)
    assert runtime.largest_batch(plan) == 4
    executors = runtime.device_executors(runtime.CSimLibraries(out), plan)
    samples = random_samples(plan.inputs, 1000, seed=3)
    names = [o.name for o in plan.outputs]

    def outputs(batch, pipelined):
        envs = runtime.stream(plan, executors, samples, batch, pipelined)
        return {n: np.concatenate([e[n] for e in envs]) for n in names}

    one = outputs(1, False)
    assert one[names[0]].shape[0] == 1000 and np.isfinite(one[names[0]]).all()
    for batch in (4, 3):
        for name, value in outputs(batch, True).items():
            np.testing.assert_array_equal(value, one[name])
