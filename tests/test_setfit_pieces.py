"""The contrastive stage's pair step in pieces (training/pair_pieces.py): a step whose rows' attention matrices
would pass the memory budget on a CPU runs as several forward/backward passes, and trains the same weights."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from conftest import fast_options, keyword_pair

import tuneloop
from tuneloop.training import pair_pieces

MINILM = SimpleNamespace(num_hidden_layers=6, num_attention_heads=12)


def test_a_step_runs_whole_unless_its_attention_would_pass_the_budget_on_a_cpu():
    assert pair_pieces.pairs_a_piece(MINILM, 256, 16, "cpu", 1) == 16          # the benchmark sets: as before
    assert pair_pieces.pairs_a_piece(MINILM, 512, 16, "cpu", 1) == 4           # 8 rows of 512 tokens a pass
    assert pair_pieces.pairs_a_piece(MINILM, 4096, 16, "cpu", 1) == 1          # never fewer than one pair
    assert pair_pieces.pairs_a_piece(MINILM, 512, 16, "cuda", 1) == 16         # SDPA keeps no matrices there
    assert pair_pieces.pairs_a_piece(MINILM, 512, 16, "cpu", 2) == 16          # each process has its share
    assert pair_pieces.pairs_a_piece(SimpleNamespace(), 512, 16, "cpu", 1) == 2    # unknown: 12 x 12, as BERT-base


def pairs(n: int, seed: int):
    rng = random.Random(seed)
    rows = [keyword_pair(rng) for _ in range(n)]
    return [(a, b) for _, a, b in rows], ["same" if label else "other" for label, _, _ in rows]


def stage(tiny_model, folder, **extra):
    (train, y), (dev, dev_y) = pairs(24, 0), pairs(16, 1)
    import pandas as pd

    def frame(items, labels):
        return pd.DataFrame({"sentence1": [a for a, _ in items], "sentence2": [b for _, b in items], "label": labels})

    options = fast_options(tiny_model, method="setfit", setfit_iterations=4, setfit_lr=3e-3, setfit_epochs=1,
                           dropout=0.0, **extra)        # no dropout: nothing random but the pairs, drawn the same
    result = tuneloop.train(**options, train=frame(train, y), validation=frame(dev, dev_y), output_dir=str(folder))
    weights = {k: v.detach().clone() for k, v in tuneloop.load(str(folder)).model.state_dict().items()}
    return result["setfit"], weights


def test_a_step_in_pieces_trains_the_weights_of_the_whole_step(tiny_model, tmp_path, monkeypatch):
    whole, before = stage(tiny_model, tmp_path / "whole")
    monkeypatch.setattr(pair_pieces, "ATTENTION_BUDGET", 1)             # every pair its own pass
    pieced, after = stage(tiny_model, tmp_path / "pieced")
    assert whole["pieces"] == 1 and pieced["pieces"] == 16             # 16 pairs a step, one a pass
    assert pieced["steps"] == whole["steps"] and pieced["loss_first"] == pytest.approx(whole["loss_first"], rel=1e-4)
    assert pieced["loss_last"] == pytest.approx(whole["loss_last"], rel=1e-3, abs=1e-5)
    # an attention key's bias has no gradient (it adds the same to every score of a query): Adam turns float noise
    # of ~1e-10 there into steps of the learning rate's size in either run, so those are not compared
    compared = [k for k in before if not k.endswith("attention.self.key.bias")]
    assert len(compared) > 20
    moved = max(float((before[k].float() - after[k].float()).abs().max()) for k in compared)
    assert moved < 1e-5, f"the pieced step trained other weights (largest difference {moved})"
    assert whole["loss_last"] < whole["loss_first"]                   # the stage trained


def test_the_card_says_when_a_step_ran_in_pieces():
    from tuneloop.report.fmt import setfit_stage_rows

    stage = {"method": "setfit", "pairs": 1920, "steps": 120, "epochs": 1, "batch_size": 16, "lr": 2e-5,
             "pooling": "mean", "head": "logistic", "iterations": None, "pair_limit": 16384}
    assert "memory" not in dict(setfit_stage_rows({**stage, "pieces": 1}))["contrastive steps"]
    assert "memory" not in dict(setfit_stage_rows(stage))["contrastive steps"]      # results from before
    steps = dict(setfit_stage_rows({**stage, "pieces": 4}))["contrastive steps"]
    assert steps.endswith("16 pairs a step; a step in up to 4 forward/backward passes to fit in memory)")
