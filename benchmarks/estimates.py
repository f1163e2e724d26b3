"""The execution-unit estimator (hetdeploy/planning/units/) against published synthesis results.

    .venv/bin/python benchmarks/estimates.py [--json]

benchmarks/published_synthesis.csv holds the published points with their sources: hls4ml tutorial notebook
outputs (fastmachinelearning/hls4ml-tutorial at the commit named), hls4ml's synthesis baselines, a PYNQ-Z2
implementation of the jet tagger, public hls4ml projects that commit their reports (the source names the
repository, commit and report), and two FINN designs (BNN-PYNQ) the estimator does not model. Each row's
configuration (network, fixed-point bits, reuse factor, fraction of the multiplications pruning kept, the clock
period the design was built at, ``clock_ns``: hls4ml's ClockPeriod, its default 5 ns where the project sets none;
a network given layer by layer, ``layers``) goes through ``units.estimate`` layer by layer, with the design's own
weights where its project committed them (the ``weights`` column, a folder of the shared data
synthesis-weights; else estimated from the architecture, and the output says which rows); the rows are
compared like with like: an HLS report's figures with the estimate, a synthesis or implementation result with
the same estimate but its LUTs, what Vivado's synthesis keeps of the estimate's (``units.synthesized_lut``) (the
table's ``kind`` says which). Each row's estimate is its HLS tool's (``hls_tool``: Vivado HLS registers a Latency
layer's products, Vitis HLS its partial sums); each layer sums in the design's precision (hls4ml's configuration
gives accum_t the layer's type, where hetdeploy's units leave it "auto": ``units.accumulator_bits``); a quantized
model's (the ``input_bits`` column set: QKeras designs) weights are its quantizer's bits, its accumulators, its
layers' results (what a layer reads where no quantized activation comes between) and its input hls4ml's default
precision, the input ``input_bits`` wide (the input's own type where the design set
one: 1 for an ap_uint<1> input), and its published weights are of the type ap_fixed<bits, ``weight_integer``>
(empty: hls4ml's default integer bits). Weights committed with a design added here are in
benchmarks/synthesis_weights, in the shared data's layout.
Latency is the units' arithmetic (``compute_cycles``: hls4ml's own design; hetdeploy's arena moves are not in a
standalone hls4ml project): summed for io_parallel networks; for io_stream ones (dataflow) the slowest layer
plus each other layer's fill, its estimate for one vector (none for an activation without a lookup table), and a
cycle for each FIFO between two layers (``units.estimate``'s rule inside a unit); its output port holds a word
(``units.registers_output``).
An io_parallel network is one hls4ml project, which holds its input in registers once (its later layers read the
wires before them), where each of hetdeploy's units is a project of its own and holds its input.

Prints one row per point and metric, then the share of points within the issue's bars per metric (DSP,
BRAM18 and latency within +-25 %, LUT and FF within +-50 %): first for the points held out (``use`` = holdout:
marked so when added, before any rule looked at them), then for those the constants were fitted on (fit:
in-sample; taitashaw's two rows, held out when added, are fit since their report's per-layer figures set the
streamed rules: a cycle a FIFO, an activation without a table holding no word), for whole networks and hls4ml's
single-layer baselines apart, and the worst points; then the share
of published FF figures that some figure of the estimate's range (``units.estimate_range``: from the HLS tool
cutting each Latency layer's pipeline inside its adder trees only, ``least``, to after its products, ``most``)
is within the bar of. ``--json``: JSON only, {points: [{id, source, network, part, metric, published, estimate,
least, most, kind, use, weights}], shares, ff_range_shares, reachable_shares, not_compared}. Run by hand; tests
check behaviour, never time.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
from pathlib import Path
from typing import Callable

import numpy as np

from hetdeploy.core.board import VITIS_HLS, VIVADO_HLS
from hetdeploy.core.precision import OCTAVES, weight_octaves
from hetdeploy.planning.units import (RESOURCES, TABLE_OPS, TABLE_SELECT_OPS, UNIT_CONTROL_FF, UNIT_CONTROL_LUT,
                                      Shape, estimate, kind_of, registers_output, synthesized_lut, windowed)

TABLE = Path(__file__).resolve().parent / "published_synthesis.csv"
METRICS = (*RESOURCES, "latency_cycles")
BARS = {"dsp": 0.25, "bram18": 0.25, "latency_cycles": 0.25, "lut": 0.5, "ff": 0.5}
BASELINES = "test/pytest/baselines"  # hls4ml's single-layer synthesis baselines, apart from whole networks
HLS4ML_TABLE_SIZE = 1024  # the published designs kept hls4ml's default lookup tables
HLS4ML_WIDTH, HLS4ML_INTEGER = 16, 6  # hls4ml's default precision, ap_fixed<16,6>
# The weights some public projects committed beside their reports (the table's ``weights`` column): the
# shared data folder beside this checkout, as in shared/data/synthesis-weights/README.md. A row whose weights are
# not published (or not found here) is estimated from its architecture alone, every product a full-width one.
WEIGHTS = [Path(__file__).resolve().parent / "synthesis_weights",  # designs added here, their weights beside
           Path(__file__).resolve().parents[2] / "shared" / "data" / "synthesis-weights",
           Path(__file__).resolve().parents[1] / "shared" / "data" / "synthesis-weights"]


def _dense(n_in: int, n_out: int, kept: float, softmax: bool = False, streamed: bool = False,
           weight_octaves: tuple[int, ...] = ()) -> Shape:
    """A dense layer; under io_stream its output through a FIFO of one word, its input word copied into an array."""
    return Shape("kernel", max(1, math.ceil(n_in * kept)), n_out, 1, streamed, 0, n_out, softmax, input_values=n_in,
                 fifos=((1, n_out),) if streamed else (), weight_octaves=weight_octaves, window_values=n_in)


def keras_magnitudes(initializer: str, fan_in: int, fan_out: int) -> Callable[[float], float]:
    """The probability that a weight Keras draws from ``initializer`` has a magnitude under x (the Keras
    defaults: 'normal' is N(0, 0.05^2); the Glorot and LeCun limits from the kernel's fans);
    'uniform_1_10' is RandomUniform(1, 10)."""
    if initializer == "normal":
        return lambda x: math.erf(x / (0.05 * math.sqrt(2)))
    if initializer == "uniform_1_10":
        return lambda x: min(1.0, max(0.0, (x - 1) / 9))
    limit = {"lecun_uniform": math.sqrt(3 / fan_in), "glorot_uniform": math.sqrt(6 / (fan_in + fan_out))}[initializer]
    return lambda x: min(x, limit) / limit


def drawn_octaves(initializer: str, fan_in: int, fan_out: int, count: int, integer: int) -> tuple[int, ...]:
    """``precision.weight_octaves`` expected of ``count`` weights drawn from a Keras initializer, in
    ap_fixed<W, ``integer``>: the published baselines' weights are such draws, not published themselves."""
    below = keras_magnitudes(initializer, fan_in, fan_out)
    bounds = [math.inf] + [2.0 ** (integer - 2 - d) for d in range(OCTAVES - 1)] + [0.0]
    expected = [count * (below(bounds[d]) - below(bounds[d + 1])) for d in range(OCTAVES)]
    counts = [math.floor(e) for e in expected]
    # whole weights, ``count`` in all: the ones left go to the octaves with the largest remainders
    for d in sorted(range(OCTAVES), key=lambda d: counts[d] - expected[d])[:count - sum(counts)]:
        counts[d] += 1
    return tuple(counts)


def _batch_normalization(channels: int, pixels: int, streamed: bool, scale_octaves: tuple[int, ...] = (),
                         fifo: bool = False) -> Shape:
    """hls4ml's BatchNormalization layer (one it keeps: after a quantized layer, whose weights it does not fold a
    batch normalization into, or after a pooling or an activation) on ``pixels`` of ``channels``: a product a value,
    by its channel's scale, and the bias added (nnet_batchnorm's normalize: a multiply-accumulate of one product,
    n_in = 1, one weight a channel); its output through a FIFO when ``fifo``."""
    values = pixels * channels
    return Shape("kernel", 1, channels, pixels, streamed, 0, values, False, input_values=values,
                 fifos=((pixels, channels),) if fifo else (), weight_octaves=scale_octaves, window_values=channels,
                 weight_bits=HLS4ML_WIDTH)  # float scales, in hls4ml's default type in a quantized model too


def _activation(op: str, channels: int, streamed: bool, pixels: int = 1, fifo: bool = False) -> Shape:
    """hls4ml's separate activation layer on ``pixels`` of ``channels`` (a lookup table for
    TABLE_OPS), its output through a FIFO when ``fifo``."""
    values = pixels * channels
    return Shape("elementwise", 1, channels, pixels, streamed, 0, values, False, input_values=values,
                 fifos=((pixels, channels),) if fifo else (), table_layers=int(op in TABLE_OPS),
                 table_selects=int(op in TABLE_SELECT_OPS))


def _conv(size: int, channels: int, filters: int, kept: float) -> tuple[Shape, int]:
    """A 3x3 convolution, stride 1, 'valid', on size x size x channels, its output through a FIFO; its shape
    and output size."""
    out = size - 2
    return windowed(Shape("kernel", max(1, math.ceil(9 * channels * kept)), filters, out * out, True, 0,
                          out * out * filters, False, input_values=size * size * channels,
                          fifos=((out * out, filters),)), [1, channels, size, size], [3, 3]), out


def _pool(size: int, channels: int) -> tuple[Shape, int]:
    """A 2x2 max pooling, its output through a FIFO."""
    out = size // 2
    return windowed(Shape("window", 4, channels, out * out, True, 0, out * out * channels, False,
                          input_values=size * size * channels, fifos=((out * out, channels),)),
                    [1, channels, size, size], [2, 2], [2, 2]), out


# the Keras activations of hls4ml's baselines, as ONNX ops
KERAS_ACTIVATIONS = {"relu": "Relu", "leaky_relu": "LeakyRelu", "prelu": "PRelu", "elu": "Elu", "sigmoid": "Sigmoid"}


def network(name: str, kept: float, weights: list = ()) -> list[Shape]:
    """The layers of a published network as hls4ml built them (BatchNormalization fused into the
    layer before it; under io_stream each Activation a layer of its own). A network given layer by
    layer (``parallel|...`` or ``stream|...``) is ``layers``'. hls4ml's single-layer
    baselines are named by their parameters: ``dense:N_IN:N_OUT:ACTIVATION:IO:INITIALIZER`` (a Dense layer and a
    separate Keras activation, IO ``parallel`` or ``stream``, its weights drawn from the Keras
    initializer named), ``maxpool:RANK:PADDING`` (MaxPooling1D on 121 x 3 or MaxPooling2D on 18 x 15 x 3,
    pool 2, io_parallel). The baselines' weights are in hls4ml's default ap_fixed<16,6> but for the
    DepthwiseConv2D test's fixed<32,12>; ``weights`` (each kernel layer's, in order) where the design's are
    published, else none (every product counts as a full-width one)."""
    if name.split("|")[0] in ("parallel", "stream"):
        return layers(name, kept, weights)
    kind, *parameters = name.split(":")
    if kind == "dense":
        n_in, n_out, activation, io, initializer = parameters
        streamed = io == "stream"
        weights = drawn_octaves(initializer, int(n_in), int(n_out), int(n_in) * int(n_out), HLS4ML_INTEGER)
        return [_dense(int(n_in), int(n_out), kept, streamed=streamed, weight_octaves=weights),
                _activation(KERAS_ACTIVATIONS[activation], int(n_out), streamed)]
    if kind == "maxpool":
        rank, padding = parameters
        size, channels = ((18, 15), 3) if rank == "2d" else ((121,), 3)
        out = [(n + 1) // 2 if padding == "same" else n // 2 for n in size]
        return [Shape("window", 2 ** len(size), channels, math.prod(out), False, 0, math.prod(out) * channels, False,
                      input_values=math.prod(size) * channels)]
    if name in ("svhn_cnn", "svhn_qcnn"):  # hls4ml tutorial part 6: 32x32x3, conv 16-16-24 (3x3 valid) + 2x2 pools,
        # dense 42-64-10, a batch normalization and a ReLU after each layer but the last; the normalization is folded
        # into the float model's layers and the QKeras model's convolutions (QConv2DBatchnorm), but kept after its
        # QDense layers (svhn_qcnn): hls4ml folds none into a quantized layer's weights
        shapes, size, channels = [], 32, 3
        for filters in (16, 16, 24):
            conv, size = _conv(size, channels, filters, kept)
            pool, pooled = _pool(size, filters)
            shapes += [conv, _activation("Relu", filters, True, size * size, fifo=True), pool]
            size = pooled
            channels = filters
        flat = size * size * channels
        for n_in, n_out in ((flat, 42), (42, 64)):
            shapes.append(_dense(n_in, n_out, kept))
            if name == "svhn_qcnn":
                shapes.append(_batch_normalization(n_out, 1, False))
            shapes.append(_activation("Relu", n_out, False))
        # the tutorial prunes every layer but output_dense
        return shapes + [_dense(64, 10, 1.0, softmax=True)]
    if name == "depthwise3x3":  # hls4ml's DepthwiseConv2D baseline: 3x3 on 32x32x3, 'valid', io_stream,
        # one layer (its output the top's port: no FIFO); a (3, 3, 3, 1) kernel: fans 27 and 9
        return [windowed(Shape("kernel", 9, 3, 30 * 30, True, 0, 30 * 30 * 3, False, input_values=32 * 32 * 3,
                               weight_octaves=drawn_octaves("glorot_uniform", 27, 9, 27, 12)), [1, 3, 32, 32], [3, 3])]
    if name == "depthwise1d":  # hls4ml's DepthwiseConv1D baseline: kernel 3 on 32 x 3, 'valid', io_stream;
        # a (3, 3, 1) kernel: fans 9 and 3
        return [windowed(Shape("kernel", 3, 3, 30, True, 0, 30 * 3, False, input_values=32 * 3,
                               weight_octaves=drawn_octaves("glorot_uniform", 9, 3, 9, HLS4ML_INTEGER)),
                         [1, 3, 32], [3])]
    if name == "conv2d_4x4s4":  # hls4ml's Conv2D baseline: 32 filters 4x4, stride 4, 'same', on 28x28x3,
        # io_parallel, no bias, weights from 'normal'
        return [Shape("kernel", 4 * 4 * 3, 32, 7 * 7, False, 0, 7 * 7 * 32, False, input_values=28 * 28 * 3,
                      weight_octaves=drawn_octaves("normal", 48, 512, 4 * 4 * 3 * 32, HLS4ML_INTEGER))]
    raise KeyError(name)


def layers(spec: str, kept: float, weights: list = ()) -> list[Shape]:
    """A network given layer by layer, '|' between layers: its io type (``parallel`` or ``stream``), ``in
    DIMS`` (``16``, ``128x9``, ``28x28x1``: spatial sizes then channels), then in order ``dense N``, ``conv F kK
    [same]`` (stride 1), ``dwconv kK [same]`` (depthwise), ``pwconv F`` (1x1), ``maxpool P``, ``gmaxpool``
    (global), ``bn`` (a BatchNormalization hls4ml keeps as a layer: a product a value, ``_batch_normalization``),
    ``flatten``, and activations (``relu``, ``sigmoid``, ...; ``softmax`` goes with the dense layer before it, as
    its Softmax). ``weights``: each kernel layer's octaves, in order (none: unknown). Under io_stream every layer
    but the last writes a FIFO."""
    io, first, *rest = spec.split("|")
    streamed = io == "stream"
    *spatial, channels = [int(d) for d in first.split()[1].split("x")]
    octaves = iter(weights or ())
    shapes: list[Shape] = []

    def fifo(pixels: int, width: int) -> tuple:
        return ((pixels, width),) if streamed else ()

    for token in rest:
        op, *args = token.split()
        pixels, read = math.prod(spatial), math.prod(spatial) * channels
        if op in ("conv", "dwconv", "pwconv"):
            k = 1 if op == "pwconv" else int(args[-2 if args[-1] == "same" else -1][1:])
            filters = channels if op == "dwconv" else int(args[0])
            out = spatial if "same" in args else [n - k + 1 for n in spatial]
            taps = k ** len(spatial)
            pads = [(k - 1) // 2] * len(spatial) + [k // 2] * len(spatial) if "same" in args else None  # Keras's
            shapes.append(windowed(Shape("kernel", max(1, math.ceil(taps * (1 if op == "dwconv" else channels) * kept)),
                                         filters, math.prod(out), streamed, 0, math.prod(out) * filters, False,
                                         input_values=read, fifos=fifo(math.prod(out), filters),
                                         weight_octaves=next(octaves, ())),
                                   [1, channels, *spatial], [k] * len(spatial), None, pads))
            spatial, channels = out, filters
        elif op == "dense":
            shapes.append(_dense(read, int(args[0]), kept, streamed=streamed, weight_octaves=next(octaves, ())))
            spatial, channels = [], int(args[0])
        elif op == "softmax":
            shapes[-1] = dataclasses.replace(shapes[-1], softmax=True, layers=2)  # hls4ml's Softmax: its own layer
        elif op == "maxpool":
            size = int(args[0])
            out = [n // size for n in spatial]
            shapes.append(windowed(Shape("window", size ** len(spatial), channels, math.prod(out), streamed, 0,
                                         math.prod(out) * channels, False, input_values=read,
                                         fifos=fifo(math.prod(out), channels)),
                                   [1, channels, *spatial], [size] * len(spatial), [size] * len(spatial)))
            spatial = out
        elif op == "gmaxpool":  # hls4ml's global_pooling*d_cl: a pixel a cycle into a running max a channel
            shapes.append(Shape("window", 1, channels, pixels, streamed, 0, channels, False, input_values=read,
                                fifos=fifo(1, channels), window_values=channels))
            spatial = []
        elif op == "bn":  # hls4ml's normalize: each value times its channel's scale (a constant) plus its bias
            shapes.append(_batch_normalization(channels, max(1, pixels), streamed, next(octaves, ()), fifo=streamed))
        elif op == "flatten":
            spatial, channels = [], read
        else:  # an activation
            shapes.append(_activation(KERAS_ACTIVATIONS[op], channels, streamed, max(1, pixels),
                                      fifo=streamed))
    if streamed:  # the last layer writes the top's port, not a FIFO
        shapes[-1] = dataclasses.replace(shapes[-1], fifos=())
    return shapes


def published_weights(folder: str, integer: int) -> list[tuple[int, ...]]:
    """Each kernel layer's weights (``precision.weight_octaves`` in ap_fixed<W, ``integer``>) from the
    design's committed weights, in layer order (a separable convolution's depthwise half first, a batch
    normalization's scales); none when they are not found here."""
    for root in WEIGHTS:
        path = root / folder / "weights.npz"
        if path.is_file():
            arrays = np.load(path)
            order = sorted(arrays.files, key=lambda k: (int(k.split("_")[0][1:]), k.endswith("_pw")))
            # a batch normalization's (2, C): its scales (row 0) are its products' constants
            return [weight_octaves(arrays[k][0] if k.endswith("_bn") else arrays[k], integer) for k in order]
    return []


def fill_cycles(shape: Shape, reuse_factor: int, bits: int) -> int:
    """Cycles a streamed layer takes to its first output vector: its estimate for one vector; none for a
    combinational layer (an activation without a lookup table reads, computes and writes a word in one cycle of
    the dataflow, as hls4ml's io_stream baselines show: Dense + ReLU takes no longer than the Dense, Dense + ELU
    one cycle more)."""
    if not registers_output(shape):  # a combinational layer: an activation without a table
        return 0
    return estimate(dataclasses.replace(shape, vectors=1, input_map=(1, 1, *shape.input_map[2:]) if shape.input_map
                                        else (), table_entries=HLS4ML_TABLE_SIZE), reuse_factor, bits)["compute_cycles"]


def hls_tool(tool: str) -> str:
    """The HLS tool behind a row's ``tool`` (units' HLS_TOOLS): named, or for a Vivado synthesis or implementation
    the HLS tool of its release (Vivado HLS's last was 2020.1; Vitis HLS from 2020.2)."""
    if tool.startswith(("Vitis HLS", "Vivado HLS")):
        return VITIS_HLS if tool.startswith("Vitis") else VIVADO_HLS
    year, release = (int(n) for n in tool.split()[-1].split("."))
    return VIVADO_HLS if (year, release) <= (2020, 1) else VITIS_HLS


def network_estimate(shapes: list[Shape], reuse_factor: int, widths: list[int],
                     products_registered: bool | None = None) -> dict[str, int]:
    """The network's figures, each layer at its data width (``widths``), ``products_registered`` as
    ``units.estimate``'s (None: as each layer's HLS tool does)."""
    streamed = any(s.streamed for s in shapes)
    if not streamed:  # one io_parallel project registers its input once; its later layers read the wires before them
        shapes = shapes[:1] + [dataclasses.replace(s, input_values=0) for s in shapes[1:]]
    layers = [estimate(dataclasses.replace(s, table_entries=HLS4ML_TABLE_SIZE), reuse_factor, bits,
                       products_registered=products_registered) for s, bits in zip(shapes, widths)]
    totals = {k: sum(e[k] for e in layers) for k in RESOURCES}
    # one hls4ml project, one control state: each layer's estimate holds a unit's (hetdeploy's units are projects)
    totals["lut"] -= (len(layers) - 1) * UNIT_CONTROL_LUT
    totals["ff"] -= (len(layers) - 1) * UNIT_CONTROL_FF
    compute = [e["compute_cycles"] for e in layers]
    if streamed:  # dataflow: the slowest layer, each other layer's fill, and a cycle a FIFO between two layers
        slowest = compute.index(max(compute))
        totals["latency_cycles"] = compute[slowest] + len(shapes) - 1 + sum(
            fill_cycles(s, reuse_factor, bits) for k, (s, bits) in enumerate(zip(shapes, widths)) if k != slowest)
        # the project's output port holds its word (Vitis HLS's AXI-Stream register slice): the last layer's
        # output register, or one of the port's own after a layer that holds none
        totals["ff"] += 0 if registers_output(shapes[-1]) else shapes[-1].n_out * widths[-1]
    else:
        totals["latency_cycles"] = sum(compute)
    return totals


def points() -> list[dict]:
    """One object per published figure of a row the estimator models, and the excluded rows' reasons."""
    result = []
    with TABLE.open() as f:
        for row in csv.DictReader(f):
            if row["use"].startswith("excluded"):
                result.append({"source": row["source"], "network": row["network"], "part": row["part"],
                               "kind": row["kind"], "use": row["use"]})
                continue
            # a quantized model's weights are ap_fixed<bits, weight_integer> (QKeras' quantized_bits(bits, 0): 1)
            integer = int(row["weight_integer"] or HLS4ML_INTEGER)
            weights = published_weights(row["weights"], integer) if row["weights"] else []
            clock_mhz = 1000.0 / float(row["clock_ns"])
            bits = int(row["bits"])
            shapes = [dataclasses.replace(s, clock_mhz=clock_mhz, hls_tool=hls_tool(row["tool"]))
                      for s in network(row["network"], float(row["kept"]), weights)]
            widths = [bits] * len(shapes)
            # each layer sums in the design's precision (hls4ml's configuration gives accum_t the layer's type, where
            # hetdeploy's units leave it "auto")
            accum = bits
            if row["input_bits"]:  # a quantized model: its weights are the quantizer's (a kept batch normalization's
                # scales hls4ml's default type), its input hls4ml's default (or its own), its accumulators and each
                # layer's result hls4ml's default precision (read as such by the layer after it, where no quantized
                # activation comes between)
                shapes = [dataclasses.replace(s, weight_bits=s.weight_bits or bits) for s in shapes]
                widths = [HLS4ML_WIDTH if i and kind_of(shapes[i - 1]).foldable else bits for i in range(len(shapes))]
                widths[0] = int(row["input_bits"])
                accum = HLS4ML_WIDTH
            shapes = [dataclasses.replace(s, accum_bits=accum) for s in shapes]
            figures = network_estimate(shapes, int(row["reuse_factor"]), widths)
            # the HLS tool cuts the Latency layers' pipelines inside their adder trees only (least), or after
            # their products (most)
            least, most = (network_estimate(shapes, int(row["reuse_factor"]), widths, products_registered=registered)
                           for registered in (False, True))
            if row["kind"] != "HLS":  # what Vivado's synthesis keeps of the LUTs the HLS report counts
                figures["lut"] = synthesized_lut(figures["lut"])
            for metric in METRICS:
                if row[metric]:
                    result.append({"source": row["source"], "network": row["network"], "part": row["part"],
                                   "metric": metric, "published": int(row[metric]), "estimate": figures[metric],
                                   "least": least[metric], "most": most[metric],
                                   "kind": row["kind"], "use": row["use"], "id": row["id"],
                                   "weights": "published" if weights else
                                   ("not found here" if row["weights"] else "not published")})
    return result


def within(point: dict) -> bool:
    published, estimated = point["published"], point["estimate"]
    if published == 0:
        return estimated == 0
    return abs(estimated - published) / published <= BARS[point["metric"]]


def within_range(point: dict) -> bool:
    """Whether some figure in [least, most] is ``within`` the bar of the published one (``units.estimate_range``'s
    ends: the HLS tool cuts each Latency layer's pipeline inside its adder trees only, or after its products)."""
    bar, published = BARS[point["metric"]], point["published"]
    return point["least"] <= published * (1 + bar) and point["most"] >= published * (1 - bar)


def reachable(compared: list[dict]) -> set[int]:
    """The points (indices into ``compared``) that one estimate per set of the estimator's inputs (network, kept
    share, published weights, clock, reuse factor, bits: what ``points`` estimates from) can bring within the bar
    at most: where the same inputs were published with figures further apart than the bar spans (the same
    configuration under different tools, parts or trainings whose weights are not published), no estimate of those
    inputs brings them all within, whatever its rules. Per set and metric, the value inside the most points' bars
    (their bars as intervals, the point where most overlap)."""
    inputs = {}
    with TABLE.open() as f:
        for row in csv.DictReader(f):
            inputs[row["id"]] = tuple(row[k] for k in ("network", "kept", "weights", "clock_ns", "reuse_factor",
                                                       "bits"))
    same: dict[tuple, list[int]] = {}
    for k, point in enumerate(compared):
        same.setdefault((inputs[point["id"]], point["metric"]), []).append(k)
    chosen = set()
    for (_, metric), members in same.items():
        bar = BARS[metric]
        spans = {k: (compared[k]["published"] * (1 - bar), compared[k]["published"] * (1 + bar)) for k in members}
        # the most overlap is at some interval's lower end
        best = max(([k for k in members if spans[k][0] <= low <= spans[k][1]] for low, _ in spans.values()), key=len)
        chosen.update(best)
    return chosen


def shares(compared: list[dict], check: Callable[[dict], bool] = within) -> dict[str, dict[str, list[int]]]:
    """Per group of points (held out first: rows marked so when they were added, before any rule looked at
    them, a rule set on one moving it to "fit" in the same commit; the fit rows' share is in-sample), per
    metric: [points within the bar, points]."""
    groups = {"holdout": lambda p: p["use"] == "holdout", "fit": lambda p: p["use"] == "fit",
              "networks": lambda p: BASELINES not in p["source"], "baselines": lambda p: BASELINES in p["source"],
              "all": lambda p: True}
    return {group: {metric: [sum(map(check, of)), len(of)]
                    for metric in METRICS
                    for of in [[p for p in compared if member(p) and p["metric"] == metric]]}
            for group, member in groups.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only: the points, the shares per group and "
                        "metric ([within, of]), the rows not compared")
    args = parser.parse_args()
    found = points()
    compared = [p for p in found if "metric" in p]
    by_group = shares(compared)
    ff_in_range = {group: metrics["ff"] for group, metrics in shares(compared, within_range).items()}
    reached = reachable(compared)
    ceiling = shares([p | {"reachable": k in reached} for k, p in enumerate(compared)], lambda p: p["reachable"])
    if args.json:
        print(json.dumps({"points": [{k: p[k] for k in ("id", "source", "network", "part", "metric", "published",
                                                         "estimate", "least", "most", "kind", "use", "weights")}
                                     for p in compared],
                          "shares": by_group, "ff_range_shares": ff_in_range, "reachable_shares": ceiling,
                          "not_compared": [{"source": p["source"], "use": p["use"]} for p in found
                                           if "metric" not in p]}, indent=1))
        return
    print(f"{'point':<26} {'kind':<6} {'use':<8} {'metric':<15} {'published':>10} {'estimate':>10} {'ratio':>7}")
    for p in compared:
        ratio = p["estimate"] / p["published"] if p["published"] else float("nan")
        print(f"{p['id']:<26} {p['kind']:<6} {p['use']:<8} {p['metric']:<15} {p['published']:>10} "
              f"{p['estimate']:>10} {ratio:>7.2f}{'' if within(p) else '  outside'}")
    for title, table in (("share within the bar (DSP, BRAM18, latency: +-25 %; LUT, FF: +-50 %)", by_group),
                         ("the most any estimate could bring within the bar, one figure for the same inputs "
                          "(reachable: the same configuration published far apart)", ceiling)):
        print(f"\n{title}")
        for group, metrics in table.items():
            print(f"  {group:<9} " + ", ".join(f"{metric} {hit}/{of}" + (f" ({100 * hit / of:.1f} %)" if of else "")
                                               for metric, (hit, of) in metrics.items()))
    print("FF within the estimate's range (units.estimate_range: from the HLS tool cutting a Latency layer's "
          "pipeline inside its adder trees only, to after its products), within the bar: "
          + ", ".join(f"{group} {hit}/{of} ({100 * hit / of:.1f} %)" for group, (hit, of) in ff_in_range.items()))
    unknown = sorted({p["id"] for p in compared if p["weights"] != "published"})
    known = sorted({p["id"] for p in compared if p["weights"] == "published"})
    print(f"weights: published for {len(known)} rows ({', '.join(known) or 'none'}); the other {len(unknown)} are "
          f"estimated from their architecture (a baseline's drawn from its Keras initializer, a network's products "
          f"all full width)")
    worst = sorted(compared, key=lambda p: -abs(math.log(max(p["estimate"], 1) / max(p["published"], 1))))[:8]
    print("worst points (estimate / published): " + "; ".join(
        f"{p['id']} {p['metric']} {p['estimate']}/{p['published']}" for p in worst))
    for p in found:
        if "metric" not in p:
            print(f"not compared: {p['source']} ({p['use']})")


if __name__ == "__main__":
    main()
