"""--setfit-pooling (model/pooling.py): on a sentence-transformer folder `auto` swaps the BERT pooler for the masked
mean of the last hidden states, normalised; the head is the logistic regression on exactly that; padding does not
change it; the folder loads, predicts and exports through tuneloop (its pooler's weights not counted missing, any
other missing weight said), and plain transformers sees the pooler missing; MPNet's head and DeBERTa's pooler swap
alike; architectures without a swappable pooler or head, and --lora, are refused when `mean` is asked."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
import torch
from conftest import fast_options
from families import family_folder
from test_contrastive import SETFIT, head_inputs_and_probabilities, lr_probabilities, pair_rows, write_pairs

import tuneloop
from tuneloop.cli.main import main
from tuneloop.exceptions import ConfigError, TuneloopError
from tuneloop.model.pooling import CONFIG_KEY, MeanPooler, sentence_transformer_pooling


@pytest.fixture(scope="module")
def sentence_transformer(tiny_model, tmp_path_factory) -> str:
    """The tiny BERT as a sentence-transformers folder declaring mean pooling (as all-MiniLM-L6-v2 does)."""
    folder = tmp_path_factory.mktemp("tiny-st") / "model"
    shutil.copytree(tiny_model, folder)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
         "pooling_mode_max_tokens": False}))
    return str(folder)


@pytest.fixture(scope="module")
def mean_run(sentence_transformer, tmp_path_factory):
    train, dev = pair_rows(32, 0), pair_rows(40, 1)
    folder = tmp_path_factory.mktemp("setfit-mean")
    out = folder / "run"
    result = tuneloop.train(**fast_options(sentence_transformer, **SETFIT),
                            train_file=write_pairs(folder / "train.csv", train),
                            validation_file=write_pairs(folder / "dev.csv", dev), output_dir=str(out))
    return result, train, dev, out


def masked_means(model, tokenizer, items) -> np.ndarray:
    """The normalised attention-masked mean of the base model's last hidden states, computed here, one batch."""
    first, second = zip(*items, strict=True)
    batch = tokenizer(list(first), list(second), padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model.base_model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()


def test_auto_reads_the_declared_pooling(sentence_transformer, tiny_model):
    assert sentence_transformer_pooling(sentence_transformer) == "mean"
    assert sentence_transformer_pooling(tiny_model) is None


def test_a_model_alias_reads_its_folders_pooling_not_the_hubs(sentence_transformer, tmp_path, monkeypatch):
    """`--model minilm` (the default) is an alias for a packaged folder: `auto` must read that folder's declared
    pooling, as it does given the folder itself (it once asked the Hub for a model named "minilm")."""
    import sys
    import types

    from tuneloop.model import loading

    package = types.SimpleNamespace(get_model_path=lambda: sentence_transformer)
    monkeypatch.setitem(sys.modules, "tiny_st_package", package)
    monkeypatch.setitem(loading.ALIASES, "tiny-st", loading.Alias("tiny_st_package", "tiny-st-package", "x/tiny-st",
                                                                  "a tiny sentence-transformer"))
    train = pair_rows(32, 0)
    result = tuneloop.train(**{**fast_options(sentence_transformer, **SETFIT), "model": "tiny-st"}, max_steps=2,
                            train_file=write_pairs(tmp_path / "train.csv", train), output_dir=str(tmp_path / "run"))
    assert result["setfit"]["pooling"] == "mean"


def test_auto_swaps_the_pooler_for_the_mean_and_fits_the_head_on_it(mean_run):
    result, (texts, labels), _, out = mean_run
    assert result["setfit"]["pooling"] == "mean"
    assert "setfit_pooling: mean" in (out / "config.yaml").read_text()
    assert json.loads((out / "model" / "config.json").read_text())[CONFIG_KEY] == "mean"
    clf = tuneloop.load(out)
    assert isinstance(clf.model.base_model.pooler, MeanPooler)
    features, probabilities, intercept = head_inputs_and_probabilities(clf, texts)
    assert np.allclose(features, masked_means(clf.model, clf.tokenizer, texts), atol=1e-5)   # the head reads the mean
    assert np.allclose(np.linalg.norm(features, axis=1), 1.0, atol=1e-5)
    y = np.array([clf.labels.index(label) for label in labels])
    assert np.abs(probabilities - lr_probabilities(features, y, intercept)).max() <= 1e-4
    assert result["eval"]["accuracy"] >= 0.8


def test_a_run_folder_trains_anew_from_its_model_still_reading_the_mean(mean_run, tmp_path, capfd):
    """--model RUN takes the run's model/ (as predict and evaluate do); a tuneloop folder that reads the mean has no
    sentence-transformers files left, and `auto` keeps the mean it was saved with, and says so."""
    _, train, dev, out = mean_run
    again = tmp_path / "again"
    result = tuneloop.train(**fast_options(str(out), **SETFIT, quiet=False),
                            train_file=write_pairs(tmp_path / "train.csv", train),
                            validation_file=write_pairs(tmp_path / "dev.csv", dev), output_dir=str(again))
    assert result["setfit"]["pooling"] == "mean"
    assert "SetFit pooling: mean (the model was saved by tuneloop reading the mean" in capfd.readouterr().err
    assert isinstance(tuneloop.load(again).model.base_model.pooler, MeanPooler)
    assert result["eval"]["accuracy"] >= 0.8


def test_inspect_says_why_a_setfit_run_ranks_no_training_labels(mean_run, capsys):
    _, _, _, out = mean_run
    assert not (out / "label_issues.csv").exists()
    assert main(["inspect", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"{out / 'label_issues.csv'}: not written: --method setfit fits its head outside the training loop" in said


def test_model_names_a_run_folder_without_a_model(mean_run, tmp_path):
    from tuneloop.model.loading import resolve_model

    _, _, _, out = mean_run
    assert resolve_model(str(out)) == str(out / "model")
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    shutil.copy(out / "tuneloop-run.json", unfinished)
    with pytest.raises(TuneloopError,
                       match="no config.json.*run folder that holds its model/ .the run has not saved its final model"):
        resolve_model(str(unfinished))


def test_padding_does_not_change_a_prediction(mean_run):
    _, (texts, _), _, out = mean_run
    clf = tuneloop.load(out)
    long = (texts[0][0] + " " + " ".join(["alpha beta"] * 20), texts[0][1])
    alone = np.concatenate([clf.predict_proba([item], raw=True) for item in texts[:6]])
    together = clf.predict_proba(texts[:6] + [long], raw=True)[:6]        # padded to the long row's length
    assert np.abs(alone - together).max() < 1e-5


@pytest.mark.parametrize("route", ["bf16", "int8"])
def test_a_route_copy_reads_its_own_mask(mean_run, route):
    """A precision route is a copy of the model (predict/routes.applied): the copy's mean reads the copy's own
    attention mask, so padding does not change its predictions either, and the fp32 model it was copied from keeps
    no mask of the copy's batches (it then runs a batch of another length). The hook once held the original's
    pooler: the copy averaged over padding, and the precision gate of a distilled student failed on the stale mask."""
    _, (texts, _), _, out = mean_run
    clf = tuneloop.load(out)
    copy = clf.with_route(route)
    long = (texts[0][0] + " " + " ".join(["alpha beta"] * 20), texts[0][1])
    alone = np.concatenate([copy.predict_proba([item], raw=True) for item in texts[:6]])
    together = copy.predict_proba(texts[:6] + [long], raw=True)[:6]
    assert np.abs(alone - together).max() < 0.02
    assert np.abs(together - clf.predict_proba(texts[:6] + [long], raw=True)[:6]).max() < 0.02
    assert clf.model.base_model.pooler.mask is None
    assert np.abs(clf.predict_proba(texts[:3], raw=True) - clf.predict_proba(texts[:6], raw=True)[:3]).max() < 1e-5


def test_the_folder_exports_and_plain_transformers_sees_no_pooler(mean_run, tmp_path):
    from transformers import AutoModelForSequenceClassification

    _, _, _, out = mean_run
    _, info = AutoModelForSequenceClassification.from_pretrained(out / "model", output_loading_info=True)
    assert any("pooler" in key for key in info["missing_keys"])           # transformers' loud "newly initialized"
    target = tmp_path / "onnx"
    assert main(["export", str(out), "--output", str(target), "--quiet"]) == 0
    report = json.loads((target / "export_report.json").read_text())
    assert report["gate"]["verdict"] == "pass" and report["gate"]["max_logit_difference"] < 1e-4


def test_a_missing_pooler_is_not_reported_but_any_other_missing_weight_stops_the_load(mean_run, tmp_path, caplog,
                                                                                       capsys):
    """The pooler's weights are left out on purpose: tuneloop.load says nothing of them; a folder missing another
    weight (here the classifier's, as a damaged save would) stops with one line naming it (transformers' own report
    is hidden while tuneloop loads, so without this the random head would pass unseen): in Python and on the
    command line, where it exits non-zero with no traceback and writes nothing."""
    from safetensors.torch import load_file, save_file

    _, _, _, out = mean_run
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        tuneloop.load(out).close()
    assert not [r for r in caplog.records if "no weights for" in r.getMessage()]
    damaged = tmp_path / "model"
    shutil.copytree(out / "model", damaged)
    weights = load_file(damaged / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("classifier.")}, damaged / "model.safetensors",
              metadata={"format": "pt"})
    with pytest.raises(TuneloopError, match="no weights for classifier.bias, classifier.weight; they would be random"):
        tuneloop.load(damaged)
    capsys.readouterr()
    assert main(["predict", "--model", str(damaged), "a first sentence", "a second one"]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and "no weights for classifier.bias" in captured.err
    assert "Traceback" not in captured.err and not captured.out.strip()
    # a weights file cut short (an interrupted copy): one line saying so, not safetensors' traceback
    cut = tmp_path / "cut"
    shutil.copytree(out / "model", cut)
    whole = (cut / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(whole[:len(whole) // 2])
    assert main(["predict", "--model", str(cut), "a first sentence", "a second one"]) == 2
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1 and "Traceback" not in said
    assert f"--model {cut}: could not load the model" in said and "damaged or cut short" in said


@pytest.mark.parametrize("family", ["mpnet", "deberta-v2"])
def test_mean_swaps_an_mpnet_head_and_a_deberta_pooler(family, tmp_path_factory, tmp_path, caplog):
    """all-mpnet-base-v2's shape (a RoBERTa-style head: dense + tanh + out_proj on the first token) and DeBERTa's
    context pooler: `auto` on a sentence-transformer folder reads the masked mean; the head is the logistic
    regression on it; the folder reloads without re-drawn weights and exports; transformers sees the dropped dense."""
    from transformers import AutoModelForSequenceClassification

    folder = tmp_path / "st"
    shutil.copytree(family_folder(family, tmp_path_factory), folder)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    texts, labels = pair_rows(32, 0)
    result = tuneloop.train(**fast_options(str(folder), **SETFIT), train_file=write_pairs(tmp_path / "train.csv",
                            (texts, labels)), validation_file=write_pairs(tmp_path / "dev.csv", pair_rows(24, 1)),
                            output_dir=str(tmp_path / "run"))
    assert result["setfit"]["pooling"] == "mean"
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        clf = tuneloop.load(tmp_path / "run")
    assert not [r for r in caplog.records if "no weights for" in r.getMessage()]
    linear = clf.model.classifier.out_proj if family == "mpnet" else clf.model.classifier
    caught = []
    handle = linear.register_forward_pre_hook(lambda module, args: caught.append(args[0][0].detach()))
    probabilities = np.concatenate([clf.predict_proba([item], raw=True) for item in texts])
    handle.remove()
    features = torch.stack(caught).float().numpy()
    assert np.allclose(features, masked_means(clf.model, clf.tokenizer, texts), atol=1e-5)   # the head reads the mean
    y = np.array([clf.labels.index(label) for label in labels])
    assert np.abs(probabilities - lr_probabilities(features, y, True)).max() <= 1e-4
    dropped = "classifier.dense" if family == "mpnet" else "pooler.dense"
    _, info = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run" / "model", output_loading_info=True)
    assert any(key.startswith(dropped) for key in info["missing_keys"])     # transformers' loud "newly initialized"
    assert main(["export", str(tmp_path / "run"), "--output", str(tmp_path / "onnx"), "--quiet"]) == 0
    assert json.loads((tmp_path / "onnx" / "export_report.json").read_text())["gate"]["verdict"] == "pass"


def test_mean_is_refused_where_it_cannot_apply(tmp_path_factory, tmp_path, tiny_model):
    train = pair_rows(16, 0)
    distilbert = str(family_folder("distilbert", tmp_path_factory))
    with pytest.raises(ConfigError, match="--setfit-pooling mean: the distilbert architecture") as caught:
        tuneloop.train(**fast_options(distilbert, **SETFIT, setfit_pooling="mean"), train=train, validation=train,
                       output_dir=str(tmp_path / "run"))
    assert "\n" not in str(caught.value) and not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="does not combine with --lora"):
        tuneloop.train(**fast_options(tiny_model, **SETFIT, setfit_pooling="mean", lora=True), train=train,
                       validation=train, output_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match="--setfit-pooling"):
        tuneloop.train(**fast_options(tiny_model, **SETFIT, setfit_pooling="max"), train=train,
                       output_dir=str(tmp_path / "run"))
