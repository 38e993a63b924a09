"""Computing the metrics tasks.py names (the definitions GLUE uses, from scikit-learn/scipy), batch by batch."""

from __future__ import annotations

import numpy as np
import torch


def predictions_from_logits(logits: np.ndarray, problem_type: str) -> np.ndarray:
    if problem_type == "regression":
        return logits.reshape(-1)
    if problem_type == "multi_label_classification":
        return (logits > 0).astype(np.int64)   # sigmoid(x) > 0.5
    return logits.argmax(-1)


def compute(names, logits: np.ndarray, labels: np.ndarray, problem_type: str) -> dict:
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    preds = predictions_from_logits(logits, problem_type)
    out = {}
    for name in names:
        if name == "accuracy":
            out[name] = accuracy_score(labels, preds)
        elif name == "f1":
            out[name] = f1_score(labels, preds, zero_division=0.0)
        elif name == "f1_macro":
            out[name] = f1_score(labels, preds, average="macro", zero_division=0.0)
        elif name == "f1_micro":
            out[name] = f1_score(labels, preds, average="micro", zero_division=0.0)
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


def loss_from_logits(logits: np.ndarray, labels: np.ndarray, problem_type: str) -> float:
    """The same loss the model trains with, over every example exactly once."""
    x, y = torch.from_numpy(logits).float(), torch.from_numpy(labels)
    fn = torch.nn.functional
    if problem_type == "regression":
        return float(fn.mse_loss(x.reshape(-1), y.float().reshape(-1)))
    if problem_type == "multi_label_classification":
        return float(fn.binary_cross_entropy_with_logits(x, y.float()))
    return float(fn.cross_entropy(x, y.long()))


class Accumulator:
    """Like `evaluate`'s add_batch/compute: collect (already gathered) logits and labels, compute at the end."""

    def __init__(self, names, problem_type: str):
        self.names, self.problem_type = tuple(names), problem_type
        self.logits, self.labels = [], []

    def add_batch(self, logits: torch.Tensor, labels: torch.Tensor | None = None) -> None:
        self.logits.append(logits.detach().float().cpu().numpy())
        if labels is not None:
            self.labels.append(labels.detach().cpu().numpy())

    @property
    def all_logits(self) -> np.ndarray:
        return np.concatenate(self.logits) if self.logits else np.zeros((0, 1), dtype=np.float32)

    @property
    def all_labels(self) -> np.ndarray:
        return np.concatenate(self.labels) if self.labels else np.zeros((0,))

    def compute(self) -> dict:
        logits, labels = self.all_logits, self.all_labels
        results = compute(self.names, logits, labels, self.problem_type)
        results["loss"] = loss_from_logits(logits, labels, self.problem_type)
        results["num_samples"] = int(len(labels))
        return results
