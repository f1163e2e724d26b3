"""g++ C-simulation of a generated HLS project, and calling it through ctypes.

The library is compiled with a *relative* weights folder so that a build
folder can be moved after it is built: calls run with the project folder as
the working directory (hls4ml's loader reads ``WEIGHTS_DIR/<prefix><name>.txt``
on the first call and calls ``exit(1)`` when a file is missing, so the folders
are checked before any call).
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

def compile_library(project_dir: Path, library: str) -> Path:
    """Run the project's Makefile (hls_top writes it) with a job per core; returns the library path.
    The objects are removed afterwards: the build folder keeps sources, library and Makefile."""
    result = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 1}"], cwd=project_dir, capture_output=True,
                            text=True)
    for obj in sorted(project_dir.rglob("*.o")):
        obj.unlink()
    if result.returncode != 0:
        (project_dir / "build_csim.log").write_text(result.stdout + result.stderr)
        first_error = next((line for line in result.stderr.splitlines() if "error" in line),
                           result.stderr.strip()[:200])
        raise RuntimeError(f"{project_dir}: g++ failed to compile the C-simulation ({first_error}); "
                           f"see build_csim.log")
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
    """A compiled C-simulation library; ``entry(name, ...)`` gives one of its float entry points
    (``name(in_0, ..., out_0, ...)``, one sample per call)."""

    def __init__(self, project_dir: Path, library: Path, weight_dirs: Sequence[str]):
        self.project_dir = Path(project_dir)
        if not library.is_file():
            raise UserError(f"{library}: C-simulation library missing; rebuild with 'hetdeploy build'")
        for folder in weight_dirs:
            if not (self.project_dir / folder).is_dir():
                raise UserError(f"{self.project_dir / folder}: weights missing; rebuild with 'hetdeploy build'")
        self._lib = ctypes.CDLL(str(library.resolve()), mode=os.RTLD_LOCAL)

    def load_ddr(self, entry: str, image: Path) -> None:
        """Fill the library's DDR region from ``image`` (through ``entry``, <top>_load_ddr)."""
        if not image.is_file():
            raise UserError(f"{image}: DDR image missing; rebuild with 'hetdeploy build'")
        data = image.read_bytes()
        function = getattr(self._lib, entry)
        function.argtypes, function.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
        if function(data, len(data)) != 0:
            raise UserError(f"{image}: {len(data)} bytes, more than the DDR region of the C-simulation library")

    def entry(self, name: str, input_sizes: Sequence[int], output_sizes: Sequence[int]):
        function = getattr(self._lib, name)
        pointer = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
        function.argtypes = [pointer] * (len(input_sizes) + len(output_sizes))
        function.restype = None

        def call(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            flat_in = [np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in inputs]
            for x, size in zip(flat_in, input_sizes):
                if x.size != size:
                    raise ValueError(f"C-simulation input has {x.size} values, {name} takes {size}")
            outs = [np.zeros(size, dtype=np.float32) for size in output_sizes]
            with _working_directory(self.project_dir):
                function(*flat_in, *outs)
            return outs

        return call
