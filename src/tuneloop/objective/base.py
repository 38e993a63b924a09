"""The contract every problem type fills (kinds.py holds the three): training loss on tensors, and on NumPy arrays
what evaluation, the decision rule, predictions and the analyses need."""

from __future__ import annotations

import numpy as np
import torch


class Objective:
    """One problem type's meaning. `kind` is transformers' problem_type name (what tuneloop.json records);
    `weights`: per-class weights (single-label) or per-label pos_weight (multi-label) for the training loss."""

    kind: str = ""
    classes: bool = True            # predictions are classes (or labels), with probabilities
    multi_label: bool = False

    def __init__(self, num_labels: int = 1, weights=None):
        self.num_labels = num_labels
        self.weights = None if weights is None else torch.as_tensor(weights, dtype=torch.float32)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_labels={self.num_labels}, weighted={self.weights is not None})"

    def to(self, device) -> "Objective":
        """The loss weights on `device` (the loss runs where the logits are)."""
        if self.weights is not None:
            self.weights = self.weights.to(device)
        return self

    # -- training ----------------------------------------------------------------------------------------------
    def loss(self, logits: torch.Tensor, labels: torch.Tensor | None, weights: torch.Tensor | None = None,
             soft: torch.Tensor | None = None) -> torch.Tensor:
        """The training loss of a batch. `labels`: the gold targets; `soft`: target distributions to train on
        instead (single-label: a probability per class, rows summing to 1; multi-label: a probability per label;
        regression: a score), e.g. a teacher's; `weights`: one per row, the loss being their weighted mean."""
        targets, is_soft = (labels, False) if soft is None else (soft, True)
        if weights is None:
            return self.mean_loss(logits, targets, is_soft)
        weights = weights.to(logits.dtype).reshape(-1)
        denominator = (weights * self.row_scale(targets, is_soft)).sum()
        return (self.row_losses(logits, targets, is_soft) * weights).sum() / \
            denominator.clamp_min(torch.finfo(logits.dtype).tiny)

    def distill_loss(self, logits: torch.Tensor, soft: torch.Tensor, temperature: float = 1.0,
                     labels: torch.Tensor | None = None, gold: torch.Tensor | None = None,
                     gold_weight: float = 0.0) -> torch.Tensor:
        """Knowledge distillation (Hinton et al., 2015): T² × the soft-target loss between the student's logits / T
        and the teacher's targets `soft` softened at T (`soften`), plus `gold_weight` × the gold-label loss over
        the rows whose `gold` is 1 (their mean; 0 in a batch without any). T² keeps the soft term's gradients on
        the scale of the gold term's. Regression has no temperature: the teacher's scores are targets as given."""
        t = float(temperature) if self.classes else 1.0
        loss = self.loss(logits / t if t != 1.0 else logits, None, soft=self.soften(soft, t)) * (t * t)
        if gold_weight and labels is not None and gold is not None:
            loss = loss + gold_weight * self.loss(logits, labels, weights=gold.to(logits.dtype))
        return loss

    def soften(self, soft: torch.Tensor, temperature: float) -> torch.Tensor:
        """Soft targets at a temperature (what a teacher's logits / T would give); as they are at T = 1."""
        return soft

    def row_losses(self, logits, targets, soft: bool) -> torch.Tensor:
        """Each row's loss (class weights or pos_weight applied as the mean loss applies them)."""
        raise NotImplementedError

    def mean_loss(self, logits, targets, soft: bool) -> torch.Tensor:
        """The batch's loss without row weights: the same function transformers' heads use (with weights)."""
        return self.row_losses(logits, targets, soft).mean()

    def row_scale(self, targets, soft: bool):
        """Each row's share of the denominator besides its row weight (cross entropy with class weights divides by
        the gold classes' weights); 1 elsewhere."""
        return 1.0

    def torch_probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Probabilities of a batch on its device (training dynamics)."""
        raise NotImplementedError

    # -- outputs (NumPy) ---------------------------------------------------------------------------------------
    def eval_loss(self, logits: np.ndarray, labels: np.ndarray) -> float:
        """The loss the model trains with, unweighted, over every example exactly once."""
        x, y = torch.from_numpy(np.asarray(logits)).float(), torch.from_numpy(np.asarray(labels))
        return float(type(self)(self.num_labels).mean_loss(x, y, False))

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """Probabilities per class or label as predictions show them (regression: the score, one column)."""
        return self.torch_probabilities(torch.from_numpy(np.asarray(logits)).float()).numpy()

    def calibrated(self, logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
        """Probabilities of logits / temperature, in float64 (the decision rule's)."""
        raise NotImplementedError

    def predictions(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def gold(self, labels: np.ndarray) -> np.ndarray:
        """Targets as predictions compare with them: class ids, 0/1 per label, or scores."""
        raise NotImplementedError

    def binarize(self, labels: np.ndarray) -> np.ndarray:
        """Which labels a row carries, as booleans (the one 0.5 cut of multi-label targets, soft ones included)."""
        raise NotImplementedError(f"{self.kind} targets are not label sets")

    def correct(self, predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """True per row where the prediction is right (multi-label: every label)."""
        raise NotImplementedError

    def confidence(self, probs: np.ndarray, predictions: np.ndarray) -> np.ndarray:
        """The probability of the decided answer per row."""
        raise NotImplementedError

    def given_confidence(self, probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """The probability of the given label per row (multi-label: the lowest over the labels, each counted as
        present or absent) — the self-confidence that ranks label issues."""
        return self.confidence(probs, self.gold(labels))

    def nll(self, probs: np.ndarray, labels: np.ndarray) -> float:
        """Mean negative log-likelihood of the labels under `probs`."""
        raise NotImplementedError

    def counts(self, labels: np.ndarray) -> np.ndarray:
        """Training rows per class (single-label) or carrying each label (multi-label)."""
        raise NotImplementedError(f"{self.kind} has no classes")

    def pool(self, logits: np.ndarray, starts: np.ndarray, counts: np.ndarray, how: str) -> np.ndarray:
        """Windows' logits pooled into one row per document: `starts`, each document's first window in `logits`
        (sorted by document), `counts` its number of windows; `how`: mean or max of the probabilities, given back
        as logits (log-probabilities; the sigmoid's logits for multi-label)."""
        x = torch.from_numpy(logits).double()
        probs = self.torch_probabilities(x).numpy()
        probs = np.maximum.reduceat(probs, starts, axis=0) if how == "max" else \
            np.add.reduceat(probs, starts, axis=0) / counts
        return self.logits_of(np.clip(probs, 1e-12, 1 - 1e-12))

    def logits_of(self, probs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def predicted_from(self, probs: np.ndarray) -> np.ndarray:
        """The default decision from probabilities instead of logits (the same answer `predictions` gives; argmax
        is the same on both, a 0.5 cut is not: MultiLabel has its own)."""
        return self.predictions(probs)

    def classes_of(self, labels: np.ndarray) -> np.ndarray | None:
        """Each row's one class, what a split stratifies by; None where a row has no one class."""
        return None

    def balanced_weights(self, labels: np.ndarray) -> np.ndarray:
        """--class-weights balanced: the loss weights that even out the training rows' classes."""
        raise NotImplementedError(f"{self.kind} has no classes")

    def inverse_frequency(self, labels: np.ndarray) -> np.ndarray:
        """--sampler balanced: each row's chance, so that each class is drawn about equally often."""
        raise NotImplementedError(f"{self.kind} has no classes")

    # -- the decision rule (decision/) -------------------------------------------------------------------------
    decision_text = "argmax"        # the decision without thresholds, as a rule describes itself

    def calibration_pairs(self, probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(confidence, 1.0 where right) of each prediction the calibration error counts."""
        raise NotImplementedError(f"{self.kind} has no probabilities to calibrate")

    def cut_scores(self, probs: np.ndarray, positive: int) -> np.ndarray:
        """The probabilities a threshold rule cuts, one column per cut-off (binary: the positive class's)."""
        raise NotImplementedError(f"{self.kind} has no thresholds")

    def cut_targets(self, labels: np.ndarray, positive: int) -> np.ndarray:
        """True where a row is on the positive side of each cut-off (columns as `cut_scores`)."""
        raise NotImplementedError(f"{self.kind} has no thresholds")

    def shifted(self, logits: np.ndarray, offsets: np.ndarray, positive: int) -> np.ndarray:
        """Logits moved by the cut-offs' logits `offsets` so that the default decision on them is the thresholded
        one (p >= t <=> logit(p) >= logit(t))."""
        raise NotImplementedError(f"{self.kind} has no thresholds")

    def decision_metrics(self, predictions: np.ndarray, labels: np.ndarray, positive: int = 1) -> dict:
        """The figures tuned thresholds are compared by (results.json's at_default and at_tuned)."""
        raise NotImplementedError(f"{self.kind} has no thresholds")

    def collapsed_to(self, logits: np.ndarray, labels: np.ndarray) -> int | None:
        """The one class predicted for every row when the rows hold two or more (a collapsed run); None."""
        return None

    def name(self, value, schema) -> str | float:
        """A target or prediction as people read it: the class's name, the labels joined, or the score."""
        raise NotImplementedError
