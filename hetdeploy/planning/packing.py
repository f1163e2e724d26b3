"""The buffer-packing searches, compiled once with g++ and called through ctypes: the exact search
(``exact_packing.cpp``, memory.fit's engine) and greedy with its hill climb (``greedy_packing.cpp``,
memory._greedy_search's).

The library is kept in the cache folder (``cache.default_root()/native/``) under a key of the
sources and the compiler, compiled into a temporary file and renamed into place, so that two
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

SOURCES = tuple(Path(__file__).with_name(name) for name in ("exact_packing.cpp", "greedy_packing.cpp"))
_INT64_ARRAY = np.ctypeslib.ndpointer(dtype=np.int64, flags="C_CONTIGUOUS")


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    folder = default_root() / "native" / digest(*(source.read_bytes() for source in SOURCES), compiler_identity())[:16]
    library = folder / "packing.so"
    if not library.exists():
        staging = None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle, staging = tempfile.mkstemp(dir=folder, suffix=".so")
            os.close(handle)
            result = processes.run([compiler(), "-O2", "-std=c++17", "-shared", "-fPIC", "-o", staging,
                                    *map(str, SOURCES)])
            if result.returncode != 0:
                raise ToolError(f"{compiler()} failed to compile hetdeploy's buffer-packing searches "
                                f"{SOURCES[0].parent}/*_packing.cpp: {first_error(result.stderr)}")
            os.replace(staging, library)
        except OSError as error:
            raise ToolError(f"could not compile hetdeploy's buffer-packing searches {SOURCES[0].parent}/*_packing.cpp "
                            f"with {compiler()} into {folder}: {error}") from None
        finally:
            if staging is not None and os.path.exists(staging):  # a failed compile leaves nothing behind
                os.unlink(staging)
    loaded = ctypes.CDLL(str(library))
    search = loaded.hetdeploy_exact_packing
    search.argtypes = [ctypes.c_int64, _INT64_ARRAY, _INT64_ARRAY, _INT64_ARRAY, ctypes.c_int64, ctypes.c_char_p,
                       ctypes.c_int64, _INT64_ARRAY]
    search.restype = ctypes.c_int
    climb = loaded.hetdeploy_greedy_climb
    climb.argtypes = [ctypes.c_int64, _INT64_ARRAY, _INT64_ARRAY, _INT64_ARRAY, ctypes.c_int64, _INT64_ARRAY,
                      ctypes.c_int64, _INT64_ARRAY, ctypes.c_int64, _INT64_ARRAY, ctypes.c_int64, ctypes.c_int64,
                      _INT64_ARRAY, _INT64_ARRAY, _INT64_ARRAY]
    climb.restype = None
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


def greedy_climb(sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int],
                 capacities: Sequence[Optional[int]], last_resort: int, order: Sequence[int],
                 swaps: Sequence[tuple[int, int]] = (), goal: tuple[int, int] = (0, 0)
                 ) -> tuple[list[int], list[int], tuple[int, int]]:
    """Greedy's placement of the buffers live at steps [firsts[i], lasts[i]] (numbered densely from 0),
    taken in ``order``, into the pools of ``capacities`` (None: unbounded; the last one is), then the
    hill climb over ``swaps`` of two places of the order while its score is above ``goal``: each
    buffer's pool and offset, and the score (greedy_packing.cpp)."""
    n = len(sizes)
    pools, offsets, score = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(2, dtype=np.int64)
    _library().hetdeploy_greedy_climb(
        n, np.ascontiguousarray(sizes, dtype=np.int64), np.ascontiguousarray(firsts, dtype=np.int64),
        np.ascontiguousarray(lasts, dtype=np.int64), len(capacities),
        np.array([-1 if c is None else c for c in capacities], dtype=np.int64), last_resort,
        np.ascontiguousarray(order, dtype=np.int64), len(swaps),
        np.array(swaps, dtype=np.int64).reshape(-1), goal[0], goal[1], pools, offsets, score)
    return pools.tolist(), offsets.tolist(), (int(score[0]), int(score[1]))
