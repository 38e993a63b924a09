"""Experiments: one configuration run several times, then summarised.

`--seeds 1 2 3` (or `--num-seeds N`) runs it once per seed into OUT/seed-<s>/; `--folds K` once per fold of the
training file into OUT/fold-<k>/ (each validated on its fold, stratified like --validation-split). Every run is a
normal tuneloop run folder. Afterwards OUT/summary.json and OUT/summary.html give each metric's mean ± std and 95%
interval (Student's t) with the per-run values; the best run's model (on validation, by the main metric or
--metric-for-best) is copied to OUT/model. A run whose model predicts a single class on validation is reported as
collapsed (and rerun with the next unused seed with --retry-collapsed). k-fold also writes OUT/out_of_fold.csv (each
training row's prediction by the run that did not train on it) and ranks the training labels by those out-of-fold
probabilities (OUT/label_issues.csv, cleanlab's confident learning as it is meant to be used).
With --resume, finished runs are read back, interrupted ones resume from their checkpoints.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path
from typing import Callable

import numpy as np

from ..atomic import atomic_write_json
from ..config.options import TrainConfig
from ..exceptions import ConfigError, Interrupted, TuneloopError
from ..layout import BEST_DIR, CONFIG_FILE, MODEL_DIR, RESULTS_FILE, SUMMARY_FILE
from ..objective import SingleLabel
from ..tasks import metric_range, signed_score
from ..training.finish import gate_kept_model
from ..training.loop import run_training
from ..training.run_folder import check_run_folder, is_run_folder, remove_outputs
from .common import check_same_files, copy_folder, interrupted_in, resume_point

log = logging.getLogger("tuneloop")


def is_experiment(config: TrainConfig) -> bool:
    return bool(config.seeds or config.num_seeds or (config.folds and config.fold is None))


def planned_runs(config: TrainConfig) -> list[tuple[str, dict]]:
    """(folder name, the options that make the run) of each run of the experiment."""
    if config.folds and (config.seeds or config.num_seeds):
        raise ConfigError("--folds with --seeds / --num-seeds: run one of them (a fold experiment uses --seed)")
    if config.folds:
        return [(f"fold-{k}", {"fold": k}) for k in range(1, config.folds + 1)]
    seeds = config.seeds or [config.seed + i for i in range(config.num_seeds)]
    return [(f"seed-{s}", {"seed": s}) for s in seeds]


def run_experiment(config: TrainConfig, on_step: Callable | None = None) -> dict:
    """Run every planned run (skipping finished ones on --resume), then summarise into OUT/; what the experiment
    says between its runs (a run read back, a collapse retried) on stderr, as each run's own lines."""
    from ..runtime.process import console_logging, process_group_kept

    with console_logging(config.quiet), process_group_kept():     # the runs share the processes' group; then down
        return _experiment(config, on_step)


def _experiment(config: TrainConfig, on_step: Callable | None) -> dict:
    from accelerate import PartialState

    if config.dry_run:
        raise ConfigError("--dry-run checks a single run: leave out --seeds / --num-seeds / --folds")
    out = Path(config.output_dir)
    check_run_folder(out, config.overwrite, resume=config.resume is not None)
    if config.overwrite and config.resume is None and PartialState().is_main_process and out.is_dir():
        remove_outputs(out)     # an earlier single run's results.json, config.yaml, best/ ... would outlive it
    base = config.replace(seeds=None, num_seeds=None, precision_gate="off")     # the kept model is gated, once
    queue = planned_runs(config)
    runs, used, retries = [], {options.get("seed", config.seed) for _, options in queue}, set()
    while queue:
        name, options = queue.pop(0)
        try:
            results = _run_one(base, out / name, options, on_step)
        except Interrupted as stopped:
            raise interrupted_in(out / name, stopped, "train", out) from None
        except Exception as failed:          # which run: its own line names no folder (its class, exit code kept)
            in_run(failed, name)
            raise
        record = {"name": name, **options, "results": results, "collapsed": collapsed(results)}
        runs.append(record)
        if record["collapsed"] and config.retry_collapsed and "seed" in options and name not in retries:
            retry = max(used) + 1          # one retry per planned seed: a retry that collapses again stays
            used.add(retry)
            retries.add(f"seed-{retry}")
            log.warning(f"{name} collapsed to a single predicted class; rerunning with seed {retry}")
            record["replaced_by"] = f"seed-{retry}"
            queue.insert(0, (f"seed-{retry}", {"seed": retry}))
        elif record["collapsed"] and config.retry_collapsed and "fold" in options:
            log.warning(f"{name} collapsed to a single predicted class; --retry-collapsed reruns a seed's run, not "
                        "a fold's (its rows are the fold's): it counts as it is")
    summary = summarise(config, runs)
    if PartialState().is_main_process:
        keep_models(out, summary, config.keep)
        kept = next(r for r in runs if r["name"] == summary["kept"])
        gate_kept_model(out / MODEL_DIR, config, kept["results"].get("eval", {}).get("num_samples", 0))
        if config.folds:
            from .folds import write_out_of_fold

            summary["out_of_fold"] = write_out_of_fold(base, out, [r["name"] for r in runs])
        atomic_write_json(out / SUMMARY_FILE, summary)
        from ..report.summary import write_summary_page

        write_summary_page(out, summary)
    return summary


def in_run(error: Exception, name: str) -> None:
    """`error`, raised by the experiment's run `name`, saying so: a user error's one line starts with the run's folder
    name (unless it names it already), any other error gets a note under its traceback."""
    if isinstance(error, TuneloopError) and len(error.args) == 1 and isinstance(error.args[0], str):
        if name not in error.args[0]:
            error.args = (f"{name}: {error.args[0]}",)
    else:
        error.add_note(f"(in {name}, a run of the experiment)")


def _run_one(base: TrainConfig, folder: Path, options: dict, on_step) -> dict:
    """One run of the experiment: read back when finished, resumed when it has checkpoints and --resume."""
    if (folder / RESULTS_FILE).is_file() and base.resume is not None:
        check_made_alike(folder, base.replace(output_dir=str(folder), **options))
        results = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
        check_same_files(folder, results)
        log.info(f"{folder.name}: finished earlier, read back")
        return results
    resume = resume_point(folder) if base.resume is not None else None
    overwrite = base.overwrite or (base.resume is not None and is_run_folder(folder))
    log.info(f"{folder.name}: {'resuming' if resume else 'starting'}")
    cfg = base.replace(output_dir=str(folder), resume=resume, overwrite=overwrite, **options)
    return run_training(cfg.validate(), on_step)


def check_made_alike(folder: Path, config: TrainConfig, what: str = "the experiment") -> None:
    """A finished run read back by --resume was made with these options, or the summary would mix runs of two
    settings: refused, as a run's checkpoint made with other settings is. The options a run may change on resume
    count too where they scored it (the validation rows), as do the experiment's own (--keep, --retry-collapsed)
    not."""
    from ..config.options import read_yaml_options
    from ..training.checkpoint import incompatible_changes

    if not (folder / CONFIG_FILE).is_file():
        return
    saved = read_yaml_options(folder / CONFIG_FILE, flag="--resume")
    current = {k: v for k, v in config.to_dict().items() if k not in ("keep", "retry_collapsed")}
    changes = incompatible_changes(saved, current) + [
        f"--{k.replace('_', '-')} {saved.get(k)!r} → {current.get(k)!r}"
        for k in ("validation_file", "max_eval_samples") if k in saved and saved.get(k) != current.get(k)]
    if changes:
        raise ConfigError(f"--resume: {folder.name} finished with other settings ({'; '.join(changes)}); resume "
                          f"with the same settings, or start {what} in a new --output-dir")


def collapsed(results: dict) -> bool:
    """A single-label classifier that predicts one class for every validation row (results.json says so since
    the run records it; per_class tells for older runs)."""
    if "collapsed" in results:
        return results["collapsed"] is not None
    classes = next(iter((results.get("per_class") or {}).values()), None)
    if results.get("problem_type") != SingleLabel.kind or not classes or len(classes) < 2:   # a field of results.json
        return False
    predicted = [name for name, m in classes.items() if m["recall"] > 0 or m["precision"] > 0]
    return len(predicted) <= 1


def interval(values: list[float], metric: str | None = None) -> dict:
    """mean, sample std and the 95% t-interval of the mean, cut to the values `metric` can take (a correlation's
    interval over 2 runs would otherwise reach past 1)."""
    from scipy.stats import t

    n, mean = len(values), float(np.mean(values))
    std = float(np.std(values, ddof=1)) if n > 1 else 0.0
    half = float(t.ppf(0.975, n - 1) * std / math.sqrt(n)) if n > 1 else float("nan")
    low, high = metric_range(metric) if metric else (-math.inf, math.inf)
    return {"mean": round(mean, 6), "std": round(std, 6),
            "ci95": [round(max(mean - half, low), 6), round(min(mean + half, high), 6)] if n > 1 else None, "n": n}


def summarise(config: TrainConfig, runs: list[dict]) -> dict:
    """summary.json: per metric mean ± std and 95% interval over the runs that count (collapsed runs that were
    replaced do not), the per-run values, and the run whose model is kept."""
    counted = [r for r in runs if "replaced_by" not in r]
    main = runs[0]["results"]["main_metric"]
    metric = config.metric_for_best or main
    metrics = [k for k in counted[0]["results"]["eval"] if k != "num_samples"]
    per_run = {r["name"]: {k: r["results"]["eval"].get(k) for k in metrics} for r in runs}
    stats = {k: interval([r["results"]["eval"][k] for r in counted], k) for k in metrics}
    best_of = [r for r in counted if not r["collapsed"]] or counted

    def score(r):
        value = r["results"]["eval"].get(metric, r["results"]["eval"].get(main))
        return signed_score(metric, value)

    def has_model(r):
        return (Path(config.output_dir) / r["name"] / MODEL_DIR).is_dir()

    best = kept = max(best_of, key=score)
    if not has_model(best):                     # an earlier pass's --keep best removed it
        with_model = [r for r in best_of if has_model(r)] or [r for r in counted if has_model(r)]
        if not with_model:
            raise ConfigError(f"{config.output_dir}: no run of the experiment still has its {MODEL_DIR}/ folder "
                              "to keep; rerun one of them, or start the experiment in a new --output-dir")
        kept = max(with_model, key=score)
        log.warning(f"{best['name']} scores best by {metric}, but its model was removed by an earlier --keep best; "
                    f"keeping {kept['name']}'s, the best of the runs that still have one")
    baselines = [r["results"]["baseline"]["eval"] for r in counted if r["results"].get("baseline")]
    baseline = {k: interval([b[k] for b in baselines], k) for k in metrics if all(k in b for b in baselines)} \
        if baselines else None                    # the TF-IDF baseline on each run's rows (folds: its fold's)
    return {"baseline": baseline, "kind": "folds" if config.folds else "seeds", "main_metric": main,
            "metric_for_best": metric,
            "runs": [{"name": r["name"], **{k: r[k] for k in ("seed", "fold") if k in r},
                      "collapsed": r["collapsed"], **({"replaced_by": r["replaced_by"]} if "replaced_by" in r else {}),
                      "best": r["results"].get("best"), "eval": per_run[r["name"]],
                      "warnings": r["results"].get("warnings", [])} for r in runs],       # each run's train.log has all
            "metrics": stats, "kept": kept["name"], "keep": config.keep,
            **({"best_run": best["name"]} if kept is not best else {}),
            "collapsed": [r["name"] for r in runs if r["collapsed"]], "output_dir": str(config.output_dir)}


def keep_models(out: Path, summary: dict, keep: str) -> None:
    """OUT/model = the best run's model (copied, then renamed into place); with --keep best the other runs'
    model/ and best/ folders are removed (their metrics, reports and predictions stay)."""
    copy_folder(out / summary["kept"] / MODEL_DIR, out / MODEL_DIR)
    if keep == "best":
        for run in summary["runs"]:
            if run["name"] != summary["kept"]:
                for name in (MODEL_DIR, BEST_DIR):
                    shutil.rmtree(out / run["name"] / name, ignore_errors=True)
