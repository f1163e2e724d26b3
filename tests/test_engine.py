"""hls/engine.h on its own, bit for bit: the layer-sequential engine's convolution over a channels-last buffer
against the same integer arithmetic in numpy (each product and the sum exact, the ReLU, rounding to the
nearest with ties up, saturation), on layers of every kind the engine takes (strided, padded, dilated, 1 x 1,
a dense layer's one pixel, filters not a multiple of its lanes, signed and unsigned buffers); the weights
region packed as hetdeploy.fpga.engine writes it. Against onnxruntime: tests/test_fpga_ops.py builds units on it."""

from __future__ import annotations

import dataclasses
import math
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from hetdeploy.core.plan import EngineLayer
from hetdeploy.fpga.engine import layer_values, quantized, row_values, stored_window, weights_bytes
from hetdeploy.planning.units import ARENA_WORD_BYTES, element_bytes
from programs import compile_program

PROGRAM = r"""
#include <cstdio>
#include <vector>
#include "engine.h"

// argv[1]: the weights region, then the input, then the residual (where the layer adds one); argv[2]: the call's
// numbers: the engine_layer's fields, then the weights region's words, the outputs, the staging buffer's words, the
// staging buffer's memory (-1: none) and the residual's first word after the region's (-1: none)
int main(int argc, char **argv) {
    std::FILE *f = std::fopen(argv[1], "rb");
    std::vector<unsigned char> bytes;
    for (int c; (c = std::fgetc(f)) != EOF;) bytes.push_back(c);
    std::fclose(f);
    std::FILE *numbers = std::fopen(argv[2], "r");
    long long v[%(numbers)d];
    for (int k = 0; k < %(numbers)d; k++)
        if (std::fscanf(numbers, "%%lld", &v[k]) != 1) return 2;
    std::fclose(numbers);
    const hetdeploy::engine_layer g = {%(layer)s};
    const int source_word = v[%(fields)d], outputs = v[%(fields)d + 1], staging_words = v[%(fields)d + 2];
    const int out_words = outputs * %(out_bytes)d / hetdeploy::WORD_BYTES + 1;
    // (whole reads of a bundle of the weights port)
    std::vector<hetdeploy::word_t> memory(
        (bytes.size() / hetdeploy::WORD_BYTES + %(bundle_words)d - 1) / %(bundle_words)d * %(bundle_words)d), unused(1);
    hetdeploy::load_bytes(memory.data(), bytes.data(), bytes.size());
    // the output in a memory of its own at a word past its first, garbage around it: the engine's third of three
    // (DDR where the output lies there)
    std::vector<hetdeploy::word_t> written(out_words + 2, hetdeploy::word_t(-1));
    hetdeploy::word_t *target = written.data() + 1;
    // the DDR region as each of the weights port's %(bundles)d bundles reads it (%(bundle_words)d words a read), bundle
    // b from its block of the weights on, and from the region's first read, as the staging's bundles read it
    std::vector<ap_uint<hetdeploy::WORD_BITS * %(bundle_words)d> > reads(memory.size() / %(bundle_words)d);
    hetdeploy::engine_port_view<%(bundle_words)d>(memory.data(), reads.data(), reads.size());
    const ap_uint<hetdeploy::WORD_BITS * %(bundle_words)d> *w[4];
    for (int b = 0; b < 4; b++) w[b] = reads.data() + (b < %(bundles)d ? b * (source_word / %(port)d) : 0);
    // staged (the input in DDR, memory 1): its rows through a staging buffer of the layer's k_h rows, the fourth
    std::vector<hetdeploy::word_t> staging(staging_words + 1, hetdeploy::word_t(-1));
    const hetdeploy::engine_place source = {1, source_word}, output = {2, 1}, stage = {int(v[%(fields)d + 3]), 0};
    // the residual in the input's memory, after it
    const hetdeploy::engine_place residual = {v[%(fields)d + 4] < 0 ? -1 : 1, source_word + int(v[%(fields)d + 4])};
    hetdeploy::engine<%(iw)d, %(ow)d, %(ww)d, %(lanes)d, %(uram_lanes)d, %(vector)d, %(window)d, true, %(port)d, 4,
                      %(ddr)d, %(pixels)d, %(bundles)d, %(shared)s, %(stream)d>(unused.data(), memory.data(),
                                                                    written.data(),
                                                                    staging.data(), source, output, stage, residual,
                                                                    reads.data(), reads.data(), w[0], w[1], w[2],
                                                                    w[3], g);
    for (int i = 0; i < outputs; i++)
        std::printf("%%lld\n", (long long)hetdeploy::read<ap_int<%(ow)d> >(target, i).to_int64());
    std::printf("%%lld %%lld\n", hetdeploy::engine_counted().cycles, hetdeploy::engine_counted().weight_words);
}
"""
# the engine_layer's fields (engine.layer_values: ints, the Clip's two codes, then the residual's three ints and the
# output's pixel stride) and the largest window of the layers below: one program of each engine the tests run serves
# all its calls, each call's numbers read at run time
LAYER_FIELDS, LARGEST_WINDOW = 28, 256
# a staged input begins this many words past the weights (whole reads of the port): not a read's first word where a
# read is two
STAGED_GAP = 1
CLIP_FIELDS = (21, 22)  # long long
_programs: dict[tuple, Path] = {}


def port_reads(region: bytes, layer: EngineLayer) -> bytes:
    """The weights region as its port's reads, one after another: where the port is several bundles, the region is
    as many blocks, block b each read's words b * P / bundles onwards (P: the port's words)."""
    bundle_bytes = layer.port_words // layer.bundles * ARENA_WORD_BYTES
    blocks = np.frombuffer(region, dtype=np.uint8).reshape(layer.bundles, -1, bundle_bytes)
    return blocks.transpose(1, 0, 2).tobytes()


def filter_codes(region: bytes, layer: EngineLayer, ww: int) -> np.ndarray:
    """The weights region's codes, (filters, window): each filter's in words of its own, the lanes of its last word past
    the window zeros, word i of filters q * P .. q * P + P - 1 one after the other in the port's word (q, i) (P: the
    port's words; a streamed layer's, each tile's reads of its words i one run, word after word); filters past the last
    zeros; where the engine walks the window along its rows, each row padded to whole words with zeros."""
    region = port_reads(region, layer)
    per_word, port, stored = ARENA_WORD_BYTES // element_bytes(ww), layer.port_words, stored_window(layer, ww)
    words, reads = -(-stored // per_word), -(-layer.filters // port)
    codes = np.frombuffer(region[:reads * words * ARENA_WORD_BYTES * port], dtype=f"<i{element_bytes(ww)}")
    if layer.streamed:  # each tile's reads of its filters' word i one run, word after word
        tiles = [codes[q * words * port * per_word:(q + r) * words * port * per_word].reshape(words, r, port, per_word)
                 .transpose(1, 2, 0, 3) for q in range(0, reads, layer.lanes // port)
                 for r in [min(layer.lanes // port, reads - q)]]
        codes = np.concatenate(tiles).reshape(reads * port, -1)
    else:
        codes = codes.reshape(reads, words, port, per_word).transpose(0, 2, 1, 3).reshape(reads * port, -1)
    assert not codes[:, stored:].any() and not codes[layer.filters:].any()
    codes = codes[:layer.filters, :stored]
    row = row_values(layer, ww)
    if row:  # each window row's values padded to whole words
        rows = codes.reshape(layer.filters, layer.kernel[0], -1)
        assert not rows[:, :, row:].any()
        codes = rows[:, :, :row].reshape(layer.filters, -1)
    return codes


def filter_biases(region: bytes, layer: EngineLayer) -> np.ndarray:
    """The weights region's biases: after the weights, a word a filter, its low 64 bits the bias, the port's words
    whole."""
    stored = -(-layer.filters // layer.port_words) * layer.port_words
    words = np.frombuffer(port_reads(region, layer)[-ARENA_WORD_BYTES * stored:], dtype="<i8")
    return words.reshape(stored, -1)[:layer.filters, 0]


def staged_first_word(region: bytes) -> int:
    """The DDR word a staged input begins at in ``run_engine``, after the weights ``region``."""
    return len(region) // ARENA_WORD_BYTES + STAGED_GAP


def run_engine(tmp_path, layer: EngineLayer, region: bytes, raw_in: np.ndarray, iw: int, ow: int, ww: int,
               staged: bool = False, output_in_ddr: bool = False, raw_residual: Optional[np.ndarray] = None):
    """engine.h compiled with g++ (once for each engine: its bits, lanes, values a cycle, port, pixels and which of
    its memories is DDR) and run on ``region`` (the layer's weights) and ``raw_in`` (its input's codes), ``staged``:
    the input in DDR, staged a row of output pixels at a time; else ``output_in_ddr``: the output there; where the
    layer adds a residual, ``raw_residual`` its codes (``ow`` bits), after the input in its memory: its output
    codes (read back as signed; where the layer writes into a wider buffer, ``out_stride``, that buffer's every
    channel) and what it counted, (cycles, weight words)."""
    assert layer.dense or stored_window(layer, ww) <= LARGEST_WINDOW  # (a dense layer deeper: in chunks)
    source = raw_in.astype(f"<i{element_bytes(iw)}" if layer.in_signed else f"<u{element_bytes(iw)}").tobytes()
    source += bytes(-len(source) % ARENA_WORD_BYTES)
    residual_word = len(source) // ARENA_WORD_BYTES if layer.residual else -1
    if layer.residual:
        source += raw_residual.astype(f"<i{element_bytes(ow)}" if layer.residual_signed
                                      else f"<u{element_bytes(ow)}").tobytes()
        source += bytes(-len(source) % ARENA_WORD_BYTES)
    outputs = layer.output[0] * layer.output[1] * (layer.out_stride or layer.filters)
    fields = layer_values(layer, ow)
    assert len(fields) == LAYER_FIELDS
    engine = dict(iw=iw, ow=ow, ww=ww, lanes=layer.lanes, uram_lanes=layer.uram_lanes, vector=layer.vector,
                  window=LARGEST_WINDOW, port=layer.port_words, pixels=layer.pixels,
                  ddr=1 if staged else 2 if output_in_ddr else -1,
                  bundles=layer.bundles, bundle_words=layer.port_words // layer.bundles,
                  shared=str(layer.shared).lower(), stream=layer.stream,
                  out_bytes=element_bytes(ow), fields=LAYER_FIELDS, numbers=LAYER_FIELDS + 5,
                  layer=", ".join(f"v[{k}]" if k in CLIP_FIELDS else f"int(v[{k}])" for k in range(LAYER_FIELDS)))
    key = tuple(sorted(engine.items()))
    if key not in _programs or not _programs[key].exists():
        folder = tmp_path / "engine"
        folder.mkdir()
        (folder / "main.cpp").write_text(PROGRAM % engine)
        compile_program(folder / "main.cpp", folder / "main", "-std=c++14", "-O1")
        _programs[key] = folder / "main"
    staging_words = layer.kernel[0] * -(-layer.input[1] * layer.channels * element_bytes(iw) // ARENA_WORD_BYTES)
    gap = STAGED_GAP if staged else 0  # garbage words between the weights and a staged input
    numbers = fields + [staged_first_word(region) if staged else len(region) // ARENA_WORD_BYTES, outputs,
                        staging_words, 3 if staged else -1, residual_word]
    (tmp_path / "numbers.txt").write_text(" ".join(map(str, numbers)))
    (tmp_path / "memory.bin").write_bytes(region + b"\xa5" * ARENA_WORD_BYTES * gap + source)
    *got, counted = subprocess.run([str(_programs[key]), str(tmp_path / "memory.bin"), str(tmp_path / "numbers.txt")],
                                   check=True, capture_output=True, text=True).stdout.splitlines()
    return [int(v) for v in got], tuple(int(v) for v in counted.split())


def reference(layer: EngineLayer, raw_in: np.ndarray, weights: np.ndarray, bias: np.ndarray, ow: int,
              raw_residual: Optional[np.ndarray] = None) -> np.ndarray:
    """engine.h's output codes, (out_h, out_w, filters) channels-last, in exact integers: the sum plus the residual
    (where the layer adds one) at the finer of their binary points, then the ReLU, the Clip, rounding and saturation."""
    (in_h, in_w), (out_h, out_w), (k_h, k_w) = layer.input, layer.output, layer.kernel
    x = raw_in.reshape(in_h, in_w, layer.channels).astype(object)
    out = np.zeros((out_h, out_w, layer.filters), dtype=object)
    sum_fraction = layer.in_fraction + layer.weight_fraction
    fraction = max(sum_fraction, layer.residual_fraction) if layer.residual else sum_fraction
    added = raw_residual.reshape(out_h, out_w, layer.filters) if layer.residual else None
    shift = fraction - layer.out_fraction
    most = 2 ** (ow - 1) - 1 if layer.out_signed else 2 ** ow - 1
    least = -(2 ** (ow - 1)) if layer.out_signed else 0
    per_group = layer.channels // layer.groups  # a group's input channels
    for y in range(out_h):
        for xx in range(out_w):
            for o in range(layer.filters):
                s = int(bias[o])
                first = o // (layer.filters // layer.groups) * per_group
                for ky in range(k_h):
                    for kx in range(k_w):
                        row = y * layer.strides[0] - layer.pads[0] + ky * layer.dilations[0]
                        column = xx * layer.strides[1] - layer.pads[1] + kx * layer.dilations[1]
                        if 0 <= row < in_h and 0 <= column < in_w:
                            s += sum(int(x[row, column, first + c]) * int(weights[o, ky, kx, c])
                                     for c in range(per_group))
                if layer.residual:
                    s = s * 2 ** (fraction - sum_fraction) + int(added[y, xx, o]) * 2 ** (fraction
                                                                                           - layer.residual_fraction)
                if layer.relu and s < 0:
                    s = 0
                if layer.clip:  # the Clip on the exact sum, its value then rounded (ties up)
                    low, high = (None if b is None else Fraction(b) * 2 ** (shift + layer.out_fraction)
                                 for b in layer.clip)
                    s = max(low, s) if low is not None else s
                    s = min(high, s) if high is not None else s
                s = math.floor(Fraction(s, 2 ** shift) + Fraction(1, 2)) if shift > 0 else int(s * 2 ** -shift)
                out[y, xx, o] = min(most, max(least, s))
    return out.reshape(-1)


LAYERS = {  # channels, input, filters, output, kernel, strides, pads, dilations, relu
    "3x3": (5, [6, 7], 9, [6, 7], [3, 3], [1, 1], [1, 1], [1, 1], True),
    "strided dilated": (4, [9, 8], 6, [4, 3], [3, 3], [2, 2], [1, 0], [2, 2], False),
    "1x1": (16, [3, 3], 20, [3, 3], [1, 1], [1, 1], [0, 0], [1, 1], True),
    "dense": (40, [1, 1], 10, [1, 1], [1, 1], [1, 1], [0, 0], [1, 1], False),
    "1-D": (3, [1, 12], 4, [1, 12], [1, 5], [1, 1], [0, 2], [1, 1], True),
    "grouped": (8, [6, 6], 12, [6, 6], [3, 3], [1, 1], [1, 1], [1, 1], True),
    "depthwise": (8, [5, 5], 8, [3, 3], [3, 3], [2, 2], [1, 1], [1, 1], False),
    "stem": (3, [11, 12], 6, [6, 6], [7, 7], [2, 2], [3, 3], [1, 1], True),  # walked along its rows, padded
    "dense of 10": (10, [1, 1], 7, [1, 1], [1, 1], [1, 1], [0, 0], [1, 1], True),  # its one row padded to words
    # rows of 6 values: staged, its last row's second word lies past the input
    "narrow": (3, [4, 2], 5, [4, 2], [3, 3], [1, 1], [1, 1], [1, 1], True),
    # outputs of whole words, windows of whole words of values: on an engine of two pixels, a pair at a time (rows
    # of 7 pixels, odd: staged, each pass's last alone; strided and dilated: 12 pixels)
    "3x3 in pairs": (8, [6, 7], 8, [6, 7], [3, 3], [1, 1], [1, 1], [1, 1], True),
    "strided dilated in pairs": (8, [9, 8], 8, [4, 3], [3, 3], [2, 2], [1, 0], [2, 2], False),
    # a pair's window read once for all its tiles (48 channels: 12 steps at 4 values a cycle, 6 at 8), the tile
    # before's words written during the next one's steps (rows of 5 pixels, odd; 20 filters: on 8 lanes, a last tile
    # of 4)
    "1x1 in pairs": (48, [5, 5], 20, [5, 5], [1, 1], [1, 1], [0, 0], [1, 1], True),
    # walked along its rows, a pair at a time (rows of 5 pixels: each pass's last alone where staged)
    "stem in pairs": (3, [11, 10], 8, [6, 5], [7, 7], [2, 2], [3, 3], [1, 1], True),
    # dense layers deeper than the lanes' buffers (LARGEST_WINDOW values): in chunks of their depth, the last one
    # short; 601 values one an iteration (no multiple of a lane's values a cycle)
    "dense in chunks": (600, [1, 1], 10, [1, 1], [1, 1], [1, 1], [0, 0], [1, 1], True),
    "dense of 601 in chunks": (601, [1, 1], 9, [1, 1], [1, 1], [1, 1], [0, 0], [1, 1], False),
}
GROUPS = {"grouped": 2, "depthwise": 8}  # the others': one
# a Clip ending the layer (after a ReLU; bounds off the output's grid; one of them missing), as ONNX has it: on the
# value
CLIPS = {"1x1": [0.0, 1.5], "dense": [-3.3, 7.9], "1-D": [None, 2.45]}


@pytest.mark.parametrize("staged, output_in_ddr", [(False, False), (True, False), (False, True)],
                         ids=["on chip", "staged from DDR", "output in DDR"])
@pytest.mark.parametrize("kind", LAYERS)
@pytest.mark.parametrize("iw, ow, in_type, out_type, vector, uram_lanes, port, pixels, bundles, shared",
                         [(16, 16, "ap_fixed<16,4>", "ap_fixed<16,6>", 8, 0, 1, 2, 1, False),
                          (8, 16, "ap_ufixed<8,3>", "ap_ufixed<16,7>", 16, 2, 2, 1, 1, False),
                          (8, 16, "ap_fixed<8,3>", "ap_fixed<16,6>", 16, 2, 2, 2, 2, True),
                          (16, 8, "ap_fixed<16,2>", "ap_fixed<8,4>", 2, 4, 4, 1, 2, False),
                          (16, 16, "ap_fixed<16,5>", "ap_fixed<16,6>", 4, 2, 4, 1, 1, False),
                          (8, 16, "ap_fixed<8,3>", "ap_fixed<16,6>", 16, 2, 3, 2, 3, True)])
def test_the_engine_computes_each_layer_bit_for_bit(tmp_path, kind, iw, ow, in_type, out_type, vector, uram_lanes,
                                                    port, pixels, bundles, shared, staged, output_in_ddr):
    """Each layer on 4 lanes of ``vector`` values a cycle, ``uram_lanes`` of them with their weights in URAM (two a
    block: none, half, all), its weights port ``port`` DDR words wide (``bundles`` m_axi bundles, each its share of
    a read's words from its block of the weights region, the first bundle staging a DDR input: 1, 2 or 8 words a
    read, a word past a read's first; three words in three bundles: a tile of 4 filters spans two reads): the layers
    whose channels are a multiple of
    it take that many a cycle, the others (5 and 3 channels; 4 at 8 a cycle) one; a tile's filters need not begin
    a port's word (the grouped layer's second group: filters 6 to 11). Its input on chip, or in DDR, staged a row of
    output pixels at a time (rows of 7 x 5 values and, at 8 bits, 12 x 3: rows that do not begin a word), or its
    output in DDR (its words written one a cycle, not two); where its inputs and outputs are as wide, in the cycles
    ``units.engine_layer_cycles`` estimates. On an engine of two pixels at once (``pixels``), the layers whose pair's
    loop is shorter than two pixels' loops run a pair of pixels at a time, a stem walked along its rows too (the
    pass's last alone where its pixels are odd: the staged 3 x 3 layer's rows of 7), at 8 bits two lanes' products in
    a DSP48 too."""
    from hetdeploy.planning.units import engine_layer_cycles

    rng = np.random.default_rng(7)
    layer = EngineLayer(*LAYERS[kind], lanes=4, vector=vector, uram_lanes=uram_lanes, groups=GROUPS.get(kind, 1),
                        port_words=port, pixels=pixels, shared=shared, bundles=bundles, buffer_window=LARGEST_WINDOW,
                        clip=CLIPS.get(kind))
    # (smaller weights where a window of 600 values would saturate every output)
    spread = 0.02 if kind.endswith("in chunks") else 0.5
    weights = rng.normal(0, spread, (layer.filters, *layer.kernel, layer.channels // layer.groups))
    bias = rng.normal(0, 1, layer.filters)
    ww = 8 if iw == 8 else 16
    layer, region = quantized(layer, weights, bias, ww, in_type, out_type)
    assert len(region) == weights_bytes(layer, ww)
    codes_w = filter_codes(region, layer, ww)
    codes_b = filter_biases(region, layer)
    signed = layer.in_signed
    raw_in = rng.integers(-(2 ** (iw - 1)) if signed else 0, 2 ** (iw - 1) if signed else 2 ** iw,
                          layer.input[0] * layer.input[1] * layer.channels)
    got, (cycles, _) = run_engine(tmp_path, layer, region, raw_in, iw, ow, ww, staged, output_in_ddr)
    if iw == ow:  # engine_cycles' one width: the inputs' and outputs' words alike
        assert cycles == engine_layer_cycles(layer, iw, staged, output_in_ddr, staged_first_word(region))
    exact = reference(layer, raw_in, codes_w.reshape(weights.shape), codes_b, ow)
    expected = exact
    if not layer.out_signed:  # read back as signed: the top bit of an unsigned code
        expected = [v - 2 ** ow if v >= 2 ** (ow - 1) else v for v in exact]
    assert got == [int(v) for v in expected]
    assert len(set(got)) > 3  # the layer's outputs are not all one value (saturated or zero)
    if layer.clip:  # the Clip bites: some outputs are not what the layer gives without it
        unclipped = reference(dataclasses.replace(layer, clip=None), raw_in, codes_w.reshape(weights.shape), codes_b,
                              ow)
        assert list(unclipped) != list(exact)


@pytest.mark.parametrize("kind", ["3x3", "1x1 in pairs", "3x3 in pairs", "stem in pairs", "depthwise", "dense",
                                  "dense in chunks"])
@pytest.mark.parametrize("iw, vector, pixels, shared", [(16, 8, 2, True), (8, 16, 1, False)])
def test_a_layer_writes_its_channels_into_a_wider_buffer_and_leaves_the_others(tmp_path, kind, iw, vector, pixels,
                                                                                 shared):
    """A layer whose output pixels lie ``out_stride`` elements apart (its channels a slice of a Concat's output,
    which it writes in place: ``units.concats_in_place``) writes each pixel's channels there, the values of the
    same layer run alone, and leaves the channels between them as they were (garbage here: every bit set), whether
    its outputs fill whole words (the pairs' loops) or share them (9 filters: the word-at-a-time loop, which reads a
    word it shares first), in the cycles it takes alone."""
    from hetdeploy.planning.units import engine_layer_cycles

    rng = np.random.default_rng(11)
    base = EngineLayer(*LAYERS[kind], lanes=4, vector=vector, uram_lanes=2, groups=GROUPS.get(kind, 1), port_words=2,
                       pixels=pixels, shared=shared, buffer_window=LARGEST_WINDOW)
    spread = 0.02 if kind.endswith("in chunks") else 0.5
    weights = rng.normal(0, spread, (base.filters, *base.kernel, base.channels // base.groups))
    base, region = quantized(base, weights, rng.normal(0, 1, base.filters), iw, f"ap_fixed<{iw},3>",
                             f"ap_fixed<{iw},6>")
    raw_in = rng.integers(-(2 ** (iw - 1)), 2 ** (iw - 1), base.input[0] * base.input[1] * base.channels)
    alone, (cycles_alone, _) = run_engine(tmp_path, base, region, raw_in, iw, iw, iw)
    stride = base.filters + 2 * ARENA_WORD_BYTES // element_bytes(iw)  # two words of other channels a pixel
    layer = dataclasses.replace(base, out_stride=stride)
    got, (cycles, _) = run_engine(tmp_path, layer, region, raw_in, iw, iw, iw)
    got = np.array(got).reshape(-1, stride)
    assert got[:, :base.filters].reshape(-1).tolist() == alone
    assert (got[:, base.filters:] == -1).all()
    assert len(set(alone)) > 3
    assert cycles == cycles_alone == engine_layer_cycles(base, iw, False)


@pytest.mark.parametrize("pixels", [1, 2])
def test_the_8_bit_engines_sums_are_onnxruntimes_integer_convolution_bit_for_bit(tmp_path, pixels):
    """The 8-bit engine (two lanes' products in one DSP48: ENGINE_PACKED) on onnxruntime's own integer convolution,
    ConvInteger (what its QLinearConv and a QDQ convolution sum before they requantize): uint8 codes by int8
    weights (-128 to 127, every code of both ranges' ends in them), a 3 x 3 padded convolution of 16 channels into 24
    on 8 lanes of 8 values, one pixel at once and two (a pair's windows shared among the three tiles), its outputs
    32-bit integers at binary point 0: equal, value
    for value, to onnxruntime's int32 outputs. (The requantization after it is the quantizer's unit: within a step of
    onnxruntime's, which rounds ties to even where a fixed-point type rounds them up.)"""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    weights = rng.integers(-128, 128, (24, 16, 3, 3)).astype(np.int8)
    weights.flat[:2] = [-128, 127]
    codes = rng.integers(0, 256, (1, 16, 8, 8)).astype(np.uint8)
    codes.flat[:2] = [0, 255]
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    graph = helper.make_graph([node], "conv_integer", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                                                     [1, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 24, 8, 8])],
                              [numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (expected,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": codes})
    layer = EngineLayer(16, [8, 8], 24, [8, 8], [3, 3], [1, 1], [1, 1], [1, 1], False, lanes=8, vector=8,
                        pixels=pixels, shared=pixels == 2, buffer_window=LARGEST_WINDOW)
    layer, region = quantized(layer, weights.transpose(0, 2, 3, 1).astype(np.float64), np.zeros(24), 8, "ap_uint<8>",
                              "ap_int<32>")
    assert (layer.weight_fraction, layer.in_fraction, layer.out_fraction) == (0, 0, 0)
    got, _ = run_engine(tmp_path, layer, region, codes[0].transpose(1, 2, 0).reshape(-1), 8, 32, 8)
    assert got == expected[0].transpose(1, 2, 0).reshape(-1).tolist()
    assert np.abs(expected).max() > 2 ** 17  # sums past a packed product's 18 bits


@pytest.mark.parametrize("staged, output_in_ddr", [(False, False), (True, False), (False, True)],
                         ids=["on chip", "staged from DDR", "output in DDR"])
@pytest.mark.parametrize("kind", ["3x3", "1x1", "dense of 10", "3x3 in pairs", "1x1 in pairs", "stem in pairs", "1-D",
                                  "grouped", "depthwise"])
@pytest.mark.parametrize("iw, ow, in_type, out_type, residual_type, vector, pixels, shared",
                         [(16, 16, "ap_fixed<16,4>", "ap_fixed<16,6>", "ap_fixed<16,5>", 8, 2, True),
                          (8, 8, "ap_ufixed<8,3>", "ap_ufixed<8,4>", "ap_ufixed<8,2>", 16, 1, False),
                          (8, 8, "ap_fixed<8,1>", "ap_fixed<8,2>", "ap_fixed<8,-6>", 16, 2, False)])
def test_a_residual_map_is_added_to_the_sums_bit_for_bit(tmp_path, kind, iw, ow, in_type, out_type, residual_type,
                                                          vector, pixels, shared, staged, output_in_ddr):
    """A layer ended by an Add of another map (ResNet's and MobileNetV2's residual connections), then its ReLU or
    Clip where it has one: the residual's codes (signed or not; a binary point coarser than the sums' and, at
    ap_fixed<8,-6>, finer) added to the exact sums, bit for bit against the exact reference, on an engine of one
    pixel and of two at once, with the input on chip, staged from DDR (the residual there too) or the output in DDR,
    a grouped and a depthwise convolution too (a lane a channel); its words written one a cycle, each beside its
    residual's word's read, none during a window: in the cycles ``units.engine_layer_cycles`` estimates. A layer
    whose outputs share words with other channels' (7 filters) reads the shared word and the residual's, two cycles
    a word."""
    from hetdeploy.planning.units import engine_layer_cycles

    rng = np.random.default_rng(11)
    layer = EngineLayer(*LAYERS[kind], lanes=8, vector=vector, pixels=pixels, shared=shared,
                        buffer_window=LARGEST_WINDOW, clip=CLIPS.get(kind), residual=True, groups=GROUPS.get(kind, 1))
    weights = rng.normal(0, 0.5, (layer.filters, *layer.kernel, layer.channels // layer.groups))
    ww = iw
    layer, region = quantized(layer, weights, rng.normal(0, 1, layer.filters), ww, in_type, out_type, residual_type)
    codes_w, codes_b = filter_codes(region, layer, ww), filter_biases(region, layer)
    raw_in = rng.integers(-(2 ** (iw - 1)) if layer.in_signed else 0, 2 ** (iw - 1) if layer.in_signed else 2 ** iw,
                          layer.input[0] * layer.input[1] * layer.channels)
    outputs = layer.output[0] * layer.output[1] * layer.filters
    raw_residual = rng.integers(-(2 ** (ow - 1)) if layer.residual_signed else 0,
                                2 ** (ow - 1) if layer.residual_signed else 2 ** ow, outputs)
    got, (cycles, _) = run_engine(tmp_path, layer, region, raw_in, iw, ow, ww, staged, output_in_ddr, raw_residual)
    assert cycles == engine_layer_cycles(layer, iw, staged, output_in_ddr, staged_first_word(region))
    exact = reference(layer, raw_in, codes_w.reshape(weights.shape), codes_b, ow, raw_residual)
    expected = [v - 2 ** ow if not layer.out_signed and v >= 2 ** (ow - 1) else v for v in exact]
    assert got == [int(v) for v in expected]
    # the residual counts: the outputs are not what the layer gives without it (but for the dense layer's 7 beside a
    # residual finer than half their step, which may round alike)
    alone = reference(dataclasses.replace(layer, residual=False), raw_in, codes_w.reshape(weights.shape), codes_b, ow)
    below_half_step = 2.0 ** (ow - 1 - layer.residual_fraction) <= 2.0 ** -(layer.out_fraction + 1)
    assert (list(alone) != list(exact) or outputs < 10 and below_half_step) and len(set(got)) > 3


@pytest.mark.parametrize("staged", [False, True], ids=["on chip", "staged from DDR"])
@pytest.mark.parametrize("residual", [False, True], ids=["", "residual"])
def test_a_window_of_fewer_steps_than_the_pipelines_depth_is_shared_among_tiles_bit_for_bit(tmp_path, residual,
                                                                                          staged):
    """A 1 x 1 convolution of 32 channels into 32 filters (ResNet-50's 64-channel ones at 8 bits: four steps, and
    four tiles) on 8 lanes of 8 values a cycle, two pixels at once (rows of 5, odd), its pairs' windows shared among
    its four tiles: its window's 4 steps fewer than ENGINE_MAC_DEPTH, its first phase padded to that (a word kept is
    read a phase after it was written), since the other tiles' phases save more (engine_group_shares): bit for bit
    against the exact reference, its residual added or not, its input on chip or staged, in the cycles
    ``units.engine_layer_cycles`` estimates, fewer than without the shared loop."""
    from hetdeploy.planning.units import engine_layer_cycles

    rng = np.random.default_rng(17)
    layer = EngineLayer(32, [3, 5], 32, [3, 5], [1, 1], [1, 1], [0, 0], [1, 1], True, lanes=8, vector=8, pixels=2,
                        shared=True, buffer_window=LARGEST_WINDOW, residual=residual)
    weights = rng.normal(0, 0.5, (32, 1, 1, 32))
    layer, region = quantized(layer, weights, rng.normal(0, 1, 32), 16, "ap_fixed<16,4>", "ap_fixed<16,6>",
                              "ap_fixed<16,5>" if residual else None)
    codes_w, codes_b = filter_codes(region, layer, 16), filter_biases(region, layer)
    raw_in = rng.integers(-2 ** 15, 2 ** 15, 3 * 5 * 32)
    raw_residual = rng.integers(-2 ** 15, 2 ** 15, 3 * 5 * 32) if residual else None
    got, (cycles, _) = run_engine(tmp_path, layer, region, raw_in, 16, 16, 16, staged, False, raw_residual)
    expected = reference(layer, raw_in, codes_w.reshape(weights.shape), codes_b, 16, raw_residual)
    assert got == [int(v) for v in expected] and len(set(got)) > 3
    assert cycles == engine_layer_cycles(layer, 16, staged, False, staged_first_word(region))
    assert cycles < engine_layer_cycles(dataclasses.replace(layer, shared=False), 16, staged, False,
                                        staged_first_word(region))


STREAMED = {  # ResNet-50's 7 x 7 maps: 25 pairs, three tiles of 16 filters (whole words at 8 bits)
    "7 x 7 in tiles": (16, [7, 7], 48, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1], True),
    "strided dilated in pairs": (16, [9, 8], 16, [4, 3], [3, 3], [2, 2], [1, 0], [2, 2], False),
    "1x1 of 48": (48, [4, 5], 32, [4, 5], [1, 1], [1, 1], [0, 0], [1, 1], False),
}


@pytest.mark.parametrize("case", ["on chip", "output in DDR", "residual"])
@pytest.mark.parametrize("kind", STREAMED)
@pytest.mark.parametrize("iw, in_type, out_type, residual_type, vector, port, bundles, lanes",
                         [(16, "ap_fixed<16,4>", "ap_fixed<16,6>", "ap_fixed<16,5>", 8, 2, 1, 16),
                          (16, "ap_ufixed<16,5>", "ap_fixed<16,7>", "ap_fixed<16,6>", 8, 1, 1, 16),
                          (8, "ap_ufixed<8,3>", "ap_fixed<8,4>", "ap_fixed<8,3>", 16, 4, 2, 16),
                          (16, "ap_fixed<16,4>", "ap_fixed<16,6>", "ap_fixed<16,5>", 8, 3, 3, 48)])
def test_a_streamed_layer_computes_bit_for_bit_in_the_cycles_estimated(tmp_path, kind, iw, in_type, out_type,
                                                                        residual_type, vector, port, bundles, lanes,
                                                                        case):
    """A layer whose weights stream from DDR while the lanes compute (engine.h's engine_stream, on an engine of two
    pixels that streams layers of up to 32 pairs (units.ENGINE_STREAM_PAIRS' fewest): the build's choice where that is
    shorter, ``engine_layer_streams``): bit for bit against the exact reference at 16 and at 8 bits (two lanes' products
    a DSP48), its weights port one DDR word wide (the PYNQ-Z2's), two, four in two bundles, and three in three (the
    ZCU104's, on 48 lanes: a multiple of its words), several tiles of filters (48 on 16 lanes),
    strided, dilated and padded windows, odd pixels (a last pair of one), its output
    on chip, in DDR, or a residual added; in the cycles ``units.engine_layer_cycles`` estimates and reading the weights
    region once."""
    from hetdeploy.planning.units import ENGINE_STREAM_PAIRS, engine_layer_cycles, engine_layer_streams

    rng = np.random.default_rng(17)
    layer = EngineLayer(*STREAMED[kind], lanes=lanes, vector=vector, uram_lanes=4, port_words=port, bundles=bundles,
                        pixels=2, shared=True, stream=ENGINE_STREAM_PAIRS[-1], buffer_window=LARGEST_WINDOW,
                        residual=case == "residual")
    layer = dataclasses.replace(layer, streamed=engine_layer_streams(layer, iw))  # (the memory plan's choice)
    weights = rng.normal(0, 0.4, (layer.filters, *layer.kernel, layer.channels))
    layer, region = quantized(layer, weights, rng.normal(0, 1, layer.filters), iw, in_type, out_type, residual_type)
    assert layer.streamed  # (shorter than held in the buffers)
    codes_w, codes_b = filter_codes(region, layer, iw), filter_biases(region, layer)
    step = 2.0 ** -layer.weight_fraction  # the region's codes are the weights (laid out as engine_stream reads them)
    assert np.max(np.abs(codes_w.reshape(weights.shape) * step - weights)) <= step / 2
    raw_in = rng.integers(-(2 ** (iw - 1)) if layer.in_signed else 0, 2 ** (iw - 1) if layer.in_signed else 2 ** iw,
                          layer.input[0] * layer.input[1] * layer.channels)
    outputs = layer.output[0] * layer.output[1] * layer.filters
    raw_residual = rng.integers(-(2 ** (iw - 1)), 2 ** (iw - 1), outputs) if layer.residual else None
    output_in_ddr = case == "output in DDR"
    got, (cycles, weight_words) = run_engine(tmp_path, layer, region, raw_in, iw, iw, iw, False, output_in_ddr,
                                             raw_residual)
    assert cycles == engine_layer_cycles(layer, iw, False, output_in_ddr)
    assert weight_words * ARENA_WORD_BYTES == len(region)
    exact = reference(layer, raw_in, codes_w.reshape(weights.shape), codes_b, iw, raw_residual)
    assert got == [int(v) for v in exact] and len(set(got)) > 3


@pytest.mark.parametrize("kind", STREAMED)
@pytest.mark.parametrize("width, vector, port, bundles", [(16, 8, 2, 1), (12, 8, 1, 1), (8, 16, 4, 2), (16, 8, 3, 3)])
def test_a_weights_region_laid_out_anew_is_the_one_written_in_that_layout(kind, width, vector, port, bundles):
    """A layer's weights region written held and then laid out to stream (fpga/engine.py's ``relaid``: the memory
    plan of the buffers' real widths streams a widened unit the plan held), and the other way round, byte for byte
    the region ``quantized`` writes in that layout; the two layouts differ (tiles of 16 filters on 48, 16 or 32)."""
    from hetdeploy.fpga.engine import relaid

    rng = np.random.default_rng(5)
    layer = EngineLayer(*STREAMED[kind], lanes=16, vector=vector, port_words=port, bundles=bundles, pixels=2,
                        stream=32, buffer_window=LARGEST_WINDOW)
    weights, bias = rng.normal(0, 0.4, (layer.filters, *layer.kernel, layer.channels)), rng.normal(0, 1, layer.filters)
    written = {streamed: quantized(dataclasses.replace(layer, streamed=streamed), weights, bias, width,
                                   f"ap_fixed<{width},4>", f"ap_fixed<{width},6>")
               for streamed in (False, True)}
    assert written[False][1] != written[True][1] and len(written[False][1]) == len(written[True][1])
    for streamed in (False, True):
        assert relaid(written[streamed][0], written[not streamed][1], width) == written[streamed][1]


@pytest.mark.parametrize("iw, ow, in_type, out_type, vector, uram_lanes, port, bundles, pixels",
                         [(16, 16, "ap_fixed<16,4>", "ap_fixed<16,6>", 8, 0, 2, 2, 1),
                          (16, 16, "ap_fixed<16,4>", "ap_fixed<16,6>", 8, 0, 2, 2, 2),
                          (8, 8, "ap_ufixed<8,3>", "ap_fixed<8,4>", 16, 8, 4, 1, 2),
                          (16, 8, "ap_fixed<16,2>", "ap_fixed<8,4>", 2, 16, 1, 1, 1)])
@pytest.mark.parametrize("geometry", [([7, 6], [4, 3], [2, 2], [1, 0], [1, 1]),  # strided, padded at the top
                                      ([6, 6], [6, 6], [1, 1], [2, 2], [2, 2])])  # dilated
@pytest.mark.parametrize("staged", [False, True], ids=["on chip", "staged from DDR"])
def test_a_depthwise_convolution_takes_a_lane_a_channel_bit_for_bit(tmp_path, iw, ow, in_type, out_type, vector,
                                                                    uram_lanes, port, bundles, pixels, geometry,
                                                                    staged):
    """A depthwise 3 x 3 convolution of 48 channels (a tile of 32 and one of 16) on 32 lanes: each lane its own
    channel, a word of inputs an iteration (of each pixel of a pair, on an engine of two pixels at once: rows of 3
    and of 6 pixels, each odd row's last alone), the ReLU6 after it; its input on chip or staged from DDR; bit for
    bit against the exact reference, in the cycles units.engine_cycles counts for it (a place's input words a pixel's
    or a pair's iterations, not a lane a group), at two pixels fewer than at one."""
    from hetdeploy.planning.units import engine_cycles, staging_cycles

    rng = np.random.default_rng(3)
    size, out, strides, pads, dilations = geometry
    layer = EngineLayer(48, size, 48, out, [3, 3], strides, pads, dilations, False, lanes=32, vector=vector,
                        uram_lanes=uram_lanes, groups=48, port_words=port, bundles=bundles, pixels=pixels,
                        clip=[0.0, 1.5])
    weights = rng.normal(0, 0.5, (48, 3, 3, 1))
    ww = 8 if iw == 8 else 16
    layer, region = quantized(layer, weights, rng.normal(0, 1, 48), ww, in_type, out_type)
    codes_w, codes_b = filter_codes(region, layer, ww), filter_biases(region, layer)
    raw_in = rng.integers(-(2 ** (iw - 1)) if layer.in_signed else 0, 2 ** (iw - 1) if layer.in_signed else 2 ** iw,
                          size[0] * size[1] * 48)
    got, (cycles, _) = run_engine(tmp_path, layer, region, raw_in, iw, ow, ww, staged)
    expected = reference(layer, raw_in, codes_w.reshape(weights.shape), codes_b, ow)
    assert got == [int(v) for v in expected] and len(set(got)) > 3
    if iw == ow:  # engine_cycles' one width: the inputs' and outputs' words alike
        staging = staging_cycles(size, 48, [3, 3], strides, pads, dilations, out, iw, port // bundles,
                                 staged_first_word(region), bundles) if staged else ()
        estimate = engine_cycles(9, 48, out[0] * out[1], iw, 32, vector=vector, channels=1, groups=48,
                                 port_words=port, staging=staging, buffer_window=LARGEST_WINDOW,
                                 pixels_at_once=pixels)
        assert estimate["cycles"] == cycles
        if pixels == 2:
            assert cycles < engine_cycles(9, 48, out[0] * out[1], iw, 32, vector=vector, channels=1, groups=48,
                                          port_words=port, staging=staging, buffer_window=LARGEST_WINDOW)["cycles"]
        # fewer than a lane a group would take (30 lanes, not whole words: each channel a tile of its own)
        assert cycles < engine_cycles(9, 48, out[0] * out[1], iw, 30, vector=vector, channels=1, groups=48,
                                      port_words=port)["cycles"]


@pytest.mark.parametrize("pixels", [1, 2])
def test_a_grouped_convolution_run_as_one_group_is_the_grouped_one_bit_for_bit(tmp_path, pixels):
    """A grouped 1 x 1 convolution whose groups are no whole word (ShuffleNet's: 24 channels into 32 filters in 4
    groups, 6 channels and 8 filters a group, at 8 bits) run as one group of block-diagonal weights (zeros past each
    filter's group: ``block_diagonal``): its outputs those of the grouped layer, bit for bit, in the cycles
    engine_cycles counts for the one group (its 24 channels no whole word either: its window walked as a row),
    fewer than the grouped layer's (units.engine_dense_groups' choice)."""
    from hetdeploy.planning.units import engine_cycles, engine_row_values

    rng = np.random.default_rng(11)
    grouped = EngineLayer(24, [5, 6], 32, [5, 6], [1, 1], [1, 1], [0, 0], [1, 1], True, lanes=16, vector=8,
                          groups=4, port_words=2, pixels=pixels, buffer_window=LARGEST_WINDOW)
    weights = rng.normal(0, 0.5, (32, 1, 1, 6))
    bias = rng.normal(0, 1, 32)
    one_group, region = quantized(dataclasses.replace(grouped, groups=1), weights, bias, 8, "ap_fixed<8,3>",
                                  "ap_fixed<8,4>")
    whole = filter_codes(region, one_group, 8).reshape(32, 1, 1, 24)
    codes_w = np.stack([whole[o, ..., o // 8 * 6:o // 8 * 6 + 6] for o in range(32)])
    outside = whole.copy()
    for o in range(32):
        outside[o, ..., o // 8 * 6:o // 8 * 6 + 6] = 0
    assert not outside.any() and codes_w.any()  # block-diagonal: each filter's group's channels alone
    raw_in = rng.integers(-128, 128, 5 * 6 * 24)
    got, (cycles, _) = run_engine(tmp_path, one_group, region, raw_in, 8, 8, 8)
    expected = reference(dataclasses.replace(one_group, groups=4), raw_in, codes_w, filter_biases(region, one_group),
                         8)
    assert got == [int(v) for v in expected] and len(set(got)) > 3
    row = engine_row_values(1, 24, 1, 1, 8)  # (24 channels: no whole word at 8 bits)
    assert cycles == engine_cycles(24, 32, 30, 8, 16, vector=8, channels=24, port_words=2, row=row,
                                   pixels_at_once=pixels, buffer_window=LARGEST_WINDOW)["cycles"]
    assert cycles < engine_cycles(6, 32, 30, 8, 16, vector=8, channels=6, groups=4, port_words=2,
                                  pixels_at_once=pixels, buffer_window=LARGEST_WINDOW)["cycles"]


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
    codes = filter_codes(region, set_layer, 16).reshape(weights.shape)
    step = 2.0 ** -set_layer.weight_fraction
    assert np.max(np.abs(codes * step - weights)) <= step / 2
    assert np.max(np.abs(weights)) > 2 ** (15 - set_layer.weight_fraction - 1)  # the fraction uses the bits
    biases = filter_biases(region, set_layer) * 2.0 ** -(11 + set_layer.weight_fraction)
    assert np.allclose(biases, bias, atol=2.0 ** -(11 + set_layer.weight_fraction))


def test_a_port_of_two_bundles_reads_each_half_of_the_ports_reads_from_a_block_of_its_own():
    """quantized, the port four words wide in two bundles: the first half of the region is the first two words of
    each of the port's reads (its region in one bundle), the second half their last two, in order."""
    layer = EngineLayer(*LAYERS["3x3"], lanes=4, port_words=4)
    rng = np.random.default_rng(5)
    weights, bias = rng.normal(0, 0.3, (layer.filters, *layer.kernel, layer.channels)), rng.normal(0, 2, layer.filters)
    _, whole = quantized(layer, weights, bias, 16, "ap_fixed<16,5>", "ap_fixed<16,6>")
    _, halves = quantized(dataclasses.replace(layer, bundles=2), weights, bias, 16, "ap_fixed<16,5>", "ap_fixed<16,6>")
    read = 4 * ARENA_WORD_BYTES
    reads = [whole[r:r + read] for r in range(0, len(whole), read)]
    assert len(reads) > 2 and halves == b"".join(r[:read // 2] for r in reads) + b"".join(r[read // 2:] for r in reads)


COUNTING = r"""
#include <cstdio>
#include <vector>
#include "engine.h"

// each line of argv[1] a layer (engine_layer's fields), whether its input is staged from DDR, whether its output
// lies in DDR, whether it adds a residual and whether it streams its weights: it runs on zeros, printing what the
// engine counted
static const int PW = hetdeploy::WORD_BYTES / 2;  // 16-bit values a word

int main(int argc, char **argv) {
    std::FILE *f = std::fopen(argv[1], "r");
    hetdeploy::engine_layer g;
    int staged, output_in_ddr;
    while (std::fscanf(f, "%%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d %%d", &g.in_c,
                       &g.in_h, &g.in_w, &g.out_c, &g.out_h, &g.out_w, &g.k_h, &g.k_w, &g.s_h, &g.s_w, &g.pad_top,
                       &g.pad_left, &g.d_h, &g.d_w, &g.groups, &staged, &output_in_ddr, &g.residual,
                       &g.streamed) == 19) {
        g.in_fraction = g.weight_fraction = g.out_fraction = g.residual_fraction = 8;
        g.in_signed = g.out_signed = g.relu = g.residual_signed = 1;
        g.clip_low = -(1LL << 62), g.clip_high = 1LL << 62;
        g.out_stride = g.out_c;
        // a window walked along its rows (one group, columns one apart, channels no whole word): rows padded
        const bool rows = g.groups == 1 && g.d_w == 1 && g.in_c %% PW != 0;
        const int window = rows ? g.k_h * ((g.k_w * g.in_c + PW - 1) / PW * PW) : g.k_h * g.k_w * g.in_c / g.groups;
        const int filter_words = (window + PW - 1) / PW;
        // the port's reads, in %(bundles)d blocks of reads of %(port)d / %(bundles)d words, a bundle's each
        const int reads = (g.out_c + %(port)d - 1) / %(port)d * (filter_words + 1);
        std::vector<ap_uint<hetdeploy::WORD_BITS * %(port)d / %(bundles)d> > weights(reads * %(bundles)d);
        const ap_uint<hetdeploy::WORD_BITS * %(port)d / %(bundles)d> *w[4];
        for (int b = 0; b < 4; b++) w[b] = weights.data() + (b < %(bundles)d ? b * reads : 0);
        // memory 0: the input, then the output (staged: DDR, the output there too where it lies in DDR); memory 1:
        // the staging buffer, then the residual; memory 2: the output elsewhere (unstaged, in DDR: memory 2 is)
        const int source_words = g.in_h * g.in_w * g.in_c / PW + 1, target_words = g.out_h * g.out_w * g.out_c / PW + 1;
        const int staging_words = g.k_h * ((g.in_w * g.in_c + PW - 1) / PW) + 1;
        std::vector<hetdeploy::word_t> memory(source_words + target_words), other(target_words);
        // the DDR region (memory 0, staged) as the weights port's bundles read it from its start
        std::vector<ap_uint<hetdeploy::WORD_BITS * %(port)d / %(bundles)d> > region(memory.size());
        std::vector<hetdeploy::word_t> staging(staging_words + target_words);
        const hetdeploy::engine_place source = {0, 0}, after = {0, source_words}, apart = {2, 0}, unstaged = {-1, 0},
                                      stage = {1, 0}, residual = {g.residual ? 1 : -1, staging_words};
        hetdeploy::engine_counted() = hetdeploy::engine_counts{0, 0};
        hetdeploy::word_t *m = memory.data(), *s = staging.data(), *o = other.data();
        if (staged)
            hetdeploy::engine<16, 16, 16, %(lanes)d, %(uram_lanes)d, %(vector)d, %(window)d, true, %(port)d, 3, 0,
                              %(pixels)d, %(bundles)d, %(shared)s, %(stream)d>(
                m, s, o, m, source, output_in_ddr ? after : apart, stage, residual, region.data(), region.data(), w[0],
                w[1], w[2], w[3], g);
        else if (output_in_ddr)
            hetdeploy::engine<16, 16, 16, %(lanes)d, %(uram_lanes)d, %(vector)d, %(window)d, true, %(port)d, 3, 2,
                              %(pixels)d, %(bundles)d, %(shared)s, %(stream)d>(
                m, s, o, m, source, apart, unstaged, residual, region.data(), region.data(), w[0], w[1], w[2],
                w[3], g);
        else
            hetdeploy::engine<16, 16, 16, %(lanes)d, %(uram_lanes)d, %(vector)d, %(window)d, true, %(port)d, 3, -1,
                              %(pixels)d, %(bundles)d, %(shared)s, %(stream)d>(
                m, s, o, m, source, after, unstaged, residual, region.data(), region.data(), w[0], w[1], w[2],
                w[3], g);
        std::printf("%%lld %%lld\n", hetdeploy::engine_counted().cycles, hetdeploy::engine_counted().weight_words);
    }
}
"""

# (input channels, filters, kernel, stride[, groups]): torchvision's ResNet-50 and MobileNetV2 convolutions and
# classifiers, each shape once (MobileNetV2's depthwise ones, a group a channel, last)
RESNET50 = [(3, 64, 7, 2), (64, 64, 1, 1), (64, 64, 3, 1), (64, 256, 1, 1), (256, 64, 1, 1), (256, 128, 1, 1),
            (128, 128, 3, 2), (128, 512, 1, 1), (256, 512, 1, 2), (512, 128, 1, 1), (512, 256, 1, 1),
            (256, 256, 3, 2), (256, 1024, 1, 1), (512, 1024, 1, 2), (1024, 256, 1, 1), (1024, 512, 1, 1),
            (512, 512, 3, 2), (512, 2048, 1, 1), (1024, 2048, 1, 2), (2048, 512, 1, 1), (2048, 1000, 0, 1)]
MOBILENET_V2 = [(3, 32, 3, 2), (32, 16, 1, 1), (16, 96, 1, 1), (96, 24, 1, 1), (24, 144, 1, 1), (144, 24, 1, 1),
                (144, 32, 1, 1), (32, 192, 1, 1), (192, 32, 1, 1), (192, 64, 1, 1), (64, 384, 1, 1),
                (384, 64, 1, 1), (384, 96, 1, 1), (96, 576, 1, 1), (576, 96, 1, 1), (576, 160, 1, 1),
                (160, 960, 1, 1), (960, 160, 1, 1), (960, 320, 1, 1), (320, 1280, 1, 1), (1280, 1000, 0, 1)]
MOBILENET_V2_DEPTHWISE = [(c, c, 3, stride, c) for c, stride in ((32, 1), (96, 2), (144, 1), (144, 2), (192, 1),
                                                                   (192, 2), (384, 1), (576, 1), (576, 2), (960, 1))]


@pytest.mark.parametrize("lanes, uram_lanes, vector, port, pixels, bundles, stream",
                         [(32, 0, 8, 1, 1, 1, 0), (32, 0, 2, 4, 1, 1, 0), (64, 42, 8, 2, 2, 2, 32),
                          (48, 32, 8, 3, 2, 3, 32)])
# (an engine of two pixels: its pairs sharing their windows among the tiles it holds, and streaming the weights of
# layers of at most 32 pairs; its weights port two DDR words in two bundles, the KV260's, or three in three, the
# ZCU104's)
def test_the_engines_counted_cycles_are_the_cost_models_on_resnet50_and_mobilenet_v2_layers(tmp_path, lanes,
                                                                                            uram_lanes, vector, port,
                                                                                            pixels, bundles, stream):
    """Issue 65's counted-cycles check: every layer shape of ResNet-50 and MobileNetV2 the engine runs, at a 5 x 5
    output map (the count is per output pixel, so a reduced map counts what a full one would, pixel for pixel;
    kernel 0: the classifier, a dense layer's one pixel), run in C-simulation on ``lanes`` of ``vector`` values a
    cycle (the 3-channel first layers one; at 2, a DDR word of weights is four entries of the weight buffer; 64
    lanes, 42 of them in URAM, its weights port two DDR words wide in two bundles, two output pixels at once: the
    KV260's engine for ResNet-50 at 16 bits, its layers of at most 32 pairs streaming their weights where that is
    shorter, engine_stream):
    the cycles and DDR words engine.h counts are what ``units.engine_cycles`` estimates, within 2 %; each layer with
    its input on chip, and in DDR, staged a row of output pixels at a time (``units.staging_cycles``), and its output
    on chip and in DDR (its words written one a cycle where a cycle reads nothing, not two: DDR's one port)."""
    from hetdeploy.planning.units import engine_cycles, engine_row_values, staging_cycles, word_values

    per_word = word_values(16)
    layers = []
    # and two layers whose outputs share words with the next pixel's (10 and 9 filters): a pixel's window, then
    # its words; and a grouped 1 x 1 convolution of 4 groups (ShuffleNet's)
    for channels, filters, kernel, stride, *groups in (RESNET50 + MOBILENET_V2 + MOBILENET_V2_DEPTHWISE
                                                       + [(16, 10, 3, 1), (40, 9, 0, 1), (272, 272, 1, 1, 4)]):
        side = 1 if kernel == 0 else 5
        k, pad = max(kernel, 1), max(kernel, 1) // 2
        size = 1 if kernel == 0 else (side - 1) * stride + k - 2 * pad
        layers += [(channels, size, size, filters, side, side, k, k, stride, stride, pad, pad, 1, 1,
                    groups[0] if groups else 1, staged, output_in_ddr, residual) for staged in (0, 1)
                   for output_in_ddr in (0, 1) for residual in (0, 1)]
    window = max(layer[6] * (-(-layer[7] * layer[0] // per_word) * per_word
                             if engine_row_values(layer[7], layer[0], layer[14], 1, 16)
                             else layer[0] // layer[14] * layer[7]) for layer in layers)
    estimates = []
    for layer in layers:
        per_group = layer[0] // layer[14]
        staging = staging_cycles(layer[1:3], layer[0], layer[6:8], layer[8:10], layer[10:12], layer[12:14],
                                 layer[4:6], 16, port // bundles, bundles=bundles) if layer[15] else ()
        estimates.append(engine_cycles(per_group * layer[6] * layer[7], layer[3], layer[4] * layer[5], 16, lanes,
                                       vector=vector, channels=per_group, groups=layer[14], port_words=port,
                                       row=engine_row_values(layer[7], per_group, layer[14], 1, 16), staging=staging,
                                       pixels_at_once=pixels, shared=pixels == 2, buffer_window=window,
                                       output_in_ddr=bool(layer[16]), residual=bool(layer[17]), stream=stream))
    # (each layer streamed where the estimate takes it so: the build's choice)
    (tmp_path / "layers.txt").write_text("".join(" ".join(map(str, layer + (int(estimated["streamed"]),))) + "\n"
                                                 for layer, estimated in zip(layers, estimates)))
    (tmp_path / "count.cpp").write_text(COUNTING % dict(lanes=lanes, uram_lanes=uram_lanes, vector=vector,
                                                        shared=str(pixels == 2).lower(), stream=stream,
                                                        window=window, port=port, pixels=pixels,
                                                        bundles=bundles))
    compile_program(tmp_path / "count.cpp", tmp_path / "count", "-std=c++14", "-O2")
    run = subprocess.run([str(tmp_path / "count"), str(tmp_path / "layers.txt")], check=True, capture_output=True,
                         text=True)
    # no warning of ap_types' (a part-select out of its word's bits: a padding place's lane taken as negative)
    assert not run.stderr, run.stderr[:400]
    counted = run.stdout.splitlines()
    assert len(counted) == len(layers)
    if stream:  # (some of them streamed: those of few pairs and many filters)
        assert sum(e["streamed"] for e in estimates) >= 10
    for layer, line, estimated in zip(layers, counted, estimates):
        cycles, words = map(int, line.split())
        assert abs(estimated["cycles"] - cycles) <= 0.02 * cycles, (layer, cycles, estimated)
        assert estimated["weight_words"] == words, (layer, words, estimated)
