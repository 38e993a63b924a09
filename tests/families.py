"""Tiny sequence-classification models of each architecture family, built offline in milliseconds.

Each family gets a model of its own config class (hidden 32, 2 layers, 2 heads, intermediate 64, 128 positions,
no dropout) and a real tokenizer of the kind that family ships with, built here from the word list of conftest.py:
WordPiece vocabularies and SentencePiece-style Unigram vocabularies are written out directly, BPE vocabularies are
trained with the `tokenizers` library on a few hundred generated sentences. The words of the toy tasks are single
tokens. Decoders are saved as Llama's and Mistral's ship: an eos token but no pad token in the tokenizer and no
pad_token_id in the config (Gemma keeps a null one), the case the product must handle itself.

In a test module (fixtures are found only where they are imported):

    from families import ENCODERS, DECODERS, family_model

    @pytest.mark.parametrize("family_model", ENCODERS + DECODERS, indirect=True)
    def test_something(family_model): ...          # a str: the model folder, built once per session

or call family_folder(key, tmp_path_factory) / build_family_model(key, folder) directly.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import WORDS


@dataclass(frozen=True)
class FamilySpec:
    config: str                 # transformers config class
    tokenizer: str              # the tokenizer class the family's Hub repos name
    is_decoder: bool
    takes_token_type_ids: bool  # the model's forward accepts token_type_ids


FAMILIES: dict[str, FamilySpec] = {
    "bert": FamilySpec("BertConfig", "BertTokenizer", False, True),
    "distilbert": FamilySpec("DistilBertConfig", "DistilBertTokenizer", False, False),
    "roberta": FamilySpec("RobertaConfig", "RobertaTokenizer", False, True),
    "xlm-roberta": FamilySpec("XLMRobertaConfig", "XLMRobertaTokenizer", False, True),
    "electra": FamilySpec("ElectraConfig", "ElectraTokenizer", False, True),
    "albert": FamilySpec("AlbertConfig", "AlbertTokenizer", False, True),
    "deberta-v2": FamilySpec("DebertaV2Config", "DebertaV2Tokenizer", False, True),
    "mpnet": FamilySpec("MPNetConfig", "MPNetTokenizer", False, False),
    "modernbert": FamilySpec("ModernBertConfig", "PreTrainedTokenizerFast", False, False),
    "qwen2": FamilySpec("Qwen2Config", "Qwen2Tokenizer", True, False),
    "qwen3": FamilySpec("Qwen3Config", "Qwen2Tokenizer", True, False),
    "llama": FamilySpec("LlamaConfig", "LlamaTokenizer", True, False),
    "gemma": FamilySpec("GemmaConfig", "GemmaTokenizer", True, False),
    # Mistral-7B-v0.1 names LlamaTokenizer; without mistral-common transformers 5 loads it as TokenizersBackend
    "mistral": FamilySpec("MistralConfig", "LlamaTokenizer", True, False),
}
ENCODERS = [k for k, s in FAMILIES.items() if not s.is_decoder]
DECODERS = [k for k, s in FAMILIES.items() if s.is_decoder]

MAX_LENGTH = 128
CHARS = string.ascii_letters + string.digits + string.punctuation
BYTES = [f"<0x{i:02X}>" for i in range(256)]     # SentencePiece's byte-fallback pieces (Llama, Mistral, Gemma)


def _corpus() -> list[str]:
    """A few hundred sentences of conftest's words: every word at a sentence's start and after a space."""
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(300)]
    lines += [f"{w} the {w}" for w in WORDS]
    return lines + [line.capitalize() + "." for line in lines[:60]]


def _ids(pieces) -> dict[str, int]:
    return {p: i for i, p in enumerate(dict.fromkeys(pieces))}


def _wordpiece_vocab(head: list[str], tail: tuple[str, ...] = ()) -> dict[str, int]:
    lower = string.ascii_lowercase + string.digits
    return _ids(head + WORDS + list(lower + string.punctuation) + ["##" + c for c in lower] + list(tail))


def _unigram_vocab(head: list[str], tail: tuple[str, ...] = ()) -> list[tuple[str, float]]:
    """SentencePiece-style pieces: each word as one '▁word' piece, single characters as the (costly) fallback."""
    pieces = [(t, 0.0) for t in head] + [("▁" + w, -5.0) for w in dict.fromkeys(WORDS)] + [("▁", -8.0)]
    pieces += [(c, -10.0) for c in CHARS] + [(t, 0.0) for t in tail]
    return pieces


_BPE_CACHE: dict[bool, tuple[list[str], list[tuple[str, str]]]] = {}


def _train_bpe(byte_level: bool) -> tuple[list[str], list[tuple[str, str]]]:
    """BPE pieces (in training order) and merges: byte-level (GPT-2 style: RoBERTa, Qwen, ModernBERT) or
    SentencePiece style ('▁word' pieces: Llama, Mistral, Gemma)."""
    if byte_level not in _BPE_CACHE:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        if byte_level:
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            alphabet = pre_tokenizers.ByteLevel.alphabet()
        else:   # split before each space, like SentencePiece: learns 'word' and '▁word' but never across words
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
            alphabet = list(CHARS)
        # the vocabulary is big enough that training stops only when every word is a single piece
        tok.train_from_iterator(_corpus(), trainers.BpeTrainer(vocab_size=4000, initial_alphabet=alphabet,
                                                                show_progress=False))
        model = json.loads(tok.to_str())["model"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        _BPE_CACHE[byte_level] = sorted(model["vocab"], key=model["vocab"].get), merges
    return _BPE_CACHE[byte_level]


def _tokenizer(key: str):
    import transformers as tf

    common = {"model_max_length": MAX_LENGTH}
    if key in ("bert", "distilbert", "electra"):        # uncased WordPiece, as bert-base-uncased
        vocab = _wordpiece_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        return getattr(tf, FAMILIES[key].tokenizer)(vocab=vocab, do_lower_case=True, **common)
    if key == "mpnet":                                  # WordPiece with RoBERTa's special tokens
        return tf.MPNetTokenizer(vocab=_wordpiece_vocab(["<s>", "<pad>", "</s>", "[UNK]"], ("<mask>",)), **common)
    if key == "xlm-roberta":                            # SentencePiece Unigram; <unk> must be id 3
        return tf.XLMRobertaTokenizer(vocab=_unigram_vocab(["<s>", "<pad>", "</s>", "<unk>"], ("<mask>",)), **common)
    if key == "albert":                                 # SentencePiece Unigram, lower-cased, [CLS] a [SEP] b [SEP]
        return tf.AlbertTokenizer(vocab=_unigram_vocab(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]), **common)
    if key == "deberta-v2":                             # DeBERTa-v3's spm.model: Unigram, cased, [MASK] last
        vocab = _unigram_vocab(["[PAD]", "[CLS]", "[SEP]", "[UNK]"], ("[MASK]",))
        return tf.DebertaV2Tokenizer(vocab=vocab, do_lower_case=False, **common)

    pieces, merges = _train_bpe(byte_level=key in ("roberta", "modernbert", "qwen2", "qwen3"))
    if key == "roberta":
        return tf.RobertaTokenizer(vocab=_ids(["<s>", "<pad>", "</s>", "<unk>"] + pieces + ["<mask>"]),
                                   merges=merges, **common)
    if key == "modernbert":
        # ModernBERT's repos ship a bare tokenizer.json (OLMo's byte-level BPE plus BERT-style special tokens
        # appended) read by PreTrainedTokenizerFast; it returns no token_type_ids
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

        specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
        vocab = _ids(["<|endoftext|>"] + pieces + specials)
        backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
        return tf.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", cls_token="[CLS]",
                                          sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]",
                                          model_input_names=["input_ids", "attention_mask"], **common)
    if key in ("qwen2", "qwen3"):
        # base Qwen models: eos <|endoftext|>, no bos; pad_token=None overrides the class default (<|endoftext|>,
        # which the real repos declare too): every decoder here tests the no-pad case
        return tf.Qwen2Tokenizer(vocab=_ids(pieces + ["<|endoftext|>"]), merges=merges, pad_token=None, **common)
    if key in ("llama", "mistral"):
        # SentencePiece BPE with byte fallback, <unk> <s> </s> first; <s> before every text, no </s> after
        return tf.LlamaTokenizer(vocab=_ids(["<unk>", "<s>", "</s>"] + BYTES + pieces), merges=merges,
                                 add_bos_token=True, add_eos_token=False, **common)
    if key == "gemma":
        # Gemma's vocabulary has <pad> at id 0 and the real repos declare it; here it is left undeclared so that
        # every decoder tests the no-pad case
        vocab = _ids(["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"] + BYTES + pieces)
        return tf.GemmaTokenizer(vocab=vocab, merges=merges, pad_token=None,
                                 add_bos_token=True, add_eos_token=False, **common)
    raise KeyError(f"unknown family {key!r}; known: {', '.join(FAMILIES)}")


def _config(key: str, tok, num_labels: int):
    import transformers as tf

    ids = {"pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    size = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
            "max_position_embeddings": MAX_LENGTH}
    if key == "distilbert":
        size = {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "max_position_embeddings": MAX_LENGTH}
    extra: dict = {}
    if key in ("roberta", "xlm-roberta", "mpnet"):
        # positions start after padding_idx: 2 more rows than tokens, as roberta-base's 514 for 512
        size["max_position_embeddings"] = MAX_LENGTH + 2
        extra = {"type_vocab_size": 1} if key != "mpnet" else {}
    elif key in ("electra", "albert"):
        extra = {"embedding_size": 16}                  # factorised embeddings, projected up to hidden_size
    elif key == "deberta-v2":
        # DeBERTa-v3: disentangled relative attention only (no absolute positions), no token type embeddings
        extra = {"relative_attention": True, "pos_att_type": ["p2c", "c2p"], "position_biased_input": False,
                 "max_relative_positions": -1, "position_buckets": 256, "norm_rel_ebd": "layer_norm",
                 "share_att_key": True, "type_vocab_size": 0, "pooler_hidden_size": 32, "pooler_hidden_act": "gelu"}
    elif key == "modernbert":
        extra = {"cls_token_id": tok.cls_token_id, "sep_token_id": tok.sep_token_id, "classifier_pooling": "mean",
                 "bos_token_id": tok.cls_token_id, "eos_token_id": tok.sep_token_id}
    elif FAMILIES[key].is_decoder:
        # grouped-query attention (one key/value head); pad_token_id None as in the shipped configs
        extra = {"num_key_value_heads": 1, "pad_token_id": None, "tie_word_embeddings": True}
        if key in ("qwen2", "qwen3"):
            extra["bos_token_id"] = tok.eos_token_id    # Qwen's config names <|endoftext|> for both
        if key in ("qwen3", "gemma"):
            extra["head_dim"] = 16                      # their default head_dim (128 / 256) ignores hidden_size
    config = getattr(tf, FAMILIES[key].config)(vocab_size=len(tok), num_labels=num_labels,
                                               initializer_range=0.1, **{**ids, **size, **extra})
    # no dropout anywhere (hidden, attention, embeddings, pooler, classifier head): deterministic outputs
    for name, value in config.to_dict().items():
        if "dropout" in name and (value is None or isinstance(value, (int, float))):
            setattr(config, name, 0.0)
    return config


def build_family_model(key: str, folder: Path, num_labels: int = 2) -> Path:
    """Write a tiny `key`-family model with a classification head for num_labels and its tokenizer to folder."""
    import torch
    from transformers import AutoModelForSequenceClassification

    folder = Path(folder)
    tok = _tokenizer(key)
    config = _config(key, tok, num_labels)
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    # make the saved files read as the Hub repos' do where transformers 5 writes them otherwise
    if key == "modernbert":      # the repos name the generic class (transformers 5 saves "TokenizersBackend")
        _patch_json(folder / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast"})
    if key in ("llama", "mistral", "gemma"):
        # their tokenizer_config.json spell out the bos handling; transformers 5 ignores these keys on load (the
        # <bos> comes from tokenizer.json's post-processor) and so the loaded tokenizer says add_bos_token False
        _patch_json(folder / "tokenizer_config.json", {"add_bos_token": True, "add_eos_token": False})
    if key in ("qwen2", "qwen3", "llama", "mistral"):
        # no pad_token_id key at all (transformers writes null); not for gemma, whose class default is 0
        _patch_json(folder / "config.json", {}, drop="pad_token_id")
    return folder


def _patch_json(path: Path, updates: dict, drop: str | None = None) -> None:
    data = {k: v for k, v in json.loads(path.read_text()).items() if k != drop}
    path.write_text(json.dumps({**data, **updates}, indent=2) + "\n")


_BUILT: dict[tuple[str, int], Path] = {}


def family_folder(key: str, tmp_path_factory, num_labels: int = 2) -> Path:
    """The folder of a `key`-family model, built once per test session (treat it as read-only)."""
    if (key, num_labels) not in _BUILT or not _BUILT[key, num_labels].exists():
        folder = tmp_path_factory.mktemp(f"family-{key}-{num_labels}")
        _BUILT[key, num_labels] = build_family_model(key, folder, num_labels)
    return _BUILT[key, num_labels]


@pytest.fixture
def family_model(request, tmp_path_factory) -> str:
    """Parametrize indirectly with family keys: the model folder (a str) of that family, shared by the session
    (bert when not parametrized)."""
    return str(family_folder(getattr(request, "param", "bert"), tmp_path_factory))
