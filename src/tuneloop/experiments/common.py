"""What every many-run command shares (seeds and folds, search): resuming a run folder from its checkpoints, and
keeping the best run's model as a copy in the experiment's folder."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..atomic import atomic_folder
from ..training.checkpoint import list_checkpoints


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
