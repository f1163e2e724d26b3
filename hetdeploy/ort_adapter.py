"""onnxruntime behind one small interface."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort


def providers_for(kind: str) -> list[str]:
    """GPU subfunctions use CUDA when this onnxruntime has it, else the CPU."""
    available = ort.get_available_providers()
    if kind == "gpu" and "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


class OrtModel:
    def __init__(self, path: Path | str | bytes, kind: str = "cpu"):
        options = ort.SessionOptions()
        options.log_severity_level = 3
        source = path if isinstance(path, bytes) else str(path)
        self.session = ort.InferenceSession(source, options, providers=providers_for(kind))
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        # (name, shape) where every dimension is fixed (the model's batch is fixed at intake)
        self.inputs = [(i.name, list(i.shape)) for i in self.session.get_inputs()]
        self.outputs = [(o.name, list(o.shape)) for o in self.session.get_outputs()]

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = self.session.run(None, {n: feeds[n] for n in self.input_names})
        return dict(zip(self.output_names, results))
