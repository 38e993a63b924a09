"""Atomic writes: a file or folder is written under a temporary name beside its target, then renamed, so a
reader (or a crash) never sees half of it. New files get the permissions the process's umask gives (as `open`
does), not mkstemp's 0600."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from pathlib import Path


def _temporary(target: Path, make) -> Path:
    """A new, unique path beside `target`, created by `make(path)` (which must fail if the path exists)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        path = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            make(path)
            return path
        except FileExistsError:
            continue


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
