"""The three problem types: cross entropy over classes, binary cross entropy per label, mean squared error — the
functions transformers' heads use, with class weights (pos_weight), row weights and soft targets."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..tasks import MULTI_LABEL, PROBLEM_TYPES, REGRESSION, SINGLE_LABEL
from .base import Objective

MULTI_LABEL_CUT = 0.5          # a label is carried when its target (or probability) is above this


def label_columns(gold, predictions) -> tuple[np.ndarray, np.ndarray, dict]:
    """(gold, predictions, keyword arguments) as scikit-learn scores label sets (0/1 per row and label). One label:
    its column as a binary problem of the positive side (scikit-learn reads a one-column indicator as binary, and
    its micro-F1 would count the absent side as a class too: the accuracy)."""
    gold, predictions = np.asarray(gold), np.asarray(predictions)
    if gold.ndim == 2 and gold.shape[1] == 1:
        return gold[:, 0], predictions.reshape(len(predictions), -1)[:, 0], {"labels": [1]}
    return gold, predictions, {}


class SingleLabel(Objective):
    """One class per row: softmax probabilities, argmax predictions, cross entropy."""

    kind = SINGLE_LABEL

    def row_losses(self, logits, targets, soft: bool):
        logits = logits.view(-1, logits.shape[-1])
        if soft:
            return F.cross_entropy(logits, targets.to(logits.dtype), weight=self.weights, reduction="none")
        return F.cross_entropy(logits, targets.view(-1).long(), weight=self.weights, reduction="none")

    def mean_loss(self, logits, targets, soft):
        if soft:                               # probability targets: the mean over rows (torch's definition)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.to(logits.dtype), weight=self.weights)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1).long(), weight=self.weights)

    def soften(self, soft, temperature):
        """softmax(log p / T): the teacher's softmax at T from its probabilities."""
        if temperature == 1.0:
            return soft
        return (soft.to(torch.float32).clamp_min(1e-12).log() / temperature).softmax(-1)

    def row_scale(self, targets, soft):
        if soft or self.weights is None:
            return 1.0
        return self.weights[targets.view(-1).long()]

    def torch_probabilities(self, logits):
        return logits.softmax(-1)

    def calibrated(self, logits, temperature=1.0):
        z = np.asarray(logits, dtype=np.float64) / temperature
        z = z - z.max(-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(-1, keepdims=True)

    def logits_of(self, probs):
        return np.log(probs / probs.sum(axis=1, keepdims=True))

    def predictions(self, logits):
        return np.asarray(logits).argmax(-1)

    def gold(self, labels):
        return np.asarray(labels).astype(np.int64)

    def correct(self, predictions, labels):
        return predictions == self.gold(labels)

    def confidence(self, probs, predictions):
        return probs[np.arange(len(probs)), predictions]

    def nll(self, probs, labels):
        return float(-np.mean(np.log(np.clip(probs[np.arange(len(labels)), self.gold(labels)], 1e-12, 1))))

    def counts(self, labels):
        return np.bincount(self.gold(labels), minlength=self.num_labels)

    def classes_of(self, labels):
        return self.gold(labels)

    def balanced_weights(self, labels):
        """scikit-learn's "balanced" class weights; a class with no training row keeps 1 (it never weighs in)."""
        from sklearn.utils.class_weight import compute_class_weight

        present = np.flatnonzero(self.counts(labels))
        weights = np.ones(self.num_labels)
        weights[present] = compute_class_weight("balanced", classes=present, y=self.gold(labels))
        return weights

    def inverse_frequency(self, labels):
        return 1.0 / self.counts(labels).astype(float)[self.gold(labels)]

    def calibration_pairs(self, probs, labels):
        """The top class of each row."""
        return probs.max(-1), (probs.argmax(-1) == self.gold(labels)).astype(np.float64)

    def cut_scores(self, probs, positive):
        return probs[:, [positive]]

    def cut_targets(self, labels, positive):
        return (self.gold(labels) == positive)[:, None]

    def shifted(self, logits, offsets, positive):
        """Two classes: p_pos >= t <=> z_pos - z_other >= logit(t)."""
        z = logits.copy()
        z[:, positive] -= offsets[0]
        return z

    def decision_metrics(self, predictions, labels, positive=1):
        """Accuracy and macro-F1; F1, precision and recall of the positive class with two classes."""
        from sklearn.metrics import f1_score, precision_score, recall_score

        y = self.gold(labels)
        out = {"accuracy": float(np.mean(predictions == y)),
               "f1_macro": f1_score(y, predictions, average="macro", zero_division=0.0)}
        if len(np.unique(np.r_[y, predictions])) <= 2 and max(y.max(), predictions.max()) <= 1:
            out.update(f1=f1_score(y, predictions, pos_label=positive, zero_division=0.0),
                       precision=precision_score(y, predictions, pos_label=positive, zero_division=0.0),
                       recall=recall_score(y, predictions, pos_label=positive, zero_division=0.0))
        return out

    def collapsed_to(self, logits, labels):
        predicted = np.unique(np.asarray(logits).argmax(-1))
        return int(predicted[0]) if len(predicted) == 1 and len(np.unique(labels)) > 1 else None

    def name(self, value, schema):
        return schema.names[int(value)]


class MultiLabel(Objective):
    """Any number of labels per row: a sigmoid per label, a 0.5 cut, binary cross entropy."""

    kind = MULTI_LABEL
    multi_label = True

    def row_losses(self, logits, targets, soft):
        return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), pos_weight=self.weights,
                                                  reduction="none").mean(-1)

    def mean_loss(self, logits, targets, soft):
        return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), pos_weight=self.weights)

    def soften(self, soft, temperature):
        """sigmoid(logit(p) / T) per label."""
        if temperature == 1.0:
            return soft
        return (torch.logit(soft.to(torch.float32), eps=1e-6) / temperature).sigmoid()

    def torch_probabilities(self, logits):
        return logits.sigmoid()

    def calibrated(self, logits, temperature=1.0):
        return 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64) / temperature))

    def logits_of(self, probs):
        return np.log(probs) - np.log1p(-probs)

    def predictions(self, logits):
        return (np.asarray(logits) > 0).astype(np.int64)   # sigmoid(x) > 0.5

    def binarize(self, labels):
        return np.asarray(labels) > MULTI_LABEL_CUT

    def gold(self, labels):
        return self.binarize(labels).astype(np.int64)

    def correct(self, predictions, labels):
        return np.all(predictions == self.binarize(labels), -1)

    def confidence(self, probs, predictions):
        return np.where(predictions > 0, probs, 1 - probs).min(-1)

    def nll(self, probs, labels):
        return float(-np.mean(np.log(np.clip(np.where(self.binarize(labels), probs, 1 - probs), 1e-12, 1))))

    def counts(self, labels):
        labels = np.asarray(labels)
        return self.binarize(labels.reshape(len(labels), -1)).sum(axis=0).astype(np.int64)

    def predicted_from(self, probs):
        return self.binarize(probs).astype(np.int64)

    def balanced_weights(self, labels):
        """pos_weight: each label's negatives over its positives (1 for a label no row carries)."""
        counts = self.counts(labels).astype(float)
        return np.where(counts > 0, (len(labels) - counts) / np.maximum(counts, 1), 1.0)

    def inverse_frequency(self, labels):
        """The mean over a row's labels; rows with none count as a class of their own."""
        labels = np.asarray(labels)
        counts, rows = self.counts(labels).astype(float), self.binarize(labels.reshape(len(labels), -1))
        empty = ~rows.any(axis=1)
        inverse = np.where(rows, 1.0 / np.maximum(counts, 1), 0.0).sum(axis=1) / np.maximum(rows.sum(axis=1), 1)
        return np.where(empty, 1.0 / max(int(empty.sum()), 1), inverse)

    decision_text = f"cut-off {MULTI_LABEL_CUT:g}"

    def calibration_pairs(self, probs, labels):
        """Every (row, label) probability, as a prediction that the label is present."""
        return probs.reshape(-1), self.binarize(labels).reshape(-1).astype(np.float64)

    def cut_scores(self, probs, positive):
        return probs

    def cut_targets(self, labels, positive):
        return self.binarize(labels)

    def shifted(self, logits, offsets, positive):
        return logits - offsets

    def decision_metrics(self, predictions, labels, positive=1):
        """Micro and macro F1, micro precision and recall over the labels."""
        from sklearn.metrics import f1_score, precision_score, recall_score

        y, predictions, which = label_columns(self.gold(labels), predictions)
        return {"f1_micro": f1_score(y, predictions, average="micro", zero_division=0.0, **which),
                "f1_macro": f1_score(y, predictions, average="macro", zero_division=0.0, **which),
                "precision_micro": precision_score(y, predictions, average="micro", zero_division=0.0, **which),
                "recall_micro": recall_score(y, predictions, average="micro", zero_division=0.0, **which)}

    def name(self, value, schema):
        return schema.separator_join([n for n, on in zip(schema.names, self.binarize(value), strict=True) if on])


class Regression(Objective):
    """One score per row: the model's output as it is, mean squared error. `scale`: targets far from unit scale are
    learned standardised (model/target_scale.py): the training loss divides the residual by it, so it is the
    standardised targets' mean squared error and its gradients are theirs; the evaluation loss stays the plain mean
    squared error (`eval_loss` builds the objective without it), as `tuneloop evaluate` reports it."""

    kind = REGRESSION
    classes = False

    def __init__(self, num_labels: int = 1, weights=None, scale: float = 1.0):
        super().__init__(num_labels, weights)
        self.scale = float(scale)

    def __repr__(self) -> str:
        return f"Regression(scale={self.scale:g})"

    def row_losses(self, logits, targets, soft):
        return ((logits.reshape(-1) - targets.to(logits.dtype).reshape(-1)) / self.scale) ** 2

    def mean_loss(self, logits, targets, soft):
        if self.scale == 1.0:
            return F.mse_loss(logits.reshape(-1), targets.to(logits.dtype).reshape(-1))
        return F.mse_loss(logits.reshape(-1) / self.scale, targets.to(logits.dtype).reshape(-1) / self.scale)

    def torch_probabilities(self, logits):
        return logits.reshape(-1, 1)

    def calibrated(self, logits, temperature=1.0):
        return np.asarray(logits, dtype=np.float64).reshape(-1, 1)

    def pool(self, logits, starts, counts, how):
        return np.add.reduceat(logits, starts, axis=0) / counts     # the mean score, whatever `how`

    def predictions(self, logits):
        return np.asarray(logits).reshape(-1)

    def gold(self, labels):
        return np.asarray(labels, dtype=np.float64).reshape(-1)

    def name(self, value, schema):
        return float(value)


KINDS = {kind.kind: kind for kind in (SingleLabel, MultiLabel, Regression)}
assert tuple(KINDS) == PROBLEM_TYPES


def objective_for(labels, weights=None) -> Objective:
    """The objective of a label schema (anything with `problem_type` and `num_labels`) or of a problem type's
    name; `weights` as `Objective` takes them. An objective passes through as it is (without weights)."""
    if isinstance(labels, Objective) and weights is None:
        return labels
    if isinstance(labels, str):
        return KINDS[labels](1, weights)
    return KINDS[labels.problem_type](labels.num_labels, weights)
