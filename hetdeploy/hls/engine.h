// hetdeploy's layer-sequential engine: one array of LANES x VEC multipliers (LANES output channels, each summing
// VEC products a cycle) that the convolution and dense units of a subfunction (plan.json: units of strategy
// "engine") run on one after another, the top calling ``engine`` once per unit with that unit's layer. One
// instance serves them all (the top's ALLOCATION pragma): a layer's shape and binary points are the call's
// values, not template arguments, so layers of any size and precision share the array. Its template arguments
// are the engine's: the bits of an input value (IW), of an output value (OW) and of a weight (WW), its lanes,
// the first URAM_LANES of which (an even number) hold their weight buffers in URAM, two lanes a block, one on each
// of its ports (ram_t2p; the others in BRAM, a lane's own), the values each lane takes a cycle (VEC: a divisor of
// the values a word holds, of the inputs' and the weights'), the largest window of its layers (its weight
// buffers' depth), whether it has the depthwise loop, the DDR words its weights port reads a cycle (PORT: the
// board's memory ports' width, one on a Zynq UltraScale+ HP port of 128 bits), how many memories its calls' buffers
// lie in (MEMORIES), DDR the DDR-th of them (-1: none), the output pixels it computes at once (PIXELS: one, or two,
// each weight read serving both, where a layer gains: engine_pairs), and the m_axi bundles its weights port is
// (BUNDLES: each PORT / BUNDLES words of a read, on a DDR port of its own, where the board has several), and, on one
// of two pixels, whether its pairs share their windows among the tiles it holds (SHARED: engine_shares_windows; its
// window buffer, bias slots and kept sums only where it does), and the most pairs of output pixels of a layer whose
// weights it streams (STREAM: engine_stream; 0: none, no such loop).
//
// Every call passes the one instance the same memories (the top's on-chip arena, URAM and reserve arrays and its DDR
// port, those its calls' buffers lie in, in one order) and says where its input and output lie (engine_place): the
// instance's ports are those memories' whatever the layer, as one instance of a function needs (its arguments
// cannot be an on-chip array at one call and an m_axi pointer at another). The window loops never read DDR: an input
// there is staged (the call's ``staging``, a buffer of the memory plan on chip), a row of output pixels at a time,
// the input rows their windows read copied first, each row read through the weights port's first bundle (``region``,
// its reads from the DDR region's start) and, where a bundle's read is one word, its second (``region1``) at once, a
// burst of each (engine_stage); those pixels' windows then read the staging buffer. A staged layer (or one whose
// pairs share their windows) keeps as many tiles' weights in the buffers at once as fit (engine_resident), each
// tile's in a slot of its own, and stages each row once for all of them.
//
// A call computes a convolution (a dense layer: a 1 x 1 convolution of one pixel) over channels-last buffers of the
// subfunction's memories (arena.h), its weights and biases read from DDR: for each tile of LANES output channels (each
// group of resident tiles), the tile's weights into the engine's buffers (the port's words in order: one burst), an
// entry of VEC weights a cycle into each of PORT lanes at once, then, for each pass of output pixels (all of them, or
// a row where the input is staged) and each tile, the tile's biases, then for each output pixel of the pass the
// k_h x k_w x in_c window values VEC a cycle (where the
// layer's input channels are a multiple of VEC: each group of VEC channels then lies in one input word; else one a
// cycle), each multiplied by the tile's LANES weights at once, and the pixel's outputs written whole words: one an
// iteration that reads the input, two an iteration that reads nothing (a port of the target memory each; one where
// the output lies in DDR, whose m_axi port takes one; one, its residual's word read beside it, where a residual is
// added, and none while a window is read). Where every tile's outputs are whole words (LANES and the
// layer's output channels multiples of a word's outputs) the pixels are one pipelined loop, a pixel's words written
// while the next pixel's window is read, those past its window's iterations after them, or, on an engine of two
// pixels where that is shorter (engine_pairs), a pair of pixels at a time, their windows read together, then their
// words; else each pixel's window, then its words (a word the tile shares with other channels read first). On an
// engine of two pixels built to (SHARED), where the buffers hold several tiles of a layer whose pair's loop that
// makes no longer (engine_shares_windows, engine_group_shares), the tiles' pairs are one loop: a pair's windows read once, for its first
// tile, and kept in the window buffer, which the other tiles' steps read while the tile before's words are written.
// Addresses step with counters; a loop whose bound is a call's value says its largest trip count (LOOP_TRIPCOUNT);
// no pipelined loop reads a memory word an earlier iteration wrote. At 8-bit inputs and weights two lanes' products
// of a value share one DSP48 (ENGINE_PACKED).
//
// Values are raw fixed-point bits whose binary points the layer gives: each product exact (the value, signed in
// IW + 1 bits, by its WW-bit weight: one multiplier's width, not the sum's), the sum in 64 bits, then, where an Add
// of another map ends the layer (ResNet's residual connection: the call's ``residual``, a buffer of the output's
// shape and width), that map's value at the same place added exactly (both at the finer binary point), then the
// layer's ReLU, then rounded to the nearest at the output's fraction bits (ties up: AP_RND), clamped to a Clip's
// bounds where one ends the layer, and saturated to its width and signedness (AP_SAT), as the output buffer's
// ap_fixed type would.
//
// Its cycles are counted in C-simulation (``engine_counted``; compiled only there): each pipelined loop's
// iterations at its II plus its pipeline's depth (the DEPTH constants below, hetdeploy's model of the schedule:
// no HLS tool ran), and a cycle a tile (and a pixel, where its window and its words are loops of their own) for the
// loops around them. planning/units/costs.py's
// ``engine_cycles`` is written from the same loops; tests/test_engine.py holds the two together.
//
// A grouped convolution's output channel o reads the input channels of its group (o / (out_c / groups)), in_c /
// groups of them; its tiles are a group's output channels, LANES at a time.
//
// Weights in the port's words of PORT DDR words (fpga/engine.py writes them): output channel o's
// window, ((o * k_h + ky) * k_w + kx) * (in_c / groups) + c (c of its group's channels), as WW-bit lanes (value *
// 2^weight_fraction) in F = ceil(window / lanes a word) DDR words, its last word's lanes past the window zeros; the
// port's word q * F + i holds word i of channels q * PORT .. q * PORT + PORT - 1, the first in its low word
// (channels past the last: zeros), so that a tile's words are one run and a read fills PORT lanes (a streamed
// layer's, engine_stream: the tile's reads of word i one after another, word after word, from the tile's first read
// q0, q0 * F on); then, from read
// ceil(out_c / PORT) * F, each output channel's bias as a word (its 64 low bits, sign-extended), PORT channels' a
// read (bias * 2^(in_fraction + weight_fraction), the sum's binary point). Read by BUNDLES bundles, a layer's reads
// lie in BUNDLES blocks one after another, block b holding words b * PORT / BUNDLES .. (b + 1) * PORT / BUNDLES - 1
// of each read in order (a bundle's reads one run: its bursts); the call points bundle b (w0 .. w3) at block b.
#ifndef HETDEPLOY_ENGINE_H_
#define HETDEPLOY_ENGINE_H_

#include "arena.h"

namespace hetdeploy {

// Where a call's buffer lies: which of the engine's memories (its ``m0`` .. ``m3``) and its first word there.
struct engine_place {
    int memory, word;
};

// Word ``at`` of the buffer at ``place``: read from the one memory it lies in (MEMORIES of m0 .. m3 are the engine's;
// the others are never read), which is never memory SKIP (the window loops': DDR, whose inputs they read staged)
template <int MEMORIES, int SKIP = -1>
word_t engine_read(const word_t *m0, const word_t *m1, const word_t *m2, const word_t *m3, const engine_place &place,
                   int at) {
#pragma HLS INLINE
    const int word = place.word + at;
    if (MEMORIES > 3 && SKIP != 3 && place.memory == 3) return m3[word];
    if (MEMORIES > 2 && SKIP != 2 && place.memory == 2) return m2[word];
    if (MEMORIES > 1 && SKIP != 1 && place.memory == 1) return m1[word];
    return SKIP == 0 ? word_t(0) : m0[word];  // (SKIP 0: memory 0 is never read)
}

// ... and written (never to memory SKIP: an output word written beside another, which DDR's one port cannot take)
template <int MEMORIES, int SKIP = -1>
void engine_write(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &place, int at,
                  const word_t &bits) {
#pragma HLS INLINE
    const int word = place.word + at;
    if (MEMORIES > 3 && SKIP != 3 && place.memory == 3) m3[word] = bits;
    else if (MEMORIES > 2 && SKIP != 2 && place.memory == 2) m2[word] = bits;
    else if (MEMORIES > 1 && SKIP != 1 && place.memory == 1) m1[word] = bits;
    else if (SKIP < 0 || (SKIP != 0 && place.memory != SKIP)) m0[word] = bits;
}

struct engine_layer {
    int in_c, in_h, in_w, out_c, out_h, out_w, k_h, k_w, s_h, s_w, pad_top, pad_left, d_h, d_w;
    int in_fraction, in_signed, weight_fraction, out_fraction, out_signed, relu;
    int groups;  // of input and output channels: output channel o reads group o / (out_c / groups)'s inputs
    // the output codes a Clip ending the layer keeps them within (its bounds rounded as the outputs are: clamping
    // the rounded output is rounding the clamped value, rounding being monotone); else the output type's range
    long long clip_low, clip_high;
    // a residual map added to the sums before the ReLU (an Add fused after the layer: a buffer of the output's shape
    // and width, the call's ``residual``), its binary point and signedness; residual 0: none
    int residual, residual_fraction, residual_signed;
    // the elements from one output pixel to the next in the target buffer: out_c, or, where the layer writes its
    // channels into a Concat's output in place, that output's channels (the target the first of its slice; never
    // a layer that adds a residual, whose words it reads where it writes its own)
    int out_stride;
    // whether its weights stream from DDR while the lanes compute (engine_stream), on an engine of STREAM pairs
    int streamed;
};

// A layer as it runs on buffers of its own (a unit checked alone): its output pixels its own channels apart
inline engine_layer engine_alone(engine_layer g) {
    g.out_stride = g.out_c;
    return g;
}

// A layer's output stage: its sums and its residual's values shifted up to one binary point (the finer of the two),
// then rounded by ``shift`` to the output's, and saturated to [least, most]
template <typename sum_t> struct engine_out {
    int sum_up, residual_up, shift;
    sum_t most, least;
};

template <int OW, typename sum_t> engine_out<sum_t> engine_out_of(const engine_layer &g) {
#pragma HLS INLINE
    const int sum_fraction = g.in_fraction + g.weight_fraction;
    const int fraction = g.residual && g.residual_fraction > sum_fraction ? g.residual_fraction : sum_fraction;
    engine_out<sum_t> o;
    o.sum_up = fraction - sum_fraction;
    o.residual_up = fraction - g.residual_fraction;
    o.shift = fraction - g.out_fraction;
    o.most = g.out_signed ? (sum_t(1) << (OW - 1)) - 1 : (sum_t(1) << OW) - 1;
    o.least = g.out_signed ? sum_t(-(sum_t(1) << (OW - 1))) : sum_t(0);
    return o;
}

// the depth of a loop's pipeline: a move (a word read, then written) and a window value's (its address, the
// read, the product, the sum; and the pixel's sums ready for its outputs)
static const int ENGINE_MOVE_DEPTH = 2;
static const int ENGINE_MAC_DEPTH = 6;
// The pragmas of a pipelined loop over a tile's window iterations (``m0`` .. ``m3`` the engine's memories): II 1,
// its largest trip count, and no dependence through the memories from one iteration to the next (none reads a word
// an earlier one wrote); a macro of _Pragma operators, as UG1399 writes pragmas in a macro
#define ENGINE_WINDOW_LOOP                                                                                           \
    _Pragma("HLS PIPELINE II=1") _Pragma("HLS LOOP_TRIPCOUNT max=ENGINE_MAX_ITERATIONS")                             \
    _Pragma("HLS DEPENDENCE variable=m0 inter false") _Pragma("HLS DEPENDENCE variable=m1 inter false")              \
    _Pragma("HLS DEPENDENCE variable=m2 inter false") _Pragma("HLS DEPENDENCE variable=m3 inter false")

// the largest layer a loop's LOOP_TRIPCOUNT assumes: pixels and rows of an output map, tiles of output channels, a
// kernel's rows, and the words of an input row (224 x 64 16-bit values)
static const int ENGINE_MAX_PIXELS = 112 * 112, ENGINE_MAX_ROWS = 112;
static const int ENGINE_MAX_TILES = 64;  // (and the slots of the biases of the tiles a layer holds at once)
// ... and the steps of a window the window buffer keeps (a pair's windows shared among tiles: engine_shares_windows)
static const int ENGINE_SHARED_STEPS = 512;
// ... and the chunks of a dense layer deeper than the buffers (VGG-19's first of 25,088 values, 4,096 a chunk)
static const int ENGINE_MAX_CHUNKS = 8;
static const int ENGINE_MAX_KERNEL = 11, ENGINE_MAX_ROW_WORDS = 224 * 64 * 2 / WORD_BYTES;
// ... and a tile's iterations over its pixels' windows (ENGINE_MAX_PIXELS of 3 x 3 x 64 values, four a cycle)
static const int ENGINE_MAX_ITERATIONS = ENGINE_MAX_PIXELS * 144;

#ifndef __SYNTHESIS__
struct engine_counts {
    long long cycles;        // every loop's, as the header says
    long long weight_words;  // DDR words of weights and biases read
};
inline engine_counts &engine_counted() {
    static engine_counts counts = {0, 0};
    return counts;
}
// a pipelined loop's cycles (arena.h's loop_cycles) into the engine's count
inline void count_loop(long long iterations, int depth, int ii = 1) {
    engine_counted().cycles += loop_cycles(iterations, depth, ii);
}

// C-simulation's view of the weights port: ``count`` of its words from the DDR region's words (``words``, the
// region's first PORT * count), word p of a read in its bits WORD_BITS p onwards, as the port reads the same bytes
template <int PORT> void engine_port_view(const word_t *words, ap_uint<WORD_BITS * PORT> *reads, long long count) {
    for (long long r = 0; r < count; r++) {
        for (int p = 0; p < PORT; p++)
            reads[r].range(WORD_BITS * p + WORD_BITS - 1, WORD_BITS * p) = words[r * PORT + p];
    }
}
#endif

// Where a window's rows lie in the staging buffer, a ring of k_h slots (engine_stage): the slot of the row a walk is
// at (``slot``, of ``slots``), and the elements a walk moves back when it passes the last slot (``wrap``: the
// buffer's); an input on chip: one slot past its window's rows, never passed (wrap 0)
struct engine_ring {
    int slot, slots, wrap;

    // the walk's element ``at`` on to the next window row: back by the buffer past its last slot
    void next(int &at) {
        if (++slot == slots) {
            slot = 0;
            at -= wrap;
        }
    }
};

// A window's walk over the input, in the window's order (ky, kx, c), channels fastest (a group's ``channels``,
// from channel ``channel0`` on): the input element its next value is at, that value's row and column (outside the
// map: padding), its channel and kernel column, and the weight-buffer entry and the place in it its weights are
// at; stepped by counters, one multiply a pixel.
struct engine_walk {
    int at, row, column, c, kx, entry, lane;
    engine_ring ring;  // its window row's slot of the staging buffer

    // at element ``first`` (``engine_window_first``), input row ``row0``, column ``column0``, its first window row in
    // ``ring``'s slot
    void start(int first, int row0, int column0, const engine_ring &at_slot) {
        at = first;
        row = row0;
        column = column0;
        c = kx = entry = lane = 0;
        ring = at_slot;
    }

    // whether its place lies inside the input (else padding, a zero)
    bool inside(const engine_layer &g) const {
        return row >= 0 && row < g.in_h && column >= 0 && column < g.in_w;
    }

    // ``step`` values on (VEC of an entry's); column_step and row_step: the input element moves by these after a
    // pixel's ``channels`` and after a row of the window
    void next(const engine_layer &g, int channels, int step, int vec, int column0, int column_step, int row_step) {
        lane += step;
        if (lane == vec) {
            lane = 0;
            entry++;
        }
        at += step;
        c += step;
        if (c == channels) {
            c = 0;
            at += column_step;
            column += g.d_w;
            if (++kx == g.k_w) {
                kx = 0;
                at += row_step;
                ring.next(at);
                column = column0;
                row += g.d_h;
            }
        }
    }
};

// The output pixel a tile's loop is at: its column, the input row and column its window starts at (before the
// map: padding), and its first output element; stepped by counters, one pixel after another.
struct engine_pixel {
    int x, row0, column0, out_first;

    // at the first pixel of output row ``row``, its first output channel ``first``
    void start(const engine_layer &g, int first, int row) {
        x = 0;
        row0 = row * g.s_h - g.pad_top;
        column0 = -g.pad_left;
        out_first = first + row * g.out_w * g.out_stride;
    }

    void next(const engine_layer &g) {
        out_first += g.out_stride;
        column0 += g.s_w;
        if (++x == g.out_w) {
            x = 0;
            column0 = -g.pad_left;
            row0 += g.s_h;
        }
    }
};

// The element output pixel ``p``'s window begins at (its first row, its first column, channel ``channel0``): in the
// input, or, ``staged``, in the staging buffer, whose slot ``ring.slot`` of ``slot_elements`` holds the window's
// first row
inline int engine_window_first(const engine_layer &g, const engine_pixel &p, int channel0, bool staged,
                               const engine_ring &ring, int slot_elements) {
#pragma HLS INLINE
    return staged ? ring.slot * slot_elements + p.column0 * g.in_c + channel0
                  : (p.row0 * g.in_w + p.column0) * g.in_c + channel0;
}

// Slot words ``first`` .. ``first`` + R - 1 of a staging slot (at ``slot``; those of its ``slot_words``) from two
// reads of the weights port, ``earlier`` and ``later``, one after the other: word first + t from their bit (R + t -
// spans) * WORD_BITS + ``shift_bits`` on (the earlier's bit 0 the first)
template <int MEMORIES, int DDR, int R>
void engine_stage_words(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &staging, int slot,
                        int slot_words, const ap_uint<WORD_BITS * R> &earlier, const ap_uint<WORD_BITS * R> &later,
                        int first, int spans, int shift_bits) {
#pragma HLS INLINE
    ap_uint<2 * WORD_BITS * R> both = later;
    both = (both << (WORD_BITS * R)) | earlier;
stage_words:
    for (int t = 0; t < R; t++) {
#pragma HLS UNROLL
        const int i = first + t;
        if (i >= 0 && i < slot_words)
            engine_write<MEMORIES, DDR>(m0, m1, m2, m3, staging, slot + i,
                                        word_t(both >> ((R + t - spans) * WORD_BITS + shift_bits)));
    }
}

// The bundles of the weights port a staged row is read through at once: two where a bundle's read is one word (the
// staging memory's two ports take a word of each a cycle), else one (its read's words already two or more a cycle)
#define ENGINE_STAGING_BUNDLES(BUNDLES, R) ((BUNDLES) >= 2 && (R) == 1 ? 2 : 1)

// An input in DDR (memory DDR of m0 .. m3) staged for a row of output pixels: the input rows their windows read
// (``row0`` + ky * d_h, ky < k_h, those inside the map) but the first ``kept`` (staged for the row before, still in
// their slots) copied to the staging buffer (at ``staging``, ``slot_words`` words a slot: a row's in_w x in_c
// values), a ring of k_h slots, row ky in slot ``first_slot`` + ky (past the last, from the first again), each row
// read from the DDR region's first word on (R words a read, as wide as a bundle of the weights port: the DDR port's
// width) through S = ENGINE_STAGING_BUNDLES bundles at once (``region``, the first's reads, ``region1``, the
// second's), each a burst of its own in one pipelined loop: the reads the row's DDR words lie in (n of them), in
// order, the first bundle's the first H = ceil((n + S - 1) / S), the second's the last H (its first one's words the
// first's: it only primes the word before its own), one of each an iteration, each iteration writing R slot words of
// each bundle's read (two a cycle, the staging memory's two ports: an iteration every (S * R + 1) / 2 cycles). Slot
// word i holds the row's values i * IPW onwards: each from the DDR word its first value lies in and, where the row
// does not begin a word, the next (the last, where that lies past the input's last read, from a zero read).
template <int IW, int MEMORIES, int DDR, int R, int BUNDLES>
void engine_stage(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const ap_uint<WORD_BITS * R> *region,
                  const ap_uint<WORD_BITS * R> *region1, const engine_layer &g, const engine_place &source,
                  const engine_place &staging, int row0, int slot_words, int kept, int first_slot) {
#pragma HLS INLINE
    static const int IPW = lane<ap_uint<IW> >::per_word, IB = 8 * lane<ap_uint<IW> >::bytes;
    static const int S = ENGINE_STAGING_BUNDLES(BUNDLES, R), II = (S * R + 1) / 2;
    const int last_read = (source.word + (g.in_h * g.in_w * g.in_c + IPW - 1) / IPW - 1) / R;  // the input's
    int ring = first_slot + kept < g.k_h ? first_slot + kept : first_slot + kept - g.k_h;  // row ky's slot
slots:
    for (int ky = kept, row = row0 + kept * g.d_h; ky < g.k_h; ky++, row += g.d_h) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_KERNEL
        HETDEPLOY_COUNTED(engine_counted().cycles++);
        const int slot = ring * slot_words;
        if (++ring == g.k_h) ring = 0;
        if (row < 0 || row >= g.in_h) continue;  // padding: never read
        const int first = row * g.in_w * g.in_c;  // the row's first value
        const int word0 = source.word + first / IPW, shift = first % IPW, spans = shift ? 1 : 0;
        // the slot words read k writes: i = k * R - lead + t (t < R), slot word i from bit
        // (R + t - spans) * WORD_BITS + shift * IB of the reads k - 1 and k one after the other (its DDR words
        // word0 + i and the next)
        const int lead = word0 % R + spans, read0 = word0 / R;
        const int reads = (lead + slot_words - 1) / R + 1;
        const int in_input = reads < last_read - read0 + 1 ? reads : last_read - read0 + 1;  // the reads in the input
        const int each = (in_input + 2 * S - 2) / S, second = in_input - each;  // a bundle's reads, and
        // the second's first
        ap_uint<WORD_BITS * R> held = 0, held1 = 0;
    stage_row:
        for (int k = 0; k < each; k++) {
#pragma HLS PIPELINE II=II
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_ROW_WORDS
            const ap_uint<WORD_BITS * R> fresh = region[read0 + k];
            engine_stage_words<MEMORIES, DDR, R>(m0, m1, m2, m3, staging, slot, slot_words, held, fresh,
                                                 k * R - lead, spans, shift * IB);
            held = fresh;
            if (S == 2) {  // the second bundle's read: its words where the first's reads end (its first primes)
                const ap_uint<WORD_BITS * R> fresh1 = region1[read0 + second + k];
                if (second + k >= each)
                    engine_stage_words<MEMORIES, DDR, R>(m0, m1, m2, m3, staging, slot, slot_words, held1, fresh1,
                                                         (second + k) * R - lead, spans, shift * IB);
                held1 = fresh1;
            }
        }
        HETDEPLOY_COUNTED(count_loop(each, ENGINE_MOVE_DEPTH, II));
        if (in_input < reads) {  // the slot's last words: the input's last values (an iteration)
            engine_stage_words<MEMORIES, DDR, R>(m0, m1, m2, m3, staging, slot, slot_words, S == 2 ? held1 : held,
                                                 ap_uint<WORD_BITS * R>(0), in_input * R - lead, spans, shift * IB);
            HETDEPLOY_COUNTED(engine_counted().cycles += II);
        }
    }
}

// Whether an engine of IW-bit inputs and WW-bit weights puts two lanes' products in one DSP48 (Xilinx WP486's
// shared-operand packing): where a product fits 18 bits signed (IW + WW <= 17: 8-bit inputs and weights) and
// the lanes pair up
#define ENGINE_PACKED(IW, WW, LANES) ((IW) + (WW) <= 17 && (LANES) % 2 == 0)

// An input value, signed: its IW bits and a sign (an unsigned one's zero)
template <int IW> ap_int<IW + 1> engine_value(const word_t &word, int k, const engine_layer &g) {
#pragma HLS INLINE
    const ap_uint<IW> raw = lane_value<ap_uint<IW> >(word, k);
    return g.in_signed ? ap_int<IW + 1>(ap_int<IW>(raw)) : ap_int<IW + 1>(raw);
}

// P output pixels' VEC values each (``value[p]``), each multiplied by lane ``lane_t``'s weights of its ``entry``
// (read once, shared by the pixels) and, where two lanes' products share a DSP48 (ENGINE_PACKED), by lane ``odd``'s
// of its ``odd_entry`` too, from its place ``first`` on, and added to that pixel's sum of the lane (``sums[p]``)
template <int IW, int WW, int LANES, int VEC, int P, typename entry_t, typename sum_t>
void engine_lane_products(const ap_int<IW + 1> value[][VEC], int first, int lane_t, int odd, const entry_t &entry,
                          const entry_t &odd_entry, sum_t sums[][LANES]) {
#pragma HLS INLINE
    typedef ap_int<WW> weight_t;
    typedef ap_int<IW + 1 + WW> product_t;  // exact: a value by a weight
    static const int LB = 8 * lane<weight_t>::bytes;
    for (int pv = 0; pv < P * VEC; pv++) {
#pragma HLS UNROLL
        const int p = pv / VEC, v = pv % VEC;
        const int at_lane = (first + v) % VEC;
        const weight_t weight = word_bits<WW>(entry, LB * at_lane);
        if (ENGINE_PACKED(IW, WW, LANES)) {
            // two lanes' products of one value in one DSP48's 27 x 18 multiply (Xilinx WP486): the second
            // lane's weight 18 bits up, the first's below it; the low 18 bits are the first product (signed:
            // |value x weight| < 2^(IW + WW - 1) <= 2^16), the rest the second's, both exact
            const ap_int<27> weights = (ap_int<27>(weight_t(word_bits<WW>(odd_entry, LB * at_lane))) << 18) + weight;
            const ap_int<45> both = weights * ap_int<18>(value[p][v]);
            const ap_int<18> low = both;  // its low 18 bits, signed
            sums[p][lane_t] += low;
            sums[p][odd] += (both - low) >> 18;
        } else {
            // in place: ap_int's value * weight widens both to the product's width first, and two operands
            // of over 32 bits multiply in C-simulation through a heap-allocated multi-word type
            product_t product = value[p][v];
            product *= weight;
            sums[p][lane_t] += product;
        }
    }
}

// ... every lane's, its weights of entry ``at`` of its buffer (lane t's from tile, or from paired for a URAM lane)
template <int IW, int WW, int LANES, int URAM_LANES, int VEC, int ENTRIES, int P, typename entry_t, typename sum_t>
void engine_products(const ap_int<IW + 1> value[][VEC], int at, int first, const entry_t tile[][ENTRIES],
                     const entry_t paired[][2 * ENTRIES], sum_t sums[][LANES]) {
#pragma HLS INLINE
    for (int lane_t = 0; lane_t < LANES; lane_t += ENGINE_PACKED(IW, WW, LANES) ? 2 : 1) {
#pragma HLS UNROLL
        const entry_t entry = lane_t < URAM_LANES ? paired[lane_t / 2][lane_t % 2 * ENTRIES + at]
                                                  : tile[lane_t - URAM_LANES][at];
        const int odd = lane_t + 1 < LANES ? lane_t + 1 : lane_t;  // a packed pair's second lane
        const entry_t odd_entry = odd < URAM_LANES ? paired[odd / 2][odd % 2 * ENTRIES + at]
                                                   : tile[odd - URAM_LANES][at];
        engine_lane_products<IW, WW, LANES, VEC, P>(value, first, lane_t, odd, entry, odd_entry, sums);
    }
}

// One window step's values: ``step`` of them at the walk's place (VEC channels of a pixel, or one) from ``in_word``,
// the input word they lie in (zero in the padding); the others zeros
template <int IW, int VEC>
void engine_step_values(const word_t &in_word, const engine_layer &g, const engine_walk &w, int step,
                        ap_int<IW + 1> value[VEC]) {
#pragma HLS INLINE
    static const int IPW = lane<ap_uint<IW> >::per_word;  // (a power of two)
    for (int v = 0; v < VEC; v++) {
#pragma HLS UNROLL
        // its lane in the word: the place's low bits, not ``% IPW``, which is negative at a padding place before the
        // input's first element (its word a zero, but a part-select below bit 0 is out of range)
        value[v] = v >= step ? ap_int<IW + 1>(0) : engine_value<IW>(in_word, (w.at + v) & (IPW - 1), g);
    }
}

// One window step of a pixel: its values, each multiplied by every lane's weight (its tile's from the buffers' entry
// ``slot`` on) and added to its sum (sums[0])
template <int IW, int WW, int LANES, int URAM_LANES, int VEC, int ENTRIES, typename entry_t, typename sum_t>
void engine_accumulate(const word_t &in_word, const engine_layer &g, const engine_walk &w, int step, int slot,
                       const entry_t tile[][ENTRIES], const entry_t paired[][2 * ENTRIES], sum_t sums[][LANES]) {
#pragma HLS INLINE
    ap_int<IW + 1> value[1][VEC];
#pragma HLS ARRAY_PARTITION variable=value complete dim=0
    engine_step_values<IW, VEC>(in_word, g, w, step, value[0]);
    engine_products<IW, WW, LANES, URAM_LANES, VEC, ENTRIES, 1>(value, slot + w.entry, w.lane, tile, paired, sums);
}

// Channel ``c`` of column ``column`` moved ``n`` values on along a window row (n at most VEC): each time it passes the
// layer's channels, the next column
template <int VEC> void engine_carry(int &c, int &column, int n, const engine_layer &g) {
#pragma HLS INLINE
    c += n;
    for (int k = 0; k < VEC; k++) {
#pragma HLS UNROLL
        if (c >= g.in_c) {
            c -= g.in_c;
            column++;
        }
    }
}

// A window's walk along its rows (a layer of one group, columns dilated by one, whose channels are no whole word of
// weights: a first layer's three): a row's k_w x in_c values lie one after another in the input, VEC of them an
// iteration (the row's weights padded to whole words of weights, ``row_values``), each iteration reading the word
// its last value lies in and holding the word read before, which its first may lie in; a row's first iteration
// reads its first word only. Stepped by counters: the input element its next values begin at, that element's
// column and channel, its row, the row's iteration and the weight-buffer entry.
struct engine_row_walk {
    int at, column, c, row, step, entry;
    word_t held;
    engine_ring ring;

    void start(int first, int row0, int column0, const engine_ring &at_slot) {
        at = first;
        column = column0;
        row = row0;
        c = step = entry = 0;
        held = 0;
        ring = at_slot;
    }

    // the word this iteration reads (the one its values end in; a row's first iteration: the one its first value
    // lies in), and whether it lies in the input, of ``elements`` values (else it reads a zero): IPW values a word
    template <int VEC, int IPW> int word(const engine_layer &g, int elements, bool &in_map) const {
        const int last = step == 0 ? at : at + VEC - 1;
        const int first_of = (last - (last & (IPW - 1))) / IPW;  // IPW a power of two
        in_map = row >= 0 && row < g.in_h && first_of >= 0 && first_of * IPW < elements;
        return first_of;
    }

    // the next iteration: after ``steps`` a row (its first read, then its values VEC at a time) the next row,
    // its first element ``row_step`` elements on from the row's
    template <int VEC> void next(const engine_layer &g, int steps, int column0, int row_step) {
        if (step > 0) {
            at += VEC;
            entry++;
            engine_carry<VEC>(c, column, VEC, g);
        }
        if (++step == steps) {
            step = 0;
            at += row_step;
            ring.next(at);
            row += g.d_h;
            column = column0;
            c = 0;
        }
    }
};

// Whether a layer's window is walked along its rows (engine_row_walk): one group, columns one apart, its channels
// no whole word of PW weights
inline bool engine_rows(const engine_layer &g, int pw) {
#pragma HLS INLINE
    return g.groups == 1 && g.d_w == 1 && g.in_c % pw != 0;
}

// The VEC values of an iteration of a row walk past the row's first, ``fresh`` the word it read
// (``engine_row_walk::word``; zero outside the input), from the word held and the fresh one: zeros outside the map
// (those past the row's k_w x in_c meet its padding's zero weights)
template <int IW, int VEC>
void engine_row_step_values(const word_t &fresh, const engine_layer &g, const engine_row_walk &w,
                            ap_int<IW + 1> value[VEC]) {
#pragma HLS INLINE
    static const int IPW = lane<ap_uint<IW> >::per_word;
    const int first = w.at & (IPW - 1);  // the first value's place in its word (IPW a power of two)
    const bool row_inside = w.row >= 0 && w.row < g.in_h;
    // the values' words: the held one then the fresh one, or the fresh one alone where all lie in it
    const int shift = first + VEC <= IPW ? IPW : 0;
    for (int v = 0; v < VEC; v++) {
#pragma HLS UNROLL
        const int k = first + v + shift;  // its place in held, then fresh
        int c = w.c, column = w.column;
        engine_carry<VEC>(c, column, v, g);
        const bool inside = row_inside && column >= 0 && column < g.in_w;
        const ap_int<IW + 1> got = engine_value<IW>(k < IPW ? w.held : fresh, k % IPW, g);
        value[v] = inside ? got : ap_int<IW + 1>(0);
    }
}

// One iteration of a row walk, ``fresh`` the word it read: past the row's first, its VEC values
// (engine_row_step_values) each multiplied by every lane's weight (its tile's from entry ``slot`` on) and added to
// its sum
template <int IW, int WW, int LANES, int URAM_LANES, int VEC, int ENTRIES, typename entry_t, typename sum_t>
void engine_row_accumulate(const word_t &fresh, const engine_layer &g, engine_row_walk &w, int slot,
                           const entry_t tile[][ENTRIES], const entry_t paired[][2 * ENTRIES], sum_t sums[][LANES]) {
#pragma HLS INLINE
    if (w.step > 0) {
        ap_int<IW + 1> value[1][VEC];
#pragma HLS ARRAY_PARTITION variable=value complete dim=0
        engine_row_step_values<IW, VEC>(fresh, g, w, value[0]);
        engine_products<IW, WW, LANES, URAM_LANES, VEC, ENTRIES, 1>(value, slot + w.entry, 0, tile, paired, sums);
    }
    w.held = fresh;
}

// One step of a depthwise tile (lane t: the tile's channel t, its own input channel) for P output pixels at once:
// ``in_words[p]``, pixel p's input word ``word`` of the tile's channels at its walk's window place (zero in the
// padding), each of its IPW values multiplied by its lane's weight at that place (entry ``entry``, its lane
// ``at_lane``; read once for the P pixels) and added to that lane's sum of pixel p: P x IPW multipliers, each lane's
// weight chosen among the lanes the word's place k can be, and its sum among those.
template <int IW, int WW, int LANES, int URAM_LANES, int VEC, int ENTRIES, int P, typename entry_t, typename sum_t>
void engine_depthwise_accumulate(const word_t in_words[P], const engine_layer &g, int word, int entry, int at_lane,
                                 const entry_t tile[][ENTRIES], const entry_t paired[][2 * ENTRIES],
                                 sum_t sums[][LANES]) {
#pragma HLS INLINE
    typedef ap_uint<IW> raw_in_t;
    typedef ap_int<WW> weight_t;
    typedef ap_int<IW + 1> value_t;
    typedef ap_int<IW + 1 + WW> product_t;
    static const int IPW = lane<raw_in_t>::per_word, LB = 8 * lane<weight_t>::bytes;
    for (int k = 0; k < IPW; k++) {
#pragma HLS UNROLL
        weight_t weight = 0;
        for (int t = k; t < LANES; t += IPW) {
#pragma HLS UNROLL
            const entry_t e = t < URAM_LANES ? paired[t / 2][t % 2 * ENTRIES + entry] : tile[t - URAM_LANES][entry];
            if (t / IPW == word) weight = word_bits<WW>(e, LB * at_lane);
        }
        for (int p = 0; p < P; p++) {
#pragma HLS UNROLL
            const raw_in_t raw = lane_value<raw_in_t>(in_words[p], k);
            product_t product = g.in_signed ? value_t(ap_int<IW>(raw)) : value_t(raw);
            product *= weight;
            for (int t = k; t < LANES; t += IPW) {
#pragma HLS UNROLL
                if (t / IPW == word) sums[p][t] += product;
            }
        }
    }
}

// A depthwise walk's next window place's input word (``word`` of the tile's ``channel_words``), and that place's
// weights' entry and lane in it (a place's weights the next lane of the entry, VEC an entry)
template <int VEC> void engine_depthwise_next(int &word, int &entry, int &at_lane, int channel_words) {
#pragma HLS INLINE
    if (++word == channel_words) {
        word = 0;
        if (++at_lane == VEC) {
            at_lane = 0;
            entry++;
        }
    }
}

// How a layer's window walks step: a group's channels, the values an iteration (``step``), the input element's moves
// after a pixel's channels of the group and after a window row (engine_walk::next), and a row walk's iterations a
// row and move after a row (engine_row_walk::next)
struct engine_strides {
    int channels, step, column_step, row_step, row_steps, row_walk_step;
};

// A window step's input word at its walk's place (a row walk's, ``rows``: engine_row_walk::word, of the input's
// ``input_elements``), read from the memory the input lies in (``input``; never DDR), or zero outside the input
template <int IW, int VEC, int MEMORIES, int DDR>
word_t engine_window_word(const word_t *m0, const word_t *m1, const word_t *m2, const word_t *m3,
                          const engine_place &input, const engine_layer &g, bool rows, const engine_walk &walk,
                          const engine_row_walk &row_walk, int input_elements) {
#pragma HLS INLINE
    static const int IPW = lane<ap_uint<IW> >::per_word;
    bool in_map = walk.inside(g);
    const int at = rows ? row_walk.word<VEC, IPW>(g, input_elements, in_map) : walk.at / IPW;
    return in_map ? engine_read<MEMORIES, DDR>(m0, m1, m2, m3, input, at) : word_t(0);
}

// One window step of a pixel walked a channel group at a time, or along its rows (``rows``): ``in_word``'s values
// multiplied by every lane's weight (its tile's from the buffers' entry ``slot`` on) and added to its sum, and the
// walk stepped on (``column0``: the pixel's window's first column)
template <int IW, int WW, int LANES, int URAM_LANES, int VEC, int ENTRIES, typename entry_t, typename sum_t>
void engine_window_step(const word_t &in_word, const engine_layer &g, bool rows, const engine_strides &k,
                        int column0, int slot, engine_walk &walk, engine_row_walk &row_walk,
                        const entry_t tile[][ENTRIES], const entry_t paired[][2 * ENTRIES], sum_t sums[][LANES]) {
#pragma HLS INLINE
    if (rows) {
        engine_row_accumulate<IW, WW, LANES, URAM_LANES, VEC, ENTRIES>(in_word, g, row_walk, slot, tile, paired, sums);
        row_walk.next<VEC>(g, k.row_steps, column0, k.row_walk_step);
    } else {
        engine_accumulate<IW, WW, LANES, URAM_LANES, VEC, ENTRIES>(in_word, g, walk, k.step, slot, tile, paired,
                                                                   sums);
        walk.next(g, k.channels, k.step, VEC, column0, k.column_step, k.row_step);
    }
}

// A window step of a pair of pixels walked a channel group a step: each pixel's values (from its input word, the
// second's in sums[P - 1]), multiplied by every lane's weight of the entry its walk is at (its tile's from the
// buffers' entry ``slot`` on: read once for both) and added to its sums, and both walks stepped on (``column0``,
// ``second_column0``: their windows' first columns)
template <int IW, int WW, int LANES, int URAM_LANES, int VEC, int ENTRIES, int P, typename entry_t, typename sum_t>
void engine_pair_step(const word_t &first_word, const word_t &second_word, const engine_layer &g,
                      const engine_strides &k, int slot, int column0, int second_column0, engine_walk &walk,
                      engine_walk &second_walk, const entry_t tile[][ENTRIES], const entry_t paired[][2 * ENTRIES],
                      sum_t sums[][LANES]) {
#pragma HLS INLINE
    ap_int<IW + 1> value[P][VEC];
#pragma HLS ARRAY_PARTITION variable=value complete dim=0
    engine_step_values<IW, VEC>(first_word, g, walk, k.step, value[0]);
    engine_step_values<IW, VEC>(second_word, g, second_walk, k.step, value[P - 1]);
    engine_products<IW, WW, LANES, URAM_LANES, VEC, ENTRIES, P>(value, slot + walk.entry, walk.lane, tile, paired,
                                                                 sums);
    walk.next(g, k.channels, k.step, VEC, column0, k.column_step, k.row_step);
    second_walk.next(g, k.channels, k.step, VEC, second_column0, k.column_step, k.row_step);
}

// The walks at output pixel ``output``'s window (its first channel ``channel0``; ``staged``: in the staging buffer,
// its first row in ``ring``'s slot of ``slot_elements``)
inline void engine_start_walks(const engine_layer &g, const engine_pixel &output, int channel0, bool staged,
                               const engine_ring &ring, int slot_elements, engine_walk &walk,
                               engine_row_walk &row_walk) {
#pragma HLS INLINE
    walk.start(engine_window_first(g, output, channel0, staged, ring, slot_elements), output.row0, output.column0,
               ring);
    row_walk.start(engine_window_first(g, output, 0, staged, ring, slot_elements), output.row0, output.column0, ring);
}

// The output pixel after ``output`` (``after``: a pair's second, in the same pass), its walks started at its window
inline void engine_pixel_after(const engine_layer &g, const engine_pixel &output, int channel0, bool staged,
                               const engine_ring &ring, int slot_elements, engine_pixel &after, engine_walk &walk,
                               engine_row_walk &row_walk) {
#pragma HLS INLINE
    after = output;
    after.next(g);
    engine_start_walks(g, after, channel0, staged, ring, slot_elements, walk, row_walk);
}

// A tile of a layer's output channels, a group's filters LANES at a time (a depthwise layer's channels LANES at a
// time): its first output channel, its filters and its group's first input channel; stepped by counters (its group
// and its first filter in it), one tile after another.
struct engine_tile {
    int first, filters, channel0, group, start;

    // its filters and first input channel, from its first output channel, group and first filter in the group
    void take(const engine_layer &g, bool depthwise, int lanes, int group_filters, int channels) {
        if (depthwise) filters = g.out_c - first < lanes ? g.out_c - first : lanes;
        else filters = group_filters - start < lanes ? group_filters - start : lanes;
        channel0 = depthwise ? first : group * channels;
    }

    void begin(const engine_layer &g, bool depthwise, int lanes, int group_filters, int channels) {
        first = group = start = 0;
        take(g, depthwise, lanes, group_filters, channels);
    }

    // the reads of a weights port of ``port`` words its filters' words take (a read ``port`` consecutive filters'
    // words, from filter 0): the first, and how many
    int first_read(int port) const { return first / port; }
    int reads(int port) const { return (first + filters - 1) / port - first / port + 1; }

    void next(const engine_layer &g, bool depthwise, int lanes, int group_filters, int channels) {
        first += filters;
        start += filters;
        if (start >= group_filters) {
            start = 0;
            group++;
        }
        take(g, depthwise, lanes, group_filters, channels);
    }
};

// The tiles whose weights a layer keeps in the lanes' buffers at once, each in a slot of ``filter_entries`` of their
// ``entries``: where its input is staged, as many as fit (each row of output pixels then staged once for all of
// them, not once a tile); where its pairs' windows are read once for all of them (``shares``), as many as fit up to
// ENGINE_MAX_TILES (the slots of their biases); else one
inline int engine_resident(bool staged, bool shares, int entries, int filter_entries) {
#pragma HLS INLINE
    const int fit = entries / filter_entries;
    return fit > 1 && staged ? fit : fit > 1 && shares ? (fit < ENGINE_MAX_TILES ? fit : ENGINE_MAX_TILES) : 1;
}

// Whether a tile whose outputs are whole words (``words`` a pixel, ``written`` of them an iteration that reads
// nothing) runs two output pixels at a time on an engine built for pairs: a layer whose pair's loop, the window's
// ``steps`` (a depthwise tile's: its places' input words) then both pixels' words, is shorter than two pixels' loops
// (each its steps, and its words past them ``written`` an iteration); always where a residual is added (a pixel's
// words then all past its steps, which a pair shares)
inline bool engine_pairs(int steps, int words, int written, bool residual) {
#pragma HLS INLINE
    return residual || steps * written > 2 * words;
}

// Whether a layer's pairs of output pixels may read their windows once for all the tiles its buffers hold at once
// (on an engine of two pixels, ``pairs``): each window step's two input words kept in the engine's window buffer,
// which the other tiles' steps read, leaving the memories' ports to the previous tile's output words, written during
// them (engine_reused_span). A layer of one group walked a channel group a step (whole groups of VEC channels: a step
// one word of each pixel), whose tiles' outputs are whole words (``words`` a pixel of a tile of LANES), of
// ENGINE_SHARED_STEPS steps at most (the window buffer's depth), whose tiles would each run in pairs (engine_pairs:
// always where a residual is added) or whose words are written two an iteration. A pair's loop is then never longer
// than the tiles' own loops but by its first phase's idle iterations (engine_group_shares weighs them): a tile's
// phase the longer of its steps and the words before, not both; where two an iteration, a pixel's own loop is at
// least its steps or its words.
inline bool engine_shares_windows(bool pairs, bool aligned, bool depthwise, bool rows, int groups, bool whole_steps,
                                  int steps, int words, int written, bool residual) {
#pragma HLS INLINE
    return pairs && aligned && !depthwise && !rows && groups == 1 && whole_steps && steps <= ENGINE_SHARED_STEPS &&
           (written == 2 || engine_pairs(steps, words, written, residual));
}

// A pair's iterations in a phase of a loop that shares its windows among ``held`` tiles (its first tile's: the
// window's ``steps``, its words read from memory and kept, at least ENGINE_MAC_DEPTH: a word kept is read a phase
// after it was written, never before the write is done; each other tile's: its steps from the window buffer, during
// which the tile before's pair of outputs are written, ``full`` of them (``written`` an iteration), as many as the
// longer; then the last tile's ``last`` outputs): phase ``phase`` of 0 .. held
inline int engine_reused_span(int phase, int held, int steps, int full, int last) {
#pragma HLS INLINE
    return phase == 0 ? (steps > ENGINE_MAC_DEPTH ? steps : ENGINE_MAC_DEPTH)
                      : phase < held ? (steps > full ? steps : full) : last;
}

// Whether a group of ``held`` tiles of a layer that may share its pairs' windows (engine_shares_windows) does: two
// tiles or more, as many as the biases' slots at most, where its first phase's idle iterations (a window of fewer
// than ENGINE_MAC_DEPTH steps) are no more than the other tiles' phases save on their own loops (each the shorter of
// its steps and its ``full`` iterations of words, which its phase overlaps)
inline bool engine_group_shares(int held, int steps, int full) {
#pragma HLS INLINE
    return held > 1 && held <= ENGINE_MAX_TILES &&
           ENGINE_MAC_DEPTH - steps <= (held - 1) * (steps < full ? steps : full);
}

// A sum as an output value's raw bits: the residual's value ``r`` added (where the layer has one), the layer's
// ReLU, then rounded to the nearest at the output's fraction bits (ties up), clamped to its Clip's codes and
// saturated
template <typename sum_t>
sum_t engine_output(sum_t s, sum_t r, const engine_layer &g, const engine_out<sum_t> &o) {
#pragma HLS INLINE
    if (g.residual) s = (s << o.sum_up) + (r << o.residual_up);
    if (g.relu && s < 0) s = 0;
    if (o.shift > 0) s = (s + (sum_t(1) << (o.shift - 1))) >> o.shift;
    else s = s << -o.shift;
    s = s < sum_t(g.clip_low) ? sum_t(g.clip_low) : s > sum_t(g.clip_high) ? sum_t(g.clip_high) : s;
    return s > o.most ? o.most : s < o.least ? o.least : s;
}

// Lane ``k`` of a residual word (OW-bit lanes, as the output's), its raw bits signed or not as the layer says
template <int OW, typename sum_t> sum_t engine_residual_value(const word_t &residual, int k, const engine_layer &g) {
#pragma HLS INLINE
    const ap_uint<OW> raw = lane_value<ap_uint<OW> >(residual, k);
    return g.residual_signed ? sum_t(ap_int<OW>(raw)) : sum_t(raw);
}

// Whole output word ``word`` of a pixel's sums (the word's lanes from sums[word * L] on), as raw OW-bit outputs,
// the lanes of ``residual`` (the residual's word at the same place) added where the layer has one
template <int OW, typename sum_t>
word_t engine_word(const sum_t *sums, int word, const word_t &residual, const engine_layer &g,
                   const engine_out<sum_t> &o) {
#pragma HLS INLINE
    typedef ap_uint<OW> raw_out_t;
    static const int L = lane<raw_out_t>::per_word;
    word_t bits = 0;
    for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
        set_lane<raw_out_t>(bits, k, raw_out_t(engine_output(sums[word * L + k],
                                                             engine_residual_value<OW, sum_t>(residual, k, g), g, o)));
    }
    return bits;
}

// Words ``q`` and, where ``written`` is two, q + 1 of a pixel's ``words`` output words (from its ``sums``), if they
// are its words, written from word ``first`` of ``target`` on: the second never to memory SKIP. RESIDUAL: the one
// word q (``written`` is one), the residual's word at the same place (from word ``first`` of ``residual`` on) read
// for it
template <int OW, int MEMORIES, int SKIP, bool RESIDUAL, typename sum_t>
void engine_pixel_words(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &target,
                        const engine_place &residual, int first, const sum_t *sums, int q, int words, int written,
                        const engine_layer &g, const engine_out<sum_t> &o) {
#pragma HLS INLINE
    const word_t added = RESIDUAL && q < words ? engine_read<MEMORIES>(m0, m1, m2, m3, residual, first + q) : word_t(0);
    if (q < words)
        engine_write<MEMORIES>(m0, m1, m2, m3, target, first + q, engine_word<OW>(sums, q, added, g, o));
    if (!RESIDUAL && written == 2 && q + 1 < words)
        engine_write<MEMORIES, SKIP>(m0, m1, m2, m3, target, first + q + 1,
                                     engine_word<OW>(sums, q + 1, word_t(0), g, o));
}

// Word ``q`` of a pair of output pixels' words (``words`` each: the first pixel's, then the second's, where
// ``has_second``), if it is one, written to ``target`` (never to memory SKIP); RESIDUAL: the residual's word at
// the same place read for it
template <int OW, int MEMORIES, int SKIP, bool RESIDUAL, int PIXELS, int LANES, typename sum_t>
void engine_pair_word(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &target,
                      const engine_place &residual, const engine_pixel &first, const engine_pixel &second,
                      bool has_second, const sum_t sums[PIXELS][LANES], int q, int words, const engine_layer &g,
                      const engine_out<sum_t> &o) {
#pragma HLS INLINE
    static const int L = lane<ap_uint<OW> >::per_word;
    const bool of_first = q < words;
    const int word = of_first ? q : q - words;  // of its pixel's words
    const int at = (of_first ? first : second).out_first / L + word;
    if (q < 2 * words && (of_first || has_second)) {
        const word_t added = RESIDUAL ? engine_read<MEMORIES>(m0, m1, m2, m3, residual, at) : word_t(0);
        engine_write<MEMORIES, SKIP>(m0, m1, m2, m3, target, at,
                                     engine_word<OW>(sums[of_first ? 0 : PIXELS - 1], word, added, g, o));
    }
}

// Iteration ``k`` of the loop over a pair of output pixels' words: ``written`` of them, the second never to memory
// SKIP, or, ``added``, one, its residual's word read for it (engine_pair_word)
template <int OW, int MEMORIES, int SKIP, int PIXELS, int LANES, typename sum_t>
void engine_pair_words(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &target,
                       const engine_place &residual, const engine_pixel &first, const engine_pixel &second,
                       bool has_second, const sum_t sums[PIXELS][LANES], int k, int words, int written, bool added,
                       const engine_layer &g, const engine_out<sum_t> &o) {
#pragma HLS INLINE
    if (added) {
        engine_pair_word<OW, MEMORIES, -1, true, PIXELS, LANES>(m0, m1, m2, m3, target, residual, first, second,
                                                               has_second, sums, k, words, g, o);
        return;
    }
    engine_pair_word<OW, MEMORIES, -1, false, PIXELS, LANES>(m0, m1, m2, m3, target, residual, first, second,
                                                            has_second, sums, k * written, words, g, o);
    if (written == 2)
        engine_pair_word<OW, MEMORIES, SKIP, false, PIXELS, LANES>(m0, m1, m2, m3, target, residual, first, second,
                                                                  has_second, sums, k * written + 1, words, g, o);
}

// Output word ``word`` of a tile whose outputs share words with other channels' (a pixel's ``filters`` outputs from
// element ``out_first`` on, in ``sums``): the tile's lanes set from its sums, the word's other lanes kept (the word
// read first where it is not the tile's alone), the residual's word at the same place read for it where RESIDUAL
template <int OW, int MEMORIES, bool RESIDUAL, int LANES, typename sum_t>
void engine_shared_word(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &target,
                        const engine_place &residual, int word, int out_first, int filters, const sum_t sums[LANES],
                        const engine_layer &g, const engine_out<sum_t> &o) {
#pragma HLS INLINE
    typedef ap_uint<OW> raw_out_t;
    static const int L = lane<raw_out_t>::per_word;
    const bool whole = word * L >= out_first && (word + 1) * L <= out_first + filters;
    word_t bits = whole ? word_t(0) : engine_read<MEMORIES>(m0, m1, m2, m3, target, word);
    const word_t added = RESIDUAL ? engine_read<MEMORIES>(m0, m1, m2, m3, residual, word) : word_t(0);
    for (int k = 0; k < L; k++) {
#pragma HLS UNROLL
        const int lane_t = word * L + k - out_first;
        if (lane_t >= 0 && lane_t < filters)
            set_lane<raw_out_t>(bits, k, raw_out_t(engine_output(sums[lane_t],
                                                                 engine_residual_value<OW, sum_t>(added, k, g), g,
                                                                 o)));
    }
    engine_write<MEMORIES>(m0, m1, m2, m3, target, word, bits);
}

// The words a pixel's tile of channels lies in (its ``filters`` outputs from element ``out_first`` on, in ``sums``),
// each written once (engine_shared_word): one a cycle, or, RESIDUAL, one every two (two reads and a write a word);
// how many it wrote
template <int OW, int MEMORIES, bool RESIDUAL, int LANES, typename sum_t>
long long engine_shared_words(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &target,
                              const engine_place &residual, int out_first, int filters, const sum_t sums[LANES],
                              const engine_layer &g, const engine_out<sum_t> &o) {
#pragma HLS INLINE
    static const int L = lane<ap_uint<OW> >::per_word, II = RESIDUAL ? 2 : 1, OUTPUT_WORDS = LANES / L + 1;
    long long written = 0;
shared_words:
    for (int word = out_first / L; word * L < out_first + filters; word++) {
#pragma HLS PIPELINE II=II
#pragma HLS LOOP_TRIPCOUNT max=OUTPUT_WORDS
#pragma HLS DEPENDENCE variable=m0 inter false
#pragma HLS DEPENDENCE variable=m1 inter false
#pragma HLS DEPENDENCE variable=m2 inter false
#pragma HLS DEPENDENCE variable=m3 inter false
        written++;
        engine_shared_word<OW, MEMORIES, RESIDUAL, LANES>(m0, m1, m2, m3, target, residual, word, out_first, filters,
                                                          sums, g, o);
    }
    return written;
}

// Read ``r`` of the weights port of PORT DDR words, which BUNDLES m_axi bundles (w0 .. w3, each on a DDR port of
// its own; the others never read) read PORT / BUNDLES words of at once: bundle b's read r, in the read's bits from
// WORD_BITS * PORT / BUNDLES * b on
template <int PORT, int BUNDLES>
ap_uint<WORD_BITS * PORT> engine_weights_read(const ap_uint<WORD_BITS * PORT / BUNDLES> *w0,
                                              const ap_uint<WORD_BITS * PORT / BUNDLES> *w1,
                                              const ap_uint<WORD_BITS * PORT / BUNDLES> *w2,
                                              const ap_uint<WORD_BITS * PORT / BUNDLES> *w3, int r) {
#pragma HLS INLINE
    static const int BITS = WORD_BITS * PORT / BUNDLES;
    ap_uint<WORD_BITS * PORT> read = w0[r];
    if (BUNDLES > 1) read.range(2 * BITS - 1, BITS) = w1[r];
    if (BUNDLES > 2) read.range(3 * BITS - 1, 2 * BITS) = w2[r];
    if (BUNDLES > 3) read.range(4 * BITS - 1, 3 * BITS) = w3[r];
    return read;
}

// A tile's weights into its lanes' buffers from entry ``slot`` on: words ``word0`` .. word0 + words - 1 of each of
// its filters' windows (``filter_words`` words each; the tile's filters from ``first``, ``filters`` of them, in the
// port's reads from ``first_read`` on, ``reads`` of them: a read holds a word of PORT consecutive filters). For each
// read's filters their words in order, one read a DDR burst's next word (the port's next read a counter, moved on
// past the words not loaded); each lane takes its filter's entry of the read that holds it (one write a lane a
// cycle), an entry of VEC weights a cycle of a word's EPW
template <int WW, int LANES, int URAM_LANES, int VEC, int ENTRIES, int PORT, int BUNDLES, typename entry_t>
void engine_load_weights(const ap_uint<WORD_BITS * PORT / BUNDLES> *w0, const ap_uint<WORD_BITS * PORT / BUNDLES> *w1,
                         const ap_uint<WORD_BITS * PORT / BUNDLES> *w2, const ap_uint<WORD_BITS * PORT / BUNDLES> *w3,
                         entry_t tile[][ENTRIES], entry_t paired[][2 * ENTRIES], int first, int filters, int first_read,
                         int reads, int filter_words, int word0, int words, int slot) {
#pragma HLS INLINE
    static const int PW = lane<ap_int<WW> >::per_word, EPW = PW / VEC, LB = 8 * lane<ap_int<WW> >::bytes;
    static const int TILE_ENTRIES = (LANES / PORT + 1) * ENTRIES;  // (a pragma's value is a name)
    int next = first_read * filter_words + word0;  // the port's next read
    int q = 0, i = 0, k = 0;  // the read's filters (from first_read), its word of those loaded, the entry
    ap_uint<WORD_BITS * PORT> word = 0;
load_weights:
    for (int e = 0; e < reads * words * EPW; e++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=TILE_ENTRIES
        if (k == 0) word = engine_weights_read<PORT, BUNDLES>(w0, w1, w2, w3, next++);
        const int base = (first_read + q) * PORT - first;  // the lane the read's first filter is
        for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
            const int p = lane_t - base;
            if (p >= 0 && p < PORT && lane_t < filters) {
                const entry_t entry = word.range(WORD_BITS * p + VEC * LB * (k + 1) - 1, WORD_BITS * p + VEC * LB * k);
                const int at = slot + i * EPW + k;
                if (lane_t < URAM_LANES) paired[lane_t / 2][lane_t % 2 * ENTRIES + at] = entry;
                else tile[lane_t - URAM_LANES][at] = entry;
            }
        }
        if (++k == EPW) {
            k = 0;
            if (++i == words) {
                i = 0;
                q++;
                next += filter_words - words;
            }
        }
    }
    HETDEPLOY_COUNTED(count_loop((long long)reads * words * EPW, ENGINE_MOVE_DEPTH);
                      engine_counted().weight_words += (long long)reads * PORT * words);
}

// A tile's filters' biases (the tile's filters from ``first``, in the port's reads from ``biases`` + ``first_read``
// on, ``reads`` of them: PORT channels' a read) into ``bias``, a lane's each; the lanes past the tile's take others'
template <int LANES, int PORT, int BUNDLES, typename sum_t>
void engine_load_biases(const ap_uint<WORD_BITS * PORT / BUNDLES> *w0, const ap_uint<WORD_BITS * PORT / BUNDLES> *w1,
                        const ap_uint<WORD_BITS * PORT / BUNDLES> *w2, const ap_uint<WORD_BITS * PORT / BUNDLES> *w3,
                        sum_t bias[LANES], int first, int first_read, int reads, int biases) {
#pragma HLS INLINE
    static const int TILE_READS = LANES / PORT + 1;
load_bias:
    for (int b = 0; b < reads; b++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=TILE_READS
        const ap_uint<WORD_BITS * PORT> read =
            engine_weights_read<PORT, BUNDLES>(w0, w1, w2, w3, biases + first_read + b);
        const int base = (first_read + b) * PORT - first;
        for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
            const int p = lane_t - base;
            if (p >= 0 && p < PORT) bias[lane_t] = sum_t(read.range(WORD_BITS * p + WORD_BITS - 1, WORD_BITS * p));
        }
    }
    HETDEPLOY_COUNTED(count_loop(reads, ENGINE_MOVE_DEPTH); engine_counted().weight_words += (long long)reads * PORT);
}

// The bits of n's ceiling power of two (a sum of n products takes this many more bits than one)
constexpr int engine_bits(int n) { return n <= 1 ? 0 : 1 + engine_bits((n + 1) / 2); }

// The fewest iterations a step of a streamed layer takes: a pair's kept sums are read a step's iterations after they
// were written, never before the write is done (the window loop's depth)
static const int ENGINE_STREAM_MIN_SPAN = ENGINE_MAC_DEPTH;

// A layer's output pixels' place in the input: an engine_pixel and the input element its window begins at
// (``first``, before the map: padding), stepped by counters (``column_move`` elements a pixel, ``row_move`` more
// from a row's last pixel to the next row's first)
struct engine_stream_pixel {
    engine_pixel p;
    int first;

    void start(const engine_layer &g, int out_first) {
        p.start(g, out_first, 0);
        first = (p.row0 * g.in_w + p.column0) * g.in_c;
    }

    void next(const engine_layer &g, int column_move, int row_move) {
        first += p.x + 1 == g.out_w ? row_move : column_move;
        p.next(g);
    }

    // the place in the input of a window step ``step`` walks to from a window's first element (its row and column
    // from the window's first) for this pixel
    engine_walk at(const engine_walk &step) const {
        engine_walk place = step;
        place.at += first;
        place.row += p.row0;
        place.column += p.column0;
        return place;
    }
};

// A pair of output pixels moved on to the next pair
inline void engine_next_pair(const engine_layer &g, int column_move, int row_move, engine_stream_pixel &output,
                             engine_stream_pixel &second) {
#pragma HLS INLINE
    for (int k = 0; k < 2; k++) {
#pragma HLS UNROLL
        output.next(g, column_move, row_move);
        second.next(g, column_move, row_move);
    }
}

// Read ``q`` of a tile's step's words (PORT lanes' entries, from lane q * PORT on) into ``entries``
template <int LANES, int PORT, typename entry_t>
void engine_read_entries(const ap_uint<WORD_BITS * PORT> &read, int q, entry_t entries[LANES]) {
#pragma HLS INLINE
    for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
        const int p = lane_t - q * PORT;
        if (p >= 0 && p < PORT) entries[lane_t] = read.range(WORD_BITS * p + WORD_BITS - 1, WORD_BITS * p);
    }
}

// A streamed layer (the call's ``streamed``: the memory plan's choice, units.engine_layer_streams; a layer of one group
// whose pairs of output pixels are at most STREAM, its input on chip, its channels whole entries of VEC values and its
// tiles' outputs whole words, VEC a word's weights: an entry a DDR word): its weights never held in the buffers but
// streamed from DDR while the lanes compute. For each tile of LANES filters (the port's reads of a window step's words
// one run, the tile's steps one after another: fpga/engine.py writes them so), its biases, its first step's words
// (``first_entries``), then one loop of the window's steps, a step ``span`` iterations (the most of the tile's reads a
// step, the pairs and ENGINE_STREAM_MIN_SPAN): iteration j reads the port's next word into the next step's entries (j
// below the reads) and computes pair j's step (j below the pairs: a word of each pixel read, its products added to the
// pair's sums, kept in ``kept``, a lane's memory a pixel, read back a step later); then the pairs' words, ``written``
// an iteration (their sums and biases).
template <int IW, int OW, int WW, int LANES, int VEC, int MAX_WINDOW, int PORT, int MEMORIES, int DDR, int PIXELS,
          int BUNDLES, int STREAM, typename sum_t>
void engine_stream(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &input,
                   const engine_place &target, const engine_place &residual,
                   const ap_uint<WORD_BITS * PORT / BUNDLES> *w0, const ap_uint<WORD_BITS * PORT / BUNDLES> *w1,
                   const ap_uint<WORD_BITS * PORT / BUNDLES> *w2, const ap_uint<WORD_BITS * PORT / BUNDLES> *w3,
                   const engine_layer &g, const engine_out<sum_t> &out,
                   int filter_words, int bias_read, int written) {
#pragma HLS INLINE
    typedef ap_int<WW> weight_t;
    static const int IPW = lane<ap_uint<IW> >::per_word, L = lane<ap_uint<OW> >::per_word;
    static const int LB = 8 * lane<weight_t>::bytes;
    typedef ap_uint<VEC * LB> entry_t;
    static_assert(STREAM == 0 || (PIXELS == 2 && VEC * LB == WORD_BITS),
                  "a streamed layer: pairs, an entry a DDR word");
    static const int DEPTH = STREAM > 0 ? STREAM : 1;  // (an engine without the loop: never called)
    // a pair's sum of a lane without its bias: a window of at most MAX_WINDOW products, each within IW + WW bits
    typedef ap_int<IW + WW + 1 + engine_bits(MAX_WINDOW)> kept_t;
    static kept_t kept[PIXELS][LANES][DEPTH];
#pragma HLS ARRAY_PARTITION variable=kept complete dim=1
#pragma HLS ARRAY_PARTITION variable=kept complete dim=2
#pragma HLS BIND_STORAGE variable=kept type=ram_s2p impl=lutram
    entry_t entries[LANES], next_entries[LANES];  // a step's weights of each lane, and the next step's
#pragma HLS ARRAY_PARTITION variable=entries complete
#pragma HLS ARRAY_PARTITION variable=next_entries complete
    sum_t bias[LANES];
#pragma HLS ARRAY_PARTITION variable=bias complete
    sum_t sums[PIXELS][LANES];
#pragma HLS ARRAY_PARTITION variable=sums complete dim=0
    static const int TILE_READS = LANES / PORT;
    static const int MOST_SPAN = DEPTH > TILE_READS ? DEPTH : TILE_READS;
    // (a pragma's value is a name, not an expression)
    static const int MAX_STEP_ITERATIONS = (MAX_WINDOW / VEC + 1) * MOST_SPAN;
    static const int OUTPUT_ITERATIONS = DEPTH * (2 * LANES / L + 1);
    const int steps = g.k_h * g.k_w * g.in_c / VEC;
    const int pixels = g.out_h * g.out_w, pairs = (pixels + 1) / 2;
    // a step's place from a pixel's window's first element, walked as a pixel's (engine_walk: its row and column
    // from the window's first, its element from the window's first element), on an input on chip (a slot never
    // passed)
    const int column_step = (g.d_w - 1) * g.in_c, row_step = (g.d_h * g.in_w - g.k_w * g.d_w) * g.in_c;
    const engine_ring no_ring = {0, g.k_h + 1, 0};
    const int column_move = g.s_w * g.in_c, row_move = (g.s_h * g.in_w - (g.out_w - 1) * g.s_w) * g.in_c;
    engine_tile t;
    t.begin(g, false, LANES, g.out_c, g.in_c);
stream_tiles:
    for (; t.first < g.out_c; t.next(g, false, LANES, g.out_c, g.in_c)) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_TILES
        HETDEPLOY_COUNTED(engine_counted().cycles++);
        const int first_read = t.first_read(PORT), reads = t.reads(PORT), words = t.filters / L;
        const int most = reads > pairs ? reads : pairs;
        const int span = most > ENGINE_STREAM_MIN_SPAN ? most : ENGINE_STREAM_MIN_SPAN;
        engine_load_biases<LANES, PORT, BUNDLES>(w0, w1, w2, w3, bias, t.first, first_read, reads, bias_read);
        int next = first_read * filter_words;  // the port's next read
    first_entries:
        for (int q = 0; q < reads; q++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=TILE_READS
            engine_read_entries<LANES, PORT>(engine_weights_read<PORT, BUNDLES>(w0, w1, w2, w3, next++), q, entries);
        }
        HETDEPLOY_COUNTED(count_loop(reads, ENGINE_MOVE_DEPTH);
                          engine_counted().weight_words += (long long)reads * PORT);
        engine_walk walk;
        walk.start(0, 0, 0, no_ring);
        engine_stream_pixel output, second;
        output.start(g, t.first);
        second = output;
        second.next(g, column_move, row_move);
        const engine_stream_pixel first_pair = output, first_second = second;
        int j = 0, s = 0;  // the step's iteration, the step
        HETDEPLOY_COUNTED(long long iterations = 0);
    stream_steps:
        for (int i = 0; i < steps * span; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=MAX_STEP_ITERATIONS
#pragma HLS DEPENDENCE variable=kept inter false
            HETDEPLOY_COUNTED(iterations++);
            if (j < reads && s + 1 < steps)  // the next step's words
                engine_read_entries<LANES, PORT>(engine_weights_read<PORT, BUNDLES>(w0, w1, w2, w3, next++), j,
                                                 next_entries);
            if (j < pairs) {  // pair j's step: a word of each pixel, by every lane's entry
                const bool has_second = 2 * j + 1 < pixels;
                engine_walk at[PIXELS];
                at[0] = output.at(walk);
                at[PIXELS - 1] = second.at(walk);
                ap_int<IW + 1> value[PIXELS][VEC];
#pragma HLS ARRAY_PARTITION variable=value complete dim=0
                for (int p = 0; p < PIXELS; p++) {
#pragma HLS UNROLL
                    const bool in_map = (p == 0 || has_second) && at[p].inside(g);
                    const word_t in_word = in_map ? engine_read<MEMORIES, DDR>(m0, m1, m2, m3, input, at[p].at / IPW)
                                                  : word_t(0);
                    engine_step_values<IW, VEC>(in_word, g, at[p], VEC, value[p]);
                }
                for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                    for (int p = 0; p < PIXELS; p++) {
#pragma HLS UNROLL
                        sums[p][lane_t] = s == 0 ? sum_t(0) : sum_t(kept[p][lane_t][j]);
                    }
                }
                for (int lane_t = 0; lane_t < LANES; lane_t += ENGINE_PACKED(IW, WW, LANES) ? 2 : 1) {
#pragma HLS UNROLL
                    const int odd = lane_t + 1 < LANES ? lane_t + 1 : lane_t;
                    engine_lane_products<IW, WW, LANES, VEC, PIXELS>(value, 0, lane_t, odd, entries[lane_t],
                                                                     entries[odd], sums);
                }
                for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                    for (int p = 0; p < PIXELS; p++) {
#pragma HLS UNROLL
                        kept[p][lane_t][j] = kept_t(sums[p][lane_t]);
                    }
                }
                engine_next_pair(g, column_move, row_move, output, second);
            }
            if (++j == span) {  // the next step: its entries, its place, the first pair
                j = 0;
                s++;
                for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                    entries[lane_t] = next_entries[lane_t];
                }
                walk.next(g, g.in_c, VEC, VEC, 0, column_step, row_step);
                output = first_pair;
                second = first_second;
            }
        }
        HETDEPLOY_COUNTED(count_loop(iterations, ENGINE_MAC_DEPTH);
                          engine_counted().weight_words += (long long)reads * PORT * (steps - 1));
        const int pair_words = (2 * words + written - 1) / written;  // a pair's iterations
        int k = 0, pair = 0;
    stream_outputs:
        for (int i = 0; i < pairs * pair_words; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=OUTPUT_ITERATIONS
            for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                for (int p = 0; p < PIXELS; p++) {
#pragma HLS UNROLL
                    sums[p][lane_t] = sum_t(kept[p][lane_t][pair]) + bias[lane_t];
                }
            }
            engine_pair_words<OW, MEMORIES, DDR, PIXELS, LANES>(m0, m1, m2, m3, target, residual, output.p, second.p,
                                                               2 * pair + 1 < pixels, sums, k, words, written,
                                                               g.residual != 0, g, out);
            if (++k == pair_words) {
                k = 0;
                pair++;
                engine_next_pair(g, column_move, row_move, output, second);
            }
        }
        HETDEPLOY_COUNTED(count_loop((long long)pairs * pair_words, ENGINE_MOVE_DEPTH));
    }
}

template <int IW, int OW, int WW, int LANES, int URAM_LANES, int VEC, int MAX_WINDOW, bool DEPTHWISE, int PORT,
          int MEMORIES, int DDR, int PIXELS = 1, int BUNDLES = 1, bool SHARED = false,
          int STREAM = 0>
void engine(word_t *m0, word_t *m1, word_t *m2, word_t *m3, const engine_place &source, const engine_place &target,
            const engine_place &staging, const engine_place &residual,
            const ap_uint<WORD_BITS * PORT / BUNDLES> *region, const ap_uint<WORD_BITS * PORT / BUNDLES> *region1,
            const ap_uint<WORD_BITS * PORT / BUNDLES> *w0,
            const ap_uint<WORD_BITS * PORT / BUNDLES> *w1, const ap_uint<WORD_BITS * PORT / BUNDLES> *w2,
            const ap_uint<WORD_BITS * PORT / BUNDLES> *w3, const engine_layer &g) {
    typedef ap_uint<IW> raw_in_t;
    typedef ap_uint<OW> raw_out_t;
    typedef ap_int<WW> weight_t;
    typedef ap_int<64> sum_t;
    static_assert(BUNDLES >= 1 && BUNDLES <= 4 && PORT % BUNDLES == 0, "the port's words split among its bundles");
    static const int PW = lane<weight_t>::per_word;  // weights a word
    static const int IPW = lane<raw_in_t>::per_word;  // input values a word
    static_assert(PW % VEC == 0 && IPW % VEC == 0, "VEC values of a group lie in one word of weights and of inputs");
    static const int L = lane<raw_out_t>::per_word;  // outputs a word
    // a lane's window as DDR holds it (whole words, its last one's lanes past the window zeros) in entries of the
    // VEC weights a cycle takes: a DDR word is EPW entries, written one a cycle
    static const int EPW = PW / VEC, LB = 8 * lane<weight_t>::bytes;  // entries a word; a weight's lane's bits
    typedef ap_uint<VEC * LB> entry_t;
    static const int WINDOW_ENTRIES = (MAX_WINDOW + PW - 1) / PW * EPW;
    // the largest trip count of the loop over a pixel's output words (a pragma's value is a name, not an expression)
    static const int OUTPUT_WORDS = LANES / L + 1;
    static const int CHUNK_VALUES = WINDOW_ENTRIES * VEC;  // a dense layer's chunk's (its buffers' depth)
    // the weight buffers: lane t's entry i at paired[t / 2][t % 2 * WINDOW_ENTRIES + i] for a URAM lane, else at
    // tile[t - URAM_LANES][i]
    static_assert(URAM_LANES % 2 == 0 && URAM_LANES <= LANES, "URAM lanes come in pairs, a block's two ports");
    static const int BRAM_ROWS = LANES > URAM_LANES ? LANES - URAM_LANES : 1;
    static const int URAM_ROWS = URAM_LANES ? URAM_LANES / 2 : 1;
    static entry_t tile[BRAM_ROWS][WINDOW_ENTRIES];
#pragma HLS ARRAY_PARTITION variable=tile dim=1 complete
    static entry_t paired[URAM_ROWS][2 * WINDOW_ENTRIES];
#pragma HLS ARRAY_PARTITION variable=paired dim=1 complete
#pragma HLS BIND_STORAGE variable=paired type=ram_t2p impl=uram
    sum_t bias[LANES];
#pragma HLS ARRAY_PARTITION variable=bias complete
    static_assert(PIXELS == 1 || PIXELS == 2, "one output pixel at a time, or a pair");
    sum_t sums[PIXELS][LANES];  // each pixel's (engine_pairs: two)
#pragma HLS ARRAY_PARTITION variable=sums complete dim=0
    // where a pair's windows are read once for the tiles held at once (engine_shares_windows): the tile before's sums,
    // each held tile's biases (a lane's a small memory of its own) and the pair's window, a step's input word of each
    // pixel an entry (a pixel's a memory of its own, in LUTs: a write or a read of each a cycle, never both)
    sum_t done_pair[PIXELS][LANES];
#pragma HLS ARRAY_PARTITION variable=done_pair complete dim=0
    static sum_t held_bias[ENGINE_MAX_TILES][LANES];
#pragma HLS ARRAY_PARTITION variable=held_bias complete dim=2
    static const int SHARED_STEPS = WINDOW_ENTRIES < ENGINE_SHARED_STEPS ? WINDOW_ENTRIES : ENGINE_SHARED_STEPS;
    static word_t pair_window[PIXELS][SHARED_STEPS];
#pragma HLS ARRAY_PARTITION variable=pair_window complete dim=1
#pragma HLS BIND_STORAGE variable=pair_window type=ram_s2p impl=lutram
    const int channels = g.in_c / g.groups, group_filters = g.out_c / g.groups;  // a group's
    const int window = g.k_h * g.k_w * channels;
    // VEC values an iteration where a pixel's channels of a group come in whole groups of VEC (each group then lies
    // in one input word and one word of weights), else one
    const int step = channels % VEC == 0 ? VEC : 1;
    const int pixels = g.out_h * g.out_w;
    // a window walked along its rows (engine_rows): a row's values padded to whole words of weights, its
    // iterations (its first word's, then its values'), and its weights' values in the buffer (each row padded)
    const bool rows = engine_rows(g, PW);
    const int row_values = (g.k_w * g.in_c + PW - 1) / PW * PW, row_steps = 1 + row_values / VEC;
    const int stored = rows ? g.k_h * row_values : window;
    const int filter_words = (stored + PW - 1) / PW;
    const int bias_read = (g.out_c + PORT - 1) / PORT * filter_words;  // the biases' first read
    const engine_out<sum_t> out = engine_out_of<OW, sum_t>(g);
    const int steps = rows ? g.k_h * row_steps : window / step;  // a pixel's window's iterations
    // the input element a window's next value is at moves by these after a pixel's channels of the group and after
    // a row (a row walk's: after a row's padded values)
    // an input in DDR (staging's memory one of the engine's) is staged a row of output pixels at a time
    // (engine_stage): its rows, slot_words words each, in the staging buffer, which the window loops read
    const bool staged = staging.memory >= 0;
    const int slot_words = (g.in_w * g.in_c + IPW - 1) / IPW, slot_elements = slot_words * IPW;
    const engine_place input = staged ? staging : source;
    const int row_count = staged ? g.out_h : 1, row_pixels = staged ? g.out_w : pixels;  // a pass of pixels each
    const int row_elements = staged ? slot_elements : g.d_h * g.in_w * g.in_c;  // from a window row to the next
    const int input_elements = staged ? g.k_h * slot_elements : g.in_h * g.in_w * g.in_c;
    const int column_step = g.d_w * g.in_c - channels, row_step = row_elements - g.k_w * g.d_w * g.in_c;
    const int row_walk_step = row_elements - row_values;
    // a staged input's rows in a ring of k_h slots (engine_ring), each row staged once where its window rows are one
    // apart (d_h 1): a pass stages the rows the one before did not (``kept_rows`` of its window's it did, where
    // s_h < k_h), its first window row in the slot after the one before's by s_h (``slots_a_pass``); else each pass
    // stages its window rows into slots 0 .. k_h - 1. An input on chip: one slot, never passed. (A division each a
    // call, outside every loop.)
    const bool ring_rows = staged && g.d_h == 1;
    const int kept_rows = ring_rows && g.s_h < g.k_h ? g.k_h - g.s_h : 0;
    const int slots_a_pass = ring_rows ? g.s_h % g.k_h : 0;
    const int first_slot = ring_rows ? (g.k_h - g.pad_top % g.k_h) % g.k_h : 0;
    const int ring_slots = staged ? g.k_h : g.k_h + 1, ring_wrap = staged ? g.k_h * slot_elements : 0;
    const engine_strides strides = {channels, step, column_step, row_step, row_steps, row_walk_step};
    // a depthwise convolution (a group a channel) whose channels and lanes come in whole words of inputs and of
    // outputs, on an engine built with that loop (DEPTHWISE: one of its layers is one): a tile is LANES channels,
    // each lane its own (engine_depthwise_accumulate), a word of the pixel's inputs an iteration; else a tile is a
    // group's filters, LANES at a time
    const bool depthwise = DEPTHWISE && g.groups == g.in_c && g.out_c == g.in_c && g.in_c % IPW == 0 &&
                           g.out_c % L == 0 && LANES % IPW == 0 && LANES % L == 0;
    const bool aligned = depthwise || (LANES % L == 0 && group_filters % L == 0);  // every tile's outputs whole words
    // the output words an iteration that reads nothing writes: two, one through each of the target memory's two
    // ports, or one where the output lies in DDR (one m_axi port: the second write of a cycle never goes there) or
    // where a residual is added (its word read beside each: a port of its memory, the other the output's where the
    // two share one)
    const bool added = g.residual != 0;
    const int written = added || (DDR >= 0 && target.memory == DDR) ? 1 : 2;
    // whether the pairs of output pixels read each window once for all the tiles held at once
    // (engine_shares_windows); the tiles whose weights the lanes' buffers hold at once, each in a slot of
    // filter_entries entries, where it does or the input is staged (``engine_resident``)
    const bool shares = engine_shares_windows(SHARED && PIXELS == 2, aligned, depthwise, rows, g.groups, step == VEC,
                                              steps, LANES / L, written, added);
    const int filter_entries = filter_words * EPW;
    const int resident = engine_resident(staged, shares, WINDOW_ENTRIES, filter_entries);
    // a dense layer (one output pixel of a 1 x 1 window) whose filters are deeper than the lanes' buffers (the
    // planner sizes them for at most units.ENGINE_DENSE_CHUNK of a dense layer's values: each of its weights is read
    // once a sample, so a deeper buffer would take lanes and gain nothing): each tile's window in chunks of the
    // buffers' depth, a chunk's weights loaded (the port's reads of each of the tile's filters' words in the chunk,
    // one run a read's filters), then its values ``step`` an iteration, the sums kept from chunk to chunk; then the
    // tile's output words, one an iteration (engine_shared_words)
    const int chunk_words = WINDOW_ENTRIES / EPW;
    if (STREAM > 0 && g.streamed) {
        engine_stream<IW, OW, WW, LANES, VEC, MAX_WINDOW, PORT, MEMORIES, DDR, PIXELS, BUNDLES, STREAM>(
            m0, m1, m2, m3, source, target, residual, w0, w1, w2, w3, g, out, filter_words, bias_read, written);
        return;
    }
    if (filter_words > chunk_words) {
        if (DDR >= 0 && staged) {  // its one row of values staged once
            HETDEPLOY_COUNTED(engine_counted().cycles++);
            engine_stage<IW, MEMORIES, DDR, PORT / BUNDLES, BUNDLES>(m0, m1, m2, m3, region, region1, g, source,
                                                                     staging, -g.pad_top, slot_words, 0, 0);
        }
        engine_tile c;
        c.begin(g, false, LANES, group_filters, channels);
    dense_tiles:
        for (; c.first < g.out_c; c.next(g, false, LANES, group_filters, channels)) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_TILES
            HETDEPLOY_COUNTED(engine_counted().cycles++);
            const int first_read = c.first_read(PORT), reads = c.reads(PORT);
            // each lane's sum starts at its bias
            engine_load_biases<LANES, PORT, BUNDLES>(w0, w1, w2, w3, sums[0], c.first, first_read, reads, bias_read);
        dense_chunks:
            for (int word0 = 0; word0 < filter_words; word0 += chunk_words) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_CHUNKS
                HETDEPLOY_COUNTED(engine_counted().cycles++);
                const int words = filter_words - word0 < chunk_words ? filter_words - word0 : chunk_words;
                engine_load_weights<WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES, PORT, BUNDLES>(
                    w0, w1, w2, w3, tile, paired, c.first, c.filters, first_read, reads, filter_words, word0, words, 0);
                // the chunk's values: its words' weights', but past the window's last
                const int values = (word0 + words) * PW < window ? words * PW : window - word0 * PW;
            chunk_values:
                for (int n = 0; n < values; n += step) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=CHUNK_VALUES
                    const int element = word0 * PW + n;
                    const word_t in_word = engine_read<MEMORIES, DDR>(m0, m1, m2, m3, input, element / IPW);
                    ap_int<IW + 1> value[1][VEC];
#pragma HLS ARRAY_PARTITION variable=value complete dim=0
                    for (int v = 0; v < VEC; v++) {
#pragma HLS UNROLL
                        value[0][v] = v < step ? engine_value<IW>(in_word, (element + v) % IPW, g) : ap_int<IW + 1>(0);
                    }
                    engine_products<IW, WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES, 1>(value, n / VEC, n % VEC, tile,
                                                                                      paired, sums);
                }
                HETDEPLOY_COUNTED(count_loop(values / step, ENGINE_MAC_DEPTH));
            }
            const long long words_written =
                added ? engine_shared_words<OW, MEMORIES, true, LANES>(m0, m1, m2, m3, target, residual, c.first,
                                                                     c.filters, sums[0], g, out)
                      : engine_shared_words<OW, MEMORIES, false, LANES>(m0, m1, m2, m3, target, residual, c.first,
                                                                      c.filters, sums[0], g, out);
            HETDEPLOY_COUNTED(count_loop(words_written, ENGINE_MOVE_DEPTH, added ? 2 : 1));
        }
        return;
    }
    engine_tile t;
    t.begin(g, depthwise, LANES, group_filters, channels);
tile_groups:  // of ``resident`` tiles: their weights, then each pass of pixels for each of them
    for (; t.first < g.out_c;) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_TILES
        HETDEPLOY_COUNTED(engine_counted().cycles++);
        const engine_tile group_first = t;
        int held = 0;  // the group's tiles
    group_weights:
        for (; held < resident && t.first < g.out_c; held++) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_TILES
            HETDEPLOY_COUNTED(engine_counted().cycles++);
            // the tile's filters' words into its slot
            engine_load_weights<WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES, PORT, BUNDLES>(
                w0, w1, w2, w3, tile, paired, t.first, t.filters, t.first_read(PORT), t.reads(PORT), filter_words, 0,
                filter_words, held * filter_entries);
            t.next(g, depthwise, LANES, group_filters, channels);
        }
        const engine_tile group_end = t;
        engine_ring ring = {first_slot, ring_slots, ring_wrap};  // the pass's first window row's slot
    passes:  // of the pixels: one, or a row of them a pass where the input is staged (its rows staged once)
        for (int r = 0; r < row_count; r++) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_ROWS
            HETDEPLOY_COUNTED(engine_counted().cycles++);
            if (DDR >= 0 && staged)  // (an engine none of whose buffers lies in DDR has no staging loops)
                engine_stage<IW, MEMORIES, DDR, PORT / BUNDLES, BUNDLES>(m0, m1, m2, m3, region, region1, g, source,
                                                                         staging, r * g.s_h - g.pad_top, slot_words,
                                                                         r > 0 ? kept_rows : 0, ring.slot);
            t = group_first;
            // a group of tiles whose pairs share their windows (as many as the biases' slots): the tiles' biases
            // into their slots, then one loop of the pass's pairs, a phase a tile and a last one of the last tile's
            // words (engine_reused_span); else each tile's own loops (``own_loops`` of them)
            // (a pixel's words of a tile, and the iterations a pair's take, ``written`` an iteration)
            const int full_words = LANES / L, full = (2 * full_words + written - 1) / written;
            const bool shared = shares && engine_group_shares(held, steps, full);
            const int own_loops = shared ? 0 : held;
            if (shared) {
            held_biases:
                for (int k = 0; k < held; k++) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_TILES
                    HETDEPLOY_COUNTED(engine_counted().cycles++);
                    engine_load_biases<LANES, PORT, BUNDLES>(w0, w1, w2, w3, held_bias[k], t.first, t.first_read(PORT),
                                                             t.reads(PORT), bias_read);
                    t.next(g, depthwise, LANES, group_filters, channels);
                }
                // the words of a pixel's outputs of the group's last tile, and the iterations a pair's take
                const int last_words = (t.first - group_first.first) / L - (held - 1) * full_words;
                const int last = (2 * last_words + written - 1) / written;
                const int pair_span = engine_reused_span(0, held, steps, full, last) +
                                      (held - 1) * engine_reused_span(1, held, steps, full, last) + last;
                // the pair's pixels (at the group's first tile's channels), their walks, and the pair's pixels at the
                // tile before's channels (``done_first``, ``done_second``: the words of done_pair are theirs)
                engine_pixel output, second, done_first, done_second;
                engine_walk walk, second_walk;
                engine_row_walk row_walk, second_row_walk;  // (not walked: a shared window is a channel group a step)
                output.start(g, group_first.first, r);
                engine_start_walks(g, output, 0, staged, ring, slot_elements, walk, row_walk);
                engine_pixel_after(g, output, 0, staged, ring, slot_elements, second, second_walk, second_row_walk);
                done_first = output;
                done_second = second;
                // the iteration of the phase, the phase (its tile's, or ``held``: the last words'), the pair's first
                // pixel in the pass, the phase's tile's slot of the buffers and the phase's iterations
                int j = 0, phase = 0, pixel = 0, slot = 0, span = engine_reused_span(0, held, steps, full, last);
                HETDEPLOY_COUNTED(long long iterations = 0);
            shared_pairs:
                for (int i = 0; i < (row_pixels + 1) / 2 * pair_span; i++) {
                    ENGINE_WINDOW_LOOP
#pragma HLS DEPENDENCE variable=pair_window inter false
                    HETDEPLOY_COUNTED(iterations++);
                    const bool has_second = pixel + 1 < row_pixels;
                    if (j == 0) {  // the tile before's sums kept to be written; the phase's tile's start at its biases
                        for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                            done_pair[0][lane_t] = sums[0][lane_t];
                            done_pair[PIXELS - 1][lane_t] = sums[PIXELS - 1][lane_t];
                            if (phase < held) {
                                sums[0][lane_t] = held_bias[phase][lane_t];
                                sums[PIXELS - 1][lane_t] = held_bias[phase][lane_t];
                            }
                        }
                    }
                    if (phase < held && j < steps) {
                        // a step of both windows: the first tile's reads each pixel's input word and keeps it (a word
                        // kept is read a first phase's iterations after it is written, at least ENGINE_MAC_DEPTH: the
                        // kept words' dependence, which the pragma drops, is always met), the others' read the kept
                        // word
                        word_t first_word, second_word;
                        if (phase == 0) {
                            first_word = engine_window_word<IW, VEC, MEMORIES, DDR>(m0, m1, m2, m3, input, g, false,
                                                                                    walk, row_walk, input_elements);
                            second_word = has_second ? engine_window_word<IW, VEC, MEMORIES, DDR>(
                                m0, m1, m2, m3, input, g, false, second_walk, second_row_walk, input_elements)
                                                     : word_t(0);
                            pair_window[0][j] = first_word;
                            pair_window[PIXELS - 1][j] = second_word;
                        } else {
                            first_word = pair_window[0][j];
                            second_word = pair_window[PIXELS - 1][j];
                        }
                        engine_pair_step<IW, WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES, PIXELS>(
                            first_word, second_word, g, strides, slot, output.column0, second.column0, walk,
                            second_walk, tile, paired, sums);
                    }
                    if (phase > 0) {  // the tile before's words: ``written`` an iteration (added: its residual's read)
                        const int words = phase == held ? last_words : full_words;
                        if (added) {
                            engine_pair_word<OW, MEMORIES, -1, true, PIXELS, LANES>(
                                m0, m1, m2, m3, target, residual, done_first, done_second, has_second, done_pair, j,
                                words, g, out);
                        } else {  // (the second never to DDR)
                            engine_pair_word<OW, MEMORIES, -1, false, PIXELS, LANES>(
                                m0, m1, m2, m3, target, residual, done_first, done_second, has_second, done_pair,
                                j * written, words, g, out);
                            if (written == 2)
                                engine_pair_word<OW, MEMORIES, DDR, false, PIXELS, LANES>(
                                    m0, m1, m2, m3, target, residual, done_first, done_second, has_second, done_pair,
                                    2 * j + 1, words, g, out);
                        }
                    }
                    if (++j == span) {  // the next phase: the pair's next tile, its last words, or the next pair
                        j = 0;
                        done_first = output;
                        done_second = second;
                        done_first.out_first += phase * LANES;
                        done_second.out_first += phase * LANES;
                        if (phase == held) {
                            phase = slot = 0;
                            pixel += 2;
                            output.next(g);
                            if (has_second) output.next(g);
                            engine_pixel_after(g, output, 0, staged, ring, slot_elements, second, second_walk,
                                               second_row_walk);
                        } else {
                            phase++;
                            slot += filter_entries;
                            engine_start_walks(g, second, 0, staged, ring, slot_elements, second_walk,
                                               second_row_walk);
                        }
                        engine_start_walks(g, output, 0, staged, ring, slot_elements, walk, row_walk);
                        span = engine_reused_span(phase, held, steps, full, last);
                    }
                }
                HETDEPLOY_COUNTED(count_loop(iterations, ENGINE_MAC_DEPTH));
            }
        resident_tiles:  // the pass's pixels of each tile of the group
            for (int held_tile = 0; held_tile < own_loops; held_tile++) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_TILES
                HETDEPLOY_COUNTED(engine_counted().cycles++);
                const int slot = held_tile * filter_entries, first = t.first, filters = t.filters;
                const int channel0 = t.channel0;
                const int first_read = t.first_read(PORT), reads = t.reads(PORT);
                engine_load_biases<LANES, PORT, BUNDLES>(w0, w1, w2, w3, bias, first, first_read, reads, bias_read);
                engine_pixel output;
                output.start(g, first, r);
                engine_walk walk;
                engine_row_walk row_walk;
                engine_start_walks(g, output, channel0, staged, ring, slot_elements, walk, row_walk);
                const int words = filters / L, channel_words = filters / IPW;
                // a pixel's window's iterations (a depthwise tile's: its window places' input words of its channels,
                // place after place) and, for a depthwise walk, the element's move after a place's
                const int pixel_steps = depthwise ? channel_words * g.k_h * g.k_w : steps;
                const int column_step_dw = g.d_w * g.in_c - filters;
                // a depthwise step's input word of its place, and that place's weights' entry and lane in it
                int word = 0, entry = 0, at_lane = 0;
                if (aligned && PIXELS == 2 && engine_pairs(pixel_steps, words, written, added)) {
                    // two output pixels at a time: a pixel (``output``) and the one after it in the pass
                    // (``second``; none past the pass's last), each weight entry read once for both; a pair's loop
                    // of ``pair_span`` iterations: its window's steps, one input word of each pixel read an
                    // iteration, then its 2 x words output words written, the first pixel's then the second's,
                    // ``written`` an iteration (an iteration reads a memory twice or writes it twice: its two ports)
                    const int pair_span = pixel_steps + (2 * words + written - 1) / written;
                    const int pairs = (row_pixels + 1) / 2;
                    engine_pixel second;
                    engine_walk second_walk;
                    engine_row_walk second_row_walk;
                    engine_pixel_after(g, output, channel0, staged, ring, slot_elements, second, second_walk,
                                       second_row_walk);
                    int j = 0, pixel = 0;  // the pair's iteration; its first pixel's in the pass
                    HETDEPLOY_COUNTED(long long iterations = 0);
                pair_iterations:
                    for (int i = 0; i < pairs * pair_span; i++) {
                        ENGINE_WINDOW_LOOP
                        HETDEPLOY_COUNTED(iterations++);
                        const bool has_second = pixel + 1 < row_pixels;
                        if (j == 0) {
                            for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                                sums[0][lane_t] = bias[lane_t];
                                sums[PIXELS - 1][lane_t] = bias[lane_t];
                            }
                        }
                        if (j < pixel_steps) {  // a step of both windows: a read of each pixel's input word
                            const word_t first_word = engine_window_word<IW, VEC, MEMORIES, DDR>(
                                m0, m1, m2, m3, input, g, rows, walk, row_walk, input_elements);
                            const word_t second_word = has_second ? engine_window_word<IW, VEC, MEMORIES, DDR>(
                                m0, m1, m2, m3, input, g, rows, second_walk, second_row_walk, input_elements)
                                                                  : word_t(0);
                            if (depthwise) {  // each pixel's word of the place, by the place's weights
                                word_t in_words[PIXELS];  // (an engine of one pixel never runs pairs)
                                in_words[PIXELS - 1] = second_word;
                                in_words[0] = first_word;
                                engine_depthwise_accumulate<IW, WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES, PIXELS>(
                                    in_words, g, word, slot + entry, at_lane, tile, paired, sums);
                                walk.next(g, filters, IPW, IPW, output.column0, column_step_dw, row_step);
                                second_walk.next(g, filters, IPW, IPW, second.column0, column_step_dw, row_step);
                                engine_depthwise_next<VEC>(word, entry, at_lane, channel_words);
                            } else if (rows) {  // walked along their rows: values past a row's first iteration
                                ap_int<IW + 1> value[PIXELS][VEC];
#pragma HLS ARRAY_PARTITION variable=value complete dim=0
                                engine_row_step_values<IW, VEC>(first_word, g, row_walk, value[0]);
                                engine_row_step_values<IW, VEC>(second_word, g, second_row_walk, value[PIXELS - 1]);
                                if (row_walk.step > 0)
                                    engine_products<IW, WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES, PIXELS>(
                                        value, slot + row_walk.entry, 0, tile, paired, sums);
                                row_walk.held = first_word;
                                second_row_walk.held = second_word;
                                row_walk.next<VEC>(g, row_steps, output.column0, row_walk_step);
                                second_row_walk.next<VEC>(g, row_steps, second.column0, row_walk_step);
                            } else {
                                engine_pair_step<IW, WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES, PIXELS>(
                                    first_word, second_word, g, strides, slot, output.column0, second.column0, walk,
                                    second_walk, tile, paired, sums);
                            }
                        } else {  // ``written`` words of the pair's outputs
                            engine_pair_words<OW, MEMORIES, DDR, PIXELS, LANES>(m0, m1, m2, m3, target, residual,
                                                                               output, second, has_second, sums,
                                                                               j - pixel_steps, words, written, added,
                                                                               g, out);
                        }
                        if (++j == pair_span) {
                            j = word = entry = at_lane = 0;
                            pixel += 2;
                            output.next(g);
                            if (has_second) output.next(g);
                            engine_start_walks(g, output, channel0, staged, ring, slot_elements, walk, row_walk);
                            engine_pixel_after(g, output, channel0, staged, ring, slot_elements, second, second_walk,
                                               second_row_walk);
                        }
                    }
                    HETDEPLOY_COUNTED(count_loop(iterations, ENGINE_MAC_DEPTH));
                } else if (aligned) {
                    // one loop of ``span`` iterations a pixel, its window's steps (a depthwise tile's: its window
                    // places' input words of its channels, place after place), during which the previous pixel's
                    // first ``overlap`` words are written (from ``done``, its sums), a word an iteration, then its
                    // other words ``written`` an iteration; the pass's last pixel's after the loop. Where a residual
                    // is added, none during the steps (an iteration there reads the input: its residual word's read
                    // could meet both in one memory)
                    const int overlap = added ? 0 : pixel_steps < words ? pixel_steps : words;
                    const int span = pixel_steps + (words - overlap + written - 1) / written;
                    sum_t done[LANES];
#pragma HLS ARRAY_PARTITION variable=done complete
                    // the pixel's iteration; the first word of the previous pixel's outputs
                    int j = 0, done_word = 0;
                    bool previous = false;  // a pixel before this one in the pass, its sums in done
                    HETDEPLOY_COUNTED(long long iterations = 0);
                overlapped:
                    for (int i = 0; i < row_pixels * span; i++) {
                        ENGINE_WINDOW_LOOP
                        HETDEPLOY_COUNTED(iterations++);
                        if (j == 0) {
                            for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                                done[lane_t] = sums[0][lane_t];
                                sums[0][lane_t] = bias[lane_t];
                            }
                        }
                        if (j < pixel_steps) {  // a window step (one read of the input's memory), a word written
                            const word_t in_word = engine_window_word<IW, VEC, MEMORIES, DDR>(
                                m0, m1, m2, m3, input, g, rows, walk, row_walk, input_elements);
                            if (depthwise) {
                                const word_t in_words[1] = {in_word};
                                engine_depthwise_accumulate<IW, WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES, 1>(
                                    in_words, g, word, slot + entry, at_lane, tile, paired, sums);
                                walk.next(g, filters, IPW, IPW, output.column0, column_step_dw, row_step);
                                engine_depthwise_next<VEC>(word, entry, at_lane, channel_words);
                            } else {
                                engine_window_step<IW, WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES>(
                                    in_word, g, rows, strides, output.column0, slot, walk, row_walk, tile, paired,
                                    sums);
                            }
                            if (j < overlap && previous)  // the previous pixel's word j: each word once, none read
                                engine_write<MEMORIES>(m0, m1, m2, m3, target, done_word + j,
                                                       engine_word<OW>(done, j, word_t(0), g, out));
                        } else if (previous && added) {  // past the steps: a word, its residual's word read for it
                            engine_pixel_words<OW, MEMORIES, DDR, true>(m0, m1, m2, m3, target, residual, done_word,
                                                                        done, j - pixel_steps, words, 1, g, out);
                        } else if (previous) {  // past the steps: ``written`` of its words, the second never to DDR
                            engine_pixel_words<OW, MEMORIES, DDR, false>(m0, m1, m2, m3, target, residual, done_word,
                                                                         done, overlap + (j - pixel_steps) * written,
                                                                         words, written, g, out);
                        }
                        if (++j == span) {
                            j = word = entry = at_lane = 0;
                            done_word = output.out_first / L;
                            previous = true;
                            output.next(g);
                            engine_start_walks(g, output, channel0, staged, ring, slot_elements, walk, row_walk);
                        }
                    }
                    HETDEPLOY_COUNTED(count_loop(iterations, ENGINE_MAC_DEPTH));
                last_outputs:  // ``written`` an iteration, the second never to DDR (where added: one, its residual's)
                    for (int w = 0; w < words; w += written) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=OUTPUT_WORDS
                        if (added)
                            engine_pixel_words<OW, MEMORIES, DDR, true>(m0, m1, m2, m3, target, residual, done_word,
                                                                        sums[0], w, words, 1, g, out);
                        else
                            engine_pixel_words<OW, MEMORIES, DDR, false>(m0, m1, m2, m3, target, residual, done_word,
                                                                         sums[0], w, words, written, g, out);
                    }
                    HETDEPLOY_COUNTED(count_loop((words + written - 1) / written, ENGINE_MOVE_DEPTH));
                } else {
                pixels:  // a tile whose outputs share words with other channels': a pixel's window, then its words
                    for (int pixel = 0; pixel < row_pixels; pixel++) {
#pragma HLS LOOP_TRIPCOUNT max=ENGINE_MAX_PIXELS
                        HETDEPLOY_COUNTED(engine_counted().cycles++);
                        for (int lane_t = 0; lane_t < LANES; lane_t++) {
#pragma HLS UNROLL
                            sums[0][lane_t] = bias[lane_t];
                        }
                        HETDEPLOY_COUNTED(long long values = 0);
                    window_values:  // ``step`` values an iteration: VEC channels of a pixel, or one; or a row walk's
                        for (int w = 0; w < steps; w++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=MAX_WINDOW
                            HETDEPLOY_COUNTED(values++);
                            const word_t in_word = engine_window_word<IW, VEC, MEMORIES, DDR>(
                                m0, m1, m2, m3, input, g, rows, walk, row_walk, input_elements);
                            engine_window_step<IW, WW, LANES, URAM_LANES, VEC, WINDOW_ENTRIES>(
                                in_word, g, rows, strides, output.column0, slot, walk, row_walk, tile, paired, sums);
                        }
                        HETDEPLOY_COUNTED(count_loop(values, ENGINE_MAC_DEPTH));
                        // the words the pixel's tile of channels lies in, each written once
                        const long long words_written =
                            added ? engine_shared_words<OW, MEMORIES, true, LANES>(m0, m1, m2, m3, target, residual,
                                                                                 output.out_first, filters, sums[0],
                                                                                 g, out)
                                  : engine_shared_words<OW, MEMORIES, false, LANES>(m0, m1, m2, m3, target, residual,
                                                                                  output.out_first, filters, sums[0],
                                                                                  g, out);
                        HETDEPLOY_COUNTED(count_loop(words_written, ENGINE_MOVE_DEPTH, added ? 2 : 1));
                        output.next(g);
                        engine_start_walks(g, output, channel0, staged, ring, slot_elements, walk, row_walk);
                    }
                }
                t.next(g, depthwise, LANES, group_filters, channels);
            }
            ring.slot += slots_a_pass;  // the next pass's first window row's slot
            if (ring.slot >= g.k_h) ring.slot -= g.k_h;
        }
        t = group_end;
    }
}

} // namespace hetdeploy

#endif
