"""The exact buffer-packing search (``exact_packing.cpp``), compiled once with g++ and called through
ctypes: memory.fit's engine.

The library is kept in the cache folder (``cache.default_root()/native/``) under a key of the
source and the compiler, compiled into a temporary file and renamed into place, so that two
processes compiling at once both end with a whole library.
"""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..core import processes
from ..core.cache import default_root, digest
from ..core.csim import compiler, compiler_identity, first_error
from ..core.errors import ToolError

SOURCE = Path(__file__).with_name("exact_packing.cpp")
_INT64_ARRAY = np.ctypeslib.ndpointer(dtype=np.int64, flags="C_CONTIGUOUS")


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    folder = default_root() / "native" / digest(SOURCE.read_bytes(), compiler_identity())[:16]
    library = folder / "exact_packing.so"
    if not library.exists():
        staging = None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle, staging = tempfile.mkstemp(dir=folder, suffix=".so")
            os.close(handle)
            result = processes.run([compiler(), "-O2", "-std=c++17", "-shared", "-fPIC", "-o", staging, str(SOURCE)])
            if result.returncode != 0:
                raise ToolError(f"{compiler()} failed to compile hetdeploy's buffer-packing search {SOURCE}: "
                                f"{first_error(result.stderr)}")
            os.replace(staging, library)
        except OSError as error:
            raise ToolError(f"could not compile hetdeploy's buffer-packing search {SOURCE} with {compiler()} "
                            f"into {folder}: {error}") from None
        finally:
            if staging is not None and os.path.exists(staging):  # a failed compile leaves nothing behind
                os.unlink(staging)
    loaded = ctypes.CDLL(str(library))
    search = loaded.hetdeploy_exact_packing
    search.argtypes = [ctypes.c_int64, _INT64_ARRAY, _INT64_ARRAY, _INT64_ARRAY, ctypes.c_int64, ctypes.c_char_p,
                       ctypes.c_int64, _INT64_ARRAY]
    search.restype = ctypes.c_int
    return loaded


def search(sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int], capacity: int,
           orders: Sequence[str], nodes: int) -> Optional[list[int]]:
    """Offsets for buffers live at steps [firsts[i], lasts[i]] that keep every one below
    ``capacity`` and no two live at one step on a common byte, searching at most ``nodes`` nodes
    with the static ``orders`` (strings of exact_packing.cpp's keys) in turn; None when there
    are none, or the nodes ran out first."""
    n = len(sizes)
    offsets = np.zeros(n, dtype=np.int64)
    status = _library().hetdeploy_exact_packing(
        n, np.ascontiguousarray(sizes, dtype=np.int64), np.ascontiguousarray(firsts, dtype=np.int64),
        np.ascontiguousarray(lasts, dtype=np.int64), capacity, ",".join(orders).encode(), nodes, offsets)
    return offsets.tolist() if status == 1 else None
