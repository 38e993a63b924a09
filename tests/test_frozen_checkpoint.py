"""Checkpoints leave out the weights a run does not train (a LoRA run's base, --freeze-embeddings' embeddings): a
resume loads them from --model again, equals the uninterrupted run, and is refused when --model's frozen weights
changed between the save and the resume."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import fast_options, write_mrpc_folder
from families import family_folder
from safetensors import safe_open

import tuneloop
from tuneloop.cli import main

EXACT = 1e-4 if torch.cuda.is_available() else 1e-6


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    return write_mrpc_folder(tmp_path_factory.mktemp("frozen-data") / "MRPC", n_train=64, n_dev=24, n_test=4)


def options(model, data, out, **extra):
    return {**fast_options(str(model), epochs=2, save_every="5", keep_last=5, **extra), "task": "mrpc",
            "data_dir": str(data), "output_dir": str(out)}


class Killed(Exception):
    pass


def kill_at(step):
    def on_step(state):
        if state.step == step:
            raise Killed
    return on_step


def saved_keys(checkpoint):
    with safe_open(str(checkpoint / "model.safetensors"), "pt") as f:
        return set(f.keys())


@pytest.mark.parametrize("extra", [{"lora": True, "lr": 1e-2}, {"freeze_embeddings": True}], ids=["lora", "embeddings"])
def test_a_checkpoint_holds_the_trained_weights_only_and_resumes_exactly(extra, pairs, tmp_path_factory, tmp_path):
    base = family_folder("bert", tmp_path_factory)
    whole = tuneloop.train(**options(base, pairs, tmp_path / "whole", **extra))
    with pytest.raises(Killed):
        tuneloop.train(**options(base, pairs, tmp_path / "killed", **extra), on_step=kill_at(7))
    checkpoint = tmp_path / "killed" / "checkpoints" / "step-0000005"
    record = json.loads((checkpoint / "frozen_weights.json").read_text())
    keys = saved_keys(checkpoint)
    assert record["left_out"] and not keys & set(record["left_out"])
    assert any("embeddings.word_embeddings" in name for name in record["left_out"])
    if extra.get("lora"):
        assert all("lora_" in k or "classifier" in k or "pooler" in k for k in keys if k.endswith("weight")), keys
    else:
        assert any("encoder.layer.0" in k for k in keys)          # the rest of the model is trained: saved
    resumed = tuneloop.train(**options(base, pairs, tmp_path / "killed", **extra), resume="latest")
    assert resumed["resumed_from"].endswith("step-0000005")
    for metric in ("accuracy", "loss"):
        assert resumed["eval"][metric] == pytest.approx(whole["eval"][metric], abs=EXACT)


def test_a_resume_whose_frozen_base_changed_is_refused(pairs, tmp_path_factory, tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification

    base = tmp_path / "base"
    shutil.copytree(family_folder("bert", tmp_path_factory), base)
    out = tmp_path / "run"
    with pytest.raises(Killed):
        tuneloop.train(**options(base, pairs, out, lora=True, lr=1e-2), on_step=kill_at(6))
    model = AutoModelForSequenceClassification.from_pretrained(base)
    with torch.no_grad():
        model.bert.encoder.layer[0].attention.self.key.weight.add_(0.01)     # another revision of the base
    model.save_pretrained(base)
    capsys.readouterr()
    code = main(["train", "--output-dir", str(out), "--resume"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert "frozen weights" in err[0] and "--model" in err[0] and "step-0000005" in err[0], err
    assert "damaged" not in err[0]
