"""--method setfit: SetFit's two steps (Tunstall et al. 2022) on the run's own model, tokenizer and training rows,
before the training loop.

1. The body, trained contrastively on pairs of rows (`make_pairs`: as the setfit package, every pair of rows of a
   single-label set, same-class pairs with target 1 and other-class pairs with target 0 made as many; larger or
   multi-label sets: rounds pairing each row with a random row of its class and one of another class, the targets
   the Jaccard similarity of the two label sets for multi-label); the cosine similarity of the two rows'
   embeddings (the head's dropout off, as sentence-transformers has none after its pooling) is pulled to the target
   (mean squared error, as sentence-transformers' CosineSimilarityLoss), AdamW with 10% warmup and a linear decay,
   over as many passes as make at least MIN_STEPS steps (--setfit-epochs sets the passes instead).
2. The head: a logistic regression (one per label for multi-label) fitted on the embeddings of every training row,
   copied into the model's final classification Linear, so that the model's softmax (sigmoid) is the regression's
   predict_proba.

A row's embedding is the input of that final Linear, caught by a forward pre-hook while the prepared model runs as
the loop runs it: with `--setfit-pooling mean` (auto for a sentence-transformer such as the embedded MiniLM) the mean
of the last hidden states that replaced the pooler (model/pooling.py), as the setfit package reads it; with `head`
the model's own (BERT: the pooler's output; RoBERTa: the head's dense + tanh; DeBERTa: the context pooler;
decoders: the last token's hidden state). The model stays an AutoModelForSequenceClassification, so everything
after (evaluation, decision rule, model folder, export, serving) is unchanged; with `head`, a transformers pipeline
too. Several processes: every process draws the same pairs and takes its share of each step's pairs; gradients are
averaged through the prepared (DDP) model."""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable

import numpy as np
import torch

from ..data.batch import MODEL_INPUTS, ROW
from ..data.batching import make_collator
from ..exceptions import ConfigError, Interrupted
from ..model.loading import final_linear
from ..model.optim import build_optimizer, build_scheduler
from ..runtime.machine import interactive
from . import pair_pieces
from .head_fit import fit_head, out_of_fold

log = logging.getLogger("tuneloop")

HEAD_FITTED = ("setfit", "probe")   # the methods whose head is a fitted logistic regression (probe: no pair stage)


def check_setfit(config, data) -> None:
    """Refuse, before the run folder is written, what --method setfit cannot train."""
    if config.method not in HEAD_FITTED:
        return
    if not data.labels.objective.classes:
        raise ConfigError(f"--method {config.method} needs class labels (single- or multi-label); this data has "
                          "numeric labels (regression): use --method finetune")
    labels = data.train_labels
    kinds = len(np.unique(labels, axis=0))
    if kinds < 2:
        raise ConfigError(f"--method {config.method} needs training rows of at least two classes (label sets) to "
                          f"fit its head; the {len(labels)} training rows have one")


# ------------------------------------------------------------------------------------------------ pairs
UNIQUE_PAIRS_ROWS = 2000    # up to this many rows, single-label pairs are drawn from every pair of rows
PAIR_LIMIT = 16384          # ... at most this many of each kind by default (the package has no limit)
ROUNDS = 20                 # rounds of pairs by default above UNIQUE_PAIRS_ROWS or for multi-label sets
# Why no tighter default limit: capped at 20 × rows of each kind (until 2026-11-27), the questions set at 16 rows per
# class (6 classes) trained on 3,840 pairs against the package's 7,680 and scored 0.840 against its 0.851 (seeds
# 1-3); with every pair, as the package, 0.853 (benchmarks/results/2026-11-26-epyc-2c-small-data-fewshot.json).
# 16,384 of each kind is every pair at 32 rows per class on 6 classes (15,360); 2,048 steps at most, about 10
# minutes at the 0.29 s a step that questions 16 took on a 2-core EPYC beside another job (an estimate).
MIN_STEPS = 100             # by default, passes over the pairs until the stage has taken at least this many steps
# Why: one pass (the package's default) is 9 steps for a binary set at 8 rows per class (144 pairs) and 34 at 16.
# With ~100 steps (12 and 3 passes), same rows and seeds 1-3, all-MiniLM-L6-v2, 2-core EPYC, 2026-11-27: sentiment
# 0.639 / 0.699 against 0.610 / 0.649, MRPC 0.540 / 0.564 against 0.516 / 0.557, held-out tweets 0.731 / 0.726
# against 0.724 / 0.741; 36 steps at 8 per class did not help (sentiment 0.604, MRPC 0.521). Sets with 100 steps or
# more in one pass (6 classes at 8 per class: 120; binary at 32: 132) are unchanged
# (benchmarks/results/2026-11-27-epyc-2c-fewshot-pair-steps-explore.json). A floor of 200, tried on 2026-11-28
# (benchmarks/results/2026-11-28-epyc-2c-floor200-*-explore.json): questions 8 0.797 → 0.813, but docstrings 8
# 0.539 → 0.528 and tweets and sentiment within ±0.006 at 8-32 per class, in twice the time: not taken.


def make_pairs(labels: np.ndarray, iterations: int | None, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first rows, second rows, targets), shuffled. Single-label, up to UNIQUE_PAIRS_ROWS rows: as the setfit
    package's default ("oversampling"), every pair of rows (a row with itself included) once, the same-class pairs
    (target 1.0) and the other-class pairs (0.0) each taken in a shuffled cycle up to the larger count, so both kinds
    are as many; at most `iterations` × rows of each kind when `iterations` is given, else PAIR_LIMIT (the package
    does not cap: its pairs grow with the square of the rows). Otherwise (more rows, or multi-label), `iterations`
    (default ROUNDS) rounds, each pairing every row with one random row of its class and one of another class;
    multi-label (`labels` a 0/1 matrix): a row sharing a label (rows without labels: another row without) and a row
    with another label set; both targets are the Jaccard similarity of the two sets."""
    rng = np.random.default_rng(seed)
    if labels.ndim == 1 and len(labels) <= UNIQUE_PAIRS_ROWS:
        return unique_pairs(labels, PAIR_LIMIT if iterations is None else iterations * len(labels), rng)
    iterations = iterations or ROUNDS
    multi = labels.ndim == 2
    sets = labels.astype(bool)
    keys = [tuple(row) for row in labels.astype(int)] if multi else labels.tolist()
    groups: dict = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    n = len(labels)
    everyone = np.arange(n)
    same, other = {}, {}
    for key, members in groups.items():          # candidate partners for the rows of each class (label set)
        if multi:
            row = np.asarray(key, dtype=bool)
            shares = (sets & row).any(1) if row.any() else ~sets.any(1)
            same[key], other[key] = everyone[shares], everyone[(sets != row).any(1)]
        else:
            same[key], other[key] = np.asarray(members), everyone[labels != key]
    first, second = [], []
    for _ in range(iterations):                  # a round: every row once with each kind of partner
        positive, negative = np.empty(n, dtype=int), np.empty(n, dtype=int)
        for key, members in groups.items():
            pool = other[key] if len(other[key]) else everyone
            positive[members] = same[key][rng.integers(len(same[key]), size=len(members))]
            negative[members] = pool[rng.integers(len(pool), size=len(members))]
        first += [everyone, everyone]
        second += [positive, negative]
    first, second = np.concatenate(first), np.concatenate(second)
    if multi:
        a, b = labels[first].astype(bool), labels[second].astype(bool)
        union = (a | b).sum(1)
        targets = np.where(union == 0, 1.0, (a & b).sum(1) / np.maximum(union, 1))
    else:
        targets = (labels[first] == labels[second]).astype(float)
    order = rng.permutation(len(first))
    return first[order], second[order], targets[order].astype(np.float32)


def steps_a_pass(pairs: int, size: int, processes: int) -> list[int]:
    """The first pair of each step of a pass: steps of `size` pairs; a last, short one only if every process gets a
    pair of it."""
    return [s for s in range(0, pairs, size) if min(size, pairs - s) >= processes]


def passes(cfg, steps: int) -> int:
    """The stage's passes over its pairs, `steps` a pass: --setfit-epochs, or by default the fewest that make
    MIN_STEPS steps."""
    return cfg.setfit_epochs if cfg.setfit_epochs is not None else max(1, math.ceil(MIN_STEPS / max(1, steps)))


def planned_passes(cfg, labels: np.ndarray, processes: int) -> int:
    """`passes` for the stage on these rows' labels: the pairs it will draw, in steps of --setfit-batch-size."""
    pairs = len(make_pairs(labels, cfg.setfit_iterations, cfg.seed)[0])
    return passes(cfg, len(steps_a_pass(pairs, cfg.setfit_batch_size, processes)))


def unique_pairs(labels: np.ndarray, limit: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """make_pairs for single-label rows: every pair once, each kind cycled up to the larger count (at most
    `limit`)."""
    a, b = np.triu_indices(len(labels))
    order = rng.permutation(len(a))
    a, b = a[order], b[order]
    same = labels[a] == labels[b]
    kinds = [(a[same], b[same]), (a[~same], b[~same])]
    count = min(max(len(kinds[0][0]), len(kinds[1][0])), limit)
    first, second, targets = [], [], []
    for target, (x, y) in zip((1.0, 0.0), kinds, strict=True):
        if len(x):
            take = np.arange(count) % len(x)
            first.append(x[take])
            second.append(y[take])
            targets.append(np.full(count, target, dtype=np.float32))
    first, second, targets = np.concatenate(first), np.concatenate(second), np.concatenate(targets)
    order = rng.permutation(len(first))
    return first[order], second[order], targets[order]


# ------------------------------------------------------------------------------------------------ embeddings
STAGE_HEAD_DROPOUT = False  # whether the head's dropout layers (outside the encoder) are on in the pair stage
# Why off: sentence-transformers has no dropout after its pooling, so the package trains the cosine on the undropped
# mean; with BERT's classifier dropout on it, the stage's embedding differs from what the head later reads. With the
# same pairs in the same order and every dropout at 0, the stage's trained weights equal the package's to 6e-5 or
# closer on three sets (benchmarks/check_setfit_same_step.py): that dropout was the one difference left. Questions
# at 8 rows per class, nine runs (three row sets x three run seeds) on 4,031 wide rows, 2-core Zen 4, 2026-11-28:
# 0.781 with it off against 0.774 with it on and the package's 0.785 (results/2026-11-28-epyc-2c-questions8-wide*).


def head_dropouts(plain) -> list:
    """The dropout layers outside the model's encoder (`base_model`), between its sentence embedding and the final
    Linear: BERT's classifier dropout, RoBERTa's head dropouts, DistilBERT's seq_classif dropout, DeBERTa's."""
    model = plain.get_base_model() if hasattr(plain, "get_base_model") else plain      # under LoRA: the model
    encoder = {id(m) for m in getattr(model, "base_model", model).modules()}
    return [m for m in model.modules() if id(m) not in encoder and type(m).__name__.endswith("Dropout")]


def head_linear(model, num_labels: int) -> torch.nn.Linear:
    """The model's final classification Linear (loading.final_linear with num_labels outputs)."""
    found = final_linear(model, num_labels)
    if found is None:
        raise ConfigError(f"--method setfit: found no classification layer with {num_labels} outputs in this model")
    return found[1]


class Embedder:
    """Rows → the inputs of the final Linear, through `model` (the prepared model: chunked attention, fast dropout
    and mixed precision as in the loop) with a forward pre-hook on that Linear."""

    def __init__(self, model, head: torch.nn.Linear, tokenizer, config, device, pad_token_id):
        self.model, self.head, self.device, self.pad_token_id = model, head, device, pad_token_id
        self.collate = make_collator(tokenizer, config.pad_to_max_length, config.max_length)

    def __call__(self, rows: list[dict]):
        """(embeddings [rows, features], logits) of one batch of tokenized rows."""
        batch = self.collate(rows).to(self.device)
        caught = []
        handle = self.head.register_forward_pre_hook(lambda module, args: caught.append(args[0]))
        try:
            logits = self.model(**batch.inputs).logits
        finally:
            handle.remove()
        x = caught[-1]
        if x.dim() == 3:             # a decoder: the score runs on every position; the logits are the last token's
            ids = batch.inputs["input_ids"]
            if self.pad_token_id is None:
                last = torch.full((ids.shape[0],), ids.shape[1] - 1, device=ids.device)
            else:        # transformers' rule: the rightmost token that is not padding
                positions = torch.arange(ids.shape[1], device=ids.device, dtype=torch.int32)
                last = (positions * (ids != self.pad_token_id).to(torch.int32)).argmax(-1)
            x = x[torch.arange(ids.shape[0], device=ids.device), last]
        return x.float(), logits


def rows_of(ds, indices) -> list[dict]:
    """Tokenized rows as the collator takes them."""
    columns = ds[[int(i) for i in indices]]
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]


# ------------------------------------------------------------------------------------------------ the two steps
def head_objective(config, objective, schema, labels, quiet: bool = False):
    """What a fitted head weighs its rows by: the run's class weights (--class-weights, in its `objective`); with
    --sampler balanced, which draws no batches here, the balanced weights it stands for (said unless `quiet`: the
    folds of --method auto fit their heads so too)."""
    if config.sampler != "balanced" or objective.weights is not None:
        return objective
    from ..objective import objective_for

    if not quiet:
        log.info("--sampler balanced: the head is fitted on every row once (no batches are drawn), so it weighs the "
                 "classes as balanced instead")
    return objective_for(schema, objective.balanced_weights(labels))


def set_head(head, fitted: dict) -> None:
    """The fitted head's weight (and bias) copied into the model's final Linear."""
    with torch.no_grad():
        head.weight.copy_(torch.as_tensor(fitted["weight"], dtype=head.weight.dtype))
        if head.bias is not None:
            head.bias.copy_(torch.as_tensor(fitted["bias"], dtype=head.bias.dtype))


def texts_of(rows):
    """The text each training row comes from (--windows: a long text's windows share it), or None."""
    return rows[ROW] if ROW in rows.column_names else None


def train_body_and_head(run, signals) -> dict:
    """SetFit's two steps on the run's prepared model; returns results.json's "setfit" section (the probe also sets
    run.out_of_fold, for finish.py). `signals` (signals.StopSignals): the signal any process received, read after
    each pair step; a first stop says the stage saves no checkpoint."""
    cfg, acc, data = run.config, run.accelerator, run.data
    model = getattr(run.model, "_orig_mod", run.model)        # a compiled model runs eagerly here
    plain = acc.unwrap_model(run.model, keep_torch_compile=False)
    head = head_linear(plain, data.labels.num_labels)
    rows = data.train.select_columns([c for c in MODEL_INPUTS if c in data.train.column_names])   # no targets
    embed = Embedder(model, head, run.tokenizer, cfg, acc.device, plain.config.get_text_config().pad_token_id)
    labels = data.train_labels
    started = time.perf_counter()
    with signals.saying("stopping after this pair step (the SetFit stage saves no checkpoint: nothing to resume)"):
        body = (train_body(model, head, embed, rows, labels, cfg, acc, lambda: signals.received(acc))
                if cfg.method == "setfit" else
                {"pairs": 0, "steps": 0, "epochs": 0, "iterations": 0, "batch_size": cfg.setfit_batch_size,
                 "lr": 0.0, "loss_first": None, "loss_last": None})      # the probe: the frozen embedding
    features = embeddings(model, embed, rows, cfg.eval_batch_size)
    objective = head_objective(cfg, run.objective, data.labels, labels)
    fitted = fit_head(features, labels, objective, head.bias is not None, cfg.seed)
    if cfg.method == "probe":                 # the frozen body: a head's folds score rows as the saved model would
        run.out_of_fold = out_of_fold(features, labels, objective, head.bias is not None, cfg.seed,
                                      texts_of(data.train))
    set_head(head, fitted)
    if acc.num_processes > 1:                 # the same head everywhere, whatever the float noise
        from accelerate.utils import broadcast

        for p in head.parameters():
            broadcast(p.data, from_process=0)
    model.train()
    seconds = time.perf_counter() - started
    summary = {**body, "method": cfg.method, "head": "logistic" if cfg.method == "probe" else cfg.setfit_head,
               "pooling": cfg.setfit_pooling, "head_fit_s": fitted["seconds"],
               "head_train_accuracy": fitted["train_accuracy"], "seconds": round(seconds, 3)}
    if cfg.method == "probe":
        log.info(f"probe: a logistic-regression head on the frozen embedding of {len(labels)} rows (training "
                 f"accuracy {fitted['train_accuracy']:.4f}) in {seconds:.1f} s")
    else:
        log.info(f"SetFit: {body['pairs']} pairs in {body['steps']} steps (loss {body['loss_first']:.4f} → "
                 f"{body['loss_last']:.4f}), then a logistic-regression head (training accuracy "
                 f"{fitted['train_accuracy']:.4f}) in {seconds:.1f} s" +
                 ("; the training loop now trains every weight from it" if cfg.setfit_head == "end-to-end" else ""))
    return summary


def train_body(model, head, embed: Embedder, rows, labels, cfg, acc, stop: Callable[[], int]) -> dict:
    """The contrastive stage: each step embeds both rows of its pairs in one forward pass (one pass per step,
    as DDP wants; on a CPU, in pieces where that pass would not fit in memory: pair_pieces.py) and pulls their
    cosine similarity to the target. SIGINT/SIGTERM ends it after the step, with
    nothing saved (the stage keeps no checkpoints: a resume could only run it again). A loss over every pair of a
    step's rows was tried and not kept: benchmarks/results/2026-11-28-epyc-2c-inbatch-pairs-explore.json."""
    from tqdm.auto import tqdm

    first, second, targets = make_pairs(labels, cfg.setfit_iterations, cfg.seed)
    size, rank, processes = cfg.setfit_batch_size, acc.process_index, acc.num_processes
    starts = steps_a_pass(len(first), size, processes)
    epochs = passes(cfg, len(starts))
    total = min(len(starts) * epochs, cfg.max_steps or len(starts) * epochs)
    optimizer = build_optimizer(model, cfg.setfit_lr, cfg.weight_decay, acc.device.type, exclude=head.parameters())
    params = [p for group in optimizer.param_groups for p in group["params"]]     # the body's: the head is fitted
    scheduler = build_scheduler(optimizer, "linear", total, 0, 0.1)
    clip = 1.0 if cfg.max_grad_norm is None else cfg.max_grad_norm     # SetFit clips at 1 (0: no clipping)
    scaler = torch.amp.GradScaler(acc.device.type) if getattr(acc, "scaler", None) is not None else None
    speaks = not cfg.quiet and acc.is_main_process
    if speaks and not interactive():
        log.info(f"SetFit: training the body on {len(first)} pairs, {total} steps of {size} ({epochs} pass(es))")
    with tqdm(total=total, desc="SetFit pairs", unit="step", dynamic_ncols=True,
              disable=not speaks or not interactive(), file=sys.stderr) as bar:
        losses, most = [], 1
        lengths = np.asarray([len(ids) for ids in rows["input_ids"]])
        text_config = acc.unwrap_model(model).config.get_text_config()
        model.train()
        if not STAGE_HEAD_DROPOUT:        # as sentence-transformers trains: no dropout after the pooling
            for module in head_dropouts(acc.unwrap_model(model)):
                module.eval()
        for epoch in range(epochs):
            if len(losses) == total:
                break
            order = np.random.default_rng([cfg.seed, epoch]).permutation(len(starts)) if epoch else range(len(starts))
            for s in (starts[i] for i in order):
                share = slice(s + rank, min(s + size, len(first)), processes)   # this process's pairs of the step
                a, b = first[share], second[share]
                longest = cfg.max_length if cfg.pad_to_max_length else int(lengths[np.concatenate([a, b])].max())
                piece = pair_pieces.pairs_a_piece(text_config, longest, len(a), acc.device.type, processes)
                most = max(most, math.ceil(len(a) / piece))
                loss = pair_pieces.backward(lambda i: embed(rows_of(rows, i)), a, b, targets[share], scaler, piece)
                pair_pieces.apply(optimizer, scheduler, scaler, params, clip)
                losses.append(loss)                                 # detached by pair_pieces.backward
                bar.update(1)
                if len(losses) % cfg.log_every == 0:
                    bar.set_postfix(loss=f"{float(losses[-1]):.4f}", refresh=False)
                if len(losses) == total:                           # --max-steps: the stage's steps too
                    break
                if signal_number := stop():
                    raise Interrupted(f"interrupted in the SetFit stage after {len(losses)} of {total} pair steps; "
                                      "the stage saves no checkpoint, so nothing to resume: run the same command "
                                      "again with --overwrite (in Python: overwrite=True)", signal_number)
    losses = acc.reduce(torch.stack(losses), reduction="mean") if losses else torch.full((1,), math.nan)
    window = max(1, min(10, len(losses) // 4))          # the mean loss of the first and of the last steps
    mean = [float(losses[:window].mean()), float(losses[-window:].mean())]
    return {"pairs": len(first), "steps": total, "epochs": epochs,
            "min_steps": None if cfg.setfit_epochs is not None else MIN_STEPS,      # None: the passes were given
            "iterations": cfg.setfit_iterations,
            "pair_limit": PAIR_LIMIT if cfg.setfit_iterations is None else None, "batch_size": size,
            "lr": cfg.setfit_lr, "max_steps": cfg.max_steps, "loss_first": round(mean[0], 5),
            "loss_last": round(mean[1], 5),
            "pieces": most}        # the most forward/backward passes a step took (pair_pieces.py; 1: whole)


@torch.no_grad()
def embeddings(model, embed: Embedder, rows, batch_size: int) -> np.ndarray:
    """Every training row's embedding, in eval mode (what the saved model computes), in row order."""
    model.eval()
    out = [embed(rows_of(rows, range(s, min(s + batch_size, len(rows)))))[0].cpu().numpy()
           for s in range(0, len(rows), batch_size)]
    return np.concatenate(out)
