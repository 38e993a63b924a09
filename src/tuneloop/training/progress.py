"""What a run tells: metrics.jsonl (always), Accelerate trackers (--report-to), the progress bar, the console."""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from pathlib import Path

from accelerate.tracking import GeneralTracker

from ..runtime.machine import interactive

log = logging.getLogger("tuneloop")


class JsonlTracker(GeneralTracker):
    """One JSON object per logged step or evaluation, appended to `metrics.jsonl` and flushed at once."""

    name = "jsonl"
    requires_logging_directory = False
    main_process_only = True

    def __init__(self, path: str | Path):
        super().__init__()
        self.path = Path(path)

    @property
    def tracker(self):
        return self.path

    def log(self, values: dict, step: int | None = None, **kwargs):
        record = {"step": step, "time": round(time.time(), 3), **values}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def trackers(report_to: str, metrics_path: Path) -> list:
    chosen = [] if report_to == "none" else (["tensorboard", "wandb", "mlflow", "comet_ml"]
                                            if report_to == "all" else [report_to])
    return [JsonlTracker(metrics_path), *chosen]


def read_metrics(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def hparams(config: dict) -> dict:
    """Trackers take scalars only."""
    return {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in config.items()}


PLAIN_EVERY_S = 30.0


class TrainLog:
    """The progress bar (or plain progress lines), loss/lr logging and timing of the training loop, without
    per-step host syncs: the loss is read back only every `every` steps. Evaluation time is kept apart, so that
    samples/s counts training: every phase of the run's `timeline` inside the loop (evaluations, OUT/best/,
    checkpoints) is, in each logged window and in `training_s`. `samples`: the examples seen before (a resume)."""

    def __init__(self, accelerator, total_steps: int, start_step: int, every: int, quiet: bool, timeline,
                 samples: int = 0):
        from tqdm.auto import tqdm

        self.accelerator, self.every = accelerator, every
        self.total, self.start_step = total_steps, start_step
        speaks = not quiet and accelerator.is_main_process
        self.plain = speaks and not interactive()
        self.lines = accelerator.is_main_process       # progress lines: the console's without a bar, train.log's
        self.bar = tqdm(total=total_steps, initial=start_step, desc="Training", unit="step", dynamic_ncols=True,
                        disable=not speaks or self.plain, file=sys.stderr)
        self.loss_sum, self.micro_batches = None, 0
        self.started = self.window_start = self.last_line = time.perf_counter()
        self.window_samples = samples
        self.eval_s = 0.0
        self.timeline, self.aside_s = timeline, None      # aside_s: seconds in the loop's phases, set by close()
        self.aside_start = self.window_aside = self._aside()
        self.first_step_s: float | None = None      # the first optimizer step, compilation included
        self.shown = {"loss": math.nan, "lr": math.nan, "sps": math.nan}

    @classmethod
    def for_run(cls, run) -> "TrainLog":
        """The log of a run's loop (training/setup_steps.Run), from where its state is (a resume's step and rows)."""
        cfg, plan, state = run.config, run.plan, run.state
        return cls(run.accelerator, plan.total_steps, state.step, cfg.log_every, cfg.quiet, run.timeline,
                   samples=state.samples_seen)

    def pending_loss(self) -> float:
        """The mean loss of the steps since the last logged window, not yet checked (a host sync; 0.0 when every
        step has been): a checkpoint is saved only when it is finite, as the weights then are."""
        if not self.micro_batches:
            return 0.0
        return float(self.accelerator.reduce(self.loss_sum / self.micro_batches, reduction="mean"))

    def add_loss(self, loss) -> None:
        loss = loss.detach()
        self.loss_sum = loss if self.loss_sum is None else self.loss_sum + loss
        self.micro_batches += 1

    def _aside(self) -> float:
        """Seconds spent so far in phases that are not training: the timeline's (evaluations, model folders,
        checkpoints)."""
        return self.timeline.inside

    def step(self, step: int, epoch: float, lr: float, samples: int) -> float | None:
        """Called once per optimizer step; every `every` steps and at the last logs the window's mean loss, lr and
        throughput, and returns that loss (None on other steps, and when every batch of the window was skipped as
        non-finite). `samples`: the examples seen so far (all processes), for throughput (an epoch's last, shorter
        batch counts its own rows)."""
        if self.first_step_s is None:               # the run's one deliberate host sync, to time it
            if self.accelerator.device.type == "cuda":
                import torch

                torch.cuda.synchronize(self.accelerator.device)
            self.first_step_s = time.perf_counter() - self.started
        self.bar.update(1)
        self.shown["lr"] = lr
        loss = None
        if not step % self.every or step >= self.total:    # the last step's window too (a short run's only one)
            loss = self._window_loss(step, epoch, lr, samples)
        if self.lines and (step >= self.total or time.perf_counter() - self.last_line >= PLAIN_EVERY_S):
            self.progress_line(step, epoch)
        return loss

    def _window_loss(self, step: int, epoch: float, lr: float, samples: int) -> float | None:
        """The mean loss of the steps since the last window (None when every batch was skipped), logged with the lr
        and throughput when it is finite; starts the next window."""
        loss = None
        if self.micro_batches:
            loss = float(self.accelerator.reduce(self.loss_sum / self.micro_batches, reduction="mean"))
        aside = self._aside()
        elapsed = max(time.perf_counter() - self.window_start - (aside - self.window_aside), 1e-9)
        sps = (samples - self.window_samples) / elapsed
        if loss is None or math.isfinite(loss):
            shown = math.nan if loss is None else loss
            self.accelerator.log({"train/loss": shown, "train/lr": lr, "train/epoch": round(epoch, 4),
                                  "train/samples_per_second": round(sps, 2)}, step=step)
            self.bar.set_postfix(loss=f"{shown:.4f}", lr=f"{lr:.2e}", samples_s=f"{sps:.1f}", refresh=False)
            self.shown.update(loss=shown, sps=sps)
        self.loss_sum, self.micro_batches = None, 0
        self.window_start, self.window_samples, self.window_aside = time.perf_counter(), samples, aside
        return loss

    def progress_line(self, step: int, epoch: float) -> None:
        """`step 120/1377 (epoch 0.26): loss 0.5432, lr 4.6e-05, 58.1 samples/s, 6 min 12 s left`."""
        done = step - self.start_step
        left = (self.total - step) * (time.perf_counter() - self.started) / max(done, 1)
        minutes, seconds = divmod(int(left), 60)
        loss, sps = (f"{self.shown[k]:{f}}" if math.isfinite(self.shown[k]) else "—" for k, f in
                     (("loss", ".4f"), ("sps", ".1f")))
        log.info(f"step {step}/{self.total} (epoch {epoch:.2f}): loss {loss}, lr {self.shown['lr']:.2e}, "
                 f"{sps} samples/s, " + (f"{minutes} min {seconds:02d} s left" if step < self.total else "done"),
                 extra={"console": self.plain})        # beside a progress bar (or --quiet): train.log's only
        self.last_line = time.perf_counter()

    def evaluation(self, step: int, epoch: float, evaluation, warning: str | None = None) -> None:
        """Log an evaluation.Evaluation: every split's metrics to the trackers, the first one to the console, and
        `warning` (a collapsed model, say) when there is one."""
        self.eval_s += evaluation.seconds
        results = evaluation.metrics
        for split, metrics in results.items():
            prefix = "eval" if split == next(iter(results)) else f"eval_{split}"
            self.accelerator.log({f"{prefix}/{k}": v for k, v in metrics.items()} | {f"{prefix}/epoch": epoch},
                                 step=step)
        shown = ", ".join(f"{k} {v:.4f}" for k, v in evaluation.main_split.items() if k != "num_samples")
        self.write(f"epoch {epoch:.2f} step {step}: eval {shown}")
        if warning:
            self.warn(warning)

    def early_stopping(self, best: dict, patience: int) -> None:
        self.write(f"early stopping: {best['metric']} has not improved for {patience} evaluation(s) "
                   f"(best {best['value']:.4f} at step {best['step']})")

    def warn(self, message: str) -> None:
        if self.accelerator.is_main_process:
            log.warning(message)

    def write(self, message: str) -> None:
        if self.accelerator.is_main_process:
            if self.bar.disable:
                log.info(message)
            else:
                self.bar.write(message, file=sys.stderr)

    @property
    def runtime_s(self) -> float:
        return time.perf_counter() - self.started

    @property
    def training_s(self) -> float:
        aside = self.aside_s if self.aside_s is not None else self._aside() - self.aside_start
        return max(self.runtime_s - max(aside, self.eval_s), 1e-9)

    def close(self) -> None:
        """The end of the loop: the time aside is fixed now (the timeline's next mark starts its count again)."""
        self.aside_s = self._aside() - self.aside_start
        self.bar.close()
