"""The process that holds a C-simulation library for ``csim.CSimLibrary``: what the generated C++ does
(asserts, ``exit``, crashes) ends this process, never hetdeploy.

Run as a program of its own (``runpy.run_path``), importing the standard library and numpy only:
starting it must not cost the hetdeploy package's imports (onnx, onnxruntime, matplotlib).

    csim_child.py LIBRARY PROJECT_DIR LOG REQUESTS_FD REPLIES_FD

Requests are ``(kind, entry, args)`` on a ``multiprocessing`` connection: ``("call", name,
(inputs, output_sizes))`` answers the float outputs of a one-sample entry, ``("batch", name,
(samples, inputs, output_sizes))`` the entry's status and the float outputs of a batched one (its
first argument the sample count), ``("load_ddr", name, bytes)`` the entry's status.
"""

import contextlib
import ctypes
import os
import signal
import sys
from multiprocessing.connection import Connection

import numpy as np

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """The kernel sends this process SIGKILL when its parent ends, however it ends."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def serve(requests: Connection, replies: Connection, library: str, project_dir: str, log: str) -> None:
    """The child process that holds a C-simulation library: what the generated C++ does (asserts,
    exit, crashes) ends this process, never hetdeploy. Its stdout and stderr go to ``log``: a file,
    or ``fd:N``, a descriptor it inherited."""
    descriptor = int(log[3:]) if log.startswith("fd:") else os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                                                     0o644)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.chdir(project_dir)  # hls4ml's loader reads its weight files relative to the project
    lib = ctypes.CDLL(library, mode=os.RTLD_LOCAL)
    pointer = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
    while True:
        try:
            request = requests.recv()
        except EOFError:  # hetdeploy closed its end (or ended)
            return
        kind, name, args = request
        function = getattr(lib, name)
        if kind == "load_ddr":
            function.argtypes, function.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
            replies.send(function(args, len(args)))
        elif kind == "batch":
            samples, inputs, output_sizes = args
            function.argtypes = [ctypes.c_int] + [pointer] * (len(inputs) + len(output_sizes))
            function.restype = ctypes.c_int
            outputs = [np.zeros(size, dtype=np.float32) for size in output_sizes]
            replies.send((function(samples, *inputs, *outputs), outputs))
        else:
            inputs, output_sizes = args
            function.argtypes = [pointer] * (len(inputs) + len(output_sizes))
            function.restype = None
            outputs = [np.zeros(size, dtype=np.float32) for size in output_sizes]
            function(*inputs, *outputs)
            replies.send(outputs)


if __name__ == "__main__":
    library, project, log, requests, replies = sys.argv[2:]  # argv[1]: this file (run through runpy)
    die_with_parent()
    serve(Connection(int(requests), writable=False), Connection(int(replies), readable=False), library, project, log)
