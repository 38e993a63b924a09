"""Texts longer than --max-length: head / tail / head+tail truncation and overlapping windows pooled back to one
prediction per row, the same in training, evaluation and prediction, and carried by the saved model."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest
from conftest import FILLER, fast_options

import tuneloop
from tuneloop import ConfigError, TrainConfig
from tuneloop.data.long_texts import TextPolicy, cut, kept, split_budget, window_starts
from tuneloop.evaluation.metrics import pool_windows
from tuneloop.objective import objective_for


def test_budget_is_taken_from_the_longer_text_first():
    assert split_budget(10, 3, 20) == (10, 3)
    assert split_budget(30, 4, 20) == (16, 4)
    assert split_budget(12, 12, 20) == (10, 10)
    assert sum(split_budget(13, 10, 20)) == 20


@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta"])
def test_long_rows_cut_here_equal_the_tokenizers_own_truncation(family, monkeypatch):
    """A batch with a long row is cut here (the tokenizer's truncation builds overflowing pieces that grow with the
    square of a pair's length); every row, single texts and pairs of every balance of lengths — both over half the
    budget, one under it, equal, odd budgets — comes out as the tokenizer's own longest_first makes it."""
    import tuneloop.data.tokenize as tokenize
    from families import _tokenizer
    from tuneloop.data.long_texts import longest_first

    assert longest_first(10, 100, 61) == (10, 51) and longest_first(32, 31, 61) == (31, 30)
    assert longest_first(31, 32, 61) == (30, 31) and longest_first(5, 0, 3) == (3, 0)
    tok, rng = _tokenizer(family), random.Random(0)
    lengths = [0, 1, 3, 5, 14, 15, 16, 29, 30, 31, 32, 33, 60, 200]

    def text(n):
        return " ".join(rng.choice(FILLER) for _ in range(n))

    pairs = [(text(a), text(b)) for a in lengths for b in lengths if a]
    for max_length in (16, 33, 64):
        policy = TextPolicy(max_length=max_length)
        for pair in (True, False):
            batch = {"idx": list(range(len(pairs))), "id": [str(i) for i in range(len(pairs))],
                     "pos": list(range(1, len(pairs) + 1)), "text_a": [a for a, _ in pairs],
                     "text_b": [b for _, b in pairs], "label": [None] * len(pairs)}
            monkeypatch.setattr(tokenize, "LONG_ROW_CHARS", 10 ** 6)          # the tokenizer truncates
            theirs = tokenize.Tokenize(tok, policy, pair, None)(batch)
            monkeypatch.setattr(tokenize, "LONG_ROW_CHARS", 0)                # every row is cut here
            ours = tokenize.Tokenize(tok, policy, pair, None)(batch)
            for key in ("input_ids", "token_type_ids", "attention_mask", "truncated", "doc", "length"):
                if key in theirs or key in ours:
                    assert list(map(list, ours[key])) == list(map(list, theirs[key])) if key in (
                        "input_ids", "token_type_ids", "attention_mask") else list(ours[key]) == list(theirs[key]), \
                        (family, max_length, pair, key)
            assert any(ours["truncated"]) and not all(ours["truncated"])


def test_kept_positions_by_policy():
    positions = list(range(20))
    assert kept(positions, 8, "head") == list(range(8))
    assert kept(positions, 8, "tail") == list(range(12, 20))
    assert kept(positions, 8, "head+tail") == [0, 1, 14, 15, 16, 17, 18, 19]      # a quarter from the start
    assert kept(positions, 30, "tail") == positions


def test_windows_cover_the_text_and_share_the_overlap():
    starts = window_starts(25, 10, 3)
    assert starts == [0, 7, 14, 15]
    covered = set().union(*(range(s, s + 10) for s in starts))
    assert covered == set(range(25))
    assert window_starts(8, 10, 3) == [0]


def tokenizer_of(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


def test_head_tail_keeps_both_ends_and_the_template(tiny_model):
    tok = tokenizer_of(tiny_model)
    words = FILLER[:30]
    text = " ".join(words)
    encoding = tok(text, truncation=False).encodings[0]
    [(ids, _)] = cut(encoding, TextPolicy(max_length=12, truncation="head+tail"))
    tokens = tok.convert_ids_to_tokens(ids)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and len(tokens) == 12
    assert tokens[1:3] == words[:2] and tokens[3:-1] == words[-8:]            # 2 from the start, 8 from the end
    [(tail, _)] = cut(encoding, TextPolicy(max_length=12, truncation="tail"))
    assert tok.convert_ids_to_tokens(tail)[1:-1] == words[-10:]


def test_pair_windows_window_the_longer_text_and_keep_the_other(tiny_model):
    tok = tokenizer_of(tiny_model)
    short, long = "the cat", " ".join(FILLER[:40])
    encoding = tok(short, long, truncation=False).encodings[0]
    pieces = cut(encoding, TextPolicy(max_length=16, windows=4))
    assert len(pieces) > 1
    for ids, types in pieces:
        tokens = tok.convert_ids_to_tokens(ids)
        assert len(ids) <= 16 and tokens[:4] == ["[CLS]", "the", "cat", "[SEP]"] and tokens[-1] == "[SEP]"
        assert types[:4] == [0, 0, 0, 0] and set(types[4:]) == {1}
    seen = [t for ids, _ in pieces for t in tok.convert_ids_to_tokens(ids)[4:-1]]
    assert set(seen) == set(FILLER[:40])                                        # nothing of the text is lost


SINGLE = objective_for("single_label_classification")


def test_windows_pool_back_to_one_row_per_document():
    logits = np.log(np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8], [0.3, 0.7]], dtype=np.float32))
    labels = np.array([1, 0, 1, 0])                   # the windows of a document share its label
    docs = np.array([7, 3, 7, 3])
    pooled, pooled_labels, unique = pool_windows(logits, labels, docs, SINGLE)
    assert list(unique) == [3, 7] and list(pooled_labels) == [0, 1]
    probs = np.exp(pooled)
    assert np.allclose(probs, [[0.4, 0.6], [0.55, 0.45]], atol=1e-6)
    maxed = np.exp(pool_windows(logits, labels, docs, SINGLE, "max")[0])
    assert np.allclose(maxed[1], np.array([0.9, 0.8]) / 1.7, atol=1e-6)
    single, _, _ = pool_windows(logits[:2], labels[:2], np.array([1, 0]), SINGLE)
    assert np.array_equal(single, logits[[1, 0]])                              # one window: logits unchanged


def test_overlap_too_large_for_the_window_is_refused(tiny_model):
    tok = tokenizer_of(tiny_model)
    with pytest.raises(ConfigError, match=r"--windows 62: neighbouring windows can share at most 61 tokens"):
        TextPolicy(max_length=64, windows=62).check(tok, pair=False)
    with pytest.raises(ConfigError, match=r"--windows 40: .*at most 29 tokens"):
        TextPolicy(max_length=64, windows=40).check(tok, pair=True)
    with pytest.raises(ConfigError, match="--windows: must be a number of shared tokens"):
        TrainConfig(windows=-1).validate()
    with pytest.raises(ConfigError, match="--truncation: tail keeps part of a long text and --windows reads all"):
        TrainConfig(windows=4, truncation="tail").validate()                  # --truncation was ignored


def write_long_docs(path, n, seed):
    """Long single texts whose label word (alpha/beta) sits near the end, past the first 24 tokens."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text", "label"])
        for i in range(n):
            label = rng.randint(0, 1)
            words = [rng.choice(FILLER) for _ in range(rng.randint(30, 40))]
            words.insert(len(words) - rng.randint(1, 4), "alpha" if label else "beta")
            writer.writerow([f"d{i}", " ".join(words), label])
    return path


@pytest.fixture(scope="module")
def long_docs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long")
    return write_long_docs(folder / "train.csv", 160, 0), write_long_docs(folder / "dev.csv", 41, 1)


@pytest.fixture(scope="module")
def windowed_run(tiny_model, long_docs, tmp_path_factory):
    train, dev = long_docs
    out = tmp_path_factory.mktemp("windowed") / "run"
    results = tuneloop.train(TrainConfig(train_file=str(train), validation_file=str(dev), output_dir=str(out),
                                         max_length=16, windows=4, **fast_options(tiny_model, epochs=2)))
    return out, results


def test_windowed_run_scores_one_prediction_per_text(windowed_run):
    out, results = windowed_run
    assert results["eval"]["accuracy"] >= 0.75 and results["train"]["steps"] == 148      # reads the whole text
    assert results["eval"]["num_samples"] == 41                                # texts, not windows
    assert results["data"]["validation"]["long_texts"] == 41
    assert results["data"]["train"]["tokenized_rows"] > 160                    # windows trained as rows
    policy = json.loads((out / "model" / "tuneloop.json").read_text())["text_policy"]
    assert policy == {"max_length": 16, "truncation": "head", "windows": 4, "pooling": "mean"}


def test_evaluate_and_predict_apply_the_saved_policy(windowed_run, long_docs, tmp_path):
    from tuneloop.cli.main import main

    out, results = windowed_run
    _, dev = long_docs
    target = tmp_path / "eval.json"
    assert main(["evaluate", "--model", str(out / "model"), "--output", str(target), "--quiet"]) == 0
    evaluated = json.loads(target.read_text())["eval"]
    assert evaluated["num_samples"] == 41
    assert evaluated["accuracy"] == pytest.approx(results["eval"]["accuracy"], abs=1e-6)
    predictions = tmp_path / "p.csv"
    assert main(["predict", "--model", str(out / "model"), "--input", str(dev), "--output", str(predictions),
                 "--quiet"]) == 0
    rows = list(csv.DictReader(open(predictions)))
    assert [r["id"] for r in rows] == [r["id"] for r in csv.DictReader(open(dev))]   # one per row, in order
    gold = [r["label"] for r in csv.DictReader(open(dev))]
    accuracy = np.mean([r["label"] == g for r, g in zip(rows, gold, strict=True)])
    assert accuracy == pytest.approx(results["eval"]["accuracy"], abs=1e-6)


def test_the_end_of_a_long_text_is_learned_by_tail_and_windows_not_head(tiny_model, long_docs, tmp_path):
    """The label word sits near the end: head truncation at 16 tokens never sees it."""
    train, dev = long_docs
    accuracy = {}
    for name, extra in (("head", {}), ("tail", {"truncation": "tail"}), ("head+tail", {"truncation": "head+tail"})):
        r = tuneloop.train(TrainConfig(train_file=str(train), validation_file=str(dev), max_length=16,
                                       output_dir=str(tmp_path / name), **fast_options(tiny_model, max_steps=148),
                                       **extra))                # the steps the windowed run takes in 2 epochs
        accuracy[name] = r["eval"]["accuracy"]
    assert accuracy["tail"] >= 0.85 and accuracy["head+tail"] >= 0.85 and accuracy["head"] <= 0.7


def test_two_processes_pool_the_same_one_row_per_input(windowed_run, long_docs, tmp_path):
    from test_distributed import run, torchrun_commands

    from tuneloop.cli.main import main

    out, results = windowed_run
    _, dev = long_docs
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    assert main(["predict", "--model", str(out / "model"), "--input", str(dev), "--output", str(one), "--quiet"]) == 0
    target = tmp_path / "eval2.json"
    run(torchrun_commands(2, tmp_path, ["predict", "--model", str(out / "model"), "--input", str(dev), "--output",
                                        str(two), "--quiet", "--batch-size", "4"],
                          ["evaluate", "--model", str(out / "model"), "--output", str(target), "--quiet",
                           "--eval-batch-size", "4"]))
    single, double = list(csv.DictReader(open(one))), list(csv.DictReader(open(two)))
    assert [r["id"] for r in double] == [r["id"] for r in single] and len(double) == 41
    for a, b in zip(single, double, strict=True):
        assert a["label"] == b["label"]
        assert float(a["prob_1"]) == pytest.approx(float(b["prob_1"]), abs=1e-5)
    evaluated = json.loads(target.read_text())["eval"]
    assert evaluated["num_samples"] == 41
    assert evaluated["accuracy"] == pytest.approx(results["eval"]["accuracy"], abs=1e-6)


def test_the_default_max_length_keeps_within_the_models_positions(tmp_path_factory, tmp_path, caplog):
    """A tokenizer that names no maximum (transformers' 1e30, as many Hub tokenizers ship) on a model with 128
    position embeddings: the default is 128, not 512 (said), in training and in predict, evaluate and serve — also
    for a run an earlier tuneloop saved with 512 recorded, and for a plain model folder."""
    import logging
    import shutil

    from families import family_folder

    base = tmp_path / "bert"
    shutil.copytree(family_folder("bert", tmp_path_factory), base)
    config = json.loads((base / "tokenizer_config.json").read_text())
    config.pop("model_max_length", None)
    (base / "tokenizer_config.json").write_text(json.dumps(config))
    long_text = "alpha " + "dog runs fast " * 60                    # about 180 tokens
    rows = [[f"alpha dog {i}", "pos"] for i in range(12)] + [[f"beta cat {i}", "neg"] for i in range(12)]
    train = tmp_path / "train.csv"
    with open(train, "w", newline="") as f:
        csv.writer(f).writerows([["text", "label"], *rows, [long_text, "pos"]])
    out = tmp_path / "run"
    results = tuneloop.train(TrainConfig(train_file=str(train), validation_file=str(train), output_dir=str(out),
                                         **fast_options(str(base), epochs=1)))
    assert results["data"]["train"]["long_texts"] == 1
    assert "--max-length: 128 tokens by default" in (out / "train.log").read_text()
    assert json.loads((out / "model" / "tuneloop.json").read_text())["text_policy"]["max_length"] == 128
    with tuneloop.load(out) as clf:
        expected = clf.predict_proba([long_text], raw=True)
    old = tmp_path / "old"                            # as an earlier tuneloop recorded it: the tokenizer's 512
    shutil.copytree(out / "model", old)
    meta = json.loads((old / "tuneloop.json").read_text())
    (old / "tuneloop.json").write_text(json.dumps({**meta, "text_policy": {**meta["text_policy"], "max_length": 512}}))
    config = json.loads((old / "tokenizer_config.json").read_text())
    config.pop("model_max_length", None)
    (old / "tokenizer_config.json").write_text(json.dumps(config))
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        with tuneloop.load(old) as clf:
            assert clf.policy.max_length == 128
            assert np.allclose(clf.predict_proba([long_text], raw=True), expected, atol=1e-6)
            assert clf.evaluate(str(train))["eval"]["num_samples"] == len(rows) + 1
        with tuneloop.load(base) as plain:                   # a plain folder: the default itself
            assert plain.policy.max_length == 128 and plain.predict_proba([long_text]).shape == (1, 2)
    said = [r.getMessage() for r in caplog.records]
    assert any("reads texts up to 512 tokens, more than its position embeddings take" in m for m in said)
    assert any(m.startswith("--max-length: 128 tokens by default for") for m in said)
