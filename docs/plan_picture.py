"""The README's picture of a plan (docs/plan.svg): the shipped AlexNet-style example planned for the PYNQ-Z2
under the latency policy, its nodes coloured by subfunction, as a build's report.html draws it.

    .venv/bin/python docs/plan_picture.py > docs/plan.svg

Plans only (no build); the same bytes each run. tests/test_report.py fails when docs/plan.svg is not what
this writes."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL, BOARD = ROOT / "examples" / "alexnet_style.onnx", "pynq-z2"


def picture() -> str:
    from hetdeploy.intake.ort_adapter import graph_edges
    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.running.report import graph_figure, svg
    from hetdeploy.steps.build import plan_stages

    _, _, plan = plan_stages(BuildOptions(model=MODEL, board=BOARD, out_dir=ROOT / "build"), lambda k, line: None)
    edges, ops = graph_edges(MODEL)
    return svg(graph_figure(plan, edges, ops)) + "\n"


if __name__ == "__main__":
    sys.stdout.write(picture())
