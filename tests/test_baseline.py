"""The classical baseline beside every run (TF-IDF + logistic regression, evaluation/baseline.py) and the collapse
warning at each evaluation."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest
from conftest import fast_options, keyword_pair, sentence

import tuneloop


def reviews(n, seed):
    rng = random.Random(seed)
    rows = [keyword_pair(rng) for _ in range(n)]
    return pd.DataFrame({"text": [f"{a} {b}" for _, a, b in rows],
                         "label": ["good" if label else "bad" for label, _, _ in rows]})


def test_the_baseline_equals_scikit_learn_on_the_same_rows(tiny_model, tmp_path):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.pipeline import make_pipeline, make_union

    train, dev = reviews(90, 0), reviews(40, 1)
    dev.loc[::3, "text"] = [sentence(random.Random(i)) for i in range(len(dev.loc[::3]))]   # some rows unsolvable
    result = tuneloop.train(**fast_options(tiny_model, epochs=1, baseline="tfidf"), train=train, validation=dev,
                            output_dir=str(tmp_path / "run"))
    ours = result["baseline"]
    features = make_union(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                          TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True))
    model = make_pipeline(features, LogisticRegression(max_iter=1000, C=4.0, random_state=0))
    model.fit(train.text, train.label)
    predicted = model.predict(dev.text)
    assert ours["train_rows"] == 90 and ours["eval"]["num_samples"] == 40
    assert ours["eval"]["accuracy"] == pytest.approx(accuracy_score(dev.label, predicted), abs=1e-6)
    assert ours["eval"]["f1"] == pytest.approx(f1_score(dev.label, predicted, pos_label="good"), abs=1e-6)
    assert 0.5 < ours["eval"]["accuracy"] < 1.0                        # learned the keyword, not the noise rows
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["baseline"] == ours


def test_baseline_none_and_other_problem_types(tiny_model, tmp_path):
    train = reviews(60, 2)
    off = tuneloop.train(**fast_options(tiny_model, epochs=1), train=train, output_dir=str(tmp_path / "off"))
    assert off["baseline"] is None
    rng = np.random.default_rng(0)
    scores = train.assign(label=[float(x) for x in rng.uniform(0, 5, len(train)).round(2)])
    regression = tuneloop.train(**fast_options(tiny_model, epochs=1, baseline="tfidf"), train=scores,
                                output_dir=str(tmp_path / "reg"))
    assert regression["problem_type"] == "regression" and "pearson" in regression["baseline"]["eval"]
    tags = train.assign(label=["a,b" if i % 3 == 0 else "a" if i % 3 == 1 else "b" for i in range(len(train))])
    multi = tuneloop.train(**fast_options(tiny_model, epochs=1, baseline="tfidf"), train=tags, label_separator=",",
                           output_dir=str(tmp_path / "multi"))
    assert multi["problem_type"] == "multi_label_classification" and "f1_micro" in multi["baseline"]["eval"]


def test_a_collapsed_evaluation_is_said_at_each_evaluation_and_in_the_report(tiny_model, tmp_path, capfd):
    train = reviews(40, 3)
    result = tuneloop.train(**fast_options(tiny_model, epochs=2, lr=1e-6, report=True), train=train,
                            validation=reviews(30, 4), output_dir=str(tmp_path / "run"))
    assert result["collapsed"] in ("good", "bad")
    warnings = [line for line in capfd.readouterr().err.splitlines() if "collapsed to one class" in line]
    assert len(warnings) == 2 and warnings[0].startswith("step 5: the model predicts")   # each epoch's evaluation
    assert "Collapsed: the model predicts" in (tmp_path / "run" / "report.html").read_text()


def test_texts_without_a_word_of_two_characters_get_the_character_baseline(tiny_model, tmp_path):
    """scikit-learn's word tokens need two characters: rows of single letters and digits have none, and the word
    vectorizer's "empty vocabulary" used to end the run after training. The character n-grams still score."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    rng = random.Random(3)
    texts = [" ".join(rng.choice("0123" if i % 2 else "6789") for _ in range(4)) for i in range(40)]
    frame = pd.DataFrame({"text": texts, "label": ["first" if i % 2 else "second" for i in range(40)]})
    result = tuneloop.train(**fast_options(tiny_model, epochs=1, baseline="tfidf"), train=frame[:30],
                            validation=frame[30:], output_dir=str(tmp_path / "run"))
    assert result["baseline"]["method"] == ("tfidf char 2-5 grams, logistic regression (no word of 2 or more "
                                            "characters in the training rows)")
    chars = make_pipeline(TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True),
                          LogisticRegression(max_iter=1000, C=4.0, random_state=0)).fit(frame.text[:30],
                                                                                        frame.label[:30])
    expected = float((chars.predict(frame.text[30:]) == frame.label[30:]).mean())
    assert result["baseline"]["eval"]["accuracy"] == pytest.approx(expected, abs=1e-6) and expected == 1.0
    assert json.loads((tmp_path / "run" / "results.json").read_text())["baseline"] == result["baseline"]
