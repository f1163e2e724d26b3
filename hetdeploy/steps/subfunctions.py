"""The subfunction models of a build: the user's model (source.onnx, the reference), the normalised
one (model.onnx) and one model per subfunction, written and checked to chain back into the model on
onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from ..core.board_runtime import per_sample
from ..core.errors import UserError
from ..core.graph import QONNX_DOMAINS
from ..core.plan import Plan
from ..intake import rewrites
from ..intake.model import QUANTIZER_OPS, LoadedModel
from ..intake.ort_adapter import open_model
from ..intake.subgraph import extract, with_open_batch
from ..running import runtime, verify

# Chaining the subfunctions on onnxruntime must reproduce the model; only
# float reassociation inside onnxruntime's kernels may differ.
CHAIN_TOLERANCE = 1e-5


def write_subfunctions(plan: Plan, loaded: LoadedModel, build_dir: Path, samples: dict[str, np.ndarray]) -> None:
    """source.onnx (the reference), model.onnx (normalised) and one model per subfunction (a batched one with its
    batch axis open); then check that chaining them on onnxruntime, the batched ones a batch a call, reproduces the
    source model, a sample a call, on ``samples`` (the user's inputs, or synthetic ones; on axis 0)."""
    onnx.save(loaded.source, str(build_dir / "source.onnx"))
    onnx.save(loaded.model, str(build_dir / plan.model))
    (build_dir / "subfunctions").mkdir()
    qdq = any(n.op_type == "QuantizeLinear" for n in loaded.source.graph.node)
    for sub in plan.subfunctions:
        sub.onnx = f"subfunctions/{sub.name}.onnx"
        model = extract(loaded.model, sub)
        if sub.kind != "fpga":  # the board runs it on onnxruntime alone; a QDQ model's pairs stay pairs
            rewrites.quantizers_as_standard_onnx(model, zero_points_as_qdq=qdq)
            left = next((n for n in model.graph.node if n.domain in QONNX_DOMAINS), None)
            if left is not None:
                raise UserError(f"node '{left.name}' ({left.op_type}) would run on {sub.device} (subfunction "
                                f"{sub.name}), where only qonnx runs it and the board has onnxruntime alone: put it "
                                f"on an FPGA that takes it (--device NODE=DEVICE) or export it as standard ONNX")
            if sub.batched:
                model = with_open_batch(model)
        onnx.save(model, str(build_dir / sub.onnx))
    chain = runtime.file_executors(build_dir, plan)
    source = open_model(build_dir / "source.onnx")
    # Intake's rewrites (a BatchNormalization folded into a convolution) reorder float arithmetic;
    # a quantizer after them turns a last-bit difference into one of its steps, now and then.
    quantized = any(n.op in QUANTIZER_OPS for n in loaded.graph.nodes)
    check = verify.SubfunctionCheck("chain", "pipeline", plan.relative_tolerance if quantized else CHAIN_TOLERANCE)
    got, want = runtime.run(plan, chain, samples), per_sample(source.run, samples)
    check.add({t: got[t] for t in want}, want)
    if any(t.reference_nonfinite for t in check.tensors.values()):
        where = "a --calibration sample" if plan.calibration.source == "file" else "a random sample"
        raise UserError(f"the model on {where}: {check.problem()}")
    if not check.passed:
        raise RuntimeError(f"the subfunction chain on onnxruntime against the model: {check.problem()}")
