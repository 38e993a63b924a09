"""Where the data comes from: a GLUE folder, the Hugging Face Hub or the user's files, each read into the same
canonical Arrow table (`idx`, `id`, `text_a`, `text_b`, `label` as raw text) by `datasets` (memory-mapped, cached
by the file's path, size and modification time), so everything after reading is shared."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from ..exceptions import DataError
from ..sheets import SHEET_MARK, sheet_path
from ..tasks import HUB_DATASET, GlueFile, TaskSpec, get_task
from .columns import Columns, detect_columns, missing_detected
from .memory import Table
from .readers import file_columns, iter_rows, position_word

log = logging.getLogger("tuneloop")

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_data" / "mrpc"   # the built-in sample (--data-dir sample)
READER_VERSION = "7"  # bump when the canonical table changes, to invalidate Arrow caches


def _label_text(value) -> Optional[str]:
    """Raw labels are kept as text so every source has one Arrow schema; lists are kept as JSON."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (list, tuple)):
        return json.dumps([str(v) for v in value])
    if isinstance(value, bool):
        return str(value)            # "True" / "False", as a CSV file (or pandas' to_csv) writes them
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value).strip()


def half_character(text: str) -> str | None:
    """What is wrong with a text holding a lone surrogate — half of a character, as a text cut inside an emoji by a
    JavaScript or Java substring leaves, which JSON's \\ud83d escapes carry and no tokenizer takes — or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (f"holds half of a character ({text[e.start]!r} at character {e.start + 1}, a lone surrogate, as a "
                "text cut inside an emoji leaves); fix the text or drop the row")
    return None


def _same_kind(seen: dict, value, where, word, position, column) -> dict:
    """Labels from Python and JSON keep their types: numbers, booleans and texts mixed in one column ([1, "yes", 0],
    [true, 1]) would become classes that differ only by their type once read as text; the first label of another
    kind is an error naming its row."""
    if value is None or isinstance(value, (list, tuple)):
        return seen
    kind = "a boolean" if isinstance(value, bool) else "a number" if isinstance(value, (int, float)) else "a text"
    if not seen:
        return {"kind": kind, "value": value, "position": position}
    if kind != seen["kind"]:
        raise DataError(f"{where}: {word} {position}: label {value!r} in column {column!r} is {kind} but the label "
                        f"of {word} {seen['position']} ({seen['value']!r}) is {seen['kind']}; give labels of one "
                        "type")
    return seen


_reads_started = 0  # times _canonical_rows has run: a read served from the Arrow cache does not run it


def _canonical_rows(path, names, text, label, id_col, need_label, keep=False) -> Iterator[dict]:
    global _reads_started
    _reads_started += 1
    where, word = (str(path), path.position_word) if isinstance(path, Table) else (path, position_word(path))
    rows = path.rows() if isinstance(path, Table) else iter_rows(path, names)
    label_kinds: dict = {}
    idx = empty = 0
    for position, row in rows:
        if not isinstance(path, Table) and not any(v is not None and str(v).strip() for v in row.values()):
            if not need_label:         # predictions are numbered by row: one left out would shift the ids after it
                raise DataError(f"{where}: {word} {position}: every field is empty; drop the row or fill it in (a "
                                "file to predict keeps its every row, numbered in order)")
            empty += 1         # every field empty (",,," rows a spreadsheet leaves): no example
            continue
        texts = []
        for column in text:
            value = row.get(column)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                raise DataError(f"{where}: {word} {position}: column {column!r} has no text (got {value!r})")
            if isinstance(value, (dict, list, tuple)):                  # JSON's objects and arrays: str() of them
                kind = "a JSON object" if isinstance(value, dict) else "a list"
                raise DataError(f"{where}: {word} {position}: column {column!r} holds {kind}, not a text "
                                f"({str(value)[:60]}); give the text itself")
            if isinstance(value, bool):         # JSON's true, a Parquet or Python boolean: "True" was read as a text
                said = repr(value) if isinstance(path, Table) else json.dumps(value)
                raise DataError(f"{where}: {word} {position}: column {column!r} holds the boolean {said}, not a "
                                f"text; give the text itself (as a string: \"{said}\"), or fix the text column")
            value = str(value)                  # a number (JSON's 42 or 3.5) is read as the text it is written as
            if (broken := half_character(value)) is not None:
                raise DataError(f"{where}: {word} {position}: column {column!r} {broken}")
            if not value.strip():
                raise DataError(f"{where}: {word} {position}: column {column!r} is empty; fill it in or drop the "
                                "row (" + ("an empty text would be trained on as if it said something)" if need_label
                                           else "an empty text gives the model nothing to read)"))
            texts.append(value)
        if label:            # typed values (Python's, JSON's); a text file's are all texts
            label_kinds = _same_kind(label_kinds, row.get(label), where, word, position, label)
        raw_label = _label_text(row.get(label)) if label else None
        if need_label and not raw_label:
            raise DataError(f"{where}: {word} {position}: empty label in column {label!r}; every "
                            "training/evaluation example needs one (multi-label: write [] for a row with none of the "
                            "labels)")
        out = {"idx": idx, "pos": position, "id": _row_id(row, id_col, where, word, position) if id_col else str(idx),
               "text_a": texts[0], "text_b": texts[1] if len(texts) > 1 else None, "label": raw_label}
        if keep:                               # every column as read (predict's output keeps the input's columns)
            out["input"] = row
        yield out
        idx += 1
    if empty:
        log.info(f"{where}: {empty} {word}(s) with every field empty left out")


def _row_id(row: dict, column: str, where, word, position) -> str:
    """The row's id: a row without one (a JSON key missing, null, an empty cell) is an error naming it, in every
    format alike (an id made up for it, or "None", would not join back to anything)."""
    value = row.get(column)
    if value is None or (isinstance(value, float) and math.isnan(value)) or not str(value).strip():
        raise DataError(f"{where}: {word} {position}: no id in column {column!r} "
                        f"({'missing' if column not in row else 'got ' + repr(value)}); give every row its id, or "
                        "drop (or rename) the column to number the rows")
    return str(value)


def canonical_rows(path, names, text, label, id_col, need_label, keep=False) -> Iterator[dict]:
    """The rows of a file (or a Table) as read_table stores them, with its checks and messages, without an
    Arrow table (tuneloop predict reads files this way: no datasets import). `keep`: each row also carries
    `input`, its every column as read."""
    return _canonical_rows(path, names, text, label, id_col, need_label, keep)


def read_table(path: str, columns: Columns, names: tuple[str, ...] | None = None, need_label: bool = True,
               split: str = "train", stats: dict | None = None):
    """Read one file into the canonical Arrow table, cached by the file's path, size and modification time.
    `stats`, when given, receives {split: {"rows", "read_s", "read_cached", "file"}} ("file": a file's absolute path
    and [size, modification time], as it was read)."""
    import datasets
    from datasets.fingerprint import Hasher

    gen_kwargs = dict(names=names, text=columns.text, label=columns.label, id_col=columns.id, need_label=need_label)
    if isinstance(path, Table):                  # in memory: cached by its content
        fingerprint = Hasher.hash([READER_VERSION, split, gen_kwargs, path.fingerprint])
        gen_kwargs["path"] = path
    else:
        file, sheet = sheet_path(path)           # book.xlsx#dev: the workbook's file, its sheet in the path
        stat = os.stat(file)
        gen_kwargs["path"] = path                # as given: messages name it so; the cache, by the file itself
        fingerprint = Hasher.hash([READER_VERSION, split, gen_kwargs, str(Path(file).resolve()) + (
            SHEET_MARK + sheet if sheet else ""), stat.st_size, stat.st_mtime_ns])
    features = datasets.Features({"idx": datasets.Value("int64"), "pos": datasets.Value("int64"),
                                  "id": datasets.Value("string"),
                                  "text_a": datasets.Value("string"), "text_b": datasets.Value("string"),
                                  "label": datasets.Value("string")})
    started, runs_before = time.perf_counter(), _reads_started
    bars_off = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()             # datasets' own "Generating train split" bar: not ours to show
    try:
        with unwrapped_data_errors():
            ds = datasets.Dataset.from_generator(_canonical_rows, features=features, gen_kwargs=gen_kwargs,
                                                 fingerprint=fingerprint, split=datasets.NamedSplit(split))
    finally:
        if not bars_off:
            datasets.enable_progress_bars()
    if stats is not None:
        stats[split] = {"rows": len(ds), "read_s": round(time.perf_counter() - started, 3),
                        "read_cached": _reads_started == runs_before}
        if not isinstance(path, Table):          # what an experiment's --resume checks before reading a run back
            stats[split]["file"] = {"path": str(Path(file).resolve()), "signature": [stat.st_size, stat.st_mtime_ns]}
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
            return {"idx": batch["idx"], "pos": [i + 1 for i in batch["idx"]], "id": [str(i) for i in batch["idx"]],
                    "text_a": batch[text[0]],
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
    """The user's own files (or tables from Python: data/memory.py); columns are detected on the first and must
    exist in the others."""
    text = list(known_text) if known_text else text_columns
    label = label_column
    tables, source, stats = {}, {}, {}
    columns = detected = None            # detected: (the training file, its Columns) where tuneloop found them
    for split, path, need_label in (("train", train_file, True), ("validation", validation_file, True),
                                    ("test", test_file, False)):
        if not path:
            continue
        available = path.columns if isinstance(path, Table) else file_columns(path)
        if isinstance(path, Table):
            columns = _python_words(lambda: missing_detected(path, available, detected, need_label)
                                    or detect_columns(str(path), available, text, label, need_label), path.hint)
        else:
            columns = missing_detected(path, available, detected, need_label) \
                or detect_columns(path, available, text, label, need_label)
        if split == "train":
            detected = (path, columns, available, not text, not label)
        if split == "train" and not (text and (label or not need_label)):
            said_columns(path, columns, available)
        text, label = list(columns.text), columns.label or label
        tables[split] = read_table(path, columns, need_label=need_label, split=split, stats=stats)
        source[split] = str(path)
    text_cols = tuple(text or ())
    return RawData(tables.get("train"), {"validation": tables["validation"]} if "validation" in tables else {},
                   {"test": tables["test"]} if "test" in tables else {}, text_cols, source, stats)


def said_columns(path, columns, available) -> None:
    """The columns a training file is read by, when tuneloop detected them: which hold the text, the label and the
    id, and which are not read (a title beside a body, say)."""
    used = [*columns.text, columns.label, columns.id]
    unread = [c for c in available if c not in used]
    log.info(f"columns of {path}: text {', '.join(map(repr, columns.text))}, label {columns.label!r}"
             + (" (the one other column)" if columns.label_left_over else "")
             + (f", id {columns.id!r}" if columns.id else "") + " (detected; --text-columns / --label-column name "
             "others)" + (f"; not read: {', '.join(map(str, unread[:8]))}{' ...' if len(unread) > 8 else ''}"
                          if unread else ""))


def _python_words(detect, hint: str = ""):
    """Column errors about a table from Python name the keyword, not the flag (with the table's `hint` when its
    text column is not found)."""
    try:
        return detect()
    except DataError as e:
        said = str(e) + (hint if "cannot tell which column holds the text" in str(e) else "")
        raise DataError(said.replace("--text-columns COLUMN or --text-columns FIRST,SECOND",
                                       'text_columns=["COLUMN"] or text_columns=["FIRST", "SECOND"]')
                        .replace("--text-columns", "text_columns=").replace("--label-column COLUMN",
                                                                            'label_column="COLUMN"')
                        .replace("--label-column", "label_column=")) from None


def resolve_data_dir(data_dir: str | None) -> str | None:
    return str(SAMPLE_DIR) if data_dir == "sample" else data_dir


def workbook_splits(config):
    """A run's options with --train-file book.xlsx, one of whose sheets is named train, and perhaps others dev (or
    validation) and test: those sheets are the splits (said, and recorded in config.yaml as book.xlsx#train ...), as
    a GLUE folder's files are, instead of the first sheet (without a dev sheet, the validation rows are held out of
    the train sheet). A dev sheet is not taken beside a --validation-file, nor for --folds or --validation-split /
    --split-seed (which ask to hold rows out), nor a test sheet beside a --test-file; nothing changes for a resume
    (config.yaml has the paths)."""
    if not isinstance(config.train_file, str) or config.resume is not None:
        return config
    from .excel import sheet_splits

    held = config.fold is not None or config.folds or {"validation_split", "split_seed"} & set(config.chosen or ())
    given = config.validation_file is not None
    splits = sheet_splits(config.train_file, without=(("validation",) if given or held else ())
                          + (("test",) if config.test_file is not None else ()))
    if not splits:
        return config
    changes = {"train_file": splits["train"], "validation_file": splits.get("validation", config.validation_file)}
    if "test" in splits:
        changes.update(test_file=splits["test"], predict_test=config.predict_test
                       if "predict_test" in (config.chosen or ()) else True)
    log.info(f"{config.train_file}: its sheets are the splits: " + ", ".join(
        f"{name} {path.rpartition(SHEET_MARK)[2]!r}" for name, path in
        (("training", changes["train_file"]), ("validation", splits.get("validation")),
         ("test", changes.get("test_file"))) if path) + f" (name one with {config.train_file}{SHEET_MARK}SHEET "
             "to choose)")
    return config.replace(**changes)


def load_raw(config, with_train: bool = True, with_test: bool = False, text_columns=None) -> RawData:
    """Pick the source the options describe: a GLUE folder, the user's files, or the Hub."""
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

