"""Atomic writes: a file or folder is written under a temporary name beside its target, then renamed, so a
reader (or a crash) never sees half of it. New files get the permissions the process's umask gives (as `open`
does), not mkstemp's 0600."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
from pathlib import Path


def _temporary(target: Path, make) -> Path:
    """A new, unique path beside `target`, created by `make(path)` (which must fail if the path exists). A place
    the system will not write in (a read-only or virtual file system, which permission checks do not tell) is one
    line naming the target."""
    from .exceptions import TuneloopError

    def refused(e: OSError) -> TuneloopError:
        return TuneloopError(f"{target}: cannot be written there ({e.strerror or e}); choose another place")

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if disk_full(e):
            raise
        raise refused(e) from None
    while True:
        path = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            make(path)
            return path
        except FileExistsError:
            continue
        except OSError as e:
            if disk_full(e):
                raise
            raise refused(e) from None


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file (spelled differently, through a link, or not yet existing and equal)."""
    try:
        return Path(a).resolve() == Path(b).resolve() or (Path(a).exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_place(path: str | os.PathLike, option: str, folder: bool = False) -> None:
    """Refuse, in one line naming `option`, a path that cannot be written: a file standing where a folder of it
    would be made, or a folder this process may not write in. `folder`: `path` is itself a folder written into."""
    from .exceptions import TuneloopError

    path = Path(path)
    for place in ((path,) if folder else ()) + tuple(path.parents):
        if place.exists():
            if not place.is_dir():
                raise TuneloopError(f"{option} {path}: {place} is a file, not a folder; choose another place")
            if not os.access(place, os.W_OK | os.X_OK):
                raise TuneloopError(f"{option} {path}: this user may not write in the folder {place}; choose "
                                    "another place (or change its permissions)")
            return


def make_folder(path: str | os.PathLike, option: str) -> Path:
    """Create the folder `path` (and its parents) for `option`; the system's refusal is one line naming both."""
    from .exceptions import TuneloopError

    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if disk_full(e):
            raise
        raise TuneloopError(f"{option} {path}: cannot create this folder ({e.strerror or e}); choose another "
                            "place") from None
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    fd = None

    def create(p: Path):
        nonlocal fd
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)   # the umask applies, as with open()

    tmp = _temporary(path, create)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


@contextlib.contextmanager
def atomic_folder(folder: str | os.PathLike):
    """Yield a temporary folder; on success it replaces `folder` (the old one survives any failure)."""
    folder = Path(folder)
    tmp = _temporary(folder, lambda p: os.mkdir(p, 0o777))
    try:
        yield tmp
        if folder.exists():
            old = folder.with_name(f".{folder.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
            os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def disk_full(error: BaseException) -> bool:
    """An error that says the disk (or the user's quota) is full: OSError ENOSPC/EDQUOT, or a library's error
    carrying the OS message (safetensors raises its own type)."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(error) or "Disk quota exceeded" in str(error)


def folder_bytes(folder: str | os.PathLike) -> int:
    """The size of the files under `folder` (0 when it is not there)."""
    folder = Path(folder)
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


@contextlib.contextmanager
def space_guard(what: str, target: str | os.PathLike, partial: str | os.PathLike | None = None,
                like: str | os.PathLike | None = None):
    """Turn a full disk while writing `what` into `target` into one line (TuneloopError): how much it needs, and
    that what was there before is intact (atomic writes never touch it). `partial`: a temporary folder to clear
    away first, freeing what it took; `like`: an earlier folder of the same kind, whose size says what is needed
    (both measured only when the disk is full)."""
    from .exceptions import TuneloopError

    try:
        yield
    except BaseException as e:
        if not disk_full(e):
            raise
        written = folder_bytes(partial) if partial is not None else 0
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)
        expected = folder_bytes(like) if like is not None else 0
        needed = max(expected, written)
        amount = f"about {needed / 2**20:.0f} MB needed" if expected else f"at least {needed / 2**20:.0f} MB needed"
        raise TuneloopError(f"no space left on device while saving {what} {target}; {amount}; earlier files are "
                            "intact. Free some space (or --keep-last 1, another --output-dir) and resume") from None
