"""Everything a training run holds besides the loop itself: set-up, evaluation, saving, the summary."""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import __version__, checkpoint, data as data_lib, metrics as metrics_lib, tracking
from .config import TrainConfig
from .model import build_optimizer, build_scheduler, load_model, load_tokenizer, quiet_libraries, save_model
from .predict import evaluate

log = logging.getLogger("tuneloop")


def resolve_defaults(config: TrainConfig) -> TrainConfig:
    """Fill in what the user left to us, so config.yaml records what actually ran."""
    changes = {}
    if config.task is None and config.data_dir is None and config.train_file is None:
        changes.update(task="mrpc", data_dir="sample")       # the built-in sample, offline
    if config.task:
        changes["task"] = config.task.lower()
    if config.mixed_precision == "auto":
        bf16 = torch.cuda.is_available() and not config.cpu and torch.cuda.is_bf16_supported()
        changes["mixed_precision"] = "bf16" if bf16 else "no"
    if config.validation_file and not config.train_file and config.task is None:
        from .errors import ConfigError
        raise ConfigError("--validation-file needs --train-file (the labels and columns come from training data)")
    if config.max_grad_norm == 0:
        changes["max_grad_norm"] = None
    return config.replace(**changes).validate()


def make_accelerator(config: TrainConfig, output_dir: str | None):
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration

    project = ProjectConfiguration(project_dir=output_dir, logging_dir=os.path.join(output_dir, "tensorboard")) \
        if output_dir else None
    metrics_path = Path(output_dir or ".") / "metrics.jsonl"
    return Accelerator(cpu=config.cpu, mixed_precision=config.mixed_precision,
                       gradient_accumulation_steps=config.gradient_accumulation_steps,
                       log_with=tracking.trackers(config.report_to, metrics_path), project_config=project)


def shared_output_dir(config: TrainConfig) -> str:
    """Every process must agree on the folder, also when it is named after the start time."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    state = PartialState(cpu=config.cpu)
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
        checkpoint.check_run_folder(output_dir, config.overwrite)               # every process, before any write

        from accelerate.utils import set_seed

        set_seed(config.seed)
        tokenizer = load_tokenizer(config.model)
        with accelerator.main_process_first():       # the others reuse the main process's Arrow cache
            data = data_lib.prepare_data(config, tokenizer, with_test=config.predict_test)
        if data.train is None or not data.evaluation:
            from .errors import DataError
            raise DataError("training needs a training and a validation split: give --validation-file FILE "
                            "(or a GLUE folder holding dev.tsv)")
        model = load_model(config.model, data.labels, task=config.task)
        # the folder is written only now that the data and the model have loaded: a typo costs nothing
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            checkpoint.prepare_run_folder(output_dir, config.overwrite)
            checkpoint.write_run_marker(Path(output_dir), {"tuneloop_version": __version__, "kind": "train"})
            config.save_yaml(Path(output_dir) / "config.yaml")
        accelerator.wait_for_everyone()
        accelerator.init_trackers("tuneloop", tracking.hparams(config.to_dict()))
        optimizer = build_optimizer(model, config.lr, config.weight_decay, accelerator.device.type)
        collator = data_lib.make_collator(tokenizer, config.pad_to_max_length, config.max_length,
                                          config.mixed_precision)
        train_loader = data_lib.train_loader(data.train, tokenizer, config, collator)
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
        global_batch = config.batch_size * accelerator.num_processes * config.gradient_accumulation_steps
        session = cls(config, accelerator, Path(output_dir), tokenizer, data, model, optimizer, scheduler,
                      train_loader, eval_loaders, steps_per_epoch, total, math.ceil(total / steps_per_epoch),
                      metrics_lib.metric_names(data.task, data.labels), metrics_lib.main_metric(data.task, data.labels),
                      global_batch, time.perf_counter() - t0)
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

    # ------------------------------------------------------------------ during training
    def epoch_progress(self, step: int) -> float:
        return step / self.steps_per_epoch

    def eval_due(self, step: int) -> bool:
        every = self.config.eval_every
        return bool(every) and step % every == 0 and step % self.steps_per_epoch != 0

    def evaluate(self, step: int, train_log) -> dict:
        start = time.perf_counter()
        results = evaluate(self.model, self.eval_loaders, self.accelerator, self.metric_names,
                           self.data.labels.problem_type, self.config.quiet)
        epoch = round(self.epoch_progress(step), 4)
        self.history.append({"step": step, "epoch": epoch, "results": results})
        train_log.evaluation(step, epoch, results)
        self.eval_s += time.perf_counter() - start
        return results

    # ------------------------------------------------------------------ the end
    def finish(self, step: int, train_log) -> dict:
        acc = self.accelerator
        if not self.history or self.history[-1]["step"] != step:
            self.evaluate(step, train_log)
        runtime = time.perf_counter() - self.loop_start
        training_s = runtime - self.eval_s
        train_log.close()
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
                      "num_processes": acc.num_processes, "mixed_precision": self.config.mixed_precision},
            "labels": self.data.labels.names,
            "output_dir": str(self.output_dir),
        }
        if len(final) > 1:
            results["eval_splits"] = final
        acc.wait_for_everyone()
        if acc.is_main_process:
            save_model(acc.unwrap_model(self.model), self.tokenizer, self.output_dir / "model", self.model_metadata())
            checkpoint.atomic_write_json(self.output_dir / "results.json", results)
        if self.config.predict_test:
            self.predict_test()
        acc.wait_for_everyone()
        acc.end_training()
        return results

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
