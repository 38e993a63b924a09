"""Training rows whose label is probably wrong: the per-row probabilities recorded during training, pooled over
windows and epochs, ranked, flagged by cleanlab; flipped labels come out on top."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest
import torch
from conftest import fast_options, keyword_pair
from sklearn.metrics import roc_auc_score

import tuneloop
from tuneloop import TrainConfig
from tuneloop.analysis.label_issues import mean_probabilities, rank
from tuneloop.objective import objective_for
from tuneloop.training.dynamics import TrainingDynamics


def test_record_pools_windows_within_an_epoch_then_epochs():
    d = TrainingDynamics(rows=3, num_classes=2, epochs=2, device="cpu",
                         objective=objective_for("single_label_classification"))
    logit = lambda p: torch.tensor([[0.0, float(np.log(p / (1 - p)))]])  # noqa: E731 - softmax gives [1-p, p]
    d.record(0, torch.tensor([0]), logit(0.2))
    d.record(0, torch.tensor([0]), logit(0.4))       # a second window of row 0 in epoch 1
    d.record(0, torch.tensor([2]), logit(0.9))
    d.record(1, torch.tensor([0]), logit(0.6))
    d.record(5, torch.tensor([2]), logit(0.7))        # an epoch past the plan counts as the last one
    rows, mean, epochs = mean_probabilities(d.sums.numpy(), d.counts.numpy())
    assert rows.tolist() == [0, 2] and epochs.tolist() == [2, 2]       # row 1 was never seen
    assert mean[:, 1] == pytest.approx([((0.2 + 0.4) / 2 + 0.6) / 2, (0.9 + 0.7) / 2], abs=1e-6)


def test_rank_orders_by_the_given_labels_probability_and_flags_confident_contradictions():
    rng = np.random.default_rng(0)
    given = rng.integers(0, 2, 200)
    probs = np.where(given[:, None] == np.arange(2), 0.9, 0.1)
    wrong = [3, 50, 120]
    probs[wrong] = probs[wrong][:, ::-1]                 # the model firmly says the other class
    probs[7] = [0.5, 0.5]
    order, confidence, flags = rank(given, probs, objective_for("single_label_classification"))
    assert sorted(order[:3].tolist()) == wrong and order[3] == 7
    assert confidence[wrong] == pytest.approx(0.1)
    assert flags is not None and set(np.flatnonzero(flags)) == set(wrong)


def test_multi_label_confidence_is_the_worst_label():
    given = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    probs = np.array([[0.9, 0.2], [0.1, 0.95], [0.8, 0.05]])
    order, confidence, _ = rank(given, probs, objective_for("multi_label_classification"))
    assert confidence == pytest.approx([0.8, 0.9, 0.05]) and order[0] == 2


def write_noisy(path, n, flip_every, seed):
    rng, flipped = random.Random(seed), []
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "sentence1", "sentence2", "label"])
        for i in range(n):
            label, a, b = keyword_pair(rng)
            if flip_every and i % flip_every == 0:
                label, _ = 1 - label, flipped.append(f"r{i}")
            w.writerow([f"r{i}", a, b, ["no", "yes"][label]])
    return flipped


@pytest.fixture(scope="module")
def noisy_run(tiny_model, tmp_path_factory):
    """240 training rows of the toy pair task, every 10th label flipped; a clean validation file."""
    tmp_path = tmp_path_factory.mktemp("noisy")
    flipped = write_noisy(tmp_path / "train.csv", 240, 10, seed=1)
    write_noisy(tmp_path / "dev.csv", 60, 0, seed=2)
    out = tmp_path / "run"
    results = tuneloop.train(TrainConfig(**fast_options(tiny_model, epochs=4, report=True),
                                         train_file=str(tmp_path / "train.csv"),
                                         validation_file=str(tmp_path / "dev.csv"), output_dir=str(out)))
    return out, results, flipped


def test_flipped_labels_rank_first_in_label_issues_csv(noisy_run):
    out, results, flipped = noisy_run
    with open(out / "label_issues.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 240 and {r["id"] for r in rows} == {f"r{i}" for i in range(240)}
    assert set(rows[0]) == {"id", "row", "text_a", "text_b", "given", "suggested", "p_given", "likely_wrong",
                            "epochs"}
    p_given = [float(r["p_given"]) for r in rows]
    assert p_given == sorted(p_given)
    is_flipped = [r["id"] in flipped for r in rows]
    top = sum(is_flipped[:len(flipped)])
    assert top >= 0.7 * len(flipped), f"{top} of the top {len(flipped)} rows are flipped ones"
    assert roc_auc_score(is_flipped, [-p for p in p_given]) > 0.9
    flagged = [r["id"] for r in rows if r["likely_wrong"] == "True"]
    assert flagged and sum(i in flipped for i in flagged) >= 0.7 * len(flagged)
    for r in rows[:5]:                                   # the row number in the file, with its header
        assert int(r["row"]) == int(r["id"][1:]) + 2
    assert results["label_issues"]["rows"] == 240 and results["label_issues"]["flagged"] == len(flagged)
    with np.load(out / "predictions" / "train_dynamics.npz") as saved:
        assert saved["counts"].shape == (4, 240) and (saved["counts"] == 1).all()
    assert json.loads((out / "results.json").read_text())["label_issues"] == results["label_issues"]


def test_inspect_prints_both_lists_and_the_report_shows_them(noisy_run, capsys, tmp_path):
    from tuneloop.cli.main import main

    out, _, flipped = noisy_run
    assert main(["inspect", str(out), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "errors.csv" in text and "label_issues.csv" in text
    first = next(line for line in text.splitlines() if "given" in line and line.strip().startswith("1."))
    with open(out / "label_issues.csv", newline="", encoding="utf-8") as f:
        top = next(csv.DictReader(f))
    assert f"id {top['id']}" in first and f"given {top['given']}" in first
    with open(out / "errors.csv", newline="", encoding="utf-8") as f:
        wrong = len(list(csv.DictReader(f)))
    assert sum(line.strip().startswith(("1.", "2.", "3.")) for line in text.splitlines()) == 3 + min(3, wrong)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Training rows whose label may be wrong" in html and top["text_b"][:40] in html
    assert main(["inspect", str(tmp_path)]) == 2
    assert "no errors.csv or label_issues.csv" in capsys.readouterr().err


def test_regression_has_no_label_issues(tiny_model, tmp_path):
    rng = random.Random(0)
    with open(tmp_path / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "score"])
        for _ in range(40):
            w.writerow(["alpha " * rng.randint(1, 5), rng.random()])
    out = tmp_path / "run"
    results = tuneloop.train(TrainConfig(**fast_options(tiny_model, epochs=1), train_file=str(tmp_path / "train.csv"),
                                         label_column="score", problem_type="regression", output_dir=str(out)))
    assert results["label_issues"] is None and not (out / "label_issues.csv").exists()


# ---------------------------------------------------------------------------------------------- errors.csv, inspect
def _table(texts, pair=False):
    import datasets

    return datasets.Dataset.from_dict({"id": [f"r{i}" for i in range(len(texts))], "text_a": texts,
                                       "text_b": [f"second {t}" for t in texts] if pair else [None] * len(texts)})


def _logits(p_yes):
    p = np.asarray(p_yes, dtype=np.float64)
    return np.stack([np.log(1 - p), np.log(p)], axis=1)


def test_errors_csv_follows_the_saved_rule_and_marks_the_rows_it_abstains_on():
    """errors.csv decided by argmax, never by the rule the model was saved with (a tuned cut-off, an abstain
    level): it listed rows the saved model gets right, with the argmax label as "predicted"."""
    from tuneloop.analysis.wrong_rows import error_columns, error_rows
    from tuneloop.data.labels import LabelSchema
    from tuneloop.decision.rule import DecisionRule

    schema = LabelSchema("single_label_classification", ["no", "yes"])
    table, logits = _table(["a", "b", "c", "d", "e"]), _logits([0.4, 0.35, 0.9, 0.2, 0.8])
    labels = np.array([1, 0, 1, 0, 0])
    rule = DecisionRule(thresholds=[0.3], objective="f1", abstain_below=0.62)
    assert [r["id"] for r in error_rows(table, logits, labels, schema)] == ["r4", "r0"]     # argmax, no rule
    rows = error_rows(table, logits, labels, schema, rule)
    assert [r["id"] for r in rows] == ["r4", "r1"]           # r0: 'yes' at 0.4 ≥ 0.3, right; r1: 'yes', wrong
    assert list(rows[0]) == error_columns(table, schema, rule) == \
        ["id", "text", "gold", "predicted", "p_predicted", "p_gold", "abstained"]
    assert [(r["gold"], r["predicted"], r["abstained"]) for r in rows] == [("no", "yes", False), ("no", "yes", True)]
    assert [r["p_predicted"] for r in rows] == pytest.approx([0.8, 0.35])     # the raw probabilities, kept
    multi = LabelSchema("multi_label_classification", ["x", "y"], separator="|")
    z = np.array([[0.2, -3.0], [-0.4, 2.0]])                 # sigmoid: 0.55, 0.05 | 0.40, 0.88
    cut = DecisionRule(kind="multi_label_classification", thresholds=[0.6, 0.3], objective="f1")
    gold = np.array([[0, 0], [1, 1]])
    assert [r["id"] for r in error_rows(_table(["a", "b"]), z, gold, multi)] == ["r1", "r0"]
    assert [(r["id"], r["predicted"]) for r in error_rows(_table(["a", "b"]), z, gold, multi, cut)] == [("r1", "y")]


def test_errors_csv_with_no_wrong_row_is_its_header(tmp_path):
    """A model right on every validation row wrote errors.csv as the one line 'id'."""
    from types import SimpleNamespace

    from tuneloop.data.labels import LabelSchema
    from tuneloop.decision.rule import DecisionRule
    from tuneloop.training.reporting import write_errors

    single = LabelSchema("single_label_classification", ["no", "yes"])
    cases = [(_table(["a", "b"], pair=True), single, _logits([0.1, 0.9]), np.array([0, 1]), None,
              "id,text_a,text_b,gold,predicted,p_predicted,p_gold"),
             (_table(["a", "b"]), single, _logits([0.1, 0.9]), np.array([0, 1]), DecisionRule(abstain_below=0.6),
              "id,text,gold,predicted,p_predicted,p_gold,abstained"),
             (_table(["a"]), LabelSchema("multi_label_classification", ["x", "y"]), np.array([[3.0, -3.0]]),
              np.array([[1, 0]]), None, "id,text,gold,predicted,confidence_wrong")]
    for table, schema, logits, labels, rule, header in cases:
        run = SimpleNamespace(data=SimpleNamespace(raw=SimpleNamespace(evaluation={"validation": table}),
                                                   labels=schema), output_dir=tmp_path)
        write_errors(run, SimpleNamespace(outputs={"validation": (logits, labels)}), rule)
        with open(tmp_path / "errors.csv", newline="", encoding="utf-8") as f:
            assert f.read() == header + "\n"
            f.seek(0)
            assert list(csv.DictReader(f)) == []


def test_inspect_says_a_missing_folder_is_missing_and_names_the_run_of_its_model_folder(tmp_path, capsys):
    from tuneloop.cli.main import main

    assert main(["inspect", str(tmp_path / "no-such-run")]) == 2
    said = capsys.readouterr().err
    assert "no-such-run: no such folder; give the folder of a finished `tuneloop train` run" in said
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "errors.csv").write_text("id,text,gold,predicted,p_predicted,p_gold\n")
    (run / "model" / "tuneloop.json").write_text("{}")
    assert main(["inspect", str(run / "model")]) == 2
    said = capsys.readouterr().err
    assert f"it is the saved model of the run {run}, which has them: `tuneloop inspect {run}`" in said
    assert main(["inspect", str(run)]) == 0 and "errors.csv: 0 validation rows" in capsys.readouterr().out
