"""The run folder: refusing to clobber what a user has, and knowing which files are tuneloop's."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..atomic import atomic_write_json, check_place, make_folder
from ..exceptions import TuneloopError
from ..layout import (DISTILL_DIR, RUN_LOCK, RUN_MARKER, RUN_OUTPUTS, SEARCH_FILE, STUDY_JOURNAL, SUMMARY_FILE,
                      TRIALS_DIR)
from ..runtime import folder_lock


def is_run_folder(folder: str | os.PathLike) -> bool:
    return (Path(folder) / RUN_MARKER).is_file()


def check_run_folder(folder: str | os.PathLike, overwrite: bool, resume: bool = False) -> None:
    """Refuse a folder that holds something we would clobber (reads only: safe on every process)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise TuneloopError(f"--output-dir {folder}: exists and is a file; choose another folder")
    check_place(folder, "--output-dir", folder=True)
    if (who := folder_lock.holder(folder)) is not None:       # --resume or --overwrite too: it is being written
        raise folder_lock.busy(folder, who)
    if resume or not folder.is_dir() or not any(p.name != RUN_LOCK for p in folder.iterdir()):
        return
    kind = folder_kind(folder)
    if overwrite:
        if kind is None and (theirs := foreign_outputs(folder, RUN_OUTPUTS)):
            raise TuneloopError(f"--output-dir {folder}: --overwrite would replace {', '.join(theirs)}, which no "
                                f"tuneloop run wrote (there is no {RUN_MARKER}); move them away or choose a new "
                                "folder")
        return
    what = FOLDER_KINDS.get(kind, "files that are not a tuneloop run")
    resume = "" if kind is None else ", --resume to go on with it"
    raise TuneloopError(f"--output-dir {folder}: already holds {what}; choose a new folder{resume}, or pass "
                        "--overwrite to replace tuneloop's outputs there (other files are left alone)")


def foreign_outputs(folder: Path, names) -> list[str]:
    """Which of tuneloop's output `names` a folder holds (`model/`, `config.yaml`, ...), as a refusal lists them."""
    return [f"{name}/" if (folder / name).is_dir() else name for name in names
            if (folder / name).exists() or (folder / name).is_symlink()]


FOLDER_KINDS = {"run": "an earlier tuneloop run", "experiment": "an earlier tuneloop experiment (--seeds / --folds)",
                "search": "an earlier tuneloop search",
                "distill": "an earlier tuneloop distill, stopped before its student's run"}     # as refusals name them


def folder_kind(folder: Path) -> str | None:
    """What tuneloop wrote in a folder (a key of FOLDER_KINDS), or None: nothing of tuneloop's it would know."""
    if is_run_folder(folder):
        return "run"
    if (folder / SUMMARY_FILE).is_file() or any(is_run_folder(p) for p in (*folder.glob("seed-*"),
                                                                          *folder.glob("fold-*"))):
        return "experiment"
    if (folder / SEARCH_FILE).is_file() or (folder / STUDY_JOURNAL).is_file() or (folder / TRIALS_DIR).is_dir():
        return "search"
    if (folder / DISTILL_DIR).is_dir():
        return "distill"
    return None


def prepare_run_folder(folder: str | os.PathLike, overwrite: bool, resume: bool = False) -> Path:
    """Create the run folder and lock it for this run; with --overwrite remove an earlier run's outputs (and only
    those)."""
    folder = Path(folder)
    check_run_folder(folder, overwrite, resume)
    make_folder(folder, "--output-dir")
    folder_lock.take(folder)           # until the run ends (before --overwrite clears: never another run's files)
    if overwrite and not resume:
        remove_outputs(folder)
    return folder


def remove_outputs(folder: Path, names=RUN_OUTPUTS) -> None:
    """Remove tuneloop's `names` from `folder` (a folder whole; a link itself, never what it points to)."""
    for name in names:
        target = folder / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()


def write_run_marker(folder: Path, info: dict) -> None:
    atomic_write_json(folder / RUN_MARKER, info)
