"""Data from Python: a pandas DataFrame, a 🤗 `datasets.Dataset` (or a `DatasetDict`'s split), a dict of columns
(`{"text": [...], "label": [...]}`), or a pair of lists `(texts, labels)` — texts as strings or `(first, second)`
pairs — held as a `Table` that data/sources.py reads like a file: the same column detection, label handling, errors
(naming the DataFrame's row and column) and Arrow cache (keyed by the content instead of a file's size and time)."""

from __future__ import annotations

import math
from typing import Iterator

from ..exceptions import DataError
from .readers import position_word

PAIR_COLUMNS = ("text", "text_pair")          # the columns a (texts, labels) pair of lists becomes


class Table:
    """Rows held in memory, with what a file would tell: column names, rows with their position (a DataFrame's
    index label, else 1-based), a name for messages, and a fingerprint of the content."""

    def __init__(self, split: str, kind: str, columns: list[str], rows: list[tuple[object, dict]],
                 hint: str = ""):
        self.split, self.kind, self.columns, self._rows = split, kind, columns, rows
        self.position_word = position_word(str(self))     # a DataFrame's row by its index label (df.loc[...])
        self.hint = hint                # added to "cannot tell which column holds the text" (a frame's texts as index)
        self._fingerprint = None

    def rows(self) -> Iterator[tuple[object, dict]]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __str__(self) -> str:             # how messages, config.yaml and reports name it
        word = {"train": "train=", "validation": "validation=", "test": "test="}.get(self.split, f"{self.split}=")
        return f"{word} ({self.kind}, {len(self)} rows)"

    __repr__ = __str__

    def held_out_words(self) -> tuple[str, str]:
        """How a validation part held out of this table is told: its name, and how to give validation rows instead
        (an estimator's fit(X, y) in its own words)."""
        if self.kind.startswith("fit("):
            return self.kind, f"pass {self.kind[:-1]}, validation=(X_val, y_val)) to use your own"
        return str(self), "give validation= to use your own"

    def __deepcopy__(self, memo) -> "Table":           # dataclasses.asdict copies configs: the rows are read-only
        return self

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            from datasets.fingerprint import Hasher

            self._fingerprint = Hasher.hash([self.split, self.columns, self._rows])
        return self._fingerprint


def decoded(value):
    """bytes as the UTF-8 text they hold (DataError when they are not); anything else as it is."""
    if not isinstance(value, (bytes, bytearray)):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"a value is bytes that are not UTF-8 text ({bytes(value[:24])!r}); decode it to str "
                        "first") from None


def reads_as_text(value) -> bool:
    """Whether an index label looks like a text (words with a space between them), not an id: a DataFrame whose
    texts are its index gets a hint to reset it (here for training, predict/inputs.py for predictions)."""
    return isinstance(value, str) and " " in value.strip()


def _plain(value):
    """A cell as a plain Python value (numpy scalars, pandas NA and NaN become Python values / None)."""
    if value is None:
        return None
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
    except ImportError:
        pass
    if isinstance(value, (bytes, bytearray)):          # str(b"text") would be the text "b'text'"
        return decoded(value)
    if getattr(value, "ndim", 0) == 1 and hasattr(value, "tolist"):     # a row's labels as a numpy array
        return [_plain(v) for v in value.tolist()]
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        try:
            value = value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _from_frame(df, split: str) -> Table:
    columns = [str(c) for c in df.columns]
    if len(set(columns)) != len(columns):
        raise DataError(f"{split}=: the DataFrame has repeated column names ({', '.join(columns)}); rename them")
    records = df.to_dict("records")
    labels = [_plain(index) for index in df.index]
    by_index = all(isinstance(x, int) and not isinstance(x, bool) for x in labels)   # errors name df.loc[...]
    rows = [(label if by_index else i, {str(k): _plain(v) for k, v in record.items()})
            for i, (label, record) in enumerate(zip(labels, records, strict=True), start=1)]
    texts_as_index = bool(labels) and all(reads_as_text(x) for x in labels[:100])
    hint = f"; the texts look like the DataFrame's index: pass {split}=df.reset_index(names=\"text\")"
    hint = hint if texts_as_index else ""
    return Table(split, "DataFrame" if by_index else "DataFrame, rows counted from 1", columns, rows, hint)


def _from_dataset(ds, split: str) -> Table:
    features = getattr(ds, "features", {}) or {}
    names = {c: f.names for c, f in features.items() if hasattr(f, "names") and hasattr(f, "int2str")}
    rows = []
    for i, record in enumerate(ds, start=1):
        row = {}
        for column, value in record.items():
            value = _plain(value)
            if column in names and isinstance(value, int) and 0 <= value < len(names[column]):
                value = names[column][value]        # a ClassLabel: the class's name, as a user would write it
            row[column] = value
        rows.append((i, row))
    return Table(split, "Dataset", list(ds.column_names), rows)


def _from_lists(data, split: str, kind: str = "lists") -> Table:
    texts, labels = data
    labels = _not_indicator(labels, split)
    texts, labels = list(texts), (list(labels) if labels is not None else None)
    if labels is not None and len(texts) != len(labels):
        raise DataError(f"{split}=: {len(texts)} texts but {len(labels)} labels; give one label per text")
    pairs = bool(texts) and all(isinstance(t, (tuple, list)) for t in texts)
    if pairs and any(len(t) != 2 for t in texts):
        bad = next(i for i, t in enumerate(texts, start=1) if len(t) != 2)
        raise DataError(f"{split}=: text {bad} has {len(texts[bad - 1])} parts; give a text or a (first, second) pair")
    columns = list(PAIR_COLUMNS if pairs else PAIR_COLUMNS[:1]) + (["label"] if labels is not None else [])
    rows = []
    for i, text in enumerate(texts, start=1):
        row = dict(zip(PAIR_COLUMNS, [_plain(t) for t in text], strict=True)) if pairs else {"text": _plain(text)}
        if labels is not None:
            row["label"] = _plain(labels[i - 1])
        rows.append((i, row))
    return Table(split, kind, columns, rows)


def fit_table(data: tuple, split: str, names: tuple[str, str] = ("X", "y")) -> Table:
    """(texts, targets) of a scikit-learn estimator's fit(X, y), checked there in its words (sklearn.check_fit_data),
    as the Table tuneloop.train reads: its columns text (text_pair) and label, recorded as `train= (fit(X, y), N
    rows)`."""
    return _from_lists(data, split, f"fit({names[0]}, {names[1]})")


def in_fit_words(message: str, table: Table, names: tuple[str, str] = ("X", "y")) -> str:
    """A message of tuneloop's reading about `table` (a fit_table) in the estimator's words: the table named by
    `names` instead of `train= (...)`, its columns (text, text_pair, label) as X (X's first and second text) and
    y, which the caller passed and never named. Any other message as it is."""
    described = str(table)
    if not message.startswith(described):
        return message
    x, y = names
    pairs = "text_pair" in table.columns
    words = {"in column 'label'": f"in {y}", "column 'label'": y, "the label column": y,
             "column 'text_pair'": f"{x}'s second text", "column 'text'": f"{x}'s first text" if pairs else x}
    message = f"{x}, {y} ({len(table)} rows)" + message[len(described):]
    for said, meant in words.items():
        message = message.replace(said, meant)
    return message


def _not_indicator(labels, split: str, what: str = "the labels"):
    """`labels` (an (n, 1) array as n labels); a 2-D array (scikit-learn's multi-label indicator matrix, one 0/1
    column per label) is refused: its rows would be read as label sets of the values 0 and 1."""
    shape = getattr(labels, "shape", ())
    if len(shape) == 2 and shape[1] != 1:
        raise DataError(f"{split}=: {what} are a 2-D array {tuple(shape)} (a multi-label indicator matrix?); "
                        "give each text's labels as a list of names, e.g. [['news'], ['news', 'sports']] "
                        "(scikit-learn's MultiLabelBinarizer.inverse_transform gives them)")
    if len(shape) > 2:
        raise DataError(f"{split}=: {what} are a {len(shape)}-D array {tuple(shape)}; give one label per text")
    return labels.reshape(-1) if len(shape) == 2 else labels


def _from_columns(data: dict, split: str) -> Table:
    """A dict of equally long columns ({"text": [...], "label": [...]}, as `Dataset.from_dict` takes)."""
    data = {name: _not_indicator(column, split, f"the values of column {name!r}")
            for name, column in data.items()}
    columns = [str(c) for c in data]
    values = [list(v) if hasattr(v, "__len__") and not isinstance(v, (str, bytes, dict)) else None
              for v in data.values()]                  # list(): a Series by position, not by its index labels
    if any(v is None for v in values):
        bad = columns[next(i for i, v in enumerate(values) if v is None)]
        raise DataError(f"{split}=: column {bad!r} of the dict is not a list of values; give every column as a list")
    lengths = {len(v) for v in values}
    if len(lengths) > 1:
        raise DataError(f"{split}=: the dict's columns differ in length "
                        f"({', '.join(f'{c}: {len(v)}' for c, v in zip(columns, values, strict=True))})")
    rows = [(i, {c: _plain(v[i - 1]) for c, v in zip(columns, values, strict=True)})
            for i in range(1, (lengths.pop() if lengths else 0) + 1)]
    return Table(split, "dict", columns, rows)


def as_table(data, split: str):
    """`data` as a Table (a path or None is returned as it is: files are data/sources.py's own); a Table without
    rows is refused here, naming the argument."""
    if data is None or isinstance(data, (str, Table)) or hasattr(data, "__fspath__"):
        return data
    table = _as_table(data, split)
    if not len(table):
        raise DataError(f"{table}: no rows; give at least one example")
    return table


def data_option(data, split: str):
    """`data` as a data option's value (train_file, validation_file, test_file): a path as its string, anything else
    as as_table makes it; None stays None."""
    table = as_table(data, split)
    return str(table) if hasattr(table, "__fspath__") else table


def _as_table(data, split: str) -> Table:
    kind = type(data).__name__
    if kind == "DatasetDict":
        if split not in data:
            raise DataError(f"{split}=: the DatasetDict has no {split!r} split (splits: {', '.join(data)}); pass "
                            f"the split itself, e.g. {split}=dataset['{next(iter(data), 'train')}']")
        data, kind = data[split], "Dataset"
    if hasattr(data, "to_dict") and hasattr(data, "columns") and hasattr(data, "index"):
        return _from_frame(data, split)
    if kind in ("Dataset", "IterableDataset") and hasattr(data, "column_names"):
        return _from_dataset(data, split)
    if isinstance(data, (tuple, list)) and len(data) == 2 and not isinstance(data[0], str) \
            and hasattr(data[0], "__len__"):
        return _from_lists(data, split)
    if isinstance(data, dict):
        return _from_columns(data, split)
    raise DataError(f"{split}=: expected a pandas DataFrame, a datasets.Dataset/DatasetDict, a dict of columns, "
                    f"(texts, labels) or a file path; got {kind}")
