"""A dataflow's FIFO depths from its processes' schedules, and the cycle-level simulation that checks them
(planning/dataflow.py), as pure functions."""

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest

from hetdeploy.commands.cli import main
from hetdeploy.planning.dataflow import (DataflowError, Op, Process, check, fifo_depths, free_schedule, simulate)


def reads(fifo, count, gap=1):
    return tuple(Op(fifo, False, gap) for _ in range(count))


def writes(fifo, count, gap=1):
    return tuple(Op(fifo, True, gap) for _ in range(count))


def source(fifo, tokens):
    return Process("input", writes(fifo, tokens))


def sink(fifo, tokens):
    return Process("output", reads(fifo, tokens))


def test_a_chain_at_one_rate_needs_two_tokens_of_fifo_and_runs_at_its_slowest_process():
    """Three processes that each pass a token on a cycle after reading it: a FIFO of two tokens each (a token a
    cycle: one written while the one before is read, its slot free the cycle after; HLS's default depth), a
    sample every 16 cycles (the slowest process's own), and the free schedule is what FIFOs of those depths
    give; of one token, the writers wait every other cycle."""
    passing = [Process(f"p{k}", tuple(op for _ in range(16) for op in (Op(f"f{k}", False), Op(f"f{k + 1}", True, 0))))
               for k in range(3)]
    processes = [source("f0", 16), *passing, sink("f3", 16)]
    free = free_schedule(processes, 6)
    depths = fifo_depths(free)
    assert depths == {f"f{k}": 2 for k in range(4)}
    bounded = simulate(processes, depths, 6)
    assert bounded.writes == free.writes and bounded.reads == free.reads and not bounded.stalls
    assert bounded.interval == 16 and check(processes, depths) is None
    assert free.latency == 15 + 4  # the first token written to the last read: 15 cycles apart, a cycle a FIFO
    assert check(processes, {f"f{k}": 1 for k in range(4)}).startswith("stall: FIFO 'f0' full at its depth 1")


def test_a_burst_into_a_slow_reader_needs_the_burst_and_one_token_short_stalls_by_name():
    """A writer that writes a vector of 8 tokens a cycle apart, then computes 40 cycles, into a reader taking
    each token 4 cycles: the FIFO fills while the reader works (8 written in 8 cycles, 2 read meanwhile); one
    token less and the writer waits: a stall, named."""
    writer = Process("dense", reads("x", 1, gap=40) + writes("y", 8))
    reader = Process("act", reads("y", 8, gap=4) + writes("z", 1))
    processes = [source("x", 1), writer, reader, sink("z", 1)]
    depths = fifo_depths(free_schedule(processes, 6))
    assert depths["y"] == 6  # written at cycles 1..8, read from cycle 2 every 4: 2 read by the 8th write
    assert check(processes, depths) is None
    short = check(processes, {**depths, "y": depths["y"] - 1})
    assert short is not None and short.startswith("stall: FIFO 'y' full at its depth 5")


def residual(skip_gap=0):
    """A residual block on 16 tokens: the input goes to a chain of three processes (each a 3-token window:
    its first output after its third input) and, through the FIFO 'skip', to the Add that joins them."""
    tokens = 16
    fork = Process("fork", tuple(op for _ in range(tokens) for op in (Op("in", False), Op("a", True, 0),
                                                                     Op("skip", True, skip_gap))))

    def window(name, source_fifo, target):  # reads two tokens ahead, then a token out for each in
        ops = reads(source_fifo, 2) + tuple(op for _ in range(tokens - 2)
                                            for op in (Op(source_fifo, False), Op(target, True, 1)))
        return Process(name, ops + writes(target, 2))

    add = Process("add", tuple(op for _ in range(tokens) for op in (Op("c", False), Op("skip", False, 0),
                                                                     Op("out", True))))
    return [source("in", tokens), fork, window("conv0", "a", "b"), window("conv1", "b", "b2"),
            window("conv2", "b2", "c"), add, sink("out", tokens)]


def test_a_skip_connection_holds_the_longer_paths_latency_and_a_short_one_deadlocks_by_name():
    """The skip FIFO holds the tokens the fork writes while the three windows fill (two tokens each): its depth
    is their latency difference at the fork's rate. One token short, the fork waits (a stall); far shorter, the
    fork cannot write the skip FIFO, the chain starves and the Add waits forever: a deadlock naming the FIFO."""
    processes = residual()
    depths = fifo_depths(free_schedule(processes, 6))
    assert depths["skip"] > depths["a"] and depths["skip"] >= 6  # two tokens of fill a window, three windows
    assert check(processes, depths) is None
    one_short = check(processes, {**depths, "skip": depths["skip"] - 1})
    assert one_short.startswith("stall: FIFO 'skip' full at its depth")
    far_short = check(processes, {**depths, "skip": 2})
    assert far_short == "deadlock: FIFO 'skip' full at its depth 2: 'fork' waits to write it while 'add' waits to " \
        "read FIFO 'c'"
    assert simulate(processes, {**depths, "skip": 2}, 2).ends["output"] == []  # nothing came out


def test_fifos_of_the_computed_depths_run_every_dataflow_at_its_slowest_processs_rate():
    """Whatever the processes' patterns, FIFOs of the computed depths give the free schedule, whose steady state
    is a sample each slowest process's own interval: the FIFOs never starve it."""
    slow_reader = [source("x", 4), Process("slow", reads("x", 4, gap=5) + writes("y", 4)), sink("y", 4)]
    late_writer = [source("x", 4), Process("late", reads("x", 4) + writes("y", 4, gap=7)),
                   Process("early", reads("y", 4) + writes("z", 1, gap=3)), sink("z", 1)]
    for processes in (slow_reader, late_writer, residual(), residual(skip_gap=2)):
        depths = fifo_depths(free_schedule(processes, 8))
        assert check(processes, depths, 8) is None
        assert simulate(processes, depths, 8).interval == max(p.interval for p in processes)


def test_what_is_no_dataflow_is_refused_in_one_line():
    with pytest.raises(DataflowError, match="FIFO 'x': 'input' writes 2 tokens a sample, 'p' reads 1"):
        free_schedule([source("x", 2), Process("p", reads("x", 1))], 1)
    with pytest.raises(DataflowError, match="FIFO 'y' has no reader"):
        free_schedule([source("x", 1), Process("p", reads("x", 1) + writes("y", 1))], 1)
    with pytest.raises(DataflowError, match="FIFO 'x' has two writers"):
        free_schedule([source("x", 1), Process("p", writes("x", 1)), sink("x", 2)], 1)
    with pytest.raises(DataflowError, match="cycle through p, q"):
        free_schedule([Process("p", reads("a", 1) + writes("b", 1)), Process("q", reads("b", 1) + writes("a", 1))],
                      1)


def residual_model(path):
    """Conv-ReLU-Conv on 8 x 8 x 8 and the input added back, then a ReLU, as onnx.helper writes it."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, weights = [], []
    for k, (source, target) in enumerate((("x", "c0"), ("r0", "c1"))):
        weights += [numpy_helper.from_array(rng.normal(0, 0.2, (8, 8, 3, 3)).astype(np.float32), f"w{k}"),
                    numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), f"b{k}")]
        nodes.append(helper.make_node("Conv", [source, f"w{k}", f"b{k}"], [target], name=f"conv{k}",
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        if k == 0:
            nodes.append(helper.make_node("Relu", ["c0"], ["r0"], name="relu0"))
    nodes += [helper.make_node("Add", ["c1", "x"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu1")]
    value = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 8, 8, 8]) for name in ("x", "y")]
    graph = helper.make_graph(nodes, "residual", value[:1], value[1:], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_a_plans_units_run_as_processes_at_their_slowest_and_its_skip_fifo_one_short_stalls(tmp_path):
    """A plan's FPGA subfunction as a dataflow (units.dataflow_processes): each unit a process as its kind runs
    it, the input written to both the first convolution and the Add; the FIFO depths carry it at its slowest
    unit's interval, and the skip connection's FIFO one token short stalls, by name. The jet tagger's units
    overlap: a sample each slowest unit's cycles, not their sum."""
    import hetdeploy
    import networks
    import onnx
    from hetdeploy.core.board import load_board
    from hetdeploy.intake.model import load_model
    from hetdeploy.planning.units import dataflow_processes, dataflow_top, port_cycles

    clock = load_board("pynq-z2").device("fpga").clock_mhz
    model = residual_model(tmp_path / "residual.onnx")
    (sub,) = hetdeploy.plan(model, "pynq-z2", policy="support", no_engine=True).plan.subfunctions  # (hls4ml's units)
    processes = dataflow_processes(load_model(model).graph, sub, clock)
    assert [p.name for p in processes] == ["input", *(u.name for u in sub.execution_units), "output"]
    add = sub.execution_units[-1].name
    skip = f"x>{add}"
    assert {op.fifo for op in processes[0].ops} == {f"x>{sub.execution_units[0].name}", skip}
    depths = fifo_depths(free_schedule(processes, 6))
    assert check(processes, depths) is None
    assert simulate(processes, depths, 6).interval == max(p.interval for p in processes)
    assert check(processes, {**depths, skip: depths[skip] - 1}).startswith(f"stall: FIFO '{skip}' full")

    jet = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(jet))
    (sub,) = hetdeploy.plan(jet, "pynq-z2", policy="support").plan.subfunctions
    processes = dataflow_processes(load_model(jet).graph, sub, clock)
    free = free_schedule(processes, 6)
    assert check(processes, fifo_depths(free)) is None
    assert free.interval == max(p.interval for p in processes) < sum(u.estimate["latency_cycles"]
                                                                     for u in sub.execution_units)
    # the float input two values a cycle (the PYNQ-Z2's DDR port's 12 bytes a cycle), the 5 outputs one (no pair
    # divides them):
    # "input" converts the 16 inputs before copying out their token (two 128-bit words of 16-bit values, a word a
    # cycle), "output" copies in its token (a word) and converts the 5 outputs
    assert sub.floats_a_word == {sub.inputs[0]: 2}
    assert port_cycles(load_model(jet).graph, sub) == {sub.inputs[0]: 8, sub.outputs[0]: 5}
    assert processes[0].interval >= processes[0].ops[0].gap >= 8 + 2
    # a sample's latency from its first value in: the schedule's from the first token written, after those 8 + 2
    assert dataflow_top(load_model(jet).graph, sub, clock).latency_cycles == free.latency + 8 + 2
    assert [op.gap for op in processes[-1].ops] == [1] and processes[-1].tail == 5


def test_a_streamed_convolution_reads_a_pixel_an_iteration_and_writes_as_each_window_completes():
    """hls4ml's stream loop as a process: 10 x 10 iterations of the padded map at the reuse factor's II, a read
    at each of the 64 pixels inside the padding, an output pixel (stride 2: 16) as each window's last pixel is
    read, the first after the reads of the map's first two rows' pixels it needs (padded (2, 2): 8 + 2 reads)."""
    import graphs
    from hetdeploy.core.board import load_board
    from hetdeploy.planning.units import estimate, kind_of, split_units, unit_shape

    fpga = load_board("pynq-z2").device("fpga")
    b = graphs.Builder([1, 4, 8, 8])
    graph = b.graph(b.conv("input", 8, 3, stride=2, pad=1))
    (unit,) = split_units(graph, [0], fpga)
    shape = unit_shape(graph, unit, fpga.clock_mhz)
    assert shape.input_map == (10, 10, 4) and shape.window_geometry == (3, 3, 2, 2, 1, 1, 1, 1)
    compute = estimate(shape, 2, 16)["compute_cycles"]
    ops = kind_of(shape).dataflow_ops(shape, 2, compute, [("in", 64, 1)], ["out"], 16, 2)
    assert sum(not op.write for op in ops) == 64 and sum(op.write for op in ops) == 16
    first_write = next(k for k, op in enumerate(ops) if op.write)
    assert first_write >= 10
    # a sample every 100 iterations at II 2: its pipeline's depth (in the unit's latency) overlaps the next sample
    assert Process("conv", ops).interval == 10 * 10 * 2 < compute


def resnet8_shaped(path):
    """MLPerf Tiny's ResNet-8 (graphs.resnet8, benchmarks/tiny.py's image classification) at a quarter of its
    width on 12 x 12 pixels."""
    import graphs

    onnx.save(graphs.to_onnx(graphs.resnet8(12, (4, 8, 16))), str(path))
    return path


def concat_and_affine(path):
    """The top's token-by-token ops in one network: a Concat of a convolution's output and a BatchNormalization of
    the input (the top's: no layer before it to fold into), a convolution of that with the Concat added back, then
    global average pooling, a Flatten and a dense classifier."""
    import graphs

    b = graphs.Builder([1, 4, 6, 6])
    x = b.concat([b.unary("Relu", b.conv("input", 4, 3)), b.unary("BatchNormalization", "input")])
    onnx.save(graphs.to_onnx(b.graph(b.head(b.unary("Relu", b.add(b.conv(x, 8, 3), x)), 5))), str(path))
    return path


@pytest.mark.slow
# (resnet8_shaped's residual Adds and strided shortcuts: the same token loops as concat_and_affine's)
@pytest.mark.parametrize("network", ["jet_tagger_mlp", pytest.param("resnet8_shaped", marks=pytest.mark.long),
                                     "concat_and_affine"])
def test_the_dataflow_top_matches_onnxruntime_and_the_sequential_tops_outputs_bit_for_bit(network, tmp_path):
    """The same plan built with each top (--policy support, no engine: the same units, foldings and types) on the
    PYNQ-Z2: the dataflow top's C++ is its units as processes linked by FIFOs of the plan's depths (the top's
    Adds, Concat and BatchNormalization a token at a time, its pooling and Flatten over copies of their buffers);
    it verifies against onnxruntime per output on samples it did not size on, and on 5 samples the build never
    saw, in calls of 3 (a stream of two calls, the last short), emulates within tolerance with the very outputs of
    the sequential top's. The BatchNormalization folded to reuse factor 4 (its word's 8 lanes on two multipliers):
    the sequential top's affine at II 4 a word, the dataflow top's token loop at the 2 cycles a token (a pixel's 4
    channels on the two) its estimate says."""
    import networks

    model = tmp_path / f"{network}.onnx"
    compressed, folded = [], []
    if network == "jet_tagger_mlp":  # its ports zero-compressed too: the input and output processes decode them
        onnx.save(networks.jet_tagger_mlp(), str(model))
        compressed = ["--compress-transfers", "all"]
    else:
        globals()[network](model)
    if network == "concat_and_affine":
        folded = ["--reuse-factor", "BatchNormalization_2=4"]
    shape = [d.dim_value or 1 for d in onnx.load(str(model)).graph.input[0].type.tensor_type.shape.dim]
    samples = tmp_path / "x.npy"
    np.save(samples, np.random.default_rng(11).normal(size=[5, *shape[1:]]).astype(np.float32))
    outputs = {}
    for top in ("dataflow", "sequential"):
        out = tmp_path / top
        assert main(["build", str(model), "--board", "pynq-z2", "--policy", "support", "--no-engine", "--top", top,
                     "--batch", "3", "-o", str(out), "-q", *compressed, *folded]) == 0
        plan = json.loads((out / "plan.json").read_text())
        (sub,) = [s for s in plan["subfunctions"] if s["kind"] == "fpga"]
        assert sub["top"]["kind"] == top and sub["verification"]["passed"]
        assert not compressed or sub["transfers"] and all(t["compressed"] for t in sub["transfers"])
        assert f"<p>top {top} (--top {top}); cycles a sample" in (out / "report.html").read_text()
        source = (out / "hls" / sub["name"] / f"{sub['name']}_top.cpp").read_text()
        depths = [int(d) for d in re.findall(r"#pragma HLS STREAM variable=fifo_\d+ depth=(\d+)", source)]
        if top == "dataflow":  # a FIFO for each tensor to each reader, as deep as the plan's schedule says
            assert "#pragma HLS DATAFLOW" in source and depths == [f["depth"] for f in sub["top"]["fifos"]]
            readers = sum(len(u["inputs"]) for u in sub["execution_units"]) + len(sub["outputs"])
            assert len(depths) == readers
        else:
            assert not depths
        for unit in (u for u in sub["execution_units"] if u["pe"] == "affine"):
            assert folded and unit["reuse_factor"] == 4 and unit["estimate"]["dsp"] == 2  # a word's 8 lanes over 4
            if top == "dataflow":
                process = source[source.index(f"void {unit['name']}_process("):]
                assert re.search(r"#pragma HLS PIPELINE II=(\d+)", process).group(1) == "2"
            else:
                assert re.search(r"hetdeploy::affine<[^;]*, 4>\(", source)
        assert main(["emulate", str(out), "--input", str(samples), "--batch", "3", "--output",
                     str(out / "y.npy")]) == 0
        outputs[top] = np.load(out / "y.npy")
    assert outputs["dataflow"].shape[0] == 5 and np.array_equal(outputs["dataflow"], outputs["sequential"])


def test_plan_prints_the_tops_choice_and_a_dataflow_that_cannot_be_had_is_one_line(tmp_path, capsys):
    """plan says which top each FPGA subfunction has, why, both tops' cycles and the dataflow's FIFOs; a stream
    (--objective throughput) of the jet tagger takes the dataflow. Under --top dataflow no unit goes on the engine
    (no dataflow process); four_conv64's convolutions then run in bands on the PYNQ-Z2 (their maps do not fit on
    chip), no dataflow process either: --top dataflow, or the config key, is refused in one line naming the
    subfunction, the unit and why."""
    import networks

    jet = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(jet))
    assert main(["plan", str(jet), "--board", "pynq-z2", "--objective", "throughput", "--batch", "100"]) == 0
    out = capsys.readouterr().out
    assert "sf0_fpga: top dataflow (auto, objective throughput: the shorter interval); cycles a sample alone and " \
        "between samples: sequential " in out
    assert re.search(r"\n  input>sf0_fpga_u0 +input +sf0_fpga_u0 +1 +256 +0 +0 +256\n", out)  # a register
    # the chip's totals count the dataflow's FIFOs and buffer copies beside its units
    assert main(["plan", str(jet), "--board", "pynq-z2", "--objective", "throughput", "--batch", "100", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    (sub,) = plan["subfunctions"]
    chip = plan["fpga_resources"]["fpga"]
    fifos = {k: sub["top"][f"dataflow_{k}"] for k in ("bram18", "lut", "ff")}
    assert chip["dataflow"] == fifos and fifos["ff"] > 0
    assert chip["used"] == {k: sub["resources"][k] + fifos.get(k, 0) for k in ("dsp", "bram18", "lut", "ff")}
    # both tops' cycles count the float ports, 16 values in two a cycle and 5 out one a cycle (5 is odd)
    assert sub["top"]["port_cycles"] == 13
    assert sub["top"]["sequential_latency_cycles"] == sub["resources"]["latency_cycles"] + 13
    assert "(its dataflow tops' FIFOs and buffer copies among them: BRAM18 " in out
    model = Path(__file__).resolve().parent.parent / "examples" / "four_conv64.onnx"
    config = tmp_path / "top.yaml"
    config.write_text("top: dataflow\n")
    for asked, named in ((["--top", "dataflow"], "--top dataflow"),
                         (["--config", str(config)], f"{config}: line 1: top")):
        assert main(["plan", str(model), "--board", "pynq-z2", *asked]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert f"{named}: subfunction sf0_fpga has no dataflow top: unit 'sf0_fpga_u0' runs in bands: it reads " \
               "its input whole from memory, no dataflow process" in err


@pytest.mark.parametrize("tokens, values, bits, gaps", [
    (1, 784, 1, [13]),  # TFC's flat input, 64 codes a word
    (10, 16, 8, [2] * 10),  # a pixel's 16 channels: two words of 8-bit codes
    (4, 3, 8, [1, 1, 1, 1]),  # three channels: a token at most a cycle, though a word holds more
    (3, 12, 8, [2, 1, 2]),  # pixels that straddle words: written as their last code comes
])
def test_a_codes_ports_tokens_come_as_their_words_do(tokens, values, bits, gaps):
    from hetdeploy.planning.units import code_token_gaps

    assert code_token_gaps(tokens, values, bits) == gaps
