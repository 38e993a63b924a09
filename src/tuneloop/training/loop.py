"""The training loop: the course chapter's loop on 🤗 Accelerate (prepare → for batch: the step — forward, loss,
backward, optimizer step, zero_grad, in step.py — then schedule, progress). Every decision that writes a file or
ends the run is an `if` line here, calling a function with one job: set-up in setup_steps.py, evaluation in
evaluation/, the resumable state and the plan of the run in state.py, checkpoints in checkpoint.py, the run's files
in finish.py, reporting.py and dynamics.py, --method setfit's stage before the loop in contrastive.py.
ARCHITECTURE.md is the map."""

from __future__ import annotations

import math
from typing import Callable

from ..config.options import TrainConfig
from ..config.resolve import for_this_machine
from ..data.batching import epoch_batches
from ..exceptions import Interrupted, NonFiniteLoss
from ..layout import BEST_DIR, MODEL_DIR
from ..model.loading import body_parameters
from ..runtime.process import run_scope
from ..version import __version__
from . import checkpoint, contrastive, dry_run, dynamics, finish, reporting
from .progress import TrainLog
from .setup_steps import Run, setup
from .signals import StopSignals
from .state import TrainState
from .step import TrainStep
from .step import make_step as default_step


def run_training(config: TrainConfig, on_step: Callable[[TrainState], None] | None = None,
                 make_step: Callable[[Run], TrainStep] | None = None) -> dict:
    """Train with a config from resolve_config; everything process-wide is restored when it returns or raises.
    `make_step(run)`: the step to train with instead of step.make_step's (a TrainStep)."""
    cfg = for_this_machine(config, lambda: body_parameters(config.model))   # on a GPU: precision by size
    with run_scope(cfg) as levers, StopSignals() as signals:
        r = setup(cfg, levers)           # accelerator, data, model, run folder, AdamW, loaders, plan, schedule, state
        signals.arm()                    # a stop from now on saves a checkpoint first (before: it stops at once)
        cfg = r.config                   # as setup decided it (--method auto, the small-data settings): read only this
        if cfg.dry_run:
            return dry_run.dry_run(r)    # config, sizes, steps, one batch, one forward pass; nothing written
        if cfg.method in contrastive.HEAD_FITTED and r.state.step == 0:   # contrastive.py: body on pairs (setfit), head
            r.setfit = contrastive.train_body_and_head(r, signals)     # a Ctrl-C ends it after a pair step
        acc, model, scheduler, plan, state = r.accelerator, r.model, r.scheduler, r.plan, r.state
        step = (make_step or default_step)(r)      # step.py: the Accelerate step unless a caller plugs in another
        log = TrainLog.for_run(r)                  # progress.py: progress lines, loss and samples/s of training time
        samples_before, evaluation = state.samples_seen, None
        model.train()
        while not plan.finished(state):
            for batch in epoch_batches(r.loaders.train, state.epoch, state.batches_done, acc):  # seeded order
                out = step(batch)               # step.py: forward, loss, backward, clip, optimizer step, zero_grad
                if r.dynamics is not None:                         # dynamics.py: each row's probabilities
                    r.dynamics.record(state.epoch, batch.rows, out.logits)
                if out.skipped:                                    # --skip-nonfinite-batches
                    state.skipped_batches += 1
                    log.warn(f"skipped a batch with a non-finite loss; {state.skipped_batches} so far")
                else:
                    log.add_loss(out.loss)
                state.batch_done(len(batch) * acc.num_processes)
                if not out.update:                                  # an inner micro-step of accumulation
                    continue
                if out.applied:                                     # fp16 overflow: the optimizer did not step
                    scheduler.step()
                state.step_done(plan.steps_per_epoch)               # the last step of an epoch starts the next
                epoch = state.epoch_progress(plan.steps_per_epoch)
                mean_loss = log.step(state.step, epoch, scheduler.get_last_lr()[0], state.samples_seen)  # logs
                if mean_loss is not None and not math.isfinite(mean_loss):
                    raise NonFiniteLoss(state.step, mean_loss)      # checkpoints already saved stay intact

                if plan.eval_due(state.step):                       # --eval-every, each epoch's end, the last step
                    evaluation = r.evaluate()                       # evaluation/: every validation split
                    log.evaluation(state.step, epoch, evaluation, reporting.collapse_warning(r, evaluation, state.step))
                    if state.record_evaluation(evaluation.metrics, r.metric_for_best, plan.steps_per_epoch):
                        finish.save_model_folder(r, BEST_DIR)      # OUT/best/: the best evaluation so far
                    if state.patience_exhausted(cfg.early_stopping_patience):
                        log.early_stopping(state.best, cfg.early_stopping_patience)
                stopping = plan.finished(state)                     # the last step, or early stopping
                signal_number = signals.received(acc)               # SIGINT/SIGTERM on any process
                if plan.checkpoint_due(state.step, stopping) or signal_number:    # --save-every N | epoch
                    if not math.isfinite(unchecked := log.pending_loss()):       # never a checkpoint of NaN weights
                        raise NonFiniteLoss(state.step, unchecked)
                    with r.timeline.phase("checkpoints"):
                        saved = checkpoint.save_checkpoint(acc, r.output_dir, state.step, checkpoint_payload(r, state),
                                                           cfg.keep_last, dynamics.checkpoint_writer(r.dynamics, acc))
                if signal_number:
                    raise Interrupted(signals.how_to_resume(cfg, state.step, saved, r.output_dir, acc.num_processes),
                                      signal_number)
                if on_step is not None:
                    on_step(state)
                if stopping:
                    break

        if evaluation is None:           # nothing left to train: resumed at the last step, or --setfit-head logistic
            evaluation = r.evaluate()
        log.close()
        r.timeline.mark("training steps")      # timeline.py: the loop less its evaluations, folders, checkpoints
        results = reporting.results(r, state, log, evaluation, samples_before, step.name)   # + the baseline's
        rule, results["decision"] = finish.fit_decision_rule(r, evaluation)   # decision/: temperature, thresholds
        r.timeline.mark("results, decision rule")
        acc.wait_for_everyone()
        finish.save_model_folder(r, MODEL_DIR, rule)     # OUT/model/: model, tokenizer, tuneloop.json with the rule
        finish.gate_precision(r, lambda: signals.signal_number)   # faster routes vs fp32 (skipped on a stop)
        results["label_issues"] = dynamics.write_label_issues(r)   # label_issues.csv: labels that look wrong
        r.timeline.mark("label issues")
        reporting.write_results(r, results, evaluation)  # results.json, predictions/eval_*.npz, model card, report
        if cfg.predict_test:
            finish.predict_test(r, rule)                # predictions/<test split>.tsv (+ GLUE's layout)
        reporting.write_timeline(r, results)            # results.json's timeline, now with every phase
        finish.end_training(acc)                        # the last barrier; the process group down
        return results


def checkpoint_payload(run, state: TrainState) -> dict:
    """tuneloop_state.json of a checkpoint: the TrainState, and what a resume checks it against."""
    return {**state.to_dict(), "num_processes": run.accelerator.num_processes, "config": run.config.to_dict(),
            **checkpoint.data_record(run.plan.steps_per_epoch, len(run.data.train)), "tuneloop_version": __version__}
