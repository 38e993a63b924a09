"""Tokenization (and label encoding) with `datasets.map`, cached in Arrow next to the table it reads, with what
it cost and whether the cache served it."""

from __future__ import annotations

import os
import time

import numpy as np

from .labels import LabelEncoder
from .long_texts import TextPolicy, cut
from .sources import unwrapped_data_errors

PAIR_JOIN = "\n"               # between the two texts of a pair when the tokenizer's pair encoding has nothing
# characters of a row, per token of --max-length, above which its batch is cut here rather than by the tokenizer's
# truncation, whose overflowing pieces grow with the square of a pair's length (two 8,000-token texts: 3.8 s,
# against 0.05 s untruncated); the cut is the tokenizer's own (long_texts.longest_first), checked in the tests
LONG_ROW_CHARS = 16


def pair_is_separated(tokenizer) -> bool:
    """Whether the tokenizer puts something between the two texts of a pair (BERT's [SEP], Llama's BOS, the newline
    model/tokenizer.ensure_pair_separator writes into a decoder's pair template); Qwen's runs them together."""
    a = tokenizer("first", add_special_tokens=False)["input_ids"]
    b = tokenizer("second", add_special_tokens=False)["input_ids"]
    both, joined = tokenizer("first", "second")["input_ids"], a + b
    return not any(both[i:i + len(joined)] == joined for i in range(len(both) - len(joined) + 1))


class Tokenize:
    """Batched tokenization + label encoding for `datasets.map` (a class so datasets can hash it for caching).
    Each output row carries `doc`, the canonical row it comes from (several rows share one with --windows),
    and `truncated`, whether that row's text lost tokens to --max-length."""

    def __init__(self, tokenizer, policy: TextPolicy, pair: bool, encoder: LabelEncoder | None):
        self.tokenizer, self.policy, self.pair, self.encoder = tokenizer, policy, pair, encoder
        # a tokenizer whose pair template cannot be given a separator (no `tokenizers` backend): one text a line
        # apart, so the two texts never run together
        self.join = pair and not pair_is_separated(tokenizer)

    def __call__(self, batch):
        second = batch["text_b"] if self.pair else None
        if second is not None and any(t is None for t in second):
            second = [t or "" for t in second]
        if second is not None and self.join:
            batch = {**batch, "text_a": [a + PAIR_JOIN + b for a, b in zip(batch["text_a"], second, strict=True)]}
            second = None
        labels = ([self.encoder(raw, pos) for raw, pos in zip(batch["label"], batch["pos"], strict=True)]
                  if self.encoder else None)
        if self.policy.simple and not self._long(batch["text_a"], second):
            encoded = self.tokenizer(batch["text_a"], second, truncation=True, max_length=self.policy.max_length)
            encoded["truncated"] = [bool(e.overflowing) for e in encoded.encodings] if encoded.encodings else \
                [len(ids) >= self.policy.max_length for ids in encoded["input_ids"]]
            encoded.update(doc=batch["idx"], id=batch["id"])
            if labels is not None:
                encoded["labels"] = labels
        else:
            encoded = self._cut(batch, second, labels)
        encoded["length"] = [len(ids) for ids in encoded["input_ids"]]
        return encoded

    def _long(self, first: list[str], second: list[str] | None) -> bool:
        """Whether a row of the batch is long enough for the tokenizer's truncation to cost more than it should
        (LONG_ROW_CHARS); a slow tokenizer, without encodings to cut, truncates as ever."""
        if not getattr(self.tokenizer, "is_fast", False):
            return False
        lengths = [len(a) for a in first] if second is None else \
            [len(a) + len(b) for a, b in zip(first, second, strict=True)]
        return max(lengths, default=0) > LONG_ROW_CHARS * self.policy.max_length

    def _cut(self, batch, second, labels):
        full = self.tokenizer(batch["text_a"], second, truncation=False, return_attention_mask=False)
        out = {"input_ids": [], "token_type_ids": [], "truncated": [], "doc": [], "id": []}
        if labels is not None:
            out["labels"] = []
        for row, encoding in enumerate(full.encodings):
            pieces = cut(encoding, self.policy)
            shortened = len(pieces) > 1 or len(pieces[0][0]) < len(encoding.ids)
            for ids, types in pieces:
                out["input_ids"].append(ids)
                out["token_type_ids"].append(types)
                out["truncated"].append(shortened)
                out["doc"].append(batch["idx"][row])
                out["id"].append(batch["id"][row])
                if labels is not None:
                    out["labels"].append(labels[row])
        if "token_type_ids" not in full:                 # models without segment ids (RoBERTa, DistilBERT)
            del out["token_type_ids"]
        out["attention_mask"] = [[1] * len(ids) for ids in out["input_ids"]]
        return out


def _arrow_files(ds) -> list[str]:
    return [os.path.realpath(f["filename"]) for f in ds.cache_files]


def _cache_listing(ds) -> dict[str, tuple[int, int]]:
    """The Arrow files next to `ds`'s own (where `map` writes and looks up its cache): path -> (inode, mtime)."""
    files = _arrow_files(ds)
    if not files:
        return {}
    listing = {}
    with os.scandir(os.path.dirname(files[0])) as entries:
        for entry in entries:
            if entry.name.endswith(".arrow"):
                st = entry.stat()
                listing[os.path.realpath(entry.path)] = (st.st_ino, st.st_mtime_ns)
    return listing


def tokenize(ds, tokenizer, policy: TextPolicy, pair, encoder, desc: str, num_proc: int | None = None,
             stats: dict | None = None):
    """Tokenize (and encode labels) with `datasets.map`, cached in Arrow next to `ds`, by the text policy
    (long_texts.py). `stats`, when given, is updated with tokenize_s, tokenize_cached (the result was loaded from
    the cache, not computed), rows/s, the number of processes and how many texts were longer than the
    maximum length."""
    if num_proc is None:
        num_proc = min(os.cpu_count() or 1, 8) if len(ds) >= 200_000 else None
    before, started = _cache_listing(ds), time.perf_counter()
    with unwrapped_data_errors():
        out = ds.map(Tokenize(tokenizer, policy, pair, encoder), batched=True, batch_size=1000,
                     num_proc=num_proc, remove_columns=ds.column_names, desc=desc)
    if stats is not None:
        seconds = time.perf_counter() - started
        files = _arrow_files(out)
        cached = bool(files) and all(f in before and before[f] == (os.stat(f).st_ino, os.stat(f).st_mtime_ns)
                                     for f in files)
        stats.update({"tokenized_rows": len(out), "tokenize_s": round(seconds, 3), "tokenize_cached": cached,
                      "tokenize_rows_per_s": round(len(out) / max(seconds, 1e-9), 1), "num_proc": num_proc or 1})
        columns = out.with_format("numpy").select_columns(["doc", "truncated"])[:]
        stats.update(texts=len(ds), long_texts=len(np.unique(columns["doc"][columns["truncated"].astype(bool)])),
                     max_length=policy.max_length, truncation=policy.truncation, windows=policy.windows)
    return out


def _rows(n) -> str:
    return f"{n} row" + ("" if n == 1 else "s")


def describe_stats(split: str, s: dict) -> str:
    """One line per split: `data train: 400000 rows | read 12.10 s | tokenized 400000 rows in 20.30 s (19704 rows/s,
    2 processes)`, each step marked `(Arrow cache)` when the cache served it instead of computing it."""
    # the split's texts as read (a validation split carved from the training file has no read of its own: its
    # texts, not its tokenized rows, which --windows makes more of)
    parts = [f"data {split}: {_rows(s.get('rows', s.get('texts', s.get('tokenized_rows', '?'))))}"]
    if "read_s" in s:
        parts.append(f"read {s['read_s']:.2f} s" + (" (Arrow cache)" if s["read_cached"] else ""))
    if "tokenize_s" in s:
        where = " (Arrow cache)" if s["tokenize_cached"] else ""
        procs = f"{s['num_proc']} process" + ("es" if s["num_proc"] > 1 else "")
        parts.append(f"tokenized {_rows(s['tokenized_rows'])} in {s['tokenize_s']:.2f} s{where} "
                     f"({s['tokenize_rows_per_s']:.0f} rows/s, {procs})")
    if s.get("long_texts"):
        how = f"cut into {s['tokenized_rows']} windows" if s.get("windows") is not None else \
            f"kept by --truncation {s['truncation']}"
        parts.append(f"{s['long_texts']} of {s['texts']} texts longer than {s['max_length']} tokens ({how})")
    return " | ".join(parts)

