"""What every many-run command shares (seeds and folds, search, distill): resuming a run folder from its
checkpoints, how a stop in one of its runs is told, that a finished run read back by --resume saw the data as it is
now, and keeping the best run's model as a copy in the experiment's folder."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..atomic import atomic_folder
from ..exceptions import DataError, Interrupted
from ..sheets import file_signature
from ..training.checkpoint import list_checkpoints


def interrupted_in(folder: Path, stopped: Interrupted, command: str, output_dir) -> Interrupted:
    """The stop of one run of a many-run command, told as that command's: the run's own line would resume the run
    alone, outside its experiment or study (its summary or best never written)."""
    import torch.distributed as dist

    saved = list_checkpoints(folder)
    where = f"; checkpoint saved in {saved[0]}" if saved else ""
    processes = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    launcher = f" under the same launcher with {processes} processes" if processes > 1 else ""
    return Interrupted(f"interrupted in {folder.name}{where}. Resume with the command that started it and --resume"
                       f"{launcher} (tuneloop {command} ... --output-dir {output_dir} --resume: finished runs are read "
                       f"back, {folder.name} resumes from its checkpoint)", stopped.signal_number)


def resume_point(folder: Path) -> str | None:
    """"latest" when the run folder holds a checkpoint to resume from, else None (start the run afresh)."""
    return "latest" if list_checkpoints(folder) else None


def copy_folder(source: Path, target: Path, extra: tuple[Path, ...] = ()) -> None:
    """`target` becomes a copy of `source` (plus the `extra` files that exist), replaced atomically: a kept model
    is either the old one or the new one, never half of each."""
    with atomic_folder(target) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)
        for path in extra:
            if path.is_file():
                shutil.copy2(path, tmp / path.name)


def check_same_files(folder: Path, results: dict, what: str = "the experiment") -> None:
    """A finished run read back by --resume was trained and scored on the data files as they are now, or the summary
    (and k-fold's out-of-fold rows) would mix runs on two versions of the data: refused, as resuming a run whose
    held-out file changed is (data/split.py). Runs of an earlier tuneloop record no files: read back unchecked."""
    for split, stats in (results.get("data") or {}).items():
        file = stats.get("file") if isinstance(stats, dict) else None
        if isinstance(file, dict) and file_signature(file["path"]) != file["signature"]:
            raise DataError(f"--resume: {file['path']} changed since {folder.name} read it as its {split} data (its "
                            f"size or modification time differs); resume with the file as it was, or start {what} "
                            "in a new --output-dir")
