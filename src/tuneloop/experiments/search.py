"""`tuneloop search`: hyperparameter search on Optuna that ends with the best model in hand.

The space is a YAML file of options (any `tuneloop train` option), each a range, a log range or a list of
choices:

    lr: {low: 1.0e-5, high: 2.0e-4, log: true}
    batch_size: {choices: [16, 32]}
    epochs: {low: 1, high: 3}
    warmup_ratio: {low: 0.0, high: 0.2}

Each trial is a normal tuneloop run in OUT/trials/trial-NNN/ (config, metrics, report, its best evaluation in
best/), sampled by TPE and scored by its *best* evaluation of the main metric (or --metric-for-best), not its last;
every evaluation is reported to the pruner (median or successive halving), which stops unpromising trials early.
The study lives in Optuna storage: by default a journal file in OUT/, or any Optuna storage URL (PostgreSQL,
MySQL, Redis, a shared journal file), so that workers on several machines run one study (`--storage URL --study
NAME`). A trial interrupted by a kill or SIGTERM is resumed from its checkpoint by `--resume`, and finished trials
are never re-run. At the end OUT/best/ holds the best trial's best checkpoint with its config, OUT/search.json the
trials and OUT/search.html the optimisation history and the parameters' importances.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import socket
from pathlib import Path

from ..atomic import atomic_write_json, check_place, make_folder
from ..config.options import PRUNERS, TrainConfig
from ..exceptions import ConfigError, Interrupted, NonFiniteLoss
from ..layout import (BEST_DIR, CHECKPOINTS_DIR, CONFIG_FILE, MODEL_DIR, RESULTS_FILE, SEARCH_FILE, STUDY_JOURNAL,
                      TRIALS_DIR)
from ..tasks import signed_score
from ..training.finish import gate_kept_model
from ..training.loop import run_training
from .common import copy_folder, interrupted_in, resume_point
from .search_space import RANKED_BY, SCORED_ON, read_space, suggest
from .search_folder import (SpaceRecorder, anchored, as_recorded, check_not_a_run, check_scored_on, check_space,
                            clear_search, folder_attrs, own_journal, resumption, same_place, scored_on, trial_folder)

log = logging.getLogger("tuneloop")
PRUNE_RESOLUTION = 20          # evaluations are reported at epoch × 20 (0.05-epoch steps): trials of other batch
                               # sizes are compared at the same point of training


@dataclasses.dataclass
class SearchOptions:
    space: str                               # the YAML file of the space
    trials: int = 12                         # finished (complete or pruned) trials the study should reach
    storage: str | None = None               # an Optuna storage URL; default: OUT/study.journal
    study: str = "tuneloop"
    pruner: str = "median"
    resume: bool = False


def open_study(out: Path, options: SearchOptions, seed: int):
    """Create or load the study (maximising the signed score: the metric, negated when lower is better)."""
    import optuna

    if options.pruner not in PRUNERS:
        raise ConfigError(f"--pruner: unknown value {options.pruner!r}; choose one of {', '.join(PRUNERS)}")
    if options.storage and not own_journal(out, options.storage):
        storage = options.storage
    else:
        from optuna.storages.journal import JournalFileBackend

        make_folder(out, "--output-dir")
        storage = optuna.storages.JournalStorage(JournalFileBackend(str(out / STUDY_JOURNAL)))
    pruner = {"median": optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0),
              "halving": optuna.pruners.SuccessiveHalvingPruner(), "none": optuna.pruners.NopPruner()}[options.pruner]
    try:
        study = _created(optuna, options.study, storage, pruner)
    except Exception as e:  # noqa: BLE001 - optuna and the database drivers raise many kinds for a bad URL
        if not options.storage:
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ConfigError(f"--storage {options.storage}: cannot open a study there ({first}); give an Optuna "
                          "storage URL such as sqlite:///study.db or postgresql://user@host/db") from None
    # one worker on a new study samples reproducibly from --seed; a worker joining a study, or any worker of a
    # shared storage, gets its own random stream; constant_liar keeps concurrent workers from sampling next to
    # each other's running trials
    offset = os.getpid() if options.storage else len(study.get_trials(deepcopy=False))
    study.sampler = optuna.samplers.TPESampler(seed=seed + offset, constant_liar=True)
    return study


def _created(optuna, name: str, storage, pruner, tries: int = 5):
    """The study, made or loaded. Workers started together on a new database race to create Optuna's tables, and
    the loser's CREATE fails on a unique key (PostgreSQL: pg_type_typname_nsp_index); it tries again once the
    winner's tables exist."""
    import random
    import time

    from sqlalchemy.exc import IntegrityError

    for attempt in range(tries):
        try:
            return optuna.create_study(study_name=name, storage=storage, load_if_exists=True, direction="maximize",
                                       pruner=pruner)
        except IntegrityError:
            if attempt == tries - 1:
                raise
            time.sleep(0.5 + random.random())


def requeue_interrupted(study, out: Path) -> int:
    """Trials interrupted on this machine (`stopped_trials`) are queued again with the same parameters and folder,
    so that the new trial resumes from the old one's checkpoint; a killed worker's trial is marked failed first.
    Returns how many."""
    from optuna.trial import TrialState

    found = stopped_trials(study, out)
    for trial, killed, folder in found:
        if killed:
            study.tell(trial.number, state=TrialState.FAIL)
        study.enqueue_trial(trial.params, user_attrs=resumption(trial.user_attrs), skip_if_exists=False)
        log.info(f"trial {trial.number} was interrupted; it will resume from {folder}")
    return len(found)


def stopped_trials(study, out: Path) -> list[tuple]:
    """(trial, killed, folder) of each trial interrupted on this machine — left RUNNING by a killed worker
    (`killed`), or failed by SIGINT/SIGTERM (which saved a checkpoint) — whose folder no other trial resumes."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    trials = study.get_trials(deepcopy=False)
    queued = [trial_folder(out, t.user_attrs, resumed=True) for t in trials
              if t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)]
    found = []
    for trial in trials:
        attrs, folder = trial.user_attrs, trial_folder(out, trial.user_attrs)
        killed = trial.state == TrialState.RUNNING and attrs.get("host") == host and not _alive(attrs.get("pid"))
        stopped = trial.state == TrialState.FAIL and attrs.get("interrupted")
        if not (killed or stopped) or folder is None or any(same_place(folder, q) for q in queued):
            continue
        queued.append(folder)
        found.append((trial, killed, folder))
    return found


def check_not_stopped(study, out: Path) -> None:
    """Without --resume, a study in OUT's own journal that was stopped (a trial interrupted, or its worker killed)
    is not continued silently: that trial would be left behind, a new one sampled in its place."""
    stopped = stopped_trials(study, out)
    if stopped:
        raise ConfigError(f"--output-dir {out}: holds a search that was stopped (trial {stopped[0][0].number} was "
                          "interrupted); pass --resume to continue it, or --overwrite to start a new one")


def _alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Objective:
    """One trial: a tuneloop run with the sampled options, its evaluations reported to the pruner."""

    def __init__(self, base: TrainConfig, out: Path, space: dict, on_step=None):
        self.base, self.out, self.space, self.on_step = base, out, space, on_step

    def __call__(self, trial) -> float:
        import optuna

        params = suggest(trial, self.space)
        place = (trial_folder(self.out, trial.user_attrs, resumed=True)
                 or self.out / TRIALS_DIR / f"trial-{trial.number:03d}")
        resume = resume_point(place)
        for key, value in {**folder_attrs(self.out, place), "host": socket.gethostname(), "pid": os.getpid(),
                           "scored_on": scored_on(self.base, scored_names(self.space))}.items():
            trial.set_user_attr(key, value)
        folder = trial.user_attrs["folder"]
        chosen = sorted({*(self.base.chosen or ()), *params})     # the trial's values are not small-data's to change
        config = anchored(self.base.replace(**params, chosen=chosen, output_dir=folder, resume=resume,
                                            overwrite=True, save_every=self.base.save_every or "epoch", keep_last=1))
        if resume:                               # an older trial's relative paths, as its checkpoint has them
            config = config.replace(**as_recorded(Path(folder), config))
        if config.method == "auto":        # a search tunes the training loop: its trials fine-tune (training/choose.py)
            config = config.replace(method="finetune")
        def report(state):
            if self.on_step is not None:
                self.on_step(state)
            if state.history and state.history[-1]["step"] == state.step:
                best = state.best["metric"]
                value = next(iter(state.history[-1]["results"].values()))[best]
                trial.report(signed_score(best, value),
                             round(state.history[-1]["epoch"] * PRUNE_RESOLUTION))
                if trial.should_prune():
                    trial.set_user_attr("pruned_at_epoch", state.history[-1]["epoch"])
                    raise optuna.TrialPruned()

        log.info(f"trial {trial.number}: {json.dumps(params)} → {folder}")
        try:
            results = run_training(config.validate(), report)
        except Interrupted as stopped:                     # a checkpoint was saved: --resume continues the trial
            trial.set_user_attr("interrupted", True)
            raise interrupted_in(Path(folder), stopped, "search", self.out) from None
        except NonFiniteLoss as diverged:        # sampled values this run cannot train with (an lr too large): an
            trial.set_user_attr("diverged", str(diverged))     # outcome of the search, which goes on, not the end of it
            log.warning(f"trial {trial.number} diverged ({diverged}); counted as pruned, never the best")
            raise optuna.TrialPruned() from None
        best = results["best"]
        trial.set_user_attr("metric", best["metric"])
        trial.set_user_attr("value", best["value"])
        trial.set_user_attr("best_step", best["step"])
        _drop(Path(folder), MODEL_DIR, CHECKPOINTS_DIR)          # best/ is the trial's result; the rest is re-creatable
        return signed_score(best["metric"], best["value"])


def _drop(folder: Path, *names: str) -> None:
    for name in names:
        shutil.rmtree(folder / name, ignore_errors=True)


def search(config: TrainConfig, options: SearchOptions, on_step=None) -> dict:
    """Run trials until the study has `options.trials` finished ones; then keep the best and write the summary."""
    import optuna

    if options.trials < 1:
        raise ConfigError(f"--trials: must be at least 1, got {options.trials}")
    space = read_space(options.space, config)
    out = Path(config.output_dir)
    check_place(out, "--output-dir", folder=True)
    check_not_a_run(out)
    if not options.resume and (out / SEARCH_FILE).exists() and not config.overwrite:
        raise ConfigError(f"--output-dir {out}: already holds a search; pass --resume to continue it, or choose a "
                          "new folder")
    own = not options.storage or own_journal(out, options.storage)
    if options.resume and own and not (out / STUDY_JOURNAL).is_file():    # a typo in the folder
        raise ConfigError(f"--resume: {out} holds no search to continue; leave out --resume to start one")
    if config.overwrite and not options.resume:              # a new search: the earlier one's files go first
        clear_search(out, options.storage, options.study)
    before = optuna.logging.get_verbosity()
    # for the search, the caller's level given back after: Optuna's warnings are a failed trial's traceback, where
    # tuneloop says the error in one line
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    from ..runtime.process import console_logging, process_group_kept

    try:            # the search's own lines between trials (a trial resumed); its trials share the process group
        with console_logging(config.quiet), process_group_kept():
            return run_trials(config, options, Path(os.path.abspath(out)), space, on_step)
    finally:
        optuna.logging.set_verbosity(before)


def run_trials(config: TrainConfig, options: SearchOptions, out: Path, space: dict, on_step=None) -> dict:
    """The study opened (or resumed) in `out`, trials run until `options.trials` have finished, then `finish`."""
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    study = open_study(out, options, config.seed)
    base = config.replace(resume=None, precision_gate="off")
    if options.resume and not study.get_trials(deepcopy=False):
        where = "--storage" if options.storage else str(out)
        raise ConfigError(f"--resume: the study {options.study!r} in {where} has no trials to continue (--study "
                          "names another?); leave out --resume to start it")
    if not options.resume and (not options.storage or own_journal(out, options.storage)):
        check_not_stopped(study, out)
    check_earlier_trials(study, out, base, space, options)
    if options.resume:
        requeue_interrupted(study, out)
    finished = (TrialState.COMPLETE, TrialState.PRUNED)
    done = len(study.get_trials(deepcopy=False, states=finished))
    if done < options.trials:
        study.optimize(Objective(base, out, space, on_step),
                       n_trials=None, callbacks=[MaxTrialsCallback(options.trials, states=finished)], catch=(),
                       gc_after_trial=True)                  # no trial is gated: OUT/best is, once, below
    summary = finish(study, out, space, options)
    if summary.get("best", {}).get("model"):
        trial = Path(summary["best"]["folder"]) / RESULTS_FILE
        rows = json.loads(trial.read_text(encoding="utf-8"))["eval"].get("num_samples", 0) if trial.is_file() else 0
        gate_kept_model(out / BEST_DIR, config, rows)
    return summary


def scored_names(space: dict) -> tuple[str, ...]:
    """The options every trial of a study must share: what they are scored on and ranked by (the space's aside;
    --test-file only gets predictions)."""
    return tuple(name for name in (*SCORED_ON, *RANKED_BY) if name not in space and name != "test_file")


def check_earlier_trials(study, out: Path, base: TrainConfig, space: dict, options: SearchOptions) -> None:
    """A study that has trials (a --resume, or a worker joining) is continued only with the space they were sampled
    from and the data they were scored on: anything else is refused in one line naming the option."""
    if not study.get_trials(deepcopy=False):
        return
    shared = options.storage and not own_journal(out, options.storage)
    start_over = ("name a new --study (and --output-dir)" if shared else
                  "pass --overwrite to start a new search there, or choose another --output-dir")
    recorder = SpaceRecorder()
    suggest(recorder, space)
    check_space(study, recorder.distributions, f"--space {options.space}", start_over)
    check_scored_on(study, out, scored_on(base, scored_names(space)), start_over)


def finish(study, out: Path, space: dict, options: SearchOptions) -> dict:
    """OUT/best/ (the best trial's best checkpoint and config.yaml), OUT/search.json and OUT/search.html."""
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    trials = [{"number": t.number, "state": t.state.name.lower(), "params": t.params,
               "value": t.user_attrs.get("value"), "metric": t.user_attrs.get("metric"),
               "best_step": t.user_attrs.get("best_step"), "pruned_at_epoch": t.user_attrs.get("pruned_at_epoch"),
               **({"diverged": t.user_attrs["diverged"]} if t.user_attrs.get("diverged") else {}),
               "folder": str(trial_folder(out, t.user_attrs) or "") or None,
               "seconds": round((t.datetime_complete - t.datetime_start).total_seconds(), 1)
               if t.datetime_complete and t.datetime_start else None} for t in study.get_trials(deepcopy=False)]
    summary = {"study": study.study_name, "storage": options.storage or str(out / STUDY_JOURNAL),
               "trials": trials, "space": space,
               "finished": sum(t["state"] in ("complete", "pruned") for t in trials),
               "pruned": sum(t["state"] == "pruned" for t in trials)}
    if complete:
        best = study.best_trial
        folder = trial_folder(out, best.user_attrs)
        summary["best"] = {"number": best.number, "params": best.params, "metric": best.user_attrs["metric"],
                           "value": best.user_attrs["value"], "step": best.user_attrs.get("best_step"),
                           "folder": str(folder)}
        if (folder / BEST_DIR).is_dir():                   # this machine ran it (or shares the disk)
            copy_folder(folder / BEST_DIR, out / BEST_DIR, extra=(folder / CONFIG_FILE,))
            summary["best"]["model"] = str(out / BEST_DIR)
        elif (out / BEST_DIR).is_dir():       # an earlier best's copy: `predict OUT` would take it for this one
            shutil.rmtree(out / BEST_DIR)
            log.warning(f"the best trial, {best.number}, ran on another machine ({folder}); {out / BEST_DIR}, an "
                        "earlier best trial's copy, is removed")
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
            other = trial_folder(out, t.user_attrs)           # other trials' models: no longer needed
            if t.number != best.number and other and other.is_dir() and same_place(other.parent, out / TRIALS_DIR):
                _drop(other, BEST_DIR, MODEL_DIR, CHECKPOINTS_DIR)
    else:
        log.warning(f"no trial of the {summary['finished']} finished completed (pruned or diverged): there is no best "
                    "model; widen or move the space (a smaller lr), or --pruner none")
    atomic_write_json(out / SEARCH_FILE, summary)
    from ..report.search_page import write_search_page

    write_search_page(out, study, summary)
    return summary

