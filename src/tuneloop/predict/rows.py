"""Predictions as people and GLUE read them: label names and probabilities per row, and the files they go in."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import numpy as np

from .. import extras
from ..atomic import atomic_write_bytes, atomic_write_text
from ..data.columns import named
from ..data.excel import workbook_bytes
from ..data.label_numbers import _as_float
from ..data.readers import delimited_text
from ..decision.rule import DecisionRule
from ..exceptions import ConfigError, TuneloopError
from ..objective import Objective, objective_for

log = logging.getLogger("tuneloop")
FORMULA_STARTS = ("=", "+", "-", "@")     # what a spreadsheet opening a CSV reads as the start of a formula


def probabilities(logits: np.ndarray, objective: str | Objective) -> np.ndarray:
    """Raw softmax/sigmoid probabilities (the score for regression); `objective`, or its problem type's name."""
    return objective_for(objective).probabilities(logits)


def shown_score(value) -> float:
    """A regression score as predictions give it: to 6 decimals, and to 6 significant digits below 1 (a target of
    0.00021896 kept so, not as 0.000219; 0.0000004 not 0.0)."""
    value = float(value)
    return float(f"{value:.6g}") if abs(value) < 1 else round(value, 6)


def decided_rows(logits: np.ndarray, labels, rule: DecisionRule | None = None) -> list[dict]:
    """One dict per row of logits: {"label", "probabilities": {label: p}} ({"score"} for regression). With a
    decision rule (decision/rule.py): its calibrated probabilities, thresholds and abstain label; without one: raw
    softmax/sigmoid and argmax (0.5 per label)."""
    objective = labels.objective
    if not objective.classes:
        return [{"score": shown_score(v)} for v in objective.predictions(logits)]
    if rule is not None:
        probs, preds, abstains = rule.probabilities(logits), rule.predictions(logits), rule.abstains(logits)
    else:
        probs, preds = objective.probabilities(logits), objective.predictions(logits)
        abstains = np.zeros(len(logits), dtype=bool)
    rows = []
    for i in range(len(logits)):
        label = rule.abstain_label if abstains[i] else objective.name(preds[i], labels)
        rows.append({"label": label, "probabilities": {n: round(float(p), 6)
                                                       for n, p in zip(labels.names, probs[i], strict=True)}})
    return rows


def prediction_rows(ids, logits: np.ndarray, labels, rule: DecisionRule | None = None) -> list[dict]:
    """Rows as prediction files hold them: id, the label (or score), prob_<label> per class, and with a rule a
    `decision_rule` column that says which rule made the row."""
    described = rule.describe() if rule is not None and labels.objective.classes else None
    rows = []
    for row_id, row in zip(ids, decided_rows(logits, labels, rule), strict=True):
        flat = {"id": row_id, **{k: v for k, v in row.items() if k != "probabilities"}}
        flat.update({f"prob_{n}": p for n, p in row.get("probabilities", {}).items()})
        if described:
            flat["decision_rule"] = described
        rows.append(flat)
    return rows


def keep_columns(option: str | None, available: list[str], path: str, glue: bool = False) -> list[str] | str:
    """--keep-columns: which of the input file's columns the predictions file carries beside the predictions.
    "all" (the default; none with --glue, whose layout is GLUE's two columns), "none", or names (A,B)."""
    if glue:
        if option not in (None, "none"):
            raise TuneloopError(f"--keep-columns {option}: --glue writes GLUE's two-column layout (index, "
                                "prediction); drop --keep-columns or --glue")
        return []
    option = "all" if option is None else option.strip()
    if option in ("all", "none"):
        return option if option == "all" else []
    names = [name.strip() for name in option.split(",")]
    found = [named(available, name) for name in names]       # any letter case, as --text-columns: the file's own
    missing = [name for name, column in zip(names, found, strict=True) if column is None]
    if not all(names) or missing:
        alike = [c for c in available if missing and str(c).casefold() == missing[0].casefold()]
        what = "an empty name" if not missing else f"has {len(alike)} columns named {missing[0]!r} in other " \
            "letter cases (name one as the file spells it)" if len(alike) > 1 else f"has no column {missing[0]!r}"
        raise ConfigError(f"--keep-columns {option}: {path} {what} (its columns: {', '.join(available)}); give "
                          "all, none or names of its columns separated by commas")
    return list(dict.fromkeys(found))                          # `id,Id`: the column once


def with_input(rows: list[dict], inputs: list[dict], keep: list[str] | str, id_column: str | None) -> list[dict]:
    """Prediction rows with the input's columns (`keep`: names, or "all": every named column the rows hold, in
    order of appearance, but the one the ids came from) between the id and the predictions; an input column named
    like a prediction column in any letter case (a gold `label` or `Label`, say) is written as input_<name>."""
    if not keep:
        return rows
    if keep == "all":
        keep = list(dict.fromkeys(c for row in inputs for c in row if str(c).strip()))
    keep = [c for c in keep if c != id_column]              # its values are the id column's
    taken, names = {str(c).casefold() for c in rows[0]} if rows else set(), {}   # `Label` beside `label`: one name
    for column in keep:                                                            # to a spreadsheet, or a reader
        name = column
        while str(name).casefold() in taken or name in names.values():
            name = f"input_{name}"
        names[column] = name
    return [{"id": row["id"], **{names[c]: given.get(c) for c in keep}, **{k: v for k, v in row.items() if k != "id"}}
            for row, given in zip(rows, inputs, strict=True)]


def _cell(value) -> str:
    """A value in a CSV/TSV file of rows: JSON's objects and lists as JSON, nothing as empty, the rest as str()
    writes it (True, as pandas reads it back)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def _json_line(row: dict) -> str:
    """A JSON Lines row: NaN (Parquet's missing numbers) as null, dates and other values JSON lacks as text."""
    return json.dumps({k: None if isinstance(v, float) and v != v else v for k, v in row.items()},
                      default=str, ensure_ascii=False) + "\n"


def say_formula_texts(rows: list[dict], path: str) -> None:
    """Texts in a CSV/TSV of predictions (predict's --output) that start as a formula does ('=SUM(A1)', '@user',
    '-1 star'): the file keeps them as they came, which a spreadsheet opening it may run; said, with the workbook
    that keeps them text. Nothing for the other formats."""
    if path == STDOUT or Path(path).suffix.lower() not in (".csv", ".tsv"):
        return
    found = [(row.get("id"), value) for row in rows for value in row.values()
             if isinstance(value, str) and value.startswith(FORMULA_STARTS) and _as_float(value) is None]
    if found:
        row, value = found[0]
        log.warning(f"--output {path}: {len(found)} text{'s start' if len(found) > 1 else ' starts'} with =, +, - or @ "
                    f"(id {row}: {value[:40]!r}), kept as they came; a spreadsheet opening the file may read them as "
                    "formulas: to open it in one, write it as .xlsx (--output predictions.xlsx), whose texts stay "
                    "text")


def glue_submission_value(row: dict, labels, task) -> str:
    """GLUE's submission files take class ids for tasks whose files store ids, names for the others."""
    if "score" in row:
        return f"{row['score']:.3f}"
    if task is not None and task.name in ("cola", "sst2", "mrpc", "qqp", "wnli"):
        return str(labels.names.index(row["label"]))
    return row["label"]


STDOUT = "-"          # --output -: the predictions on standard output, JSON Lines (--glue: GLUE's layout)


def check_output_name(path: str, glue: bool = False) -> None:
    """A predictions file is named .csv, .tsv, .jsonl or .xlsx (its format); --glue's is GLUE's tab-separated .tsv
    (a .csv name got tabs). Checked before any prediction is made."""
    if path == STDOUT:
        return
    suffix = Path(path).suffix.lower()
    if glue and suffix != ".tsv":
        raise TuneloopError(f"--output {path}: --glue writes GLUE's tab-separated submission file; name it .tsv "
                            "(e.g. MRPC.tsv)")
    if not glue and suffix not in (".csv", ".tsv", ".jsonl", ".xlsx"):
        raise TuneloopError(f"--output {path}: use a .csv, .tsv, .jsonl or .xlsx file name (or --glue)")
    if suffix == ".xlsx":
        extras.require("excel")                      # said before any prediction


def write_predictions(rows: list[dict], path: str, glue: bool = False, labels=None, task=None) -> None:
    """csv / tsv / jsonl / xlsx by extension (--glue: GLUE's `index<TAB>prediction` layout), written atomically; `-`:
    standard output, as JSON Lines."""
    check_output_name(path, glue)
    if glue:
        text = "index\tprediction\n" + "".join(f"{r['id']}\t{glue_submission_value(r, labels, task)}\n"
                                                for r in rows)
    else:
        suffix = ".jsonl" if path == STDOUT else Path(path).suffix.lower()
        if suffix == ".xlsx":                                   # a workbook: bytes, written as the others are
            atomic_write_bytes(path, workbook_bytes(rows, f"--output {path}"))
            return
        if suffix == ".jsonl":
            text = "".join(_json_line(r) for r in rows)
        else:
            text = delimited_text(({k: _cell(v) for k, v in row.items()} for row in rows),   # as it is read
                                  list(rows[0]) if rows else ["id"], suffix[1:], f"--output {path}")
    if path == STDOUT:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:       # `| head`: the reader has what it wanted (Python's documented handling)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    else:
        atomic_write_text(path, text)
