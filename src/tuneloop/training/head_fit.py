"""The fitted head of --method setfit and --method probe (contrastive.py): a scikit-learn logistic regression on the
rows' sentence embeddings, as the weight and bias of the model's final Linear; and the stratified folds of the
training rows that both the probe's out-of-fold logits (for the decision rule, finish.py) and --method auto's
cross-validation (choose.py) use."""

from __future__ import annotations

import logging
import time

import numpy as np

log = logging.getLogger("tuneloop")

ABSENT = 30.0            # |logit| for a class no training row has (or every row has, for multi-label)
FOLDS = 3                # folds of the training rows: auto's cross-validation and the probe's out-of-fold logits


def fold_count(labels: np.ndarray, groups=None) -> int:
    """The stratified folds these labels allow: FOLDS, fewer when a class has fewer rows (under 2: none can be made,
    since a fold holding out a class's only row cannot train on that class). `groups`: each row's text (--windows
    cuts a text into rows that share it): a class's texts are counted, not its rows."""
    if groups is not None:
        _, first = np.unique(np.asarray(groups), return_index=True)
        labels = np.asarray(labels)[first]                     # one label per text: its first row's
    return int(min(FOLDS, np.unique(labels, return_counts=True)[1].min()))


def folds_of(labels: np.ndarray, seed: int, groups=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(training rows, held-out rows) of each stratified fold, shuffled with `seed`: fold_count folds (every row is
    held out once). With `groups` (the text each row is a window of) a text's rows are held out together: a fold
    that trained on one window of a text would score its other windows as seen."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    if groups is None or len(np.unique(np.asarray(groups))) == len(labels):
        return list(StratifiedKFold(fold_count(labels), shuffle=True, random_state=seed)
                    .split(np.zeros(len(labels)), labels))
    return list(StratifiedGroupKFold(fold_count(labels, groups), shuffle=True, random_state=seed)
                .split(np.zeros(len(labels)), labels, np.asarray(groups)))


def out_of_fold(features, labels, objective, with_bias: bool, seed: int,
                groups=None) -> tuple[np.ndarray, np.ndarray] | None:
    """(each row's logits from a head fitted on the other folds, labels): for the decision rule when validation rows
    are too few (finish.py). None for multi-label data or a class with fewer rows (texts: `groups`) than FOLDS."""
    if objective.multi_label or fold_count(labels, groups) < FOLDS:
        return None
    logits = np.zeros((len(labels), objective.num_labels))
    for train, held in folds_of(labels, seed, groups):
        logits[held] = head_logits(fit_head(features[train], labels[train], objective, with_bias, seed),
                                   features[held])
    return logits, labels


def head_logits(fitted: dict, features: np.ndarray) -> np.ndarray:
    """The logits a fitted head (fit_head) gives these rows: what the model's final Linear computes from them."""
    return features @ fitted["weight"].T + fitted["bias"]


def fit_head(features: np.ndarray, labels: np.ndarray, objective, with_bias: bool, seed: int) -> dict:
    """scikit-learn LogisticRegression (one per label for multi-label) as the weight and bias of a Linear with
    num_labels outputs whose softmax (sigmoid) is its predict_proba. Binary: the two rows are ±coef/2, as
    softmax([-z/2, z/2]) = sigmoid(z). A head without a bias (decoders' score) gets a regression without an
    intercept."""
    from sklearn.linear_model import LogisticRegression

    started, num_labels = time.perf_counter(), objective.num_labels
    weight = np.zeros((num_labels, features.shape[1]))
    bias = np.full(num_labels, -ABSENT)
    # the objective's class weights (--class-weights; --sampler balanced: contrastive.head_objective) weigh the
    # rows as they weigh the fine-tuning loss: per class, or per label's positives (pos_weight)
    weights = getattr(objective, "weights", None)
    weights = None if weights is None else weights.detach().cpu().numpy().astype(float)

    def regression(y, class_weight=None):
        return LogisticRegression(max_iter=1000, fit_intercept=with_bias, random_state=seed,
                                  class_weight=class_weight).fit(features, y)

    if objective.multi_label:                        # one regression per label, not one over the classes
        probabilities = np.zeros((len(features), num_labels))
        for j in range(num_labels):
            y = labels[:, j].astype(int)
            if y.min() == y.max():                   # every row (or none) has this label: a constant
                bias[j], probabilities[:, j] = (ABSENT, 1.0) if y[0] else (-ABSENT, 0.0)
                continue
            lr = regression(y, None if weights is None else {0: 1.0, 1: float(weights[j])})
            weight[j], bias[j] = lr.coef_[0], lr.intercept_[0] if with_bias else 0.0
            probabilities[:, j] = lr.predict_proba(features)[:, 1]
        accuracy = float(np.mean(objective.correct(objective.predicted_from(probabilities), labels)))
    else:
        lr = regression(labels, None if weights is None else {c: float(weights[c]) for c in np.unique(labels)})
        classes = lr.classes_.astype(int)
        intercept = lr.intercept_ if with_bias else np.zeros(len(lr.coef_))
        if len(classes) == 2:
            weight[classes] = [-lr.coef_[0] / 2, lr.coef_[0] / 2]
            bias[classes] = [-intercept[0] / 2, intercept[0] / 2]
        else:
            weight[classes], bias[classes] = lr.coef_, intercept
        probabilities = lr.predict_proba(features)
        accuracy = float(np.mean(classes[probabilities.argmax(1)] == labels))
    if not with_bias:                                # constant labels need a bias: without one they score 0
        if (bias == ABSENT).any() or (weight == 0).all(1).any():
            log.warning("SetFit: the head has no bias (a decoder's score), so a label no training row has (or "
                        "every row has) gets logit 0 instead of a probability near 0 (or 1)")
        bias = np.zeros(num_labels)
    return {"weight": weight, "bias": bias, "train_accuracy": round(accuracy, 5), "probabilities": probabilities,
            "seconds": round(time.perf_counter() - started, 3)}
