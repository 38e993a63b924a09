"""What a dry run prints instead of training: config, sizes, step counts, one batch, one forward pass."""

from __future__ import annotations

import logging

import torch

log = logging.getLogger("tuneloop")


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
            "total_steps": run.plan.total_steps, "epochs": epochs(run.plan), "global_batch_size": run.plan.global_batch,
            "batch_shapes": batch.shapes,
            "loss": round(float(loss), 4), "logits_shape": list(out.logits.shape)}
    if run.resumed_from:                                  # --resume: where the real run would go on from
        info["resume"] = {"checkpoint": run.resumed_from, "step": run.state.step,
                          "steps_left": max(run.plan.total_steps - run.state.step, 0)}
    if (refusal := folder_refusal(run.config)) is not None:
        info["refused"] = refusal
        log.warning(f"--dry-run: the run itself would stop here: {refusal}")
    if run.accelerator.is_main_process:
        print(yaml.safe_dump(info, sort_keys=False), end="")
    return info


def folder_refusal(config) -> str | None:
    """What the real run would refuse about its --output-dir (an earlier run there without --overwrite or
    --resume, a run writing it now, a file), which set-up does not check for a dry run: None when nothing."""
    from ..exceptions import TuneloopError
    from .run_folder import check_run_folder

    try:
        check_run_folder(config.output_dir, config.overwrite, resume=config.resume is not None)
    except TuneloopError as e:
        return str(e)
    return None


def epochs(plan) -> float | int:
    """The epochs the run trains, as results.json's `train.epochs` will say (state.epochs_of): --max-steps 17 at 7
    steps per epoch is 2.4286 epochs, not 3."""
    from .state import epochs_of

    value = epochs_of(plan.total_steps, plan.steps_per_epoch) if plan.steps_per_epoch else 0
    return int(value) if value == int(value) else value
