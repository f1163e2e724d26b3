"""Execution units, their estimates and folding, as pure functions (hls4ml only as the reference for
which reuse factors it accepts)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphs
from hetdeploy.board import load_board
from hetdeploy.units import (
    RESOURCES,
    candidate_reuse_factors,
    estimate,
    fold,
    split_units,
    unit_shape,
    valid_reuse_factors,
)

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


def test_units_fuse_batchnorm_and_activation_into_their_layer():
    graph = conv_stack(2)
    units = split_units(graph, range(len(graph.nodes)), FPGA)
    assert [(u.pe, [graph.nodes[i].op for i in u.nodes]) for u in units] == [
        ("conv", ["Conv", "BatchNormalization", "Relu"]),
        ("conv", ["Conv", "BatchNormalization", "Relu"]),
        ("pool", ["MaxPool"]),
        ("elementwise", ["Flatten"]),
        ("dense", ["Gemm", "Softmax"]),
    ]


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
    shape = unit_shape(graph, dense)
    assert (shape.n_in, shape.n_out) == (4 * 16, 10)
    for rf in (1, 4, 64):
        assert estimate(shape, rf, 16)["dsp"] == -(-64 * 10 // rf)  # ceil(n_in * n_out / R)
    assert estimate(shape, 1, 24)["dsp"] == 2 * 640  # wider than a DSP48 port: two per product
    more, fewer = estimate(shape, 4, 16), estimate(shape, 64, 16)
    assert fewer["latency_cycles"] > more["latency_cycles"] and fewer["dsp"] < more["dsp"]


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 4), channels=st.sampled_from([8, 16, 32, 64]), dsp=st.integers(20, 400),
       bram=st.integers(40, 400))
def test_folding_fits_the_budget_whenever_the_most_folded_design_does(layers, channels, dsp, bram):
    graph = conv_stack(layers, channels, 16)
    shapes = [unit_shape(graph, u) for u in split_units(graph, range(len(graph.nodes)), FPGA)]
    budget = {"dsp": dsp, "bram18": bram, "lut": 47880, "ff": 95760}
    chosen = fold(shapes, budget, 16)
    most_folded = [estimate(s, candidate_reuse_factors(s)[-1], 16) for s in shapes]
    fits_folded = all(sum(e[k] for e in most_folded) <= budget[k] for k in RESOURCES)
    if fits_folded:  # the partitioner's check: then folding always succeeds
        assert chosen is not None
    if chosen is not None:
        used = [estimate(s, rf, 16) for s, rf in zip(shapes, chosen)]
        assert all(sum(e[k] for e in used) <= budget[k] for k in RESOURCES)
        assert all(rf in candidate_reuse_factors(s) for s, rf in zip(shapes, chosen))
