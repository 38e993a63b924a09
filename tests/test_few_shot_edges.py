"""Edges of the few-shot path (--method auto / setfit / probe under the small-data line) that a user meets:
what the cross-validation scores, and what results.json says about it."""

from __future__ import annotations

from conftest import fast_options
from test_probe_auto import opinion_rows

import tuneloop

OPINIONS = {"good": ["good", "great"], "bad": ["bad", "awful"]}      # words the tiny model's vocabulary has


def write_opinions(path, n: int, seed: int) -> str:
    import pandas as pd

    texts, labels = opinion_rows(n, seed, OPINIONS)
    pd.DataFrame({"text": texts, "label": labels}).to_csv(path, index=False)
    return str(path)


def test_auto_scores_the_stage_with_the_end_to_end_head_the_run_trains(tiny_model, tmp_path):
    """--setfit-head end-to-end under --method auto: the run trains the loop after the stage, so the stage's folds
    must too; they scored the logistic head alone, and "cross-validated: setfit accuracy" was another model's."""
    train, dev = write_opinions(tmp_path / "train.csv", 24, 0), write_opinions(tmp_path / "dev.csv", 20, 1)
    scored = {}
    for head in ("logistic", "end-to-end"):
        result = tuneloop.train(**fast_options(tiny_model, setfit_head=head, epochs=10, small_data="auto"),
                                train_file=train, validation_file=dev, output_dir=str(tmp_path / head))
        assert result["auto"]["chosen"] == "setfit"
        scored[head] = result["auto"]["candidates"]["setfit"]
    assert scored["end-to-end"]["folds"] != scored["logistic"]["folds"]
    assert scored["end-to-end"]["accuracy"] > scored["logistic"]["accuracy"]    # 10 epochs of the loop learn it


def test_a_stage_over_the_budget_is_kept_without_spending_the_budget_on_fine_tuning(tiny_model, tmp_path,
                                                                                     monkeypatch):
    """The stage not compared (over --auto-budget) is kept whatever fine-tuning scores: its folds used to run
    anyway, up to the whole budget, for a score that could change nothing."""
    from tuneloop.training import choose

    estimates = {"setfit": 1e6, "finetune": 0.0}       # the stage past any budget, fine-tuning free
    monkeypatch.setattr(choose, "estimated_seconds", lambda method, *a: estimates[method])
    monkeypatch.setattr(choose, "finetune_fold", lambda *a: (_ for _ in ()).throw(AssertionError("trained")))
    train, dev = write_opinions(tmp_path / "train.csv", 24, 0), write_opinions(tmp_path / "dev.csv", 20, 1)
    result = tuneloop.train(**fast_options(tiny_model, small_data="auto"), train_file=train, validation_file=dev,
                            output_dir=str(tmp_path / "run"))
    auto = result["auto"]
    assert auto["chosen"] == "setfit" and auto["candidates"]["setfit"]["skipped"] == "over --auto-budget"
    assert auto["candidates"]["finetune"] == {"skipped": "setfit was not compared, so nothing could replace it"}
    assert result["setfit"]["method"] == "setfit"


def test_windows_of_one_text_are_held_out_together(tiny_model, tmp_path, monkeypatch):
    """--windows cuts a long text into rows; the cross-validation held out some windows of a text and trained on the
    others, so its held-out scores (and the probe's out-of-fold rule) counted rows the fold had as good as seen."""
    import numpy as np

    from tuneloop.training import choose, head_fit

    seen = []
    scored = choose.head_correct

    def spy(features, with_bias, objective, labels, train, held, seed):
        seen.append((train, held))
        return scored(features, with_bias, objective, labels, train, held, seed)

    monkeypatch.setattr(choose, "head_correct", spy)
    captured = {}
    texts_of = choose.contrastive.texts_of
    monkeypatch.setattr(choose.contrastive, "texts_of", lambda rows: captured.setdefault("docs", texts_of(rows)))
    train, dev = write_opinions(tmp_path / "train.csv", 24, 0), write_opinions(tmp_path / "dev.csv", 20, 1)
    result = tuneloop.train(**fast_options(tiny_model, small_data="auto", max_length=6, windows=2),
                            train_file=train, validation_file=dev, output_dir=str(tmp_path / "run"))
    docs = np.asarray(captured["docs"])
    assert len(docs) > len(set(docs.tolist())) == 24           # windows: more rows than texts
    assert seen and result["auto"]["candidates"]["probe"]["accuracy"] is not None
    for train_rows, held in seen:
        assert not set(docs[train_rows]) & set(docs[held])

    labels = np.repeat(np.arange(2), 30)                       # the probe's out-of-fold logits: the same folds
    groups = np.repeat(np.arange(20), 3)
    for train_rows, held in head_fit.folds_of(labels, 7, groups):
        assert not set(groups[train_rows]) & set(groups[held])
    few = np.repeat(np.arange(2), 6)                           # 6 rows, 2 texts of 3 windows, per class
    assert head_fit.fold_count(few) == 3 and head_fit.fold_count(few, np.repeat(np.arange(4), 3)) == 2


def test_sampler_balanced_is_cross_validated_as_the_run_trains(tiny_model, tmp_path, monkeypatch):
    """--sampler balanced under --method auto: the run's fitted head weighs the classes as balanced and its loop
    draws rows by inverse class frequency; the candidates' folds did neither (an unweighted head, a plain shuffle)."""
    import pandas as pd

    from tuneloop.training import choose

    heads, drawn = [], []
    fit = choose.fit_head
    monkeypatch.setattr(choose, "fit_head", lambda f, y, objective, *a: heads.append(objective.weights) or
                        fit(f, y, objective, *a))

    class Step(choose.AccelerateStep):
        def __call__(self, batch, *a, **k):
            drawn.extend(batch.labels.tolist())
            return super().__call__(batch, *a, **k)

    monkeypatch.setattr(choose, "AccelerateStep", Step)
    rows = pd.read_csv(write_opinions(tmp_path / "all.csv", 36, 0))
    skewed = pd.concat([rows[rows.label == "good"], rows[rows.label == "bad"].head(6)])   # 18 good, 6 bad
    skewed.to_csv(tmp_path / "train.csv", index=False)
    result = tuneloop.train(**fast_options(tiny_model, small_data="auto", sampler="balanced"),
                            train_file=str(tmp_path / "train.csv"),
                            validation_file=write_opinions(tmp_path / "dev.csv", 20, 1),
                            output_dir=str(tmp_path / "run"))
    assert "finetune" in result["auto"]["candidates"] and drawn
    assert heads and all(w is not None for w in heads)                  # every fold's head: balanced weights
    share = min(sum(y == c for y in drawn) for c in set(drawn)) / len(drawn)
    assert share > 0.35                                  # a plain shuffle draws 6 of 24: 0.25


def test_small_data_on_with_a_fitted_head_method_is_said_not_silently_dropped(tiny_model, tmp_path, capfd):
    """--small-data on with --method setfit (or probe) is not applied (their stage keeps its own recipe); it was
    dropped without a word and config.yaml said `off` beside the user's own `on`."""
    train, dev = write_opinions(tmp_path / "train.csv", 24, 0), write_opinions(tmp_path / "dev.csv", 20, 1)
    tuneloop.train(**fast_options(tiny_model, method="probe", small_data="on"), train_file=train,
                   validation_file=dev, output_dir=str(tmp_path / "run"))
    err = capfd.readouterr().err
    assert "--small-data on does nothing with --method probe: its stage keeps its own settings" in err
    assert "small_data: 'off'" in (tmp_path / "run" / "config.yaml").read_text()


def test_fine_tuning_folds_accumulate_gradients_as_the_run(tiny_model, tmp_path, monkeypatch):
    """--gradient-accumulation-steps under --method auto: a fine-tuning fold stepped its optimizer on every batch
    (its optimizer is not the accelerator's), so it took that many times the run's steps, on smaller batches."""
    from tuneloop.training import choose

    steps = []
    build = choose.build_optimizer

    def counted(*a, **k):
        optimizer = build(*a, **k)
        steps.append(0)
        index = len(steps) - 1
        optimizer.register_step_post_hook(lambda *_: steps.__setitem__(index, steps[index] + 1))
        return optimizer

    monkeypatch.setattr(choose, "build_optimizer", counted)
    train, dev = write_opinions(tmp_path / "train.csv", 24, 0), write_opinions(tmp_path / "dev.csv", 20, 1)
    tuneloop.train(**fast_options(tiny_model, small_data="auto", gradient_accumulation_steps=4), train_file=train,
                   validation_file=dev, output_dir=str(tmp_path / "run"))
    # a fold trains on 16 rows: 2 batches of 8 an epoch, one optimizer step an epoch (the run's count), 3 epochs
    assert steps and all(n == 3 for n in steps), steps


def test_the_budgets_timing_is_the_fastest_of_three_passes(monkeypatch):
    """One timed pass, slowed by another job on the cores, put a 2.5 s stage at 1,068 s and skipped it."""
    import time

    import torch

    from tuneloop.training import choose

    calls = []

    class Model:
        def train(self):
            pass

        def eval(self):
            pass

        def zero_grad(self, set_to_none=True):
            pass

    def embed(rows):
        calls.append(1)
        if len(calls) == 2:                     # the first timed pass: the machine busy elsewhere
            time.sleep(0.3)
        return (torch.ones(2, requires_grad=True),)

    monkeypatch.setattr(choose.contrastive, "rows_of", lambda inputs, index: list(index))
    per_row = choose.seconds_a_training_row(Model(), embed, list(range(4)), 4)
    assert len(calls) == 1 + choose.TIMINGS and per_row < 0.3 / 4 / 10, per_row
