"""The Python API's edges as a user meets them: inputs from numpy and pandas the docs promise, and mistakes said as
one line naming the argument before anything runs."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from conftest import fast_options, keyword_pair

import tuneloop
from tuneloop.exceptions import ConfigError


def pairs(n: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = [keyword_pair(rng) for _ in range(n)]
    return pd.DataFrame({"question": [a for _, a, _ in rows], "passage": [b for _, _, b in rows],
                         "label": [label for label, _, _ in rows]})


@pytest.fixture(scope="module")
def pair_model(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("edges") / "pairs"
    tuneloop.train(train=pairs(48, 0), validation=pairs(16, 1), text_columns=["question", "passage"],
                   label_column="label", output_dir=str(out), **fast_options(tiny_model, epochs=1))
    return tuneloop.load(out)


def test_a_series_of_pairs_is_read_as_pairs_on_its_index(pair_model):
    frame = pairs(3, 2)
    given = list(zip(frame["question"], frame["passage"], strict=True))
    series = pd.Series(given, index=["a", "b", "c"])
    predicted = pair_model.predict(series)
    assert list(predicted.index) == ["a", "b", "c"]
    expected = pair_model.predict(given)
    assert predicted["label"].tolist() == [row["label"] for row in expected]
    np.testing.assert_allclose(pair_model.predict_proba(series), pair_model.predict_proba(given), rtol=1e-6)
    with pytest.raises(tuneloop.TuneloopError, match=r"Series: row with index 'b': column 'passage' has no text"):
        pair_model.predict(pd.Series([given[0], (given[1][0], " "), given[2]], index=["a", "b", "c"]))


def test_a_zero_dimensional_numpy_array_is_its_one_text(tiny_model):
    clf = tuneloop.load(tiny_model)
    one = clf.predict(np.array("a good film"))
    assert one == clf.predict("a good film")
    assert clf.predict(np.array(b"a good film")) == one
    assert clf.predict_proba(np.array("a good film")).shape == (1, 2)


def test_on_step_that_is_not_a_function_is_refused_before_the_run(tiny_model, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"^tuneloop\.train: on_step is a function .* got int$"):
        tuneloop.train(train=pairs(20, 0), output_dir=str(out), on_step=5, **fast_options(tiny_model))
    assert not out.exists()
    with pytest.raises(ConfigError, match=r"^tuneloop\.distill: on_step is a function"):
        tuneloop.distill(teacher=tiny_model, on_step="print", output_dir=str(out))


@pytest.mark.parametrize("num_processes", [0, -2, "2", 1.5, True])
def test_notebook_train_says_a_bad_num_processes(num_processes, tiny_model, tmp_path):
    with pytest.raises(ConfigError, match=r"^tuneloop\.notebook_train: num_processes is a whole number"):
        tuneloop.notebook_train(train=pairs(20, 0), num_processes=num_processes, output_dir=str(tmp_path / "r"),
                                **fast_options(tiny_model))


def test_notebook_train_says_it_takes_no_on_step(tiny_model, tmp_path):
    with pytest.raises(ConfigError, match=r"on_step= is not taken.*tuneloop\.train\(\.\.\., on_step=\.\.\.\)") as e:
        tuneloop.notebook_train(train=pairs(20, 0), num_processes=1, on_step=print, output_dir=str(tmp_path / "r"),
                                **fast_options(tiny_model))
    assert "max_steps" not in str(e.value)


def test_an_estimators_unknown_or_malformed_options_are_said_as_options():
    from tuneloop.sklearn import TuneloopClassifier

    with pytest.raises(ConfigError, match=r"^options: unknown option\(s\) 'epochz' \(did you mean 'epochs'\?\)"):
        TuneloopClassifier(options={"epochz": 1}).fit(["a good film", "a bad film"] * 4, [1, 0] * 4)
    with pytest.raises(ConfigError, match=r"^options: a dict of TrainConfig options .* got str$"):
        TuneloopClassifier(options="calibrate=none").fit(["a good film", "a bad film"] * 4, [1, 0] * 4)


@pytest.mark.parametrize("path", [None, 3, ["runs/x"]])
def test_load_says_a_path_that_is_no_path(path):
    with pytest.raises(tuneloop.TuneloopError, match=r"^path: a model or run folder \(a str or a Path\), got "):
        tuneloop.load(path)


@pytest.mark.parametrize(("options", "said"), [
    ({"train": pd.DataFrame({"text": ["a"], "label": [1]})}, r"takes no train=; give that data as a file, train_file="),
    ({"unlabeled_file": pd.DataFrame({"text": ["a"]})}, r"unlabeled_file= takes a path, got DataFrame; write the"),
    ({"train_file": pd.DataFrame({"text": ["a"], "label": [1]})}, r"train_file= takes a path, got DataFrame"),
    ({"teacher": 3}, r"teacher= takes a model or run folder .* got int$"),
])
def test_distill_says_data_it_cannot_take_from_python(options, said, tmp_path):
    with pytest.raises(ConfigError, match=r"^tuneloop\.distill: " + said):
        tuneloop.distill(output_dir=str(tmp_path / "d"), **options)
    with pytest.raises(ConfigError, match=r"^tuneloop\.distill: the first argument is a TrainConfig or a YAML file, "
                                          r"got DataFrame; pass data as unlabeled_file=PATH$"):
        tuneloop.distill(pd.DataFrame({"text": ["a"]}))


def test_text_columns_for_texts_that_have_no_columns_is_said(tiny_model):
    clf = tuneloop.load(tiny_model)
    for texts in (["a good film"], "a good film", np.array(["a good film"])):
        with pytest.raises(tuneloop.TuneloopError, match=r"^text_columns: names columns of a pandas DataFrame"):
            clf.predict(texts, text_columns=["review"])
        with pytest.raises(tuneloop.TuneloopError, match=r"^text_columns: names columns of a pandas DataFrame"):
            clf.predict_proba(texts, text_columns=["review"])
    frame = pd.DataFrame({"review": ["a good film"], "other": ["x"]})
    assert clf.predict(frame, text_columns=["review"])["label"].tolist() == [clf.predict("a good film")["label"]]


def test_train_and_predict_leave_the_warnings_filters_and_the_environment_as_they_were(tiny_model, tmp_path):
    """The first call's imports added warnings filters (accelerate hid torch.optim.lr_scheduler's UserWarnings in
    the caller's own code; torch, numpy) and set TORCHINDUCTOR_CACHE_DIR and scikit-learn's KMP_* for good. In a
    fresh process, as a user's first call is."""
    import subprocess
    import sys
    import textwrap

    from conftest import fast_options

    options = fast_options(tiny_model, epochs=1)
    script = textwrap.dedent(f"""
        import os, warnings
        environ, filters = dict(os.environ), list(warnings.filters)
        import tuneloop
        rows = (["the cat alpha", "the dog beta"] * 8, ["yes", "no"] * 8)
        tuneloop.train(train=rows, validation=rows, output_dir={str(tmp_path / "run")!r}, **{options!r})
        tuneloop.load({str(tmp_path / "run")!r}).predict(["the cat"])
        changed = sorted(set(os.environ) ^ set(environ) | {{k for k in environ if os.environ.get(k) != environ[k]}})
        print("ENV", changed)
        print("FILTERS", [f for f in warnings.filters if f not in filters])
    """)
    load_only = "\n".join(line for line in script.splitlines() if "tuneloop.train(" not in line)
    for code in (script, load_only):            # a first call that trains, and one that only loads a model
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              cwd=str(tmp_path))
        assert done.returncode == 0, done.stderr[-2000:]
        assert "ENV []" in done.stdout and "FILTERS []" in done.stdout, done.stdout
