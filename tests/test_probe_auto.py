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

WORDS = {"good": ["great", "lovely", "superb"], "bad": ["awful", "dull", "poor"]}


def opinion_rows(n: int, seed: int) -> tuple[list[str], list[str]]:
    """A toy sentiment task: filler words with one opinion word in them."""
    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        label = ("good", "bad")[i % 2]
        words = sentence(rng).split()
        words.insert(rng.randint(0, len(words)), rng.choice(WORDS[label]))
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def frame(rows):
    import pandas as pd

    return pd.DataFrame({"text": rows[0], "label": rows[1]})


def write(path, rows) -> str:
    frame(rows).to_csv(path, index=False)
    return str(path)


def test_the_probe_is_a_head_on_the_frozen_body_and_an_ordinary_model_folder(tiny_model, tmp_path):
    from transformers import AutoModelForSequenceClassification

    from tuneloop.cli.main import main

    train, dev = opinion_rows(40, 0), opinion_rows(30, 1)
    out = tmp_path / "run"
    result = tuneloop.train(**fast_options(tiny_model, method="probe"), train_file=write(tmp_path / "train.csv", train),
                            validation_file=write(tmp_path / "dev.csv", dev), output_dir=str(out))   # the gate reads it
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
