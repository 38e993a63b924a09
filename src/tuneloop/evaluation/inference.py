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

    was_training = model.training
    model.eval()
    bar = tqdm(loader, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True,
               disable=quiet or not accelerator.is_main_process or not interactive())
    with torch.no_grad():
        for batch in bar:                            # data/batch.Batch: inputs, labels, rows apart
            logits = model(**batch.inputs).logits
            if batch.labels is None:
                logits, docs = accelerator.gather_for_metrics((logits, batch.rows))
                accumulator.add_batch(logits, docs=docs)
            else:
                logits, labels, docs = accelerator.gather_for_metrics((logits, batch.labels, batch.rows))
                accumulator.add_batch(logits, labels, docs)
    model.train(was_training)
    return accumulator


@dataclass
class Evaluation:
    """One evaluation of every evaluation split."""

    metrics: dict                                  # split -> {metric: value, "loss": x, "num_samples": n}
    outputs: dict = field(default_factory=dict)    # split -> (logits, labels): a row per text, in row order
    seconds: float = 0.0

    @property
    def main_split(self) -> dict:
        """The metrics of the first split (the one `eval/` means in metrics.jsonl)."""
        return next(iter(self.metrics.values()))

    def collapsed_to(self, objective: Objective) -> int | None:
        """The one class a single-label model predicts for every row of the first split, when its rows hold two
        or more (a collapsed run, the classic failure on small data); None otherwise."""
        return objective.collapsed_to(*next(iter(self.outputs.values()))) if self.outputs else None


def evaluate(model, loaders: dict, accelerator, metric_names, objective: Objective, quiet: bool = False,
             pooling: str = "mean") -> Evaluation:
    started = time.perf_counter()
    metrics, outputs = {}, {}
    for split, loader in loaders.items():
        acc = run_inference(model, loader, accelerator, Accumulator(metric_names, objective, pooling),
                            f"Evaluating {split}", quiet)
        metrics[split] = acc.compute()
        outputs[split] = (acc.all_logits, acc.all_labels)
    return Evaluation(metrics, outputs, time.perf_counter() - started)


def predict_logits(model, tokenized, tokenizer, accelerator, objective: Objective, batch_size: int, quiet: bool,
                   desc: str = "Predicting", pooling: str = "mean"):
    """Logits for a tokenized split, one row per input row in its original order (batches run longest first;
    windows are pooled back into their row)."""
    from ..data.batching import eval_loader, make_collator

    loader = eval_loader(tokenized, batch_size, make_collator(tokenizer, False, None))
    loader = accelerator.prepare(loader)
    return run_inference(model, loader, accelerator, Accumulator((), objective, pooling), desc, quiet).all_logits
