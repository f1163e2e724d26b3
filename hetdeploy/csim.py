"""g++ C-simulation of a generated HLS project, and calling it through ctypes.

The library is compiled with a *relative* weights folder so that a build
folder can be moved after it is built: calls run with the project folder as
the working directory (hls4ml's loader reads ``WEIGHTS_DIR/<name>.txt`` on the
first call and calls ``exit(1)`` when a file is missing, so the folder is
checked before any call).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import UserError

# -fno-gnu-unique keeps each library's weight-loading statics its own when several
# projects are loaded into one process (FACTS.md section 6).
BUILD_SCRIPT = """#!/bin/sh
# C-simulation library of this HLS project, written by hetdeploy. Run from this folder.
set -e
CXX="${{CXX:-g++}}"
FLAGS="-O2 -fPIC -std=c++17 -fno-gnu-unique -Ifirmware/ap_types -I. -DWEIGHTS_DIR=\\"firmware/weights\\""
$CXX $FLAGS -c firmware/{top}.cpp -o {top}.o
$CXX $FLAGS -c {top}_bridge.cpp -o {top}_bridge.o
$CXX -shared {top}.o {top}_bridge.o -o {library}
rm -f {top}.o {top}_bridge.o
"""


def compile_library(project_dir: Path, top: str) -> Path:
    """Compile ``project_dir`` into its C-simulation library; returns the library path."""
    library = f"firmware/lib{top}.so"
    script = project_dir / "build_csim.sh"
    script.write_text(BUILD_SCRIPT.format(top=top, library=library))
    result = subprocess.run(["sh", "build_csim.sh"], cwd=project_dir, capture_output=True, text=True)
    if result.returncode != 0:
        (project_dir / "build_csim.log").write_text(result.stdout + result.stderr)
        first_error = next((l for l in result.stderr.splitlines() if "error" in l), result.stderr.strip()[:200])
        raise UserError(f"{project_dir}: g++ failed to compile the C-simulation ({first_error}); see build_csim.log")
    return project_dir / library


@contextlib.contextmanager
def _working_directory(path: Path):
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


class CSimLibrary:
    """``top_float(in_0, ..., out_0, ...)`` of a compiled hls4ml bridge, one sample per call."""

    def __init__(self, project_dir: Path, library: Path, top: str,
                 input_sizes: Sequence[int], output_sizes: Sequence[int]):
        self.project_dir = Path(project_dir)
        if not library.is_file():
            raise UserError(f"{library}: C-simulation library missing; rebuild with 'hetdeploy build'")
        if not (self.project_dir / "firmware" / "weights").is_dir():
            raise UserError(f"{self.project_dir}: firmware/weights missing; rebuild with 'hetdeploy build'")
        self._lib = ctypes.CDLL(str(library.resolve()), mode=os.RTLD_LOCAL)
        self._top = getattr(self._lib, f"{top}_float")
        pointer = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
        self._top.argtypes = [pointer] * (len(input_sizes) + len(output_sizes))
        self._top.restype = None
        self.input_sizes = list(input_sizes)
        self.output_sizes = list(output_sizes)

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        flat_in = [np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in inputs]
        for x, size in zip(flat_in, self.input_sizes):
            if x.size != size:
                raise ValueError(f"C-simulation input has {x.size} values, the top function takes {size}")
        outs = [np.zeros(size, dtype=np.float32) for size in self.output_sizes]
        with _working_directory(self.project_dir):
            self._top(*flat_in, *outs)
        return outs
