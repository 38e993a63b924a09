"""Shared fixtures: a tiny BERT built here (no network, no ../shared) and small data in GLUE's layouts."""

from __future__ import annotations

import os
import random
import tempfile

# before datasets / transformers are imported anywhere: offline, and an Arrow cache private to this test run
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("HF_DATASETS_CACHE", tempfile.mkdtemp(prefix="tuneloop-test-cache-"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# one thread everywhere (this process and the training processes tests start): tiny models gain nothing from
# more, and runs compared for bit-equality must use the same float reduction order
os.environ["OMP_NUM_THREADS"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

WORDS = ("the a one this that cat dog bird fish cow horse car bus train boat plane red blue green black white "
         "big small old new fast slow runs walks sees eats likes has is was and or with on in at to from "
         "alpha beta gamma yes no not good bad great awful movie film plot actor story").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLER = [w for w in WORDS if w not in ("alpha", "beta", "gamma", "good", "bad", "great", "awful", "not")]


DIGITS = list("0123456789")


def sample_words() -> list[str]:
    """The lower-cased words of tuneloop's MRPC sample (BERT's basic tokenization) that WORDS lacks: a tiny model
    that runs the sample (the docs' and examples' runs) reads them instead of [UNK] (a training set that is mostly
    unknown tokens stops the run: data/unknown_tokens.py)."""
    from importlib.resources import files

    from transformers import BertTokenizer

    backend = BertTokenizer(vocab={w: i for i, w in enumerate(SPECIALS)}, do_lower_case=True).backend_tokenizer
    seen, words = set(SPECIALS + WORDS + DIGITS), []
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        text = backend.normalizer.normalize_str((files("tuneloop") / "sample_data" / "mrpc" / name).read_text("utf-8"))
        for word, _ in backend.pre_tokenizer.pre_tokenize_str(text):
            if word not in seen:
                seen.add(word)
                words.append(word)
    return words


def tiny_bert(config_kwargs: dict, tokenizer_kwargs: dict, extra_words=()):
    """(model, tokenizer): a BERT over SPECIALS + WORDS, initialised with torch seed 0, then its vocabulary grown by
    DIGITS and `extra_words` (new rows after the seeded init, so every other weight is the same whatever is added)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    base = SPECIALS + WORDS
    vocab = {w: i for i, w in enumerate(base + DIGITS + list(extra_words))}
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=len(base), **config_kwargs))
    model.resize_token_embeddings(len(vocab), mean_resizing=False)
    return model, BertTokenizer(vocab=vocab, do_lower_case=True, **tokenizer_kwargs)


def build_tiny_model(folder: Path, num_labels: int = 2, dropout: float = 0.0, extra_words=()) -> Path:
    model, tokenizer = tiny_bert(
        dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64, num_labels=num_labels,
             # a wider init and no dropout let 2 layers × 32 learn the toy tasks in a few dozen steps
             initializer_range=0.1, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout),
        dict(model_max_length=64), extra_words)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-bert")))


def sentence(rng: random.Random, n: int | None = None) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(n or rng.randint(3, 9)))


def keyword_pair(rng: random.Random) -> tuple[int, str, str]:
    """A learnable pair task: label 1 when the second sentence says alpha, 0 when it says beta."""
    label = rng.randint(0, 1)
    words = sentence(rng).split()
    words.insert(rng.randint(0, len(words)), "alpha" if label else "beta")
    return label, sentence(rng), " ".join(words)


def write_mrpc_folder(folder: Path, n_train=200, n_dev=60, n_test=30, seed=0) -> Path:
    """A folder in GLUE MRPC's exact layout (byte-order mark, header, a stray double quote) with a toy task."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for name, n in (("train.tsv", n_train), ("dev.tsv", n_dev)):
        lines = [header]
        for i in range(n):
            label, a, b = keyword_pair(rng)
            if i % 17 == 3:
                a = f'He said "{a}'          # unbalanced quote, as in real MRPC rows
            lines.append(f"{label}\t{100000 + i}\t{200000 + i}\t{a}\t{b}\n")
        (folder / name).write_bytes(b"\xef\xbb\xbf" + "".join(lines).encode())
    lines = ["index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"]
    for i in range(n_test):
        _, a, b = keyword_pair(rng)
        lines.append(f"{i}\t{300000 + i}\t{400000 + i}\t{a}\t{b}\n")
    (folder / "test.tsv").write_text("".join(lines), encoding="utf-8")
    return folder


@pytest.fixture
def mrpc_dir(tmp_path) -> Path:
    return write_mrpc_folder(tmp_path / "MRPC")


@pytest.fixture(scope="session")
def shared_mrpc_dir(tmp_path_factory) -> Path:
    return write_mrpc_folder(tmp_path_factory.mktemp("data") / "MRPC")


def fast_options(tiny_model: str, **extra) -> dict:
    """Options for a quick run on the tiny model (it needs a larger learning rate than a pretrained one); no report,
    no TF-IDF baseline and no small-data settings (the toy sets are small), which tests about them turn on."""
    return {"model": tiny_model, "lr": 3e-3, "epochs": 3, "batch_size": 8, "quiet": True, "seed": 0,
            "warmup_ratio": 0.1, "mixed_precision": "no", "report": False, "baseline": "none", "small_data": "off",
            **extra}
