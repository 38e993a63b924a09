"""Texts given in memory, checked in one place: what `Classifier.predict` / `predict_proba` take (a text, a pair,
a list of either, or a pandas DataFrame read by frames.py) and the texts of a `tuneloop serve` request all go
through `checked`, so the same bad input gets the same message everywhere: at least one row, every row a text or
a [first, second] pair of texts with something in each, one kind throughout, and the kind the model reads. A number
is read as the text it is written as (`as_text`), as training reads it."""

from __future__ import annotations

import numbers

from ..data.memory import decoded, reads_as_text
from ..data.sources import half_character
from ..exceptions import TuneloopError

Item = tuple[str, "str | None"]          # (text, second text or None)


class Listed:
    """How messages name the rows of a list: `texts[i], row i+1` (the Python index, and the count people use)."""

    name = "texts"
    empty = "texts: nothing to predict (an empty list); give a text or a non-empty list"

    def where(self, i: int) -> str:
        return f"texts[{i}], row {i + 1}"

    def no_text(self, i: int, part: int, value) -> str:
        return f"{self.where(i)}: empty text" + (" (the second of the pair)" if part else "")

    def part(self, part: int) -> str:
        return "the second text" if part else "the text"


class Framed:
    """How messages name the rows of a DataFrame: by index and column."""

    def __init__(self, index, columns: list[str], hint: str = "", name: str = "DataFrame"):
        self.index, self.columns, self.hint, self.name = list(index), columns, hint, name     # name: or "Series"
        self.empty = f"{name}: no rows to predict"

    def where(self, i: int) -> str:
        return f"{self.name}: row with index {self.index[i]!r}"

    def part(self, part: int) -> str:
        return f"column {self.columns[part]!r}"

    def no_text(self, i: int, part: int, value) -> str:
        said = f"{self.where(i)}: column {self.columns[part]!r} has no text (got {value!r})"
        return said + (self.hint if reads_as_text(self.index[i]) and not isinstance(value, str) else "")


LISTED = Listed()


def as_text(value):
    """A number as the text it is written as (42 → "42", 3.5 → "3.5"), as training reads a number in a text column
    (data/sources.py) and `tuneloop predict` a JSON file's: a model trained on a table with such a text then
    predicts that table. Anything else — texts, None, NaN, booleans, lists — as it is, for `checked` to judge."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool) and type(value).__name__ != "bool_":
        value = value.item() if hasattr(value, "item") else value
        if isinstance(value, (int, float)) and value == value:
            return str(value)
    return value


def checked(rows: list[tuple], pair: bool | None, text_columns=(), names=LISTED) -> list[Item]:
    """`rows` — a tuple per row: (text,) or (first, second) — as (text, second text or None), once every rule
    holds; otherwise a TuneloopError naming the first row that breaks one (`names`: Listed or Framed). `pair`:
    whether the model reads pairs (None: unknown, either kind)."""
    if not rows:
        raise TuneloopError(names.empty)
    for i, row in enumerate(rows):
        for part, value in enumerate(row):
            if not isinstance(value, str) or not value.strip():
                raise TuneloopError(names.no_text(i, part, value))
            if (broken := half_character(value)) is not None:
                raise TuneloopError(f"{names.where(i)}: {names.part(part)} {broken}")
    if len({len(row) for row in rows}) > 1:
        raise TuneloopError(f"{names.name}: a mix of single texts and pairs; give one kind")
    if pair is True and len(rows[0]) == 1:
        reads = f" ({', '.join(text_columns)})" if text_columns else ""
        one = ' (["first", "second"] is two texts: one pair is [["first", "second"]])' if len(rows) == 2 else ""
        raise TuneloopError(f"the model reads pairs of texts{reads}; give a list of [first, second] pairs{one}")
    if pair is False and len(rows[0]) == 2:
        raise TuneloopError("the model reads one text per row, not pairs")
    return [(row[0], row[1] if len(row) == 2 else None) for row in rows]


def items_of(texts, pair: bool | None, text_columns=()) -> tuple[list[Item], bool]:
    """(checked rows, whether one input was given rather than a list) for a text, a (first, second) pair, or a list
    (any iterable but a mapping) of texts and [first, second] pairs — from Python or a JSON body alike."""
    if getattr(texts, "ndim", None) == 0 and hasattr(texts, "item"):     # np.array("a text"): its one text
        texts = texts.item()
    texts = decoded(texts)                                  # b"text", as training reads it (data/memory.py)
    if isinstance(texts, str):
        return checked([(texts,)], pair, text_columns), True
    if isinstance(texts, tuple) and len(texts) == 2:
        both = tuple(as_text(decoded(t)) for t in texts)
        if all(isinstance(t, str) for t in both):
            return checked([both], pair, text_columns), True
    if isinstance(texts, (bytes, dict)) or not hasattr(texts, "__iter__"):
        raise TuneloopError(f"texts: give a text, a [first, second] pair or a list of them, got "
                            f"{type(texts).__name__}")
    rows = []
    for i, item in enumerate(texts):
        if getattr(item, "ndim", None) == 1 and hasattr(item, "tolist"):     # a row of a numpy array of pairs
            item = item.tolist()
        item = [as_text(decoded(t)) for t in item] if isinstance(item, (list, tuple)) else as_text(decoded(item))
        if isinstance(item, str):
            rows.append((item,))
        elif isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(t, str) for t in item):
            rows.append(tuple(item))
        else:
            raise TuneloopError(f"{LISTED.where(i)}: give a text or a [first, second] pair of texts, got "
                                f"{str(item)[:80]!r}")
    return checked(rows, pair, text_columns), False


def encoded(items: list[Item], tokenizer, policy):
    """Checked rows tokenized as a run reads its texts (data/tokenize.Tokenize: long texts cut or windowed, each
    piece carrying its row in `doc`), held as plain lists (predict/batches.Tokenized): no datasets.Dataset."""
    from ..data.tokenize import Tokenize
    from .batches import Tokenized

    n = len(items)
    columns = Tokenize(tokenizer, policy, items[0][1] is not None, None)(
        {"idx": list(range(n)), "pos": list(range(1, n + 1)), "id": [str(i) for i in range(n)],
         "text_a": [a for a, _ in items], "text_b": [b for _, b in items], "label": [None] * n})
    return Tokenized(dict(columns))
