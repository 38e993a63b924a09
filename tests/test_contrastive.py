"""--method setfit (training/contrastive.py): pairs as SetFit makes them, the stage trains the body, and the saved
model's probabilities are the logistic regression's on the training rows' embeddings; the folder is a plain
transformers model (load, predict, export, pipeline); multi-label, a decoder, end-to-end, and what it refuses."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from conftest import fast_options, keyword_pair, sentence
from families import family_folder

import tuneloop
from tuneloop.exceptions import ConfigError, DataError, Interrupted
from tuneloop.training import contrastive
from tuneloop.training.contrastive import make_pairs

SETFIT = {"method": "setfit", "setfit_iterations": 8, "setfit_lr": 3e-3, "setfit_batch_size": 16, "setfit_epochs": 1}


def pair_rows(n: int, seed: int):
    rng = random.Random(seed)
    rows = [keyword_pair(rng) for _ in range(n)]
    return [(a, b) for _, a, b in rows], ["same" if label else "other" for label, _, _ in rows]


def head_inputs_and_probabilities(clf, items):
    """What the saved model's final Linear receives for each item (one row per forward pass: no padding), and the
    model's raw probabilities."""
    model = clf.model
    head = model.score if hasattr(model, "score") else model.classifier
    caught = []
    handle = head.register_forward_pre_hook(lambda module, args: caught.append(args[0][0].detach()))
    try:
        probabilities = np.concatenate([clf.predict_proba([item], raw=True) for item in items])
    finally:
        handle.remove()
    features = torch.stack([x[-1] if x.dim() == 2 else x for x in caught]).float().numpy()   # decoders: last token
    return features, probabilities, head.bias is not None


def lr_probabilities(features, y, intercept: bool):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=1000, fit_intercept=intercept).fit(features, y).predict_proba(features)


def write_pairs(path, rows):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("sentence1", "sentence2", "label")] +
                                [(a, b, y) for (a, b), y in zip(*rows, strict=True)])
    return str(path)


@pytest.fixture(scope="module")
def setfit_run(tiny_model, tmp_path_factory):
    train, dev = pair_rows(32, 0), pair_rows(40, 1)
    folder = tmp_path_factory.mktemp("setfit")
    out = folder / "run"              # files, not tables from Python: the export's gate reads the validation file
    options = fast_options(tiny_model, **{**SETFIT, "setfit_epochs": None})      # the default passes
    result = tuneloop.train(**options, train_file=write_pairs(folder / "train.csv", train),
                            validation_file=write_pairs(folder / "dev.csv", dev), output_dir=str(out))
    return result, train, dev, out


def test_pairs_are_setfits():
    """Single-label: the setfit package's "oversampling" — every pair of rows (a row with itself too), the fewer kind
    cycled up to the larger count — capped at iterations × rows of each kind when asked, else at PAIR_LIMIT."""
    labels = np.array([0, 0, 0, 1, 1, 2])          # 21 pairs with a row itself: 10 of one class, 11 of two
    assert len(make_pairs(labels, iterations=None, seed=0)[0]) == 2 * 11               # the package's: all
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(contrastive, "PAIR_LIMIT", 4)
        assert len(make_pairs(labels, iterations=None, seed=0)[0]) == 2 * 4
    first, second, target = make_pairs(labels, iterations=3, seed=0)
    assert len(first) == 2 * 11 and target.mean() == 0.5               # as many same-class as other-class pairs
    assert np.array_equal(target, (labels[first] == labels[second]).astype(np.float32))
    pairs = {tuple(sorted(p)) for p in zip(first.tolist(), second.tolist(), strict=True)}
    assert len(pairs) == 21 and (0, 0) in pairs                         # every pair of rows, each once at least
    assert len(make_pairs(labels, iterations=1, seed=0)[0]) == 2 * 6   # capped: iterations × rows of each kind
    again = make_pairs(labels, iterations=3, seed=0)
    assert all(np.array_equal(x, y) for x, y in zip((first, second, target), again, strict=True))   # seeded
    assert not np.array_equal(make_pairs(labels, iterations=3, seed=1)[1], second)

    multi = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]])
    assert len(make_pairs(multi, iterations=None, seed=0)[0]) == 2 * 4 * contrastive.ROUNDS   # rounds by default
    first, second, target = make_pairs(multi, iterations=4, seed=0)
    a, b = multi[first].astype(bool), multi[second].astype(bool)
    assert np.allclose(target, (a & b).sum(1) / (a | b).sum(1))        # Jaccard of the label sets
    assert 0 < target.mean() < 1 and len(set(target.round(3))) >= 3


def test_the_card_says_which_pairs_were_drawn():
    from tuneloop.report.fmt import setfit_stage_rows

    stage = {"method": "setfit", "pairs": 7680, "steps": 480, "epochs": 1, "batch_size": 16, "lr": 2e-5,
             "pooling": "mean", "head": "logistic"}
    rows = dict(setfit_stage_rows({**stage, "iterations": None, "pair_limit": contrastive.PAIR_LIMIT}))
    assert rows["pairs"].startswith("7680 (every pair of training rows, as the setfit package")
    assert rows["pairs"].endswith(f"at most {contrastive.PAIR_LIMIT:,} of each kind)")
    rows = dict(setfit_stage_rows({**stage, "iterations": 20, "pair_limit": None}))
    assert "(at most 20 × the training rows of each kind" in rows["pairs"]


def test_the_stage_makes_at_least_100_steps_unless_told_its_passes():
    """By default the stage passes over the pairs until it has taken MIN_STEPS steps: a binary set of 8 rows per
    class (144 pairs, 9 steps of 16) makes 12 passes; 6 classes of 8 (1,920 pairs, 120 steps) one, as the package;
    --setfit-epochs is kept as given."""
    from tuneloop.config.options import TrainConfig

    binary, six = np.repeat([0, 1], 8), np.repeat(np.arange(6), 8)
    config = TrainConfig(method="setfit")
    assert len(contrastive.steps_a_pass(len(make_pairs(binary, None, 42)[0]), 16, 1)) == 9
    assert contrastive.planned_passes(config, binary, 1) == 12 and contrastive.planned_passes(config, six, 1) == 1
    assert contrastive.planned_passes(config.replace(setfit_epochs=2), binary, 1) == 2
    assert contrastive.planned_passes(config.replace(setfit_epochs=1), binary, 1) == 1
    assert contrastive.steps_a_pass(33, 16, 2) == [0, 16]       # a last step of one pair: not for two processes


def test_the_body_optimizer_leaves_the_head_out():
    from tuneloop.model.optim import build_optimizer

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
    head = model[2]
    optimizer = build_optimizer(model, 1e-3, 0.01, "cpu", exclude=head.parameters())
    decay, no_decay = (group["params"] for group in optimizer.param_groups)
    assert [id(p) for p in decay] == [id(model[0].weight)]              # no decay on biases and LayerNorm
    assert {id(p) for p in no_decay} == {id(model[0].bias), id(model[1].weight), id(model[1].bias)}


def test_setfit_trains_the_body_then_fits_the_head(setfit_run):
    result, _, _, out = setfit_run
    stage = result["setfit"]
    assert stage["pairs"] == 2 * 8 * 32 and stage["head"] == "logistic"
    assert stage["epochs"] == 4 and stage["steps"] == 4 * 32            # 32 steps a pass: 4 passes make 100 steps
    assert stage["min_steps"] == 100 and "epochs_from" not in stage     # the floor once (no text restating it)
    assert stage["loss_last"] < stage["loss_first"] / 3                # the pairs were learned
    assert stage["head_train_accuracy"] >= 0.9
    assert result["train"]["steps"] == 0                               # the logistic head: no loop steps
    assert result["eval"]["accuracy"] >= 0.8                          # the keyword task, from 32 rows
    assert json.loads((out / "results.json").read_text())["setfit"] == stage
    assert (out / "config.yaml").read_text().count("method: setfit") == 1


def test_the_card_says_why_the_passes_only_for_the_step_floor():
    from tuneloop.report.fmt import setfit_stage_rows

    stage = {"method": "setfit", "head": "logistic", "pairs": 144, "iterations": None, "pair_limit": 16384,
             "steps": 108, "epochs": 12, "batch_size": 16, "lr": 2e-5, "pooling": "mean"}
    floor = dict(setfit_stage_rows({**stage, "min_steps": 100}))["contrastive steps"]
    given = dict(setfit_stage_rows({**stage, "min_steps": None}))["contrastive steps"]
    assert floor == "108 (12 pass(es) over the pairs to make at least 100 steps, 16 pairs a step)"
    assert given == "108 (12 pass(es) over the pairs, 16 pairs a step)"      # --setfit-epochs 12: the user's number


def test_the_model_card_describes_the_stage_not_an_empty_loop(setfit_run):
    """The logistic head trains no loop steps: the card's hyperparameters and time are the stage's, with no
    "0 optimizer steps" or loop learning rate beside them."""
    result, _, _, out = setfit_run
    stage, card = result["setfit"], (out / "model" / "README.md").read_text()
    assert f"| pairs | {stage['pairs']} (at most 8 × the training rows of each kind, same class and other class) |" \
        in card
    assert f"| contrastive steps | {stage['steps']} (4 pass(es) over the pairs to make at least 100 steps, 16 pairs " \
        "a step) |" in card
    assert "| learning rate (contrastive stage) | 0.003 |" in card and "| seed |" in card
    assert "optimizer steps" not in card and "learning rate (AdamW" not in card and "| warmup |" not in card
    assert f"{stage['pairs']} pairs in {stage['steps']} steps" in card and "samples/s" not in card


def test_the_closing_summary_says_the_stage_not_an_empty_loop(setfit_run, capsys):
    from tuneloop.cli.commands import print_summary

    result = setfit_run[0]
    stage = result["setfit"]
    print_summary(result)
    said = capsys.readouterr().out
    assert f"train: SetFit, {stage['steps']} contrastive steps over {stage['pairs']} pairs, then a logistic-regression " \
        f"head, {stage['seconds']:.1f}s" in said
    assert "0 steps" not in said and "samples/s" not in said


def test_the_report_shows_the_stage_not_an_empty_loop(setfit_run):
    """report.html of a logistic-head run: the stage in the summary and its own table; no "0 steps", no training
    statistics of a loop that never ran, no curves said to be "not logged yet", no raw JSON of the stage."""
    from tuneloop.report.page import write_report

    result, _, _, out = setfit_run
    stage, page = result["setfit"], write_report(out).read_text()
    assert f"{stage['pairs']} pairs in {stage['steps']} steps, loss {stage['loss_first']:.4f}" in page
    assert "<h2>Contrastive stage</h2>" in page and "<td>pairs</td>" in page
    assert "the training loop ran no step" in page and "the training loop trained no step" in page
    assert "0 steps, 0 epochs" not in page and "Training statistics" not in page and "samples/s" not in page
    assert "not logged yet" not in page and "no training loss logged" not in page and '"pairs":' not in page


def test_ctrl_c_in_the_stage_ends_it_after_the_step_with_nothing_to_resume(tiny_model, tmp_path, monkeypatch):
    """SIGINT during the pair steps (the run's handler notes it): the stage stops after that step with Interrupted
    (it was ignored until the stage ended), no checkpoint and no model written, and the caller's handler is back."""
    import os
    import signal

    from tuneloop.training import contrastive

    calls, embed = [], contrastive.Embedder.__call__

    def embed_then_signal(self, rows):
        calls.append(len(rows))
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return embed(self, rows)

    monkeypatch.setattr(contrastive.Embedder, "__call__", embed_then_signal)
    handler, out = signal.getsignal(signal.SIGINT), tmp_path / "run"
    train, dev = pair_rows(32, 0), pair_rows(8, 1)
    with pytest.raises(Interrupted, match=r"after 2 of 32 pair steps.*--overwrite") as stopped:
        tuneloop.train(**fast_options(tiny_model, **SETFIT), train=train, validation=dev,
                       output_dir=str(out))
    assert stopped.value.signal_number == signal.SIGINT and len(calls) == 2
    assert signal.getsignal(signal.SIGINT) is handler
    assert not (out / "checkpoints").exists() and not (out / "model").exists()
    said = (out / "train.log").read_text()                 # the first stop's line: it said "to save a checkpoint"
    assert "stopping after this pair step (the SetFit stage saves no checkpoint" in said, said
    assert "to save a checkpoint" not in said
    with pytest.raises(tuneloop.TuneloopError, match=r"--method setfit with its logistic head saves none .*"
                                                     r"again with --overwrite"):   # was: "save them with --save-every"
        tuneloop.train(**fast_options(tiny_model, **SETFIT), train=train, validation=dev, output_dir=str(out),
                       resume="latest")


def test_the_model_is_the_logistic_regression_and_a_plain_model(setfit_run, tmp_path):
    from transformers import pipeline

    from tuneloop.cli.main import main

    result, (texts, labels), (dev_texts, _), out = setfit_run
    clf = tuneloop.load(out)
    features, probabilities, intercept = head_inputs_and_probabilities(clf, texts)
    y = np.array([clf.labels.index(label) for label in labels])
    assert np.abs(probabilities - lr_probabilities(features, y, intercept)).max() <= 1e-4
    assert result["setfit"]["head_train_accuracy"] == pytest.approx(np.mean(probabilities.argmax(1) == y), abs=1e-6)

    predicted = clf.predict(dev_texts[:4])
    assert [p["label"] for p in predicted] == [clf.labels[i] for i in clf.predict_proba(dev_texts[:4]).argmax(1)]
    plain = pipeline("text-classification", model=str(out / "model"), top_k=None)   # no tuneloop in the way
    scores = plain({"text": texts[0][0], "text_pair": texts[0][1]})
    assert {s["label"]: s["score"] for s in scores}[clf.labels[1]] == pytest.approx(probabilities[0, 1], abs=1e-4)
    target = tmp_path / "onnx"
    assert main(["export", str(out), "--output", str(target), "--quiet"]) == 0
    report = json.loads((target / "export_report.json").read_text())
    assert report["gate"]["verdict"] == "pass" and report["gate"]["max_logit_difference"] < 1e-4


def test_multi_label_heads_are_one_regression_per_label(tiny_model, tmp_path):
    rng = random.Random(0)
    tags = [sorted(rng.sample(["alpha", "beta", "gamma"], rng.randint(1, 2))) for _ in range(30)]
    texts = [" ".join(rng.sample(sentence(rng, 4).split() + t, 4 + len(t))) for t in tags]
    rows = [{"text": text, "labels": t} for text, t in zip(texts, tags, strict=True)]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = tuneloop.train(**fast_options(tiny_model, **SETFIT), train_file=str(path), validation_file=str(path),
                            output_dir=str(tmp_path / "run"))
    assert result["problem_type"] == "multi_label_classification" and result["setfit"]["steps"] == 30
    assert result["setfit"]["epochs"] == 1 and result["setfit"]["min_steps"] is None    # --setfit-epochs 1: no floor
    clf = tuneloop.load(tmp_path / "run")
    features, probabilities, intercept = head_inputs_and_probabilities(clf, texts)
    for j, name in enumerate(clf.labels):
        y = np.array([name in t for t in tags], dtype=int)
        assert np.abs(probabilities[:, j] - lr_probabilities(features, y, intercept)[:, 1]).max() <= 1e-4


def test_regression_and_bad_values_are_refused_before_anything_is_written(tiny_model, tmp_path):
    texts = [sentence(random.Random(i)) for i in range(20)]
    with pytest.raises(ConfigError) as caught:
        tuneloop.train(**fast_options(tiny_model, **SETFIT), train=(texts, [float(i) for i in range(20)]),
                       validation=(texts, [float(i) for i in range(20)]), problem_type="regression",
                       output_dir=str(tmp_path / "run"))
    assert str(caught.value).startswith("--method setfit needs class labels") and "\n" not in str(caught.value)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="--setfit-iterations: must be at least 1"):
        tuneloop.train(**fast_options(tiny_model, **{**SETFIT, "setfit_iterations": 0}), train=(texts, ["a"] * 20),
                       output_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match="--setfit-epochs: must be at least 1, got 0"):
        tuneloop.train(**fast_options(tiny_model, **{**SETFIT, "setfit_epochs": 0}), train=(texts, ["a"] * 20),
                       output_dir=str(tmp_path / "run"))
    same = [["a", "b"]] * 20                           # two labels, one label set: nothing to learn (data/labels)
    with pytest.raises(DataError, match="every row carries every label"):
        tuneloop.train(**fast_options(tiny_model, **SETFIT), train=(texts, same), validation=(texts, same),
                       output_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_end_to_end_head_then_runs_the_loop(tiny_model, tmp_path):
    train, dev = pair_rows(32, 0), pair_rows(20, 1)
    steps = []
    result = tuneloop.train(**fast_options(tiny_model, **SETFIT, setfit_head="end-to-end", epochs=1), train=train,
                            validation=dev, output_dir=str(tmp_path / "run"), on_step=lambda s: steps.append(s.step))
    assert result["setfit"]["head"] == "end-to-end" and result["setfit"]["steps"] == 32
    assert result["train"]["steps"] == 4 and steps == [1, 2, 3, 4]     # 32 rows / batch 8, every weight trained
    assert result["best"]["step"] == 4


def test_a_decoder_family(tmp_path_factory, tmp_path):
    model = str(family_folder("qwen2", tmp_path_factory))
    train, dev = pair_rows(24, 0), pair_rows(16, 1)
    result = tuneloop.train(**fast_options(model, **SETFIT), train=train, validation=dev,
                            output_dir=str(tmp_path / "run"))
    stage = result["setfit"]
    assert stage["pairs"] > 0 and stage["steps"] == -(-stage["pairs"] // 16) and result["train"]["steps"] == 0
    clf = tuneloop.load(tmp_path / "run")
    features, probabilities, intercept = head_inputs_and_probabilities(clf, train[0])
    assert not intercept                                    # Qwen2's score has no bias: a regression without one
    y = np.array([clf.labels.index(label) for label in train[1]])
    assert np.abs(probabilities - lr_probabilities(features, y, intercept)).max() <= 1e-4


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert", "deberta-v2"])
def test_the_heads_dropouts_are_the_layers_outside_the_encoder(family, tmp_path_factory):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(family_folder(family, tmp_path_factory))
    found = contrastive.head_dropouts(model)
    encoder = {id(m) for m in model.base_model.modules()}
    assert found and not any(id(m) in encoder for m in found)
    assert any(type(m).__name__.endswith("Dropout") for m in model.base_model.modules())   # theirs are left alone
    if family == "bert":
        assert found == [model.dropout]


def test_the_pair_stage_has_no_dropout_after_the_encoder_and_the_loop_gets_it_back(tiny_model, tmp_path,
                                                                                     monkeypatch):
    """As sentence-transformers trains (nothing after its pooling): in the pair steps the dropout layers between the
    sentence embedding and the head are off and the encoder's on; after the stage every one is in training mode
    again, so the loop that follows (--setfit-head end-to-end) trains with all of them."""
    seen, after, embed, stage = [], [], contrastive.Embedder.__call__, contrastive.train_body_and_head

    def dropouts(model, inside: bool):
        encoder = {id(m) for m in model.base_model.modules()}
        return [m.training for m in model.modules()
                if type(m).__name__.endswith("Dropout") and (id(m) in encoder) == inside]

    def embed_and_look(self, rows):
        if self.model.training:
            seen.append((dropouts(self.model, False), dropouts(self.model, True)))
        return embed(self, rows)

    def stage_then_look(run, stop):
        summary = stage(run, stop)
        after.append(dropouts(run.model, False) + dropouts(run.model, True))
        return summary

    monkeypatch.setattr(contrastive.Embedder, "__call__", embed_and_look)
    monkeypatch.setattr(contrastive, "train_body_and_head", stage_then_look)
    train = pair_rows(32, 0)
    tuneloop.train(**fast_options(tiny_model, **SETFIT, dropout=0.1, setfit_head="end-to-end", epochs=1),
                   train=train, validation=train, output_dir=str(tmp_path / "run"))
    assert seen and all(head == [False] and encoder and all(encoder) for head, encoder in seen)
    assert after and all(after[0])


def test_max_steps_caps_the_pair_stage_and_auto_runs_that_many_steps_without_cross_validation(tiny_model, tmp_path):
    """--max-steps N is a run of N steps: the stage stops after N pair steps (it would take 32 here), and
    --method auto does not cross-validate candidates trained N steps (it fine-tunes, as with --save-every)."""
    train, dev = pair_rows(32, 0), pair_rows(20, 1)
    capped = tuneloop.train(**fast_options(tiny_model, **SETFIT), max_steps=5, train=train, validation=dev,
                            output_dir=str(tmp_path / "capped"))
    assert capped["setfit"]["steps"] == 5 and capped["setfit"]["max_steps"] == 5
    auto = tuneloop.train(**fast_options(tiny_model, small_data="auto"), max_steps=3, train=train, validation=dev,
                          output_dir=str(tmp_path / "auto"))
    assert auto["auto"] == {"chosen": "finetune", "why": "--max-steps 3 asks for a run of that many steps"}
    assert auto["train"]["steps"] == 3
