"""Execution units, their estimates and folding, as pure functions (hls4ml only as the reference for
which reuse factors it accepts)."""

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import graphs
from hetdeploy.core.board import VITIS_HLS, VIVADO_HLS, load_board
from hetdeploy.core.precision import OCTAVES
from hetdeploy.planning.units import (BAND_FIFO_SHARE, CYCLES, DSP_MIN_CONSTANT_BITS, DSP_MIN_WIDTH, RESOURCES, Folding,
                                      Shape, accumulator_bits, band_of, banded, bram18_blocks, chosen_band, estimate,
                                      estimate_range, fifo_bram18, fold, fold_for_interval, fold_for_rate,
                                      folded_estimate, folding_options, hls4ml_builds, registers_output, resource_parts,
                                      reuse_factors_for, split_units, streams, unit_shape, valid_reuse_factors)
from hetdeploy.planning import units as units_module
from hetdeploy.planning.units import _give_back, band_copy_cycles
from hetdeploy.planning.units.costs import window_rows

FPGA = load_board("pynq-z2").device("fpga")


def conv_stack(layers, channels=64, size=32):
    b = graphs.Builder([1, 3, size, size])
    x = "input"
    for _ in range(layers):
        x = b.unary("Relu", b.unary("BatchNormalization", b.conv(x, channels, 3)))
    x = b.pool("MaxPool", x, 2, 2)
    x = b.op("Flatten", [x], [1, channels * (size // 2) ** 2], axis=1)
    x = b.op("Gemm", [x], [1, 10], channels * (size // 2) ** 2 * 10, transB=1)
    return b.graph(b.op("Softmax", [x], [1, 10], axis=1))


def _head(op_after, n_in=1, n_out=64):
    """A Gemm(n_in -> n_out) unit with ``op_after`` fused after it."""
    b = graphs.Builder([1, n_in])
    head = b.graph(b.unary(op_after, b.op("Gemm", ["input"], [1, n_out], n_in * n_out, transB=1)))
    (unit,) = split_units(head, range(len(head.nodes)), FPGA)
    return unit_shape(head, unit, FPGA.clock_mhz)


def test_a_streamed_units_layers_hand_words_on_through_fifos():
    """Streamed, each hls4ml layer of a unit is a dataflow process: a cycle a FIFO between two; an activation
    without a table passes words through combinationally (no output word in registers), a table's holds its read."""
    gemm = dataclasses.replace(_head("Relu"), streamed=True)
    assert gemm.layers == 2
    assert estimate(gemm, 1, 16)["compute_cycles"] == estimate(dataclasses.replace(gemm, layers=1), 1, 16)[
        "compute_cycles"] + 1
    for op, registered in (("Relu", False), ("LeakyRelu", False), ("Tanh", True)):
        b = graphs.Builder([1, 64])
        alone = b.graph(b.unary(op, "input"))
        (unit,) = split_units(alone, range(len(alone.nodes)), FPGA)
        shape = dataclasses.replace(unit_shape(alone, unit, FPGA.clock_mhz), streamed=True)
        assert (shape.layers, registers_output(shape)) == (1, registered)
        words = estimate(shape, 1, 16)["ff"] - estimate(dataclasses.replace(shape, streamed=False), 1, 16)["ff"]
        assert words == (64 * 16 if registered else 0) - 64 * 16  # io_parallel holds the input vector instead


def test_a_quantized_layers_products_take_its_weight_type_and_add_at_its_accumulators_width():
    """hls4ml's weight type is the quantizer's whatever the data's width (a binary input by 6-bit weights makes
    6-bit products), and each product is cast to accum_t before the adder tree: an adder as wide as the accumulator."""
    # Gemm 16 -> 64, its input 1 bit wide, summed in 16 bits (hls4ml's default precision, as a QKeras design's)
    binary = dataclasses.replace(_head("Relu", n_in=16), weight_bits=6, accum_bits=16)
    multipliers = 16 * 64 // 2  # folded at R = 2
    assert estimate(binary, 2, 1)["lut"] - estimate(dataclasses.replace(binary, weight_bits=None), 2, 1)["lut"] == \
        multipliers * (6 - 1) // 2  # a LUT product a bit of the input by half a bit of the weight
    narrow = dataclasses.replace(binary, accum_bits=8)
    assert estimate(binary, 2, 1)["lut"] - estimate(narrow, 2, 1)["lut"] == multipliers * (16 - 8)


def test_an_auto_accumulator_is_what_hls4ml_infers():
    """hetdeploy leaves hls4ml's accum_t "auto": hls4ml infers the input's bits, the weights', a carry a doubling of
    the products summed and a sign (the types a build of the README's example wrote: ap_fixed<33,13> for its 12-bit
    Dense 256 -> 10, ap_fixed<30,10> for its 5 x 5 convolution of one channel, ap_fixed<41,13> at 16 bits)."""
    dense = Shape("kernel", 256, 10, 1, False, 0, 10, False)
    conv = Shape("kernel", 25, 8, 24 * 24, True, 0, 24 * 24 * 8, False)
    assert [accumulator_bits(dense, 12), accumulator_bits(conv, 12), accumulator_bits(dense, 16)] == [33, 30, 41]
    assert accumulator_bits(dataclasses.replace(dense, weight_bits=4), 12) == 12 + 4 + 8 + 1
    assert accumulator_bits(dataclasses.replace(dense, accum_bits=24), 12) == 24  # --precision NODE=accum:...


def test_units_fuse_batchnorm_and_activation_into_their_layer():
    graph = conv_stack(2)
    units = split_units(graph, range(len(graph.nodes)), FPGA)
    assert [(u.pe, [graph.nodes[i].op for i in u.nodes]) for u in units] == [
        ("conv", ["Conv", "BatchNormalization", "Relu"]),
        ("conv", ["Conv", "BatchNormalization", "Relu"]),
        ("pool", ["MaxPool"]),
        ("data", ["Flatten"]),
        ("dense", ["Gemm", "Softmax"]),
    ]


def test_the_tops_scale_and_shift_shares_its_multipliers_among_a_words_lanes_when_folded():
    """The top's affine unit (a BatchNormalization alone: DenseNet's before each convolution) computes a word's
    lanes a cycle on a multiplier each; at reuse factor R (its loop's II) every R lanes share one, a word each R
    cycles: the folding may give it any R dividing the lanes a word holds (8 at 16 bits, 16 at 8)."""
    shape = Shape("affine", 1, 64, 56 * 56, False, 0, 64 * 56 * 56, False, input_values=64 * 56 * 56)
    for width, lanes in ((16, 8), (8, 16)):
        reuse = [f.reuse_factor for f in folding_options(shape, width)]
        assert reuse == [r for r in (1, 2, 4, 8, 16) if r <= lanes]
        words = 64 * 56 * 56 // lanes
        for r in reuse:
            folded = folded_estimate(shape, Folding(r), width, None)
            assert folded["dsp"] == lanes // r and folded["compute_cycles"] == words * r


def test_the_tops_lrn_computes_a_words_values_over_its_reuse_factor_an_iteration():
    """The top's LRN (AlexNet's, GoogLeNet's, ZFNet's) computes P values an iteration, a word's lanes over its reuse
    factor R: P squares and P float powers at once, so P times the power's resources for 1 / P of the cycles (the
    window's half ahead read first, the power's pipeline once); the folding may give it any R dividing the lanes."""
    from hetdeploy.planning.units.costs import LRN_POWER_DEPTH, LRN_POWER_DSP

    shape = Shape("lrn", 5, 64, 56 * 56, False, 0, 64 * 56 * 56, False, input_values=64 * 56 * 56)
    for width, lanes in ((16, 8), (8, 16)):
        reuse = [f.reuse_factor for f in folding_options(shape, width)]
        assert reuse == [r for r in (1, 2, 4, 8, 16) if r <= lanes]
        for r in reuse:
            values = lanes // r
            folded = folded_estimate(shape, Folding(r), width, None)
            assert folded["dsp"] == values * (1 + LRN_POWER_DSP)
            assert folded["compute_cycles"] == 64 * 56 * 56 // values + -(-2 // values) + LRN_POWER_DEPTH


def test_a_batch_normalization_kept_in_a_unit_is_a_product_a_value():
    """A BatchNormalization left after a layer (intake folds none into a quantized layer's weights) is hls4ml's
    normalize at the unit's reuse factor R (hls4ml_adapter gives it the layer's): ceil(n / R) products by constants
    for the n values of a word (streamed) or of the vector (io_parallel, taking R cycles)."""
    dense = _head("BatchNormalization", n_in=16)
    assert dense.normalizations == 1 and dataclasses.replace(_head("Relu", n_in=16)).normalizations == 0
    alone = dataclasses.replace(dense, normalizations=0)
    for rf in (1, 4):
        added = {k: estimate(dense, rf, 16)[k] - estimate(alone, rf, 16)[k] for k in ("dsp", "compute_cycles")}
        assert added == {"dsp": 64 // rf, "compute_cycles": rf - 1}
    assert estimate(dense, 1, 8)["dsp"] == estimate(alone, 1, 8)["dsp"]  # narrow products: in LUTs
    assert estimate(dense, 1, 8)["lut"] > estimate(alone, 1, 8)["lut"]
    (conv, *_) = [unit_shape(graph, unit, FPGA.clock_mhz)
                  for graph in [conv_stack(1, channels=8, size=6)]
                  for unit in split_units(graph, range(len(graph.nodes)), FPGA)]
    assert conv.normalizations == 1 and conv.streamed
    parallel = dataclasses.replace(conv, streamed=False)
    added = {s: estimate(s, 1, 16)["dsp"] - estimate(dataclasses.replace(s, normalizations=0), 1, 16)["dsp"]
             for s in (conv, parallel)}
    assert added == {conv: 8, parallel: 8 * 6 * 6}


def test_a_chain_of_the_tops_concats_is_one_unit_that_moves_each_tensor_once():
    """Intake splits a Concat of four tensors (Inception's branches) into a chain of two-input Concats; on the top's
    concat PE the chain is one unit, in its last Concat's place, reading the four tensors in order: a word of output a
    cycle (the tensors moved once), not each part's output moved again. Not where a part's output is read elsewhere,
    nor where a tensor's channels are no whole number of words at every width."""
    fpga = load_board("kv260").device("fpga")

    def inception(channels):
        b = graphs.Builder([1, 8, 6, 6])
        x = b.concat([b.conv("input", channels[0], 1), b.conv("input", channels[1], 3)])
        for c in channels[2:]:  # as intake writes it: each part's first input the part before's output
            x = b.concat([x, b.conv("input", c, 1)])
        return b.graph(b.unary("Relu", x))

    graph = inception([32, 16, 48, 16])
    units = split_units(graph, range(len(graph.nodes)), fpga)
    concats = [u for u in units if u.pe == "concat"]
    assert len(concats) == 1
    (unit,) = concats
    assert [graph.nodes[i].op for i in unit.nodes] == ["Concat"] * 3
    assert unit.inputs == graph.nodes[unit.nodes[0]].inputs + [graph.nodes[i].inputs[1] for i in unit.nodes[1:]]
    assert units.index(unit) == max(units.index(u) for u in units if u.output in unit.inputs) + 1
    shape = unit_shape(graph, unit, fpga.clock_mhz)
    assert (shape.n_in, shape.output_values) == (16, 112 * 36)
    assert estimate(shape, 1, 8)["compute_cycles"] == 112 * 36 // 16  # a word a cycle at 8 bits: the output once

    graph = inception([32, 8, 48, 16])  # 8 channels: no whole word of 8-bit values
    assert len([u for u in split_units(graph, range(len(graph.nodes)), fpga) if u.pe == "concat"]) == 3
    graph = inception([32, 16, 48, 16])
    first_part = next(n for n in graph.nodes if n.op == "Concat").outputs[0]
    assert len([u for u in split_units(graph, range(len(graph.nodes)), fpga, keep={first_part})
                if u.pe == "concat"]) == 2  # the first part's output read outside: the other two joined


def test_engine_units_write_a_concats_inputs_in_place_where_nothing_else_reads_them():
    """units.concats_in_place: an input of a Concat of the top's that an engine unit writes is written straight into
    its channels of the output (the unit's out_stride the output's channels; the Concat's in_place), and the
    Concat's cycles are those of moving the others; not an input another node reads too, one the build may not type
    (a pinned unit's), one whose unit adds a residual or is not on the engine or is of another precision, nor one
    whose channels (or first channel) are no whole words at every width."""
    from hetdeploy.core.plan import EngineLayer, ExecutionUnit, Subfunction
    from hetdeploy.planning.units import concats_in_place

    fpga = load_board("kv260").device("fpga")

    def planned(channels, read_elsewhere=(), untyped=(), residual=(), hls=(), wider=()):
        """A Concat of one convolution per entry of ``channels``, each a unit of its own on the engine (``hls``:
        not), the Concat one of the top's: its in_place, each convolution's out_stride, its cycles."""
        b = graphs.Builder([1, 8, 6, 6])
        features = [b.conv("input", c, 1) for c in channels]
        y = b.concat(features)
        for k in read_elsewhere:
            b.unary("Relu", features[k])
        graph = b.graph(y)
        units = []
        for k, node in enumerate(graph.nodes[:len(channels)]):
            layer = EngineLayer(8, [6, 6], channels[k], [6, 6], [1, 1], [1, 1], [0, 0], [1, 1], False, lanes=16,
                                residual=k in residual)
            units.append(ExecutionUnit(f"u{k}", [node.name], "engine_conv", 1, "Engine",
                                       "ap_fixed<16,6>" if k in wider else "ap_fixed<8,6>", {"latency_cycles": 10},
                                       inputs=["input"], outputs=node.outputs,
                                       engine=None if k in hls else layer))
        concat = ExecutionUnit("c", [graph.nodes[len(channels)].name], "concat", 1, "Latency", "ap_fixed<8,6>",
                               {"latency_cycles": 36 * sum(channels) // 16, "compute_cycles": 36 * sum(channels) // 16},
                               inputs=features, outputs=[y])
        sub = Subfunction("sf0_fpga", "fpga", "fpga", [n.name for n in graph.nodes], ["input"], [y],
                          execution_units=units + [concat])
        concats_in_place(graph, sub, fpga, {u.name for u in units if int(u.name[1:]) not in untyped})
        return ([features.index(t) for t in concat.in_place], [u.engine and u.engine.out_stride for u in units],
                concat.estimate["latency_cycles"])

    assert planned([32, 16]) == ([0, 1], [48, 48], 0)
    assert planned([32, 16, 32, 16]) == ([0, 1, 2, 3], [96] * 4, 0)  # a chain of four: one unit
    assert planned([32, 16], read_elsewhere=[1]) == ([0], [48, 0], 36 * 16 // 16)  # the other's words moved
    assert planned([8, 8, 32]) == ([2], [0, 0, 48], 36 * 16 // 16)  # 8 channels: no whole word at 8 bits
    assert planned([32, 8]) == ([], [0, 0], 36 * 40 // 16)  # an output of 40 channels
    # 16 channels from the ninth on: none a word's first
    assert planned([8, 16, 24]) == ([], [0, 0, 0], 36 * 48 // 16)
    assert planned([32, 16], untyped=[0]) == ([1], [0, 48], 36 * 32 // 16)
    assert planned([32, 16], residual=[1]) == ([0], [48, 0], 36 * 16 // 16)
    assert planned([32, 16], hls=[0]) == ([1], [None, 48], 36 * 32 // 16)
    assert planned([32, 16], wider=[0]) == ([1], [0, 48], 36 * 32 // 16)

    def chain(reader):
        """DenseNet's: x1 = Concat(x0, f1), x2 = Concat(x1, f2), each f an engine unit's, x1 read by ``reader`` too:
        each Concat's in_place, the engine units' out_stride."""
        b = graphs.Builder([1, 32, 6, 6])
        f1 = b.conv("input", 16, 3)
        x1 = b.concat(["input", f1])
        read = b.unary("BatchNormalization", x1) if reader == "scale" else b.conv(x1, 16, 1)
        f2 = b.conv(read, 16, 3)
        x2 = b.concat([x1, f2])
        graph = b.graph(x2)
        units = []
        for node in graph.nodes:
            kind = {"Conv": "engine_conv", "Concat": "concat", "BatchNormalization": "affine"}[node.op]
            layer = EngineLayer(32, [6, 6], 16, [6, 6], [1, 1], [1, 1], [0, 0], [1, 1], False, lanes=16) \
                if kind == "engine_conv" else None
            units.append(ExecutionUnit(node.name, [node.name], kind, 1, "Latency", "ap_fixed<8,6>",
                                       {"latency_cycles": 36 * 3, "compute_cycles": 36 * 3},
                                       inputs=list(node.inputs), outputs=node.outputs, engine=layer))
        sub = Subfunction("sf0_fpga", "fpga", "fpga", [n.name for n in graph.nodes], ["input"], [x2],
                          execution_units=units)
        concats_in_place(graph, sub, fpga, {u.name for u in units})
        return [u.in_place for u in units if u.pe == "concat"], [u.engine.out_stride for u in units if u.engine]

    # x1 a slice of x2 (the scale and shift read it there): f1 and f2 written into x2's 64 channels
    assert chain("scale") == ([["Conv_0_out"], ["Concat_1_out", "Conv_3_out"]], [64, 64])
    assert chain("conv") == ([["Conv_0_out"], ["Conv_3_out"]], [48, 0, 64])  # a convolution reads x1 whole


def test_a_tensor_read_elsewhere_is_not_fused_away():
    graph = conv_stack(1)
    conv_out = graph.nodes[0].outputs[0]
    units = split_units(graph, range(len(graph.nodes)), FPGA, keep={conv_out})
    assert [graph.nodes[i].op for i in units[0].nodes] == ["Conv"]


@pytest.mark.parametrize("n_in, n_out", [(16, 64), (64, 32), (32, 5), (27, 32), (576, 64), (1024, 10)])
def test_reuse_factors_are_the_ones_hls4ml_accepts(n_in, n_out):
    from hls4ml.backends.fpga.fpga_backend import FPGABackend

    want = [rf for rf in range(1, n_in * n_out + 1) if FPGABackend._validate_reuse_factor(None, n_in, n_out, rf)]
    assert valid_reuse_factors(n_in, n_out) == want


def test_dense_estimate_follows_hls4ml_multiplier_limit():
    graph = conv_stack(1, channels=4, size=8)
    dense = split_units(graph, range(len(graph.nodes)), FPGA)[-1]
    shape = unit_shape(graph, dense, FPGA.clock_mhz)
    assert (shape.n_in, shape.n_out) == (4 * 16, 10)
    assert shape.softmax  # its Softmax multiplies each of the 10 exponentials by 1 / their sum
    # hls4ml's dense_latency: multiplier_limit = DIV_ROUNDUP(n_in * n_out, R) = 640, 160 and 10 products,
    # and the Softmax's 10, pipelined at a vector a cycle whatever R
    assert {rf: estimate(shape, rf, 16)["dsp"] for rf in (1, 4, 64)} == {1: 650, 4: 170, 64: 20}
    assert estimate(shape, 1, 24)["dsp"] == 1290  # 24 bits are wider than a DSP48's port: two a product
    more, fewer = estimate(shape, 4, 16), estimate(shape, 64, 16)
    assert fewer["latency_cycles"] > more["latency_cycles"] and fewer["dsp"] < more["dsp"]


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 4), channels=st.sampled_from([8, 16, 32, 64]), dsp=st.integers(20, 400),
       bram=st.integers(0, 400), ddr_rate=st.sampled_from([None, 12.0]))
# the most folded options over the budget in flip-flops or DSPs (weights in DDR): the unfolding must not start there
@example(layers=4, channels=16, dsp=20, bram=162, ddr_rate=12.0)
def test_folding_fits_the_budget_whenever_the_most_folded_design_does(layers, channels, dsp, bram, ddr_rate):
    graph = conv_stack(layers, channels, 16)
    shapes = [unit_shape(graph, u, FPGA.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), FPGA)]
    budget = {"dsp": dsp, "bram18": bram, "lut": 47880, "ff": 95760}
    chosen = fold(shapes, budget, 16, ddr_bytes_per_cycle=ddr_rate)
    most_folded = [folded_estimate(s, folding_options(s, 16, ddr_rate)[-1], 16, ddr_rate) for s in shapes]
    fits_folded = all(sum(e[k] for e in most_folded) <= budget[k] for k in RESOURCES)
    if fits_folded:  # the partitioner's check: then folding always succeeds
        assert chosen is not None
    if chosen is not None:
        used = [folded_estimate(s, f, 16, ddr_rate) for s, f in zip(shapes, chosen)]
        assert all(sum(e[k] for e in used) <= budget[k] for k in RESOURCES)
        assert all(f._replace(io_type=None) in folding_options(s, 16, ddr_rate, f.strategy)  # under either io type
                   for s, f in zip(shapes, chosen))
        if ddr_rate is None:
            assert not any(f.weights_in_ddr for f in chosen)


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 4), channels=st.sampled_from([8, 16, 32, 64]), dsp=st.integers(0, 400),
       bram=st.integers(0, 200), ddr_rate=st.sampled_from([None, 12.0]))
def test_the_foldings_early_refusal_changes_no_folding(layers, channels, dsp, bram, ddr_rate):
    """``fold`` refuses at once a budget below the units' least resources (``_least_resources``, the engine sizes
    that leave too little): the same answer as its greedy without that check, folding or None."""
    graph = conv_stack(layers, channels, 16)
    shapes = [unit_shape(graph, u, FPGA.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), FPGA)]
    budget = {"dsp": dsp, "bram18": bram, "lut": 47880, "ff": 95760}
    checked = fold(shapes, budget, 16, ddr_bytes_per_cycle=ddr_rate)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(units_module, "_least_resources", lambda *_: (0,) * len(RESOURCES))
        assert fold(shapes, budget, 16, ddr_bytes_per_cycle=ddr_rate) == checked


@settings(max_examples=25, deadline=None)
@given(layers=st.integers(1, 4), channels=st.sampled_from([8, 16, 32, 64]), dsp=st.integers(20, 400))
@example(layers=4, channels=32, dsp=103)  # the greedy misses the interval the least-latency folding reaches
def test_folding_for_a_dataflow_balances_its_units_at_the_least_interval_the_budget_reaches(layers, channels, dsp):
    """Units that run as a dataflow (``fold_for_interval``): within the budget, their slowest unit's compute cycles
    no more than the least-latency folding's slowest, and (unless it is that folding) ``assert_balanced`` at the
    interval that reaches; no units, no foldings."""
    graph = conv_stack(layers, channels, 16)
    shapes = [unit_shape(graph, u, FPGA.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), FPGA)]
    budget = {"dsp": dsp, "bram18": 280, "lut": 53200, "ff": 106400}
    assert fold_for_interval([], budget, 16) == []
    balanced, fastest = fold_for_interval(shapes, budget, 16), fold(shapes, budget, 16)
    if balanced is None:
        assert fastest is None
        return

    def slowest(foldings):
        return max(folded_estimate(s, f, 16, None)["compute_cycles"] for s, f in zip(shapes, foldings))

    used = [folded_estimate(s, f, 16, None) for s, f in zip(shapes, balanced)]
    assert all(sum(e[k] for e in used) <= budget[k] for k in RESOURCES)
    assert slowest(balanced) <= slowest(fastest)
    interval = slowest(balanced)
    if balanced != fastest:
        assert_balanced(shapes, balanced, budget, interval)


def assert_balanced(shapes, foldings, budget, interval):
    """A dataflow's units at ``interval``: folded as FINN's target_fps folds for it (``fold_for_rate``: the fewest
    resources that reach it) where that greedy reaches it, and none of them one step less folded than the interval
    lets it be, within the budget (a unit faster than it need be holds resources for nothing)."""
    used = [folded_estimate(s, f, 16, None) for s, f in zip(shapes, foldings)]
    by_rate = fold_for_rate(shapes, budget, 16, [[u] for u in range(len(shapes))], [interval] * len(shapes),
                            measure="compute_cycles")
    if by_rate is not None and \
            max(folded_estimate(s, f, 16, None)["compute_cycles"] for s, f in zip(shapes, by_rate)) <= interval:
        assert foldings == by_rate
    totals = {k: sum(e[k] for e in used) for k in RESOURCES}

    def share(unit):
        return sum(unit[k] / budget[k] for k in RESOURCES)

    for shape, folding, now in zip(shapes, foldings, used):
        options = [o._replace(io_type=folding.io_type) for o in folding_options(shape, 16, strategy=folding.strategy)]
        k = options.index(folding)
        if k + 1 < len(options):
            more = folded_estimate(shape, options[k + 1], 16, None)
            assert more["compute_cycles"] > interval or share(more) >= share(now) or \
                any(totals[r] - now[r] + more[r] > budget[r] for r in RESOURCES)


@settings(max_examples=15, deadline=None)
@given(layers=st.integers(1, 4), channels=st.sampled_from([8, 16, 32, 64]), dsp=st.integers(20, 400),
       stretch=st.integers(3, 12))
@example(layers=4, channels=32, dsp=103, stretch=3)
def test_no_unit_of_a_dataflow_is_folded_faster_than_its_float_ports_let_samples_in(layers, channels, dsp, stretch):
    """``fold_for_interval`` with a floor past the interval the budget reaches (the float ports' cycles a sample,
    ``port_interval``): each unit within the floor, ``assert_balanced`` there, and no more of the budget than
    without the floor. The example: the greedy misses the floor, and the least-latency folding reaches it."""
    graph = conv_stack(layers, channels, 16)
    shapes = [unit_shape(graph, u, FPGA.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), FPGA)]
    budget = {"dsp": dsp, "bram18": 280, "lut": 53200, "ff": 106400}
    free = fold_for_interval(shapes, budget, 16)
    if free is None:
        assert fold_for_interval(shapes, budget, 16, floors=[1] * len(shapes)) is None
        return

    def used(foldings):
        return [folded_estimate(s, f, 16, None) for s, f in zip(shapes, foldings)]

    floor = max(e["compute_cycles"] for e in used(free)) * stretch // 2 + 1
    floored = fold_for_interval(shapes, budget, 16, floors=[floor] * len(shapes))
    assert max(e["compute_cycles"] for e in used(floored)) <= floor
    assert all(sum(e[k] for e in used(floored)) <= budget[k] for k in RESOURCES)
    share = {name: sum(sum(e[k] for e in used(f)) / budget[k] for k in RESOURCES)
             for name, f in (("free", free), ("floored", floored))}
    assert share["floored"] <= share["free"] + 1e-9
    assert_balanced(shapes, floored, budget, floor)


def _given_back(steps, budget, starts):
    """``_give_back`` over units whose options (least folded first) are ``steps``' (LUTs, cycles) pairs."""
    options = [[Folding(rf) for rf in range(1, len(unit) + 1)] for unit in steps]
    zero = {k: 0 for k in RESOURCES}

    def estimate_of(u, k):
        return zero | {"lut": steps[u][k][0], "latency_cycles": steps[u][k][1]}
    chosen = _give_back(options, starts, zero | {"lut": budget}, estimate_of)
    return [steps[u][f.reuse_factor - 1] for u, f in enumerate(chosen)]


def test_giving_back_takes_whichever_rule_leaves_the_fewer_cycles():
    """Unfolding where the budget allows, from the most folded (each unit's last option): the step that saves the
    most cycles first can spend the budget on one coarse step (a relayout's multiplexers) that two finer steps of
    another unit put to better use, and the step that saves the most cycles for its share can take a small step that
    leaves no room for a large one; the folding keeps whichever leaves the fewer cycles."""
    coarse = [(90, 100), (0, 400)]  # unfolding saves 300 cycles for 90 LUTs
    fine = [(90, 100), (45, 300), (0, 500)]  # two steps of 200 cycles for 45 LUTs each
    chosen = _given_back([coarse, fine], 90, [[1, 2]])
    assert chosen == [coarse[1], fine[0]]  # 500 cycles, not 600 (the coarse step first)
    small = [(10, 300), (0, 400)]  # 100 cycles for 10 LUTs
    chosen = _given_back([coarse, small], 90, [[1, 1]])
    assert chosen == [coarse[0], small[1]]  # 500 cycles, not 700 (the small step first)
    # from each of several foldings: the coarse unit already unfolded, or every unit at its most folded
    assert _given_back([coarse, fine], 90, [[0, 2]]) == [coarse[0], fine[2]]
    assert _given_back([coarse, fine], 90, [[0, 2], [1, 2]]) == [coarse[1], fine[0]]


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 4), channels=st.sampled_from([8, 16, 32, 64]), dsp=st.integers(20, 400),
       cycles=st.integers(1, 20_000))
def test_folding_for_a_rate_takes_the_fewest_resources_that_reach_it(layers, channels, dsp, cycles):
    """FINN's target_fps: the units of a subfunction within ``cycles`` a sample, each unit as folded as
    that lets it be (no unit can fold one step further and keep the rate), never over the budget;
    where the rate is out of reach, no unit can unfold one step within the budget."""
    graph = conv_stack(layers, channels, 16)
    shapes = [unit_shape(graph, u, FPGA.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), FPGA)]
    budget = {"dsp": dsp, "bram18": 280, "lut": 53200, "ff": 106400}
    chosen = fold_for_rate(shapes, budget, 16, [range(len(shapes))], [cycles])
    most_folded = [folded_estimate(s, folding_options(s, 16)[-1], 16, None) for s in shapes]
    if chosen is None:  # not even the most folded design fits (under the strategies by reuse factor either)
        assert any(sum(e[k] for e in most_folded) > budget[k] for k in RESOURCES)
        return
    used = [folded_estimate(s, f, 16, None) for s, f in zip(shapes, chosen)]
    totals = {k: sum(e[k] for e in used) for k in RESOURCES}
    assert all(totals[k] <= budget[k] for k in RESOURCES)
    took = sum(e["latency_cycles"] for e in used)
    for u, (shape, folding) in enumerate(zip(shapes, chosen)):
        options = [o._replace(io_type=folding.io_type) for o in folding_options(shape, 16, strategy=folding.strategy)]
        k = options.index(folding)
        if took <= cycles and k + 1 < len(options):  # one step more folded misses the rate or frees nothing
            more = folded_estimate(shape, options[k + 1], 16, None)
            assert took - used[u]["latency_cycles"] + more["latency_cycles"] > cycles or \
                not any(more[r] < used[u][r] for r in RESOURCES)
        if took > cycles and k > 0:  # out of reach: unfolding further would not fit
            less = folded_estimate(shape, options[k - 1], 16, None)
            assert less["latency_cycles"] >= used[u]["latency_cycles"] or \
                any(totals[r] - used[u][r] + less[r] > budget[r] for r in RESOURCES)


@pytest.mark.parametrize("depth, bits, blocks", [
    (900, 256, 15),  # 15 blocks of 1024 x 18 side by side (16 of 512 x 36)
    (225, 256, 8),  # 512 x 36: 8 side by side
    (1024, 18, 1), (512, 36, 1), (1025, 18, 2), (16384, 1, 1), (2048, 9, 1),
    (31, 32, 0),  # 992 bits: LUTRAM
    (2, 4096, 0),  # two words: registers
])
def test_bram18_blocks_take_the_best_shape(depth, bits, blocks):
    assert bram18_blocks(depth, bits) == blocks


def test_lookup_tables_are_copied_for_their_reads_and_fifos_counted():
    graph = conv_stack(1, channels=4, size=8)
    units = split_units(graph, range(len(graph.nodes)), FPGA)
    dense = unit_shape(graph, units[-1], FPGA.clock_mhz)  # 64 x 10 and the Softmax: 10 reads of the exponential's
    assert dense.softmax and not dense.fifos and dense.table_layers == 0
    # hls4ml pipelines the Softmax at a vector a cycle whatever R: ceil(10 / 2 ports) copies of the
    # exponential's table and one inverse table, a BRAM18 each at 1,024 entries under Vivado HLS, two under Vitis HLS
    # (VITIS_SOFTMAX_TABLE_BRAM18: the hls4ml tutorial's jet tagger, 8 BRAM18s for 5 outputs)
    vivado = dataclasses.replace(dense, table_entries=1024, hls_tool=VIVADO_HLS)
    assert {rf: estimate(vivado, rf, 16)["bram18"] for rf in (1, 2, 5)} == {1: 6, 2: 6, 5: 6}
    assert dense.hls_tool == VITIS_HLS
    assert estimate(dataclasses.replace(dense, table_entries=1024), 1, 16)["bram18"] == 12
    assert estimate(dense, 1, 16)["bram18"] == 24 * 2  # at hetdeploy's 4,096 entries: 4 blocks a copy
    # a Sigmoid after a 64-wide layer reads its table 64 times a vector: 32 copies (hls4ml's baseline
    # Dense(64) + sigmoid: 32 BRAM18s under Vivado HLS 2020.1 and Vitis HLS 2024.1)
    sigmoid = _head("Sigmoid")
    assert sigmoid.table_layers == 1
    assert estimate(dataclasses.replace(sigmoid, table_entries=1024), 1, 16)["bram18"] == 32
    # each of its 64 reads computes an index (scale, offset, clamp): LUTs a plain ReLU does not take
    extra = estimate(sigmoid, 1, 16)["lut"] - estimate(_head("Relu"), 1, 16)["lut"]
    assert extra == 3072  # about 3 LUT a bit of each of the 64 16-bit reads
    shapes = [(unit_shape(graph, u, FPGA.clock_mhz), u) for u in units]
    conv = next(shape for shape, u in shapes if shape.streamed and len(u.nodes) > 1)
    assert conv.fifos == ((64, 4), (64, 4))  # the 8x8 image of 4 channels between its layers, twice
    # each FIFO 64 words of 4 x 16 = 64 bits: two BRAM18s side by side (36 bits a block); and hls4ml pads the
    # 'same' convolution's input in a ZeroPadding layer of its own, whose FIFO holds the 10 x 10 padded map of 3
    # channels (48 bits): two more; no weights in BRAM at R = 1, no tables
    assert conv.padded and conv.input_map == (10, 10, 3)
    assert estimate(conv, 1, 16)["bram18"] == 4 + 2
    assert estimate(dataclasses.replace(conv, padded=False), 1, 16)["bram18"] == 4


def test_strategies_are_priced_as_hls4ml_lays_them_out_and_chosen_by_cost_unless_pinned():
    """hls4ml's Latency strategy keeps the weights as constants in the fabric at any reuse factor and
    checks none; Resource keeps them in banks R deep and takes only the factors that divide the layer."""
    graph = conv_stack(1, channels=4, size=8)
    shape = unit_shape(graph, split_units(graph, range(len(graph.nodes)), FPGA)[-1], FPGA.clock_mhz)  # dense 64 x 10
    latency, resource = (estimate(shape, 64, 16, strategy=s) for s in ("Latency", "Resource"))
    assert estimate(shape, 64, 16) == resource  # unpinned from reuse factor 64: Resource
    # Resource: a bank 64 deep for each of the 10 multipliers' 16-bit weights; Latency: none (the Softmax's
    # tables in both)
    assert resource["bram18"] - latency["bram18"] == bram18_blocks(64, 10 * 16) > 0
    assert latency["lut"] > resource["lut"] + 640 * 16 // 2 - 1  # 640 weights of 16 bits in LUTs
    assert latency["ff"] > resource["ff"]  # every product waits for its sum
    assert latency["latency_cycles"] == resource["latency_cycles"]
    assert 48 in reuse_factors_for(shape, "Latency") and 48 not in reuse_factors_for(shape, "Resource")
    assert reuse_factors_for(shape, "Latency") == list(range(1, 641))
    assert reuse_factors_for(shape, "Resource") == valid_reuse_factors(64, 10)
    assert all(f.strategy == "Latency" for f in folding_options(shape, 16, 12.0, "Latency"))  # never in DDR
    assert folding_options(shape, 16, 12.0, "Resource")[-1].weights_in_ddr
    assert Folding(8).hls_strategy == "Latency" and Folding(64).hls_strategy == "Resource"
    assert Folding(8, True).hls_strategy == Folding(8, False, "Resource").hls_strategy == "Resource"
    budget = {"dsp": 220, "bram18": 280, "lut": 53200, "ff": 106400}
    assert all(f.hls_strategy == "Resource" for f in fold([shape, shape], budget, 16, strategies={0: "Resource",
                                                                                                  1: "Resource"}))
    assert [f.hls_strategy for f in fold_for_rate([shape], budget, 16, [[0]], [1e9], strategies={0: "Latency"})] \
        == ["Latency"]
    # unpinned, the strategy is a folding choice: LUTs scarce and BRAM plenty, a folded unit keeps its weights
    # in BRAM (Resource) even below reuse factor 64; BRAM scarce, in the fabric (Latency) even from 64
    tables = latency["bram18"]  # the Softmax's, whatever the strategy
    lut_poor, bram_poor = budget | {"lut": 4000, "bram18": 4000}, budget | {"bram18": tables + 1}
    (chosen,) = fold([shape], lut_poor, 16)
    assert 1 < chosen.reuse_factor < 64 and chosen.hls_strategy == "Resource"
    assert fold([shape], lut_poor, 16, strategies={0: "Latency"}) is None  # 640 weights do not fit in LUTs
    # the Softmax's 10 products and at most 10 multipliers: reuse factor 64 or more
    (chosen,) = fold([shape], bram_poor | {"dsp": 20}, 16)
    assert chosen.reuse_factor >= 64 and chosen.hls_strategy == "Latency"
    (chosen,) = fold_for_rate([shape], lut_poor, 16, [[0]], [1e9])  # any rate: the fewest resources
    assert chosen.hls_strategy == "Resource"
    # BRAM plenty too: at reuse factor 64 both are as fast, and the folding leaves the BRAM to the buffers
    (chosen,) = fold([shape], budget | {"dsp": 20}, 16)
    assert (chosen.reuse_factor, chosen.hls_strategy) == (64, "Latency")


def test_the_clock_sets_the_pipeline_depth_and_what_vitis_hls_registers_in_it():
    """The product, the adder tree and Softmax's pipeline keep their delay in time: a unit clocked slower
    fits more of them in a cycle (fewer cycles), faster fewer; the reuse factor's cycles stay, and so do the
    resources under Vivado HLS (every product registered); under Vitis HLS (the partial sums after the adder
    levels a cycle holds) a slower clock registers fewer partial sums."""
    graph = conv_stack(1, channels=4, size=8)
    unit = split_units(graph, range(len(graph.nodes)), FPGA)[-1]  # dense 64 x 10 and its Softmax
    at = {mhz: estimate(unit_shape(graph, unit, mhz, hls_tool="vivado_hls"), 4, 16) for mhz in (100.0, 200.0, 400.0)}
    # at 200 MHz (hls4ml's 5 ns) a product and three adder levels a cycle: 4 + log2(64) / 3 = 2 cycles of
    # the tree, Softmax's 2; moving its 64 inputs and 10 outputs (8 + 2 words of 16 bytes) through the arena's
    # two ports 5 at any clock
    assert at[200.0]["compute_cycles"] == 4 + 2 + 2
    assert at[100.0]["compute_cycles"] == 4 + 1 + 1  # (1 + 6 / 3) / 2 cycles, less the product's own
    assert at[400.0]["compute_cycles"] == 4 + 5 + 4  # (1 + 6 / 3) x 2
    assert all(at[mhz]["latency_cycles"] - at[mhz]["compute_cycles"] == 5 for mhz in at)
    assert all({k: at[mhz][k] for k in RESOURCES} == {k: at[200.0][k] for k in RESOURCES} for mhz in at)
    vitis = {mhz: estimate(unit_shape(graph, unit, mhz), 4, 16) for mhz in (100.0, 200.0, 400.0)}
    assert all(vitis[mhz][k] == at[mhz][k] for mhz in at for k in RESOURCES + CYCLES if k not in ("ff", "bram18"))
    assert all(vitis[mhz]["bram18"] == 2 * at[mhz]["bram18"] for mhz in at)  # its Softmax's tables only
    # Vivado HLS: the 640 products, about 8 FF each (5,120); Vitis HLS: each of the 10 outputs' 64 products
    # summed 6, 3 and 1 adder levels a cycle at 100, 200 and 400 MHz, 1, 8 and 32 partial sums of 16 bits
    assert [at[mhz]["ff"] - vitis[mhz]["ff"] for mhz in (100.0, 200.0, 400.0)] == \
        [5120 - 160, 5120 - 1280, 5120 - 5120]


def test_a_streamed_window_layer_takes_an_iteration_an_input_pixel_of_its_padded_map():
    """hls4ml's io_stream convolution and pooling read their input a pixel an iteration (ReadInputHeight x
    ReadInputWidth, PIPELINE II = reuse factor; pooling's II = 1), whatever the stride, and a padded convolution's
    input comes padded from a ZeroPadding layer of its own (one more dataflow process and its FIFO): a unit's
    cycles count those iterations, not its output pixels (hls4ml's DepthwiseConv2D baseline, 3 x 3 'valid' on
    32 x 32 x 3: 1,028 cycles reported, 1,026 estimated, benchmarks/estimates.py)."""
    def unit(build, side=16, channels=4):
        b = graphs.Builder([1, channels, side, side])
        graph = b.graph(build(b))
        (only,) = split_units(graph, range(len(graph.nodes)), FPGA)
        return only, graph, unit_shape(graph, only, FPGA.clock_mhz)

    pipeline = {}
    for stride in (1, 2):
        for pad in (0, 1):
            _, _, shape = unit(lambda b: b.conv("input", 8, 3, stride=stride, pad=pad))
            side = 16 + 2 * pad
            assert shape.input_map == (side, side, 4) and shape.padded == bool(pad)
            assert shape.vectors == ((side - 3) // stride + 1) ** 2
            for rf in (1, 4):
                cycles = estimate(shape, rf, 16)["compute_cycles"]
                pipeline.setdefault(rf, cycles - side * side * rf - pad)  # the same pipeline's depth each time
                assert cycles == side * side * rf + pad + pipeline[rf], (stride, pad, rf)
    _, _, pool = unit(lambda b: b.pool("MaxPool", "input", 2, 2))
    assert pool.vectors == 64 and estimate(pool, 1, 16)["compute_cycles"] == 16 * 16
    # run in bands, a band's project reads its input rows (its padding above and below dropped), padded at the sides
    conv_unit, graph, shape = unit(lambda b: b.conv("input", 8, 3, pad=1))
    band = band_of(graph, conv_unit, 4)
    assert banded(shape, band).input_map == (band.input_rows, 18, 4)


def test_the_folding_chooses_each_units_io_type_by_cost():
    """hls4ml's IOType as a folding choice: a convolution whose output is one pixel has no line buffer to fill
    and no vectors to overlap, so io_parallel is faster, and on a small map too (streamed, hls4ml's loop reads
    every input pixel at the reuse factor's interval, io_parallel computes the output pixels only); on a larger
    map io_stream is (its moves overlap its arithmetic); a small map's FIFO between its layers would cost BRAM
    besides; a Dense stays io_parallel
    (streamed it holds its output word besides); an io type the user pinned (``io_fixed``) stays, as does
    distributed_arithmetic's (verified streamed only)."""
    from hetdeploy.planning.units import DISTRIBUTED_ARITHMETIC

    def conv_relu(size):
        b = graphs.Builder([1, 8, size, size])
        graph = b.graph(b.unary("Relu", b.conv("input", 16, 3, pad=0)))
        (unit,) = split_units(graph, range(len(graph.nodes)), FPGA)
        return unit_shape(graph, unit, FPGA.clock_mhz)

    budget = {"dsp": 220, "bram18": 280, "lut": 53200, "ff": 106400}
    one_pixel, larger, small = conv_relu(3), conv_relu(24), conv_relu(4)
    (chosen,) = fold([one_pixel], budget, 16)
    assert chosen.io_type == "io_parallel" and one_pixel.streamed  # spatial: streamed unless the folding says
    assert folded_estimate(one_pixel, chosen, 16, None)["latency_cycles"] < \
        folded_estimate(one_pixel, chosen._replace(io_type=None), 16, None)["latency_cycles"]
    assert fold([one_pixel], budget, 16, io_fixed={0})[0].io_type is None
    quantized = dataclasses.replace(one_pixel, weight_bits=4, weight_octaves=(576, 576, 0, 0))
    assert fold([quantized], budget, 8, strategies={0: DISTRIBUTED_ARITHMETIC}) == \
        [Folding(1, False, DISTRIBUTED_ARITHMETIC)]
    assert fold([larger], budget, 16)[0].io_type is None
    (fastest,) = fold([small], budget, 16)
    assert fastest.io_type == "io_parallel"
    fifo = fifo_bram18(small.fifos, 16)  # the map between the convolution and the ReLU, streamed
    assert fifo > 0 and folded_estimate(small, fastest._replace(io_type=None), 16, None)["bram18"] == \
        folded_estimate(small, fastest, 16, None)["bram18"] + fifo
    # for a rate, the fewest resources: folded past the 72 products of its window, where hls4ml's io_parallel
    # convolution under Resource asserts (hls4ml_builds): streamed
    (for_rate,) = fold_for_rate([small], budget, 16, [[0]], [1e9])
    assert for_rate.reuse_factor > small.n_in == 72 and for_rate.io_type is None
    assert not hls4ml_builds(small, for_rate._replace(io_type="io_parallel")) and hls4ml_builds(small, for_rate)
    assert hls4ml_builds(small, Folding(72, False, "Resource", "io_parallel"))
    assert fold([_head("Relu", n_in=16)], budget, 16)[0].io_type is None


def test_the_partitioner_prices_a_node_under_the_io_type_the_folding_may_choose():
    """The partitioner's time of a node alone is its fastest folding that fits under either io type, as the
    folding stage may build it (a convolution with a one-pixel output: io_parallel); its capacity is under its
    shape's own io type, which the folding first fits the units under (``fold``: a partition the folding cannot
    fit would fail the build); a node the folding keeps streamed (a depthwise convolution) is timed so."""
    from hetdeploy.planning.cost import fpga_seconds, most_folded, node_shape
    from hetdeploy.planning.units import IO_TYPES, ddr_bytes_per_cycle, takes_either_io_type

    b = graphs.Builder([1, 8, 3, 3])
    graph = b.graph(b.conv("input", 16, 3, pad=0))
    shape = node_shape(FPGA, graph, 0, 16)
    assert shape.streamed and takes_either_io_type(shape)
    rate = ddr_bytes_per_cycle(FPGA)
    fitting = {io: [e for f in folding_options(shape, 16, rate)
                    if all((e := folded_estimate(shape, f._replace(io_type=io), 16, rate))[k] <= FPGA.budget()[k]
                           for k in RESOURCES)] for io in IO_TYPES}
    under = {io: min(e["latency_cycles"] for e in estimates) for io, estimates in fitting.items()}
    assert under["io_parallel"] < under["io_stream"]
    assert fpga_seconds(FPGA, graph, 0, 16) == under["io_parallel"] / (FPGA.clock_mhz * 1e6)
    assert most_folded(FPGA, graph, 0, 16)[1].io_type is None
    b = graphs.Builder([1, 8, 3, 3])
    depthwise = b.graph(b.conv("input", 8, 3, pad=0, group=8))
    kept = node_shape(FPGA, depthwise, 0, 16)
    assert not takes_either_io_type(kept)
    assert fpga_seconds(FPGA, depthwise, 0, 16) == min(
        e["latency_cycles"] for f in folding_options(kept, 16, rate)
        if all((e := folded_estimate(kept, f, 16, rate))[k] <= FPGA.budget()[k] for k in RESOURCES)
    ) / (FPGA.clock_mhz * 1e6)


def test_the_engine_is_sized_to_the_boards_dsps_and_its_brams_and_urams():
    """``engine_sizes``: the lanes and values a cycle an FPGA's engine may take, every size within its allowance
    (ENGINE_SHARES of the budget's DSPs, BRAM18s and URAM blocks), the first the most multiply-accumulators whose
    multipliers and buffers fit (a word's outputs more lanes break the allowance), URAM's lanes first, two a block;
    a board without URAM puts every lane's buffer in BRAM. ``engine_sizes_for`` orders them by the units' cycles."""
    from hetdeploy.planning.units import (EngineSize, engine_allowance, engine_buffers, engine_cycles_of,
                                          engine_resources, engine_sizes, engine_sizes_for)

    window = 3 * 3 * 512  # ResNet-50's largest
    assert engine_buffers(window, 16, EngineSize(2, 2, 4)) == {"bram18": 0, "uram": 1}  # 2 x 1,152 entries
    assert engine_buffers(4 * window, 16, EngineSize(2, 2, 4)) == {"bram18": 0, "uram": 3}  # 2 x 4,608
    assert engine_buffers(window, 16, EngineSize(3, 0, 4))["bram18"] == 3 * engine_buffers(
        window, 16, EngineSize(1, 0, 4))["bram18"] > 0

    # at 8 bits two lanes' products of a value share a DSP48 (engine.h's ENGINE_PACKED, Xilinx WP486)
    assert engine_resources(window, 8, EngineSize(64, 0, 8))["dsp"] == 64 * 8 // 2 + 4
    assert engine_resources(window, 16, EngineSize(64, 0, 4))["dsp"] == 64 * 4 + 4
    # two output pixels at once: each lane's multipliers twice, its weight buffers once
    pair = engine_resources(window, 16, EngineSize(64, 0, 4, pixels=2))
    assert pair["dsp"] == 2 * 64 * 4 + 4 and pair["bram18"] == engine_resources(window, 16, EngineSize(64, 0, 4))[
        "bram18"]

    def fits(resources, allowance):
        return all(resources[k] <= allowance[k] for k in allowance)

    for board, uram in (("kv260", True), ("zcu104", True), ("pynq-z2", False)):
        fpga = load_board(board).device("fpga")
        allowance = engine_allowance(fpga)
        for width in (16, 8):
            sizes = engine_sizes(width, allowance, window)
            assert all(fits(engine_resources(window, width, size), allowance) for size in sizes)
            assert all(size.uram_lanes % 2 == 0 and size.uram_lanes <= size.lanes for size in sizes)
            most = sizes[0]
            assert (most.uram_lanes > 0) == uram, (board, most)
            step = 64 // width  # lanes come in multiples of a word's outputs
            wider = dataclasses.replace(most, lanes=most.lanes + step)
            assert not fits(engine_resources(window, width, wider), allowance)
            wider_uram = dataclasses.replace(most, lanes=most.lanes + step, uram_lanes=most.uram_lanes + step)
            assert not fits(engine_resources(window, width, wider_uram), allowance)
            assert {size.pixels for size in sizes} == {1, 2}, (board, width)
    fpga = load_board("kv260").device("fpga")
    b = graphs.Builder([1, 64, 14, 14])
    graph = b.graph(b.conv(b.conv("input", 128, 3), 512, 1))
    shapes = [unit_shape(graph, u, fpga.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), fpga)]
    ordered = engine_sizes_for(fpga, 16, shapes)
    cycles = [engine_cycles_of(fpga, 16, shapes, size) for size in ordered]
    assert cycles == sorted(cycles) and cycles[0] < cycles[-1]


def test_the_engines_weights_port_is_as_wide_as_the_boards_ddr_ports_deliver_a_cycle():
    """``engine_ports``: the 128-bit words the engine's weights port reads a cycle and the m_axi bundles it is: a
    bundle on each of the FPGA's DDR ports but the first (``memory.ports``; four at most), and, where those are no
    power of two, as many as the most that is too (a layer streams its weights only on lanes a multiple of the
    port's words), each as many words as a port delivers a cycle at the FPGA's clock (a Zynq UltraScale+ HP port's
    128 bits at 3.2 GB/s and 200 MHz; the PYNQ-Z2's 1.2 GB/s at 100 MHz: one word), up to 512 bits in all (the
    workstation's Alveo DDR). A tile's weights then take a read of the port for each word of that many filters'
    windows (``weight_reads``: the filters a read holds begin at a multiple of them), so a ResNet-50 layer's weights
    load in a third of the cycles on the KV260 through three ports as through one, and the DDR's time for them is
    the three ports'."""
    from hetdeploy.planning.units import (EngineSize, ddr_bytes_per_cycle, engine_cycles, engine_estimate,
                                          engine_ports, engine_sizes_for, weight_reads)

    ports = {board: engine_ports(load_board(board).device("fpga"))
             for board in ("pynq-z2", "ultra96-v2", "kv260", "zcu104", "workstation")}
    assert ports == {"pynq-z2": [(1, 1)], "ultra96-v2": [(1, 1)], "kv260": [(3, 3), (2, 2)],
                     "zcu104": [(3, 3), (2, 2)], "workstation": [(4, 1)]}
    more = {board: engine_ports(dataclasses.replace(load_board(board).device("fpga"), memory=dataclasses.replace(
        load_board(board).device("fpga").memory, ports=n))) for board, n in (("kv260", 5), ("pynq-z2", 3))}
    assert more == {"kv260": [(4, 4)], "pynq-z2": [(2, 2)]}  # four bundles of a word; two of one (of three ports)
    fpga = load_board("kv260").device("fpga")
    b = graphs.Builder([1, 64, 14, 14])
    graph = b.graph(b.conv("input", 128, 3))
    shapes = [unit_shape(graph, u, fpga.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), fpga)]
    assert {(size.port_words, size.bundles) for size in engine_sizes_for(fpga, 16, shapes)} == {(3, 3), (2, 2)}
    # a 1 x 1 layer of few pixels on a port far wider than the DDR delivers: the DDR's time bounds its weights', at
    # the rate of all its bundles' ports
    b = graphs.Builder([1, 512, 1, 1])
    graph = b.graph(b.conv("input", 64, 1))
    shape = unit_shape(graph, split_units(graph, range(len(graph.nodes)), fpga)[0], fpga.clock_mhz)
    rate = ddr_bytes_per_cycle(fpga) / 4  # a port of a quarter of the KV260's rate
    ddr = {n: engine_estimate(dataclasses.replace(shape, engine=EngineSize(32, 0, 4, 4, 1, n)), 16, rate)["ddr_cycles"]
           for n in (1, 2)}
    assert ddr[1] > 2 * ddr[2] > 0
    assert weight_reads(0, 32, 2) == 16 and weight_reads(6, 4, 4) == 2 and weight_reads(7, 1, 2) == 1
    # a tile of 32 filters of a 3 x 3 x 512 window on a 7 x 7 map: its loads are most of its cycles
    one, two, three = (engine_cycles(4608, 32, 49, 16, 32, vector=8, port_words=p) for p in (1, 2, 3))
    assert two["weight_words"] == one["weight_words"] == 32 * (576 + 1)
    assert one["weight_cycles"] == 32 * (576 + 1) and two["weight_cycles"] == 16 * (576 + 1)
    assert three["weight_cycles"] == 11 * (576 + 1)  # 32 filters in reads of 3: the last read's third filter none
    assert one["cycles"] - two["cycles"] == one["weight_cycles"] - two["weight_cycles"]


def test_the_engine_takes_its_units_one_window_value_a_cycle_per_tile_of_lanes():
    """A unit on the engine (of its shape's size: 32 lanes of one value a cycle unless the folding sizes it): per
    tile of lanes filters its weights read a buffer entry a cycle (or as fast
    as the DDR delivers their bytes) and a bias a filter, then its pixels' windows one value a cycle in one loop, each
    pixel's outputs (whole words: 40 filters on 32 lanes) written a word a cycle while the next pixel's window is
    read, the last pixel's after, two words a cycle, each loop's pipeline depth once (``engine_cycles``, which
    tests/test_engine.py holds to engine.h's count); nothing of the chip's besides the engine (``engine_resources``: a DSP a lane, a weight
    buffer a lane as deep as the largest window's words). What the engine cannot compute, ``engine_refusal``
    says."""
    from hetdeploy.planning.units import (ENGINE, ENGINE_MAC_DEPTH, ENGINE_MOVE_DEPTH, EngineSize, engine_refusal,
                                          engine_resources)

    b = graphs.Builder([1, 16, 10, 10])
    graph = b.graph(b.unary("Relu", b.unary("BatchNormalization", b.conv("input", 40, 3))))
    (unit,) = split_units(graph, range(len(graph.nodes)), FPGA)
    assert engine_refusal(graph, unit) is None
    shape = unit_shape(graph, unit, FPGA.clock_mhz)
    lanes = shape.engine.lanes
    assert (lanes, shape.engine.vector) == (32, 1)
    (folding,) = folding_options(shape, 16, 8.0, ENGINE)
    assert folding == Folding(1, True, ENGINE)
    used = folded_estimate(shape, folding, 16, 8.0)
    window, pixels = 16 * 9, 100
    filter_words = window // 8  # eight 16-bit weights a word
    # the two tiles (32 filters, then 8): weight words, biases, and per pixel the window (more iterations than
    # its output words: the first tile's 32 channels take 4 words, the second's 8 one), then the last pixel's words,
    # two a cycle (on chip: a port each)
    tiles = [(32, 32 * filter_words, 4), (8, 8 * filter_words, 1)]
    # (one value a lane a cycle, as an FPGA that allows the engine nothing more gets: a word's eight weights are
    # eight entries of its weight buffers, loaded one a cycle)
    # (its weights port one DDR word wide, as the FPGA's 8 bytes a cycle deliver at least: a read a filter's word,
    # then a read a filter's bias)
    assert shape.engine.port_words == 1
    # (a cycle for each tile's group of one, for its weights, for its one pass of the pixels (its input on chip) and
    # for its pixels in the pass)
    expected = sum(2 + 8 * words - 1 + ENGINE_MOVE_DEPTH + filters - 1 + ENGINE_MOVE_DEPTH
                   + 2 + pixels * window - 1 + ENGINE_MAC_DEPTH + -(-written // 2) - 1 + ENGINE_MOVE_DEPTH
                   for filters, words, written in tiles)
    assert used["latency_cycles"] == expected
    assert {k: used[k] for k in RESOURCES} == {k: 0 for k in RESOURCES}
    slow_ddr = folded_estimate(shape, folding, 16, 0.25)  # a word's 16 bytes take 64 cycles
    words = 40 * filter_words + 40
    assert slow_ddr["ddr_cycles"] == words * 64 - (8 * 40 * filter_words + 40)  # less its loops
    assert slow_ddr["latency_cycles"] == used["latency_cycles"] + slow_ddr["ddr_cycles"]
    size = EngineSize(lanes, 0, 1)
    assert engine_resources(window, 16, size)["dsp"] == lanes + 4
    assert engine_resources(window, 24, size)["dsp"] == 2 * lanes + 4  # beyond 18 bits two DSPs a product
    assert engine_resources(100 * window, 16, size)["bram18"] > engine_resources(window, 16, size)["bram18"] > 0
    assert engine_resources(window, 16, size)["uram"] == 0
    b = graphs.Builder([1, 16, 10, 10])
    graph = b.graph(b.unary("Relu", b.conv("input", 16, 3, group=16)))
    (unit,) = split_units(graph, range(len(graph.nodes)), FPGA)
    assert engine_refusal(graph, unit) is None  # a depthwise convolution: a group's filters a tile
    b = graphs.Builder([1, 16, 10, 10])
    graph = b.graph(b.unary("Sigmoid", b.conv("input", 16, 3)))
    (unit,) = split_units(graph, range(len(graph.nodes)), FPGA)
    assert "Sigmoid" in engine_refusal(graph, unit)


def test_a_grouped_convolution_runs_on_the_engine_as_one_group_where_that_counts_fewer_cycles():
    """ShuffleNet's 1 x 1 convolution of 4 groups of 40 channels and filters (no whole word of 8-bit values: each
    group walked a value a cycle, its outputs written into shared words) runs as one group of block-diagonal weights
    (``engine_dense_groups``), its estimate that one's, but where the DDR delivers its block-diagonal weights (four
    times the bytes) too slowly; a convolution of 2 groups of whole words (AlexNet's) stays
    grouped (as one it would compute twice the products); and none runs as one whose window the lanes' buffers do
    not hold."""
    from hetdeploy.planning.units import EngineSize, engine_cycles, engine_dense_groups, engine_estimate

    def grouped(channels, filters, group, size):
        b = graphs.Builder([1, channels, 14, 14])
        graph = b.graph(b.unary("Relu", b.conv("input", filters, 1, group=group)))
        (unit,) = split_units(graph, range(len(graph.nodes)), FPGA)
        return dataclasses.replace(unit_shape(graph, unit, FPGA.clock_mhz), engine=size)

    size = EngineSize(64, 0, 8, port_words=1, pixels=2, window=512)
    shuffle = grouped(160, 160, 4, size)
    assert engine_dense_groups(shuffle, 8, 16.0)
    assert not engine_dense_groups(shuffle, 8, 0.25)  # its four times the weights' bytes at a quarter byte a cycle
    as_one = engine_cycles(160, 160, 196, 8, 64, vector=8, channels=160, port_words=1, pixels_at_once=2,
                           buffer_window=512)["cycles"]
    assert engine_estimate(shuffle, 8, 16.0)["latency_cycles"] == as_one
    assert as_one < engine_cycles(40, 160, 196, 8, 64, vector=8, channels=40, groups=4, port_words=1,
                                  pixels_at_once=2, buffer_window=512)["cycles"]
    assert not engine_dense_groups(grouped(96, 128, 2, size), 8, 16.0)  # 48 channels and 64 filters a group
    assert not engine_dense_groups(dataclasses.replace(shuffle, engine=dataclasses.replace(size, window=128)), 8,
                                   16.0)


def test_what_hls4ml_computes_combinationally_takes_no_cycle():
    """io_parallel and unfolded, a product with no sum and an activation without a lookup table add no cycle
    (hls4ml's Dense(1 -> 64) + ReLU baselines report 0), a table's registered read one; a sum's adder tree, a
    folded product, a stream's vectors and a table's read take theirs."""
    assert estimate(_head("Relu"), 1, 16)["compute_cycles"] == 0
    assert estimate(_head("Sigmoid"), 1, 16)["compute_cycles"] == 1
    assert FPGA.clock_mhz == 100  # where a product and six adder levels take a cycle (pipeline_cycles)
    assert estimate(_head("Relu", n_in=16), 1, 16)["compute_cycles"] == 1 + 1  # a vector, the 4 levels' one
    assert estimate(_head("Relu"), 2, 16)["compute_cycles"] == 2  # folded: 2 a vector
    # streamed: a vector, and the FIFO between the Gemm's process and the ReLU's (a cycle); a product with no sum
    # and its bias take one cycle even at hls4ml's 5 ns (the Dense(1 -> 64) + ReLU io_stream baselines: 2 cycles)
    for mhz in (FPGA.clock_mhz, 200.0):
        streamed = dataclasses.replace(_head("Relu"), streamed=True, clock_mhz=mhz)
        assert estimate(streamed, 1, 16)["compute_cycles"] == 1 + 1
    for op, cycles in (("Relu", 0), ("Tanh", 1 + 1)):  # alone: a table's unit reads a vector, then its table
        b = graphs.Builder([1, 64])
        alone = b.graph(b.unary(op, "input"))
        (unit,) = split_units(alone, range(len(alone.nodes)), FPGA)
        assert estimate(unit_shape(alone, unit, FPGA.clock_mhz), 1, 16)["compute_cycles"] == cycles


def test_a_units_resources_by_part_sum_to_its_estimate_and_show_a_streamed_layers_fifos_and_line_buffers():
    """resource_parts: each part of a unit's estimate on its own (its arithmetic, control, registers, line buffers,
    FIFOs, lookup tables), summing to the estimate under every folding; a streamed convolution fused with its
    normalization and ReLU shows the FIFOs between its layers (hls4ml's streams, a pixel deep each: BRAM18) and its
    line buffers ((k - 1) rows of its input in 32-bit shift-register LUTs) as lines of their own."""
    graph = conv_stack(2, channels=8, size=16)
    shapes = [unit_shape(graph, u, FPGA.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), FPGA)]
    assert [s.kind for s in shapes][:3] == ["kernel", "kernel", "window"]
    foldings = [Folding(1), Folding(8, False, "Resource"), Folding(1, False, None, "io_parallel"), Folding(4, True)]
    for shape in shapes:
        for folding in foldings:
            ddr = 4.0 if folding.weights_in_ddr else None
            parts = resource_parts(shape, folding, 16, ddr)
            whole = folded_estimate(shape, folding, 16, ddr)
            assert {k: sum(p.get(k, 0) for p in parts.values()) for k in RESOURCES} == \
                {k: whole[k] for k in RESOURCES}, (shape.kind, folding)
    second_conv = shapes[1]  # 8 -> 8 channels on 16 x 16 ('same': read padded, 18 x 18), a FIFO of 256 pixels
    # after the Conv and the BN, and the padding layer's of 18 x 18 before it
    parts = resource_parts(second_conv, Folding(1), 16, None)
    assert list(parts)[:2] == ["arithmetic", "control"] and "input registers" not in parts
    assert parts["line buffers"] == {"lut": 2 * 18 * 8 * 16 // 32}
    # each 256 pixels of 8 x 16 bits: four 512 x 36 BRAM18s side by side; the padding's 324 pixels as many
    assert second_conv.fifos == ((256, 8), (256, 8)) and second_conv.padded
    assert parts["FIFOs"] == {"bram18": 3 * 4}
    assert parts["window registers"]["ff"] == (8 + 9 * 8) * 16
    parallel = resource_parts(second_conv, Folding(1, False, None, "io_parallel"), 16, None)
    assert "FIFOs" not in parallel and "line buffers" not in parallel and "input registers" in parallel
    assert "lookup tables" in resource_parts(shapes[-1], Folding(1), 16, None)  # the dense layer's Softmax
    assert resource_parts(second_conv, Folding(1, False, "Engine"), 16, None) == {}


def test_the_range_where_synthesis_binds_products_to_dsps_or_luts():
    """A product's binding near the rule's thresholds is Vivado's to decide: the estimate gives the resources
    it moves as a range holding the estimate; away from them, none but the LUTs, which reach down to what
    synthesis keeps of the HLS report's (SYNTHESIS_LUT_SHARE)."""
    graph = conv_stack(1, channels=4, size=8)
    shape = unit_shape(graph, split_units(graph, range(len(graph.nodes)), FPGA)[-1], FPGA.clock_mhz)  # dense 64 x 10
    resource = Folding(8, False, "Resource")  # its products registered whatever the tool (no FF range)
    at_threshold = estimate_range(shape, resource, DSP_MIN_WIDTH, None)
    point = estimate(shape, 8, DSP_MIN_WIDTH, strategy="Resource")
    assert set(at_threshold) == {"dsp", "lut"}  # 80 multipliers of 10 bits: DSPs or LUTs
    assert at_threshold["dsp"][0] <= point["dsp"] <= at_threshold["dsp"][1]
    assert at_threshold["dsp"][1] - at_threshold["dsp"][0] == 80
    assert at_threshold["lut"][0] <= point["lut"] <= at_threshold["lut"][1]
    # 16-bit data, no constant weights: DSPs; the LUTs from synthesis's share to the HLS report's
    point = estimate(shape, 8, 16, strategy="Resource")
    assert estimate_range(shape, resource, 16, None) == {"lut": [round(point["lut"] * 0.5), point["lut"]]}
    # unfolded, each product's constant weight decides: codes near DSP_MIN_CONSTANT_BITS are Vivado's call
    codes = dataclasses.replace(shape, weight_octaves=(0, 0, 0, 0, 0, 0, 0, 0, 0, 640))  # 640 weights of 6 bits
    assert estimate_range(codes, Folding(1), 16, None)["dsp"] == [10, 10 + 640]  # and the Softmax's 10


def test_the_range_where_the_hls_tool_cuts_a_latency_layers_pipeline():
    """A Latency layer's FFs are the HLS tool's to decide: its products registered (the estimate, as Vivado HLS
    does) or, the least, only each sum's partial sums after the adder levels a cycle holds (as Vitis HLS does);
    more levels fit a cycle at a slower clock. A Resource layer registers its multipliers under either."""
    graph = conv_stack(1, channels=4, size=8)
    dense = unit_shape(graph, split_units(graph, range(len(graph.nodes)), FPGA)[-1], 200.0)  # 64 x 10, 200 MHz
    point = estimate(dense, 1, 16, products_registered=True)
    least = estimate(dense, 1, 16, products_registered=False)
    # each is its HLS tool's estimate (the board's hls_tool, vitis_hls by default)
    assert estimate(dense, 1, 16) == least == estimate(dataclasses.replace(dense, hls_tool="vitis_hls"), 1, 16)
    vivado = estimate(dataclasses.replace(dense, hls_tool="vivado_hls"), 1, 16)
    assert vivado == {**point, "bram18": point["bram18"] // 2}  # Vivado HLS: the Softmax's tables in half the BRAM
    # 640 products of 8 bits against 10 sums' 64 / 2^3 partial sums of 16 bits
    assert point["ff"] - least["ff"] == 640 * 8 - 10 * 8 * 16
    assert estimate_range(dense, Folding(1), 16, None)["ff"] == [least["ff"], point["ff"]]
    slower = dataclasses.replace(dense, clock_mhz=100.0)  # six levels a cycle: 64 / 2^6 partial sums
    assert point["ff"] - estimate(slower, 1, 16, products_registered=False)["ff"] == 640 * 8 - 10 * 1 * 16
    assert "ff" not in estimate_range(dense, Folding(8, False, "Resource"), 16, None)


def test_weights_in_ddr_free_their_bram_and_cost_the_ddr_reads():
    graph = conv_stack(1, channels=4, size=8)
    shape = unit_shape(graph, split_units(graph, range(len(graph.nodes)), FPGA)[-1], FPGA.clock_mhz)  # dense 64 x 10
    *on_chip, in_ddr = folding_options(shape, 16, 12.0)
    assert in_ddr.weights_in_ddr and not any(f.weights_in_ddr for f in on_chip)
    # 640 weights of 2 bytes at 12 bytes a cycle: 107 cycles a vector; the least reuse factor >= that
    assert in_ddr.reuse_factor == min(f.reuse_factor for f in on_chip if f.reuse_factor >= 107)
    chip, ddr = folded_estimate(shape, on_chip[-1], 16, 12.0), folded_estimate(shape, in_ddr, 16, 12.0)
    assert ddr["bram18"] < chip["bram18"]  # what is left: the Softmax's tables
    assert ddr["latency_cycles"] >= 107
    assert folding_options(shape, 16, None) == on_chip  # no DDR rate: never in DDR
    # only BRAM too short for the weights pushes them to DDR
    assert not any(f.weights_in_ddr for f in fold([shape], {"dsp": 220, "bram18": 280, "lut": 53200, "ff": 106400},
                                                   16, ddr_bytes_per_cycle=12.0))
    exactly_ddr = {k: ddr[k] for k in RESOURCES}  # no folding with the weights on chip fits that
    assert fold([shape], exactly_ddr, 16, ddr_bytes_per_cycle=12.0) == [in_ddr]
    assert fold([shape], exactly_ddr, 16) is None


def test_weights_are_packed_as_ap_fixed_converts_them():
    from hetdeploy.fpga.packing import pack_fixed

    values = np.array([0.1, -0.1, 100.0, -100.0, 0.5 / 1024, -0.5 / 1024])
    codes = np.frombuffer(pack_fixed(values, "ap_fixed<16,6,AP_RND,AP_SAT,0>"), dtype="<i2")
    # 10 fraction bits, round half up, saturate
    assert codes.tolist() == [102, -102, 32767, -32768, 1, 0]
    codes = np.frombuffer(pack_fixed(values[:3], "ap_fixed<18,6>"), dtype="<i4")  # truncate, wrap; 4 bytes each
    assert codes.tolist() == [409, -410, 409600 % (1 << 18) - (1 << 18)]  # 100 wraps to -28
    assert np.frombuffer(pack_fixed(np.array([1.0, 0.0]), "ap_uint<1>"), dtype="u1").tolist() == [1, 0]
    with pytest.raises(ValueError, match="float"):
        pack_fixed(values, "float")


def test_a_units_latency_is_its_arithmetic_plus_moving_its_buffers():
    graph = conv_stack(1, channels=4, size=8)
    conv, *_, dense = [unit_shape(graph, u, FPGA.clock_mhz) for u in split_units(graph, range(len(graph.nodes)), FPGA)]
    assert (conv.input_values, conv.output_values, dense.input_values, dense.output_values) == (192, 256, 64, 10)
    # The arena moves two 128-bit words a cycle, each holding 16, 8 or 4 values (a lane of 1, 2 or 4 bytes). The
    # dense unit reads, computes and writes in turn: at 8 bits 4 + 1 words, 3 cycles; at 16 bits 8 + 2, 5; at
    # 20 bits 16 + 3, 10. The streamed convolution moves its 192 + 256 values while it computes (at most 56
    # words, 28 cycles, under its arithmetic): nothing added.
    for width, moves in ((8, 3), (16, 5), (20, 10)):
        e, c = estimate(dense, 4, width), estimate(conv, 4, width)
        assert e["latency_cycles"] == e["compute_cycles"] + moves and e["buffer_cycles"] == moves
        assert c["latency_cycles"] == c["compute_cycles"] and c["buffer_cycles"] == 0
        assert e["ddr_cycles"] == c["ddr_cycles"] == 0
    # weights in DDR: what a vector waits for its weights (640 x 2 bytes at 12 a cycle: 107 cycles) beyond its
    # reuse factor is the DDR part of its arithmetic
    from hetdeploy.planning.units import Folding

    fast, slow = (folded_estimate(dense, Folding(rf, True), 16, 12.0) for rf in (4, 128))
    assert (fast["ddr_cycles"], slow["ddr_cycles"]) == (107 - 4, 0)
    assert fast["compute_cycles"] - fast["ddr_cycles"] == estimate(dense, 4, 16)["compute_cycles"]


def test_a_window_the_top_reduces_is_priced_by_its_loops():
    """ResNet's stem pooling (kernel 3, stride 2, padding 1) on 12 x 12: a unit of the top's window PE, no hls4ml
    layer. With 8 channels (a whole word of 8 16-bit lanes: arena.h's window_columns), two output rows at once (their
    windows' five rows in three iterations, not three rows in two iterations each), per pair of output rows and
    channel word a cycle, then its 13 columns, the pair's rows two an iteration (rows 0 to 3 for the first pair,
    padding above: 26 iterations; five rows, 39, for the others) and the loop's depth of 4, then each row's 6 output
    words two an iteration (3) and a move's depth of 2: a word x (1 + 29 + 2 x 4) + 2 pairs x a word x (1 + 42 +
    2 x 4) = 140 cycles; folded (reuse factor 2) one row at a time, per output row and channel word a cycle, its 13
    columns, two of their three rows an iteration (one row in the first, padding above), then its 3 pairs of output
    words: 5 x (1 + 29 + 4) + (1 + 16 + 4) = 191, with half the comparators and registers. With 6 channels (no
    whole word: window_values) per output word, per two lanes (the largest power of two dividing 6), a cycle and its
    9 positions (8 + 4): 27 x 4 x 13 = 1404. Its writes are its loops': no cycles besides."""
    def stem(channels):
        b = graphs.Builder([1, channels, 12, 12])
        graph = b.graph(b.pool("MaxPool", "input", 3, 2, 1))
        (unit,) = split_units(graph, [0], FPGA)
        return unit, unit_shape(graph, unit, FPGA.clock_mhz)

    for channels, reuse_factor, cycles in ((8, 1, 140), (8, 2, 191), (6, 1, 1404)):
        unit, shape = stem(channels)
        assert (unit.pe, unit.engine, shape.kind, shape.n_in) == ("window", "top", "gather", 9)
        e = estimate(shape, reuse_factor, 16)
        assert (e["compute_cycles"], e["buffer_cycles"], e["dsp"], e["bram18"]) == (cycles, 0, 0, 0)
    shape = stem(8)[1]
    assert [f.reuse_factor for f in folding_options(shape, 16)] == [1, 2]
    assert [f.reuse_factor for f in folding_options(stem(6)[1], 16)] == [1]
    assert estimate(shape, 2, 16)["lut"] < estimate(shape, 1, 16)["lut"]
    # the C++'s ROWS (window_rows): two for the whole words only; window_values reduces a row at a time
    assert [window_rows(s.pool, 16, 1) for s in (shape, stem(6)[1])] == [2, 1]
    # a comparator and a multiplexer a lane of one word, for each row reduced at once
    assert [resource_parts(s, Folding(rf, False), 16, None)["arithmetic"]["lut"]
            for s, rf in ((shape, 1), (shape, 2), (stem(6)[1], 1))] == [2 * 8 * 16 * 2, 8 * 16 * 2, 8 * 16 * 2]


def test_a_node_goes_to_the_first_pe_that_holds_it_fully_folded():
    """ResNet-50's head averages a 7 x 7 map of 2048 channels (an AveragePool of kernel 7). hls4ml's pooling, the
    board's first PE for it, computes it as a depthwise convolution of 2048 x 49 weights, which no folding fits on
    the chip, so the node goes to the top's window PE, which sums it in place. Over 8 channels the pool holds it and
    keeps it."""
    def head(channels, board):
        b = graphs.Builder([1, channels, 7, 7])
        graph = b.graph(b.pool("AveragePool", "input", 7, 1))
        fpga = load_board(board).device("fpga")
        assert fpga.pes_for(graph.nodes[0]) == ["pool", "window"]
        (unit,) = split_units(graph, [0], fpga)
        return unit.pe

    for board in ("pynq-z2", "kv260"):
        assert (head(2048, board), head(8, board)) == ("window", "pool")


def test_bands_of_a_units_rows_and_their_estimate():
    """A 3 x 3, stride 2, padding 1 convolution + ReLU of 32 x 32 x 3 to 16 x 16 x 8, in bands of 3 output
    rows: 6 bands (the last one's two rows past the map dropped), each 7 input rows (two rows' stride and the
    kernel's halo) from row 6b - 1 (the padding row above the map). One band's FIFO holds 3 of the 16 rows;
    the unit runs 6 times, and the top copies each band in and out (rows of whole 16-bit words: 7 x 12 words in, a
    word read and written an iteration, 84 + 1 cycles with the move's depth of 2, and 3 x 16 words out, 48 + 1: 134
    cycles a band). Rows that are no whole words move a value at a time: 7 rows of 3 x 9 values in, a word of the
    band an iteration reading its 8 values each (II 5 on the memory's two ports, 24 words), and 3 rows of 3 x 9
    values out, a value an iteration read back and written (II 3)."""
    b = graphs.Builder([1, 3, 32, 32])
    graph = b.graph(b.unary("Relu", b.conv("input", 8, 3, stride=2)))
    (unit,) = split_units(graph, [0, 1], FPGA)
    band = band_of(graph, unit, 3)
    assert (band.rows, band.count, band.input_rows, band.input_step, band.pad_top) == (3, 6, 7, 6, 1)
    assert (band.input_row_values, band.output_row_values, band.input_height, band.output_height) == (96, 128, 32, 16)
    assert band_of(graph, unit, 16) is None  # one band is the whole map
    whole = unit_shape(graph, unit, FPGA.clock_mhz)
    one = banded(whole, band)
    assert (one.vectors, one.fifos, one.bands) == (48, ((48, 8),), 6) and whole.fifos == ((256, 8),)
    e, single = estimate(one, 1, 16), estimate(dataclasses.replace(one, bands=1), 1, 16)
    assert e["compute_cycles"] == 6 * single["compute_cycles"]
    assert e["latency_cycles"] == 6 * (single["latency_cycles"] + 134)
    assert band_copy_cycles(7, 27, 16, False) == 23 * 5 + 2 and band_copy_cycles(3, 27, 16, True) == 80 * 3 + 2
    assert {k: e[k] for k in RESOURCES} == {k: single[k] for k in RESOURCES}
    # a unit that starts with a Gemm has no rows to band; one that computes each pixel on its own has no halo
    d = graphs.Builder([1, 16])
    dense = d.graph(d.op("Gemm", ["input"], [1, 4], 64, transB=1))
    with pytest.raises(ValueError, match="bands are for"):
        band_of(dense, split_units(dense, [0], FPGA)[0], 1)
    t = graphs.Builder([1, 4, 10, 10])
    tanh = t.graph(t.unary("Tanh", "input"))
    assert band_of(tanh, split_units(tanh, [0], FPGA)[0], 4).input_rows == 4


def test_a_unit_whose_fifos_hold_too_much_of_the_chip_runs_in_the_fewest_bands_that_do_not():
    """An 8-channel 3 x 3 convolution + BatchNormalization + ReLU on 224 x 224: hls4ml sizes the FIFOs between its
    layers (and its padding layer's before it) to the whole 224 x 224 x 8 map, far past an eighth of the PYNQ-Z2's
    BRAM18s; the chosen bands are the fewest whose FIFOs take at most that. On 14 x 14 the whole map's do: no bands. (A FIFO is a pixel's channels
    wide: however few its rows, 64 channels of 16 bits take 29 BRAM18s side by side, and bands cannot go below.)"""
    def conv_unit(side):
        b = graphs.Builder([1, 8, side, side])
        graph = b.graph(b.conv_bn_relu("input", 8, 3))
        (unit,) = split_units(graph, range(len(graph.nodes)), FPGA)
        return graph, unit, unit_shape(graph, unit, FPGA.clock_mhz)

    budget = FPGA.budget()
    limit = BAND_FIFO_SHARE * budget["bram18"]
    graph, unit, whole = conv_unit(224)
    assert fifo_bram18(streams(whole), 16) > budget["bram18"] and len(streams(whole)) == 3
    band = chosen_band(graph, unit, whole, budget, 16)
    assert fifo_bram18(streams(banded(whole, band)), 16) <= limit < \
        fifo_bram18(streams(banded(whole, band_of(graph, unit, -(-224 // (band.count - 1))))), 16)
    # a reader's FIFO fused after it counts too, a band of it
    with_reader = chosen_band(graph, unit, whole, budget, 16, reader_fifos=[(224 * 224, 8)])
    assert with_reader.count > band.count
    assert chosen_band(*conv_unit(14), budget, 16) is None


def test_the_plan_prices_the_fpga_as_its_units_do():
    """One cost: the partitioner's FPGA time per node the FPGA runs is the unit estimate's, and the plan's FPGA
    subfunction time is the sum of its folded units' cycles and its float ports' words (a word a cycle) at the
    clock; the plan's latency the sum of its subfunctions'."""
    import tempfile
    from pathlib import Path

    import onnx

    import networks
    from hetdeploy.commands.api import plan
    from hetdeploy.intake.model import load_model
    from hetdeploy.planning.cost import CostModel, fpga_seconds

    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "alexnet.onnx"
        onnx.save(networks.alexnet_style(), str(model))
        result = plan(model, "pynq-z2").plan
        graph = load_model(model).graph
    board = load_board("pynq-z2")
    costs = CostModel(graph, board)
    fpga = board.device("fpga")
    runs = [i for i in range(len(graph.nodes)) if fpga.why_not(graph.nodes[i]) is None]
    assert runs and all(costs.seconds["fpga"][i] == fpga_seconds(fpga, graph, i, 16) for i in runs)
    subs = [s for s in result.subfunctions if s.kind == "fpga"]
    assert subs
    for sub in subs:
        cycles = sum(u.estimate["latency_cycles"] for u in sub.execution_units)
        # its float ports moved several floats a word (units.port_floats), a word a cycle
        (x,), (y,) = sub.inputs, sub.outputs
        ports = sub.estimate.in_bytes // 4 // sub.floats_a_word.get(x, 1) + \
            sub.estimate.out_bytes // 4 // sub.floats_a_word.get(y, 1)
        assert sub.top.port_cycles == ports > 0
        assert sub.estimate.compute_s == pytest.approx((cycles + ports) / (fpga.clock_mhz * 1e6), rel=1e-12)
        assert sub.resources["latency_cycles"] == cycles
    total = sum(s.estimate.latency_s for s in result.subfunctions)
    assert result.estimate.latency_s == pytest.approx(total, rel=1e-9)


def test_an_unrolled_units_constant_weights_decide_its_multipliers():
    """At R = 1 each multiplier has one constant weight, which the HLS folds in: a weight that rounds to 0
    takes nothing, one whose code has fewer than DSP_MIN_CONSTANT_BITS bits is LUT shifts and adds; folded
    (R > 1), every multiplier takes W-bit weights in turn, on a DSP, and hls4ml's Latency strategy leaves
    the zeros' products out (multiplier_limit); weights in BRAM (Resource) or DDR: every product counts."""
    b = graphs.Builder([1, 8])
    head = b.graph(b.op("Gemm", ["input"], [1, 4], 32, transB=1))
    (unit,) = split_units(head, range(len(head.nodes)), FPGA)
    full = unit_shape(head, unit, FPGA.clock_mhz, hls_tool="vivado_hls")  # every product registered
    octaves = [0] * OCTAVES
    octaves[0], octaves[10], octaves[-1] = 20, 8, 4  # 8 weights ten octaves under the top: 5-bit codes at 16 bits
    weights = dataclasses.replace(full, weight_octaves=tuple(octaves))
    assert estimate(full, 1, 16)["dsp"] == 32 and estimate(weights, 1, 16)["dsp"] == 20
    unrolled, unknown = estimate(weights, 1, 16), estimate(full, 1, 16)
    # 8 LUT multipliers of 16 x 5 bits; the 4 zeros' adders (the accumulator's bits: 16 + 16 + 3 + 1), held
    # weights (8 LUT) and registers (8 FF) gone
    assert unrolled["lut"] - unknown["lut"] == 8 * 16 * 5 // 2 - 4 * (36 + 8)
    assert unrolled["ff"] - unknown["ff"] == -4 * 8
    assert DSP_MIN_CONSTANT_BITS == 6 and estimate(weights, 1, 17)["dsp"] == 20 + 8  # 6-bit codes at 17 bits: DSPs
    for rf in (2, 4):  # ceil(32 / R) - 4 // R multipliers, the 28 non-zero weights held in LUTs
        assert estimate(weights, rf, 16)["dsp"] == 32 // rf - 4 // rf == estimate(full, rf, 16)["dsp"] - 4 // rf
        assert estimate(full, rf, 16)["lut"] - estimate(weights, rf, 16)["lut"] == 4 // rf * 36 + 4 * 16 // 2
    assert estimate(weights, 64, 16) == estimate(full, 64, 16)  # Resource: weights in BRAM banks
    assert folded_estimate(weights, Folding(1, True), 16, 12.0) == folded_estimate(full, Folding(1, True), 16, 12.0)
    # a quantized model's weights keep their own bits whatever the data's width: 4-bit codes are LUT products
    quantized = dataclasses.replace(full, weight_octaves=tuple([32] + [0] * (OCTAVES - 1)), weight_bits=4)
    assert estimate(quantized, 1, 16)["dsp"] == 0 and estimate(quantized, 2, 16)["dsp"] == 0
    # folded, the multipliers take the weight type's 6 bits (hls4ml's weight precision of a quantized layer)
    assert estimate(dataclasses.replace(quantized, weight_bits=6), 2, 16)["dsp"] == 16


def test_registers_sit_at_the_pipelines_cuts():
    """FF: an io_parallel unit's input vector; every product a sum waits for (Latency: all of them, whatever
    R; Resource: each multiplier's); a table read, and the input beside it where the output may be the input;
    a streamed layer's output word and window; and the control state (hls4ml's io_parallel Dense(1 -> 64) +
    ReLU baseline: 18 FF, 16 for its one input and 2)."""
    relu = _head("Relu")
    assert estimate(relu, 1, 16)["ff"] == 18  # products with no sum: combinational
    sigmoid, elu = _head("Sigmoid"), _head("Elu")
    assert estimate(sigmoid, 1, 16)["ff"] - estimate(relu, 1, 16)["ff"] == 1024  # each of 64 reads, 16 bits
    assert estimate(elu, 1, 16)["ff"] - estimate(relu, 1, 16)["ff"] == 2048  # and ELU's input beside it
    dense = dataclasses.replace(_head("Relu", n_in=16), hls_tool="vivado_hls")  # (Vitis HLS's cuts: above)
    for rf in (1, 2, 8, 32):  # Latency: the 1,024 products all wait for their sums (a 16-bit product: 8 FF)
        assert estimate(dense, rf, 16)["ff"] == 8192 + 256 + 2  # and the 16-value input, and the control
    resource = estimate(dense, 64, 16)  # Resource: 16 multipliers accumulate in place
    assert resource["ff"] == 128 + 256 + 2
    graph = conv_stack(1, channels=8, size=8)
    # 3x3 on 3 channels -> 8
    conv = unit_shape(graph, split_units(graph, range(len(graph.nodes)), FPGA)[0], FPGA.clock_mhz,
                      hls_tool="vivado_hls")
    assert conv.streamed and conv.window_values == 3 * 3 * 3
    # 27 x 8 products, the 8-channel output word and the 27-value window, no input vector in registers; and the
    # word of sums of the BatchNormalization kept after it
    assert estimate(conv, 1, 16)["ff"] == 1728 + 560 + 2 + 8 * 16


def test_a_depthwise_convolution_is_folded_under_latency_only():
    """hls4ml 1.3's Resource strategy computes depthwise convolutions wrongly (tests/test_fpga_ops.py): their
    foldings, the partitioner's and by_cost's alike, are all Latency, weights never in DDR; a grouped
    convolution that is not depthwise and a dense convolution keep both strategies."""
    from hetdeploy.planning.units import by_cost

    b = graphs.Builder([1, 72, 16, 16])
    x = b.conv("input", 72, 3, 2, group=72)
    x = b.conv(x, 72, 3, 1, group=8)
    graph = b.graph(b.conv(x, 64, 1))
    shapes = [unit_shape(graph, u, FPGA.clock_mhz) for u in split_units(graph, [0, 1, 2], FPGA)]
    assert [s.latency_only for s in shapes] == [True, False, False]
    options = folding_options(shapes[0], 16, 1.0)
    assert {f.hls_strategy for f in options} == {"Latency"} and not any(f.weights_in_ddr for f in options)
    assert {f.hls_strategy for f in folding_options(shapes[0], 16, 1.0, "Resource")} == {"Latency"}
    assert {f.hls_strategy for f in folding_options(shapes[2], 16, 1.0)} == {"Latency", "Resource"}
    folded = [next(f for f in folding_options(shape, 16, 1.0) if f.reuse_factor == rf)
              for shape, rf in zip(shapes, (72, 81, 72))]

    def estimate(u, folding):
        return folded_estimate(shapes[u], folding, 16, 1.0)

    # a cost that Resource wins (weights in BRAM banks instead of registers) where it may
    chosen = by_cost(folded, shapes, [16] * 3, {k: 10 ** 9 for k in RESOURCES},
                     estimate, lambda used: (sum(e["ff"] for e in used),), set(), 1.0)
    assert [f.hls_strategy for f in chosen] == ["Latency", "Resource", "Resource"]


def test_distributed_arithmetic_is_weighed_when_asked_for_quantized_kernels_within_the_budget():
    """--weigh-distributed-arithmetic: the folding puts a quantized multiply-accumulate unit under hls4ml's
    distributed_arithmetic (reuse factor 1, no DSP) where that makes the units as fast with a smaller share of
    the chip; never unasked, for float weights, for a depthwise convolution, above da4ml's solve bound, over the
    budget or against a pinned strategy."""
    from hetdeploy.planning.units import DA_MAX_INPUTS, DISTRIBUTED_ARITHMETIC

    b = graphs.Builder([1, 64])
    graph = b.graph(b.unary("Relu", b.op("Gemm", ["input"], [1, 32], 64 * 32, transB=1)))
    (unit,) = split_units(graph, range(len(graph.nodes)), FPGA)
    float_weights = unit_shape(graph, unit, FPGA.clock_mhz)
    assert float_weights.weight_bits is None
    quantized = dataclasses.replace(float_weights, weight_bits=4, weight_octaves=(1024, 512, 256, 256))
    # twice the Z020's LUTs: unfolded, its 2,048 adders are as wide as hls4ml's inferred accumulator (19 bits)
    budget = {"dsp": 220, "bram18": 280, "lut": 2 * 53200, "ff": 106400}
    distributed = Folding(1, False, DISTRIBUTED_ARITHMETIC)
    assert fold([quantized], budget, 8) == [Folding(1)]
    assert fold([quantized], budget, 8, distributed_arithmetic=True) == [distributed]
    chosen, latency = (folded_estimate(quantized, f, 8, None) for f in (distributed, Folding(1)))
    assert chosen["lut"] < latency["lut"] and chosen["dsp"] == 0
    assert chosen["latency_cycles"] == latency["latency_cycles"]
    # a rate only reuse factor 1 reaches: the fewest resources that reach it; any rate: folded further
    fastest = [latency["latency_cycles"]]
    assert fold_for_rate([quantized], budget, 8, [[0]], fastest) == [Folding(1)]
    assert fold_for_rate([quantized], budget, 8, [[0]], fastest, distributed_arithmetic=True) == [distributed]
    assert fold_for_rate([quantized], budget, 8, [[0]], [1e9], distributed_arithmetic=True)[0].reuse_factor > 1
    for shape in (float_weights, dataclasses.replace(quantized, latency_only=True),
                  dataclasses.replace(quantized, n_in=DA_MAX_INPUTS + 1)):
        assert fold([shape], budget, 8, distributed_arithmetic=True)[0].hls_strategy != DISTRIBUTED_ARITHMETIC
    assert fold([quantized], budget, 8, strategies={0: "Latency"}, distributed_arithmetic=True)[0] \
        == Folding(1, False, "Latency")
    # LUTs for every unit but this one under distributed_arithmetic: it is folded instead
    (folded,) = fold([quantized], budget | {"lut": chosen["lut"] - 1}, 8, distributed_arithmetic=True)
    assert folded.reuse_factor > 1 and folded.hls_strategy != DISTRIBUTED_ARITHMETIC


def test_every_folding_hls4ml_accepts_on_a_one_pixel_layer_plans_or_is_refused_in_one_line(tmp_path):
    """Issue 67: a pointwise convolution whose output is one pixel, its reuse factor pinned and its io type left
    to hetdeploy, stopped `plan` with a traceback (fold's ValueError: the folding by_cost gave it, io_parallel, was
    not among the pinned unit's options). Every pin of strategy, io type and reuse factor hls4ml accepts on it,
    each pinned or left: a plan whose unit keeps every pin, or a UserError (it does not fit), nothing else."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from hetdeploy import UserError
    from hetdeploy.commands.api import plan
    from hetdeploy.planning.units import valid_reuse_factors

    weights = np.random.default_rng(0).normal(size=(16, 32, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="pw", kernel_shape=[1, 1]),
         helper.make_node("Relu", ["y"], ["z"], name="relu")], "pointwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 1, 1])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 16, 1, 1])], [numpy_helper.from_array(weights, "w")])
    model = tmp_path / "pointwise.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    planned = refused = 0
    for strategy in (None, "Latency", "Resource"):
        for io in (None, "io_parallel", "io_stream"):
            for rf in valid_reuse_factors(32, 16):
                pins = dict(reuse_factors={"pw": rf}, strategies={"pw": strategy} if strategy else {},
                            io_types={"pw": io} if io else {})
                try:
                    result = plan(model, "pynq-z2", policy="support", **pins).plan
                except UserError:
                    refused += 1
                    continue
                (unit,) = [u for s in result.subfunctions for u in s.execution_units if "pw" in u.nodes]
                assert unit.reuse_factor == rf and (strategy is None or unit.strategy == strategy) and \
                    (io is None or unit.io_type == io), (strategy, io, rf, unit)
                planned += 1
    assert planned and refused  # the unfolded ones do not fit the PYNQ-Z2's DSPs


def test_the_partitioner_counts_the_fifos_between_a_fused_units_layers():
    """A node's usage counts the FIFO to its reader where the unit it is in fuses that reader (the unit's first
    node's PE decides, not the node's own: a BatchNormalization the top would run alone): a Conv, BatchNormalization,
    ReLU unit's two FIFOs, each once."""
    from hetdeploy.planning.cost import reader_fifo, unit_head

    graph = conv_stack(1, channels=8, size=6)
    unit = split_units(graph, range(len(graph.nodes)), FPGA)[0]
    assert [graph.nodes[i].op for i in unit.nodes] == ["Conv", "BatchNormalization", "Relu"]
    assert {unit_head(FPGA, graph, i) for i in unit.nodes} == {unit.nodes[0]}
    counted = [fifo for i in unit.nodes for fifo in reader_fifo(FPGA, graph, i)]
    assert len(counted) == 2 and sorted(counted) == sorted(unit_shape(graph, unit, FPGA.clock_mhz).fifos)


def test_a_dense_layer_of_signs_is_estimated_as_xnors_a_popcount_and_a_sum_an_output():
    """The XNOR-popcount kernel at reuse factor R (hls/xnor_popcount.h): n_out x (n_in / R) XNORs, each output's
    popcount of its n_in / R bits (a balanced tree of adders, a LUT a bit of each sum) and its accumulator-wide sum
    (past R = n_in, n_in n_out / R outputs' one XNOR each); its weights' sign bits R deep in LUTs below 64 and in
    BRAM from 64, constants at R = 1; the cycles of hls4ml's resource strategy at R; only reuse factors that divide the
    inputs or are multiples of them, and only for a layer of signs."""
    from hetdeploy.planning import units
    from hetdeploy.planning.units.costs import popcount_lut

    assert [popcount_lut(n) for n in (1, 2, 3, 4, 8)] == [0, 2, 4, 7, 18]
    signs = dataclasses.replace(Shape("kernel", 784, 64, 1, False, 0, 64, False), bipolar=True, weight_bits=2)
    assert units.takes_xnor_popcount(signs)
    assert not units.takes_xnor_popcount(dataclasses.replace(signs, bipolar=False))
    assert units.reuse_factors_for(signs, units.XNOR_POPCOUNT)[:6] == [1, 2, 4, 7, 8, 14]
    assert all(784 % rf == 0 or rf % 784 == 0 for rf in units.reuse_factors_for(signs, units.XNOR_POPCOUNT))
    assert 1568 in units.reuse_factors_for(signs, units.XNOR_POPCOUNT)
    accumulator = units.accumulator_bits(signs, 2)
    for rf, lut, bram18 in ((56, 64 * (14 + popcount_lut(14) + accumulator) + 64 * 14, 0),
                            (98, 64 * (8 + popcount_lut(8) + accumulator), units.bram18_blocks(98, 64 * 8)),
                            (1, 64 * (popcount_lut(784) + accumulator), 0),
                            (1568, 32 * (1 + accumulator), units.bram18_blocks(1568, 32))):
        xnor = units.estimate(signs, rf, 2, strategy=units.XNOR_POPCOUNT)
        resource = units.estimate(signs, rf, 2, strategy="Resource")
        assert (xnor["lut"] - units.UNIT_CONTROL_LUT, xnor["bram18"]) == (lut, bram18)
        assert xnor["latency_cycles"] == resource["latency_cycles"]
        if rf > 1:
            assert xnor["lut"] < resource["lut"]


def test_a_layer_reads_signs_only_through_ops_that_keep_each_value():
    """A dense layer of -1/+1 weights takes the XNOR-popcount kernel where its input is a BipolarQuant's of scale 1,
    reached through relayouts and max pooling, not through a ReLU (which makes a -1 a 0, no sign)."""
    from hetdeploy.core.graph import Graph, Node
    from hetdeploy.planning import units

    def signs(between: list[str], scale: float = 1.0) -> bool:
        nodes = [Node("sign", "BipolarQuant", ["x"], ["s"], scalars={1: scale})]
        for k, op in enumerate(between):
            nodes.append(Node(f"n{k}", op, [nodes[-1].outputs[0]], [f"t{k}"]))
        nodes.append(Node("fc", "MatMul", [nodes[-1].outputs[0]], ["y"], constants={1: "w"}, bipolar_weights=True))
        return units._signs_by_signs(Graph(nodes, ["x"], ["y"]), nodes[-1])

    assert signs([]) and signs(["Flatten", "MaxPool", "Reshape"])
    assert not signs(["Relu"]) and not signs(["Flatten", "Relu"])
    assert not signs([], scale=0.5)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 40), st.sampled_from([1, 2, 4, 8]), st.integers(0, 2 ** 31))
def test_a_relayouts_steps_move_its_map_each_input_word_about_once(groups, per_group, lanes, seed):
    """relayout_steps on a channel shuffle of ``groups`` x ``per_group`` channels over 9 pixels, a Flatten of its
    pixels and channels, and a random permutation: the steps move exactly the map (index_of), each output word at
    worst a read a lane and a write; a Flatten where a pixel's channels fill whole words, and a shuffle where each
    group's do, read each input word about once (a step a word, and at most a word's lanes of words written alone
    as a period ends)."""
    from hetdeploy.planning.units.relayout import index_of, relayout_steps

    channels, pixels = groups * per_group, 9
    c = np.arange(channels)
    shuffle = (np.arange(pixels)[:, None] * channels + (c % groups * per_group + c // groups)).reshape(-1)
    j = np.arange(pixels * channels)
    flatten = j % pixels * channels + j // pixels
    permutation = np.random.default_rng(seed).permutation(pixels * channels)
    aligned = channels % lanes == 0
    for index, bounded in ((shuffle, per_group % lanes == 0), (flatten, aligned), (permutation, False)):
        steps = relayout_steps(index, lanes, folded=False)
        assert np.array_equal(index_of(steps, lanes, index.size), index) and steps.held <= 2 * lanes
        words = -(-index.size // lanes)
        assert steps.iterations <= words * (lanes + 1)  # each output word's lanes in words of their own at worst
        if bounded:
            assert steps.iterations <= 1.25 * words + lanes * steps.repeat, (index.size, lanes, steps.iterations)
        if lanes > 1:  # folded: each output word's input words
            folded = relayout_steps(index, lanes, folded=True)
            assert folded.held <= 1 and np.array_equal(index_of(folded, lanes, index.size), index)
            assert folded.iterations == sum(len(set(index[w:w + lanes] // lanes)) for w in range(0, index.size, lanes))


def test_planning_knows_a_chain_of_relayouts_map_from_its_nodes_or_bounds_its_steps():
    """chain_of / chain_index on a channel shuffle's nodes (Reshape, Transpose, Reshape: channels-last buffers), a
    Slice of one axis (its constants one-value initializers) and one of two axes (its constants not held: no map);
    where planning has no map, the Data kind charges the bound (each output word's lanes in words of their own); a
    Flatten that keeps the words as they are is a copy."""
    from hetdeploy.core.graph import Node
    from hetdeploy.planning.units.costs import RELAYOUT_DEPTH, Shape, loop_cycles
    from hetdeploy.planning.units.kinds import kind_of
    from hetdeploy.planning.units.relayout import chain_index, chain_of

    shuffle = [Node("a", "Reshape", ["x"], ["a"], input_shapes=[[1, 6, 2, 2]], output_shapes=[[1, 2, 3, 2, 2]]),
               Node("b", "Transpose", ["a"], ["b"], {"perm": [0, 2, 1, 3, 4]}, output_shapes=[[1, 3, 2, 2, 2]]),
               Node("c", "Reshape", ["b"], ["c"], output_shapes=[[1, 6, 2, 2]])]
    c = np.arange(6)
    shuffled = np.arange(4)[:, None] * 6 + c % 2 * 3 + c // 2  # each pixel's channels 0, 3, 1, 4, 2, 5
    assert chain_index(chain_of(shuffle)).tolist() == shuffled.reshape(-1).tolist()
    one_axis = Node("s", "Slice", ["x"], ["s"], constants={1: "st", 2: "en", 3: "ax"}, scalars={1: 1, 2: 3, 3: 1},
                    input_shapes=[[1, 4, 1, 2]], output_shapes=[[1, 2, 1, 2]])
    assert chain_index(chain_of([one_axis])).tolist() == [1, 2, 5, 6]  # channels 1 and 2 of each pixel
    two_axes = dataclasses.replace(one_axis, scalars={}, constants={1: "st", 2: "en"})
    assert chain_of([two_axes]) == ()
    shape = Shape("data", 0, 0, 0, False, 0, 0, False, input_values=64)
    assert kind_of(shape).arithmetic(shape, 1, 8, None, None, (0, 0), False).cycles == \
        loop_cycles(4 * 17, RELAYOUT_DEPTH)  # (four words of 16 8-bit lanes, each lane's word read, then the word)
    # a Flatten after a global pooling keeps the channels-last order: a copy, a word a cycle, no multiplexer
    flatten = [Node("f", "Flatten", ["x"], ["f"], input_shapes=[[1, 64, 1, 1]], output_shapes=[[1, 64]])]
    shape = Shape("data", 0, 0, 0, False, 0, 0, False, input_values=64, relayout=chain_of(flatten))
    copy = kind_of(shape).arithmetic(shape, 1, 8, None, None, (0, 0), False)
    assert (copy.cycles, copy.lut) == (loop_cycles(4, RELAYOUT_DEPTH), 0)


def test_the_partitioner_charges_a_chain_of_relayouts_to_its_first_node_as_one_table():
    """ShuffleNet's channel shuffle as graphs.py writes it (Reshape, Transpose, Reshape after a convolution): the
    partitioner's time of its first node is the one table the folding stage makes of the three (the chain's map,
    about a word a cycle), and the two after it take none of their own (each alone would be a map with its lanes
    scattered over the words: the 5-D layout's)."""
    from hetdeploy.planning.cost import fpga_seconds, fused_into, node_shape
    from hetdeploy.planning.units.relayout import relayout_cost

    b = graphs.Builder([1, 24, 8, 8])
    x = b.conv("input", 24, 1)
    x = b.op("Reshape", [x], [1, 3, 8, 8, 8])
    x = b.op("Transpose", [x], [1, 8, 3, 8, 8], perm=[0, 2, 1, 3, 4])
    graph = b.graph(b.op("Reshape", [x], [1, 24, 8, 8]))
    first = node_shape(FPGA, graph, 1, 8)
    assert [op for op, _, _ in first.relayout[1:]] == ["Reshape", "Transpose", "Reshape"]
    iterations = relayout_cost(first.relayout, 8, False)[0]
    assert iterations <= 1.1 * 24 * 64 // 8 + 8  # a word a cycle, about
    assert not fused_into(FPGA, graph, 1) and fused_into(FPGA, graph, 2) and fused_into(FPGA, graph, 3)
    assert fpga_seconds(FPGA, graph, 2, 8) == fpga_seconds(FPGA, graph, 3, 8) == 0.0 < fpga_seconds(FPGA, graph, 1, 8)
    alone = node_shape(FPGA, graph, 2, 8).relayout  # the Transpose as a unit of its own: a costlier map
    assert relayout_cost(alone, 8, False)[0] > iterations
