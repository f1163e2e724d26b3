"""Build configurations (YAML): the resolved configuration in plan.json, `hetdeploy config DIR`,
`build --config` replaying it, per-node settings, and one line for every mistake in a config file."""

import json
from pathlib import Path
import subprocess
import sys

import onnx
import pytest
import yaml

import networks
from hetdeploy.commands.cli import main


def hetdeploy(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "hetdeploy", *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.mark.slow
def test_config_written_back_replays_the_same_plan_and_the_folding_can_be_pinned(built, tmp_path):
    model, out = built("jet_tagger_mlp")
    plan = json.loads((out / "plan.json").read_text())
    config = plan["config"]
    assert config["model"] == str(model.resolve()) and config["board"] == "pynq-z2" and config["policy"] == "support"
    assert {"width", "memory_strategy", "error_budget", "calibration", "samples", "seed", "tolerance", "synth",
            "nodes"} <= set(config)

    written = hetdeploy("config", out, "--folding")
    assert written.returncode == 0, written.stderr
    pinned = yaml.safe_load(written.stdout)
    fpga_units = [u for s in plan["subfunctions"] for u in s["execution_units"] if u["foldable"]]
    assert [u["table_size"] for u in fpga_units] == [0, 0, 0, 4096]  # the last unit's Softmax
    assert pinned["nodes"] == {
        u["nodes"][0]: {"reuse_factor": u["reuse_factor"], "strategy": u["strategy"].lower(), "io_type": "parallel"}
        | ({"table_size": 4096} if u["table_size"] else {}) for u in fpga_units}
    (tmp_path / "pinned.yaml").write_text(written.stdout)
    replay = hetdeploy("build", "--config", tmp_path / "pinned.yaml", "-o", tmp_path / "again", "-q")
    assert replay.returncode == 0, replay.stderr
    again = json.loads((tmp_path / "again" / "plan.json").read_text())
    assert again["config"]["nodes"] == pinned["nodes"]
    assert {k: v for k, v in again.items() if k != "config"} == {k: v for k, v in plan.items() if k != "config"}

    # edited: one unit refolded, the command line overriding the file's width for plan
    first = fpga_units[0]["nodes"][0]
    pinned["nodes"] = {first: {"reuse_factor": max(1, fpga_units[0]["reuse_factor"] * 2)}}
    pinned["width"] = 12
    (tmp_path / "edited.yaml").write_text(yaml.safe_dump(pinned))
    planned = hetdeploy("plan", "--config", tmp_path / "edited.yaml", "--width", "10", "--json")
    assert planned.returncode == 0, planned.stderr
    edited = json.loads(planned.stdout)
    assert edited["config"]["width"] == 10 and edited["width"] == 10
    assert edited["subfunctions"][0]["execution_units"][0]["reuse_factor"] == pinned["nodes"][first]["reuse_factor"]


def test_units_pinned_to_the_engine_share_it_and_read_their_weights_from_ddr(tmp_path, capsys):
    """--strategy NODE=engine runs the node's unit on the subfunction's layer-sequential engine (hls/engine.h): its
    weights and biases in DDR, read once a run; the engine's resources once, with the first unit on it, off the
    budget the other units fold into; a unit the engine cannot compute, a reuse factor or bands beside it are one
    line each."""
    import graphs
    from hetdeploy.core.plan import EngineLayer, from_dict
    from hetdeploy.fpga.engine import weights_bytes
    from hetdeploy.planning.units import EngineSize, engine_resources

    model = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(model))  # conv1 5x5 1 -> 8, conv2 5x5 8 -> 16 (after pooling), fc 256 -> 10

    def planned_model(path, *flags):
        assert main(["plan", str(path), "--board", "pynq-z2", "--policy", "support", *flags, "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        (sub,) = [s for s in plan["subfunctions"] if s["kind"] == "fpga"]
        return sub, {u["nodes"][0]: u for u in sub["execution_units"]}

    def planned(*flags):
        return planned_model(model, *flags)

    _, alone = planned("--no-engine")  # (hls4ml's units: the folding would give them the engine too)
    sub, found = planned("--strategy", "conv1=engine", "--strategy", "conv2=engine", "--strategy", "fc=engine")
    # the PYNQ-Z2's engine at 16 bits: 8 lanes of 8 values a cycle, two output pixels at once (132 DSPs, the 132
    # its share allows; the conv layers' windows take more iterations than two pixels' words), sized to fc's window,
    # its pairs sharing their windows among its tiles and streaming the weights of layers of at most 128 pairs (its
    # LUTs and registers for that fit beside the units)
    engine = engine_resources(256, 16, EngineSize(8, 0, 8, pixels=2, shared=True, stream=128))
    assert engine["dsp"] == 2 * 8 * 8 + 4 and engine["bram18"] > 0
    for node in ("conv1", "conv2", "fc"):
        unit = found[node]
        assert (unit["strategy"], unit["weights_in_ddr"], unit["io_type"]) == ("Engine", True, "")
        assert unit["engine"]["lanes"] == 8 and unit["engine"]["relu"] == (node != "fc")
        assert (unit["engine"]["vector"], unit["engine"]["uram_lanes"], unit["engine"]["pixels"],
                unit["engine"]["shared"], unit["engine"]["stream"]) == (8, 0, 2, True, 128)
        first = node == "conv1"  # carries the engine
        assert {k: unit["estimate"].get(k, 0) for k in engine} == (engine if first else {k: 0 for k in engine})
        weights = next(b for b in sub["memory"]["buffers"] if b["tensor"] == f"{unit['name']}.weights")
        assert weights["memory"] == "ddr"
        assert weights["size"] == weights_bytes(from_dict(EngineLayer, unit["engine"]), 16)
    assert found["fc"]["engine"]["channels"] == 256 and found["conv2"]["engine"]["input"] == [12, 12]
    # (the engine's conv1 faster than hls4ml's: 3,243 cycles against 3,922 at 128-bit words)
    assert found["conv1"]["estimate"]["latency_cycles"] < alone["conv1"]["estimate"]["latency_cycles"]
    assert sub["memory"]["ddr_weights_s"] > 0
    depthwise = tmp_path / "mobilenet.onnx"
    mobilenet = graphs.mobilenet_v2(32, ((1, 8, 1, 1),), stem=8, last=16, classes=4)
    onnx.save(graphs.to_onnx(mobilenet), str(depthwise))
    grouped = next(n.name for n in mobilenet.nodes if n.op == "Conv" and n.attrs.get("group", 1) > 1)
    for target, flags, fragments in (
            (model, ["--strategy", "pool1=engine"], ["node 'pool1' has no multiplications"]),
            (model, ["--strategy", "conv1=engine", "--reuse-factor", "conv1=4"], ["folds by its lanes"]),
            (model, ["--strategy", "conv1=engine", "--band-rows", "conv1=4"], ["which needs no bands"]),
            (model, ["--strategy", "conv1=engine", "--precision", "conv1=weight:ap_fixed<8,2>"],
             ["sizes its weights'"]),
            (depthwise, ["--strategy", f"{grouped}=resource"], ["only under the latency strategy"])):
        assert main(["plan", str(target), "--board", "pynq-z2", "--policy", "support", *flags]) == 2, flags
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and all(f in error[0] for f in fragments), (flags, error)
    # a depthwise convolution (a group a channel) the engine computes, a group's filters a tile
    _, found = planned_model(depthwise, "--strategy", f"{grouped}=engine")
    layer = found[grouped]["engine"]
    assert found[grouped]["strategy"] == "Engine" and layer["groups"] == layer["channels"] == layer["filters"] > 1


def test_the_engine_is_pinned_by_the_board_file_or_engine_and_refused_where_it_does_not_fit(tmp_path, capsys):
    """The engine's lanes and values a cycle, pinned by the FPGA's ``engine`` key in the board file or by
    ``--engine LANESxVALUES`` (over the board's): the units on it run on that size, its weights port as wide as the
    board gives (one word on the PYNQ-Z2; on the KV260 four words through two bundles, a DDR port each: before, the
    pinned size took the bundles for its pixels, and read through one); a size that alone exceeds the FPGA's
    budget, or takes more values a cycle than a word holds at the width, is refused in one line, exit 2, not planned
    without the engine."""
    import hetdeploy

    model = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(model))
    pins = ["--strategy", "conv1=engine", "--strategy", "conv2=engine", "--strategy", "fc=engine"]

    def engines(board, *flags):
        assert main(["plan", str(model), "--board", board, "--policy", "support", *pins, *flags, "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        return {(u["engine"]["lanes"], u["engine"]["vector"], u["engine"]["uram_lanes"], u["engine"]["port_words"],
                 u["engine"]["bundles"])
                for s in plan["subfunctions"] for u in s["execution_units"] if u.get("engine")}

    assert engines("pynq-z2", "--engine", "8x2") == {(8, 2, 0, 1, 1)}
    assert engines("kv260", "--engine", "8x2") == {(8, 2, 8, 2, 2)}
    shipped = (Path(hetdeploy.__file__).parent / "boards" / "pynq-z2.yaml").read_text()
    board = tmp_path / "pinned.yaml"
    board.write_text(shipped.replace("    hls_tool: vitis_hls ", "    engine: {lanes: 16, values: 1}\n"
                                     "    hls_tool: vitis_hls "))
    assert engines(str(board)) == {(16, 1, 0, 1, 1)}
    assert engines(str(board), "--engine", "8x4") == {(8, 4, 0, 1, 1)}
    for size, fragments in (("200x4", ["does not fit it at 16 bits", "DSPs of"]),
                            ("8x16", ["more values a cycle than a word holds at 16 bits (8)"])):
        assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", *pins, "--engine", size]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and all(f in err for f in fragments), err


def test_strategy_pins_from_the_command_line_and_a_config_file(tmp_path, capsys):
    """--strategy NODE=S (and nodes.NODE.strategy) pins hls4ml's Strategy of the node's unit; each strategy's
    reuse factors are hls4ml's (Latency: any up to the layer's products; Resource: those dividing it)."""
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))  # fc1 16 x 64, fc2 64 x 32, fc3 32 x 32, fc4 32 x 5

    def units(*flags):
        assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", *flags, "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        return plan, {u["nodes"][0]: u for s in plan["subfunctions"] for u in s["execution_units"]}

    _, free = units()
    # unpinned, folded to fit: Resource would be no faster, and at equal cycles the folding leaves BRAM to the
    # buffers (units.by_cost)
    assert {u["strategy"] for u in free.values() if u["foldable"]} == {"Latency"}
    _, latency = units("--strategy", "/fc1/Gemm=latency")
    assert latency["/fc1/Gemm"]["strategy"] == "Latency" and latency["/fc1/Gemm"]["estimate"]["bram18"] == 0
    plan, pinned = units("--strategy", "/fc1/Gemm=resource", "--strategy", "/fc2/Gemm=Latency", "--reuse-factor",
                         "/fc2/Gemm=100")
    assert plan["config"]["nodes"]["/fc1/Gemm"] == {"strategy": "resource"}
    assert pinned["/fc1/Gemm"]["strategy"] == "Resource" and pinned["/fc1/Gemm"]["estimate"]["bram18"] > 0
    assert pinned["/fc1/Gemm"]["estimate"]["lut"] < latency["/fc1/Gemm"]["estimate"]["lut"]  # weights out of LUTs
    # 100 does not divide 64 x 32, which hls4ml's Latency strategy never checks
    assert (pinned["/fc2/Gemm"]["strategy"], pinned["/fc2/Gemm"]["reuse_factor"]) == ("Latency", 100)
    assert pinned["/fc2/Gemm"]["estimate"]["bram18"] == 0  # weights as constants, at any reuse factor
    _, low = units("--reuse-factor", "/fc4/Gemm=7")  # unpinned below 64: Latency, which takes 7 on 32 x 5
    assert (low["/fc4/Gemm"]["strategy"], low["/fc4/Gemm"]["reuse_factor"]) == ("Latency", 7)

    config = tmp_path / "c.yaml"
    config.write_text(f"model: {model}\nboard: pynq-z2\npolicy: support\nnodes:\n  /fc3/Gemm: {{strategy: resource, "
                      f"reuse_factor: 8}}\n")
    assert main(["plan", "--config", str(config), "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    unit = next(u for s in from_file["subfunctions"] for u in s["execution_units"] if u["nodes"][0] == "/fc3/Gemm")
    assert (unit["strategy"], unit["reuse_factor"]) == ("Resource", 8)
    for flags, fragments in (
            (["--strategy", "/fc2/Gemm=resource", "--reuse-factor", "/fc2/Gemm=100"],
             ["--reuse-factor /fc2/Gemm=100: 100 does not divide", "under the resource strategy; valid: 1, 2"]),
            (["--reuse-factor", "/fc2/Gemm=100"], ["--strategy /fc2/Gemm=latency takes any"]),
            (["--strategy", "/fc4/Gemm=latency", "--reuse-factor", "/fc4/Gemm=161"], ["above the layer's 160 products"]),
            (["--strategy", "/fc2/Gemm=latency", "--weights-in-ddr", "/fc2/Gemm"], ["has --strategy latency"]),
            (["--strategy", "/fc2/Gemm=resource", "--device", "/fc2/Gemm=arm_cpu"], ["runs on arm_cpu, not on an FPGA"])):
        assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", *flags]) == 2, flags
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and all(f in error[0] for f in fragments), (flags, error)
    with pytest.raises(SystemExit, match="2"):  # argparse's refusal
        main(["plan", str(model), "--board", "pynq-z2", "--strategy", "/fc2/Gemm=fast"])
    assert "'fast': expected one of latency, resource" in capsys.readouterr().err
    cnn = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(cnn))
    assert main(["plan", str(cnn), "--board", "pynq-z2", "--policy", "support", "--strategy", "pool1=resource"]) == 2
    assert "--strategy pool1=resource: node 'pool1' has no multiplications" in capsys.readouterr().err
    config.write_text(f"model: {model}\nboard: pynq-z2\nnodes:\n  /fc3/Gemm: {{strategy: dataflow}}\n")
    assert main(["plan", "--config", str(config)]) == 2
    assert f"{config}: line 4: nodes./fc3/Gemm.strategy: 'dataflow': expected one of" in capsys.readouterr().err


def test_table_size_pins_from_the_command_line_and_a_config_file(tmp_path, capsys):
    """--table-size NODE=N (nodes.NODE.table_size) sets the entries of the lookup tables of the unit holding
    NODE, and its estimate follows: the jet tagger's Softmax at hls4ml's 1,024 entries takes a BRAM18 a table
    where hetdeploy's 4,096 take four (each twice under the PYNQ-Z2's Vitis HLS)."""
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))

    def last_unit(*flags):  # fc4 and the Softmax, its weights in the fabric: the tables alone in BRAM
        assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--strategy",
                     "/fc4/Gemm=latency", *flags, "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        units = [u for s in plan["subfunctions"] for u in s["execution_units"]]
        assert [u["table_size"] for u in units[:-1]] == [0, 0, 0]  # no tables there
        return plan, units[-1]

    _, default = last_unit()
    plan, pinned = last_unit("--table-size", "/softmax/Softmax=1024")
    assert (default["table_size"], pinned["table_size"]) == (4096, 1024)
    assert plan["config"]["nodes"]["/softmax/Softmax"] == {"table_size": 1024}
    assert plan["config"]["nodes"]["/fc4/Gemm"] == {"strategy": "latency"}
    # 3 copies of the exponential's table (5 reads, two ports each) and the inverse's: 4 blocks each, then 1,
    # twice that under Vitis HLS (units.VITIS_SOFTMAX_TABLE_BRAM18)
    assert (default["estimate"]["bram18"], pinned["estimate"]["bram18"]) == (16 * 2, 4 * 2)
    config = tmp_path / "c.yaml"
    config.write_text(f"model: {model}\nboard: pynq-z2\npolicy: support\nnodes:\n  /fc4/Gemm: {{table_size: 256}}\n")
    assert main(["plan", "--config", str(config), "--json"]) == 0  # a node of the unit: the Softmax fused after fc4
    assert json.loads(capsys.readouterr().out)["subfunctions"][0]["execution_units"][-1]["table_size"] == 256
    assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--table-size", "/fc1/Gemm=256"]) == 2
    assert "--table-size /fc1/Gemm=256: the unit holding node '/fc1/Gemm' has no lookup table" in capsys.readouterr().err
    config.write_text(f"model: {model}\nboard: pynq-z2\nnodes:\n  /softmax/Softmax: {{table_size: 1000}}\n")
    assert main(["plan", "--config", str(config)]) == 2
    assert (f"{config}: line 4: nodes./softmax/Softmax.table_size: '1000': expected a power of two from 16 to 65536"
            in capsys.readouterr().err)


def test_io_type_pins_from_the_command_line_and_a_config_file(tmp_path, capsys):
    """--io-type NODE=T (nodes.NODE.io_type) sets hls4ml's IOType of the unit holding NODE, and its estimate
    follows: a streamed Dense waits for its one vector's words as the io_parallel one does (the same buffer
    cycles) and holds its output word beside its input vector in registers (hls4ml's dense wrapper copies the
    stream's word into an array)."""
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))

    def units(*flags):
        assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", *flags, "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        return plan, {u["nodes"][0]: u for s in plan["subfunctions"] for u in s["execution_units"]}

    _, parallel = units()
    assert {u["io_type"] for u in parallel.values()} == {"io_parallel"}  # flat: parallel unless pinned
    plan, pinned = units("--io-type", "/fc1/Gemm=stream")
    assert plan["config"]["nodes"]["/fc1/Gemm"] == {"io_type": "stream"}
    streamed, before = pinned["/fc1/Gemm"], parallel["/fc1/Gemm"]
    assert streamed["io_type"] == "io_stream" and pinned["/fc2/Gemm"] == parallel["/fc2/Gemm"]
    assert streamed["estimate"]["buffer_cycles"] == before["estimate"]["buffer_cycles"] > 0
    assert streamed["estimate"]["ff"] - before["estimate"]["ff"] == 64 * 16  # its output word of 64 values
    config = tmp_path / "c.yaml"
    config.write_text(f"model: {model}\nboard: pynq-z2\npolicy: support\nnodes:\n  /fc2/Gemm: {{io_type: io_stream}}\n")
    assert main(["plan", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["subfunctions"][0]["execution_units"][1]["io_type"] == "io_stream"
    cnn = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(cnn))
    assert main(["plan", str(cnn), "--board", "pynq-z2", "--policy", "support", "--io-type", "flatten=stream"]) == 2
    assert "--io-type flatten=stream: node 'flatten' (Flatten) is implemented by the subfunction's top itself" in \
        capsys.readouterr().err
    # every output pixel's comparators at once: 43k LUT more than the stream, past the PYNQ-Z2's budget
    assert main(["plan", str(cnn), "--board", "pynq-z2", "--policy", "support", "--io-type", "pool1=parallel"]) == 2
    assert "(LUT 77769 > 47880)" in capsys.readouterr().err
    assert main(["plan", str(cnn), "--board", "zcu104", "--policy", "support", "--io-type", "pool1=parallel",
                 "--json"]) == 0
    pool = json.loads(capsys.readouterr().out)["subfunctions"][0]["execution_units"][1]
    assert pool["nodes"][0] == "pool1" and pool["io_type"] == "io_parallel"
    config.write_text(f"model: {model}\nboard: pynq-z2\nnodes:\n  /fc2/Gemm: {{io_type: dataflow}}\n")
    assert main(["plan", "--config", str(config)]) == 2
    assert f"{config}: line 4: nodes./fc2/Gemm.io_type: 'dataflow': expected one of parallel, stream" in \
        capsys.readouterr().err


def test_precision_by_kind_from_the_command_line_and_a_config_file(tmp_path, capsys):
    """--precision NODE=KIND:TYPE,... (or a mapping under nodes.NODE.precision) pins hls4ml's weight, bias,
    accum and result types of the unit holding NODE; plan.json's config holds the mapping, which a config
    file reads back; the estimate counts the weight type's bits, each weight's code under its integer part,
    and the accumulator's."""
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    kinds = "weight:ap_fixed<4,1>,accum:ap_fixed<24,10>,result:ap_fixed<12,4>"
    assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--reuse-factor", "/fc4/Gemm=1",
                 "--precision", f"/fc4/Gemm={kinds}", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    written = plan["config"]["nodes"]["/fc4/Gemm"]["precision"]
    assert written == {"weight": "ap_fixed<4,1>", "accum": "ap_fixed<24,10>", "result": "ap_fixed<12,4>"}
    unit = plan["subfunctions"][0]["execution_units"][-1]
    assert unit["precision"] == "ap_fixed<12,4>"
    assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--reuse-factor", "/fc4/Gemm=1",
                 "--precision", "/fc4/Gemm=ap_fixed<12,4>", "--json"]) == 0
    wide = json.loads(capsys.readouterr().out)["subfunctions"][0]["execution_units"][-1]
    # unrolled, each product by a constant: 4-bit weights are shifts and adds in LUTs, 12-bit ones DSPs
    assert unit["estimate"]["dsp"] < wide["estimate"]["dsp"]
    assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--reuse-factor", "/fc4/Gemm=1",
                 "--precision", f"/fc4/Gemm={kinds.replace('accum:ap_fixed<24,10>', 'accum:ap_fixed<32,10>')}",
                 "--json"]) == 0
    wider = json.loads(capsys.readouterr().out)["subfunctions"][0]["execution_units"][-1]
    assert wider["estimate"]["lut"] - unit["estimate"]["lut"] > 0  # each adder as wide as the accumulator
    assert {k: wider["estimate"][k] for k in ("dsp", "bram18", "ff")} == \
        {k: unit["estimate"][k] for k in ("dsp", "bram18", "ff")}
    # the weight type's integer part counts: 16-bit weights under a top of 2**9 leave these small weights codes of
    # few bits (shifts and adds in LUTs), under a top of 1 codes of 16 bits (DSPs)
    def dsp_at(weight: str) -> int:
        assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--reuse-factor",
                     "/fc4/Gemm=1", "--precision", f"/fc4/Gemm=weight:{weight}", "--json"]) == 0
        return json.loads(capsys.readouterr().out)["subfunctions"][0]["execution_units"][-1]["estimate"]["dsp"]
    assert dsp_at("ap_fixed<16,10>") < dsp_at("ap_fixed<16,6>") < dsp_at("ap_fixed<16,1>")
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"model": str(model), "board": "pynq-z2", "policy": "support",
                                      "nodes": {"/fc4/Gemm": {"precision": written}}}))
    assert main(["plan", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["nodes"]["/fc4/Gemm"]["precision"] == written
    for value, fragment in (("wait:ap_fixed<4,1>", "with KIND one of result, weight, bias, accum"),
                            ("weight:ap_fixed<4,1>,weight:ap_fixed<5,1>", "a kind given twice"),
                            ("weight:ap_fixed<40,1>", "W must be 2 to 32 bits")):
        with pytest.raises(SystemExit, match="2"):
            main(["plan", str(model), "--board", "pynq-z2", "--precision", f"/fc1/Gemm={value}"])
        assert fragment in capsys.readouterr().err
    cnn = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(cnn))
    assert main(["plan", str(cnn), "--board", "pynq-z2", "--policy", "support", "--precision",
                 "pool1=accum:ap_fixed<20,8>"]) == 2
    assert "node 'pool1' has no multiply-accumulate layer to give the accum type" in capsys.readouterr().err
    config.write_text(f"model: {model}\nboard: pynq-z2\nnodes:\n  /fc1/Gemm:\n    precision: {{weight: 7}}\n")
    assert main(["plan", "--config", str(config)]) == 2
    assert f"{config}: line 5: nodes./fc1/Gemm.precision: '7': expected ap_fixed<W,I>" in capsys.readouterr().err


def test_device_pins_from_the_command_line_and_a_config_file(tmp_path, capsys):
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--device", "/fc2/Gemm=arm_cpu",
                 "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["device"] for s in plan["subfunctions"]] == ["fpga", "arm_cpu", "fpga"]
    assert plan["subfunctions"][1]["nodes"] == ["/fc2/Gemm"]
    assert [(f["node"], f["reason"]) for f in plan["fpga_fallbacks"]] == [("/fc2/Gemm", "pinned")]
    assert plan["config"]["nodes"] == {"/fc2/Gemm": {"device": "arm_cpu"}}
    (tmp_path / "c.yaml").write_text("model: jet.onnx\nboard: PYNQ-Z2\npolicy: support\n"
                                     "nodes:\n  /fc2/Gemm: {device: arm_cpu}\n")
    assert main(["plan", "--config", str(tmp_path / "c.yaml"), "--json"]) == 0  # the model relative to the file
    assert json.loads(capsys.readouterr().out)["subfunctions"] == plan["subfunctions"]


@pytest.mark.parametrize("text, fragments", [
    ("width: 40\n", ["line 1", "width", "4 to 32"]),
    ("widht: 8\n", ["line 1", "widht", "unknown key"]),
    ("policy: fastest\n", ["policy", "latency, support"]),
    ("tolerance: -1\n", ["tolerance", "fraction"]),
    ("nodes:\n  /fc1/Gemm: {reuse: 4}\n", ["line 2", "nodes./fc1/Gemm.reuse", "unknown key"]),
    ("nodes:\n  /fc1/Gemm: {precision: 'ap_fixed<40,2>'}\n", ["nodes./fc1/Gemm.precision", "2 to 32"]),
    ("nodes:\n  /fc1/Gemm: {reuse_factor: 0}\n", ["reuse_factor", "at least 1"]),
    ("nodes:\n  /fc1/Gem: {reuse_factor: 4}\n", ["no node '/fc1/Gem'", "did you mean '/fc1/Gemm'"]),
    ("nodes:\n  /fc1/Gemm: {device: tpu}\n", ["no device 'tpu'", "arm_cpu, fpga"]),
    ("nodes: [1, 2]\n", ["nodes", "mapping"]),
    ("a: &a [1]\nb: *a\n", ["line 2", "aliases"]),
    ("- 1\n", ["top level", "mapping"]),
    ("seed: !!python/object:os.system x\n", ["not valid YAML"]),
])
def test_config_file_mistakes_are_one_line(tmp_path, text, fragments):
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    (tmp_path / "c.yaml").write_text(text)
    result = hetdeploy("plan", model, "--board", "pynq-z2", "--policy", "support", "--config", tmp_path / "c.yaml")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("hetdeploy: error:") and all(f in line for f in fragments), line


@pytest.mark.slow
def test_model_and_board_come_from_the_command_line_or_the_config(tmp_path):
    result = hetdeploy("plan", "--board", "pynq-z2")
    assert result.returncode == 2 and "the model is required (on the command line or in --config)" in result.stderr
    result = hetdeploy("build", "-o", tmp_path / "out")
    assert result.returncode == 2 and "the model and --board are required" in result.stderr


def test_a_mistake_in_a_config_files_node_settings_names_the_file_line_and_key(tmp_path, capsys):
    """A per-node setting from the config file that the model or board refuses is reported at its line in
    the file, not as a command-line flag the user never typed; the same setting given on the command
    line (over the file's) is reported as that flag."""
    jet = Path(__file__).resolve().parent.parent / "examples" / "jet_tagger_mlp.onnx"
    config = tmp_path / "c.yaml"
    config.write_text(f"model: {jet}\nboard: pynq-z2\npolicy: support\nnodes:\n  /fc1/Gemm: {{reuse_factor: 100}}\n")
    assert main(["plan", "--config", str(config)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"hetdeploy: error: {config}: line 5: nodes./fc1/Gemm.reuse_factor: 100 does not divide")
    assert main(["plan", "--config", str(config), "--reuse-factor", "/fc1/Gemm=96"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "hetdeploy: error: --reuse-factor /fc1/Gemm=96: 96 does not divide")
    config.write_text(f"model: {jet}\nboard: pynq-z2\nnodes:\n  nope: {{device: fpga}}\n  /fc2/Gemm: {{device: gpu}}\n")
    assert main(["plan", "--config", str(config)]) == 2
    assert f"error: {config}: line 4: nodes.nope.device: the model has no node 'nope'" in capsys.readouterr().err
    config.write_text(f"model: {jet}\nboard: pynq-z2\nnodes:\n  /fc2/Gemm: {{device: gpu}}\n")
    assert main(["plan", "--config", str(config)]) == 2
    assert f"error: {config}: line 4: nodes./fc2/Gemm.device: board pynq-z2 has no device 'gpu'" in \
        capsys.readouterr().err


def test_the_command_reference_is_what_the_parsers_say():
    """docs/commands.md is written from the parsers (python -m hetdeploy.commands.reference): an option
    added, removed or reworded without writing it again fails here."""
    from hetdeploy.commands.reference import command_reference
    from hetdeploy.planning.config import OPTIONS

    written = (Path(__file__).parent.parent / "docs" / "commands.md").read_text()
    assert written == command_reference(), "docs/commands.md is stale: python -m hetdeploy.commands.reference " \
                                           "> docs/commands.md"
    for option in OPTIONS:
        assert option.flag in written or option.field == "model", option.flag
