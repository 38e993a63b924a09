"""Data from Python: train= / validation= take a DataFrame, a datasets.Dataset (or DatasetDict) or (texts, labels)
and train the same model as the equivalent CSV; a Classifier takes and gives DataFrames; bad input from Python
gets the one-line errors files get, naming the row and the column."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from conftest import fast_options, keyword_pair

import tuneloop
from tuneloop.exceptions import ConfigError, DataError, TuneloopError


def reviews(n: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = [keyword_pair(rng) for _ in range(n)]
    return pd.DataFrame({"review": [f"{a} {b}" for _, a, b in rows],
                         "stars": ["good" if label else "bad" for label, _, _ in rows]})


@pytest.fixture(scope="module")
def frames():
    return reviews(80, 0), reviews(30, 1)


@pytest.fixture(scope="module")
def from_csv(frames, tiny_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("from-csv")
    train, dev = frames
    train.to_csv(folder / "train.csv", index=False)
    dev.to_csv(folder / "dev.csv", index=False)
    return tuneloop.train(**fast_options(tiny_model, epochs=2), train_file=str(folder / "train.csv"),
                          validation_file=str(folder / "dev.csv"), text_columns=["review"], label_column="stars",
                          output_dir=str(folder / "run"))


def test_a_dataframe_a_dataset_and_lists_train_the_model_a_csv_trains(frames, from_csv, tiny_model, tmp_path):
    import datasets

    train, dev = frames
    options = fast_options(tiny_model, epochs=2)
    got = {
        "DataFrame": tuneloop.train(**options, train=train, validation=dev, text_columns="review",   # one name
                                    label_column="stars", output_dir=str(tmp_path / "frame")),
        "DatasetDict": tuneloop.train(**options, train=datasets.DatasetDict(
            train=datasets.Dataset.from_pandas(train), validation=datasets.Dataset.from_pandas(dev)),
            text_columns=["review"], label_column="stars", output_dir=str(tmp_path / "dataset")),
        "lists": tuneloop.train(**options, train=(list(train.review), list(train.stars)),
                                validation=(list(dev.review), list(dev.stars)), output_dir=str(tmp_path / "lists")),
        "dict": tuneloop.train(**options, train=train.to_dict("list"), validation=dev.to_dict("list"),
                               text_columns="review", label_column="stars", output_dir=str(tmp_path / "dict")),
    }
    for kind, result in got.items():
        assert result["eval"] == pytest.approx(from_csv["eval"], abs=1e-6), kind
    frame = got["DataFrame"]
    assert frame.output_dir == str(tmp_path / "frame")
    assert "train= (DataFrame, 80 rows)" in (tmp_path / "frame" / "config.yaml").read_text()
    assert frame.classifier.labels == ["bad", "good"] and frame.classifier is frame.classifier   # loaded once


def test_a_classifier_takes_and_gives_dataframes(frames, from_csv):
    train, dev = frames
    clf = from_csv.classifier
    sample = dev.iloc[[3, 1, 7]].set_index(pd.Index([30, 10, 70]))
    out = clf.predict(sample)
    assert list(out.index) == [30, 10, 70]
    assert list(out.columns) == ["label", "prob_bad", "prob_good", "decision_rule"]
    rows = clf.predict(list(sample.review))
    assert list(out.label) == [r["label"] for r in rows]
    assert out.prob_good.tolist() == pytest.approx([r["probabilities"]["good"] for r in rows])
    assert list(clf.predict(sample.review).label) == list(out.label)                 # a Series too
    assert np.allclose(clf.predict_proba(sample), clf.predict_proba(list(sample.review)))
    on_frame = clf.evaluate(dev)
    assert on_frame["eval"] == pytest.approx(clf.evaluate()["eval"], abs=1e-6)      # the recorded dev file
    assert set(on_frame["per_class"]) == {"bad", "good"}
    assert sum(c["support"] for c in on_frame["per_class"].values()) == len(dev)


@pytest.mark.parametrize("change, message", [
    (lambda df: df.assign(review=df.review.where(df.index != 5, "  ")),
     "train= (DataFrame, 80 rows): row with index 5: column 'review' is empty"),
    (lambda df: df.assign(review=df.review.where(df.index != 6, None)),
     "train= (DataFrame, 80 rows): row with index 6: column 'review' has no text (got None)"),
    (lambda df: df.assign(stars=df.stars.where(df.index != 7, float("nan"))),
     "train= (DataFrame, 80 rows): row with index 7: empty label in column 'stars'"),
    (lambda df: df.assign(stars=[1 if i == 4 else s for i, s in enumerate(df.stars)]),
     "train= (DataFrame, 80 rows): row with index 4: label 1 in column 'stars' is a number but the label of row with "
     "index 0 ('good') "
     "is a text; give labels of one type"),
    (lambda df: df.rename(columns={"review": "text_body"}),
     "train= (DataFrame, 80 rows): no text column 'review' (columns: text_body, stars); fix text_columns="),
])
def test_bad_input_from_python_is_one_line_naming_row_and_column(frames, tiny_model, tmp_path, change, message):
    train, dev = frames
    with pytest.raises(DataError) as caught:
        tuneloop.train(**fast_options(tiny_model), train=change(train), validation=dev, text_columns=["review"],
                       label_column="stars", output_dir=str(tmp_path / "run"))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert not (tmp_path / "run").exists()                             # nothing written


def test_pairs_as_lists_train_on_both_texts(tiny_model, tmp_path):
    rows = [("the cat", "alpha cat" if i % 2 else "beta cat") for i in range(24)]
    labels = ["same" if i % 2 else "other" for i in range(24)]
    result = tuneloop.train(**fast_options(tiny_model, epochs=1), train=(rows, labels), validation=(rows, labels),
                            output_dir=str(tmp_path / "run"))
    assert result.classifier.text_columns == ["text", "text_pair"]      # both texts read, not the first alone
    with pytest.raises(TuneloopError, match="give a list of \\[first, second\\] pairs"):
        result.classifier.predict("the cat")


def test_python_mistakes_say_what_to_do(frames, tiny_model, tmp_path):
    train, _ = frames
    with pytest.raises(ConfigError, match=r"the first argument is a TrainConfig or a YAML file, got DataFrame; "
                                          r"pass data as train=\.\.\."):
        tuneloop.train(train)
    with pytest.raises(ConfigError, match=r"unknown option\(s\) 'epoch' \(did you mean 'epochs'\?\)"):
        tuneloop.train(train=train, epoch=1)
    with pytest.raises(DataError, match=r"train=: expected a pandas DataFrame, a datasets.Dataset/DatasetDict, "
                                        r"a dict of columns, \(texts, labels\) or a file path; got set"):
        tuneloop.train(train={"a review"})
    with pytest.raises(DataError, match=r"train=: the dict's columns differ in length \(review: 2, stars: 1\)"):
        tuneloop.train(train={"review": ["a", "b"], "stars": ["good"]})
    with pytest.raises(DataError, match=r"train=: column 'stars' of the dict is not a list of values"):
        tuneloop.train(train={"review": ["a", "b"], "stars": "good"})
    from tuneloop.data.memory import as_table

    indexed = as_table({"review": pd.Series(["a", "b"], index=[10, 20]), "stars": ["good", "bad"]}, "train")
    assert [row for _, row in indexed.rows()] == [{"review": "a", "stars": "good"}, {"review": "b", "stars": "bad"}]
    with pytest.raises(ConfigError, match=r"^lr: expected float, got 'fast'$"):
        tuneloop.train(**fast_options(tiny_model, lr="fast"), train=train, output_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=r"^epochs: expected int, got True$"):
        tuneloop.train(**fast_options(tiny_model, epochs=True), train=train, output_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=r"^seeds: expected a comma-separated list of int, got \[1\.5\]$"):
        tuneloop.train(**fast_options(tiny_model), train=train, seeds=[1.5], output_dir=str(tmp_path / "run"))
    with pytest.raises(DataError, match=r"^train= \(lists, 0 rows\): no rows; give at least one example$"):
        tuneloop.train(train=([], []))        # said "no data: give --task NAME ..." (the CLI's words)
    with pytest.raises(DataError, match=r"train=: 3 texts but 2 labels"):
        tuneloop.train(train=(["a", "b", "c"], [0, 1]))
    # scikit-learn's indicator matrix: its rows were read as the label sets {"0", "1"} (3 "labels" from 2 columns)
    with pytest.raises(DataError, match=r"train=: the labels are a 2-D array \(3, 2\) \(a multi-label indicator"):
        tuneloop.train(train=(["a", "b", "c"], np.array([[0, 1], [1, 0], [1, 1]])))
    with pytest.raises(DataError, match=r"train=: the values of column 'y' are a 2-D array \(3, 2\)"):
        tuneloop.train(train={"text": ["a", "b", "c"], "y": np.zeros((3, 2))})
    column = as_table((["a", "b"], np.array([[1], [0]])), "train")          # an (n, 1) column: n labels
    assert [row["label"] for _, row in column.rows()] == [1, 0]
    sets = as_table((["a", "b"], [np.array(["x", "y"]), np.array(["x"])]), "train")     # was the class "['x' 'y']"
    assert [row["label"] for _, row in sets.rows()] == [["x", "y"], ["x"]]
    encoded = as_table(([b"caf\xc3\xa9 ok", b"b"], [0, 1]), "train")      # was the text "b'caf\\xc3\\xa9 ok'"
    assert [row["text"] for _, row in encoded.rows()] == ["café ok", "b"]
    with pytest.raises(DataError, match="bytes that are not UTF-8 text"):
        as_table(([b"\xff\xfe", b"b"], [0, 1]), "train")
    with pytest.raises(DataError, match=r"cannot tell which column holds the text .*text_columns=\[\"FIRST\", "
                                        r"\"SECOND\"\]; the texts look like the DataFrame's index: pass "
                                        r"train=df.reset_index\(names=\"text\"\)$"):
        tuneloop.train(**fast_options(tiny_model), train=train.set_index("review"), output_dir=str(tmp_path / "r"))
    with pytest.raises(DataError, match=r"cannot tell which column holds the label .*label_column=\"COLUMN\""):
        tuneloop.train(**fast_options(tiny_model), train=train.rename(columns={"stars": "x"}).assign(extra=1),
                       text_columns=["review"], output_dir=str(tmp_path / "run"))


def test_frames_with_number_column_names_other_columns_and_both_ways_of_giving_data(frames, from_csv, tmp_path):
    """pd.DataFrame(texts) names its column 0: predicted as any frame (was a KeyError on '0'); predict_proba takes
    text_columns= as predict does (its own error said to pass it); evaluate reads the text columns given, or, in data
    without the model's own, those detected (the model's recorded 'review' won and the error named the option given);
    a split given as train= and as train_file= is refused (the file was silently dropped)."""
    train, dev = frames
    clf = from_csv.classifier
    texts = list(dev.review[:4])
    expected = clf.predict_proba(texts)
    numbered = pd.DataFrame(texts)
    assert numbered.columns.tolist() == [0]
    assert np.allclose(clf.predict_proba(numbered), expected)
    assert list(clf.predict(numbered, text_columns=[0]).label) == [r["label"] for r in clf.predict(texts)]
    other = dev.rename(columns={"review": "body", "stars": "grade"}).assign(source="web")
    assert np.allclose(clf.predict_proba(other.head(4), text_columns="body"), expected)
    reference = clf.evaluate(dev)["eval"]
    assert clf.evaluate(other, text_columns="body", label_column="grade")["eval"] == pytest.approx(reference)
    renamed = tmp_path / "renamed.csv"
    dev.rename(columns={"review": "body", "stars": "label"}).to_csv(renamed, index=False)
    assert clf.evaluate(validation_file=str(renamed))["eval"] == pytest.approx(reference)         # detected
    with pytest.raises(ConfigError, match=r"^tuneloop.train: both train= and train_file= give the train data; "
                                          r"keep one$"):
        tuneloop.train(train=train, train_file=str(renamed))
    with pytest.raises(ConfigError, match=r"both validation= and validation_file="):
        tuneloop.train(train=train, validation=dev, validation_file=str(renamed))


def test_python_options_are_read_as_their_flags():
    """A string (or a single value for a list option) from Python is what the flag would make of it."""
    from tuneloop.config.resolve import resolve_config

    config = resolve_config(machine=False, lr="2e-5", seeds="1, 2", overwrite="yes", text_columns="review",
                            student_layers=3, lora_target_modules="query,value", epochs=3.0)
    assert (config.lr, config.seeds, config.overwrite, config.text_columns) == (2e-5, [1, 2], True, ["review"])
    assert (config.student_layers, config.lora_target_modules, config.epochs) == ([3], ["query", "value"], 3)
    assert isinstance(config.epochs, int)


def test_a_frame_the_classifier_cannot_read_is_one_line(from_csv, frames):
    _, dev = frames
    clf = from_csv.classifier
    with pytest.raises(TuneloopError, match=r"cannot tell which columns hold the texts \(the model reads review; "
                                            r"the frame has a, b\)"):
        clf.predict(pd.DataFrame({"a": ["x"], "b": ["y"]}))
    with pytest.raises(TuneloopError, match=r"^Series: row with index 1: column 'review' has no text"):
        clf.predict(pd.Series(["ok", float("nan")], name="review"))          # was named a DataFrame's row
    with pytest.raises(TuneloopError, match=r"row with index 2: column 'review' has no text \(got nan\)$"):
        clf.predict(dev.head(3).assign(review=["ok", "fine", float("nan")]))
    by_text = dev.head(3).assign(stars=[1, 0, 1]).set_index("review")     # the texts as the index: a hint
    with pytest.raises(TuneloopError, match=r"has no text \(got \d\); the texts look like the DataFrame's index: "
                                            r"pass frame.reset_index\(names=\"text\"\)$"):
        clf.predict(by_text[["stars"]])
    with pytest.raises(TuneloopError, match=r"the texts look like the Series' index: pass series.index$"):
        clf.predict(by_text["stars"])
    assert clf.predict(by_text["stars"].index)[0]["label"] in clf.labels


def test_paths_given_as_path_objects_are_read_as_their_strings(frames, from_csv, tiny_model, tmp_path):
    from pathlib import Path

    folder = Path(from_csv.output_dir).parent            # the CSV files of from_csv
    result = tuneloop.train(**fast_options(Path(tiny_model), epochs=2), train_file=folder / "train.csv",
                            validation_file=folder / "dev.csv", text_columns=["review"], label_column="stars",
                            output_dir=tmp_path / "run")
    assert result["eval"] == pytest.approx(from_csv["eval"], abs=1e-6)
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert f"model: {tiny_model}" in saved and "PosixPath" not in saved and "!!python" not in saved


def test_texts_from_numpy_are_read_as_texts_and_pairs():
    from tuneloop.predict.inputs import items_of

    pairs = np.array([["a cat", "the cat"], ["a dog", "the dog"]])        # each row a numpy array: was refused
    assert items_of(pairs, True) == ([("a cat", "the cat"), ("a dog", "the dog")], False)
    assert items_of(np.array(["a cat", "a dog"]), False) == ([("a cat", None), ("a dog", None)], False)
    with pytest.raises(TuneloopError, match=r"texts\[0\], row 1: give a text or a \[first, second\] pair"):
        items_of(np.array([["a", "b", "c"]]), True)
    # bytes are read as training reads them (a refusal, "got b'a cat'", before): one, a list, a pair, numpy's
    assert items_of(b"caf\xc3\xa9", False) == ([("café", None)], True)
    assert items_of([b"a cat", "a dog"], False) == ([("a cat", None), ("a dog", None)], False)
    assert items_of((b"a cat", b"the cat"), True) == ([("a cat", "the cat")], True)
    assert items_of([[b"a cat", "the cat"]], True) == ([("a cat", "the cat")], False)
    assert items_of(np.array([b"a cat"]), False) == ([("a cat", None)], False)
    with pytest.raises(DataError, match="bytes that are not UTF-8 text"):
        items_of([b"\xff\xfe"], False)


def test_a_run_fed_from_python_is_precision_gated_as_one_fed_files(tiny_model, tmp_path, capsys):
    """A model folder records a table from Python by its description only, so the gate at the end of training could
    not read its validation rows: "precision gate: not run (ConfigError: ...)" and --precision auto stayed fp32 for
    every DataFrame run. Given the run's tables, it gates their rows: a validation frame's, the rows a validation
    split holds out of a training frame, and an experiment's kept model's."""
    import json

    from tuneloop.predict import routes

    options = fast_options(tiny_model, epochs=1, max_steps=2, quiet=False)
    runs = {"validation frame": dict(train=reviews(60, 0), validation=reviews(210, 1)),
            "held out of the training frame": dict(train=reviews(2000, 2), validation_split=0.1),
            "two seeds' kept model": dict(train=reviews(60, 0), validation=reviews(210, 1), seeds=[0, 1])}
    for kind, data in runs.items():
        out = tmp_path / kind.replace(" ", "-")
        tuneloop.train(**options, **data, text_columns="review", label_column="stars", output_dir=str(out))
        err = capsys.readouterr().err
        assert "precision gate: not run" not in err, (kind, err)
        record = json.loads((out / "model" / "tuneloop.json").read_text())[routes.RECORD]["cpu"]
        assert record["rows"] == (200 if kind.startswith("held out") else 210), kind
        assert set(record["checks"]) == set(routes.candidates("cpu")), kind


def test_a_run_fed_from_python_exports_on_rows_given_again(tiny_model, tmp_path, capsys):
    """`tuneloop export` read its gate's rows from the run's record only, which holds a table from Python by its
    description: such a model could not be exported at all. The rows given again, as a file (--validation-file) or
    as the table (validation=), gate it as the recorded rows would."""
    import json

    from tuneloop.cli.main import main
    from tuneloop.deploy.export import export_model

    dev = reviews(30, 1)
    out = tmp_path / "run"
    tuneloop.train(**fast_options(tiny_model, epochs=1), train=reviews(40, 0), validation=dev, text_columns="review",
                   label_column="stars", output_dir=str(out))
    assert main(["export", str(out), "--output", str(tmp_path / "bare"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "a table from Python, which the run does not keep: give the rows as a file (--validation-file FILE)" in err
    dev.to_csv(tmp_path / "dev.csv", index=False)
    assert main(["export", str(out), "--output", str(tmp_path / "onnx"), "--validation-file",
                 str(tmp_path / "dev.csv"), "--quiet"]) == 0
    from_file = json.loads((tmp_path / "onnx" / "export_report.json").read_text())["gate"]
    from_table = export_model(str(out), str(tmp_path / "onnx2"), quiet=True, validation=dev)["gate"]
    with tuneloop.load(out) as clf:
        expected = clf.evaluate(dev, raw=True)["eval"]
    for gate in (from_file, from_table):
        assert gate["rows"] == 30 and gate["verdict"] == "pass"
        assert gate["pytorch"] == pytest.approx({k: v for k, v in expected.items() if k in gate["pytorch"]},
                                                abs=1e-6)


def test_a_frames_text_column_is_found_as_a_files_is_in_any_letter_case_or_by_its_usual_name(from_csv, frames):
    """A model trained on `review` reads a frame headed `Review` (or ` review `), and one whose text column has a
    usual name (`text`) beside an id, as `tuneloop predict --input` reads such a file; text_columns= in any case."""
    _, dev = frames
    clf = from_csv.classifier
    texts = list(dev.review.head(4))
    expected = list(clf.predict(pd.DataFrame({"review": texts})).label)
    for frame in (pd.DataFrame({"id": [1, 2, 3, 4], "Review": texts}), pd.DataFrame({" review ": texts, "n": 1}),
                  pd.DataFrame({"id": [1, 2, 3, 4], "Text": texts}), pd.DataFrame({"body": texts, "title": "x"})):
        assert list(clf.predict(frame).label) == expected, list(frame.columns)
    assert list(clf.predict(pd.DataFrame({"TXT": texts, "n": 1}), text_columns="txt").label) == expected


def test_numbers_in_a_text_column_are_predicted_as_their_text(from_csv, tiny_model, tmp_path):
    """Training reads 42 in a text column as the text "42"; predict refused it ("has no text (got 42)") in a frame
    of ints, a list or a pair: now each is predicted as its text, the same probabilities."""
    clf = from_csv.classifier
    ints = clf.predict(pd.DataFrame({"review": [42, 7, 3]}))
    texts = clf.predict(pd.DataFrame({"review": ["42", "7", "3"]}))
    assert list(ints.label) == list(texts.label)
    assert ints.prob_good.tolist() == pytest.approx(texts.prob_good.tolist())
    assert clf.predict([42, 3.5, "a cat"]) == clf.predict(["42", "3.5", "a cat"])
    assert np.allclose(clf.predict_proba(np.array([42, 7])), clf.predict_proba(["42", "7"]))
    rows = [("the cat", "alpha cat" if i % 2 else "beta cat") for i in range(16)]
    labels = ["same" if i % 2 else "other" for i in range(16)]
    pairs = tuneloop.train(**fast_options(tiny_model, epochs=1, max_steps=2), train=(rows, labels),
                           validation=(rows, labels), output_dir=str(tmp_path / "pairs")).classifier
    assert pairs.predict([("the cat", 42), (7, "a dog")]) == pairs.predict([("the cat", "42"), ("7", "a dog")])
    assert pairs.predict(("the cat", 42)) == pairs.predict(("the cat", "42"))          # one pair


def test_a_frame_with_two_columns_of_one_name_is_said_naming_it(from_csv, frames, tiny_model, tmp_path):
    """frame["review"] of such a frame is two columns: read as a pair, the model said it reads one text."""
    clf = from_csv.classifier
    frame = pd.DataFrame([["a cat", "the dog", "good"]], columns=["review", "review", "stars"])
    with pytest.raises(TuneloopError) as caught:
        clf.predict(frame)
    assert str(caught.value).startswith("DataFrame: 2 columns are named 'review' (columns: review, review, stars); "
                                        "rename them, or select the text column(s)")
    with pytest.raises(TuneloopError, match=r"^DataFrame: 2 columns are named 'review'"):
        clf.predict_proba(frame)
    train, _ = frames
    with pytest.raises(DataError, match=r"^train=: the DataFrame has repeated column names \(review, review, "
                                        r"stars\); rename them$"):
        tuneloop.train(**fast_options(tiny_model), train=train[["review", "review", "stars"]],
                       output_dir=str(tmp_path / "run"))


def test_notebook_train_takes_what_train_takes_and_gives_a_train_result(frames, tiny_model, tmp_path):
    """notebook_train(train=df) had no train=: the frame went in as an option; it returned results.json's dict
    without .classifier; seeds ran one run and returned it as if it were the experiment; dry_run wrote nothing
    and then failed to read what it had not written."""
    from tuneloop.api import TrainResult

    train, dev = frames
    options = fast_options(tiny_model, epochs=1, max_steps=3)
    out = tmp_path / "one"
    result = tuneloop.notebook_train(train=train, validation=dev, num_processes=1, text_columns="review",
                                     label_column="stars", output_dir=str(out), **options)
    assert isinstance(result, TrainResult) and result.output_dir == str(out)
    assert "eval" in result and result.classifier.labels == ["bad", "good"]
    assert result.classifier.predict("a cat sees alpha")["label"] in ("bad", "good")
    summary = tuneloop.notebook_train(train=train, validation=dev, num_processes=1, text_columns="review",
                                      label_column="stars", seeds=[0, 1], output_dir=str(tmp_path / "seeds"),
                                      **options)
    assert len(summary["runs"]) == 2 and (tmp_path / "seeds" / "summary.json").is_file()
    assert summary.classifier.labels == ["bad", "good"]                 # the kept model
    with pytest.raises(ConfigError, match=r"^--dry-run: it writes nothing for notebook_train to give back; check "
                                          r"the run with tuneloop.train\(\.\.\., dry_run=True\)$"):
        tuneloop.notebook_train(train=train, num_processes=1, dry_run=True, output_dir=str(tmp_path / "dry"),
                                **options)
    assert not (tmp_path / "dry").exists()


def test_notebook_trains_mixed_precision_is_the_runs(frames, tiny_model, tmp_path, monkeypatch):
    """notebook_train(mixed_precision="bf16") reached only the launcher's environment: the run kept its own option
    (auto), which the Accelerator it makes is given over the environment."""
    from tuneloop.training import notebook

    seen = {}

    def launch(config, run, written, num_processes, mixed_precision):
        seen.update(run_precision=config.mixed_precision, launcher=mixed_precision)
        return {}

    monkeypatch.setattr(notebook, "notebook_train", launch)
    train, dev = frames
    tuneloop.notebook_train(train=train, validation=dev, num_processes=1, text_columns="review", label_column="stars",
                            output_dir=str(tmp_path / "run"), model=tiny_model, mixed_precision="bf16")
    assert seen == {"run_precision": "bf16", "launcher": "bf16"}
