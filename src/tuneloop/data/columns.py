"""Which columns of a file (or a table from Python) hold the texts, the label and the example id: the ones the user
(or the model's run) named, or found by their usual names, in any letter case (`Text`, `LABEL`), with the one column
left over taken for the label where it can be nothing else."""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass
from typing import Optional

from ..exceptions import DataError

log = logging.getLogger("tuneloop")

TEXT_COLUMN_PAIRS = [("sentence1", "sentence2"), ("question1", "question2"), ("premise", "hypothesis"),
                     ("question", "sentence"), ("question", "context"), ("query", "passage"),
                     ("text1", "text2"), ("text_a", "text_b"), ("text", "text_pair"),
                     ("#1 String", "#2 String")]
TEXT_COLUMN_SINGLES = ["text", "sentence", "review", "content", "document", "comment", "tweet", "body", "input",
                       "utterance", "message", "question", "query", "description", "abstract", "headline", "title"]
LABEL_COLUMNS = ["label", "labels", "score", "target", "class", "category", "gold_label", "Quality",
                 "is_duplicate", "y", "sentiment", "intent", "topic", "emotion", "polarity", "rating", "stars"]
ID_COLUMNS = ["id", "idx", "index", "guid"]
# the index pandas writes with to_csv() / keeps in a Parquet file (data/readers.py names its nameless one `index`,
# or `level_0`, ... as reset_index() does): never the label, whatever else is left
_INDEX = re.compile(r"Unnamed: \d+|__index_level_\d+__|index|level_\d+")


@dataclass(frozen=True)
class Columns:
    """Which columns of a source file hold the texts, the label and the example id."""

    text: tuple[str, ...]
    label: Optional[str] = None
    id: Optional[str] = None
    label_left_over: bool = False     # the label is the one column besides the texts and the id (said in the log)


def _key(name) -> str:
    return str(name).strip().casefold()


def named(available: list, name: str) -> str | None:
    """The column called `name`: that exact name, else the one column whose name it is in another letter case or
    with spaces around it (`Text`, ` label`); None where there is none, or more than one such."""
    if name in available:
        return name
    alike = [c for c in available if _key(c) == _key(name)]
    return alike[0] if len(alike) == 1 else None


def _first(available: list, names: list, taken=()) -> str | None:
    return next((c for c in (named(available, n) for n in names) if c is not None and c not in taken), None)


def _did_you_mean(available: list, name: str) -> str:
    """' did you mean 'title'?' for the column whose name is closest to `name` (or '': none close enough)."""
    close = difflib.get_close_matches(_key(name), [_key(c) for c in available], n=1, cutoff=0.75)
    return next((f" did you mean {c!r}?" for c in available if close and _key(c) == close[0]), "")


def detect_columns(path: str, available: list, text: list[str] | None, label: str | None,
                   need_label: bool) -> Columns:
    """Use the columns the user named, or find the usual ones; explain what is missing otherwise."""
    available = list(available)
    shown = ", ".join(map(str, available))
    if text:                  # named (by the user, or as the model's run read them): in this file's letter case
        missing = [c for c in text if named(available, c) is None]
        if missing:
            raise DataError(f"{path}: no text column {missing[0]!r} (columns: {shown});"
                            f"{_did_you_mean(available, missing[0])} fix --text-columns")
        text_cols = tuple(named(available, c) for c in text)
    else:
        text_cols = next((pair for pair in (tuple(named(available, c) for c in two) for two in TEXT_COLUMN_PAIRS)
                          if None not in pair), None)
        if text_cols is None:
            single = _first(available, TEXT_COLUMN_SINGLES)
            if single is None:
                raise DataError(f"{path}: cannot tell which column holds the text (columns: {shown}); name it with "
                                "--text-columns COLUMN or --text-columns FIRST,SECOND")
            text_cols = (single,)
    label_col, left_over = None, False
    if label:
        label = named(available, label) or label
        if label not in available:
            if need_label:
                raise DataError(f"{path}: no label column {label!r} (columns: {shown});"
                                f"{_did_you_mean(available, label)} fix --label-column")
        elif label in text_cols:
            raise DataError(f"{path}: column {label!r} is named as both a text column and the label column; the "
                            "model would read its answer (fix --text-columns or --label-column)")
        else:
            label_col = label
    else:
        label_col = _first(available, LABEL_COLUMNS, taken=text_cols)
    id_col = _first(available, ID_COLUMNS, taken=(*text_cols, label_col))
    if label_col is None and need_label:     # (a label named and missing has stopped above)
        others = [c for c in available if c not in text_cols and c != id_col and not _INDEX.fullmatch(str(c))]
        if len(others) == 1:                 # review,sentiment: nothing else it could be
            label_col, left_over = others[0], True
        else:
            if not others:                   # the texts (and ids) alone: a file to predict, not to learn from
                raise DataError(f"{path}: no column for the labels (columns: {shown}); training and evaluating "
                                "read each row's label from one (name it with --label-column COLUMN); rows without "
                                "labels are predicted with `tuneloop predict --input FILE`")
            raise DataError(f"{path}: cannot tell which column holds the label (columns: {shown}); name it with "
                            "--label-column COLUMN")
    return Columns(text_cols, label_col, id_col, left_over)


def pandas_index(path: str, names: list[str], first_row, say: bool = False) -> list[str]:
    """`names` with a nameless first column named "Unnamed: 0", as pandas reads it, where it looks like the index
    pandas' to_csv() / to_excel() write (the other columns named, a whole number in the first row): set aside
    as that index (detect_columns), and said when `say`."""
    if len(names) > 1 and not names[0] and all(names[1:]) and first_row and str(first_row[0]).strip().isdigit():
        if say:
            log.info(f"{path}: its first column has no name and holds whole numbers: read as pandas' index "
                     "('Unnamed: 0', as to_csv() / to_excel() write it), not as data")
        return ["Unnamed: 0", *names[1:]]
    return names


def missing_detected(path, available, detected, need_label) -> None:
    """Nothing, or a DataError where the training file's columns were detected (not named) and this file lacks one:
    said as such, naming the training file; the options that name columns suggested only where naming them for
    both files would read this one."""
    if detected is None:
        return None
    train, columns, available_there, text_found, label_found = detected
    wanted = [("text", c) for c in columns.text if text_found] + (
        [("label", columns.label)] if label_found and columns.label and need_label else [])
    missing = next(((what, c) for what, c in wanted if named(available, c) is None), None)
    if missing is None:
        return None
    try:                                  # what this file's own columns would be, were they detected here
        here = detect_columns(str(path), available, None, None, need_label)
        here = here.text if missing[0] == "text" else (here.label,)
    except DataError:
        here = ()
    both = here and all(named(available_there, c) for c in here)
    flag = "--text-columns" if missing[0] == "text" else "--label-column"
    raise DataError(f"{path}: no {missing[0]} column {missing[1]!r}, which tuneloop detected as the {missing[0]} in "
                    f"the training file {train} (columns here: {', '.join(map(str, available))}); " + (
                        f"both files have {', '.join(map(repr, here))}: name it with {flag} {','.join(here)}"
                        if both else f"give both files the same column names (rename {missing[1]!r} in one)"))
