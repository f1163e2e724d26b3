"""hls/arena.h on its own: the word-wide memories every generated top and unit wrapper moves buffers
through. A small C++ program writes runs of values (a streamed pixel's channels, whole words and
runs that share words with their neighbours) and arrays, reads them back run by run, value by
value and as bytes, and prints what it read; the test compares with the values and with the
little-endian layout the host and the DDR image assume."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from hetdeploy.fpga.packing import pack_fixed
from hetdeploy.planning.units import ARENA_WORD_BYTES
from programs import compile_program

PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef ap_fixed<%(width)d, 6> value_t;
static const int N = %(run)d, RUNS = %(runs)d, VALUES = N * RUNS;
static const int WORDS = (VALUES + hetdeploy::lane<value_t>::per_word - 1) / hetdeploy::lane<value_t>::per_word;

int main() {
    static hetdeploy::word_t memory[WORDS + 2];  // a guard word either side
    memory[0] = memory[WORDS + 1] = ~hetdeploy::word_t(0);
    hetdeploy::word_t *buffer = memory + 1;
    float source[VALUES];
    for (int i = 0; i < VALUES; i++) source[i] = (i * 37 %% 101 - 50) / 4.0f;
    for (int r = RUNS - 1; r >= 0; r--) {  // out of order: each run keeps its neighbours' lanes
        value_t run[N];
        for (int c = 0; c < N; c++) run[c] = source[r * N + c];
        hetdeploy::write_run<value_t, N>(buffer, r, run);
    }
    for (int r = 0; r < RUNS; r++) {
        value_t run[N];
        hetdeploy::read_run<value_t, N>(buffer, r, run);
        for (int c = 0; c < N; c++) std::printf("%%g %%g\n", run[c].to_float(), hetdeploy::read<value_t>(buffer, r * N + c).to_float());
    }
    float back[VALUES];
    hetdeploy::from_float<value_t>(source, buffer, VALUES);
    hetdeploy::to_float<value_t>(buffer, back, VALUES);
    for (int i = 0; i < VALUES; i++) std::printf("%%g\n", back[i]);
    for (int b = 0; b < WORDS * hetdeploy::WORD_BYTES; b++)
        std::printf("%%d\n", int(buffer[b / hetdeploy::WORD_BYTES].range(8 * (b %% hetdeploy::WORD_BYTES) + 7,
                                                                8 * (b %% hetdeploy::WORD_BYTES))));
    std::printf("%%d\n", int(memory[0] == ~hetdeploy::word_t(0) && memory[WORDS + 1] == ~hetdeploy::word_t(0)));
}
"""


@pytest.mark.parametrize("width, run, runs", [(16, 3, 7), (16, 8, 3), (8, 1, 13), (8, 5, 5), (20, 3, 4), (32, 1, 3)])
def test_runs_arrays_and_bytes_round_trip_through_words(tmp_path, width, run, runs):
    (tmp_path / "main.cpp").write_text(PROGRAM % {"width": width, "run": run, "runs": runs})
    binary = tmp_path / "main"
    compile_program(tmp_path / "main.cpp", binary, "-std=c++14", "-O1")
    lines = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split("\n")
    values = run * runs
    source = np.array([(i * 37 % 101 - 50) / 4.0 for i in range(values)], dtype=np.float32)
    pairs = np.array([line.split() for line in lines[:values]], dtype=np.float64)
    # every value is a multiple of 1/4 within ap_fixed<W,6>'s range: exact
    assert (pairs[:, 0] == source).all() and (pairs[:, 1] == source).all()
    assert (np.array(lines[values:2 * values], dtype=np.float64) == source).all()
    layout = bytes(int(x) for x in lines[2 * values:-2])
    packed = pack_fixed(source.astype(np.float64), f"ap_fixed<{width},6>")  # the host's little-endian elements
    lane = len(packed) // values
    mask = (1 << width) - 1  # a lane's bits above the value's are not the value's (the host sign-extends)
    assert [int.from_bytes(layout[k:k + lane], "little") & mask for k in range(0, len(packed), lane)] == \
        [int.from_bytes(packed[k:k + lane], "little") & mask for k in range(0, len(packed), lane)]
    # whole words; the last one's padding zero
    assert len(layout) % ARENA_WORD_BYTES == 0 and not any(layout[len(packed):])
    assert lines[-2] == "1"  # nothing written outside the buffer's words


WORD_BITS_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

// word_bits<W> of every lane of W bits (arena.h's lane of an ap_uint<W>) in two words of known bytes
template <int W> void lanes(const hetdeploy::word_t &word) {
    for (int low = 0; low + W <= hetdeploy::WORD_BITS; low += 8 * hetdeploy::lane<ap_uint<W> >::bytes)
        std::printf("%d %d %llu\n", W, low, (unsigned long long)hetdeploy::word_bits<W>(word, low).to_uint64());
}

int main() {
    hetdeploy::word_t words[2];
    for (int w = 0; w < 2; w++)
        for (int b = 0; b < hetdeploy::WORD_BYTES; b++)
            words[w].range(8 * b + 7, 8 * b) = (37 * b + 101 * w + 13) % 256;
    for (int w = 0; w < 2; w++) {
        lanes<1>(words[w]); lanes<5>(words[w]); lanes<8>(words[w]); lanes<13>(words[w]); lanes<16>(words[w]);
        lanes<20>(words[w]); lanes<32>(words[w]); lanes<48>(words[w]); lanes<64>(words[w]);
    }
}
"""


def test_a_lanes_bits_are_those_of_the_words_bytes_at_every_width_and_place(tmp_path):
    """arena.h's word_bits (every lane read from a word, in C-simulation from the 64-bit half it lies in) gives the
    bits of the word's little-endian bytes at each lane's place, for widths of 1 to 64 bits."""
    (tmp_path / "main.cpp").write_text(WORD_BITS_PROGRAM)
    compile_program(tmp_path / "main.cpp", tmp_path / "main", "-std=c++14", "-O1")
    lines = subprocess.run([str(tmp_path / "main")], check=True, capture_output=True, text=True).stdout.split()
    rows = np.array(lines, dtype=object).reshape(-1, 3)
    expected = []
    for w in range(2):
        word = int.from_bytes(bytes((37 * b + 101 * w + 13) % 256 for b in range(ARENA_WORD_BYTES)), "little")
        for width in (1, 5, 8, 13, 16, 20, 32, 48, 64):
            lane = next(bits for bits in (8, 16, 32, 64) if width <= bits)
            for low in range(0, 8 * ARENA_WORD_BYTES - width + 1, lane):
                expected.append((width, low, (word >> low) & ((1 << width) - 1)))
    seen = [(int(a), int(b), int(c)) for a, b, c in rows]
    assert len(seen) == len(expected) > 100 and seen == expected


ROUNDINGS = ("AP_TRN", "AP_TRN_ZERO", "AP_RND", "AP_RND_ZERO", "AP_RND_MIN_INF", "AP_RND_INF", "AP_RND_CONV")
OVERFLOWS = ("AP_WRAP", "AP_SAT", "AP_SAT_SYM")


def test_packing_and_the_budgets_rounding_are_ap_fixeds_own_on_every_mode(tmp_path):
    """pack_fixed (DDR weights) and precision.quantize (the --error-budget simulation), both through
    hls4ml's quantizers, give the codes the ap_types headers give when a double is assigned, for every
    rounding and overflow mode, signed and unsigned, on values at and between the grid's half steps
    and beyond its range."""
    from hetdeploy.core.precision import quantize

    types = [f"{kind}<8,3,{q},{o}>" for kind in ("ap_fixed", "ap_ufixed") for q in ROUNDINGS for o in OVERFLOWS]
    values = np.concatenate([np.arange(-24, 24, 1 / 64), np.arange(-24, 24, 1 / 64) + 1 / 128, [0.3, -0.3, 1e-9]])
    dumps = "\n".join(f"    dump<{t} >(v, n);" for t in types)
    program = ("#include <cstdio>\n#include <stdint.h>\n#include \"ap_fixed.h\"\n"
               "template <typename T> void dump(const double *v, int n) {\n"
               "    for (int i = 0; i < n; i++) { T x = v[i]; printf(\"%llu \", (unsigned long long)"
               "x.range(T::width - 1, 0).to_uint64()); }\n    printf(\"\\n\");\n}\n"
               f"static const double v[] = {{{', '.join(repr(float(x)) for x in values)}}};\n"
               f"int main() {{\n    const int n = {len(values)};\n{dumps}\n    return 0;\n}}\n")
    (tmp_path / "modes.cpp").write_text(program)
    binary = tmp_path / "modes"
    compile_program(tmp_path / "modes.cpp", binary, "-std=c++14", "-O1")
    lines = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(lines) == len(types)
    mask = (1 << 8) - 1
    for precision, line in zip(types, lines):
        expected = np.array(line.split(), dtype=np.int64)
        packed = np.frombuffer(pack_fixed(values, precision), dtype="<i1").astype(np.int64) & mask
        assert packed.tolist() == expected.tolist(), precision
        kind, rounding, overflow = precision.split("<")[0], precision.split(",")[2], precision.split(",")[3][:-1]
        held = quantize(values, 8, 3, kind == "ap_fixed", rounding, overflow)
        assert (np.round(held * 32).astype(np.int64) & mask).tolist() == expected.tolist(), precision


# (op, input shape, attributes): the window ops the top reduces, on odd sizes, every geometry ONNX allows; 4 or 8
# channels fill whole words of ap_fixed<16,5> (one read a window position for the word), the others do not
WINDOW_CASES = [
    ("MaxPool", [1, 5, 11, 9], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # ResNet's stem
    ("MaxPool", [1, 3, 7, 8], {"kernel_shape": [2, 2], "strides": [1, 1]}),
    ("MaxPool", [1, 4, 9, 9], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", [1, 2, 6, 7], {"kernel_shape": [2, 3], "strides": [2, 1], "pads": [0, 1, 1, 0]}),
    ("MaxPool", [1, 3, 10, 10], {"kernel_shape": [2, 2], "strides": [1, 2], "dilations": [2, 3]}),
    ("MaxPool", [1, 4, 13], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ("MaxPool", [1, 8, 9, 9], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # a word a pixel
    # an average counting the padding as zeros, and one of the values inside the input only (Inception v2's)
    ("AveragePool", [1, 5, 9, 9], {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1],
                                   "count_include_pad": 1}),
    ("AveragePool", [1, 5, 9, 9], {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("AveragePool", [1, 8, 10, 7], {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ("AveragePool", [1, 3, 13], {"kernel_shape": [4], "strides": [3], "pads": [2, 1]}),
    # the values inside with no padding: ceil_mode's last windows past the input's edge (a window's count varies:
    # a table of inverses by count), and every window inside (the kernel's size's inverse alone)
    ("AveragePool", [1, 4, 10, 10], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", [1, 3, 8, 6], {"kernel_shape": [2, 3], "strides": [2, 3]}),
    ("GlobalAveragePool", [1, 3, 12, 12], {}),
    ("GlobalAveragePool", [1, 5, 7, 5], {}),
    ("GlobalAveragePool", [1, 6, 20], {}),
    ("GlobalAveragePool", [1, 12, 9, 10], {}),
    # whole words reduced a column at a time (arena.h's window_columns): Inception's pool branch, a mean counting
    # the padding, a dilated window, padding on one side, a 1-D row of three chunks (WINDOW_CHUNK), and a global
    # average 20 columns wide (past WINDOW_RING: a value at a time)
    ("MaxPool", [1, 4, 7, 6], {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("AveragePool", [1, 8, 6, 9], {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1],
                                   "count_include_pad": 1}),
    ("MaxPool", [1, 4, 10, 10], {"kernel_shape": [2, 2], "strides": [1, 2], "dilations": [2, 3]}),
    ("AveragePool", [1, 4, 6, 7], {"kernel_shape": [2, 3], "strides": [2, 1], "pads": [0, 1, 1, 0]}),
    ("MaxPool", [1, 4, 600], {"kernel_shape": [3], "strides": [1], "pads": [1, 1]}),
    ("GlobalAveragePool", [1, 4, 6, 20], {}),
    # two output rows at once (window_row_pairs): their windows meeting (stride 3), the last row alone (5 rows),
    # padding of two rows below, an average of two rows' windows and a window of one row
    ("MaxPool", [1, 4, 9, 8], {"kernel_shape": [3, 3], "strides": [3, 2]}),
    ("MaxPool", [1, 4, 8, 7], {"kernel_shape": [3, 2], "strides": [1, 1], "pads": [0, 0, 2, 1]}),
    ("AveragePool", [1, 4, 8, 8], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", [1, 8, 5, 6], {"kernel_shape": [1, 3], "strides": [1, 1], "pads": [0, 1, 0, 1]}),
]


@pytest.mark.parametrize("rows", [1, 2])
def test_the_tops_window_ops_match_onnxruntime_on_every_geometry(tmp_path, rows):
    """arena.h's window_op on each case's geometry (plan.Window.of, as a build writes it) against
    onnxruntime on the same values, multiples of 1/64 that ap_fixed<16,5> holds exactly: a maximum is
    one of them, exact; a mean (over the whole kernel where ONNX counts the padding, else over the positions inside
    the input) is within half a step of 1/2048 (AP_RND) of the true one. The cycles C-simulation counts as its loops
    run are the cost model's (costs.window_cycles), to the cycle: built for one output row at a time, and for two
    (window_rows: where two rows' windows share their reads)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from hetdeploy.core.board_runtime import channels_last
    from hetdeploy.core.graph import Node
    from hetdeploy.core.plan import Window
    from types import SimpleNamespace

    from hetdeploy.fpga.top_kinds import WINDOW
    from hetdeploy.planning.units.costs import window_cycles

    rng = np.random.default_rng(7)
    declarations, calls, cases = [], [], []
    for k, (op, shape, attrs) in enumerate(WINDOW_CASES):
        node = helper.make_node(op, ["x"], ["y"], **attrs)
        graph = helper.make_graph([node], "w", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
        x = (rng.integers(-15 * 64, 15 * 64, shape) / 64).astype(np.float32)
        (y,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        window = Window.of(Node(f"case{k}", op, ["x"], ["y"], attrs, input_shapes=[shape],
                                output_shapes=[list(y.shape)]))
        declarations.append(WINDOW.declaration(SimpleNamespace(name=f"case{k}", window=window)))
        values = ", ".join(f"{v:.6f}f" for v in channels_last(x).reshape(-1))
        reduce = WINDOW.reduction(f"case{k}", window, "value_t", "source", "target", rows)  # as a build's top
        calls.append(f"{{ static const float x[] = {{{values}}}; hetdeploy::from_float<value_t>(x, source, {x.size}); "
                     f"hetdeploy::window_counted() = 0; {reduce.strip()} print(target, {y.size}); "
                     f"std::printf(\"%lld\\n\", hetdeploy::window_counted()); }}")
        cases.append((channels_last(y).reshape(-1), window_cycles(window.values(), 16, rows)))
    (tmp_path / "main.cpp").write_text(WINDOW_PROGRAM % {"declarations": "\n".join(declarations),
                                                          "calls": "\n    ".join(calls)})
    binary = tmp_path / "main"
    compile_program(tmp_path / "main.cpp", binary, "-std=c++14", "-O1")
    lines = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split("\n")
    for (op, shape, attrs), (want, cycles), line, counted in zip(WINDOW_CASES, cases, lines[::2], lines[1::2]):
        got = np.array(line.split(), dtype=np.float64)
        assert got.shape == want.shape, (op, shape, attrs)
        assert int(counted) == cycles, (op, shape, attrs)
        if op == "MaxPool":
            assert (got == want).all(), (op, shape, attrs, np.flatnonzero(got != want)[:5])
        else:
            assert np.abs(got - want).max() <= 2.0 ** -12 + 1e-6, (op, shape, np.abs(got - want).max())


WINDOW_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef ap_fixed<16, 5, AP_RND, AP_SAT> value_t;
%(declarations)s

static hetdeploy::word_t source[4096], target[4096];

void print(const hetdeploy::word_t *buffer, int m) {
    static float y[16384];
    hetdeploy::to_float<value_t>(buffer, y, m);
    for (int i = 0; i < m; i++) std::printf("%%.9g ", y[i]);
    std::printf("\n");
}

int main() {
    %(calls)s
}
"""


ADD_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef %(a)s a_t;
typedef %(b)s b_t;
typedef %(t)s t_t;
static const int N = %(n)d;

int main() {
    static hetdeploy::word_t a[N], b[N], target[N + 1];
    static const double va[N] = {%(va)s}, vb[N] = {%(vb)s};
    for (int i = 0; i < N; i++) {
        hetdeploy::word_t word = a[i / hetdeploy::lane<a_t>::per_word];
        hetdeploy::set_lane<a_t>(word, i %% hetdeploy::lane<a_t>::per_word, a_t(va[i]));
        a[i / hetdeploy::lane<a_t>::per_word] = word;
        word = b[i / hetdeploy::lane<b_t>::per_word];
        hetdeploy::set_lane<b_t>(word, i %% hetdeploy::lane<b_t>::per_word, b_t(vb[i]));
        b[i / hetdeploy::lane<b_t>::per_word] = word;
    }
    hetdeploy::add<a_t, b_t, t_t>(a, b, target, N, %(relu)s);
    for (int i = 0; i < N; i++) std::printf("%%.17g\n", hetdeploy::read<t_t>(target, i).to_double());
}
"""


@pytest.mark.parametrize("a, b, t, relu", [
    ("ap_fixed<16,4>", "ap_fixed<16,4>", "ap_fixed<16,5,AP_RND,AP_SAT>", "false"),
    ("ap_fixed<12,6>", "ap_ufixed<8,2>", "ap_fixed<8,4,AP_RND,AP_SAT>", "true"),  # rounds, saturates
    ("ap_fixed<20,3>", "ap_fixed<16,7>", "ap_fixed<16,6,AP_RND,AP_SAT>", "true"),
])
def test_the_tops_add_is_the_exact_sum_as_its_output_type_holds_it(tmp_path, a, b, t, relu):
    """arena.h's add (a residual Add, a ReLU after it fused): the exact sum of the two buffers' values, then the
    ReLU, then the output type's rounding and saturation (precision.quantize), value by value over 37 values
    (not whole words): what each type holds of random values, compared bit for bit."""
    from hetdeploy.core.precision import CppFixed

    rng = np.random.default_rng(5)
    n = 37
    fa, fb, ft = (CppFixed.parse(x) for x in (a, b, t))
    va, vb = fa.quantize(rng.normal(0, 3, n)), fb.quantize(rng.normal(0, 2, n))
    values = dict(a=a, b=b, t=t, n=n, relu=relu, va=", ".join(map(repr, va.tolist())),
                  vb=", ".join(map(repr, vb.tolist())))
    (tmp_path / "add.cpp").write_text(ADD_PROGRAM % values)
    binary = tmp_path / "add"
    compile_program(tmp_path / "add.cpp", binary, "-std=c++14", "-O1")
    got = np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                   dtype=np.float64)
    total = va + vb
    expected = ft.quantize(np.maximum(total, 0) if relu == "true" else total)
    assert got.tolist() == expected.tolist()
    assert len(set(expected.tolist())) > n // 4  # not all one value (zero or saturated)


CONCAT_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef %(a)s a_t;
typedef %(b)s b_t;
typedef %(t)s t_t;
static const int P = %(pixels)d, CA = %(ca)d, CB = %(cb)d;

int main() {
    static hetdeploy::word_t a[P * CA], b[P * CB], target[P * (CA + CB)];
    static const double va[P * CA] = {%(va)s}, vb[P * CB] = {%(vb)s};
    hetdeploy::write_array<a_t>(a, va, P * CA);
    hetdeploy::write_array<b_t>(b, vb, P * CB);
    hetdeploy::concat<a_t, b_t, t_t>(a, b, target, P, CA, CB);
    for (int i = 0; i < P * (CA + CB); i++) std::printf("%%.17g\n", hetdeploy::read<t_t>(target, i).to_double());
}
"""


@pytest.mark.parametrize("a, b, t, ca, cb", [
    ("ap_fixed<16,4>", "ap_fixed<16,6>", "ap_fixed<16,6,AP_RND,AP_SAT>", 8, 4),  # whole words: a run a word
    ("ap_fixed<8,3>", "ap_fixed<16,6>", "ap_fixed<16,6,AP_RND,AP_SAT>", 12, 4),  # narrower lanes in a run
    ("ap_fixed<16,4>", "ap_fixed<16,6>", "ap_fixed<16,5,AP_RND,AP_SAT>", 5, 3),  # a value a read; rounds
])
def test_the_tops_concat_puts_each_pixels_channels_side_by_side(tmp_path, a, b, t, ca, cb):
    """arena.h's concat along the channels of channels-last buffers, on both of its paths (the inputs' channels
    filling whole words of the output's lanes, or not): output pixel p is a's channels then b's, each value as the
    output type holds it (precision.quantize), bit for bit."""
    from hetdeploy.core.precision import CppFixed

    rng = np.random.default_rng(9)
    pixels = 7
    fa, fb, ft = (CppFixed.parse(x) for x in (a, b, t))
    va, vb = fa.quantize(rng.normal(0, 2, pixels * ca)), fb.quantize(rng.normal(0, 8, pixels * cb))
    (tmp_path / "concat.cpp").write_text(CONCAT_PROGRAM % dict(
        a=a, b=b, t=t, pixels=pixels, ca=ca, cb=cb, va=", ".join(map(repr, va.tolist())),
        vb=", ".join(map(repr, vb.tolist()))))
    binary = tmp_path / "concat"
    compile_program(tmp_path / "concat.cpp", binary, "-std=c++14", "-O1")
    got = np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                   dtype=np.float64)
    expected = ft.quantize(np.concatenate([va.reshape(pixels, ca), vb.reshape(pixels, cb)], axis=1).reshape(-1))
    assert got.tolist() == expected.tolist()


SLICES_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef %(t)s t_t;
static const int P = %(pixels)d, C = %(channels)d;
%(types)s
int main() {
    static hetdeploy::word_t target[P * C];
%(slices)s
    for (int i = 0; i < P * C; i++) std::printf("%%.17g\n", hetdeploy::read<t_t>(target, i).to_double());
}
"""


def test_a_chain_of_concats_moves_each_tensor_once_into_its_channels(tmp_path):
    """arena.h's concat_slice, as a unit of a chain of Concats (Inception's four branches) calls it once a tensor:
    tensors of three types and three channel counts, each into its channels of every output pixel, each value as the
    output type holds it (precision.quantize), bit for bit; a slice put at the wrong channels or pixels fails."""
    from hetdeploy.core.precision import CppFixed

    rng = np.random.default_rng(11)
    pixels, t = 5, "ap_fixed<8,4,AP_RND,AP_SAT>"
    tensors = [("ap_fixed<8,3>", 16, 1.0), ("ap_fixed<16,6>", 16, 6.0), ("ap_fixed<8,2>", 48, 0.5),
               ("ap_fixed<16,7>", 32, 30.0)]  # the last saturates
    values = [CppFixed.parse(kind).quantize(rng.normal(0, spread, pixels * c)) for kind, c, spread in tensors]
    channels = sum(c for _, c, _ in tensors)
    slices, first = [], 0
    for k, ((kind, c, _), v) in enumerate(zip(tensors, values)):
        slices.append(f"    static hetdeploy::word_t x{k}[P * {c}];\n"
                      f"    static const double v{k}[P * {c}] = {{{', '.join(map(repr, v.tolist()))}}};\n"
                      f"    hetdeploy::write_array<x{k}_t>(x{k}, v{k}, P * {c});\n"
                      f"    hetdeploy::concat_slice<x{k}_t, t_t>(x{k}, target, P, {c}, {first}, C);")
        first += c
    (tmp_path / "slices.cpp").write_text(SLICES_PROGRAM % dict(
        t=t, pixels=pixels, channels=channels, slices="\n".join(slices),
        types="".join(f"typedef {kind} x{k}_t;\n" for k, (kind, _, _) in enumerate(tensors))))
    binary = tmp_path / "slices"
    compile_program(tmp_path / "slices.cpp", binary, "-std=c++14", "-O1")
    got = np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                   dtype=np.float64)
    expected = CppFixed.parse(t).quantize(np.concatenate(
        [v.reshape(pixels, c) for v, (_, c, _) in zip(values, tensors)], axis=1).reshape(-1))
    assert got.tolist() == expected.tolist()
    assert len(set(expected.tolist())) > 2 ** 8 // 4  # a quarter of the output type's codes: not a few values


AFFINE_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef %(a)s a_t;
typedef %(s)s s_t;
typedef %(t)s t_t;
static const int C = %(channels)d, N = %(n)d, STRIDE = %(stride)d, FIRST = %(first)d;

// its input the channels FIRST .. FIRST + C - 1 of a buffer of STRIDE channels a pixel
int main() {
    static hetdeploy::word_t source[N / C * STRIDE], target[N];
    static const double values[N / C * STRIDE] = {%(values)s};
    static const s_t scale[C] = {%(scale)s}, shift[C] = {%(shift)s};
    hetdeploy::write_array<a_t>(source, values, N / C * STRIDE);
    hetdeploy::affine<a_t, s_t, t_t>(source + FIRST / hetdeploy::lane<a_t>::per_word, target, scale, shift, C, N,
                                     %(relu)s, STRIDE);
    for (int i = 0; i < N; i++) std::printf("%%.17g\n", hetdeploy::read<t_t>(target, i).to_double());
}
"""


@pytest.mark.parametrize("channels, stride, first", [(5, 5, 0), (16, 48, 16)], ids=["own buffer", "a slice"])
@pytest.mark.parametrize("a, s, t, relu", [
    ("ap_fixed<16,4>", "ap_fixed<16,3,AP_RND,AP_SAT>", "ap_fixed<16,6,AP_RND,AP_SAT>", "false"),
    ("ap_ufixed<8,3>", "ap_fixed<12,5,AP_RND,AP_SAT>", "ap_fixed<8,3,AP_RND,AP_SAT>", "true"),  # saturates too
])
def test_the_tops_batchnormalization_scales_and_shifts_each_channel(tmp_path, a, s, t, relu, channels, stride, first):
    """arena.h's affine (a BatchNormalization not folded into a layer before it, a ReLU after it fused): each
    value times its channel's scale plus its channel's shift (channels-last, 5 channels: not whole words), the
    product and sum exact, then the ReLU, then the output type's rounding and saturation, bit for bit; or, its input
    a slice of a wider buffer (a Concat's output that holds it, DenseNet's block: 16 channels from the 17th of each
    pixel of 48), the same of that slice's values alone."""
    from hetdeploy.core.precision import CppFixed

    rng = np.random.default_rng(11)
    pixels = 9
    fa, fs, ft = (CppFixed.parse(x) for x in (a, s, t))
    held = fa.quantize(rng.normal(1, 2, (pixels, stride)))
    values = held[:, first:first + channels].reshape(-1)
    scale, shift = fs.quantize(rng.normal(0, 1.5, channels)), fs.quantize(rng.normal(0, 2, channels))
    (tmp_path / "affine.cpp").write_text(AFFINE_PROGRAM % dict(
        a=a, s=s, t=t, channels=channels, n=values.size, relu=relu, stride=stride, first=first,
        values=", ".join(map(repr, held.reshape(-1).tolist())), scale=", ".join(map(repr, scale.tolist())),
        shift=", ".join(map(repr, shift.tolist()))))
    binary = tmp_path / "affine"
    compile_program(tmp_path / "affine.cpp", binary, "-std=c++14", "-O1")
    got = np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                   dtype=np.float64)
    total = (values.reshape(pixels, channels) * scale + shift).reshape(-1)
    expected = ft.quantize(np.maximum(total, 0) if relu == "true" else total)
    assert got.tolist() == expected.tolist()
    assert len(set(expected.tolist())) > 8


# (input shape, attributes): LRNs the top computes, AlexNet's and GoogLeNet's attributes (size 5, alpha 1e-4, beta
# 0.75, bias 1) and others, with channels that fill words and that do not
LRN_CASES = [
    ([1, 6, 5, 5], {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}),
    ([1, 8, 3, 4], {"size": 5, "alpha": 0.02, "beta": 0.75, "bias": 1.0}),
    ([1, 7, 4, 3], {"size": 7, "alpha": 0.05, "beta": 0.5, "bias": 2.0}),
    ([1, 3, 3, 3], {"size": 3, "alpha": 0.1, "beta": 1.0, "bias": 1.5}),
]


@pytest.mark.parametrize("reuse", [1, 2, 4])
def test_the_tops_lrn_matches_onnxruntime(tmp_path, reuse):
    """arena.h's lrn as a build's top calls it (top_kinds.LOCAL_RESPONSE's line) against onnxruntime on the same
    values, multiples of 1/64 that ap_fixed<16,5> holds exactly: within a step of 1/2048 (AP_RND) and float's
    error; each case's normalization moves its values (the check could not pass on the input itself). At each reuse
    factor: a word's four values, two or one an iteration (the window's values shifted that many at a time; the
    cases' channels and values not multiples of them)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from hetdeploy.core.board_runtime import channels_last
    from hetdeploy.core.plan import LocalResponse
    from hetdeploy.fpga.top_kinds import LOCAL_RESPONSE
    from types import SimpleNamespace

    rng = np.random.default_rng(11)
    calls, cases = [], []
    for k, (shape, attrs) in enumerate(LRN_CASES):
        node = helper.make_node("LRN", ["x"], ["y"], **attrs)
        graph = helper.make_graph([node], "l", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        x = (rng.integers(-15 * 64, 15 * 64, shape) / 64).astype(np.float32)
        (y,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        assert np.abs(y - x).max() > 2.0 ** -8, attrs  # the normalization shows
        unit = SimpleNamespace(name=f"case{k}", inputs=["x"], outputs=["y"], local_response=LocalResponse(**attrs),
                               reuse_factor=reuse)
        buffers = SimpleNamespace(types={"x": "value_t", "y": "value_t"}, shapes={"y": list(shape)},
                                  at=lambda t: {"x": "source", "y": "target"}[t])
        values = ", ".join(f"{v:.6f}f" for v in channels_last(x).reshape(-1))
        calls.append(f"{{ static const float x[] = {{{values}}}; hetdeploy::from_float<value_t>(x, source, {x.size}); "
                     f"{LOCAL_RESPONSE.run(unit, buffers).strip()} print(target, {y.size}); }}")
        cases.append(channels_last(y).reshape(-1))
    (tmp_path / "main.cpp").write_text(WINDOW_PROGRAM % {"declarations": "", "calls": "\n    ".join(calls)})
    binary = tmp_path / "main"
    compile_program(tmp_path / "main.cpp", binary, "-std=c++14", "-O1")
    lines = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split("\n")
    for (shape, attrs), want, line in zip(LRN_CASES, cases, lines):
        got = np.array(line.split(), dtype=np.float64)
        assert got.shape == want.shape, (shape, attrs)
        assert np.abs(got - want).max() <= 2.0 ** -12 + 2e-6 * np.abs(want).max(), (shape, attrs,
                                                                                   np.abs(got - want).max())


QUANT_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef %(a)s in_t;
typedef %(t)s out_t;
static hetdeploy::word_t source[4096], target[4096];

int main() {
    static const double x[] = {%(values)s};
    const int n = sizeof(x) / sizeof(x[0]);
    for (int i = 0; i < n; i++) hetdeploy::set_lane<in_t>(source[i / hetdeploy::lane<in_t>::per_word],
                                                          i %% hetdeploy::lane<in_t>::per_word, in_t(x[i]));
    %(call)s
    for (int i = 0; i < n; i++) std::printf("%%.17g\n", hetdeploy::read<out_t>(target, i).to_double());
}
"""


# (quantizer, input type, output type): onnxruntime's QDQ activations (uint8, a zero point), a signed 4-bit one
# (narrow), one rounding down, and a power-of-two scale whose ties the input type holds exactly (to even)
QUANT_CASES = [
    ((0.010515524074435234, 0, 8, False, False, "ROUND"), "ap_fixed<16,3>", "ap_fixed<16,3,AP_RND,AP_SAT>"),
    ((0.037230949848890305, 123, 8, False, False, "ROUND"), "ap_fixed<16,4>", "ap_fixed<16,5,AP_RND,AP_SAT>"),
    ((0.3, -2, 4, True, True, "ROUND"), "ap_fixed<16,5>", "ap_fixed<16,4,AP_RND,AP_SAT>"),
    ((0.07, 3, 6, True, False, "FLOOR"), "ap_fixed<8,3>", "ap_fixed<12,4,AP_RND,AP_SAT>"),
    ((0.25, 0, 4, True, False, "ROUND"), "ap_fixed<12,4>", "ap_fixed<12,4,AP_RND,AP_SAT>"),
]


@pytest.mark.parametrize("quant, a, t", QUANT_CASES)
def test_the_tops_quantizer_is_qonnxs_quant(tmp_path, quant, a, t):
    """arena.h's quantize as a build's top calls it (top_kinds.QUANTIZE's line, the unit's Quantizer as generate
    makes it from the node) against qonnx's own Quant (float64) on the values the input type holds, each output as
    the output type rounds it: equal, value for value; the codes clamped at both ends, and, at a power-of-two scale,
    ties rounded to even (2.5 steps -> 2, 3.5 -> 4)."""
    from types import SimpleNamespace

    from qonnx.custom_op.general.quant import quant as qonnx_quant

    from hetdeploy.core.precision import CppFixed
    from hetdeploy.fpga.top_kinds import QUANTIZE

    (scale, zero_point, bits, signed, narrow, rounding) = quant
    fa, ft = CppFixed.parse(a), CppFixed.parse(t)
    rng = np.random.default_rng(13)
    top = (2 ** (bits - 1) if signed else 2 ** bits) * scale
    values = fa.quantize(np.concatenate([rng.uniform(-1.5 * top, 1.5 * top, 400), [2.5 * scale, 3.5 * scale,
                                                                                   -2.5 * scale]]))
    node = SimpleNamespace(name="q", op="Quant", scalars={1: scale, 2: float(zero_point), 3: float(bits)},
                           attrs={"signed": int(signed), "narrow": int(narrow), "rounding_mode": rounding})
    unit = SimpleNamespace(name="q", inputs=["x"], outputs=["y"], quantizer=None, reuse_factor=2, elementwise=[])
    source = SimpleNamespace(nodes=[node], size_inputs=lambda u: None, size=lambda *args: None, envs=None)
    QUANTIZE.generate(unit, source)
    buffers = SimpleNamespace(types={"x": "in_t", "y": "out_t"}, shapes={"y": [values.size]},
                              at=lambda name: {"x": "source", "y": "target"}[name])
    (tmp_path / "quant.cpp").write_text(QUANT_PROGRAM % dict(a=a, t=t, values=", ".join(map(repr, values.tolist())),
                                                             call=QUANTIZE.run(unit, buffers).strip()))
    binary = tmp_path / "quant"
    compile_program(tmp_path / "quant.cpp", binary, "-std=c++14", "-O1")
    got = np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                   dtype=np.float64)
    want = ft.quantize(qonnx_quant(values, np.float64(scale), np.float64(zero_point), np.float64(bits), signed, narrow,
                                   rounding))
    assert got.tolist() == want.tolist()
    codes = np.round(want / scale).astype(int) + zero_point
    assert {codes.min(), codes.max()} == {unit.quantizer.least, unit.quantizer.most}  # clamped at both ends
    if scale == 0.25:  # exact ties: to even
        assert got[-3:].tolist() == [0.5, 1.0, -0.5]


CODES_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef ap_fixed<%(width)d, %(integer)d> value_t;
%(table)s
static const int N = %(n)d, WORDS = (N + hetdeploy::lane<value_t>::per_word - 1) / hetdeploy::lane<value_t>::per_word;
static const hetdeploy::codes_t port[] = {%(words)s};
static const float values[N] = {%(floats)s};

int main() {
    static hetdeploy::word_t codes[WORDS + 2], floats[WORDS + 2];  // a guard word either side
    codes[0] = codes[WORDS + 1] = floats[0] = floats[WORDS + 1] = ~hetdeploy::word_t(0);
    hetdeploy::from_codes<value_t, %(bits)d>(port, codes_0, codes + 1, N);
    hetdeploy::from_float<value_t>(values, floats + 1, N);
    int same = 1;
    for (int w = 0; w < WORDS + 2; w++) same &= codes[w] == floats[w];
    std::printf("%%d\n", same);
}
"""


@pytest.mark.parametrize("bits, signed, narrow, scale, zero, width, count", [
    (1, 1, 0, 0.5, 0, 16, 70),  # bipolar: -0.5 or 0.5, 64 codes a word
    (2, 0, 0, 0.25, 1, 8, 9), (3, 1, 1, 0.37, 0, 16, 21),  # a scale no power of two: its float32 products
    (8, 1, 0, 2.0 ** -7, 0, 16, 13), (8, 0, 1, 0.1, 3, 32, 11), (4, 1, 0, 1.5, -2, 20, 5)])
def test_a_codes_port_gives_the_buffer_a_float_port_gives(tmp_path, bits, signed, narrow, scale, zero, width, count):
    """An input quantizer's codes (input_codes.port_codes' table, board_runtime.to_codes' words) through
    arena.h's from_codes: the same buffer words as its floats through from_float, bit for bit, and nothing
    written outside the buffer; the table as the top writes it (hls_top's codes_table)."""
    from hetdeploy.core.board_runtime import to_codes
    from hetdeploy.core.graph import Graph, Node
    from hetdeploy.core.plan import HlsPort
    from hetdeploy.fpga.hls_top import _codes_table
    from hetdeploy.planning.input_codes import port_codes

    quant = Node("q", "Quant", ["x"], ["y"], attrs={"signed": signed, "narrow": narrow},
                 scalars={1: scale, 2: float(zero), 3: float(bits)})
    (codes,) = port_codes(Graph([quant], ["x"], ["y"])).values()
    levels = len(set(codes.values))
    values = np.array(codes.values, np.float32)[np.random.default_rng(bits).integers(0, levels, count)]
    words = to_codes(values[None], {"bits": codes.bits, "values": codes.values}).view("<u8")
    table = _codes_table(HlsPort("y", [1, count], "onnx", codes=codes), 0, {"y": "value_t"})
    (tmp_path / "main.cpp").write_text(CODES_PROGRAM % {
        "width": width, "integer": 6, "table": table, "n": count, "bits": codes.bits,
        "words": ", ".join(f"{int(w)}ULL" for w in words), "floats": ", ".join(f"{float(v)!r}f" for v in values)})
    binary = tmp_path / "main"
    compile_program(tmp_path / "main.cpp", binary, "-std=c++14", "-O1")
    assert subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split() == ["1"]


FLOAT_WORDS_PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include "arena.h"

typedef ap_fixed<%(width)d, 4> value_t;
static const int N = %(n)d, F = %(floats)d;
static const int WORDS = (N + hetdeploy::lane<value_t>::per_word - 1) / hetdeploy::lane<value_t>::per_word;
alignas(16) static const float host[2 * N] = {%(values)s};  // two samples, one after the other, as the host lays them

int main() {
    const hetdeploy::floats<F>::word *port = reinterpret_cast<const hetdeploy::floats<F>::word *>(host);
    alignas(16) static float written[2 * N + F], floats[2 * N + F];  // the host's output arrays, a guard word past
    for (int j = 0; j < 2 * N + F; j++) written[j] = floats[j] = -1.0f;
    int same = 1;
    for (int s = 0; s < 2; s++) {
        static hetdeploy::word_t read[WORDS + 2], converted[WORDS + 2];  // a guard word either side
        read[0] = read[WORDS + 1] = converted[0] = converted[WORDS + 1] = ~hetdeploy::word_t(0);
        for (int w = 1; w <= WORDS; w++) read[w] = ~hetdeploy::word_t(0);  // stale words: each is written whole
        hetdeploy::from_float_words<value_t, F>(port + s * (N / F), read + 1, N);
        hetdeploy::from_float<value_t>(host + s * N, converted + 1, N);
        for (int w = 0; w < WORDS + 2; w++) same &= read[w] == converted[w];
        // ... and back out: the output port's words, as the host reads its float32 array
        hetdeploy::to_float_words<value_t, F>(read + 1, reinterpret_cast<hetdeploy::floats<F>::word *>(written) +
                                                        s * (N / F), N);
        hetdeploy::to_float<value_t>(converted + 1, floats + s * N, N);
    }
    same &= std::memcmp(written, floats, sizeof(written)) == 0;
    std::printf("%%d\n", same);
}
"""


@pytest.mark.parametrize("width, floats, count", [(8, 4, 148), (16, 4, 36), (16, 2, 10), (8, 2, 38), (32, 4, 12),
                                                  (20, 1, 7), (8, 1, 5)])
def test_a_float_port_moving_several_floats_a_word_gives_what_float_arrays_give(tmp_path, width, floats, count):
    """A float port of ``floats`` floats a word (arena.h's from_float_words, as the top reads a sample of the host's
    float32 array: two samples one after the other) gives the same buffer words as the floats through from_float,
    bit for bit, its last word's padding lanes zeros, and nothing written outside the buffer; rounding and
    saturating values included; and written back out (to_float_words, as the host reads its output array) the same
    floats as to_float's, nothing past the two samples."""
    values = np.random.default_rng(count).normal(0, 4, 2 * count).astype(np.float32)
    values[:3] = [9.0, -9.0, 2.0 ** -20]  # beyond ap_fixed<W, 4>'s range, and under its step
    (tmp_path / "main.cpp").write_text(FLOAT_WORDS_PROGRAM % {
        "width": width, "n": count, "floats": floats, "values": ", ".join(f"{float(v)!r}f" for v in values)})
    binary = tmp_path / "main"
    compile_program(tmp_path / "main.cpp", binary, "-std=c++14", "-O1")
    assert subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split() == ["1"]


def test_a_float_port_moves_as_many_floats_as_the_ddr_port_gives_that_divide_a_sample():
    """units.port_floats: four a word at a Zynq UltraScale+ HP port's 16 bytes a cycle, two at the PYNQ-Z2's 12,
    one at 4; never more than divide a sample's values; and a port's cycles are its words (port_cycles)."""
    from hetdeploy.core.graph import Graph, Node
    from hetdeploy.core.plan import Subfunction
    from hetdeploy.planning.units import port_cycles, port_floats

    assert [port_floats(150528, rate) for rate in (16.0, 32.0, 12.0, 8.0, 4.0)] == [4, 4, 2, 2, 1]
    assert [port_floats(values, 16.0) for values in (16, 150530, 7)] == [4, 2, 1]
    relu = Node("r", "Relu", ["x"], ["y"], input_shapes=[[1, 3, 4, 6]], output_shapes=[[1, 3, 4, 6]])
    sub = Subfunction("sf0_fpga", "fpga", "fpga", ["r"], ["x"], ["y"], floats_a_word={"x": 4, "y": 2})
    assert port_cycles(Graph([relu], ["x"], ["y"]), sub) == {"x": 18, "y": 36}


# relayouts as exporters write them, between two ReLUs (ONNX shapes; each case's nodes: op, extra inputs, attributes)
RELAYOUT_CASES = [
    ("channel shuffle", [1, 12, 6, 6], [("Reshape", [[1, 3, 4, 6, 6]], {}),
                                        ("Transpose", [], {"perm": [0, 2, 1, 3, 4]}),
                                        ("Reshape", [[1, 12, 6, 6]], {})]),
    ("shuffle of 2 groups", [1, 48, 12, 12], [("Reshape", [[1, 2, 24, 12, 12]], {}),  # its steps repeated
                                              ("Transpose", [], {"perm": [0, 2, 1, 3, 4]}),
                                              ("Reshape", [[1, 48, 12, 12]], {})]),
    ("flatten", [1, 24, 7, 7], [("Flatten", [], {})]),
    ("transpose", [1, 16, 5, 3], [("Transpose", [], {"perm": [0, 1, 3, 2]})]),
    ("depth to space", [1, 16, 3, 3], [("DepthToSpace", [], {"blocksize": 2})]),
    ("depth to space CRD", [1, 16, 3, 3], [("DepthToSpace", [], {"blocksize": 2, "mode": "CRD"})]),
    ("space to depth", [1, 4, 6, 6], [("SpaceToDepth", [], {"blocksize": 2})]),
    ("channel slice", [1, 20, 4, 4], [("Slice", [[3], [17], [1]], {})]),
    ("row slice", [1, 8, 6, 5], [("Slice", [[1], [-1], [2], [2]], {})]),
    ("squeeze and flatten", [1, 48, 1, 1], [("Squeeze", [[2, 3]], {}), ("Flatten", [], {})]),
    ("flatten of 75 values", [1, 3, 5, 5], [("Flatten", [], {})]),  # its last word's padding lanes zero
]

RELAYOUT_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef ap_fixed<%(width)d, 8> value_t;
%(tables)s

static hetdeploy::word_t source[8192], target[8192];

int main() {
    %(calls)s
}
"""


@pytest.mark.parametrize("width, folded", [(8, False), (16, False), (8, True), (16, True)])
def test_the_tops_relayouts_move_onnxruntimes_values_a_step_a_cycle(tmp_path, width, folded):
    """Each relayout of RELAYOUT_CASES, loaded as a model (intake's nodes): the map planning computes from the nodes
    (relayout.chain_of) is onnxruntime's; arena.h's relayout, run on its steps as a build writes them (GATHER's
    table and call), unfolded (2 x lanes words held) or folded (one word held, its reuse factor a word's lanes), moves
    each value where onnxruntime puts it, bit for bit; its cycles, counted in C-simulation, are the estimate's (kinds'
    Data) to the cycle; unfolded, about one an output word where each input word holds values of few output words (a
    shuffle's, a Flatten's, a slice's: each input word read about once), folded, each output word's input words."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from hetdeploy.core.board import RELAYOUT_OPS
    from hetdeploy.core.board_runtime import channels_first, channels_last, stored_shape
    from hetdeploy.fpga.top_kinds import GATHER
    from hetdeploy.intake.model import load_model
    from hetdeploy.planning.units.costs import RELAYOUT_DEPTH, Shape, arena_words, loop_cycles, word_values
    from hetdeploy.planning.units.kinds import kind_of
    from hetdeploy.planning.units.relayout import chain_index, chain_of, relayout_steps

    lanes = word_values(width)
    reuse_factor = lanes if folded else 1
    rng = np.random.default_rng(3)
    tables, calls, cases = [], [], []
    for k, (what, shape, nodes) in enumerate(RELAYOUT_CASES):
        inits, made, x = [], [helper.make_node("Relu", ["x"], ["t0"])], "t0"
        for n, (op, constants, attrs) in enumerate(nodes):
            names = [f"c{n}_{i}" for i in range(len(constants))]
            inits += [numpy_helper.from_array(np.array(c, dtype=np.int64), name) for c, name in zip(constants, names)]
            made.append(helper.make_node(op, [x] + names, [f"t{n + 1}"], **attrs))
            x = f"t{n + 1}"
        made.append(helper.make_node("Relu", [x], ["y"]))
        graph = helper.make_graph(made, "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        positions = np.arange(np.prod(shape), dtype=np.float32)  # through the ReLUs as they are
        (y,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": channels_first(positions.reshape(stored_shape(shape, 1)))})
        model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape)))
        (tmp_path / f"{k}.onnx").write_bytes(model.SerializeToString())
        relayouts = [n for n in load_model(tmp_path / f"{k}.onnx").graph.nodes if n.op in RELAYOUT_OPS]
        chain = chain_of(relayouts)
        index = channels_last(y).reshape(-1).astype(np.int64)
        assert np.array_equal(chain_index(chain), index), what
        steps = relayout_steps(index, lanes, folded)
        planned = Shape("data", 0, 0, 0, False, 0, 0, False, input_values=int(np.prod(shape)), relayout=chain)
        estimate = kind_of(planned).arithmetic(planned, reuse_factor, width, None, None, (0, 0), False)
        tables.append(GATHER.table(f"case{k}", steps))
        values = rng.integers(-2 ** (width - 1), 2 ** (width - 1), int(np.prod(shape)))
        words = ", ".join(f"{int(v) & (2 ** width - 1)}" for v in values)
        call = GATHER.line("gather", type="value_t", source="source", target="target", unit=f"case{k}").strip()
        calls.append(f"{{ static const long long codes[] = {{{words}}}; for (int i = 0; i < {values.size}; i++) "
                     f"{{ hetdeploy::word_t w = source[i / {lanes}]; value_t v; v.range() = codes[i]; "
                     f"hetdeploy::set_lane<value_t>(w, i % {lanes}, v); source[i / {lanes}] = w; }} "
                     f"hetdeploy::relayout_counted() = 0; {call} "
                     f"for (int i = 0; i < {-(-index.size // lanes) * lanes}; i++) std::printf(\"%d \", "
                     f"int(hetdeploy::read<value_t>(target, i).range())); "
                     f"std::printf(\"\\n%lld\\n\", hetdeploy::relayout_counted()); }}")
        words = max(arena_words(index.size, width), arena_words(values.size, width))  # the words it moves
        # folded: each output word a step an input word it gives values
        needs = sum(len(set(index[w:w + lanes] // lanes)) for w in range(0, index.size, lanes))
        cases.append((what, values, index, steps, estimate.cycles, needs if folded else words))
    (tmp_path / "main.cpp").write_text(RELAYOUT_PROGRAM % {"width": width, "tables": "".join(tables),
                                                            "calls": "\n    ".join(calls)})
    binary = tmp_path / "main"
    compile_program(tmp_path / "main.cpp", binary, "-std=c++14", "-O1")
    lines = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split("\n")
    for (what, values, index, steps, estimated, words), line, counted in zip(cases, lines[::2], lines[1::2]):
        codes = np.array(line.split(), dtype=np.int64) & (2 ** width - 1)
        assert np.array_equal(codes[:index.size], values[index] & (2 ** width - 1)), what
        assert not codes[index.size:].any(), what  # the last word's lanes past the values: zeros
        assert int(counted) == loop_cycles(steps.iterations, RELAYOUT_DEPTH) == estimated, what
        # a copy where each output word is an input word as it is: the spatial transpose's pixels, the Flatten's
        whole = index.size % lanes == 0 and np.array_equal(index.reshape(-1, lanes) % lanes, np.tile(
            np.arange(lanes), (index.size // lanes, 1))) and np.all(np.diff(index.reshape(-1, lanes), axis=1) == 1)
        assert (steps.held == 0) == whole and (whole or what not in ("transpose", "squeeze and flatten")), what
        if folded:
            assert steps.iterations == words, (what, steps.iterations, words)
        elif (what, width) == ("flatten", 8):  # 16 pixels' 24 input words feed their 24 output words: with 2 L
            # registers, not two blocks' 48, each block's first output word waits on 16 reads (100 steps, 74 words)
            assert steps.iterations <= 1.375 * words, (what, steps.iterations, words)
        else:
            assert steps.iterations <= 1.125 * words + 4, (what, steps.iterations, words)


BAND_PROGRAM = r"""
#include <cstdio>
#include "arena.h"

typedef ap_fixed<%(width)d, 6> value_t;
static const int HEIGHT = %(height)d, ROW = %(row)d, FIRST = %(first)d, ROWS = %(rows)d;
static const int L = hetdeploy::lane<value_t>::per_word, WORDS = (HEIGHT * ROW + L - 1) / L;

int main() {
    // the buffer and its copy between guard words of ones, as many as a band's rows reach past the map
    static const int GUARD = 2 * (ROW + L - 1) / L + ROWS * ROW / L + 1;
    static hetdeploy::word_t memory[GUARD + WORDS + GUARD], band[(ROWS * ROW + L - 1) / L], copy[GUARD + WORDS + GUARD];
    for (int w = 0; w < GUARD + WORDS + GUARD; w++) memory[w] = copy[w] = ~hetdeploy::word_t(0);
    hetdeploy::word_t *buffer = memory + GUARD, *back = copy + GUARD;
    float values[HEIGHT * ROW];
    for (int i = 0; i < HEIGHT * ROW; i++) values[i] = (i * 37 %% 101 - 50) / 4.0f;
    hetdeploy::from_float<value_t>(values, buffer, HEIGHT * ROW);
    for (int w = 0; w < WORDS; w++) back[w] = buffer[w];
    hetdeploy::band_in<value_t>(buffer, band, HEIGHT, ROW, FIRST, ROWS);
    for (int j = 0; j < ROWS * ROW; j++) std::printf("%%g\n", hetdeploy::read<value_t>(band, j).to_float());
    for (int j = 0; j < ROWS * ROW; j++) hetdeploy::set_lane<value_t>(band[j / L], j %% L, value_t(-j %% 7));
    const int out = FIRST < 0 ? 0 : FIRST;  // a band of output rows starts inside the map
    hetdeploy::band_out<value_t>(band, back, HEIGHT, ROW, out, ROWS);
    for (int j = 0; j < HEIGHT * ROW; j++) std::printf("%%g\n", hetdeploy::read<value_t>(back, j).to_float());
    bool guarded = true;  // no word outside the copy written
    for (int w = 0; w < GUARD; w++) guarded = guarded && copy[w] == ~hetdeploy::word_t(0) &&
                                              copy[GUARD + WORDS + w] == ~hetdeploy::word_t(0);
    std::printf("%%d\n", int(guarded));
}
"""


@pytest.mark.parametrize("width, height, row, first, rows", [
    (16, 6, 8, -1, 4),  # rows of whole words, the padding row above
    (8, 5, 16, 3, 4),  # the last band: rows past the map, dropped on the way out
    (16, 6, 6, 2, 3),  # rows that share words: a value at a time
    (8, 4, 12, -2, 7)])
def test_a_band_moves_its_rows_in_and_out_whole_words_where_they_are(tmp_path, width, height, row, first, rows):
    """arena.h's band_in copies rows first .. first + rows - 1 of a buffer into a band, zeros for rows outside it,
    and band_out writes a band's rows back from row ``first`` on, dropping those past the map and keeping every other
    value of the buffer, whether its rows are whole words (a word an iteration) or not (a value at a time)."""
    (tmp_path / "main.cpp").write_text(BAND_PROGRAM % {"width": width, "height": height, "row": row, "first": first,
                                                       "rows": rows})
    binary = tmp_path / "main"
    compile_program(tmp_path / "main.cpp", binary, "-std=c++14", "-O1")
    got = np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                   dtype=np.float64)
    values = (np.arange(height * row) * 37 % 101 - 50) / 4.0
    buffer = values.reshape(height, row)
    want_band = np.array([buffer[r] if 0 <= r < height else np.zeros(row) for r in range(first, first + rows)])
    assert (got[:rows * row] == want_band.reshape(-1)).all()
    back = buffer.copy()
    written = -(np.arange(rows * row) % 7).reshape(rows, row)  # C++'s -j % 7
    out = max(first, 0)
    kept = min(rows, height - out)
    back[out:out + kept] = written[:kept]
    assert (got[rows * row:-1] == back.reshape(-1)).all()
    assert got[-1] == 1  # nothing written past the copy's rows
