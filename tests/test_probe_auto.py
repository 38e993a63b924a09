"""--method probe (a logistic-regression head on the frozen embedding, training/contrastive.py) and --method auto
(training/choose.py: under the small-data line, the method chosen by cross-validation on the training rows)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from conftest import fast_options, sentence

import tuneloop
from tuneloop.training import choose, head_fit

WORDS = {"good": ["great", "lovely", "superb"], "bad": ["awful", "dull", "poor"]}


def opinion_rows(n: int, seed: int, words_of: dict = WORDS) -> tuple[list[str], list[str]]:
    """A toy sentiment task: filler words with one opinion word in them (`words_of`: each label's)."""
    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        label = ("good", "bad")[i % 2]
        words = sentence(rng).split()
        words.insert(rng.randint(0, len(words)), rng.choice(words_of[label]))
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def frame(rows):
    import pandas as pd

    return pd.DataFrame({"text": rows[0], "label": rows[1]})


def write(path, rows) -> str:
    frame(rows).to_csv(path, index=False)
    return str(path)


def test_the_probe_is_a_head_on_the_frozen_body_and_an_ordinary_model_folder(tiny_model, tmp_path, capfd):
    from transformers import AutoModelForSequenceClassification

    from tuneloop.cli.commands import print_summary
    from tuneloop.cli.main import main

    train, dev = opinion_rows(40, 0), opinion_rows(30, 1)
    out = tmp_path / "run"
    result = tuneloop.train(**fast_options(tiny_model, method="probe", quiet=False),
                            train_file=write(tmp_path / "train.csv", train),
                            validation_file=write(tmp_path / "dev.csv", dev), output_dir=str(out))   # the gate reads it
    err = capfd.readouterr().err
    assert "| --method probe: the frozen embedding, then a fitted head; the training loop takes no step |" in err
    assert "; measured in-sample on the 30 validation rows (too few to hold any out: optimistic)" in err
    print_summary(result)                         # what `tuneloop train` prints last: the probe, not "0 steps"
    said = capfd.readouterr().out
    assert "train: a linear probe on the frozen embedding, then a logistic-regression head, " in said
    assert "0 steps" not in said
    stage = result["setfit"]
    assert stage["method"] == "probe" and stage["pairs"] == 0 and stage["head"] == "logistic"
    assert result["train"]["steps"] == 0 and stage["seconds"] < 30
    assert json.loads((out / "results.json").read_text())["setfit"]["method"] == "probe"
    assert "method: probe" in (out / "config.yaml").read_text()

    before = AutoModelForSequenceClassification.from_pretrained(tiny_model).state_dict()
    after = AutoModelForSequenceClassification.from_pretrained(out / "model").state_dict()
    body = [k for k in before if k.startswith("bert.encoder.") or k.startswith("bert.embeddings.")]
    assert body and all(torch.equal(before[k], after[k]) for k in body)           # the body was not trained

    clf = tuneloop.load(out)
    predicted = clf.predict(dev[0][:6])
    assert [p["label"] for p in predicted] == [clf.labels[i] for i in clf.predict_proba(dev[0][:6]).argmax(1)]
    target = tmp_path / "onnx"
    assert main(["export", str(out), "--output", str(target), "--quiet"]) == 0
    report = json.loads((target / "export_report.json").read_text())
    assert report["gate"]["verdict"] == "pass"


AUTO = {"small_data": "auto", "epochs": 1}        # fast_options turns the small-data rule off; auto needs it


def test_auto_chooses_by_cross_validation_records_it_and_repeats_with_the_seed(tiny_model, tmp_path, capfd):
    train, dev = frame(opinion_rows(24, 2)), frame(opinion_rows(16, 3))
    runs = []
    for name in ("a", "b"):
        runs.append(tuneloop.train(**fast_options(tiny_model, **AUTO, quiet=name == "b"), train=train,
                                   validation=dev, output_dir=str(tmp_path / name)))
    first, second = (r["auto"] for r in runs)
    assert first["chosen"] in ("probe", "setfit", "finetune") and first["folds"] == 3
    scored = {m: c for m, c in first["candidates"].items() if "accuracy" in c}
    assert "probe" in scored
    if "setfit" in scored:        # the stage unless a candidate won significantly more of the same held-out rows
        tests = {m: c["against_setfit"] for m, c in scored.items() if m != "setfit"}
        better = [m for m, t in tests.items() if t["p"] < choose.ALPHA]
        assert first["chosen"] == (min(better, key=lambda m: tests[m]["p"]) if better else "setfit")
        for m, t in tests.items():     # wins - losses: the difference in rows right (24 rows, each held out once)
            assert t["wins"] - t["losses"] == round((scored[m]["accuracy"] - scored["setfit"]["accuracy"]) * 24)
    assert all(len(c["folds"]) == 3 for c in first["candidates"].values() if "accuracy" in c)
    drop = lambda a: {m: {k: v for k, v in c.items() if k not in ("seconds", "estimated_s")}     # noqa: E731
                      for m, c in a["candidates"].items()}
    assert drop(first) == drop(second) and first["chosen"] == second["chosen"]          # seeded
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    assert saved["auto"]["chosen"] == first["chosen"]
    assert f"method: {first['chosen']}" in (tmp_path / "a" / "config.yaml").read_text()
    err = capfd.readouterr().err
    assert f"method auto: {first['chosen']}, " in err
    assert "method auto: probe, fold 1 of 3: " in err and "method auto: probe, fold 3 of 3: " in err  # where it is
    assert err.count("attention: ") == 1          # said by the run's model, not again by every fold's
    from tuneloop.cli.commands import print_summary

    print_summary(runs[0])        # the last lines: the estimate over every training row, beside the validation rows'
    estimate = first["candidates"][first["chosen"]]["accuracy"]
    assert f"cross-validated: {first['chosen']} accuracy {estimate:.4f} on the training rows (3 folds, each row " \
           "scored by a model that did not train on it)" in capfd.readouterr().out
    from tuneloop.report.page import write_report

    page = write_report(tmp_path / "a").read_text()
    assert f"chosen by --method auto: {first['chosen']}, " in page and "3-fold cross-validation accuracy" in page
    assert f"probe {first['candidates']['probe']['accuracy']:.4f}" in page


def test_auto_keeps_to_its_budget_and_a_named_method_is_kept(tiny_model, tmp_path, capsys):
    train, dev = frame(opinion_rows(24, 2)), frame(opinion_rows(16, 3))
    tight = tuneloop.train(**fast_options(tiny_model, **AUTO, auto_budget=1e-3), train=train, validation=dev,
                           output_dir=str(tmp_path / "tight"))
    assert {m for m, c in tight["auto"]["candidates"].items() if "skipped" in c} == {"setfit", "finetune"}
    assert "accuracy" in tight["auto"]["candidates"]["probe"]        # the probe always runs
    assert tight["auto"]["chosen"] == "setfit" and tight.get("setfit") is not None  # not compared: the default
    named = tuneloop.train(**fast_options(tiny_model, **AUTO, method="finetune"), train=train, validation=dev,
                           output_dir=str(tmp_path / "named"))
    assert "auto" not in named and named["train"]["steps"] > 0
    from tuneloop.cli.commands import print_summary

    print_summary(named)
    assert "cross-validated" not in capsys.readouterr().out       # a named method ran no cross-validation
    assert "method: finetune" in (tmp_path / "named" / "config.yaml").read_text()


def test_auto_with_lora_fine_tunes_the_adapters_without_cross_validation(tiny_model, tmp_path):
    """--lora on few rows ran the pair stage on the adapters at --setfit-lr (2e-5: they barely moved) and read the
    model's pooler: nothing the stage's measurements cover. The loop trains them, said; --method setfit is kept."""
    train, dev = frame(opinion_rows(24, 2)), frame(opinion_rows(16, 3))
    run = tuneloop.train(**fast_options(tiny_model, **AUTO, lora=True), train=train, validation=dev,
                         output_dir=str(tmp_path / "lora"))
    assert run["auto"] == {"chosen": "finetune", "why": "--lora trains adapters in the training loop"}
    assert run["train"]["steps"] > 0 and run.get("setfit") is None
    assert "method: finetune" in (tmp_path / "lora" / "config.yaml").read_text()
    asked = tuneloop.train(**fast_options(tiny_model, **AUTO, lora=True, method="setfit", setfit_iterations=1),
                           train=train, validation=dev, output_dir=str(tmp_path / "asked"))
    assert "auto" not in asked and asked["setfit"]["steps"] > 0


def test_above_the_small_data_line_a_default_run_is_the_usual_run(tiny_model, tmp_path):
    from tuneloop.training.small_data import SMALL_ROWS

    train, dev = frame(opinion_rows(SMALL_ROWS, 4)), frame(opinion_rows(40, 5))
    options = fast_options(tiny_model, small_data="auto", max_steps=12)
    default = tuneloop.train(**options, train=train, validation=dev, output_dir=str(tmp_path / "default"))
    usual = tuneloop.train(**options, method="finetune", train=train, validation=dev,
                           output_dir=str(tmp_path / "usual"))
    assert "auto" not in default and default["train"]["steps"] == usual["train"]["steps"] == 12
    assert default["eval"] == usual["eval"]
    assert "method: finetune" in (tmp_path / "default" / "config.yaml").read_text()


def test_auto_compares_only_few_rows_per_class_under_the_small_data_line():
    from types import SimpleNamespace

    from tuneloop.config.options import TrainConfig
    from tuneloop.training import choose

    two = SimpleNamespace(classes=["a", "b"], multi_label=False, num_labels=2)
    for rows, method in ((2 * choose.FEW_PER_CLASS + 1, "finetune"), (400, "finetune"), (1000, "finetune")):
        data = SimpleNamespace(train=[None] * rows, labels=SimpleNamespace(objective=two))
        config, chosen = choose.decide(TrainConfig(method="auto"), data, None, None, None, None)
        assert (config.method, chosen) == (method, None)                 # the usual run, nothing recorded
    scores = SimpleNamespace(classes=[], multi_label=False, num_labels=1)     # regression: fine-tuning, no folds
    data = SimpleNamespace(train=[None] * 40, labels=SimpleNamespace(objective=scores))
    assert choose.decide(TrainConfig(method="auto"), data, None, None, None, None)[0].method == "finetune"
    named = choose.decide(TrainConfig(method="probe"), None, None, None, None, None)
    assert named[0].method == "probe" and named[1] is None


@pytest.mark.parametrize("probe_right, finetune_right, chosen", [
    (20, 12, "setfit"),     # the probe wins 4 rows more than the stage's 16 of 32: chance, p 0.06
    (21, 12, "probe"),      # 5 more, none lost: p 0.03
    (22, 32, "finetune"),   # both beyond chance: the smaller p
])
def test_auto_replaces_the_stage_only_beyond_chance(monkeypatch, probe_right, finetune_right, chosen):
    from types import SimpleNamespace

    from tuneloop.config.options import TrainConfig
    from tuneloop.training import choose

    labels = np.repeat([0, 1], 16)
    right = {"setfit": np.arange(32) < 16, "probe": np.arange(32) < probe_right,
             "finetune": np.arange(32) < finetune_right}
    monkeypatch.setattr(choose, "fold_correct", lambda method, *a: right[method][a[-2]])
    table = SimpleNamespace(column_names=["input_ids"], select_columns=lambda columns: None)
    data = SimpleNamespace(train=table)
    out = choose.cross_validate(TrainConfig(auto_budget=600), data, None, None, None, None, labels)
    assert out["chosen"] == chosen and out["default"] == "setfit"
    assert out["candidates"]["probe"]["against_setfit"]["wins"] == probe_right - 16
    assert out["candidates"]["probe"]["against_setfit"]["losses"] == 0


def test_a_candidate_that_cannot_beat_the_stage_stops_and_the_choice_is_unchanged(monkeypatch):
    """Fine-tuning's folds stop once, right on every row still to score, it would not beat the stage beyond chance:
    over 60 random patterns of right rows, the same choice as the whole cross-validation, with fewer folds."""
    from types import SimpleNamespace

    from tuneloop.config.options import TrainConfig
    from tuneloop.report.fmt import auto_text

    rng, labels = np.random.default_rng(0), np.repeat([0, 1], 24)
    table = SimpleNamespace(column_names=["input_ids"], select_columns=lambda columns: None)
    stopped = 0
    for _ in range(60):
        right = {m: rng.random(48) < rng.uniform(0.4, 1.0) for m in choose.CANDIDATES}
        calls = []
        monkeypatch.setattr(choose, "fold_correct", lambda method, *a: calls.append(method) or right[method][a[-2]])
        early = choose.cross_validate(TrainConfig(auto_budget=600), SimpleNamespace(train=table), None, None, None,
                                      None, labels)
        early_folds = calls.count("finetune")
        with monkeypatch.context() as patched:
            patched.setattr(choose, "out_of_reach", lambda *a, **k: None)
            full = choose.cross_validate(TrainConfig(auto_budget=600), SimpleNamespace(train=table), None, None,
                                         None, None, labels)
        assert early["chosen"] == full["chosen"]
        if "stopped" in early["candidates"]["finetune"]:
            stopped += 1
            assert early_folds < calls.count("finetune") - early_folds and full["chosen"] != "finetune"
            assert "finetune stopped early (could not beat setfit beyond chance)" in auto_text(early)
        else:
            assert early["candidates"]["finetune"] == full["candidates"]["finetune"] | {
                "seconds": early["candidates"]["finetune"]["seconds"]}
    assert 10 <= stopped <= 50


def test_the_folds_stage_makes_the_passes_the_run_will(monkeypatch):
    """A fold trains the contrastive stage with the passes the run will make on all its rows (16 binary rows: 9
    steps a pass, 12 passes), not the more its own fewer pairs would take."""
    from types import SimpleNamespace

    from tuneloop.config.options import TrainConfig
    from tuneloop.training import contrastive

    labels, seen = np.repeat([0, 1], 8), []
    monkeypatch.setattr(choose, "fold_correct", lambda method, config, *a: seen.append((method, config.setfit_epochs))
                        or np.ones(len(a[-2]), dtype=bool))
    table = SimpleNamespace(column_names=["input_ids"], select_columns=lambda columns: None)
    choose.cross_validate(TrainConfig(auto_budget=600), SimpleNamespace(train=table), None, None, None, None, labels)
    fold = labels[head_fit.folds_of(labels, 42)[0][0]]
    assert contrastive.planned_passes(TrainConfig(), fold, 1) > 12
    assert {epochs for method, epochs in seen if method == "setfit"} == {12}


@pytest.mark.parametrize("chosen", ["probe", "setfit"])
def test_the_method_auto_chooses_is_the_one_that_trains(tiny_model, tmp_path, monkeypatch, chosen):
    """A head-fitted method chosen by auto runs its stage (the loop once read the undecided `auto` and trained no
    step: an untrained head, near chance), and the cross-validation leaves the random streams as they were: the run
    equals the same method named."""
    from tuneloop.training import choose

    real = choose.cross_validate         # run (it draws from the random streams), then choose `chosen`
    monkeypatch.setattr(choose, "cross_validate", lambda *a, **k: {**real(*a, **k), "chosen": chosen})
    train, dev = frame(opinion_rows(24, 2)), frame(opinion_rows(16, 3))
    options = fast_options(tiny_model, **{**AUTO, "setfit_iterations": 2, "dropout": 0.1})   # draws from torch
    by_auto = tuneloop.train(**options, train=train, validation=dev, output_dir=str(tmp_path / "auto"))
    named = tuneloop.train(**{**options, "method": chosen}, train=train, validation=dev,
                           output_dir=str(tmp_path / "named"))
    assert by_auto["auto"]["chosen"] == chosen and by_auto.get("setfit") is not None    # the stage ran
    assert by_auto["eval"] == pytest.approx(named["eval"], abs=1e-6)


def test_a_class_of_one_training_row_keeps_the_stage_without_cross_validation(tiny_model, tmp_path, monkeypatch):
    """No folds can hold out a class's only row and train on it too, so nothing is compared; the choice is the
    few-shot default, the stage (it fell back to fine-tuning, behind the stage at one row per class on 5 of the 6
    sets measured), recorded with why, and the run equals `--method setfit`'s."""
    from tuneloop.training import choose

    monkeypatch.setattr(choose, "cross_validate", lambda *a, **k: pytest.fail("no cross-validation to run"))
    texts, labels = opinion_rows(9, 2)
    train = frame((texts + ["a great lovely day"], labels + ["mixed"]))     # "mixed": one row
    dev = frame(opinion_rows(16, 3))
    options = fast_options(tiny_model, **{**AUTO, "setfit_iterations": 2})
    by_auto = tuneloop.train(**options, train=train, validation=dev, output_dir=str(tmp_path / "auto"))
    named = tuneloop.train(**{**options, "method": "setfit"}, train=train, validation=dev,
                           output_dir=str(tmp_path / "named"))
    assert by_auto["auto"]["chosen"] == "setfit" and "fewer than 2 training rows" in by_auto["auto"]["why"]
    assert by_auto["setfit"]["steps"] > 0 and by_auto["train"]["steps"] == 0        # the stage ran, not the loop
    assert by_auto["eval"] == pytest.approx(named["eval"], abs=1e-6)
    assert "method: setfit" in (tmp_path / "auto" / "config.yaml").read_text()


def test_a_probe_with_few_validation_rows_fits_its_rule_on_its_heads_out_of_fold_outputs(tiny_model, tmp_path):
    """The probe's body is frozen, so a head fitted on the other folds scores a training row as the saved model
    scores a new one: with fewer than MIN_FIT_ROWS validation rows (a few-shot set's 10% held out) the rule is fitted
    on those rows, and says so. With enough validation rows, on them; the contrastive stage, whose folds would need
    their own body trained, keeps the validation rows."""
    from tuneloop.decision.fit import MIN_FIT_ROWS

    train, few = frame(opinion_rows(24, 2)), frame(opinion_rows(8, 3))
    probe = tuneloop.train(**fast_options(tiny_model, method="probe"), train=train, validation=few,
                           output_dir=str(tmp_path / "few"))
    decision = probe["decision"]
    assert len(train) >= MIN_FIT_ROWS > len(few) and decision["source"] == "out_of_fold"
    assert decision["fitted_on"] == "all 24 out-of-fold training rows"
    assert decision["measured"] == "in-sample on the 24 out-of-fold training rows (too few to hold any out: optimistic)"
    assert tuneloop.load(tmp_path / "few" / "model").decision_rule().temperature == \
        decision["calibration"]["temperature"]
    enough = tuneloop.train(**fast_options(tiny_model, method="probe"), train=train,
                            validation=frame(opinion_rows(30, 3)), output_dir=str(tmp_path / "enough"))
    assert enough["decision"]["source"] == "validation" and enough["decision"]["fitted_on"] == "all 30 validation rows"
    stage = tuneloop.train(**fast_options(tiny_model, method="setfit", setfit_iterations=2), train=train,
                           validation=few, output_dir=str(tmp_path / "stage"))
    assert stage["decision"]["source"] == "validation"


@pytest.mark.parametrize("classes", [2, 3])
def test_the_probes_out_of_fold_logits_are_heads_that_never_saw_those_rows(classes):
    """head_fit.out_of_fold: softmax of a row's logits is scikit-learn's predict_proba of a logistic regression
    fitted, as the run fits its head, on the other folds only."""
    from types import SimpleNamespace

    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    rng = np.random.default_rng(0)
    labels = np.arange(60) % classes
    features = rng.normal(size=(60, 5)) + labels[:, None]
    objective = SimpleNamespace(num_labels=classes, multi_label=False)
    logits, same = head_fit.out_of_fold(features, labels, objective, True, 7)
    probabilities = torch.softmax(torch.as_tensor(logits), -1).numpy()
    for train, held in StratifiedKFold(3, shuffle=True, random_state=7).split(features, labels):
        expected = LogisticRegression(max_iter=1000, random_state=7).fit(features[train], labels[train])
        assert np.allclose(probabilities[held], expected.predict_proba(features[held]), atol=1e-6)
    assert (same == labels).all()
    assert head_fit.out_of_fold(features[:4], labels[:4], objective, True, 7) is None    # a class of 1-2 rows


@pytest.mark.parametrize("classes", [2, 4])
@pytest.mark.parametrize("with_bias", [True, False])
def test_the_cross_validation_scores_the_head_the_run_would_fit(classes, with_bias):
    """auto's folds predict with head_fit.fit_head's weight and bias, the head the run saves: a logistic regression
    with an intercept, or without one where the model's head has no bias (a decoder's score)."""
    from sklearn.linear_model import LogisticRegression

    from types import SimpleNamespace

    from tuneloop.objective import objective_for

    rng = np.random.default_rng(classes)
    x = rng.uniform(0, classes, 60)
    labels = x.astype(int)                                   # classes by where x falls: an intercept is needed
    features = np.c_[x, 0.1 * rng.normal(size=(60, 3))]
    objective = objective_for(SimpleNamespace(problem_type="single_label_classification", num_labels=classes))
    train, held = np.arange(40), np.arange(40, 60)
    right = choose.head_correct(features, with_bias, objective, labels, train, held, seed=3)
    plain = LogisticRegression(max_iter=1000, fit_intercept=with_bias, random_state=3).fit(features[train],
                                                                                           labels[train])
    assert (right == (plain.predict(features[held]) == labels[held])).all()
    other = LogisticRegression(max_iter=1000, fit_intercept=not with_bias, random_state=3).fit(features[train],
                                                                                               labels[train])
    assert (other.predict(features[held]) != plain.predict(features[held])).any()    # the bias choice shows
