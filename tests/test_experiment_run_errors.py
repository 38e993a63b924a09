"""A run of an experiment (--seeds / --folds) that fails says which run it was, in its one line (its class, so its
exit code, kept)."""

from __future__ import annotations

import pytest
from test_experiments import train_csv  # noqa: F401 - the module's fixture

from tuneloop.cli.main import main
from tuneloop.exceptions import DataError, NonFiniteLoss
from tuneloop.experiments import runs as experiments


def failing_on(name: str, error: Exception):
    def run(config, on_step=None):
        if config.output_dir.endswith(name):
            raise error
        return {"eval": {}}
    return run


def test_a_failed_run_of_an_experiment_is_named_in_its_one_line(tiny_model, train_csv, tmp_path, capsys,  # noqa: F811
                                                                  monkeypatch):
    monkeypatch.setattr(experiments, "run_training", failing_on("seed-2", DataError("dev.csv: row 3 has no label")))
    assert main(["train", "--model", tiny_model, "--train-file", str(train_csv), "--output-dir", str(tmp_path / "a"),
                 "--seeds", "1", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tuneloop train: error: seed-2: dev.csv: row 3 has no label", err


def test_the_failed_runs_error_keeps_its_class_and_other_errors_get_a_note(tiny_model, train_csv, tmp_path,  # noqa: F811
                                                                           monkeypatch):
    import tuneloop

    options = dict(model=tiny_model, train_file=str(train_csv), quiet=True)
    monkeypatch.setattr(experiments, "run_training", failing_on("fold-2", NonFiniteLoss(4, float("nan"))))
    with pytest.raises(NonFiniteLoss, match=r"^fold-2: the training loss became nan by step 4") as diverged:
        tuneloop.train(**options, folds=2, output_dir=str(tmp_path / "b"))
    assert diverged.value.step == 4
    monkeypatch.setattr(experiments, "run_training", failing_on("seed-3", RuntimeError("CUDA out of memory")))
    with pytest.raises(RuntimeError) as crashed:
        tuneloop.train(**options, seeds=[1, 3], output_dir=str(tmp_path / "c"))
    assert str(crashed.value) == "CUDA out of memory" and "seed-3" in "".join(crashed.value.__notes__)
