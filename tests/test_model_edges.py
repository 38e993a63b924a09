"""Model families at their edges: tokenizers saved to pad on the left, GPT-2's Conv1D attention under LoRA."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import build_tiny_model
from families import _ids, _train_bpe

import tuneloop

ROWS = [("one", "dog"), (" ".join(["story in plane was alpha a is"] * 4), "car big blue beta likes eats " * 4),
        ("to story", "car"), ("the cat", "a big red bus on the train")]


def build_gpt2(folder: Path) -> Path:
    """A tiny GPT-2 classifier (absolute position embeddings, Conv1D projections) with a byte-level BPE tokenizer
    that has no pad token, as GPT-2 ships."""
    import torch
    import transformers as tf

    pieces, merges = _train_bpe(byte_level=True)
    tokenizer = tf.GPT2Tokenizer(vocab=_ids(pieces + ["<|endoftext|>"]), merges=merges, model_max_length=128)
    config = tf.GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=128,
                           num_labels=2, bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, summary_first_dropout=0.0,
                           initializer_range=0.1)
    torch.manual_seed(0)
    tf.GPT2ForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def pads_left(folder: Path) -> Path:
    path = folder / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "padding_side": "left"}))
    return folder


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> Path:
    return build_gpt2(tmp_path_factory.mktemp("gpt2"))


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_a_tokenizer_saved_to_pad_left_does_not_make_a_rows_prediction_depend_on_its_batch(kind, gpt2, tmp_path):
    """Absolute position embeddings (GPT-2's, BERT's) number positions from the first column: left padding would
    move a short row's tokens to other positions in a batch with a longer row. tuneloop pads on the right."""
    folder = tmp_path / kind
    if kind == "gpt2":
        shutil.copytree(gpt2, folder)
    else:
        build_tiny_model(folder)
    pads_left(folder)
    rows = ROWS if kind == "gpt2" else [" ".join(r) for r in ROWS]
    with tuneloop.load(folder) as clf:
        together = clf.predict_proba(rows, raw=True)
        alone = np.concatenate([clf.predict_proba([r], raw=True) for r in rows])
        side = clf.tokenizer.padding_side
    assert np.abs(together - alone).max() < 1e-5
    assert side == "right"


def test_lora_on_gpt2s_conv1d_attention_is_configured_for_it_without_peft_correcting_it(gpt2):
    """GPT-2's c_attn is a Conv1D (its weight transposed): peft corrected fan_in_fan_out with a UserWarning on
    every --lora run, printed even under --quiet."""
    from types import SimpleNamespace

    from tuneloop.model.loading import load_model, model_config
    from tuneloop.model.lora import add_adapters

    model, new = load_model(str(gpt2), model_config(str(gpt2)), "eager", loading_info=True)
    options = SimpleNamespace(lora_target_modules=None, lora_r=4, lora_alpha=8, lora_dropout=0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        peft_model = add_adapters(model, options, new)
    assert not [w for w in caught if "fan_in_fan_out" in str(w.message)]
    assert peft_model.peft_config["default"].fan_in_fan_out
    assert any("c_attn.lora_A" in name for name, _ in peft_model.named_parameters())


def test_a_lora_target_gpt2_lacks_is_refused_naming_its_conv1d_layers(gpt2):
    """GPT-2's projections are Conv1D, not nn.Linear: the refusal named no layers at all ("its Linear layers are
    named " and nothing)."""
    from types import SimpleNamespace

    from tuneloop.exceptions import ConfigError
    from tuneloop.model.loading import load_model, model_config
    from tuneloop.model.lora import add_adapters

    model, new = load_model(str(gpt2), model_config(str(gpt2)), "eager", loading_info=True)
    options = SimpleNamespace(lora_target_modules=["q_proj"], lora_r=4, lora_alpha=8, lora_dropout=0.0)
    with pytest.raises(ConfigError, match="q_proj names no module") as raised:
        add_adapters(model, options, new)
    assert "c_attn, c_fc, c_proj" in str(raised.value)


def test_a_model_with_one_token_type_reads_pairs_under_a_bert_tokenizer(tmp_path):
    """type_vocab_size 1 (a model trained without segment ids) with BERT's tokenizer, which gives a pair's second
    text type 1: the first pair failed inside the embeddings (IndexError). The tokenizer gives no type ids then."""
    from conftest import tiny_bert

    model, tokenizer = tiny_bert(dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=64, max_position_embeddings=64, type_vocab_size=1), {})
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with tuneloop.load(tmp_path) as clf:
        together = clf.predict_proba([("a cat", "the dog"), ("one", "a big red bus")], raw=True)
        names = clf.tokenizer.model_input_names
    assert together.shape == (2, 2) and np.allclose(together.sum(1), 1)
    assert "token_type_ids" not in names


def test_predicting_with_a_folder_whose_tokenizer_outgrew_its_embeddings_stops_in_one_line(tmp_path):
    """Training stops on it (check_vocabulary); predict, evaluate and tuneloop.load on such a folder failed with an
    IndexError inside the embeddings at the first text holding a new token."""
    from transformers import AutoTokenizer

    from tuneloop.exceptions import TuneloopError

    folder = build_tiny_model(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_tokens(["zebra", "quokka"])
    tokenizer.save_pretrained(folder)
    with pytest.raises(TuneloopError, match="tokenizer has .* tokens but the model's embeddings only"):
        with tuneloop.load(folder) as clf:
            clf.predict_proba(["the zebra sees a quokka"], raw=True)


def test_lora_finds_the_query_and_value_projections_of_a_family_peft_has_no_default_for():
    """CamemBERT (and Data2Vec, Gemma 3, Ministral, GLM, ...): peft names no target modules for them, and --lora
    stopped asking for --lora-target-modules; their attention's query and value are found by name."""
    from types import SimpleNamespace

    import transformers as tf

    from tuneloop.model.lora import add_adapters

    config = tf.CamembertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=66, num_labels=2)
    model = tf.CamembertForSequenceClassification(config)
    options = SimpleNamespace(lora_target_modules=None, lora_r=4, lora_alpha=8, lora_dropout=0.0)
    peft_model = add_adapters(model, options, [])
    adapted = {name.split(".lora_A")[0].rsplit(".", 1)[-1] for name, _ in peft_model.named_parameters()
               if ".lora_A." in name}
    assert adapted == {"query", "value"}
