"""Inference over DataLoaders on every process, gathered so that each example counts exactly once."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .metrics import Accumulator


def run_inference(model, loader, accelerator, accumulator: Accumulator, desc: str, quiet: bool) -> Accumulator:
    """Forward every batch without gradients; gather logits (and labels) across processes, dropping the
    duplicates that even batches add at the end (`gather_for_metrics`)."""
    from tqdm.auto import tqdm

    was_training = model.training
    model.eval()
    bar = tqdm(loader, desc=desc, leave=False, disable=quiet or not accelerator.is_main_process, file=sys.stderr,
               dynamic_ncols=True)
    with torch.no_grad():
        for batch in bar:
            labels = batch.pop("labels", None)
            logits = model(**batch).logits
            if labels is None:
                accumulator.add_batch(accelerator.gather_for_metrics(logits))
            else:
                logits, labels = accelerator.gather_for_metrics((logits, labels))
                accumulator.add_batch(logits, labels)
    model.train(was_training)
    return accumulator


@dataclass
class Evaluation:
    """One evaluation of every evaluation split."""

    metrics: dict                                  # split -> {metric: value, "loss": x, "num_samples": n}
    outputs: dict = field(default_factory=dict)    # split -> (logits, labels) arrays, in the loader's order
    seconds: float = 0.0

    @property
    def main_split(self) -> dict:
        """The metrics of the first split (the one `eval/` means in metrics.jsonl)."""
        return next(iter(self.metrics.values()))


def evaluate(model, loaders: dict, accelerator, metric_names, problem_type: str, quiet: bool = False) -> Evaluation:
    started = time.perf_counter()
    metrics, outputs = {}, {}
    for split, loader in loaders.items():
        acc = run_inference(model, loader, accelerator, Accumulator(metric_names, problem_type),
                            f"Evaluating {split}", quiet)
        metrics[split] = acc.compute()
        outputs[split] = (acc.all_logits, acc.all_labels)
    return Evaluation(metrics, outputs, time.perf_counter() - started)


def predict_logits(model, tokenized, tokenizer, accelerator, problem_type: str, batch_size: int, quiet: bool,
                   desc: str = "Predicting") -> np.ndarray:
    """Logits for a tokenized split in its original row order (batches run longest first)."""
    from .data.batching import eval_loader, make_collator

    loader, order = eval_loader(tokenized, tokenizer, batch_size, make_collator(tokenizer, False, None))
    loader = accelerator.prepare(loader)
    acc = run_inference(model, loader, accelerator, Accumulator((), problem_type), desc, quiet)
    logits = np.empty_like(acc.all_logits)
    logits[order] = acc.all_logits                       # undo the length sort
    return logits
