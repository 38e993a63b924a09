"""Validation rows that are also training rows: the same text (or pair of texts) on both sides. The model has
been trained on them, so the validation scores count memory as skill, and every choice made on those scores (the
best checkpoint, early stopping, the decision rule's temperature and cut-offs) leans the same way. Common in users'
files: a spreadsheet exported twice, a row copied into both files, duplicates in a file that tuneloop splits, or
the training file given again as --validation-file. The run goes on (the rows are the user's to fix) and says how
many, with one of them; results.json records the count per split."""

from __future__ import annotations

import logging
import os

from ..atomic import same_file
from ..sheets import sheet_path

log = logging.getLogger("tuneloop")

BATCH = 10_000       # rows read at a time: the texts are hashed, never all held as Python strings


def _keys(table):
    """A hash per row of its texts, equal for texts equal up to runs of whitespace (`str.split()`)."""
    for batch in table.select_columns(["text_a", "text_b"]).iter(batch_size=BATCH):
        for a, b in zip(batch["text_a"], batch["text_b"], strict=True):
            yield hash((" ".join(a.split()), " ".join(b.split()) if b is not None else None)), a


def shared_rows(train, evaluation) -> tuple[int, str | None]:
    """(how many rows of `evaluation` have a text, or pair, found among `train`'s rows; the first such text) for
    two canonical tables (data/sources.py: text_a, text_b)."""
    seen = {key for key, _ in _keys(train)}
    count, first = 0, None
    for key, text in _keys(evaluation):
        if key in seen:
            count += 1
            first = text if first is None else first
    return count, first


def given_twice(train_source: str | None, validation_source: str | None) -> bool:
    """Whether --validation-file names the training file itself (not a split of it; tables from Python are not
    files)."""
    if not (train_source and validation_source):
        return False
    (train, train_sheet), (validation, validation_sheet) = sheet_path(train_source), sheet_path(validation_source)
    return (os.path.isfile(train) and os.path.isfile(validation) and same_file(train, validation)
            and train_sheet == validation_sheet)         # two sheets of one workbook are two sets of rows


def check_overlap(train, evaluation: dict, sources: dict, held_out: bool) -> dict:
    """{split: rows also in training} for every validation split, each count said in the log when not zero."""
    counts = {}
    for split, table in evaluation.items():
        if not held_out and given_twice(sources.get("train"), sources.get(split)):
            log.warning(f"{split}: {sources[split]} is also the training file: every {split} row is a training row, "
                        "so its scores measure what the model memorised; give a file of other rows, or leave "
                        "--validation-file out to hold rows out of the training file")
            counts[split] = len(table)
            continue
        count, example = shared_rows(train, table)
        counts[split] = count
        if count:
            shown = example if len(example) <= 60 else example[:57] + "..."
            log.warning(f"{split}: {count} of {len(table)} rows ({count / len(table):.1%}) are also training rows "
                        f"(the same text, e.g. {shown!r}): the model was trained on them, so the {split} scores "
                        "flatter it; drop them from one side (duplicates in a file tuneloop splits land on both)")
    return counts
