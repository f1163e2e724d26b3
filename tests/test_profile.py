"""Profiles (--profile): what a run measured, recorded by hetdeploy emulate (and run.py: test_deploy),
read back by plan in place of the board file's figures, and refused in one line when wrong."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hetdeploy.commands.cli import main
from hetdeploy.core.board import load_board
from hetdeploy.intake.model import load_model
from hetdeploy.planning.cost import CostModel

ROOT = Path(__file__).resolve().parent.parent
SMALL_CNN = ROOT / "examples" / "small_cnn.onnx"
NODES = ("conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flatten", "fc")


def plan_of(*args):
    result = subprocess.run([sys.executable, "-m", "hetdeploy", "plan", str(SMALL_CNN), "--board", "pynq-z2",
                             "--json", *map(str, args)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def on(plan, device):
    return [n for s in plan["subfunctions"] if s["device"] == device for n in s["nodes"]]


@pytest.fixture(scope="module")
def emulated_profile(tmp_path_factory):
    """small_cnn built wholly on the PYNQ-Z2's A9 (every node pinned there: no hls4ml) and emulated
    on three samples with --profile."""
    folder = tmp_path_factory.mktemp("profile")
    pins = [arg for node in NODES for arg in ("--device", f"{node}=arm_cpu")]
    assert main(["build", str(SMALL_CNN), "--board", "pynq-z2", "-o", str(folder / "build"), *pins]) == 0
    np.save(folder / "x.npy", np.random.default_rng(3).normal(size=(3, 1, 28, 28)).astype(np.float32))
    assert main(["emulate", str(folder / "build"), "--input", str(folder / "x.npy"),
                 "--profile", str(folder / "profile.json")]) == 0
    return folder / "profile.json"


@pytest.mark.slow
def test_emulate_records_each_cpu_nodes_time_and_where_it_was_measured(emulated_profile):
    profile = json.loads(emulated_profile.read_text())
    assert profile["format"] == "hetdeploy-profile" and profile["version"] == 1 and profile["board"] == "pynq-z2"
    assert profile["recorded_by"] == "hetdeploy emulate" and profile["on_board"] is False
    assert profile["samples"] == 3 and profile["model"] == "small_cnn.onnx" and profile["machine"]["host"]
    [sub] = profile["subfunctions"]
    assert sub["device"] == "arm_cpu" and sub["calls"] == 3 and "standing in for arm_cpu" in sub["measured_on"]
    assert sorted(sub["nodes"]) == sorted(NODES)  # onnxruntime's profiler, each node under its own name
    assert all(math.isfinite(t) and t > 0 for t in sub["nodes"].values())
    assert sub["call_seconds"] > 0 and profile["links"] == []


@pytest.mark.slow
def test_a_profile_moves_the_plan_where_its_figures_say_and_the_estimate_is_them(emulated_profile, tmp_path):
    """Without a profile the latency policy puts all of small_cnn on the PYNQ-Z2's FPGA; a profile
    whose A9 is ten times faster than the board file's roofline keeps it all on the A9, the plan's
    compute the profile's figures; the emulation's own profile is used as measured, and said so."""
    before = plan_of()
    assert sorted(on(before, "fpga")) == sorted(NODES) and before["measured"] is None
    loaded, board = load_model(SMALL_CNN), load_board("pynq-z2")
    roofline = CostModel(loaded.graph, board).seconds["arm_cpu"]
    profile = json.loads(emulated_profile.read_text())
    faster = {node.name: roofline[i] / 10 for i, node in enumerate(loaded.graph.nodes)}
    profile["subfunctions"][0]["nodes"] = faster
    (tmp_path / "faster.json").write_text(json.dumps(profile))
    after = plan_of("--profile", tmp_path / "faster.json")
    [sub] = after["subfunctions"]
    assert sub["device"] == "arm_cpu" and sorted(sub["nodes"]) == sorted(NODES)
    assert sub["estimate"]["compute_s"] == pytest.approx(sum(faster.values()), rel=1e-12)
    assert after["measured"]["nodes"] == {"arm_cpu": sorted(NODES)} and after["measured"]["fpga_nodes"] == {}
    measured = plan_of("--profile", emulated_profile)
    timed = json.loads(emulated_profile.read_text())["subfunctions"][0]["nodes"]
    for sub in (s for s in measured["subfunctions"] if s["device"] == "arm_cpu"):
        assert sub["estimate"]["compute_s"] == pytest.approx(sum(timed[n] for n in sub["nodes"]), rel=1e-12)
    text = subprocess.run([sys.executable, "-m", "hetdeploy", "plan", str(SMALL_CNN), "--board", "pynq-z2",
                           "--profile", str(emulated_profile)], capture_output=True, text=True).stdout
    assert "measured (profile.json, on the host" in text and "standing in for the board's CPUs" in text
    assert "arm_cpu: the times of 8 node(s)" in text


def test_fpga_calls_and_links_measured_on_the_board_scale_their_estimates(tmp_path):
    """A profile recorded on the board (on_board) whose FPGA core took ten times its estimate moves
    small_cnn off the FPGA, its nodes' estimates scaled by 10; its links' seconds per byte replace
    the board file's link; the same figures from an emulation (C-simulation's) change nothing."""
    loaded, board = load_model(SMALL_CNN), load_board("pynq-z2")
    before = plan_of()
    [fpga] = [s for s in before["subfunctions"] if s["device"] == "fpga"]
    estimated = fpga["estimate"]["compute_s"]
    profile = {"format": "hetdeploy-profile", "version": 1, "recorded_by": "run.py", "on_board": True,
               "board": "pynq-z2", "model": "small_cnn.onnx", "machine": {"host": "pynq"}, "samples": 4, "batches": 2,
               "subfunctions": [{"name": "sf0_fpga", "device": "fpga", "kind": "fpga", "nodes": list(NODES),
                                 "calls": 2, "samples_per_call": 2.0, "call_seconds": 1.0,
                                 "core_seconds": 20 * estimated, "copy_in_seconds": 1e-3, "copy_out_seconds": 1e-4,
                                 "estimated_compute_seconds": estimated}],
               "links": [{"subfunction": "sf0_fpga", "from": "host", "to": "fpga", "tensors": 1, "bytes": 3136.0,
                          "seconds": 3136.0 * 2e-8}]}
    (tmp_path / "board.json").write_text(json.dumps(profile))
    slower = plan_of("--profile", tmp_path / "board.json")
    assert on(slower, "fpga") == [] and list(slower["measured"]["fpga_nodes"]) == ["fpga"]
    assert slower["measured"]["fpga_nodes"]["fpga"] == pytest.approx(dict.fromkeys(NODES, 10.0))
    assert slower["measured"]["links"] == ["arm_cpu->fpga"]
    overhead = 1.0 - 20 * estimated - 1e-3 - 1e-4  # the call less its core and the two copies
    assert slower["measured"]["call_overhead_s"] == {"fpga": pytest.approx(overhead)}
    from hetdeploy.planning.profile import read_profile
    measured = read_profile(tmp_path / "board.json", "pynq-z2", board.host, [d.name for d in board.devices],
                            [n.name for n in loaded.graph.nodes])
    cost, plain = CostModel(loaded.graph, board, measured=measured), CostModel(loaded.graph, board)
    assert cost.seconds["fpga"] == pytest.approx([10 * s for s in plain.seconds["fpga"]])
    assert cost.transfer_seconds("arm_cpu", "fpga", 1, 1000.0) == pytest.approx(1000.0 * 2e-8)
    assert cost.transfer_seconds("fpga", "arm_cpu", 1, 1000.0) == plain.transfer_seconds("fpga", "arm_cpu", 1, 1000.0)
    profile["links"][0]["compressed_tensors"] = 1  # its copies hold the codec's time: no link figure
    (tmp_path / "compressed.json").write_text(json.dumps(profile))
    assert plan_of("--profile", tmp_path / "compressed.json")["measured"]["links"] == []
    profile["on_board"], profile["recorded_by"] = False, "run.py --emulate"
    (tmp_path / "emulated.json").write_text(json.dumps(profile))
    emulated = plan_of("--profile", tmp_path / "emulated.json")
    assert emulated["subfunctions"] == before["subfunctions"] and emulated["measured"]["fpga_nodes"] == {}
    assert emulated["measured"]["call_overhead_s"] == {}


def test_links_measured_slow_on_the_board_keep_the_partitioner_off_the_fpga(tmp_path):
    """A profile recorded on the board whose FPGA core took what its build estimated but whose links moved a
    byte in a microsecond: the partitioner (and the ILP) price every crossing at that, and keep small_cnn on
    the A9; the same core with the board file's links leaves it on the FPGA."""
    before = plan_of()
    [fpga] = [s for s in before["subfunctions"] if s["device"] == "fpga"]
    estimated = fpga["estimate"]["compute_s"]

    def profile(seconds_per_byte):
        return {"format": "hetdeploy-profile", "version": 1, "recorded_by": "run.py", "on_board": True,
                "board": "pynq-z2", "model": "small_cnn.onnx", "machine": {"host": "pynq"}, "samples": 2,
                "batches": 2, "subfunctions": [{"name": "sf0_fpga", "device": "fpga", "kind": "fpga",
                                                "nodes": list(NODES), "calls": 2, "samples_per_call": 1.0,
                                                "call_seconds": estimated + 3176.0 * seconds_per_byte,
                                                "core_seconds": estimated,
                                                "copy_in_seconds": 3136.0 * seconds_per_byte,
                                                "copy_out_seconds": 40.0 * seconds_per_byte,
                                                "estimated_compute_seconds": estimated}],
                "links": [{"subfunction": "sf0_fpga", "from": "host", "to": "fpga", "tensors": 1, "bytes": 3136.0,
                           "seconds": 3136.0 * seconds_per_byte},
                          {"subfunction": "sf0_fpga", "from": "fpga", "to": "host", "tensors": 1, "bytes": 40.0,
                           "seconds": 40.0 * seconds_per_byte}]}

    for name, per_byte, fpga_nodes in (("slow", 1e-6, []), ("fast", 1e-10, sorted(NODES))):
        (tmp_path / f"{name}.json").write_text(json.dumps(profile(per_byte)))
        for partitioner in ("search", "ilp"):
            plan = plan_of("--profile", tmp_path / f"{name}.json", "--partitioner", partitioner)
            assert sorted(on(plan, "fpga")) == fpga_nodes, (name, partitioner)


@pytest.mark.slow
def test_a_profile_of_an_older_build_is_used_for_the_nodes_it_names(emulated_profile, tmp_path):
    profile = json.loads(emulated_profile.read_text())
    nodes = profile["subfunctions"][0]["nodes"]
    nodes["gone"] = nodes.pop("relu2")
    (tmp_path / "older.json").write_text(json.dumps(profile))
    plan = plan_of("--profile", tmp_path / "older.json")
    assert plan["measured"]["ignored_nodes"] == ["gone"]
    assert plan["measured"]["nodes"] == {"arm_cpu": sorted(set(NODES) - {"relu2"})}


@pytest.mark.slow
def test_a_cpu_calls_measured_overhead_replaces_the_board_files(emulated_profile, tmp_path):
    """What a CPU subfunction's calls took beyond its nodes' profiled seconds is that device's call overhead in
    the plan (and in the partitioner's and the ILP's cost); without a call's time, the board file's stays."""
    board = load_board("pynq-z2")
    profile = json.loads(emulated_profile.read_text())
    [sub] = profile["subfunctions"]
    sub["call_seconds"] = sub["samples_per_call"] * sum(sub["nodes"].values()) + 0.005
    (tmp_path / "overhead.json").write_text(json.dumps(profile))
    pins = [arg for node in NODES for arg in ("--device", f"{node}=arm_cpu")]
    for partitioner in ("search", "ilp"):
        plan = plan_of("--profile", tmp_path / "overhead.json", "--partitioner", partitioner, *pins)
        assert plan["measured"]["call_overhead_s"] == {"arm_cpu": pytest.approx(0.005)}
        [cpu] = plan["subfunctions"]
        assert cpu["estimate"]["overhead_s"] == pytest.approx(0.005), partitioner
    sub["call_seconds"] = None
    (tmp_path / "untimed.json").write_text(json.dumps(profile))
    plan = plan_of("--profile", tmp_path / "untimed.json", *pins)
    assert plan["measured"]["call_overhead_s"] == {}
    assert plan["subfunctions"][0]["estimate"]["overhead_s"] == board.device("arm_cpu").invocation_overhead_s
    text = subprocess.run([sys.executable, "-m", "hetdeploy", "plan", str(SMALL_CNN), "--board", "pynq-z2",
                           "--profile", str(tmp_path / "overhead.json")], capture_output=True, text=True).stdout
    assert "arm_cpu: a call's overhead beyond its nodes, 5 ms" in text


def _edited(profile: dict, change) -> dict:
    edited = json.loads(json.dumps(profile))
    change(edited)
    return edited


@pytest.mark.slow
@pytest.mark.parametrize("change, expected", [
    (lambda p: p.update(board="zcu104"), "key 'board': a profile of board 'zcu104', not of 'pynq-z2'"),
    (lambda p: p.update(format="something"), "key 'format': 'something', expected 'hetdeploy-profile'"),
    (lambda p: p["subfunctions"][0]["nodes"].update(conv1=-1e-3), "key 'subfunctions[0].nodes.conv1': -0.001: "
                                                                   "expected a finite number, 0 or more"),
    (lambda p: p["subfunctions"][0]["nodes"].update(fc=float("nan")), "key 'subfunctions[0].nodes.fc': nan"),
    (lambda p: p["subfunctions"][0]["nodes"].update(fc=float("inf")), "key 'subfunctions[0].nodes.fc': inf"),
    (lambda p: p["subfunctions"][0]["nodes"].update(fc="fast"), "key 'subfunctions[0].nodes.fc': 'fast'"),
    (lambda p: p["subfunctions"][0].update(device="npu"), "key 'subfunctions[0].device': no device 'npu'"),
    (lambda p: p["subfunctions"][0].pop("nodes"), "key 'subfunctions[0].nodes': missing"),
    (lambda p: p["subfunctions"][0].update(nodes={"a": 1e-3, "b": 2e-3}), "names no node of this model"),
    (lambda p: p.update(links=[{"from": "host", "to": "fpga", "bytes": 1, "seconds": -1}]),
     "key 'links[0].seconds': -1"),
    (lambda p: p.update(links=[{"from": "host", "to": "fpga", "bytes": 1, "seconds": 1e-3, "compressed_tensors": -1}]),
     "key 'links[0].compressed_tensors': expected a whole number of at least 0, got -1"),
])
def test_a_wrong_profile_is_one_line_naming_the_file_and_key(emulated_profile, tmp_path, change, expected):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_edited(json.loads(emulated_profile.read_text()), change)))
    result = subprocess.run([sys.executable, "-m", "hetdeploy", "plan", str(SMALL_CNN), "--board", "pynq-z2",
                             "--profile", str(bad)], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert str(bad) in line and expected in line, line


def test_a_profile_that_is_not_json_or_not_there_is_one_line(tmp_path):
    (tmp_path / "broken.json").write_text('{"format": "hetdeploy-profile",\n "version": ')
    for path, expected in ((tmp_path / "broken.json", "broken.json: line 2: not valid JSON"),
                           (tmp_path / "missing.json", str(tmp_path / "missing.json") + ": no such file (--profile)")):
        result = subprocess.run([sys.executable, "-m", "hetdeploy", "plan", str(SMALL_CNN), "--board", "pynq-z2",
                                 "--profile", str(path)], capture_output=True, text=True)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
        assert expected in result.stderr, result.stderr
