"""A build folder's checkpoint, ``DIR/checkpoint/``: where the build's steps stood when it ended (after
its last step, or the one ``--to-step`` named), so that ``hetdeploy build --from-step STEP`` goes on
from there as FINN's builds go on from a step's saved model: the steps done, the model, board and
settings they ran on, the widths they chose, the plan as it stood and the verified outputs."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .errors import UserError
from .plan import Plan, PrecisionSearch, read_json

CHECKPOINT = "checkpoint"  # the folder in a build folder
STATE = "state.json"
CHECKPOINT_FORMAT = 1


@dataclasses.dataclass
class Checkpoint:
    steps: list[str]  # the steps done, in order
    remaining: list[str]  # the steps not done (--to-step stopped before them), in order
    model_digest: str  # the source model's bytes (``cache.digest``)
    board: str
    config: dict[str, Any]  # the settings the steps ran with (``config.resolved_config``)
    searched_widths: dict[str, int]  # node -> the bits --error-budget's search gave it
    layer_widths: dict[str, int]  # node -> its bits as the build ended: the search's, widened where verify widened
    unit_widths: dict[str, int]  # FPGA execution unit -> its bits, once the unit_widths step ran
    search: Optional[PrecisionSearch] = None  # --error-budget's search, once it ran
    outputs: list[str] = dataclasses.field(default_factory=list)  # the verified outputs, in emulated/<k>.npy
    format: int = CHECKPOINT_FORMAT


def write_checkpoint(build_dir: Path, checkpoint: Checkpoint, plan: Optional[Plan],
                     emulated: Optional[dict[str, np.ndarray]]) -> None:
    """``checkpoint`` into ``build_dir``/checkpoint, with the plan as it stands (once partitioned)
    and the pipeline's verified outputs (once verified: ``np.save``, the same bytes for the same
    arrays)."""
    folder = build_dir / CHECKPOINT
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    checkpoint.outputs = list(emulated or {})
    if plan is not None:
        plan.save(folder / "plan.json")
    for k, name in enumerate(checkpoint.outputs):  # by position: output names are the model's, not ours
        (folder / "emulated").mkdir(exist_ok=True)
        np.save(folder / "emulated" / f"{k}.npy", emulated[name], allow_pickle=False)
    (folder / STATE).write_text(json.dumps(dataclasses.asdict(checkpoint), indent=2, allow_nan=False) + "\n")


def read_checkpoint(build_dir: Path) -> tuple[Checkpoint, Optional[Plan], Optional[dict[str, np.ndarray]]]:
    """The checkpoint ``write_checkpoint`` left in ``build_dir``: (it, the plan or None, the verified
    outputs or None); one line naming the file when there is none or it is damaged."""
    checkpoint = read_json(build_dir / CHECKPOINT / STATE, Checkpoint, "checkpoint", CHECKPOINT_FORMAT,
                           f"no checkpoint here; {build_dir} holds no build to go on from (build it first, or leave "
                           f"--from-step out)")
    plan_path = build_dir / CHECKPOINT / "plan.json"
    plan = Plan.load(plan_path) if plan_path.is_file() else None
    if not checkpoint.outputs:
        return checkpoint, plan, None
    emulated = {}
    for k, name in enumerate(checkpoint.outputs):
        try:
            emulated[name] = np.load(build_dir / CHECKPOINT / "emulated" / f"{k}.npy", allow_pickle=False)
        except (OSError, ValueError) as err:
            raise UserError(f"{build_dir / CHECKPOINT / 'emulated' / f'{k}.npy'}: cannot read the verified output "
                            f"'{name}' ({type(err).__name__})") from None
    return checkpoint, plan, emulated
