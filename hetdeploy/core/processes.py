"""Child processes that never outlive hetdeploy, and SIGTERM handled like Ctrl-C.

Every tool hetdeploy starts (make and its g++ jobs, the C-simulation process, Vivado) runs in a
process group of its own; when hetdeploy stops early (Ctrl-C, SIGTERM, an error) the whole group is
killed, grandchildren included. The C-simulation process also asks the kernel to end it with
hetdeploy (``PR_SET_PDEATHSIG``, set by the child itself in csim_child.py: a ``preexec_fn`` is not safe
in a process with threads, as onnxruntime's).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Iterator, Optional

class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that its clean-up runs (as for Ctrl-C)."""


def start(command: list[str], **options) -> subprocess.Popen:
    """``subprocess.Popen`` in a process group of its own (``kill`` ends it with its children)."""
    return subprocess.Popen(command, start_new_session=True, **options)


def kill(process: subprocess.Popen) -> None:
    """The process and its process group (its own children), at once."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def run(command: list[str], timeout: Optional[float] = None, **options) -> subprocess.CompletedProcess:
    """``subprocess.run(command, capture_output=True, text=True)``, the whole process group killed if
    hetdeploy stops before it ends or it runs past ``timeout`` seconds (then ``subprocess.TimeoutExpired``)."""
    process = start(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except BaseException:
        kill(process)
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` in the main thread while the block runs."""
    def handler(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
