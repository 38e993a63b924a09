"""One pair step of the contrastive stage (contrastive.train_body), in pieces that fit in memory.

On a CPU, attention over long texts keeps each row's attention matrices (layers × heads × length², in fp32: the
scores' softmax, the dropped-out copy, the mask) for the backward pass: the step of 16 pairs (32 rows) on texts of
512 tokens peaked at 12.3 GB in its first step and passed 15 GB during its second on all-MiniLM-L6-v2, and a
benchmark run of it was killed by the kernel at 24 GB (2026-11-29, 2-core EPYC; the same step on texts of 256
tokens: 5.8 GB). A step whose rows would keep more than ATTENTION_BUDGET bytes of attention matrices runs as several
forward and backward passes over pieces of its pairs, their gradients summed, then one optimizer step: the loss (the
mean squared error over the step's pairs) is a sum over pairs, so this is the step's gradient, up to float rounding
and the order in which dropout masks are drawn (tests/test_setfit_pieces.py: equal weights with every dropout at 0).
A step under the budget runs whole, as before. GPUs (SDPA's memory-efficient kernels keep no attention matrices) and
several processes (each with its share of a step's pairs) run every step whole."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

ATTENTION_BUDGET = 2 << 30     # bytes of attention matrices a piece's rows may keep (MiniLM: 37 rows of 256 tokens)
SAVED_COPIES = 3               # fp32 matrices a row keeps per layer and head for the backward pass


def pairs_a_piece(text_config, longest: int, pairs: int, device_type: str, processes: int) -> int:
    """How many of a step's `pairs` go through one forward and backward pass, for rows padded to `longest`
    tokens: all of them unless, on a CPU in one process, their rows' attention matrices would pass the budget."""
    if device_type != "cpu" or processes > 1:
        return pairs
    layers = getattr(text_config, "num_hidden_layers", None) or 12
    heads = getattr(text_config, "num_attention_heads", None) or 12
    per_row = layers * heads * longest * longest * 4 * SAVED_COPIES
    return int(max(1, min(pairs, ATTENTION_BUDGET // (2 * per_row))))


def backward(embed_rows: Callable, a: np.ndarray, b: np.ndarray, targets: np.ndarray, scaler,
             piece: int) -> torch.Tensor:
    """Forward and backward over the pairs (a[i], b[i]), `piece` pairs at a time; returns the step's loss
    (detached): the mean squared error of each pair's cosine similarity against its target. `embed_rows(indices)`
    gives (embeddings, logits) of those rows."""
    total = None
    for s in range(0, len(a), piece):
        first, second = a[s:s + piece], b[s:s + piece]
        x, logits = embed_rows(np.concatenate([first, second]))
        similarity = torch.nn.functional.cosine_similarity(x[:len(first)], x[len(first):], dim=-1)
        target = torch.as_tensor(targets[s:s + piece], device=x.device)
        # this piece's share of the step's mean (× 1.0, exact, for a step run whole); + 0 × logits: the head's
        # weights take part in the graph (DDP wants every parameter used)
        loss = torch.nn.functional.mse_loss(similarity, target) * (len(first) / len(a)) + 0.0 * logits.float().sum()
        (scaler.scale(loss) if scaler else loss).backward()
        total = loss.detach() if total is None else total + loss.detach()
    return total


def apply(optimizer, scheduler, scaler, params, clip: float) -> None:
    """The optimizer step after a step's backward passes: unscaling (fp16), clipping at `clip` (0: none), step,
    schedule, zero_grad."""
    if scaler:
        scaler.unscale_(optimizer)
    if clip:
        torch.nn.utils.clip_grad_norm_(params, clip)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
