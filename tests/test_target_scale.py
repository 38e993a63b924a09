"""Regression targets far from unit scale are learned standardised (model/target_scale.py): the hooked head with
the scaled loss takes exactly the steps of plain training on standardised targets, the saved folder gives the
targets' own units to a plain transformers load, and a run starting from such a folder unfolds its head."""

from __future__ import annotations

import copy
import csv
import json
import random

import numpy as np
import pytest
import torch

import tuneloop
from tuneloop import TrainConfig
from tuneloop.data.batch import Batch
from tuneloop.model import target_scale
from tuneloop.objective import Regression
from tuneloop.training.step import AccelerateStep

from conftest import build_tiny_model, fast_options, sentence


def test_targets_near_unit_scale_stay_as_they_are_and_far_ones_are_standardised():
    rng = np.random.default_rng(0)
    assert target_scale.decide(rng.uniform(0, 5, 500)) is None             # STS-B's 0-5 scores: unchanged
    assert target_scale.decide(np.full(20, 36_000.0)) is None               # constant: nothing to scale by
    prices = rng.normal(36_000, 4_000, 500)
    scale = target_scale.decide(prices)
    assert scale.mean == pytest.approx(prices.mean()) and scale.scale == pytest.approx(prices.std())
    assert target_scale.decide(rng.normal(0, 0.001, 500)).scale == pytest.approx(0.001, rel=0.1)   # tiny rates
    assert target_scale.decide(rng.normal(50, 1, 500)) is not None          # a mean beyond ±10
    no_bias = target_scale.decide(prices, with_bias=False)
    assert no_bias.mean == 0 and no_bias.scale == pytest.approx(np.sqrt(np.mean(prices ** 2)))
    assert "root mean square" in target_scale.describe(no_bias)
    centred = target_scale.decide(np.array([-100.0, 100.0] * 10))             # a mean of exactly 0, with a bias
    assert target_scale.describe(centred) == "mean 0.0, scale 100.0"


def _regression_model(folder):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(1)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1, problem_type="regression",
                                                               ignore_mismatched_sizes=True)
    return model, AutoTokenizer.from_pretrained(folder)


def test_the_hooked_head_takes_the_steps_of_training_on_standardised_targets(tmp_path):
    """Same init, same batches, AdamW with clipping through the run's step: (hook + scaled loss on y) against (plain
    model, plain loss on z = (y − mean) / scale). Every weight agrees after the steps, the outputs are y = z·scale
    + mean, and the folded head alone gives them."""
    from accelerate import Accelerator

    model, tokenizer = _regression_model(build_tiny_model(tmp_path / "tiny"))
    plain = copy.deepcopy(model)
    rng = random.Random(0)
    texts = [sentence(rng) for _ in range(16)]
    y = torch.tensor([30_000 + 9_000 * rng.random() for _ in texts])
    scale = target_scale.decide(y.numpy())
    target_scale.attach(model, scale)
    steps = []
    for m, objective in ((model, Regression(1, None, scale.scale)), (plain, Regression())):
        optimizer = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
        steps.append(AccelerateStep(Accelerator(cpu=True), m, optimizer, objective, max_grad_norm=1.0))
    plain.train()
    model.train()
    for s in range(6):
        rows = slice(s % 2 * 8, s % 2 * 8 + 8)
        inputs = dict(tokenizer(texts[rows], padding=True, return_tensors="pt"))
        steps[0](Batch(inputs, y[rows]))
        steps[1](Batch(inputs, (y[rows] - scale.mean) / scale.scale))
    for (name, a), b in zip(model.named_parameters(), plain.parameters(), strict=True):
        if name.endswith("key.bias"):    # a key's bias cancels in the softmax: its gradient is rounding, which
            continue                     # AdamW normalises into steps of lr whatever its size (in both runs)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    model.eval()
    plain.eval()
    inputs = dict(tokenizer(texts, padding=True, return_tensors="pt"))
    with torch.no_grad():
        hooked, z = model(**inputs).logits, plain(**inputs).logits
        torch.testing.assert_close(hooked, z * scale.scale + scale.mean, rtol=1e-5, atol=1e-2)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        with target_scale.folded(model):
            assert model.config.tuneloop_target_scale == scale.to_dict()
            torch.testing.assert_close(model(**inputs).logits, hooked, rtol=1e-5, atol=1e-2)     # no hook: folded
            head = target_scale.head_of(model)
            assert not head._forward_hooks
        for k, v in model.state_dict().items():                 # the exact weights back, and the hook
            assert torch.equal(v, before[k]), k
        assert not hasattr(model.config, "tuneloop_target_scale")
        torch.testing.assert_close(model(**inputs).logits, hooked)


def _write_prices(path, n, rng):
    kinds = {"alpha": 1, "beta": 3, "gamma": 5}
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["text", "price"])
        for _ in range(n):
            kind = rng.choice(list(kinds))
            words = sentence(rng).split()
            words.insert(1, kind)
            out.writerow([" ".join(words), f"{20_000 + 8_000 * kinds[kind] + rng.uniform(-500, 500):.2f}"])
    return path


def test_a_run_on_prices_records_its_scale_and_saves_a_model_in_their_units(tiny_model, tmp_path):
    """results.json says the scale; the saved folder, loaded by plain transformers, gives what tuneloop.load
    predicts and what the run evaluated (its mse); a run starting from that folder sees the same function."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    rng = random.Random(0)
    train, dev = _write_prices(tmp_path / "t.csv", 120, rng), _write_prices(tmp_path / "d.csv", 30, rng)
    out = tmp_path / "run"
    results = tuneloop.train(TrainConfig(train_file=str(train), validation_file=str(dev), output_dir=str(out),
                                         label_column="price", **fast_options(tiny_model, epochs=8)))
    scale = results["target_scale"]
    assert 30_000 < scale["mean"] < 50_000 and 5_000 < scale["scale"] < 20_000
    # learned: 0.999, MSE 3.3e5; unscaled (decide → None) the same run ends at Pearson −0.17, MSE 1.8e9
    assert results["eval"]["pearson"] > 0.9 and results["eval"]["mse"] < 1e7
    with open(train, newline="") as f:
        mean = np.mean([float(r["price"]) for r in csv.DictReader(f)])
    with open(dev, newline="") as f:
        constant = np.mean([(float(r["price"]) - mean) ** 2 for r in csv.DictReader(f)])
    assert results["mean_predictor"]["value"] == pytest.approx(mean, rel=1e-6)     # the constant to beat, beaten
    assert results["mean_predictor"]["mse"] == pytest.approx(constant, rel=1e-5)
    assert results["mean_predictor"]["model_mse"] == pytest.approx(results["eval"]["mse"], rel=1e-4)
    assert results["mean_predictor"]["model_mse"] < constant
    assert not any("above that of always answering" in w for w in results.get("warnings", []))
    folder = out / "model"
    assert json.loads((folder / "config.json").read_text())["tuneloop_target_scale"] == scale
    assert "learned them standardised (mean" in (folder / "README.md").read_text()          # the model card says so
    texts = [r["text"] for r in csv.DictReader(open(dev))]
    gold = np.array([float(r["price"]) for r in csv.DictReader(open(dev))])
    plain = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        raw = plain(**tok(texts, padding=True, return_tensors="pt")).logits.view(-1).numpy()
    predicted = np.array([r["score"] for r in tuneloop.load(folder).predict(texts)])
    np.testing.assert_allclose(predicted, raw, rtol=1e-4)
    assert np.mean((raw - gold) ** 2) == pytest.approx(results["eval"]["mse"], rel=1e-3)

    from tuneloop.model.loading import load_model, model_config

    from tuneloop.analysis.inspect import describe_failures

    said = describe_failures(out).splitlines()
    assert said[0].endswith("errors.csv: 30 validation rows, largest error first")
    assert any(line.endswith("label_issues.csv: not written: a regression run has no classes to doubt a label "
                             "against") for line in said)

    again, new = load_model(str(folder), model_config(str(folder), tuneloop.load(folder).label_schema, None, 0.0, 0),
                            "eager", loading_info=True)
    target_scale.unfold_saved(again, new)                          # as a run starting from the folder does
    target_scale.attach(again, target_scale.TargetScale(**scale))
    assert not hasattr(again.config, "tuneloop_target_scale")
    with torch.no_grad():
        np.testing.assert_allclose(again.eval()(**tok(texts, padding=True, return_tensors="pt")).logits.view(-1)
                                   .numpy(), raw, rtol=1e-4)
    fresh = copy.deepcopy(plain)
    fresh.config.tuneloop_target_scale = scale              # a student cut from the teacher: its head drawn afresh
    head = target_scale.head_of(fresh).weight.detach().clone()
    target_scale.unfold_saved(fresh, ["classifier.bias", "classifier.weight"])
    assert torch.equal(target_scale.head_of(fresh).weight, head) and not hasattr(fresh.config,
                                                                                 "tuneloop_target_scale")


def test_a_regression_model_further_off_than_the_training_mean_is_said(caplog):
    import logging
    from types import SimpleNamespace

    from tuneloop.objective import objective_for
    from tuneloop.training.reporting import mean_predictor

    gold = np.array([1.0, 2.0, 3.0, 4.0])
    data = SimpleNamespace(train=[None] * 3, train_labels=np.array([2.0, 2.5, 3.0]))         # mean 2.5
    run = SimpleNamespace(objective=objective_for("regression"), data=data)
    scattered = SimpleNamespace(outputs={"validation": (np.array([[4.0], [1.0], [4.0], [1.0]]), gold)})
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        said = mean_predictor(run, scattered, 500)
    assert said == {"value": 2.5, "mse": 1.25, "model_mse": 5.0, "split": "validation"}
    assert "mean squared error on the validation rows, 5, is above that of always answering the training " \
        "targets' mean (2.5): 1.25; its scores are further off than a constant: the texts may carry little" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        mean_predictor(run, scattered, 24)
    assert "a constant: 24 optimizer steps leave a head short of its targets, train more --epochs" in caplog.text
    caplog.clear()
    close = SimpleNamespace(outputs={"validation": (gold.reshape(-1, 1) + 0.1, gold)})
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        assert mean_predictor(run, close, 500)["model_mse"] == pytest.approx(0.01)
    assert not caplog.records
    classes = SimpleNamespace(objective=objective_for("single_label_classification"), data=data)
    assert mean_predictor(classes, close, 500) is None


def test_a_scaled_run_stopped_and_resumed_ends_with_the_uninterrupted_runs_weights(tiny_model, tmp_path):
    """The checkpoint holds the standardised head (the hook is not a weight); the resumed run hooks the same scale
    from the same rows, so its saved, folded model is the uninterrupted one's."""
    from safetensors.torch import load_file

    from tuneloop.config.resolve import resolve_config
    from tuneloop.training.loop import run_training

    rng = random.Random(0)
    train, dev = _write_prices(tmp_path / "t.csv", 64, rng), _write_prices(tmp_path / "d.csv", 16, rng)

    def config(out, **extra):
        return resolve_config(TrainConfig(train_file=str(train), validation_file=str(dev), output_dir=str(out),
                                          label_column="price", save_every="5",
                                          **fast_options(tiny_model, epochs=2), **extra))

    class Stop(Exception):
        pass

    def stop_at_7(state):
        if state.step == 7:
            raise Stop

    run_training(config(tmp_path / "whole"))
    with pytest.raises(Stop):
        run_training(config(tmp_path / "stopped"), on_step=stop_at_7)
    resumed = run_training(config(tmp_path / "stopped", resume="latest"))
    assert resumed["resumed_from"].endswith("step-0000005") and resumed["target_scale"]
    whole, again = (load_file(str(tmp_path / name / "model" / "model.safetensors")) for name in ("whole", "stopped"))
    for key in whole:
        torch.testing.assert_close(again[key], whole[key], rtol=0, atol=1e-5, msg=key)


def test_errors_csv_gives_a_regression_target_as_it_was_written():
    """Targets travel as float32: 59424.81 is 59424.80859375 there; errors.csv and inspect show 59424.81."""
    from tuneloop.analysis.wrong_rows import error_rows
    from tuneloop.data.labels import LabelSchema

    import datasets

    table = datasets.Dataset.from_dict({"id": ["a", "b"], "text_a": ["one", "two"], "text_b": [None, None]})
    rows = error_rows(table, np.array([[59000.5], [100.0]]), np.array([59424.81, 99.5], dtype=np.float32),
                      LabelSchema("regression", []))
    assert [(r["gold"], r["abs_error"]) for r in rows] == [(59424.81, 424.31), (99.5, 0.5)]


def test_validation_rows_on_which_a_correlation_says_nothing_are_said(tiny_model, tmp_path, capsys):
    rng = random.Random(1)
    train = _write_prices(tmp_path / "t.csv", 24, rng)
    two = _write_prices(tmp_path / "two.csv", 2, rng)
    (tmp_path / "same.csv").write_text("text,price\nalpha one,5\nbeta two,5\ngamma three,5\n")
    (tmp_path / "fine.csv").write_text("text,price\nalpha one,5\nbeta two,6\ngamma three,7\n")
    said = {}
    for name in ("two", "same", "fine"):
        capsys.readouterr()
        tuneloop.train(train=str(train), validation=str(tmp_path / f"{name}.csv"), label_column="price",
                       output_dir=str(tmp_path / name), **fast_options(tiny_model, epochs=1))
        said[name] = [line for line in capsys.readouterr().err.splitlines() if "Pearson and Spearman" in line]
    assert said["two"] == [f"{two} has 2 rows: Pearson and Spearman on 2 are +1, -1 or 0 whatever the model "
                           "predicts; read its mse, or give a validation file with more rows and varied targets "
                           "(at least 20 rows)"]
    assert len(said["same"]) == 1 and "gives every row the same target (5): Pearson and Spearman are undefined " \
        "(reported as 0)" in said["same"][0]
    assert said["fine"] == []
    with tuneloop.load(str(tmp_path / "fine")) as model:                 # a regression has no decision rule
        assert model.evaluate()["decision_rule"] == "none (regression: the score as predicted)"
