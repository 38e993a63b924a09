"""The decision rule end to end: fitted after training, saved in model/tuneloop.json, applied by predict and
evaluate (1 and 2 processes), shown raw with --raw, refused where it cannot apply."""

from __future__ import annotations

import csv
import json
import math
import random

import pytest
from conftest import fast_options, keyword_pair

import tuneloop
from tuneloop import TrainConfig
from tuneloop.cli.main import main


def write_pairs(path, n, seed, noise=0.15):
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "sentence1", "sentence2", "label"])
        for i in range(n):
            label, a, b = keyword_pair(rng)
            if rng.random() < noise:             # label noise: the model cannot be sure of everything
                label = 1 - label
            w.writerow([f"r{i}", a, b, ["no", "yes"][label]])
    return path


@pytest.fixture(scope="module")
def decided_run(tiny_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("decided")
    train, dev = write_pairs(tmp / "train.csv", 200, 1), write_pairs(tmp / "dev.csv", 120, 2)
    out = tmp / "run"
    results = tuneloop.train(TrainConfig(**fast_options(tiny_model, epochs=2, report=True), train_file=str(train),
                                         validation_file=str(dev), output_dir=str(out), decision="threshold",
                                         optimize_threshold_for="f1", abstain_below=0.75, abstain_label="unsure"))
    return out, results, dev


def test_the_rule_is_fitted_reported_and_saved_with_the_model(decided_run):
    out, results, _ = decided_run
    d = results["decision"]
    assert d["measured"].startswith("2-fold cross-fit on the 120 validation rows")
    assert set(d["calibration"]) >= {"temperature", "ece_before", "ece_after", "nll_before", "nll_after"}
    assert set(d["thresholds"]["at_default"]) >= {"f1", "precision", "recall"} and len(d["thresholds"]["values"]) == 1
    assert d["abstain"]["level"] == 0.75 and 0 <= d["abstain"]["coverage"] <= 1
    saved = json.loads((out / "model" / "tuneloop.json").read_text())["decision"]
    assert saved["thresholds"] == d["thresholds"]["values"] and saved["temperature"] == d["calibration"]["temperature"]
    assert saved["abstain_label"] == "unsure" and saved["fitted_on"] == "all 120 validation rows"
    assert json.loads((out / "results.json").read_text())["decision"]["rule"] == d["rule"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Decision rule" in html and "Reliability" in html and "Coverage" in html


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t" if str(path).endswith(".tsv") else ","))


def test_predict_applies_the_saved_rule_and_raw_shows_the_scores(decided_run, tmp_path, capsys):
    out, results, dev = decided_run
    saved = json.loads((out / "model" / "tuneloop.json").read_text())["decision"]
    decided, raw = tmp_path / "decided.csv", tmp_path / "raw.csv"
    assert main(["predict", "--model", str(out / "model"), "--input", str(dev), "--output", str(decided),
                 "--quiet"]) == 0
    assert main(["predict", "--model", str(out / "model"), "--input", str(dev), "--output", str(raw), "--quiet",
                 "--raw"]) == 0
    decided_rows, raw_rows = read(decided), read(raw)
    assert "decision_rule" not in raw_rows[0] and {r["label"] for r in raw_rows} <= {"no", "yes"}
    temperature, (cut,) = saved["temperature"], saved["thresholds"]
    for d, r in zip(decided_rows, raw_rows, strict=True):
        margin = math.log(float(r["prob_yes"])) - math.log(float(r["prob_no"]))    # z_yes - z_no
        p_yes = 1 / (1 + math.exp(-margin / temperature))
        assert float(d["prob_yes"]) == pytest.approx(p_yes, abs=1e-4)
        label = "yes" if p_yes >= cut else "no"
        p_label = p_yes if label == "yes" else 1 - p_yes
        assert d["label"] == ("unsure" if p_label < 0.75 else label)
        assert d["decision_rule"] == f"temperature {temperature:.3g}; threshold {cut:.3g} (f1); unsure below 0.75"
    with open(dev, newline="") as f:
        first = next(csv.DictReader(f))
    capsys.readouterr()
    assert main(["predict", "--model", str(out / "model"), first["sentence1"], first["sentence2"]]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["label"] == decided_rows[0]["label"] and one["decision_rule"] == decided_rows[0]["decision_rule"]


def test_evaluate_uses_the_rule_and_raw_matches_training(decided_run, tmp_path, capsys):
    out, results, _ = decided_run
    raw, decided = tmp_path / "raw.json", tmp_path / "decided.json"
    assert main(["evaluate", "--model", str(out / "model"), "--output", str(raw), "--quiet", "--raw"]) == 0
    assert main(["evaluate", "--model", str(out / "model"), "--output", str(decided), "--quiet"]) == 0
    assert "decision rule: temperature" in capsys.readouterr().out
    raw_eval, decided_eval = json.loads(raw.read_text())["eval"], json.loads(decided.read_text())["eval"]
    for key in ("accuracy", "f1", "loss"):
        assert raw_eval[key] == pytest.approx(results["eval"][key], abs=1e-5)
    assert set(decided_eval) >= {"accuracy", "f1", "loss", "ece", "coverage", "accuracy_answered"}
    assert decided_eval["loss"] <= raw_eval["loss"] + 1e-6       # the fitted temperature never raises its own NLL
    for path, metrics in ((raw, raw_eval), (decided, decided_eval)):          # the table decides as "eval" does
        assert json.loads(path.read_text())["per_class"]["yes"]["f1"] == pytest.approx(metrics["f1"], abs=1e-4)


def test_two_processes_apply_the_rule_identically(decided_run, tmp_path):
    from test_distributed import run, torchrun

    out, _, dev = decided_run
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    assert main(["predict", "--model", str(out / "model"), "--input", str(dev), "--output", str(one), "--quiet"]) == 0
    run(torchrun(2) + ["predict", "--model", str(out / "model"), "--input", str(dev), "--output", str(two),
                       "--quiet", "--batch-size", "4"])
    single, double = read(one), read(two)
    assert len(double) == 120 and [r["id"] for r in double] == [r["id"] for r in single]
    for a, b in zip(single, double, strict=True):
        assert a["label"] == b["label"] and a["decision_rule"] == b["decision_rule"]
        assert float(a["prob_yes"]) == pytest.approx(float(b["prob_yes"]), abs=1e-5)


def test_a_constraint_is_assured_with_the_asked_confidence_and_the_report_says_so(tiny_model, tmp_path):
    train, dev = write_pairs(tmp_path / "train.csv", 200, 1), write_pairs(tmp_path / "dev.csv", 120, 2)
    results = tuneloop.train(TrainConfig(**fast_options(tiny_model, epochs=2, report=True), train_file=str(train),
                                         validation_file=str(dev), output_dir=str(tmp_path / "run"),
                                         decision="threshold", optimize_threshold_for="precision@0.7",
                                         threshold_confidence=0.8))
    t = results["decision"]["thresholds"]
    (bound,) = t["assured"]["lower_bounds"]
    assert t["assured"]["confidence"] == 0.8 and 0 < bound < 1
    unassured = any("with 80% confidence" in n for n in results["decision"].get("notes", []))
    assert unassured == (bound < 0.7)           # assured exactly when the recall's lower bound reaches 0.7
    saved = json.loads((tmp_path / "run" / "model" / "tuneloop.json").read_text())["decision"]
    assert t["assured"]["all"] == (not unassured)
    if unassured:                               # the rule does not claim what the rows could not assure
        assert saved["confidence"] is None and "confidence" not in results["decision"]["rule"]
    else:
        assert saved["confidence"] == 0.8 and "(precision@0.7, 80% confidence)" in results["decision"]["rule"]
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert f"With 80% confidence, recall on new rows like these is at least {bound:.3f}" in html


def test_a_positive_label_is_the_class_f1_is_of_in_training_and_evaluating(tiny_model, tmp_path):
    """--positive-label no: the run's F1 (what --metric-for-best f1 and early stopping read) was the other class's,
    beside the rule's precision and recall of 'no'."""
    train, dev = write_pairs(tmp_path / "train.csv", 200, 1), write_pairs(tmp_path / "dev.csv", 120, 2)
    results = tuneloop.train(TrainConfig(**fast_options(tiny_model, epochs=2), train_file=str(train),
                                         validation_file=str(dev), output_dir=str(tmp_path / "run"),
                                         decision="threshold", positive_label="no", calibrate="none"))
    classes = results["per_class"]["validation"]
    assert results["eval"]["f1"] == pytest.approx(classes["no"]["f1"], abs=1e-4)
    assert classes["no"]["f1"] != pytest.approx(classes["yes"]["f1"], abs=1e-4)
    raw = tmp_path / "raw.json"          # the raw argmax, as the run's eval: F1 of 'no' too (was class 1's)
    assert main(["evaluate", str(tmp_path / "run" / "model"), "--raw", "--output", str(raw), "--quiet"]) == 0
    evaluated = json.loads(raw.read_text())
    assert evaluated["eval"]["f1"] == pytest.approx(evaluated["per_class"]["no"]["f1"], abs=1e-4)
    assert evaluated["eval"]["f1"] == pytest.approx(results["eval"]["f1"], abs=1e-4)


def test_multi_label_gets_one_threshold_per_label(tiny_model, tmp_path):
    rng = random.Random(0)
    with open(tmp_path / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "labels"])
        for i in range(160):
            words = [rng.choice(["alpha", "beta", "gamma", "cat", "dog", "red"]) for _ in range(5)]
            words.insert(rng.randint(0, 5), rng.choice(["alpha", "beta", "gamma"]))    # at least one label
            words += ["zeta"] if i < 3 else []            # a tag on 3 rows: too few to tune its cut-off on
            tags = [t for t, k in (("a", "alpha"), ("b", "beta"), ("g", "gamma"), ("z", "zeta")) if k in words]
            w.writerow([" ".join(words), ",".join(tags)])
    results = tuneloop.train(TrainConfig(**fast_options(tiny_model, epochs=2), train_file=str(tmp_path / "train.csv"),
                                         label_separator=",", output_dir=str(tmp_path / "run"), decision="threshold",
                                         optimize_threshold_for="macro-f1", validation_split=0.3))
    d = results["decision"]
    assert len(d["thresholds"]["values"]) == 4 and set(d["thresholds"]["at_tuned"]) >= {"f1_micro", "f1_macro"}
    assert d["thresholds"]["values"][3] == 0.5 and d["thresholds"]["values"][:3] != [0.5] * 3   # z: 0.5, rest tuned
    assert any(n.startswith("thresholds not tuned for 1 of 4 labels (z): fewer than 5 of the 48 validation rows")
               for n in d["notes"])
    assert d["calibration"]["temperature"] > 0


def test_threshold_on_three_classes_and_bad_values_are_refused(tiny_model, tmp_path, capsys):
    with open(tmp_path / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows([["alpha beta", "x"], ["beta cat", "y"], ["cat dog", "z"]] * 10)
    base = ["train", "--model", tiny_model, "--train-file", str(tmp_path / "train.csv"), "--quiet",
            "--output-dir", str(tmp_path / "run")]
    assert main(base + ["--decision", "threshold"]) == 2
    assert "--decision threshold: needs two classes" in capsys.readouterr().err
    assert not (tmp_path / "run" / "model").exists()
    for flags, message in ((["--optimize-threshold-for", "recall@2"], "--optimize-threshold-for"),
                           (["--abstain-below", "1.5"], "--abstain-below: must be a probability"),
                           (["--calibrate", "platt"], "--calibrate: unknown value"),
                           (["--positive-label", "w"], "--positive-label 'w': not a label of this data (x, y, z)"),
                           (["--abstain-below", "0.9", "--abstain-label", "y"],          # abstaining read as 'y'
                            "--abstain-label 'y': is a label of this data; give a name no class has")):
        assert main(base + flags) == 2
        assert message in capsys.readouterr().err


def test_evaluate_shows_a_rule_that_abstains_on_every_row(tiny_model, tmp_path, capsys):
    """accuracy_answered counts no row when every row is abstained on: evaluate prints — (it raised TypeError)."""
    train, dev = write_pairs(tmp_path / "t.csv", 40, 1), write_pairs(tmp_path / "d.csv", 30, 2)
    out = tmp_path / "run"
    tuneloop.train(TrainConfig(train_file=str(train), validation_file=str(dev), output_dir=str(out),
                               **fast_options(tiny_model, epochs=1, lr=1e-5, abstain_below=0.99)))
    capsys.readouterr()
    assert main(["evaluate", str(out / "model")]) == 0
    said = capsys.readouterr().out
    assert "coverage=0.0000" in said and "accuracy_answered=—" in said, said
