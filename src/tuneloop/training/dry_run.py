"""What a dry run prints instead of training: config, sizes, step counts, one batch, one forward pass."""

from __future__ import annotations

import torch


def dry_run(run) -> dict:
    """What the chapter checks before training: config, sizes, step counts, a batch, one forward pass. Printed
    as YAML; nothing is written."""
    import yaml

    batch = next(iter(run.loaders.train))                 # data/batch.Batch
    with torch.no_grad():
        out = run.model(**batch.inputs)
        loss = run.objective.loss(out.logits, batch.labels, batch.weights, batch.soft)
    info = {"config": run.config.to_dict(),
            "examples": {"train": len(run.data.train), **{k: len(v) for k, v in run.data.evaluation.items()}},
            "labels": run.data.labels.names or run.objective.kind, "steps_per_epoch": run.plan.steps_per_epoch,
            "total_steps": run.plan.total_steps, "epochs": run.plan.epochs, "global_batch_size": run.plan.global_batch,
            "batch_shapes": batch.shapes,
            "loss": round(float(loss), 4), "logits_shape": list(out.logits.shape)}
    if run.accelerator.is_main_process:
        print(yaml.safe_dump(info, sort_keys=False), end="")
    return info
