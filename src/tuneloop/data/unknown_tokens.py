"""Whether the model's tokenizer can read the training texts: the share of their tokens that are its unknown token
([UNK] of BERT's WordPiece; byte-level tokenizers, RoBERTa's and most decoders', have none). A model reads nothing
of an unknown token but that one was there, so texts in a script or of symbols (emoji) its vocabulary lacks train a
model blind to them. From WARN_SHARE of the tokens on the run says so; from STOP_SHARE on it stops (a DataError,
before any training), quoting the text with the most unknown tokens."""

from __future__ import annotations

import logging

import numpy as np

from ..exceptions import DataError

log = logging.getLogger("tuneloop")

WARN_SHARE = 0.05     # of the texts' tokens (special tokens left out): said in the log
STOP_SHARE = 0.5      # the model would read less than half of what it is given: the run stops
SAMPLE = 20_000       # rows counted at most, spread evenly over the split (a share, not a census)


def _content(flat: np.ndarray, tokenizer, unk: int) -> int:
    """How many of these ids are the texts' own tokens: every id but the special ones ([CLS], [SEP], padding; the
    unknown token counts as the text's)."""
    return int((~np.isin(flat, [i for i in tokenizer.all_special_ids if i != unk])).sum())


def counted(input_ids: list[list[int]], tokenizer) -> tuple[int, int]:
    """(unknown tokens, the texts' own tokens: _content) in these rows' ids; (0, 0) for a tokenizer without one."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or not input_ids:
        return 0, 0
    flat = np.concatenate([np.asarray(ids, dtype=np.int64) for ids in input_ids])
    return int((flat == unk).sum()), _content(flat, tokenizer, unk)


def unknown_tokens(ds, tokenizer) -> tuple[float, int | None]:
    """(the share of the tokenized rows' tokens (of SAMPLE rows at most), special tokens left out, that are the
    unknown token; the `doc` — the source row's idx — of the row with the most of them, None when there are
    none)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or ds is None or len(ds) == 0:
        return 0.0, None
    import pyarrow.compute as pc

    if len(ds) > SAMPLE:
        ds = ds.select(np.linspace(0, len(ds) - 1, SAMPLE).astype(np.int64))
    table = ds.with_format("arrow").select_columns(["input_ids", "doc"])[:]
    ids = table.column("input_ids").combine_chunks()
    flat = np.asarray(pc.list_flatten(ids))
    content = _content(flat, tokenizer, unk)
    unknown = flat == unk
    if not unknown.any():
        return 0.0, None
    rows = np.repeat(np.arange(len(ids)), np.asarray(pc.list_value_length(ids)))
    per_row = np.bincount(rows, weights=unknown, minlength=len(ids))
    return float(unknown.sum() / max(content, 1)), int(table.column("doc")[int(per_row.argmax())].as_py())


def warn_unknown_in_predictions(unknown: int, content: int, tokenizer, source: str) -> bool:
    """`tuneloop predict`, `Classifier.predict`, `serve`: from WARN_SHARE of the input's tokens unknown, say that its
    predictions are guesses (they are still made: the rows are the user's to judge); whether it was said."""
    share = unknown / max(content, 1)
    if share >= WARN_SHARE:
        log.warning(f"{source}: {share:.0%} of the texts' tokens are the tokenizer's unknown token "
                    f"{tokenizer.unk_token}: the model reads nothing of them, so rows made mostly of them get guesses "
                    "(a model whose vocabulary covers these texts would read them)")
        return True
    return False


def check_unknown_tokens(train, tokenizer, raw_train, source: str) -> float:
    """Say (WARN_SHARE) or stop the run (STOP_SHARE) when the tokenized training rows are that much unknown
    tokens; returns the share. `raw_train`: the rows as read (to quote the worst one), `source`: what they are."""
    share, doc = unknown_tokens(train, tokenizer)
    if share < WARN_SHARE:
        return share
    docs = np.asarray(raw_train.with_format("numpy")["idx"])
    text = raw_train[int(np.flatnonzero(docs == doc)[0])]["text_a"]
    text = text if len(text) <= 60 else text[:57] + "..."
    what = (f"{source}: {share:.0%} of the training texts' tokens are the tokenizer's unknown token "
            f"{tokenizer.unk_token} (the most in {text!r}), and the model reads nothing of them")
    fix = ("choose a --model whose vocabulary covers these texts (a multilingual one for other scripts; a "
           "byte-level tokenizer, RoBERTa's or a decoder's, reads every character)")
    if share >= STOP_SHARE:
        raise DataError(f"{what}: {fix}")
    log.warning(f"{what}; to read them, {fix}")
    return share
