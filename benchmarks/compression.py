"""Zero-compressed transfers: what they would save on the links of hetdeploy's plans.

Run by hand (prints a table; nothing here is a test):

    .venv/bin/python benchmarks/compression.py [--board B] [--samples N] [--json]

For each example model (examples/*.onnx; the ReLU-heavy ones are small_cnn, alexnet_style,
four_conv64 and wide_mlp) on each board, the plan `hetdeploy plan` makes (latency policy); for each
tensor an FPGA subfunction takes from the host or gives back, its share of zeros on N synthetic
N(0, 1) samples (onnxruntime on the normalised model), its bytes raw and zero-compressed
(board_runtime.zero_compress), and planning.compression's verdict: the link time saved against
the host's and the FPGA's encoding and decoding. Every sample's tensor is compressed and
decompressed and must come back bit for bit. The build does not compress yet: these are what it
would save.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hetdeploy.core.board import available_boards, load_board  # noqa: E402
from hetdeploy.core.board_runtime import zero_compress, zero_decompress  # noqa: E402
from hetdeploy.planning.compression import weigh  # noqa: E402
from hetdeploy.planning.config import BuildOptions  # noqa: E402
from hetdeploy.planning.cost import CostModel  # noqa: E402
from hetdeploy.steps.build import plan_stages  # noqa: E402


def tensor_values(model: onnx.ModelProto, names: list[str], feeds: list[dict]) -> dict[str, list[np.ndarray]]:
    """Each tensor of ``names`` on each sample of ``feeds``, the model run on onnxruntime."""
    wanted = onnx.ModelProto()
    wanted.CopyFrom(model)
    present = {o.name for o in wanted.graph.output}
    for name in names:
        if name not in present:
            wanted.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort.InferenceSession(wanted.SerializeToString(), providers=["CPUExecutionProvider"])
    runs = [dict(zip([o.name for o in session.get_outputs()], session.run(None, f))) for f in feeds]
    return {name: [r[name] for r in runs] for name in names}


def links(model_path: Path, board_name: str, samples: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as out:
        loaded, board, plan = plan_stages(BuildOptions(model=model_path, board=board_name, out_dir=Path(out)),
                                          lambda k, line: None)
    rng = np.random.default_rng(0)
    feeds = [{t.name: rng.normal(size=t.shape).astype(np.float32) for t in loaded.inputs} for _ in range(samples)]
    cost = CostModel(loaded.graph, board)
    host = board.device(board.host)
    crossing = [(s, t, "in") for s in plan.subfunctions if s.kind == "fpga" for t in s.inputs]
    crossing += [(s, t, "out") for s in plan.subfunctions if s.kind == "fpga" for t in s.outputs]
    values = tensor_values(loaded.model, sorted({t for _, t, _ in crossing} - {i.name for i in loaded.inputs}), feeds)
    values |= {i.name: [f[i.name] for f in feeds] for i in loaded.inputs}
    rows = []
    for sub, tensor, way in crossing:
        arrays = values[tensor]
        for array in arrays:  # the round trip, bit for bit
            back = zero_decompress(zero_compress(array), array.size)
            assert back.view(np.uint32).tobytes() == np.ascontiguousarray(array, np.float32).reshape(-1).view(
                np.uint32).tobytes(), f"{tensor}: the round trip changed bits"
        zeros = float(np.mean([np.count_nonzero(a.view(np.uint32) == 0) / a.size for a in arrays]))
        source, target = (board.host, sub.device) if way == "in" else (sub.device, board.host)
        verdict = weigh(arrays[0].size, zeros, lambda b: cost.transfer_seconds(source, target, 1, b),
                        host.memory.bandwidth_bytes_per_s, board.device(sub.device).clock_mhz * 1e6)
        rows.append({"board": board.name, "model": model_path.stem, "subfunction": sub.name, "tensor": tensor,
                     "link": f"{source}->{target}", "values": verdict.values, "zero_share": zeros,
                     "raw_bytes": verdict.raw_bytes, "compressed_bytes": verdict.compressed_bytes,
                     "link_saved_s": verdict.link_saved_s, "codec_s": verdict.codec_s, "saved_s": verdict.saved_s,
                     "compressed": verdict.pays, "round_trips": len(arrays)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", action="append", help="a board (repeatable; default: the Zynq boards)")
    parser.add_argument("--samples", type=int, default=8, help="synthetic samples the zeros are counted on")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON only")
    args = parser.parse_args()
    boards = args.board or [b for b in available_boards() if load_board(b).device(load_board(b).host).kind == "cpu"
                            and b != "workstation"]
    rows = [row for board in boards for model in sorted((ROOT / "examples").glob("*.onnx"))
            for row in links(model, board, args.samples)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| board | model | tensor | link | values | zeros | raw B | compressed B | link saved us | codec us "
          "| net us | compress |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['board']} | {r['model']} | {r['tensor']} | {r['link']} | {r['values']} | {r['zero_share']:.0%} | "
              f"{r['raw_bytes']:.0f} | {r['compressed_bytes']:.0f} | {r['link_saved_s'] * 1e6:.1f} | "
              f"{r['codec_s'] * 1e6:.1f} | {r['saved_s'] * 1e6:.1f} | {'yes' if r['compressed'] else 'no'} |")
    chosen = [r for r in rows if r["compressed"]]
    print(f"\n{len(chosen)} of {len(rows)} crossing tensors would travel compressed, saving "
          f"{sum(r['saved_s'] for r in chosen) * 1e6:.1f} us a sample in all; every round trip was bit-exact "
          f"({sum(r['round_trips'] for r in rows)} tensors)")


if __name__ == "__main__":
    main()
