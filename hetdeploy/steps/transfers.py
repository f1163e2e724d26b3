"""Zero-compressed transfers' input: each tensor's share of zeros on the sizing samples, which the cost
model weighs (``CostModel.crossing``) for every tensor an FPGA subfunction takes from the host or gives it
(--compress-transfers); the plan records what it chose per subfunction (plan.json's "transfers"), the top's
ports (hls_top) and run.py's and emulate's ends (board_runtime.to_port, from_port) follow the record.
"""

from __future__ import annotations

import numpy as np
import onnx

from ..core.board import Board
from ..intake.model import LoadedModel
from ..intake.ort_adapter import open_in_memory, with_outputs
from ..planning.config import BuildOptions
from ..running.runtime import model_feeds

SHARE_SAMPLES = 16  # the most sizing samples the zeros are counted on


def zero_shares(model: onnx.ModelProto, tensors: list[str], samples: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Each float tensor of ``tensors``' share of values whose bits are all zero (+0.0, what zero_compress
    drops) over ``samples``, the model run on onnxruntime (or qonnx)."""
    session = open_in_memory(with_outputs(model, tensors), "the model with every tensor as an output (to count its "
                             "zeros)")
    zeros: dict[str, int] = {}
    values: dict[str, int] = {}
    for sample in samples:
        computed = sample | session.run(sample)
        for t in tensors:
            array = np.asarray(computed[t])
            if array.dtype.kind == "f" and array.size:
                bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
                zeros[t] = zeros.get(t, 0) + int(np.count_nonzero(bits == 0))
                values[t] = values.get(t, 0) + bits.size
    return {t: zeros[t] / values[t] for t in values}


def count_zeros(loaded: LoadedModel, board: Board, options: BuildOptions,
                samples: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Every float tensor's share of zeros on ``samples`` (at most ``SHARE_SAMPLES`` of them), where the
    board has an FPGA and --compress-transfers weighs compression; else none."""
    if options.compress_transfers == "none" or all(d.kind != "fpga" for d in board.devices):
        return {}
    feeds = [model_feeds(loaded.input_reshapes, sample) for sample in samples[:SHARE_SAMPLES]]
    inputs = set(feeds[0]) if feeds else set()
    return zero_shares(loaded.model, sorted(inputs | {t for node in loaded.graph.nodes for t in node.outputs if t}),
                       feeds)
