"""Inference over a DataLoader on every process, gathered so each example counts exactly once."""

from __future__ import annotations

import sys

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


def evaluate(model, loaders: dict, accelerator, metric_names, problem_type: str, quiet: bool = False) -> dict:
    """{split: {metric: value, "loss": x, "num_samples": n}} for every evaluation split."""
    results = {}
    for split, loader in loaders.items():
        acc = run_inference(model, loader, accelerator, Accumulator(metric_names, problem_type),
                            f"Evaluating {split}", quiet)
        results[split] = acc.compute()
    return results
