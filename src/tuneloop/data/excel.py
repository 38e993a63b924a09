"""Excel workbooks (.xlsx, the `excel` extra: openpyxl) read as a CSV file is: the sheet's first row names the
columns, each later row is a row, its position the sheet's row number (the header is row 1), every cell as text
(whole numbers without ".0", dates as ISO text: 2020-01-02). Rows whose every cell is empty are left out: a
sheet's formatting can reach far below its data. The first sheet unless the path names one: `book.xlsx#dev` is the
sheet "dev" of book.xlsx (`sheet_path`), so one workbook can hold the training and validation rows."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Iterator

from .. import extras
from ..exceptions import DataError
from ..sheets import SHEET_MARK, sheet_path

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


def _header(path: str, cells: tuple) -> list[str]:
    names = [_text(c) for c in cells]
    while names and not names[-1]:
        names.pop()                                   # empty cells after the last column name
    if not names:
        raise DataError(f"{path}: the sheet's first row is empty; it needs the column names")
    blank = next((i for i, n in enumerate(names) if not n), None)
    if blank is not None:
        raise DataError(f"{path}: row 1, column {_column_letter(blank)}: no column name; name every column")
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise DataError(f"{path}: row 1: the column name {twice!r} is given twice; rename one")
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
        header = _header(path, next(rows, ()))
        if header_only:
            yield 1, dict.fromkeys(header, "")
            return
        seen = 0
        for number, cells in enumerate(rows, start=2):
            values = [_text(c) for c in cells[:len(header)]] + [""] * max(0, len(header) - len(cells))
            if not any(values):
                continue
            seen += 1
            yield number, dict(zip(header, values, strict=True))
        if not seen:
            raise DataError(f"{path}: no data rows (the sheet {sheet.title!r} holds only its header row)")
    finally:
        book.close()
