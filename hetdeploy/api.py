"""The Python API, in hls4ml's and onnxruntime's habits: plan or build a model for a board, then
run the built pipeline in-process.

    import hetdeploy
    print(hetdeploy.plan("model.onnx", "pynq-z2", policy="support"))      # the plan's table
    pipeline = hetdeploy.build("model.onnx", "pynq-z2", "build_dir", policy="support")
    y = pipeline.predict(x)             # one array per output: FPGA parts in C-simulation
    y = hetdeploy.load("build_dir").predict(x)

Options are ``BuildOptions``' fields (width, precisions, error_budget, reuse_factors, calibration, ...).
Mistakes raise ``hetdeploy.UserError`` with the one line the CLI prints.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .plan import Plan


@dataclass
class PlanView:
    """A plan with the table ``hetdeploy plan`` prints (``str``, and HTML in a notebook)."""

    plan: Plan
    table: str

    def __str__(self) -> str:
        return self.table

    def _repr_html_(self) -> str:
        from html import escape

        return f"<pre>{escape(self.table)}</pre>"


class Pipeline:
    """A build folder, run in-process: FPGA subfunctions through their C-simulation libraries, the
    rest on onnxruntime (or qonnx), exactly as ``hetdeploy emulate`` runs them."""

    def __init__(self, build_dir: str | Path):
        from .emulate import load_build

        self.build_dir = Path(build_dir)
        self.plan = load_build(self.build_dir)
        self._executors = None

    def predict(self, x: np.ndarray | dict[str, np.ndarray]) -> list[np.ndarray]:
        """``x``: one array (a one-input model) or arrays by input name, each one sample or N stacked
        on the batch axis. Returns one array per model output, N samples stacked."""
        from . import runtime
        from .samples import split_samples

        if self._executors is None:
            self._executors = runtime.device_executors(self.build_dir, self.plan)
        outputs = [o.name for o in self.plan.outputs]
        results: dict[str, list[np.ndarray]] = {name: [] for name in outputs}
        for feeds in split_samples(x, self.plan.inputs, "predict"):
            env = runtime.run(self.plan, self._executors, feeds)
            for name in outputs:
                results[name].append(env[name])
        return [np.concatenate(results[name]) for name in outputs]

    def __repr__(self) -> str:
        fpga = [s for s in self.plan.subfunctions if s.kind == "fpga"]
        return (f"Pipeline({str(self.build_dir)!r}: {self.plan.source_model} on {self.plan.board}, "
                f"{len(self.plan.subfunctions)} subfunctions, {len(fpga)} on the FPGA)")


def plan(model: str | Path, board: str, **options) -> PlanView:
    """Partition ``model`` for ``board`` and fold its FPGA units (no HLS); ``hetdeploy plan``."""
    from .build import BuildOptions, plan_stages
    from .cli import print_plan

    _, board_data, result = plan_stages(BuildOptions(model=Path(model), board=board, out_dir=Path("."), **options),
                                        lambda k, what: None)
    table = io.StringIO()
    with redirect_stdout(table):
        print_plan(result, board_data, nodes=False)
    return PlanView(result, table.getvalue())


def build(model: str | Path, board: str, output: str | Path, progress: Optional[bool] = False,
          **options) -> Pipeline:
    """Every stage of ``hetdeploy build`` into the folder ``output``; the built pipeline.
    ``progress``: print the stages' progress lines (to stderr)."""
    from .build import BuildOptions
    from .build import build as run_build

    kwargs = {} if progress else {"progress": lambda message: None}
    run_build(BuildOptions(model=Path(model), board=board, out_dir=Path(output), **options), **kwargs)
    return Pipeline(output)


def load(build_dir: str | Path) -> Pipeline:
    """A build folder ``hetdeploy build`` wrote, ready to ``predict``."""
    return Pipeline(build_dir)
