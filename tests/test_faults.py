"""Faults around a build: SIGTERM mid-build, two builds into one folder, the fuzzer's seeded cases."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

import fuzz
import networks


def _processes_in(folder: Path) -> list[int]:
    """Processes whose working directory is inside ``folder`` (make, g++, the C-simulation)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(folder):
                found.append(int(pid))
        except OSError:
            continue
    return found


def _start_build(model: Path, out: Path) -> subprocess.Popen:
    """Without the build cache: these tests need make and g++ at work."""
    return subprocess.Popen([sys.executable, "-m", "hetdeploy", "build", str(model), "--board", "pynq-z2", "-o",
                             str(out), "-q", "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sigterm_mid_build_kills_every_child_and_leaves_nothing(tmp_path):
    model = tmp_path / "alexnet.onnx"
    onnx.save(networks.alexnet_style(), str(model))
    build = _start_build(model, tmp_path / "out")
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".out.partial-*/hls/*/Makefile")):  # compiling the C-simulation
        assert build.poll() is None and time.monotonic() < deadline, build.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    assert _processes_in(tmp_path)  # make and g++ at work
    build.send_signal(signal.SIGTERM)
    _, stderr = build.communicate(timeout=60)
    assert build.returncode == 143
    assert stderr.strip().splitlines() == ["hetdeploy: terminated"]
    time.sleep(0.5)  # the killed group's processes are reaped by init
    assert _processes_in(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alexnet.onnx"]


@pytest.mark.slow
def test_two_builds_into_one_folder_one_waits_for_nothing_and_says_so(tmp_path):
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    builds = [_start_build(model, tmp_path / "out") for _ in range(2)]
    results = [b.communicate(timeout=300) for b in builds]
    codes = sorted(b.returncode for b in builds)
    assert codes == [0, 2], results
    (refused,) = [stderr for b, (_, stderr) in zip(builds, results) if b.returncode == 2]
    assert "another hetdeploy build is writing it now" in refused and len(refused.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jet.onnx", "out"]
    assert (tmp_path / "out" / "plan.json").is_file()


@pytest.mark.parametrize("kind, count", [("model", 40), pytest.param("model-build", 6, marks=pytest.mark.slow),
                                         ("board", 16), ("path", 8), ("option", 16)])
def test_fuzzed_models_and_board_files_end_in_one_line_or_a_plan(kind, count):
    findings = [f"{o.case.name}: {o.finding}" for o in map(fuzz.run_case, fuzz.cases(kind, 2026, count))
                if o.finding]
    assert findings == []


@pytest.mark.slow
def test_damaged_builds_and_bad_inputs_end_in_one_line_or_a_result(built, tmp_path):
    _, out = built("jet_tagger_mlp")
    findings = [f"{o.case.name}: {o.finding}" for o in map(fuzz.run_case, fuzz.cases("build", 2026, 30, out))
                if o.finding]
    assert findings == []
