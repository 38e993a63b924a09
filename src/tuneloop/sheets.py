"""A data path that names a sheet of an Excel workbook: `book.xlsx#dev` is the sheet "dev" of book.xlsx, so one
workbook can hold the training, validation and test rows (data/excel.py reads it). Shared: the options' checks
(config/) and the readers (data/) ask the same question of a path."""

from __future__ import annotations

import os
import re

SHEET_MARK = "#"
_SHEET_PATH = re.compile(r"(.+\.xlsx)#(.+)", re.IGNORECASE | re.DOTALL)


def sheet_path(path) -> tuple[str, str | None]:
    """(the file, the sheet it names or None) of a data path: `book.xlsx#dev` is the sheet "dev" of book.xlsx; a
    file whose whole name is that, where one exists, is read as that file. Any other path: (path, None)."""
    text = str(path)
    found = _SHEET_PATH.fullmatch(text)
    if found is None or os.path.exists(text):
        return text, None
    return found.group(1), found.group(2)


def data_file(path) -> str:
    """The file a data path reads (book.xlsx of book.xlsx#dev)."""
    return sheet_path(path)[0]


def is_data_file(path) -> bool:
    """Whether a data path's file exists (the sheet is checked when it is read, naming the workbook's sheets)."""
    return os.path.isfile(data_file(path))


def file_signature(path) -> list | None:
    """[size, modification time in ns] of the file a data path reads (None: it is not there): what a run records
    of its data files (split.json, results.json), so that a resume, a read-back or an evaluate can tell it changed."""
    try:
        stat = os.stat(data_file(path))
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]
