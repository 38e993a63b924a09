"""A validation split held out of the training data when none is given: stratified (by label for single-label
classification, by quantile bins for regression, by label set for multi-label), seeded, and recorded as the row
numbers that went each way, so that a resumed run, a report and `tuneloop evaluate` see the same rows."""

from __future__ import annotations

import math
import os
from collections import Counter

import numpy as np

from ..exceptions import DataError
from ..layout import SPLIT_FILE
from ..objective import MultiLabel, Regression, SingleLabel
from ..sheets import file_signature
from .label_numbers import _as_float
from .labels import LabelEncoder, LabelSchema, _split_labels
from .readers import decimal_comma

RARE = "(rare)"                    # strata with a single row share one stratum


def _score_bins(raw_labels: list, schema: LabelSchema, n_validation: int, source: str = "") -> tuple[np.ndarray, str]:
    """Regression: quantile bins of the target, read as training reads it (`source` a decimal-comma file: 2,6)."""
    comma = bool(source) and schema.separator != "," and decimal_comma(source)
    values = np.array([_as_float(v, comma, comma and schema.thousands) for v in raw_labels], dtype=float)
    bins = max(2, min(10, n_validation // 2))
    edges = np.unique(np.quantile(values, np.linspace(0, 1, bins + 1)[1:-1]))
    return np.digitize(values, edges).astype(str), f"{len(edges) + 1} quantile bins of the target"


def _label_sets(raw_labels: list, schema: LabelSchema, n_validation: int, source: str = "") -> tuple[np.ndarray, str]:
    keys = [",".join(sorted(i for i in _split_labels(v, schema.separator) if i)) for v in raw_labels]
    return _rare_shared(keys), "label set"


def _labels(raw_labels: list, schema: LabelSchema, n_validation: int, source: str = "") -> tuple[np.ndarray, str]:
    """Single-label: the class each row trains as ("1" and "1.0" one class, as LabelEncoder reads them), by name."""
    encode = LabelEncoder(schema, source)

    def name(raw, pos: int) -> str:
        try:
            return schema.names[encode(raw, pos)]
        except (DataError, TypeError):       # not a training label (none here): a stratum of its own
            return str(raw)

    return _rare_shared([name(v, i) for i, v in enumerate(raw_labels)]), "label"


def _rare_shared(keys: list[str]) -> np.ndarray:
    counts = Counter(keys)
    return np.array([k if counts[k] > 1 else RARE for k in keys])


STRATA = {Regression: _score_bins, MultiLabel: _label_sets, SingleLabel: _labels}   # what each kind stratifies by


def stratify_keys(raw_labels: list, schema: LabelSchema, n_validation: int, source: str = "") -> tuple[np.ndarray, str]:
    """One stratum per row, and how they were made; `source`: the file the labels come from."""
    return STRATA[type(schema.objective)](raw_labels, schema, n_validation, source)


def asked_rows(n: int, fraction: float) -> int:
    """The validation rows `fraction` of `n` asks for, counted as scikit-learn's train_test_split counts them."""
    return math.ceil(n * fraction)


def split_rows(keys: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(training positions, validation positions, stratified?) — positions sorted; stratified when every stratum
    can give a row to each side, else a plain seeded shuffle. Where `fraction` asks for fewer rows than there are
    strata, but at least half as many, one row per stratum is held out instead (48 rows of 6 classes, 8 each: 6
    rows, one a class, rather than 5 drawn at random, which leave a class out of validation and take two rows of
    another from training)."""
    from sklearn.model_selection import train_test_split

    positions = np.arange(len(keys))
    asked, strata = asked_rows(len(keys), fraction), len(set(keys.tolist()))
    size = strata if asked < strata <= 2 * asked else fraction
    try:
        train, validation = train_test_split(positions, test_size=size, random_state=seed, stratify=keys)
        stratified = True
    except ValueError:                  # a stratum too small for both sides, or fewer rows than strata
        train, validation = train_test_split(positions, test_size=fraction, random_state=seed)
        stratified = False
    return np.sort(train), np.sort(validation), stratified


def fold_rows(keys: np.ndarray, fold: int, folds: int, seed: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(training positions, validation positions, stratified?) of fold `fold` (1-based) of `folds`: every row is in
    exactly one fold's validation part; stratified when every stratum has at least `folds` rows."""
    from sklearn.model_selection import KFold, StratifiedKFold

    positions = np.arange(len(keys))
    stratified = min(Counter(keys).values()) >= folds
    splitter = StratifiedKFold(folds, shuffle=True, random_state=seed) if stratified else \
        KFold(folds, shuffle=True, random_state=seed)
    train, validation = list(splitter.split(positions, keys if stratified else None))[fold - 1]
    return np.sort(train), np.sort(validation), stratified


def hold_out(train, schema: LabelSchema, fraction: float, seed: int, source: str, saved: dict | None = None,
             fold: tuple[int, int] | None = None):
    """(training part, validation part, record) of the canonical table `train`. `saved`: a record of this run
    folder's split.json, whose rows are taken as they are (the file must be unchanged). `fold` (k, K): the
    validation part is the k-th of K cross-validation folds instead of a `fraction`."""
    n = len(train)
    if fold is not None:
        fraction = 1 / fold[1]
        if n < fold[1]:
            raise DataError(f"{source}: {n} row(s) are too few for {fold[1]} folds; give more rows or fewer --folds")
    n_validation = asked_rows(n, fraction)
    if n_validation < 1 or n - n_validation < 1:
        raise DataError(f"{source}: {n} row(s) are too few to hold out {fraction:g} of them for validation; give "
                        "--validation-file FILE or more training rows")
    signature = file_signature(source)
    if saved is not None:
        if saved.get("source_signature") != signature:
            raise DataError(f"{source}: the file changed since this run held out its validation rows "
                            f"({SPLIT_FILE}); resume with the same file, or start a new run")
        validation = np.array(saved["validation"], dtype=np.int64)
        train_rows = np.array(saved["train"], dtype=np.int64)
        how = saved["stratified_by"]
    else:
        keys, how = stratify_keys(train["label"], schema, n_validation, source)
        train_rows, validation, stratified = split_rows(keys, fraction, seed) if fold is None else \
            fold_rows(keys, fold[0], fold[1], seed)
        if not stratified:
            how = "none (too few rows per stratum)"
    record = {"fraction": fraction, "seed": seed, "stratified_by": how, "source": source,
              "source_signature": signature, "train": train_rows.tolist(), "validation": validation.tolist()}
    if fold is not None:
        record["fold"] = list(fold)
    return train.select(train_rows), train.select(validation), record


def describe(record: dict, source=None) -> str:
    """The log line of a held-out split; `source`: the training data as given (a Table from Python is named as its
    own words have it, and told how to give validation rows there)."""
    share = f"fold {record['fold'][0]} of {record['fold'][1]}" if record.get("fold") else f"{record['fraction']:g}"
    held, n = len(record["validation"]), len(record["validation"]) + len(record["train"])
    if not record.get("fold") and held > asked_rows(n, record["fraction"]):
        share += " asked; one row per stratum"
    name, own = source.held_out_words() if hasattr(source, "held_out_words") else \
        (os.path.basename(record["source"]), "give --validation-file to use your own")
    return (f"validation: {held} of {n} rows of {name} held out ({share}, stratified by "
            f"{record['stratified_by']}, --split-seed {record['seed']}); {own}")
