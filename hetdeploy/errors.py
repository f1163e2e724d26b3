"""The one exception type that reaches the user as a single line."""


import traceback
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def raised_in_hetdeploy(err: BaseException) -> bool:
    """Whether ``err`` was raised by hetdeploy's own code (the innermost frame of its traceback in this
    package): then it is hetdeploy's bug, whichever library call it was made around."""
    frames = traceback.extract_tb(err.__traceback__)
    return bool(frames) and Path(frames[-1].filename).resolve().is_relative_to(_PACKAGE)


def first_line(err: BaseException) -> str:
    """The first line of what ``err`` says (its type's name when it says nothing): for one-line errors
    that wrap a library's failure."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class UserError(Exception):
    """A problem with the user's input (model, board file, options).

    The CLI prints ``str(error)`` on one line and exits with ``exit_code``;
    anything else escaping a stage is a bug in hetdeploy and keeps its traceback.
    """

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))


class VerificationError(UserError):
    """C-simulation disagrees with onnxruntime beyond the reported tolerance; ``units``: the checks
    of the execution units that failed (empty when only a subfunction or the pipeline did)."""

    exit_code = 3

    def __init__(self, message: str):
        super().__init__(message)
        self.units: list = []


class ToolError(UserError):
    """hls4ml or g++ failed on what hetdeploy gave it: one line naming the unit, its ops and the log
    to read (exit 1, as any failure of hetdeploy's own making)."""

    exit_code = 1


class SynthesisNotRun(UserError):
    """``build --synth`` where Vitis/Vivado HLS or Vivado are not on PATH: the build is complete and in
    place, but nothing was synthesised, so a script must be able to tell (exit 4): the line says which
    tool is missing and how to run the scripts written."""

    exit_code = 4
