"""Predictions as people and GLUE read them: label names and probabilities per row, and the files they go in."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import torch

from .atomic import atomic_write_text
from .decision import DecisionRule
from .data.readers import csv_dialect
from .errors import TuneloopError
from .metrics import predictions_from_logits


def probabilities(logits: np.ndarray, problem_type: str) -> np.ndarray:
    x = torch.from_numpy(logits).float()
    if problem_type == "multi_label_classification":
        return torch.sigmoid(x).numpy()
    if problem_type == "regression":
        return x.reshape(-1, 1).numpy()
    return torch.softmax(x, dim=-1).numpy()


def prediction_rows(ids, logits: np.ndarray, labels, rule: DecisionRule | None = None) -> list[dict]:
    """One dict per example: id, predicted label name(s), class probabilities (or the score). With a decision
    rule (decision.py): its calibrated probabilities, thresholds and abstain label, and a `decision_rule` column
    that says which rule made the row; without one: raw softmax/sigmoid and argmax (0.5 per label)."""
    kind = labels.problem_type
    if rule is not None and kind != "regression":
        probs, preds, abstains = rule.probabilities(logits), rule.predictions(logits), rule.abstains(logits)
    else:
        probs, preds = probabilities(logits, kind), predictions_from_logits(logits, kind)
        abstains = np.zeros(len(logits), dtype=bool)
    rows = []
    for i, row_id in enumerate(ids):
        if kind == "regression":
            rows.append({"id": row_id, "score": round(float(preds[i]), 6)})
            continue
        if abstains[i]:
            label = rule.abstain_label
        elif kind == "multi_label_classification":
            label = labels.separator_join([n for n, on in zip(labels.names, preds[i]) if on])
        else:
            label = labels.names[int(preds[i])]
        rows.append({"id": row_id, "label": label,
                     **{f"prob_{n}": round(float(p), 6) for n, p in zip(labels.names, probs[i])}})
        if rule is not None:
            rows[-1]["decision_rule"] = rule.describe()
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
