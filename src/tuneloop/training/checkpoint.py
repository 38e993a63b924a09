"""Checkpoints: `accelerator.save_state` (model, optimizer, scheduler, random states on every process) plus the
run's TrainState and config, written under a temporary name and renamed; loading the newest complete one, with
a fallback past damaged ones and a refusal of settings that would change the run."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Callable

from ..atomic import atomic_write_json, atomic_write_text, space_guard
from ..config.fields import path_options
from ..config.options import TrainConfig, with_trait
from ..exceptions import TuneloopError
from ..layout import CHECKPOINT_STATE_FILE, CHECKPOINTS_DIR
from .small_data import DECIDES as SMALL_DATA_DECIDES

# options that may change between an interrupted run and its resumption (`resumable=True` in the options); any
# other change is refused
RESUMABLE_CHANGES = set(with_trait("resumable"))
PATH_OPTIONS = path_options(TrainConfig)     # `MRPC/` for `MRPC`, or its absolute path: one folder, not a change


def checkpoint_name(step: int) -> str:
    return f"step-{step:07d}"


def checkpoint_step(path: Path) -> int | None:
    """The step a checkpoint folder's name holds (None for another name)."""
    number = path.name.removeprefix("step-")
    return int(number) if path.name.startswith("step-") and number.isascii() and number.isdigit() else None


def list_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints, newest first (by step: step-10000000 is newer than step-9999999)."""
    root = Path(output_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir()
             if p.is_dir() and checkpoint_step(p) is not None and (p / CHECKPOINT_STATE_FILE).is_file()]
    return sorted(found, key=checkpoint_step, reverse=True)


def pruned(checkpoints: list[Path], step: int, keep_last: int) -> list[Path]:
    """What --keep-last removes once `step` is saved: the checkpoints up to `step` beyond the newest `keep_last`,
    and those past `step`, which a resume from an older checkpoint left from the run it went back from (counted as
    the newest, they pruned the checkpoint just saved, and the next --resume went on with that other run)."""
    newer = [p for p in checkpoints if checkpoint_step(p) > step]
    return newer + [p for p in checkpoints if checkpoint_step(p) <= step][keep_last:]


def save_checkpoint(accelerator, output_dir: Path, step: int, state: dict, keep_last: int,
                    write_more: Callable[[Path], None] | None = None) -> Path:
    """accelerator.save_state into a temporary folder, then rename: a crash mid-save leaves older ones intact.
    `write_more(folder)`: the main process's own files for the checkpoint (training-row probabilities)."""
    root = output_dir / CHECKPOINTS_DIR
    final = root / checkpoint_name(step)
    tmp = root / f".{final.name}.tmp"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    earlier = list_checkpoints(output_dir)
    with space_guard("checkpoint", final, tmp, like=earlier[0] if earlier else None):
        accelerator.save_state(str(tmp))               # model, optimizer, scheduler, RNG states (every process)
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            if write_more is not None:
                write_more(tmp)
            atomic_write_json(tmp / CHECKPOINT_STATE_FILE, state)
    if accelerator.is_main_process:
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in pruned(list_checkpoints(output_dir), step, keep_last):
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def incompatible_changes(saved: dict, current: dict) -> list[str]:
    """Options of `current` that differ from the checkpoint's config and would change the run. Options the
    checkpoint's tuneloop did not have count as their defaults; options it had and this one lacks are ignored."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    before = {k: saved.get(k, defaults.get(k)) for k in current}
    # `--small-data auto` not yet decided (it is, from the data, before the checkpoint loads and is checked again),
    # but for the options the user set, which it leaves alone
    undecided = tuple(k for k in SMALL_DATA_DECIDES if k not in (current.get("chosen") or ())) \
        if current.get("small_data") == "auto" else ()
    undecided += ("setfit_pooling",) if current.get("setfit_pooling") == "auto" else ()    # decided from the model
    undecided += ("method",) if current.get("method") == "auto" else ()          # decided from the data (choose.py)
    return [f"--{k.replace('_', '-')} {before[k]!r} → {current.get(k)!r}" for k in sorted(current)
            if k not in RESUMABLE_CHANGES and k not in undecided and not _same(k, before[k], current.get(k))]


def _same(name: str, before, now) -> bool:
    """Whether an option's value is unchanged; a path option's, up to how the path is written (a trailing slash,
    `./`, relative or absolute from here, another name of the same file)."""
    if before == now:
        return True
    if name not in PATH_OPTIONS or not isinstance(before, str) or not isinstance(now, str) or not before or not now:
        return False
    spelled = [os.path.normcase(os.path.abspath(os.path.expanduser(p))) for p in (before, now)]
    try:
        return spelled[0] == spelled[1] or os.path.exists(before) and os.path.exists(now) and os.path.samefile(
            before, now)
    except OSError:
        return False


def data_record(steps_per_epoch: int, train_rows: int) -> dict:
    """What a checkpoint's state records of its training data, for check_same_data (in tuneloop_state.json)."""
    return {"steps_per_epoch": steps_per_epoch, "train_rows": train_rows}


def check_same_data(path: Path, saved: dict, steps_per_epoch: int, train_rows: int, train_file: str | None) -> None:
    """Refuse a resume whose training data changed since the checkpoint (rows added or removed: the step would sit
    elsewhere in the epoch). Checkpoints of an earlier tuneloop record neither count: they resume unchecked."""
    rows, steps, train_file = saved.get("train_rows"), saved.get("steps_per_epoch"), train_file or "the training data"
    if rows is not None and rows != train_rows:
        raise TuneloopError(f"--resume: {train_file} has {train_rows} training rows, the checkpoint {path.name} was "
                            f"made with {rows}; resume with the same data, or start a new run")
    if steps is not None and steps != steps_per_epoch:
        raise TuneloopError(f"--resume: {train_file} makes {steps_per_epoch} steps per epoch, the checkpoint "
                            f"{path.name} was made with {steps} ({train_rows} training rows); resume with the same "
                            "data, or start a new run")


def _candidates(output_dir: Path, which: str, config: dict | None = None) -> list[Path]:
    """The checkpoints --resume may use, newest first (or the one it names)."""
    if which in ("latest", "true"):
        candidates = list_checkpoints(output_dir)
        if not candidates and (config or {}).get("method") in ("setfit", "probe") and \
                (config or {}).get("setfit_head", "logistic") == "logistic":      # no loop: no checkpoint, ever
            raise TuneloopError(f"--resume: {output_dir} has no checkpoint, and --method {config['method']} with "
                                "its logistic head saves none (it trains no loop); run the same command again with "
                                "--overwrite")
        if not candidates:
            raise TuneloopError(f"--resume: {output_dir} has no complete checkpoint to resume from (save them with "
                                "--save-every N or --save-every epoch)")
        return candidates
    path = Path(which)
    if not (path / CHECKPOINT_STATE_FILE).is_file():
        raise TuneloopError(f"--resume {which}: not a complete tuneloop checkpoint (no {CHECKPOINT_STATE_FILE})")
    return [path]


def _readable(candidates: list[Path], current_config: dict, num_processes: int, warn):
    """(path, saved state) of each candidate whose state file reads, refusing one made with other settings."""
    for path in candidates:
        try:
            state = json.loads((path / CHECKPOINT_STATE_FILE).read_text(encoding="utf-8"))
            if not (isinstance(state, dict) and isinstance(state.get("config"), dict)
                    and isinstance(state.get("step"), int)):         # valid JSON, but not a state: a traceback
                raise ValueError(f"{CHECKPOINT_STATE_FILE} holds no run state")
        except (OSError, ValueError) as e:
            warn(f"checkpoint {path} is damaged ({e}); trying the previous one")
            continue
        changes = incompatible_changes(state["config"], current_config)
        if state.get("num_processes", num_processes) != num_processes:
            changes.append(f"processes {state['num_processes']} → {num_processes}")
        if changes:
            raise TuneloopError(f"--resume: the checkpoint {path.name} was made with other settings "
                                f"({'; '.join(changes)}); resume with the same settings, or start a new run")
        yield path, state


def check_resumable(output_dir: Path, which: str, current_config: dict, num_processes: int) -> None:
    """Refuse a resume that cannot work before anything is read or written (reads only)."""
    damaged: list[str] = []
    for _ in _readable(_candidates(output_dir, which, current_config), current_config, num_processes,
                       damaged.append):
        return
    raise TuneloopError(f"--resume: no loadable checkpoint in {output_dir / CHECKPOINTS_DIR}"
                        + (f" ({damaged[0].removesuffix('; trying the previous one')})" if damaged else ""))


def load_checkpoint(accelerator, output_dir: Path, which: str, current_config: dict, num_processes: int,
                    warn) -> tuple[Path, dict]:
    """Restore the newest loadable checkpoint (or the one named) into the prepared objects; falls back past
    damaged ones with a warning."""
    candidates = _candidates(output_dir, which, current_config)
    for path, state in _readable(candidates, current_config, num_processes, warn):
        try:
            accelerator.load_state(str(path))
        except TuneloopError:                # not damage: the run's own files disagree with it (frozen_weights.py)
            raise
        except Exception as e:  # noqa: BLE001 - any unreadable part means: fall back to an older checkpoint
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            if path != candidates[-1]:
                warn(f"checkpoint {path} is damaged ({first}); falling back to "
                     f"{candidates[candidates.index(path) + 1].name}")
                continue
            raise TuneloopError(f"--resume: checkpoint {path} cannot be loaded ({first}) and there is no older one"
                                ) from None
        return path, state
    raise TuneloopError(f"--resume: no loadable checkpoint in {output_dir / CHECKPOINTS_DIR}")


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop what an interrupted run logged after its checkpoint, so the resumed run logs each step once."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.strip() and (json.loads(line).get("step") or 0) <= last_step]
    atomic_write_text(path, "".join(line + "\n" for line in kept))
