"""Test programs of hetdeploy's C++ headers (hls/*.h over ap_types), compiled with g++. ap_types' ap_fixed.h and
ap_int.h, which every one includes, take about a second of each compile to parse: they are read from a header
precompiled once per process and flags (as the build's Makefile does, hls/Makefile.in's PRECOMPILED)."""

from __future__ import annotations

import functools
import subprocess
import tempfile
from pathlib import Path

from hetdeploy.core.csim import PRECOMPILED_TEXT, compiler
from hetdeploy.fpga.hls4ml_adapter import ap_types_headers
from hetdeploy.fpga.hls_top import TEMPLATES

_FOLDER = tempfile.TemporaryDirectory(prefix="hetdeploy-test-headers-")  # removed when the process ends


@functools.lru_cache(maxsize=None)
def _precompiled(flags: tuple[str, ...]) -> Path:
    folder = Path(_FOLDER.name)
    header = folder / f"ap_types_{len(list(folder.glob('*.h')))}.h"  # one for each set of flags
    header.write_text(PRECOMPILED_TEXT)  # the build's own precompiled header
    subprocess.run([compiler(), *flags, "-x", "c++-header", str(header), "-o", f"{header}.gch"], check=True,
                   capture_output=True)
    return header


def compile_program(source: Path, binary: Path, *flags: str) -> None:
    """g++ ``flags`` (the standard, the optimisation) ``source`` into ``binary``, with hls/ and ap_types' folders on
    the include path; a compile error raises subprocess.CalledProcessError."""
    flags = (*flags, f"-I{TEMPLATES}", f"-I{ap_types_headers()}")
    header = _precompiled(flags)
    subprocess.run([compiler(), *flags, "-include", str(header), "-Winvalid-pch", "-o", str(binary), str(source)],
                   check=True, capture_output=True)
