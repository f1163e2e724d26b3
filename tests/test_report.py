"""The report as a person sees it: rendered by a headless Chromium, the screenshot read back.

Needs Chromium (Debian's ``chromium``, which the README's test command and CI install where they can);
where it is missing the test says so and is skipped, except under CI (CI=true), where it fails: CI must
run it. The structure of the page (one SVG per picture, a rectangle per buffer, the tables) is checked
without a browser in test_memory.py.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.slow
def test_report_renders_in_a_headless_browser_with_every_picture(built, tmp_path):
    from matplotlib import image

    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no headless Chromium under CI: .ci/run installs Debian's chromium (apt-get install chromium)")
        pytest.skip("no headless Chromium on this machine (apt install chromium)")

    from hetdeploy.core.plan import Plan
    from hetdeploy.running.report import subfunction_colours

    _, out = built("split_by_lrn")
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars", "--window-size=1200,5000",
                    f"--screenshot={shot}", (out / "report.html").resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)
    pixels = image.imread(str(shot))[..., :3]
    assert pixels.shape[:2] == (5000, 1200)

    def drawn(colour) -> int:
        return int(np.sum(np.all(np.abs(pixels - np.array(colour[:3])) < 0.02, axis=-1)))

    plan = Plan.load(out / "plan.json")
    # every subfunction's colour is on the page (graph nodes, legend, chip totals), in more than a few pixels
    for name, colour in subfunction_colours(plan).items():
        assert drawn(colour) > 200, name
    # the memory maps' on-chip buffers and the latency bars' compute segments
    assert drawn((0xf4 / 255, 0xb1 / 255, 0x83 / 255)) > 2000
    assert drawn((0x5b / 255, 0x9b / 255, 0xd5 / 255)) > 500
    # text: dark pixels in every band of the page down to the last memory map
    rows = np.where(np.any(pixels.mean(axis=-1) < 0.3, axis=1))[0]
    assert rows.max() > 2000


def test_each_subfunction_has_a_colour_of_its_own_and_each_time_bar_its_total_inside_the_frame():
    """Two FPGA subfunctions used to be two shades of one orange; a latency bar ran into the frame.
    Every pair of subfunction colours is far apart (ten far apart, up to 20 apart), and in the latency chart
    of the alexnet-style network (two FPGA subfunctions around an LRN on the PYNQ-Z2's CPU) each bar's
    total is written inside the axes, in the unit the longest bar reads best in."""
    from itertools import combinations
    from types import SimpleNamespace

    from hetdeploy.planning.config import BuildOptions
    from hetdeploy.running.report import latency_figure, subfunction_colours
    from hetdeploy.steps.build import plan_stages

    for count in range(2, 21):
        plan = SimpleNamespace(subfunctions=[SimpleNamespace(name=f"sf{k}", kind="fpga") for k in range(count)])
        colours = list(subfunction_colours(plan).values())
        nearest = min(np.abs(np.subtract(a[:3], b[:3])).sum() for a, b in combinations(colours, 2))
        assert nearest > (0.35 if count <= 10 else 0.12), count  # beyond ten, light and dark pairs

    model = Path(__file__).resolve().parent.parent / "examples" / "alexnet_style.onnx"
    _, _, plan = plan_stages(BuildOptions(model, "pynq-z2", Path(".")), lambda k, what: None, lambda note: None)
    assert [s.kind for s in plan.subfunctions] == ["fpga", "cpu", "fpga"]
    figure = latency_figure(plan)
    axes = figure.axes[0]
    figure.canvas.draw()
    right = axes.get_window_extent().x1
    totals = [t for t in axes.texts if t.get_text().strip().endswith(("us", "ms", " s"))]
    assert len(totals) == 3 and all(t.get_window_extent().x1 < right for t in totals)
    assert axes.get_xlabel() == "estimated time per call (ms)"


def test_the_readmes_picture_of_a_plan_is_what_its_script_draws():
    """docs/plan.svg is docs/plan_picture.py's output (the example's plan drawn as report.html draws it): rewrite
    it with `python docs/plan_picture.py > docs/plan.svg` after a change to the plan or the drawing."""
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("plan_picture", root / "docs" / "plan_picture.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert "docs/plan.svg" in (root / "README.md").read_text()
    assert script.picture() == (root / "docs" / "plan.svg").read_text()
