"""--method auto (the default): under the small-data line (small_data.py), with at most FEW_PER_CLASS training rows per
class on average (the few-shot regime the probe and the contrastive stage are for), the method is the contrastive
stage (`setfit`, the recipe of the `setfit` package, which led every other way at 8-32 rows per class on the sets of
the small-data guide), unless cross-validation on the user's own training rows shows another candidate better
beyond chance (with a class of one training row no folds can be made, and the stage is kept without comparing);
otherwise, and for regression, multi-label data, several processes, --save-every (the loop's checkpoints) or --lora
(adapters, which the loop trains: the stage's measurements trained every weight, at --setfit-lr), it is `finetune`
and nothing else changes.

Candidates, cheapest first:
- probe: a logistic-regression head on the frozen sentence embedding (contrastive.py without the pair stage),
- setfit: the contrastive stage on pairs of rows, then that head (contrastive.py),
- finetune: the training loop over every weight, with the small-data settings (small_data.py).

Each is scored on held-out folds of the training rows (head_fit.folds_of: stratified, 3, seeded by --seed; every row
held out once), each fold trained from the pretrained model as the run would train it (no rows of the validation or
test sets are read). A candidate replaces the contrastive stage only when it was right on significantly more of the same
held-out rows: a one-sided sign test on the rows where exactly one of the two was right (McNemar's exact test),
p < ALPHA. At 8 rows per class, 3-fold accuracies on 16 rows ranged over 0.31-0.50 on a binary task (noise): picking
the best mean there picked at random; the test keeps the stage unless the evidence is there.
The choice keeps to --auto-budget seconds: the probe always runs (and times forward and backward over one training
batch on this machine); a further candidate runs only if its estimated time (its steps × rows a step × the measured
seconds a training row) still fits, and stops if, after a fold, the folds left would not fit at the pace measured;
either is recorded as skipped (the stage not compared is kept, and fine-tuning after it is not run: it could
replace nothing). With --setfit-head end-to-end the stage's folds also train the loop after the head, as the run
will. A candidate scored after the stage stops its folds
once it could not beat it beyond chance even right on every row left (out_of_reach: the choice is unchanged, only
sooner). The choice, every candidate's fold scores, mean,
seconds (or estimate) and its test against the stage are recorded in results.json ("auto") and said in the log;
config.yaml records the method that ran, so a resumed run keeps it."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import numpy as np
import torch

from ..data import balance
from ..data.batch import MODEL_INPUTS, TARGETS
from ..data.batching import make_collator
from ..model.optim import build_optimizer, build_scheduler
from ..report.fmt import auto_text
from ..runtime.process import random_states
from . import contrastive, small_data
from .head_fit import fit_head, fold_count, folds_of, head_logits
from .state import optimizer_steps_per_epoch
from .step import AccelerateStep

log = logging.getLogger("tuneloop")

CANDIDATES = ("probe", "setfit", "finetune")
DEFAULT = "setfit"      # the few-shot method unless another is better beyond chance on the held-out rows
ALPHA = 0.05            # the sign test's level for replacing it
FEW_PER_CLASS = 64      # rows per class (on average) up to which the candidates are compared: the few-shot regime
BACKWARD = 3.0          # a training row costs about this many rows of an embedding pass (forward + backward)
TIMINGS = 3             # timed passes of one batch for the budget's estimates: the fastest counts


def decide(config, data, tokenizer, accelerator, build_model: Callable, objective) -> tuple:
    """(the config with `method` decided, results.json's "auto" section or None when there was nothing to
    choose). `build_model(config)` loads a fresh model for a candidate's fold, as the run would; `objective` is the
    run's (its training loss)."""
    if config.method != "auto":
        return config, None                     # the user's own method is kept
    finetune = config.replace(method="finetune")
    rows, target = len(data.train), data.labels.objective
    if (not target.classes or not small_data.applies(finetune, rows)
            or rows > FEW_PER_CLASS * max(1, target.num_labels)):
        return finetune, None                   # regression, or the usual run: nothing to choose
    why = ("multi-label data" if target.multi_label else "several processes" if accelerator.num_processes > 1
           else "a dry run (the cross-validation runs when training)" if config.dry_run
           else "--save-every asks for the training loop's checkpoints" if config.save_every
           else "--lora trains adapters in the training loop" if config.lora
           else f"--max-steps {config.max_steps} asks for a run of that many steps" if config.max_steps else None)
    if why is not None:
        log.info(f"method auto: fine-tuning ({why}: no cross-validation)")
        return finetune, {"chosen": "finetune", "why": why}
    labels = np.asarray(data.train_labels)
    if fold_count(labels, contrastive.texts_of(data.train)) < 2:    # a class of one row (text): the default kept
        why = "fewer than 2 training rows in some class: no cross-validation, the few-shot default kept"
        log.info(f"method auto: {DEFAULT} ({why})")
        return config.replace(method=DEFAULT), {"chosen": DEFAULT, "default": DEFAULT, "why": why}
    with random_states():       # the run after the choice draws what the chosen method named would have drawn
        choice = cross_validate(config, data, tokenizer, accelerator, build_model, objective, labels)
    log.info(f"method auto: {auto_text(choice)}; on the {rows} training rows, {choice['seconds']:.0f} s of "
             f"--auto-budget {config.auto_budget:g} s; --method keeps your own")
    return config.replace(method=choice["chosen"]), choice


def cross_validate(config, data, tokenizer, accelerator, build_model, objective, labels) -> dict:
    started, folds = time.perf_counter(), folds_of(labels, config.seed, contrastive.texts_of(data.train))
    # the stage's passes as the run will make them on all the training rows (one process: decide() compares nothing
    # on several), in every fold: not a fold's own, whose fewer pairs would take more passes than the run will
    config = config.replace(setfit_epochs=contrastive.planned_passes(config, labels, 1))
    inputs = data.train.select_columns([c for c in MODEL_INPUTS if c in data.train.column_names])
    candidates, speed, right = {}, {}, {}
    for method in CANDIDATES:
        if DEFAULT in candidates and DEFAULT not in right:      # the stage not compared is kept: nothing to beat
            candidates[method] = {"skipped": f"{DEFAULT} was not compared, so nothing could replace it"}
            continue
        estimate = estimated_seconds(method, config, data, folds, speed["row"]) if speed else None
        if estimate is not None and time.perf_counter() - started + estimate > config.auto_budget:
            candidates[method] = {"skipped": "over --auto-budget", "estimated_s": round(estimate, 1)}
            continue
        t0, correct, accuracies = time.perf_counter(), np.zeros(len(labels), dtype=bool), []
        done = np.zeros(len(labels), dtype=bool)
        hopeless = out_of_reach(method, right, correct, done)
        for i, (train, held) in enumerate(folds):
            if hopeless:
                break
            correct[held] = fold_correct(method, config, data, tokenizer, accelerator, build_model, objective,
                                         inputs, labels, train, held, speed)
            done[held] = True
            accuracies.append(float(correct[held].mean()))
            log.info(f"method auto: {method}, fold {i + 1} of {len(folds)}: {accuracies[-1]:.3f} of its held-out rows "
                     f"right ({time.perf_counter() - started:.0f} s of --auto-budget {config.auto_budget:g} s)")
            each = (time.perf_counter() - t0) / (i + 1)
            left = len(folds) - i - 1
            hopeless = out_of_reach(method, right, correct, done) if left else None
            if method != "probe" and left and time.perf_counter() - started + left * each > config.auto_budget:
                break                  # measured, not estimated: the folds left would not fit (the probe's are free)
        candidates[method] = {"seconds": round(time.perf_counter() - t0, 1)}
        if hopeless:
            candidates[method].update(stopped=hopeless, folds=[round(a, 5) for a in accuracies])
            log.info(f"method auto: {method} {hopeless}")
        elif len(accuracies) < len(folds):
            candidates[method]["skipped"] = f"over --auto-budget after {len(accuracies)} of {len(folds)} folds"
        else:
            right[method] = correct
            candidates[method].update(accuracy=round(float(correct.mean()), 5),
                                      folds=[round(a, 5) for a in accuracies])
        if estimate is not None:
            candidates[method]["estimated_s"] = round(estimate, 1)
    chosen, vs = DEFAULT, "against_" + DEFAULT
    if DEFAULT in right:
        for method in right.keys() - {DEFAULT}:
            candidates[method][vs] = sign_test(right[method], right[DEFAULT])
        better = [m for m in right if m != DEFAULT and candidates[m][vs]["p"] < ALPHA]
        if better:
            chosen = min(better, key=lambda m: (candidates[m][vs]["p"], -candidates[m]["accuracy"]))
    return {"chosen": chosen, "default": DEFAULT, "folds": len(folds), "metric": "accuracy",
            "budget_s": config.auto_budget,
            "rule": f"{DEFAULT} unless a candidate is right on more held-out rows, sign test p < {ALPHA}",
            "seconds": round(time.perf_counter() - started, 1), "candidates": candidates}


def out_of_reach(method: str, right: dict, correct: np.ndarray, done: np.ndarray) -> str | None:
    """Why `method` can no longer replace the stage, or None: were it right on every held-out row still to score
    (`done`: the rows scored so far), the sign test against the stage's rows (`right[DEFAULT]`) would
    still not reach p < ALPHA. Its remaining folds would change nothing, so they are not trained: the choice is the
    one the whole cross-validation would make. (A candidate scored before the stage has nothing to compare with.)"""
    if method == DEFAULT or DEFAULT not in right:
        return None
    best = np.where(done, correct, True)                # right on every row not scored yet
    test = sign_test(best, right[DEFAULT])
    if test["p"] < ALPHA:
        return None
    scored = int(done.sum())
    return (f"stopped after {scored} of {len(done)} held-out rows: right on all the rest, it would still not beat "
            f"{DEFAULT} beyond chance (at best {test['wins']} wins to {test['losses']}, p = {test['p']:.3g} >= "
            f"{ALPHA}); the choice is unchanged")


def sign_test(challenger: np.ndarray, incumbent: np.ndarray) -> dict:
    """McNemar's exact test, one-sided: of the rows exactly one of the two got right, how many were the
    challenger's (`wins`, `losses`), and the chance `p` of at least that many wins were both equally good."""
    from scipy.stats import binomtest

    wins, losses = int((challenger & ~incumbent).sum()), int((incumbent & ~challenger).sum())
    p = binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue if wins + losses else 1.0
    return {"wins": wins, "losses": losses, "p": round(float(p), 5)}


def fold_correct(method, config, data, tokenizer, accelerator, build_model, objective, inputs, labels, train, held,
                 speed: dict) -> np.ndarray:
    """Whether one candidate got each of one fold's held-out rows right, trained on the fold's other rows. The
    probe's embedding (the same in every fold) is kept in `speed`, with the seconds a row's forward pass took. With
    --setfit-head end-to-end the stage's fold goes on as its run would: the fitted head copied into the model, then
    the training loop over every weight."""
    from accelerate.utils import set_seed

    set_seed(config.seed)
    if method == "finetune":
        return finetune_fold(config, data, tokenizer, accelerator, build_model, objective, train, held)
    embedded = speed.get("probe") if method == "probe" else None
    weighing = contrastive.head_objective(config, objective, data.labels, labels, quiet=True)
    if embedded is None:
        features, head, per_row, model = fold_features(method, config, inputs, labels, tokenizer, accelerator,
                                                       build_model, train)
        embedded = features, head.bias is not None
        speed.setdefault("row", per_row)
        if method == "probe":
            speed["probe"] = embedded
        elif config.setfit_head == "end-to-end":
            contrastive.set_head(head, fit_head(features[train], labels[train], weighing, head.bias is not None,
                                                config.seed))
            return loop_fold(config, model, data, tokenizer, accelerator, objective, train, held)
    return head_correct(*embedded, weighing, labels, train, held, config.seed)


def estimated_seconds(method: str, config, data, folds, per_row: float) -> float:
    """A candidate's cross-validation time from its steps and the seconds a training row took here (an embedding
    row counted as a third of one: no backward)."""
    train = folds[0][0]
    if method == "setfit":
        labels = np.asarray(data.train_labels)[train]
        pairs = len(contrastive.make_pairs(labels, config.setfit_iterations, config.seed)[0]) * config.setfit_epochs
        loop = loop_rows(config, len(train)) if config.setfit_head == "end-to-end" else 0    # then the loop
        return len(folds) * (2 * pairs + len(data.train) / BACKWARD + loop) * per_row
    fit = small_data.adapt(config.replace(method="finetune"), len(train), quiet=True)
    return len(folds) * (loop_rows(fit, len(train)) + len(folds[0][1]) / BACKWARD) * per_row


def loop_rows(cfg, rows: int) -> int:
    """The rows the training loop runs through (forward and backward) on `rows` training rows."""
    steps = cfg.max_steps or cfg.epochs * math.ceil(rows / cfg.batch_size)
    return steps * min(cfg.batch_size, rows)


def fold_features(method, config, inputs, labels, tokenizer, accelerator, build_model, train) -> tuple:
    """(every training row's embedding after the candidate's body training on the fold's rows — none for the
    probe —, the model's final Linear, the seconds a training row takes here: forward and backward over one batch,
    timed once warm, and the model)."""
    cfg = config.replace(method=method)
    model = build_model(cfg).to(accelerator.device)
    head = contrastive.head_linear(model, model.config.num_labels)
    embed = contrastive.Embedder(model, head, tokenizer, cfg, accelerator.device,
                                 model.config.get_text_config().pad_token_id)
    if method == "setfit":
        contrastive.train_body(model, head, embed, inputs.select(train), labels[train], cfg.replace(quiet=True),
                               accelerator, lambda: 0)
    features = contrastive.embeddings(model, embed, inputs, cfg.eval_batch_size)
    return features, head, seconds_a_training_row(model, embed, inputs, cfg.batch_size), model


def seconds_a_training_row(model, embed, inputs, batch_size: int) -> float:
    """Forward and backward over one training batch: the fastest of three, after one that builds the kernels (one
    timing alone, on a machine other jobs load, put a 2.5 s stage at 1,068 s and skipped it)."""
    rows = contrastive.rows_of(inputs, range(min(len(inputs), batch_size)))
    model.train()
    times = []
    for _ in range(TIMINGS + 1):
        t0 = time.perf_counter()
        embed(rows)[0].sum().backward()
        times.append(time.perf_counter() - t0)
    model.zero_grad(set_to_none=True)
    model.eval()
    return min(times[1:]) / len(rows)


def head_correct(features, with_bias: bool, objective, labels, train, held, seed: int) -> np.ndarray:
    """Whether the head the run would fit (head_fit.fit_head: with or without a bias, as the model's head) on the
    fold's training rows gets each held-out row right."""
    fitted = fit_head(features[train], labels[train], objective, with_bias, seed)
    return head_logits(fitted, features[held]).argmax(1) == labels[held]


def finetune_fold(config, data, tokenizer, accelerator, build_model, objective, train, held) -> np.ndarray:
    """Fine-tuning on the fold's rows with the small-data settings, as the run would; whether each held row came
    out right."""
    cfg = small_data.adapt(config.replace(method="finetune"), len(train), quiet=True)
    model = build_model(cfg).to(accelerator.device)
    return loop_fold(cfg, model, data, tokenizer, accelerator, objective, train, held)


class Accumulated:
    """An optimizer that steps (and zeroes its gradients) only where the accelerator syncs them: the last micro-step
    of an accumulation, as the run's prepared optimizer (accelerate's AcceleratedOptimizer)."""

    def __init__(self, optimizer, accelerator):
        self.optimizer, self.accelerator = optimizer, accelerator

    def step(self):
        if self.accelerator.sync_gradients:
            self.optimizer.step()

    def zero_grad(self, set_to_none: bool = True):
        if self.accelerator.sync_gradients:
            self.optimizer.zero_grad(set_to_none=set_to_none)


def loop_fold(cfg, model, data, tokenizer, accelerator, objective, train, held) -> np.ndarray:
    """The training loop's steps (cfg's epochs or --max-steps, learning rate, schedule) on the fold's rows, from
    `model` as it is; whether each held row came out right."""
    collate = make_collator(tokenizer, cfg.pad_to_max_length, cfg.max_length)
    columns = [c for c in (*MODEL_INPUTS, *TARGETS) if c in data.train.column_names]
    rows = data.train.select_columns(columns).select(train)
    batches, accumulation = math.ceil(len(rows) / cfg.batch_size), cfg.gradient_accumulation_steps
    total = cfg.max_steps or cfg.epochs * optimizer_steps_per_epoch(batches, accumulation)
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, accelerator.device.type)
    scheduler = build_scheduler(optimizer, cfg.lr_scheduler, total, cfg.warmup_steps, cfg.warmup_ratio)
    step = AccelerateStep(accelerator, model, Accumulated(optimizer, accelerator), objective, cfg.max_grad_norm)
    rng, done, before = np.random.default_rng(cfg.seed), 0, accelerator.step
    chance = None
    if cfg.sampler == "balanced":         # as the run's loader draws: with replacement, by inverse class frequency
        chance = balance.sampling_weights(np.asarray(data.train_labels)[train], data.labels)
        chance = chance / chance.sum()
    model.train()
    try:
        while done < total:
            order = rng.permutation(len(rows)) if chance is None else rng.choice(len(rows), len(rows), p=chance)
            for i, s in enumerate(range(0, len(rows), cfg.batch_size)):
                # the run's accumulation: an optimizer step every --gradient-accumulation-steps batches and at an
                # epoch's last one (accelerate counts micro-steps in accelerator.step)
                accelerator.step = accumulation - 1 if i == batches - 1 else 0 if i == 0 else accelerator.step
                out = step(collate(contrastive.rows_of(rows, order[s:s + cfg.batch_size])).to(accelerator.device))
                if out.update:
                    scheduler.step()
                    done += 1
                if done >= total:
                    break
    finally:
        accelerator.step = before         # the run's own accumulation starts where it would have, named
    model.eval()
    held_rows, predicted = data.train.select_columns(columns).select(held), []
    with torch.no_grad():
        for s in range(0, len(held_rows), cfg.eval_batch_size):
            batch = collate(contrastive.rows_of(held_rows, range(s, min(s + cfg.eval_batch_size, len(held_rows)))))
            predicted.append(model(**batch.to(accelerator.device).inputs).logits.argmax(-1).cpu().numpy())
    labels = np.asarray(data.train_labels)[held]
    return np.concatenate(predicted) == labels
