"""Reading the user's files: formats, CSV dialects, rows with their positions (which columns hold what: columns).

Every reader yields (position, {column: value}); the position is the file's line for csv/tsv/jsonl (a header
counts as line 1) and the item or row number for json arrays and parquet. A text format may come compressed
(`.csv.gz`, `.jsonl.bz2`, `.tsv.xz`, or a `.zip` holding one file), read as it decompresses.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Iterator

from ..exceptions import DataError
from ..sheets import data_file
from .columns import pandas_index
from .text_lines import decoded_lines, zip_member

log = logging.getLogger("tuneloop")

_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)     # csv's default (128 KiB a field) is too small for long documents
# TSV is read without quote processing, as GLUE ships its files: their fields hold unbalanced double quotes
_DIALECTS = {"csv": {"delimiter": ",", "quoting": csv.QUOTE_MINIMAL},
             "tsv": {"delimiter": "\t", "quoting": csv.QUOTE_NONE, "quotechar": None}}


def csv_dialect(fmt: str) -> dict:
    """The csv module's delimiter and quoting for "csv" or "tsv" (reading and writing alike)."""
    return dict(_DIALECTS[fmt])


def delimited_text(rows, names: list[str], fmt: str, where: str) -> str:
    """`rows` as a .csv or .tsv file that reads back as they are: a .tsv without quoting (as it is read), a field
    with a tab or a line break, which it cannot hold, a DataError naming its line and column."""
    writer = csv.DictWriter(buffer := io.StringIO(), fieldnames=names, **csv_dialect(fmt), lineterminator="\n")
    writer.writeheader()
    for line, row in enumerate(rows, 2):
        try:
            writer.writerow(row)
        except csv.Error:
            column = next(c for c, v in row.items() if any(ch in str(v) for ch in "\t\n\r"))
            raise DataError(f"{where}: line {line}" + (f" (id {row['id']})" if "id" in row else "") + f", column "
                            f"{column!r}: holds a tab or a line break, which a .tsv file (read without quoting, as "
                            "GLUE writes it) cannot hold; write a .csv or .jsonl file instead") from None
    return buffer.getvalue()


OTHER_SEPARATORS = (";", "\t", "|")    # a .csv whose header has none of its commas but one of these is read with it
_SEP_LINE = re.compile(r"sep=([,;\t|])", re.IGNORECASE)   # Excel's first line naming a .csv's separator


def _is_sep_line(row: list[str] | None) -> bool:
    """A `sep=;` first line as the csv reader splits it on its own separator: ['sep=', '']."""
    return row is not None and len(row) == 2 and row[0].strip().lower() == "sep=" and row[1] == ""


@functools.lru_cache(maxsize=64)
def _separator(path: str, size: int, mtime: int) -> str:
    """The delimiter of a .csv file: a comma, unless its header line has no comma and one of OTHER_SEPARATORS
    (Excel writes ';' where the comma is the decimal mark; a tab-separated file may be named .csv). Said once."""
    try:
        header = next(decoded_lines(path), "")
    except DataError:
        return ","                       # bytes that are not text: the reader names them, and the file as given
    named = _SEP_LINE.fullmatch(header.rstrip("\r\n"))
    if named:
        log.info(f"{path}: its first line {header.strip()!r} names the separator (as Excel reads it): read with "
                 f"{named.group(1)!r}")
        return named.group(1)
    if "," in header:
        return ","
    for sep in OTHER_SEPARATORS:
        if sep in header:
            log.info(f"{path}: its header has no comma but {sep!r}: read with {sep!r} as the separator")
            return sep
    return ","


def reading_dialect(path: str, fmt: str) -> dict:
    """csv_dialect(fmt), with a .csv file's own separator (_separator)."""
    dialect = csv_dialect(fmt)
    if fmt == "csv":
        st = os.stat(path)
        dialect["delimiter"] = _separator(os.path.realpath(path), st.st_size, st.st_mtime_ns)
    return dialect


def decimal_comma(source: str) -> bool:
    """Whether `source` writes its numbers with a decimal comma ("2,6"): a .csv file read with ';' as its separator
    (Excel writes ';' exactly where the comma is the decimal mark). Not a file (a table from Python, a Hub
    split): False."""
    if format_suffix(source) != ".csv" or not os.path.isfile(source):
        return False
    return reading_dialect(str(source), "csv")["delimiter"] == ";"


FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet", ".xlsx": "xlsx"}
BINARY = (".parquet", ".xlsx")         # formats read from the file itself: not from a compressed copy
COMPRESSED = (".gz", ".bz2", ".xz", ".zip")


def format_suffix(path: str | os.PathLike) -> str:
    """The suffix that says the format, lower-cased: data.csv.gz is .csv, and so is data.zip holding data.csv;
    book.xlsx#dev (a sheet of it) is .xlsx."""
    path = Path(data_file(path))
    if path.suffix.lower() == ".zip" and len(path.suffixes) == 1 and path.is_file():
        return Path(zip_member(str(path)).filename).suffix.lower()
    if path.suffix.lower() in COMPRESSED and len(path.suffixes) > 1:
        path = path.with_suffix("")
    return path.suffix.lower()


def file_format(path: str | os.PathLike) -> str:
    suffix = format_suffix(path)
    if suffix not in FORMATS or (suffix in BINARY and Path(path).suffix.lower() in COMPRESSED):
        named = "".join(Path(path).suffixes[-2:]).lower() or "(none)"
        raise DataError(f"{path}: unsupported file type {named}; use .csv, .tsv, .json, .jsonl, .parquet or .xlsx "
                        f"(the text formats may be compressed: {', '.join(COMPRESSED)})")
    return FORMATS[suffix]


def position_word(source: str) -> str:
    """How errors name a row's position in `source`, the same everywhere: the file's line for csv/tsv/jsonl
    (the header is line 1), the item for a JSON array, the sheet's row for .xlsx (the header is row 1), the row for
    Parquet and the Hub; a DataFrame's row with its index label (data/memory.Table: "train= (DataFrame, 4 rows)"),
    other tables' row from 1."""
    fmt = FORMATS.get(format_suffix(source))
    if fmt is None and str(source).endswith(" rows)") and " (DataFrame, " in str(source) \
            and "counted from 1" not in str(source):
        return "row with index"
    return {"csv": "line", "tsv": "line", "jsonl": "line", "json": "item"}.get(fmt, "row")


def _header(path: str, header: list[str], first_row=None, say: bool = False) -> list[str]:
    """A CSV/TSV header's column names without the spaces around them ("text, label" names "label"); a name given
    twice is refused (the second column's values replaced the first's without a word); pandas' nameless index
    column named as pandas reads it (pandas_index)."""
    names = pandas_index(path, [name.strip() for name in header], first_row, say)
    twice = next((name for i, name in enumerate(names) if name and name in names[:i]), None)   # "" of trailing ,,
    if twice is not None:
        raise DataError(f"{path}: the header names the column {twice!r} {names.count(twice)} times; give each "
                        "column its own name")
    return names


def _lines(first: int, last: int) -> str:
    """Where a row is: its line, or the lines a quoted field carried it across, from the quote that opened it."""
    return f"line {last}" if first >= last else f"lines {first}-{last} (a quoted field opened on line {first} " \
        "runs across the line breaks after it: is a closing quote missing?)"


def _delimited_rows(path: str, fmt: str, names: tuple[str, ...] | None = None) -> Iterator[tuple[int, dict]]:
    """(line, row) pairs of a csv/tsv file. TSV is read without quoting, as GLUE's files need: their fields
    hold unbalanced double quotes that a quoting reader would swallow across lines."""
    dialect = reading_dialect(path, fmt)
    reader = csv.reader(decoded_lines(path), **dialect, strict=fmt == "csv")
    kind = {",": "comma", "\t": "tab", ";": "semicolon", "|": "bar"}[dialect["delimiter"]] + "-separated"
    limit = csv.field_size_limit(_FIELD_LIMIT)      # long documents; the caller's limit is given back below
    start = 1                                      # the header's line, until a row is read
    try:
        header = list(names) if names else next(reader, None)
        if not names and fmt == "csv" and _is_sep_line(header):
            header = next(reader, None)               # Excel's sep= line: the header is the next one
        if not header or header == [""]:
            raise DataError(f"{path}: the file is empty; it needs a header line and at least one row")
        seen, start = 0, reader.line_num + 1           # start: the line the row being read begins on
        rows = iter(reader)
        after = next(rows, None)                       # the first row: whether a nameless first column is an index
        header = header if names else _header(path, header, after, say=True)
        blank: list[int] = []             # empty lines and ",,," rows: yielded as empty rows when a row follows them
        for row in itertools.chain([after] if after is not None else [], rows):
            first, start = start, reader.line_num + 1
            if not any(field.strip() for field in row):
                blank.append(first)           # every field empty, whatever their count; the ones at the end: none
                continue
            yield from ((line, dict.fromkeys(header, "")) for line in blank)   # (training leaves them out, counted;
            blank = []                                                        # a file to predict: an error)
            if len(row) != len(header):
                quoted = fmt == "tsv" and len(row) > len(header) and any(f.startswith('"') for f in row) and \
                    any(f.endswith('"') for f in row)
                raise DataError(f"{path}: {_lines(first, reader.line_num)}: expected {len(header)} {kind} fields "
                                f"({', '.join(header)}), found {len(row)}; " + (
                                    "a quoted field holds a tab, and .tsv files are read without quoting (as GLUE "
                                    "writes them): save the file as .csv, or take the tabs out of its texts"
                                    if quoted else "fix or remove that line"))
            seen += 1
            yield first, dict(zip(header, row, strict=True))          # a row spanning lines: where it starts
    except csv.Error as e:
        raise DataError(f"{path}: {_lines(start, reader.line_num)}: malformed {fmt.upper()} ({e}); check its "
                        "quoting") from None
    finally:
        csv.field_size_limit(limit)
    if not seen:
        raise DataError(f"{path}: no data rows (the file holds only a header)")


def _json_lines(path: str, by_item: bool = False) -> Iterator[tuple[int, dict]]:
    """(line, object) of a JSON Lines file; `by_item`: numbered by object instead (a .json file of JSON Lines,
    whose rows messages call items)."""
    seen = 0
    for number, line in enumerate(decoded_lines(path), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            array = "; the file holds a JSON array: name it .json" if not seen and line.lstrip()[:1] == "[" else ""
            raise DataError(f"{path}: line {number}: not valid JSON ({e.msg}); each line must be one JSON "
                            f"object{array}") from None
        if not isinstance(row, dict):
            hint = "; the file holds a JSON array: name it .json" if not seen and isinstance(row, list) else ""
            raise DataError(f"{path}: line {number}: expected a JSON object with named fields{hint}")
        seen += 1
        yield (seen if by_item else number), row
    if not seen:
        raise DataError(f"{path}: the file is empty; it needs one JSON object per line")


def _records(data):
    """The rows of a parsed .json file: an array of objects, one such array under a single key ({"data": [...]}),
    or columns — {"text": [...], "label": [...]} or pandas' `to_json()` {"text": {"0": ...}, "label": {...}} (its
    orient="index", {"0": {"text": ..., "label": ...}, ...}, when there are more rows than columns; its
    orient="split", {"columns": [...], "index": [...], "data": [[...], ...]}; its orient="table", {"schema": ...,
    "data": [{...}, ...]}, without the index it adds)."""
    if isinstance(data, dict) and {"columns", "data"} <= set(data) <= {"columns", "index", "data"} \
            and isinstance(data["columns"], list) and isinstance(data["data"], list) \
            and all(isinstance(row, list) and len(row) == len(data["columns"]) for row in data["data"]):
        return [dict(zip(map(str, data["columns"]), row, strict=True)) for row in data["data"]]
    if isinstance(data, dict) and set(data) == {"schema", "data"} and isinstance(data["data"], list):
        keys = (data["schema"] or {}).get("primaryKey") or [] if isinstance(data["schema"], dict) else []
        return [{k: v for k, v in row.items() if k not in keys} if isinstance(row, dict) else row
                for row in data["data"]]
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        return next(iter(data.values()))
    if isinstance(data, dict) and len(data) > 1:
        values = list(data.values())
        if all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1:
            return [dict(zip(data, row, strict=True)) for row in zip(*values, strict=True)]
        if all(isinstance(v, dict) for v in values) and len({tuple(v) for v in values}) == 1:
            if len(data) > len(values[0]):          # to_json(orient="index"): {"0": {"text": ..., "label": ...}}
                return values
            return [{column: data[column][key] for column in data} for key in values[0]]
    return data


def _json_rows(path: str, fmt: str) -> Iterator[tuple[int, dict]]:
    if fmt == "jsonl":
        yield from _json_lines(path)
        return
    try:
        data = json.loads("".join(decoded_lines(path)) or "null")
    except json.JSONDecodeError as e:
        if e.msg == "Extra data" and e.lineno > 1:       # JSON Lines in a .json file (as `datasets` reads them)
            yield from _json_lines(path, by_item=True)
            return
        raise DataError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
    data = _records(data)
    if not isinstance(data, list) or not data:
        raise DataError(f"{path}: expected a non-empty JSON array of objects, or columns of equal length (or use "
                        ".jsonl, one object per line)")
    for number, row in enumerate(data, 1):
        if not isinstance(row, dict):
            raise DataError(f"{path}: item {number}: expected a JSON object with named fields")
        yield number, row


_PANDAS_INDEX = re.compile(r"__index_level_\d+__")     # the field pyarrow stores a DataFrame's nameless index in


def _parquet_file(path: str):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise DataError(f"{path}: not a readable Parquet file ({e})") from None


def _parquet_names(schema) -> tuple[list[str], dict[str, str]]:
    """(the fields in the order read, {field: the column's name}) of a Parquet schema: the index pandas stored as
    `__index_level_0__` named as `pd.read_parquet(path).reset_index()` names it — the index's own name, else
    `index` (`level_0`, ... for several levels, or where the name is taken) — and put first; a RangeIndex, which
    pandas keeps in its metadata only, is no column. Files without pandas' metadata: their fields as they are."""
    fields = list(schema.names)
    try:
        meta = schema.pandas_metadata or {}
    except Exception:  # noqa: BLE001 - metadata that is not pandas' JSON: the fields as they are
        meta = {}
    index = [f for f in meta.get("index_columns", []) if isinstance(f, str) and f in fields]
    given = {c.get("field_name"): c.get("name") for c in meta.get("columns", []) if isinstance(c, dict)}
    taken, names = {f.casefold() for f in fields if not _PANDAS_INDEX.fullmatch(f)}, {}
    for level, field in enumerate(index):
        if not _PANDAS_INDEX.fullmatch(field):           # a named index: stored under its name
            continue
        own = given.get(field)
        name = str(own) if own is not None else "index" if len(meta["index_columns"]) == 1 else f"level_{level}"
        for name in (name, f"level_{level}", field):
            if name.casefold() not in taken:
                break
        names[field] = name
        taken.add(name.casefold())
    return index + [f for f in fields if f not in index], {f: names.get(f, f) for f in fields}


def _parquet_rows(path: str) -> Iterator[tuple[int, dict]]:
    reader = _parquet_file(path)
    if reader.metadata.num_rows == 0:
        raise DataError(f"{path}: no data rows")
    order, names = _parquet_names(reader.schema_arrow)
    if renamed := {f: n for f, n in names.items() if f != n}:
        log.info(f"{path}: " + ", ".join(f"{f!r} is pandas' index, read as {n!r}" for f, n in renamed.items())
                 + " (as pandas' read_parquet(...).reset_index() names it)")
    number = 0
    for batch in reader.iter_batches(batch_size=10_000, columns=None if order == reader.schema_arrow.names else order):
        for row in batch.to_pylist():
            number += 1
            yield number, {names[f]: row[f] for f in order}


def iter_rows(path: str, names: tuple[str, ...] | None = None) -> Iterator[tuple[int, dict]]:
    """(row position, {column: value}) for any supported file; position is the line for text formats."""
    fmt = file_format(path)
    if fmt in ("csv", "tsv"):
        return _delimited_rows(path, fmt, names)
    if fmt in ("json", "jsonl"):
        return _json_rows(path, fmt)
    if fmt == "xlsx":
        from .excel import excel_rows

        return excel_rows(path)
    return _parquet_rows(path)


def file_columns(path: str, names: tuple[str, ...] | None = None) -> list[str]:
    """The column names of a file, read from its header / first record / schema only."""
    if names:
        return list(names)
    fmt = file_format(path)
    if fmt == "xlsx":
        from .excel import excel_rows

        return list(next(excel_rows(path, header_only=True))[1])
    if fmt == "parquet":
        order, names = _parquet_names(_parquet_file(path).schema_arrow)
        return [names[f] for f in order]
    if fmt in ("csv", "tsv"):
        limit = csv.field_size_limit(_FIELD_LIMIT)
        header = None
        try:
            rows = csv.reader(decoded_lines(path), **reading_dialect(path, fmt))
            header = next(rows, None)
            if fmt == "csv" and _is_sep_line(header):
                header = next(rows, None)
            first_row = next(rows, None)
        except csv.Error as e:
            if header is None:            # the header itself
                raise DataError(f"{path}: line {rows.line_num}: malformed {fmt.upper()} header ({e}); check its "
                                "quoting") from None
            first_row = None              # a malformed first row: the reader names it
        finally:
            csv.field_size_limit(limit)
        if not header or header == [""]:
            raise DataError(f"{path}: the file is empty; it needs a header line and at least one row")
        return _header(path, header, first_row)
    for _, row in _json_rows(path, fmt):
        return list(row)
    return []
