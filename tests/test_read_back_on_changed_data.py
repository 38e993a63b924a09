"""A finished run that an experiment's or a search's --resume reads back was made on the data files as they are
now: a training file edited since (rows added or removed, labels changed) is refused in one line, where k-fold's
out-of-fold table raised an IndexError and a seeds summary would have mixed runs on two versions of the data."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from conftest import keyword_pair
from test_search_resume import write_rows

from tuneloop.cli.main import main


def common(tiny_model: str) -> list[str]:
    return ["--model", tiny_model, "--epochs", "1", "--batch-size", "8", "--lr", "3e-3", "--quiet",
            "--mixed-precision", "no", "--small-data", "off", "--baseline", "none", "--no-report",
            "--precision-gate", "off"]


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def shrink(path: Path, keep: int) -> None:
    """The file with its first `keep` rows only, as a user who edits it leaves it (a new size and mtime)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:keep + 1]), encoding="utf-8")


def test_a_fold_experiment_resumed_after_its_training_file_changed_is_refused(tiny_model, tmp_path, capsys):
    train = write_rows(tmp_path / "train.csv", 45, 0)
    out = tmp_path / "folds"
    args = ["train", "--train-file", str(train), "--folds", "3", "--output-dir", str(out), *common(tiny_model)]
    assert main(args) == 0
    assert main(args + ["--resume"]) == 0                    # unchanged: the finished folds are read back
    summary = json.loads((out / "summary.json").read_text())
    shrink(train, 30)
    capsys.readouterr()
    assert main(args + ["--resume"]) == 2                    # was: IndexError in the out-of-fold table
    err = one_line(capsys)
    assert f"--resume: {train.resolve()} changed since fold-1 read it as its train data" in err, err
    assert "new --output-dir" in err
    assert json.loads((out / "summary.json").read_text()) == summary      # nothing rewritten


def test_a_seeds_experiment_checks_its_validation_file_too(tiny_model, tmp_path, capsys):
    train, dev = write_rows(tmp_path / "train.csv", 40, 0), write_rows(tmp_path / "dev.csv", 16, 1)
    out = tmp_path / "seeds"
    args = ["train", "--train-file", str(train), "--validation-file", str(dev), "--seeds", "1", "2",
            "--output-dir", str(out), *common(tiny_model)]
    assert main(args) == 0
    write_rows(dev, 20, 5)                                   # other rows scored: the summary would mix them
    capsys.readouterr()
    assert main(args + ["--resume"]) == 2
    err = one_line(capsys)
    assert f"{dev.resolve()} changed since seed-1 read it as its validation data" in err, err


def test_a_run_of_an_earlier_tuneloop_is_read_back_unchecked(tiny_model, tmp_path, capsys):
    train = write_rows(tmp_path / "train.csv", 40, 0)
    out = tmp_path / "seeds"
    args = ["train", "--train-file", str(train), "--seeds", "1", "--output-dir", str(out), *common(tiny_model)]
    assert main(args) == 0
    results = json.loads((out / "seed-1" / "results.json").read_text())
    assert results["data"]["train"]["file"]["path"] == str(train.resolve())
    del results["data"]["train"]["file"]                     # as results.json was before the record
    (out / "seed-1" / "results.json").write_text(json.dumps(results))
    os.utime(train, ns=(1, 1))
    capsys.readouterr()
    assert main(args + ["--resume"]) == 0


@pytest.fixture
def space(tmp_path) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text("lr: {low: 1.0e-3, high: 1.0e-2, log: true}\n")
    return path


def test_a_search_resumed_after_its_training_file_changed_is_refused(tiny_model, tmp_path, space, capsys):
    train, dev = write_rows(tmp_path / "train.csv", 40, 0), write_rows(tmp_path / "dev.csv", 16, 1)
    out = tmp_path / "search"
    args = ["search", "--space", str(space), "--train-file", str(train), "--validation-file", str(dev),
            "--output-dir", str(out), "--pruner", "none", *common(tiny_model)]
    assert main(args + ["--trials", "1"]) == 0
    shrink(train, 30)
    capsys.readouterr()
    assert main(args + ["--trials", "2", "--resume"]) == 2
    err = one_line(capsys)
    assert f"{train.resolve()} changed since trial-000 read it as its train data" in err, err
    assert "start the search in a new --output-dir" in err


def test_a_finished_distillation_resumed_after_its_validation_file_changed_is_refused(tiny_model, tmp_path, capsys):
    dev = write_rows(tmp_path / "dev.csv", 16, 1, names=("LABEL_0", "LABEL_1"))     # the tiny teacher's labels
    unlabeled = tmp_path / "unlabeled.csv"
    unlabeled.write_text("sentence1,sentence2\n" + "".join(
        "{1},{2}\n".format(*keyword_pair(random.Random(i))) for i in range(24)))
    out = tmp_path / "distilled"
    args = ["distill", "--teacher", tiny_model, "--unlabeled-file", str(unlabeled), "--validation-file", str(dev),
            "--output-dir", str(out), "--max-steps", "2", *common(tiny_model)]
    assert main(args) == 0
    assert main(args + ["--resume"]) == 0                    # unchanged: the student is read back
    write_rows(dev, 20, 5, names=("LABEL_0", "LABEL_1"))
    capsys.readouterr()
    assert main(args + ["--resume"]) == 2
    err = one_line(capsys)
    assert f"{dev.resolve()} changed since {out.name} read it as its validation data" in err, err
    assert "start the distillation in a new --output-dir" in err
