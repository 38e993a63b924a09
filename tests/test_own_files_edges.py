"""A user's own files as they come, and predict/evaluate on them: line endings, quotes, label columns in another
letter case, --output and --text-columns checked before the work, repeated ids."""

from __future__ import annotations

import json
import re

import pytest

from tuneloop.cli.main import main
from tuneloop.data.readers import file_columns, iter_rows
from tuneloop.exceptions import DataError, TuneloopError


def run_cli(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def one_line(code, err, *fragments):
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def test_a_file_of_bare_carriage_returns_is_read_line_by_line(tmp_path):
    """Excel for Mac's "CSV (Macintosh)" ends its lines with a bare carriage return: once a traceback
    (UnboundLocalError in file_columns), now read as the lines they are, a quoted one across lines included."""
    path = tmp_path / "mac.csv"
    path.write_bytes(b'text;label\r"the cat\rsat";pos\rthe dog;neg\r')
    assert file_columns(str(path)) == ["text", "label"]
    assert list(iter_rows(str(path))) == [(2, {"text": "the cat\rsat", "label": "pos"}),
                                          (4, {"text": "the dog", "label": "neg"})]
    jsonl = tmp_path / "mac.jsonl"
    jsonl.write_bytes(b'{"text": "a"}\r{"text": "b"}\r')
    assert [row for _, row in iter_rows(str(jsonl))] == [{"text": "a"}, {"text": "b"}]


def test_non_utf8_bytes_are_named_by_their_line_and_the_path_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mac.csv").write_bytes(b"text,label\rgood,pos\rcaf\xe9,neg\r")
    with pytest.raises(DataError, match=r"^mac\.csv: line 3: bytes that are not UTF-8 .* at character 4\)"):
        list(iter_rows("mac.csv"))
    (tmp_path / "head.csv").write_bytes(b"caf\xe9,label\ngood,pos\n")    # in the header, which sets the separator
    with pytest.raises(DataError, match=r"^head\.csv: line 1: bytes that are not UTF-8"):
        list(iter_rows("head.csv"))


def test_an_unclosed_quote_in_the_header_is_one_line(tmp_path):
    path = tmp_path / "quote.csv"
    path.write_text('"text,label\nthe cat,pos\n')
    with pytest.raises(DataError, match=r"quote\.csv: lines 1-2 \(a quoted field opened on line 1.*malformed CSV"):
        list(iter_rows(str(path)))


def test_a_gold_label_column_in_another_letter_case_is_renamed():
    from tuneloop.predict.rows import with_input

    rows = [{"id": "0", "label": "pos", "prob_pos": 0.9}]
    out = with_input(rows, [{"Text": "the cat", "Label": "neg", "PROB_POS": 1}], "all", None)
    assert list(out[0]) == ["id", "Text", "input_Label", "input_PROB_POS", "label", "prob_pos"]
    assert out[0]["input_Label"] == "neg" and out[0]["label"] == "pos"


def test_output_naming_a_folder_is_refused_before_the_work(tmp_path):
    from tuneloop.predict.evaluate import check_output

    (tmp_path / "out.csv").mkdir()
    with pytest.raises(TuneloopError, match="out.csv: is a folder"):
        check_output(str(tmp_path / "out.csv"))


def test_predict_reads_a_mac_file_and_refuses_a_folder_output(tiny_model, tmp_path, capsys):
    mac = tmp_path / "mac.csv"
    mac.write_bytes(b"Text,Label\rthe cat,pos\rthe dog,neg\r")
    code, out, err = run_cli(["predict", "--model", tiny_model, "--input", str(mac), "--output", "-"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["id"], r["Text"], r["input_Label"]) for r in rows] == [("0", "the cat", "pos"), ("1", "the dog", "neg")]
    (tmp_path / "p.csv").mkdir()
    code, _, err = run_cli(["predict", "--model", tiny_model, "--input", str(mac), "--output", str(tmp_path / "p.csv"),
                            "--overwrite"], capsys)
    one_line(code, err, "p.csv: is a folder")


def test_a_decimal_comma_file_is_held_out_by_its_targets(tmp_path):
    """`2,6` in a semicolon file is 2.6 for the quantile bins too: they were all NaN, one bin, no stratification."""
    from tuneloop.data.labels import LabelSchema
    from tuneloop.data.split import stratify_keys

    path = tmp_path / "scores.csv"
    labels = [f"{i // 10},{i % 10}" for i in range(40)]
    path.write_text("text;score\n" + "".join(f"the cat {i};{v}\n" for i, v in enumerate(labels)))
    keys, how = stratify_keys(labels, LabelSchema("regression"), 20, str(path))
    assert how == "10 quantile bins of the target" and len(set(keys.tolist())) == 10


def test_evaluate_scores_the_rows_the_run_held_out(tiny_model, tmp_path, capsys):
    """`tuneloop evaluate --model OUT/model` reads the run's split.json instead of drawing the rows again (a reader
    or scikit-learn that draws otherwise would score training rows); a training file changed since is said."""
    import os

    from conftest import fast_options

    import tuneloop
    from tuneloop import TrainConfig
    from tuneloop.layout import SPLIT_FILE

    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"the {w} {i},{'pos' if w == 'good' else 'neg'}\n"
                                             for i in range(20) for w in ("good", "bad")))
    out = tmp_path / "run"
    tuneloop.train(TrainConfig(train_file=str(train), output_dir=str(out), **fast_options(tiny_model, max_steps=1)))
    split = json.loads((out / SPLIT_FILE).read_text())
    assert len(split["validation"]) == 4
    split["validation"], split["train"] = list(range(7)), list(range(7, 40))      # rows no draw would give
    (out / SPLIT_FILE).write_text(json.dumps(split))
    capsys.readouterr()
    code, said, err = run_cli(["evaluate", "--model", str(out / "model")], capsys)
    assert code == 0 and "eval (7 examples)" in said, (said, err)
    os.utime(train, ns=(1, 1))                                                    # the file changed since
    code, said, err = run_cli(["evaluate", "--model", str(out / "model")], capsys)
    assert code == 0 and "eval (4 examples)" in said and "changed since the model's run held out" in err, err



def test_evaluate_never_replaces_an_existing_output_without_overwrite(tiny_model, tmp_path, capsys):
    """`evaluate --output FILE` replaced a file of the user's without a word (predict refuses without --overwrite)."""
    from conftest import fast_options

    import tuneloop
    from tuneloop import TrainConfig

    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"the {w} {i},{'pos' if w == 'good' else 'neg'}\n"
                                             for i in range(20) for w in ("good", "bad")))
    out, mine = tmp_path / "run", tmp_path / "notes.json"
    tuneloop.train(TrainConfig(train_file=str(train), output_dir=str(out), **fast_options(tiny_model, max_steps=1)))
    mine.write_text("mine")
    capsys.readouterr()
    code, _, err = run_cli(["evaluate", "--model", str(out), "--output", str(mine), "--quiet"], capsys)
    one_line(code, err, f"--output {mine}: already exists", "--overwrite")
    assert mine.read_text() == "mine"
    code, _, err = run_cli(["evaluate", "--model", str(out), "--output", str(mine), "--quiet", "--overwrite"], capsys)
    assert code == 0 and "eval" in json.loads(mine.read_text()), err


def test_text_columns_given_to_predict_are_as_many_as_the_model_reads():
    """A pair model given one --text-columns (or a single-text one two, or three columns) predicted from other
    inputs than it learned on, without a word; now refused, naming the model's columns."""
    from tuneloop.predict.evaluate import known_text

    pair = {"text_columns": ["question", "sentence"]}
    assert known_text("x.csv", pair, ["q", "s"]) == ("q", "s")
    for given, said in ((["question"], "the model reads 2 text(s) per example (question, sentence)"),
                        (["a", "b", "c"], "name one text column, or two for a pair"),
                        (["a", "a"], "names one column twice")):
        with pytest.raises(TuneloopError, match="^" + re.escape(f"--text-columns {','.join(given)}: {said}")):
            known_text("x.csv", pair, given)
    assert known_text("x.csv", {}, ["a", "b"]) == ("a", "b")          # a plain save_pretrained folder: any 1 or 2


def test_predict_says_ids_the_file_repeats(tiny_model, tmp_path, capsys):
    """Duplicate ids went without a word: predictions joined back by id would pair the wrong rows."""
    from conftest import fast_options

    import tuneloop
    from tuneloop import TrainConfig

    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"the {w} {i},{'pos' if w == 'good' else 'neg'}\n"
                                             for i in range(20) for w in ("good", "bad")))
    out = tmp_path / "run"
    tuneloop.train(TrainConfig(train_file=str(train), output_dir=str(out), **fast_options(tiny_model, max_steps=1)))
    rows = tmp_path / "rows.csv"
    rows.write_text("id,text\n7,the good\n8,the bad\n7,the cat\n")
    capsys.readouterr()
    code, _, err = run_cli(["predict", "--model", str(out), "--input", str(rows), "--output",
                            str(tmp_path / "p.csv")], capsys)
    assert code == 0 and "1 row(s) repeat an id of column 'id' (e.g. '7')" in err, err
    assert (tmp_path / "p.csv").read_text().count("\n") == 4                     # every row predicted
    rows.write_text("id,text\n7,the good\n8,the bad\n")
    code, _, err = run_cli(["predict", "--model", str(out), "--input", str(rows), "--output",
                            str(tmp_path / "q.csv")], capsys)
    assert code == 0 and "repeat an id" not in err
