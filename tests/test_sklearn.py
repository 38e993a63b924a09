"""tuneloop.sklearn: TuneloopClassifier / TuneloopRegressor in scikit-learn's machinery (clone, Pipeline,
cross_val_score, GridSearchCV), labels back in their own types, predict_proba's columns in classes_ order, pairs,
regression, and temporary run folders that do not outlive the estimator. Every fit trains the tiny model."""

from __future__ import annotations

import dataclasses
import gc
import pickle
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, ShuffleSplit, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from conftest import keyword_pair
from tuneloop import ConfigError, DataError, TrainConfig, TuneloopError
from tuneloop.sklearn import TuneloopClassifier, TuneloopRegressor

N_TRAIN = 90


@pytest.fixture(scope="module")
def rows():
    """(label 0/1, first text, second text): 1 when the second text says alpha, 0 when it says beta."""
    rng = random.Random(0)
    return [keyword_pair(rng) for _ in range(N_TRAIN + 40)]


@pytest.fixture(scope="module")
def single(rows):
    """Single texts (the second sentence) labeled 7 / 3: int labels that are not 0..K-1."""
    texts, labels = [b for _, _, b in rows], [7 if label else 3 for label, _, _ in rows]
    return texts[:N_TRAIN], labels[:N_TRAIN], texts[N_TRAIN:], labels[N_TRAIN:]


@pytest.fixture
def own_tmp(tmp_path, monkeypatch) -> Path:
    """tempfile's folder for this test: what a fit leaves behind shows up here."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def make(tiny_model, cls=TuneloopClassifier, **params):
    return cls(tiny_model, **{"lr": 3e-3, "epochs": 2, "max_length": 32, "seed": 0, "warmup_ratio": 0.1,
                              "options": {"mixed_precision": "no", "method": "finetune"}, **params})   # not auto's pick


def upper(texts):
    return [t.upper() for t in texts]


def lower(texts):
    return [t.lower() for t in texts]


def test_parameters_are_tuneloops_options_with_its_defaults():
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    params = TuneloopClassifier().get_params()
    assert set(params) == {"model", "epochs", "lr", "batch_size", "max_length", "seed", "weight_decay",
                           "warmup_ratio", "quiet", "report", "output_dir", "options"}
    for name in ("model", "epochs", "lr", "batch_size", "max_length", "seed", "weight_decay", "warmup_ratio"):
        assert params[name] == defaults[name], name
    assert params["quiet"] is True and params["report"] is False and params["options"] is None
    assert TuneloopRegressor().get_params() == params


def test_clone_and_set_params_keep_every_parameter():
    est = TuneloopClassifier("some-model", epochs=1, lr=1e-4, max_length=16, output_dir="runs",
                             options={"calibrate": "none"})
    copy = clone(est)
    assert copy.get_params() == est.get_params() and copy is not est
    assert copy.options == {"calibrate": "none"} and copy.options is not est.options
    assert copy.set_params(lr=2e-5, options=None) is copy
    assert copy.get_params()["lr"] == 2e-5 and copy.options is None and est.lr == 1e-4


def test_errors_before_any_training(tiny_model, own_tmp):
    est = make(tiny_model)
    with pytest.raises(NotFittedError):
        est.predict(["a text"])
    with pytest.raises(NotFittedError):
        est.predict_proba(["a text"])
    frame = pd.DataFrame({"a": ["x y"] * 4, "b": ["x"] * 4, "c": ["y"] * 4})
    with pytest.raises(DataError, match=r"^X: a DataFrame of one text column, or two for pairs; got 3 columns "
                                        r"\(a, b, c\)"):
        est.fit(frame, [0, 1, 0, 1])
    with pytest.raises(DataError, match="not a single text"):
        est.fit("one text", [0])
    with pytest.raises(DataError, match=r"^y: the labels ' pos' and 'pos' are one class to tuneloop \(labels are "
                                        r"read as text without surrounding spaces"):   # classes_ had both
        est.fit(["a", "b", "c", "d"], [" pos", "pos", "neg", "neg"])
    with pytest.raises(DataError, match=r"^y: continuous values .* use TuneloopRegressor"):   # score() raised
        est.fit(["a", "b", "c", "d"], [2.5, 10.5, 2.5, 3.0])
    with pytest.raises(DataError, match="4 texts but 3 labels"):       # tuneloop's own check
        est.fit(["a", "b", "c", "d"], [0, 1, 0])
    with pytest.raises(ConfigError, match="'lr' is a parameter of TuneloopClassifier"):
        est.set_params(options={"lr": 1.0}).fit(["a cat", "a dog"], [0, 1])
    with pytest.raises(ConfigError, match="'output_dir' is the estimator's own"):
        est.set_params(options={"output_dir": "x"}).fit(["a cat", "a dog"], [0, 1])
    with pytest.raises(ConfigError, match="epochs"):                    # an unknown option: the nearest one named
        est.set_params(options={"epoch": 1}).fit(["a cat", "a dog"], [0, 1])
    assert not hasattr(est, "classifier_")
    assert list(own_tmp.iterdir()) == []                                # a failed fit removes its folder
    with pytest.raises(ConfigError, match="epochs"):
        est.set_params(output_dir=str(own_tmp / "runs")).fit(["a cat", "a dog"], [0, 1])
    assert list((own_tmp / "runs").iterdir()) == []                     # and leaves no empty run folder


def test_a_pipeline_fits_and_int_labels_come_back_as_ints(tiny_model, single, own_tmp):
    train_x, train_y, test_x, test_y = single
    pipe = Pipeline([("lower", FunctionTransformer(lower)), ("clf", make(tiny_model))])
    pipe.fit(upper(train_x), train_y)
    est = pipe.named_steps["clf"]
    assert est.classes_.tolist() == [3, 7] and est.classes_.dtype.kind == "i"
    predicted = pipe.predict(upper(test_x))
    assert predicted.dtype.kind == "i" and all(type(v) is int for v in predicted.tolist())
    assert set(predicted.tolist()) == {3, 7}
    assert pipe.score(upper(test_x), test_y) == pytest.approx(np.mean(predicted == np.asarray(test_y)))
    assert pipe.score(upper(test_x), test_y) >= 0.8                     # it learned the task
    proba = pipe.predict_proba(upper(test_x))
    assert proba.shape == (len(test_x), 2) and np.allclose(proba.sum(axis=1), 1)
    assert (est.classes_[proba.argmax(axis=1)] == predicted).all()
    # the run folder is the estimator's: gone with it
    folder = Path(est.output_dir_)
    assert (folder / "results.json").is_file() and folder.parent == own_tmp
    assert est.results_["eval"]["accuracy"] >= 0.8
    del pipe, est
    gc.collect()
    assert not folder.exists()


def test_abstained_rows_score_as_wrong_and_labels_tuneloop_reads_as_one_are_refused(tiny_model, single, own_tmp):
    """With abstain_below, predict mixes int labels and 'abstain': score counts those rows wrong (it raised
    scikit-learn's "Mix of label input types"); '1' and '1.0' are one class to the model, two in y: refused after
    the run (classes_ had three entries for two columns, and probabilities summed to more than 1)."""
    train_x, train_y, test_x, test_y = single
    est = make(tiny_model, epochs=3, options={"mixed_precision": "no", "method": "finetune",
                                               "abstain_below": 0.8}).fit(train_x, train_y)
    predicted = est.predict(test_x).tolist()
    assert "abstain" in predicted and {3, 7} & set(predicted)
    hits = [p == t for p, t in zip(predicted, test_y, strict=True)]
    assert est.score(test_x, test_y) == pytest.approx(np.mean(hits))
    weights = np.arange(1, len(test_y) + 1)
    assert est.score(test_x, test_y, sample_weight=weights) == pytest.approx(np.average(hits, weights=weights))
    texts = train_x[:24]
    with pytest.raises(DataError, match=r"^y: the labels '1' and '1.0' are one class to tuneloop"):
        make(tiny_model, epochs=1).fit(texts, ["1.0" if i == 0 else str(i % 2) for i in range(24)])


def test_cross_val_score_runs_three_folds_and_leaves_no_folder(tiny_model, single, own_tmp):
    train_x, train_y, _, _ = single
    scores = cross_val_score(make(tiny_model, epochs=3), train_x, train_y, cv=3)
    assert scores.shape == (3,) and ((0 <= scores) & (scores <= 1)).all()
    assert scores.mean() >= 0.7
    gc.collect()
    assert list(own_tmp.iterdir()) == []


def test_grid_search_picks_the_learning_rate_that_learns(tiny_model, single, own_tmp):
    train_x, train_y, test_x, test_y = single
    search = GridSearchCV(make(tiny_model, epochs=3), {"lr": [3e-3, 1e-7]},
                          cv=ShuffleSplit(n_splits=1, test_size=0.3, random_state=0))
    search.fit(train_x, train_y)
    assert len(search.cv_results_["params"]) == 2
    assert search.best_params_ == {"lr": 3e-3}
    assert search.cv_results_["mean_test_score"][0] > search.cv_results_["mean_test_score"][1]
    assert search.best_estimator_.lr == 3e-3 and search.score(test_x, test_y) >= 0.8
    gc.collect()
    assert len(list(own_tmp.iterdir())) == 1                           # the refitted best estimator's only


def test_pairs_from_a_dataframe_and_proba_columns_in_classes_order(tiny_model, rows, tmp_path):
    # string labels "10" / "9": sorted() gives ["10", "9"], tuneloop orders them 9, 10 — the columns must follow
    frame = pd.DataFrame({"first": [a for _, a, _ in rows], "second": [b for _, _, b in rows],
                          "y": ["10" if label else "9" for label, _, _ in rows]})
    train, test = frame.iloc[:N_TRAIN], frame.iloc[N_TRAIN:]
    est = make(tiny_model, epochs=3).fit(train[["first", "second"]], train["y"])
    assert est.classes_.tolist() == ["10", "9"] and est.classifier_.labels == ["9", "10"]
    assert est.classifier_.pair is True
    proba = est.predict_proba(test[["first", "second"]])
    pairs = list(zip(test["first"], test["second"], strict=True))
    assert np.allclose(proba, est.classifier_.predict_proba(pairs)[:, ::-1])
    predicted = est.predict(test[["first", "second"]])
    assert (est.classes_[proba.argmax(axis=1)] == predicted).all()
    assert (est.predict(pairs) == predicted).all()                      # a list of pairs reads the same
    assert est.score(test[["first", "second"]], test["y"]) >= 0.8
    with pytest.raises(TuneloopError, match="reads pairs"):
        est.predict(["a single text"])
    copy = pickle.loads(pickle.dumps(est))                              # a copy works and does not own the folder
    assert (copy.predict(pairs) == predicted).all()
    folder = Path(est.output_dir_)
    del copy
    gc.collect()
    assert folder.is_dir()
    est.cleanup()                                                       # removes the folder; the model stays
    assert not folder.exists() and est.output_dir_ is None
    assert (est.predict(pairs) == predicted).all()


def test_the_regressor_fits_numbers_and_keeps_runs_under_output_dir(tiny_model, rows, tmp_path):
    # int targets 0 / 1: a regression because the estimator says so (tuneloop's auto would make two classes)
    texts, targets = [b for _, _, b in rows], [label for label, _, _ in rows]
    est = make(tiny_model, TuneloopRegressor, epochs=4, lr=5e-3, output_dir=str(tmp_path / "runs"))
    assert is_regressor(est)
    est.fit(texts[:80], targets[:80], validation=(texts[80:N_TRAIN], targets[80:N_TRAIN]))
    assert est.classifier_.problem_type == "regression" and est.results_["eval"]["num_samples"] == N_TRAIN - 80
    predicted = est.predict(texts[N_TRAIN:])
    assert predicted.dtype == np.float64 and predicted.shape == (len(texts) - N_TRAIN,)
    assert est.score(texts[N_TRAIN:], targets[N_TRAIN:]) >= 0.7         # R²: it learned the task
    exact = est.classifier_.predict_proba(texts[N_TRAIN:]).reshape(-1)  # not predict's rows, rounded to 6 decimals
    assert np.allclose(predicted, exact, rtol=0, atol=1e-7) and any(v != round(v, 6) for v in predicted)
    folder = Path(est.output_dir_)
    assert folder.parent == tmp_path / "runs" and folder.name.startswith("fit-")
    del est
    gc.collect()
    assert (folder / "results.json").is_file()                          # a given output_dir keeps its runs


def test_import_tuneloop_stays_light_and_the_module_gets_scikit_learn():
    script = ("import sys\nimport tuneloop\nbefore = sorted(m for m in ('torch', 'sklearn') if m in sys.modules)\n"
              "import tuneloop.sklearn as ts\nimport sklearn.base\n"
              "print(before, ts.BaseEstimator is sklearn.base.BaseEstimator, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "True", "False"]


def test_the_options_declared_the_estimators_own_are_refused_in_options():
    from tuneloop.config.options import with_trait

    own = with_trait("sklearn", "own")
    assert {"train_file", "validation_file", "text_columns", "output_dir", "problem_type"} <= set(own)
    for name in own:
        with pytest.raises(ConfigError, match=f"'{name}' is the estimator's own"):
            TuneloopClassifier(options={name: "x"})._train_options()
    assert TuneloopClassifier(options={"calibrate": "none"})._train_options()["calibrate"] == "none"


def test_a_y_of_several_columns_is_refused_in_one_line_before_training(tiny_model, tmp_path):
    """scikit-learn's multi-label indicator matrix (or multi-output y) is not one target per text: a DataError
    naming tuneloop.train's list-of-labels form, before any folder is written (was: '[0.0, 0.0]' read as one
    class name)."""
    texts = ["the cat sees a dog", "a red car is fast"] * 10
    for estimator in (TuneloopClassifier(tiny_model, output_dir=str(tmp_path)), TuneloopRegressor(tiny_model)):
        with pytest.raises(DataError, match=r"y: 2 columns, but these estimators learn one target per text.*"
                                            r"tuneloop.train with a list of labels per text"):
            estimator.fit(texts, np.zeros((20, 2)))
    assert not list(tmp_path.iterdir())
    assert TuneloopClassifier(tiny_model, options={"max_steps": 1}).fit(texts, np.array([[0], [1]] * 10)).classes_ \
        .tolist() == [0, 1]                                        # one column is one target


def test_a_fit_into_a_temporary_folder_skips_the_precision_gate_and_one_under_output_dir_runs_it(tiny_model,
                                                                                                 tmp_path):
    """A fit without output_dir keeps its model in memory (fp32) and removes its folder: the precision gate at the
    end of training (an ONNX export and a pass of each route: about 20 s for MiniLM) would be read by nothing, in
    every fit of a cross_val_score or GridSearchCV. Since runs fed from Python are gated, it ran there; now only
    under a given output_dir, or when options ask for it."""
    import json

    from tuneloop.predict import routes

    rng = random.Random(1)
    pairs = [keyword_pair(rng) for _ in range(40 + 210)]
    texts, labels = [b for _, _, b in pairs], [label for label, _, _ in pairs]
    fit = (texts[:40], labels[:40])
    held = (texts[40:], labels[40:])                           # 210 validation rows: enough to gate on

    def gated(est) -> bool:
        est.fit(*fit, validation=held)
        meta = json.loads((Path(est.output_dir_) / "model" / "tuneloop.json").read_text())
        return routes.RECORD in meta

    options = {"mixed_precision": "no", "method": "finetune"}
    assert not gated(make(tiny_model, epochs=1))
    assert gated(make(tiny_model, epochs=1, output_dir=str(tmp_path / "runs")))
    assert gated(make(tiny_model, epochs=1, options={**options, "precision_gate": "auto"}))


@pytest.mark.parametrize("missing", [None, float("nan"), np.nan, pd.NA])
def test_a_missing_label_or_text_is_named_by_its_row_of_x_and_y(tiny_model, own_tmp, missing):
    """A missing label had been said as "y: labels of one type (all numbers or all texts) that can be sorted" (or,
    for the regressor, as train=' column 'label'); a list label was a class "['a', 'b']"."""
    texts = [f"a cat {i}" for i in range(50)]
    labels = ["pos", "neg"] * 25
    for cls, y in ((TuneloopClassifier, labels), (TuneloopRegressor, [float(i % 5) for i in range(50)])):
        with_gap = list(y)
        with_gap[39] = missing
        with pytest.raises(DataError) as caught:
            make(tiny_model, cls).fit(texts, with_gap)
        assert str(caught.value).startswith(f"y[39], row 40: no label (got {missing!r}); give every text its label, "
                                            "or drop the row from X and y"), cls
        with pytest.raises(DataError, match=r"^y\[39\], row 40: no label"):              # a Series with NA
            make(tiny_model, cls).fit(pd.Series(texts), pd.Series(with_gap, dtype=object))
    with pytest.raises(DataError, match=r"^validation y\[2\], row 3: no label \(got None\); give every text its "
                                        r"label, or drop the row from validation X and validation y$"):
        make(tiny_model).fit(texts, labels, validation=(texts[:4], ["pos", "neg", None, "pos"]))
    listed = list(labels)
    listed[3] = ["pos", "neg"]
    with pytest.raises(DataError, match=r"^y\[3\], row 4: several labels \(\['pos', 'neg'\]\), but these estimators "
                                        r"learn one target per text; for several labels per text \(multi-label\), "
                                        r"call tuneloop.train with a list of labels per text$"):
        make(tiny_model).fit(texts, listed)
    for gap in (None, float("nan"), "   "):
        with pytest.raises(DataError, match=rf"^X\[5\], row 6: no text \(got {re.escape(repr(gap))}\); give every "
                                            r"row a text, or drop the row from X and y$"):
            make(tiny_model).fit(texts[:5] + [gap] + texts[6:], labels)
    pairs = [(t, "alpha") for t in texts]
    pairs[7] = ("a dog", None)
    with pytest.raises(DataError, match=r"^X\[7\], row 8: no text \(got \('a dog', None\)\)"):
        make(tiny_model).fit(pairs, labels)
    assert list(own_tmp.iterdir()) == []


def test_tuneloops_reading_errors_name_x_and_y_not_train_and_a_label_column(tiny_model, own_tmp):
    """What tuneloop's own reading finds wrong in fit's data was said as `train= (lists, 4 rows)` and the column
    'label' (or 'text'), which the caller of fit(X, y) never wrote."""
    cases = [
        (TuneloopRegressor, ["a cat", "a dog", "the cow", "a bus"], [1.0, "x", 2.0, 3.0],
         "X, y (4 rows): row 2: label 'x' in y is a text but the label of row 1 (1.0) is a number; give labels of "
         "one type"),
        (TuneloopClassifier, ["a cat", "a dog", "the cow", "a bus"], ["pos"] * 4,
         "X, y (4 rows): y holds only ['pos']; classification needs at least two classes"),
        (TuneloopClassifier, ["a cat", {"a": 1}, "the cow", "a bus"], ["pos", "neg"] * 2,
         "X, y (4 rows): row 2: X holds a JSON object, not a text ({'a': 1}); give the text itself"),
        (TuneloopClassifier, [("a cat", "x"), ("a dog", ["y"]), ("the cow", "z"), ("a", "b")], ["pos", "neg"] * 2,
         "X, y (4 rows): row 2: X's second text holds a list, not a text (['y']); give the text itself"),
        (TuneloopClassifier, ["a cat", "a dog", "the cow", "a bus"], ["pos", "neg", "pos"],
         "X, y: 4 texts but 3 labels; give X and y one row per example"),
        (TuneloopClassifier, [("a cat", "x"), "a dog", ("the cow", "z"), ("a", "b")], ["pos", "neg"] * 2,
         "X[1], row 2: give every row a text, or every row a (first, second) pair (got a dog)"),
    ]
    for cls, X, y, message in cases:
        with pytest.raises(DataError) as caught:
            make(tiny_model, cls).fit(X, y)
        said = str(caught.value)
        assert said == message, said
    with pytest.raises(DataError, match=r"^validation X, validation y \(2 rows\): row 2: validation X holds a "
                                        r"JSON object, not a text"):
        make(tiny_model).fit(["a cat", "a dog", "a cow", "a bus"], ["pos", "neg"] * 2,
                             validation=(["a cat", {"a": 1}], ["pos", "neg"]))
    assert list(own_tmp.iterdir()) == []
