"""Every architecture family a user would pick, on tiny models with a real tokenizer of each family's kind
(tests/families.py, built offline): the speed levers are exact or off for each; decoders pad on either side alike;
each family trains on pairs, is used through `tuneloop.load`, `tuneloop predict` and a plain pipeline, and exports
to ONNX through the accuracy gate."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import fast_options, write_mrpc_folder
from families import DECODERS, ENCODERS, FAMILIES, family_folder

import tuneloop
from tuneloop.cli import main
from tuneloop.model.attention import supported
from tuneloop.model.tokenizer import ensure_pad_token
from tuneloop.runtime import speed

ALL = ENCODERS + DECODERS
TEXTS = ["the cat sat on the mat", "alpha dog", "a big red bus runs fast and the old horse walks slow", "beta"]


def load(folder: str):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    ensure_pad_token(tokenizer)
    model_class = AutoModelForSequenceClassification._model_mapping[type(
        AutoModelForSequenceClassification.from_pretrained(folder).config)]
    attention = "sdpa" if "sdpa" in supported(model_class) else "eager"
    model = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation=attention)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return tokenizer, model


@pytest.mark.parametrize("key", ALL)
def test_chunked_attention_is_exact_or_off_for_every_family(key, tmp_path_factory):
    """Routed vs stock logits on padded and unpadded batches, in eval and training mode (no dropout), or the
    lever is off: the architecture has no SDPA route (auto then picks eager)."""
    tokenizer, model = load(str(family_folder(key, tmp_path_factory)))
    padded = tokenizer(TEXTS, padding=True, return_tensors="pt")
    unpadded = tokenizer(["the cat sat on the mat"] * 3, return_tensors="pt")
    routable = "chunked" in supported(type(model))
    for batch in (padded, unpadded):
        for training in (False, True):
            model.train(training)
            with torch.no_grad():
                stock = model(**batch).logits
            with speed.SpeedLevers(chunked_attention=True) as levers, torch.no_grad():
                assert levers.route_attention(model, cheap_masks=True) == routable
                routed = model(**batch).logits
            assert torch.allclose(routed, stock, atol=1e-5, rtol=0), (key, training, (routed - stock).abs().max())
    if not routable:
        assert FAMILIES[key].config in ("DebertaV2Config", "MPNetConfig")


def test_the_route_would_catch_a_non_causal_decoder(tmp_path_factory, monkeypatch):
    """The check above can fail: with the causal guard taken out, an unpadded decoder batch differs."""
    tokenizer, model = load(str(family_folder("qwen2", tmp_path_factory)))
    batch = tokenizer(["the cat sat on the mat"] * 2, return_tensors="pt")
    with torch.no_grad():
        stock = model.eval()(**batch).logits
    monkeypatch.setattr(speed, "plain_attention", lambda *args: True)
    with speed.SpeedLevers(chunked_attention=True) as levers, torch.no_grad():
        levers.route_attention(model, cheap_masks=True)
        assert not torch.allclose(model(**batch).logits, stock, atol=1e-5)


@pytest.mark.parametrize("key", DECODERS)
def test_decoders_give_the_same_logits_padded_left_or_right(key, tmp_path_factory):
    tokenizer, model = load(str(family_folder(key, tmp_path_factory)))
    model.eval()
    out = {}
    for side in ("left", "right"):
        tokenizer.padding_side = side
        with torch.no_grad():
            out[side] = model(**tokenizer(TEXTS, padding=True, return_tensors="pt")).logits
    alone = torch.cat([model(**tokenizer([t], return_tensors="pt")).logits for t in TEXTS]).detach()
    assert torch.allclose(out["left"], out["right"], atol=1e-5, rtol=0)
    assert torch.allclose(out["right"], alone, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    return write_mrpc_folder(tmp_path_factory.mktemp("family-data") / "MRPC", n_train=120, n_dev=40, n_test=10)


@pytest.mark.parametrize("key", ALL)
def test_every_family_trains_predicts_exports_and_loads(key, pairs, tmp_path_factory, tmp_path):
    folder = str(family_folder(key, tmp_path_factory))
    out = tmp_path / "run"
    results = tuneloop.train(**fast_options(folder, epochs=1), task="mrpc", data_dir=str(pairs),
                             output_dir=str(out))
    config = (out / "config.yaml").read_text()
    fastest = "sdpa" if torch.cuda.is_available() else "chunked"     # what auto picks on a GPU / on CPUs
    expected = "eager" if FAMILIES[key].config in ("DebertaV2Config", "MPNetConfig") else fastest
    assert f"attention: {expected}" in config                        # auto, decided for this architecture
    assert results["eval"]["num_samples"] == 40
    rows = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog")]
    source = tmp_path / "new.csv"
    source.write_text("sentence1,sentence2\n" + "".join(f"{a},{b}\n" for a, b in rows))
    written = tmp_path / "new.jsonl"
    assert main(["predict", "--model", str(out / "model"), "--input", str(source), "--output", str(written),
                 "--quiet"]) == 0
    from_file = [json.loads(line) for line in written.read_text().splitlines()]
    with tuneloop.load(out) as clf:
        got = clf.predict(rows)
        raw = clf.predict_proba(rows, raw=True)
    assert [r["label"] for r in got] == [r["label"] for r in from_file]
    exported = tmp_path / "onnx"
    assert main(["export", str(out), "--output", str(exported), "--quiet"]) == 0
    report = json.loads((exported / "export_report.json").read_text())
    assert report["gate"]["max_logit_difference"] < 1e-3
    with tuneloop.load(exported) as onnx:
        assert onnx.backend == "onnx"
        assert np.allclose(onnx.predict_proba(rows, raw=True), raw, atol=1e-4)
    if FAMILIES[key].is_decoder:                      # the saved folder pads as it trained
        saved = json.loads((out / "model" / "config.json").read_text())
        assert saved["pad_token_id"] is not None


@pytest.mark.parametrize("key", ["deberta-v2", "qwen2", "llama"])
def test_a_plain_pipeline_reads_the_saved_folder_as_tuneloop_does(key, pairs, tmp_path_factory, tmp_path):
    """The saved folder is self-describing: a plain pipeline given pairs gives tuneloop's probabilities (a Qwen
    tokenizer runs the two texts together; tuneloop writes a separator into its pair template)."""
    from transformers import pipeline

    out = tmp_path / "run"
    tuneloop.train(**fast_options(str(family_folder(key, tmp_path_factory)), epochs=1), task="mrpc",
                   data_dir=str(pairs), output_dir=str(out))
    rows = [("the cat", "a alpha cat"), ("dog", "beta")]
    classify = pipeline("text-classification", model=str(out / "model"), top_k=None)
    answers = classify([{"text": a, "text_pair": b} for a, b in rows])
    with tuneloop.load(out) as clf:
        ours, labels = clf.predict_proba(rows, raw=True), clf.labels
    theirs = [[{d["label"]: d["score"] for d in row}[name] for name in labels] for row in answers]
    assert np.allclose(theirs, ours, atol=1e-5)
    written = tmp_path / "evaluation.json"                            # the CLI takes the run folder too
    assert main(["evaluate", "--model", str(out), "--raw", "--output", str(written), "--quiet"]) == 0
    with tuneloop.load(out) as clf:
        assert json.loads(written.read_text())["eval"]["loss"] == pytest.approx(clf.evaluate(raw=True)["eval"]["loss"])


@pytest.mark.parametrize("key", ALL)
def test_pairs_are_separated_for_every_family_and_stay_so_when_saved(key, tmp_path_factory, tmp_path):
    from transformers import AutoTokenizer

    from tuneloop.data.tokenize import pair_is_separated
    from tuneloop.model.tokenizer import ensure_pair_separator, load_tokenizer

    folder = str(family_folder(key, tmp_path_factory))
    runs_together = not pair_is_separated(AutoTokenizer.from_pretrained(folder))
    assert runs_together == (key in ("qwen2", "qwen3"))              # as these tokenizers ship
    tokenizer = load_tokenizer(folder)
    assert pair_is_separated(tokenizer) and ensure_pair_separator(tokenizer) is None   # done once
    single, pair = tokenizer("the cat")["input_ids"], tokenizer("the cat", "a dog")["input_ids"]
    tokenizer.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again("the cat")["input_ids"] == single and again("the cat", "a dog")["input_ids"] == pair
    if runs_together:
        assert again.convert_ids_to_tokens(pair)[len(single)] == "Ċ"    # the newline between the texts


def test_an_explicit_attention_the_model_cannot_run_is_one_line(pairs, tmp_path_factory, tmp_path, capsys):
    folder = str(family_folder("deberta-v2", tmp_path_factory))
    args = ["train", "--model", folder, "--task", "mrpc", "--data-dir", str(pairs), "--attention", "sdpa",
            "--output-dir", str(tmp_path / "run"), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tuneloop train: error: --attention sdpa: DebertaV2ForSequenceClassification cannot run it; it "
                   "supports eager (or leave --attention auto)"]
    assert not (tmp_path / "run").exists()                            # nothing written


def test_a_model_folder_without_its_tokenizer_stops_before_writing(tmp_path, tmp_path_factory, capsys):
    import shutil

    folder = tmp_path / "no-tokenizer"
    shutil.copytree(family_folder("bert", tmp_path_factory), folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    assert main(["train", "--model", str(folder), "--output-dir", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "the folder has no tokenizer files" in err and "tokenizer.save_pretrained" in err
    assert not (tmp_path / "run").exists()
    assert main(["evaluate", "--model", str(folder)]) == 2


def test_a_tokenizer_larger_than_the_embeddings_is_refused(tmp_path, tmp_path_factory, capsys, pairs):
    import shutil

    from transformers import AutoTokenizer

    folder = tmp_path / "mismatch"
    shutil.copytree(family_folder("bert", tmp_path_factory), folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_tokens([f"newword{i}" for i in range(50)])          # added, the embeddings not resized
    tokenizer.save_pretrained(folder)
    assert main(["train", "--model", str(folder), "--task", "mrpc", "--data-dir", str(pairs),
                 "--output-dir", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "tokens but the model's embeddings only" in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("key", ["deberta-v2", "qwen2", "llama"])
def test_long_texts_in_windows_for_relative_positions_and_decoders(key, pairs, tmp_path_factory, tmp_path):
    """--windows cuts texts into overlapping windows and pools them back; a reloaded model scores the same."""
    out = tmp_path / "run"
    results = tuneloop.train(**fast_options(str(family_folder(key, tmp_path_factory)), epochs=1), task="mrpc",
                             data_dir=str(pairs), output_dir=str(out), max_length=12, windows=2)
    assert results["data"]["validation"]["long_texts"] > 0
    with tuneloop.load(out) as clf:
        again = clf.evaluate(raw=True)["eval"]
    assert again["accuracy"] == pytest.approx(results["eval"]["accuracy"])
    tolerance = 1e-4 if torch.cuda.is_available() else 1e-5    # CUDA: bf16
    assert again["loss"] == pytest.approx(results["eval"]["loss"], abs=tolerance)


def test_a_decoder_config_naming_another_pad_id_pools_each_rows_own_last_token(pairs, tmp_path_factory, tmp_path,
                                                                               caplog):
    """config.json names pad id 0 while the tokenizer pads with EOS (2): the head, pooling the last token that is not
    config.pad_token_id, would read right padding, and a row's prediction would depend on its batch. The config takes
    the tokenizer's id at training (said once in train.log) and at load of a folder that still names the other."""
    import logging
    import shutil

    base = tmp_path / "llama"
    shutil.copytree(family_folder("llama", tmp_path_factory), base)
    for name, key, value in (("config.json", "pad_token_id", 0), ("tokenizer_config.json", "padding_side", "right")):
        (base / name).write_text(json.dumps({**json.loads((base / name).read_text()), key: value}))
    rows = [("one", "dog"), (" ".join(["story in plane was alpha a is"] * 4), "car big blue beta likes eats " * 4),
            ("to story", "car")]

    def batched_and_alone(folder):
        with tuneloop.load(folder) as clf:
            assert clf.tokenizer.padding_side == "right" and clf.model.config.pad_token_id == clf.tokenizer.pad_token_id
            return clf.predict_proba(rows, raw=True), np.concatenate([clf.predict_proba([r], raw=True) for r in rows])

    out = tmp_path / "run"
    tuneloop.train(**fast_options(str(base), epochs=1), task="mrpc", data_dir=str(pairs), output_dir=str(out))
    assert (out / "train.log").read_text().count("pad token:") == 1
    assert json.loads((out / "model" / "config.json").read_text())["pad_token_id"] == 2
    together, alone = batched_and_alone(out)
    assert np.allclose(together, alone, atol=1e-5)
    old = tmp_path / "old"                              # as an earlier tuneloop saved it: the config's own id
    shutil.copytree(out / "model", old)
    (old / "config.json").write_text(json.dumps({**json.loads((old / "config.json").read_text()), "pad_token_id": 0}))
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        together_old, alone_old = batched_and_alone(old)
    assert np.allclose(together_old, alone_old, atol=1e-5) and np.allclose(together_old, together, atol=1e-5)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pad token:")]
    assert len(said) == 1 and "names pad id 0, its tokenizer pads with id 2" in said[0]
