"""Multi-label and regression edges: the metrics of one-label label sets, and what evaluate / predict say."""

from __future__ import annotations

import numpy as np
import pytest

from tuneloop.data.labels import LabelSchema
from tuneloop.evaluation.metrics import compute, per_class
from tuneloop.objective import MultiLabel

ONE_LABEL = LabelSchema("multi_label_classification", ["spam"], ",")


def _one_label_rows():
    """Four rows of one label: one carries it, the model predicts it for none (logits all negative)."""
    labels = np.array([[1.0], [0.0], [0.0], [0.0]], dtype=np.float32)
    logits = np.array([[-2.0], [-1.0], [-3.0], [-1.5]], dtype=np.float32)
    return logits, labels


def test_one_label_f1_is_of_the_label_not_the_accuracy():
    """A one-column indicator reads to scikit-learn as a binary problem: its micro-F1 counted the absent side as a
    class too, giving the accuracy (0.75 here) for a model that never predicts the label (F1 0)."""
    logits, labels = _one_label_rows()
    out = compute(("f1_micro", "f1_macro", "exact_match"), logits, labels, MultiLabel(1))
    assert out["f1_micro"] == 0.0 and out["f1_macro"] == 0.0
    assert out["exact_match"] == 0.75
    decided = MultiLabel(1).decision_metrics(np.zeros((4, 1), dtype=np.int64), labels)
    assert decided == {"f1_micro": 0.0, "f1_macro": 0.0, "precision_micro": 0.0, "recall_micro": 0.0}


def test_one_label_f1_when_right():
    logits, labels = _one_label_rows()
    logits[0, 0] = 2.0
    out = compute(("f1_micro", "f1_macro"), logits, labels, MultiLabel(1))
    assert out == {"f1_micro": 1.0, "f1_macro": 1.0}


def test_one_label_per_class_has_the_label():
    """per_class on a one-label schema crashed the run at its end (zip() argument 2 is longer than argument 1)."""
    logits, labels = _one_label_rows()
    logits[1, 0] = 1.0                          # a false positive: precision 0, recall 0
    assert per_class(logits, labels, ONE_LABEL) == {"spam": {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                                             "support": 1}}
    logits[0, 0] = 1.0
    assert per_class(logits, labels, ONE_LABEL)["spam"] == {"precision": 0.5, "recall": 1.0, "f1": 0.6667,
                                                            "support": 1}


def test_two_labels_unchanged():
    labels = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32)
    logits = np.array([[1, -1], [1, 1], [1, -1]], dtype=np.float32)
    out = compute(("f1_micro", "f1_macro"), logits, labels, MultiLabel(2))
    from sklearn.metrics import f1_score
    preds = (logits > 0).astype(int)
    assert out["f1_micro"] == f1_score(labels, preds, average="micro")
    assert out["f1_macro"] == f1_score(labels, preds, average="macro")
    table = per_class(logits, labels, LabelSchema("multi_label_classification", ["a", "b"], ","))
    assert table["a"]["support"] == 2 and table["b"]["support"] == 2


def test_one_label_multi_label_run_trains_evaluates_and_predicts(tmp_path):
    """A label set of one label ("spam" or none) trains to the end (the run crashed writing per_class), and
    evaluate's and predict's figures on the validation file are those of the run."""
    import csv
    import json
    import random

    import tuneloop
    from conftest import build_tiny_model, fast_options, sentence

    rng = random.Random(0)
    for name, n in (("train.csv", 80), ("dev.csv", 40)):
        with open(tmp_path / name, "w", newline="") as f:
            rows = csv.writer(f)
            rows.writerow(["text", "labels"])
            for i in range(n):
                spam = i % 2 == 0
                rows.writerow([sentence(rng) + (" alpha" if spam else ""), "spam" if spam else "[]"])
    model = build_tiny_model(tmp_path / "tiny", num_labels=1)
    out = tmp_path / "run"
    tuneloop.train(**fast_options(str(model), train_file=str(tmp_path / "train.csv"),
                                  validation_file=str(tmp_path / "dev.csv"), output_dir=str(out),
                                  problem_type="multi_label_classification", label_separator=",", epochs=1,
                                  calibrate="none"))
    results = json.loads((out / "results.json").read_text())
    assert list(results["per_class"]["validation"]) == ["spam"]
    predicted = tuneloop.load(out).predict([row[0] for row in csv.reader(open(tmp_path / "dev.csv"))][1:])
    gold = np.array([[i % 2 == 0] for i in range(40)])
    decided = np.array([[row["label"] == "spam"] for row in predicted])
    tp = int((gold & decided).sum())
    f1 = 2 * tp / max(int(gold.sum() + decided.sum()), 1)
    assert results["eval"]["f1_micro"] == pytest.approx(f1) and results["eval"]["f1_macro"] == pytest.approx(f1)
    assert results["eval"]["exact_match"] == pytest.approx(float(np.mean(gold == decided)))


def test_tfidf_baseline_of_one_label_gives_one_logit_per_row():
    """The TF-IDF baseline of a one-label set gave two columns (scikit-learn's binary P(absent), P(present)), and
    the run crashed scoring it (Target size [40, 1] must be the same as input size [40, 2])."""
    from tuneloop.evaluation.baseline import LOGITS, baseline_model

    texts = [f"alpha {i}" if i % 2 else f"beta {i}" for i in range(20)]
    y = np.array([[float(i % 2)] for i in range(20)])
    objective = MultiLabel(1)
    model = baseline_model(objective, seed=0).fit(texts, y)
    logits = LOGITS[MultiLabel](model, texts, 1)
    assert logits.shape == (20, 1)
    assert np.array_equal(objective.predictions(logits), y.astype(np.int64))      # the present side's logit
    assert objective.eval_loss(logits, y) < 0.69


def test_the_reports_label_f1_plot_of_one_label():
    """The report's per-label F1 bars read the one column as two classes: a zip() ValueError in report.html."""
    from tuneloop.report.prediction_plots import _label_f1

    logits, labels = _one_label_rows()
    logits[0, 0] = 2.0
    plot = _label_f1("validation", logits, labels, ["spam"])
    assert plot.png


def _multi_label_schema(tmp_path, cells: list[str], separator=None):
    import csv

    from tuneloop.data.labels import infer_label_schema
    from tuneloop.data.sources import load_user_files

    path = tmp_path / "train.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows([f"row {i}", cell] for i, cell in enumerate(cells))
    train = load_user_files(str(path), None, None, None, None).train
    return infer_label_schema(train, "multi_label_classification", separator, str(path))


def test_multi_label_sets_without_a_separator_are_said(tmp_path, caplog):
    """'a,b' trained silently as a label named 'a,b' (7 labels where the user meant 3)."""
    import logging

    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        schema = _multi_label_schema(tmp_path, ["a,b", "a", "b", "c,a"])
    assert schema.names == ["a", "a,b", "b", "c,a"]                 # as the options say: each cell one label
    said = [r.getMessage() for r in caplog.records if "without --label-separator" in r.getMessage()]
    assert said and "'a,b' is a label of its own" in said[0] and "--label-separator ','" in said[0], said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        assert _multi_label_schema(tmp_path, ["a,b", "a", "b"], ",").names == ["a", "b"]
        _multi_label_schema(tmp_path, ['["a", "b"]', '["c++"]', "c++"])      # JSON lists, a label holding '+'
    assert not [r for r in caplog.records if "without --label-separator" in r.getMessage()]


def test_multi_label_rows_that_carry_no_label_at_all_are_refused(tmp_path):
    """It was "label 'b' was not seen in the training data (known: )", from the validation file."""
    from tuneloop.exceptions import DataError

    with pytest.raises(DataError, match=r"train\.csv: no training row carries a label \(every label set is empty\)"):
        _multi_label_schema(tmp_path, ["[]", "[]", "[]"])
