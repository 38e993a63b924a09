"""Data: read GLUE folders, the Hub or the user's files into Arrow, map labels, tokenize, batch.

Every source becomes the same canonical table (`idx`, `id`, `text_a`, `text_b`, `label` as raw text) written
to Arrow by `datasets` (memory-mapped, cached by file signature), so everything after reading is shared.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import json
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch

from .errors import DataError
from .tasks import GlueFile, TaskSpec, HUB_DATASET

SAMPLE_DIR = Path(__file__).parent / "sample_data" / "mrpc"
FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet"}
READER_VERSION = "1"  # bump when the canonical table changes, to invalidate Arrow caches

# Column names tried in order when the user does not say which columns hold the text / the label.
TEXT_COLUMN_PAIRS = [("sentence1", "sentence2"), ("question1", "question2"), ("premise", "hypothesis"),
                     ("question", "sentence"), ("question", "context"), ("query", "passage"),
                     ("text1", "text2"), ("text_a", "text_b"), ("#1 String", "#2 String")]
TEXT_COLUMN_SINGLES = ["text", "sentence", "review", "content", "document", "comment", "tweet", "body", "input"]
LABEL_COLUMNS = ["label", "labels", "score", "target", "class", "category", "gold_label", "Quality",
                 "is_duplicate", "y"]
ID_COLUMNS = ["id", "idx", "index", "guid"]

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
log = logging.getLogger("tuneloop")


# ---------------------------------------------------------------------------------------------- reading files
def file_format(path: str | os.PathLike) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"{path}: unsupported file type {suffix or '(none)'}; use .csv, .tsv, .json, .jsonl or "
                        ".parquet")
    return FORMATS[suffix]


def _decoded_lines(path: str) -> Iterator[str]:
    """Lines of a text file as str, byte-order mark dropped, non-UTF-8 bytes reported with their line."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}: line {number}: bytes that are not UTF-8 ({raw[e.start:e.start + 4]!r} at "
                                f"character {e.start + 1}); re-save the file as UTF-8") from None


def _delimited_rows(path: str, fmt: str, names: tuple[str, ...] | None = None) -> Iterator[tuple[int, dict]]:
    """(line, row) pairs of a csv/tsv file. TSV is read without quoting, as GLUE's files need: their fields
    hold unbalanced double quotes that a quoting reader would swallow across lines."""
    delimiter, quoting = ("\t", csv.QUOTE_NONE) if fmt == "tsv" else (",", csv.QUOTE_MINIMAL)
    reader = csv.reader(_decoded_lines(path), delimiter=delimiter, quoting=quoting, strict=fmt == "csv")
    kind = "tab-separated" if fmt == "tsv" else "comma-separated"
    try:
        header = list(names) if names else next(reader, None)
        if not header or header == [""]:
            raise DataError(f"{path}: the file is empty; it needs a header line and at least one row")
        seen = 0
        for row in reader:
            if not row or row == [""]:
                continue  # blank line
            if len(row) != len(header):
                raise DataError(f"{path}: line {reader.line_num}: expected {len(header)} {kind} fields "
                                f"({', '.join(header)}), found {len(row)}; fix or remove that line")
            seen += 1
            yield reader.line_num, dict(zip(header, row))
    except csv.Error as e:
        raise DataError(f"{path}: line {reader.line_num}: malformed {fmt.upper()} ({e}); check its quoting") from None
    if not seen:
        raise DataError(f"{path}: no data rows (the file holds only a header)")


def _json_rows(path: str, fmt: str) -> Iterator[tuple[int, dict]]:
    if fmt == "jsonl":
        seen = 0
        for number, line in enumerate(_decoded_lines(path), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}: line {number}: not valid JSON ({e.msg}); each line must be one JSON "
                                "object") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}: line {number}: expected a JSON object with named fields")
            seen += 1
            yield number, row
        if not seen:
            raise DataError(f"{path}: the file is empty; it needs one JSON object per line")
        return
    try:
        data = json.loads("".join(_decoded_lines(path)) or "null")
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        data = next(iter(data.values()))  # {"data": [...]}
    if not isinstance(data, list) or not data:
        raise DataError(f"{path}: expected a non-empty JSON array of objects (or use .jsonl, one object per line)")
    for number, row in enumerate(data, 1):
        if not isinstance(row, dict):
            raise DataError(f"{path}: item {number}: expected a JSON object with named fields")
        yield number, row


def _parquet_rows(path: str) -> Iterator[tuple[int, dict]]:
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise DataError(f"{path}: not a readable Parquet file ({e})") from None
    if reader.metadata.num_rows == 0:
        raise DataError(f"{path}: no data rows")
    number = 0
    for batch in reader.iter_batches(batch_size=10_000):
        for row in batch.to_pylist():
            number += 1
            yield number, row


def iter_rows(path: str, names: tuple[str, ...] | None = None) -> Iterator[tuple[int, dict]]:
    """(row position, {column: value}) for any supported file; position is the line for text formats."""
    fmt = file_format(path)
    if fmt in ("csv", "tsv"):
        return _delimited_rows(path, fmt, names)
    if fmt in ("json", "jsonl"):
        return _json_rows(path, fmt)
    return _parquet_rows(path)


def file_columns(path: str, names: tuple[str, ...] | None = None) -> list[str]:
    """The column names of a file, read from its header / first record / schema only."""
    if names:
        return list(names)
    fmt = file_format(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            return list(pq.ParquetFile(path).schema_arrow.names)
        except Exception as e:  # noqa: BLE001
            raise DataError(f"{path}: not a readable Parquet file ({e})") from None
    if fmt in ("csv", "tsv"):
        delimiter, quoting = ("\t", csv.QUOTE_NONE) if fmt == "tsv" else (",", csv.QUOTE_MINIMAL)
        header = next(csv.reader(_decoded_lines(path), delimiter=delimiter, quoting=quoting), None)
        if not header or header == [""]:
            raise DataError(f"{path}: the file is empty; it needs a header line and at least one row")
        return header
    for _, row in _json_rows(path, fmt):
        return list(row)
    return []


# ---------------------------------------------------------------------------------------------- columns
@dataclass(frozen=True)
class Columns:
    """Which columns of a source file hold the texts, the label and the example id."""

    text: tuple[str, ...]
    label: Optional[str] = None
    id: Optional[str] = None


def detect_columns(path: str, available: list[str], text: list[str] | None, label: str | None,
                   need_label: bool) -> Columns:
    """Use the columns the user named, or find the usual ones; explain what is missing otherwise."""
    have = set(available)
    shown = ", ".join(available)
    if text:
        missing = [c for c in text if c not in have]
        if missing:
            raise DataError(f"{path}: no text column {missing[0]!r} (columns: {shown}); fix --text-columns")
        text_cols = tuple(text)
    else:
        text_cols = next((pair for pair in TEXT_COLUMN_PAIRS if set(pair) <= have), None)
        if text_cols is None:
            single = next((c for c in TEXT_COLUMN_SINGLES if c in have), None)
            if single is None:
                raise DataError(f"{path}: cannot tell which column holds the text (columns: {shown}); name it with "
                                "--text-columns COLUMN or --text-columns FIRST,SECOND")
            text_cols = (single,)
    label_col = None
    if label:
        if label not in have:
            if need_label:
                raise DataError(f"{path}: no label column {label!r} (columns: {shown}); fix --label-column")
        else:
            label_col = label
    else:
        label_col = next((c for c in LABEL_COLUMNS if c in have and c not in text_cols), None)
        if label_col is None and need_label:
            raise DataError(f"{path}: cannot tell which column holds the label (columns: {shown}); name it with "
                            "--label-column COLUMN")
    id_col = next((c for c in ID_COLUMNS if c in have and c not in text_cols and c != label_col), None)
    return Columns(text_cols, label_col, id_col)


# ---------------------------------------------------------------------------------------------- canonical tables
def _label_text(value) -> Optional[str]:
    """Raw labels are kept as text so every source has one Arrow schema; lists are kept as JSON."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (list, tuple)):
        return json.dumps([str(v) for v in value])
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer() and not isinstance(value, bool):
        return repr(value)
    return str(value).strip()


_reads_started = 0  # times _canonical_rows has run: a read served from the Arrow cache does not run it


def _canonical_rows(path: str, names, text, label, id_col, need_label) -> Iterator[dict]:
    global _reads_started
    _reads_started += 1
    for idx, (position, row) in enumerate(iter_rows(path, names)):
        texts = []
        for column in text:
            value = row.get(column)
            if value is None or isinstance(value, float):
                where = "line" if file_format(path) in ("csv", "tsv", "jsonl") else "row"
                raise DataError(f"{path}: {where} {position}: column {column!r} has no text (got {value!r})")
            texts.append(str(value))
        raw_label = _label_text(row.get(label)) if label else None
        if need_label and not raw_label:
            where = "line" if file_format(path) in ("csv", "tsv", "jsonl") else "row"
            raise DataError(f"{path}: {where} {position}: empty label in column {label!r}; every training/evaluation "
                            "example needs one")
        yield {"idx": idx, "id": str(row[id_col]) if id_col else str(idx), "text_a": texts[0],
               "text_b": texts[1] if len(texts) > 1 else None, "label": raw_label}


def read_table(path: str, columns: Columns, names: tuple[str, ...] | None = None, need_label: bool = True,
               split: str = "train", stats: dict | None = None):
    """Read one file into the canonical Arrow table, cached by the file's path, size and modification time.
    `stats`, when given, receives {split: {"rows", "read_s", "read_cached"}}."""
    import datasets
    from datasets.fingerprint import Hasher

    stat = os.stat(path)
    gen_kwargs = dict(path=str(Path(path).resolve()), names=names, text=columns.text, label=columns.label,
                      id_col=columns.id, need_label=need_label)
    fingerprint = Hasher.hash([READER_VERSION, split, gen_kwargs, stat.st_size, stat.st_mtime_ns])
    features = datasets.Features({"idx": datasets.Value("int64"), "id": datasets.Value("string"),
                                  "text_a": datasets.Value("string"), "text_b": datasets.Value("string"),
                                  "label": datasets.Value("string")})
    started, runs_before = time.perf_counter(), _reads_started
    with unwrapped_data_errors():
        ds = datasets.Dataset.from_generator(_canonical_rows, features=features, gen_kwargs=gen_kwargs,
                                             fingerprint=fingerprint, split=datasets.NamedSplit(split))
    if stats is not None:
        stats[split] = {"rows": len(ds), "read_s": round(time.perf_counter() - started, 3),
                        "read_cached": _reads_started == runs_before}
    return ds


@contextlib.contextmanager
def unwrapped_data_errors():
    """datasets wraps errors raised in generators and worker processes; the user should see ours, not theirs."""
    try:
        yield
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001
        cause = e
        while cause is not None and not isinstance(cause, DataError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise cause from None
        raise


# ---------------------------------------------------------------------------------------------- sources
@dataclass
class RawData:
    """Canonical tables per split plus what they mean."""

    train: Optional[object]                       # datasets.Dataset
    evaluation: dict[str, object]                 # split name -> Dataset
    test: dict[str, object]
    text_columns: tuple[str, ...]
    source: dict[str, str] = field(default_factory=dict)   # split -> where it came from
    stats: dict[str, dict] = field(default_factory=dict)    # split -> {"rows", "read_s", "read_cached"}

    @property
    def pair(self) -> bool:
        return len(self.text_columns) == 2


def _glue_file(data_dir: str, spec: TaskSpec, gf: GlueFile, required: bool, split: str, stats: dict | None = None):
    path = Path(data_dir) / gf.name
    if not path.is_file():
        if required:
            raise DataError(f"--data-dir {data_dir}: no {gf.name}; a {spec.folder} folder from the GLUE distribution "
                            f"holds {', '.join(_glue_file_names(spec))}")
        return None
    available = file_columns(str(path), gf.names)
    columns = detect_columns(str(path), available, list(gf.text_columns), gf.label_column, gf.label_column is not None)
    if gf.index_column and gf.index_column in available:
        columns = Columns(columns.text, columns.label, gf.index_column)
    return read_table(str(path), columns, gf.names, need_label=gf.label_column is not None, split=split, stats=stats)


def _glue_file_names(spec: TaskSpec) -> list[str]:
    files = ([spec.train] if spec.train else []) + list(spec.validation.values()) + list(spec.test.values())
    return [f.name for f in files]


def load_glue_folder(data_dir: str, spec: TaskSpec, with_train: bool = True, with_test: bool = False) -> RawData:
    stats: dict = {}
    train = _glue_file(data_dir, spec, spec.train, True, "train", stats) if with_train and spec.train else None
    evaluation = {name: _glue_file(data_dir, spec, gf, True, name, stats) for name, gf in spec.validation.items()}
    test = {}
    if with_test:
        test = {name: t for name, gf in spec.test.items()
                if (t := _glue_file(data_dir, spec, gf, False, name, stats)) is not None}
    source = {"train": str(Path(data_dir) / spec.train.name)} if train is not None else {}
    source.update({n: str(Path(data_dir) / gf.name) for n, gf in spec.validation.items()})
    return RawData(train, evaluation, test, spec.text_columns, source, stats)


def load_glue_hub(spec: TaskSpec, with_train: bool = True, with_test: bool = False) -> RawData:
    """The GLUE task from the Hugging Face Hub (`nyu-mll/glue`), in the canonical layout."""
    import datasets

    try:
        hub = datasets.load_dataset(HUB_DATASET, spec.hub_config)
    except Exception as e:  # noqa: BLE001 - offline, DNS, HTTP and cache errors all mean the same to the user
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"could not load {HUB_DATASET} ({spec.hub_config}) from the Hugging Face Hub ({first[:200]}). "
                        f"Working offline? Pass the task's GLUE files with --data-dir DIR (a folder holding "
                        f"{', '.join(_glue_file_names(spec))}), or your own with --train-file/--validation-file"
                        ) from None
    names = spec.label_names

    def canonical(split):
        ds = hub[split]
        text = spec.text_columns

        def convert(batch):
            labels = batch["label"]
            if names is None:
                raw = [None if v is None or v < 0 else repr(float(v)) for v in labels]
            else:
                raw = [None if v is None or v < 0 else names[v] for v in labels]
            return {"idx": batch["idx"], "id": [str(i) for i in batch["idx"]], "text_a": batch[text[0]],
                    "text_b": batch[text[1]] if len(text) > 1 else [None] * len(labels), "label": raw}

        return ds.map(convert, batched=True, remove_columns=ds.column_names, desc=f"Reading {split}")

    train = canonical("train") if with_train and "train" in hub else None
    evaluation = {name: canonical(name) for name in spec.validation if name in hub}
    test = {name: canonical(name) for name in spec.test if with_test and name in hub}
    source = {split: f"hub:{HUB_DATASET}/{spec.hub_config}/{split}" for split in hub}
    return RawData(train, evaluation, test, spec.text_columns, source)


def load_user_files(train_file: str | None, validation_file: str | None, test_file: str | None,
                    text_columns: list[str] | None, label_column: str | None,
                    known_text: tuple[str, ...] | None = None) -> RawData:
    """The user's own files; columns are detected on the first file and must exist in the others."""
    text = list(known_text) if known_text else text_columns
    label = label_column
    tables, source, stats = {}, {}, {}
    columns = None
    for split, path, need_label in (("train", train_file, True), ("validation", validation_file, True),
                                    ("test", test_file, False)):
        if not path:
            continue
        available = file_columns(path)
        columns = detect_columns(path, available, text, label, need_label)
        text, label = list(columns.text), columns.label or label
        tables[split] = read_table(path, columns, need_label=need_label, split=split, stats=stats)
        source[split] = path
    text_cols = tuple(text or ())
    return RawData(tables.get("train"), {"validation": tables["validation"]} if "validation" in tables else {},
                   {"test": tables["test"]} if "test" in tables else {}, text_cols, source, stats)


# ---------------------------------------------------------------------------------------------- labels
@dataclass
class LabelSchema:
    """What the labels are and how they map to model outputs; saved with the model."""

    problem_type: str                     # single_label_classification | multi_label_classification | regression
    names: list[str] = field(default_factory=list)   # empty for regression
    separator: Optional[str] = None

    @property
    def num_labels(self) -> int:
        return 1 if self.problem_type == "regression" else len(self.names)

    @property
    def index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}

    def separator_join(self, names: list[str]) -> str:
        return (self.separator or ",").join(names)

    def to_dict(self) -> dict:
        return {"problem_type": self.problem_type, "names": self.names, "separator": self.separator}

    @classmethod
    def from_dict(cls, data: dict) -> "LabelSchema":
        return cls(data["problem_type"], list(data.get("names") or []), data.get("separator"))


def _split_labels(raw: str, separator: str | None) -> list[str]:
    if raw.startswith("[") and raw.endswith("]"):
        try:
            return [str(v).strip() for v in json.loads(raw)]
        except json.JSONDecodeError:
            pass
    return [part.strip() for part in raw.split(separator)] if separator else [raw]


def _as_float(text: str) -> Optional[float]:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def infer_label_schema(train, problem_type: str, separator: str | None, source: str,
                       task: TaskSpec | None = None) -> LabelSchema:
    """Decide regression / classes / multi-label from the training labels (or take the task's)."""
    if task is not None:
        return LabelSchema(task.problem_type, list(task.label_names or []))
    values = [v for v in train.unique("label") if v is not None]
    looks_listy = bool(values) and all(v.startswith("[") and v.endswith("]") for v in values)
    if problem_type == "auto":
        numeric = [_as_float(v) for v in values]
        if separator or looks_listy:
            problem_type = "multi_label_classification"
        elif values and all(x is not None for x in numeric) and any(not x.is_integer() for x in numeric):
            problem_type = "regression"
        else:
            problem_type = "single_label_classification"
    if problem_type == "regression":
        bad = next((v for v in values if _as_float(v) is None), None)
        if bad is not None:
            row = train.filter(lambda b: [x == bad for x in b], input_columns="label", batched=True)[0]["idx"]
            raise DataError(f"{source}: row {row + 1}: regression target {bad!r} is not a number; fix the label "
                            "column or drop --problem-type regression")
        return LabelSchema("regression", [])
    if problem_type == "multi_label_classification":
        names = sorted({item for v in values for item in _split_labels(v, separator) if item})
        return LabelSchema(problem_type, names, separator)
    numeric = [_as_float(v) for v in values]
    if values and all(x is not None and x.is_integer() for x in numeric):
        names = [str(int(x)) for x in sorted(set(numeric))]   # 0, 1, 2 ... in numeric order
    else:
        names = sorted(values)
    if len(names) < 2:
        raise DataError(f"{source}: the label column holds only {names or 'no values'}; classification needs at "
                        "least two classes")
    return LabelSchema(problem_type, names)


class LabelEncoder:
    """Maps raw label text to model targets for one split; unknown labels name their file and row."""

    def __init__(self, schema: LabelSchema, source: str, accept_ids: bool = False):
        """`accept_ids`: also take class ids ("0", "1") for named classes, as GLUE's files store them."""
        self.schema, self.source = schema, source
        self.index = schema.index
        if schema.problem_type == "single_label_classification":
            for i, name in enumerate(schema.names):
                x = _as_float(name)
                if x is not None and x.is_integer():  # "1" and "1.0" are the same class
                    self.index.setdefault(str(int(x)), i)
                    self.index.setdefault(repr(float(x)), i)
                if accept_ids:
                    self.index.setdefault(str(i), i)

    def _unknown(self, value, idx):
        known = ", ".join(self.schema.names[:20])
        return DataError(f"{self.source}: row {idx + 1}: label {value!r} was not seen in the training data "
                         f"(known: {known}); fix the label or add examples of it to the training data")

    def __call__(self, raw: str, idx: int):
        kind = self.schema.problem_type
        if kind == "regression":
            value = _as_float(raw)
            if value is None:
                raise DataError(f"{self.source}: row {idx + 1}: regression target {raw!r} is not a number")
            return value
        if kind == "multi_label_classification":
            target = [0.0] * len(self.schema.names)
            for item in _split_labels(raw, self.schema.separator):
                if item:
                    if item not in self.index:
                        raise self._unknown(item, idx)
                    target[self.index[item]] = 1.0
            return target
        key = raw
        if key not in self.index:
            x = _as_float(raw)
            key = str(int(x)) if x is not None and x.is_integer() else raw
        if key not in self.index:
            raise self._unknown(raw, idx)
        return self.index[key]


# ---------------------------------------------------------------------------------------------- tokenization
class Tokenize:
    """Batched tokenization + label encoding for `datasets.map` (a class so datasets can hash it for caching)."""

    def __init__(self, tokenizer, max_length: int | None, pair: bool, encoder: LabelEncoder | None):
        self.tokenizer, self.max_length, self.pair, self.encoder = tokenizer, max_length, pair, encoder

    def __call__(self, batch):
        second = batch["text_b"] if self.pair else None
        if second is not None and any(t is None for t in second):
            second = [t or "" for t in second]
        encoded = self.tokenizer(batch["text_a"], second, truncation=True, max_length=self.max_length)
        encoded["length"] = [len(ids) for ids in encoded["input_ids"]]
        if self.encoder is not None:
            encoded["labels"] = [self.encoder(raw, idx) for raw, idx in zip(batch["label"], batch["idx"])]
        return encoded


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


def tokenize(ds, tokenizer, max_length, pair, encoder, desc: str, num_proc: int | None = None,
             stats: dict | None = None):
    """Tokenize (and encode labels) with `datasets.map`, cached in Arrow next to `ds`. `stats`, when given, is
    updated with tokenize_s, tokenize_cached (the result was loaded from the cache, not computed), rows/s and
    the number of processes."""
    if num_proc is None:
        num_proc = min(os.cpu_count() or 1, 8) if len(ds) >= 200_000 else None
    before, started = _cache_listing(ds), time.perf_counter()
    with unwrapped_data_errors():
        out = ds.map(Tokenize(tokenizer, max_length, pair, encoder), batched=True, batch_size=1000,
                     num_proc=num_proc, remove_columns=["text_a", "text_b", "label"], desc=desc)
    if stats is not None:
        seconds = time.perf_counter() - started
        files = _arrow_files(out)
        cached = bool(files) and all(f in before and before[f] == (os.stat(f).st_ino, os.stat(f).st_mtime_ns)
                                     for f in files)
        stats.update({"tokenized_rows": len(out), "tokenize_s": round(seconds, 3), "tokenize_cached": cached,
                      "tokenize_rows_per_s": round(len(out) / max(seconds, 1e-9), 1), "num_proc": num_proc or 1})
    return out


def model_inputs(ds, tokenizer):
    """The columns the model takes, as torch tensors (the chapter's remove_columns / set_format step)."""
    keep = [c for c in ("input_ids", "token_type_ids", "attention_mask", "labels") if c in ds.column_names]
    ds = ds.select_columns(keep)
    return ds.with_format("torch")


# ---------------------------------------------------------------------------------------------- batching
class LengthGroupedSampler(torch.utils.data.Sampler):
    """A random order in which neighbouring examples have similar lengths, so batches carry little padding.

    Shuffle, cut into mega-batches of 50 batches, sort each by length, then shuffle the order of the batches.
    The order depends only on (seed, epoch): a resumed run sees the same batches. `group=False` gives a plain
    seeded shuffle.
    """

    def __init__(self, lengths, batch_size: int, seed: int, group: bool = True, megabatch: int = 50):
        self.lengths = np.asarray(lengths)
        self.batch_size, self.seed, self.group, self.megabatch = batch_size, seed, group, megabatch
        self.epoch = 0

    def set_epoch(self, epoch: int):
        self.epoch = epoch

    def __len__(self):
        return len(self.lengths)

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(len(self.lengths))
        if self.group:
            size = self.batch_size * self.megabatch
            chunks = [order[i:i + size] for i in range(0, len(order), size)]
            order = np.concatenate([c[np.argsort(-self.lengths[c], kind="stable")] for c in chunks])
            # shuffle the order of the full batches (as rows of a matrix, not a list of arrays); the final
            # (possibly short) batch stays last so every other batch stays full
            n_full = len(order) // self.batch_size
            head = order[:n_full * self.batch_size].reshape(n_full, self.batch_size)
            order = np.concatenate([head[rng.permutation(n_full)].reshape(-1), order[n_full * self.batch_size:]])
        return (int(i) for i in order)   # not order.tolist(): no Python list of the whole set


def length_sorted(ds):
    """The split sorted longest first (evaluation batches then pad little); returns (dataset, order)."""
    lengths = np.asarray(ds.with_format("numpy")["length"]) if "length" in ds.column_names else None
    if lengths is None:
        return ds, np.arange(len(ds))
    order = np.argsort(-lengths, kind="stable")
    return ds.select(order), order


def make_collator(tokenizer, pad_to_max_length: bool, max_length: int | None, pad_to_multiple_of: int | None = None):
    """Dynamic padding to each batch's longest example (or to --max-length for fixed shapes)."""
    from transformers import DataCollatorWithPadding

    if pad_to_max_length:
        return DataCollatorWithPadding(tokenizer, padding="max_length", max_length=max_length)
    return DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to_multiple_of)


# ---------------------------------------------------------------------------------------------- the whole step
@dataclass
class PreparedData:
    """Tokenized splits ready for DataLoaders, and what they mean."""

    raw: RawData
    labels: LabelSchema
    task: Optional[TaskSpec]
    train: Optional[object]
    evaluation: dict[str, object]
    test: dict[str, object]
    # split -> {"rows", "read_s", "read_cached", "tokenized_rows", "tokenize_s", "tokenize_cached",
    # "tokenize_rows_per_s", "num_proc"}: what reading and tokenizing cost, and whether the Arrow cache served it
    stats: dict[str, dict] = field(default_factory=dict)

    @property
    def text_columns(self) -> tuple[str, ...]:
        return self.raw.text_columns


def resolve_data_dir(data_dir: str | None) -> str | None:
    return str(SAMPLE_DIR) if data_dir == "sample" else data_dir


def load_raw(config, with_train: bool = True, with_test: bool = False, text_columns=None) -> RawData:
    """Pick the source the options describe: a GLUE folder, the user's files, or the Hub."""
    from .tasks import get_task

    task = get_task(config.task)
    data_dir = resolve_data_dir(config.data_dir)
    if data_dir:
        return load_glue_folder(data_dir, task, with_train=with_train, with_test=with_test)
    if config.train_file or config.validation_file or (config.test_file and not task):
        return load_user_files(config.train_file if with_train else None, config.validation_file,
                               config.test_file if with_test else None, text_columns or config.text_columns,
                               config.label_column)
    if task is None:
        raise DataError("no data: give --task NAME (GLUE), --data-dir DIR with --task, or --train-file FILE")
    raw = load_glue_hub(task, with_train=with_train, with_test=with_test)
    if config.test_file and with_test:
        raw.test = load_user_files(None, None, config.test_file, list(task.text_columns), None).test
    return raw


def _limit(ds, n):
    return ds if ds is None or n is None or n >= len(ds) else ds.select(range(n))


def prepare_data(config, tokenizer, labels: LabelSchema | None = None, with_train: bool = True,
                 with_test: bool = False, text_columns=None) -> PreparedData:
    """Read, map labels, tokenize (cached by `datasets`). `labels` given (a trained model's) skips inference."""
    from .tasks import get_task

    task = get_task(config.task)
    raw = load_raw(config, with_train=with_train, with_test=with_test, text_columns=text_columns)
    if with_train and raw.train is None:
        raise DataError("no training data: give --train-file FILE, or --task with --data-dir")
    raw.train = _limit(raw.train, config.max_train_samples)
    raw.evaluation = {k: _limit(v, config.max_eval_samples) for k, v in raw.evaluation.items()}
    if labels is None:
        labels = infer_label_schema(raw.train, config.problem_type, config.label_separator,
                                    raw.source.get("train", "training data"), task)
    max_length = config.max_length or min(getattr(tokenizer, "model_max_length", 512) or 512, 512)

    stats = {split: dict(s) for split, s in raw.stats.items()}

    def run(ds, split, with_labels):
        encoder = LabelEncoder(labels, raw.source.get(split, split), accept_ids=task is not None) if with_labels \
            else None
        return tokenize(ds, tokenizer, max_length, raw.pair, encoder, f"Tokenizing {split}", config.num_proc,
                        stats=stats.setdefault(split, {}))

    train = run(raw.train, "train", True) if raw.train is not None else None
    evaluation = {name: run(ds, name, True) for name, ds in raw.evaluation.items()}
    test = {name: run(ds, name, False) for name, ds in raw.test.items()}
    for split, s in stats.items():
        log.info(describe_stats(split, s))
    return PreparedData(raw, labels, task, train, evaluation, test, stats)


def describe_stats(split: str, s: dict) -> str:
    """One line per split: `data train: 400000 rows | read 12.10 s | tokenized 400000 rows in 20.30 s (19704 rows/s,
    2 processes)`, each step marked `(Arrow cache)` when the cache served it instead of computing it."""
    parts = [f"data {split}: {s.get('rows', s.get('tokenized_rows', '?'))} rows"]
    if "read_s" in s:
        parts.append(f"read {s['read_s']:.2f} s" + (" (Arrow cache)" if s["read_cached"] else ""))
    if "tokenize_s" in s:
        where = " (Arrow cache)" if s["tokenize_cached"] else ""
        procs = f"{s['num_proc']} process" + ("es" if s["num_proc"] > 1 else "")
        parts.append(f"tokenized {s['tokenized_rows']} rows in {s['tokenize_s']:.2f} s{where} "
                     f"({s['tokenize_rows_per_s']:.0f} rows/s, {procs})")
    return " | ".join(parts)


def train_loader(ds, tokenizer, config, collator, global_batch: int | None = None):
    """Batches of `config.batch_size`, in an order grouped by the global batch (per device × processes ×
    accumulation): 1 process × batch 8, 2 × 4 and 4 accumulated × 2 then see the same examples per step."""
    lengths = np.asarray(ds.with_format("numpy")["length"])
    sampler = LengthGroupedSampler(lengths, global_batch or config.batch_size, config.seed,
                                   group=config.group_by_length)
    # a private generator: iterating must not draw from the global torch RNG, or a resumed run's dropout masks
    # would differ from the uninterrupted run's
    return torch.utils.data.DataLoader(model_inputs(ds, tokenizer), batch_size=config.batch_size, sampler=sampler,
                                       collate_fn=collator, drop_last=False, generator=torch.Generator())


def eval_loader(ds, tokenizer, batch_size, collator):
    """Longest first, so batches pad little; returns (loader, order) where order maps rows back."""
    ds, order = length_sorted(ds)
    loader = torch.utils.data.DataLoader(model_inputs(ds, tokenizer), batch_size=batch_size, shuffle=False,
                                         collate_fn=collator, generator=torch.Generator())
    return loader, order
