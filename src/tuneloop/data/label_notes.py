"""What the log says of training labels that look like something else than the classes they will train as: labels
joined into sets, a label on every row, ids or amounts taken for classes, numbers but for a word, missing-value
markers, two ways of writing one class, and how decimal commas and dotted thousands were read. Warnings, the
labels training as the data gives them (data/labels.py), but for two stops: a guessed class per row, and every label
on every row (nothing to learn)."""

from __future__ import annotations

import logging
import unicodedata
from typing import Optional

from ..exceptions import DataError
from .label_numbers import _as_float, _written_with_comma

log = logging.getLogger("tuneloop")


SET_SEPARATORS = ("|", ";", ",", "+")     # what joins several labels in one cell, as spreadsheets write sets


def _say_label_sets(names: list[str], source: str) -> None:
    """Single-label classes guessed from labels where some are others joined ('sports|tech' beside 'sports' and
    'tech'): almost always a multi-label column missing its --label-separator, so the log says so."""
    alone = set(names)
    for separator in SET_SEPARATORS:
        joined = [n for n in names if separator in n
                  and all(part.strip() in alone for part in n.split(separator))]
        if joined:
            shown = ", ".join(repr(n) for n in joined[:3]) + (f" and {len(joined) - 3} more" if len(joined) > 3 else "")
            log.warning(f"{source}: the labels {shown} are other labels joined by {separator!r}, and are trained as "
                        f"classes of their own ({len(names)} in all); if a row can carry several labels, give "
                        f"--label-separator '{separator}' to train one output per label (multi-label)")
            return


def _say_labels_on_every_row(names: list[str], sets: list[set], source: str) -> None:
    """Multi-label: a label every training row carries teaches nothing (the model learns to always say it); when
    every label is on every row there is nothing to learn at all."""
    always = [name for name in names if all(name in labels for labels in sets)]
    if always and len(always) == len(names):
        raise DataError(f"{source}: every row carries every label ({', '.join(names[:10])}); there is nothing to "
                        "learn: give rows without some of them")
    if always:
        log.warning(f"{source}: every training row carries the label(s) {', '.join(always[:10])}; the model learns "
                    "to always predict them")


def _say_unsplit_sets(values: list[str], separator: str | None, source: str) -> None:
    """Multi-label without --label-separator: a cell that is not a JSON list is one label, so 'a,b' trains as a
    label of its own named 'a,b' (every row one label): said, naming the separator that would read the sets."""
    if separator:
        return
    for mark in ("|", ";", ","):                 # not "+": a label such as C++ holds it
        joined = [v for v in values if not (v.startswith("[") and v.endswith("]"))
                  and len(parts := v.split(mark)) > 1 and all(p.strip() for p in parts)]
        if joined:
            log.warning(f"{source}: without --label-separator each label cell is one label, so {joined[0]!r} is "
                        f"a label of its own, not a set; give --label-separator '{mark}' to read the labels joined "
                        "by it as sets (or write each set as a JSON list)")
            return


def _say_no_labels(names: list[str], source: str) -> None:
    """Multi-label training rows that carry no label at all: nothing to learn (was 'label ... was not seen in the
    training data (known: )' from the validation file)."""
    if not names:
        raise DataError(f"{source}: no training row carries a label (every label set is empty); give rows that "
                        "carry the labels to learn")


UNIQUE_LABELS_FROM = 10     # rows from which a label column whose every row differs stops a guessed classification
MANY_NUMBERS = 20           # whole-number labels with more values than this, not ids 0..K-1 or 1..K: said


def _check_guessed_classes(names: list[str], numeric: list, rows: int, source: str) -> None:
    """Classes auto guessed from the labels that cannot be what was meant: every row its own class (an id or a text
    column taken for the label: nothing to learn a class from) stops the run; many whole numbers that are not class
    ids (gaps between them, or a first one other than 0 or 1: amounts, years, ages) are said."""
    whole = all(x is not None and x.is_integer() for x in numeric)
    amounts = "if they are amounts or scores, give --problem-type regression"
    if rows >= UNIQUE_LABELS_FROM and len(names) == rows:
        raise DataError(f"{source}: every row has a label of its own ({rows} different labels in {rows} rows, e.g. "
                        f"{names[0]!r}): a class needs rows to learn it from; {amounts + '; ' if whole else ''}if "
                        "this is not the label column, name it with --label-column NAME (or give --problem-type "
                        "single_label_classification to train these classes anyway)")
    if whole and len(names) > MANY_NUMBERS:
        gaps = int(names[-1]) - int(names[0]) + 1 > len(names)
        if gaps or int(names[0]) not in (0, 1):          # class ids run 0..K-1 or 1..K; years, ages, prices do not
            log.warning(f"{source}: the labels are {len(names)} different whole numbers from {names[0]} to "
                        f"{names[-1]}{' with gaps' if gaps else ''}, trained as {len(names)} classes; {amounts}")


def _say_number_reading(values: list[str], comma: bool, grouping: Optional[bool], source: str) -> None:
    """How a decimal-comma file's labels were read as numbers: its decimal commas, and its dotted labels
    (dots_group_thousands) as grouped thousands or, where they could be either, as decimal points."""
    if not comma:                        # a ',' file, a DataFrame, a list: dots are decimal points, nothing to say
        return
    example = next((v for v in values if "," in v), None)
    if example is not None:
        log.info(f"{source}: labels with a decimal comma read as numbers ({example!r} as {_as_float(example, True)})")
    _say_grouping(values, grouping, source)


def _say_odd_words(values: list[str], numeric: list, source: str) -> None:
    """Classes guessed from labels that are numbers but for one or two words ('1', '2', 'two'): almost always a
    number written out or a stray note, trained as a class of its own; said."""
    words = sorted(v for v, x in zip(values, numeric, strict=True) if x is None and not _written_with_comma(v))
    numbers = [v for x, v in sorted((x, v) for v, x in zip(values, numeric, strict=True) if x is not None)]
    if len(numbers) >= 2 and 1 <= len(words) <= 2:
        log.warning(f"{source}: the labels are numbers ({', '.join(numbers[:6])}{' ...' if len(numbers) > 6 else ''})"
                    f" but for {' and '.join(map(repr, words))}, trained as "
                    + ("a class of its own; if it is a number, write it as the others are; if it marks a row "
                       "without a label, leave the row out" if len(words) == 1 else "classes of their own; if they "
                       "are numbers, write them as the others are; if they mark rows without a label, leave the rows "
                       "out"))


MISSING_MARKERS = {"na", "n/a", "#n/a", "nan", "null", "none", "?"}    # what files write for a label not given


def _say_missing_markers(names: list[str], source: str) -> None:
    """A class named as a missing value ('N/A', 'NaN', 'null'): rows without a label, which a reader such as
    pandas leaves empty, trained here as a class of its own; said."""
    marked = [n for n in names if n.strip().casefold() in MISSING_MARKERS]
    others = [n for n in names if n not in marked]
    if marked and len(others) >= 2 and not all(_as_float(n) is not None for n in others):   # numbers: _say_odd_words
        many = len(marked) > 1
        log.warning(f"{source}: the label{'s' if many else ''} {' and '.join(map(repr, marked))} "
                    f"{'read' if many else 'reads'} as a missing label and {'are' if many else 'is'} trained as a "
                    "class of its own; if those rows have no label, leave them out (or predict them with tuneloop "
                    "predict)")


def _say_grouping(values: list[str], grouping: Optional[bool], source: str) -> None:
    """How a decimal-comma file's dotted labels were read (dots_group_thousands): as grouped thousands, or, where
    they could be either, as decimal points, with what to do if that is wrong."""
    example = next((v for v in values if "." in v and "," not in v), None)
    if grouping and example is not None:
        log.info(f"{source}: labels with dots that group thousands read as numbers ({example!r} as "
                 f"{_as_float(example, True, True):g}), as a ';' file with decimal commas writes them")
    elif grouping is None and example is not None:
        log.warning(f"{source}: labels such as {example!r} are read with a decimal point ({float(example):g}); in a "
                    f"';' file they may be grouped thousands ({float(example.replace('.', '')):g}): if so, write "
                    "them without the dots")


def _say_near_duplicates(names: list[str], source: str) -> None:
    """Classes whose names differ only in case, inner spacing or Unicode form ('neg' and 'Neg', 'not spam' and 'not
    spam', 'café' in one character or two) are different classes to the model; almost always one class typed two
    ways, so the log says so."""
    groups: dict[str, list[str]] = {}
    for name in names:                    # NFKC: 'café' typed as one character or as e and an accent are alike
        groups.setdefault(" ".join(unicodedata.normalize("NFKC", name).casefold().split()), []).append(name)
    alike = [" and ".join(repr(n) for n in group) for group in groups.values() if len(group) > 1]
    if alike:
        log.warning(f"{source}: the labels {'; '.join(alike[:5])} differ only in case or spacing" + (
                        " (or in how an accent is stored: Unicode's composed and decomposed forms)" if any(
                            unicodedata.normalize("NFC", n) != n for n in names) else "") + " and are trained as "
                    "different classes; if they mean the same, write them one way")
