"""How `tuneloop predict --input FILE` (and training) read a user's file at its edges: the index pandas stores in a
Parquet file (`__index_level_0__`) read under its own name, as pandas' reset_index() gives it, not as a column of
that name; a JSON boolean in a text column refused (it was read as Python's "True"), by training and predict
alike; --keep-columns matched in any letter case, as the text columns are, keeping the file's spelling."""

from __future__ import annotations

import csv
import json
import logging
import random

import pandas as pd
import pytest
from conftest import fast_options, sentence

import tuneloop
from tuneloop.data.memory import as_table
from tuneloop.data.readers import file_columns, iter_rows
from tuneloop.data.sources import load_user_files
from tuneloop.exceptions import ConfigError, DataError
from tuneloop.predict.evaluate import predict_file
from tuneloop.predict.rows import keep_columns


@pytest.fixture(scope="module")
def run_dir(tiny_model, tmp_path_factory):
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("edges")
    with open(folder / "train.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for i in range(40):
            writer.writerow([sentence(rng) + (" alpha" if i % 2 else " beta"), "pos" if i % 2 else "neg"])
    tuneloop.train(**fast_options(tiny_model, epochs=1), train_file=str(folder / "train.csv"),
                   output_dir=str(folder / "run"))
    return folder / "run"


def _frame():
    return pd.DataFrame({"Text": ["the cat alpha", "the dog beta", "alpha one"], "Ticket": ["a1", "b2", "c3"]},
                        index=[5, 7, 9])


def test_a_parquet_files_pandas_index_is_read_under_its_own_name_as_reset_index_gives_it(tmp_path):
    cases = {"plain": _frame(),                                                       # nameless: index
             "named": _frame().rename_axis("doc"),
             "taken": _frame().assign(index=[1, 2, 3]),                               # index taken: level_0
             "same": _frame().rename_axis("Text"),                                    # its name taken: level_0
             "levels": _frame().set_index(pd.MultiIndex.from_tuples([(1, "x"), (2, "y"), (3, "z")])),
             "range": _frame().reset_index(drop=True)}                                # a RangeIndex: no column
    for name, frame in cases.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
    want = {"plain": ["index", "Text", "Ticket"], "named": ["doc", "Text", "Ticket"],
            "taken": ["level_0", "Text", "Ticket", "index"], "same": ["level_0", "Text", "Ticket"],
            "levels": ["level_0", "level_1", "Text", "Ticket"], "range": ["Text", "Ticket"]}
    for name, columns in want.items():
        path = str(tmp_path / f"{name}.parquet")
        if name != "same":              # pandas itself refuses to reset an index named like a column
            assert list(pd.read_parquet(path).reset_index().columns) == columns or name == "range", name
        assert file_columns(path) == columns, name
        assert list(next(iter(iter_rows(path)))[1]) == columns, name
    assert next(iter(iter_rows(str(tmp_path / "plain.parquet")))) == (1, {"index": 5, "Text": "the cat alpha",
                                                                          "Ticket": "a1"})


def test_predict_writes_a_parquet_files_index_as_index_not_as_pyarrows_field(run_dir, tmp_path):
    _frame().to_parquet(tmp_path / "in.parquet")
    with tuneloop.load(run_dir) as clf:
        predict_file(clf, str(tmp_path / "in.parquet"), str(tmp_path / "out.csv"), quiet=True)
    rows = list(csv.DictReader(open(tmp_path / "out.csv")))
    assert "__index_level_0__" not in rows[0]
    # the index is the file's only id-like column: the ids, and not written again beside them
    assert [r["id"] for r in rows] == ["5", "7", "9"] and [r["Ticket"] for r in rows] == ["a1", "b2", "c3"]
    _frame().assign(id=[1, 2, 3]).to_parquet(tmp_path / "with_id.parquet")
    with tuneloop.load(run_dir) as clf:
        predict_file(clf, str(tmp_path / "with_id.parquet"), str(tmp_path / "out2.csv"), quiet=True)
    rows = list(csv.DictReader(open(tmp_path / "out2.csv")))
    assert list(rows[0])[:3] == ["id", "index", "Text"] and [r["index"] for r in rows] == ["5", "7", "9"]


def test_training_reads_a_parquet_files_index_as_index_and_never_as_its_label(tmp_path, caplog):
    rng = random.Random(1)
    frame = pd.DataFrame({"text": [sentence(rng) for _ in range(12)], "id": range(12),
                          "stuff": ["a", "b"] * 6}, index=[3 * i for i in range(12)])
    frame.to_parquet(tmp_path / "train.parquet")
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        raw = load_user_files(str(tmp_path / "train.parquet"), None, None, None, None)
    assert raw.text_columns == ("text",)
    assert raw.train["label"] == ["a", "b"] * 6 and raw.train["id"] == [str(i) for i in range(12)]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "label 'stuff' (the one other column)" in said and "not read: index" in said
    assert "__index_level_0__' is pandas' index, read as 'index'" in said


def _jsonl(path, texts, labels=None):
    with open(path, "w") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"text": text, **({"label": labels[i]} if labels else {})}) + "\n")
    return str(path)


def test_a_json_boolean_in_a_text_column_is_refused_by_predict_and_training_alike(run_dir, tmp_path):
    given = _jsonl(tmp_path / "in.jsonl", ["alpha one", True, "beta"])
    with tuneloop.load(run_dir) as clf, pytest.raises(DataError) as e:
        predict_file(clf, given, str(tmp_path / "out.csv"), quiet=True)
    said = str(e.value)
    assert said.startswith(f"{given}: line 2: column 'text' holds the boolean true, not a text") and "\n" not in said
    assert not (tmp_path / "out.csv").exists()
    train = _jsonl(tmp_path / "train.jsonl", ["a b c", "d e f", False, "g h"], ["x", "y", "x", "y"])
    with pytest.raises(DataError, match=r"train\.jsonl: line 3: column 'text' holds the boolean false, not a text"):
        load_user_files(train, None, None, None, None)
    with pytest.raises(DataError, match=r"row with index 1: column 'text' holds the boolean True, not a text"):
        load_user_files(as_table(pd.DataFrame({"text": ["a b", True], "label": ["x", "y"]}), "train"), None, None,
                        None, None)
    # numbers stay read as the text they are written as, in training and predict alike
    numbers = _jsonl(tmp_path / "numbers.jsonl", [1.5, 42, "alpha"])
    with tuneloop.load(run_dir) as clf:
        predict_file(clf, numbers, str(tmp_path / "numbers.csv"), quiet=True)
    assert len(list(csv.DictReader(open(tmp_path / "numbers.csv")))) == 3
    raw = load_user_files(_jsonl(tmp_path / "t2.jsonl", [1.5, 42], ["x", "y"]), None, None, None, None)
    assert raw.train["text_a"] == ["1.5", "42"]


def test_keep_columns_match_in_any_letter_case_and_keep_the_files_spelling(run_dir, tmp_path):
    assert keep_columns("ticket, TEXT", ["Text", "Ticket"], "f.csv") == ["Ticket", "Text"]
    assert keep_columns("ticket,Ticket", ["Text", "Ticket"], "f.csv") == ["Ticket"]
    assert keep_columns("Ticket", ["Text", "Ticket", "ticket"], "f.csv") == ["Ticket"]     # the exact name first
    with pytest.raises(ConfigError, match=r"--keep-columns TICKET: f\.csv has 2 columns named 'TICKET' in other "
                                          r"letter cases \(name one as the file spells it\)"):
        keep_columns("TICKET", ["Text", "Ticket", "ticket"], "f.csv")
    with pytest.raises(ConfigError, match=r"f\.csv has no column 'tickt'"):
        keep_columns("ticket,tickt", ["Text", "Ticket"], "f.csv")
    _frame().to_csv(tmp_path / "in.csv", index=False)
    with tuneloop.load(run_dir) as clf:
        predict_file(clf, str(tmp_path / "in.csv"), str(tmp_path / "out.csv"), quiet=True, keep_columns="ticket")
    rows = list(csv.DictReader(open(tmp_path / "out.csv")))
    assert list(rows[0])[:2] == ["id", "Ticket"] and [r["Ticket"] for r in rows] == ["a1", "b2", "c3"]
    assert "Text" not in rows[0]
