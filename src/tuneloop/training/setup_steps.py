"""Setting up a run: small steps, each taking what it needs and returning one thing, and `setup` that runs them
in order (accelerator, data, model, run folder, optimizer, loaders, plan, schedule, resumed state)."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import tasks
from ..atomic import atomic_write_json
from ..config.idle import idle_options
from ..config.options import TrainConfig
from ..data import balance, soft_targets
from ..data.batch import SOFT, WEIGHTS, text_count
from ..data.batching import eval_loader, length_bucket, make_collator, train_loader
from ..data.prepare import PreparedData, holds_out_validation, prepare_data
from ..data.sources import resolve_data_dir, workbook_splits
from ..decision.fit import check_decision_options
from ..evaluation.inference import Evaluation, evaluate
from ..exceptions import ConfigError, DataError
from ..layout import CONFIG_FILE, METRICS_FILE, SPLIT_FILE, TENSORBOARD_DIR
from ..model import loading, pooling, target_scale
from ..model.attention import choose as choose_attention
from ..model.loading import check_body_loaded, check_max_length, model_class, model_config, resolve_model
from ..model.lora import add_adapters, load_starting_model, trainable_summary
from ..model.optim import build_optimizer, build_scheduler
from ..model.target_scale import TargetScale
from ..model.tokenizer import check_vocabulary, load_tokenizer
from ..objective import Objective, Regression, objective_for
from ..runtime import machine, process, run_log
from ..runtime.speed import SpeedLevers, dynamo_plugin, mark_cuda_graph_steps, use_fast_dropout
from ..version import __version__
from . import checkpoint, choose, frozen_weights, progress, run_folder, small_data, step_choice
from .contrastive import HEAD_FITTED, check_setfit
from .dynamics import TrainingDynamics
from .state import Plan, TrainState
from .timeline import Timeline

log = logging.getLogger("tuneloop")


@dataclass
class Loaders:
    train: object                       # torch DataLoader (prepared: this process's share)
    evaluation: dict                    # split -> DataLoader


@dataclass
class Run:
    """What `setup` made: everything the loop uses besides its own counters (those are `state`)."""

    config: TrainConfig
    accelerator: object
    output_dir: Path
    tokenizer: object
    data: PreparedData
    model: object
    objective: Objective                # the loss, probabilities, predictions of the problem type
    optimizer: object
    scheduler: object
    loaders: Loaders
    plan: Plan
    state: TrainState
    metric_names: tuple
    main_metric: str
    metadata: dict                      # model/tuneloop.json
    resumed_from: str | None
    setup_s: float
    dynamics: TrainingDynamics | None = None   # each training row's probabilities per epoch (dynamics.py)
    setfit: dict | None = None          # --method setfit: what its stage did (contrastive.py), for results.json
    captured: bool = False              # the step recorded as CUDA graphs (step.CapturedStep) ...
    step_reason: str = ""               # ... and why it is or is not (step_choice.decide)
    timeline: Timeline = field(default_factory=Timeline)    # seconds per phase (timeline.py)
    auto: dict | None = None            # --method auto: the choice and each candidate's score (choose.py)
    out_of_fold: tuple | None = None    # --method probe: (logits, labels) of its head's folds (contrastive.py)
    target_scale: TargetScale | None = None    # regression targets learned standardised (model/target_scale.py)

    @property
    def metric_for_best(self) -> str:
        return self.config.metric_for_best or self.main_metric

    def evaluate(self) -> Evaluation:
        """Every validation split, on every process (evaluation/inference.py)."""
        with self.timeline.phase("evaluations"):
            positive = self.data.labels.names.index(self.config.positive_label) if self.config.positive_label else 1
            return evaluate(self.model, self.loaders.evaluation, self.accelerator, self.metric_names,
                            self.objective, self.config.quiet, self.config.window_pooling, positive)


def setup_output_dir(config: TrainConfig) -> str:
    """The run folder, the same on every process (a default one is named after the start time)."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    state = PartialState(cpu=machine.use_cpu(config.cpu))
    chosen = [config.output_dir]
    if state.num_processes > 1:
        broadcast_object_list(chosen, from_process=0)
    return chosen[0]


def setup_accelerator(config: TrainConfig):
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration

    out = Path(config.output_dir)
    # on CPUs bf16 means bf16 matmuls inside oneDNN (speed.SpeedLevers), not autocast
    cpu_bf16 = config.mixed_precision == "bf16" and machine.runs_on_cpu(config.cpu)
    compiled = {"dynamo_plugin": dynamo_plugin(config.compile)} if config.compiled else {}
    accelerator = Accelerator(cpu=machine.use_cpu(config.cpu), mixed_precision="no" if cpu_bf16 else
                              config.mixed_precision, gradient_accumulation_steps=config.gradient_accumulation_steps,
                              dataloader_config=DataLoaderConfiguration(non_blocking=machine.runs_on_cuda(config.cpu)),
                              **compiled, log_with=progress.trackers(config.report_to, out / METRICS_FILE),
                              project_config=ProjectConfiguration(project_dir=str(out),
                                                                  logging_dir=str(out / TENSORBOARD_DIR)))
    frozen_weights.register(accelerator)       # checkpoints leave out what the run does not train (LoRA's base)
    if machine.single_process_cpu_launch():    # (one process speaks: runtime/process.console_logging)
        log.warning("note: `accelerate launch --cpu --num_processes N` starts a single process unless it runs "
                    "under mpirun (--mpirun_hostfile); for N CPU processes use `accelerate launch --multi_gpu "
                    "--num_processes N` or `torchrun --nproc_per_node N`")
    return accelerator


def setup_data(config: TrainConfig, tokenizer, accelerator) -> PreparedData:
    saved = Path(config.output_dir) / SPLIT_FILE
    saved_split = json.loads(saved.read_text(encoding="utf-8")) if config.resume is not None and saved.is_file() \
        else None                                 # a resumed run keeps the rows it held out
    teacher_labels = soft_targets.schema_of(config.soft_targets) if config.soft_targets else None
    def read() -> PreparedData:
        data = prepare_data(config, tokenizer, labels=teacher_labels, with_test=config.predict_test,
                            saved_split=saved_split,
                            fold=(config.fold, config.folds) if config.fold is not None else None)
        if config.soft_targets and data.train is not None:     # a teacher's outputs: `soft_labels`, `gold`
            data.train = soft_targets.attach(data.train, config.soft_targets)
        return data
    data = process.main_process_first(accelerator, read)    # the others reuse its Arrow cache; its error is theirs
    if data.train is None or not data.evaluation:
        raise DataError("training needs a training and a validation split: give --validation-file FILE "
                        "(or a GLUE folder holding dev.tsv)")
    names = metric_names(data)
    problem = config.metric_for_best and tasks.unknown_metric_message(config.metric_for_best,
                                                                       names + tasks.ALWAYS_REPORTED)
    if problem:                      # checked against the metrics of the data actually read
        raise ConfigError(f"--metric-for-best: {problem}")
    warning = balance.rare_class_warning(data.train_labels, data.labels)     # None for regression
    if warning and config.class_weights == "none" and config.sampler == "random":
        log.warning(warning)
    return data


def setup_objective(config: TrainConfig, data: PreparedData, device, scale: TargetScale | None = None) -> Objective:
    """The problem type's objective, its training loss with --class-weights (the evaluation loss stays
    unweighted); regression at the targets' `scale` (setup_target_scale)."""
    if scale is not None:                    # regression has no class weights
        return Regression(scale=scale.scale)
    labels = data.train_labels if config.class_weights != "none" else None
    return objective_for(data.labels, balance.loss_weights(config.class_weights, data.labels, labels)).to(device)


def setup_target_scale(data: PreparedData, model) -> TargetScale | None:
    """Regression targets far from unit scale: hooked on the model's head, said (model/target_scale.py); None for
    other problem types and targets near unit scale."""
    if data.labels.problem_type != tasks.REGRESSION:
        return None
    scale = target_scale.decide(data.train_labels, target_scale.has_bias(model))
    if scale is not None:
        target_scale.attach(model, scale)
        log.info(f"regression targets far from unit scale ({target_scale.describe(scale)}): learned standardised "
                 "(the training loss is their mean squared error in units of the scale), predicted and saved in "
                 "their own units")
    return scale


def metric_names(data: PreparedData) -> tuple[str, ...]:
    return tasks.metric_names(data.task, data.labels.problem_type, data.labels.num_labels)


def setup_model(config: TrainConfig, labels, tokenizer, device_type: str, levers: SpeedLevers, announce: bool = True):
    """(the model with its new head, the attention it runs): dropout and attention as the options ask (`auto`:
    the fastest the architecture supports here), the tokenizer checked against its embeddings, embeddings frozen
    or not. `announce`: log the automatic choices (not for `--method auto`'s fold models: the run's says them)."""
    model_cfg = model_config(config.model, labels, config.task, config.dropout, tokenizer.pad_token_id, announce)
    attention, why = choose_attention(config.attention, model_class(model_cfg), device_type == "cpu",
                                      config.compiled)
    model, new = load_starting_model(config.model, model_cfg, attention)     # a LoRA run's folder: merged
    check_body_loaded(model, new, config.model)          # a partial or foreign checkpoint stops here
    target_scale.unfold_saved(model, new)                # a regression head tuneloop saved folded: standardised again
    pooling.restore(model)                               # a folder whose config records the mean (pooling.py)
    check_vocabulary(tokenizer, model, config.model)
    pooled = setup_pooling(config, model, announce)
    if config.lora:                      # adapters; the new head (and pooler) trained and saved in full
        model = add_adapters(model, config, new)
        log.info(f"LoRA r={config.lora_r}: {trainable_summary(model)}")
    mark_cuda_graph_steps(model, config.compile)
    if device_type == "cpu" and config.fast_dropout:
        use_fast_dropout(model)
    if attention == "chunked":
        levers.route_attention(model, cheap_masks=device_type == "cpu" and config.fast_dropout)
    if config.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    if config.attention == "auto" and announce:
        log.info(f"attention: {attention} ({why})")
    return model, attention, pooled


def setup_pooling(config: TrainConfig, model, announce: bool = True) -> str:
    """--method setfit: the embedding its head reads (model/pooling.py), the pooler swapped for the mean when that
    is chosen; returns the choice, for config.yaml."""
    if config.method not in HEAD_FITTED:
        return config.setfit_pooling
    # the folder an alias stands for (the embedded MiniLM): its sentence-transformers files are read there, not
    # looked up on the Hub under the alias (no such model: `auto` fell back to the pooler, after retries offline)
    chosen, why = pooling.choose(config.setfit_pooling, resolve_model(config.model), model, config.lora)
    if chosen == "mean":
        pooling.use_mean(model)
    if config.setfit_pooling == "auto" and announce:
        log.info(f"SetFit pooling: {chosen} ({why})")
    return chosen


def setup_run_folder(config: TrainConfig, data: PreparedData, accelerator) -> Path:
    """Create the folder (only now that data and model have loaded: a typo costs nothing), mark it as a run,
    save the resolved config and a held-out split, start the trackers."""
    out = Path(config.output_dir)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        run_folder.prepare_run_folder(out, config.overwrite, resume=config.resume is not None)
        run_folder.write_run_marker(out, {"tuneloop_version": __version__, "kind": "train"})
        run_log.write_into(out, resumed=config.resume is not None)      # OUT/train.log, from the run's start
        config.save_yaml(out / CONFIG_FILE)
        if data.split is not None:
            atomic_write_json(out / SPLIT_FILE, data.split)
    accelerator.wait_for_everyone()
    accelerator.init_trackers("tuneloop", progress.hparams(config.to_dict()))
    return out


def setup_loaders(config: TrainConfig, data: PreparedData, tokenizer, num_processes: int,
                  buckets: bool = False) -> Loaders:
    # 16-bit matmuls want sequence lengths in multiples of 8: tensor cores on GPUs; on CPUs, oneDNN builds and
    # caches a kernel per shape, so fewer shapes measured 6-12% faster steps and 0.6 GB less memory
    multiple = 8 if config.mixed_precision in ("fp16", "bf16") else None
    if config.compiled or buckets:
        multiple = length_bucket(config.max_length)     # a compiled model or captured step: few shapes
    collator = make_collator(tokenizer, config.pad_to_max_length, config.max_length, multiple)
    global_batch = config.batch_size * num_processes * config.gradient_accumulation_steps
    weights = balance.sampling_weights(data.train_labels, data.labels) if config.sampler == "balanced" else None
    pinned = machine.runs_on_cuda(config.cpu)
    return Loaders(train_loader(data.train, config, collator, global_batch, weights, pinned),
                   {name: eval_loader(ds, config.eval_batch_size, collator, config.dataloader_workers or 0,
                                      pinned) for name, ds in data.evaluation.items()})


def setup_scheduler(config: TrainConfig, optimizer, plan: Plan, accelerator):
    # not prepared: stepping it ourselves once per optimizer step keeps the schedule independent of the
    # number of processes (a prepared scheduler steps once per process)
    scheduler = build_scheduler(optimizer, config.lr_scheduler, plan.total_steps, config.warmup_steps,
                                config.warmup_ratio, cycles=plan.epochs)
    accelerator.register_for_checkpointing(scheduler)
    return scheduler


def setup_state(config: TrainConfig, accelerator, output_dir: Path, plan: Plan, data) -> tuple[TrainState, str | None]:
    """A fresh TrainState, or with --resume the checkpoint's (model, optimizer, scheduler and random states are
    loaded into the prepared objects); returns the state and the checkpoint it came from."""
    if config.resume is None:
        return TrainState(), None
    path, saved = checkpoint.load_checkpoint(accelerator, output_dir, config.resume, config.to_dict(),
                                             accelerator.num_processes, log.warning)
    checkpoint.check_same_data(path, saved, plan.steps_per_epoch, len(data.train), data.raw.source.get("train"))
    state = TrainState.from_dict(saved, plan.steps_per_epoch, config.gradient_accumulation_steps)
    if accelerator.is_main_process and not config.dry_run:      # a dry run writes nothing
        checkpoint.truncate_metrics(output_dir / METRICS_FILE, state.step)
    accelerator.wait_for_everyone()
    log.info(f"resuming from {path} (step {state.step}, epoch {state.epoch + 1})")
    return state, str(path)


def setup_dynamics(data: PreparedData, plan: Plan, accelerator, resumed_from: str | None):
    """Each training row's predicted probabilities per epoch, for the label-issue ranking; a resume continues
    with the checkpoint's."""
    if plan.total_steps == 0:            # --method setfit with its logistic head: the loop trains nothing
        return None
    dynamics = TrainingDynamics.make(data, plan.epochs, accelerator.device)
    if dynamics is not None and resumed_from and not dynamics.load(Path(resumed_from), accelerator):
        log.warning("this checkpoint holds no training-row probabilities (an earlier tuneloop made it): the "
                    "label-issue ranking covers the epochs from here on")
    return dynamics


def _where(data) -> str | None:
    """A data file's absolute path, or how a table from Python is described (data/memory.py)."""
    if data is None:
        return None
    return str(Path(data).resolve()) if isinstance(data, (str, os.PathLike)) else str(data)


def model_metadata(config: TrainConfig, data: PreparedData, names: tuple, main: str) -> dict:
    """model/tuneloop.json: what evaluate/predict need to use the model without repeating options."""
    data_source = {"task": config.task, "data_dir": str(Path(resolve_data_dir(config.data_dir)).resolve())
                   if config.data_dir else None,
                   "validation_file": _where(config.validation_file),
                   "text_columns": config.text_columns, "label_column": config.label_column}
    if holds_out_validation(config):             # evaluate holds out the same rows again (data/split.py)
        data_source.update(train_file=_where(config.train_file), validation_split=config.validation_split,
                           split_seed=config.split_seed)
    return {"tuneloop_version": __version__, "task": config.task, "base_model": loading.recorded_model(config.model),
            "text_columns": list(data.text_columns), "labels": data.labels.to_dict(), "max_length": config.max_length,
            "text_policy": data.policy.to_dict(), "metrics": list(names), "main_metric": main, "data": data_source}


def _examples(ds) -> str:
    """`240`, or with --windows `924 windows of 240 texts`."""
    texts = text_count(ds)
    return f"{len(ds)}" if texts == len(ds) else f"{len(ds)} windows of {texts} texts"


def describe(run: Run) -> None:
    c, d, acc, plan = run.config, run.data, run.accelerator, run.plan
    sizes = ", ".join(f"{name} {_examples(ds)}" for name, ds in [("train", d.train), *d.evaluation.items()])
    log.info(f"tuneloop {__version__}: {c.task or 'custom data'} ({run.objective.kind}, "
             f"{d.labels.num_labels} label(s)) | examples: {sizes}")
    precision = machine.effective_precision(c.mixed_precision, c.cpu)
    if precision != c.mixed_precision:
        log.warning(f"--mixed-precision {c.mixed_precision} computes as {precision}")
    numbers = {"no": "fp32 numbers", "bf16": "bf16 numbers (mixed precision)",
               "fp16": "fp16 numbers (mixed precision)"}.get(precision, precision)
    loop = (f"batch {c.batch_size}/device, global {plan.global_batch} | {plan.steps_per_epoch} steps/epoch, "
            f"{plan.total_steps} steps" if plan.total_steps or c.method not in HEAD_FITTED else
            f"--method {c.method}: " + ("the frozen embedding" if c.method == "probe" else "the pair stage") +
            ", then a fitted head; the training loop takes no step")
    log.info(f"model {c.model} on {acc.device} × {acc.num_processes} process(es), computing in {numbers}, "
             f"{c.attention} attention" + (f", compiled ({c.compile})" if c.compiled else "") +
             f" | {loop} | output {run.output_dir}")
    if acc.device.type == "cuda" or c.captured_step != "auto":    # on CPUs the eager step is the only one
        log.info(f"training step: {'captured (CUDA graphs)' if run.captured else 'eager'} ({run.step_reason})")


def setup(config: TrainConfig, levers: SpeedLevers) -> Run:
    from accelerate.utils import set_seed

    timeline = Timeline()
    config = workbook_splits(config.replace(output_dir=setup_output_dir(config)))   # book.xlsx's sheets
    accelerator = setup_accelerator(config)
    timeline.mark("accelerator")
    if not config.dry_run:
        run_folder.check_run_folder(config.output_dir, config.overwrite, resume=config.resume is not None)
    if config.resume is not None:        # a resume that cannot work is refused before anything is read or written
        checkpoint.check_resumable(Path(config.output_dir), config.resume, config.to_dict(),
                                   accelerator.num_processes)
    set_seed(config.seed)                        # the new head's weights, then data order and dropout
    tokenizer = load_tokenizer(config.model)
    check_max_length(config.model, config.max_length, tokenizer)      # the default: within the model's positions
    timeline.mark("tokenizer")
    data = setup_data(config, tokenizer, accelerator)
    timeline.mark("data")
    config, chosen = choose.decide(config, data, tokenizer, accelerator,        # --method auto: by cross-validation
                                   lambda c: setup_model(c, data.labels, tokenizer, accelerator.device.type, levers,
                                                         announce=False)[0],
                                   setup_objective(config, data, accelerator.device))
    timeline.mark("method choice")
    config = small_data.adapt(config, len(data.train), accelerator.num_processes)
    check_decision_options(config, data.labels)  # e.g. --decision threshold on 3 classes: refused before training
    for line in idle_options(config, data.labels):   # e.g. --lora-r without --lora: said, recorded as given
        log.warning(line)
    check_setfit(config, data)                   # --method setfit on regression: refused before anything is written
    captured, step_reason = step_choice.decide(     # --captured-step on where it cannot run: refused here
        config, accelerator.device.type, accelerator.num_processes,
        machine.effective_precision(config.mixed_precision, config.cpu),
        any(column in data.train.column_names for column in (WEIGHTS, SOFT)))
    model, attention, pooled = setup_model(config, data.labels, tokenizer, accelerator.device.type, levers)
    scale = setup_target_scale(data, model)      # regression targets far from unit scale: learned standardised
    timeline.mark("model")
    config = config.replace(attention=attention, setfit_pooling=pooled)     # what ran, as config.yaml records it
    objective = setup_objective(config, data, accelerator.device, scale)
    output_dir = Path(config.output_dir) if config.dry_run else setup_run_folder(config, data, accelerator)
    timeline.mark("run folder")
    optimizer = build_optimizer(model, config.lr, config.weight_decay, accelerator.device.type, capturable=captured)
    loaders = setup_loaders(config, data, tokenizer, accelerator.num_processes, buckets=captured)
    model, optimizer, train, *evaluation = accelerator.prepare(model, optimizer, loaders.train,
                                                               *loaders.evaluation.values())
    loaders = Loaders(train, dict(zip(loaders.evaluation, evaluation, strict=True)))
    # step counts only now: after prepare() the loader holds this process's share of the batches
    plan = Plan.make(len(loaders.train), config, accelerator.num_processes)
    scheduler = setup_scheduler(config, optimizer, plan, accelerator)
    state, resumed_from = setup_state(config, accelerator, output_dir, plan, data)
    names = metric_names(data)
    main = tasks.main_metric(data.task, data.labels.problem_type)
    run = Run(config, accelerator, output_dir, tokenizer, data, model, objective, optimizer, scheduler, loaders, plan,
              state, names, main, model_metadata(config, data, names, main), resumed_from,
              time.perf_counter() - timeline.started, setup_dynamics(data, plan, accelerator, resumed_from),
              captured=captured, step_reason=step_reason, timeline=timeline, target_scale=scale)
    timeline.mark("optimizer, loaders, state")
    run.auto = chosen
    describe(run)
    return run
