"""The training step: the one thing the loop calls per batch. A step takes a `data.batch.Batch`, runs forward,
loss (the run's `Objective`), backward, clipping, the optimizer's step and zero_grad — gradient accumulation
inside — and returns a `StepOutput` with what the loop logs and records. `AccelerateStep` is the course
chapter's step on 🤗 Accelerate, the default; another kind of step (a captured GPU step, a distillation step) is
a class here or beside it with the same call, chosen in `make_step`, and the loop does not change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..data.batch import Batch


@dataclass
class StepOutput:
    """What one batch's step gives the loop. The tensors stay on the device (no host sync)."""

    loss: torch.Tensor               # the batch's training loss, detached
    logits: torch.Tensor             # the model's logits, detached (training dynamics)
    skipped: bool = False            # a non-finite loss: no backward for this batch (--skip-nonfinite-batches)
    update: bool = True              # the last micro-batch of an accumulation: the optimizer stepped
    applied: bool = True             # ... and applied the update (fp16 overflow skips it: the schedule waits)


class TrainStep(Protocol):
    """The step's contract: `name` (results.json's `step`) and a call per batch."""

    name: str

    def __call__(self, batch: Batch) -> StepOutput: ...


class AccelerateStep:
    """forward → loss → backward → clip → optimizer step → zero_grad, through the Accelerator's wrappers
    (mixed precision, gradient accumulation with no sync on inner micro-steps, distributed gradients)."""

    name = "accelerate"

    def __init__(self, accelerator, model, optimizer, objective, max_grad_norm: float | None = None,
                 skip_nonfinite: bool = False):
        self.accelerator, self.model, self.optimizer, self.objective = accelerator, model, optimizer, objective
        self.max_grad_norm, self.skip_nonfinite = max_grad_norm, skip_nonfinite

    def __call__(self, batch: Batch) -> StepOutput:
        acc, model = self.accelerator, self.model
        with acc.accumulate(model):                               # no gradient sync on inner micro-steps
            logits = model(**batch.inputs).logits
            loss = self.loss(logits, batch)                         # objective/
            skipped = self.skip_nonfinite and not torch.isfinite(loss.detach())   # a host sync: opt-in
            if not skipped:
                acc.backward(loss)
            if acc.sync_gradients and self.max_grad_norm:
                acc.clip_grad_norm_(model.parameters(), self.max_grad_norm)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        update = acc.sync_gradients
        return StepOutput(loss.detach(), logits.detach(), bool(skipped), update,
                          update and not acc.optimizer_step_was_skipped)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The batch's training loss: the Objective's, on the batch's targets."""
        return self.objective.loss(logits, batch.labels, batch.weights, batch.soft)


class DistillStep(AccelerateStep):
    """The Accelerate step with the distillation loss (`Objective.distill_loss`): the teacher's soft targets at a
    temperature, plus the gold labels of the rows that have them, weighted (`tuneloop distill`)."""

    name = "distill"

    def __init__(self, *args, temperature: float = 1.0, gold_weight: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.temperature, self.gold_weight = temperature, gold_weight

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self.objective.distill_loss(logits, batch.soft, self.temperature, batch.labels, batch.gold,
                                           self.gold_weight)


def make_step(run) -> TrainStep:
    """The step a run trains with: the Accelerate step, or its distillation variant when the run has a teacher's
    soft targets (--soft-targets, which `tuneloop distill` sets)."""
    cfg = run.config
    args = (run.accelerator, run.model, run.optimizer, run.objective, cfg.max_grad_norm, cfg.skip_nonfinite_batches)
    if cfg.soft_targets:
        return DistillStep(*args, temperature=cfg.temperature, gold_weight=cfg.gold_weight)
    return AccelerateStep(*args)
