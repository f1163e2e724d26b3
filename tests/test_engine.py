"""hls/engine.h on its own, bit for bit: the layer-sequential engine's convolution over a channels-last buffer
against the same integer arithmetic in numpy (each product and the sum exact, the ReLU, rounding to the
nearest with ties up, saturation), on layers of every kind the engine takes (strided, padded, dilated, 1 x 1,
a dense layer's one pixel, filters not a multiple of its lanes, signed and unsigned buffers); the weights
region packed as hetdeploy.fpga.engine writes it. Against onnxruntime: tests/test_fpga_ops.py builds units on it."""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest

from hetdeploy.core.csim import compiler
from hetdeploy.core.plan import EngineLayer
from hetdeploy.fpga.engine import quantized, weights_bytes
from hetdeploy.fpga.hls4ml_adapter import ap_types_headers
from hetdeploy.fpga.hls_top import TEMPLATES
from hetdeploy.planning.units import ARENA_WORD_BYTES, element_bytes

PROGRAM = r"""
#include <cstdio>
#include <vector>
#include "engine.h"

int main(int argc, char **argv) {
    std::FILE *f = std::fopen(argv[1], "rb");
    std::vector<unsigned char> bytes;
    for (int c; (c = std::fgetc(f)) != EOF;) bytes.push_back(c);
    std::fclose(f);
    std::vector<hetdeploy::word_t> memory(bytes.size() / 8 + %(out_words)d);
    hetdeploy::load_bytes(memory.data(), bytes.data(), bytes.size());
    const hetdeploy::engine_layer g = {%(layer)s};
    hetdeploy::word_t *target = memory.data() + bytes.size() / 8;
    hetdeploy::engine<%(iw)d, %(ow)d, %(ww)d, %(lanes)d, %(window)d>(memory.data() + %(source_word)d, target,
                                                                       memory.data(), g);
    for (int i = 0; i < %(outputs)d; i++)
        std::printf("%%lld\n", (long long)hetdeploy::read<ap_int<%(ow)d> >(target, i).to_int64());
}
"""


def reference(layer: EngineLayer, raw_in: np.ndarray, weights: np.ndarray, bias: np.ndarray, ow: int) -> np.ndarray:
    """engine.h's output codes, (out_h, out_w, filters) channels-last, in exact integers."""
    (in_h, in_w), (out_h, out_w), (k_h, k_w) = layer.input, layer.output, layer.kernel
    x = raw_in.reshape(in_h, in_w, layer.channels).astype(object)
    out = np.zeros((out_h, out_w, layer.filters), dtype=object)
    shift = layer.in_fraction + layer.weight_fraction - layer.out_fraction
    most = 2 ** (ow - 1) - 1 if layer.out_signed else 2 ** ow - 1
    least = -(2 ** (ow - 1)) if layer.out_signed else 0
    for y in range(out_h):
        for xx in range(out_w):
            for o in range(layer.filters):
                s = int(bias[o])
                for ky in range(k_h):
                    for kx in range(k_w):
                        row = y * layer.strides[0] - layer.pads[0] + ky * layer.dilations[0]
                        column = xx * layer.strides[1] - layer.pads[1] + kx * layer.dilations[1]
                        if 0 <= row < in_h and 0 <= column < in_w:
                            s += sum(int(x[row, column, c]) * int(weights[o, ky, kx, c])
                                     for c in range(layer.channels))
                if layer.relu and s < 0:
                    s = 0
                s = (s + (1 << (shift - 1))) >> shift if shift > 0 else s << -shift
                out[y, xx, o] = min(most, max(least, s))
    return out.reshape(-1)


LAYERS = {  # channels, input, filters, output, kernel, strides, pads, dilations, relu
    "3x3": (5, [6, 7], 9, [6, 7], [3, 3], [1, 1], [1, 1], [1, 1], True),
    "strided dilated": (4, [9, 8], 6, [4, 3], [3, 3], [2, 2], [1, 0], [2, 2], False),
    "1x1": (16, [3, 3], 20, [3, 3], [1, 1], [1, 1], [0, 0], [1, 1], True),
    "dense": (40, [1, 1], 10, [1, 1], [1, 1], [1, 1], [0, 0], [1, 1], False),
    "1-D": (3, [1, 12], 4, [1, 12], [1, 5], [1, 1], [0, 2], [1, 1], True),
}


@pytest.mark.parametrize("kind", LAYERS)
@pytest.mark.parametrize("iw, ow, in_type, out_type", [(16, 16, "ap_fixed<16,4>", "ap_fixed<16,6>"),
                                                         (8, 16, "ap_ufixed<8,3>", "ap_ufixed<16,7>"),
                                                         (16, 8, "ap_fixed<16,2>", "ap_fixed<8,4>")])
def test_the_engine_computes_each_layer_bit_for_bit(tmp_path, kind, iw, ow, in_type, out_type):
    rng = np.random.default_rng(7)
    layer = EngineLayer(*LAYERS[kind], lanes=4)
    weights = rng.normal(0, 0.5, (layer.filters, *layer.kernel, layer.channels))
    bias = rng.normal(0, 1, layer.filters)
    ww = 8 if iw == 8 else 16
    layer, region = quantized(layer, weights, bias, ww, in_type, out_type)
    assert len(region) == weights_bytes(layer, ww)
    codes_w = np.frombuffer(region[:weights.size * element_bytes(ww)], dtype=f"<i{element_bytes(ww)}")
    codes_b = np.frombuffer(region[-8 * layer.filters:], dtype="<i8")
    signed = layer.in_signed
    raw_in = rng.integers(-(2 ** (iw - 1)) if signed else 0, 2 ** (iw - 1) if signed else 2 ** iw,
                          layer.input[0] * layer.input[1] * layer.channels)
    source = raw_in.astype(f"<i{element_bytes(iw)}" if signed else f"<u{element_bytes(iw)}").tobytes()
    source += bytes(-len(source) % ARENA_WORD_BYTES)
    outputs = layer.output[0] * layer.output[1] * layer.filters
    values = dict(layer=", ".join(str(int(v)) for v in (
        layer.channels, *layer.input, layer.filters, *layer.output, *layer.kernel, *layer.strides, *layer.pads,
        *layer.dilations, layer.in_fraction, layer.in_signed, layer.weight_fraction, layer.out_fraction,
        layer.out_signed, layer.relu)), iw=iw, ow=ow, ww=ww, lanes=layer.lanes, window=layer.window,
        source_word=len(region) // ARENA_WORD_BYTES, outputs=outputs,
        out_words=outputs * element_bytes(ow) // ARENA_WORD_BYTES + 1)
    (tmp_path / "main.cpp").write_text(PROGRAM % values)
    (tmp_path / "memory.bin").write_bytes(region + source)
    binary = tmp_path / "main"
    subprocess.run([compiler(), "-std=c++14", "-O1", f"-I{TEMPLATES}", f"-I{ap_types_headers()}", "-o", str(binary),
                    str(tmp_path / "main.cpp")], check=True, capture_output=True)
    got = subprocess.run([str(binary), str(tmp_path / "memory.bin")], check=True, capture_output=True,
                         text=True).stdout.split()
    expected = reference(layer, raw_in, codes_w.reshape(weights.shape), codes_b, ow)
    if not layer.out_signed:  # read back as signed: the top bit of an unsigned code
        expected = [v - 2 ** ow if v >= 2 ** (ow - 1) else v for v in expected]
    assert [int(v) for v in got] == [int(v) for v in expected]
    assert len(set(got)) > 3  # the layer's outputs are not all one value (saturated or zero)


def test_the_weights_region_is_the_layers_values_at_their_binary_points():
    """quantized: each weight at the weight fraction it reports, within half a step (or saturated at the largest
    code), each bias at the sum's binary point."""
    layer = EngineLayer(*LAYERS["3x3"], lanes=4)
    rng = np.random.default_rng(3)
    weights = rng.normal(0, 0.3, (layer.filters, *layer.kernel, layer.channels))
    bias = rng.normal(0, 2, layer.filters)
    set_layer, region = quantized(layer, weights, bias, 16, "ap_fixed<16,5>", "ap_fixed<16,6>")
    assert dataclasses.replace(set_layer, weight_fraction=0, in_fraction=0, out_fraction=0) == layer
    assert (set_layer.in_fraction, set_layer.out_fraction) == (11, 10)
    codes = np.frombuffer(region[:weights.size * 2], dtype="<i2").reshape(weights.shape)
    step = 2.0 ** -set_layer.weight_fraction
    assert np.max(np.abs(codes * step - weights)) <= step / 2
    assert np.max(np.abs(weights)) > 2 ** (15 - set_layer.weight_fraction - 1)  # the fraction uses the bits
    biases = np.frombuffer(region[-8 * layer.filters:], dtype="<i8") * 2.0 ** -(11 + set_layer.weight_fraction)
    assert np.allclose(biases, bias, atol=2.0 ** -(11 + set_layer.weight_fraction))
