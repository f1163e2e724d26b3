"""Zero-compressed transfers: what they save on the links of hetdeploy's plans.

Run by hand (prints a table; nothing here is a test):

    .venv/bin/python benchmarks/compression.py [--board B] [--samples N] [--link-bandwidth B] [--json]

For each example model (examples/*.onnx; the ReLU-heavy ones are small_cnn, alexnet_style,
four_conv64 and wide_mlp) on each board (or a copy of its file whose FPGA links move --link-bandwidth
bytes a second), the plan `hetdeploy plan` makes (latency policy, N synthetic sizing samples): for each
tensor an FPGA subfunction takes from the host or gives back, what the cost model weighed and the plan
recorded (plan.json's "transfers"): its share of zeros on those samples, its bytes raw and
zero-compressed, the time compressing saves a sample (the link's less the host's and the FPGA's encoding
and decoding) and whether the build compresses it (--compress-transfers auto). Every sample's tensor is
also compressed and decompressed (board_runtime.zero_compress) and must come back bit for bit. That a
build with compression emulates byte for byte as one without is tests/test_compression.py's build test.
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
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hetdeploy.core.board import available_boards, load_board  # noqa: E402
from hetdeploy.core.board_runtime import zero_compress, zero_decompress  # noqa: E402
from hetdeploy.intake.ort_adapter import with_outputs  # noqa: E402
from hetdeploy.planning.config import BuildOptions, settle_options  # noqa: E402
from hetdeploy.running.samples import build_samples  # noqa: E402
from hetdeploy.steps.build import plan_stages  # noqa: E402


def tensor_values(model: onnx.ModelProto, names: list[str], feeds: list[dict]) -> dict[str, list[np.ndarray]]:
    """Each tensor of ``names`` on each sample of ``feeds``, the model run on onnxruntime."""
    session = ort.InferenceSession(with_outputs(model, names).SerializeToString(), providers=["CPUExecutionProvider"])
    runs = [dict(zip([o.name for o in session.get_outputs()], session.run(None, f))) for f in feeds]
    return {name: [r[name] for r in runs] for name in names}


def with_link_bandwidth(board_name: str, bandwidth: float, folder: Path) -> str:
    """A copy of board ``board_name``'s file (in ``folder``) whose links to and from its FPGAs move ``bandwidth``
    bytes a second: a what-if for a slower link than the board file's (say the host's memcpy into DMA buffers)."""
    board = load_board(board_name)
    data = yaml.safe_load(Path(board.path).read_text())
    fpgas = {d.name for d in board.devices if d.kind == "fpga"}
    for link in data["links"]:
        if link["from"] in fpgas or link["to"] in fpgas:
            link["bandwidth_bytes_per_s"] = bandwidth
    path = folder / f"{board.name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def links(model_path: Path, board_name: str, samples: int) -> list[dict]:
    options = BuildOptions(model=model_path, board=board_name, out_dir=Path(tempfile.gettempdir()), samples=samples)
    loaded, board, plan = plan_stages(options, lambda k, line: None)
    feeds = build_samples(settle_options(options), loaded.inputs).sizing
    transfers = [(s, t) for s in plan.subfunctions for t in s.transfers]
    inputs = {i.name for i in loaded.inputs}
    values = tensor_values(loaded.model, sorted({t.tensor for _, t in transfers} - inputs), feeds)
    values |= {name: [f[name] for f in feeds] for name in inputs}
    rows = []
    for sub, t in transfers:
        for array in values[t.tensor]:  # the round trip, bit for bit
            back = zero_decompress(zero_compress(array), array.size)
            assert back.view(np.uint32).tobytes() == np.ascontiguousarray(array, np.float32).reshape(-1).view(
                np.uint32).tobytes(), f"{t.tensor}: the round trip changed bits"
        rows.append({"board": board.name, "model": model_path.stem, "subfunction": sub.name, "tensor": t.tensor,
                     "link": t.link, "values": t.values, "zero_share": t.zero_share, "raw_bytes": t.raw_bytes,
                     "compressed_bytes": t.compressed_bytes, "saved_s": t.saved_s, "compressed": t.compressed,
                     "round_trips": len(values[t.tensor])})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", action="append", help="a board (repeatable; default: every board)")
    parser.add_argument("--samples", type=int, default=8, help="synthetic samples the zeros are counted on")
    parser.add_argument("--link-bandwidth", type=float, metavar="B", help="what if every link to and from an FPGA "
                        "moved B bytes a second (default: the board file's)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        boards = [b if args.link_bandwidth is None else with_link_bandwidth(b, args.link_bandwidth, Path(folder))
                  for b in args.board or available_boards()]
        rows = [row for board in boards for model in sorted((ROOT / "examples").glob("*.onnx"))
                for row in links(model, board, args.samples)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| board | model | tensor | link | values | zeros | raw B | compressed B | saved us a sample | compressed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['board']} | {r['model']} | {r['tensor']} | {r['link']} | {r['values']} | {r['zero_share']:.0%} | "
              f"{r['raw_bytes']} | {r['compressed_bytes']} | {r['saved_s'] * 1e6:.1f} | "
              f"{'yes' if r['compressed'] else 'no'} |")
    chosen = [r for r in rows if r["compressed"]]
    print(f"\n{len(chosen)} of {len(rows)} crossing tensors travel compressed, saving "
          f"{sum(r['saved_s'] for r in chosen) * 1e6:.1f} us a sample in all; every round trip was bit-exact "
          f"({sum(r['round_trips'] for r in rows)} tensors)")


if __name__ == "__main__":
    main()
