"""The build folder: checked before any work, locked against a second build, written in a staging
folder beside it and moved into place only when complete; a failed build kept as DIR.failed with its logs."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from .errors import UserError


BUILD_LOG = "build.log"  # in the build folder, or the kept staging folder of a failed build


def check_output(out_dir: Path, markers: tuple[str, ...], command: str = "build") -> None:
    """-o names a folder to write (new, or one of ``command``'s, which holds one of ``markers``, to
    replace or resume), not a file or another folder."""
    if out_dir.name in ("", ".", ".."):  # the build is moved into place under its name
        raise UserError(f"-o {out_dir}: name the {command} folder (say -o {command}/mymodel), not {str(out_dir)!r}")
    blocking = next((p for p in [out_dir, *out_dir.parents] if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise UserError(f"-o {out_dir}: {blocking} is a file, not a folder; choose another -o")
    if out_dir.exists() and not any((out_dir / m).exists() for m in markers) and any(out_dir.iterdir()):
        raise UserError(f"{out_dir}: exists and is not a hetdeploy {command} folder; choose another -o")


@contextlib.contextmanager
def output_lock(out_dir: Path, command: str = "build") -> Iterator[None]:
    """One build (or sweep) at a time into ``out_dir``: an exclusive lock on ``.DIR.lock`` beside it,
    held for the whole command (a second one into the same -o stops at once, before any work)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = out_dir.parent / f".{out_dir.name}.lock"
    while True:
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise UserError(f"-o {out_dir}: another hetdeploy {command} is writing it now (it holds {lock_path}); "
                            f"wait for it or choose another -o") from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock_path).st_ino == os.fstat(descriptor).st_ino:
                break
        os.close(descriptor)  # the holder before us removed the file: lock the one there now
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)
        os.close(descriptor)


@contextlib.contextmanager
def staging(out_dir: Path, log: list[str]) -> Iterator[Path]:
    """A fresh folder of this build's own beside ``out_dir``, moved onto it only when the body
    succeeds. A failed build is moved to ``DIR.failed`` (replacing an older one) with its logs and
    projects, and ``log`` (the progress lines and the error) in its BUILD_LOG; an interrupted one
    (Ctrl-C, SIGTERM) leaves nothing."""
    out_dir = Path(out_dir)  # checked by ``check_output`` before the build's first stage
    stage_dir = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    umask = os.umask(0)
    os.umask(umask)
    stage_dir.chmod(0o777 & ~umask)  # a build folder as any folder the user makes, not mkdtemp's private one

    def keep_failed(error: str) -> Path:
        failed = out_dir.parent / f"{out_dir.name}.failed"
        log.append(f"error: {error}")
        (stage_dir / BUILD_LOG).write_text("".join(f"{line}\n" for line in log).replace(str(stage_dir), str(failed)))
        shutil.rmtree(failed, ignore_errors=True)
        stage_dir.rename(failed)
        return failed

    try:
        yield stage_dir
    except KeyboardInterrupt:
        shutil.rmtree(stage_dir, ignore_errors=True)
        raise
    except UserError as err:  # the evidence (HLS projects, logs) stays; ``out_dir`` is untouched
        failed = keep_failed(str(err))
        raise type(err)(f"{str(err).replace(str(stage_dir), str(failed))} (the failed build is kept in {failed}; "
                        f"its log: {failed / BUILD_LOG})") from None
    except BaseException as err:  # a bug: the evidence stays too
        keep_failed(f"{type(err).__name__}: {err}")
        raise
    (stage_dir / BUILD_LOG).write_text("".join(f"{line}\n" for line in log).replace(str(stage_dir), str(out_dir)))
    old = out_dir.parent / f".{out_dir.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if out_dir.exists():
        out_dir.rename(old)
    stage_dir.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)
