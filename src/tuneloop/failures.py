"""Where the model fails: the validation rows it gets wrong, with their text, gold and predicted labels, sorted
by the confidence in the wrong answer (OUT/errors.csv); and precision, recall and F1 of every class."""

from __future__ import annotations

import numpy as np

from .metrics import predictions_from_logits
from .predictions import probabilities

ERRORS_FILE = "errors.csv"


def error_rows(table, logits: np.ndarray, labels: np.ndarray, schema) -> list[dict]:
    """One dict per validation row the model gets wrong (regression: every row), most confidently wrong first.
    `table`: the split's canonical table (id, text_a, text_b); logits and labels in its row order."""
    kind, names = schema.problem_type, schema.names
    if len(table) == 0:
        return []
    probs = probabilities(logits, kind)
    preds = predictions_from_logits(logits, kind)
    texts = {"text": table["text_a"]} if table[0]["text_b"] is None else \
        {"text_a": table["text_a"], "text_b": table["text_b"]}
    ids = table["id"]
    rows = []
    for i in range(len(labels)):
        row = {"id": ids[i], **{k: v[i] for k, v in texts.items()}}
        if kind == "regression":
            row.update(gold=float(labels[i]), predicted=round(float(preds[i]), 6),
                       abs_error=round(abs(float(preds[i]) - float(labels[i])), 6))
            rows.append((row["abs_error"], row))
        elif kind == "multi_label_classification":
            gold, pred = labels[i] > 0.5, preds[i] > 0
            if (gold != pred).any():
                wrongness = float(np.abs(probs[i] - labels[i])[gold != pred].max())
                row.update(gold=schema.separator_join([n for n, on in zip(names, gold) if on]),
                           predicted=schema.separator_join([n for n, on in zip(names, pred) if on]),
                           confidence_wrong=round(wrongness, 6))
                rows.append((wrongness, row))
        elif preds[i] != labels[i]:
            p_pred, p_gold = float(probs[i, preds[i]]), float(probs[i, int(labels[i])])
            row.update(gold=names[int(labels[i])], predicted=names[int(preds[i])],
                       p_predicted=round(p_pred, 6), p_gold=round(p_gold, 6))
            rows.append((p_pred, row))
    return [row for _, row in sorted(rows, key=lambda pair: -pair[0])]


def per_class(logits: np.ndarray, labels: np.ndarray, schema) -> dict | None:
    """{label: {"precision", "recall", "f1", "support"}} for classification (every label for multi-label)."""
    from sklearn.metrics import precision_recall_fscore_support

    if schema.problem_type == "regression":
        return None
    preds = predictions_from_logits(logits, schema.problem_type)
    y = labels.astype(np.int64) if schema.problem_type != "multi_label_classification" else \
        (labels > 0.5).astype(np.int64)
    index = list(range(len(schema.names))) if schema.problem_type != "multi_label_classification" else None
    precision, recall, f1, support = precision_recall_fscore_support(y, preds, labels=index, zero_division=0.0)
    return {name: {"precision": round(float(p), 4), "recall": round(float(r), 4), "f1": round(float(f), 4),
                   "support": int(s)} for name, p, r, f, s in zip(schema.names, precision, recall, f1, support)}


def read_rows(path) -> list[dict] | None:
    """A CSV this module or label_issues.py wrote, as dicts; None when the file is not there."""
    import csv
    from pathlib import Path

    if not Path(path).is_file():
        return None
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def describe_failures(run_dir, top: int = 10, width: int = 160) -> str:
    """`tuneloop inspect RUN`: the top of errors.csv and of label_issues.csv as text a person reads."""
    from pathlib import Path

    from .errors import TuneloopError
    from .label_issues import LABEL_ISSUES_FILE

    folder = Path(run_dir)
    files = [(folder / ERRORS_FILE, "validation rows the model gets wrong, most confidently wrong first"),
             (folder / LABEL_ISSUES_FILE,
              "training rows ranked by the probability of their given label, lowest first")]
    if not any(path.is_file() for path, _ in files):
        raise TuneloopError(f"{run_dir}: no {ERRORS_FILE} or label_issues.csv here; give the folder of a finished "
                            "`tuneloop train` run (its --output-dir)")
    cut = lambda text: text if len(text) <= width else text[:width] + " …"  # noqa: E731
    lines = []
    for path, what in files:
        rows = read_rows(path)
        if rows is None:
            continue
        flagged = sum(r.get("likely_wrong") == "True" for r in rows)
        lines.append(f"{path}: {len(rows)} {what}" + (f"; confident learning flags {flagged}" if flagged else ""))
        for n, r in enumerate(rows[:top], 1):
            if "given" in r:
                head = (f"given {r['given']}, the model says {r['suggested']} (p_given {r['p_given']})"
                        + (" — likely wrong" if r["likely_wrong"] == "True" else ""))
            elif "abs_error" in r:
                head = f"gold {r['gold']}, predicted {r['predicted']} (error {r['abs_error']})"
            else:
                p = r.get("p_predicted") or r.get("confidence_wrong")
                head = f"gold {r['gold']}, predicted {r['predicted']} (p {p})"
            where = f"id {r['id']}" + (f", row {r['row']}" if r.get("row") else "")
            lines.append(f"{n:4d}. {where}: {head}")
            lines += [f"      {key}: {cut(r[key])}" for key in ("text", "text_a", "text_b") if key in r]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
