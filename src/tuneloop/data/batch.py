"""The batch contract: what a DataLoader of tokenized rows yields. The model's inputs, the targets (gold labels,
and room for per-row weights and soft target distributions) and the rows they come from are separate fields;
this module is the one place that knows which columns a model takes (`MODEL_INPUTS`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

# what a sequence-classification model's forward takes, in the order tokenizers give them
MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
LABELS = "labels"              # gold targets: class ids, 0/1 per label, or scores
WEIGHTS = "weight"             # optional: one weight per row (the loss is their weighted mean)
SOFT = "soft_labels"           # optional: a target distribution per row (e.g. a teacher's probabilities)
GOLD = "gold"                  # optional: 1 where a row's `labels` are given (gold), 0 where only `soft` is
FEATURES = "teacher_features"  # optional: a teacher's sentence features per row (the mean of its last hidden states)
ROW = "doc"                    # the canonical row a tokenized row comes from (windows share one)
TARGETS = (LABELS, WEIGHTS, SOFT, GOLD, FEATURES)


def model_inputs(mapping) -> dict:
    """The entries of `mapping` (a dict of tensors or lists) that the model takes."""
    return {k: mapping[k] for k in MODEL_INPUTS if k in mapping}


def text_count(ds) -> int:
    """The texts of a tokenized split (a datasets.Dataset): with --windows a long text is several rows, which
    share its ROW."""
    return len(set(ds[ROW])) if ROW in ds.column_names else len(ds)


def batch_columns(column_names, with_row: bool = True) -> list[str]:
    """The columns of a tokenized split that batches carry: the model's inputs, the targets it has, the row."""
    wanted = MODEL_INPUTS + TARGETS + ((ROW,) if with_row else ())
    return [c for c in wanted if c in column_names]


@dataclass
class Batch:
    """One batch: `inputs` go to the model as they are; the rest never does."""

    inputs: dict
    labels: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    soft: torch.Tensor | None = None
    rows: torch.Tensor | None = None
    gold: torch.Tensor | None = None
    features: torch.Tensor | None = None

    @classmethod
    def from_mapping(cls, mapping) -> "Batch":
        """From a collated dict of tensors (DataCollatorWithPadding's output)."""
        return cls(model_inputs(mapping), mapping.get(LABELS), mapping.get(WEIGHTS), mapping.get(SOFT),
                   mapping.get(ROW), mapping.get(GOLD), mapping.get(FEATURES))

    def __len__(self) -> int:
        return next(iter(self.inputs.values())).shape[0]

    def to(self, device, non_blocking: bool = False) -> "Batch":
        """On `device` (Accelerate's prepared loaders call this for each batch)."""
        def move(x):
            return x.to(device, non_blocking=non_blocking) if isinstance(x, torch.Tensor) else x

        return Batch({k: move(v) for k, v in self.inputs.items()},
                     *(move(getattr(self, f.name)) for f in fields(self)[1:]))

    @property
    def shapes(self) -> dict:
        """Each tensor's shape, by column name (the dry run prints them)."""
        named = {**self.inputs, LABELS: self.labels, WEIGHTS: self.weights, SOFT: self.soft, GOLD: self.gold,
                 FEATURES: self.features}
        return {k: list(v.shape) for k, v in named.items() if v is not None}


class BatchCollator:
    """Rows → a padded `Batch`: transformers' DataCollatorWithPadding (dynamic padding to the longest row, or to
    a multiple, or to --max-length), then split by the contract above."""

    def __init__(self, tokenizer, pad_to_max_length: bool = False, max_length: int | None = None,
                 pad_to_multiple_of: int | None = None):
        from transformers import DataCollatorWithPadding

        if pad_to_max_length:
            self.pad = DataCollatorWithPadding(tokenizer, padding="max_length", max_length=max_length)
        else:
            self.pad = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to_multiple_of)
        # a length bucket (a multiple) never pads past --max-length, else the tokenizer's maximum (at most the
        # model's position embeddings, model/loading.fit_to_positions): --max-length 120 in buckets of 16 would
        # give 128 columns to a model with 120 positions
        known = getattr(tokenizer, "model_max_length", None)
        limit = max_length or (known if known and known < 10 ** 6 else None)
        self.limit = limit if pad_to_multiple_of and not pad_to_max_length else None
        self.left = getattr(tokenizer, "padding_side", "right") == "left"

    def __call__(self, rows: list[dict]) -> Batch:
        padded = self.pad(rows)
        width = padded["input_ids"].shape[1]
        if self.limit is not None and width > self.limit >= max(len(r["input_ids"]) for r in rows):
            cut = slice(width - self.limit, None) if self.left else slice(0, self.limit)
            padded = {k: v[:, cut] if k in MODEL_INPUTS else v for k, v in padded.items()}
        return Batch.from_mapping(padded)
