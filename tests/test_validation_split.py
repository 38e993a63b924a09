"""A training file without a validation file: a stratified, seeded split is held out, recorded in split.json,
kept by a resumed run, and found again by `tuneloop evaluate`."""

from __future__ import annotations

import csv
import json
import random
from collections import Counter

import numpy as np
import pytest
from conftest import fast_options, sentence

import tuneloop
from tuneloop import ConfigError, TrainConfig
from tuneloop.data.labels import LabelSchema
from tuneloop.data.split import split_rows, stratify_keys


def write_reviews(path, n=300, positive_share=0.3, seed=0):
    """Single texts: label 1 (`good`/`great` in the text) or 0 (`bad`/`awful`), in the given proportion."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text", "label"])
        for i in range(n):
            label = int(rng.random() < positive_share)
            words = sentence(rng).split()
            words.insert(rng.randint(0, len(words)), rng.choice(["good", "great"] if label else ["bad", "awful"]))
            writer.writerow([f"r{i}", " ".join(words), label])
    return path


def test_single_label_split_keeps_the_class_shares_and_follows_the_seed():
    labels = ["a"] * 90 + ["b"] * 10
    schema = LabelSchema("single_label_classification", ["a", "b"])
    keys, how = stratify_keys(labels, schema, 20)
    train, validation, stratified = split_rows(keys, 0.2, seed=1)
    assert stratified and how == "label"
    assert len(validation) == 20 and len(train) == 80 and not set(train) & set(validation)
    assert Counter(labels[i] for i in validation) == {"a": 18, "b": 2}
    again = split_rows(keys, 0.2, seed=1)[1]
    other = split_rows(keys, 0.2, seed=2)[1]
    assert list(again) == list(validation) and list(other) != list(validation)


def test_a_class_written_two_ways_is_one_stratum():
    """A column pandas saved partly as floats ("1.0") trains "1" and "1.0" as one class: it was split as two strata,
    so the 8 rows of class 1 written "1.0" were all left out of a 10% validation part (a stratum of 8 gets none)."""
    labels = ["0"] * 80 + ["1"] * 12 + ["1.0"] * 8
    schema = LabelSchema("single_label_classification", ["0", "1"])
    keys, how = stratify_keys(labels, schema, 10)
    assert how == "label" and set(keys) == {"0", "1"}
    validation = split_rows(keys, 0.1, seed=0)[1]
    assert Counter("1" if labels[i] == "1.0" else labels[i] for i in validation) == {"0": 8, "1": 2}


def test_regression_is_stratified_by_quantile_bins_and_multi_label_by_label_set():
    values = [str(v) for v in np.linspace(0, 5, 200)]
    keys, how = stratify_keys(values, LabelSchema("regression"), 20)
    assert "quantile bins" in how
    _, validation, stratified = split_rows(keys, 0.1, seed=0)
    held = sorted(float(values[i]) for i in validation)
    assert stratified and held[0] < 0.6 and held[-1] > 4.4          # spread over the range, not one end
    sets = ['["x"]'] * 40 + ['["x","y"]'] * 40 + ['["z"]'] * 19 + ['["q"]']
    keys, how = stratify_keys(sets, LabelSchema("multi_label_classification", ["q", "x", "y", "z"]), 10)
    assert how == "label set" and keys[-1] == "(rare)"


@pytest.fixture(scope="module")
def held_out_run(tiny_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("held")
    data = write_reviews(folder / "reviews.csv")
    out = folder / "run"
    results = tuneloop.train(TrainConfig(train_file=str(data), output_dir=str(out), save_every="5",
                                         **fast_options(tiny_model, max_steps=10, report=True)))
    return data, out, results


def test_the_split_is_recorded_and_reported(held_out_run):
    data, out, results = held_out_run
    split = json.loads((out / "split.json").read_text())
    assert len(split["validation"]) == 30 and len(split["train"]) == 270
    assert sorted(split["train"] + split["validation"]) == list(range(300))
    labels = [row["label"] for row in csv.DictReader(open(data))]
    share = sum(labels[i] == "1" for i in split["validation"]) / 30
    assert abs(share - sum(v == "1" for v in labels) / 300) < 0.04          # stratified
    assert results["eval"]["num_samples"] == 30 and results["train"]["num_samples"] == 270
    assert results["validation_split"]["validation_rows"] == 30
    assert "held out of reviews.csv" in (out / "report.html").read_text()


def test_resume_and_evaluate_see_the_same_rows(held_out_run, tmp_path):
    from tuneloop.cli.main import main

    data, out, results = held_out_run
    before = json.loads((out / "split.json").read_text())
    resumed = tuneloop.train(output_dir=str(out), resume="latest", quiet=True)
    assert json.loads((out / "split.json").read_text()) == before
    assert resumed["eval"]["num_samples"] == 30
    target = tmp_path / "eval.json"
    assert main(["evaluate", "--model", str(out / "model"), "--output", str(target), "--quiet"]) == 0
    evaluated = json.loads(target.read_text())["eval"]
    assert evaluated["num_samples"] == 30
    assert evaluated["accuracy"] == pytest.approx(resumed["eval"]["accuracy"], abs=1e-6)


def test_a_changed_file_is_refused_on_resume(tiny_model, tmp_path):
    data = write_reviews(tmp_path / "reviews.csv", n=100)
    out = tmp_path / "run"
    options = dict(train_file=str(data), output_dir=str(out), save_every="2", **fast_options(tiny_model, max_steps=2))
    tuneloop.train(TrainConfig(**options))
    with open(data, "a") as f:
        f.write("r999,the cat is good,1\n")
    with pytest.raises(tuneloop.DataError, match="changed since this run held out its validation rows"):
        tuneloop.train(output_dir=str(out), resume="latest", quiet=True)


@pytest.mark.parametrize("fraction", [0, 1, 1.5, -0.1])
def test_split_fraction_outside_0_1_is_refused(fraction):
    with pytest.raises(ConfigError, match=r"--validation-split: must be a fraction between 0 and 1"):
        TrainConfig(validation_split=fraction).validate()


def test_a_fraction_under_one_row_per_class_holds_out_one_of_each():
    """48 rows of 6 classes, 8 each: 10% would be 5 rows, too few to stratify (a class left out of validation, two
    rows of another taken from training); one row per class is held out instead. Far fewer rows than classes stay a
    plain shuffle of the fraction."""
    from tuneloop.data.split import describe

    labels = [c for c in "abcdef" for _ in range(8)]
    schema = LabelSchema("single_label_classification", list("abcdef"))
    keys, _ = stratify_keys(labels, schema, 5)
    train, validation, stratified = split_rows(keys, 0.1, seed=0)
    assert stratified and Counter(labels[i] for i in validation) == Counter("abcdef")
    assert Counter(labels[i] for i in train) == {c: 7 for c in "abcdef"}
    record = {"fraction": 0.1, "seed": 0, "stratified_by": "label", "source": "q.csv",
              "train": train.tolist(), "validation": validation.tolist()}
    assert describe(record).startswith("validation: 6 of 48 rows of q.csv held out (0.1 asked; one row per stratum, "
                                       "stratified by label")
    many = [c for c in "abcdefghijklmnopqrst" for _ in range(3)]          # 60 rows, 20 classes: 6 asked
    keys, _ = stratify_keys(many, LabelSchema("single_label_classification", sorted(set(many))), 6)
    _, validation, stratified = split_rows(keys, 0.1, seed=0)
    assert not stratified and len(validation) == 6


def test_a_split_of_data_from_python_says_how_to_give_validation_rows_there():
    """An estimator's log said `rows of train= (fit(X, y), 21 rows) held out ...; give --validation-file`."""
    from tuneloop.data.memory import as_table, fit_table
    from tuneloop.data.split import describe

    record = {"fraction": 0.1, "seed": 42, "stratified_by": "label", "source": "x", "train": [1, 2], "validation": [0]}
    fitted = fit_table((["a b", "c d", "e f"], [0, 1, 0]), "train")
    said = describe(record, fitted)
    assert said.startswith("validation: 1 of 3 rows of fit(X, y) held out (") and \
        said.endswith("; pass fit(X, y, validation=(X_val, y_val)) to use your own"), said
    frame = as_table({"text": ["a b", "c d", "e f"], "label": [0, 1, 0]}, "train")
    assert describe(record, frame).endswith(f"rows of {frame} held out (0.1, stratified by label, --split-seed 42); "
                                            "give validation= to use your own")
    assert describe(record, "train.csv").endswith("give --validation-file to use your own")
