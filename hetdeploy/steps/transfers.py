"""Step weigh_transfers: which tensors an FPGA subfunction takes from the host or gives it travel
zero-compressed (planning.compression weighs each from its share of zeros on the sizing samples, the
link's seconds a byte and the codec's time; --compress-transfers), recorded per subfunction in
plan.json's "transfers"; the plan's estimate takes what the compressed ones save (or cost, under
``all``). The top's ports (hls_top.port_values) and run.py's and emulate's ends follow the record.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ..core.board import Board
from ..core.plan import Plan, Transfer
from ..intake.model import LoadedModel
from ..intake.ort_adapter import open_in_memory
from ..planning import compression
from ..planning.config import BuildOptions
from ..planning.cost import link_terms, stream_seconds
from .plan_model import measured_figures

SHARE_SAMPLES = 16  # the most sizing samples the zeros are counted on


def zero_shares(model: onnx.ModelProto, tensors: list[str], samples: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Each of ``tensors``' share of values whose bits are all zero (+0.0, what zero_compress drops) over
    ``samples``, the model run on onnxruntime (or qonnx)."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    known = {o.name for o in exposed.graph.output} | {i.name for i in exposed.graph.input}
    described = {v.name: v for v in exposed.graph.value_info}
    for t in (t for t in tensors if t not in known):  # an output, its value_info moved there (qonnx takes one)
        exposed.graph.output.append(described.get(t) or helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None))
    kept = [v for v in exposed.graph.value_info if v.name not in tensors]
    del exposed.graph.value_info[:]
    exposed.graph.value_info.extend(kept)
    session = open_in_memory(exposed, "the model with the tensors crossing a link as outputs")
    zeros, values = dict.fromkeys(tensors, 0), dict.fromkeys(tensors, 0)
    for sample in samples:
        computed = sample | session.run(sample)
        for t in tensors:
            bits = np.ascontiguousarray(computed[t], dtype=np.float32).view(np.uint32)
            zeros[t] += int(np.count_nonzero(bits == 0))
            values[t] += bits.size
    return {t: zeros[t] / values[t] if values[t] else 0.0 for t in tensors}


def weigh_transfers(plan: Plan, loaded: LoadedModel, board: Board, options: BuildOptions,
                    samples: list[dict[str, np.ndarray]]) -> None:
    """``plan``'s FPGA subfunctions' transfers weighed and chosen by ``options.compress_transfers``; none
    recorded under ``none``."""
    fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
    for sub in fpga:
        sub.transfers = []
    if options.compress_transfers == "none" or not fpga:
        return
    crossing = [(sub, t, board.host, sub.device) for sub in fpga for t in sub.inputs]
    crossing += [(sub, t, sub.device, board.host) for sub in fpga for t in sub.outputs]
    shares = zero_shares(loaded.model, sorted({t for _, t, _, _ in crossing}), samples[:SHARE_SAMPLES])
    measured, shapes = measured_figures(loaded, board, options), loaded.tensor_shapes()
    host_bandwidth = board.device(board.host).memory.bandwidth_bytes_per_s
    for sub, tensor, source, target in crossing:
        per_byte, _ = link_terms(board, measured, source, target)  # a tensor's latency is the same either way
        verdict = compression.weigh(int(np.prod(shapes[tensor])), shares[tensor], lambda b: b * per_byte,
                                    host_bandwidth, board.device(sub.device).clock_mhz * 1e6)
        compressed = verdict.pays or options.compress_transfers == "all"
        sub.transfers.append(Transfer(tensor, f"{source}->{target}", verdict.values, verdict.zero_share,
                                      int(verdict.raw_bytes), int(verdict.compressed_bytes), verdict.saved_s,
                                      compressed))
        if compressed:
            sub.estimate.transfer_s -= verdict.saved_s
            sub.estimate.latency_s -= verdict.saved_s
            sub.estimate.batch_s -= plan.estimate.batch * verdict.saved_s
            plan.estimate.latency_s -= verdict.saved_s
    plan.estimate.throughput_per_s = 1.0 / stream_seconds(
        [(s.estimate.resource, s.estimate.batch_s) for s in plan.subfunctions], plan.estimate.batch)
