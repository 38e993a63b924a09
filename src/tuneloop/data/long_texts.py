"""Texts longer than --max-length: which tokens to keep (--truncation head, tail or head+tail) or how to cut a
text into overlapping windows (--windows), the same policy at training, evaluation, prediction and in the saved
model (model/tuneloop.json). Window predictions are pooled back to one per text by metrics.Accumulator.

The cuts work on a fast tokenizer's untruncated encoding: `sequence_ids` tell which positions belong to which
text and which are the template's special tokens, so any model's template ([CLS] a [SEP] b [SEP], <s> a </s></s>
b </s>, ...) is kept as the tokenizer builds it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..config.options import POOLING, TRUNCATION  # noqa: F401  (the choices, with the options)
from ..exceptions import ConfigError

# head+tail keeps the first quarter of the budget and fills the rest from the end: the split Sun et al. (2019,
# "How to Fine-Tune BERT for Text Classification?") found best for long texts, 128 + 382 of 510 tokens
HEAD_SHARE = 0.25


def default_max_length(tokenizer) -> int:
    """--max-length when not given: the tokenizer's own maximum, at most 512. Loading a model for training or use
    lowers a tokenizer's maximum to the model's position embeddings (model/loading.fit_to_positions): a tokenizer
    that names none (transformers' 1e30) or a larger one would let a long text fail inside the model."""
    return min(getattr(tokenizer, "model_max_length", 512) or 512, 512)


@dataclass(frozen=True)
class TextPolicy:
    max_length: int
    truncation: str = "head"
    windows: int | None = None          # tokens neighbouring windows share (transformers' `stride`)
    pooling: str = "mean"

    @property
    def simple(self) -> bool:
        """Plain head truncation: the tokenizer's own, fastest path."""
        return self.truncation == "head" and self.windows is None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None, max_length: int) -> "TextPolicy":
        data = dict(data or {})
        data["max_length"] = data.get("max_length") or max_length
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def check(self, tokenizer, pair: bool) -> None:
        """Refuse what cannot work with this tokenizer, before any text is tokenized."""
        special, texts = tokenizer.num_special_tokens_to_add(pair=pair), 2 if pair else 1
        if self.max_length < special + texts:
            raise ConfigError(f"--max-length {self.max_length}: the model adds {special} special token(s) to "
                              f"{'a pair' if pair else 'a text'}, leaving no room for {'both texts' if pair else 'it'}"
                              f"; give at least {special + texts}")
        if not self.simple and not getattr(tokenizer, "is_fast", False):
            raise ConfigError("--truncation tail / head+tail and --windows need a fast (Rust) tokenizer; this model "
                              "only has a slow one")
        if self.windows is not None:
            budget = self.max_length - tokenizer.num_special_tokens_to_add(pair=pair)
            room = budget // 2 if pair else budget      # a pair windows the longer text in at least half the budget
            if not 0 <= self.windows < room:
                raise ConfigError(f"--windows {self.windows}: neighbouring windows can share at most {room - 1} "
                                  f"tokens at --max-length {self.max_length} ({'half of ' if pair else ''}"
                                  f"{budget} tokens of text per window); give a smaller overlap or a larger "
                                  "--max-length")


def split_budget(len_a: int, len_b: int, budget: int) -> tuple[int, int]:
    """How many tokens each text keeps when both must fit `budget`: the longer one gives first (transformers'
    longest_first)."""
    excess = len_a + len_b - budget
    if excess <= 0:
        return len_a, len_b
    gap = min(excess, abs(len_a - len_b))
    len_a, len_b = (len_a - gap, len_b) if len_a >= len_b else (len_a, len_b - gap)
    excess -= gap
    return len_a - (excess + 1) // 2, len_b - excess // 2


def longest_first(len_a: int, len_b: int, budget: int) -> tuple[int, int]:
    """How many tokens each text keeps under the `tokenizers` library's own longest_first (what `truncation=True`
    does to a pair): the shorter text whole where the longer can fill the rest, else half the budget each, the odd
    token to the longer. A single text (len_b 0) keeps `budget`."""
    if len_a + len_b <= budget:
        return len_a, len_b
    short, long = sorted((len_a, len_b))
    long = short if short > budget else max(short, budget - short)
    if short + long > budget:
        short, long = budget // 2, budget // 2 + budget % 2
    return (long, short) if len_a > len_b else (short, long)


def kept(positions: list[int], k: int, truncation: str) -> list[int]:
    """`k` of the positions by the truncation policy."""
    if k >= len(positions):
        return positions
    if k <= 0:
        return []
    if truncation == "head":
        return positions[:k]
    if truncation == "tail":
        return positions[len(positions) - k:]
    head = int(k * HEAD_SHARE)
    return positions[:head] + positions[len(positions) - (k - head):]


def window_starts(length: int, size: int, overlap: int) -> list[int]:
    """Starts of windows of `size` over `length` tokens, neighbours sharing `overlap`; the last one ends at the
    text's end."""
    if length <= size:
        return [0]
    step = size - overlap
    starts = list(range(0, length - size, step))
    return starts + [length - size]


def cut(encoding, policy: TextPolicy) -> list[tuple[list[int], list[int]]]:
    """(input ids, token type ids) of the piece(s) an untruncated encoding becomes: one, cut by the truncation
    policy, or several windows."""
    sequence = encoding.sequence_ids
    special = [i for i, s in enumerate(sequence) if s is None]
    texts = [[i for i, s in enumerate(sequence) if s == n] for n in (0, 1)]
    budget = policy.max_length - len(special)
    if policy.windows is None or len(texts[0]) + len(texts[1]) <= budget:
        split = longest_first if policy.simple else split_budget        # simple: as the tokenizer would cut
        keep_a, keep_b = split(len(texts[0]), len(texts[1]), budget)
        pieces = [kept(texts[0], keep_a, policy.truncation) + kept(texts[1], keep_b, policy.truncation)]
    else:
        # the longer text is windowed; the other keeps what the truncation policy leaves of up to half the budget
        longer = int(len(texts[1]) > len(texts[0]))
        other = texts[1 - longer]
        fixed = kept(other, min(len(other), budget // 2), policy.truncation)
        size = budget - len(fixed)
        windowed = texts[longer]
        pieces = [fixed + windowed[start:start + size]
                  for start in window_starts(len(windowed), size, min(policy.windows, size - 1))]
    out = []
    for piece in pieces:
        positions = sorted(special + piece)
        out.append(([encoding.ids[i] for i in positions], [encoding.type_ids[i] for i in positions]))
    return out
