"""Long texts within the model's limits: what the start-up summary says of a windowed split, length buckets within
--max-length, evaluate's --max-length and an older tuneloop.json checked against the position embeddings."""

from __future__ import annotations

import random
from pathlib import Path

from conftest import FILLER

from tuneloop.data.long_texts import TextPolicy
from tuneloop.data.tokenize import describe_stats, tokenize


def test_a_windowed_split_without_a_read_of_its_own_counts_its_texts_not_its_windows(tmp_path):
    """A validation split carved from the training file has no `rows` of its own read: its summary line said
    `data validation: 163 rows` for 4 texts cut into 163 windows."""
    import datasets
    from families import _tokenizer

    rng = random.Random(0)
    texts = [" ".join(rng.choice(FILLER) for _ in range(n)) for n in (3, 120, 200, 5)]
    ds = datasets.Dataset.from_dict({"idx": list(range(4)), "id": [str(i) for i in range(4)],
                                     "pos": list(range(1, 5)), "text_a": texts, "label": [None] * 4})
    stats: dict = {}
    out = tokenize(ds, _tokenizer("bert"), TextPolicy(16, windows=2), False, None, "t", stats=stats)
    assert len(out) > 10 and stats["texts"] == 4 and stats["long_texts"] == 2
    line = describe_stats("validation", stats)
    assert line.startswith("data validation: 4 rows |"), line
    assert f"tokenized {len(out)} rows" in line and f"2 of 4 texts longer than 16 tokens (cut into {len(out)} windows)" \
        in line
    # a split that was read keeps the count it read
    assert describe_stats("train", {**stats, "rows": 7}).startswith("data train: 7 rows |")


def test_length_buckets_never_pad_past_the_positions_a_model_has():
    """A compiled run pads to length buckets (data/batching.length_bucket: multiples of 16 up to 128 tokens):
    --max-length 120 on a model with 120 positions padded rows of 118 tokens to 128 columns, past its position
    embeddings (an IndexError inside the model)."""
    import torch
    import transformers as tf
    from families import _tokenizer

    from tuneloop.data.batching import length_bucket, make_collator

    tok = _tokenizer("bert")
    rng = random.Random(1)
    enc = tok([" ".join(rng.choice(FILLER) for _ in range(n)) for n in (200, 30)], truncation=True, max_length=120)
    rows = [{"input_ids": ids, "attention_mask": [1] * len(ids), "labels": i} for i, ids in enumerate(enc["input_ids"])]
    rows[0] = {k: v[:118] if isinstance(v, list) else v for k, v in rows[0].items()}
    batch = make_collator(tok, False, 120, length_bucket(120))(rows)
    assert batch.inputs["input_ids"].shape == (2, 120) and batch.inputs["attention_mask"][0].sum() == 118
    assert batch.inputs["attention_mask"][1].sum() == len(rows[1]["input_ids"]) and batch.labels.tolist() == [0, 1]
    config = tf.BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=120, num_labels=2)
    with torch.no_grad():
        assert tf.BertForSequenceClassification(config).eval()(**batch.inputs).logits.shape == (2, 2)
    # rows within a bucket keep the bucket (a multiple), and without a limit nothing changes
    short = make_collator(tok, False, 120, 16)([{k: v[:20] if isinstance(v, list) else v for k, v in r.items()}
                                                 for r in rows])
    assert short.inputs["input_ids"].shape == (2, 32)


def trained(tiny_model, tmp_path) -> tuple[int, Path]:
    """(the tiny model's position embeddings, the folder of a one-step run on 40 short rows)."""
    import json

    from conftest import fast_options

    import tuneloop
    from tuneloop import TrainConfig

    positions = json.loads((Path(tiny_model) / "config.json").read_text())["max_position_embeddings"]
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"the {w} {' '.join(str(i))},{'pos' if w == 'good' else 'neg'}\n"
                                             for i in range(20) for w in ("good", "bad")))
    out = tmp_path / "run"
    tuneloop.train(TrainConfig(train_file=str(train), output_dir=str(out), **fast_options(tiny_model, max_steps=1)))
    return positions, out


def test_evaluate_refuses_a_max_length_past_the_models_positions_before_reading(tiny_model, tmp_path, capsys):
    """`evaluate RUN --max-length 1000` on a model of fewer positions read the file, then failed inside the model."""
    from tuneloop.cli.main import main

    positions, out = trained(tiny_model, tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(out), "--max-length", str(positions + 100), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"--max-length {positions + 100}" in err and f"position embeddings for {positions}" in err, err
    assert main(["evaluate", str(out), "--max-length", str(positions), "--quiet"]) == 0


def test_an_older_metadata_without_a_text_policy_is_read_within_the_positions(tiny_model, tmp_path, caplog):
    """A tuneloop.json with a top-level max_length over the model's positions and no text_policy (an earlier
    tuneloop) made predict fail inside the model at the first long text."""
    import json
    import logging

    import tuneloop

    positions, out = trained(tiny_model, tmp_path)
    meta_file = out / "model" / "tuneloop.json"
    meta = json.loads(meta_file.read_text())
    meta.pop("text_policy")
    meta["max_length"] = positions * 4
    meta_file.write_text(json.dumps(meta))
    long_text = " ".join(["the good cat"] * positions * 2)
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        with tuneloop.load(out / "model") as clf:
            assert clf.policy.max_length == positions
            assert clf.predict(long_text)["label"] in ("neg", "pos")
    assert any(f"up to {positions * 4} tokens" in r.getMessage() for r in caplog.records)
