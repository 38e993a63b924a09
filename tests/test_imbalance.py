"""Imbalanced classes: class weights (scikit-learn's formula, or a file), pos_weight for multi-label, a
balanced sampler, the rare-class warning; per-class metrics and errors.csv for every classification run."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch
from conftest import fast_options
from test_validation_split import write_reviews

import tuneloop
from tuneloop import ConfigError, TrainConfig
from tuneloop.data import balance
from tuneloop.data.batching import LengthGroupedSampler
from tuneloop.data.labels import LabelSchema
from tuneloop.objective import objective_for

SINGLE = LabelSchema("single_label_classification", ["neg", "neu", "pos"])
MULTI = LabelSchema("multi_label_classification", ["a", "b", "c"])


def test_balanced_weights_are_scikit_learns():
    from sklearn.utils.class_weight import compute_class_weight

    y = np.array([0] * 70 + [1] * 25 + [2] * 5)
    ours = balance.loss_weights("balanced", SINGLE, y)
    assert np.allclose(ours, compute_class_weight("balanced", classes=np.arange(3), y=y))
    assert np.allclose(ours, len(y) / (3 * np.bincount(y)))


def test_multi_label_pos_weight_is_negatives_over_positives():
    y = np.array([[1, 0, 0]] * 6 + [[1, 1, 0]] * 2 + [[0, 0, 1]] * 2, dtype=float)
    assert np.allclose(balance.loss_weights("balanced", MULTI, y), [2 / 8, 8 / 2, 8 / 2])


def test_weights_file_and_its_mistakes(tmp_path):
    good = tmp_path / "w.json"
    good.write_text(json.dumps({"pos": 3, "neg": 0.5}))
    assert list(balance.loss_weights(str(good), SINGLE, np.array([0, 1, 2]))) == [0.5, 1.0, 3.0]
    unknown = tmp_path / "u.json"
    unknown.write_text(json.dumps({"positive": 2}))
    with pytest.raises(ConfigError, match=r"--class-weights .*u\.json: unknown label\(s\) positive; the labels are "
                                          r"neg, neu, pos"):
        balance.loss_weights(str(unknown), SINGLE, np.array([0]))
    negative = tmp_path / "n.json"
    negative.write_text(json.dumps({"pos": -1}))
    with pytest.raises(ConfigError, match="must be a positive finite number"):
        balance.loss_weights(str(negative), SINGLE, np.array([0]))
    infinite = tmp_path / "i.json"
    infinite.write_text('{"pos": 1e400}')                    # json reads inf: the loss was inf, training NaN
    with pytest.raises(ConfigError, match="the weight of 'pos' must be a positive finite number, got inf"):
        balance.loss_weights(str(infinite), SINGLE, np.array([0]))
    twice = tmp_path / "t.json"
    twice.write_text('{"pos": 2, "neg": 1, "pos": 3}')       # json.loads kept the last silently
    with pytest.raises(ConfigError, match="'pos' is given twice"):
        balance.loss_weights(str(twice), SINGLE, np.array([0]))
    with pytest.raises(ConfigError, match="--class-weights: regression has no classes"):
        balance.loss_weights("balanced", LabelSchema("regression"), np.array([0.5]))
    with pytest.raises(ConfigError, match="neither none, balanced nor an existing JSON file"):
        TrainConfig(class_weights="balanced-ish").validate()


def test_unweighted_loss_is_the_models_own():
    """Without weights, tuneloop's loss is exactly the loss transformers' heads compute."""
    logits = torch.randn(6, 3)
    labels = torch.tensor([0, 2, 1, 1, 0, 2])
    assert torch.equal(objective_for("single_label_classification").loss(logits, labels),
                       torch.nn.CrossEntropyLoss()(logits, labels))
    multi = torch.randint(0, 2, (6, 3)).float()
    assert torch.equal(objective_for("multi_label_classification").loss(logits, multi),
                       torch.nn.BCEWithLogitsLoss()(logits, multi))
    scores, targets = torch.randn(6, 1), torch.randn(6)
    assert torch.equal(objective_for("regression").loss(scores, targets),
                       torch.nn.MSELoss()(scores.squeeze(), targets))
    weights = torch.tensor([1.0, 2.0, 5.0])
    assert torch.allclose(objective_for("single_label_classification", weights).loss(logits, labels),
                          torch.nn.CrossEntropyLoss(weight=weights)(logits, labels))


def test_balanced_sampler_draws_classes_evenly_and_is_seeded():
    y = np.array([0] * 90 + [1] * 10)
    weights = balance.sampling_weights(y, LabelSchema("single_label_classification", ["a", "b"]))
    lengths = np.random.default_rng(0).integers(5, 60, len(y))
    sampler = LengthGroupedSampler(lengths, 8, seed=3, weights=weights)
    drawn = []
    for epoch in range(20):
        sampler.set_epoch(epoch)
        drawn += list(sampler)
    share = np.mean(y[drawn])
    assert 0.42 < share < 0.58                                  # about half, against 0.10 in the data
    sampler.set_epoch(4)
    first = list(sampler)
    sampler.set_epoch(4)
    assert list(sampler) == first and len(first) == len(y)
    sampler.set_epoch(5)
    assert list(sampler) != first
    with pytest.raises(ConfigError, match="--sampler balanced: regression has no classes"):
        balance.sampling_weights(np.array([0.1, 0.2]), LabelSchema("regression"))


def test_rare_class_warning():
    schema = LabelSchema("single_label_classification", ["common", "rare"])
    line = balance.rare_class_warning(np.array([0] * 97 + [1] * 3), schema)
    assert "'rare' is 3.0% of the training rows (3 of 100)" in line and "--class-weights balanced" in line
    assert balance.rare_class_warning(np.array([0] * 90 + [1] * 10), schema) is None
    many = LabelSchema("single_label_classification", [f"class {i}" for i in range(35)])
    assert balance.rare_class_warning(np.repeat(np.arange(35), 10), many) is None          # 2.9% each: balanced
    line = balance.rare_class_warning(np.array([*np.repeat(np.arange(34), 10), 34, 34]), many)
    assert "'class 34' is 0.6% of the training rows (2 of 342)" in line


@pytest.fixture(scope="module")
def imbalanced_run(tiny_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("imbalanced")
    train = write_reviews(folder / "train.csv", n=400, positive_share=0.04, seed=1)
    dev = write_reviews(folder / "dev.csv", n=80, positive_share=0.25, seed=2)
    out = folder / "run"
    results = tuneloop.train(TrainConfig(train_file=str(train), validation_file=str(dev), output_dir=str(out),
                                         class_weights="balanced", sampler="balanced",
                                         **fast_options(tiny_model, max_steps=20, report=True)))
    return out, results


def test_weighted_balanced_run_reports_every_class(imbalanced_run):
    out, results = imbalanced_run
    assert set(results["eval"]) >= {"accuracy", "f1", "f1_macro"}
    classes = results["per_class"]["validation"]
    assert set(classes) == {"0", "1"} and classes["1"]["support"] == sum(
        r["label"] == "1" for r in csv.DictReader(open(out.parent / "dev.csv")))
    assert "Each class: validation" in (out / "report.html").read_text()


def test_errors_csv_holds_exactly_the_misclassified_rows(imbalanced_run):
    out, results = imbalanced_run
    data = np.load(out / "predictions" / "eval_validation.npz")
    wrong = int((data["logits"].argmax(-1) != data["labels"]).sum())
    rows = list(csv.DictReader(open(out / "errors.csv")))
    assert len(rows) == wrong == round((1 - results["eval"]["accuracy"]) * 80)
    dev = {r["id"]: r for r in csv.DictReader(open(out.parent / "dev.csv"))}
    for row in rows:
        assert row["gold"] == dev[row["id"]]["label"] != row["predicted"]
        assert row["text"] == dev[row["id"]]["text"]
    confidence = [float(r["p_predicted"]) for r in rows]
    assert confidence == sorted(confidence, reverse=True)


def test_weighting_helps_the_rare_class_on_toy_data(tiny_model, tmp_path):
    """17 positive rows of 400: unweighted, the model never predicts them; weighted, it finds most of them
    (measured 0.0 against 0.9 recall)."""
    train = write_reviews(tmp_path / "train.csv", n=400, positive_share=0.04, seed=1)
    dev = write_reviews(tmp_path / "dev.csv", n=80, positive_share=0.25, seed=2)
    recall = {}
    for name, extra in (("plain", {}), ("weighted", {"class_weights": "balanced"})):
        r = tuneloop.train(TrainConfig(train_file=str(train), validation_file=str(dev),
                                       output_dir=str(tmp_path / name), **fast_options(tiny_model, epochs=5),
                                       **extra))
        recall[name] = r["per_class"]["validation"]["1"]["recall"]
    assert recall["plain"] < 0.3 and recall["weighted"] >= 0.7


def test_the_fitted_head_of_setfit_and_the_probe_weighs_classes_as_fine_tuning_does():
    """--class-weights (and --sampler balanced, standing for balanced weights) reached only the fine-tuning loss: a
    probe or SetFit head on 1-in-6 data came out the same with them as without."""
    from sklearn.linear_model import LogisticRegression

    from tuneloop.data.labels import LabelSchema
    from tuneloop.objective import objective_for
    from tuneloop.training.head_fit import fit_head

    rng = np.random.default_rng(0)
    labels = np.array([0] * 50 + [1] * 10)
    features = rng.normal(size=(60, 6)) + labels[:, None] * 0.4
    schema = LabelSchema("single_label_classification", ["common", "rare"])
    plain = objective_for(schema)
    weights = plain.balanced_weights(labels)
    weighted = fit_head(features, labels, objective_for(schema, weights), True, 0)
    reference = LogisticRegression(max_iter=1000, random_state=0, class_weight={0: weights[0], 1: weights[1]})
    reference.fit(features, labels)
    assert np.allclose(weighted["weight"][1], reference.coef_[0] / 2)
    assert not np.allclose(weighted["weight"], fit_head(features, labels, plain, True, 0)["weight"])
    multi = LabelSchema("multi_label_classification", ["x", "y"], ",")
    sets = np.stack([labels, 1 - labels], axis=1).astype(np.float32)
    pos = objective_for(multi).balanced_weights(sets)
    fitted = fit_head(features, sets, objective_for(multi, pos), True, 0)
    first = LogisticRegression(max_iter=1000, random_state=0, class_weight={0: 1.0, 1: pos[0]}).fit(features, labels)
    assert np.allclose(fitted["weight"][0], first.coef_[0])
