"""Predictions as people and GLUE read them: label names and probabilities per row, and the files they go in."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from ..atomic import atomic_write_text
from ..data.readers import csv_dialect
from ..decision.rule import DecisionRule
from ..exceptions import TuneloopError
from ..objective import Objective, objective_for


def probabilities(logits: np.ndarray, objective: str | Objective) -> np.ndarray:
    """Raw softmax/sigmoid probabilities (the score for regression); `objective`, or its problem type's name."""
    return objective_for(objective).probabilities(logits)


def decided_rows(logits: np.ndarray, labels, rule: DecisionRule | None = None) -> list[dict]:
    """One dict per row of logits: {"label", "probabilities": {label: p}} ({"score"} for regression). With a
    decision rule (decision/rule.py): its calibrated probabilities, thresholds and abstain label; without one: raw
    softmax/sigmoid and argmax (0.5 per label)."""
    objective = labels.objective
    if not objective.classes:
        return [{"score": round(float(v), 6)} for v in objective.predictions(logits)]
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


def glue_submission_value(row: dict, labels, task) -> str:
    """GLUE's submission files take class ids for tasks whose files store ids, names for the others."""
    if "score" in row:
        return f"{row['score']:.3f}"
    if task is not None and task.name in ("cola", "sst2", "mrpc", "qqp", "wnli"):
        return str(labels.names.index(row["label"]))
    return row["label"]


def check_output_name(path: str, glue: bool = False) -> None:
    """A predictions file is named .csv, .tsv or .jsonl (its format); --glue's is GLUE's tab-separated .tsv (a .csv
    name got tabs). Checked before any prediction is made."""
    suffix = Path(path).suffix.lower()
    if glue and suffix != ".tsv":
        raise TuneloopError(f"--output {path}: --glue writes GLUE's tab-separated submission file; name it .tsv "
                            "(e.g. MRPC.tsv)")
    if not glue and suffix not in (".csv", ".tsv", ".jsonl"):
        raise TuneloopError(f"--output {path}: use a .csv, .tsv or .jsonl file name (or --glue)")


def write_predictions(rows: list[dict], path: str, glue: bool = False, labels=None, task=None) -> None:
    """csv / tsv / jsonl by extension (--glue: GLUE's `index<TAB>prediction` layout), written atomically."""
    check_output_name(path, glue)
    if glue:
        text = "index\tprediction\n" + "".join(f"{r['id']}\t{glue_submission_value(r, labels, task)}\n"
                                                for r in rows)
    else:
        suffix = Path(path).suffix.lower()
        if suffix == ".jsonl":
            text = "".join(json.dumps(r) + "\n" for r in rows)
        else:
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else ["id"],
                                    delimiter=csv_dialect(suffix[1:])["delimiter"], lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            text = buffer.getvalue()
    atomic_write_text(path, text)
