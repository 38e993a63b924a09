"""The training loop: the course chapter's loop on Accelerate, with each side concern a one-line call."""

from __future__ import annotations

import time

from .config import TrainConfig
from .session import Session
from .tracking import TrainLog


def train(config: TrainConfig | None = None, **options) -> dict:
    """Fine-tune and evaluate; returns what results.json holds. `train(epochs=1)` works like the CLI flags."""
    config = (config or TrainConfig()).replace(**options).with_explicit(options)
    run = Session.setup(config)        # accelerator, data, model, AdamW, schedule, run folder (see session.py)
    if run.config.dry_run:
        return run.dry_run()           # config, sizes, steps, one batch and one forward pass; nothing written
    acc, model, optimizer, scheduler, cfg = run.accelerator, run.model, run.optimizer, run.scheduler, run.config
    progress = TrainLog(acc, run.total_steps, run.start_step, cfg.log_every, cfg.quiet, run.global_batch)
    step, run.loop_start = run.start_step, time.perf_counter()

    model.train()
    for epoch in range(run.start_epoch, run.epochs):
        for batch in run.batches(epoch):                         # seeded order; a resumed epoch skips what was done
            with acc.accumulate(model):                          # no gradient sync on inner micro-steps
                loss = model(**batch).loss
                if run.usable(loss):                             # False only for NaN/inf with --skip-nonfinite-batches
                    acc.backward(loss)
                    progress.add_loss(loss)
                if acc.sync_gradients and cfg.max_grad_norm:
                    acc.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            run.samples_seen += batch["input_ids"].shape[0] * acc.num_processes
            if not acc.sync_gradients:
                continue
            if not acc.optimizer_step_was_skipped:                # fp16 overflow: the optimizer did not step
                scheduler.step()
            step += 1
            progress.step(step, run.epoch_progress(step), scheduler.get_last_lr()[0])
            if run.eval_due(step):
                run.evaluate(step, progress)                     # --eval-every N
            run.checkpoint_if_due(step)                          # --save-every N; SIGINT/SIGTERM save and stop
            if run.should_stop(step):                            # max steps reached, or early stopping
                break
        if not run.history or run.history[-1]["step"] != step:
            run.evaluate(step, progress)                         # after every epoch
        run.checkpoint_if_due(step, end_of_epoch=True)
        if run.should_stop(step):
            break
    return run.finish(step, progress)                            # save model, results.json, summary
