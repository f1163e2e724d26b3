"""g++ C-simulation of a generated HLS project, and calling it through ctypes.

The library is compiled with a *relative* weights folder so that a build
folder can be moved after it is built: calls run with the project folder as
the working directory (hls4ml's loader reads ``WEIGHTS_DIR/<prefix><name>.txt``
on the first call and calls ``exit(1)`` when a file is missing, so the folders
are checked before any call). The library runs in a child process: an assert
in the generated C++ (hls4ml's streamed pooling has some) ends that process, and
hetdeploy reports it with the log to read.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from . import processes
from .cache import BuildCache, digest, toolchain, tree_digest
from .errors import ToolError, UserError

# What the C-simulation process prints (hls4ml's asserts and warnings), in the project folder.
CSIM_LOG = "csim_run.log"
CRASH_LOG = "csim_crash.log"  # what an emulation's C-simulation printed before it crashed
# the C-simulation process's program (the standard library and numpy only)
CHILD = Path(__file__).with_name("csim_child.py")

def compiler() -> str:
    """The C++ compiler: ``$CXX``, else g++ (what the Makefile runs too)."""
    return os.environ.get("CXX", "g++")


@functools.lru_cache(maxsize=1)
def compiler_identity() -> str:
    """The C++ compiler the Makefile runs, as it names itself (part of a library's cache key)."""
    try:
        return compiler() + " " + processes.run([compiler(), "--version"]).stdout.split("\n")[0]
    except OSError:
        return compiler()


def first_error(stderr: str) -> str:
    """The compiler's first line that reports an error (else the start of what it printed)."""
    return next((line for line in stderr.splitlines() if "error" in line), stderr.strip()[:200])


def compile_library(project_dir: Path, library: str, cache: Optional[BuildCache] = None) -> Path:
    """Run the project's Makefile (hls_top writes it) with a job per core; returns the library path.
    The objects are removed afterwards: the build folder keeps sources, library and Makefile. With
    ``cache``, a library compiled before from the same files by the same compiler is taken from it;
    else each unit's objects compiled before from the same unit, shared headers and flags are, and
    make compiles only the others (a refolded unit) and the top."""
    key, unit_keys, missed = None, {}, []
    if cache is not None:
        key = digest(tree_digest(project_dir, _NOT_SOURCES), compiler_identity(), toolchain())
        if cache.fetch("library", key, project_dir) is not None:
            return project_dir / library
        unit_keys = _unit_object_keys(project_dir)
        # fetched objects are newer than the sources written before them: make leaves them be
        missed = [unit for unit, unit_key in unit_keys.items() if cache.fetch("objects", unit_key, unit) is None]
    with tempfile.TemporaryDirectory(prefix="hetdeploy-headers-") as scratch:
        header = _precompiled_header(project_dir, Path(scratch), cache)
        result = processes.run(["make", "-s", f"-j{os.cpu_count() or 1}"] +
                               ([f"PRECOMPILED={header}"] if header else []), cwd=project_dir)
    if result.returncode == 0 and cache is not None:
        for unit in missed:
            cache.store("objects", unit_keys[unit], unit, sorted(unit.rglob("*.o")), {})
    for obj in sorted(project_dir.rglob("*.o")):
        obj.unlink()
    if result.returncode != 0:
        (project_dir / "build_csim.log").write_text(result.stdout + result.stderr)
        raise ToolError(f"{compiler()} failed to compile the C-simulation of {project_dir.name} "
                        f"({first_error(result.stderr)}); see {project_dir / 'build_csim.log'}")
    if cache is not None:
        cache.store("library", key, project_dir, [project_dir / library], {})
    return project_dir / library


# what a library's or a unit's key leaves out: logs and what compiling makes
_NOT_SOURCES = (".log", ".so", ".o")

# The header every file of a project includes first (Makefile.in's PRECOMPILED), compiled once: parsing it
# is about 1.5 s of g++ a file, compiling it about 4 s and 80 MB.
PRECOMPILED = "hetdeploy_ap_types.h"
PRECOMPILED_TEXT = '#include "ap_fixed.h"\n#include "ap_int.h"\n'
# without a cache to keep it in, it is compiled for a project only when this many files or more are to be
PRECOMPILED_FROM = 4


def _precompiled_header(project_dir: Path, folder: Path, cache: Optional[BuildCache]) -> Optional[Path]:
    """PRECOMPILED and its compiled form in ``folder``: from the cache, else compiled with the project's
    flags (and kept in the cache); None without a cache when fewer than PRECOMPILED_FROM files are left to
    compile, or when it does not compile (the project's own compile then says why)."""
    header = folder / PRECOMPILED
    key = digest(PRECOMPILED_TEXT, _make_variable(project_dir, "FLAGS"), tree_digest(project_dir / "ap_types"),
                 compiler_identity(), toolchain())
    if cache is not None and cache.fetch("headers", key, folder) is not None:
        return header
    objects = _make_variable(project_dir, "OBJECTS").split()
    if cache is None and sum(not (project_dir / o).exists() for o in objects) < PRECOMPILED_FROM:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    header.write_text(PRECOMPILED_TEXT)
    if processes.run(["make", "-s", "precompiled", f"PRECOMPILED={header}"], cwd=project_dir).returncode != 0:
        return None
    if cache is not None:
        cache.store("headers", key, folder, [header, folder / (PRECOMPILED + ".gch")], {})
    return header


def _make_variable(project_dir: Path, name: str) -> str:
    """What the project's Makefile sets ``name`` to (its line ``name = ...``)."""
    for line in (project_dir / "Makefile").read_text().splitlines():
        if line.startswith(f"{name} = "):
            return line.removeprefix(f"{name} = ")
    raise ValueError(f"{project_dir / 'Makefile'} sets no {name}")


def _unit_object_keys(project_dir: Path) -> dict[Path, str]:
    """Per unit folder (``units/<unit>``), the key of the objects compiled from it: its files, and
    what every unit's compile reads besides (the project's headers, the ap_types headers, the
    Makefile's flags), the compiler and the toolchain."""
    shared = digest(*[part for p in sorted(project_dir.glob("*.h")) for part in (p.name, p.read_bytes())],
                    (project_dir / "Makefile").read_bytes(), tree_digest(project_dir / "ap_types"),
                    compiler_identity(), toolchain())
    units = project_dir / "units"
    folders = sorted(p for p in units.iterdir() if p.is_dir()) if units.is_dir() else []
    return {unit: digest(tree_digest(unit, _NOT_SOURCES), shared) for unit in folders}


class CSimCrash(UserError):
    """The C-simulation process died (an assert in hls4ml's C++, a segmentation fault)."""

    exit_code = 3


class CSimLibrary:
    """A compiled C-simulation library, loaded in a child process of its own; ``entry(name, ...)``
    gives one of its float entry points (``name(in_0, ..., out_0, ...)``, one sample per call).
    ``keep_log``: what the C++ prints goes to the project's CSIM_LOG (a build's evidence); else to a
    temporary file, saved as the project's CRASH_LOG only when the process crashes (running a build
    writes nothing else into it, and nothing outside it)."""

    def __init__(self, project_dir: Path, library: Path, weight_dirs: Sequence[str], keep_log: bool = True):
        self.project_dir = Path(project_dir)
        if not library.is_file():
            raise UserError(f"{library}: C-simulation library missing; rebuild with 'hetdeploy build'")
        for folder in weight_dirs:
            if not (self.project_dir / folder).is_dir():
                raise UserError(f"{self.project_dir / folder}: weights missing; rebuild with 'hetdeploy build'")
        self.log: Path | None = self.project_dir / CSIM_LOG if keep_log else None
        self._output = None if keep_log else tempfile.TemporaryFile()
        log = str(self.log.resolve()) if keep_log else f"fd:{self._output.fileno()}"
        # a fresh interpreter running csim_child.py alone (not the hetdeploy package, whose
        # imports cost half a second), not a fork of this one and its onnxruntime threads, nor
        # multiprocessing's spawn, which re-imports the caller's script
        from_parent, to_child = os.pipe()  # (read end, write end)
        from_child, to_parent = os.pipe()
        self._process = processes.start(
            [sys.executable, "-c", "import sys, runpy; runpy.run_path(sys.argv[1], run_name='__main__')",
             str(CHILD), str(library.resolve()), str(self.project_dir.resolve()),
             log, str(from_parent), str(to_parent)],
            pass_fds=(from_parent, to_parent) + (() if keep_log else (self._output.fileno(),)),
            stdin=subprocess.DEVNULL, close_fds=True)
        os.close(from_parent)
        os.close(to_parent)
        self._requests, self._replies = Connection(to_child, readable=False), Connection(from_child, writable=False)

    def _ask(self, kind: str, name: str, args):
        try:
            self._requests.send((kind, name, args))
            return self._replies.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self._process.wait(5)
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            raise CSimCrash(f"C-simulation of {name} ended with {how}; {self._saved_log()}") from None

    def _saved_log(self) -> str:
        """Where to read what the crashed process printed ("see LOG", the log kept in the project
        folder); where that folder cannot be written, the last line it printed."""
        if self.log is not None:
            return f"see {self.log}"
        self._output.seek(0)
        printed = self._output.read()
        try:
            (self.project_dir / CRASH_LOG).write_bytes(printed)
            return f"see {self.project_dir / CRASH_LOG}"
        except OSError:
            last = printed.decode("utf-8", "replace").strip().splitlines()
            return f"its last line: {last[-1][:200]!r}" if last else "it printed nothing"

    def close(self) -> None:
        self._requests.close()
        self._replies.close()
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:  # busy in the C++: it must not outlive its caller
            processes.kill(self._process)

    def __del__(self) -> None:
        if getattr(self, "_process", None) is not None and self._process.poll() is None:
            self._requests.close()  # the child ends on the end of its input

    def load_ddr(self, entry: str, image: Path) -> None:
        """Fill the library's DDR region from ``image`` (through ``entry``, <top>_load_ddr)."""
        if not image.is_file():
            raise UserError(f"{image}: DDR image missing; rebuild with 'hetdeploy build'")
        data = image.read_bytes()
        if self._ask("load_ddr", entry, data) != 0:
            raise UserError(f"{image}: {len(data)} bytes, more than the DDR region of the C-simulation library")

    def entry(self, name: str, input_sizes: Sequence[int], output_sizes: Sequence[int], max_batch: int = 0):
        """``call(inputs, samples=1)``: the entry ``name`` on ``samples`` samples, each input holding
        that many of ``input_sizes`` values one after another; ``max_batch`` > 0: a batched entry
        (``<top>_float(samples, ...)``, at most that many a call), else a one-sample one."""
        def call(inputs: Sequence[np.ndarray], samples: int = 1) -> list[np.ndarray]:
            flat_in = [np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in inputs]
            if len(flat_in) != len(input_sizes):
                raise ValueError(f"{name} takes {len(input_sizes)} inputs, got {len(flat_in)}")
            if not 1 <= samples <= max(1, max_batch):
                raise ValueError(f"{name} takes 1 to {max(1, max_batch)} samples a call, got {samples}")
            for x, size in zip(flat_in, input_sizes):
                if x.size != samples * size:
                    raise ValueError(f"C-simulation input has {x.size} values, {name} takes {samples} x {size}")
            if not max_batch:
                return self._ask("call", name, (flat_in, list(output_sizes)))
            status, outputs = self._ask("batch", name, (samples, flat_in, [samples * s for s in output_sizes]))
            if status != 0:
                raise ValueError(f"{name} refused a batch of {samples} samples (built for at most {max_batch})")
            return outputs

        return call
