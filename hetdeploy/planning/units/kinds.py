"""Each kind of execution unit, one class: what it is, what its arithmetic costs and how it may be folded.

As FINN gives each hardware op one class (its resource estimates and cycles), each kind of unit here is one
class registered by name (``Shape.kind``), and the estimate and the folding ask it: a stage never branches on
a kind's name. Adding an op that an existing kind runs touches that kind alone; a new kind is a new class.

- ``kernel``: a multiply-accumulate layer through hls4ml (Conv, Gemm, MatMul; an average pooling as a
  depthwise convolution), folded by its reuse factor, its weights on chip or in DDR;
- ``window``: hls4ml's max pooling;
- ``elementwise``: hls4ml's activations and arithmetic a value at a time;
- ``gather``, ``add``, ``concat``, ``affine``, ``lrn``, ``quant``: ops the subfunction's top computes over whole
  buffers (arena.h's window_op, add, concat, affine, lrn, quantize), their reads of the buffers being their compute;
- ``data``: a relayout the top moves by its steps (``relayout``).
What every kind shares (the unit's control, its tables, streaming, its moves through the arena) is
``units.estimate``'s; the constants are ``costs``'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from ..dataflow import Op, loop_ops, whole_ops
from .costs import (ARENA_PORTS, ARENA_WORD_BYTES, BRAM_MIN_DEPTH, DISTRIBUTED_ARITHMETIC, LRN_POWER_DEPTH,
                    LRN_POWER_DSP, LRN_POWER_FF, LRN_POWER_LUT, LUTRAM_DEPTH, QUANT_DSPS_A_PRODUCT, RELAYOUT_DEPTH,
                    RELAYOUT_STEP_BITS, Shape,
                    accumulator_bits,
                    adder_levels_a_cycle, arena_words, bound_products, bram18_blocks, ddr_cycles_per_vector,
                    distributed_arithmetic_lut, dsps_a_product, first_product_cycles, iterations, loop_cycles, mux_lut,
                    popcount_lut, strategy_for, valid_reuse_factors, weight_codes, weight_type_bits, window_cycles,
                    window_rows,
                    word_values, XNOR_POPCOUNT)
from .relayout import relayout_cost


@dataclass
class Arithmetic:
    """What a unit's own arithmetic takes: resources, its cycles, and the cycles its DDR weights' reads add."""

    dsp: int = 0
    bram18: int = 0
    lut: int = 0
    ff: int = 0
    cycles: int = 0
    ddr: int = 0


class UnitKind:
    """One kind of execution unit. The class attributes say what it is; ``arithmetic`` what it costs."""

    name: ClassVar[str]
    # a multiply-accumulate layer: its reuse factor folds it, its weights may go to DDR, hls4ml's strategy is a choice
    foldable: ClassVar[bool] = False
    # hls4ml may build it under either IOType (``units.takes_either_io_type``)
    either_io_type: ClassVar[bool] = False
    # the top computes it by reading the subfunction's buffers: those reads are its arithmetic, not moves besides
    reads_are_its_work: ClassVar[bool] = False
    # an hls4ml project that, io_parallel, holds its input vector in registers
    holds_its_input: ClassVar[bool] = True

    def reuse_factors(self, shape: Shape, width: int) -> list[int]:
        """The reuse factors the folding may give it at ``width`` bits."""
        return [1]

    def arithmetic(self, shape: Shape, reuse_factor: int, width: int, ddr_bytes_per_cycle: Optional[float],
                   strategy: Optional[str], dsp_binding: tuple[int, int], products_registered: bool) -> Arithmetic:
        """Its own arithmetic at ``reuse_factor`` and ``width`` bits (``units.estimate`` says the arguments)."""
        return Arithmetic()

    def registers_output(self, shape: Shape) -> bool:
        """Whether, streamed, it holds its output word in registers."""
        return True

    def moved_out(self, shape: Shape) -> int:
        """The values the unit writes through the arena."""
        return shape.output_values

    def dataflow_ops(self, shape: Shape, reuse_factor: int, compute_cycles: int,
                     reads: Sequence[tuple[str, int, int]], writes: Sequence[str], tokens: int,
                     words: int) -> tuple[Op, ...]:
        """Its ops on a sample as a dataflow process (planning/dataflow.py): reading ``reads`` (each input's FIFO,
        its tokens, a pixel's channels or a flat vector each, and a token's words), computing its
        ``compute_cycles``, and writing its ``tokens`` output tokens of ``words`` each to each FIFO of ``writes``:
        a streamed window layer (a convolution, a pooling: its ``Shape.input_map``) a pixel an iteration at its
        reuse factor's interval (a pooling's is 1), a layer ``per_token`` a token at a time, else the whole
        input, then the whole output, a token a cycle."""
        if shape.streamed and shape.input_map:
            return _window_loop(shape, reuse_factor, compute_cycles, reads, writes)
        if self.per_token(shape):
            return _token_loop(compute_cycles, reads, writes, tokens)
        return whole_ops(reads, writes, tokens, compute_cycles)

    def per_token(self, shape: Shape) -> bool:
        """Whether, as a dataflow process, it computes each output token from the same token of each input."""
        return False


def _window_loop(shape: Shape, interval: int, compute_cycles: int, reads: Sequence[tuple[str, int, int]],
                 writes: Sequence[str]) -> tuple[Op, ...]:
    """A streamed window layer's loop (hls4ml's conv and pooling stream functions): an iteration a pixel of its
    padded input map at ``interval`` cycles, a token read at each pixel inside the padding, an output token as each
    window completes (its last pixel read), a pipeline's depth later."""
    rows, columns, _ = shape.input_map
    k_h, k_w, s_h, s_w, top, left, bottom, right = shape.window_geometry
    inside = [r * columns + c for r in range(top, rows - bottom) for c in range(left, columns - right)]
    emits = [(y * s_h + k_h - 1) * columns + x * s_w + k_w - 1
             for y in range((rows - k_h) // s_h + 1) for x in range((columns - k_w) // s_w + 1)]
    lag = -(-max(0, compute_cycles - rows * columns * interval) // interval)
    return loop_ops(rows * columns, interval, lag, [(reads[0][0], inside)], writes, emits)


def token_interval(compute_cycles: int, tokens: int) -> int:
    """The cycles between two output tokens of a layer that computes ``tokens`` of them a token at a time in
    ``compute_cycles`` (its token loop's II: the dataflow schedule's, and the dataflow top's pragma)."""
    return max(1, compute_cycles // max(1, tokens))


def _token_loop(compute_cycles: int, reads: Sequence[tuple[str, int, int]], writes: Sequence[str],
                tokens: int) -> tuple[Op, ...]:
    """A layer that computes each output token from the same token of each input (an activation, an Add, a
    Concat of channels, a scale and shift), a token an iteration at the interval its cycles allow; an input of
    other tokens, whole."""
    if any(count != tokens for _, count, _ in reads):
        return whole_ops(reads, writes, tokens, compute_cycles)
    interval = token_interval(compute_cycles, tokens)
    lag = -(-max(0, compute_cycles - tokens * interval) // interval)
    return loop_ops(tokens, interval, lag, [(fifo, range(tokens)) for fifo, *_ in reads], writes, range(tokens))


KINDS: dict[str, UnitKind] = {}


def unit_kind(cls: type[UnitKind]) -> type[UnitKind]:
    """Register a kind under its name."""
    KINDS[cls.name] = cls()
    return cls


def kind_of(shape: Shape) -> UnitKind:
    """The kind of unit ``shape`` is."""
    return KINDS[shape.kind]


@unit_kind
class Kernel(UnitKind):
    name = "kernel"
    foldable = True
    either_io_type = True

    def reuse_factors(self, shape: Shape, width: int) -> list[int]:
        return valid_reuse_factors(shape.n_in, shape.n_out)

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        done = Arithmetic()
        if strategy == XNOR_POPCOUNT:
            self._xnor_popcount(done, shape, reuse_factor, width)
        elif strategy == DISTRIBUTED_ARITHMETIC:
            done.lut += distributed_arithmetic_lut(shape, width)
            done.ff += shape.n_out * width  # its outputs registered; the adders between are combinational
            done.cycles += iterations(shape) + first_product_cycles(shape)
        else:
            self._multiply_accumulate(done, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding,
                                      products_registered)
        if shape.normalizations:  # nnet_batchnorm's normalize at the unit's reuse factor R (hls4ml_adapter gives
            # it the layer's): a product by a constant of W bits and its sum a value, ceil(n / R) multipliers for
            # the n of a word (streamed) or of the vector (io_parallel: R cycles more); its sums registered
            values = shape.n_out * (1 if shape.streamed else shape.vectors)
            products = shape.normalizations * math.ceil(values / reuse_factor)
            if not shape.streamed:
                done.cycles += shape.normalizations * (reuse_factor - 1)
            on_dsps, in_luts = bound_products(products, width, width, dsp_binding)  # its scales W bits: unknown
            done.dsp, done.lut = done.dsp + on_dsps, done.lut + in_luts + products * width  # and an adder a product
            done.ff += shape.normalizations * shape.n_out * width
        if not shape.streamed and shape.vectors > 1:  # computed a pixel at a time, each map between its layers
            # waits whole in a completely partitioned array (where a stream has FIFOs; the last layer's goes out
            # through the project's port: hls4ml's io_parallel Conv2D baselines count none for it)
            done.ff += sum(pixels * channels for pixels, channels in shape.fifos) * width
        return done

    @staticmethod
    def _xnor_popcount(done: Arithmetic, shape, reuse_factor, width) -> None:
        """hls/xnor_popcount.h at reuse factor R: an iteration takes PE outputs' SIMD sign bits each (every output's
        n_in / R up to R = n_in; past it n_in n_out / R outputs' one), XNORs them with their weights' (a LUT each),
        sums an output's in a popcount and adds twice the count to its sum in the accumulator (from its bias minus
        n_in); the weights' sign bits in a bank R words deep, each an iteration's, bound to BRAM from BRAM_MIN_DEPTH
        deep and else to LUTs, a 64-deep ROM a LUT6 a bit (at R = 1 constants, into which each XNOR folds)."""
        simd = max(1, shape.n_in // reuse_factor)
        pe = shape.n_out * shape.n_in // (reuse_factor * simd)
        sum_bits = accumulator_bits(shape, width)
        xnors = simd if reuse_factor > 1 else 0
        done.lut += pe * (xnors + popcount_lut(simd) + sum_bits)
        done.ff += pe * (sum_bits + simd.bit_length())  # the sums, and each popcount registered
        if reuse_factor >= BRAM_MIN_DEPTH:
            done.bram18 += bram18_blocks(reuse_factor, pe * simd, bound=True)
        elif reuse_factor > 1:
            done.lut += pe * simd * math.ceil(reuse_factor / LUTRAM_DEPTH)
        done.cycles += iterations(shape) * reuse_factor + first_product_cycles(shape)

    @staticmethod
    def _multiply_accumulate(done: Arithmetic, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy,
                             dsp_binding, products_registered) -> None:
        """hls4ml's Latency or Resource strategy's products and sums (the module doc of ``units``)."""
        held = shape.n_in * shape.n_out  # weights
        # hls4ml's Latency strategy keeps the weights as constants: their values count (none known: all W bits)
        latency_strategy = ddr_bytes_per_cycle is None and (strategy or strategy_for(reuse_factor)) == "Latency"
        codes = weight_codes(shape, width) if latency_strategy else []
        zeros = sum(count for bits, count in codes if bits < 0)  # weights under half a step: they round to 0
        if reuse_factor == 1 and codes:  # each multiplier one constant weight, which the HLS folds in (+-1: a wire)
            factors = [(bits, count) for bits, count in codes if bits > 0]
        else:  # the weights in turn, each of its type's bits (a quantizer's, else W); hls4ml's multiplier_limit
            # leaves out the products by a zero weight
            factors = [(weight_type_bits(shape, width), math.ceil(held / reuse_factor) - zeros // reuse_factor)]
        held -= zeros
        multipliers = sum(count for _, count in factors)
        for bits, count in factors:
            on_dsps, in_luts = bound_products(count, width, bits, dsp_binding)
            done.dsp, done.lut = done.dsp + on_dsps, done.lut + in_luts
        done.lut += multipliers * accumulator_bits(shape, width)  # each product's adder, as wide as the accumulator
        if shape.n_in > 1 and latency_strategy and not products_registered:
            done.ff += min(held, shape.n_out * math.ceil(shape.n_in / 2 ** adder_levels_a_cycle(shape))) * width
        elif shape.n_in > 1:  # products wait for their sum: all of them under Latency, each multiplier's else
            done.ff += (held if latency_strategy else multipliers) * width // 2
        cycles_per_vector = reuse_factor
        if ddr_bytes_per_cycle is not None:
            cycles_per_vector = max(reuse_factor, ddr_cycles_per_vector(shape, width, ddr_bytes_per_cycle))
            done.ddr = shape.vectors * (cycles_per_vector - reuse_factor)
        elif not latency_strategy and reuse_factor > 1:  # Resource: a bank per multiplier, R deep, bound to
            # BRAM however shallow (hls4ml's ROM_nP_BRAM binding of its weights); at R = 1 they are constants
            done.bram18 += bram18_blocks(reuse_factor, multipliers * width, bound=True)
        else:
            done.lut += held * width // 2
        # unfolded in io_parallel, a product with no sum (n_in = 1) is combinational (hls4ml's Dense(1 -> 64) +
        # ReLU baselines report no cycle)
        if shape.n_in > 1 or shape.streamed or cycles_per_vector > 1:  # an iteration at II R (hls4ml's PIPELINE
            # II=reuse_factor over its input pixels streamed, nnet_conv2d_stream.h), and the DDR reads' wait
            done.cycles += iterations(shape) * reuse_factor + done.ddr + first_product_cycles(shape)


@unit_kind
class Window(UnitKind):
    name = "window"
    either_io_type = True

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        if shape.streamed:  # an input pixel a cycle (nnet_pooling_stream.h's loops over the input, PIPELINE II=1)
            return Arithmetic(lut=shape.n_out * width * shape.n_in, cycles=iterations(shape))
        # io_parallel: every output pixel's comparators at once, combinational
        return Arithmetic(lut=shape.vectors * shape.n_out * width * shape.n_in)


@unit_kind
class Elementwise(UnitKind):
    name = "elementwise"

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        # compares, shifts: io_parallel, combinational but for table reads
        return Arithmetic(lut=shape.n_out * width, cycles=shape.vectors if shape.streamed or shape.table_layers else 0)

    def registers_output(self, shape: Shape) -> bool:
        """An activation without a table only compares or shifts between two FIFOs (combinational: a ReLU's module
        holds 3 FF in a Vitis HLS 2025.2 report of hls4ml's io_stream MLP, benchmarks/estimates.py's taitashaw
        rows)."""
        return shape.table_layers > 0

    def per_token(self, shape: Shape) -> bool:
        return shape.streamed  # hls4ml's activation stream functions: a word a cycle


class _TopKind(UnitKind):
    """An op the subfunction's top computes over whole buffers (arena.h), a lane of a word at a time: its loops read
    its inputs and write its output words (its cycles), two words a cycle over a memory's two ports."""

    reads_are_its_work = True
    holds_its_input = False

    def moved_out(self, shape: Shape) -> int:
        """None besides its loops, which write its output words."""
        return 0

    @staticmethod
    def lanes(width: int) -> int:
        return word_values(width)

    def word_reuse_factors(self, width: int) -> list[int]:
        """Reuse factors R of an op a word's lanes over R an iteration computes (its II: R), each divisor of them."""
        lanes = self.lanes(width)
        return [r for r in range(1, lanes + 1) if lanes % r == 0]

    def dataflow_ops(self, shape, reuse_factor, compute_cycles, reads, writes, tokens, words):
        """In a dataflow top, over its own copy of its buffers: each input token copied in a word a cycle, its
        op, then each output token copied out (hls/dataflow_top.cpp.in's buffered process)."""
        return whole_ops(reads, writes, tokens, compute_cycles, words)


class _TokenByToken(_TopKind):
    """A top's op whose output token is computed from the same token of each input (a pixel's channels of each
    Concat input, then the next pixel's): in a dataflow top, a token a cycle with no buffer of its own
    (``top_kinds.TopKind.token_op``)."""

    dataflow_ops = UnitKind.dataflow_ops

    def per_token(self, shape: Shape) -> bool:
        return True


@unit_kind
class Gather(_TopKind):
    """arena.h's window_op over its geometry (``costs.window_cycles``): a comparator (or adder) and a multiplexer
    a lane of a word, for each output row it reduces at once (``costs.window_rows``: two unfolded where two rows'
    windows share their reads, one at reuse factor 2)."""

    name = "gather"

    def reuse_factors(self, shape, width):
        return [1, 2] if window_rows(shape.pool, width, 1) == 2 else [1]

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        rows = window_rows(shape.pool, width, reuse_factor)
        return Arithmetic(lut=self.lanes(width) * rows * width * 2, ff=self.lanes(width) * rows * width,
                          cycles=window_cycles(shape.pool, width, rows))


@unit_kind
class Add(_TokenByToken):
    """arena.h's add: a word of each input read and a word of the output's lanes written an iteration, over a
    memory's two ports (the three may lie in one)."""

    name = "add"

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        lanes = self.lanes(width)
        return Arithmetic(lut=lanes * width * 2,  # an adder and the ReLU's multiplexer a lane
                          ff=lanes * width,
                          cycles=arena_words(shape.output_values, width) * -(-(shape.n_in + 1) // ARENA_PORTS))


@unit_kind
class Affine(_TokenByToken):
    """arena.h's affine (a BatchNormalization): a word read and a word written every R cycles (its reuse factor),
    its lanes' products on lanes / R multipliers, each shared by R lanes (the loop's II: a network of many
    BatchNormalizations, DenseNet's before each convolution, would else take a word's multipliers each)."""

    name = "affine"

    def reuse_factors(self, shape, width):
        return self.word_reuse_factors(width)

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        lanes = self.lanes(width)
        return Arithmetic(dsp=lanes // reuse_factor * dsps_a_product(width),
                          lut=lanes * width * 2,  # the adder and the ReLU's multiplexer a lane
                          ff=lanes * width * 2, cycles=arena_words(shape.output_values, width) * reuse_factor)


@unit_kind
class Quantize(_TopKind):
    """arena.h's quantize (a QONNX Quant of one scale and one zero point): a word read and a word written every R
    cycles (its reuse factor), each lane's products by constants (n_in: two, none where the scale is a power of two
    and they are shifts) on lanes / R sets of multipliers, each shared by R lanes, its rounding and clamping in
    LUTs."""

    name = "quant"
    reuse_factors = Affine.reuse_factors

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        lanes = self.lanes(width)
        return Arithmetic(dsp=lanes // reuse_factor * shape.n_in * QUANT_DSPS_A_PRODUCT,
                          lut=lanes * width * 4,  # the zero point's and the rounding's adders, the two comparisons
                          ff=lanes * width * 2, cycles=arena_words(shape.output_values, width) * reuse_factor)


@unit_kind
class LocalResponse(_TopKind):
    """arena.h's lrn: P values an iteration (a word's lanes over its reuse factor R), read the runs that hold its
    window's half ahead of those written, a word written each word of them; each value's square (a product) exact,
    the window's sum of squares (n_in values, an adder each), then a float power (LRN_POWER_*) a value written."""

    name = "lrn"

    def reuse_factors(self, shape, width):
        return self.word_reuse_factors(width)

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        values = self.lanes(width) // reuse_factor  # P, an iteration
        return Arithmetic(dsp=values * (dsps_a_product(width) + LRN_POWER_DSP),
                          lut=values * (shape.n_in * width * 2 + LRN_POWER_LUT),
                          ff=values * (shape.n_in * width * 2 + LRN_POWER_FF),
                          cycles=-(-shape.output_values // values) + -(-(shape.n_in // 2) // values) + LRN_POWER_DEPTH)


@unit_kind
class Concat(_TokenByToken):
    """arena.h's concat: a word of lanes from one input's run (its words read, the output's written: two words a
    cycle) when the inputs' channels fill whole words, else a read a value."""

    name = "concat"

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        lanes = self.lanes(width)
        words = arena_words(shape.output_values, width)
        return Arithmetic(lut=lanes * width,  # a multiplexer a lane
                          ff=lanes * width,
                          cycles=words if shape.n_in % lanes == 0 else -(-shape.output_values // ARENA_PORTS))


@unit_kind
class Data(_TopKind):
    """A relayout (Flatten, Reshape, Transpose ...; a chain of them): arena.h's relayout, a step a cycle (its map's
    steps, ``relayout``; where planning cannot know the map, as many as an output word's lanes, each in a word of its
    own, and the word written alone, would take), its table a ROM. Unfolded, registers of the input words its steps
    hold (2 x lanes where its map is not known) and a multiplexer a bit of the output word over their values at its
    place; folded (its reuse factor a word's lanes), one input word and a register a lane, each lane's multiplexer
    over the word's lanes, each output word a step an input word it needs; where each output word is an input word as
    it is, a copy (a register)."""

    name = "data"

    def reuse_factors(self, shape, width):
        return sorted({1, self.lanes(width)})

    def arithmetic(self, shape, reuse_factor, width, ddr_bytes_per_cycle, strategy, dsp_binding, products_registered):
        lanes = self.lanes(width)
        if shape.relayout:
            iterations, steps, held = relayout_cost(shape.relayout, lanes, reuse_factor > 1)
        else:
            iterations = steps = arena_words(shape.input_values, width) * (lanes + 1)
            held = 1 if reuse_factor > 1 else 2 * lanes
        word_bits = 8 * ARENA_WORD_BYTES
        # its table a ROM: in LUTs where shallower than BRAM_MIN_DEPTH, as Vivado maps a small array (constants in
        # the logic at two steps or fewer, as bram18_blocks takes registers)
        rom_lut = RELAYOUT_STEP_BITS * -(-steps // LUTRAM_DEPTH) if 2 < steps < BRAM_MIN_DEPTH else 0
        return Arithmetic(lut=word_bits * (mux_lut(held * lanes if held > 1 else lanes) if held else 0) + rom_lut,
                          ff=word_bits * (max(1, held) + (held == 1)),
                          bram18=0 if steps < BRAM_MIN_DEPTH else bram18_blocks(steps, RELAYOUT_STEP_BITS),
                          cycles=loop_cycles(iterations, RELAYOUT_DEPTH))