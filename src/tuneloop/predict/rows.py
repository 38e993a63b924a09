"""Predictions as people and GLUE read them: label names and probabilities per row, and the files they go in."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write_text
from ..data.readers import csv_dialect
from ..decision.rule import DecisionRule
from ..evaluation.metrics import predictions_from_logits
from ..exceptions import TuneloopError
from ..tasks import MULTI_LABEL, REGRESSION


def probabilities(logits: np.ndarray, problem_type: str) -> np.ndarray:
    x = torch.from_numpy(logits).float()
    if problem_type == MULTI_LABEL:
        return torch.sigmoid(x).numpy()
    if problem_type == REGRESSION:
        return x.reshape(-1, 1).numpy()
    return torch.softmax(x, dim=-1).numpy()


def decided_rows(logits: np.ndarray, labels, rule: DecisionRule | None = None) -> list[dict]:
    """One dict per row of logits: {"label", "probabilities": {label: p}} ({"score"} for regression). With a
    decision rule (decision/rule.py): its calibrated probabilities, thresholds and abstain label; without one: raw
    softmax/sigmoid and argmax (0.5 per label)."""
    kind = labels.problem_type
    if kind == REGRESSION:
        return [{"score": round(float(v), 6)} for v in predictions_from_logits(logits, kind)]
    if rule is not None:
        probs, preds, abstains = rule.probabilities(logits), rule.predictions(logits), rule.abstains(logits)
    else:
        probs, preds = probabilities(logits, kind), predictions_from_logits(logits, kind)
        abstains = np.zeros(len(logits), dtype=bool)
    rows = []
    for i in range(len(logits)):
        if abstains[i]:
            label = rule.abstain_label
        elif kind == MULTI_LABEL:
            label = labels.separator_join([n for n, on in zip(labels.names, preds[i]) if on])
        else:
            label = labels.names[int(preds[i])]
        rows.append({"label": label, "probabilities": {n: round(float(p), 6) for n, p in zip(labels.names, probs[i])}})
    return rows


def prediction_rows(ids, logits: np.ndarray, labels, rule: DecisionRule | None = None) -> list[dict]:
    """Rows as prediction files hold them: id, the label (or score), prob_<label> per class, and with a rule a
    `decision_rule` column that says which rule made the row."""
    described = rule.describe() if rule is not None and labels.problem_type != REGRESSION else None
    rows = []
    for row_id, row in zip(ids, decided_rows(logits, labels, rule)):
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


def write_predictions(rows: list[dict], path: str, glue: bool = False, labels=None, task=None) -> None:
    """csv / tsv / jsonl by extension (--glue: GLUE's `index<TAB>prediction` layout), written atomically."""
    if glue:
        text = "index\tprediction\n" + "".join(f"{r['id']}\t{glue_submission_value(r, labels, task)}\n"
                                                for r in rows)
    else:
        suffix = Path(path).suffix.lower()
        if suffix == ".jsonl":
            text = "".join(json.dumps(r) + "\n" for r in rows)
        elif suffix in (".csv", ".tsv"):
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else ["id"],
                                    delimiter=csv_dialect(suffix[1:])["delimiter"], lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            text = buffer.getvalue()
        else:
            raise TuneloopError(f"--output {path}: use a .csv, .tsv or .jsonl file name (or --glue)")
    atomic_write_text(path, text)
