"""Zero-compressed transfers: the codec's round trip, bit for bit, and when compressing pays."""

import numpy as np
import pytest

from hetdeploy.core.board_runtime import compressed_words, zero_compress, zero_decompress
from hetdeploy.planning.compression import compressed_bytes, weigh


@pytest.mark.parametrize("count", [1, 31, 32, 33, 100, 4096])
def test_the_round_trip_is_bit_exact_and_within_the_bound(count):
    rng = np.random.default_rng(count)
    for values in (np.maximum(rng.normal(size=count), 0), np.zeros(count), rng.normal(size=count) + 10):
        values = values.astype(np.float32)
        values[::5] = -0.0  # not +0.0: kept
        if count > 3:
            values[2], values[3] = np.nan, np.inf
        words = zero_compress(values)
        assert words.dtype == np.uint32 and len(words) <= compressed_words(count)
        assert words[0] == np.count_nonzero(values.view(np.uint32))
        assert len(words) * 4 == compressed_bytes(count, int(words[0]))
        back = zero_decompress(words, count)
        assert back.dtype == np.float32 and back.view(np.uint32).tobytes() == values.view(np.uint32).tobytes()


def test_the_bitmap_is_little_endian_bits_of_32_bit_words():
    """Bit j % 32 of word j // 32, as the FPGA's top would test it."""
    values = np.zeros(40, np.float32)
    values[[0, 5, 33]] = [1.0, 2.0, 3.0]
    words = zero_compress(values)
    assert list(words[:3]) == [3, (1 << 0) | (1 << 5), 1 << 1]
    assert words[3:].view(np.float32).tolist() == [1.0, 2.0, 3.0]


def test_compression_pays_where_the_link_is_slow_beside_the_codec():
    def link(bandwidth):
        return lambda nbytes: 1e-5 + nbytes / bandwidth

    sparse_slow = weigh(65536, 0.5, link(1e7), 2e9, 1e8)  # a 10 MB/s link
    assert sparse_slow.pays and sparse_slow.saved_s == pytest.approx(sparse_slow.link_saved_s - sparse_slow.codec_s)
    assert sparse_slow.compressed_bytes == 4 * (1 + 2048 + 32768)
    assert not weigh(65536, 0.5, link(1.2e9), 2.1e9, 1e8).pays  # the PYNQ-Z2's: the host's DDR and the link alike
    assert not weigh(65536, 0.0, link(1e7), 2e9, 1e8).pays  # no zeros: the bitmap only adds
