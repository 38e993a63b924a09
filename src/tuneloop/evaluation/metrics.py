"""Computing the metrics tasks.py names (the definitions GLUE uses, from scikit-learn/scipy), batch by batch."""

from __future__ import annotations

import numpy as np
import torch

from ..objective import Objective
from ..objective.kinds import label_columns


def compute(names, logits: np.ndarray, labels: np.ndarray, objective: Objective, positive: int = 1) -> dict:
    """`positive`: the class "f1" is of (GLUE's class 1; a decision rule's --positive-label)."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    preds = objective.predictions(logits)
    out = {}
    for name in names:
        if name == "accuracy":
            out[name] = accuracy_score(labels, preds)
        elif name == "f1":
            out[name] = f1_score(labels, preds, pos_label=positive, zero_division=0.0)
        elif name in ("f1_macro", "f1_micro"):
            y, decided, which = label_columns(labels, preds) if objective.multi_label else (labels, preds, {})
            out[name] = f1_score(y, decided, average=name[3:], zero_division=0.0, **which)
        elif name == "exact_match":
            out[name] = float(np.mean(np.all(preds == labels, axis=-1)))
        elif name == "matthews_correlation":
            out[name] = matthews_corrcoef(labels, preds)
        elif name in ("pearson", "spearmanr"):
            constant = np.ptp(preds) == 0 or np.ptp(labels) == 0   # correlation undefined: report 0, not NaN
            fn = pearsonr if name == "pearson" else spearmanr
            out[name] = 0.0 if constant else fn(preds, labels)[0]
        elif name == "mse":
            out[name] = float(np.mean((preds - labels) ** 2))
        else:
            raise KeyError(f"unknown metric {name!r}")
    return {k: float(v) for k, v in out.items()}


def pool_windows(logits: np.ndarray, labels: np.ndarray | None, docs: np.ndarray, objective: Objective,
                 how: str = "mean"):
    """One row per document, in document order: the mean (or per-class max) of its windows' probabilities,
    turned back into logits (objective.pool); regression takes the mean score. A document with one window keeps
    its logits exactly."""
    order = np.argsort(docs, kind="stable")
    unique, starts = np.unique(docs[order], return_index=True)
    logits, labels = logits[order], (labels[order] if labels is not None else None)
    if len(unique) == len(docs):
        return logits, labels, unique
    counts = np.diff(np.append(starts, len(docs)))[:, None]
    pooled = objective.pool(logits, starts, counts, how)
    single = counts[:, 0] == 1                   # documents of one window keep their logits exactly
    pooled[single] = logits[starts[single]]
    return pooled.astype(logits.dtype), (labels[starts] if labels is not None else None), unique


class Accumulator:
    """Like `evaluate`'s add_batch/compute: collect (already gathered) logits, labels and the documents they
    belong to; compute on one row per document (windows pooled, see pool_windows)."""

    def __init__(self, names, objective: Objective, pooling: str = "mean", positive: int = 1):
        self.names, self.objective, self.pooling = tuple(names), objective, pooling
        self.positive = positive                   # the class "f1" is of (--positive-label; GLUE's class 1)
        self.logits, self.labels, self.docs = [], [], []
        self._pooled = None

    def add_batch(self, logits: torch.Tensor, labels: torch.Tensor | None = None,
                  docs: torch.Tensor | None = None) -> None:
        self.logits.append(logits.detach().float().cpu().numpy())
        if labels is not None:
            self.labels.append(labels.detach().cpu().numpy())
        if docs is not None:
            self.docs.append(docs.detach().cpu().numpy())
        self._pooled = None

    def pooled(self):
        """(logits, labels or None, docs): one row per document, in document order."""
        if self._pooled is None:
            logits = np.concatenate(self.logits) if self.logits else np.zeros((0, 1), dtype=np.float32)
            labels = np.concatenate(self.labels) if self.labels else None
            docs = np.concatenate(self.docs) if self.docs else np.arange(len(logits))
            self._pooled = pool_windows(logits, labels, docs, self.objective, self.pooling)
        return self._pooled

    @property
    def all_logits(self) -> np.ndarray:
        return self.pooled()[0]

    @property
    def all_labels(self) -> np.ndarray:
        labels = self.pooled()[1]
        return labels if labels is not None else np.zeros((0,))

    def compute(self) -> dict:
        logits, labels = self.all_logits, self.all_labels
        results = compute(self.names, logits, labels, self.objective, self.positive)
        results["loss"] = self.objective.eval_loss(logits, labels)
        results["num_samples"] = int(len(labels))
        return results


def per_class(logits: np.ndarray, labels: np.ndarray, schema) -> dict | None:
    """{label: {"precision", "recall", "f1", "support"}} for classification (every label for multi-label)."""
    from sklearn.metrics import precision_recall_fscore_support

    objective = schema.objective
    if not objective.classes:
        return None
    preds, y = objective.predictions(logits), objective.gold(labels)
    which = {"labels": list(range(len(schema.names)))}                  # label sets: scikit-learn's columns
    if objective.multi_label:
        y, preds, which = label_columns(y, preds)
    precision, recall, f1, support = precision_recall_fscore_support(y, preds, zero_division=0.0, **which)
    return {name: {"precision": round(float(p), 4), "recall": round(float(r), 4), "f1": round(float(f), 4),
                   "support": int(s)}
            for name, p, r, f, s in zip(schema.names, precision, recall, f1, support, strict=True)}
