"""Where the model fails: the validation rows it gets wrong, with their text, gold and predicted labels, sorted
by the confidence in the wrong answer (OUT/errors.csv). Wrong as the saved model decides: under its decision rule
(decision/rule.py: thresholds; a row the rule abstains on is listed by its decision, marked `abstained`, as
`tuneloop evaluate`'s metrics count it), with the raw probabilities beside it."""

from __future__ import annotations

import numpy as np

from ..decision.rule import DecisionRule
from ..objective import MultiLabel, Regression, SingleLabel


def _score_row(row: dict, prob, pred, label, schema, objective) -> tuple[float, dict]:
    """Regression: every row, by its absolute error. The gold target as it was written (targets are stored as
    float32: 59424.81 would print as 59424.80859375)."""
    gold = float(str(np.float32(label)))
    row.update(gold=gold, predicted=round(float(pred), 6), abs_error=round(abs(float(pred) - gold), 6))
    return row["abs_error"], row


def _label_set_row(row: dict, prob, pred, label, schema, objective) -> tuple[float, dict] | None:
    """Multi-label: a row with any label wrong, by the largest distance between a wrong label's probability and
    its target."""
    gold, pred = objective.binarize(label), pred > 0
    if not (gold != pred).any():
        return None
    wrongness = float(np.abs(prob - label)[gold != pred].max())
    row.update(gold=objective.name(label, schema), predicted=objective.name(pred, schema),
               confidence_wrong=round(wrongness, 6))
    return wrongness, row


def _class_row(row: dict, prob, pred, label, schema, objective) -> tuple[float, dict] | None:
    """Single-label: a wrong row, by the probability of the predicted class."""
    if pred == label:
        return None
    p_pred, p_gold = float(prob[pred]), float(prob[int(label)])
    row.update(gold=schema.names[int(label)], predicted=schema.names[int(pred)],
               p_predicted=round(p_pred, 6), p_gold=round(p_gold, 6))
    return p_pred, row


ROWS = {Regression: _score_row, MultiLabel: _label_set_row, SingleLabel: _class_row}
SCORES = {Regression: ["abs_error"], MultiLabel: ["confidence_wrong"], SingleLabel: ["p_predicted", "p_gold"]}
ABSTAINED = "abstained"          # the column of a rule with an abstain level: the rows predict leaves unanswered


def _texts(table) -> dict:
    return {"text": table["text_a"]} if len(table) == 0 or table[0]["text_b"] is None else \
        {"text_a": table["text_a"], "text_b": table["text_b"]}


def error_columns(table, schema, rule: DecisionRule | None = None) -> list[str]:
    """errors.csv's header: id, the text(s), gold, predicted and the problem type's scores (the `abstained` column
    under a rule that abstains); the header of a file with no rows too."""
    objective = schema.objective
    abstains = rule is not None and rule.abstain_below is not None and objective.classes
    return ["id", *_texts(table), "gold", "predicted", *SCORES[type(objective)], *([ABSTAINED] if abstains else [])]


def error_rows(table, logits: np.ndarray, labels: np.ndarray, schema, rule: DecisionRule | None = None) -> list[dict]:
    """One dict per validation row the model gets wrong (regression: every row), most confidently wrong first.
    `table`: the split's canonical table (id, text_a, text_b); logits and labels in its row order; `rule`: the
    saved decision rule, whose decisions (its thresholds) are the predicted labels (None: argmax / 0.5). The
    probabilities are the raw softmax/sigmoid ones."""
    if len(table) == 0:
        return []
    objective = schema.objective
    decide = rule if rule is not None and objective.classes else objective
    probs, preds, wrong_row = objective.probabilities(logits), decide.predictions(logits), ROWS[type(objective)]
    marked = ABSTAINED in error_columns(table, schema, rule)
    abstains = rule.abstains(logits) if marked else None
    texts, ids = _texts(table), table["id"]
    rows = []
    for i in range(len(labels)):
        row = {"id": ids[i], **{k: v[i] for k, v in texts.items()}}
        found = wrong_row(row, probs[i], preds[i], labels[i], schema, objective)
        if found is not None:
            if marked:
                found[1][ABSTAINED] = bool(abstains[i])
            rows.append(found)
    return [row for _, row in sorted(rows, key=lambda pair: -pair[0])]
