// hetdeploy's layer-sequential engine: one array of LANES multiply-accumulators that the convolution and
// dense units of a subfunction (plan.json: units of strategy "engine") run on one after another, the top
// calling ``engine`` once per unit with that unit's layer. One instance serves them all (the top's ALLOCATION
// pragma): a layer's shape and binary points are the call's values, not template arguments, so layers of any
// size and precision share the array. Its template arguments are the engine's: the bits of an input value (IW),
// of an output value (OW) and of a weight (WW), its lanes, and the largest window of its layers (its weight
// buffer's depth).
//
// A call computes a convolution (a dense layer: a 1 x 1 convolution of one pixel) over channels-last buffers
// of the subfunction's memories (arena.h), its weights and biases read from DDR: for each tile of LANES output
// channels, the tile's weights into the engine's buffer, then for each output pixel the k_h x k_w x in_c
// window values one a cycle, each multiplied by the tile's LANES weights at once. Values are raw fixed-point
// bits whose binary points the layer gives: each product exact (the value, signed in IW + 1 bits, by its WW-bit
// weight: one multiplier's width, not the sum's), the sum in 64 bits, then the layer's ReLU, then rounded to the
// nearest at the output's fraction bits (ties up: AP_RND) and saturated to its width and signedness (AP_SAT), as
// the output buffer's ap_fixed type would.
//
// Weights at ``weights``: output channel o's window, ((o * k_h + ky) * k_w + kx) * in_c + c, as WW-bit lanes
// (value * 2^weight_fraction); then, from the next word, each output channel's bias as a 64-bit lane
// (bias * 2^(in_fraction + weight_fraction), the sum's binary point).
#ifndef HETDEPLOY_ENGINE_H_
#define HETDEPLOY_ENGINE_H_

#include "arena.h"

namespace hetdeploy {

struct engine_layer {
    int in_c, in_h, in_w, out_c, out_h, out_w, k_h, k_w, s_h, s_w, pad_top, pad_left, d_h, d_w;
    int in_fraction, in_signed, weight_fraction, out_fraction, out_signed, relu;
};

template <int IW, int OW, int WW, int LANES, int MAX_WINDOW>
void engine(const word_t *source, word_t *target, const word_t *weights, const engine_layer &g) {
    typedef ap_uint<IW> raw_in_t;
    typedef ap_uint<OW> raw_out_t;
    typedef ap_int<WW> weight_t;
    typedef ap_int<64> sum_t;
    typedef ap_int<IW + 1> value_t;  // an input value, signed: its IW bits and a sign (an unsigned one's zero)
    typedef ap_int<IW + 1 + WW> product_t;  // exact: a value by a weight
    static weight_t tile[LANES][MAX_WINDOW];
#pragma HLS ARRAY_PARTITION variable=tile dim=1 complete
    sum_t bias[LANES];
#pragma HLS ARRAY_PARTITION variable=bias complete
    const int window = g.k_h * g.k_w * g.in_c;
    const int bias_word = (g.out_c * window + lane<weight_t>::per_word - 1) / lane<weight_t>::per_word;
    const int shift = g.in_fraction + g.weight_fraction - g.out_fraction;
    const sum_t most = g.out_signed ? (sum_t(1) << (OW - 1)) - 1 : (sum_t(1) << OW) - 1;
    const sum_t least = g.out_signed ? sum_t(-(sum_t(1) << (OW - 1))) : sum_t(0);
    const int L = lane<raw_out_t>::per_word;
tiles:  // loop counters step along with the indices they stand for: no division by a layer's runtime size
    for (int first = 0; first < g.out_c; first += LANES) {
        int t = 0, i = 0;
    load_tile:
        for (int j = 0; j < LANES * window; j++) {
#pragma HLS PIPELINE
            tile[t][i] = first + t < g.out_c ? read<weight_t>(weights, first * window + j) : weight_t(0);
            if (++i == window) {
                i = 0;
                t++;
            }
        }
        for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS PIPELINE
            bias[lane_t] = first + lane_t < g.out_c ? read<sum_t>(weights + bias_word, first + lane_t) : sum_t(0);
        }
        int y = 0, x = 0;
    pixels:
        for (int pixel = 0; pixel < g.out_h * g.out_w; pixel++) {
            sum_t sums[LANES];
#pragma HLS ARRAY_PARTITION variable=sums complete
            for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                sums[lane_t] = bias[lane_t];
            }
            int c = 0, kx = 0, ky = 0;
        window_values:
            for (int w = 0; w < window; w++) {
#pragma HLS PIPELINE II=1
                const int row = y * g.s_h - g.pad_top + ky * g.d_h, column = x * g.s_w - g.pad_left + kx * g.d_w;
                value_t value = 0;
                if (row >= 0 && row < g.in_h && column >= 0 && column < g.in_w) {  // else padding: 0
                    const raw_in_t raw = read<raw_in_t>(source, (row * g.in_w + column) * g.in_c + c);
                    value = g.in_signed ? value_t(ap_int<IW>(raw)) : value_t(raw);
                }
                for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                    // in place: ap_int's value * weight widens both to the product's width first, and two
                    // operands of over 32 bits multiply in C-simulation through a heap-allocated multi-word type
                    product_t product = value;
                    product *= tile[lane_t][w];
                    sums[lane_t] += product;
                }
                if (++c == g.in_c) {  // the window's order: (ky, kx, c), channels fastest
                    c = 0;
                    if (++kx == g.k_w) {
                        kx = 0;
                        ky++;
                    }
                }
            }
        outputs:
            for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS PIPELINE
                if (first + lane_t >= g.out_c) break;
                sum_t s = g.relu && sums[lane_t] < 0 ? sum_t(0) : sums[lane_t];
                if (shift > 0) s = (s + (sum_t(1) << (shift - 1))) >> shift;  // the nearest, ties up
                else s = s << -shift;
                s = s > most ? most : s < least ? least : s;
                const int at = pixel * g.out_c + first + lane_t;
                word_t word = target[at / L];
                set_lane<raw_out_t>(word, at % L, raw_out_t(s));
                target[at / L] = word;
            }
            if (++x == g.out_w) {
                x = 0;
                y++;
            }
        }
    }
}

} // namespace hetdeploy

#endif
