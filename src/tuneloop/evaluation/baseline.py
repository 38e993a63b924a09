"""A classical baseline beside every run: TF-IDF of word 1–2-grams and character 2–5-grams (inside word
boundaries) with a logistic regression (a ridge regression for regression targets; one logistic regression per
label for multi-label), from scikit-learn, trained on the run's training rows and scored on its first validation
split with the run's metrics. It tells whether the transformer was worth it, for seconds of CPU. Sentence pairs
are joined into one text (a bag of words cannot compare two texts: on pair tasks it is a floor, not a rival)."""

from __future__ import annotations

import time
import warnings

import numpy as np

from ..data.labels import LabelEncoder
from ..objective import MultiLabel, Objective, Regression, SingleLabel, objective_for
from .metrics import compute

MAX_FEATURES = 200_000       # per n-gram kind: bounds memory on large data sets


def _texts(table, pair: bool) -> list[str]:
    columns = table.select_columns(["text_a", "text_b"] if pair else ["text_a"])[:]
    if not pair:
        return list(columns["text_a"])
    return [f"{a} | {b}" for a, b in zip(columns["text_a"], columns["text_b"], strict=True)]


def _targets(table, encoder: LabelEncoder) -> np.ndarray:
    columns = table.select_columns(["label", "pos"])[:]
    return np.asarray([encoder(raw, pos) for raw, pos in zip(columns["label"], columns["pos"], strict=True)])


def baseline_model(objective: str | Objective, seed: int, words: bool = True):
    """The unfitted scikit-learn pipeline of the baseline for this kind of problem (the Objective or its name; also
    what benchmarks/bench_small_data.py scores as TF-IDF); `words=False`: the character n-grams alone."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline, make_union

    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, max_features=MAX_FEATURES)
    features = make_union(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1, max_features=MAX_FEATURES),
        chars) if words else chars
    heads = {Regression: lambda: Ridge(alpha=1.0),
             MultiLabel: lambda: OneVsRestClassifier(LogisticRegression(max_iter=1000, random_state=seed)),
             SingleLabel: lambda: LogisticRegression(max_iter=1000, C=4.0, random_state=seed)}
    return make_pipeline(features, heads[type(objective_for(objective))]())


def _scores(model, texts: list[str], num_labels: int) -> np.ndarray:
    """The predicted value (regression)."""
    return model.predict(texts).reshape(-1, 1).astype(np.float64)


def _label_logits(model, texts: list[str], num_labels: int) -> np.ndarray:
    """Logits per label (multi-label). One label: scikit-learn reads its one column as a binary target and gives
    (P(absent), P(present)) per row; the second is the label's."""
    probs = model.predict_proba(texts)
    if num_labels == 1 and probs.shape[1] == 2:
        probs = probs[:, 1:]
    probs = np.clip(probs, 1e-12, 1 - 1e-12)
    return np.log(probs) - np.log1p(-probs)


def _class_logits(model, texts: list[str], num_labels: int) -> np.ndarray:
    """Log-probabilities per class (softmax of them gives the probabilities back); a class absent from training
    scores -1e9."""
    probs = np.clip(model.predict_proba(texts), 1e-12, 1 - 1e-12)
    out = np.full((len(texts), num_labels), -1e9)
    out[:, model.classes_.astype(np.int64)] = np.log(probs)
    return out


LOGITS = {Regression: _scores, MultiLabel: _label_logits, SingleLabel: _class_logits}   # in the model's convention


def method_name(objective, words: bool = True) -> str:
    """results.json's baseline.method: what baseline_model(objective, seed, words) is."""
    grams = "tfidf word 1-2 + char 2-5 grams" if words else "tfidf char 2-5 grams"
    head = "ridge regression" if isinstance(objective, Regression) else "logistic regression"
    return f"{grams}, {head}" + ("" if words else " (no word of 2 or more characters in the training rows)")


def _fitted(model, texts: list[str], y):
    """model.fit, without scikit-learn's warning that many classes of few rows "could represent a regression problem"
    (the label check said what there was to say: data/labels.py), restored after."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The number of unique classes is greater than 50%")
        return model.fit(texts, y)


def score_baseline(data, metric_names, seed: int) -> dict | None:
    """{"method", "eval" (the run's metrics and loss on its first validation split), "fit_s", "train_rows"}; None
    when there is nothing to train or score on, or a single class to learn. Training rows with no word of two or
    more characters (scikit-learn's word tokens) get the character n-grams alone (`method` says so)."""
    raw, labels = data.raw, data.labels
    if raw.train is None or not raw.evaluation:
        return None
    split, table = next(iter(raw.evaluation.items()))
    accept_ids = data.task is not None
    y_train = _targets(raw.train, LabelEncoder(labels, raw.source.get("train", "train"), accept_ids))
    y_eval = _targets(table, LabelEncoder(labels, raw.source.get(split, split), accept_ids))
    objective = labels.objective
    classes = objective.classes_of(y_train)
    if classes is not None and len(np.unique(classes)) < 2:
        return None
    started, texts, method = time.perf_counter(), _texts(raw.train, raw.pair), method_name(objective)
    try:
        model = _fitted(baseline_model(objective, seed), texts, y_train)
    except ValueError as e:       # scikit-learn: "empty vocabulary" (texts of 1-character words, emoji, digits)
        if "empty vocabulary" not in str(e):
            raise
        # a text is never empty (data/sources refuses one), and char_wb pads each word with spaces: never empty
        model, method = _fitted(baseline_model(objective, seed, words=False), texts, y_train), \
            method_name(objective, words=False)
    logits = LOGITS[type(objective)](model, _texts(table, raw.pair), labels.num_labels)
    metrics = compute(metric_names, logits, y_eval, objective)
    metrics.update(loss=objective.eval_loss(logits, y_eval), num_samples=int(len(y_eval)))
    return {"method": method, "split": split, "eval": {k: round(v, 6) if isinstance(v, float) else v
                                                       for k, v in metrics.items()},
            "fit_s": round(time.perf_counter() - started, 3), "train_rows": int(len(y_train))}
