// hetdeploy's XNOR-popcount kernel of an hls4ml Dense whose inputs and weights are each -1 or +1 (a binarised
// layer's, as FINN's matrix-vector unit computes it): hetdeploy/fpga/hls4ml_passes.py names it the layer's kernel
// (its config's ``kernel``) where the plan gives the unit the xnor_popcount strategy, and the unit's project
// carries this file in firmware/nnet_utils.
//
// A product of two signs is +1 where they match (an XNOR of their sign bits) and -1 where they differ, so a sum of
// n of them is 2 m - n, m the matches. Iteration r of the reuse factor's R (one a cycle) reads the weights
// r + R m, m < n_in n_out / R (the banks of hls4ml's resource strategy; output o's weight of input i at
// o * n_in + i; a weight above 0 is +1: the pass gives them as bits, 1 for +1, or -1 and +1 would do alike): up to
// n_in iterations, every output's n_in / R inputs i = r + R k; past n_in (R a multiple of n_in), pass q = r / n_in
// of R / n_in takes input r % n_in of the outputs q + (R / n_in) p. For each of those outputs it XNORs the inputs'
// sign bits with the weights', adds the matches with an adder tree of bits (a popcount, as wide as its count), and
// adds twice that count to the output's sum, which starts at its bias minus n: at the end, its bias plus 2 m - n
// in the layer's accumulator type, cast to its result as hls4ml's dense does. That is the value hls4ml's multiply-accumulate gives, bit for bit: each partial sum is
// an integer between the bias minus n and the bias plus n, and the accumulator wraps as hls4ml's does.
#ifndef HETDEPLOY_XNOR_POPCOUNT_H_
#define HETDEPLOY_XNOR_POPCOUNT_H_

#include "nnet_common.h"
#include "nnet_function_stubs.h"
#include "nnet_mult.h"

namespace nnet {

// the least depth of a bank of weights in BRAM (planning/units/costs.py's BRAM_MIN_DEPTH)
static const int XNOR_BRAM_DEPTH = 64;

// the bits of a count from 0 to n
constexpr int xnor_count_bits(int n) { return n < 2 ? 1 : 1 + xnor_count_bits(n / 2); }

template <class data_T, class res_T, typename CONFIG_T>
class DenseXnorPopcount : public DenseKernel<data_T, res_T, CONFIG_T> {
  public:
    static void dense(data_T data[CONFIG_T::n_in], res_T res[CONFIG_T::n_out],
                      typename CONFIG_T::weight_t weights[CONFIG_T::n_in * CONFIG_T::n_out],
                      typename CONFIG_T::bias_t biases[CONFIG_T::n_out]) {
        #pragma HLS INLINE
        static const int R = CONFIG_T::reuse_factor, N_IN = CONFIG_T::n_in, N_OUT = CONFIG_T::n_out;
        // up to n_in iterations fold an output's inputs (SIMD of them an iteration, every output at once); past
        // them the outputs fold too (PE of them an iteration, one input each, in R / n_in passes)
        static const bool FOLD_OUTPUTS = R > N_IN;
        static const int SIMD = FOLD_OUTPUTS ? 1 : N_IN / R, PE = FOLD_OUTPUTS ? N_OUT * N_IN / R : N_OUT;
        static const int PASSES = N_OUT / PE, STEPS = N_IN / SIMD;  // output passes, and each one's iterations
        static_assert(FOLD_OUTPUTS ? R % N_IN == 0 && (N_OUT * N_IN) % R == 0 : N_IN % R == 0,
                      "the xnor_popcount kernel's reuse factor divides the layer's inputs, or is a multiple of them "
                      "dividing its products");
        #pragma HLS ARRAY_RESHAPE variable=weights block factor=PE*SIMD
        // a bank of R words, each an iteration's weights: BRAM from XNOR_BRAM_DEPTH deep, else LUTs (a 64-deep ROM a
        // LUT6 a bit), as hls4ml binds its resource strategy's banks (a pragma in a constant branch); at R = 1
        // constants, into which each XNOR folds
        if (R >= XNOR_BRAM_DEPTH) {
            #pragma HLS RESOURCE variable=weights core=ROM_nP_BRAM
        } else if (R > 1) {
            #pragma HLS RESOURCE variable=weights core=ROM_nP_LUTRAM
        }
        // each of the pass's outputs' sum: its bias minus n_in, then twice each iteration's matches (a shift)
        typename CONFIG_T::accum_t sums[PE];
        #pragma HLS ARRAY_PARTITION variable=sums complete
        int pass = 0, step = 0;
    Fold:
        for (int r = 0; r < R; r++) {  // iteration r = pass * STEPS + step reads the weights w = r + R m
            #pragma HLS PIPELINE II=1
            for (int p = 0; p < PE; p++) {
                #pragma HLS UNROLL
                const int o = pass + PASSES * p;
                typename CONFIG_T::accum_t sum = sums[p];
                if (step == 0) {
                    sum = biases[o];
                    sum -= N_IN;
                }
                ap_uint<xnor_count_bits(SIMD) + 1> count = 0;  // a popcount of the XNORs
                for (int k = 0; k < SIMD; k++) {
                    #pragma HLS UNROLL
                    // input i = step + R k's weight of output o, o * n_in + i, written as word r of bank
                    // p * SIMD + k, so that the bank each multiplier reads is a constant
                    count += (data[step + R * k] > 0) == (weights[r + R * (p * SIMD + k)] > 0);
                }
                sum += count << 1;
                sums[p] = sum;
                if (step == STEPS - 1) res[o] = cast<data_T, res_T, CONFIG_T>(sum);
            }
            if (++step == STEPS) {
                step = 0;
                pass++;
            }
        }
    }
};

} // namespace nnet

#endif
