"""The Python API, in hls4ml's and onnxruntime's habits: plan or build a model for a board, then
run the built pipeline in-process.

    import hetdeploy
    print(hetdeploy.plan("model.onnx", "pynq-z2", policy="support"))      # the plan's table
    pipeline = hetdeploy.build("model.onnx", "pynq-z2", "build_dir", policy="support")
    y = pipeline.predict(x)             # one array per output: FPGA parts in C-simulation
    y = hetdeploy.load("build_dir").predict(x)
    table = hetdeploy.sweep("model.onnx", boards=["pynq-z2", "zcu104"], widths=[8, 16], output="sweep_dir")

Options are ``BuildOptions``' fields (width, precisions, error_budget, reuse_factors, devices,
calibration, ...), or ``config="file.yaml"`` (what ``build --config`` reads) with keyword options over it.
Mistakes raise ``hetdeploy.UserError`` with the one line the CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from ..core.errors import UserError
from ..core.plan import Plan
from ..core.plan_text import plan_table

if TYPE_CHECKING:
    from .sweep import SweepTable


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
        from ..running.emulate import load_build

        self.build_dir = Path(build_dir)
        self.plan = load_build(self.build_dir)
        self._executors = None

    def predict(self, x: np.ndarray | dict[str, np.ndarray]) -> list[np.ndarray]:
        """``x``: one array (a one-input model) or arrays by input name, each one sample or N stacked
        on the batch axis. Returns one array per model output, N samples stacked."""
        from ..running import runtime
        from ..running.samples import split_samples

        if self._executors is None:
            self._executors = runtime.device_executors(runtime.CSimLibraries(self.build_dir), self.plan)
        envs = runtime.stream(self.plan, self._executors, split_samples(x, self.plan.inputs, "predict"),
                              runtime.largest_batch(self.plan) or 1)  # an FPGA call per batch the build takes
        return [np.concatenate([env[o.name] for env in envs]) for o in self.plan.outputs]

    def __repr__(self) -> str:
        fpga = [s for s in self.plan.subfunctions if s.kind == "fpga"]
        return (f"Pipeline({str(self.build_dir)!r}: {self.plan.source_model} on {self.plan.board}, "
                f"{len(self.plan.subfunctions)} subfunctions, {len(fpga)} on the FPGA)")


def _options(model, board, config, output, options: dict):
    """BuildOptions from a config file (``config``), the keyword options over it, and model and board
    over both (as the CLI merges them)."""
    import difflib

    from ..planning.config import OPTIONS, BuildOptions, load_config

    known = [o.field for o in OPTIONS if o.field not in ("model", "board")]
    for key in options:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            raise UserError(f"unknown option '{key}'" + (f"; did you mean '{near[0]}'?" if near else
                                                         f" (options: {', '.join(known)})"))
    merged = load_config(config) if config is not None else {}
    merged.update(options)
    merged.update({k: v for k, v in (("model", model), ("board", board)) if v is not None})
    missing = [k for k in ("model", "board") if merged.get(k) is None]
    if missing:
        raise UserError(f"give {' and '.join(missing)} (as arguments or in the config file)")
    return BuildOptions(**dict(merged, model=Path(merged["model"]), out_dir=Path(output)))


def plan(model: Optional[str | Path] = None, board: Optional[str] = None, config: Optional[str | Path] = None,
         **options) -> PlanView:
    """Partition ``model`` for ``board`` and fold its FPGA units (no HLS); ``hetdeploy plan``.
    ``config``: a config file (YAML) whose options the keyword options override."""
    from ..steps.build import plan_stages

    _, board_data, result = plan_stages(_options(model, board, config, ".", options), lambda k, what: None)
    return PlanView(result, plan_table(result, board_data, nodes=False))


def build(model: Optional[str | Path] = None, board: Optional[str] = None, output: str | Path = "build",
          config: Optional[str | Path] = None, progress: Optional[bool] = False, from_step: Optional[str] = None,
          to_step: Optional[str] = None, **options) -> Optional[Pipeline]:
    """Every stage of ``hetdeploy build`` into the folder ``output``; the built pipeline.
    ``config``: a config file (YAML) whose options the keyword options override; ``progress``: print
    the stages' progress lines (to stderr); ``from_step``, ``to_step``: as ``--from-step`` and
    ``--to-step`` (a build stopped before its last step returns None)."""
    from ..steps.build import build as run_build

    kwargs = {} if progress else {"progress": lambda message: None}
    run_build(_options(model, board, config, output, options), from_step=from_step, to_step=to_step, **kwargs)
    return Pipeline(output) if (Path(output) / "plan.json").is_file() else None


def sweep(model: Optional[str | Path] = None, boards: Sequence[str] = (), widths: Sequence[int] = (16,),
          policies: Sequence[str] = ("latency",), reuse_factors: Sequence[Optional[int]] = (None,),
          output: str | Path = "sweep", build: bool = False, labels: Optional[str | Path] = None,
          scheduler: Optional[str] = None, workers: Optional[int] = None, retry_failed: bool = False,
          config: Optional[str | Path] = None, progress: bool = False, **options) -> "SweepTable":
    """``hetdeploy sweep``: every point of boards x widths x policies x reuse factors (None: each unit
    folded to fit) planned, or with ``build`` built and verified, on Dask (a local cluster of
    ``workers`` processes, else the one at ``scheduler``), recorded in the folder ``output``. Returns
    the points' records (a list of dicts, in grid order: ``pandas.DataFrame(table)`` makes a frame of
    it; ``print(table)`` shows it); ``options`` and ``config`` as for ``plan``, for every point."""
    from ..planning.config import OPTIONS, worker_count
    from .sweep import grid, sweep as run_sweep

    axes = {o.field: o.axis for o in OPTIONS if o.axis}
    for option in set(options) & set(axes):
        raise UserError(f"option {option}: the sweep varies it; give {axes[option]}=[...]")
    base = _options(model, boards[0] if boards else "", config, output, options)
    if workers is not None:
        try:
            worker_count(workers)
        except ValueError as err:
            raise UserError(f"option workers: {err}") from None
    return run_sweep(base.model, grid(boards, widths, policies, reuse_factors), base, Path(output), build=build,
                     labels=str(labels) if labels else None, scheduler=scheduler, workers=workers,
                     retry_failed=retry_failed, bar=progress)


def load(build_dir: str | Path) -> Pipeline:
    """A build folder ``hetdeploy build`` wrote, ready to ``predict``."""
    return Pipeline(build_dir)
