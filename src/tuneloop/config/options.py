"""One typed configuration for the CLI, YAML files and the Python API.

Every option is a dataclass field; its metadata (help text, group, choices) builds the command line, so a
flag, a YAML key and a keyword argument are always the same thing: `--max-length 128` on the command line,
`max_length: 128` in YAML, `TrainConfig(max_length=128)` in Python. Its traits (fields.opt) say what other modules
need to know of it, such as whether a --resume may change it: `with_trait` lists the options that have one. The data
options are a section of their own (data_options.DataOptions, which TrainConfig inherits). Turning the layers
(defaults < preset < YAML < flags / keywords) into the final config is resolve.py's job.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from .data_options import POOLING, PROBLEM_TYPES, TRUNCATION, DataOptions  # noqa: F401  (the choices, here too)
from .fields import DISTILL, GROUPS, TRAIN_ONLY, WITH_EVALUATE, having, need, need_choices, opt  # noqa: F401
from .parsing import eval_every_parts, parse_objective, read_options_file

PRESETS_DIR = Path(__file__).parent / "presets"     # --recipe NAME applies presets/NAME.yaml (see resolve.py)
MIXED_PRECISION = ("auto", "no", "fp16", "bf16")
ATTENTION = ("auto", "sdpa", "eager", "chunked")
COMPILE = ("auto", "no", "default", "reduce-overhead", "max-autotune", "aot_eager")
CAPTURED_STEPS = ("auto", "on", "off")                                  # training/captured.py
SAMPLERS = ("random", "balanced")
SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
              "inverse_sqrt")
TRACKERS = ("none", "tensorboard", "wandb", "mlflow", "comet_ml", "all")
TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "comet_ml": "comet_ml"}
RECIPES = ("none", *sorted(p.stem for p in PRESETS_DIR.glob("*.yaml")))
BASELINES = ("tfidf", "none")                        # evaluation/baseline.py
CALIBRATION = ("none", "temperature")               # decision/fit.py, decision/rule.py
SMALL_DATA = ("auto", "on", "off")                   # training/small_data.py
METHODS, SETFIT_HEADS = ("auto", "finetune", "setfit", "probe"), ("logistic", "end-to-end")   # training/choose.py
SETFIT_POOLINGS = ("auto", "mean", "head")          # model/pooling.py
STUDENT_INITS = ("auto", "teacher", "model")           # experiments/distill.py: what --student-layers cuts
DECISIONS, PRECISION_GATES = ("argmax", "threshold"), ("auto", "off")     # decision/, training/finish.py
KEEP, PRUNERS = ("best", "all"), ("median", "halving", "none")    # experiments/runs.py, search.py (--pruner)
PRECISIONS = ("auto", "fp32", "bf16", "int8", "fp16")   # a loaded model (predict/classifier.py, predict/routes.py)


@dataclass
class TrainConfig(DataOptions):
    # data: the fields of DataOptions (data_options.py) come first
    # model
    model: str = opt("minilm", "a Hub model id, a model folder or tuneloop run folder, or `minilm` (the "
                     "embedded all-MiniLM-L6-v2, available offline)", "model", metavar="ID|DIR", common=True)
    attention: str = opt("auto", "how attention is computed: sdpa or eager (transformers' own), chunked (tuneloop's, "
                         "1.5-5.9x faster on CPUs for texts up to 128 tokens, the same results). auto: the fastest "
                         "this model supports here", "model", ATTENTION,
                         resumable=True)      # kernels of one function (auto is decided when the model loads)
    freeze_embeddings: bool = opt(False, "do not train the word embeddings (about half of a small encoder's "
                                  "weights): faster steps, usually the same accuracy", "model")
    dropout: Optional[float] = opt(None, "set every dropout probability of the model to P (default: the model's "
                                   "own, 0.1 for BERT-style encoders)", "model", metavar="P")
    lora: bool = opt(False, "train LoRA adapters (peft) instead of every weight; the new classification head is "
                     "trained and saved in full; model/ holds the adapter (export and serve merge it)", "model",
                     common=True)
    lora_r: int = opt(8, "--lora: rank of the adapters", "model", metavar="R")
    lora_alpha: float = opt(16.0, "--lora: scaling alpha (the update is scaled by alpha / r)", "model", metavar="A")
    lora_dropout: float = opt(0.05, "--lora: dropout on the adapters' input", "model", metavar="P")
    lora_target_modules: Optional[list[str]] = opt(None, "--lora: module names to adapt, comma-separated (default: "
                                                   "the attention's query and value projections)", "model",
                                                   metavar="A,B")
    fast_dropout: bool = opt(True, "on the CPU, a cheaper random draw for dropout (the rate rounded to 1/65536): "
                             "3-10% faster steps", "model")
    # training
    epochs: int = opt(3, "passes over the training data", "training", metavar="N", common=True, small_data=True)
    max_steps: Optional[int] = opt(None, "stop after N optimizer steps (overrides --epochs)", "training", metavar="N")
    batch_size: int = opt(8, "training examples per device per step", "training", metavar="N", common=True)
    lr: float = opt(5e-5, "peak learning rate of AdamW", "training", metavar="LR", common=True, small_data=True)
    weight_decay: float = opt(0.01, "AdamW weight decay (never applied to biases and LayerNorm weights)",
                              "training", metavar="W")
    lr_scheduler: str = opt("linear", "learning-rate schedule (transformers.get_scheduler)", "training", SCHEDULERS)
    warmup_steps: int = opt(0, "linear warmup over this many optimizer steps", "training", metavar="N")
    warmup_ratio: float = opt(0.0, "warmup over this fraction of all steps (instead of --warmup-steps)",
                              "training", metavar="R", small_data=True)
    max_grad_norm: Optional[float] = opt(None, "clip the gradient norm to this (off by default, as in the course "
                                         "chapter; costs about 10% of a CPU step)", "training", metavar="X")
    class_weights: str = opt("none", "weigh the loss by class: none, balanced (n_samples / (n_classes * count), "
                             "scikit-learn's formula; per-label pos_weight = negatives / positives for multi-label), "
                             "or a JSON file of label: weight", "training", metavar="none|balanced|FILE",
                             common=True)
    sampler: str = opt("random", "training order: random, or balanced (rows drawn with replacement so that every "
                       "class is seen about equally often; seeded per epoch and length-grouped like random)",
                       "training", SAMPLERS)
    gradient_accumulation_steps: int = opt(1, "accumulate gradients over K batches per optimizer step", "training",
                                           metavar="K")
    mixed_precision: str = opt("auto", "16-bit numbers where they are faster: auto picks bf16 on CPUs with AMX and "
                               "on recent GPUs for models over 100M parameters outside embeddings (smaller ones "
                               "train faster in 32-bit with TF32 there), fp16 on older GPUs, else no (32-bit)",
                               "training", MIXED_PRECISION)
    compile: str = opt("auto", "torch.compile the model (each repeated layer once, lengths padded to buckets): "
                       "default, reduce-overhead (CUDA graphs too), max-autotune, aot_eager (a check without code "
                       "generation), no. auto: no (measured slower at these batch sizes, on CPUs and an H100)",
                       "training", COMPILE, resumable=True)
    captured_step: str = opt("auto", "on one CUDA GPU, record the whole training step (forward, loss, backward, "
                             "clipping, a fused AdamW) as CUDA graphs, one per padded batch shape, and replay them: "
                             "one launch a step. auto: on where the run can be captured (proven equal to the eager "
                             "step on an H100, 3.4x faster for bert-base); on: use it (refused where the run cannot "
                             "be captured: several processes, accumulation, 16-bit mixed precision, --compile); off",
                             "training", CAPTURED_STEPS, resumable=True)
    dataloader_workers: Optional[int] = opt(None, "processes that collate batches (default: 2 on CUDA GPUs, with "
                                            "pinned memory and copies that do not block; 0 on CPUs, whose cores "
                                            "train)", "training", metavar="N", resumable=True)
    recipe: str = opt("none", "a preset of options (tuneloop/presets/NAME.yaml) under your own; fast: settings "
                      "chosen for time-to-quality (batch 32, lr 1e-4 with 10% warmup, 2 epochs, no dropout, frozen "
                      "word embeddings, evaluation 4 times per epoch)", "training", RECIPES, common=True)
    small_data: str = opt("auto", "settings for small training sets (more steps, warmup, a smaller learning rate; "
                          "see the small-data guide): auto applies them below the measured size where runs collapse "
                          "and config.yaml records on or off; on, off", "training", SMALL_DATA, small_data=True)
    method: str = opt("auto", "finetune (the training loop trains every weight), setfit (few labelled rows per "
                      "class: the body trained on pairs of rows, then a logistic-regression head) or probe (a "
                      "logistic-regression head on the frozen embedding: seconds); auto: finetune, but under the "
                      "small-data line with at most 64 rows per class (classes) setfit, unless cross-validation on "
                      "the training rows within --auto-budget finds the probe or finetune right on significantly more "
                      "rows (a sign test); config.yaml records which", "training", METHODS)
    auto_budget: float = opt(600.0, "--method auto: seconds the cross-validation may take (a candidate whose "
                             "estimated time does not fit is skipped)", "training", metavar="S")
    setfit_iterations: Optional[int] = opt(None, "--method setfit: the pairs. Default: as the setfit package "
                                           "(single-label sets up to 2000 rows: every pair of rows, the fewer kind "
                                           "— same class, other class — cycled up to the larger count, at most "
                                           "16,384 of each; else 20 rounds of 2 pairs a row). N: at most N × the rows "
                                           "of each kind, or N rounds", "training", metavar="N")
    setfit_epochs: Optional[int] = opt(None, "--method setfit: passes over the pairs. Default: the fewest that make "
                                       "100 steps (one pass from 1,600 pairs at 16 a step; 12 for a binary set of 8 "
                                       "rows per class, measured better than one)", "training", metavar="N")
    setfit_lr: float = opt(2e-5, "--method setfit: learning rate of the stage on pairs", "training", metavar="LR")
    setfit_batch_size: int = opt(16, "--method setfit: pairs per step", "training", metavar="N")
    setfit_head: str = opt("logistic", "--method setfit: logistic (the fitted head is the model: no loop steps) or "
                           "end-to-end (then --epochs of the loop over every weight)", "training", SETFIT_HEADS)
    setfit_pooling: str = opt("auto", "--method setfit: the embedding the head reads: mean (of the last hidden "
                              "states, normalised, as a sentence-transformer; BERT, DeBERTa, RoBERTa, XLM-R, MPNet, "
                              "ELECTRA) or head (the model's own, e.g. BERT's pooler); auto: mean for a "
                              "sentence-transformer trained with it, and config.yaml records which", "training",
                              SETFIT_POOLINGS)
    group_by_length: bool = opt(True, "batch examples of similar length together (less padding; the order is "
                                "still random and fixed by --seed and the epoch)", "training")
    seed: int = opt(42, "random seed for weights of the new head, data order and dropout", "training", metavar="N",
                    common=True)
    cpu: bool = opt(False, "train on the CPU even when a GPU is present", "training", commands=WITH_EVALUATE,
                    common=True)
    # evaluation
    eval_batch_size: int = opt(64, "evaluation/prediction examples per device per batch", "evaluation", metavar="N",
                               commands=WITH_EVALUATE, resumable=True)
    eval_every: Optional[str] = opt(None, "also evaluate every N optimizer steps, or K times per epoch with K/epoch "
                                    "(and after each epoch of runs up to 20 epochs)", "evaluation", metavar="N|K/epoch",
                                    resumable=True, small_data=True)
    predict_test: bool = opt(False, "write predictions for the test split into the run folder", "evaluation",
                             common=True, resumable=True)
    baseline: str = opt("tfidf", "a classical baseline scored beside the model on the same rows and metrics: tfidf "
                        "(word and character n-grams + logistic regression, scikit-learn; seconds of CPU) or none",
                        "evaluation", BASELINES, resumable=True)
    precision_gate: str = opt("auto", "after training, check faster inference routes against fp32 and time them "
                              "(predict's --precision auto takes the one kept); off: skip it", "evaluation",
                              PRECISION_GATES, resumable=True)
    metric_for_best: Optional[str] = opt(None, "keep OUT/best/ at the evaluation best in this metric (default: the "
                                         "task's main metric; `loss` means lowest eval loss)", "evaluation",
                                         metavar="METRIC", resumable=True)
    early_stopping_patience: Optional[int] = opt(None, "stop after N evaluations without improvement of "
                                                 "--metric-for-best", "evaluation", metavar="N", resumable=True)
    # decision: fitted on the validation outputs after training, saved with the model, applied by evaluate/predict
    calibrate: str = opt("temperature", "after training, fit a temperature on the validation logits (minimising "
                         "NLL) so that the probabilities mean what they say; none: raw softmax/sigmoid", "decision",
                         CALIBRATION, resumable=True)
    decision: str = opt("argmax", "how probabilities become labels: argmax (multi-label: 0.5 per label), or "
                        "threshold: one cut-off on the positive class's probability (binary tasks) or one per label "
                        "(multi-label), chosen on the validation rows for --optimize-threshold-for", "decision",
                        DECISIONS, common=True, resumable=True)
    optimize_threshold_for: str = opt("f1", "what --decision threshold maximises: f1 (of the positive class; of each "
                                      "label), macro-f1, precision@R (the best precision at recall >= R) or "
                                      "recall@P (the best recall at precision >= P)", "decision",
                                      metavar="f1|macro-f1|precision@R|recall@P", resumable=True)
    threshold_confidence: float = opt(0.9, "precision@R / recall@P: the cut-off whose recall / precision stays >= R / "
                                      "P on new rows with this probability (a lower confidence bound on the "
                                      "validation rows); 0: the best cut-off of those rows", "decision", metavar="C",
                                      resumable=True)
    positive_label: Optional[str] = opt(None, "binary tasks: the class whose probability --decision threshold cuts and "
                                        "whose F1/precision/recall it optimises (default: the second label, e.g. 1 "
                                        "or `yes`)", "decision", metavar="LABEL", resumable=True)
    abstain_below: Optional[float] = opt(None, "predict --abstain-label instead when the calibrated probability of "
                                         "the predicted answer is under P (report.html plots coverage against "
                                         "accuracy to choose P)", "decision", metavar="P", common=True,
                                         resumable=True)
    abstain_label: str = opt("abstain", "what an abstained prediction says", "decision", metavar="LABEL",
                             resumable=True)
    # experiment (experiments/runs.py): several runs of this configuration, summarised
    seeds: Optional[list[int]] = opt(None, "run once per seed into OUT/seed-<s>/ and summarise (mean ± std, 95% "
                                     "interval) in OUT/summary.json and summary.html", "experiment", metavar="N",
                                     nargs="+", common=True, commands=TRAIN_ONLY)
    num_seeds: Optional[int] = opt(None, "run N seeds: --seed, --seed + 1, ... (like --seeds)", "experiment",
                                   metavar="N", commands=TRAIN_ONLY)
    folds: Optional[int] = opt(None, "k-fold cross-validation over the training file: K runs into OUT/fold-<k>/, each "
                               "validated on one fold (stratified like --validation-split), summarised, with "
                               "out-of-fold predictions for every training row", "experiment", metavar="K",
                               commands=TRAIN_ONLY, common=True)
    fold: Optional[int] = opt(None, "run only fold k (1..K) of --folds K", "experiment", metavar="k",
                              commands=TRAIN_ONLY)
    keep: str = opt("best", "which runs' models an experiment keeps: best (copied to OUT/model; the others' "
                    "model folders are removed) or all", "experiment", KEEP, commands=TRAIN_ONLY)
    retry_collapsed: bool = opt(False, "rerun a seed whose model predicts a single class on validation, with the "
                                "next unused seed", "experiment", commands=TRAIN_ONLY)
    # checkpointing
    save_every: Optional[str] = opt(None, "save a resumable checkpoint every N optimizer steps, or `epoch`",
                                    "checkpointing", metavar="N|epoch", common=True, resumable=True)
    keep_last: int = opt(3, "keep only the newest K checkpoints", "checkpointing", metavar="K", resumable=True)
    resume: Optional[str] = opt(None, "continue the run in --output-dir from its newest complete checkpoint (or from "
                                "checkpoint folder PATH)", "checkpointing", metavar="PATH", nargs="?", const="latest",
                                commands=TRAIN_ONLY, common=True, resumable=True)
    skip_nonfinite_batches: bool = opt(False, "skip batches whose loss is NaN/inf instead of stopping the run (checks "
                                       "every step, which costs a host sync)", "checkpointing", resumable=True)
    # output
    output_dir: Optional[str] = opt(None, "run folder (default: runs/<task>-<timestamp>)", "output", metavar="DIR",
                                    common=True, resumable=True, sklearn="own")
    overwrite: bool = opt(False, "replace the outputs of an earlier run in --output-dir", "output", common=True,
                          resumable=True)
    log_every: int = opt(10, "log training loss and learning rate every N optimizer steps", "output", metavar="N",
                         resumable=True)
    report_to: str = opt("none", "also log to these trackers through Accelerate", "output", TRACKERS, resumable=True)
    report: bool = opt(True, "write report.html and its plots when the run ends (about 2 s; `tuneloop report RUN` "
                       "writes them any time later)", "output", resumable=True)
    quiet: bool = opt(False, "no progress bars, only warnings and the final summary", "output",
                      commands=WITH_EVALUATE, common=True, resumable=True)
    chosen: Optional[list[str]] = opt(None, "the options this run's user set (flags, keywords, --config, the "
                                      "config.yaml of a resumed run): settings tuneloop decides by the data "
                                      "(--small-data) leave them alone; filled in by resolve_config", "output",
                                      cli=False, resumable=True)
    dry_run: bool = opt(False, "print the resolved config, split sizes, step counts, one batch's shapes and one "
                        "forward pass's loss, then exit without training or writing anything", "output",
                        commands=TRAIN_ONLY, common=True, resumable=True)
    # distillation (`tuneloop distill`: experiments/distill.py)
    teacher: Optional[str] = opt(None, "the teacher: a tuneloop run or model folder, a transformers classifier folder "
                                 "or Hub id, an exported folder, or a .csv/.tsv/.jsonl of soft labels (text column(s) "
                                 "and one probability column per class, named by the class)", "distillation",
                                 metavar="DIR|FILE", commands=DISTILL)
    unlabeled_file: Optional[str] = opt(None, "texts without labels for the teacher to label (the main source of "
                                        "training rows; --train-file adds labelled rows)", "distillation",
                                        metavar="FILE", commands=DISTILL)
    student_layers: Optional[list[int]] = opt(None, "the student keeps N transformer layers (of the model "
                                              "--student-init names), evenly spaced from the first (3 of 6: 0, 2, 4, "
                                              "DistilBERT's choice), or the layers listed, counted from 0 (e.g. 0,2,5)",
                                              "distillation", metavar="N|I,J,..", commands=DISTILL)
    student_init: str = opt("auto", "what --student-layers cuts the student from: teacher (its fine-tuned layers, "
                            "DistilBERT's initialisation), model (--model's), or auto: the teacher when it is the "
                            "same network as --model (e.g. fine-tuned from it), else --model", "distillation",
                            choices=STUDENT_INITS, commands=DISTILL)
    temperature: float = opt(2.0, "softmax temperature T of the teacher's and student's outputs in the distillation "
                             "loss (T² × soft-target cross entropy; regression has none)", "distillation",
                             metavar="T", commands=DISTILL)
    gold_weight: float = opt(0.5, "weight of the gold-label loss on rows --train-file labels, added to the "
                             "soft-target loss", "distillation", metavar="W", commands=DISTILL)
    feature_weight: Optional[float] = opt(None, "weight of a feature loss, added to the soft-target loss: the cosine "
                                          "distance between the student's sentence features (the mean of its last "
                                          "hidden states) and the teacher's, as DistilBERT's cosine loss. Default: 1 "
                                          "where the teacher is a PyTorch model as wide as the student, else 0",
                                          "distillation", metavar="W", commands=DISTILL)
    compare_labels_only: bool = opt(True, "with --train-file: also train the same student on the labelled rows "
                                    "alone, for comparison (results.json's distillation.labels_only)",
                                    "distillation", commands=DISTILL, resumable=True)
    soft_targets: Optional[str] = opt(None, "a file of soft targets per training row (`tuneloop distill` writes it): "
                                      "the run trains on them with the distillation loss", "distillation",
                                      metavar="FILE", cli=False)

    @property
    def compiled(self) -> bool:
        """Whether the model is torch.compiled (`auto` counts as not yet: resolve.for_this_machine decides it)."""
        return self.compile not in ("no", "auto")

    # ------------------------------------------------------------------ validation
    def validate(self) -> "TrainConfig":
        """Check every option before any work starts; raise ConfigError naming the option (the data options:
        DataOptions.validate)."""
        from ..tasks import TASKS, possible_metrics, unknown_metric_message

        for name, value in (("lr", self.lr), ("setfit_lr", self.setfit_lr)):
            need(math.isfinite(value) and value > 0, name, f"must be a positive number, got {value}")
        need(self.epochs >= 1, "epochs", f"must be at least 1, got {self.epochs}")
        need(self.lora_r >= 1, "lora_r", f"must be at least 1, got {self.lora_r}")
        need(math.isfinite(self.lora_alpha) and self.lora_alpha > 0, "lora_alpha",
             f"must be a positive number (0 scales the adapters to nothing), got {self.lora_alpha}")
        for name, seed in (("seed", self.seed), *(("seeds", seed) for seed in self.seeds or ())):
            need(0 <= seed < 2 ** 32, name, f"must be in 0..{2 ** 32 - 1} (NumPy's range), got {seed}")
        if self.lora:
            from .. import extras

            need(extras.problem("lora") is None, "lora", extras.problem("lora") or "")
        for name in ("max_steps", "batch_size", "eval_batch_size", "gradient_accumulation_steps", "log_every",
                     "setfit_epochs", "setfit_batch_size", "setfit_iterations"):
            need((value := getattr(self, name)) is None or value >= 1, name, f"must be at least 1, got {value}")
        for name in ("dropout", "lora_dropout", "warmup_ratio", "threshold_confidence"):
            need((value := getattr(self, name)) is None or 0 <= value < 1, name, f"must be in [0, 1), got {value}")
        need(0 <= self.weight_decay < math.inf, "weight_decay", f"must be finite and >= 0, got {self.weight_decay}")
        need(self.auto_budget > 0, "auto_budget", f"must be > 0 seconds, got {self.auto_budget}")
        need(self.warmup_steps >= 0, "warmup_steps", f"must be >= 0, got {self.warmup_steps}")
        need(not (self.warmup_steps and self.warmup_ratio), "warmup_ratio",
             "give either --warmup-steps or --warmup-ratio, not both")
        need((self.max_grad_norm or 0) >= 0, "max_grad_norm", f"must be >= 0 (0: no clip), got {self.max_grad_norm}")
        need(self.keep_last >= 1, "keep_last", f"must be at least 1, got {self.keep_last}")
        if self.class_weights not in ("none", "balanced"):
            need(Path(self.class_weights).is_file(), "class_weights",
                 f"{self.class_weights!r} is neither none, balanced nor an existing JSON file of label: weight")
        if self.save_every is not None and self.save_every != "epoch":
            need(str(self.save_every).isdigit() and int(self.save_every) >= 1, "save_every",
                 f"must be a number of steps (>= 1) or `epoch`, got {self.save_every!r}")
        if self.eval_every is not None:
            need(eval_every_parts(self.eval_every) is not None, "eval_every",
                 f"must be a number of steps (>= 1) or K/epoch (K >= 1), got {self.eval_every!r}")
        if self.early_stopping_patience is not None:
            need(self.early_stopping_patience >= 1, "early_stopping_patience",
                 f"must be at least 1, got {self.early_stopping_patience}")
        try:
            parse_objective(self.optimize_threshold_for)
        except ValueError as e:
            need(False, "optimize_threshold_for", str(e))
        if self.abstain_below is not None:
            need(0 < self.abstain_below <= 1, "abstain_below",
                 f"must be a probability in (0, 1], got {self.abstain_below}")
        if self.seeds is not None:
            need(len(self.seeds) >= 1 and len(set(self.seeds)) == len(self.seeds), "seeds",
                 f"give distinct seeds, got {' '.join(map(str, self.seeds))}")
        need(not (self.seeds and self.num_seeds), "num_seeds", "give either --seeds or --num-seeds, not both")
        need(self.num_seeds is None or self.num_seeds >= 1, "num_seeds", f"must be at least 1, got {self.num_seeds}")
        if self.folds is not None or self.fold is not None:
            need(self.folds is not None, "fold", f"{self.fold} of how many? give --folds K too (one fold of K)")
            need(self.folds >= 2, "folds", f"must be at least 2, got {self.folds}")
            need(self.fold is None or 1 <= self.fold <= self.folds, "fold", f"must be in 1..{self.folds}")
            need(bool(self.train_file) and not self.validation_file and not self.data_dir, "folds",
                 "k-fold splits one --train-file (leave out --validation-file and --data-dir)")
        need(self.attention != "chunked" or not self.compiled, "attention",
             "chunked attention runs eagerly, not under --compile; leave --attention auto (SDPA when compiling)")
        if self.dataloader_workers is not None:
            need(self.dataloader_workers >= 0, "dataloader_workers", f"must be >= 0, got {self.dataloader_workers}")
        need_choices(self, (("mixed_precision", MIXED_PRECISION), ("recipe", RECIPES), ("attention", ATTENTION),
                            ("sampler", SAMPLERS), ("calibrate", CALIBRATION), ("decision", DECISIONS),
                            ("keep", KEEP), ("compile", COMPILE), ("captured_step", CAPTURED_STEPS),
                            ("small_data", SMALL_DATA), ("method", METHODS), ("student_init", STUDENT_INITS),
                            ("setfit_head", SETFIT_HEADS), ("setfit_pooling", SETFIT_POOLINGS),
                            ("lr_scheduler", SCHEDULERS), ("report_to", TRACKERS), ("precision_gate", PRECISION_GATES)))
        if self.report_to in TRACKER_PACKAGES:     # Accelerate would skip a missing tracker without a word
            package = TRACKER_PACKAGES[self.report_to]
            need(importlib.util.find_spec(package) is not None, "report_to",
                 f"{self.report_to} needs the {package} package, which is not installed: `pip install {package}`")
        self.validate_distillation()
        super().validate()
        if self.metric_for_best is not None:
            known = possible_metrics(TASKS.get((self.task or "").lower()), self.problem_type)
            problem = unknown_metric_message(self.metric_for_best, known)
            need(problem is None, "metric_for_best", problem)
        return self

    def validate_distillation(self) -> None:
        need(math.isfinite(self.temperature) and self.temperature > 0, "temperature",
             f"must be a positive number, got {self.temperature}")
        need(math.isfinite(self.gold_weight) and self.gold_weight >= 0, "gold_weight",
             f"must be >= 0, got {self.gold_weight}")
        need(self.feature_weight is None or (math.isfinite(self.feature_weight) and self.feature_weight >= 0),
             "feature_weight", f"must be >= 0, got {self.feature_weight}")
        layers = self.student_layers
        given = ",".join(map(str, layers or ()))
        need(layers is None or len(layers) > 1 or layers[0] >= 1, "student_layers", f"must be at least 1, got {given}")
        need(layers is None or len(layers) == 1 or (min(layers) >= 0 and list(layers) == sorted(set(layers))),
             "student_layers", f"list distinct layers in order, counted from 0 (e.g. 0,2,5), got {given}")

    def changes(self) -> dict:
        """The options whose values differ from the defaults (what a TrainConfig object says, as a layer of
        options: see resolve.resolve_config)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != f.default}

    # ------------------------------------------------------------------ YAML
    @classmethod
    def from_yaml(cls, path: str | os.PathLike, **overrides) -> "TrainConfig":
        return cls(**{**read_yaml_options(path, cls), **overrides})

    def save_yaml(self, path: str | os.PathLike) -> None:
        from ..atomic import atomic_write_text

        atomic_write_text(path, yaml.safe_dump(self.to_dict(), sort_keys=False))


def read_yaml_options(path: str | os.PathLike, cls=TrainConfig, flag: str = "--config") -> dict:
    """Read a YAML file of options; unknown keys are an error (a typo should not be silently ignored)."""
    return read_options_file(path, cls, flag)


def with_trait(trait: str, value: Any = True) -> tuple[str, ...]:
    """The options with a trait (see fields.opt), in the order of the fields: `with_trait("resumable")`,
    `with_trait("commands", "evaluate")`."""
    return having(TrainConfig, trait, value)


def default(name: str) -> Any:
    """An option's default value."""
    return TrainConfig.__dataclass_fields__[name].default
