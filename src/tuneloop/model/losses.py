"""The training loss, computed by tuneloop from the model's logits (the models' built-in losses take no
weights): cross entropy for classes, binary cross entropy per label for multi-label, mean squared error for
regression — the same functions transformers' heads use, plus optional class weights (--class-weights)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..tasks import MULTI_LABEL, REGRESSION


class TrainingLoss(torch.nn.Module):
    """`loss = TrainingLoss(problem_type, weights)(logits, labels)`. `weights`: per-class weights for single-label
    classification, per-label pos_weight for multi-label; None for none."""

    def __init__(self, problem_type: str, weights=None):
        super().__init__()
        self.problem_type = problem_type
        self.register_buffer("weights", None if weights is None else torch.as_tensor(weights, dtype=torch.float32))

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.problem_type == REGRESSION:
            return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype).view(-1))
        if self.problem_type == MULTI_LABEL:
            return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype), pos_weight=self.weights)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), weight=self.weights)
