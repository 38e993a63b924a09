"""The training step: the one thing the loop calls per batch. A step takes a `data.batch.Batch`, runs forward,
loss (the run's `Objective`), backward, clipping, the optimizer's step and zero_grad — gradient accumulation
inside — and returns a `StepOutput` with what the loop logs and records. `AccelerateStep` is the course
chapter's step on 🤗 Accelerate, the default; `CapturedStep` records it as CUDA graphs on one GPU; another kind of
step (a distillation step) is a class here or beside it with the same call, chosen in `make_step`, and the loop does
not change."""

from __future__ import annotations

from contextlib import contextmanager
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
            logits, loss = self.forward_loss(batch)
            skipped = self.skip_nonfinite and self.nonfinite(loss)      # a host sync: opt-in
            if not skipped:
                acc.backward(loss)
            if acc.sync_gradients and self.max_grad_norm:
                acc.clip_grad_norm_(model.parameters(), self.max_grad_norm)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        update = acc.sync_gradients
        return StepOutput(loss.detach(), logits.detach(), bool(skipped), update,
                          update and not acc.optimizer_step_was_skipped)

    def nonfinite(self, loss: torch.Tensor) -> bool:
        """The loss is NaN or infinite, on this process or (several processes) on any: every process then skips
        its batch, as one process skips it — a process that ran backward alone would wait in the gradients'
        all-reduce for the others forever."""
        finite = torch.isfinite(loss.detach())
        if self.accelerator.num_processes == 1:
            return not finite
        return bool(self.accelerator.reduce((~finite).float().reshape(1), reduction="sum") > 0)

    def forward_loss(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits, the batch's training loss): forward, then `loss`."""
        logits = self.model(**batch.inputs).logits
        return logits, self.loss(logits, batch)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The batch's training loss: the Objective's, on the batch's targets."""
        return self.objective.loss(logits, batch.labels, batch.weights, batch.soft)


class DistillStep(AccelerateStep):
    """The Accelerate step with the distillation loss (`Objective.distill_loss`): the teacher's soft targets at a
    temperature, plus the gold labels of the rows that have them, weighted (`tuneloop distill`); with a
    `feature_weight`, plus that weight × the cosine distance between the student's sentence features (the masked
    mean of its last hidden states) and the teacher's (`batch.features`), as DistilBERT's cosine loss."""

    name = "distill"

    def __init__(self, *args, temperature: float = 1.0, gold_weight: float = 0.0, feature_weight: float = 0.0,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.temperature, self.gold_weight, self.feature_weight = temperature, gold_weight, feature_weight

    def forward_loss(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.feature_weight or batch.features is None:
            return super().forward_loss(batch)
        from ..model.pooling import masked_mean

        out = self.model(**batch.inputs, output_hidden_states=True)
        mine = masked_mean(out.hidden_states[-1], batch.inputs.get("attention_mask"), normalise=False)
        distance = 1.0 - torch.nn.functional.cosine_similarity(mine.float(), batch.features.float(), dim=-1)
        return out.logits, self.loss(out.logits, batch) + self.feature_weight * distance.mean()

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self.objective.distill_loss(logits, batch.soft, self.temperature, batch.labels, batch.gold,
                                           self.gold_weight)


def make_step(run) -> TrainStep:
    """The step a run trains with: the distillation variant of the Accelerate step when the run has a teacher's
    soft targets (--soft-targets, which `tuneloop distill` sets), the captured one where setup decided it
    (step_choice.decide), else the Accelerate step."""
    cfg = run.config
    args = (run.accelerator, run.model, run.optimizer, run.objective, cfg.max_grad_norm, cfg.skip_nonfinite_batches)
    if cfg.soft_targets:
        return DistillStep(*args, temperature=cfg.temperature, gold_weight=cfg.gold_weight,
                           feature_weight=cfg.feature_weight)
    if run.captured:
        return CapturedStep(run.model, run.optimizer, run.objective, cfg.max_grad_norm,
                            capture=run.accelerator.device.type == "cuda")
    return AccelerateStep(*args)


WARMUP_STEPS = 2


@dataclass
class _Graph:
    """One batch shape's static buffers, and its CUDA graph (None when running eagerly)."""

    inputs: dict
    labels: torch.Tensor
    graph: object = None
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None

    def load(self, batch: Batch) -> None:
        for name, tensor in batch.inputs.items():
            self.inputs[name].copy_(tensor, non_blocking=True)
        self.labels.copy_(batch.labels, non_blocking=True)


def shape_key(batch: Batch) -> tuple:
    """A batch's shapes and dtypes: one graph per key."""
    return tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(batch.inputs.items())) + \
        (("labels", tuple(batch.labels.shape), batch.labels.dtype),)


class CapturedStep:
    """forward → loss → backward → clip → a fused capturable AdamW, recorded once per batch shape as a CUDA graph
    and replayed: one launch a step instead of ~1,000 small ones (bert-base at batch 8 on an H100: 24.6 ms a step
    eager, 7.2 ms captured, ../shared/probes of 2026-11-26). `--captured-step` and step_choice.decide say when.

    How it stays exact:
    - Shapes: batches are padded to length buckets (data.batching.length_bucket; padding is masked), so a run has
      a few shapes; each (rows, length) gets its own graph, the epoch's last short batch included (never
      dropped). The graphs share one memory pool.
    - Recording runs the step a few times (warm-up) and once under capture; the weights, the optimizer's state
      and the RNG are put back afterwards, so recording trains nothing.
    - The learning rate is a device tensor in the optimizer's groups while it steps; before each replay it is
      filled from the schedule's value (a launch, no host sync). The schedule, checkpoints and logs keep plain
      numbers.
    - No host sync in the step: loss and logits are copied out of the graph's buffers on the device; the loop
      reads the loss only when it logs.
    With `capture=False` the same static-buffer code runs eagerly (CPUs, tests): on a GPU only the recording
    differs, which benchmarks/check_captured_step.py compares with the eager step there. `optimizer` is built
    with `capturable=True` (model.optim.build_optimizer); the loop's scheduler steps it as usual."""

    name = "captured"

    def __init__(self, model, optimizer, objective, max_grad_norm: float | None = None, capture: bool = True,
                 warmup: int = WARMUP_STEPS):
        self.model, self.objective, self.max_grad_norm = model, objective, max_grad_norm
        self.stepper = optimizer                                           # what the schedule watches step
        self.optimizer = getattr(optimizer, "optimizer", optimizer)        # Accelerate's wrapper: the torch one
        self.capture, self.warmup = capture, warmup
        self.params = [p for p in model.parameters() if p.requires_grad]
        device = self.params[0].device
        self.lrs = [torch.tensor(float(g["lr"]), dtype=torch.float32, device=device)
                    for g in self.optimizer.param_groups]
        self.graphs: dict[tuple, _Graph] = {}
        self.pool = None

    @property
    def shapes(self) -> int:
        """How many batch shapes have been recorded (one graph each)."""
        return len(self.graphs)

    def __call__(self, batch: Batch) -> StepOutput:
        if batch.weights is not None or batch.soft is not None:
            raise RuntimeError("the captured step takes labels only (decide() keeps row weights and soft targets "
                               "on the eager step)")
        key = shape_key(batch)
        static = self.graphs.get(key)
        if static is None:
            static = self.graphs[key] = self._record(batch)
        static.load(batch)
        self._fill_lrs()
        if static.graph is not None:
            static.graph.replay()
            loss, logits = static.loss, static.logits
        else:
            loss, logits = self._update(static)
            self.optimizer.zero_grad(set_to_none=True)
        return StepOutput(loss.detach().clone(), logits.detach().clone())

    # ------------------------------------------------------------------ the step itself
    def _update(self, static: _Graph):
        with self._lr_tensors():
            logits = self.model(**static.inputs).logits
            loss = self.objective.loss(logits, static.labels)
            loss.backward()
            if self.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm, foreach=True)
            self.stepper.step()
        return loss.detach(), logits.detach()

    def _fill_lrs(self) -> None:
        """The schedule's learning rates (plain numbers in the groups) into the device tensors the graph reads."""
        for tensor, group in zip(self.lrs, self.optimizer.param_groups, strict=True):
            tensor.fill_(float(group["lr"]))

    @contextmanager
    def _lr_tensors(self):
        """While the optimizer steps (and is recorded), its groups hold the device tensors; plain numbers after."""
        groups = self.optimizer.param_groups
        saved = [g["lr"] for g in groups]
        for g, tensor in zip(groups, self.lrs, strict=True):
            g["lr"] = tensor
        try:
            yield
        finally:
            for g, value in zip(groups, saved, strict=True):
                g["lr"] = value

    # ------------------------------------------------------------------ recording
    def _record(self, batch: Batch) -> _Graph:
        static = _Graph({k: v.clone() for k, v in batch.inputs.items()}, batch.labels.clone())
        if not self.capture:
            return static
        saved = self._snapshot()
        device = self.params[0].device
        rng = torch.cuda.get_rng_state(device)
        static.load(batch)
        self._fill_lrs()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):                     # warm-up off the main stream, as CUDA graphs ask
            for _ in range(self.warmup):
                self.optimizer.zero_grad(set_to_none=True)
                self._update(static)
        torch.cuda.current_stream(device).wait_stream(side)
        self.optimizer.zero_grad(set_to_none=True)        # backward allocates the gradients inside the graph
        graph = torch.cuda.CUDAGraph()
        # thread_local: the DataLoader's pin-memory thread may call CUDA while this thread records
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            static.loss, static.logits = self._update(static)
        self.pool = graph.pool()                          # every shape's graph in one pool
        static.graph = graph
        self._restore(saved)
        torch.cuda.set_rng_state(rng, device)
        return static

    def _snapshot(self) -> dict:
        with torch.no_grad():
            return {"params": [p.detach().clone() for p in self.params],
                    "state": {id(p): {k: v.clone() for k, v in s.items() if torch.is_tensor(v)}
                              for p, s in self.optimizer.state.items()}}

    def _restore(self, saved: dict) -> None:
        """The weights and optimizer state as before recording; state the warm-up created is zeroed (what AdamW's
        first step initialises it to)."""
        with torch.no_grad():
            for p, value in zip(self.params, saved["params"], strict=True):
                p.copy_(value)
            for p, s in self.optimizer.state.items():
                before = saved["state"].get(id(p), {})
                for k, v in s.items():
                    if torch.is_tensor(v):
                        v.copy_(before[k]) if k in before else v.zero_()
