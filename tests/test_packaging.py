"""The package carries what it reads at run time: a wheel built from the repository holds the board
files and the HLS templates, which hetdeploy finds with importlib.resources wherever it is installed."""

import subprocess
import sys
import zipfile
from pathlib import Path

from hetdeploy.core.board import BOARDS_DIR, available_boards
from hetdeploy.fpga.templates import TEMPLATES

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_holds_board_files_and_hls_templates(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                             str(ROOT), "-w", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("hetdeploy-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"hetdeploy/boards/{b}.yaml" for b in available_boards()} <= names
    templates = {f"hetdeploy/hls/{t.relative_to(TEMPLATES).as_posix()}" for t in TEMPLATES.rglob("*") if t.is_file()}
    assert "hetdeploy/hls/kinds/hls4ml.cpp.in" in templates and templates <= names
    assert "hetdeploy/boards/README.md" in names
    assert BOARDS_DIR.parent == TEMPLATES.parent == ROOT / "hetdeploy"
