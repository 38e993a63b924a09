"""Inference over DataLoaders on every process, gathered so that each example counts exactly once."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import torch

from ..objective import Objective
from ..runtime.machine import interactive
from .metrics import Accumulator


def run_inference(model, loader, accelerator, accumulator: Accumulator, desc: str, quiet: bool) -> Accumulator:
    """Forward every batch without gradients; gather logits (and labels) across processes, dropping the
    duplicates that even batches add at the end (`gather_for_metrics`)."""
    from tqdm.auto import tqdm

    # a model already in eval mode is left as it is, and no bar is made unless shown: walking the modules twice
    # (~0.5 ms for MiniLM) and a disabled bar (~50 µs) cost more than the rest of predicting one short text
    was_training = model.training
    if was_training:
        model.eval()
    shown = not quiet and accelerator.is_main_process and interactive()
    bar = tqdm(loader, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True) if shown else loader
    with torch.no_grad():
        for batch in bar:                            # data/batch.Batch: inputs, labels, rows apart
            logits = model(**batch.inputs).logits
            if batch.labels is None:
                logits, docs = accelerator.gather_for_metrics((logits, batch.rows))
                accumulator.add_batch(logits, docs=docs)
            else:
                logits, labels, docs = accelerator.gather_for_metrics((logits, batch.labels, batch.rows))
                accumulator.add_batch(logits, labels, docs)
    if was_training:
        model.train()
    return accumulator


class OneProcess:
    """What run_inference (and `Classifier.accelerated`'s callers) ask of an Accelerator, for inference in this
    process alone (a saved model used outside a launch: texts in memory, files, serve): batches moved to the
    model's device, nothing to gather, every process the main one. Starting an Accelerator (and giving its process
    state back) for every call would cost more than predicting one short text."""

    is_main_process = True
    num_processes = 1

    def __init__(self, device):
        self.device = device

    def prepare(self, loader) -> "OnDevice":
        return OnDevice(loader, self.device)

    def gather_for_metrics(self, tensors):
        return tensors

    def main_process_first(self):
        import contextlib

        return contextlib.nullcontext()

    def wait_for_everyone(self) -> None:
        pass


class OnDevice:
    """A DataLoader of `Batch`es, each moved to `device` as it is taken (what Accelerate's prepared loaders do); to
    a GPU without blocking (a batch made in pinned pages is copied while the GPU works on the one before)."""

    def __init__(self, loader, device):
        self.loader, self.device = loader, device
        self.non_blocking = getattr(device, "type", str(device)) == "cuda"

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        return (batch.to(self.device, self.non_blocking) for batch in self.loader)


@dataclass
class Evaluation:
    """One evaluation of every evaluation split."""

    metrics: dict                                  # split -> {metric: value, "loss": x, "num_samples": n}
    outputs: dict = field(default_factory=dict)    # split -> (logits, labels): a row per text, in row order
    seconds: float = 0.0

    @classmethod
    def of(cls, accumulators: dict, started: float) -> "Evaluation":
        """From each split's Accumulator (what run_inference returns), timed from `started` (time.perf_counter)."""
        return cls({split: acc.compute() for split, acc in accumulators.items()},
                   {split: (acc.all_logits, acc.all_labels) for split, acc in accumulators.items()},
                   time.perf_counter() - started)

    @property
    def main_split(self) -> dict:
        """The metrics of the first split (the one `eval/` means in metrics.jsonl)."""
        return next(iter(self.metrics.values()))

    def collapsed_to(self, objective: Objective) -> int | None:
        """The one class a single-label model predicts for every row of the first split, when its rows hold two
        or more (a collapsed run, the classic failure on small data); None otherwise."""
        return objective.collapsed_to(*next(iter(self.outputs.values()))) if self.outputs else None


def evaluate(model, loaders: dict, accelerator, metric_names, objective: Objective, quiet: bool = False,
             pooling: str = "mean", positive: int = 1) -> Evaluation:
    """Every split of `loaders` through the model; `positive`: the class "f1" is of (--positive-label)."""
    started = time.perf_counter()
    accumulators = {split: run_inference(model, loader, accelerator,
                                         Accumulator(metric_names, objective, pooling, positive),
                                         f"Evaluating {split}", quiet) for split, loader in loaders.items()}
    return Evaluation.of(accumulators, started)
