"""The one exception type that reaches the user as a single line."""


import stat
import traceback
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # hetdeploy, every subpackage


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


def input_file(path: Path, what: str) -> Path:
    """``path`` when it is a regular file to read ``what`` from; else the one line saying what it is:
    missing, a folder, or a pipe, socket or device, which reading would block on or never finish."""
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except (OSError, ValueError) as err:  # no permission, a NUL in the name, a name too long
        raise UserError(f"{path}: cannot read the {what} ({getattr(err, 'strerror', None) or err})") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{path}: is a folder, not the {what}")
    if not stat.S_ISREG(mode):
        raise UserError(f"{path}: is not a regular file (a pipe, socket or device); give the {what} as a file")
    return Path(path)


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
