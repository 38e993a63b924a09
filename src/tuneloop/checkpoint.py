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


_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)          # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(fd, "wb") as f:
            f.write(data)
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


# ---------------------------------------------------------------------------------------------- checkpoints
CHECKPOINTS = "checkpoints"
STATE_FILE = "tuneloop_state.json"      # written last: its presence marks a complete checkpoint
# options that may change between an interrupted run and its resumption; any other change is refused
RESUMABLE_CHANGES = {"output_dir", "overwrite", "resume", "dry_run", "eval_every", "eval_batch_size", "max_eval_samples",
                     "log_every", "report_to", "quiet", "save_every", "keep_last", "predict_test", "metric_for_best",
                     "early_stopping_patience", "num_proc", "validation_file", "test_file", "skip_nonfinite_batches",
                     "explicit_options"}


class Interrupted(TuneloopError):
    """SIGINT/SIGTERM: a checkpoint was saved at a step boundary and the run stopped."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.signal_number = signal_number


def checkpoint_name(step: int) -> str:
    return f"step-{step:07d}"


def list_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints, newest first."""
    root = Path(output_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-") and (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: p.name, reverse=True)


def save_checkpoint(accelerator, output_dir: Path, step: int, state: dict, keep_last: int) -> Path:
    """accelerator.save_state into a temporary folder, then rename: a crash mid-save leaves older ones intact."""
    root = output_dir / CHECKPOINTS
    final = root / checkpoint_name(step)
    tmp = root / f".{final.name}.tmp"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))                   # model, optimizer, scheduler, RNG states (every process)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        atomic_write_json(tmp / STATE_FILE, state)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in list_checkpoints(output_dir)[keep_last:]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def incompatible_changes(saved: dict, current: dict) -> list[str]:
    return [f"--{k.replace('_', '-')} {saved.get(k)!r} → {current.get(k)!r}" for k in sorted(set(saved) | set(current))
            if k not in RESUMABLE_CHANGES and saved.get(k) != current.get(k)]


def load_checkpoint(accelerator, output_dir: Path, which: str, current_config: dict, num_processes: int,
                    warn) -> tuple[Path, dict]:
    """Restore the newest loadable checkpoint (or the one named); refuse one from an incompatible config."""
    if which in ("latest", "true"):
        candidates = list_checkpoints(output_dir)
        if not candidates:
            raise TuneloopError(f"--resume: {output_dir} has no complete checkpoint to resume from (save them with "
                                "--save-every N or --save-every epoch)")
    else:
        path = Path(which)
        if not (path / STATE_FILE).is_file():
            raise TuneloopError(f"--resume {which}: not a complete tuneloop checkpoint (no {STATE_FILE})")
        candidates = [path]
    for i, path in enumerate(candidates):
        try:
            state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            warn(f"checkpoint {path} is damaged ({e}); trying the previous one")
            continue
        changes = incompatible_changes(state["config"], current_config)
        if state.get("num_processes", num_processes) != num_processes:
            changes.append(f"processes {state['num_processes']} → {num_processes}")
        if changes:
            raise TuneloopError(f"--resume: the checkpoint {path.name} was made with other settings "
                                f"({'; '.join(changes)}); resume with the same settings, or start a new run")
        try:
            accelerator.load_state(str(path))
        except Exception as e:  # noqa: BLE001 - any unreadable part means: fall back to an older checkpoint
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            if i + 1 < len(candidates):
                warn(f"checkpoint {path} is damaged ({first}); falling back to {candidates[i + 1].name}")
                continue
            raise TuneloopError(f"--resume: checkpoint {path} cannot be loaded ({first}) and there is no older one"
                                ) from None
        return path, state
    raise TuneloopError(f"--resume: no loadable checkpoint in {output_dir / CHECKPOINTS}")


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop what an interrupted run logged after its checkpoint, so the resumed run logs each step once."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.strip() and (json.loads(line).get("step") or 0) <= last_step]
    atomic_write_text(path, "".join(line + "\n" for line in kept))
