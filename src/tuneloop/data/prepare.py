"""The data step of a run: read the splits, decide the labels, tokenize; returns PreparedData."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..config.data_options import DataOptions
from ..exceptions import DataError
from ..tasks import REGRESSION, TaskSpec, get_task
from .labels import LabelEncoder, LabelSchema, infer_label_schema
from .long_texts import TextPolicy, default_max_length
from .overlap import check_overlap
from .sources import RawData, load_raw
from .split import describe as describe_split
from .split import hold_out
from .tokenize import describe_stats, tokenize
from .unknown_tokens import check_unknown_tokens

log = logging.getLogger("tuneloop")


@dataclass
class PreparedData:
    """Tokenized splits ready for DataLoaders, and what they mean."""

    raw: RawData
    labels: LabelSchema
    task: Optional[TaskSpec]
    train: Optional[object]
    evaluation: dict[str, object]
    test: dict[str, object]
    # split -> {"rows", "read_s", "read_cached", "tokenized_rows", "tokenize_s", "tokenize_cached",
    # "tokenize_rows_per_s", "num_proc"}: what reading and tokenizing cost, and whether the Arrow cache served it
    stats: dict[str, dict] = field(default_factory=dict)
    split: Optional[dict] = None          # the held-out validation split (data/split.py), when there was one
    policy: Optional[TextPolicy] = None   # how texts longer than the maximum length were read (long_texts.py)

    @functools.cached_property
    def train_labels(self):
        """The training split's encoded labels as an array (class ids, or 0/1 rows for multi-label)."""
        return np.asarray(self.train.with_format("numpy")["labels"])

    @property
    def text_columns(self) -> tuple[str, ...]:
        return self.raw.text_columns


def _limit(ds, n):
    return ds if ds is None or n is None or n >= len(ds) else ds.select(range(n))


def _say_meaningless_correlation(ds, rows: int, where: str) -> None:
    """A regression's evaluation split on which Pearson and Spearman say nothing of the model: 1-2 rows (the
    correlation of two points is +-1, of one is undefined) or one target value for every row (undefined; metrics.py
    reports 0); said, since Pearson is a regression's main metric (what --metric-for-best, experiments and searches
    compare by default). The mse is still the model's."""
    targets = np.unique(np.asarray(ds["labels"], dtype=float)) if "labels" in ds.column_names else None
    if rows == 0 or targets is None:
        return
    if rows <= 2:
        why = f"has {rows} row{'s' if rows > 1 else ''}: Pearson and Spearman on {rows} are " \
              + ("+1, -1 or 0" if rows == 2 else "undefined (reported as 0)") + " whatever the model predicts"
    elif len(targets) == 1:
        why = f"gives every row the same target ({targets[0]:g}): Pearson and Spearman are undefined (reported as 0)"
    else:
        return
    log.warning(f"{where} {why}; read its mse, or give a validation file with more rows and varied targets (at "
                "least 20 rows)")


def holds_out_validation(config: DataOptions) -> bool:
    """The user's training file without a validation file: the validation rows are held out of it."""
    return bool(config.train_file and not config.validation_file and not config.data_dir)


def prepare_data(config: DataOptions, tokenizer, labels: LabelSchema | None = None, with_train: bool = True,
                 with_test: bool = False, text_columns=None, saved_split: dict | None = None,
                 fold: tuple[int, int] | None = None) -> PreparedData:
    """Read, map labels, hold out a validation split when there is none, tokenize (cached by `datasets`).
    `config`: the data options (a TrainConfig is one). `labels` given (a trained model's) skips inference;
    `saved_split`: a run folder's split.json to reuse; `fold`: (k, K), a k-fold run's held-out fold."""
    task = get_task(config.task)
    held_out = holds_out_validation(config)
    raw = load_raw(config, with_train=with_train or held_out, with_test=with_test, text_columns=text_columns)
    if with_train and raw.train is None:
        raise DataError("no training data: give --train-file FILE, or --task with --data-dir")
    if labels is None:                    # from all training rows, before any are held out or left out
        labels = infer_label_schema(raw.train, config.problem_type, config.label_separator,
                                    raw.source.get("train", "training data"), task)
    held = None
    if held_out and not raw.evaluation:
        train, validation, held = hold_out(raw.train, labels, config.validation_split, config.split_seed,
                                            raw.source["train"], saved_split, fold)
        raw.train = train if with_train else None
        raw.evaluation, raw.source["validation"] = {"validation": validation}, raw.source["train"]
        log.info(describe_split(held, config.train_file))
    raw.train = _limit(raw.train, config.max_train_samples)
    raw.evaluation = {k: _limit(v, config.max_eval_samples) for k, v in raw.evaluation.items()}
    max_length = config.max_length or default_max_length(tokenizer)
    policy = TextPolicy(max_length, config.truncation, config.windows, config.window_pooling)
    policy.check(tokenizer, raw.pair)

    stats = {split: dict(s) for split, s in raw.stats.items()}
    if raw.train is not None:             # validation rows that are training rows: said, counted (overlap.py)
        for split, count in check_overlap(raw.train, raw.evaluation, raw.source, held is not None).items():
            stats.setdefault(split, {})["rows_in_training"] = count

    def run(ds, split, with_labels):
        encoder = LabelEncoder(labels, raw.source.get(split, split), accept_ids=task is not None) if with_labels \
            else None
        return tokenize(ds, tokenizer, policy, raw.pair, encoder, f"Tokenizing {split}", config.num_proc,
                        stats=stats.setdefault(split, {}))

    train = run(raw.train, "train", True) if raw.train is not None else None
    if train is not None:                 # a vocabulary that cannot read the texts: said, or the run stops
        stats["train"]["unknown_token_share"] = round(
            check_unknown_tokens(train, tokenizer, raw.train, raw.source.get("train", "training data")), 4)
    evaluation = {name: run(ds, name, True) for name, ds in raw.evaluation.items()}
    test = {name: run(ds, name, False) for name, ds in raw.test.items()}
    for split, s in stats.items():
        log.info(describe_stats(split, s))
    if labels.problem_type == REGRESSION:
        for name, ds in evaluation.items():
            _say_meaningless_correlation(ds, len(raw.evaluation[name]), raw.source.get(name, name))
    return PreparedData(raw, labels, task, train, evaluation, test, stats, held, policy)

