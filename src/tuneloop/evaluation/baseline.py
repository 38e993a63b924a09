"""A classical baseline beside every run: TF-IDF of word 1–2-grams and character 2–5-grams (inside word
boundaries) with a logistic regression (a ridge regression for regression targets; one logistic regression per
label for multi-label), from scikit-learn, trained on the run's training rows and scored on its first validation
split with the run's metrics. It tells whether the transformer was worth it, for seconds of CPU. Sentence pairs
are joined into one text (a bag of words cannot compare two texts: on pair tasks it is a floor, not a rival)."""

from __future__ import annotations

import time

import numpy as np

from ..objective import objective_for
from ..data.labels import LabelEncoder
from ..tasks import MULTI_LABEL, REGRESSION
from .metrics import compute, loss_from_logits

METHOD = "tfidf word 1-2 + char 2-5 grams, logistic regression"
MAX_FEATURES = 200_000       # per n-gram kind: bounds memory on large data sets


def _texts(table, pair: bool) -> list[str]:
    columns = table.select_columns(["text_a", "text_b"] if pair else ["text_a"])[:]
    return [f"{a} | {b}" for a, b in zip(columns["text_a"], columns["text_b"])] if pair else list(columns["text_a"])


def _targets(table, encoder: LabelEncoder) -> np.ndarray:
    columns = table.select_columns(["label", "pos"])[:]
    return np.asarray([encoder(raw, pos) for raw, pos in zip(columns["label"], columns["pos"])])


def baseline_model(problem_type: str, seed: int):
    """The unfitted scikit-learn pipeline of the baseline for this kind of problem (also what
    benchmarks/bench_small_data.py scores as TF-IDF)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline, make_union

    features = make_union(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1, max_features=MAX_FEATURES),
        TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, max_features=MAX_FEATURES))
    if problem_type == REGRESSION:
        head = Ridge(alpha=1.0)
    elif problem_type == MULTI_LABEL:
        head = OneVsRestClassifier(LogisticRegression(max_iter=1000, random_state=seed))
    else:
        head = LogisticRegression(max_iter=1000, C=4.0, random_state=seed)
    return make_pipeline(features, head)


def _logits(model, texts: list[str], problem_type: str, num_labels: int) -> np.ndarray:
    """Scores in the model's convention: log-probabilities per class (softmax of them gives the probabilities
    back), logits per label, the predicted value for regression; a class absent from training scores -1e9."""
    if problem_type == REGRESSION:
        return model.predict(texts).reshape(-1, 1).astype(np.float64)
    probs = np.clip(model.predict_proba(texts), 1e-12, 1 - 1e-12)
    if problem_type == MULTI_LABEL:
        return np.log(probs) - np.log1p(-probs)
    out = np.full((len(texts), num_labels), -1e9)
    out[:, model.classes_.astype(np.int64)] = np.log(probs)
    return out


def score_baseline(data, metric_names, seed: int) -> dict | None:
    """{"method", "eval" (the run's metrics and loss on its first validation split), "fit_s", "train_rows"}; None
    when there is nothing to train or score on, or a single class to learn."""
    raw, labels = data.raw, data.labels
    if raw.train is None or not raw.evaluation:
        return None
    split, table = next(iter(raw.evaluation.items()))
    accept_ids = data.task is not None
    y_train = _targets(raw.train, LabelEncoder(labels, raw.source.get("train", "train"), accept_ids))
    y_eval = _targets(table, LabelEncoder(labels, raw.source.get(split, split), accept_ids))
    if labels.problem_type != REGRESSION and labels.problem_type != MULTI_LABEL and len(np.unique(y_train)) < 2:
        return None
    started = time.perf_counter()
    model = baseline_model(labels.problem_type, seed).fit(_texts(raw.train, raw.pair), y_train)
    logits = _logits(model, _texts(table, raw.pair), labels.problem_type, labels.num_labels)
    metrics = compute(metric_names, logits, y_eval, objective_for(labels))
    metrics.update(loss=loss_from_logits(logits, y_eval, labels.problem_type), num_samples=int(len(y_eval)))
    return {"method": METHOD, "split": split, "eval": {k: round(v, 6) if isinstance(v, float) else v
                                                       for k, v in metrics.items()},
            "fit_s": round(time.perf_counter() - started, 3), "train_rows": int(len(y_train))}
