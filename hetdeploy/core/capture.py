"""What libraries print, captured per thread.

hls4ml and qonnx print their progress to stdout; hetdeploy keeps it (a unit's hls4ml log) or drops
it. ``contextlib.redirect_stdout`` swaps ``sys.stdout`` for the whole process, so two threads of one
Dask worker (``dask worker --nthreads N``) capturing at once would take each other's lines, and the
one that finishes last would leave the other's buffer as the process's stdout. ``captured_stdout``
instead installs, once, a ``sys.stdout`` that sends each thread's writes where that thread captures
them, and everything else where stdout went before. Warnings a capturing thread raises go to its
capture too (``warnings.showwarning``, the hook Python documents for this), not to the terminal:
``warnings.catch_warnings`` would be process-wide as well.
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


def _show_warning_to(proxy: _ThreadStdout, show):
    """``warnings.showwarning`` that writes a capturing thread's warnings into its capture."""

    def show_warning(message, category, filename, lineno, file=None, line=None):
        target = getattr(proxy.local, "target", None)
        if target is None:
            return show(message, category, filename, lineno, file, line)
        target.write(warnings.formatwarning(message, category, filename, lineno, line))

    return show_warning


@contextlib.contextmanager
def captured_stdout(into: TextIO | None = None) -> Iterator[TextIO]:
    """What this thread prints, into ``into`` (a new StringIO when None) while the block runs;
    other threads' output goes on where it went."""
    with _INSTALLING:
        if not isinstance(sys.stdout, _ThreadStdout):
            sys.stdout = _ThreadStdout(sys.stdout)
            warnings.showwarning = _show_warning_to(sys.stdout, warnings.showwarning)
        proxy = sys.stdout
    target = io.StringIO() if into is None else into
    previous = getattr(proxy.local, "target", None)
    proxy.local.target = target
    try:
        yield target
    finally:
        proxy.local.target = previous
