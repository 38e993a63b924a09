"""Experiments: several seeds and k-fold summarised; Optuna search that keeps the best trial's best checkpoint,
resumes after a kill and shares one study between two workers."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import fast_options, keyword_pair

import tuneloop
from tuneloop.cli.main import main
from tuneloop.experiments import runs as experiments

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def train_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("exp") / "train.csv"
    rng = random.Random(0)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "sentence1", "sentence2", "label"])
        for i in range(200):
            label, a, b = keyword_pair(rng)
            w.writerow([f"r{i}", a, b, ["no", "yes"][label]])
    return path


def options(tiny_model, train_csv, out, **extra):
    return {**fast_options(tiny_model), "train_file": str(train_csv), "output_dir": str(out), **extra}


def test_seeds_give_runs_a_matching_summary_and_collapsed_runs_are_retried(tiny_model, train_csv, tmp_path,
                                                                          monkeypatch):
    real = experiments.collapsed
    monkeypatch.setattr(experiments, "collapsed",
                        lambda results: results["output_dir"].endswith(("seed-1", "seed-3")) or real(results))
    out = tmp_path / "seeds"
    summary = tuneloop.train(**options(tiny_model, train_csv, out, seeds=[1, 2], retry_collapsed=True, keep="all"))
    # seed 1 collapses and is retried as seed 3, which collapses too and stays (one retry per seed)
    assert [r["name"] for r in summary["runs"]] == ["seed-1", "seed-3", "seed-2"]
    assert summary["runs"][0]["replaced_by"] == "seed-3" and "replaced_by" not in summary["runs"][1]
    assert [r["seed"] for r in summary["runs"]] == [1, 3, 2]
    results = {s: json.loads((out / f"seed-{s}" / "results.json").read_text()) for s in (1, 2, 3)}
    assert [r["warnings"] for r in summary["runs"]] == [results[s]["warnings"] for s in (1, 3, 2)]   # each run's
    for metric in ("accuracy", "f1", "loss"):                # the replaced run counts no more
        values = [results[s]["eval"][metric] for s in (3, 2)]
        assert summary["metrics"][metric]["n"] == 2
        assert summary["metrics"][metric]["mean"] == pytest.approx(np.mean(values), abs=1e-6)
        assert summary["metrics"][metric]["std"] == pytest.approx(np.std(values, ddof=1), abs=1e-6)
        low, high = summary["metrics"][metric]["ci95"]
        assert low - 1e-6 <= np.mean(values) <= high + 1e-6
    assert summary["collapsed"][:2] == ["seed-1", "seed-3"]
    assert summary["kept"] == "seed-2"                       # the only run that did not collapse
    assert (out / "model" / "model.safetensors").read_bytes() == \
        (out / "seed-2" / "model" / "model.safetensors").read_bytes()
    assert json.loads((out / "summary.json").read_text()) == summary
    assert "95% interval" in (out / "summary.html").read_text()


def test_keep_best_removes_the_other_models_and_cli_prints_mean_and_std(tiny_model, train_csv, tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["train", "--model", tiny_model, "--train-file", str(train_csv), "--output-dir", str(out), "--epochs", "1",
            "--lr", "3e-3", "--quiet", "--mixed-precision", "no", "--num-seeds", "2", "--seed", "5", "--no-report"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "accuracy:" in printed and "± " in printed and "over 2 runs" in printed
    kept = json.loads((out / "summary.json").read_text())["kept"]
    assert sorted(p.name for p in out.glob("seed-*")) == ["seed-5", "seed-6"]
    for name in ("seed-5", "seed-6"):
        assert (out / name / "model").exists() == (name == kept) and (out / name / "results.json").is_file()
    assert (out / "model" / "tuneloop.json").is_file()
    assert main(args) == 2                                   # the folder holds an experiment: not overwritten
    assert "already holds an earlier tuneloop experiment (--seeds / --folds); choose a new folder, --resume to go " \
        "on with it" in capsys.readouterr().err               # said "files that are not a tuneloop run"
    assert main(args + ["--resume", "--lr", "1e-3"]) == 2     # finished runs of other settings are not mixed in
    assert f"--resume: {'seed-5'} finished with other settings (--lr 0.003 → 0.001)" in capsys.readouterr().err
    other = "seed-6" if kept == "seed-5" else "seed-5"
    import shutil

    shutil.rmtree(out / kept / "model")                      # as an earlier --keep best leaves a run it did not keep
    (out / other / "model").mkdir()
    shutil.copytree(out / "model", out / other / "model", dirs_exist_ok=True)
    assert main(args + ["--resume"]) == 0                    # a FileNotFoundError traceback
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kept"] == other and summary["best_run"] == kept
    assert f"{kept} scores best by accuracy, but its model was removed by an earlier --keep best; keeping " \
           f"{other}'s" in capsys.readouterr().err                 # on the console, as a run's own lines
    assert main([a for a in args if a != "--quiet"] + ["--resume"]) == 0
    assert "seed-5: finished earlier, read back" in capsys.readouterr().err     # was never shown
    assert main(["inspect", str(out)]) == 2
    assert f"it is an experiment's: its page is {out / 'summary.html'}, each run a folder in it (seed-5, seed-6)" \
        in capsys.readouterr().err


def test_a_stop_in_one_run_of_an_experiment_says_to_resume_the_experiment(tiny_model, train_csv, tmp_path, capsys,
                                                                          monkeypatch):
    from tuneloop.exceptions import Interrupted

    def stopped(config, on_step=None):
        raise Interrupted(f"interrupted at step 3. Resume with: tuneloop train --output-dir {config.output_dir} "
                          "--resume", 15)

    monkeypatch.setattr(experiments, "run_training", stopped)
    out = tmp_path / "stopped"
    assert main(["train", "--model", tiny_model, "--train-file", str(train_csv), "--output-dir", str(out),
                 "--seeds", "1", "2", "--quiet"]) == 143
    err = capsys.readouterr().err                            # was the seed's own line: seed-2 never ran after it
    assert f"interrupted in seed-1. Resume with the command that started it and --resume (tuneloop train ... " \
           f"--output-dir {out} --resume: finished runs are read back" in err and "seed-1 --resume" not in err


def test_collapsed_means_one_predicted_class():
    one = {"problem_type": "single_label_classification", "per_class": {"validation": {
        "a": {"precision": 0.5, "recall": 1.0}, "b": {"precision": 0.0, "recall": 0.0}}}}
    two = {"problem_type": "single_label_classification", "per_class": {"validation": {
        "a": {"precision": 0.5, "recall": 0.5}, "b": {"precision": 0.5, "recall": 0.5}}}}
    assert experiments.collapsed(one) and not experiments.collapsed(two)


def test_k_fold_validates_every_training_row_exactly_once(tiny_model, train_csv, tmp_path):
    out = tmp_path / "folds"
    summary = tuneloop.train(**options(tiny_model, train_csv, out, folds=3, epochs=1))
    seen = []
    for k in (1, 2, 3):
        split = json.loads((out / f"fold-{k}" / "split.json").read_text())
        assert split["fold"] == [k, 3] and not set(split["train"]) & set(split["validation"])
        assert len(split["train"]) + len(split["validation"]) == 200
        seen += split["validation"]
    assert sorted(seen) == list(range(200))
    with open(out / "out_of_fold.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(200)] and {r["fold"] for r in rows} == {"1", "2", "3"}
    assert summary["out_of_fold"]["rows"] == 200 and summary["metrics"]["accuracy"]["n"] == 3
    with open(out / "label_issues.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 200


def test_fold_options_are_checked(tiny_model, train_csv, tmp_path, capsys):
    base = ["train", "--model", tiny_model, "--train-file", str(train_csv), "--output-dir", str(tmp_path / "x")]
    for flags, message in ((["--folds", "1"], "--folds: must be at least 2"),
                           (["--folds", "3", "--fold", "4"], "--fold: must be in 1..3"),
                           (["--seeds", "1", "1"], "--seeds: give distinct seeds"),
                           (["--fold", "2"], "--fold: 2 of how many? give --folds K too")):   # "got None"
        assert main(base + flags) == 2
        assert message in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- search
SPACE = "lr: {low: 1.0e-3, high: 1.0e-2, log: true}\nwarmup_ratio: {low: 0.0, high: 0.2}\n"


def search_args(tiny_model, train_csv, out, space, trials=4, *extra):
    return ["search", "--space", str(space), "--trials", str(trials), "--model", tiny_model, "--train-file",
            str(train_csv), "--output-dir", str(out), "--epochs", "2", "--eval-every", "2/epoch", "--quiet",
            "--mixed-precision", "no", "--batch-size", "8", "--max-train-samples", "80", "--no-report", *extra]


@pytest.fixture
def space(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(SPACE)
    return path


def test_search_keeps_the_best_trials_best_checkpoint(tiny_model, train_csv, tmp_path, space, capsys):
    import optuna

    out = tmp_path / "search"
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.DEBUG)              # the caller's level, given back after
    try:
        assert main(search_args(tiny_model, train_csv, out, space, 4, "--pruner", "median")) == 0
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG   # it was left at WARNING
    finally:
        optuna.logging.set_verbosity(before)
    summary = json.loads((out / "search.json").read_text())
    assert summary["finished"] == 4 and len({t["folder"] for t in summary["trials"]}) == 4
    best = summary["best"]
    completed = [t for t in summary["trials"] if t["state"] == "complete"]
    assert best["value"] == max(t["value"] for t in completed)
    trial_metrics = [json.loads(line) for line in open(Path(best["folder"]) / "metrics.jsonl")]
    evaluations = [r["eval/accuracy"] for r in trial_metrics if "eval/accuracy" in r]
    assert best["value"] == max(evaluations)                 # the trial's best evaluation, not its last
    target = tmp_path / "best.json"
    assert main(["evaluate", "--model", str(out / "best"), "--output", str(target), "--quiet"]) == 0
    assert json.loads(target.read_text())["eval"]["accuracy"] == pytest.approx(best["value"], abs=1e-6)
    assert (out / "best" / "config.yaml").is_file() and "Optimisation history" in (out / "search.html").read_text()
    for t in completed:                                      # only the best trial keeps a model
        assert (Path(t["folder"]) / "best").exists() == (t["number"] == best["number"])
    assert main(search_args(tiny_model, train_csv, out, space)) == 2
    assert "pass --resume" in capsys.readouterr().err
    # the search's folder is its best model to predict and evaluate ("the folder has no config.json" before)
    assert main(["evaluate", str(out), "--output", str(tmp_path / "again.json"), "--quiet"]) == 0
    assert json.loads((tmp_path / "again.json").read_text())["eval"] == json.loads(target.read_text())["eval"]
    assert main(["report", str(out)]) == 2                                      # not one run: says what it is
    assert f"it is a search's: its page is {out / 'search.html'}, its best model {out / 'best'}" in \
        capsys.readouterr().err


SLOW_SEARCH = ("import sys, time; from tuneloop.cli import main; "
               "sys.exit(main(sys.argv[2:], on_step=lambda state: time.sleep(float(sys.argv[1]))))")


def test_search_resumes_after_a_kill_without_rerunning_finished_trials(tiny_model, train_csv, tmp_path, space):
    out = tmp_path / "killed"
    args = search_args(tiny_model, train_csv, out, space, 3, "--pruner", "none")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_SEARCH, "0.1", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    checkpoints = out / "trials" / "trial-001" / "checkpoints"
    end = time.monotonic() + 180
    while not (checkpoints.is_dir() and any(p.name.startswith("step-") for p in checkpoints.iterdir())):
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.monotonic() < end, "no checkpoint of trial 1 in time"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = (out / "trials" / "trial-000" / "results.json").stat().st_mtime_ns
    assert not (out / "trials" / "trial-001" / "results.json").exists()
    assert main(search_args(tiny_model, train_csv, out, space, 3, "--pruner", "none", "--resume")) == 0
    summary = json.loads((out / "search.json").read_text())
    assert (out / "trials" / "trial-000" / "results.json").stat().st_mtime_ns == first      # not re-run
    resumed = json.loads((out / "trials" / "trial-001" / "results.json").read_text())
    assert "step-" in resumed["resumed_from"]
    states = {t["number"]: t["state"] for t in summary["trials"]}
    assert states[0] == "complete" and states[1] == "fail" and summary["finished"] == 3
    assert sum(t["folder"].endswith("trial-001") and t["state"] == "complete" for t in summary["trials"]) == 1
    typo = tmp_path / "kiled"                          # --resume on a folder without a search started a new one
    assert main(search_args(tiny_model, train_csv, typo, space, 3, "--resume")) == 2
    assert not typo.exists()


def test_two_workers_share_one_embedded_study(tiny_model, train_csv, tmp_path, space):
    out = tmp_path / "two"
    args = search_args(tiny_model, train_csv, out, space, 4, "--pruner", "none")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    workers = [subprocess.Popen([sys.executable, "-m", "tuneloop", *args], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for w in workers:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err[-2000:]
    import optuna
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(out / "study.journal")))
    trials = optuna.load_study(study_name="tuneloop", storage=storage).get_trials()
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(complete) >= 4
    assert len({t.user_attrs["folder"] for t in complete}) == len(complete)          # disjoint trials
    assert len({t.user_attrs["pid"] for t in complete}) == 2                        # both workers ran some


def test_bad_spaces_are_refused(tiny_model, train_csv, tmp_path, capsys):
    for text, message in (("lr: 0.1\n", "give {low: A, high: B}"), ("learning_rate: {low: 1, high: 2}\n",
                          "not a tuneloop option"),
                          ("lrr: {low: 1, high: 2}\n", "not a tuneloop option (did you mean lr?)"), ("lr: {low: 0.1, high: 0.01}\n", "low < high"),
                          ("epochs: {low: 0, high: 3, log: true}\n", "log range needs low > 0"),
                          # each of these ran trials before (or ended in a traceback)
                          ("lr: {choices: 5}\n", "choices must be a non-empty list"),
                          ("model: {choices: minilm}\n", "choices must be a non-empty list"),    # was m, i, n, ...
                          ("lr: {low: 1.0e-5, high: 1.0e-4, lg: true}\n", "unknown key(s) lg"),
                          ("lr: {low: 1.0e-5, high: 1.0e-4, choices: [1.0e-5]}\n", "either choices or a range"),
                          ("lr: {low: 1.0e-5, high: 1.0e-4, log: 'false'}\n", "log must be true or false"),
                          ("lr: {choices: [1.0e-4, -1]}\n", "-1.0 would not run: --lr: must be a positive"),
                          ("output_dir: {choices: [a, b]}\n", "cannot vary between trials: the search sets it"),
                          ("train_file: {choices: [a.csv]}\n", "cannot vary between trials: every trial is scored"),
                          ("seeds: {choices: [[1, 2], [3]]}\n", "cannot vary between trials: a trial is one run")):
        space = tmp_path / "space.yaml"
        space.write_text(text)
        assert main(search_args(tiny_model, train_csv, tmp_path / "s", space)) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "s").exists()


def test_a_list_valued_option_is_searched_as_choices_of_lists():
    from tuneloop.experiments.search_space import _spec, suggest

    field = tuneloop.TrainConfig.__dataclass_fields__["lora_target_modules"]
    spec = _spec({"choices": [["query", "value"], "query,key,value"]}, field, "here")
    assert spec["choices"] == ["query,value", "query,key,value"]          # plain values for Optuna's storages

    class Trial:
        def suggest_categorical(self, name, choices):
            return choices[1]

    assert suggest(Trial(), {"lora_target_modules": spec}) == {"lora_target_modules": ["query", "key", "value"]}


def test_bad_trials_and_storage_are_one_line(tiny_model, train_csv, tmp_path, space, capsys):
    """--trials 0 ran nothing and exited 0; a storage URL Optuna cannot open was a SQLAlchemy traceback."""
    assert main([*search_args(tiny_model, train_csv, tmp_path / "a", space), "--trials", "0"]) == 2
    assert "--trials: must be at least 1, got 0" in capsys.readouterr().err
    assert main([*search_args(tiny_model, train_csv, tmp_path / "b", space), "--storage", "bogus://x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tuneloop search: error: --storage bogus://x: cannot open a study there (") and \
        "Traceback" not in err and len(err.splitlines()) == 1


def test_an_intervals_ends_stay_within_what_the_metric_can_take():
    """Two runs of a correlation near 1 (or an error near 0) would give a t-interval past the metric's range."""
    from tuneloop.experiments.runs import interval

    pearson = interval([0.8867 - 0.0109, 0.8867 + 0.0109], "pearson")
    assert pearson["ci95"][1] == 1.0 and pearson["ci95"][0] < 0.8
    assert interval([0.001, 0.3], "mse")["ci95"][0] == 0.0
    assert interval([0.2, 0.9], "accuracy")["ci95"] == [0.0, 1.0]
    assert interval([0.60, 0.62], "accuracy")["ci95"] == pytest.approx([0.4829, 0.7371], abs=1e-4)   # inside
    assert interval([5.0, 9.0], "other")["ci95"][0] < 0                                          # unbounded
