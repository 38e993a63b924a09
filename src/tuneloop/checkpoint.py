"""The run folder: refusing to clobber, atomic writes of results and models."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from .errors import TuneloopError

RUN_MARKER = "tuneloop-run.json"
# what a run writes; --overwrite removes these and nothing else
RUN_OUTPUTS = (RUN_MARKER, "config.yaml", "metrics.jsonl", "results.json", "model", "best", "checkpoints",
               "predictions", "report.html", "plots", "tensorboard", "train.log")


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | os.PathLike, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


@contextlib.contextmanager
def atomic_folder(folder: str | os.PathLike):
    """Yield a temporary folder; on success it replaces `folder` (the old one survives any failure)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        yield tmp
        if folder.exists():
            old = folder.with_name(f".{folder.name}.old-{os.getpid()}-{time.monotonic_ns()}")
            os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def default_output_dir(task: str | None) -> str:
    return str(Path("runs") / f"{task or 'custom'}-{time.strftime('%Y%m%d-%H%M%S')}")


def is_run_folder(folder: str | os.PathLike) -> bool:
    return (Path(folder) / RUN_MARKER).is_file()


def check_run_folder(folder: str | os.PathLike, overwrite: bool, resume: bool = False) -> None:
    """Refuse a folder that holds something we would clobber (reads only: safe on every process)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise TuneloopError(f"--output-dir {folder}: exists and is a file; choose another folder")
    if resume or overwrite or not folder.is_dir() or not any(folder.iterdir()):
        return
    what = "an earlier tuneloop run" if is_run_folder(folder) else "files that are not a tuneloop run"
    raise TuneloopError(f"--output-dir {folder}: already holds {what}; choose a new folder, or pass --overwrite "
                        "to replace tuneloop's outputs there (other files are left alone)")


def prepare_run_folder(folder: str | os.PathLike, overwrite: bool, resume: bool = False) -> Path:
    """Create the run folder; with --overwrite remove an earlier run's outputs (and only those)."""
    folder = Path(folder)
    check_run_folder(folder, overwrite, resume)
    if overwrite and not resume and folder.is_dir():
        for name in RUN_OUTPUTS:
            target = folder / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_run_marker(folder: Path, info: dict) -> None:
    atomic_write_json(folder / RUN_MARKER, info)
