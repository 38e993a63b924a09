"""One run at a time in a run folder: a training run holds an exclusive lock on OUT/.tuneloop.lock (flock: the
system releases it when the process ends, a crash or a kill included) from the moment the folder is made to the
run's end. A second run into the folder (a `--resume` typed while the first still trains, a script started twice)
is refused in one line naming the holder; before, both wrote the same checkpoints, metrics and model and exited 0.

`holding()` scopes the locks a run takes (runtime/process.run_scope enters it); `take(folder)` locks, and
`holder(folder)` says, without waiting, who holds a folder's lock. Where the system has no flock (Windows) or the
file system refuses locks (some network mounts), runs are not locked."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
from pathlib import Path

from ..exceptions import TuneloopError
from ..layout import RUN_LOCK

try:
    import fcntl
except ImportError:                 # Windows: no flock
    fcntl = None

_HELD: list[list[int]] = []         # per run in progress in this process (an experiment's runs nest): its locks


@contextlib.contextmanager
def holding():
    """The locks `take` makes during the block are released when it ends."""
    held: list[int] = []
    _HELD.append(held)
    try:
        yield
    finally:
        _HELD.remove(held)
        for fd in held:
            os.close(fd)            # closing the file releases its flock


def holder(folder: str | os.PathLike) -> str | None:
    """Who holds `folder`'s run lock ("process 123 on host, since 2026-11-30 01:25:26"), or None when no one does."""
    path = Path(folder) / RUN_LOCK
    if fcntl is None or not path.is_file():
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None                 # a shared lock was granted: no run holds it (released on close)
    except BlockingIOError:
        return _said(path)
    except OSError:                 # a file system without locks (some network mounts): not locked
        return None
    finally:
        os.close(fd)


def take(folder: str | os.PathLike) -> None:
    """Lock `folder` for the run in progress (the innermost `holding`), or refuse in one line when another run
    holds it. Outside a `holding` block, or without flock, nothing is locked."""
    if fcntl is None or not _HELD:
        return
    path = Path(folder) / RUN_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise busy(folder, _said(path)) from None
    except OSError:                 # a file system without locks (some network mounts): the run goes on unlocked
        os.close(fd)
        return
    os.ftruncate(fd, 0)
    since = dt.datetime.now().isoformat(sep=" ", timespec="seconds")
    os.write(fd, f"process {os.getpid()} on {socket.gethostname()}, since {since}\n".encode())
    _HELD[-1].append(fd)


def busy(folder: str | os.PathLike, who: str) -> TuneloopError:
    return TuneloopError(f"--output-dir {folder}: another tuneloop run ({who}) is writing there; wait for it to end, "
                         "or choose another folder")


def _said(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() or "a process that has not said which"
    except (OSError, UnicodeDecodeError):
        return "a process that has not said which"
