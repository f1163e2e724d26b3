"""The deployment package: run.py in emulation against `hetdeploy emulate`, the pynq calls it makes on a
board (through a stand-in pynq that records them), the block design and --synth without the tools."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

FAKE_PYNQ = textwrap.dedent('''
    """Records what run.py asks of pynq (no FPGA here)."""
    import hashlib
    import json
    import os

    import numpy as np


    def _log(*event):
        with open(os.environ["FAKE_PYNQ_LOG"], "a") as f:
            f.write(json.dumps(event) + "\\n")


    class _Buffer(np.ndarray):
        def flush(self):
            _log("flush", self.physical_address, hashlib.sha256(self.tobytes()).hexdigest())

        def invalidate(self):
            _log("invalidate", self.physical_address)


    _next_address = [0x10000000]


    def allocate(shape, dtype):
        buffer = np.zeros(shape, dtype).view(_Buffer)
        buffer.physical_address = _next_address[0]
        _next_address[0] += 0x100000
        _log("allocate", list(shape), np.dtype(dtype).name, buffer.physical_address)
        return buffer


    class _Registers:
        def __init__(self, core):
            object.__setattr__(self, "_core", core)

        def __setattr__(self, name, value):
            _log("register", self._core, name, value)


    class _Core:
        def __init__(self, name):
            self.name = name
            self.register_map = _Registers(name)

        def write(self, offset, value):
            _log("write", self.name, offset, value)

        def read(self, offset):
            _log("read", self.name, offset)
            return 0x2  # ap_done


    class Overlay:
        def __init__(self, bitfile):
            _log("overlay", os.path.basename(bitfile))

        def __getattr__(self, name):
            return _Core(name)
''')


def run_py(build, *args, env=None):
    return subprocess.run([sys.executable, str(build / "deploy" / "run.py"), *map(str, args)], capture_output=True,
                          text=True, cwd=build, env=env)


def run_on_fake_pynq(build, tmp_path, x, *args) -> list:
    """run.py on ``x`` with the stand-in pynq; the calls it made, in order."""
    fake = tmp_path / "fake" / "pynq"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_PYNQ)
    log = tmp_path / "pynq.log"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"), FAKE_PYNQ_LOG=str(log))
    np.save(tmp_path / "x.npy", x)
    result = run_py(build, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", *args, env=env)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.slow
def test_package_holds_what_the_board_needs_and_says_what_was_not_run(built):
    _, out = built("split_by_lrn")
    deploy = out / "deploy"
    plan = json.loads((deploy / "plan.json").read_text())
    assert plan == json.loads((out / "plan.json").read_text())
    assert sorted(p.name for p in (deploy / "models").iterdir()) == ["sf1_arm_cpu.onnx"]
    readme = (deploy / "README.md").read_text()
    assert "NOT run" in readme and "bitstream" in readme and "pip install onnxruntime numpy" in readme
    # deploy/ alone makes the bitstream: each core's synthesis sources and script, and the block design
    hardware = deploy / "hardware"
    design = (hardware / "design.tcl").read_text()
    assert "-part xc7z020clg400-1" in design and "processing_system7" in design
    assert "set_property board_part tul.com.tw:pynq-z2:part0:1.0 [current_project]" in design
    assert 'make_external "FIXED_IO, DDR" apply_board_preset "1"' in design
    # each core's gmem on HP0; the engine's weights bundle, where a core has one, on HP1 (one DDR port on the PYNQ-Z2)
    engine = any(u.get("engine") for s in plan["subfunctions"] for u in s["execution_units"])
    bundles = "gmem S_AXI_HP0" + (" gmem_engine S_AXI_HP1" if engine else "")
    assert "foreach core {sf0_fpga sf2_fpga}" in design and f"foreach {{bundle slave}} {{{bundles}}}" in design
    assert "$core/m_axi_$bundle]" in design and "S_AXI_HP2" not in design
    assert "ip_repo_paths [list sf0_fpga/sf0_fpga_prj/solution1/impl/ip sf2_fpga/sf2_fpga_prj/solution1/impl/ip]" \
        in design and "../design.bit" in design and not (out / "vivado").exists()
    assert "Vitis HLS and Vivado 2022.1 to 2023.2" in design and "Vitis HLS and Vivado 2022.1 to 2023.2" in readme
    for core in ("sf0_fpga", "sf2_fpga"):
        script = (hardware / core / "build_prj.tcl").read_text()
        sources = [line.split()[1] for line in script.splitlines() if line.startswith("add_files")]
        assert sources and all((hardware / core / source).is_file() for source in sources)
        assert (hardware / core / "ap_types").is_dir()
        assert not [p for p in (hardware / core).rglob("*") if p.suffix in (".so", ".o", ".log")]
    assert "rsync -a --exclude hardware deploy/" in readme and "`split_by_lrn.onnx` on `pynq-z2`" in readme
    assert "(fpga): 1 nodes" not in readme and "(cpu): 1 node" in readme
    assert not list(out.rglob("*.bit"))  # nothing pretends to be a bitstream


@pytest.mark.slow
def test_run_py_in_emulation_equals_hetdeploy_emulate_and_benchmarks(built, tmp_path):
    _, out = built("split_by_lrn")
    x = np.random.default_rng(4).normal(size=(3, 3, 14, 14)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = run_py(out, "--input", tmp_path / "x.npy", "--output", tmp_path / "run.npy", "--emulate", "--batch", "2",
                    "--benchmark")
    assert result.returncode == 0, result.stderr
    assert "end to end" in result.stdout and "p99 ms" in result.stdout
    assert "3 samples in 2 batch(es) of up to 2, pipelined" in result.stdout
    assert "busy: fpga/sf0_fpga" in result.stdout and "arm_cpu" in result.stdout  # each core, the ARM
    emulate = subprocess.run([sys.executable, "-m", "hetdeploy", "emulate", str(out), "--input", str(tmp_path / "x.npy"),
                              "--output", str(tmp_path / "emulate.npy")], capture_output=True, text=True)
    assert emulate.returncode == 0, emulate.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "run.npy"), np.load(tmp_path / "emulate.npy"))
    quiet = run_py(out, "--input", tmp_path / "x.npy", "--emulate")  # keeps nothing: says what it ran, and how to keep it
    assert quiet.returncode == 0 and quiet.stdout.strip() == (
        "ran 3 samples in 3 batch(es) (emulated); --output Y.npy saves the outputs, --benchmark prints the timings")


@pytest.mark.slow
def test_a_batch_beyond_the_build_or_none_is_one_line(built, tmp_path):
    """The build's cores take at most its --batch (4 here) samples a call: more, or none, is one line and
    exit 2, in run.py and in hetdeploy emulate alike."""
    _, out = built("split_by_lrn")
    np.save(tmp_path / "x.npy", np.zeros((5, 3, 14, 14), dtype=np.float32))
    for batch, expected in (("5", "take at most 4 samples a call"), ("0", "expected a whole number of at least 1")):
        result = run_py(out, "--input", tmp_path / "x.npy", "--emulate", "--batch", batch)
        assert result.returncode == 2 and expected in result.stderr and len(result.stderr.strip().splitlines()) <= 3
        emulate = subprocess.run([sys.executable, "-m", "hetdeploy", "emulate", str(out), "--input",
                                  str(tmp_path / "x.npy"), "--batch", batch], capture_output=True, text=True)
        assert emulate.returncode == 2 and expected in emulate.stderr, emulate.stderr


@pytest.mark.slow
def test_run_py_mistakes_are_one_line_before_any_core_runs(built, tmp_path):
    """A missing or short input, or no pynq on a host: one line, exit 2 (a C core given a short
    buffer would read past it)."""
    _, out = built("split_by_lrn")
    np.save(tmp_path / "short.npy", np.zeros((2, 3, 14, 13), dtype=np.float32))
    for args, expected in (((tmp_path / "missing.npy", "--emulate"), "cannot read it"),
                           ((tmp_path / "short.npy", "--emulate"), "has shape [2, 3, 14, 13], the model takes"),
                           ((tmp_path / "short.npy",), "pynq is not installed here")):
        result = run_py(out, "--input", *args, "--output", tmp_path / "y.npy")
        assert result.returncode == 2 and result.stderr.strip().startswith("run.py: error: "), result.stderr
        assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.slow
def test_on_the_board_buffers_are_allocated_once_and_each_batch_is_one_core_call(built, tmp_path):
    """Seven samples in batches of 3 (3, 3, 1) through a build whose cores take 4 a call: every core's
    two buffer sets are allocated once, before any call; each batch is one ap_start of each core,
    pointed at the set its samples were copied into (the sets alternate), with the batch's sample
    count in its samples register."""
    _, out = built("split_by_lrn")
    x = np.random.default_rng(5).normal(size=(7, 3, 14, 14)).astype(np.float32)
    events = run_on_fake_pynq(out, tmp_path, x, "--batch", "3")
    assert events[0] == ["overlay", "design.bit"]
    plan = json.loads((out / "plan.json").read_text())
    cores = [s for s in plan["subfunctions"] if s["kind"] == "fpga"]
    allocations = [e for e in events if e[0] == "allocate"]
    per_set = [[4 * int(np.prod(p["shape"]))] for p in cores[0]["hls"]["inputs"] + cores[0]["hls"]["outputs"]]
    assert [a[1] for a in allocations[:2 * len(per_set)]] == per_set * 2  # a batch of 4 per port, two sets
    assert len(allocations) == sum(2 * len(s["hls"]["inputs"] + s["hls"]["outputs"]) for s in cores)
    first_call = min(k for k, e in enumerate(events) if e[0] == "write")
    assert max(k for k, e in enumerate(events) if e[0] == "allocate") < first_call
    start = 0
    for sub in cores:
        ports = len(sub["hls"]["inputs"] + sub["hls"]["outputs"])
        sets = [allocations[start][3], allocations[start + ports][3]]  # its in_0 in each set
        start += 2 * ports
        mine = [e for e in events if e[0] in ("register", "write") and e[1] == sub["name"]]
        assert [e[2:] for e in mine if e[0] == "write"] == [[0, 1]] * 3  # ap_start, once per batch
        assert [e[3] for e in mine if e[0] == "register" and e[2] == "samples"] == [3, 3, 1]
        assert [e[3] for e in mine if e[0] == "register" and e[2] == "in_0"] == [sets[0], sets[1], sets[0]]
    assert np.load(tmp_path / "y.npy").shape == (7, 10)


@pytest.mark.slow
def test_run_py_profiles_the_board_run_and_plan_takes_its_figures(built, tmp_path):
    """run.py --profile on the board (the stand-in pynq): each FPGA call's core time and copies, each
    link's bytes (the tensors that crossed it) and seconds, the A9's nodes by onnxruntime's profiler;
    hetdeploy plan --profile takes the lot (on the board: the FPGA's and the links' too), and
    run.py --emulate's profile is the host's, whose FPGA figures plan leaves out."""
    model, out = built("split_by_lrn")
    x = np.random.default_rng(6).normal(size=(5, 3, 14, 14)).astype(np.float32)
    run_on_fake_pynq(out, tmp_path, x, "--batch", "2", "--profile", tmp_path / "board.json")
    profile = json.loads((tmp_path / "board.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    assert profile["recorded_by"] == "run.py" and profile["on_board"] is True and profile["board"] == "pynq-z2"
    assert profile["samples"] == 5 and profile["batches"] == 3
    subs = {s["name"]: s for s in profile["subfunctions"]}
    assert list(subs) == [s["name"] for s in plan["subfunctions"]]
    for sub in plan["subfunctions"]:
        measured = subs[sub["name"]]
        assert measured["calls"] == 3 and measured["measured_on"].endswith(
            "of the board (pynq-z2)")
        if sub["kind"] == "fpga":
            assert measured["nodes"] == sub["nodes"] and measured["samples_per_call"] == pytest.approx(5 / 3)
            assert all(measured[k] > 0 for k in ("core_seconds", "copy_in_seconds", "copy_out_seconds"))
            assert measured["estimated_compute_seconds"] == sub["estimate"]["compute_s"]
        else:
            assert sorted(measured["nodes"]) == sorted(sub["nodes"]) and all(t > 0 for t in measured["nodes"].values())
    shapes = {t["name"]: t["shape"] for t in plan["inputs"]}
    assert profile["links"][0] == {"subfunction": "sf0_fpga", "from": "host", "to": "fpga", "tensors": 1,
                                   "compressed_tensors": 0,
                                   "bytes": 4 * int(np.prod(shapes[plan["inputs"][0]["name"]])),
                                   "seconds": subs["sf0_fpga"]["copy_in_seconds"] * 3 / 5}
    assert [(link["from"], link["to"]) for link in profile["links"]] == [("host", "fpga"), ("fpga", "host")] * 2
    result = subprocess.run([sys.executable, "-m", "hetdeploy", "plan", str(model), "--board", "pynq-z2", "--json",
                             "--profile", str(tmp_path / "board.json")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)["measured"]
    assert measured["measured_on"] == "on the board (run.py)"
    assert measured["links"] == ["arm_cpu->fpga", "fpga->arm_cpu"]
    assert sorted(measured["fpga_nodes"]["fpga"]) == sorted(n for s in plan["subfunctions"] if s["kind"] == "fpga"
                                                            for n in s["nodes"])
    assert measured["nodes"] == {"arm_cpu": sorted(n for s in plan["subfunctions"] if s["kind"] == "cpu"
                                                   for n in s["nodes"])}
    emulated = run_py(out, "--input", tmp_path / "x.npy", "--emulate", "--profile", tmp_path / "emulated.json")
    assert emulated.returncode == 0 and "profile written to" in emulated.stdout
    result = subprocess.run([sys.executable, "-m", "hetdeploy", "plan", str(model), "--board", "pynq-z2", "--json",
                             "--profile", str(tmp_path / "emulated.json")], capture_output=True, text=True)
    measured = json.loads(result.stdout)["measured"]
    assert measured["fpga_nodes"] == {} and measured["links"] == [] and measured["nodes"]


@pytest.mark.slow
def test_on_the_board_ddr_weights_are_written_once_and_each_port_points_at_its_array(built, tmp_path):
    _, out = built("wide_mlp")
    events = run_on_fake_pynq(out, tmp_path, np.zeros((2, 640), dtype=np.float32))
    plan = json.loads((out / "plan.json").read_text())
    (sub,) = plan["subfunctions"]
    (ddr,) = [e for e in events if e[0] == "allocate" and e[2] == "uint8"]
    assert ddr[1] == [sub["memory"]["ddr_bytes"]]
    image = (out / "deploy" / "ddr" / f"{sub['name']}.bin").read_bytes()
    assert image == (out / sub["hls"]["ddr_image"]).read_bytes()
    region = image + bytes(sub["memory"]["ddr_bytes"] - len(image))
    flushes = [e for e in events if e[0] == "flush" and e[1] == ddr[3]]
    assert flushes == [["flush", ddr[3], hashlib.sha256(region).hexdigest()]]  # once, before the first call
    registers = {e[2]: e[3] for e in events if e[0] == "register"}
    assert registers["ddr"] == ddr[3]
    assert [registers[p["port"]] for p in sub["hls"]["weight_ports"]] == \
        [ddr[3] + p["offset"] for p in sub["hls"]["weight_ports"]]
    assert events.index(flushes[0]) < min(k for k, e in enumerate(events) if e[0] == "write")


@pytest.mark.slow
def test_synth_without_vendor_tools_says_what_it_wrote(built, tmp_path):
    """The build is complete and in place, but nothing was synthesised: exit 4, so a script can tell, and
    one line saying which tool is missing and how to run the scripts written."""
    model, _ = built("small_cnn")
    out = tmp_path / "synth"
    result = subprocess.run([sys.executable, "-m", "hetdeploy", "build", str(model), "--board", "pynq-z2", "-o", str(out),
                             "--policy", "support", "--synth"], capture_output=True, text=True,
                            env=dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"))
    assert result.returncode == 4, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("hetdeploy: error: --synth:") and "nothing was synthesised" in line
    assert "vivado -mode batch" in line and "the build itself is complete" in line
    assert "vitis_hls and vivado not available" in line and "vitis_hls -f build_prj.tcl" in line  # the board's tool
    assert (out / "plan.json").is_file() and (out / "deploy" / "run.py").is_file()
    assert not list(out.rglob("*.bit"))


@pytest.mark.parametrize("board, part", [("zcu104", "xczu7ev"), ("kv260", "xck26")])
def test_block_design_uses_the_zynq_ultrascale_processing_system(tmp_path, board, part):
    import onnx

    import networks
    from hetdeploy.core.board import load_board
    from hetdeploy.running.deploy import write_block_design
    from hetdeploy.steps.build import BuildOptions, plan_stages

    model = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(model))
    _, loaded_board, plan = plan_stages(BuildOptions(model=model, board=board, out_dir=tmp_path, policy="support"),
                                        lambda k, what: None)
    design = write_block_design(plan, loaded_board, tmp_path).read_text()
    assert f"-part {part}" in design and "zynq_ultra_ps_e" in design and "S_AXI_HP0_FPD" in design
    fpga = load_board(board).device("fpga")
    assert f"set_property board_part {fpga.board_part} [current_project]" in design and 'apply_board_preset "1"' in design
    assert ("set_property board_connections {som240_1_connector xilinx.com:kv260_carrier:som240_1_connector:1.3}"
            in design) == (board == "kv260")


def test_the_engines_weights_bundles_each_take_a_slave_port_of_their_own(tmp_path):
    """four_conv64 on the KV260 (its FPGA's memory.ports: 4) runs on the engine, whose weights port is two bundles
    (the folding's engine's lanes no multiple of three words): the block design enables HP0 to HP2 and connects the
    cores' gmem to HP0, gmem_engine to HP1 and gmem_engine1 to HP2; on the ZCU104 pinned at 48 lanes, three bundles,
    the third on HP3, each engine unit's weights region beginning a read of the port's three words; a board asking
    for more ports than the part's processing system has is refused in one line."""
    import dataclasses

    import onnx

    import networks
    from hetdeploy.core.errors import UserError
    from hetdeploy.running.deploy import write_block_design
    from hetdeploy.steps.build import BuildOptions, plan_stages

    model = tmp_path / "four_conv64.onnx"
    onnx.save(networks.four_conv64(), str(model))
    _, board, plan = plan_stages(BuildOptions(model=model, board="kv260", out_dir=tmp_path, policy="latency"),
                                 lambda k, what: None)
    assert {u.engine.bundles for s in plan.subfunctions for u in s.execution_units if u.engine} == {2}
    design = write_block_design(plan, board, tmp_path).read_text()
    assert "foreach {bundle slave} {gmem S_AXI_HP0_FPD gmem_engine S_AXI_HP1_FPD gmem_engine1 S_AXI_HP2_FPD}" in design
    assert "CONFIG.PSU__USE__S_AXI_GP2 {1} CONFIG.PSU__USE__S_AXI_GP3 {1} CONFIG.PSU__USE__S_AXI_GP4 {1}" in design
    assert "S_AXI_GP5" not in design
    zynq7000 = dataclasses.replace(board, devices=[dataclasses.replace(d, part="xc7z020clg400-1")
                                                   for d in board.devices])
    for s in plan.subfunctions:
        for u in s.execution_units:
            if u.engine:
                u.engine = dataclasses.replace(u.engine, bundles=4)
    with pytest.raises(UserError, match="memory.ports asks for 5 ports into the DDR; a xc7z020clg400-1 has 4"):
        write_block_design(plan, zynq7000, tmp_path)
    _, board, plan = plan_stages(BuildOptions(model=model, board="zcu104", out_dir=tmp_path, policy="latency",
                                              engine_size=(48, 8)), lambda k, what: None)
    on_engine = [u for s in plan.subfunctions for u in s.execution_units if u.engine]
    assert {(u.engine.port_words, u.engine.bundles) for u in on_engine} == {(3, 3)}
    regions = {b.tensor: b.offset for s in plan.subfunctions for b in s.memory.buffers if b.kind == "weights"}
    assert all(regions[f"{u.name}.weights"] % (3 * 16) == 0 for u in on_engine)
    assert len({regions[f"{u.name}.weights"] % 64 for u in on_engine}) == 1  # (a word of the widest port too)
    design = write_block_design(plan, board, tmp_path).read_text()
    assert "gmem_engine1 S_AXI_HP2_FPD gmem_engine2 S_AXI_HP3_FPD}" in design and "S_AXI_GP5 {1}" in design


def test_a_board_without_board_part_gets_the_bare_part_and_says_so(tmp_path):
    """A board file of the user's with no board_part: no preset is applied (there are no board files to
    take it from) and the script says what to set."""
    import networks
    import onnx
    from hetdeploy.core.board import load_board
    from hetdeploy.core.errors import UserError
    from hetdeploy.running.deploy import write_block_design
    from hetdeploy.steps.build import BuildOptions, plan_stages

    shipped = (Path(__file__).resolve().parent.parent / "hetdeploy" / "boards" / "pynq-z2.yaml").read_text()
    custom = tmp_path / "mine.yaml"
    custom.write_text("\n".join(line for line in shipped.splitlines() if "board_part:" not in line)
                      .replace("name: pynq-z2", "name: mine"))
    model = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(model))
    _, board, plan = plan_stages(BuildOptions(model=model, board=str(custom), out_dir=tmp_path, policy="support"),
                                 lambda k, what: None)
    design = write_block_design(plan, board, tmp_path).read_text()
    assert "board_part" not in design.split("names no board_part")[0].split("-part")[1]
    assert 'apply_board_preset "0"' in design and "set its DDR and MIO for your board" in design
    custom.write_text(shipped.replace("board_part: tul.com.tw:pynq-z2:part0:1.0", "board_part: 'x; exec rm -rf /'"))
    with pytest.raises(UserError, match=r"mine\.yaml: line \d+: devices\[1\]\.board_part: expected a Vivado board part"):
        load_board(str(custom))


@pytest.mark.slow
def test_emulate_benchmark_says_what_it_timed(built, tmp_path, capsys):
    """Without --input, --benchmark times one sample: emulate says so, beside the note that the sample is
    one the build never saw; with --input of many samples, no such note. A batch beyond the build's one
    sample a call is one line, in the singular."""
    from hetdeploy.commands.cli import main

    _, out = built("small_cnn")
    capsys.readouterr()
    assert main(["emulate", str(out), "--benchmark", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] and report["notes"][1] == ("--benchmark timed that one sample: its percentiles are "
                                                          "one call's; give --input with many samples for a "
                                                          "distribution")
    np.save(tmp_path / "x.npy", np.random.default_rng(6).normal(size=(3, 1, 28, 28)).astype(np.float32))
    assert main(["emulate", str(out), "--benchmark", "--input", str(tmp_path / "x.npy"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []
    assert main(["emulate", str(out), "--batch", "8", "--input", str(tmp_path / "x.npy")]) == 2
    assert "take at most 1 sample a call (build with 'hetdeploy build --batch 8' for more)" in capsys.readouterr().err
