"""Every op hls4ml can implement runs on the FPGA and matches onnxruntime in C-simulation, standalone
and fused after a layer, at 4-D and 2-D; what it cannot do stays on the CPU with the reason. Each
build below checks every execution unit against its ONNX model (a unit out of tolerance fails the
build), then the whole pipeline is emulated."""

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper, shape_inference

import hetdeploy
import op_models
from hetdeploy.intake import rewrites
from hetdeploy.running.emulate import emulate
from hetdeploy.steps.build import BuildOptions, build
from op_models import Builder

# where a top's C-simulation entry points begin (hls/top_csim.cpp.in): the top's own code is before it
CSIM_ENTRIES = "// C-simulation entry points"


def save_model(b: Builder, path, shape, name="chain"):
    graph = helper.make_graph(b.nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(b.nodes[-1].output[0], TensorProto.FLOAT, None)],
                              b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model = shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def build_and_emulate(path, out, board="pynq-z2", **settings):
    plan = build(BuildOptions(model=path, board=board, out_dir=out, policy="support", **settings),
                 progress=lambda m: None)
    result = emulate(out, None, 1)
    assert result.comparison.passed, result.table()
    return plan


def on_fpga(plan, nodes):
    where = {n: plan.node_map[n] for n in nodes}
    fpga = {s.name for s in plan.subfunctions if s.kind == "fpga"}
    assert all(w.get("subfunction") in fpga and w.get("unit") for w in where.values()), where
    return where


@pytest.mark.slow
def test_every_4d_op_standalone_and_after_a_layer(tmp_path):
    """Standalone: each op reads a pooling's (or a relayout's) output, so it is a unit of its own or
    leads one; after a layer: fused into a convolution's unit."""
    b = Builder(1)
    C = op_models.CHANNELS
    conv = lambda x, name: b.node("Conv", [x, b.random(f"{name}.w", [C, C, 3, 3]), b.random(f"{name}.b", [C])], name,
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1])  # noqa: E731
    per_channel = lambda name, scale=0.3: b.random(name, [C, 1, 1], scale)  # noqa: E731
    x = conv("input", "conv1")
    x = b.node("PRelu", [x, b.const("slope1", b.rng.uniform(0.05, 0.3, [C, 1, 1]))], "prelu_fused")
    x = b.node("Mul", [x, per_channel("scale1", 1.0)], "mul_fused")
    x = b.node("Add", [x, per_channel("shift1")], "add_fused")
    x = b.node("LeakyRelu", [x], "leaky_fused", alpha=0.1)
    x = b.node("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Tanh", [x], "tanh")
    x = b.node("Resize", [x, "", b.const("scales", [1.0, 1.0, 2.0, 2.0])], "resize", mode="nearest")
    x = b.node("Pad", [x, b.const("pads", [0, 0, 1, 0, 0, 0, 0, 1])], "pad", mode="constant")
    x = b.node("AveragePool", [x], "avgpool", kernel_shape=[3, 3], strides=[1, 1])
    x = b.node("HardSigmoid", [x], "hardsigmoid", alpha=0.3, beta=0.4)
    x = b.node("Transpose", [x], "transpose", perm=[0, 1, 3, 2])
    x = b.node("PRelu", [x, b.const("slope2", b.rng.uniform(0.05, 0.3, [C, 1, 1]))], "prelu")
    x = b.node("Clip", [x, b.const("lo", -0.25), b.const("hi", 0.5)], "clip")
    x = conv(x, "conv2")
    x = b.node("Tanh", [x], "tanh_fused")
    x = b.node("HardSigmoid", [x], "hardsigmoid_fused")
    x = b.node("Clip", [x, b.const("zero", 0.0), b.const("six", 6.0)], "relu6_fused")
    x = b.node("Mul", [x, b.node("Softplus", [x], "softplus")], "mul")
    x = b.node("Add", [b.node("GlobalAveragePool", [x], "gap"), b.node("GlobalMaxPool", [x], "gmp")], "add")
    x = b.node("Reshape", [x, b.const("flat", [1, C])], "reshape")
    b.node("Gemm", [x, b.random("fc.w", [3, C]), b.random("fc.b", [3])], "fc", transB=1)
    path = save_model(b, tmp_path / "ops4d.onnx", [1, C, 8, 10])
    plan = build_and_emulate(path, tmp_path / "ops4d")
    where = on_fpga(plan, [n.name for n in b.nodes])
    assert where["prelu_fused"]["unit"] == where["conv1"]["unit"] == where["leaky_fused"]["unit"]
    assert where["relu6_fused"]["unit"] == where["conv2"]["unit"]
    assert where["tanh"]["unit"] != where["pool1"]["unit"]


@pytest.mark.slow
def test_every_2d_op_standalone_and_after_a_layer(tmp_path):
    b = Builder(2)
    F = op_models.FEATURES
    dense = lambda x, name: b.node("Gemm", [x, b.random(f"{name}.w", [F, F]), b.random(f"{name}.b", [F])], name,
                                   transB=1)  # noqa: E731
    x = b.node("PRelu", ["input", b.const("slope1", b.rng.uniform(0.05, 0.3, [F]))], "prelu")
    x = b.node("Mul", [x, b.random("scale", [F], 1.0)], "mul")
    x = b.node("Add", [x, b.random("shift", [F])], "add")
    x = b.node("Clip", [x, b.const("lo", -0.5), b.const("hi", 0.75)], "clip")
    x = dense(x, "fc1")
    x = b.node("Tanh", [x], "tanh_fused")
    x = b.node("LeakyRelu", [x], "leaky_fused", alpha=0.2)
    x = b.node("HardSigmoid", [x], "hardsigmoid_fused")
    x = dense(x, "fc2")
    x = b.node("Clip", [x, b.const("zero", 0.0), b.const("six", 6.0)], "relu6_fused")
    x = b.node("PRelu", [x, b.const("slope2", b.rng.uniform(0.05, 0.3, [F]))], "prelu_fused")
    x = b.node("Concat", [x, b.node("Sigmoid", [x], "sigmoid")], "concat", axis=1)
    x = b.node("Elu", [x], "elu", alpha=0.5)
    x = b.node("Softsign", [x], "softsign")
    x = b.node("Max", [x, b.node("Softplus", [x], "softplus")], "max")
    x = b.node("Sub", [x, b.node("Selu", [x], "selu")], "sub")
    x = b.node("Min", [x, b.node("Tanh", [x], "tanh")], "min")
    b.node("Softmax", [x], "softmax", axis=-1)
    path = save_model(b, tmp_path / "ops2d.onnx", [1, F])
    # Its nine lookup-table layers (16 or 32 values each, a 4,096-entry table copied per two values; the Softmax's
    # in twice the blocks under Vitis HLS) need 520 BRAM18s: a PYNQ-Z2 with three times its BRAM holds them all.
    shipped = (Path(hetdeploy.__file__).parent / "boards" / "pynq-z2.yaml").read_text()
    assert "bram18: 280," in shipped
    board = tmp_path / "pynq-z2-840.yaml"
    board.write_text(shipped.replace("bram18: 280,", "bram18: 840,"))
    plan = build_and_emulate(path, tmp_path / "ops2d", str(board))
    where = on_fpga(plan, [n.name for n in b.nodes])
    assert where["prelu_fused"]["unit"] == where["fc2"]["unit"]


@pytest.mark.slow
def test_a_batchnormalization_anywhere_runs_on_the_fpga(tmp_path):
    """A BatchNormalization at the input, after a ReLU (a negative scale: it cannot move into the
    convolution before the ReLU) and after a max pooling, then Flatten and Gemm: every node on the
    FPGA, each unit and the pipeline within tolerance of onnxruntime."""
    b = Builder(4)
    C = op_models.CHANNELS

    def batchnorm(x, name, channels, scale):
        return b.node("BatchNormalization", [x, b.const(f"{name}.scale", scale), b.random(f"{name}.bias", [channels]),
                                             b.random(f"{name}.mean", [channels]),
                                             b.const(f"{name}.var", b.rng.uniform(0.5, 1.5, [channels]))], name)

    x = batchnorm("input", "bn_input", 3, b.rng.uniform(0.5, 1.5, [3]))
    x = b.node("Conv", [x, b.random("conv.w", [C, 3, 3, 3])], "conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = b.node("Relu", [x], "relu")
    x = batchnorm(x, "bn_relu", C, -b.rng.uniform(0.5, 1.5, [C]))
    x = b.node("MaxPool", [x], "pool", kernel_shape=[2, 2], strides=[2, 2])
    x = batchnorm(x, "bn_pool", C, b.rng.uniform(0.5, 1.5, [C]))
    x = b.node("Flatten", [x], "flatten")
    b.node("Gemm", [x, b.random("fc.w", [10, C * 16]), b.random("fc.b", [10])], "fc", transB=1)
    path = save_model(b, tmp_path / "batchnorms.onnx", [1, 3, 8, 8])
    plan = build_and_emulate(path, tmp_path / "batchnorms")
    on_fpga(plan, [n.name for n in b.nodes])
    assert all(u.verification.passed for s in plan.subfunctions for u in s.execution_units)


@pytest.mark.slow
def test_hls4ml_builds_and_verifies_the_strategies_table_sizes_and_io_types_pinned(tmp_path):
    """--strategy pinned on a streamed convolution (Resource, folded to fit) and on Dense layers under
    Latency at a reuse factor that does not divide the layer (which hls4ml's Resource would refuse) and
    under Resource below and above the layer's inputs; --table-size on a Sigmoid and a Softmax; --io-type
    io_parallel on the max pooling and io_stream on two Dense layers; --precision's weight, bias and accum
    types on a Dense layer: hls4ml generates each as pinned, every unit and the pipeline within tolerance
    of onnxruntime."""
    b = Builder(5)
    C = op_models.CHANNELS
    x = b.node("Conv", ["input", b.random("conv.w", [C, 3, 3, 3])], "conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = b.node("Relu", [x], "relu")
    x = b.node("MaxPool", [x], "pool", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Flatten", [x], "flatten")
    x = b.node("Gemm", [x, b.random("fc1.w", [24, C * 16]), b.random("fc1.b", [24])], "fc1", transB=1)
    x = b.node("Relu", [x], "relu1")
    x = b.node("Gemm", [x, b.random("fc2.w", [16, 24]), b.random("fc2.b", [16])], "fc2", transB=1)
    x = b.node("Sigmoid", [x], "sigmoid")
    x = b.node("Gemm", [x, b.random("fc3.w", [10, 16]), b.random("fc3.b", [10])], "fc3", transB=1)
    b.node("Softmax", [x], "softmax", axis=-1)
    path = save_model(b, tmp_path / "strategies.onnx", [1, 3, 8, 8])
    strategies = {"conv": "Resource", "fc1": "Latency", "fc2": "Resource", "fc3": "Resource"}
    reuse = {"fc1": 100, "fc2": 8, "fc3": 32}  # 100 does not divide 24 x 16C; 8 < 24 inputs; 32 > 16 inputs
    tables = {"sigmoid": 512, "softmax": 1024}
    io_types = {"conv": "io_stream", "pool": "io_parallel", "fc2": "io_stream", "fc3": "io_stream"}
    types = {"weight": (10, 2), "bias": (12, 3), "accum": (24, 10)}
    plan = build_and_emulate(path, tmp_path / "strategies", strategies=strategies, reuse_factors=reuse,
                             table_sizes=tables, io_types=io_types, precisions={"fc2": types})
    on_fpga(plan, [n.name for n in b.nodes])
    found = {u.nodes[0]: u for s in plan.subfunctions for u in s.execution_units}
    assert {n: found[n].strategy for n in strategies} == strategies
    assert {n: found[n].reuse_factor for n in reuse} == reuse
    for node, strategy in strategies.items():  # what hls4ml generated: its layer's parameters
        firmware = tmp_path / "strategies" / found[node].hls.project / "firmware" / "parameters.h"
        [layer] = [block for block in firmware.read_text().split("struct ")
                   if block.split("{")[0].strip().endswith(("nnet::dense_config", "nnet::conv2d_config"))
                   and "_mult" not in block.split(":")[0]]
        assert f"strategy = nnet::{strategy.lower()};" in layer, (node, layer)
        if node in reuse:
            assert f"reuse_factor = {reuse[node]};" in layer, (node, layer)
    for node, io_type in {**io_types, "fc1": "io_parallel"}.items():  # pinned, and the folding's
        unit = found[node]
        assert unit.io_type == unit.hls.io_type == io_type, node
        top = tmp_path / "strategies" / unit.hls.project / "firmware" / f"{unit.name}.cpp"
        assert ("hls::stream" in top.read_text()) == (io_type == "io_stream"), node
    defines = (tmp_path / "strategies" / found["fc2"].hls.project / "firmware" / "defines.h").read_text()
    parameters = (tmp_path / "strategies" / found["fc2"].hls.project / "firmware" / "parameters.h").read_text()
    for kind, (bits, integer) in types.items():  # the Dense layer's own type of that kind, as pinned
        [name] = re.findall(rf"typedef (\w+) {kind}_t;", parameters)  # the dense config's, named in defines.h
        assert re.search(rf"typedef ap_fixed<{bits},{integer}[,>][^;]* {name};", defines), (kind, name)
    for node, entries in tables.items():
        unit = next(u for u in found.values() if node in u.nodes)
        assert unit.table_size == entries
        firmware = (tmp_path / "strategies" / unit.hls.project / "firmware" / "parameters.h").read_text()
        assert f"table_size = {entries};" in firmware and "table_size = 4096" not in firmware, node
    assert all(u.verification.passed for s in plan.subfunctions for u in s.execution_units)


@pytest.mark.slow
def test_the_io_type_the_folding_chose_is_what_hls4ml_builds(tmp_path):
    """Unpinned, a convolution whose output is one pixel is io_parallel by cost (units.by_cost): hls4ml generates
    it so, and it and the pipeline are within tolerance of onnxruntime; pinned to io_stream, it streams."""
    b = Builder(6)
    C = op_models.CHANNELS
    x = b.node("Conv", ["input", b.random("conv.w", [16, C, 3, 3]), b.random("conv.b", [16])], "conv",
               kernel_shape=[3, 3])
    x = b.node("Relu", [x], "relu")
    x = b.node("Flatten", [x], "flatten")
    b.node("Gemm", [x, b.random("fc.w", [10, 16]), b.random("fc.b", [10])], "fc", transB=1)
    path = save_model(b, tmp_path / "one_pixel.onnx", [1, C, 3, 3])
    plan = build_and_emulate(path, tmp_path / "chosen")
    on_fpga(plan, [n.name for n in b.nodes])
    found = {u.nodes[0]: u for s in plan.subfunctions for u in s.execution_units}
    assert found["conv"].io_type == found["conv"].hls.io_type == "io_parallel"
    top = tmp_path / "chosen" / found["conv"].hls.project / "firmware" / f"{found['conv'].name}.cpp"
    assert "hls::stream" not in top.read_text()
    assert all(u.verification.passed for s in plan.subfunctions for u in s.execution_units)
    pinned = hetdeploy.plan(path, "pynq-z2", policy="support", io_types={"conv": "io_stream"}).plan
    assert next(u for s in pinned.subfunctions for u in s.execution_units if u.nodes[0] == "conv").io_type == \
        "io_stream"


@pytest.mark.slow
def test_a_folded_depthwise_convolution_stays_under_latency_and_is_right(tmp_path):
    """A 72-channel depthwise convolution, stride 2, folded to reuse factor 72: hls4ml 1.3's Resource
    strategy C-simulates it wrongly (differs by 12.5 from onnxruntime at every reuse factor, which is
    why the folding keeps depthwise convolutions under Latency); under Latency it is within tolerance,
    and --strategy resource on it is refused in one line."""
    b = Builder(6)
    b.node("Conv", ["input", b.random("dw.w", [72, 1, 3, 3]), b.random("dw.b", [72])], "dw", group=72,
           kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    path = save_model(b, tmp_path / "depthwise.onnx", [1, 72, 16, 16])
    plan = build_and_emulate(path, tmp_path / "dw", reuse_factors={"dw": 72})
    [unit] = [u for s in plan.subfunctions for u in s.execution_units]
    assert (unit.reuse_factor, unit.strategy) == (72, "Latency") and unit.verification.passed
    refused = r"runs as a depthwise convolution \(or an average pooling\), which hls4ml 1.3 computes right only under"
    with pytest.raises(hetdeploy.core.errors.UserError, match=refused):
        build(BuildOptions(model=path, board="pynq-z2", out_dir=tmp_path / "r", policy="support",
                           strategies={"dw": "Resource"}), progress=lambda m: None)


@pytest.mark.slow
def test_a_mobilenet_v2_shaped_network_in_bands_matches_onnxruntime(tmp_path):
    """MobileNetV2's first stages at 64 x 64 (graphs.mobilenet_v2: stem, inverted residual blocks of 1 x 1
    expansion, 3 x 3 depthwise and 1 x 1 projection, residual Adds), planned by the latency policy on the
    PYNQ-Z2 with the stem and two depthwise convolutions (one strided) forced into small bands: every unit
    within tolerance at 16 bits (none widened), the pipeline emulated within tolerance."""
    import graphs

    graph = graphs.mobilenet_v2(64, ((1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2)), stem=8, last=64, classes=10)
    plan, found = build_in_bands(graph, "pynq-z2", {"Conv_0": (7, 5), "Conv_3": (5, 7), "Conv_12": (3, 6)}, tmp_path)
    depthwise = [n.name for n in graph.nodes if n.op == "Conv" and n.attrs.get("group", 1) > 1]
    adds = [n.name for n in graph.nodes if n.op == "Add"]
    on_fpga(plan, depthwise[:3] + adds[:2])  # the last block stays on the A9 (the chip is full)
    assert all(found[n].strategy == "Latency" for n in depthwise if n in found)


def build_in_bands(graph, board, bands, tmp_path):
    """``graph`` (graphs.Graph) built for ``board`` by the latency policy with each node of ``bands`` on its FPGA
    (--device: the partition weighs a node before its bands) in bands of its rows, checked to run in its count of
    them; every unit verified (none widened) and the pipeline emulated within tolerance. (The plan, its units by
    their first node.)"""
    import graphs

    onnx.save(graphs.to_onnx(graph), str(tmp_path / "model.onnx"))
    plan = build(BuildOptions(model=tmp_path / "model.onnx", board=board, out_dir=tmp_path / "out",
                              band_rows={n: rows for n, (rows, _) in bands.items()},
                              devices=dict.fromkeys(bands, "fpga")), progress=lambda m: None)
    found = {u.nodes[0]: u for s in plan.subfunctions for u in s.execution_units}
    assert {n: (found[n].band.rows, found[n].band.count) for n in bands} == bands
    assert not plan.widened and all(u.verification.passed for u in found.values())
    result = emulate(tmp_path / "out", None, 2)
    assert result.comparison.passed, result.table()
    return plan, found


@pytest.mark.slow
@pytest.mark.long  # (units in bands: the MobileNetV2-shaped build above and test_units_run_in_bands_match_onnxruntime)
def test_a_resnet18_shaped_network_in_bands_builds_for_the_kv260_with_most_macs_on_the_fpga(tmp_path):
    """ResNet-18 at 3 x 64 x 64 (graphs.resnet18, widths 4 to 32: its stem, MaxPool, eight basic blocks with
    their residual Adds and strided 1 x 1 shortcuts) planned by the latency policy for the KV260, the stem and
    two block convolutions forced into bands: at least 80 % of the convolution and matrix MACs on the FPGA, the
    residual Adds with them, every unit within tolerance, the pipeline emulated within tolerance."""
    import graphs
    from hetdeploy.intake.model import load_model
    from hetdeploy.planning.cost import node_work

    graph = graphs.resnet18(64, (4, 8, 16, 32), classes=10)
    plan, _ = build_in_bands(graph, "kv260", {"Conv_0": (8, 4), "Conv_4": (5, 4), "Conv_11": (7, 3)}, tmp_path)
    on_fpga_nodes = {n for s in plan.subfunctions if s.hls is not None for n in s.nodes}
    macs = {n.name: node_work(n).macs for n in load_model(tmp_path / "model.onnx").graph.nodes}
    assert sum(macs[n] for n in on_fpga_nodes) >= 0.8 * sum(macs.values())
    adds = [n.name for n in graph.nodes if n.op == "Add"]
    assert sum(a in on_fpga_nodes for a in adds) >= 6, adds


@pytest.mark.slow
def test_a_resnet18_shaped_network_on_the_engine_matches_onnxruntime(tmp_path):
    """ResNet-18 at 3 x 64 x 64 (graphs.resnet18, widths 4 to 32) for a KV260 of 64 BRAM18s with every convolution
    (its BatchNormalization folded in, 3 x 3 and strided 1 x 1 shortcuts, the 7 x 7 stride-2 stem) and the
    classifier pinned to the layer-sequential engine (--strategy NODE=engine): they share one engine, their weights
    in the DDR image, their buffers in URAM (40 lanes); the activations the BRAM left to them does not hold go to
    the URAM the engine leaves (the top's uram array, bound to URAM), not to DDR; every unit within tolerance at 16 bits (none widened), the pipeline emulated
    within tolerance."""
    import graphs

    graph = graphs.resnet18(64, (4, 8, 16, 32), classes=10)
    onnx.save(graphs.to_onnx(graph), str(tmp_path / "model.onnx"))
    pinned = [n.name for n in graph.nodes if n.op in ("Conv", "Gemm")]
    shipped = (Path(hetdeploy.__file__).parent / "boards" / "kv260.yaml").read_text()
    board = tmp_path / "kv260-64.yaml"
    board.write_text(shipped.replace("bram18: 288,", "bram18: 64,"))
    plan = build_and_emulate(tmp_path / "model.onnx", tmp_path / "out", str(board),
                             strategies={n: "Engine" for n in pinned})
    found = {u.nodes[0]: u for s in plan.subfunctions for u in s.execution_units}
    assert all(found[n].engine is not None and found[n].verification.passed for n in pinned)
    assert not plan.widened
    (sub,) = [s for s in plan.subfunctions if s.hls is not None]
    top = (tmp_path / "out" / sub.hls.project / f"{sub.name}_top.cpp").read_text()
    assert top.count("#pragma HLS ALLOCATION function instances=") == 1  # one engine for all of them
    engine = found[pinned[0]].engine
    declared = (tmp_path / "out" / sub.hls.project / f"{sub.name}_units.h").read_text()
    assert engine.uram_lanes > 0 and f"engine<16, 16, 16, {engine.lanes}, {engine.uram_lanes}, " in declared
    image = (tmp_path / "out" / sub.hls.ddr_image).read_bytes()
    weights = [b for b in sub.memory.buffers if b.kind == "weights"]
    # each unit's weights from a word of the widest weights port on (the engine's reads its own in 128-bit words)
    assert len(image) == max(b.offset + b.size for b in weights) and all(b.offset % 64 == 0 for b in weights)
    in_uram = [b for b in sub.memory.buffers if b.memory == "uram"]
    assert in_uram and sub.memory.uram_bytes >= max(b.offset + b.size for b in in_uram)
    assert not [b for b in sub.memory.buffers if b.memory == "ddr" and b.kind == "activation"]
    assert "#pragma HLS BIND_STORAGE variable=uram type=ram_t2p impl=uram" in top
    assert len(set(re.findall(r"\buram \+ (\d+)", top))) == len({b.offset for b in in_uram})  # the units' reads


@pytest.mark.slow
def test_engine_inputs_in_ddr_are_staged_on_chip_and_match_onnxruntime(tmp_path):
    """A ResNet-18 (widths 6 to 48) on a KV260 of 48 BRAM18s and no URAM, every buffer its own bytes
    (--memory-strategy fastest), its engine pinned to 16 lanes of 4 values (two pixels at once: the layers of two
    tiles or more share each pair's windows), under the latency policy: the inputs of the stem (its window walked
    along its rows), of 3 x 3 convolutions and of a strided 1 x 1 shortcut lie in DDR. Each such unit stages them
    (its engine layer ``staged``): the rows a row of output pixels reads copied, a burst each, to the subfunction's
    staging buffer on chip, which its windows read; no window loop reads DDR. The top passes each call that buffer; the
    residual Adds fused into the engine units before them, their other maps read from DDR by some and from chip by
    others; the whole pipeline, emulated in C-simulation, within tolerance of onnxruntime; the staging's cycles
    are the plan's."""
    import graphs
    from hetdeploy.planning.units import ARENA_WORD_BYTES, engine_staging_cycles, staging_bytes

    graph = graphs.resnet18(64, (6, 12, 24, 48), classes=10)
    onnx.save(graphs.to_onnx(graph), str(tmp_path / "model.onnx"))
    pinned = [n.name for n in graph.nodes if n.op in ("Conv", "Gemm")]
    shipped = (Path(hetdeploy.__file__).parent / "boards" / "kv260.yaml").read_text()
    board = tmp_path / "kv260-48.yaml"
    board.write_text(shipped.replace("bram18: 288,", "bram18: 48,").replace("uram: 64}", "uram: 0}"))
    plan = build(BuildOptions(model=tmp_path / "model.onnx", board=str(board), out_dir=tmp_path / "out",
                              memory_strategy="fastest", engine_size=(16, 4),
                              strategies={n: "Engine" for n in pinned}),
                 progress=lambda m: None)
    emulated = emulate(tmp_path / "out", None, 1)
    assert emulated.comparison.passed, emulated.table()
    (sub,) = [s for s in plan.subfunctions if s.hls is not None]
    where = {b.tensor: b for b in sub.memory.buffers}
    staged = [u for u in sub.execution_units if u.engine is not None and u.engine.staged]
    assert {tuple(u.engine.kernel) for u in staged} == {(7, 7), (3, 3), (1, 1)}
    # units whose pairs share their windows among their tiles, staged and not, a residual added by some
    shared = [u for u in sub.execution_units if u.engine is not None and _shares_windows(u, 16, where)]
    assert {u.engine.staged for u in shared} == {True, False} and any(u.engine.residual for u in shared)
    assert all(where[u.inputs[0]].memory == "ddr" and u.verification.passed for u in staged)
    adding = [u for u in sub.execution_units if u.engine is not None and u.engine.residual]
    assert {where[u.inputs[1]].memory == "ddr" for u in adding} == {True, False} and any(u in adding for u in staged)
    assert all(where[u.inputs[0]].memory != "ddr" for u in sub.execution_units if u.engine and not u.engine.staged)
    (staging,) = [b for b in sub.memory.buffers if b.kind == "staging"]
    assert staging.memory == "bram" and staging.size >= max(staging_bytes(u.engine, 2) for u in staged)
    top = (tmp_path / "out" / sub.hls.project / f"{sub.name}_top.cpp").read_text().split(CSIM_ENTRIES)[0]
    # each call's staging place, then its residual's
    places = re.findall(r"hetdeploy::engine_place\{(-?\d), (\d+)\}, hetdeploy::engine_place\{-?\d, \d+\}, "
                        r"engine_weights", top)
    staged_places = [p for p in places if p[0] != "-1"]  # each staged call's staging buffer: (memory, word)
    word = ARENA_WORD_BYTES
    assert len(staged_places) == len(staged) and {w for _, w in staged_places} == {str(staging.offset // word)}
    cycles = sum(engine_staging_cycles(u.engine, 16, where[u.inputs[0]].offset // word) for u in staged)
    assert sub.memory.engine_staging_s == pytest.approx(cycles / 200e6)


def _shares_windows(unit, width: int, where) -> bool:
    """Whether engine.h runs an engine unit's pairs of pixels sharing their windows among its tiles
    (engine_shares_windows, its buffers holding two tiles or more) at ``width`` bits, its output where ``where``
    puts it."""
    from hetdeploy.planning.units import costs

    layer, per_word = unit.engine, costs.ARENA_WORD_BYTES // costs.element_bytes(width)
    channels = layer.channels // layer.groups
    written = 1 if layer.residual or where[unit.outputs[0]].memory == "ddr" else 2
    entries = [-(-values // per_word) * (per_word // layer.vector) for values in (layer.buffer_window, layer.window)]
    return costs.engine_shares_windows(
        layer.shared and layer.pixels == 2, layer.lanes % per_word == 0 and layer.filters % per_word == 0, False,
        bool(costs.engine_row_values(layer.kernel[1], channels, layer.groups, layer.dilations[1], width)),
        layer.groups, channels % layer.vector == 0, layer.window // layer.vector, layer.lanes // per_word, written,
        layer.residual) and layer.filters > layer.lanes and entries[0] >= 2 * entries[1]


@pytest.mark.slow
def test_an_engine_input_in_ddr_is_copied_on_chip_for_its_tiles_and_matches_onnxruntime(tmp_path):
    """Five convolutions on the engine (16 lanes of 4 values) on a KV260 of 56 BRAM18s, no URAM and DDR ports of 64
    bits (1.6 GB/s at 200 MHz: half a 128-bit arena word a cycle, so that a word a copy or staging reads takes two
    cycles, plan_memory's stretch): the map the second writes (8 x 8 x 64) lies in DDR, live while the 32 KiB input
    is and then the third's 256 filters are written. The third reads it in 16 tiles: staging its rows again for each
    would take more than twice a copy, so it asks for a copy of its own step, which fits on chip (the board's
    reserve): the top copies the map there in one burst (arena.h's copy_words) before the unit runs, and the unit
    reads the copy (its layer ``copied``); the plan charges the copy's cycles, not the map's bytes. The pipeline,
    emulated in C-simulation, within tolerance of onnxruntime."""
    import graphs
    from hetdeploy.planning.units import ARENA_WORD_BYTES, copy_cycles

    b = graphs.Builder([1, 64, 16, 16])
    a = b.conv("input", 16, 3)
    q = b.conv(a, 64, 1, stride=2)
    e = b.conv(q, 256, 1)
    # (a ReLU ends each branch before the Add: the top adds the two, no engine unit)
    graph = b.graph(b.add(b.unary("Relu", b.conv(e, 16, 1)), b.unary("Relu", b.conv(a, 16, 3, stride=2))))
    onnx.save(graphs.to_onnx(graph), str(tmp_path / "model.onnx"))
    shipped = (Path(hetdeploy.__file__).parent / "boards" / "kv260.yaml").read_text()
    board = tmp_path / "kv260-56.yaml"
    board.write_text(shipped.replace("bram18: 288,", "bram18: 56,").replace("uram: 64}", "uram: 0}").replace(
        "bandwidth_bytes_per_s: 3.2e+9, ports: 4", "bandwidth_bytes_per_s: 1.6e+9, ports: 4"))
    plan = build(BuildOptions(model=tmp_path / "model.onnx", board=str(board), out_dir=tmp_path / "out",
                              memory_strategy="greedy", engine_size=(16, 4),
                              strategies={n.name: "Engine" for n in graph.nodes if n.op == "Conv"}),
                 progress=lambda m: None)
    emulated = emulate(tmp_path / "out", None, 1)
    assert emulated.comparison.passed, emulated.table()
    (sub,) = [s for s in plan.subfunctions if s.hls is not None]
    where = {b.tensor: b for b in sub.memory.buffers}
    (copied,) = [u for u in sub.execution_units if u.engine is not None and u.engine.copied]
    assert copied.engine.filters == 256 and where[copied.inputs[0]].memory == "ddr"
    copy = where[f"{copied.name}.copy"]
    assert copy.kind == "copy" and copy.memory != "ddr" and copy.size == where[copied.inputs[0]].size
    top = (tmp_path / "out" / sub.hls.project / f"{sub.name}_top.cpp").read_text().split(CSIM_ENTRIES)[0]
    memory = {"bram": "arena", "uram": "uram", "reserved": "reserve"}[copy.memory]
    word = ARENA_WORD_BYTES
    assert f"hetdeploy::copy_words(ddr + {where[copied.inputs[0]].offset // word}, {memory} + {copy.offset // word}, " \
           f"{copy.size // word});" in top
    assert sub.memory.engine_staging_s == pytest.approx(copy_cycles(copy.size) * word / 8 / 200e6)


@pytest.mark.slow
def test_the_folding_puts_what_hls4ml_cannot_hold_on_the_engine_and_it_matches_onnxruntime(tmp_path, capsys):
    """ResNet-18 at 3 x 64 x 64 with widths 16 to 128 (graphs.resnet18) for the PYNQ-Z2, the whole network given
    the FPGA (the support policy; the latency policy estimates its last stage a little faster on the A9: 13.8 ms a
    sample against 14.2), nothing pinned: hls4ml's units for all of it do not fit the xc7z020, so the folding puts
    the convolutions they cannot hold on the engine, each residual Add (with its ReLU) fused into the engine unit of
    the convolution before it (the engine adds the block's input as it writes that convolution's outputs); every
    unit within tolerance at 16 bits (none widened), the pipeline emulated within tolerance."""
    import graphs

    graph = graphs.resnet18(64, (16, 32, 64, 128), classes=10)
    onnx.save(graphs.to_onnx(graph), str(tmp_path / "model.onnx"))
    plan = build(BuildOptions(model=tmp_path / "model.onnx", board="pynq-z2", out_dir=tmp_path / "out",
                              policy="support"), progress=lambda m: None)
    (sub,) = plan.subfunctions  # the whole network on the FPGA
    assert sub.kind == "fpga"
    on_engine = [u for u in sub.execution_units if u.engine is not None]
    adding = [u for u in on_engine if u.engine.residual]
    ops = {n.name: n.op for n in graph.nodes}
    assert len(adding) == sum(n.op == "Add" for n in graph.nodes)
    assert not [u for u in sub.execution_units if u.pe == "add"]
    assert all([ops[n] for n in u.nodes] == ["Conv", "Add", "Relu"] and len(u.inputs) == 2 for u in adding)
    assert not plan.widened and all(u.verification.passed for u in sub.execution_units)
    result = emulate(tmp_path / "out", None, 2)
    assert result.comparison.passed, result.table()
    # `config --folding` pins each unit on the engine there: the plan replays
    import yaml

    from hetdeploy.commands.api import plan as plan_only
    from hetdeploy.commands.cli import main

    assert main(["config", str(tmp_path / "out"), "--folding"]) == 0
    written = yaml.safe_load(capsys.readouterr().out)
    assert all(written["nodes"][u.nodes[0]]["strategy"] == "engine" for u in on_engine)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(written))
    replayed = plan_only(config=tmp_path / "c.yaml").plan
    assert [(u.nodes, u.strategy, u.reuse_factor) for u in replayed.subfunctions[0].execution_units] == \
        [(u.nodes, u.strategy, u.reuse_factor) for u in sub.execution_units]


@pytest.mark.slow
def test_a_softmax_whose_inputs_spread_over_half_their_range_is_right(tmp_path):
    """Sized on inputs up to 4 (ap_fixed<16,4>: -8 to 8), verified on 5 and -5: max - x is 10, which
    hls4ml's own ap_ufixed<15,3> for it wraps to 2 (exp(-2) where exp(-10) is meant); the build's
    holds it."""
    b = Builder(3)
    b.node("Softmax", ["input"], "softmax", axis=-1)
    path = save_model(b, tmp_path / "softmax.onnx", [1, 5])
    rng = np.random.default_rng(3)
    calibration = rng.uniform(-4, 4, [8, 5]).astype(np.float32)
    calibration[0, 0] = 4.0
    np.save(tmp_path / "calibration.npy", calibration)
    np.save(tmp_path / "spread.npy", np.array([[5.0, -5.0, 0.0, 1.0, -1.0]], np.float32))
    plan = build(BuildOptions(model=path, board="pynq-z2", out_dir=tmp_path / "out", policy="support",
                              calibration=tmp_path / "calibration.npy", verify_input=tmp_path / "spread.npy"),
                 progress=lambda m: None)
    on_fpga(plan, ["softmax"])
    check = plan.subfunctions[0].verification
    assert check.passed and check.max_abs_error < 0.01 * check.outputs[0].peak, check


@pytest.mark.slow
def test_residual_and_inception_blocks_run_wholly_on_the_fpga(tmp_path):
    """Conv-BN-Relu-Conv-BN-Add-Relu, then four parallel branches (1x1, 3x3, 5x5 convolutions and a
    pooling branch) joined by one Concat and a Relu: every node of the user's model is on the FPGA
    (or folded into a node that is)."""
    b = Builder(3)
    C = op_models.CHANNELS

    def conv(x, name, k=3, out=C):
        return b.node("Conv", [x, b.random(f"{name}.w", [out, C, k, k]), b.random(f"{name}.b", [out])], name,
                      kernel_shape=[k, k], pads=[k // 2] * 4)

    def bn(x, name):
        return b.node("BatchNormalization", [x, b.random(f"{name}.s", [C]), b.random(f"{name}.b", [C]),
                                             b.random(f"{name}.m", [C]),
                                             b.const(f"{name}.v", b.rng.uniform(0.5, 2, C))], name)

    y = b.node("Relu", [bn(conv("input", "res.conv1"), "res.bn1")], "res.relu1")
    y = bn(conv(y, "res.conv2"), "res.bn2")
    x = b.node("Relu", [b.node("Add", [y, "input"], "res.add")], "res.relu2")
    branches = [conv(x, "inc.b1", 1), conv(x, "inc.b3", 3), conv(x, "inc.b5", 5),
                conv(b.node("MaxPool", [x], "inc.pool", kernel_shape=[2, 2], strides=[2, 2]), "inc.bp", 1)]
    branches[3] = b.node("Resize", [branches[3], "", b.const("up", [1.0, 1.0, 2.0, 2.0])], "inc.up", mode="nearest")
    b.node("Relu", [b.node("Concat", branches, "inc.concat", axis=1)], "inc.relu")
    path = save_model(b, tmp_path / "blocks.onnx", [1, C, 8, 8])
    plan = build_and_emulate(path, tmp_path / "blocks")
    assert [s.kind for s in plan.subfunctions] == ["fpga"]
    for name in (n.name for n in b.nodes):
        where = plan.node_map[name]
        assert where.get("unit") or where.get("folded_into"), (name, where)
    assert plan.node_map["res.bn1"]["folded_into"] == "res.conv1"


@pytest.mark.slow
def test_the_window_ops_hls4ml_cannot_run_are_reduced_by_the_top(tmp_path):
    """ResNet's stem pooling (kernel 3, stride 2, padding 1), a 1-D MaxPool with a stride of 1 and a
    global average over 12 x 12 stay on the FPGA, each a unit of the top's window PE (no hls4ml project),
    checked against onnxruntime like every unit; a MaxPool hls4ml runs stays on its pool PE."""
    b = Builder(1)
    C = op_models.CHANNELS
    conv = lambda x, name, stride=1: b.node("Conv", [x, b.random(f"{name}.w", [C, C, 3, 3]),  # noqa: E731
                                                     b.random(f"{name}.b", [C])], name, kernel_shape=[3, 3],
                                            pads=[1, 1, 1, 1], strides=[stride, stride])
    x = b.node("Relu", [conv("input", "stem.conv", 2)], "stem.relu")
    x = b.node("MaxPool", [x], "stem.pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = b.node("MaxPool", [conv(x, "conv2")], "pool2", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Reshape", [conv(x, "conv3"), b.const("rows", [1, C, 36])], "rows")
    x = b.node("MaxPool", [x], "pool1d", kernel_shape=[3], strides=[1], pads=[1, 1])
    x = b.node("Reshape", [x, b.const("square", [1, C, 6, 6])], "square")
    x = b.node("Relu", [b.node("Resize", [x, "", b.const("scales", [1.0, 1.0, 2.0, 2.0])], "up", mode="nearest")],
               "up.relu")
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], "gap")], "flat")
    b.node("Gemm", [x, b.random("fc.w", [3, C]), b.random("fc.b", [3])], "fc", transB=1)
    path = save_model(b, tmp_path / "stem.onnx", [1, C, 48, 48])
    plan = build_and_emulate(path, tmp_path / "stem")
    where = on_fpga(plan, [n.name for n in b.nodes])
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    for name, reduce in (("stem.pool", "max"), ("pool1d", "max"), ("gap", "mean")):
        unit = units[where[name]["unit"]]
        assert (unit.pe, unit.hls, unit.window.reduce, unit.verification.passed) == ("window", None, reduce, True)
    assert units[where["pool2"]["unit"]].pe == "pool" and units[where["pool2"]["unit"]].hls is not None
    assert len({s.name for s in plan.subfunctions}) == 1  # one FPGA call: nothing went back to the CPU


@pytest.mark.slow
@pytest.mark.parametrize("reuse_factor", [1, 8])
def test_a_channel_shuffle_is_one_table_of_the_tops_and_matches_onnxruntime(tmp_path, reuse_factor):
    """ShuffleNet's channel shuffle as its exporters write it (Reshape to groups, Transpose, Reshape back) between two
    grouped convolutions on the KV260's engine: the three relayouts are one unit of the top, one table of steps moving
    each value once (made from running the three ops on the buffer's positions), not three, as folded (reuse factor
    8, a word's lanes at 16 bits: one input word held) or not; the unit and the pipeline within tolerance of
    onnxruntime (steps that missed the Transpose would move the channels wrong)."""
    b = Builder(1)

    def conv(x, name, kernel):
        weights = b.random(f"{name}.w", [12, 4, kernel, kernel])
        x = b.node("Conv", [x, weights, b.random(f"{name}.b", [12])], name, kernel_shape=[kernel, kernel], group=3,
                   pads=[kernel // 2] * 4)
        return b.node("Relu", [x], f"{name}.relu")

    x = conv("input", "grouped1", 1)
    x = b.node("Reshape", [x, b.const("groups", [1, 3, 4, 6, 6])], "to_groups")
    x = b.node("Transpose", [x], "shuffle", perm=[0, 2, 1, 3, 4])
    x = b.node("Reshape", [x, b.const("channels", [1, 12, 6, 6])], "to_channels")
    conv(x, "grouped3", 3)
    path = save_model(b, tmp_path / "shuffle.onnx", [1, 12, 6, 6])
    plan = build_and_emulate(path, tmp_path / "shuffle", "kv260", reuse_factors={"to_groups": reuse_factor})
    where = on_fpga(plan, [n.name for n in b.nodes])
    assert len({where[n]["unit"] for n in ("to_groups", "shuffle", "to_channels")}) == 1
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    moved = units[where["shuffle"]["unit"]]
    assert (moved.pe, len(moved.nodes), bool(moved.index_table), moved.verification.passed) == ("data", 3, True, True)
    table = (tmp_path / "shuffle" / "hls" / where["shuffle"]["subfunction"] / moved.index_table).read_text()
    held = int(re.search(rf"{moved.name}_held = (\d+);", table).group(1))  # input words
    assert moved.reuse_factor == reuse_factor and (held == 1 if reuse_factor > 1 else 1 < held <= 8)


@pytest.mark.parametrize("top", ["sequential", "dataflow"])
def test_inceptions_four_branches_are_one_concat_of_the_tops_and_match_onnxruntime(tmp_path, top):
    """An Inception block's Concat of four branches of 16 channels, which intake splits into a chain of
    three two-input Concats, on the KV260: one unit of the top's concat PE, each branch moved once into its channels
    of the output (sequential: arena.h's concat_slice a branch; dataflow: a pixel's channels of the four at once),
    within tolerance of onnxruntime, the pipeline emulated (a branch moved into the wrong channels fails)."""
    b = Builder(1)

    def conv(x, name, filters, kernel):
        weights = b.random(f"{name}.w", [filters, 8, kernel, kernel])
        return b.node("Relu", [b.node("Conv", [x, weights, b.random(f"{name}.b", [filters])], name,
                                      kernel_shape=[kernel, kernel], pads=[kernel // 2] * 4)], f"{name}.relu")

    branches = [conv("input", "b1", 16, 1), conv("input", "b3", 16, 3), conv("input", "b5", 16, 5),
                conv("input", "b3b", 16, 3)]
    b.node("Relu", [b.node("Concat", branches, "concat", axis=1)], "relu")
    path = save_model(b, tmp_path / "inception.onnx", [1, 8, 6, 6])
    plan = build_and_emulate(path, tmp_path / "inception", "kv260", top=top)
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    unit = units[on_fpga(plan, ["concat"])["concat"]["unit"]]
    assert (unit.pe, unit.nodes, unit.verification.passed) == (
        "concat", ["concat.part1", "concat.part2", "concat"], True)
    assert unit.inputs == branches
    assert [s.top.kind for s in plan.subfunctions if s.kind == "fpga"] == [top]


@pytest.mark.slow
def test_convolutions_hls4ml_has_no_layer_for_run_on_the_engine_and_match_onnxruntime(tmp_path):
    """The model zoo's AlexNet's 11 x 11 stride-4 stem, its LRN and its two-group 5 x 5 convolution, ShuffleNet's
    4-group 1 x 1 convolution and its 3 x 3 stride-2 average pooling that does not count the padding (count_include_pad
    0), and a dilated convolution (their attributes as the zoo's files have them), on the KV260: all on the FPGA, the
    convolutions on the engine (the engine_conv PE: hls4ml has no layer for them), the grouped ones run as one group of
    block-diagonal weights (units.engine_dense_groups: fewer cycles; the 4-group one has 2 channels and 4 filters a
    group, no whole word), the layers of at most 128 pairs of pixels after the stem streaming their weights (engine.h's
    engine_stream, the two-group one's block-diagonal), the pooling on the top's window PE, the LRN on the top's lrn PE
    (a word's four values an iteration: reuse factor 1); every unit within tolerance of onnxruntime, the pipeline
    emulated."""
    b = Builder(1)

    def conv(x, name, filters, channels, kernel, group=1, **attrs):
        weights = b.random(f"{name}.w", [filters, channels // group, kernel, kernel])
        x = b.node("Conv", [x, weights, b.random(f"{name}.b", [filters])], name, kernel_shape=[kernel, kernel],
                   group=group, **attrs)
        return b.node("Relu", [x], f"{name}.relu")

    x = conv("input", "stem", 8, 3, 11, strides=[4, 4], pads=[2, 2, 2, 2])  # 67 x 67 -> 16 x 16
    x = b.node("LRN", [x], "norm", size=5, alpha=0.02, beta=0.75, bias=1.0)
    x = conv(x, "grouped5", 8, 8, 5, group=2, pads=[2, 2, 2, 2])
    x = conv(x, "grouped1", 16, 8, 1, group=4)
    x = b.node("AveragePool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # -> 8 x 8
    x = conv(x, "dilated", 8, 16, 3, dilations=[2, 2], pads=[2, 2, 2, 2])
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], "gap")], "flat")
    b.node("Gemm", [x, b.random("fc.w", [3, 8]), b.random("fc.b", [3])], "fc", transB=1)
    path = save_model(b, tmp_path / "zoo_ops.onnx", [1, 3, 67, 67])
    plan = build_and_emulate(path, tmp_path / "zoo_ops", "kv260")  # the PYNQ-Z2 runs LRN on its Cortex-A9s
    where = on_fpga(plan, [n.name for n in b.nodes])
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    for name, streamed in (("stem", False), ("grouped5", True), ("grouped1", True), ("dilated", True)):
        unit = units[where[name]["unit"]]
        assert (unit.pe, unit.strategy, unit.engine.groups, unit.engine.streamed, unit.verification.passed) == (
            "engine_conv", "Engine", 1, streamed, True), name
    pool = units[where["pool"]["unit"]]
    assert (pool.pe, pool.window.reduce, pool.verification.passed) == ("window", "mean_inside", True)
    norm = units[where["norm"]["unit"]]
    assert (norm.pe, norm.local_response.size, norm.reuse_factor, norm.verification.passed) == ("lrn", 5, 1, True)
    assert len({s.name for s in plan.subfunctions}) == 1


@pytest.mark.slow
def test_units_run_in_bands_match_onnxruntime(tmp_path):
    """--band-rows on a padded convolution (bands of 5 of its 20 rows), a strided one (bands of 3 of 10: the
    last band's two rows past the map dropped), hls4ml's MaxPool (bands of 2) and a unit that starts with an
    activation (no halo): each unit's hls4ml layer is made for one band and the top runs it band by band
    through the band buffers of the memory plan; every unit checked against onnxruntime on the whole map."""
    b = Builder(1)
    C = op_models.CHANNELS
    conv = lambda x, name, stride: b.node("Conv", [x, b.random(f"{name}.w", [C, C, 3, 3]),  # noqa: E731
                                                   b.random(f"{name}.b", [C])], name, kernel_shape=[3, 3],
                                          pads=[1, 1, 1, 1], strides=[stride, stride])
    x = b.node("Relu", [conv("input", "conv1", 1)], "relu1")
    x = b.node("Relu", [conv(x, "conv2", 2)], "relu2")
    x = b.node("MaxPool", [x], "pool", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Tanh", [x], "tanh")
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], "gap")], "flat")
    b.node("Gemm", [x, b.random("fc.w", [3, C]), b.random("fc.b", [3])], "fc", transB=1)
    path = save_model(b, tmp_path / "bands.onnx", [1, C, 20, 20])
    plan = build_and_emulate(path, tmp_path / "bands", band_rows={"conv1": 5, "conv2": 3, "pool": 2, "tanh": 2})
    where = on_fpga(plan, [n.name for n in b.nodes])
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    bands = {name: units[where[name]["unit"]].band for name in ("conv1", "conv2", "pool", "tanh")}
    assert {name: (band.count, band.rows, band.input_rows) for name, band in bands.items()} == \
        {"conv1": (4, 5, 7), "conv2": (4, 3, 7), "pool": (3, 2, 4), "tanh": (3, 2, 2)}
    assert all(units[where[name]["unit"]].verification.passed for name in bands)
    (sub,) = plan.subfunctions
    buffers = {buffer.tensor: buffer for buffer in sub.memory.buffers}
    for name in bands:  # written and read within the unit's own step
        unit = units[where[name]["unit"]]
        step = sub.execution_units.index(unit)
        assert (buffers[f"{unit.name}.band_in"].first, buffers[f"{unit.name}.band_in"].last) == (step, step)


@pytest.mark.parametrize("op,reason", [("ThresholdedRelu", "does not list ThresholdedRelu")])
def test_what_hls4ml_cannot_do_stays_on_the_cpu_with_the_reason(tmp_path, op, reason):
    from hetdeploy.steps.build import plan_stages

    path = tmp_path / f"{op}.onnx"
    onnx.save(op_models.op_model(op, 4, "after_layer"), str(path))
    _, _, plan = plan_stages(BuildOptions(model=path, board="pynq-z2", out_dir=tmp_path, policy="support"),
                             lambda k, what: None)
    assert plan.node_map["layer"]["subfunction"].endswith("fpga")
    assert "arm_cpu" in plan.node_map["op"]["subfunction"]
    (fallback,) = [f for f in plan.fpga_fallbacks if f.node == "op"]
    assert fallback.reason == "unsupported" and reason in fallback.detail
    assert json.loads(plan.to_json())["fpga_fallbacks"][0]["detail"] == fallback.detail


# ---------------------------------------------------------------- the lowerings on their own


def lowered(model, lowering):
    before = shape_inference.infer_shapes(model)
    after = onnx.ModelProto()
    after.CopyFrom(before)
    assert lowering(after)
    x = np.random.default_rng(0).normal(0, 2, [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim])
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(  # noqa
        None, {"input": x.astype(np.float32)})[0]
    np.testing.assert_allclose(run(after), run(before), rtol=1e-5, atol=1e-5)
    return [n.op_type for n in after.graph.node]


@pytest.mark.parametrize("op,lowering,ops", [
    ("AveragePool", rewrites.average_pool_to_depthwise_conv, ["Conv"]),
    ("GlobalAveragePool", rewrites.average_pool_to_depthwise_conv, ["Conv"]),
    ("GlobalMaxPool", rewrites.global_max_pool_to_max_pool, ["MaxPool"]),
    ("Mul", rewrites.constant_arithmetic_to_affine, ["BatchNormalization"]),
    ("Add", rewrites.constant_arithmetic_to_affine, ["BatchNormalization"]),
    ("Clip_narrow", rewrites.clip_to_relus, ["BatchNormalization", "Relu", "BatchNormalization", "Relu",
                                             "BatchNormalization"]),
    ("HardSigmoid", rewrites.hard_sigmoid_to_clip, ["BatchNormalization", "Clip"]),
    ("Pad_value", rewrites.pad_value_to_zero, ["BatchNormalization", "Pad", "BatchNormalization"]),
])
def test_lowerings_for_hls4ml_are_exact(op, lowering, ops):
    assert lowered(op_models.op_model(op, 4, "standalone"), lowering) == ops


def test_a_gemm_without_bias_gets_a_zero_one():
    assert lowered(op_models.op_model("Gemm_nobias", 2, "standalone"), rewrites.gemm_bias) == ["Gemm"]


def test_clip_with_one_bound_lowers_to_one_relu():
    b = Builder()
    b.node("Clip", ["input", b.const("lo", -1.0)], "op")
    graph = helper.make_graph(b.nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("op_out", TensorProto.FLOAT, [1, 3])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    assert lowered(model, rewrites.clip_to_relus) == ["BatchNormalization", "Relu", "BatchNormalization"]


@pytest.mark.slow
def test_an_assert_in_hls4ml_cpp_is_a_clear_failure_not_a_crash(tmp_path):
    """A board file that lets hls4ml's pooling take a MaxPool with strides other than its kernel, streamed
    (--io-type: hls4ml's streamed pooling asserts on it; its io_parallel one, which the folding takes on this small
    map, computes it): the C-simulation process dies, hetdeploy says which unit, its op and the log, exits 3 and
    keeps the failed build."""
    import subprocess
    import sys
    from pathlib import Path

    board = (Path(__file__).resolve().parent.parent / "hetdeploy" / "boards" / "pynq-z2.yaml").read_text()
    assert " stride_equals_kernel: true," in board  # the pool PE's limit: hls4ml's pooling takes every MaxPool
    (tmp_path / "loose.yaml").write_text(board.replace(" stride_equals_kernel: true,", "", 1))
    model = tmp_path / "pool.onnx"
    onnx.save(op_models.op_model("MaxPool_stride", 4, "standalone"), str(model))
    result = subprocess.run([sys.executable, "-m", "hetdeploy", "build", str(model), "--board",
                             str(tmp_path / "loose.yaml"), "--policy", "support", "--io-type", "op=stream", "-o",
                             str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 3, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("hetdeploy: error")]
    assert "unit sf0_fpga_u0 (MaxPool; nodes op)" in line and "signal SIGABRT" in line
    log = tmp_path / "out.failed" / "hls" / "sf0_fpga" / "csim_run.log"
    assert str(log) in line and "Assertion" in log.read_text()
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_batchnormalization_of_its_own_is_the_tops_scale_and_shift_even_an_identity(tmp_path):
    """A BatchNormalization of scale 1 and shift 0 after a ReLU, a unit of its own (hls4ml would remove the
    layer, leaving the unit's top one name for its input and its output): the top scales and shifts it itself
    (arena.h's affine, its table of ones and zeros), and the build passes."""
    b = Builder()
    x = b.node("Relu", ["input"], "relu")
    b.node("BatchNormalization", [x, b.const("g", np.ones(4)), b.const("b", np.zeros(4)), b.const("m", np.zeros(4)),
                                  b.const("v", np.ones(4))], "identity_bn", epsilon=0.0)
    plan = build_and_emulate(save_model(b, tmp_path / "nop.onnx", [1, 4]), tmp_path / "out")
    copy = next(u for u in plan.subfunctions[0].execution_units if "identity_bn" in u.nodes)
    assert copy.hls is None and copy.affine and copy.pe == "affine" and copy.verification.passed


@pytest.mark.slow
def test_torchvisions_densenet_block_runs_one_concat_a_layer_on_the_fpga_and_gives_pytorchs_outputs(tmp_path):
    """torchvision's DenseNet block of three layers and its transition (benchmarks/torchvision_models.py --export)
    concatenates all the block's features anew before each layer: a Concat of one, two, three and four tensors. At
    intake the first is its one input and each other one Concat of the one before it and the newest feature (before,
    the Concat of one failed in hls4ml, and a Concat of k a chain of k - 1). Built for the KV260, every node on the
    FPGA in one subfunction, each layer's BatchNormalization and ReLU on the top's scale and shift; each layer's
    features so far lie in the block's last Concat's buffer (units.concats_in_place: a Concat's output written in
    place into the next one's, which the scale and shift before the next layer read as a slice of it), so that a
    Concat moves only the newest feature; the pipeline's outputs within 0.1 % of PyTorch's own on its 8 exported
    samples, which the build neither sized nor verified on."""
    from hetdeploy.commands.api import Pipeline
    from hetdeploy.intake.model import load_model

    data = Path(__file__).parent / "data" / "torch"
    graph = load_model(data / "densenet_block.onnx").graph
    concats = [n for n in graph.nodes if n.op == "Concat"]
    assert [len(n.inputs) for n in concats] == [2, 2, 2]
    assert [concats[k + 1].inputs[0] for k in range(2)] == [concats[k].outputs[0] for k in range(2)]
    plan = build(BuildOptions(model=data / "densenet_block.onnx", board="kv260", out_dir=tmp_path / "out"),
                 progress=lambda m: None)
    (sub,) = plan.subfunctions
    assert sub.kind == "fpga" and len(sub.nodes) == len(graph.nodes) and sub.verification.passed
    assert [u.pe for u in sub.execution_units].count("affine") == 4
    concats = [u for u in sub.execution_units if u.pe == "concat"]
    assert all(u.inputs[0] in u.in_place for u in concats[1:])
    views = {b.tensor: b.view_of for b in sub.memory.buffers if b.view_of}
    assert all(views[u.outputs[0]] == concats[-1].outputs[0] for u in concats[:-1])
    samples = np.load(data / "densenet_block.npz")
    (got,) = Pipeline(tmp_path / "out").predict(samples["x"])
    assert np.isfinite(got).all() and np.max(np.abs(got - samples["y"])) <= 1e-3 * np.max(np.abs(samples["y"]))


@pytest.mark.slow
def test_squeezenets_expands_write_into_their_concats_in_place_and_the_build_gives_pytorchs_outputs(tmp_path):
    """torchvision's SqueezeNet 1.1's first five layers (its stem, its pooling and two Fire modules, as
    torch.onnx.export writes them: benchmarks/torchvision_models.py --export) built for the KV260: the expand
    convolutions on the engine write their outputs straight into their channels of their Fire's Concat
    (units.concats_in_place: their engine layers' out_stride the Concat's 128 channels), so that the top moves only
    the inputs other units wrote (one concat_slice each), none where every input was written in place (the second
    Fire's, the model's output: a Concat of no cycles). Every unit within tolerance of onnxruntime on its own, and the
    pipeline's outputs within 0.1 % of PyTorch's own on its 8 exported samples, which the build neither sized nor
    verified on."""
    from hetdeploy.commands.api import Pipeline

    data = Path(__file__).parent / "data" / "torch"
    plan = build(BuildOptions(model=data / "squeezenet_fires.onnx", board="kv260", out_dir=tmp_path / "out"),
                 progress=lambda m: None)
    (sub,) = plan.subfunctions
    assert sub.kind == "fpga" and sub.verification.passed
    assert all(u.verification.passed for u in sub.execution_units)
    concats = [u for u in sub.execution_units if u.pe == "concat"]
    assert len(concats) == 2 and concats[-1].outputs == ["y"]
    assert concats[-1].in_place == concats[-1].inputs and concats[-1].estimate["latency_cycles"] == 0
    written = {x for u in concats for x in u.in_place}
    assert written > set(concats[-1].inputs)
    assert all(u.engine.out_stride == 128 for u in sub.execution_units if u.outputs[0] in written)
    top = (tmp_path / "out" / "hls" / "sf0_fpga" / "sf0_fpga_top.cpp").read_text()
    moved = sum(x not in written for u in concats for x in u.inputs)
    assert top.split("#ifndef __SYNTHESIS__")[0].count("concat_slice") == moved
    samples = np.load(data / "squeezenet_fires.npz")
    (got,) = Pipeline(tmp_path / "out").predict(samples["x"])
    assert np.isfinite(got).all() and np.max(np.abs(got - samples["y"])) <= 1e-3 * np.max(np.abs(samples["y"]))


@pytest.mark.slow
def test_widened_engine_layers_that_the_final_memory_plan_streams_read_their_weights_as_it_lays_them_out(tmp_path):
    """torchvision's SqueezeNet Fires (torch.onnx.export's file) at --width 8 on a KV260 of three DDR ports (its
    engine's weights through two): verification widens some
    engine units to 12 or 16 bits, and the memory plan of the buffers' real widths, made after their weights were
    written held (the plan's, at 8 bits, streamed none of them: a step of its engine is 4 values, not an 8-bit word's
    8), streams them, so their weights are laid out anew (fpga/engine.py's ``relaid``; without it the widened units
    failed verification). Every unit verified; the pipeline within the build's tolerance of PyTorch's outputs on
    its 8 exported samples, which the build neither sized nor verified on."""
    from hetdeploy.commands.api import Pipeline

    data = Path(__file__).parent / "data" / "torch"
    # (the engine's weights port two bundles, HP1 and HP2, as the KV260's was before HP3: on three, the folding's
    # engine for these Fires differs and no widened layer streams)
    board = tmp_path / "kv260-3-ports.yaml"
    board.write_text((Path(hetdeploy.__file__).parent / "boards" / "kv260.yaml").read_text().replace(
        "bandwidth_bytes_per_s: 3.2e+9, ports: 4}", "bandwidth_bytes_per_s: 3.2e+9, ports: 3}"))
    plan = build(BuildOptions(model=data / "squeezenet_fires.onnx", board=str(board), out_dir=tmp_path / "out",
                              width=8), progress=lambda m: None)
    widened = {w.unit for w in plan.widened}
    units = [u for s in plan.subfunctions for u in s.execution_units]
    assert any(u.engine is not None and u.engine.streamed and u.name in widened for u in units)
    assert all(u.verification.passed for u in units if u.verification is not None)
    samples = np.load(data / "squeezenet_fires.npz")
    (got,) = Pipeline(tmp_path / "out").predict(samples["x"])
    assert np.isfinite(got).all() and np.max(np.abs(got - samples["y"])) <= 0.05 * np.max(np.abs(samples["y"]))


@pytest.mark.slow
def test_relu6_ends_a_convolution_on_the_engine_and_the_build_gives_pytorchs_outputs(tmp_path):
    """MobileNetV2's stem and two inverted residual blocks, torchvision's layers as torch.onnx.export writes them
    (benchmarks/torchvision_models.py --export): ReLU6 is a Clip(0, 6) after each BatchNormalization. The stem, a
    1 x 1 expansion and a depthwise convolution (a lane a channel) pinned to the engine of a KV260 of 180 BRAM18s
    (its maps then in BRAM and in URAM) each end with their Clip there (its output stage clamps to the bounds'
    codes); the pipeline's outputs within 0.1 % of PyTorch's own on its 8 exported samples, which the build neither
    sized nor verified on."""
    from hetdeploy.commands.api import Pipeline
    from hetdeploy.planning.config import hls_strategy

    data = Path(__file__).parent / "data" / "torch"
    engine = ["/0/0.0/Conv", "/1/conv/conv.0/conv.0.0/Conv", "/1/conv/conv.1/conv.1.0/Conv"]
    board = tmp_path / "kv260-180.yaml"
    board.write_text((Path(hetdeploy.__file__).parent / "boards" / "kv260.yaml").read_text().replace(
        "bram18: 288,", "bram18: 180,"))
    plan = build(BuildOptions(model=data / "mbv2_blocks.onnx", board=str(board), out_dir=tmp_path / "out",
                              policy="support", strategies={node: hls_strategy("engine") for node in engine}),
                 progress=lambda m: None)
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    for node in engine:
        unit = units[plan.node_map[node]["unit"]]
        assert (unit.strategy, unit.engine.clip, unit.verification.passed) == ("Engine", [0.0, 6.0], True), node
        assert len(unit.nodes) == 2  # the convolution and its Clip: the BatchNormalization folded at intake
    depthwise = units[plan.node_map[engine[2]]["unit"]].engine
    assert depthwise.depthwise and depthwise.lanes % 8 == 0  # a lane a channel, eight 16-bit channels a word
    declared = (tmp_path / "out" / "hls" / "sf0_fpga" / "sf0_fpga_units.h").read_text()
    # its loop built; its weights read three 128-bit DDR words at a time, one through each of three bundles (the
    # KV260's 128-bit HP ports HP1 to HP3), each its own m_axi port of the top
    engine_template = r"engine<16, 16, 16, \d+, \d+, \d+, \d+, true,\s+3, \d, -?\d, [12], 3, (true|false), \d+>"
    assert (depthwise.port_words, depthwise.bundles) == (3, 3) and re.search(engine_template, declared)
    assert "typedef ap_uint<128> engine_weights_t" in declared
    # its one instance (the ALLOCATION pragma) gets the same memories at every call, wherever a layer's buffers lie
    top = (tmp_path / "out" / "hls" / "sf0_fpga" / "sf0_fpga_top.cpp").read_text()
    for port, bundle in (("engine_weights", "gmem_engine"), ("engine_weights1", "gmem_engine1"),
                         ("engine_weights2", "gmem_engine2")):
        assert f"#pragma HLS INTERFACE m_axi port={port} offset=slave bundle={bundle}" in top
    calls = re.findall(r"sf0_fpga_engine_16_16_16\(([a-z, ]+), hetdeploy::engine_place\{(\d), \d+\}, "
                       r"hetdeploy::engine_place\{(\d), \d+\}", top.split(CSIM_ENTRIES)[0])
    on_engine = [u for s in plan.subfunctions for u in s.execution_units if u.engine is not None]
    # the three pinned, and those the folding finds faster there
    assert len(calls) == len(on_engine) >= 3 and len({memories for memories, _, _ in calls}) == 1
    assert len({place for _, *places in calls for place in places}) > 1  # buffers in more than one memory
    samples = np.load(data / "mbv2_blocks.npz")
    (got,) = Pipeline(tmp_path / "out").predict(samples["x"])
    assert np.isfinite(got).all() and np.max(np.abs(got - samples["y"])) <= 1e-3 * np.max(np.abs(samples["y"]))


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["Gemm", "Conv"])
def test_a_layer_that_adds_its_own_input_runs_on_the_engine_and_matches_onnxruntime(tmp_path, layer):
    """A skip over one layer, the map added the layer's own input (a residual MLP block: Gemm, Add, ReLU; a 1 x 1
    convolution of 24 channels after a 3 x 3 one, its output added to its input, no activation), each layer pinned to
    the KV260's engine: the Add fused into the layer's unit, whose one input is both the layer's and the residual's
    (the unit's ONNX model and the engine's call read it once); every unit within tolerance, the pipeline emulated
    within tolerance of onnxruntime."""
    rng = np.random.default_rng(0)

    def weights(name, shape, scale):
        return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)

    if layer == "Gemm":
        nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], "fc1", transB=1),
                 helper.make_node("Add", ["h", "x"], ["s"], "add"), helper.make_node("Relu", ["s"], ["r"], "relu"),
                 helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], "fc2", transB=1)]
        constants = [weights("w1", (72, 72), 0.15), weights("b1", (72,), 0.1), weights("w2", (10, 72), 0.2),
                     weights("b2", (10,), 0.1)]
        shapes, pinned, adder = ([1, 72], [1, 10]), ["fc1", "fc2"], "fc1"
    else:
        nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], "conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 helper.make_node("Conv", ["c", "w2", "b2"], ["d"], "conv2", kernel_shape=[1, 1]),
                 helper.make_node("Add", ["c", "d"], ["y"], "add")]
        constants = [weights("w1", (24, 3, 3, 3), 0.2), weights("b1", (24,), 0.1), weights("w2", (24, 24, 1, 1), 0.2),
                     weights("b2", (24,), 0.1)]
        shapes, pinned, adder = ([1, 3, 10, 10], [1, 24, 10, 10]), ["conv1", "conv2"], "conv2"
    graph = helper.make_graph(nodes, "skip", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shapes[0])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shapes[1])], constants)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "skip.onnx"))
    plan = build_and_emulate(tmp_path / "skip.onnx", tmp_path / "out", "kv260",
                             strategies={n: "Engine" for n in pinned})
    units = {u.nodes[0]: u for s in plan.subfunctions for u in s.execution_units}
    fused = units[adder]
    assert "add" in fused.nodes and fused.engine.residual and fused.inputs == [fused.residual]
    assert all(u.verification.passed for u in units.values()) and not plan.widened


@pytest.mark.slow
def test_a_dense_layer_deeper_than_the_engines_buffers_runs_in_chunks_and_gives_pytorchs_outputs(tmp_path):
    """torchvision's VGG at a small scale as torch.onnx.export writes it (benchmarks/torchvision_models.py --export:
    two convolutions, their ReLUs and max poolings, the adaptive average pooling, the flattening, a classifier whose
    first Gemm reads 4,704 inputs): that Gemm pinned to the KV260's engine takes only units.ENGINE_DENSE_CHUNK values
    of the lanes' buffers and runs in chunks of their depth (hls/engine.h's dense_tiles); every unit verified, the
    pipeline's outputs within 0.1 % of PyTorch's own on its 8 exported samples, which the build neither sized nor
    verified on."""
    from hetdeploy.commands.api import Pipeline
    from hetdeploy.planning.config import hls_strategy
    from hetdeploy.planning.units.costs import ENGINE_DENSE_CHUNK

    data = Path(__file__).parent / "data" / "torch"
    deep = "/classifier/classifier.0/Gemm"
    plan = build(BuildOptions(model=data / "vgg_head.onnx", board="kv260", out_dir=tmp_path / "out",
                              policy="support", strategies={deep: hls_strategy("engine")}),
                 progress=lambda m: None)
    units = {u.name: u for s in plan.subfunctions for u in s.execution_units}
    layer = units[plan.node_map[deep]["unit"]].engine
    assert layer.dense and layer.window == 4704 and layer.buffer_window == ENGINE_DENSE_CHUNK
    assert all(u.verification.passed for u in units.values())
    samples = np.load(data / "vgg_head.npz")
    (got,) = Pipeline(tmp_path / "out").predict(samples["x"])
    assert np.isfinite(got).all() and np.max(np.abs(got - samples["y"])) <= 1e-3 * np.max(np.abs(samples["y"]))
