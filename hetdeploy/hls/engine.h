// hetdeploy's layer-sequential engine: one array of LANES x VEC multipliers (LANES output channels, each summing
// VEC products a cycle) that the convolution and dense units of a subfunction (plan.json: units of strategy
// "engine") run on one after another, the top calling ``engine`` once per unit with that unit's layer. One
// instance serves them all (the top's ALLOCATION pragma): a layer's shape and binary points are the call's
// values, not template arguments, so layers of any size and precision share the array. Its template arguments
// are the engine's: the bits of an input value (IW), of an output value (OW) and of a weight (WW), its lanes,
// the values each lane takes a cycle (VEC: a divisor of the values a word holds, of the inputs' and the weights'),
// and the largest window of its layers (its weight buffer's depth).
//
// A call computes a convolution (a dense layer: a 1 x 1 convolution of one pixel) over channels-last buffers
// of the subfunction's memories (arena.h), its weights and biases read from DDR: for each tile of LANES output
// channels, the tile's weights into the engine's buffer (the DDR words in order: one burst), an entry of VEC
// weights a cycle, then for each output pixel the k_h x k_w x in_c window values VEC a cycle (where the layer's input channels
// are a multiple of VEC: each group of VEC channels then lies in one input word; else one a cycle), each
// multiplied by the tile's LANES weights at once, then the pixel's LANES outputs written a whole word a cycle
// (only a word the tile shares with other channels is read first). Addresses step with counters; a loop whose
// bound is a call's value says its largest trip count (LOOP_TRIPCOUNT); no pipelined loop reads a memory word an
// earlier iteration wrote.
//
// Values are raw fixed-point bits whose binary points the layer gives: each product exact (the value, signed in
// IW + 1 bits, by its WW-bit weight: one multiplier's width, not the sum's), the sum in 64 bits, then the layer's
// ReLU, then rounded to the nearest at the output's fraction bits (ties up: AP_RND) and saturated to its width and
// signedness (AP_SAT), as the output buffer's ap_fixed type would.
//
// Its cycles are counted in C-simulation (``engine_counted``; compiled only there): each pipelined loop's
// iterations at its II plus its pipeline's depth (the DEPTH constants below, hetdeploy's model of the schedule:
// no HLS tool ran), and a cycle a tile and a pixel for the loops around them. planning/units/costs.py's
// ``engine_cycles`` is written from the same loops; tests/test_engine.py holds the two together.
//
// Weights at ``weights``: output channel o's window, ((o * k_h + ky) * k_w + kx) * in_c + c, as WW-bit lanes
// (value * 2^weight_fraction) from word o * ceil(window / lanes a word) on, its last word's lanes past the window
// zeros; then, from the word after the last channel's, each output channel's bias as a 64-bit lane
// (bias * 2^(in_fraction + weight_fraction), the sum's binary point).
#ifndef HETDEPLOY_ENGINE_H_
#define HETDEPLOY_ENGINE_H_

#include "arena.h"

namespace hetdeploy {

struct engine_layer {
    int in_c, in_h, in_w, out_c, out_h, out_w, k_h, k_w, s_h, s_w, pad_top, pad_left, d_h, d_w;
    int in_fraction, in_signed, weight_fraction, out_fraction, out_signed, relu;
};

// the depth of a loop's pipeline: a move (a word read, then written) and a window value's (its address, the
// read, the product, the sum; and the pixel's sums ready for its outputs)
static const int ENGINE_MOVE_DEPTH = 2;
static const int ENGINE_MAC_DEPTH = 6;
// the largest layer a loop's LOOP_TRIPCOUNT assumes: pixels of an output map, tiles of output channels
static const int ENGINE_MAX_PIXELS = 112 * 112;
static const int ENGINE_MAX_TILES = 64;

#ifndef __SYNTHESIS__
struct engine_counts {
    long long cycles;        // every loop's, as the header says
    long long weight_words;  // DDR words of weights and biases read
};
inline engine_counts &engine_counted() {
    static engine_counts counts = {0, 0};
    return counts;
}
// a pipelined loop's cycles: its iterations at its II, and its pipeline's depth once
inline void count_loop(long long iterations, int depth) {
    if (iterations > 0) engine_counted().cycles += iterations - 1 + depth;
}
#define HETDEPLOY_COUNTED(statement) statement
#else
#define HETDEPLOY_COUNTED(statement)
#endif

template <int IW, int OW, int WW, int LANES, int VEC, int MAX_WINDOW>
void engine(const word_t *source, word_t *target, const word_t *weights, const engine_layer &g) {
    typedef ap_uint<IW> raw_in_t;
    typedef ap_uint<OW> raw_out_t;
    typedef ap_int<WW> weight_t;
    typedef ap_int<64> sum_t;
    typedef ap_int<IW + 1> value_t;  // an input value, signed: its IW bits and a sign (an unsigned one's zero)
    typedef ap_int<IW + 1 + WW> product_t;  // exact: a value by a weight
    static const int PW = lane<weight_t>::per_word;  // weights a word
    static const int IPW = lane<raw_in_t>::per_word;  // input values a word
    static_assert(PW % VEC == 0 && IPW % VEC == 0, "VEC values of a group lie in one word of weights and of inputs");
    static const int L = lane<raw_out_t>::per_word;  // outputs a word
    // a lane's window as DDR holds it (whole words, its last one's lanes past the window zeros) in entries of the
    // VEC weights a cycle takes: a DDR word is EPW entries, written one a cycle
    static const int EPW = PW / VEC, LB = 8 * lane<weight_t>::bytes;  // entries a word; a weight's lane's bits
    typedef ap_uint<VEC * LB> entry_t;
    static const int WINDOW_ENTRIES = (MAX_WINDOW + PW - 1) / PW * EPW;
    // the largest trip counts of the loops over a tile's weight entries and a pixel's output words (a pragma's
    // value is a name, not an expression)
    static const int TILE_ENTRIES = LANES * WINDOW_ENTRIES, OUTPUT_WORDS = LANES / L + 1;
    static entry_t tile[LANES][WINDOW_ENTRIES];
#pragma HLS ARRAY_PARTITION variable=tile dim=1 complete
    sum_t bias[LANES];
#pragma HLS ARRAY_PARTITION variable=bias complete
    sum_t sums[LANES];
#pragma HLS ARRAY_PARTITION variable=sums complete
    const int window = g.k_h * g.k_w * g.in_c;
    // VEC values an iteration where a pixel's channels come in whole groups of VEC (each group then lies in one
    // input word and one word of weights), else one
    const int step = g.in_c % VEC == 0 ? VEC : 1;
    const int pixels = g.out_h * g.out_w;
    const int filter_words = (window + PW - 1) / PW;
    const int bias_word = g.out_c * filter_words;
    const int shift = g.in_fraction + g.weight_fraction - g.out_fraction;
    const sum_t most = g.out_signed ? (sum_t(1) << (OW - 1)) - 1 : (sum_t(1) << OW) - 1;
    const sum_t least = g.out_signed ? sum_t(-(sum_t(1) << (OW - 1))) : sum_t(0);
    // the input element a window's next value is at moves by these after a pixel's channels and after a row
    const int column_step = (g.d_w - 1) * g.in_c, row_step = (g.d_h * g.in_w - g.k_w * g.d_w) * g.in_c;
tiles:
    for (int first = 0; first < g.out_c; first += LANES) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_TILES
        HETDEPLOY_COUNTED(engine_counted().cycles++);
        const int filters = g.out_c - first < LANES ? g.out_c - first : LANES;
        int t = 0, i = 0, k = 0;  // the lane and entry of the window the next entry is, and its place in its word
        word_t word = 0;
        const word_t *next = weights + first * filter_words;  // the tile's DDR words, in order
        HETDEPLOY_COUNTED(long long entries = 0);
    load_tile:
        for (int e = 0; e < filters * filter_words * EPW; e++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=TILE_ENTRIES
            HETDEPLOY_COUNTED(entries++);
            if (k == 0) word = *next++;
            tile[t][i] = word.range(VEC * LB * (k + 1) - 1, VEC * LB * k);
            if (++k == EPW) k = 0;
            if (++i == filter_words * EPW) {
                i = 0;
                t++;
            }
        }
        HETDEPLOY_COUNTED(count_loop(entries, ENGINE_MOVE_DEPTH));
    load_bias:
        for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS PIPELINE II=1
            bias[lane_t] = lane_t < filters ? lane_value<sum_t>(weights[bias_word + first + lane_t], 0) : sum_t(0);
        }
        HETDEPLOY_COUNTED(count_loop(LANES, ENGINE_MOVE_DEPTH);
                          engine_counted().weight_words += filters * filter_words + filters);
        int x = 0, row0 = -g.pad_top, column0 = -g.pad_left, out_first = first;
    pixels:
        for (int pixel = 0; pixel < pixels; pixel++) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_PIXELS
            HETDEPLOY_COUNTED(engine_counted().cycles++);
            for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                sums[lane_t] = bias[lane_t];
            }
            int c = 0, kx = 0, row = row0, column = column0, w_entry = 0, w_lane = 0;
            int at = (row0 * g.in_w + column0) * g.in_c;  // the input element of (row, column, c)
            HETDEPLOY_COUNTED(long long values = 0);
        window_values:  // ``step`` values an iteration: VEC channels of a pixel, or one
            for (int w = 0; w < window; w += step) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=MAX_WINDOW
                HETDEPLOY_COUNTED(values++);
                const bool inside = row >= 0 && row < g.in_h && column >= 0 && column < g.in_w;  // else padding
                const word_t in_word = inside ? source[at / IPW] : word_t(0);
                value_t value[VEC];
#pragma HLS ARRAY_PARTITION variable=value complete
                for (int v = 0; v < VEC; v++) {
#pragma HLS UNROLL
                    const raw_in_t raw = lane_value<raw_in_t>(in_word, (at + v) % IPW);
                    value[v] = v >= step ? value_t(0) : g.in_signed ? value_t(ap_int<IW>(raw)) : value_t(raw);
                }
                for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                    const entry_t entry = tile[lane_t][w_entry];
                    for (int v = 0; v < VEC; v++) {
#pragma HLS UNROLL
                        // in place: ap_int's value * weight widens both to the product's width first, and two
                        // operands of over 32 bits multiply in C-simulation through a heap-allocated multi-word type
                        const int at_lane = (w_lane + v) % VEC;
                        product_t product = value[v];
                        product *= weight_t(entry.range(LB * at_lane + WW - 1, LB * at_lane));
                        sums[lane_t] += product;
                    }
                }
                w_lane += step;
                if (w_lane == VEC) {
                    w_lane = 0;
                    w_entry++;
                }
                at += step;
                c += step;
                if (c == g.in_c) {  // the window's order: (ky, kx, c), channels fastest
                    c = 0;
                    at += column_step;
                    column += g.d_w;
                    if (++kx == g.k_w) {
                        kx = 0;
                        at += row_step;
                        column = column0;
                        row += g.d_h;
                    }
                }
            }
            HETDEPLOY_COUNTED(count_loop(values, ENGINE_MAC_DEPTH));
            HETDEPLOY_COUNTED(long long written = 0);
        outputs:  // the words the pixel's tile of channels lies in, each written once
            for (int word = out_first / L; word * L < out_first + filters; word++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=OUTPUT_WORDS
#pragma HLS DEPENDENCE variable=target inter false
                HETDEPLOY_COUNTED(written++);
                const bool whole = word * L >= out_first && (word + 1) * L <= out_first + filters;
                word_t bits = whole ? word_t(0) : target[word];  // a word shared with other channels: kept
                for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
                    const int lane_t = word * L + k - out_first;
                    if (lane_t >= 0 && lane_t < filters) {
                        sum_t s = g.relu && sums[lane_t] < 0 ? sum_t(0) : sums[lane_t];
                        if (shift > 0) s = (s + (sum_t(1) << (shift - 1))) >> shift;  // the nearest, ties up
                        else s = s << -shift;
                        s = s > most ? most : s < least ? least : s;
                        set_lane<raw_out_t>(bits, k, raw_out_t(s));
                    }
                }
                target[word] = bits;
            }
            HETDEPLOY_COUNTED(count_loop(written, ENGINE_MOVE_DEPTH));
            out_first += g.out_c;
            column0 += g.s_w;
            if (++x == g.out_w) {
                x = 0;
                column0 = -g.pad_left;
                row0 += g.s_h;
            }
        }
    }
}

} // namespace hetdeploy

#endif
