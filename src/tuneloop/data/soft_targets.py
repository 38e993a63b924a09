"""Soft targets: a teacher's outputs for each row of a training file (probabilities per class, per label, or a
score), saved beside the run (`tuneloop distill` writes them once) and attached to the tokenized training split as
the `soft_labels` and `gold` columns (data/batch.py), matched by the row each tokenized row comes from; with
`--feature-weight`, the teacher's sentence features too (`teacher_features`)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..atomic import atomic_write_bytes
from ..exceptions import DataError
from .batch import FEATURES, GOLD, ROW, SOFT
from .labels import LabelSchema


@dataclass
class SoftTargets:
    """`soft`: (rows, columns) float32, a row per training-file row in order; `gold`: 1 where the row's label is a
    given one (0: the teacher's); `labels`: what the columns mean (the teacher's label schema); `key`: what they
    were computed from (texts and teacher), so a stale file is never reused; `features`: (rows, hidden size) float32,
    the teacher's sentence features, when asked for (None otherwise)."""

    soft: np.ndarray
    gold: np.ndarray
    labels: LabelSchema
    key: str = ""
    features: np.ndarray | None = None

    def save(self, path: str | Path) -> None:
        buffer = io.BytesIO()
        extra = {} if self.features is None else {"features": self.features.astype(np.float32)}
        np.savez(buffer, soft=self.soft.astype(np.float32), gold=self.gold.astype(np.int8),
                 labels=np.array(json.dumps(self.labels.to_dict())), key=np.array(self.key), **extra)
        atomic_write_bytes(path, buffer.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> "SoftTargets":
        if not Path(path).is_file():
            raise DataError(f"--soft-targets {path}: no such file (tuneloop distill writes it in the run folder)")
        with np.load(path) as f:
            return cls(f["soft"], f["gold"], LabelSchema.from_dict(json.loads(str(f["labels"]))), str(f["key"]),
                       f["features"] if "features" in f.files else None)


class Attach:
    """`datasets.map` function adding each tokenized row's soft targets and gold flag by its canonical row (a class
    so that datasets fingerprints it by the file's content)."""

    def __init__(self, targets: SoftTargets):
        self.soft, self.gold, self.features = targets.soft, targets.gold, targets.features

    def __call__(self, batch):
        rows = np.asarray(batch[ROW])
        out = {SOFT: self.soft[rows].tolist(), GOLD: self.gold[rows].astype(np.int64).tolist()}
        if self.features is not None:
            out[FEATURES] = self.features[rows].tolist()
        return out


def attach(train, path: str | Path):
    """The tokenized training split with `soft_labels` and `gold` columns from the soft-targets file `path`."""
    targets = SoftTargets.load(path)
    rows = np.asarray(train.with_format("numpy")[ROW]) if len(train) else np.zeros(0, dtype=np.int64)
    if len(rows) and rows.max() >= len(targets.soft):
        raise DataError(f"--soft-targets {path}: {len(targets.soft)} rows of soft targets, but the training data has "
                        f"row {int(rows.max()) + 1}; the file belongs to other training data")
    return train.map(Attach(targets), batched=True, batch_size=1000, desc="Attaching soft targets")


def schema_of(path: str | Path) -> LabelSchema:
    """The label schema the soft targets' columns follow (a run trained on them takes it, not the labels' own)."""
    return SoftTargets.load(path).labels
