"""A build's reporting: progress lines, a bar on long steps, every line kept for build.log."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator, Optional

from tqdm import tqdm


Progress = Callable[[str], None]


def stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Reporter:
    """A build's reporting. Every line goes into build.log; ``show`` gets the step lines and notes,
    and each unit's line too when ``verbose``. With ``bars`` (the default, stderr), a terminal gets a
    progress bar on long steps instead of the units' lines, and a log or CI, where no bar can be
    drawn, the units' lines: never a minute without a line."""

    def __init__(self, show: Progress, verbose: bool, bars: bool):
        self.log: list[str] = []
        self.show = show
        self.bars = bars and not verbose and sys.stderr.isatty()
        self.verbose = verbose or (bars and not self.bars)
        self._bar: Optional[tqdm] = None

    def __call__(self, message: str) -> None:
        self.log.append(message)
        self.show(message)

    def detail(self, message: str) -> None:
        self.log.append(message)
        if self.verbose:
            self.show(message)

    def working(self, what: str, slow: bool = False) -> None:
        """What a long step does now: the bar's note; a line too where there is no bar and it is ``slow``
        (the lines after each unit are progress enough otherwise)."""
        if self._bar is not None:
            self._bar.set_postfix_str(what, refresh=True)
        elif slow:
            self.detail(f"      {what} ...")

    @contextlib.contextmanager
    def bar(self, total: int, description: str, unit: str) -> Iterator[Callable[[], None]]:
        """A function to call once per ``unit`` done."""
        if not self.bars:
            yield lambda: None
            return
        with tqdm(total=total, desc=description, unit=unit, leave=False, file=sys.stderr,
                  dynamic_ncols=True) as self._bar:
            try:
                yield self._bar.update
            finally:
                self._bar = None
