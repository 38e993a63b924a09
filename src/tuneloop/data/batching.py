"""Batches (`batch.Batch`): a seeded, length-grouped training order that depends only on (seed, epoch), dynamic
padding, and evaluation in length-sorted batches whose order maps back to the rows."""

from __future__ import annotations

import numpy as np
import torch

from .batch import BatchCollator, batch_columns


class LengthGroupedSampler(torch.utils.data.Sampler):
    """A random order in which neighbouring examples have similar lengths, so batches carry little padding.

    Shuffle, cut into mega-batches of 50 batches, sort each by length, then shuffle the order of the batches.
    The order depends only on (seed, epoch): a resumed run sees the same batches. `group=False` gives a plain
    seeded shuffle. `weights` (one per row): an epoch draws as many rows, with replacement, each with chance
    proportional to its weight (--sampler balanced), then groups them by length the same way.
    """

    def __init__(self, lengths, batch_size: int, seed: int, group: bool = True, megabatch: int = 50,
                 weights=None):
        self.lengths = np.asarray(lengths)
        self.batch_size, self.seed, self.group, self.megabatch = batch_size, seed, group, megabatch
        self.weights = None if weights is None else np.asarray(weights, dtype=float) / np.sum(weights)
        self.epoch = 0

    def set_epoch(self, epoch: int):
        self.epoch = epoch

    def __len__(self):
        return len(self.lengths)

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        if self.weights is None:
            order = rng.permutation(len(self.lengths))
        else:
            order = rng.choice(len(self.lengths), size=len(self.lengths), replace=True, p=self.weights)
        if self.group:
            size = self.batch_size * self.megabatch
            chunks = [order[i:i + size] for i in range(0, len(order), size)]
            order = np.concatenate([c[np.argsort(-self.lengths[c], kind="stable")] for c in chunks])
            # shuffle the order of the full batches (as rows of a matrix, not a list of arrays); the final
            # (possibly short) batch stays last so every other batch stays full
            n_full = len(order) // self.batch_size
            head = order[:n_full * self.batch_size].reshape(n_full, self.batch_size)
            order = np.concatenate([head[rng.permutation(n_full)].reshape(-1), order[n_full * self.batch_size:]])
        return (int(i) for i in order)   # not order.tolist(): no Python list of the whole set


def length_sorted(ds):
    """The split sorted longest first (evaluation batches then pad little); each row keeps its `doc`, which puts
    predictions back in row order (metrics.pool_windows)."""
    if "length" not in ds.column_names:
        return ds
    return ds.select(np.argsort(-np.asarray(ds.with_format("numpy")["length"]), kind="stable"))


def make_collator(tokenizer, pad_to_max_length: bool, max_length: int | None,
                  pad_to_multiple_of: int | None = None) -> BatchCollator:
    """Dynamic padding to each batch's longest example (or to --max-length for fixed shapes), into `Batch`es."""
    return BatchCollator(tokenizer, pad_to_max_length, max_length, pad_to_multiple_of)


def batch_table(ds, with_row: bool = True):
    """The columns batches carry (batch.batch_columns), as torch tensors (the chapter's remove_columns /
    set_format step); `with_row` keeps each example's canonical row, for pooling windows back into one prediction
    per text and for training dynamics."""
    return ds.select_columns(batch_columns(ds.column_names, with_row)).with_format("torch")


def length_bucket(max_length: int | None) -> int:
    """The multiple that padded lengths are rounded up to for a compiled model: 16 up to 128 tokens (8 shapes
    at --max-length 128), 32 beyond (16 shapes at 512)."""
    return 16 if max_length is not None and max_length <= 128 else 32


def loader_options(workers: int, pin_memory: bool) -> dict:
    """Worker processes collate batches while the device computes; pinned pages let the copy to the GPU run
    without blocking (Accelerate's non_blocking)."""
    return {"num_workers": workers, "pin_memory": pin_memory, "persistent_workers": workers > 0}


def train_loader(ds, config, collator, global_batch: int | None = None, weights=None,
                 pin_memory: bool = False):
    """Batches of `config.batch_size`, in an order grouped by the global batch (per device × processes ×
    accumulation): 1 process × batch 8, 2 × 4 and 4 accumulated × 2 then see the same examples per step.
    `weights`: per-row sampling weights (--sampler balanced). Batches carry each example's `doc` (its training row,
    for training/dynamics.py), kept apart from the model's inputs (batch.Batch)."""
    lengths = np.asarray(ds.with_format("numpy")["length"])
    sampler = LengthGroupedSampler(lengths, global_batch or config.batch_size, config.seed,
                                   group=config.group_by_length, weights=weights)
    # a private generator: iterating must not draw from the global torch RNG, or a resumed run's dropout masks
    # would differ from the uninterrupted run's
    return torch.utils.data.DataLoader(batch_table(ds), batch_size=config.batch_size,
                                       sampler=sampler, collate_fn=collator, drop_last=False,
                                       generator=torch.Generator(),
                                       **loader_options(config.dataloader_workers or 0, pin_memory))


def eval_loader(ds, batch_size, collator, workers: int = 0, pin_memory: bool = False):
    """Longest first, so batches pad little."""
    ds = length_sorted(ds)
    loader = torch.utils.data.DataLoader(batch_table(ds), batch_size=batch_size,
                                         shuffle=False, collate_fn=collator, generator=torch.Generator(),
                                         **loader_options(workers, pin_memory))
    return loader


def epoch_batches(loader, epoch: int, batches_done: int, accelerator):
    """The epoch's batches in their seeded order; in an epoch a resumed run starts in the middle of, without the
    `batches_done` already trained on (the sampler replays the epoch's order, Accelerate skips them)."""
    loader.set_epoch(epoch)
    if batches_done:
        return accelerator.skip_first_batches(loader, batches_done)
    return loader
