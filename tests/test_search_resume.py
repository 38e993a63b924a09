"""`tuneloop search` across runs: --overwrite starts a new study (and clears only what tuneloop wrote, never a shared
--storage), a --resume must keep the space and the data the earlier trials were scored on, and trial folders are
found from any working directory."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
from pathlib import Path

import pytest
import yaml
from conftest import keyword_pair

from tuneloop.cli.main import main

SPACE_A = "lr: {low: 1.0e-3, high: 1.0e-2, log: true}\nwarmup_ratio: {low: 0.0, high: 0.2}\n"
SPACE_B = "lr: {low: 2.0e-3, high: 3.0e-3}\nwarmup_ratio: {low: 0.0, high: 0.2}\n"       # lr no longer a log range


def write_rows(path: Path, n: int, seed: int, names=("no", "yes")) -> Path:
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["sentence1", "sentence2", "label"])
        for _ in range(n):
            label, a, b = keyword_pair(rng)
            w.writerow([a, b, names[label]])
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("search-data")
    write_rows(folder / "train.csv", 64, 0)
    write_rows(folder / "dev.csv", 24, 1)
    write_rows(folder / "dev_small.csv", 12, 2)
    (folder / "a.yaml").write_text(SPACE_A)
    (folder / "b.yaml").write_text(SPACE_B)
    return folder


def args(tiny_model, data, out, space="a.yaml", *extra, trials=2, validation="dev.csv"):
    return ["search", "--space", str(Path(data) / space), "--trials", str(trials), "--model", tiny_model,
            "--train-file", str(Path(data) / "train.csv"), "--validation-file", str(Path(data) / validation),
            "--output-dir", str(out), "--epochs", "2", "--batch-size", "8", "--lr", "3e-3", "--quiet",
            "--mixed-precision", "no", "--small-data", "off", "--baseline", "none", "--no-report",
            "--precision-gate", "off", "--pruner", "none", *extra]


def study_trials(out: Path) -> list:
    import optuna
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(out / "study.journal")))
    return optuna.load_study(study_name="tuneloop", storage=storage).get_trials()


@pytest.fixture(scope="module")
def searched(tiny_model, data, tmp_path_factory) -> Path:
    """A finished 2-trial search (the refusals below leave it as it is)."""
    out = tmp_path_factory.mktemp("searched") / "out"
    assert main(args(tiny_model, data, out)) == 0
    return out


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_overwrite_starts_a_new_study_and_keeps_the_users_files(tiny_model, data, tmp_path):
    """--overwrite reloaded the old study: 0 new trials with the same space, Optuna's ValueError with an edited one."""
    out = tmp_path / "out"
    assert main(args(tiny_model, data, out)) == 0
    (out / "notes.txt").write_text("mine")
    (out / "trials" / "mine.txt").write_text("mine")
    (out / "trials" / "trial-000" / "mine.txt").write_text("mine")
    assert main(args(tiny_model, data, out, "b.yaml", "--overwrite")) == 0
    trials = study_trials(out)
    assert len(trials) == 2 and all(t.state.name == "COMPLETE" for t in trials)            # a fresh study
    assert all(2e-3 <= t.params["lr"] <= 3e-3 for t in trials)
    summary = json.loads((out / "search.json").read_text())
    assert summary["finished"] == 2 and len(summary["trials"]) == 2
    assert summary["best"]["params"]["lr"] in {t.params["lr"] for t in trials}
    for t in trials:                                       # each trial ran again in the new study
        config = yaml.safe_load((out / "trials" / f"trial-{t.number:03d}" / "config.yaml").read_text())
        assert config["lr"] == pytest.approx(t.params["lr"])
    assert (out / "notes.txt").read_text() == "mine" and (out / "trials" / "mine.txt").read_text() == "mine"
    assert (out / "trials" / "trial-000" / "mine.txt").read_text() == "mine"


def test_a_resume_with_an_edited_space_is_refused_in_one_line(tiny_model, data, searched, capsys):
    """It was Optuna's `ValueError: Cannot set different log configuration to the same parameter name`."""
    before = (searched / "search.json").read_text()
    assert main(args(tiny_model, data, searched, "b.yaml", "--resume", trials=3)) == 2
    err = one_line_error(capsys)
    assert "lr is {low: 0.002, high: 0.003} in it, but {low: 0.001, high: 0.01, log: true}" in err, err
    assert "--overwrite" in err and "another --output-dir" in err
    assert len(study_trials(searched)) == 2 and (searched / "search.json").read_text() == before


def test_a_resume_on_other_validation_data_is_refused(tiny_model, data, searched, capsys):
    """It ran a third trial on 12 validation rows and ranked it with the two scored on 24."""
    assert main(args(tiny_model, data, searched, "a.yaml", "--resume", trials=3, validation="dev_small.csv")) == 2
    err = one_line_error(capsys)
    assert err.startswith("tuneloop search: error: --validation-file: the study's earlier trials were scored with "
                          f"{str(data / 'dev.csv')!r}") and "dev_small.csv" in err and "--overwrite" in err, err
    assert len(study_trials(searched)) == 2


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_search_never_replaces_a_users_best_folder(tiny_model, data, tmp_path, capsys, overwrite):
    """A folder no search wrote, holding the user's best/ and plots/: a search (--overwrite or not) replaced them."""
    out = tmp_path / "mine"
    (out / "best").mkdir(parents=True)
    (out / "best" / "model.bin").write_text("precious")
    (out / "plots").mkdir()
    extra = ["--overwrite"] if overwrite else []
    assert main(args(tiny_model, data, out, "a.yaml", *extra)) == 2
    err = one_line_error(capsys)
    assert str(out) in err and "best/" in err and "plots/" in err and "no tuneloop search wrote" in err, err
    assert (out / "best" / "model.bin").read_text() == "precious"
    assert sorted(p.name for p in out.iterdir()) == ["best", "plots"]


def test_overwrite_never_deletes_a_shared_storage(tiny_model, data, tmp_path, capsys):
    db = tmp_path / "shared.db"
    out = tmp_path / "out"
    assert main(args(tiny_model, data, out, "a.yaml", "--overwrite", "--storage", f"sqlite:///{db}")) == 2
    err = one_line_error(capsys)
    assert "--overwrite: the study lives in --storage sqlite:///" in err and "another --study" in err, err
    assert not db.exists() and not out.exists()
    # the folder's own journal named as --storage is the default storage: --overwrite clears it
    assert main(args(tiny_model, data, out, "a.yaml", "--storage", str(out / "study.journal"), trials=1)) == 0
    assert main(args(tiny_model, data, out, "a.yaml", "--overwrite", "--storage", str(out / "study.journal"),
                trials=1)) == 0
    assert len(study_trials(out)) == 1


def interrupt_in_trial_1(out: Path):
    """An on_step hook: SIGTERM once trial 1 trains (a checkpoint is saved at the step's end, the search stops)."""
    sent = []

    def on_step(state):
        if not sent and (out / "trials" / "trial-001").is_dir():
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
    return on_step


def relative_args(tiny_model, out, data_prefix="", *extra):
    return ["search", "--space", f"{data_prefix}a.yaml", "--trials", "2", "--model", tiny_model, "--train-file",
            f"{data_prefix}train.csv", "--validation-file", f"{data_prefix}dev.csv", "--output-dir", str(out),
            "--epochs", "2", "--batch-size", "8", "--lr", "3e-3", "--quiet", "--mixed-precision", "no",
            "--small-data", "off", "--baseline", "none", "--no-report", "--precision-gate", "off", "--pruner", "none",
            *extra]


def test_a_search_resumes_from_another_working_directory(tiny_model, data, tmp_path, monkeypatch, capsys):
    """Trial folders were recorded relative to the first working directory: the interrupted trial restarted in a
    stray folder there, and OUT/best was copied from it. The stop says to resume the search (it named the trial's
    folder and `tuneloop train`, which takes the trial out of its study)."""
    first, other = tmp_path / "first", tmp_path / "other"
    first.mkdir(), other.mkdir()
    for name in ("train.csv", "dev.csv", "a.yaml"):
        shutil.copy(data / name, first / name)
    monkeypatch.chdir(first)
    capsys.readouterr()
    assert main(relative_args(tiny_model, "out"), on_step=interrupt_in_trial_1(Path("out"))) == 128 + signal.SIGTERM
    out = first / "out"
    said = capsys.readouterr().err
    assert f"interrupted in trial-001; checkpoint saved in {out / 'trials' / 'trial-001' / 'checkpoints'}" in said
    assert f"(tuneloop search ... --output-dir {out} --resume: finished runs are read back" in said
    assert any((out / "trials" / "trial-001" / "checkpoints").glob("step-*"))
    monkeypatch.chdir(other)
    assert main(relative_args(tiny_model, out, "../first/", "--resume")) == 0
    assert list(other.iterdir()) == []                                         # no stray trial folder here
    resumed = json.loads((out / "trials" / "trial-001" / "results.json").read_text())
    assert "step-" in resumed["resumed_from"] and resumed["resumed_from"].startswith(str(out))
    summary = json.loads((out / "search.json").read_text())
    assert summary["finished"] == 2 and all(Path(t["folder"]).parent == out / "trials" for t in summary["trials"])
    best = summary["best"]
    assert best["model"] == str(out / "best") and Path(best["folder"]).parent == out / "trials"
    assert (out / "best" / "config.json").is_file()


def test_an_older_study_with_relative_paths_still_resumes_from_its_directory(tiny_model, data, tmp_path,
                                                                             monkeypatch, capsys):
    """A study an older tuneloop wrote (trial folders and data paths relative to where it ran, no record of the
    scoring data but the trials' config.yaml) resumes from the same directory, its interrupted trial from its
    checkpoint; other validation data is refused against the trials' config.yaml."""
    from tuneloop.experiments import search

    for name in ("train.csv", "dev.csv", "dev_small.csv", "a.yaml"):
        shutil.copy(data / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    with monkeypatch.context() as old:                     # what the older tuneloop recorded
        old.setattr(search, "folder_attrs", lambda out, place: {"folder": os.path.relpath(place)})
        old.setattr(search, "anchored", lambda config: config)
        old.setattr(search, "scored_on", lambda config, names: {})
        assert main(relative_args(tiny_model, "out"), on_step=interrupt_in_trial_1(Path("out"))) == 143
    assert [t.user_attrs["folder"] for t in study_trials(tmp_path / "out")] == ["out/trials/trial-000",
                                                                               "out/trials/trial-001"]
    assert "train_file: train.csv" in (tmp_path / "out" / "trials" / "trial-001" / "config.yaml").read_text()
    capsys.readouterr()
    assert main([*relative_args(tiny_model, "out", "", "--resume"), "--validation-file", "dev_small.csv"]) == 2
    err = one_line_error(capsys)
    assert err.startswith("tuneloop search: error: --validation-file: the study's earlier trials were scored with "
                          f"{str(tmp_path / 'dev.csv')!r}") and "dev_small.csv" in err, err
    assert main(relative_args(tiny_model, "out", "", "--resume")) == 0
    resumed = json.loads((tmp_path / "out" / "trials" / "trial-001" / "results.json").read_text())
    assert "step-" in resumed["resumed_from"]
    assert json.loads((tmp_path / "out" / "search.json").read_text())["finished"] == 2


def test_a_diverging_trial_is_pruned_and_the_search_goes_on(tiny_model, data, tmp_path, capfd):
    """A trial whose loss became NaN (an lr too large) ended the whole search, after Optuna's traceback."""
    (tmp_path / "huge.yaml").write_text("lr: {choices: [1.0e+8]}\n")
    out = tmp_path / "out"
    assert main(args(tiny_model, data, out, str(tmp_path / "huge.yaml"), "--max-steps", "4", "--log-every", "1",
                     "--max-grad-norm", "0", trials=1)) == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and "trial 0 diverged" in err and "no trial of the 1 finished completed" in err, err
    summary = json.loads((out / "search.json").read_text())
    assert summary["finished"] == 1 and summary["pruned"] == 1 and "best" not in summary
    assert "became nan" in summary["trials"][0]["diverged"] and not (out / "best").exists()
    assert "pruned (diverged)" in (out / "search.html").read_text()


def test_a_trial_that_failed_on_a_user_error_is_one_line_and_binds_no_later_search(tiny_model, data, tmp_path,
                                                                                    capfd):
    """Optuna printed the failed trial's traceback; then the fixed command was refused: "the study's earlier trials
    were scored with 'nosuch' (trial 0)", a trial never scored. And a best trial whose folder is not here left an
    earlier best's copy in OUT/best, which `predict OUT` takes for the best model."""
    out = tmp_path / "out"
    assert main(args(tiny_model, data, out, "a.yaml", "--label-column", "nosuch", "--max-steps", "2", trials=1)) == 2
    err = capfd.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "no label column 'nosuch'" in err, err
    assert main(args(tiny_model, data, out, "a.yaml", "--max-steps", "2", trials=1)) == 0
    summary = json.loads((out / "search.json").read_text())
    assert summary["best"]["number"] == 1 and (out / "best" / "config.json").is_file()
    shutil.rmtree(Path(summary["best"]["folder"]) / "best")          # as if another worker's machine ran it
    assert main(args(tiny_model, data, out, "a.yaml", "--max-steps", "2", "--resume", trials=1)) == 0
    assert not (out / "best").exists() and "model" not in json.loads((out / "search.json").read_text())["best"]
    assert "ran on another machine" in capfd.readouterr().err


def test_a_search_in_a_run_folder_is_refused_and_leaves_its_best_checkpoint(tiny_model, data, tmp_path, capsys):
    """The search wrote its trials into the run's folder and replaced the run's own best/ with its best trial's."""
    from conftest import fast_options

    import tuneloop

    run = tmp_path / "run"
    tuneloop.train(**fast_options(tiny_model, train_file=str(data / "train.csv"), output_dir=str(run), max_steps=2))
    before = sorted(p.name for p in run.iterdir())
    capsys.readouterr()
    for extra in ((), ("--overwrite",)):
        assert main(args(tiny_model, data, run, "a.yaml", *extra, trials=1)) == 2
        err = one_line_error(capsys)
        assert f"--output-dir {run}: already holds an earlier tuneloop run" in err, err
    assert sorted(p.name for p in run.iterdir()) == before and (run / "best" / "config.json").is_file()
