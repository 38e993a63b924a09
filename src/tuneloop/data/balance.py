"""Class balance of the training labels: how many rows each class has, loss weights that even it out
(scikit-learn's "balanced" formula; pos_weight per label for multi-label), per-row weights for a balanced
sampler, and a warning when a class is rare."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..exceptions import ConfigError
from .labels import LabelSchema

RARE_SHARE = 0.05          # a class under 5% of the training rows (and half the mean class) is said at start-up


def class_counts(labels: np.ndarray, schema: LabelSchema) -> np.ndarray:
    """Rows per class (single-label), or rows carrying each label (multi-label)."""
    return schema.objective.counts(labels)


def loss_weights(spec: str, schema: LabelSchema, labels: np.ndarray) -> np.ndarray | None:
    """--class-weights: None for `none`; per-class weights (single-label) or per-label pos_weight (multi-label)."""
    if spec == "none":
        return None
    if not schema.objective.classes:
        raise ConfigError("--class-weights: regression has no classes; leave it at none")
    if spec == "balanced":
        return schema.objective.balanced_weights(labels)
    return weights_from_file(spec, schema)


def weights_from_file(path: str, schema: LabelSchema) -> np.ndarray:
    """A JSON object of label name: weight; labels it leaves out weigh 1."""
    def once(pairs):
        seen = [k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i])]
        if seen:
            raise ConfigError(f"--class-weights {path}: {seen[0]!r} is given twice; keep one weight per label")
        return dict(pairs)

    try:
        given = json.loads(Path(path).read_text(encoding="utf-8"), object_pairs_hook=once)
    except (OSError, ValueError) as e:
        raise ConfigError(f"--class-weights {path}: not a readable JSON file ({e})") from None
    if not isinstance(given, dict):
        raise ConfigError(f"--class-weights {path}: expected a JSON object of label: weight")
    unknown = [str(k) for k in given if str(k) not in schema.names]
    if unknown:
        raise ConfigError(f"--class-weights {path}: unknown label(s) {', '.join(unknown)}; the labels are "
                          f"{', '.join(schema.names)}")
    weights = np.ones(schema.num_labels)
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ConfigError(f"--class-weights {path}: the weight of {name!r} must be a positive finite number, got "
                              f"{value!r}")
        weights[schema.names.index(str(name))] = float(value)
    return weights


def sampling_weights(labels: np.ndarray, schema: LabelSchema) -> np.ndarray:
    """--sampler balanced: a row's chance is the inverse of its class's count (multi-label: the mean over its
    labels; rows with none count as a class of their own), so each class is drawn about equally often."""
    if not schema.objective.classes:
        raise ConfigError("--sampler balanced: regression has no classes; use --sampler random")
    return schema.objective.inverse_frequency(labels)


def rare_class_warning(labels: np.ndarray, schema: LabelSchema) -> str | None:
    """A line for the start-up summary when the smallest class is under RARE_SHARE of the training rows and
    under half a class's mean count: 35 classes of 10 rows each are 2.9% each, and balanced already."""
    if not schema.objective.classes or not len(labels):
        return None
    counts = class_counts(labels, schema)
    smallest = int(np.argmin(counts))
    share = counts[smallest] / len(labels)
    if share >= RARE_SHARE or counts[smallest] >= np.mean(counts) / 2:
        return None
    return (f"class {schema.names[smallest]!r} is {share:.1%} of the training rows ({counts[smallest]} of "
            f"{len(labels)}); --class-weights balanced or --sampler balanced keeps a model from ignoring it")
