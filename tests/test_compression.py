"""Zero-compressed transfers: the codec's round trip, bit for bit, when compressing pays, and a build whose
ports are compressed emulating as one whose are not."""

from pathlib import Path

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


@pytest.mark.slow
def test_a_build_with_compressed_transfers_emulates_byte_for_byte_as_one_without(tmp_path):
    """small_cnn with its first Conv and Relu on the ARM: the FPGA takes the ReLU's map (about half
    zeros) and gives back the logits. Built with every port zero-compressed and with none, in batches of
    3: the compressed top's ports are the codec's words, plan.json records each transfer, and hetdeploy
    emulate and run.py --emulate give the same bytes as the uncompressed build on samples the builds
    never saw (7: two full batches and a partial one)."""
    import json
    import subprocess
    import sys

    from hetdeploy.commands.cli import main

    model = Path(__file__).resolve().parent.parent / "examples" / "small_cnn.onnx"
    x = np.random.default_rng(11).normal(size=(7, 1, 28, 28)).astype(np.float32)
    x[2] = 0.0  # a sample with every value of the ReLU's map zero
    np.save(tmp_path / "x.npy", x)
    outputs = {}
    for mode in ("all", "none"):
        out = tmp_path / mode
        assert main(["build", str(model), "--board", "pynq-z2", "-o", str(out), "--policy", "support", "--batch", "3",
                     "--device", "conv1=arm_cpu", "--device", "relu1=arm_cpu", "--compress-transfers", mode]) == 0
        plan = json.loads((out / "plan.json").read_text())
        fpga = next(s for s in plan["subfunctions"] if s["kind"] == "fpga")
        top = (out / fpga["hls"]["project"] / f"{fpga['hls']['top']}_top.cpp").read_text()
        if mode == "all":
            relu = next(t for t in fpga["transfers"] if t["tensor"] == "r1")
            assert relu["compressed"] and relu["link"] == "arm_cpu->fpga" and 0.3 < relu["zero_share"] < 0.7
            assert relu["compressed_bytes"] < relu["raw_bytes"] == 4 * 8 * 24 * 24
            assert all(p["compressed"] for p in fpga["hls"]["inputs"] + fpga["hls"]["outputs"])
            assert "from_zero_compressed" in top and "to_zero_compressed" in top
        else:
            assert fpga["transfers"] == [] and "zero_compressed" not in top
        result = subprocess.run([sys.executable, "-m", "hetdeploy", "emulate", str(out), "--input",
                                 str(tmp_path / "x.npy"), "--output", str(tmp_path / f"{mode}_emulate.npy"),
                                 "--profile", str(tmp_path / f"{mode}.json")], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        links = json.loads((tmp_path / f"{mode}.json").read_text())["links"]  # a compressed link has no link figure
        assert [k["compressed_tensors"] for k in links] == ([1, 1] if mode == "all" else [0, 0])
        result = subprocess.run([sys.executable, str(out / "deploy" / "run.py"), "--input", str(tmp_path / "x.npy"),
                                 "--output", str(tmp_path / f"{mode}_run.npy"), "--emulate", "--batch", "3"],
                                capture_output=True, text=True, cwd=out)
        assert result.returncode == 0, result.stderr
        outputs[mode] = [np.load(tmp_path / f"{mode}_{way}.npy") for way in ("emulate", "run")]
    for compressed, plain in zip(outputs["all"], outputs["none"]):
        assert compressed.shape == (7, 10) and np.all(np.isfinite(compressed))
        assert compressed.tobytes() == plain.tobytes()


def test_the_partition_weighs_compressed_transfers_where_the_link_is_slow():
    """A Conv -> Relu -> Conv -> Relu chain on a PYNQ-Z2 whose links to and from the FPGA move 10 MB/s:
    raw, its 64 KiB input and output make the FPGA slower than the ARM, so all of it stays on the ARM; with
    nine in ten values zero the cost model prices both compressed (search and ILP alike), the FPGA takes the
    chain, and its transfer time is the raw one less what compression saves. --compress-transfers none
    weighs nothing."""
    import dataclasses

    import graphs
    from hetdeploy.core.board import load_board
    from hetdeploy.planning.partition import partition_graph

    board = load_board("pynq-z2")
    slow = dataclasses.replace(board, links=[dataclasses.replace(k, bandwidth_bytes_per_s=1e7) for k in board.links])
    b = graphs.Builder([1, 16, 32, 32])
    x = b.unary("Relu", b.conv("input", 16, 3))
    graph = b.graph(b.unary("Relu", b.conv(x, 16, 3)))
    shares = {t: 0.9 for node in graph.nodes for t in node.outputs} | {"input": 0.9}
    raw = partition_graph(graph, slow)
    assert [c.device for c in raw.cuts] == ["arm_cpu"] and raw.costs[0].crossings == []
    assert partition_graph(graph, slow, zero_shares=shares, compress="none").latency_s == raw.latency_s
    for partitioner in ("search", "ilp"):
        weighed = partition_graph(graph, slow, zero_shares=shares, compress="auto", partitioner=partitioner)
        (cut,), (cost,) = weighed.cuts, weighed.costs
        assert cut.device == "fpga" and weighed.latency_s < raw.latency_s / 2
        assert [(c.tensor, c.source, c.target, c.compressed) for c in cost.crossings] == [
            ("input", "arm_cpu", "fpga", True), (graph.outputs[0], "fpga", "arm_cpu", True)]
        link = 2 * (slow.link("arm_cpu", "fpga").latency_s + 4 * 16 * 32 * 32 / 1e7)
        assert cost.transfer_s == pytest.approx(link - sum(c.weighed.saved_s for c in cost.crossings))
        assert all(c.weighed.compressed_bytes < c.weighed.raw_bytes / 5 for c in cost.crossings)
