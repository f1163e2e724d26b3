// hetdeploy: the word-wide memories of an FPGA subfunction (the on-chip arena, the reserve, and DDR).
//
// A memory is an array of 128-bit words (WORD_BYTES; WORD_BITS, word_t: one constant, as planning/units/costs.py's
// ARENA_WORD_BYTES; a Zynq UltraScale+ HP port's beat, UG1085). Every buffer of the memory plan starts on a word and
// takes whole words. An element is the raw bits of its fixed-point type in a lane of E bytes, E the next
// power of two of ceil(width / 8): word k of a buffer holds its elements k * (16 / E) onwards, the
// first in the lowest bits, so the bytes are those of little-endian elements one after another (the
// layout of an m_axi array of them, and of the DDR image the host writes). Units move whole words:
// an io_parallel layer's vector 16 / E values an access, a streamed layer's pixel of C channels in
// the ceil(C * E / 16) words it lies in, never a byte at a time.
#ifndef HETDEPLOY_ARENA_H_
#define HETDEPLOY_ARENA_H_

#include "ap_fixed.h"
#include "ap_int.h"
#ifdef __SYNTHESIS__
#include "hls_math.h"
#else
#include <cmath>
#endif

namespace hetdeploy {

typedef unsigned char byte_t;
static const int WORD_BYTES = 16, WORD_BITS = 8 * WORD_BYTES;
typedef ap_uint<WORD_BITS> word_t;

template <class T> struct lane {
    static const int whole_bytes = (T::width + 7) / 8;
    static const int bytes = whole_bytes <= 1 ? 1 : whole_bytes <= 2 ? 2 : whole_bytes <= 4 ? 4 : 8;
    static const int per_word = WORD_BYTES / bytes;
};

// Bits low .. low + W - 1 of a word of N bits, which lie in one of its 64-bit halves (a lane's, W <= 64): the range
// itself in synthesis; in C-simulation read from that half (ap_int's value there, V, is an ap_private of 64-bit
// words), the same bits: a range of a word of over 64 bits is a multi-word copy and shift there, which took most of
// an engine's C-simulation time at 128-bit words
template <int W, int N> ap_uint<W> word_bits(const ap_uint<N> &word, int low) {
#pragma HLS INLINE
#ifndef __SYNTHESIS__
    if (N > 64) return ap_uint<W>(word.V.get_pVal(low / 64) >> (low % 64));
#endif
    return word.range(low + W - 1, low);
}

template <class T> T lane_value(const word_t &word, int k) {
#pragma HLS INLINE
    T value;
    value.range(T::width - 1, 0) = word_bits<T::width>(word, 8 * lane<T>::bytes * k);
    return value;
}

template <class T> void set_lane(word_t &word, int k, T value) {
#pragma HLS INLINE
    const int low = 8 * lane<T>::bytes * k;
    ap_uint<8 * lane<T>::bytes> bits = 0;
    bits.range(T::width - 1, 0) = value.range(T::width - 1, 0);
    word.range(low + 8 * lane<T>::bytes - 1, low) = bits;
}

// element ``index`` of a buffer: one word read
template <class T> T read(const word_t *base, int index) {
#pragma HLS INLINE
    return lane_value<T>(base[index / lane<T>::per_word], index % lane<T>::per_word);
}

// A run: values i * N .. i * N + N - 1 of a buffer, N a streamed word's channels or one arena word's
// lanes. The words it lies in are read (and written) once each: N / (8 / E) of them when N fills
// whole words, else at most two more, shared with the neighbouring runs of the same buffer.
template <class T, int N> struct run {
    static const int per_word = lane<T>::per_word;
    static const bool whole = N % per_word == 0;
    static const int words = whole ? N / per_word : N / per_word + 2;
    static int first_word(int i) { return i * N / per_word; }
    static int first_lane(int i) { return whole ? 0 : i * N % per_word; }
    static int last_word(int i) { return (first_lane(i) + N - 1) / per_word; }  // of the run, from its first
};

// (of a buffer of ``n`` values: no word past its last one read)
template <class T, int N, class V> void read_run(const word_t *base, int i, V values[N], int n = 1 << 30) {
#pragma HLS INLINE
    word_t window[run<T, N>::words];
    for (int w = 0; w < run<T, N>::words; w++) {
#pragma HLS UNROLL
        const int word = run<T, N>::first_word(i) + w;
        window[w] = w <= run<T, N>::last_word(i) && word * lane<T>::per_word < n ? base[word] : word_t(0);
    }
    for (int c = 0; c < N; c++) {
#pragma HLS UNROLL
        const int v = run<T, N>::first_lane(i) + c;
        values[c] = lane_value<T>(window[v / lane<T>::per_word], v % lane<T>::per_word);
    }
}

template <class T, int N, class V> void write_run(word_t *base, int i, const V values[N]) {
#pragma HLS INLINE
    word_t window[run<T, N>::words];
    for (int w = 0; w < run<T, N>::words; w++) {
#pragma HLS UNROLL
        // a word the run shares with its neighbours keeps their lanes
        window[w] = !run<T, N>::whole && w <= run<T, N>::last_word(i) ? base[run<T, N>::first_word(i) + w]
                                                                        : word_t(0);
    }
    for (int c = 0; c < N; c++) {
#pragma HLS UNROLL
        const int v = run<T, N>::first_lane(i) + c;
        set_lane<T>(window[v / lane<T>::per_word], v % lane<T>::per_word, T(values[c]));
    }
    for (int w = 0; w < run<T, N>::words; w++) {
#pragma HLS UNROLL
        if (w <= run<T, N>::last_word(i)) base[run<T, N>::first_word(i) + w] = window[w];
    }
}

// A buffer of n values to or from an array of them (an io_parallel layer's vector, a float port),
// a word of lanes a cycle; the lanes past n in the last word are the buffer's padding.
template <class T, class V> void read_array(const word_t *base, V *values, int n) {
    for (int w = 0; w * lane<T>::per_word < n; w++) {
#pragma HLS PIPELINE
        V lanes[lane<T>::per_word];
        read_run<T, lane<T>::per_word>(base, w, lanes);
        for (int k = 0; k < lane<T>::per_word; k++) {
#pragma HLS UNROLL
            if (w * lane<T>::per_word + k < n) values[w * lane<T>::per_word + k] = lanes[k];
        }
    }
}

template <class T, class V> void write_array(word_t *base, const V *values, int n) {
    for (int w = 0; w * lane<T>::per_word < n; w++) {
#pragma HLS PIPELINE
        T lanes[lane<T>::per_word];
        for (int k = 0; k < lane<T>::per_word; k++) {
#pragma HLS UNROLL
            lanes[k] = w * lane<T>::per_word + k < n ? T(values[w * lane<T>::per_word + k]) : T(0);
        }
        write_run<T, lane<T>::per_word>(base, w, lanes);
    }
}

// A dataflow top's token (hls/dataflow_top.cpp.in): what its FIFOs carry at a time, a pixel's C channels or a
// flat tensor's C values, as T's lanes in whole words from the first lane of the first word.
template <int W> struct token {
    word_t words[W];
};

template <class T, int C> struct token_of {
    static const int words = (C + lane<T>::per_word - 1) / lane<T>::per_word;
    typedef token<words> type;
};

template <class T, int C, class V> void from_token(const typename token_of<T, C>::type &t, V values[C]) {
#pragma HLS INLINE
    for (int c = 0; c < C; c++) {
#pragma HLS UNROLL
        values[c] = lane_value<T>(t.words[c / lane<T>::per_word], c % lane<T>::per_word);
    }
}

template <class T, int C, class V> typename token_of<T, C>::type to_token(const V values[C]) {
#pragma HLS INLINE
    typename token_of<T, C>::type t;
    for (int w = 0; w < token_of<T, C>::words; w++) {
#pragma HLS UNROLL
        t.words[w] = 0;
    }
    for (int c = 0; c < C; c++) {
#pragma HLS UNROLL
        set_lane<T>(t.words[c / lane<T>::per_word], c % lane<T>::per_word, T(values[c]));
    }
    return t;
}

// token p of a buffer (its values p * C onwards: a run), and a token into its place in a buffer
template <class T, int C> typename token_of<T, C>::type buffer_token(const word_t *buffer, int p) {
#pragma HLS INLINE
    T values[C];
    read_run<T, C>(buffer, p, values);
    return to_token<T, C>(values);
}

template <class T, int C> void token_to_buffer(const typename token_of<T, C>::type &t, word_t *buffer, int p) {
#pragma HLS INLINE
    T values[C];
    from_token<T, C>(t, values);
    write_run<T, C>(buffer, p, values);
}

// float arrays (a unit's C-simulation wrapper's inputs and outputs) <-> fixed-point buffers (T's rounding and
// saturation apply)
template <class T> void from_float(const float *source, word_t *buffer, int n) {
    write_array<T>(buffer, source, n);
}

template <class T> void to_float(const word_t *buffer, float *target, int n) {
    read_array<T>(buffer, target, n);
}

// An input port of a quantizer's codes (plan.json's "codes", board_runtime.to_codes): 64-bit words of 64 / B codes
// of B bits, code j of a sample in bits (j % (64 / B)) * B onwards of word j / (64 / B), a sample in whole words;
// a code indexes its value in the port's table (the host quantizer's floats, converted to T as from_float converts
// them: the same values as a float port).
typedef unsigned long long codes_t;

template <int B> struct codes {
    static const int per_word = 64 / B;
    static int at(codes_t word, int k) { return int((word >> (B * k)) & ((codes_t(1) << B) - 1)); }
};

// a sample's codes into a buffer of n values of T, a buffer word a cycle (a port word read where its codes start)
template <class T, int B> void from_codes(const codes_t *source, const T table[1 << B], word_t *buffer, int n) {
    codes_t word = 0;
    for (int w = 0; w * lane<T>::per_word < n; w++) {
#pragma HLS PIPELINE
        const int first = w * lane<T>::per_word;  // a buffer word's lanes lie in one port word (both powers of two)
        if (first % codes<B>::per_word == 0) word = source[first / codes<B>::per_word];
        T lanes[lane<T>::per_word];
        for (int k = 0; k < lane<T>::per_word; k++) {
#pragma HLS UNROLL
            lanes[k] = first + k < n ? table[codes<B>::at(word, (first + k) % codes<B>::per_word)] : T(0);
        }
        write_run<T, lane<T>::per_word>(buffer, w, lanes);
    }
}

// Zero-compressed float ports (plan.json's "transfers"; board_runtime.zero_compress is the host's
// end): a sample of n values is 32-bit words: the count of values kept, a bitmap of ceil(n / 32)
// words (bit j % 32 of word j / 32 set: value j kept) and the kept values' float bits in order. A
// value is dropped only where its bits are all 0 (+0.0, which is what T(0) converts to), so a
// compressed port carries the same values as a float one, bit for bit.
typedef unsigned int packed_t;

inline float float_of_bits(packed_t bits) {
    union { packed_t bits; float value; } both;
    both.bits = bits;
    return both.value;
}

inline packed_t bits_of_float(float value) {
    union { packed_t bits; float value; } both;
    both.value = value;
    return both.bits;
}

// A float port of the top, read or written F floats at a time (planning.units.port_floats: as many as the board's
// DDR port delivers a cycle, up to a 128-bit word, and a divisor of a sample's values, so that each sample of a batch
// begins a word): words of 32 * F bits, float j of a sample in bits (j % F) * 32 onwards of its word j / F, as the
// host's float32 array lies in memory.
template <int F> struct floats {
    typedef ap_uint<32 * F> word;
#ifndef __SYNTHESIS__
    static_assert(sizeof(word) == 4 * F, "C-simulation reads the host's floats as the port's words");
#endif
};

// a sample of such a port into a buffer of n values of T (as from_float converts them), a port word an iteration: a
// buffer word's L lanes from its L / F port words (F divides L), written with the last of them (the lanes past n,
// zeros: the buffer's padding)
template <class T, int F> void from_float_words(const typename floats<F>::word *source, word_t *buffer, int n) {
    static const int L = lane<T>::per_word, R = L / F;
    T lanes[L];
    for (int r = 0; r * F < n; r++) {
#pragma HLS PIPELINE
        const typename floats<F>::word word = source[r];
        for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
            const int j = r / R * L + k;  // lane k's value of the sample
            if (k / F == r % R)
                lanes[k] = j < n ? T(float_of_bits(packed_t(word_bits<32>(word, 32 * (k % F))))) : T(0);
            else if (r % R == 0)
                lanes[k] = T(0);
        }
        if (r % R == R - 1 || (r + 1) * F >= n) write_run<T, L>(buffer, r / R, lanes);
    }
}

// a buffer of n values of T into a sample of such a port (their values, exactly), a port word an iteration: a buffer
// word read with the first of its L / F port words
template <class T, int F> void to_float_words(const word_t *buffer, typename floats<F>::word *target, int n) {
    static const int L = lane<T>::per_word, R = L / F;
    word_t bits = 0;
    for (int r = 0; r * F < n; r++) {
#pragma HLS PIPELINE
        if (r % R == 0) bits = buffer[r / R];
        typename floats<F>::word word = 0;
        for (int k = 0; k < F; k++) {
#pragma HLS UNROLL
            word.range(32 * k + 31, 32 * k) = bits_of_float(float(lane_value<T>(bits, r % R * F + k)));
        }
        target[r] = word;
    }
}

// a sample's compressed words into a buffer of n values of T (as from_float converts them), a value a cycle
template <class T> void from_zero_compressed(const packed_t *source, word_t *buffer, int n) {
    const packed_t *kept = source + 1 + (n + 31) / 32;
    int next = 0;
    packed_t map = 0;
    for (int w = 0; w * lane<T>::per_word < n; w++) {
        T lanes[lane<T>::per_word];
        for (int k = 0; k < lane<T>::per_word; k++) {
#pragma HLS PIPELINE
            const int j = w * lane<T>::per_word + k;
            if (j < n && j % 32 == 0) map = source[1 + j / 32];
            const bool present = j < n && (map >> (j % 32)) & 1;
            lanes[k] = present ? T(float_of_bits(kept[next])) : T(0);
            if (present) next++;
        }
        write_run<T, lane<T>::per_word>(buffer, w, lanes);
    }
}

// a buffer of n values of T as a sample's compressed words (their floats as to_float gives them), a value a cycle
template <class T> void to_zero_compressed(const word_t *buffer, packed_t *target, int n) {
    packed_t *kept = target + 1 + (n + 31) / 32;
    packed_t map = 0;
    int count = 0;
    for (int j = 0; j < n; j++) {
#pragma HLS PIPELINE
        const float value = read<T>(buffer, j);
        const packed_t bits = bits_of_float(value);
        if (bits != 0) {
            kept[count++] = bits;
            map |= packed_t(1) << (j % 32);
        }
        if (j % 32 == 31 || j == n - 1) {
            target[1 + j / 32] = map;
            map = 0;
        }
    }
    target[0] = count;
}

#ifndef __SYNTHESIS__
// C-simulation of a typed m_axi port into the DDR region: the array of n elements at ``region``
template <class T> void load_array(const word_t *region, T *target, int n) {
    for (int i = 0; i < n; i++) target[i] = read<T>(region, i);
}

// the DDR region's words from the bytes of the host's image (little-endian)
inline void load_bytes(word_t *region, const byte_t *image, int bytes) {
    for (int b = 0; b < bytes; b++) region[b / WORD_BYTES].range(8 * (b % WORD_BYTES) + 7, 8 * (b % WORD_BYTES)) = image[b];
}
#endif

// ``words`` words from ``source`` to ``target``, in order, one an iteration (from an m_axi port: one burst): an
// engine unit's input in DDR copied on chip before it runs
inline void copy_words(const word_t *source, word_t *target, int words) {
    for (int w = 0; w < words; w++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=262144
// no word it writes is read (the memory plan places source and target apart, in one memory or two)
#pragma HLS DEPENDENCE variable=source inter false
#pragma HLS DEPENDENCE variable=target inter false
        target[w] = source[w];
    }
}

// A relayout (Flatten, Reshape, Transpose, Squeeze, Unsqueeze, DepthToSpace, SpaceToDepth, Slice) by its steps
// (planning/units/relayout.py wrote them into units/<unit>/index.h): one pipelined loop of an iteration a step, the
// table's ``count`` steps ``repeat`` times, the n-th time reading and writing n * source_words and n * target_words
// words on (a map the same at each pixel), each step reading at most one source word and writing at most one target
// word: a read and a write an iteration, the memories' two ports; no target word is read. Its lanes move as raw bits
// of E bytes (a value's padding bits with it). HELD > 1 registers: each step's word read into register ``slot``,
// lane k of the word written lane select[k] % per_word of register select[k] / per_word (-1: zero); HELD = 1 (the
// unit folded): each lane k of the output word with select[k] >= 0 takes lane select[k] of the word read, the word
// written (then cleared) with its last step; HELD = 0 (each output word an input word as it is): the word read written.
// Its cycles: relayout_counted.
struct relayout_step {
    int read, write;
    signed char slot;
    short select[WORD_BYTES];  // up to 2 L registers of L lanes: 512 at 8 bits and 128-bit words
};

static const int RELAYOUT_DEPTH = 3;  // the step's entry, the word read, the target word written

#ifndef __SYNTHESIS__
// a pipelined loop's cycles: its iterations at its II, and its pipeline's depth once (none where it has none)
inline long long loop_cycles(long long iterations, int depth, int ii = 1) {
    return iterations > 0 ? (iterations - 1) * ii + depth : 0;
}
#define HETDEPLOY_COUNTED(statement) statement
// C-simulation's count of the relayouts' cycles as they run (planning/units/relayout.py's steps: one a cycle)
inline long long &relayout_counted() {
    static long long cycles = 0;
    return cycles;
}
#else
#define HETDEPLOY_COUNTED(statement)
#endif

template <int E, int HELD>
void relayout(const word_t *source, word_t *target, const relayout_step *steps, int count, int repeat,
              int source_words, int target_words) {
    typedef ap_uint<8 * E> T;
    static const int L = lane<T>::per_word;
    static_assert(HELD * L <= 32768, "a step's select (a short) names each held word's lanes");
    word_t held[HELD > 0 ? HELD : 1];
#pragma HLS ARRAY_PARTITION variable=held complete
    T assembled[L];  // HELD = 1: the output word's lanes so far
#pragma HLS ARRAY_PARTITION variable=assembled complete
    for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
        assembled[k] = 0;
    }
    int i = 0, source_at = 0, target_at = 0;  // the step, and its repeat's first words
    for (int t = 0; t < count * repeat; t++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=262144
// no word it writes is read (the memory plan places source and target apart, in one memory or two)
#pragma HLS DEPENDENCE variable=source inter false
#pragma HLS DEPENDENCE variable=target inter false
        const relayout_step step = steps[i];
        if (step.read >= 0) held[HELD <= 1 ? 0 : step.slot] = source[source_at + step.read];
        if (HELD == 0) {
            if (step.write >= 0) target[target_at + step.write] = held[0];
        } else {
            T lanes[L];
            for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
                const int select = step.select[k];
                if (HELD == 1) {
                    if (select >= 0) assembled[k] = lane_value<T>(held[0], select);
                    lanes[k] = assembled[k];
                } else {
                    lanes[k] = select < 0 ? T(0) : lane_value<T>(held[select / L], select % L);
                }
            }
            if (step.write >= 0) {
                write_run<T, L>(target, target_at + step.write, lanes);
                for (int k = 0; k < L; k++) assembled[k] = 0;
            }
        }
        if (++i == count) {
            i = 0;
            source_at += source_words;
            target_at += target_words;
        }
    }
    HETDEPLOY_COUNTED(relayout_counted() += loop_cycles((long long)count * repeat, RELAYOUT_DEPTH));
}

// A window op (MaxPool, AveragePool, GlobalAveragePool) over a channels-last buffer: output value (pixel (y, x),
// channel c) reduces channel c of the input pixels (y * s_h - pad_top + i * d_h, x * s_w - pad_left +
// j * d_w), i < k_h, j < k_w, that lie inside the input; those outside are padding, which a maximum
// ignores (a window wholly in padding gives 0). Where the channels fill whole words and a window's columns are at
// most WINDOW_RING (window_columns): each of an output row's columns reduced once (two output rows' at once where
// that takes fewer iterations), two of its rows an iteration, each output from the columns of its window; else a
// target word at a time, each lane's window values a word read each (window_values).
struct window_geometry {
    int channels, in_h, in_w, out_h, out_w, k_h, k_w, s_h, s_w, pad_top, pad_left, d_h, d_w;
};

// the columns of a window window_columns keeps (its span: (k_w - 1) * d_w + 1), the outputs of a row it reduces at a
// time (a chunk), and the depth of its loops' pipelines (a column's: the address, the read, the reduction, the ring;
// a move's): hetdeploy's model of the schedule, no HLS tool ran
static const int WINDOW_RING = 16, WINDOW_CHUNK = 256, WINDOW_DEPTH = 4, WINDOW_MOVE_DEPTH = 2;

#ifndef __SYNTHESIS__
// C-simulation's count of the window ops' cycles as they run: each pipelined loop's iterations at II 1 and its depth
// once, a cycle an iteration of the loops around them (planning/units/costs.py's window_cycles, from the same loops)
inline long long &window_counted() {
    static long long cycles = 0;
    return cycles;
}
#endif

// A window op's general form: per target word, per group of its lanes, a read a window position, the window's
// positions one pipelined loop. A group is as many lanes as the largest power of two that divides the channels (all
// of a word's where they fill whole words; 8 of 16 for 24 channels): its values are consecutive channels of one pixel,
// and so are those of each of its window's input pixels, which lie in one input word (their first lane a multiple of
// the group's).
template <class T, class Reduce>
void window_values(const word_t *source, word_t *target, const window_geometry &g, const Reduce &reduce) {
    static const int L = lane<T>::per_word;
    int together = L;  // lanes one read serves
    while (g.channels % together != 0) together /= 2;
    const int n = g.out_h * g.out_w * g.channels;
    for (int w = 0; w * L < n; w++) {
        T lanes[L];
        typename Reduce::template of<T>::sum_t sums[L];
        for (int k = 0; k < L; k += together) {
            const int j = w * L + k;
            const int c = j % g.channels, pixel = j / g.channels, y = pixel / g.out_w, x = pixel % g.out_w;
            bool any = false;
            int count = 0;  // the window's positions inside the input
            HETDEPLOY_COUNTED(window_counted() += 1 + loop_cycles(g.k_h * g.k_w, WINDOW_DEPTH));  // (a perfect nest)
            for (int i = 0; i < g.k_h; i++) {
                for (int m = 0; m < g.k_w; m++) {
#pragma HLS PIPELINE
                    const int row = y * g.s_h - g.pad_top + i * g.d_h, column = x * g.s_w - g.pad_left + m * g.d_w;
                    if (j >= n || row < 0 || row >= g.in_h || column < 0 || column >= g.in_w) continue;
                    const int at = (row * g.in_w + column) * g.channels + c;
                    const word_t word = source[at / L];
                    for (int t = 0; t < L; t++) {  // (a constant bound: unrolled, its lanes past the group's idle)
                        if (t < together) {
                            const T value = lane_value<T>(word, at % L + t);
                            sums[k + t] = any ? reduce.template add<T>(sums[k + t], value)
                                              : reduce.template first<T>(value);
                        }
                    }
                    any = true;
                    count++;
                }
            }
            for (int t = 0; t < together; t++)
                lanes[k + t] = j + t < n && any ? reduce.template result<T>(sums[k + t], count, g) : T(0);
        }
        write_run<T, L>(target, w, lanes);
    }
}

// The rows of a window that lie inside the input, from its first (``first``, of k_h) on, for output row ``y``
inline void window_rows(const window_geometry &g, int y, int &first, int &rows) {
    const int row0 = y * g.s_h - g.pad_top;
    first = row0 < 0 ? (-row0 + g.d_h - 1) / g.d_h : 0;
    const int end = row0 >= g.in_h ? 0 : (g.in_h - row0 + g.d_h - 1) / g.d_h;  // (past the last inside)
    rows = (end < g.k_h ? end : g.k_h) - first;
    if (rows < 0) rows = 0;
}

// Whether window_columns reduces two output rows at once: where the rows are not dilated and the windows of two
// rows overlap or meet (s_h <= k_h), their input rows are read once for both, in fewer iterations than two rows'
// apart (a 3 x 3 window of stride 1: four rows in two iterations, not three in two for each row)
inline bool window_row_pairs(const window_geometry &g) {
    const int apart = 2 * (g.k_h > 2 ? (g.k_h + 1) / 2 : 1), span = g.k_h + g.s_h;
    return g.out_h > 1 && g.d_h == 1 && g.s_h <= g.k_h && (span > 2 ? (span + 1) / 2 : 1) < apart;
}

// A window op over whole words of channels, its windows' columns at most WINDOW_RING: per pass of one output row, or
// two (ROWS 2, where window_row_pairs: twice the reductions' registers and comparators), per chunk of at most WINDOW_CHUNK of its outputs, per channel word, one pipelined loop over
// the columns the chunk's windows span (padding columns too, reading nothing), each column's input rows that the
// pass's windows take (from the first to the last inside the input) two an iteration (the memory's two ports; one
// iteration where none is inside), each row into the column's reduction of each window it lies in, each reduction
// then shifted into a ring of the last WINDOW_RING, and where an output's window ends at it, each row's output from
// its columns in its ring into a row of words; then each row written, two words an iteration.
template <class T, int ROWS, class Reduce>
void window_columns(const word_t *source, word_t *target, const window_geometry &g, const Reduce &reduce) {
    typedef typename Reduce::template of<T>::sum_t sum_t;
    static const int L = lane<T>::per_word;
    const int words = g.channels / L, span = (g.k_w - 1) * g.d_w + 1;
    const int together = ROWS == 2 && window_row_pairs(g) ? 2 : 1;
    bool in_window[WINDOW_RING];  // the ring's places an output's columns are at, the newest last
    for (int j = 0; j < WINDOW_RING; j++) {
        const int m = j - (WINDOW_RING - span);
        in_window[j] = m >= 0 && m % g.d_w == 0;
    }
    for (int y = 0; y < g.out_h; y += together) {
        // each output row's rows inside the input (none past the map's last row) and the first of them; the rows
        // read, from the first either window takes, d_h apart, and where each window's first is among them
        int first[ROWS], rows[ROWS], row0[ROWS], offset[ROWS], lo = 0, read = 0;
        for (int b = 0; b < ROWS; b++) {
            rows[b] = 0;
            if (b < together && y + b < g.out_h) window_rows(g, y + b, first[b], rows[b]);
            row0[b] = (y + b) * g.s_h - g.pad_top + (rows[b] ? first[b] : 0) * g.d_h;
        }
        for (int b = 0; b < ROWS; b++) {
            if (!rows[b]) continue;
            const int end = b && read ? row0[b] + rows[b] - lo : rows[b];  // (two rows: d_h 1)
            if (!read) lo = row0[b];
            if (end > read) read = end;
        }
        for (int b = 0; b < ROWS; b++) offset[b] = (row0[b] - lo) / g.d_h;
        const int iterations = read > 2 ? (read + 1) / 2 : 1;
        for (int x0 = 0; x0 < g.out_w; x0 += WINDOW_CHUNK) {
            const int outs = g.out_w - x0 < WINDOW_CHUNK ? g.out_w - x0 : WINDOW_CHUNK;
            const int columns = (outs - 1) * g.s_w + span, column0 = x0 * g.s_w - g.pad_left;
            for (int cw = 0; cw < words; cw++) {
                word_t row[ROWS][WINDOW_CHUNK];
#pragma HLS ARRAY_PARTITION variable=row cyclic factor=2 dim=2
#pragma HLS ARRAY_PARTITION variable=row complete dim=1
                sum_t column[ROWS][L], ring[ROWS][WINDOW_RING][L];
                bool inside[WINDOW_RING];  // whether the ring's column has values (lies inside the input)
#pragma HLS ARRAY_PARTITION variable=column complete dim=0
#pragma HLS ARRAY_PARTITION variable=ring complete dim=0
#pragma HLS ARRAY_PARTITION variable=inside complete
                for (int j = 0; j < WINDOW_RING; j++) inside[j] = false;
                int it = 0;
                for (int v = 0, p = 0, x = 0; it < columns * iterations; it++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=(2 * WINDOW_CHUNK + WINDOW_RING) * 3
                    const int c = column0 + v;
                    const bool has = c >= 0 && c < g.in_w && read > 0;
                    for (int t = 0; t < 2; t++) {
#pragma HLS UNROLL
                        const int i = 2 * p + t;
                        if (has && i < read) {
                            const word_t word = source[((lo + i * g.d_h) * g.in_w + c) * words + cw];
                            for (int b = 0; b < ROWS; b++) {
                                const int at = i - offset[b];  // the row of window b it is, if any
                                if (at < 0 || at >= rows[b]) continue;
                                for (int k = 0; k < L; k++) {
                                    const T value = lane_value<T>(word, k);
                                    column[b][k] = at == 0 ? reduce.template first<T>(value)
                                                           : reduce.template add<T>(column[b][k], value);
                                }
                            }
                        }
                    }
                    if (++p < iterations) continue;
                    p = 0;
                    for (int j = 0; j + 1 < WINDOW_RING; j++) {
                        for (int b = 0; b < ROWS; b++)
                            for (int k = 0; k < L; k++) ring[b][j][k] = ring[b][j + 1][k];
                        inside[j] = inside[j + 1];
                    }
                    for (int b = 0; b < ROWS; b++)
                        for (int k = 0; k < L; k++) ring[b][WINDOW_RING - 1][k] = column[b][k];
                    inside[WINDOW_RING - 1] = has;
                    if (v++ != x * g.s_w + span - 1) continue;  // no output's window ends at this column
                    for (int b = 0; b < together; b++) {
                        sum_t sums[L];
                        int count = 0;  // the window's positions inside the input
                        for (int j = 0; j < WINDOW_RING; j++) {
                            if (!in_window[j] || !inside[j] || !rows[b]) continue;
                            for (int k = 0; k < L; k++)
                                sums[k] = count ? reduce.template merge<T>(sums[k], ring[b][j][k]) : ring[b][j][k];
                            count += rows[b];
                        }
                        word_t out = 0;
                        for (int k = 0; k < L; k++)
                            set_lane<T>(out, k, count ? reduce.template result<T>(sums[k], count, g) : T(0));
                        row[b][x] = out;
                    }
                    x++;
                }
                HETDEPLOY_COUNTED(window_counted() += 1 + loop_cycles(it, WINDOW_DEPTH));
                for (int b = 0; b < together && y + b < g.out_h; b++) {
                    int pair = 0;
                    for (; 2 * pair < outs; pair++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=WINDOW_CHUNK / 2
                        const int x = 2 * pair, at = ((y + b) * g.out_w + x0 + x) * words + cw;
                        target[at] = row[b][x];
                        if (x + 1 < outs) target[at + words] = row[b][x + 1];
                    }
                    HETDEPLOY_COUNTED(window_counted() += loop_cycles(pair, WINDOW_MOVE_DEPTH));
                }
            }
        }
    }
}

template <class T, int ROWS, class Reduce>
void window_op(const word_t *source, word_t *target, const window_geometry &g, const Reduce &reduce) {
    if (g.channels % lane<T>::per_word == 0 && (g.k_w - 1) * g.d_w + 1 <= WINDOW_RING)
        window_columns<T, ROWS>(source, target, g, reduce);
    else
        window_values<T>(source, target, g, reduce);
}

// the largest value of a window (a value of T: exact)
struct window_max {
    template <class T> struct of { typedef T sum_t; };
    template <class T> T first(T value) const { return value; }
    template <class T> T add(T best, T value) const { return value > best ? value : best; }
    template <class T> T merge(T best, T other) const { return other > best ? other : best; }
    template <class T> T result(T best, int, const window_geometry &) const { return best; }
};

// 1 / n for a window of n positions, rounded to the nearest (ties up) of its 47 fraction bits
typedef ap_ufixed<48, 1, AP_RND> window_inverse_t;

// the mean of a window (GlobalAveragePool, AveragePool): the sum of its values inside the input exact (as many
// more integer bits as 2**25 values need), times the inverse of the kernel's size where padding counts (as
// zeros: ONNX's count_include_pad=1), else of the positions inside the input (count_include_pad=0), then rounded
// as T rounds. The inverses are the unit's constants (``inverses``, each window_inverse_t(1.0 / n) folded by the
// compiler): a table, not a division in the loop. ``by_count``: entry n is the inverse of n, for a window of n
// positions inside the input; else the one entry is the kernel's size's (padding counted, or every window inside).
struct window_mean {
    const window_inverse_t *inverses;
    bool by_count;
    window_mean(const window_inverse_t *inverses, bool by_count) : inverses(inverses), by_count(by_count) {}
    template <class T> struct of { typedef ap_fixed<T::width + 25, T::iwidth + 25> sum_t; };
    template <class T> typename of<T>::sum_t first(T value) const { return value; }
    template <class T> typename of<T>::sum_t add(typename of<T>::sum_t sum, T value) const { return sum + value; }
    template <class T> typename of<T>::sum_t merge(typename of<T>::sum_t sum, typename of<T>::sum_t other) const {
        return sum + other;
    }
    template <class T> T result(typename of<T>::sum_t sum, int inside, const window_geometry &) const {
        return T(sum * inverses[by_count ? inside : 0]);
    }
};

// One value of an Add, then a ReLU where ``relu``: the sum exact (one integer bit more than the wider input, the
// finer fraction), converted to T as T rounds and saturates.
template <class A, class B, class T> T add_value(A a, B b, bool relu) {
#pragma HLS INLINE
    static const int F = A::width - A::iwidth > B::width - B::iwidth ? A::width - A::iwidth : B::width - B::iwidth;
    static const int I = (A::iwidth > B::iwidth ? A::iwidth : B::iwidth) + 1;
    typedef ap_fixed<I + F, I> sum_t;
    const sum_t sum = sum_t(a) + sum_t(b);
    return T(relu && sum < 0 ? sum_t(0) : sum);
}

// An Add of two buffers of n values each (a residual connection): ``add_value`` of each pair; a word of T's lanes
// at a time, each input read as the same run of values.
template <class A, class B, class T> void add(const word_t *a, const word_t *b, word_t *target, int n, bool relu) {
    static const int L = lane<T>::per_word;
    for (int w = 0; w * L < n; w++) {
#pragma HLS PIPELINE
// no word it writes is read (the memory plan places both inputs and the target apart, in one memory or two)
#pragma HLS DEPENDENCE variable=a inter false
#pragma HLS DEPENDENCE variable=b inter false
#pragma HLS DEPENDENCE variable=target inter false
        A first[L];
        B second[L];
        T lanes[L];
        read_run<A, L>(a, w, first);
        read_run<B, L>(b, w, second);
        for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
            lanes[k] = w * L + k < n ? add_value<A, B, T>(first[k], second[k], relu) : T(0);
        }
        write_run<T, L>(target, w, lanes);
    }
}

// One tensor of a Concat along the channels: ``source``'s ``c_in`` channels a pixel into channels first .. first +
// c_in - 1 of each of ``pixels`` pixels of ``target``, ``channels`` a pixel, each value converted to T (a move:
// exact where T holds it); a word of T's lanes an iteration, its input's run of values read, the word written (c_in,
// first and channels whole words of T's lanes).
template <class A, class T>
void concat_slice(const word_t *source, word_t *target, int pixels, int c_in, int first, int channels) {
    static const int L = lane<T>::per_word;
    const int words = c_in / L;  // a pixel's
    for (int w = 0, pixel = 0, k = 0; w < pixels * words; w++) {
#pragma HLS PIPELINE
// no word it writes is read (the memory plan places source and target apart, in one memory or two)
#pragma HLS DEPENDENCE variable=source inter false
#pragma HLS DEPENDENCE variable=target inter false
        A values[L];
        T lanes[L];
        read_run<A, L>(source, w, values);
        for (int j = 0; j < L; j++) lanes[j] = T(values[j]);
        write_run<T, L>(target, (pixel * channels + first) / L + k, lanes);
        if (++k == words) {
            k = 0;
            pixel++;
        }
    }
}

// A Concat of two channels-last buffers along the channels (a flat buffer's values are its channels): output
// pixel p's channels are a's c_a, then b's c_b, each value converted to T (a move: exact where T holds it). When
// both inputs' channels fill whole words of T's lanes, each input into its channels (concat_slice: its words read
// once); else a word of T's lanes at a time, each value a read.
template <class A, class B, class T>
void concat(const word_t *a, const word_t *b, word_t *target, int pixels, int c_a, int c_b) {
    static const int L = lane<T>::per_word;
    const int channels = c_a + c_b, n = pixels * channels;
    if (c_a % L == 0 && c_b % L == 0) {
        concat_slice<A, T>(a, target, pixels, c_a, 0, channels);
        concat_slice<B, T>(b, target, pixels, c_b, c_a, channels);
        return;
    }
    for (int w = 0; w * L < n; w++) {
#pragma HLS PIPELINE
// no word it writes is read (the memory plan places both inputs and the target apart, in one memory or two)
#pragma HLS DEPENDENCE variable=a inter false
#pragma HLS DEPENDENCE variable=b inter false
#pragma HLS DEPENDENCE variable=target inter false
        T lanes[L];
        for (int k = 0; k < L; k++) {
            const int j = w * L + k, at = j / channels, ch = j % channels;
            lanes[k] = j >= n ? T(0) : ch < c_a ? T(read<A>(a, at * c_a + ch)) : T(read<B>(b, at * c_b + ch - c_a));
        }
        write_run<T, L>(target, w, lanes);
    }
}

// One value of a BatchNormalization the top computes itself (one not folded into a layer before it), a ReLU after
// it where ``relu``: the value times its channel's scale plus its channel's shift (constants of type S), the
// product and the sum exact, then the ReLU, converted to T as T rounds and saturates.
template <class A, class S, class T> T affine_value(A value, S scale, S shift, bool relu) {
#pragma HLS INLINE
    typedef ap_fixed<A::width + S::width + 2, A::iwidth + S::iwidth + 2> sum_t;
    const sum_t sum = sum_t(value * scale) + sum_t(shift);
    return T(relu && sum < 0 ? sum_t(0) : sum);
}

// A per-value op over a buffer of n values (``op(value, j)`` of value j: affine's, quantize's): a word of T's lanes
// every REUSE cycles (the loop's II), so that each of the op's L / REUSE sets of multipliers serves REUSE lanes. Its
// source may be a slice of a wider buffer (a Concat's output that holds it, written in place): its pixels of
// ``channels`` values ``stride`` elements apart there (channels and stride whole runs of L; else stride channels),
// the run a word reads stepped by counters.
template <class A, class T, int REUSE, class Op>
void each_value(const word_t *source, word_t *target, int n, const Op &op, int channels, int stride) {
    static const int L = lane<T>::per_word;
    for (int w = 0, pixel = 0, c = 0; w * L < n; w++) {
#pragma HLS PIPELINE II=REUSE
// no word it writes is read (the memory plan places source and target apart, in one memory or two)
#pragma HLS DEPENDENCE variable=source inter false
#pragma HLS DEPENDENCE variable=target inter false
        A values[L];
        T lanes[L];
        read_run<A, L>(source, stride == channels ? w : (pixel + c) / L, values);
        for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
            const int j = w * L + k;
            lanes[k] = j < n ? op(values[k], j) : T(0);
        }
        write_run<T, L>(target, w, lanes);
        c += L;
        if (c >= channels) {
            c = 0;
            pixel += stride;
        }
    }
}

// That BatchNormalization over a channels-last buffer of n values (value j's channel is j % channels)
template <class A, class S, class T> struct affine_op {
    const S *scale, *shift;
    int channels;
    bool relu;
    T operator()(A value, int j) const {
#pragma HLS INLINE
        return affine_value<A, S, T>(value, scale[j % channels], shift[j % channels], relu);
    }
};

// (its source's pixels ``stride`` elements apart: a slice of a wider buffer where that is not ``channels``)
template <class A, class S, class T, int REUSE = 1>
void affine(const word_t *source, word_t *target, const S *scale, const S *shift, int channels, int n, bool relu,
            int stride) {
    const affine_op<A, S, T> op = {scale, shift, channels, relu};
    each_value<A, T, REUSE>(source, target, n, op, channels, stride);
}

// One value of a QONNX Quant the top computes itself (one whose scale is no power of two or whose zero point is not
// 0: onnxruntime's QuantizeLinear and DequantizeLinear pairs, as intake reads them): the value times ``inverse`` (1 /
// the scale, of the fixed type I: exact where the scale is a power of two) plus the zero point, exactly, rounded to
// an integer (``floor``: down; else to the nearest, ties to even, QONNX's ROUND), clamped to the codes [least, most],
// less the zero point, times the scale (of the fixed type S), exactly, converted to T as T rounds and saturates.
template <class A, class I, class S, class T>
T quantize_value(A value, I inverse, S scale, int zero_point, int least, int most, bool floor) {
#pragma HLS INLINE
    typedef ap_fixed<A::width + I::width + 1, A::iwidth + I::iwidth + 1> ratio_t;  // past the sum's largest
    static const int FRACTION = ratio_t::width - ratio_t::iwidth;
    static_assert(FRACTION > 0 && ratio_t::iwidth > 1, "the ratio holds its integer and fraction bits");
    const ratio_t ratio = ratio_t(value * inverse) + ratio_t(zero_point);
    // its integer part (down) and its fraction's bits, half of one: 1 then zeros
    ap_int<ratio_t::iwidth> code = ratio.range(ratio_t::width - 1, FRACTION);
    const ap_uint<FRACTION> fraction = ratio.range(FRACTION - 1, 0), half = ap_uint<FRACTION>(1) << (FRACTION - 1);
    if (!floor && (fraction > half || (fraction == half && code[0]))) code++;
    const int clamped = code < least ? least : code > most ? most : int(code);
    return T(ap_int<ratio_t::iwidth + 1>(clamped - zero_point) * scale);
}

// That Quant over a buffer of n values
template <class A, class I, class S, class T> struct quantize_op {
    I inverse;
    S scale;
    int zero_point, least, most;
    bool floor;
    T operator()(A value, int) const {
#pragma HLS INLINE
        return quantize_value<A, I, S, T>(value, inverse, scale, zero_point, least, most, floor);
    }
};

template <class A, class I, class S, class T, int REUSE = 1>
void quantize(const word_t *source, word_t *target, I inverse, S scale, int zero_point, int least, int most,
              bool floor, int n) {
    const quantize_op<A, I, S, T> op = {inverse, scale, zero_point, least, most, floor};
    each_value<A, T, REUSE>(source, target, n, op, n, n);
}

// The top's ops that a dataflow top computes a token at a time (kinds/<kind>.cpp.in's token statements): an Add of
// a token of each input, a BatchNormalization of a pixel's C channels (value c's channel is c), a Concat of a
// pixel's channels of each input; the arithmetic of the whole-buffer ops above.
template <class A, class B, class T, int C>
typename token_of<T, C>::type add_token(const typename token_of<A, C>::type &a, const typename token_of<B, C>::type &b,
                                        bool relu) {
#pragma HLS INLINE
    A x[C];
    B y[C];
    T sum[C];
    from_token<A, C>(a, x);
    from_token<B, C>(b, y);
    for (int c = 0; c < C; c++) {
#pragma HLS UNROLL
        sum[c] = add_value<A, B, T>(x[c], y[c], relu);
    }
    return to_token<T, C>(sum);
}

template <class A, class S, class T, int C>
typename token_of<T, C>::type affine_token(const typename token_of<A, C>::type &a, const S *scale, const S *shift,
                                           bool relu) {
#pragma HLS INLINE
    A x[C];
    T y[C];
    from_token<A, C>(a, x);
    for (int c = 0; c < C; c++) {
#pragma HLS UNROLL
        y[c] = affine_value<A, S, T>(x[c], scale[c], shift[c], relu);
    }
    return to_token<T, C>(y);
}

template <class A, class B, class T, int CA, int CB>
typename token_of<T, CA + CB>::type concat_token(const typename token_of<A, CA>::type &a,
                                                 const typename token_of<B, CB>::type &b) {
#pragma HLS INLINE
    A x[CA];
    B y[CB];
    T z[CA + CB];
    from_token<A, CA>(a, x);
    from_token<B, CB>(b, y);
    for (int c = 0; c < CA + CB; c++) {
#pragma HLS UNROLL
        z[c] = c < CA ? T(x[c]) : T(y[c - CA]);
    }
    return to_token<T, CA + CB>(z);
}

// x^y in float: the HLS math library's in synthesis (AMD UG1399, "HLS Math Library"), the C library's in
// C-simulation
inline float power(float x, float y) {
#ifdef __SYNTHESIS__
    return hls::pow(x, y);
#else
    return std::pow(x, y);
#endif
}

// A local response normalization (ONNX's LRN) the top computes itself over a channels-last buffer of n values,
// ``channels`` a pixel: value x of channel c becomes x / (bias + alpha / SIZE * s)^beta, s the sum of the squares
// of its pixel's values of channels c - (SIZE - 1) / 2 to c + SIZE / 2 (those the pixel has), exact; the power in
// float, the quotient converted to T as T rounds and saturates. One pass, P = a word of T's lanes over REUSE values
// an iteration (P powers at once): each iteration reads the next run of P values (DELAY runs ahead of the P it
// writes, at least SIZE / 2 values), the window's values, their squares and their pixels in shift registers, the
// output written a whole word at a time.
template <class S, class T, int SIZE, int REUSE = 1>
void lrn(const word_t *source, word_t *target, int channels, int n, float alpha, float beta, float bias) {
    static const int L = lane<T>::per_word, P = L / REUSE, AHEAD = SIZE / 2, BEHIND = (SIZE - 1) / 2;
    static const int DELAY = (AHEAD + P - 1) / P, RING = (DELAY + 1) * P + BEHIND;
    typedef ap_fixed<2 * S::width + 8, 2 * S::iwidth + 8> square_sum_t;  // up to 256 squares, exact
    S values[RING];  // elements o - BEHIND .. o + P - 1 + DELAY * P, o the first written
    square_sum_t squares[RING];
    int pixels[RING];  // theirs (-1: none)
#pragma HLS ARRAY_PARTITION variable=values complete
#pragma HLS ARRAY_PARTITION variable=squares complete
#pragma HLS ARRAY_PARTITION variable=pixels complete
    for (int k = 0; k < RING; k++) {
#pragma HLS UNROLL
        values[k] = 0;
        squares[k] = 0;
        pixels[k] = -1;
    }
    word_t out = 0;
    int pixel = 0, channel = 0;  // of the next value read
    const int runs = (n + P - 1) / P;
    for (int j = 0; j < runs + DELAY; j++) {
#pragma HLS PIPELINE II=1
// no word it writes is read (the memory plan places source and target apart, in one memory or two)
#pragma HLS DEPENDENCE variable=source inter false
#pragma HLS DEPENDENCE variable=target inter false
        for (int k = 0; k + P < RING; k++) {
#pragma HLS UNROLL
            values[k] = values[k + P];
            squares[k] = squares[k + P];
            pixels[k] = pixels[k + P];
        }
        S read_values[P];
        read_run<S, P>(source, j, read_values, j < runs ? n : 0);
        for (int t = 0; t < P; t++) {
#pragma HLS UNROLL
            const bool inside = j * P + t < n;
            values[RING - P + t] = read_values[t];
            squares[RING - P + t] = square_sum_t(read_values[t] * read_values[t]);
            pixels[RING - P + t] = inside ? pixel : -1;
            if (inside && ++channel == channels) {
                channel = 0;
                pixel++;
            }
        }
        const int o = (j - DELAY) * P;
        if (o < 0) continue;
        for (int t = 0; t < P; t++) {
#pragma HLS UNROLL
            square_sum_t sum = 0;
            for (int k = 0; k < SIZE; k++) {
#pragma HLS UNROLL
                if (pixels[t + k] == pixels[BEHIND + t]) sum += squares[t + k];
            }
            const float scale = power(bias + alpha / SIZE * sum.to_float(), -beta);
            if (o + t < n) set_lane<T>(out, (o + t) % L, T(values[BEHIND + t].to_float() * scale));
        }
        if ((o + P) % L == 0 || o + P >= n) {
            target[o / L] = out;
            out = 0;
        }
    }
}

// A unit run in bands (plan.json's "band"): ``rows`` rows of ``row_values`` values (channels-last) from
// row ``first`` of a buffer of ``height`` rows into a band buffer, rows outside it zeros (the layer's
// padding). Where a row is whole words of T's lanes, a word an iteration, read and written (a word of zeros in a row
// outside the buffer); else a word of the band an iteration, each of its lanes' values read on its own.
template <class T> void band_in(const word_t *source, word_t *band, int height, int row_values, int first, int rows) {
    static const int L = lane<T>::per_word;
    const int n = rows * row_values;
    if (row_values % L == 0) {
        const int row_words = row_values / L;
        for (int w = 0, row = first, k = 0; w < rows * row_words; w++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=262144
// no word it writes is read (the memory plan places the buffer and the band apart)
#pragma HLS DEPENDENCE variable=source inter false
#pragma HLS DEPENDENCE variable=band inter false
            band[w] = row >= 0 && row < height ? source[row * row_words + k] : word_t(0);
            if (++k == row_words) {
                k = 0;
                row++;
            }
        }
        return;
    }
    for (int w = 0; w * L < n; w++) {
#pragma HLS PIPELINE
        T lanes[L];
        for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
            const int j = w * L + k, row = first + j / row_values;
            lanes[k] = j < n && row >= 0 && row < height ? read<T>(source, first * row_values + j) : T(0);
        }
        write_run<T, L>(band, w, lanes);
    }
}

// ... and an output band back: band rows 0..rows-1 to rows ``first``.. of a buffer of ``height`` rows
// (the last band's rows past it dropped): where a row is whole words, a word an iteration; else a value at a time,
// its target word read, the value's lane set and the word written back (a row need not start on a word).
template <class T> void band_out(const word_t *band, word_t *target, int height, int row_values, int first, int rows) {
    static const int L = lane<T>::per_word;
    const int valid = first + rows <= height ? rows : height - first, n = valid * row_values;
    if (row_values % L == 0) {
        for (int w = 0; w < n / L; w++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=262144
// no word it writes is read (the memory plan places the band and the buffer apart)
#pragma HLS DEPENDENCE variable=band inter false
#pragma HLS DEPENDENCE variable=target inter false
            target[first * (row_values / L) + w] = band[w];
        }
        return;
    }
    for (int j = 0; j < n; j++) {
#pragma HLS PIPELINE
        const int at = first * row_values + j;
        word_t word = target[at / L];
        set_lane<T>(word, at % L, read<T>(band, j));
        target[at / L] = word;
    }
}

} // namespace hetdeploy

#endif
