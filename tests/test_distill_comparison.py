"""What a distilled student kept: a share of the teacher's main metric only where the teacher's value is above 0 and
the metric is better when higher; otherwise the difference, student minus teacher, in the metric's units."""

from __future__ import annotations

import contextlib

import pytest

from tuneloop.experiments import compare
from tuneloop.report.fmt import kept_phrase


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """comparison() with each model's metrics given (no model loaded): {name: {metric: value}}."""
    from tuneloop.config.options import TrainConfig
    from tuneloop.predict import classifier

    (tmp_path / "dev.csv").write_text("text,label\na,x\n")
    values = {}
    monkeypatch.setattr(classifier.Classifier, "load", lambda path, cpu=False: contextlib.nullcontext(path))
    monkeypatch.setattr(compare, "measure", lambda path, *a, **k: (
        {"metrics": values["student" if path == str(tmp_path) else "teacher"], "rows_per_s": 10.0}, [0.5]))

    def run(main, student, teacher):
        values.update(student={main: student}, teacher={main: teacher})
        monkeypatch.setattr(compare, "main_metric", lambda out: main)
        cfg = TrainConfig(teacher=str(tmp_path / "teacher"), validation_file=str(tmp_path / "dev.csv"))
        table = {"text_columns": ["text"], "problem_type": "regression"}
        return compare.comparison(cfg, tmp_path, table, None)
    return run


@pytest.mark.parametrize("main, student, teacher", [("pearson", 0.32, -0.05), ("pearson", 0.2, 0.0),
                                                    ("mse", 0.3, 0.2), ("loss", 0.5, 0.7)])
def test_no_share_is_said_of_a_teacher_at_or_below_zero_or_a_lower_is_better_metric(measured, main, student,
                                                                                    teacher):
    d = measured(main, student, teacher)
    assert "kept" not in d and d["difference"] == pytest.approx(student - teacher)
    said = kept_phrase(d)
    assert "%" not in said and f"{student - teacher:+.4g} from the teacher's {main}" in said, said


def test_a_share_is_said_of_a_positive_teacher_of_a_higher_is_better_metric(measured):
    d = measured("pearson", 0.6, 0.8)
    assert d["kept"] == pytest.approx(0.75) and "difference" not in d
    assert kept_phrase(d, "x") == "keeps 75.0% of the teacher's pearson at 1.00x its rows/s"
