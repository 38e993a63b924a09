"""Excel workbooks (.xlsx, the `excel` extra: openpyxl) read as a CSV file is: the sheet's first row names the
columns (below a report's title and blank rows, if any: _header_row), each later row is a row, its position the
sheet's row number (the header is row 1), every cell as text (whole numbers without ".0", dates as ISO text:
2020-01-02). Rows whose every cell is empty after the last row with data are left out: a sheet's formatting can
reach far below its data; those between rows are empty rows (left out of training, an error to predict). The
first sheet unless the path names one: `book.xlsx#dev` is the sheet "dev" of book.xlsx (`sheet_path`), so one
workbook can hold the training and validation rows."""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from typing import Iterator

from .. import extras
from ..exceptions import DataError
from ..sheets import SHEET_MARK, sheet_path
from .columns import pandas_index

log = logging.getLogger("tuneloop")


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time(0):
        return value.date().isoformat()              # a date cell: Excel keeps it as midnight of that day
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    return str(value).strip() if isinstance(value, str) else str(value)


TITLE_ROWS = 10      # rows of at most one cell (a title, a blank) looked past for the column names below them


def _header_row(head: list[tuple]) -> int:
    """Which of a sheet's first rows names the columns: the first, or the first that names two columns or more
    (texts all) below rows of one filled cell at most (a report's title, blank rows); the first when no such row
    comes within TITLE_ROWS (a sheet of one column: its first row names it)."""
    for i, cells in enumerate(head[:TITLE_ROWS + 1]):
        filled = [c for c in cells if _text(c)]
        if len(filled) >= 2:
            return i if i == 0 or all(isinstance(c, str) for c in filled) else 0
    return 0


def _header(path: str, cells: tuple, row: int = 1, first_row=None, say: bool = False) -> list[str]:
    names = [_text(c) for c in cells]
    while names and not names[-1]:
        names.pop()                                   # empty cells after the last column name
    names = pandas_index(path, names, [_text(c) for c in first_row or ()], say)   # to_excel()'s index, A1 empty
    if not names:
        raise DataError(f"{path}: the sheet's first row is empty; it needs the column names")
    blank = next((i for i, n in enumerate(names) if not n), None)
    if blank is not None:
        raise DataError(f"{path}: row {row}, column {_column_letter(blank)}: no column name; name every column")
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise DataError(f"{path}: row {row}: the column name {twice!r} is given twice; rename one")
    return names


def _column_letter(index: int) -> str:
    letters, index = "", index + 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def excel_rows(path: str, header_only: bool = False) -> Iterator[tuple[int, dict]]:
    """(sheet row, {column: text}) of the sheet `path` names (book.xlsx#dev), else of the first; with
    `header_only`, one (1, {column: ""}) and no more."""
    extras.require("excel")
    from openpyxl import load_workbook

    file, wanted = sheet_path(path)
    try:
        book = load_workbook(file, read_only=True, data_only=True)
    except Exception as e:  # noqa: BLE001 - openpyxl raises several types for a file that is not a workbook
        raise DataError(f"{file}: not a readable .xlsx workbook ({type(e).__name__}: {e})") from None
    try:
        titles = [ws.title for ws in book.worksheets]
        if wanted is None:
            sheet = book.worksheets[0]
            if len(titles) > 1 and not header_only:
                log.info(f"{path}: {len(titles)} sheets; reading the first, {sheet.title!r} (another: "
                         f"{file}{SHEET_MARK}{titles[1]})")
        else:
            same = [t for t in titles if t == wanted] or [t for t in titles if t.casefold() == wanted.casefold()]
            if len(same) != 1:
                raise DataError(f"{path}: the workbook has no sheet named {wanted!r}; its sheets: "
                                f"{', '.join(map(repr, titles))} (name one after {SHEET_MARK}, e.g. "
                                f"{file}{SHEET_MARK}{titles[0]})")
            sheet = book[same[0]]
        rows = sheet.iter_rows(values_only=True)
        head = list(itertools.islice(rows, TITLE_ROWS + 1))
        at = _header_row(head)
        above, cells, rows = head[:at], (head[at] if head else ()), itertools.chain(head[at + 1:], rows)
        if above and not header_only:
            title = next((_text(c) for row in above for c in row if _text(c)), "")
            log.info(f"{path}: row{'s 1-' if len(above) > 1 else ' '}{len(above)} above the column names left out"
                     + (f" (a title: {title[:60]!r})" if title else "") + f"; the header is row {len(above) + 1}")
        header = _header(path, cells, len(above) + 1, head[at + 1] if len(head) > at + 1 else None,
                         say=not header_only)
        if header_only:
            yield len(above) + 1, dict.fromkeys(header, "")
            return
        seen, blank = 0, []
        for number, cells in enumerate(rows, start=len(above) + 2):
            values = [_text(c) for c in cells[:len(header)]] + [""] * max(0, len(header) - len(cells))
            if not any(values):
                blank.append(number)              # yielded (as an empty row) when a row with data comes after it
                continue
            yield from ((line, dict.fromkeys(header, "")) for line in blank)
            seen, blank = seen + 1, []
            yield number, dict(zip(header, values, strict=True))
        if not seen:
            raise DataError(f"{path}: no data rows (the sheet {sheet.title!r} holds only its header row)")
    finally:
        book.close()


EXCEL_CELL_LIMIT = 32_767        # characters an Excel cell holds


def workbook_bytes(rows: list[dict], where: str, sheet_title: str = "predictions") -> bytes:
    """An .xlsx workbook of `rows` (one sheet, a header of the first row's keys): numbers as numbers, JSON objects
    and lists as JSON text, nothing as an empty cell, every text as text (a text that starts with "=" is not
    made a formula). A text Excel cannot hold (over 32,767 characters, a control character) is a TuneloopError
    naming its row and column: `where` (e.g. "--output p.xlsx") starts the message."""
    import io
    import json
    import math

    extras.require("excel")
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    from ..exceptions import TuneloopError

    names = list(rows[0]) if rows else ["id"]
    table = []                           # every cell checked before the workbook is made (it holds a temp file)
    for number, row in enumerate(rows, start=2):
        cells = []
        for name in names:
            value = row.get(name)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                cells.append(None)
            elif isinstance(value, (bool, int, float)):
                cells.append(value if not isinstance(value, float) or math.isfinite(value) else str(value))
            else:
                text = json.dumps(value, default=str, ensure_ascii=False) if isinstance(value, (dict, list, tuple)) \
                    else str(value)
                if len(text) > EXCEL_CELL_LIMIT or ILLEGAL_CHARACTERS_RE.search(text):
                    why = (f"{len(text):,} characters; an Excel cell holds at most {EXCEL_CELL_LIMIT:,}"
                           if len(text) > EXCEL_CELL_LIMIT else "a control character an Excel cell cannot hold")
                    raise TuneloopError(f"{where}: row {number}, column {name!r}: {why}; write a .csv, .tsv or "
                                        ".jsonl file instead (or --keep-columns without that column)")
                cells.append(text)
        table.append(cells)
    book = Workbook(write_only=True)
    sheet = book.create_sheet(sheet_title)
    sheet.append(names)

    def as_text(value):
        cell = WriteOnlyCell(sheet, value=value)
        cell.data_type = "s"                     # text as text: "=cmd|..." is not a formula
        return cell

    for cells in table:
        sheet.append([as_text(v) if isinstance(v, str) else v for v in cells])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


SPLIT_SHEETS = {"train": ("train", "training"), "validation": ("validation", "valid", "val", "dev"),
                "test": ("test",)}                      # sheet names (any letter case) that say which rows they hold


def sheet_splits(path: str, without: tuple[str, ...] = ()) -> dict[str, str]:
    """{split: its sheet's path (book.xlsx#dev)} of a workbook whose sheets are named as splits (train, dev or
    validation, test), when one sheet is named as the training rows and it is not the first sheet alone; {} for any
    other file, one whose sheets are named otherwise, or without the `excel` extra (the reader then says what to
    install). `without`: splits given otherwise (a --validation-file), not looked for."""
    file, wanted = sheet_path(path)
    if wanted is not None or not file.lower().endswith(".xlsx") or extras.missing("excel"):
        return {}
    from openpyxl import load_workbook

    try:
        book = load_workbook(file, read_only=True)
        titles = [ws.title for ws in book.worksheets]
        book.close()
    except Exception:  # noqa: BLE001 - not a readable workbook: the reader says so, naming it
        return {}
    found = {}                                          # {split: its sheet's title}
    for split, names in SPLIT_SHEETS.items():
        same = [t for t in titles if t.strip().casefold() in names]
        if len(same) == 1 and split not in without:
            found[split] = same[0]
    if "train" not in found or found == {"train": titles[0]}:     # (the first sheet alone: read as it is)
        return {}
    return {split: f"{file}{SHEET_MARK}{title}" for split, title in found.items()}
