"""A search space naming one option twice is refused; a search stopped in a trial is not continued without
--resume."""

from __future__ import annotations

import signal

import pytest
from test_search_resume import args, data, interrupt_in_trial_1, one_line_error, study_trials  # noqa: F401

from tuneloop.cli.main import main
from tuneloop.exceptions import ConfigError
from tuneloop.experiments.search_space import read_space


@pytest.mark.parametrize("text, first, second", [
    ("batch_size: {choices: [8, 16]}\nbatch-size: {choices: [32]}\n", "batch_size", "batch-size"),
    ("warmup-ratio: {low: 0.0, high: 0.1}\nwarmup_ratio: {low: 0.1, high: 0.2}\n", "warmup-ratio", "warmup_ratio")])
def test_a_space_naming_an_option_twice_is_refused(tmp_path, text, first, second):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        read_space(str(path))
    said = str(refused.value)
    assert f"--space {path}: '{first}' and '{second}' are the same option; keep one" == said, said


def test_a_space_with_a_plain_duplicate_key_is_refused(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("lr: {low: 1.0e-5, high: 1.0e-4}\nlr: {low: 1.0e-3, high: 1.0e-2}\n")
    with pytest.raises(ConfigError, match=r"--space: .*space.yaml .*'lr' is given twice"):
        read_space(str(path))


def test_a_stopped_search_is_not_continued_without_resume(tiny_model, data, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert main(args(tiny_model, data, out), on_step=interrupt_in_trial_1(out)) == 128 + signal.SIGTERM
    assert not (out / "search.json").exists()
    before = len(study_trials(out))
    capsys.readouterr()
    assert main(args(tiny_model, data, out)) == 2
    err = one_line_error(capsys)
    assert f"--output-dir {out}: holds a search that was stopped (trial 1 was interrupted)" in err, err
    assert "pass --resume to continue it, or --overwrite to start a new one" in err, err
    assert len(study_trials(out)) == before                   # nothing run, nothing queued
    assert main(args(tiny_model, data, out, "a.yaml", "--resume")) == 0
    assert main(args(tiny_model, data, out, "a.yaml", "--overwrite", trials=1)) == 0
