"""The training loop: the course chapter's loop on Accelerate, with each side concern a one-line call."""

from __future__ import annotations

import time

from .config import TrainConfig
from .session import Session
from .tracking import TrainLog


def train(config: TrainConfig | None = None, **options) -> dict:
    """Fine-tune and evaluate; returns what results.json holds. `train(epochs=1)` works like the CLI flags."""
    config = (config or TrainConfig()).replace(**options) if options or config else TrainConfig()
    run = Session.setup(config)        # accelerator, data, model, AdamW, schedule, run folder (see session.py)
    acc, model, optimizer, scheduler, cfg = run.accelerator, run.model, run.optimizer, run.scheduler, run.config
    progress = TrainLog(acc, run.total_steps, run.start_step, cfg.log_every, cfg.quiet, run.global_batch)
    step, run.loop_start = run.start_step, time.perf_counter()

    model.train()
    for epoch in range(run.start_epoch, run.epochs):
        run.train_loader.set_epoch(epoch)                       # same order for a given (seed, epoch)
        for batch in run.train_loader:
            with acc.accumulate(model):                          # no gradient sync on inner micro-steps
                loss = model(**batch).loss
                acc.backward(loss)
                if acc.sync_gradients and cfg.max_grad_norm:
                    acc.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            progress.add_loss(loss)
            run.samples_seen += batch["input_ids"].shape[0] * acc.num_processes
            if not acc.sync_gradients:
                continue
            if not acc.optimizer_step_was_skipped:                # fp16 overflow: the optimizer did not step
                scheduler.step()
            step += 1
            progress.step(step, run.epoch_progress(step), scheduler.get_last_lr()[0])
            if run.eval_due(step):
                run.evaluate(step, progress)
            if step >= run.total_steps:
                break
        run.evaluate(step, progress)                             # after every epoch
        if step >= run.total_steps:
            break
    return run.finish(step, progress)                            # save model, results.json, summary
