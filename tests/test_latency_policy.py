"""The cost model and the latency policy, as pure functions over graphs and the shipped boards."""

import dataclasses
import json
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphs
import hetdeploy
from hetdeploy.commands.cli import main
from hetdeploy.core.board import available_boards, load_board
from hetdeploy.core.errors import UserError
from hetdeploy.core.graph import Graph, Node
from hetdeploy.core.plan import duration
from hetdeploy.planning.cost import CostModel, node_shape, node_work
from hetdeploy.planning.partition import Group, latency_solution, optimal_solution, partition_graph, solution_seconds
from hetdeploy.planning.units import engine_layer_cycles, word_values
from test_partition import group_graph
from test_rewrites import ZOO

BOARDS = {name: load_board(name) for name in available_boards()}


def acyclic(graph, solution):
    return nx.is_directed_acyclic_graph(group_graph(graph, [Group(device, nodes) for device, nodes in solution]))


def test_five_boards_ship_with_cpu_and_fpga_and_one_gpu():
    assert set(BOARDS) == {"pynq-z2", "ultra96-v2", "zcu104", "kv260", "workstation"}
    for board in BOARDS.values():
        kinds = {d.kind for d in board.devices}
        assert {"cpu", "fpga"} <= kinds and board.device(board.host).kind == "cpu"
    assert {d.kind for d in BOARDS["workstation"].devices} == {"cpu", "gpu", "fpga"}


def test_work_counts_multiply_adds_from_shapes():
    b = graphs.Builder([1, 8, 16, 16])
    conv = b.conv("input", 4, 3)
    flat = b.op("Flatten", [conv], [1, 1024], axis=1)
    b.op("Gemm", [flat], [1, 10], 1024 * 10 + 10, transB=1)
    conv_work, flat_work, gemm_work = (node_work(n) for n in b.nodes)
    assert conv_work.macs == 4 * 16 * 16 * 8 * 9 and conv_work.ops == 2 * conv_work.macs
    assert conv_work.weight_elements == 4 * 8 * 9 + 4
    assert flat_work.ops == 0 and flat_work.op_class == "data"
    assert gemm_work.macs == 10 * 1024 and gemm_work.op_class == "dense"


def test_an_fpga_call_costs_the_boards_overhead_a_latency_per_tensor_and_its_bytes_over_the_link():
    """What a call to the PYNQ-Z2's FPGA costs, from the board file's figures (not a measurement: the
    board file cites the one it was set on): its invocation overhead, each tensor's link latency and
    its bytes at the link's bandwidth, both ways; a batch shares the overhead and the latencies."""
    board = BOARDS["pynq-z2"]
    fpga, send, receive = board.device("fpga"), board.link("arm_cpu", "fpga"), board.link("fpga", "arm_cpu")
    calls = {}
    for width in (16, 160_000):
        b = graphs.Builder([1, width])
        calls[width] = CostModel(b.graph(b.unary("Relu", "input")), board)
    small, large = calls[16].segment([0], "fpga"), calls[160_000].segment([0], "fpga")
    assert small.overhead_s == large.overhead_s == fpga.invocation_overhead_s
    assert small.transfer_s == pytest.approx(send.latency_s + receive.latency_s + 64 / send.bandwidth_bytes_per_s
                                             + 64 / receive.bandwidth_bytes_per_s)
    assert large.transfer_s - small.transfer_s == pytest.approx((640_000 - 64) * (1 / send.bandwidth_bytes_per_s +
                                                                                  1 / receive.bandwidth_bytes_per_s))
    batched = calls[16].segment([0], "fpga", batch=10)
    assert batched.overhead_s == pytest.approx(small.overhead_s / 10)
    assert batched.transfer_s == pytest.approx((send.latency_s + receive.latency_s) / 10 + 128 / 1.2e9)
    assert calls[16].segment([0], "arm_cpu").transfer_s == 0  # the host holds inputs and outputs


def test_small_network_stays_on_the_arm_cores_large_convolutions_go_to_the_fpga():
    """At 940 us per FPGA call the jet tagger is faster on the A9; big convolutions are not."""
    mlp = graphs.Builder([1, 16])
    x = "input"
    for fan_in, fan_out in zip([16, 64, 32, 32], [64, 32, 32, 5]):
        x = mlp.unary("Relu", mlp.op("Gemm", [x], [1, fan_out], fan_in * fan_out + fan_out, transB=1))
    result = partition_graph(mlp.graph(x), BOARDS["pynq-z2"])
    assert [c.device for c in result.cuts] == ["arm_cpu"]
    assert result.support_latency_s > result.latency_s == result.all_host_latency_s

    cnn = graphs.Builder([1, 3, 32, 32])
    x = "input"
    for _ in range(4):
        x = cnn.unary("Relu", cnn.conv(x, 64, 3))
    result = partition_graph(cnn.graph(x), BOARDS["pynq-z2"])
    # hls4ml's streams hold a whole map each (a convolution's padded 34x34 input from its ZeroPadding layer, its
    # 32x32x64 output to the ReLU), a pixel's channels wide: in bands, three of the four layers fit the xc7z020
    assert [(c.device, sum(n.startswith("Conv") for n in c.nodes)) for c in result.cuts] == [("fpga", 3),
                                                                                             ("arm_cpu", 1)]
    assert node_shape(BOARDS["pynq-z2"].device("fpga"), cnn.graph(x), 0, 16).bands == 3
    assert result.latency_s < result.all_host_latency_s


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), size=st.integers(2, 40), board=st.sampled_from(sorted(BOARDS)))
def test_latency_plans_are_cycle_free_fit_and_never_lose_to_the_baselines(seed, size, board):
    graph = graphs.random_dag(seed, size)
    board = BOARDS[board]
    cost = CostModel(graph, board)
    solution = latency_solution(graph, board, cost)
    assert sorted(i for _, nodes in solution for i in nodes) == list(range(size))
    assert acyclic(graph, solution)
    assert cost.fits(solution)
    for device, nodes in solution:
        assert all(board.device(device).why_not(graph.nodes[i]) is None for i in nodes)
        position = {i: k for k, i in enumerate(nodes)}  # execution order inside a group is topological
        producers = graph.producers()
        for i in nodes:
            for t in graph.nodes[i].inputs:
                if producers.get(t) in position:
                    assert position[producers[t]] < position[i]
    result = partition_graph(graph, board)
    assert result.latency_s <= result.all_host_latency_s * (1 + 1e-9)
    if result.support_fits:
        assert result.latency_s <= result.support_latency_s * (1 + 1e-9)


@pytest.mark.parametrize("board", ["pynq-z2", "workstation"])
def test_on_a_chain_the_cut_is_the_exhaustive_optimum(board):
    """A chain has one topological order, where the cut programme is exact."""
    b = graphs.Builder([1, 16, 16, 16])
    x = "input"
    for op in ["Conv", "Relu", "LRN", "Conv", "Relu", "Conv", "LRN", "Relu", "Conv", "Relu"]:
        x = b.conv(x, 16, 3) if op == "Conv" else b.unary(op, x, **({"size": 3} if op == "LRN" else {}))
    graph, board = b.graph(x), BOARDS[board]
    cost = CostModel(graph, board)
    best = solution_seconds(cost, optimal_solution(graph, board, cost))
    assert solution_seconds(cost, latency_solution(graph, board, cost, local_search_nodes=0)) == pytest.approx(best)


@pytest.mark.parametrize("seed", range(6))
def test_exhaustive_search_is_a_lower_bound_and_the_policy_is_close(seed):
    graph = graphs.random_dag(seed, 9)
    board = BOARDS["zcu104"]
    cost = CostModel(graph, board)
    optimum = optimal_solution(graph, board, cost)
    assert acyclic(graph, optimum) and cost.fits(optimum)
    ratio = solution_seconds(cost, optimum) / solution_seconds(cost, latency_solution(graph, board, cost))
    assert 0.95 <= ratio <= 1 + 1e-9


@pytest.mark.parametrize("board, seed", [("zcu104", 1), ("zcu104", 12), ("ultra96-v2", 12), ("pynq-z2", 12),
                                         ("pynq-z2", 3), ("kv260", 5)])
def test_the_integer_programme_finds_the_exhaustive_optimum_from_a_worse_start(board, seed):
    """From the search without its local search (on these graphs short of the optimum, but for
    pynq-z2 3 and kv260 5, where it is the optimum), HiGHS proves the exhaustive optimum: same
    latency, cycle-free, fits; its objective prices the plan as the cost model does."""
    from hetdeploy.planning.ilp import ilp_solution
    from hetdeploy.planning.partition import allowed_devices

    board = BOARDS[board]
    graph = graphs.random_dag(seed, 10 + seed % 7)
    cost = CostModel(graph, board)
    start = latency_solution(graph, board, cost, local_search_nodes=0)
    best = solution_seconds(cost, optimal_solution(graph, board, cost))
    result = ilp_solution(graph, cost, allowed_devices(graph, board, cost), board.host, start, 60)
    assert result.status == "Optimal" and result.slots == len(graph.nodes)
    assert solution_seconds(cost, result.solution) == pytest.approx(best, rel=1e-9)
    assert result.objective_s == pytest.approx(best, rel=1e-6) and result.bound_s <= best * (1 + 1e-6)
    assert acyclic(graph, result.solution) and cost.fits(result.solution)
    assert sorted(i for _, nodes in result.solution for i in nodes) == list(range(len(graph.nodes)))


@pytest.mark.parametrize("board, seed", [("zcu104", 3), ("pynq-z2", 9), ("ultra96-v2", 0)])
def test_the_integer_programme_prices_a_stream_as_the_cost_model_and_beats_the_search(board, seed):
    """Under the throughput objective (batches of 4) the programme's objective is the cost model's
    stream figure for its plan, and from the search's plan it finds a faster stream (on these graphs
    the search's cuts of a few orders miss plans 5 % to 20 % faster; since an FPGA call's overhead loads the
    host too, fewer of them lie in giving each FPGA stage a core of its own)."""
    from hetdeploy.planning.ilp import ilp_solution
    from hetdeploy.planning.partition import allowed_devices

    board = BOARDS[board]
    graph = graphs.random_dag(seed, 10 + seed % 5)
    cost = CostModel(graph, board, objective="throughput", batch=4)
    start = latency_solution(graph, board, cost)
    result = ilp_solution(graph, cost, allowed_devices(graph, board, cost), board.host, start, 60)
    assert result.status == "Optimal"
    assert result.objective_s == pytest.approx(solution_seconds(cost, result.solution), rel=1e-6)
    assert solution_seconds(cost, result.solution) < 0.95 * solution_seconds(cost, start)
    assert acyclic(graph, result.solution) and cost.fits(result.solution)
    planned = partition_graph(graph, board, objective="throughput", batch=4, partitioner="ilp")
    assert planned.ilp.chosen == "ilp" and 1 / planned.stream_s == pytest.approx(
        1 / solution_seconds(cost, result.solution), rel=0.01)


def test_partitioner_ilp_is_never_worse_than_the_search_and_says_what_it_proved(capsys):
    """Within a time limit too short to prove anything on 1,000 nodes, the plan is the search's;
    on a small model it is proven optimal."""
    graph = graphs.random_dag(1, 1000)
    search = partition_graph(graph, BOARDS["zcu104"])
    exact = partition_graph(graph, BOARDS["zcu104"], partitioner="ilp", ilp_time_limit_s=0.5)
    assert exact.latency_s <= search.latency_s * (1 + 1e-12) and exact.ilp.chosen == "search"
    assert exact.ilp.status == "Time limit reached" and exact.ilp.seconds < 5
    assert exact.ilp.search_s == pytest.approx(search.latency_s)
    model = str(Path(__file__).resolve().parent.parent / "examples" / "small_cnn.onnx")
    assert main(["plan", model, "--board", "zcu104", "--partitioner", "ilp", "--json"]) == 0
    ilp = json.loads(capsys.readouterr().out)["ilp"]
    assert ilp["status"] == "Optimal" and ilp["gap"] == pytest.approx(0, abs=1e-6) and ilp["slots"] == 8
    assert main(["plan", model, "--board", "zcu104", "--partitioner", "ilp"]) == 0
    assert "partitioner ilp (HiGHS): optimal in" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main(["plan", model, "--board", "zcu104", "--ilp-time-limit", "-1"])
    assert refused.value.code == 2
    assert "--ilp-time-limit: '-1': expected seconds, a number above 0" in capsys.readouterr().err


def small_fpga(board, bram18):
    fpga = dataclasses.replace(board.device("fpga"), resources={**board.device("fpga").resources, "bram18": bram18})
    return dataclasses.replace(board, devices=[fpga if d.name == "fpga" else d for d in board.devices])


def test_fpga_groups_share_the_on_chip_budget():
    """Four 64-channel convolutions on 8x8 take 36 BRAM18 each, folded, the 8x8x64 FIFO to the ReLU fused
    after each 29 (64 words of 1,024 bits: a pixel's channels wide, which bands of fewer rows do not narrow; no
    FIFO to the LRN, which nothing fuses) and the padding layer's 10x10x64 FIFO before each 29; give the FPGA room
    for two convolutions and their ReLUs."""
    b = graphs.Builder([1, 64, 8, 8])
    x = "input"
    for _ in range(4):
        x = b.unary("LRN", b.unary("Relu", b.conv(x, 64, 3)), size=3)
    graph = b.graph(x)
    board = small_fpga(BOARDS["pynq-z2"], 220)  # 198 BRAM18 after the reserve
    cost = CostModel(graph, board)
    result = partition_graph(graph, board)
    on_fpga = [n for c in result.cuts if c.device == "fpga" for n in c.nodes]
    convs_on_fpga = [n for n in on_fpga if n.startswith("Conv")]
    assert len(convs_on_fpga) == 2
    assert cost.fits([(c.device, [int(n.split("_")[1]) for n in c.nodes]) for c in result.cuts])
    assert not result.support_fits


def test_model_larger_than_every_memory_says_so():
    board = BOARDS["pynq-z2"]
    small = [dataclasses.replace(d, memory=dataclasses.replace(d.memory, bytes=20000)) for d in board.devices]
    b = graphs.Builder([1, 512])
    x = b.op("Gemm", ["input"], [1, 2048], 512 * 2048, transB=1)  # 1 M weights
    # the FPGA's BRAM cannot hold them, its DDR can: they stay there
    (cut,) = partition_graph(b.graph(x), board).cuts
    assert cut.device == "fpga"
    with pytest.raises(UserError, match=r"node 'Gemm_0': op 'Gemm' cannot run on any device.*ddr_bytes, holds"):
        partition_graph(b.graph(x), dataclasses.replace(board, devices=small))  # neither memory holds them
    b = graphs.Builder([1, 64])
    x = "input"
    for _ in range(3):
        x = b.op("Gemm", [x], [1, 64], 64 * 64, transB=1)  # each fits somewhere, all three do not
    # 4 BRAM18 after the reserve: one Gemm at 16 bit, and no DDR for more; the CPU holds one more
    board = small_fpga(dataclasses.replace(board, devices=[dataclasses.replace(
        d, memory=dataclasses.replace(d.memory, bytes=20000 if d.kind == "cpu" else 0)) for d in board.devices]), 5)
    with pytest.raises(UserError, match=r"does not fit board 'pynq-z2': its 0.01229 M weights take"):
        partition_graph(b.graph(x), board)


def test_op_no_device_runs_names_op_and_node():
    graph = Graph([Node("glow", "FancyGlow", ["x"], ["y"], domain="com.example", input_shapes=[[1, 4]],
                        output_shapes=[[1, 4]])], ["x"], ["y"])
    with pytest.raises(UserError, match=r"node 'glow': op 'FancyGlow'"):
        partition_graph(graph, BOARDS["workstation"])


def test_a_node_the_fpga_does_not_run_is_priced_off_it_whatever_shape_it_has():
    """A Concat of two rank-1 tensors (onnx's CausalConvWithState writes one in its function body): the top's
    concat PE lists Concat, but the FPGA takes (1, ...) tensors only. The cost model prices the FPGA for the
    nodes it runs only (it once asked the unit's shape of this one, and failed on its missing channel axis), and
    the plan keeps the node on the host."""
    squeeze = lambda name, source, target: Node(name, "Squeeze", [source], [target], input_shapes=[[1, 3]],  # noqa
                                                output_shapes=[[3]])
    graph = Graph([squeeze("sx", "x", "xs"), squeeze("sy", "y", "ys"),
                   Node("join", "Concat", ["xs", "ys"], ["c"], attrs={"axis": 0}, input_shapes=[[3], [3]],
                        output_shapes=[[6]]),
                   Node("back", "Unsqueeze", ["c"], ["z"], input_shapes=[[6]], output_shapes=[[1, 6]])],
                  ["x", "y"], ["z"])
    for name in ("pynq-z2", "kv260"):
        fpga = BOARDS[name].device("fpga")
        assert "concat" in fpga.pes_for(graph.nodes[2]) and "one sample" in fpga.why_not(graph.nodes[2])
        result = partition_graph(graph, BOARDS[name])
        assert [c.device for c in result.cuts if "join" in c.nodes] == ["arm_cpu"]


def test_plan_command_table_and_json(capsys, tmp_path):
    import networks
    import onnx

    model = tmp_path / "split.onnx"
    onnx.save(networks.split_by_lrn(), str(model))
    assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support"]) == 0
    out = capsys.readouterr().out
    assert "sf0_fpga" in out and "sf1_arm_cpu" in out and "sf2_fpga" in out
    assert "estimated latency (support policy, objective latency)" in out and "all on the host CPU" in out
    assert "estimated throughput, a pipelined stream of batches of 1:" in out
    assert main(["plan", str(model), "--board", "workstation", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["policy"] == "latency" and plan["board"] == "workstation"
    estimate = plan["estimate"]
    assert {"latency_s", "all_cpu_latency_s", "support_latency_s"} <= set(estimate)
    assert estimate["latency_s"] <= estimate["all_cpu_latency_s"]
    subs = plan["subfunctions"]
    assert sum(s["estimate"]["latency_s"] for s in subs) == pytest.approx(estimate["latency_s"])
    assert sorted(n for s in subs for n in s["nodes"]) == sorted(n.name for n in onnx.load(str(model)).graph.node)


def test_stream_pace_is_the_busiest_device_and_each_fpga_core_is_its_own():
    """Each FPGA core is a resource of its own, but the host's CPU drives every call: each call's overhead loads it
    too (``driven_stages``), so two cores of one chip do not come for free."""
    from hetdeploy.planning.cost import driven_stages, stream_seconds

    stages = [("arm", 3.0), ("fpga/sf1", 4.0), ("arm", 2.0), ("fpga/sf3", 4.5)]
    assert stream_seconds(stages, 10) == pytest.approx(0.5)  # the ARM's 5 s a batch of 10, not the cores'
    assert stream_seconds(stages[1::2], 1) == pytest.approx(4.5)
    driven = driven_stages([("cpu", "arm", 1.0, 0.1), ("fpga", "fpga/sf1", 4.0, 3.0), ("fpga", "fpga/sf2", 4.5, 3.0)],
                           "arm")
    assert stream_seconds(driven, 1) == pytest.approx(7.0)  # the ARM: its own 1 s and the two calls' 3 s each
    assert stream_seconds(driven[:3], 1) == pytest.approx(4.0)  # one core: the core's 4 s


def test_throughput_objective_moves_a_small_mlp_to_the_fpga_and_prices_the_stream(tmp_path, capsys):
    """A jet-tagger MLP on the PYNQ-Z2: one sample pays the 900 us FPGA call, so the latency
    objective keeps it on the ARM; a stream of batches of 1000 shares the call, so the throughput
    objective puts it on the FPGA, at a throughput above the all-ARM plan's. The plan's throughput is
    its subfunctions' batch times as a stream; the latency it prints stays the one-sample figure."""
    import networks
    import onnx

    from hetdeploy.planning.cost import driven_stages, stream_seconds

    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    plans = {}
    for objective in ("latency", "throughput"):
        assert main(["plan", str(model), "--board", "pynq-z2", "--objective", objective, "--batch", "1000",
                     "--json"]) == 0
        plans[objective] = json.loads(capsys.readouterr().out)
    latency, throughput = plans["latency"], plans["throughput"]
    assert {s["kind"] for s in latency["subfunctions"]} == {"cpu"}
    assert latency["codes_input"] is throughput["codes_input"] is None  # a float model: no codes to give
    fpga = [s for s in throughput["subfunctions"] if s["kind"] == "fpga"]
    assert sum(len(s["nodes"]) for s in fpga) >= len(latency["node_map"]) - 1
    for plan in plans.values():
        e = plan["estimate"]
        assert e["batch"] == 1000 and e["objective"] in ("latency", "throughput")
        pace = stream_seconds(driven_stages([(s["kind"], s["estimate"]["resource"], s["estimate"]["batch_s"],
                                              s["estimate"]["overhead_s"]) for s in plan["subfunctions"]], "arm_cpu"),
                              1000)
        assert e["throughput_per_s"] == pytest.approx(1 / pace)
        assert e["latency_s"] == pytest.approx(sum(s["estimate"]["latency_s"] for s in plan["subfunctions"]))
    assert throughput["estimate"]["throughput_per_s"] > 5 * latency["estimate"]["throughput_per_s"]
    assert latency["estimate"]["throughput_per_s"] == pytest.approx(latency["estimate"]["all_cpu_throughput_per_s"])
    (sub,) = latency["subfunctions"]  # on the CPU a batch a call (its nodes take one): the call's overhead and
    assert sub["batched"]  # each node's dispatch once
    e, dispatch = sub["estimate"], len(sub["nodes"]) * load_board("pynq-z2").device("arm_cpu").compute.per_op_s
    assert e["batch_s"] == pytest.approx(1000 * (e["compute_s"] - dispatch) + dispatch + e["overhead_s"])
    for s in fpga:  # a batch's call: one overhead and one latency per link, and a thousand samples' compute as a
        # dataflow: the first sample's latency, then one each interval at the PYNQ-Z2's 100 MHz; the samples' bytes
        # are moved by its input and output processes, the 16 inputs two floats a cycle (the PYNQ-Z2's DDR port's 12
        # bytes a cycle), the 5 outputs one (no pair divides them), slower than the HP port carries them
        e, top = s["estimate"], s["top"]
        moved = (e["in_bytes"] + e["out_bytes"]) / 1.2e9  # a sample's bytes over the PYNQ-Z2's HP port
        assert s["floats_a_word"] == {s["inputs"][0]: 2}
        assert top["port_cycles"] == e["in_bytes"] // 8 + e["out_bytes"] // 4 and top["port_cycles"] / 100e6 > moved
        latencies = e["transfer_s"]  # the one-sample call's: paid once a batch too
        assert latencies == pytest.approx(2 * 2e-5)
        assert top["kind"] == "dataflow" and e["compute_s"] == top["dataflow_latency_cycles"] / 100e6
        compute = (top["dataflow_latency_cycles"] + 999 * top["dataflow_interval_cycles"]) / 100e6
        assert e["batch_s"] == pytest.approx(e["overhead_s"] + latencies + compute, rel=1e-9)
        # issue 66: at or under the 95 cycles a sample of hls4ml's design of it, and its 703,900 samples/s measured
        # on a PYNQ-Z2 end to end (Liu-Zhiheng/hls4ml-pynqz2-vivado2019-2-results), the call's overhead and the
        # DMA's bytes included
        assert top["dataflow_interval_cycles"] <= 95 < top["sequential_interval_cycles"]
    assert throughput["estimate"]["throughput_per_s"] >= 704_000


def test_a_quantized_exports_host_quantizer_takes_a_batch_a_call_and_one_dataflow_core_beats_two(capsys):
    """hls4ml's MLPerf Tiny AD08 as Brevitas exports it (benchmarks/tiny.py) streamed on the PYNQ-Z2. Its input's
    quantizer runs on the ARM (input_codes.input_quantizers) a batch a call, so the ARM's 100 us a call does not pace
    the stream, and gives the FPGA its codes. The rest is one dataflow core: two cores of one chip would each load
    the ARM with their calls (cost.driven_stages; before, the cut found two, and the support plan's one core, which
    streams faster, was taken after folding)."""
    model = Path(__file__).parent / "data" / "brevitas" / "mlperf_tiny_ad08.onnx"
    assert main(["plan", str(model), "--board", "pynq-z2", "--objective", "throughput", "--batch", "100",
                 "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    host, fpga = plan["subfunctions"]
    assert (host["kind"], fpga["kind"], fpga["top"]["kind"]) == ("cpu", "fpga", "dataflow") and fpga["input_codes"]
    e = host["estimate"]  # one call's overhead, and its one node's dispatch, a batch
    dispatch = len(host["nodes"]) * load_board("pynq-z2").device("arm_cpu").compute.per_op_s
    assert host["batched"] and e["batch_s"] == pytest.approx(100 * (e["compute_s"] - dispatch) + dispatch +
                                                             e["overhead_s"])
    assert plan["estimate"]["throughput_per_s"] > 5 / host["estimate"]["latency_s"]  # a sample a call's pace
    assert main(["plan", str(model), "--board", "pynq-z2", "--objective", "throughput", "--batch", "100"]) == 0
    assert f"\n  host subfunctions a call: {host['name']} a batch\n" in capsys.readouterr().out


def test_a_quantized_exports_codes_port_leaves_its_dataflow_to_its_units(capsys):
    """Brevitas' TFC-w1a1 streamed on the PYNQ-Z2: its host quantizer gives the FPGA core 784 one-bit codes, 13
    64-bit words a sample that its input process assembles into the first layer's token a word a cycle (as floats,
    784 values a cycle and their 98-word token, the core would take 882 cycles a sample whatever its units). Its units
    set the interval, folded balanced to the least one the chip reaches, and the sequential top would take 98 cycles
    for the same codes (its 16-bit buffer a 128-bit word a cycle) and 10 for the float outputs. Given the
    quantizer's codes (``run.py --codes``, plan.json's ``codes_input``), the ARM's quantizer is not run and no longer
    paces the stream: the core's call and its samples do."""
    model = Path(__file__).parent / "data" / "brevitas" / "tfc_1w1a.onnx"
    assert main(["plan", str(model), "--board", "pynq-z2", "--objective", "throughput", "--batch", "1000",
                 "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    (host, fpga) = plan["subfunctions"]
    fpga_s = fpga["estimate"]["batch_s"] / 1000
    assert plan["codes_input"]["skipped"] == [host["name"]]
    assert plan["codes_input"]["throughput_per_s"] == pytest.approx(1 / fpga_s)
    assert plan["codes_input"]["throughput_per_s"] > 5 * plan["estimate"]["throughput_per_s"]
    top, slowest = fpga["top"], max(u["estimate"]["compute_cycles"] for u in fpga["execution_units"])
    assert [c["bits"] for c in fpga["input_codes"].values()] == [1]
    assert top["kind"] == "dataflow" and top["port_cycles"] == 98 + 10 // 2  # its 10 floats out two a word
    assert slowest <= top["dataflow_interval_cycles"] <= slowest + 1 < 882 / 10  # a cycle for its tokens
    assert fpga["estimate"]["in_bytes"] == 13 * 8


def test_a_batch_the_fpga_ddr_cannot_hold_is_one_line(tmp_path, capsys):
    import networks
    import onnx

    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    for batch, expected in (("4000000", "its subfunctions need"), ("40000000", "more than an FPGA core's port")):
        assert main(["plan", str(model), "--board", "pynq-z2", "--policy", "support", "--batch", batch]) == 2
        error = capsys.readouterr().err
        assert f"--batch {batch}" in error and expected in error and len(error.strip().splitlines()) == 1


def test_one_plan_one_figure_and_the_latency_policy_never_loses_to_a_fitting_support_plan(tmp_path, capsys):
    """Over the reference networks and qonnx's shipped MNIST on every board: the latency policy's plan,
    folded, is never estimated slower than a support plan that fits (nor than all on the host CPU); the
    support figure `plan` prints is the one `plan --policy support` gives; `plan`'s table, `plan --json`
    and the sweep's record say the same latency. (The support figure used to be the partitioner's,
    before folding: the alexnet-style network on the PYNQ-Z2 printed 2.85 ms beside a support plan of
    2.75 ms that was the same plan.)"""
    import networks
    import onnx
    import qonnx

    from hetdeploy.commands.sweep import Point, evaluate
    from hetdeploy.core.board import available_boards
    from hetdeploy.planning.config import BuildOptions

    models = {name: tmp_path / f"{name}.onnx" for name in sorted(networks.NETWORKS)}
    for name, path in models.items():
        onnx.save(networks.NETWORKS[name](), str(path))
    models["mnist"] = Path(qonnx.__file__).parent / "data" / "onnx" / "mnist-conv" / "model.onnx"
    for name, path in models.items():
        for board in available_boards():
            figures = {}
            for policy in ("latency", "support"):
                capsys.readouterr()
                assert main(["plan", str(path), "--board", board, "--policy", policy, "--json"]) == 0, (name, board)
                figures[policy] = json.loads(capsys.readouterr().out)["estimate"]
            latency, support = figures["latency"], figures["support"]
            assert support["support_latency_s"] == support["latency_s"] and support["support_fits"]
            assert latency["support_fits"] and latency["support_latency_s"] == pytest.approx(support["latency_s"],
                                                                                           rel=1e-12), (name, board)
            assert latency["latency_s"] <= latency["support_latency_s"] * (1 + 1e-12), (name, board)
            if latency["all_cpu_latency_s"] is not None:
                assert latency["latency_s"] <= latency["all_cpu_latency_s"] * (1 + 1e-12), (name, board)
            if name in ("alexnet_style", "mnist"):  # the table and a sweep's record say the same
                assert main(["plan", str(path), "--board", board]) == 0
                table = capsys.readouterr().out
                assert f"latency policy, objective latency): {duration(latency['latency_s'])} a sample" in table
                assert f"support policy: {duration(latency['support_latency_s'])} (" in table
                record = evaluate(Point(board, 16, "latency", None), BuildOptions(path, board, tmp_path), None, None)
                assert record["latency_s"] == latency["latency_s"], (name, board)


def test_a_plan_that_folding_makes_slower_than_the_host_becomes_all_on_the_host(tmp_path, monkeypatch):
    """The partitioner prices each FPGA node folded as little as the FPGA alone allows; where folding
    the units together makes the plan slower than all on the host CPU, the latency policy takes the
    host (its figure, its subfunctions), as it takes a faster support plan, under either objective."""
    import networks
    import onnx

    from hetdeploy.intake.model import load_model
    from hetdeploy.planning.config import BuildOptions

    from hetdeploy.steps import plan_model

    path = tmp_path / "alexnet_style.onnx"
    onnx.save(networks.NETWORKS["alexnet_style"](), str(path))
    loaded, board = load_model(path), load_board("pynq-z2")
    options = BuildOptions(path, "pynq-z2", tmp_path)
    plan = plan_model.folded_plan(loaded, board, options)
    assert any(s.kind == "fpga" for s in plan.subfunctions)
    assert plan_model.against_baselines(plan, loaded, board, options) is plan  # as priced, the FPGA pays

    real = plan_model.fpga_times

    def slow_fpga(plan, board):  # every unit a million times its cycles
        for unit in (u for s in plan.subfunctions for u in s.execution_units):
            unit.estimate["latency_cycles"] *= 10**6
        real(plan, board)

    monkeypatch.setattr(plan_model, "fpga_times", slow_fpga)
    slow = plan_model.folded_plan(loaded, board, options)
    chosen = plan_model.against_baselines(slow, loaded, board, options)
    assert [s.device for s in chosen.subfunctions] == [board.host] and chosen.policy == "latency"
    assert chosen.estimate.latency_s == pytest.approx(slow.estimate.all_cpu_latency_s)
    assert slow.estimate.all_cpu_latency_s < slow.estimate.latency_s
    # a stream weighs the same plans by their samples/s
    streamed = plan_model.against_baselines(slow, loaded, board, dataclasses.replace(options, objective="throughput"))
    assert [s.device for s in streamed.subfunctions] == [board.host]
    assert streamed.estimate.throughput_per_s == pytest.approx(slow.estimate.all_cpu_throughput_per_s)


def test_the_engine_takes_the_layers_of_a_resnet50_that_hls4ml_cannot_fit(tmp_path):
    """ResNet-50 at 224 x 224 (graphs.resnet50) on the KV260: hls4ml's per-layer units do not fit even fully
    folded, so without the engine (--no-engine) the latency policy leaves most MACs on the A53s; with it, the
    partitioner prices each convolution and the classifier on the engine (nothing of the chip but the engine's
    resources, once), the BatchNormalizations and ReLUs after them fused, and each residual Add (a ReLU after it)
    fused into the engine unit of the convolution before it, which adds the other map as it writes its outputs: one
    FPGA subfunction runs every convolution, at least 80 % of the MACs, estimated at least 2x faster than all on the
    A53s; the folding keeps the faster of hls4ml's units and the engine for each."""
    import onnx

    from hetdeploy.commands.api import plan
    from hetdeploy.intake.model import load_model

    model = tmp_path / "resnet50.onnx"
    onnx.save(graphs.to_onnx(graphs.resnet50()), str(model))
    graph = load_model(model).graph
    macs = {n.name: node_work(n).macs for n in graph.nodes}

    def on_fpga(result):
        return {n for s in result.subfunctions if s.kind == "fpga" for n in s.nodes}

    without = plan(model, "kv260", no_engine=True).plan
    assert sum(macs[n] for n in on_fpga(without)) < 0.2 * sum(macs.values())
    assert not any(u.engine for s in without.subfunctions for u in s.execution_units)
    result = plan(model, "kv260").plan
    assert sum(macs[n] for n in on_fpga(result)) >= 0.8 * sum(macs.values())
    assert result.estimate.all_cpu_latency_s >= 2 * result.estimate.latency_s
    convolutions = [n.name for n in graph.nodes if n.op == "Conv"]
    (main,) = [s for s in result.subfunctions if s.kind == "fpga" and set(convolutions) <= set(s.nodes)]
    on_engine = [u for u in main.execution_units if u.engine is not None]
    assert len(on_engine) > len(convolutions) // 2 and all(u.strategy == "Engine" for u in on_engine)
    assert [u.estimate["dsp"] > 0 for u in on_engine].count(True) == 1  # the engine's, with its first unit
    adds = [n.name for n in graph.nodes if n.op == "Add"]
    unit_of = {n: u for u in main.execution_units for n in u.nodes}
    index = graph.node_index()
    assert adds and all(unit_of[a].engine is not None and unit_of[a].engine.residual and
                        graph.nodes[index[unit_of[a].nodes[0]]].op == "Conv" and
                        graph.nodes[index[unit_of[a].nodes[-1]]].op == "Relu" and len(unit_of[a].inputs) == 2
                        for a in adds)
    assert not [u for u in main.execution_units if u.pe == "add"]
    # the layers of its 7 x 7 maps (25 pairs of pixels, their inputs on chip) stream their weights from DDR while the
    # lanes compute (engine.h's engine_stream), the plan's choice: each in fewer cycles than held in the buffers
    last_stage = [u for u in on_engine if u.engine.output == [7, 7]]
    assert on_engine[0].engine.stream >= 32 and len(last_stage) >= 9
    assert all(u.engine.streamed and not u.engine.staged for u in last_stage)
    assert all(engine_layer_cycles(u.engine, 16, False) < engine_layer_cycles(dataclasses.replace(
        u.engine, stream=0), 16, False) for u in last_stage)


def test_units_the_folding_gave_hls4ml_move_onto_the_engine_where_its_loops_then_fit_and_take_longer_off():
    """The model zoo's ResNet-50 at 8 bits on the ZCU104: the folding gives one 1 x 1 convolution to hls4ml (2,048
    products in LUTs, a few hundred cycles faster than on the engine), which leaves the engine's shared windows and
    streamed weights no LUTs (before: neither, streaming only layers of 32 pairs, 21.8 ms). Moved onto the engine,
    every convolution and the classifier run there, the engine shares its windows and streams layers of 128 pairs,
    and the plan is faster than with the unit where the folding put it (pinned there: 12.47 ms against 12.98)."""
    from hetdeploy.commands.api import plan

    model = ZOO / "light_resnet50.onnx"
    result = plan(model, "zcu104", width=8).plan
    (main,) = [s for s in result.subfunctions if s.kind == "fpga"]
    layers = [u for u in main.execution_units if u.pe in ("conv", "dense")]
    assert len(layers) == 54 and all(u.engine is not None for u in layers)
    engine = next(u.engine for u in main.execution_units if u.engine is not None)
    assert engine.shared and engine.stream == 128
    (moved,) = [u.nodes[0] for u in main.execution_units if u.pe == "conv" and u.engine is not None
                and u.engine.output == [56, 56] and u.engine.filters == 256 and not u.engine.residual]
    kept = plan(model, "zcu104", width=8, strategies={moved: "latency"}).plan
    assert not any(u.engine for u in kept.subfunctions[0].execution_units if moved in u.nodes)
    assert result.estimate.latency_s < 0.97 * kept.estimate.latency_s


@pytest.mark.parametrize("name, width", [("densenet121", 16), ("densenet121", 8), ("googlenet", 16),
                                         ("squeezenet", 16)])
def test_the_model_zoos_networks_run_on_the_kv260s_fpga(tmp_path, name, width):
    """DenseNet-121, GoogLeNet and SqueezeNet at 224 x 224 (graphs.ARCHITECTURES) on the KV260: at least 80 % of
    their convolution and matrix MACs on the FPGA, estimated at least 2x faster than all on the A53s; their Concats
    (in pairs) on the top's own concat and their BatchNormalizations not folded into a convolution (DenseNet's
    before each) on the top's own scale and shift, a ReLU after each fused. At 8 bits DenseNet's 62 scale and
    shift units would take 16 DSPs each at a word a cycle (fewer where the folding shares a unit's multipliers among
    its lanes, the DSPs short beside the engine: the test below), and its FPGA part stays one subfunction (before,
    the plan had 22 subfunctions, 11 on the FPGA: 51 % of its MACs there, 1.03 s)."""
    import onnx

    from hetdeploy.commands.api import plan
    from hetdeploy.intake.model import load_model

    model = tmp_path / f"{name}.onnx"
    onnx.save(graphs.to_onnx(graphs.ARCHITECTURES[name]()), str(model))
    graph = load_model(model).graph
    macs = {n.name: node_work(n).macs for n in graph.nodes}
    result = plan(model, "kv260", width=width).plan
    units = {u.nodes[0]: u for s in result.subfunctions for u in s.execution_units}
    assert sum(macs[n] for s in result.subfunctions if s.kind == "fpga" for n in s.nodes) >= 0.8 * sum(macs.values())
    assert result.estimate.all_cpu_latency_s >= 2 * result.estimate.latency_s
    concats = [n.name for n in graph.nodes if n.op == "Concat" and n.name in units]
    assert concats and all(units[c].pe == "concat" for c in concats)
    alone = [n.name for n in graph.nodes if n.op == "BatchNormalization" and n.name in units]
    assert all(units[b].pe == "affine" for b in alone)
    assert name != "densenet121" or len(alone) > 50
    if name == "densenet121" and width == 8:
        assert [s.kind for s in result.subfunctions].count("fpga") == 1
        assert all(units[b].estimate["dsp"] == word_values(8) // units[b].reuse_factor for b in alone)


def test_the_engine_taken_is_the_one_of_the_fewest_cycles_of_all_units_not_the_fastest_that_fits(tmp_path):
    """The model zoo's DenseNet-121 at 8 bits on the KV260: beside the fastest engine that fits (48 lanes of 16
    values, two pixels) its 62 scale and shift units fold to share their multipliers, and the network takes longer
    than beside a smaller engine that leaves more of them a multiplier a lane. The folding weighs every unit's
    cycles: its engine is smaller and the plan faster than with the fastest engine that fits (before, it took that
    one)."""
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.steps.build import plan_stages

    def plan(**options):
        return plan_stages(BuildOptions(model=ZOO / "light_densenet121.onnx", board="kv260", out_dir=tmp_path,
                                        width=8, **options), lambda key, what: None)[2]

    chosen, first_fit = plan(), plan(engine_first_fit=True)

    def engine(result):
        (size,) = {(u.engine.lanes, u.engine.vector) for s in result.subfunctions for u in s.execution_units
                   if u.engine is not None}
        return size

    def folded(result):
        affine = [u for s in result.subfunctions for u in s.execution_units if u.pe == "affine"]
        assert len(affine) > 50
        return sum(u.reuse_factor > 1 for u in affine)

    assert engine(first_fit) == (48, 16) and engine(chosen)[0] < 48
    assert chosen.estimate.latency_s < first_fit.estimate.latency_s
    assert folded(chosen) < folded(first_fit)


@pytest.mark.parametrize("name, width, uram, in_place", [("inception_v1", 16, 32, False),
                                                          ("inception_v2", 16, 64, True)])
def test_concat_inputs_are_written_in_place_where_the_plan_is_faster_so(tmp_path, name, width, uram, in_place):
    """The model zoo's networks on the KV260 (its 64 URAM blocks, or 32): a Concat input written in place
    (``units.concats_in_place``) keeps the Concat's output live from its first input's write, which may push other maps
    to DDR. The plan folded with every Concat moving its inputs is weighed too, the faster kept: Inception v1 at 16
    bits on a KV260 of 32 URAM blocks keeps none in place (the plan with them in place no faster than its 18.05 ms),
    Inception v2 at 16 bits on the KV260 writes its branches into their Concats and is faster so (16.40 ms, 16.97
    moving them)."""
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.steps.build import plan_stages

    shipped = (Path(hetdeploy.__file__).parent / "boards" / "kv260.yaml").read_text()
    assert "uram: 64}" in shipped
    board = tmp_path / "kv260.yaml"
    board.write_text(shipped.replace("uram: 64}", f"uram: {uram}}}"))

    def plan(**options):
        return plan_stages(BuildOptions(model=ZOO / f"light_{name}.onnx", board=str(board), out_dir=tmp_path,
                                        width=width, **options), lambda key, what: None)[2]

    def written_in_place(result):
        return [x for s in result.subfunctions for u in s.execution_units for x in u.in_place]

    chosen, moved = plan(), plan(concats_in_place=False)
    assert not written_in_place(moved)
    assert bool(written_in_place(chosen)) == in_place
    if in_place:
        assert chosen.estimate.latency_s < moved.estimate.latency_s
    else:
        assert chosen.estimate.latency_s == moved.estimate.latency_s


def test_the_engines_share_of_the_uram_is_weighed_against_the_maps_that_would_spill_to_ddr(tmp_path, monkeypatch):
    """The model zoo's SqueezeNet on the KV260 at 16 bits: with its engine's weight buffers in ENGINE_SHARES' share of
    the URAM, the memory plan spills maps to DDR (6.20 ms a frame); folded again with less of it for the engine
    (ENGINE_URAM_SHARES), more of its lanes' buffers in BRAM, the URAM holds those maps and the plan is faster (5.01
    ms at 0.3), so kept, and says the share its engine was sized in."""
    from hetdeploy.planning import units
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.steps.build import plan_stages

    def plan():
        return plan_stages(BuildOptions(model=ZOO / "light_squeezenet.onnx", board="kv260", out_dir=tmp_path,
                                        width=16), lambda key, what: None)[2]

    weighed = plan()
    monkeypatch.setattr(units, "ENGINE_URAM_SHARES", ())
    default = plan()
    assert default.fpga_resources["fpga"].engine_uram_share is None
    assert weighed.fpga_resources["fpga"].engine_uram_share in (0.6, 0.3)
    assert weighed.estimate.latency_s < 0.9 * default.estimate.latency_s
    fast, slow = (p.subfunctions[0].memory for p in (weighed, default))
    assert fast.uram_bytes > slow.uram_bytes and fast.ddr_transfer_s < slow.ddr_transfer_s
    engines = [next(u.engine for u in p.subfunctions[0].execution_units if u.engine is not None)
               for p in (weighed, default)]
    assert engines[0].uram_lanes < engines[1].uram_lanes


@pytest.mark.parametrize("width, in_place", [(16, True), (8, False)])
def test_a_concat_writes_into_the_next_one_where_its_channels_are_whole_words_at_its_width(tmp_path, width, in_place):
    """torchvision's DenseNet block (tests/data/torch/densenet_block.onnx) on the KV260: its Concats' outputs of 16,
    24 and 32 channels are whole 128-bit words at 16 bits (8 channels a word), each written in place into the next
    Concat's; at 8 bits (16 channels a word) 24 channels are not, and no Concat writes into another."""
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.steps.build import plan_stages

    model = Path(__file__).parent / "data" / "torch" / "densenet_block.onnx"
    result = plan_stages(BuildOptions(model=model, board="kv260", out_dir=tmp_path, width=width),
                         lambda key, what: None)[2]
    concats = [u for s in result.subfunctions for u in s.execution_units if u.pe == "concat"]
    assert len(concats) == 3
    assert [u.inputs[0] in u.in_place for u in concats[1:]] == [in_place] * 2


def test_of_the_engines_weighed_by_their_cycles_the_plan_keeps_the_faster_in_full():
    """The model zoo's Inception v2 on the ZCU104 at 8 bits. The folding weighs engine sizes by the units' cycles,
    before the memory is planned, in three quarters of the FPGA's DSPs (the rest the other units', which the
    partition priced beside the engine): the plans of its choice, of the fastest engine that fits beside the other
    units, and of its choice in all of the DSPs are each made, memory included, and the fastest kept. That is an
    engine of 96 lanes of 16 values at two pixels, in all the DSPs, faster than the engines of 48 and 64 lanes
    (both within three quarters of the DSPs, pinned). An engine of 96 lanes of 16 values pinned is weighed in all the
    DSPs too: it takes two pixels, as the folding's own choice (before, one pixel: three quarters of the DSPs hold
    no pair of it)."""
    from hetdeploy.commands.api import plan

    model = ZOO / "light_inception_v2.onnx"
    chosen = plan(model, "zcu104", width=8).plan
    assert {(u.engine.lanes, u.engine.vector, u.engine.pixels) for s in chosen.subfunctions
            for u in s.execution_units if u.engine is not None} == {(96, 16, 2)}
    assert [r.engine_dsp_share for r in chosen.fpga_resources.values()] == [1.0]
    for lanes in (48, 64):
        pinned = plan(model, "zcu104", width=8, engine_size=(lanes, 16)).plan
        assert {(u.engine.lanes, u.engine.pixels) for s in pinned.subfunctions for u in s.execution_units
                if u.engine is not None} == {(lanes, 2)}
        assert chosen.estimate.latency_s < pinned.estimate.latency_s
    pinned = plan(model, "zcu104", width=8, engine_size=(96, 16)).plan
    assert {(u.engine.lanes, u.engine.pixels) for s in pinned.subfunctions for u in s.execution_units
            if u.engine is not None} == {(96, 2)}
    assert [r.engine_dsp_share for r in pinned.fpga_resources.values()] == [1.0]


def test_a_dense_layer_deeper_than_the_engines_buffers_runs_on_it_in_chunks_and_leaves_the_chip_room():
    """ZFNet-512's first classifier (a Gemm of 18,432 inputs) would need 576 BRAM18s of weight buffers on the
    KV260's engine if its buffers held its whole window (a convolution's window that deep is not the engine's:
    units.engine_holds); a dense layer's window takes at most units.ENGINE_DENSE_CHUNK values of them (it runs in
    chunks), so it is the engine's at 16 and 8 bits, the engine is sized to the convolutions' windows, and the chip
    keeps room beside it (before the chunks, the classifier stayed off the engine; before that, it alone took all
    the BRAM18s, and no unit of the model fitted beside the engine)."""
    from hetdeploy.intake.model import load_model
    from hetdeploy.planning import units
    from hetdeploy.planning.cost import engine_capable, engine_shape

    graph = load_model(ZOO / "light_zfnet512.onnx").graph
    fpga = next(d for d in load_board("kv260").devices if d.kind == "fpga")
    for width in (16, 8):
        capable = {graph.nodes[i].name for i in engine_capable(fpga, graph, [width] * len(graph.nodes))}
        assert capable == {n.name for n in graph.nodes if n.op in ("Conv", "Gemm")}, (width, capable)
    assert units.engine_holds(fpga, 3 * 3 * 512, 16) and not units.engine_holds(fpga, 18432, 16)  # n12, n16
    classifier = next(k for k, n in enumerate(graph.nodes) if n.name == "n16")
    assert units.engine_window(engine_shape(fpga, graph, classifier), 16) == units.ENGINE_DENSE_CHUNK < 18432
    cost = CostModel(graph, load_board("kv260"), engine=True)
    assert all(v >= 0 for v in cost.capacity["fpga"].values())


def test_a_node_pinned_to_an_fpga_that_holds_it_only_on_its_engine_runs_there(tmp_path):
    """ResNet-50's largest convolution (2.4 M weights) pinned to the KV260's FPGA: hls4ml's unit of it alone does
    not fit the chip (--no-engine refuses it, naming the BRAM18s), the engine takes it."""
    import onnx

    from hetdeploy.commands.api import plan
    from hetdeploy.intake.model import load_model

    model = tmp_path / "resnet50.onnx"
    onnx.save(graphs.to_onnx(graphs.resnet50()), str(model))
    big = max((n for n in load_model(model).graph.nodes if n.op == "Conv"), key=lambda n: n.constant_elements)
    with pytest.raises(UserError, match=f"node '{big.name}': op 'Conv' cannot run on any device .*bram18"):
        plan(model, "kv260", devices={big.name: "fpga"}, no_engine=True)
    result = plan(model, "kv260", devices={big.name: "fpga"}).plan
    (unit,) = [u for s in result.subfunctions for u in s.execution_units if big.name in u.nodes]
    assert unit.engine is not None


def test_the_fpgas_subfunctions_share_its_engine_allowance_by_their_macs(tmp_path):
    """The zoo's Inception v1 (GoogLeNet) on a KV260 whose FPGA does not run LRN: its two LRNs on the A53s cut its
    convolutions into three FPGA subfunctions, each with an engine of its own, and the engines share the FPGA's
    engine allowance (units.engine_allowance, in the plan's share of the DSPs) by their subfunctions'
    multiply-accumulates: none is starved (the stem's, 8.5 % of the MACs, got 4 lanes of one value when the largest
    took its size first and the next the rest: 5.0 frames/s), their DSPs and URAM blocks together within the
    allowance, the plan at least 2x all on the A53s and 100 % of the MACs on the FPGA."""
    from hetdeploy.commands.api import plan
    from hetdeploy.intake.model import load_model
    from hetdeploy.planning import units

    shipped = (Path(hetdeploy.__file__).parent / "boards" / "kv260.yaml").read_text()
    sizes = "attributes: {size: [1, 3, 5, 7, 9, 11, 13, 15]}}\n"
    lrn_op = shipped[shipped.index("      # the top's LRN:"):shipped.index(sizes) + len(sizes)]
    without = shipped.replace("      lrn: {ops: [LRN], engine: top}\n", "").replace(lrn_op, "")
    assert without.count("LRN") < shipped.count("LRN") and "ops: [LRN]" not in without
    (tmp_path / "kv260-no-lrn.yaml").write_text(without)
    graph = load_model(ZOO / "light_inception_v1.onnx").graph
    macs = {n.name: node_work(n).macs for n in graph.nodes}
    result = plan(ZOO / "light_inception_v1.onnx", str(tmp_path / "kv260-no-lrn.yaml")).plan
    carriers = [next(u for u in s.execution_units if u.engine is not None) for s in result.subfunctions
                if s.kind == "fpga" and any(u.engine is not None for u in s.execution_units)]
    assert len(carriers) == 3, [s.name for s in result.subfunctions]
    assert all(u.engine.lanes * u.engine.vector >= 32 for u in carriers), [u.engine for u in carriers]
    (share,) = {r.engine_dsp_share for r in result.fpga_resources.values()}  # (the folding's: plan_model)
    allowance = units.engine_allowance(load_board("kv260").device("fpga"), share)
    for resource in ("dsp", "uram"):  # the engine's resources are its first unit's (its own: none)
        assert sum(u.estimate.get(resource, 0) for u in carriers) <= allowance[resource], resource
    assert sum(macs[n] for s in result.subfunctions if s.kind == "fpga" for n in s.nodes) == sum(macs.values())
    assert result.estimate.all_cpu_latency_s >= 2 * result.estimate.latency_s
