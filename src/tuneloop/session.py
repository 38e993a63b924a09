"""Everything a training run holds besides the loop itself: set-up, evaluation, saving, the summary."""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import __version__, checkpoint, data as data_lib, metrics as metrics_lib, speed, tracking
from .config import TrainConfig
from .model import build_optimizer, build_scheduler, load_model, load_tokenizer, quiet_libraries, save_model
from .predict import evaluate

log = logging.getLogger("tuneloop")


# a test hook: slow every step down so that a test can interrupt a run at a chosen point
DEBUG_STEP_DELAY = float(os.environ.get("TUNELOOP_DEBUG_STEP_DELAY", "0") or 0)


class SignalFlag:
    """SIGINT/SIGTERM set a flag that the loop reads at the next step boundary (all processes agree on it)."""

    def __init__(self, accelerator):
        import signal
        import threading

        self.accelerator, self.received, self.previous = accelerator, 0, {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        import signal

        if self.received and signum == signal.SIGINT:
            raise KeyboardInterrupt          # a second Ctrl-C: stop now, no checkpoint
        self.received = signum
        log.warning("stopping at the end of this step to save a checkpoint (Ctrl-C again to stop at once)")

    def pending(self) -> int:
        if self.accelerator.num_processes == 1:
            return self.received
        flag = torch.tensor([self.received], device=self.accelerator.device)
        return int(self.accelerator.reduce(flag, reduction="sum").max())   # one process saw it: all stop

    def restore(self) -> None:
        import signal

        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous = {}


# --recipe fast: time-to-quality settings
# measured on MRPC/MiniLM, seeds 1-3 (benchmarks/results): without dropout the 2 epochs end 1-2 F1 points higher
FAST_RECIPE = {"batch_size": 32, "lr": 1e-4, "warmup_ratio": 0.1, "epochs": 2, "freeze_embeddings": True,
               "dropout": 0.0}


def native_bf16(cpu_only: bool) -> bool:
    """bf16 that the hardware computes natively: Ampere+ GPUs, or CPUs with AMX / AVX512-BF16."""
    if torch.cuda.is_available() and not cpu_only:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return "amx_bf16" in flags


def apply_recipe(config: TrainConfig) -> TrainConfig:
    """A recipe changes the defaults only: options the user set (recorded in explicit_options, or differing
    from the defaults) keep their values, so `--recipe fast --epochs 3` trains 3 epochs."""
    if config.recipe != "fast":
        return config
    defaults = TrainConfig()
    changes = {k: v for k, v in FAST_RECIPE.items()
               if k not in config.explicit and getattr(config, k) == getattr(defaults, k)}
    return config.replace(**changes)


def resolve_defaults(config: TrainConfig) -> TrainConfig:
    """Fill in what the user left to us, so config.yaml records what actually ran."""
    config = apply_recipe(config)
    changes = {}
    if config.task is None and config.data_dir is None and config.train_file is None:
        changes.update(task="mrpc", data_dir="sample")       # the built-in sample, offline
    if config.task:
        changes["task"] = config.task.lower()
    if config.mixed_precision == "auto":
        # AMX CPUs: 13-15% faster MiniLM steps at batch 8 once allocation and dropout stopped dominating
        changes["mixed_precision"] = "bf16" if native_bf16(config.cpu) else "no"
    if config.validation_file and not config.train_file and config.task is None:
        from .errors import ConfigError
        raise ConfigError("--validation-file needs --train-file (the labels and columns come from training data)")
    if config.resume is not None and not config.output_dir:
        from .errors import ConfigError
        raise ConfigError("--resume needs --output-dir: the run folder to continue")
    if config.max_grad_norm == 0:
        changes["max_grad_norm"] = None
    return config.replace(**changes).validate()


def use_cpu(config: TrainConfig) -> bool:
    """--cpu, or several processes on a machine without accelerators: Accelerate only sets up multi-process
    CPU training (gloo) when asked for the CPU, so `torchrun`/`accelerate launch --multi_gpu` on a CPU machine
    would otherwise start N independent single-process runs."""
    if config.cpu:
        return True
    return launched_by_a_launcher() and not accelerator_present()


def launched_by_a_launcher() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 or os.environ.get("LOCAL_RANK") is not None


def accelerator_present() -> bool:
    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


def warn_single_process_cpu_launch() -> None:
    """`accelerate launch --cpu --num_processes N` without mpirun starts one process; say how to get N."""
    if not launched_by_a_launcher() and os.environ.get("ACCELERATE_USE_CPU", "").lower() == "true" \
            and os.environ.get("MASTER_ADDR") and not any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")):
        log.warning("note: `accelerate launch --cpu --num_processes N` starts a single process unless it runs "
                    "under mpirun (--mpirun_hostfile); for N CPU processes use `accelerate launch --multi_gpu "
                    "--num_processes N` or `torchrun --nproc_per_node N`")


def reset_accelerator_state() -> None:
    """Accelerate keeps precision and accumulation settings in process-wide singletons; a second run in the same
    Python process (a notebook, the API) must not inherit the first one's. The process group is kept."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()


def make_accelerator(config: TrainConfig, output_dir: str | None):
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration

    project = ProjectConfiguration(project_dir=output_dir, logging_dir=os.path.join(output_dir, "tensorboard")) \
        if output_dir else None
    metrics_path = Path(output_dir or ".") / "metrics.jsonl"
    reset_accelerator_state()
    cpu = use_cpu(config)
    cpu_bf16 = config.mixed_precision == "bf16" and (cpu or not accelerator_present())
    speed.cpu_bf16_matmuls(cpu_bf16)          # bf16 matrix products in oneDNN instead of autocast (speed.py)
    return Accelerator(cpu=cpu, mixed_precision="no" if cpu_bf16 else config.mixed_precision,
                       gradient_accumulation_steps=config.gradient_accumulation_steps,
                       log_with=tracking.trackers(config.report_to, metrics_path), project_config=project)


def shared_output_dir(config: TrainConfig) -> str:
    """Every process must agree on the folder, also when it is named after the start time."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    state = PartialState(cpu=use_cpu(config))
    chosen = [config.output_dir or checkpoint.default_output_dir(config.task)]
    if state.num_processes > 1:
        broadcast_object_list(chosen, from_process=0)
    return chosen[0]


@dataclass
class Session:
    config: TrainConfig
    accelerator: object
    output_dir: Path
    tokenizer: object
    data: data_lib.PreparedData
    model: object
    optimizer: object
    scheduler: object
    train_loader: object
    eval_loaders: dict
    steps_per_epoch: int
    total_steps: int
    epochs: int
    metric_names: tuple
    main_metric: str
    global_batch: int
    setup_s: float
    start_step: int = 0
    start_epoch: int = 0
    history: list = field(default_factory=list)
    samples_seen: int = 0
    loop_start: float = 0.0
    eval_s: float = 0.0
    skip_batches: int = 0                 # batches of start_epoch already trained before a resume
    best: dict | None = None              # {"metric", "value", "step", "epoch"}
    evals_without_improvement: int = 0
    stopped_early: bool = False
    skipped_batches: int = 0
    resumed_from: str | None = None
    signals: object = None
    last_outputs: dict = field(default_factory=dict)    # split -> (logits, labels) of the latest evaluation

    # ------------------------------------------------------------------ set-up
    @classmethod
    def setup(cls, config: TrainConfig) -> "Session":
        t0 = time.perf_counter()
        config = resolve_defaults(config)
        quiet_libraries(config.quiet)
        output_dir = shared_output_dir(config)
        config = config.replace(output_dir=output_dir)
        accelerator = make_accelerator(config, output_dir)
        tracking.setup_console_logging(config.quiet or not accelerator.is_main_process)
        warn_single_process_cpu_launch()
        if not config.dry_run:
            checkpoint.check_run_folder(output_dir, config.overwrite, resume=config.resume is not None)

        from accelerate.utils import set_seed

        set_seed(config.seed)
        tokenizer = load_tokenizer(config.model)
        with accelerator.main_process_first():       # the others reuse the main process's Arrow cache
            data = data_lib.prepare_data(config, tokenizer, with_test=config.predict_test)
        if data.train is None or not data.evaluation:
            from .errors import DataError
            raise DataError("training needs a training and a validation split: give --validation-file FILE "
                            "(or a GLUE folder holding dev.tsv)")
        global_batch = config.batch_size * accelerator.num_processes * config.gradient_accumulation_steps
        if config.recipe == "fast" and config.eval_every is None:   # see when the target is reached, 4× an epoch
            config = config.replace(eval_every=max(1, math.ceil(len(data.train) / global_batch) // 4))
        model = load_model(config.model, data.labels, task=config.task, attention=config.attention,
                           dropout=config.dropout)
        if accelerator.device.type == "cpu":
            speed.tune_cpu_allocator()
            if config.fast_dropout:
                speed.install_fast_dropout(model)
        # the folder is written only now that the data and the model have loaded: a typo costs nothing
        accelerator.wait_for_everyone()
        if accelerator.is_main_process and not config.dry_run:
            checkpoint.prepare_run_folder(output_dir, config.overwrite, resume=config.resume is not None)
            checkpoint.write_run_marker(Path(output_dir), {"tuneloop_version": __version__, "kind": "train"})
            config.save_yaml(Path(output_dir) / "config.yaml")
        accelerator.wait_for_everyone()
        if not config.dry_run:
            accelerator.init_trackers("tuneloop", tracking.hparams(config.to_dict()))
        if config.freeze_embeddings:
            model.get_input_embeddings().weight.requires_grad_(False)
        optimizer = build_optimizer(model, config.lr, config.weight_decay, accelerator.device.type)
        # 16-bit matmuls want sequence lengths in multiples of 8: tensor cores on GPUs; on CPUs, oneDNN builds and
        # caches a kernel per shape, so fewer shapes measured 6-12% faster steps and 0.6 GB less memory
        multiple = 8 if config.mixed_precision in ("fp16", "bf16") else None
        collator = data_lib.make_collator(tokenizer, config.pad_to_max_length, config.max_length, multiple)
        train_loader = data_lib.train_loader(data.train, tokenizer, config, collator, global_batch)
        eval_loaders = {name: data_lib.eval_loader(ds, tokenizer, config.eval_batch_size, collator)[0]
                        for name, ds in data.evaluation.items()}
        model, optimizer, train_loader, *loaders = accelerator.prepare(model, optimizer, train_loader,
                                                                       *eval_loaders.values())
        eval_loaders = dict(zip(eval_loaders, loaders))
        # step counts only now: after prepare() the loader holds this process's share of the batches
        steps_per_epoch = math.ceil(len(train_loader) / config.gradient_accumulation_steps)
        total = config.max_steps or config.epochs * steps_per_epoch
        # not prepared: stepping it ourselves once per optimizer step keeps the schedule independent of the
        # number of processes (a prepared scheduler steps once per process)
        scheduler = build_scheduler(optimizer, config.lr_scheduler, total, config.warmup_steps, config.warmup_ratio)
        accelerator.register_for_checkpointing(scheduler)
        session = cls(config, accelerator, Path(output_dir), tokenizer, data, model, optimizer, scheduler,
                      train_loader, eval_loaders, steps_per_epoch, total, math.ceil(total / steps_per_epoch),
                      metrics_lib.metric_names(data.task, data.labels), metrics_lib.main_metric(data.task, data.labels),
                      global_batch, time.perf_counter() - t0)
        if config.resume is not None:
            session.restore()
        session.signals = SignalFlag(accelerator)
        session.describe()
        return session

    def describe(self) -> None:
        c, d = self.config, self.data
        sizes = ", ".join(f"{name} {len(ds)}" for name, ds in [("train", d.train), *d.evaluation.items()])
        log.info(f"tuneloop {__version__}: {c.task or 'custom data'} ({d.labels.problem_type}, "
                 f"{d.labels.num_labels} label(s)) | examples: {sizes}")
        log.info(f"model {c.model} on {self.accelerator.device} × {self.accelerator.num_processes} process(es), "
                 f"precision {c.mixed_precision} | batch {c.batch_size}/device, global {self.global_batch} | "
                 f"{self.steps_per_epoch} steps/epoch, {self.total_steps} steps | output {self.output_dir}")

    def dry_run(self) -> dict:
        """What the chapter checks before training: config, sizes, step counts, a batch, one forward pass."""
        import yaml

        self.signals.restore()
        batch = next(iter(self.train_loader))
        with torch.no_grad():
            out = self.model(**batch)
        info = {"config": self.config.to_dict(),
                "examples": {"train": len(self.data.train), **{k: len(v) for k, v in self.data.evaluation.items()}},
                "labels": self.data.labels.names or "regression", "steps_per_epoch": self.steps_per_epoch,
                "total_steps": self.total_steps, "epochs": self.epochs, "global_batch_size": self.global_batch,
                "batch_shapes": {k: list(v.shape) for k, v in batch.items()},
                "loss": round(float(out.loss), 4), "logits_shape": list(out.logits.shape)}
        if self.accelerator.is_main_process:
            print(yaml.safe_dump(info, sort_keys=False), end="")
        speed.restore_cpu_matmuls()
        return info

    # ------------------------------------------------------------------ resuming
    def state(self, step: int) -> dict:
        return {"step": step, "epoch": step // self.steps_per_epoch, "history": self.history, "best": self.best,
                "evals_without_improvement": self.evals_without_improvement, "samples_seen": self.samples_seen,
                "num_processes": self.accelerator.num_processes, "config": self.config.to_dict(),
                "tuneloop_version": __version__}

    def restore(self) -> None:
        path, state = checkpoint.load_checkpoint(self.accelerator, self.output_dir, self.config.resume,
                                                 self.config.to_dict(), self.accelerator.num_processes, log.warning)
        self.start_step = state["step"]
        # a checkpoint of the final step (a completed run) leaves nothing to train: straight to finish()
        self.start_epoch = self.epochs if self.start_step >= self.total_steps else self.start_step // self.steps_per_epoch
        # micro-batches of the current epoch already done: the sampler replays the epoch's order, we skip them
        self.skip_batches = (self.start_step - self.start_epoch * self.steps_per_epoch) * \
            self.config.gradient_accumulation_steps
        self.history, self.best = state["history"], state["best"]
        self.evals_without_improvement = state["evals_without_improvement"]
        self.samples_seen = state["samples_seen"]
        self.resumed_from = str(path)
        if self.accelerator.is_main_process:
            checkpoint.truncate_metrics(self.output_dir / "metrics.jsonl", self.start_step)
        self.accelerator.wait_for_everyone()
        log.info(f"resuming from {path} (step {self.start_step}, epoch {self.start_epoch + 1})")

    def batches(self, epoch: int):
        """The epoch's batches; in the epoch a resumed run starts in, without the ones already trained on."""
        self.train_loader.set_epoch(epoch)               # the same order for a given (seed, epoch)
        if epoch == self.start_epoch and self.skip_batches:
            return self.accelerator.skip_first_batches(self.train_loader, self.skip_batches)
        return self.train_loader

    # ------------------------------------------------------------------ during training
    def epoch_progress(self, step: int) -> float:
        return step / self.steps_per_epoch

    def usable(self, loss) -> bool:
        """False only for a NaN/inf loss under --skip-nonfinite-batches (the check syncs with the device)."""
        if not self.config.skip_nonfinite_batches or bool(torch.isfinite(loss.detach())):
            return True
        self.skipped_batches += 1
        log.warning(f"skipped a batch with a non-finite loss ({float(loss.detach())}); {self.skipped_batches} so far")
        return False

    def checkpoint_if_due(self, step: int, end_of_epoch: bool = False) -> None:
        """--save-every N / epoch, and on SIGINT/SIGTERM: save, then stop with the command that resumes."""
        every = self.config.save_every
        due = every == "epoch" if end_of_epoch else every not in (None, "epoch") and step % int(every) == 0
        signal_number = self.signals.pending()
        if due or signal_number:
            path = checkpoint.save_checkpoint(self.accelerator, self.output_dir, step, self.state(step),
                                              self.config.keep_last)
            if signal_number:
                self.signals.restore()
                raise checkpoint.Interrupted(
                    f"interrupted at step {step}; checkpoint saved in {path}. Resume with: "
                    f"tuneloop train --output-dir {self.output_dir} --resume", signal_number)
        if DEBUG_STEP_DELAY:
            time.sleep(DEBUG_STEP_DELAY)

    def should_stop(self, step: int) -> bool:
        return step >= self.total_steps or self.stopped_early

    def eval_due(self, step: int) -> bool:
        every = self.config.eval_every
        return bool(every) and step % every == 0 and step % self.steps_per_epoch != 0

    def evaluate(self, step: int, train_log) -> dict:
        start = time.perf_counter()
        self.last_outputs = {}
        results = evaluate(self.model, self.eval_loaders, self.accelerator, self.metric_names,
                           self.data.labels.problem_type, self.config.quiet, outputs=self.last_outputs)
        epoch = round(self.epoch_progress(step), 4)
        self.history.append({"step": step, "epoch": epoch, "results": results})
        train_log.evaluation(step, epoch, results)
        self.track_best(step, epoch, next(iter(results.values())), train_log)
        self.eval_s += time.perf_counter() - start
        return results

    def track_best(self, step: int, epoch: float, metrics: dict, train_log) -> None:
        """Keep OUT/best/ at the best evaluation so far; count evaluations without improvement."""
        name = self.config.metric_for_best or self.main_metric
        if name not in metrics:
            from .errors import ConfigError
            raise ConfigError(f"--metric-for-best: {name!r} is not reported here; choose one of "
                              f"{', '.join(k for k in metrics if k != 'num_samples')}")
        value = metrics[name]
        lower_is_better = name in ("loss", "mse")
        improved = self.best is None or (value < self.best["value"] if lower_is_better else value > self.best["value"])
        if improved:
            self.best = {"metric": name, "value": value, "step": step, "epoch": epoch}
            self.evals_without_improvement = 0
            if self.accelerator.is_main_process:
                save_model(self.accelerator.unwrap_model(self.model), self.tokenizer, self.output_dir / "best",
                           self.model_metadata())
        else:
            self.evals_without_improvement += 1
            patience = self.config.early_stopping_patience
            if patience and self.evals_without_improvement >= patience:
                self.stopped_early = True
                train_log.write(f"early stopping: {name} has not improved for {patience} evaluation(s) "
                                f"(best {self.best['value']:.4f} at step {self.best['step']})")

    # ------------------------------------------------------------------ the end
    def finish(self, step: int, train_log) -> dict:
        acc = self.accelerator
        if not self.history or self.history[-1]["step"] != step:
            self.evaluate(step, train_log)
        runtime = time.perf_counter() - self.loop_start
        training_s = max(runtime - self.eval_s, 1e-9)
        train_log.close()
        self.signals.restore()
        speed.restore_cpu_matmuls()
        final = self.history[-1]["results"]
        first_split = next(iter(final))
        train_samples = len(self.data.train)
        results = {
            "task": self.config.task, "model": self.config.model, "main_metric": self.main_metric,
            "eval": final[first_split],
            # runtime_s: the whole loop, evaluations included; samples_per_second counts training time only
            "train": {"runtime_s": round(runtime, 3), "training_s": round(training_s, 3),
                      "eval_s": round(self.eval_s, 3), "samples_per_second": round(self.samples_seen / training_s, 3),
                      "steps": step, "epochs": round(self.epoch_progress(step), 4), "num_samples": train_samples,
                      "global_batch_size": self.global_batch, "setup_s": round(self.setup_s, 3),
                      "num_processes": acc.num_processes, "mixed_precision": self.config.mixed_precision,
                      "device": str(acc.device)},
            "data": self.data.stats,                   # rows, read/tokenize seconds per split, cache hits
            "labels": self.data.labels.names,
            "best": self.best,
            "stopped_early": self.stopped_early,
            "output_dir": str(self.output_dir),
        }
        if self.resumed_from:
            results["resumed_from"] = self.resumed_from
        if self.skipped_batches:
            results["train"]["skipped_nonfinite_batches"] = self.skipped_batches
        if len(final) > 1:
            results["eval_splits"] = final
        acc.wait_for_everyone()
        if acc.is_main_process:
            save_model(acc.unwrap_model(self.model), self.tokenizer, self.output_dir / "model", self.model_metadata())
            checkpoint.atomic_write_json(self.output_dir / "results.json", results)
            self.write_eval_outputs()
            self.write_card_and_report(results)
        if self.config.predict_test:
            self.predict_test()
        acc.wait_for_everyone()
        acc.end_training()
        return results

    def write_eval_outputs(self) -> None:
        """The final evaluation's logits and labels (for the report's confusion matrix or scatter plot)."""
        import io

        import numpy as np

        for split, (logits, labels) in self.last_outputs.items():
            buffer = io.BytesIO()
            np.savez_compressed(buffer, logits=logits.astype(np.float32), labels=labels)
            checkpoint.atomic_write_bytes(self.output_dir / "predictions" / f"eval_{split}.npz", buffer.getvalue())

    def write_card_and_report(self, results: dict) -> None:
        from .report import write_model_card, write_report

        try:
            write_model_card(self.output_dir / "model", results, self.config.to_dict(), self.model_metadata())
            write_report(self.output_dir)
        except Exception as e:  # noqa: BLE001 - a report must never cost a finished run
            log.warning(f"could not write the model card / report: {type(e).__name__}: {e}")

    def predict_test(self) -> None:
        """Predictions for the test split(s) in OUT/predictions/ (and GLUE's submission layout for GLUE tasks)."""
        from .predict import predict_dataset, write_predictions

        if not self.data.test:
            log.warning("--predict-test: this data has no test split (give --test-file FILE)")
        for split, ds in self.data.test.items():
            rows = predict_dataset(self.model, ds, self.tokenizer, self.accelerator, self.data.labels,
                                   self.config.eval_batch_size, self.config.quiet, f"Predicting {split}")
            if self.accelerator.is_main_process:
                folder = self.output_dir / "predictions"
                write_predictions(rows, str(folder / f"{split}.tsv"))
                if self.data.task is not None:
                    write_predictions(rows, str(folder / f"{split}.glue.tsv"), glue=True, labels=self.data.labels,
                                      task=self.data.task)
                log.info(f"wrote {len(rows)} {split} predictions to {folder}")

    def model_metadata(self) -> dict:
        c, d = self.config, self.data
        return {"tuneloop_version": __version__, "task": c.task, "text_columns": list(d.text_columns),
                "labels": d.labels.to_dict(), "max_length": c.max_length, "base_model": c.model,
                "metrics": list(self.metric_names), "main_metric": self.main_metric,
                "data": {"task": c.task, "data_dir": str(Path(data_lib.resolve_data_dir(c.data_dir)).resolve())
                         if c.data_dir else None,
                         "validation_file": str(Path(c.validation_file).resolve()) if c.validation_file else None,
                         "text_columns": c.text_columns, "label_column": c.label_column}}
