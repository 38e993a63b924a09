"""--lora (peft): the new head (and any other new module, e.g. DeBERTa's pooler) is trained and saved; a killed run
resumes to the same model; the saved adapter reloads in tuneloop and in plain transformers + peft with the same
predictions (a folder missing a saved module says so); export merges it."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
import torch
from conftest import fast_options, write_mrpc_folder
from families import family_folder

import tuneloop
from tuneloop.cli import main
from tuneloop.exceptions import ConfigError, TuneloopError

# an exact resume on CPUs; CUDA kernels that add in varying order (and bf16 autocast) leave ~2e-5 (seen on an H100)
EXACT = 1e-4 if torch.cuda.is_available() else 1e-6

ROWS = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog"), ("red green", "the alpha"), ("cow", "beta")]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    return write_mrpc_folder(tmp_path_factory.mktemp("lora-data") / "MRPC", n_train=96, n_dev=32, n_test=8)


@pytest.fixture(scope="module")
def headless_deberta(tmp_path_factory):
    """A DeBERTa-v3-style checkpoint without a classification head or pooler, as pretrained encoders ship."""
    from transformers import AutoTokenizer, DebertaV2Model

    source = family_folder("deberta-v2", tmp_path_factory)
    folder = tmp_path_factory.mktemp("headless-deberta")
    DebertaV2Model.from_pretrained(source).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def lora_options(model, data, out, **extra):
    options = {"epochs": 2, "lr": 1e-2, "save_every": "10", **extra}
    return {**fast_options(str(model), **options), "task": "mrpc", "data_dir": str(data), "output_dir": str(out),
            "lora": True}


def peft_probabilities(folder, base, rows):
    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(base, config=AutoConfig.from_pretrained(folder))
    model = PeftModel.from_pretrained(model, folder).eval()
    batch = tokenizer([a for a, _ in rows], [b for _, b in rows] if tokenizer.sep_token else None, padding=True,
                      return_tensors="pt") if tokenizer.sep_token else \
        tokenizer([f"{a}\n{b}" for a, b in rows], padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).logits.softmax(-1).numpy()


@pytest.mark.parametrize("key", ["bert", "qwen2"])
def test_lora_trains_resumes_and_reloads_in_tuneloop_and_peft(key, pairs, tmp_path_factory, tmp_path):
    base = family_folder(key, tmp_path_factory)
    whole = tuneloop.train(**lora_options(base, pairs, tmp_path / "whole"))

    class Killed(Exception):
        pass

    def kill(state):
        if state.step == 13:
            raise Killed

    with pytest.raises(Killed):
        tuneloop.train(**lora_options(base, pairs, tmp_path / "killed"), on_step=kill)
    resumed = tuneloop.train(**lora_options(base, pairs, tmp_path / "killed"), resume="latest")
    assert resumed["resumed_from"].endswith("step-0000010")
    for metric in ("accuracy", "loss"):
        assert resumed["eval"][metric] == pytest.approx(whole["eval"][metric], abs=EXACT)

    model = tmp_path / "whole" / "model"
    saved = sorted(p.name for p in model.iterdir())
    assert "adapter_config.json" in saved and "adapter_model.safetensors" in saved and "model.safetensors" not in saved
    with tuneloop.load(model) as clf:
        ours = clf.predict_proba(ROWS, raw=True)
    assert np.allclose(ours, peft_probabilities(model, base, ROWS), atol=1e-5)
    evaluated = tmp_path / "eval.json"
    assert main(["evaluate", "--model", str(model), "--raw", "--output", str(evaluated), "--quiet"]) == 0
    assert json.loads(evaluated.read_text())["eval"]["accuracy"] == pytest.approx(whole["eval"]["accuracy"])
    assert main(["export", str(tmp_path / "whole"), "--output", str(tmp_path / "onnx"), "--quiet"]) == 0


def test_a_new_pooler_and_head_are_trained_and_saved(headless_deberta, pairs, tmp_path, caplog):
    """DeBERTa's classifier has a new pooler besides the head: without saving both, a reload re-draws them."""
    from safetensors import safe_open

    results = tuneloop.train(**lora_options(headless_deberta, pairs, tmp_path / "run", save_every="epoch"))
    folder = tmp_path / "run" / "model"
    with safe_open(str(folder / "adapter_model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert any("classifier" in k for k in keys) and any("pooler" in k for k in keys)
    assert any("lora_A" in k for k in keys)
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        with tuneloop.load(folder) as first, tuneloop.load(folder) as second:
            a, b = first.predict_proba(ROWS, raw=True), second.predict_proba(ROWS, raw=True)
            again = first.evaluate(raw=True)
    assert np.allclose(a, b, atol=1e-6)                               # nothing re-drawn at load
    assert again["eval"]["accuracy"] == pytest.approx(results["eval"]["accuracy"])
    assert not [r for r in caplog.records if "no weights for" in r.getMessage()]

    # the trap itself, as a LoRA folder saved without tuneloop would hold it: the pooler neither listed nor saved;
    # peft loads it without a word and the pooler is random: tuneloop stops, naming it
    trapped = copy_adapter(folder, tmp_path / "trapped", drop="pooler", unlist="pooler")
    with pytest.raises(TuneloopError, match="no weights for pooler.dense") as stopped:
        tuneloop.load(trapped)
    said = str(stopped.value)
    assert "classifier" not in said.split(";")[0] and len(said.splitlines()) == 1
    assert "nor the adapter file has them" in said                     # the reason a LoRA folder has, not a save's
    # a listed module missing from the file (a partial copy) stops the same way, before peft's KeyError
    with pytest.raises(TuneloopError, match="no weights for classifier.bias, classifier.weight.*a partial copy"):
        tuneloop.load(copy_adapter(folder, tmp_path / "partial", drop="classifier"))
    # a module listed as saved in full that the base model has but the file lacks: peft's KeyError becomes one line
    listed = copy_adapter(folder, tmp_path / "listed", drop="no such weight")
    config = json.loads((listed / "adapter_config.json").read_text())
    (listed / "adapter_config.json").write_text(json.dumps({**config, "modules_to_save": [
        *config["modules_to_save"], "embeddings"]}))
    with pytest.raises(TuneloopError, match="could not load the LoRA adapter.*a damaged or partial copy"):
        tuneloop.load(listed)
    # a truncated adapter file (a copy cut short): one line naming the folder, no safetensors traceback
    cut = copy_adapter(folder, tmp_path / "cut", drop="no such weight")
    data = (cut / "adapter_model.safetensors").read_bytes()
    (cut / "adapter_model.safetensors").write_bytes(data[:len(data) // 2])
    with pytest.raises(TuneloopError, match=f"--model {cut}: could not load the LoRA adapter"):
        tuneloop.load(cut)


def copy_adapter(folder, to, drop: str, unlist: str | None = None):
    """A copy of a LoRA model folder without the adapter weights whose names hold `drop` (and without `unlist` in
    the adapter config's modules saved in full)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(folder, to)
    weights = load_file(str(to / "adapter_model.safetensors"))
    save_file({k: v for k, v in weights.items() if drop not in k}, str(to / "adapter_model.safetensors"))
    if unlist:
        config = json.loads((to / "adapter_config.json").read_text())
        config["modules_to_save"] = [m for m in config["modules_to_save"] if m != unlist]
        (to / "adapter_config.json").write_text(json.dumps(config))
    return to


def test_a_target_module_name_that_matches_nothing_is_refused(pairs, tmp_path_factory, tmp_path):
    """peft adapts the names that match and drops the rest without a word: query,valeu trained query alone."""
    base = family_folder("bert", tmp_path_factory)
    options = lora_options(base, pairs, tmp_path / "run", lora_target_modules=["query", "valeu"])
    with pytest.raises(ConfigError, match=r"^--lora-target-modules: valeu names no module of this bert model; its "
                                          r"Linear layers are named .*\bquery\b.*\bvalue\b"):
        tuneloop.train(**options)
    dotted = tuneloop.train(**{**options, "lora_target_modules": ["attention.self.query", "value"], "max_steps": 2})
    assert dotted["train"]["steps"] == 2                               # a name's last parts match, as peft matches


@pytest.mark.parametrize("key, head", [("bert", "classifier"), ("qwen2", "score")])
def test_a_target_module_in_the_head_is_refused_as_trained_in_full(key, head, pairs, tmp_path_factory, tmp_path):
    """The head is in modules_to_save: peft would find nothing to adapt and advise --lora-target-modules."""
    options = lora_options(family_folder(key, tmp_path_factory), pairs, tmp_path / "run", lora_target_modules=[head])
    with pytest.raises(ConfigError, match=rf"^--lora-target-modules: {head} is in the model's head \({head}\), which "
                                          "--lora trains and saves in full anyway; name modules of the body"):
        tuneloop.train(**options)
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def relative_lora_run(pairs, tmp_path_factory):
    """A --lora run whose --model was given as a relative path (models/bert, from the folder `home`)."""
    import os

    from families import build_family_model

    home = tmp_path_factory.mktemp("lora-home")
    build_family_model("bert", home / "models" / "bert")
    before = os.getcwd()
    os.chdir(home)
    try:
        tuneloop.train(**lora_options("models/bert", pairs, home / "run", epochs=1))
    finally:
        os.chdir(before)
    return home


def test_a_relative_base_is_recorded_absolute_and_an_older_relative_record_is_found_beside_the_run(
        relative_lora_run, tmp_path, monkeypatch):
    home = relative_lora_run
    model = home / "run" / "model"
    base = str((home / "models" / "bert").resolve())
    adapter = json.loads((model / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == base
    assert json.loads((model / "tuneloop.json").read_text())["base_model"] == base
    monkeypatch.chdir(tmp_path)                       # elsewhere: the relative path means nothing here
    with tuneloop.load(home / "run") as clf:
        expected = clf.predict_proba(ROWS, raw=True)
    # a folder an earlier tuneloop wrote, both records relative: found from the folder, not the working directory
    old = home / "older" / "model"
    shutil.copytree(model, old)
    (old / "adapter_config.json").write_text(json.dumps({**adapter, "base_model_name_or_path": "models/bert"}))
    meta = json.loads((old / "tuneloop.json").read_text())
    (old / "tuneloop.json").write_text(json.dumps({**meta, "base_model": "models/bert"}))
    with tuneloop.load(old) as clf:
        assert np.allclose(clf.predict_proba(ROWS, raw=True), expected, atol=1e-6)


def test_a_lora_run_folder_is_a_model_to_train_from(relative_lora_run, pairs, tmp_path):
    """--model <a --lora run>: its base with the adapters merged in, as a full run folder would be read; a --lora
    run on it records that run as its base and loads (the base merged first)."""
    from tuneloop.data.labels import LabelSchema
    from tuneloop.model.loading import model_config
    from tuneloop.model.lora import load_starting_model

    run = relative_lora_run / "run"
    with tuneloop.load(run) as clf:
        expected, labels = clf.predict_proba(ROWS, raw=True), clf.label_schema
        batch = clf.tokenizer([a for a, _ in ROWS], [b for _, b in ROWS], padding=True, return_tensors="pt")
    start, new = load_starting_model(str(run), model_config(str(run), LabelSchema.from_dict(labels.to_dict())))
    assert new == []                                  # nothing drawn afresh: the merged model, head and all
    with torch.no_grad():
        assert np.allclose(start.eval()(**batch).logits.softmax(-1).numpy(), expected, atol=1e-5)
    full = tuneloop.train(**fast_options(str(run), epochs=1, max_steps=2), task="mrpc", data_dir=str(pairs),
                          output_dir=str(tmp_path / "full"))
    assert full["train"]["steps"] == 2
    again = tuneloop.train(**lora_options(run, pairs, tmp_path / "again", max_steps=2))
    adapter = json.loads((tmp_path / "again" / "model" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str((run / "model").resolve())
    with tuneloop.load(tmp_path / "again") as clf:               # onto the first run's merged model
        assert clf.evaluate(raw=True)["eval"]["loss"] == pytest.approx(again["eval"]["loss"], abs=EXACT)
