"""A search's folder and study across runs of `tuneloop search`: where each trial's folder is (recorded relative to
OUT, so a `--resume` from any working directory finds it), what `--overwrite` clears (the journal, trial folders and
results tuneloop wrote, and nothing else), and what a `--resume` (or a worker joining the study) must share with the
earlier trials: the space they were sampled from and the data they were scored on."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from pathlib import Path

import yaml

from ..config.fields import path_options
from ..config.options import TrainConfig
from ..exceptions import ConfigError
from ..layout import (BEST_DIR, CONFIG_FILE, PLOTS_DIR, RESULTS_FILE, RUN_LOCK, RUN_OUTPUTS, SEARCH_FILE, SEARCH_PAGE,
                      STUDY_JOURNAL, TRIALS_DIR)
from ..runtime import folder_lock
from ..sheets import data_file
from ..training.run_folder import FOLDER_KINDS, folder_kind, foreign_outputs, remove_outputs
from .common import check_same_files

TRIAL_NAME = re.compile(r"trial-\d{3,}")
SEARCH_OUTPUTS = (STUDY_JOURNAL, SEARCH_FILE, SEARCH_PAGE, BEST_DIR, PLOTS_DIR)      # a search's own, in OUT
# options that name files or folders: a trial's config holds them absolute, so that a trial resumed from another
# working directory is the same run (its checkpoint's settings) and reads the same data; not its output folder (the
# search names it) nor a distillation's files (a search distils nothing)
PATH_OPTIONS = tuple(sorted(path_options(TrainConfig) - {"output_dir", "teacher", "unlabeled_file"}))
NOT_PATHS = ("sample", "none", "balanced")       # --data-dir sample, --class-weights none|balanced


# ------------------------------------------------------------------------------------------------ trial folders
def trial_folder(out: Path, attrs: dict, resumed: bool = False) -> Path | None:
    """A trial's folder (`resumed`: the folder an enqueued trial resumes), from its user attributes: relative to
    OUT where recorded so (`trial_dir`), else as an older tuneloop recorded it (relative to where it ran)."""
    inside, given = (attrs.get("resumes_dir"), attrs.get("resumes")) if resumed else (attrs.get("trial_dir"),
                                                                                      attrs.get("folder"))
    if inside:
        return out / inside
    return Path(given) if given else None


def folder_attrs(out: Path, folder: Path) -> dict:
    """What a trial records of its folder: `folder` absolute (search.json shows it), `trial_dir` relative to OUT."""
    folder, home = Path(os.path.abspath(folder)), Path(os.path.abspath(out))
    attrs = {"folder": str(folder)}
    with contextlib.suppress(ValueError):                  # an older study's folder outside OUT: absolute only
        attrs["trial_dir"] = folder.relative_to(home).as_posix()
    return attrs


def resumption(attrs: dict) -> dict:
    """The user attributes of the trial enqueued to resume the interrupted one with `attrs`."""
    return {"resumes": attrs.get("folder"), **({"resumes_dir": attrs["trial_dir"]} if attrs.get("trial_dir") else {})}


def same_place(a: Path | None, b: Path | None) -> bool:
    return a is not None and b is not None and os.path.abspath(a) == os.path.abspath(b)


# ---------------------------------------------------------------------------------------------------- paths
def _a_path(name: str, value) -> bool:
    if not isinstance(value, str) or value in NOT_PATHS or name not in PATH_OPTIONS:
        return False
    if name == "model":
        from ..model.loading import ALIASES

        return value not in ALIASES and os.path.isdir(value)
    return os.path.exists(data_file(value))


def anchored(config):
    """`config` with its relative paths (data files, a local model folder) made absolute."""
    changes = {name: os.path.abspath(getattr(config, name)) for name in PATH_OPTIONS
               if _a_path(name, getattr(config, name)) and not os.path.isabs(getattr(config, name))}
    return config.replace(**changes) if changes else config


def as_recorded(folder: Path, config) -> dict:
    """For a trial resumed from its checkpoint: the paths its config.yaml holds relative (an older tuneloop's trial)
    that name what `config` names, as they were written, so that the checkpoint's settings are unchanged."""
    saved = _saved_config(folder)
    return {name: saved[name] for name in PATH_OPTIONS if isinstance(saved.get(name), str)
            and not os.path.isabs(saved[name]) and saved[name] != getattr(config, name)
            and os.path.abspath(saved[name]) == getattr(config, name)}


def _saved_config(folder: Path | None) -> dict:
    if folder is None or not (folder / CONFIG_FILE).is_file():
        return {}
    try:
        saved = yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    return saved if isinstance(saved, dict) else {}


# ------------------------------------------------------------------------------------------------- --overwrite
def own_journal(out: Path, storage: str | None) -> bool:
    """Whether --storage names the folder's own journal, OUT/study.journal (the default storage)."""
    return bool(storage) and "://" not in storage and same_place(Path(storage), out / STUDY_JOURNAL)


def check_not_a_run(out: Path) -> None:
    """A search writes OUT/best/, OUT/plots/ and OUT/trials/: a folder that holds a run (whose best/ that is), an
    experiment or a distillation is refused, --overwrite or not (it clears a search's files only); so is one holding
    files named as a search's outputs (best/, plots/) that no search wrote: the user's own."""
    kind = folder_kind(out)
    if kind is None and (theirs := foreign_outputs(out, SEARCH_OUTPUTS)):
        raise ConfigError(f"--output-dir {out}: holds {', '.join(theirs)}, which no tuneloop search wrote and a "
                          "search would replace; move them away or choose a new folder for the search")
    if kind not in (None, "search"):
        raise ConfigError(f"--output-dir {out}: already holds {FOLDER_KINDS[kind]}, whose files (best/, plots/) a "
                          "search would replace; choose a new folder for the search")


def clear_search(out: Path, storage: str | None, study: str) -> None:
    """--overwrite: the earlier search in `out` goes (its study journal, trial folders, best model, search.json and
    page); files of the user's stay. A study in a shared --storage is never deleted: refused in one line."""
    if storage and not own_journal(out, storage):
        raise ConfigError(f"--overwrite: the study lives in --storage {storage}, which other workers may share, and "
                          "tuneloop deletes no study there; start a new search with another --study NAME (and "
                          f"--output-dir), or delete it yourself: optuna delete-study --storage {storage} "
                          f"--study-name {study}")
    trials = out / TRIALS_DIR
    folders = sorted(p for p in trials.iterdir() if p.is_dir() and TRIAL_NAME.fullmatch(p.name)) \
        if trials.is_dir() else []
    for folder in folders:             # all checked first: a trial being run stops the clearing before it starts
        if (who := folder_lock.holder(folder)) is not None:
            raise folder_lock.busy(folder, who)
    for folder in folders:
        remove_outputs(folder, (*RUN_OUTPUTS, RUN_LOCK))
        with contextlib.suppress(OSError):
            folder.rmdir()                 # only when empty: nothing of the user's is removed
    with contextlib.suppress(OSError):
        trials.rmdir()
    remove_outputs(out, SEARCH_OUTPUTS)


# ----------------------------------------------------------------------------------- what a resume must share
class SpaceRecorder:
    """Stands in for an Optuna trial in `search.suggest`: the distribution each parameter would be sampled from."""

    def __init__(self):
        self.distributions: dict = {}

    def suggest_categorical(self, name, choices):
        from optuna.distributions import CategoricalDistribution

        self.distributions[name] = CategoricalDistribution(choices)
        return choices[0]

    def suggest_int(self, name, low, high, log=False):
        from optuna.distributions import IntDistribution

        self.distributions[name] = IntDistribution(low, high, log=log)
        return low

    def suggest_float(self, name, low, high, log=False):
        from optuna.distributions import FloatDistribution

        self.distributions[name] = FloatDistribution(low, high, log=log)
        return low


def never_scored(trial) -> bool:
    """A trial that failed on an error (a wrong --label-column, a sampled value that did not validate): it was never
    scored nor will be resumed, so what it was given binds no later search of the study."""
    from optuna.trial import TrialState

    return trial.state == TrialState.FAIL and not trial.user_attrs.get("interrupted")


def _spec_text(distribution) -> str:
    if hasattr(distribution, "choices"):
        return f"{{choices: {list(distribution.choices)}}}"
    return (f"{{low: {distribution.low}, high: {distribution.high}" + (", log: true}" if distribution.log else "}"))


def check_space(study, wanted: dict, where: str, start_over: str) -> None:
    """Refuse a space that is not the one the study's trials were sampled from (Optuna refuses a parameter sampled
    another way in a traceback; another range would rank trials of two searches together), naming the parameter."""
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False):
        had = trial.distributions
        if not had or never_scored(trial):                  # queued, failed before sampling, or failed
            continue
        finished = trial.state in (TrialState.COMPLETE, TrialState.PRUNED)
        for name in sorted(set(had) | (set(wanted) if finished else set())):
            if name not in wanted:
                what = f"{name} is not in it, but the study's trial {trial.number} searched {_spec_text(had[name])}"
            elif name not in had:
                what = f"{name} is new in it ({_spec_text(wanted[name])}): the study's trial {trial.number} had none"
            elif had[name] != wanted[name]:
                what = (f"{name} is {_spec_text(wanted[name])} in it, but {_spec_text(had[name])} in the study's "
                        f"trial {trial.number}")
            else:
                continue
            raise ConfigError(f"{where} is not the space of the search in this study: {what}; to search a new space, "
                              f"{start_over}")


def scored_on(config, names) -> dict:
    """The options a trial is scored on, as a trial records them (paths absolute)."""
    return {name: _normal(name, getattr(config, name)) for name in names}


def _normal(name: str, value):
    if isinstance(value, (list, tuple)):
        return [_normal(name, v) for v in value]
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if name in PATH_OPTIONS and isinstance(value, str) and value not in NOT_PATHS:
        return os.path.abspath(value)      # an older study's relative paths: relative to where it is resumed
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def check_scored_on(study, out: Path, current: dict, start_over: str) -> None:
    """Refuse options that change what the trials are scored on (other validation data: their scores would not
    compare), against each earlier trial's record (or, for an older tuneloop's trial, its config.yaml). Paths are
    compared for the trials run on this machine only: another machine's paths are its own."""
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        if never_scored(trial):                 # a trial that failed on the error the user has fixed since
            continue
        recorded = attrs.get("scored_on") or _saved_config(trial_folder(out, attrs))
        for name, value in current.items():
            if name not in recorded or (name in PATH_OPTIONS and attrs.get("host") != host):
                continue
            before = _normal(name, recorded[name])
            if before != value:
                flag = f"--{name.replace('_', '-')}"
                raise ConfigError(f"{flag}: the study's earlier trials were scored with {before!r} (trial "
                                  f"{trial.number}), this search gives {value!r}: their scores would not compare; "
                                  f"give the same {flag}, or {start_over}")
        folder = trial_folder(out, attrs)
        if attrs.get("host") == host and folder is not None and (folder / RESULTS_FILE).is_file():
            check_same_files(folder, json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8")), "the search")
