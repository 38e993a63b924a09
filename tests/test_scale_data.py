"""Reading/tokenization statistics (timings, Arrow-cache hits) and the sampler's memory-light order."""

from __future__ import annotations

import json
import os
import random

import numpy as np
from conftest import keyword_pair

from tuneloop.config.options import TrainConfig
from tuneloop.data.batching import LengthGroupedSampler
from tuneloop.data.long_texts import TextPolicy
from tuneloop.data.prepare import prepare_data
from tuneloop.data.sources import load_user_files
from tuneloop.data.tokenize import describe_stats, tokenize
from tuneloop.model.tokenizer import load_tokenizer


def write_pairs(path, n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            label, a, b = keyword_pair(rng)
            f.write(json.dumps({"sentence1": a, "sentence2": b, "label": label}) + "\n")
    return str(path)


def test_stats_say_what_was_computed_and_what_came_from_the_cache(tiny_model, tmp_path):
    train, dev = write_pairs(tmp_path / "train.jsonl", 300), write_pairs(tmp_path / "dev.jsonl", 40, seed=1)
    tok = load_tokenizer(tiny_model)
    config = TrainConfig(train_file=train, validation_file=dev, model=tiny_model, quiet=True)

    first = prepare_data(config, tok).stats
    assert set(first) == {"train", "validation"}
    s = first["train"]
    assert s["rows"] == s["tokenized_rows"] == 300 and first["validation"]["rows"] == 40
    assert not s["read_cached"] and not s["tokenize_cached"] and s["num_proc"] == 1
    assert s["read_s"] > 0 and s["tokenize_s"] > 0
    assert abs(s["tokenize_rows_per_s"] * s["tokenize_s"] / 300 - 1) < 0.05   # seconds are rounded to ms

    again = prepare_data(config, tok).stats                       # same files, same settings: all from the cache
    assert all(v["read_cached"] and v["tokenize_cached"] for v in again.values())

    other = prepare_data(config.replace(max_length=16), tok).stats  # same reads, a new tokenization
    assert all(v["read_cached"] and not v["tokenize_cached"] for v in other.values())

    os.utime(train, ns=(1, 1))                                    # the file changed: read and tokenized afresh
    changed = prepare_data(config, tok).stats
    assert not changed["train"]["read_cached"] and not changed["train"]["tokenize_cached"]
    assert changed["validation"]["read_cached"] and changed["validation"]["tokenize_cached"]


def test_stats_with_several_processes(tiny_model, tmp_path):
    raw = load_user_files(write_pairs(tmp_path / "t.jsonl", 200), None, None, None, None)
    assert not raw.stats["train"]["read_cached"] and raw.stats["train"]["rows"] == 200
    tok = load_tokenizer(tiny_model)
    stats: dict = {}
    out = tokenize(raw.train, tok, TextPolicy(32), True, None, "t", num_proc=2, stats=stats)
    assert len(out) == 200 and stats["num_proc"] == 2 and not stats["tokenize_cached"]
    stats2: dict = {}
    tokenize(raw.train, tok, TextPolicy(32), True, None, "t", num_proc=2, stats=stats2)
    assert stats2["tokenize_cached"]


def test_stats_line():
    s = {"rows": 400000, "read_s": 12.1, "read_cached": False, "tokenized_rows": 400000, "tokenize_s": 20.0,
         "tokenize_cached": False, "tokenize_rows_per_s": 20000.0, "num_proc": 2}
    assert describe_stats("train", s) == ("data train: 400000 rows | read 12.10 s | tokenized 400000 rows in 20.00 s "
                                          "(20000 rows/s, 2 processes)")
    s.update(read_cached=True, tokenize_cached=True, num_proc=1)
    line = describe_stats("train", s)
    assert "read 12.10 s (Arrow cache)" in line and "s (Arrow cache) (20000 rows/s, 1 process)" in line


def reference_order(lengths, batch_size, seed, epoch, megabatch=50):
    """The sampler's order as first written (lists of batch arrays): the new code must give the same order, or
    runs resumed from older checkpoints would see other batches."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    size = batch_size * megabatch
    chunks = [order[i:i + size] for i in range(0, len(order), size)]
    order = np.concatenate([c[np.argsort(-lengths[c], kind="stable")] for c in chunks])
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    full = batches[:-1] if len(batches[-1]) < batch_size else batches
    rest = batches[len(full):]
    full = [full[i] for i in rng.permutation(len(full))]
    return np.concatenate(full + rest).tolist()


def test_sampler_order_unchanged_and_not_a_list():
    rng = np.random.default_rng(0)
    for n, batch in ((1, 8), (7, 8), (8, 8), (401, 8), (4000, 32), (4001, 3)):
        lengths = rng.integers(5, 120, n)
        sampler = LengthGroupedSampler(lengths, batch, seed=3)
        for epoch in (0, 1):
            sampler.set_epoch(epoch)
            it = iter(sampler)
            assert not isinstance(it, type(iter([])))
            order = list(it)
            assert order == reference_order(lengths, batch, 3, epoch)
            assert all(type(i) is int for i in order)
