"""Where a run is (TrainState: what a resumed run needs, saved and loaded as one unit) and where it is going
(Plan: step counts, and at which steps it evaluates, saves a checkpoint and ends)."""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field

from ..config.parsing import eval_every_parts
from ..tasks import signed_score


log = logging.getLogger("tuneloop")

MAX_EPOCH_EVALUATIONS = 20     # a run of more epochs (small data) evaluates this many times, evenly spaced


@dataclass
class TrainState:
    """Counters and records of a run. A checkpoint saves `to_dict()` beside Accelerate's save_state (model,
    optimizer, scheduler, random states); `from_dict` restores it, so a resumed run continues exactly."""

    step: int = 0                       # optimizer steps done
    epoch: int = 0                      # the epoch in progress (0-based)
    batches_done: int = 0               # micro-batches of `epoch` already trained: a resumed epoch skips them
    samples_seen: int = 0               # training examples seen, all processes together
    history: list = field(default_factory=list)   # [{"step", "epoch", "results": {split: metrics}}] per evaluation
    best: dict | None = None            # {"metric", "value", "step", "epoch"} of the best evaluation
    evals_without_improvement: int = 0  # the early-stopping patience counter
    stopped_early: bool = False
    skipped_batches: int = 0            # batches skipped for a non-finite loss (--skip-nonfinite-batches)

    # ---------------------------------------------------------------------------- progress
    def batch_done(self, samples: int) -> None:
        self.batches_done += 1
        self.samples_seen += samples

    def step_done(self, steps_per_epoch: int) -> None:
        """One optimizer step; the step that ends an epoch moves the state to the next one."""
        self.step += 1
        if self.step % steps_per_epoch == 0:
            self.epoch, self.batches_done = self.epoch + 1, 0

    def epoch_progress(self, steps_per_epoch: int) -> float:
        return epochs_of(self.step, steps_per_epoch)

    # ---------------------------------------------------------------------------- evaluations
    def record_evaluation(self, metrics: dict, metric: str, steps_per_epoch: int) -> bool:
        """Add an evaluation ({split: {metric: value}}) to the history; True when it is the best so far in
        `metric` (of the first split). Counts evaluations without improvement for early stopping."""
        epoch = self.epoch_progress(steps_per_epoch)
        if self.best is not None and self.best["metric"] != metric:     # --metric-for-best changed on a resume
            self._rebase(metric)
        self.history.append({"step": self.step, "epoch": epoch, "results": metrics})
        value = next(iter(metrics.values()))[metric]
        previous = None if self.best is None else self.best["value"]
        improved = previous is None or signed_score(metric, value) > signed_score(metric, previous)
        if improved:
            self.best = {"metric": metric, "value": value, "step": self.step, "epoch": epoch}
            self.evals_without_improvement = 0
        else:
            self.evals_without_improvement += 1
        return improved

    def _rebase(self, metric: str) -> None:
        """The best evaluation and the patience counter under another metric (a resume may change
        --metric-for-best): replayed from the history; when that best is not the one OUT/best/ holds, counted
        afresh from the next evaluation, which OUT/best/ then holds (said)."""
        kept, self.best, self.evals_without_improvement = self.best, None, 0
        for record in self.history:
            value = next(iter(record["results"].values())).get(metric)
            if value is None:
                continue
            if self.best is None or signed_score(metric, value) > signed_score(metric, self.best["value"]):
                self.best = {"metric": metric, "value": value, "step": record["step"], "epoch": record["epoch"]}
                self.evals_without_improvement = 0
            else:
                self.evals_without_improvement += 1
        if self.best is None or self.best["step"] != kept["step"]:
            log.warning(f"--metric-for-best {metric}: the checkpoint kept OUT/best/ by {kept['metric']} (step "
                        f"{kept['step']}); the best {metric} is chosen from the evaluations after this resume")
            self.best, self.evals_without_improvement = None, 0

    def patience_exhausted(self, patience: int | None) -> bool:
        """--early-stopping-patience N: N evaluations in a row without improvement (under this run's N: a resume
        may give another)."""
        self.stopped_early = bool(patience) and self.evals_without_improvement >= patience
        return self.stopped_early

    def evaluated_last_step(self) -> bool:
        return bool(self.history) and self.history[-1]["step"] == self.step

    # ---------------------------------------------------------------------------- saving
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, steps_per_epoch: int, gradient_accumulation_steps: int) -> "TrainState":
        """The state of a checkpoint. Those of tuneloop 0.1 recorded no position in the epoch: it follows from
        the step (every optimizer step but an epoch's last is a full accumulation)."""
        known = {f.name for f in dataclasses.fields(cls)}
        state = cls(**{k: v for k, v in data.items() if k in known})
        if "batches_done" not in data:
            state.epoch = state.step // steps_per_epoch
            state.batches_done = (state.step - state.epoch * steps_per_epoch) * gradient_accumulation_steps
        return state


def epochs_of(steps: int, steps_per_epoch: int) -> float:
    """Epochs as results.json counts them: --max-steps 17 at 7 steps per epoch is 2.4286."""
    return round(steps / steps_per_epoch, 4)


def optimizer_steps_per_epoch(batches_per_epoch: int, accumulation: int) -> int:
    """Optimizer steps in an epoch of this many loader batches (a last, shorter accumulation steps too)."""
    return math.ceil(batches_per_epoch / accumulation)


@dataclass(frozen=True)
class Plan:
    """What the run will do, fixed at set-up (after `accelerator.prepare`, when the loader holds this process's
    share of the batches)."""

    steps_per_epoch: int
    total_steps: int
    global_batch: int                   # per device × processes × accumulation
    eval_interval: int | None           # --eval-every as a number of steps
    save_every: str | None              # --save-every: N steps, "epoch", or None
    eval_each_epoch: bool = True        # False past MAX_EPOCH_EVALUATIONS epochs: then every eval_interval steps
    evals_per_epoch: int | None = None  # --eval-every K/epoch: K evenly spaced steps of every epoch, its end included
    patience: int | None = None         # --early-stopping-patience (a resume may change it: finished() reads it)

    @classmethod
    def make(cls, batches_per_epoch: int, config, num_processes: int) -> "Plan":
        steps = optimizer_steps_per_epoch(batches_per_epoch, config.gradient_accumulation_steps)
        total = config.max_steps or config.epochs * steps
        if config.max_steps and "epochs" in (config.chosen or ()) and total != config.epochs * steps:
            log.info(f"--max-steps {total} sets the run's length ({total / steps:.4g} epochs of {steps} steps): "
                     f"--epochs {config.epochs} is not used")
        if config.method == "probe" or (config.method == "setfit" and config.setfit_head == "logistic"):
            total = 0                   # the head is fitted before the loop (contrastive.py): no loop steps
        interval = per_epoch = None
        if config.eval_every is not None:
            kind, number = eval_every_parts(config.eval_every)
            interval = number if kind == "steps" else max(1, steps // number)
            per_epoch = number if kind == "per_epoch" else None
        each_epoch = math.ceil(total / steps) <= MAX_EPOCH_EVALUATIONS
        if not each_epoch and interval is None:      # many short epochs (small data): evenly spaced instead
            interval = math.ceil(total / MAX_EPOCH_EVALUATIONS)
        return cls(steps, total,
                   config.batch_size * num_processes * config.gradient_accumulation_steps, interval,
                   config.save_every, each_epoch, per_epoch, config.early_stopping_patience)

    @property
    def epochs(self) -> int:
        return math.ceil(self.total_steps / self.steps_per_epoch)

    def finished(self, state: TrainState) -> bool:
        """The last step, or early stopping: under this run's patience, so that a resume of an early-stopped run
        with a larger --early-stopping-patience (or none) trains on (it ended at once)."""
        stopped = state.stopped_early and bool(self.patience) and state.evals_without_improvement >= self.patience
        return state.step >= self.total_steps or stopped

    def eval_due(self, step: int) -> bool:
        """At every epoch's end (of runs of at most MAX_EPOCH_EVALUATIONS epochs), at the last step, and every
        --eval-every N steps, or at K/epoch's K steps of each epoch (its end among them)."""
        periodic = self.epoch_mark(step) if self.evals_per_epoch else \
            bool(self.eval_interval) and step % self.eval_interval == 0
        return self.eval_each_epoch and step % self.steps_per_epoch == 0 or step >= self.total_steps or periodic

    def epoch_mark(self, step: int) -> bool:
        """Whether `step` is one of the K/epoch evaluation steps: the steps ceil(i × steps_per_epoch / K), i = 1..K,
        counted in the step's own epoch, so that every epoch evaluates K times (a global interval of
        steps_per_epoch // K drifts across epochs, and evaluates once more just before each epoch's end)."""
        k, n = self.evals_per_epoch, self.steps_per_epoch
        position = (step - 1) % n + 1                  # 1..n within its epoch
        return position * k // n > (position - 1) * k // n

    def checkpoint_due(self, step: int, ending: bool) -> bool:
        """--save-every N: every N steps; --save-every epoch: at every epoch's end and when the run ends early."""
        if self.save_every == "epoch":
            return step % self.steps_per_epoch == 0 or ending
        return self.save_every is not None and step % int(self.save_every) == 0
