"""What libraries print, captured per thread.

hls4ml and qonnx print their progress to stdout; hetdeploy keeps it (a unit's hls4ml log) or drops
it. ``contextlib.redirect_stdout`` swaps ``sys.stdout`` for the whole process, so two threads of one
Dask worker (``dask worker --nthreads N``) capturing at once would take each other's lines, and the
one that finishes last would leave the other's buffer as the process's stdout. ``captured_stdout``
instead installs, once, a ``sys.stdout`` that sends each thread's writes where that thread captures
them, and everything else where stdout went before. Warnings a capturing thread raises are dropped
(``warnings.showwarning``, the hook Python documents for this; ``warnings.catch_warnings`` would be
process-wide as well): Python shows a warning once per place in a process, so which capture would hold
it would depend on the order the builds ran in, and a unit's log would not be the same twice.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import warnings
from typing import Iterator, TextIO


class _ThreadStdout(io.TextIOBase):
    """``sys.stdout`` while hetdeploy may capture: a thread's writes go to its capture, if any."""

    def __init__(self, original: TextIO):
        self.original = original
        self.local = threading.local()

    def _target(self) -> TextIO:
        return getattr(self.local, "target", None) or self.original

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str):  # fileno, encoding, isatty, buffer: the stdout it stands for
        return getattr(self.original, name)


_INSTALLING = threading.Lock()
_CAPTURING = threading.local()  # ``depth``: how many captures this thread is inside


def _dropping_captured(show):
    """``warnings.showwarning`` that drops a capturing thread's warnings and shows the others' as ``show`` does."""

    def show_warning(message, category, filename, lineno, file=None, line=None):
        if not getattr(_CAPTURING, "depth", 0):
            show(message, category, filename, lineno, file, line)

    show_warning.drops_captured = True
    return show_warning


@contextlib.contextmanager
def captured_stdout(into: TextIO | None = None) -> Iterator[TextIO]:
    """What this thread prints, into ``into`` (a new StringIO when None) while the block runs;
    other threads' output goes on where it went. The thread's warnings meanwhile are dropped."""
    with _INSTALLING:
        if not isinstance(sys.stdout, _ThreadStdout):
            sys.stdout = _ThreadStdout(sys.stdout)
        # again whenever it is gone: a warnings.catch_warnings block that began before puts back its own at its end
        if not getattr(warnings.showwarning, "drops_captured", False):
            warnings.showwarning = _dropping_captured(warnings.showwarning)
        proxy = sys.stdout
    target = io.StringIO() if into is None else into
    previous = getattr(proxy.local, "target", None)
    proxy.local.target = target
    _CAPTURING.depth = getattr(_CAPTURING, "depth", 0) + 1
    try:
        yield target
    finally:
        proxy.local.target = previous
        _CAPTURING.depth -= 1
