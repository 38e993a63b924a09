"""Where the model fails: the validation rows it gets wrong, with their text, gold and predicted labels, sorted
by the confidence in the wrong answer (OUT/errors.csv); and precision, recall and F1 of every class."""

from __future__ import annotations

import numpy as np

from ..evaluation.metrics import predictions_from_logits
from ..predict.rows import probabilities
from ..tasks import MULTI_LABEL, REGRESSION


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
        if kind == REGRESSION:
            row.update(gold=float(labels[i]), predicted=round(float(preds[i]), 6),
                       abs_error=round(abs(float(preds[i]) - float(labels[i])), 6))
            rows.append((row["abs_error"], row))
        elif kind == MULTI_LABEL:
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
