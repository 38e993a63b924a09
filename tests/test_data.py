"""Reading GLUE files and the user's own, detecting columns, mapping labels, batching."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tuneloop import DataError, TrainConfig
from tuneloop.data.batching import LengthGroupedSampler, make_collator, train_loader
from tuneloop.data.labels import LabelEncoder, LabelSchema, infer_label_schema
from tuneloop.data.prepare import prepare_data
from tuneloop.data.columns import detect_columns
from tuneloop.data.sources import load_glue_folder, load_user_files
from tuneloop.model.tokenizer import load_tokenizer
from tuneloop.tasks import TASKS


def test_glue_mrpc_layout_reads_every_row(mrpc_dir):
    raw = load_glue_folder(str(mrpc_dir), TASKS["mrpc"], with_test=True)
    assert (len(raw.train), len(raw.evaluation["validation"]), len(raw.test["test"])) == (200, 60, 30)
    first = raw.train[0]
    assert first["label"] in ("0", "1") and first["text_b"]
    # the byte-order mark did not leak into the header, so "Quality" was found as the label column
    quoted = raw.train[3]
    assert quoted["text_a"].startswith('He said "')   # an unbalanced quote stays inside its field
    assert raw.train[4]["text_a"] and not raw.train[4]["text_a"].startswith("He said")
    assert raw.test["test"][5]["id"] == "5" and raw.test["test"][5]["label"] is None


def test_glue_row_with_wrong_number_of_fields_is_named(mrpc_dir):
    path = mrpc_dir / "dev.tsv"
    lines = path.read_bytes().split(b"\n")
    lines[7] += b"\textra"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError, match=r"dev\.tsv: line 8: expected 5 tab-separated fields .* found 6"):
        load_glue_folder(str(mrpc_dir), TASKS["mrpc"])


def test_non_utf8_bytes_are_named_with_their_line(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b"sentence,label\nfine,0\ncaf\xe9 au lait,1\n")
    with pytest.raises(DataError, match=r"train\.csv: line 3: bytes that are not UTF-8"):
        load_user_files(str(path), None, None, None, None)


def test_utf16_files_with_their_byte_order_mark_are_read_as_utf8_ones(tmp_path):
    """Excel's "Unicode Text" and Windows PowerShell's `>` write UTF-16 with a byte-order mark."""
    import gzip

    text = "sentence\tlabel\r\ncafé au lait\t1\r\n\"quoted\" tea\t0\r\n"
    (tmp_path / "le.tsv").write_bytes(text.encode("utf-16"))                       # the BOM, little-endian
    csv_text = text.replace("\t", ",").replace('"quoted" tea', '"""quoted"" tea"')
    (tmp_path / "be.csv").write_bytes(b"\xfe\xff" + csv_text.encode("utf-16-be"))
    (tmp_path / "le.tsv.gz").write_bytes(gzip.compress(text.encode("utf-16")))
    for name in ("le.tsv", "be.csv", "le.tsv.gz"):
        rows = load_user_files(str(tmp_path / name), None, None, None, None).train
        assert [(r["text_a"], r["label"]) for r in rows] == [("café au lait", "1"), ('"quoted" tea', "0")], name
    (tmp_path / "cut.tsv").write_bytes(text.encode("utf-16")[:-1])                # an odd byte at the end
    with pytest.raises(DataError, match=r"cut\.tsv: line \d: not valid UTF-16 text .* re-save the file as UTF-8"):
        load_user_files(str(tmp_path / "cut.tsv"), None, None, None, None)


def test_header_only_and_empty_files(tmp_path):
    header_only = tmp_path / "h.csv"
    header_only.write_text("text,label\n")
    with pytest.raises(DataError, match=r"h\.csv: no data rows"):
        load_user_files(str(header_only), None, None, None, None)
    empty = tmp_path / "e.tsv"
    empty.write_text("")
    with pytest.raises(DataError, match=r"e\.tsv: the file is empty"):
        load_user_files(str(empty), None, None, None, None)


@pytest.mark.parametrize("columns, expected", [
    (["idx", "sentence1", "sentence2", "label"], (("sentence1", "sentence2"), "label", "idx")),
    (["question1", "question2", "is_duplicate", "id"], (("question1", "question2"), "is_duplicate", "id")),
    (["premise", "hypothesis", "label"], (("premise", "hypothesis"), "label", None)),
    (["question", "sentence", "label"], (("question", "sentence"), "label", None)),
    (["text", "score"], (("text",), "score", None)),
    (["review", "target"], (("review",), "target", None)),
    (["ID", "Text", "Label"], (("Text",), "Label", "ID")),                      # any letter case
    (["Sentence1", " sentence2 ", "LABEL"], (("Sentence1", " sentence2 "), "LABEL", None)),
    (["text", "Text", "label"], (("text",), "label", None)),                    # the exact name first
    (["utterance", "intent"], (("utterance",), "intent", None)),
    (["review", "mood"], (("review",), "mood", None)),                          # the one column left over
    (["Unnamed: 0", "review", "mood"], (("review",), "mood", None)),            # beside pandas' index
    (["id", "review", "mood"], (("review",), "mood", "id")),
])
def test_column_detection(columns, expected):
    found = detect_columns("f.csv", columns, None, None, need_label=True)
    assert (found.text, found.label, found.id) == expected


def test_column_overrides_and_missing_columns():
    found = detect_columns("f.csv", ["body", "title", "y2"], ["title", "body"], "y2", need_label=True)
    assert found.text == ("title", "body") and found.label == "y2"
    with pytest.raises(DataError, match=r"f\.csv: no text column 'titel' .*--text-columns"):
        detect_columns("f.csv", ["body", "title"], ["titel"], None, need_label=False)
    with pytest.raises(DataError, match=r"cannot tell which column holds the text.*--text-columns"):
        detect_columns("f.csv", ["a", "b"], None, None, need_label=True)
    with pytest.raises(DataError, match=r"cannot tell which column holds the label.*--label-column"):
        detect_columns("f.csv", ["text", "b", "c"], None, None, need_label=True)
    with pytest.raises(DataError, match=r"cannot tell which column holds the text"):   # two alike: not guessed
        detect_columns("f.csv", ["TEXT", "Text", "label"], None, None, need_label=True)
    assert detect_columns("f.csv", ["text", "b"], None, None, need_label=False).label is None   # to predict
    with pytest.raises(DataError, match=r"^f\.csv: no column for the labels \(columns: id, text\); training and "
                                        r"evaluating .*--label-column COLUMN.*`tuneloop predict --input FILE`$"):
        detect_columns("f.csv", ["id", "text"], None, None, need_label=True)      # texts and ids alone
    assert not detect_columns("f.csv", ["text", "label", "b"], None, None, need_label=True).label_left_over
    with pytest.raises(DataError, match=r"^f\.csv: no text column 'titel' \(columns: body, title\); did you mean "
                                        r"'title'\? fix --text-columns$"):
        detect_columns("f.csv", ["body", "title"], ["titel"], None, need_label=False)
    with pytest.raises(DataError, match=r"^f\.csv: no label column 'lable' \(columns: text, Label\); did you mean "
                                        r"'Label'\? fix --label-column$"):
        detect_columns("f.csv", ["text", "Label"], None, "lable", need_label=True)
    found = detect_columns("f.csv", ["Review", "Stars"], ["review"], "stars", need_label=True)   # named: any case
    assert (found.text, found.label) == (("Review",), "Stars")
    with pytest.raises(DataError, match=r"^f\.csv: no label column 'stars' \(columns: text, b\); fix --label-column$"):
        detect_columns("f.csv", ["text", "b"], None, "stars", need_label=True)
    with pytest.raises(DataError, match=r"f\.csv: column 'title' is named as both a text column and the label "
                                        r"column; the model would read its answer"):
        detect_columns("f.csv", ["body", "title"], ["body", "title"], "title", need_label=True)


def test_string_labels_map_to_sorted_ids_and_back(tmp_path):
    path = tmp_path / "train.jsonl"
    rows = [{"text": f"t{i}", "label": lab} for i, lab in enumerate(["spam", "ham", "eggs", "ham"])]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    raw = load_user_files(str(path), None, None, None, None)
    schema = infer_label_schema(raw.train, "auto", None, str(path))
    assert schema.problem_type == "single_label_classification"
    assert schema.names == ["eggs", "ham", "spam"]
    encode = LabelEncoder(schema, str(path))
    assert [encode(r["label"], r["pos"]) for r in raw.train] == [2, 1, 0, 1]
    assert [r["pos"] for r in raw.train] == [1, 2, 3, 4]                 # jsonl positions are lines
    with pytest.raises(DataError, match=r"train\.jsonl: line 7: label 'bacon' was not seen in the training data"):
        encode("bacon", 7)


def test_integer_and_float_labels(tmp_path):
    ints = tmp_path / "ints.csv"
    ints.write_text("text,label\na,10\nb,2\nc,2\n")
    schema = infer_label_schema(load_user_files(str(ints), None, None, None, None).train, "auto", None, "ints")
    assert schema.names == ["2", "10"]                  # numeric order, not string order
    floats = tmp_path / "floats.csv"
    floats.write_text("text,score\na,0.5\nb,4.25\nc,3\n")
    schema = infer_label_schema(load_user_files(str(floats), None, None, None, None).train, "auto", None, "f")
    assert schema.problem_type == "regression" and schema.num_labels == 1


def test_boolean_labels_read_alike_from_json_and_csv_and_mixed_with_numbers_stop(tmp_path):
    """JSON's true/false were read as "1"/"0" while the same rows written as CSV (pandas' to_csv) read "True"/
    "False": a model trained on one file did not know the other's labels."""
    rows = [("a cat", True), ("a dog", False), ("the bird", True)]
    as_json = tmp_path / "rows.jsonl"
    as_json.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    as_csv = tmp_path / "rows.csv"
    as_csv.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    read = {}
    for path in (as_json, as_csv):
        train = load_user_files(str(path), None, None, None, None).train
        schema = infer_label_schema(train, "auto", None, path.name)
        encode = LabelEncoder(schema, path.name)
        read[path.suffix] = (schema.names, [encode(v, i) for i, v in enumerate(train["label"])])
    assert read[".jsonl"] == read[".csv"] == (["False", "True"], [1, 0, 1])

    mixed = tmp_path / "mixed.jsonl"           # true and 1 would be two classes once read as text
    mixed.write_text('{"text": "a", "label": true}\n{"text": "b", "label": false}\n{"text": "c", "label": 1}\n')
    with pytest.raises(DataError, match=r"mixed.jsonl: line 3: label 1 in column 'label' is a number but the "
                                        r"label of line 1 \(True\) is a boolean; give labels of one type"):
        load_user_files(str(mixed), None, None, None, None)


def test_labels_with_leading_zeros_are_codes_kept_as_written(tmp_path, caplog):
    """'01', '1' and '001' were one class '1' ("the label column holds only ['1']"), and codes '01', '02' were
    renamed '1', '2' in every prediction."""
    import logging

    codes = tmp_path / "codes.csv"
    codes.write_text("text,label\na,01\nb,1\nc,001\nd,02\ne,1.0\n")
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        schema = infer_label_schema(load_user_files(str(codes), None, None, None, None).train, "auto", None, "codes")
    assert schema.names == ["001", "01", "02", "1", "1.0"]
    assert any("kept as written, as codes; '001', '01', '1', '1.0' are different classes" in r.getMessage()
               for r in caplog.records)
    encode = LabelEncoder(schema, "codes")
    assert [encode(v, 2) for v in ("01", "001", "1", "02")] == [1, 0, 3, 2]
    plain = tmp_path / "plain.csv"
    plain.write_text("text,label\na,1\nb,1.0\nc,0\n")                        # no zeros in front: numbers, as before
    schema = infer_label_schema(load_user_files(str(plain), None, None, None, None).train, "auto", None, "plain")
    assert schema.names == ["0", "1"]


def test_glue_task_labels_accept_class_ids(mrpc_dir):
    schema = infer_label_schema(None, "auto", None, "x", TASKS["mrpc"])
    encode = LabelEncoder(schema, "dev.tsv", accept_ids=True)
    assert encode("0", 0) == 0 and encode("1", 0) == 1 and encode("equivalent", 0) == 1


def test_prepare_tokenizes_pairs_and_drops_raw_columns(tiny_model, mrpc_dir):
    tok = load_tokenizer(tiny_model)
    config = TrainConfig(task="mrpc", data_dir=str(mrpc_dir), model=tiny_model, max_length=12,
                         max_train_samples=50, max_eval_samples=20, quiet=True)
    data = prepare_data(config, tok)
    assert len(data.train) == 50 and len(data.evaluation["validation"]) == 20
    assert set(data.train.column_names) == {"doc", "id", "truncated", "input_ids", "token_type_ids",
                                            "attention_mask", "length", "labels"}
    row = data.train[0]
    assert row["input_ids"][0] == tok.cls_token_id and row["input_ids"].count(tok.sep_token_id) == 2
    assert 1 in row["token_type_ids"]                  # a pair: the second segment is marked
    assert max(data.train["length"]) <= 12             # truncation
    assert data.labels.names == ["not_equivalent", "equivalent"]


def test_collator_pads_each_batch_to_its_longest(tiny_model, mrpc_dir):
    tok = load_tokenizer(tiny_model)
    config = TrainConfig(task="mrpc", data_dir=str(mrpc_dir), model=tiny_model, batch_size=8, quiet=True,
                         group_by_length=False)
    data = prepare_data(config, tok)
    loader = train_loader(data.train, config, make_collator(tok, False, None))
    lengths = np.asarray(data.train["length"])
    for batch in list(loader)[:5]:          # the batch contract: model inputs, targets and rows apart
        assert set(batch.inputs) == {"input_ids", "token_type_ids", "attention_mask"}
        assert batch.rows.shape == (8,) and batch.weights is None and batch.soft is None
        width = batch.inputs["input_ids"].shape[1]
        assert len(batch) == 8 and batch.labels.dtype == torch.long
        assert batch.inputs["attention_mask"].sum(1).max() == width      # padded to the longest in the batch
        assert width <= lengths.max()
    fixed = make_collator(tok, True, 48)
    loader = train_loader(data.train, config, fixed)
    assert next(iter(loader)).inputs["input_ids"].shape == (8, 48)
    multiple = make_collator(tok, False, None, 8)
    assert next(iter(train_loader(data.train, config, multiple))).inputs["input_ids"].shape[1] % 8 == 0


def test_length_grouped_sampler_is_a_seeded_permutation_with_less_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 120, size=1000)
    sampler = LengthGroupedSampler(lengths, batch_size=8, seed=1)
    first = list(sampler)
    assert sorted(first) == list(range(1000))
    assert list(LengthGroupedSampler(lengths, 8, seed=1)) == first          # same seed, same epoch: same order
    sampler.set_epoch(1)
    assert list(sampler) != first                                            # a new epoch reshuffles

    def padded(order):
        return sum(len(b) * lengths[b].max() for b in np.array_split(np.asarray(order), len(order) // 8))

    plain = list(LengthGroupedSampler(lengths, 8, seed=1, group=False))
    assert sorted(plain) == list(range(1000))
    assert padded(first) < 0.7 * padded(plain)



def test_built_in_sample_is_the_recorded_data():
    """The sample stays byte-identical to what its README's provenance section records."""
    import hashlib
    import re

    from tuneloop.data.sources import SAMPLE_DIR

    recorded = dict(re.findall(r"\| `(\w+\.tsv)` \| `([0-9a-f]{64})` \|", (SAMPLE_DIR / "README.md").read_text()))
    assert set(recorded) == {"train.tsv", "dev.tsv", "test.tsv"}
    for name, digest in recorded.items():
        assert hashlib.sha256((SAMPLE_DIR / name).read_bytes()).hexdigest() == digest, name


def test_positions_are_named_alike_in_every_error(tmp_path):
    """The same row is `line 4` whether the reader or the label encoder finds the problem (header = line 1)."""
    from tuneloop.data.readers import position_word

    assert [position_word(p) for p in ("a.csv", "a.tsv", "a.jsonl", "a.json", "a.parquet", "hub:x/y")] == \
        ["line", "line", "line", "item", "row", "row"]
    assert [position_word(p) for p in ("train= (DataFrame, 4 rows)", "train= (DataFrame, rows counted from 1, 4 rows)",
                                       "train= (Dataset, 4 rows)")] == ["row with index", "row", "row"]
    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}\n{"text": null, "label": "x"}\n')
    with pytest.raises(DataError, match=r"train\.jsonl: line 3: column 'text' has no text"):
        load_user_files(str(train), None, None, None, None)


def test_a_csv_separated_by_semicolons_or_tabs_is_read_as_the_comma_one(tmp_path, caplog):
    """A .csv whose header has no comma but ';' (Excel where the comma is the decimal mark) or a tab is read with
    that separator, said once."""
    import logging

    from tuneloop.data.readers import file_columns, iter_rows

    rows = [("the cat; sat", "0,5"), ("a dog", "1")]
    comma = tmp_path / "comma.csv"
    comma.write_text("text,score\n" + "".join(f'"{t}","{s}"\n' for t, s in rows))
    semi = tmp_path / "semi.csv"
    semi.write_text("text;score\n" + "".join(f'"{t}";"{s}"\n' for t, s in rows))
    tab = tmp_path / "tab.csv"
    tab.write_text("text\tscore\n" + "".join(f"{t}\t{s}\n" for t, s in rows))
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        read = {p.name: [r for _, r in iter_rows(str(p))] for p in (comma, semi, tab)}
        assert file_columns(str(semi)) == file_columns(str(tab)) == ["text", "score"]
    assert read["comma.csv"] == read["semi.csv"] == read["tab.csv"] == [{"text": t, "score": s} for t, s in rows]
    said = [r.getMessage() for r in caplog.records]
    assert sum("read with ';' as the separator" in m for m in said) == 1          # once, though read twice
    assert not any("comma.csv: its header" in m for m in said)


def test_a_spreadsheets_empty_rows_are_left_out_of_labelled_data_not_of_rows_to_predict(tmp_path, caplog):
    """",,," rows (every field empty, whatever their count) carry no example: training and evaluation data leave
    them out and say how many; rows to predict keep them (the output's ids are the rows' order), so they stop the
    run as an empty text does. Those after the last row with data are nothing (a sheet's formatting reaches far)."""
    import logging

    from tuneloop.data.sources import canonical_rows

    path = tmp_path / "sheet.csv"
    path.write_text("text,label\nthe cat,0\n,\nthe dog,1\n,,,\n")
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        kept = list(canonical_rows(str(path), None, ["text"], "label", None, need_label=True))
    assert [(r["idx"], r["pos"], r["text_a"]) for r in kept] == [(0, 2, "the cat"), (1, 4, "the dog")]
    assert any("sheet.csv: 1 line(s) with every field empty left out" in r.getMessage() for r in caplog.records)
    with pytest.raises(DataError, match=r"sheet.csv: line 3: every field is empty"):
        list(canonical_rows(str(path), None, ["text"], None, None, need_label=False))


def test_labels_that_differ_only_in_case_or_spacing_are_said(tmp_path, caplog):
    import logging

    import datasets

    from tuneloop.data.labels import infer_label_schema

    table = datasets.Dataset.from_dict({"label": ["pos", "Neg", "neg", "POS", "not  sure", "Not sure"]})
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        schema = infer_label_schema(table, "auto", None, "labels.csv")
    assert len(schema.names) == 6                                           # still six classes: nothing is merged
    said = [r.getMessage() for r in caplog.records]
    assert said == ["labels.csv: the labels 'Neg' and 'neg'; 'Not sure' and 'not  sure'; 'POS' and 'pos' differ "
                    "only in case or spacing and are trained as different classes; if they mean the same, write "
                    "them one way"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        infer_label_schema(datasets.Dataset.from_dict({"label": ["pos", "neg"]}), "auto", None, "labels.csv")
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="tuneloop"):                # é as one character, and as e + accent
        schema = infer_label_schema(datasets.Dataset.from_dict({"label": ["caf\u00e9", "cafe\u0301", "bar"]}), "auto",
                                    None, "labels.csv")
    assert len(schema.names) == 3 and "differ only in case or spacing (or in how an accent is stored: Unicode's " \
        "composed and decomposed forms)" in caplog.text


def test_labels_that_are_other_labels_joined_say_the_label_separator(caplog):
    """'sports|tech' beside 'sports' and 'tech': a multi-label column without --label-separator is said (and still
    trained as asked); a label that merely holds the character ('R&D; Sales' beside no 'R&D') is not."""
    import logging

    import datasets

    table = datasets.Dataset.from_dict({"label": ["sports", "tech", "sports|tech", "tech | sports", "news"]})
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        schema = infer_label_schema(table, "auto", None, "tags.csv")
    assert schema.problem_type == "single_label_classification" and len(schema.names) == 5
    assert [r.getMessage() for r in caplog.records] == [
        "tags.csv: the labels 'sports|tech', 'tech | sports' are other labels joined by '|', and are trained as classes "
        "of their own (5 in all); if a row can carry several labels, give --label-separator '|' to train one output "
        "per label (multi-label)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        infer_label_schema(datasets.Dataset.from_dict({"label": ["R&D; Sales", "Sales", "HR"]}), "auto", None, "d.csv")
        infer_label_schema(table, "single_label_classification", None, "tags.csv")      # asked for: not second-guessed
        schema = infer_label_schema(table, "auto", "|", "tags.csv")
    assert not caplog.records and schema.names == ["news", "sports", "tech"]


def test_excels_sep_line_names_the_separator_and_is_not_the_header(tmp_path):
    """`sep=;` (or `sep=,`) as the first line, as Excel writes and reads it: the separator, skipped as the header;
    positions stay the file's lines."""
    from tuneloop.data.readers import file_columns

    for sep in (";", ",", "\t"):
        path = tmp_path / f"sep{ord(sep)}.csv"
        path.write_text(f"sep={sep}\ntext{sep}label\nthe cat{sep}a\nthe dog{sep}b\nthe cow{sep}\n")
        assert file_columns(str(path)) == ["text", "label"]
        with pytest.raises(DataError, match=r"line 5: empty label"):           # sep=(1) header(2) ... cow(5)
            load_user_files(str(path), None, None, None, None)
    path.write_text("sep=;\ntext;label\nthe cat;2,5\nthe dog;3\n")
    train = load_user_files(str(path), None, None, None, None).train
    assert [LabelEncoder(infer_label_schema(train, "auto", None, str(path)), str(path))(r["label"], r["pos"])
            for r in train] == [2.5, 3.0]                                      # ';' named: decimal commas


def test_a_semicolon_csvs_decimal_comma_labels_are_numbers_and_a_comma_csvs_are_said(tmp_path, caplog):
    """Excel writes ';' where the comma is the decimal mark: there "2,6" is 2.6 (regression, read alike by the
    training and the evaluation encoder); in a comma .csv the same quoted labels stay classes, with a warning, and
    an explicit regression names the decimal comma. A multi-label ',' separator keeps its meaning."""
    import logging

    rows = [("good", "2,6"), ("bad", "-0,5"), ("fine", "3"), ("ok", ",25"), ("dear", "1.250,5")]
    semi = tmp_path / "scores.csv"
    semi.write_text("text;score\n" + "".join(f"{t};{s}\n" for t, s in rows))
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        train = load_user_files(str(semi), None, None, None, None).train
        schema = infer_label_schema(train, "auto", None, str(semi))
    assert schema.problem_type == "regression"
    encode = LabelEncoder(schema, str(semi))
    assert [encode(r["label"], r["pos"]) for r in train] == [2.6, -0.5, 3.0, 0.25, 1250.5]
    assert any("labels with a decimal comma read as numbers ('2,6' as 2.6)" in r.getMessage() for r in caplog.records)
    assert infer_label_schema(train, "auto", ",", str(semi)).names == sorted(["-0", "25", "2", "3", "5", "6",
                                                                              "1.250"])

    comma = tmp_path / "quoted.csv"
    comma.write_text("text,score\n" + "".join(f'{t},"{s}"\n' for t, s in rows))
    caplog.clear()
    train = load_user_files(str(comma), None, None, None, None).train
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        assert infer_label_schema(train, "auto", None, str(comma)).problem_type == "single_label_classification"
    assert any("look like numbers with a decimal comma" in r.getMessage() for r in caplog.records)
    with pytest.raises(DataError, match=r"quoted.csv: line 2: regression target '2,6' is not a number; it has a "
                                        r"decimal comma"):
        infer_label_schema(train, "regression", None, str(comma))
    with pytest.raises(DataError, match=r"regression target '2,6' is not a number; it has a decimal comma"):
        LabelEncoder(schema, str(comma))("2,6", 2)


def test_a_semicolon_csvs_dots_that_group_thousands_are_read_as_such_and_the_undecidable_case_is_said(tmp_path,
                                                                                                         caplog):
    """A ';' file's 1.250 beside 950 (or beside 2,5) is 1250, as a spreadsheet with decimal commas writes it, in
    the training split and in the validation file read with the training's schema (which records it); beside 1.25
    the dots are decimal points; every label dotted with three decimals cannot be told apart: read as decimal
    points, said."""
    import logging

    def semi(name, labels):
        path = tmp_path / name
        path.write_text("text;price\n" + "".join(f"flat {i};{v}\n" for i, v in enumerate(labels)))
        return load_user_files(str(path), None, None, None, None).train, str(path)

    train, src = semi("prices.csv", ["950", "1.250", "12.400", "800", "2.300,50"])
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        schema = infer_label_schema(train, "regression", None, src)
    assert schema.thousands and LabelSchema.from_dict(schema.to_dict()) == schema
    assert any("labels with dots that group thousands read as numbers ('1.250' as 1250)" in r.getMessage()
               for r in caplog.records)
    dev, dev_src = semi("dev.csv", ["1.000", "9.999", "700"])          # alone it could be either: training decides
    assert [LabelEncoder(schema, dev_src)(r["label"], r["pos"]) for r in dev] == [1000.0, 9999.0, 700.0]
    assert [LabelEncoder(schema, src)(r["label"], r["pos"]) for r in train] == [950.0, 1250.0, 12400.0, 800.0,
                                                                                2300.5]
    whole, whole_src = semi("whole.csv", ["950", "1.250", "12.400", "800"])
    assert infer_label_schema(whole, "auto", None, whole_src).names == ["800", "950", "1250", "12400"]

    decimals, dec_src = semi("decimals.csv", ["1.250", "3.5", "2"])
    schema = infer_label_schema(decimals, "auto", None, dec_src)
    assert schema.problem_type == "regression" and not schema.thousands
    assert [LabelEncoder(schema, dec_src)(r["label"], r["pos"]) for r in decimals] == [1.25, 3.5, 2.0]
    caplog.clear()
    either, either_src = semi("either.csv", ["1.250", "2.517", "3.125"])
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        schema = infer_label_schema(either, "auto", None, either_src)
    assert schema.problem_type == "regression" and not schema.thousands
    assert [r.getMessage() for r in caplog.records] == [
        f"{either_src}: labels such as '1.250' are read with a decimal point (1.25); in a ';' file they may be "
        "grouped thousands (1250): if so, write them without the dots"]
    comma = tmp_path / "comma.csv"                           # a ',' file: dots are decimal points, and not said
    comma.write_text("text,price\na,950\nb,1.250\nc,800\n")
    train = load_user_files(str(comma), None, None, None, None).train
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        schema = infer_label_schema(train, "regression", None, str(comma))
        assert infer_label_schema(train, "auto", None, str(comma)).problem_type == "regression"
    assert not [r.getMessage() for r in caplog.records if "1.250" in r.getMessage()]
    assert [LabelEncoder(schema, str(comma))(r["label"], r["pos"]) for r in train] == [950.0, 1.25, 800.0]


def test_number_labels_but_for_a_word_are_said(tmp_path, caplog):
    """'1', '2', 'two': the word is trained as a class of its own, as asked by the data, and said; words among words,
    or numbers alone, are not; an explicit classification is not second-guessed."""
    import logging

    import datasets

    def said(labels, problem_type="auto"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tuneloop"):
            schema = infer_label_schema(datasets.Dataset.from_dict({"label": labels}), problem_type, None, "s.csv")
        return schema, [r.getMessage() for r in caplog.records]

    schema, messages = said(["1", "2", "two", "1", "3"])
    assert schema.names == ["1", "2", "3", "two"]
    assert messages == ["s.csv: the labels are numbers (1, 2, 3) but for 'two', trained as a class of its own; if it "
                        "is a number, write it as the others are; if it marks a row without a label, leave the row out"]
    assert "but for 'N/A' and 'x', trained as classes of their own" in said(["1", "2", "10", "N/A", "x"])[1][0]
    assert said(["pos", "neg", "1"])[1] == []                      # one number among words: a name like the others
    assert said(["1", "2", "3"])[1] == [] and said(["a", "b", "c"])[1] == []
    assert said(["1", "2", "two"], "single_label_classification")[1] == []
    assert said(["pos", "neg", "N/A"])[1] == ["s.csv: the label 'N/A' reads as a missing label and is trained as a "
                                               "class of its own; if those rows have no label, leave them out (or "
                                               "predict them with tuneloop predict)"]
    assert said(["yes", "none"])[1] == []                           # one other class: 'none' is a class there
    assert len(said(["1", "2", "N/A"])[1]) == 1                      # said once, as numbers but for a word
    semi = tmp_path / "semi.csv"                                  # numbers with decimal commas, in their order
    semi.write_text("text;score\na;2,6\nb;10\nc;x\n")
    train = load_user_files(str(semi), None, None, None, None).train
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        assert infer_label_schema(train, "auto", None, str(semi)).names == ["10", "2,6", "x"]
    assert "the labels are numbers (2,6, 10) but for 'x'" in caplog.text


def test_a_guessed_label_column_whose_every_row_differs_stops_and_many_gapped_numbers_are_said(tmp_path, caplog):
    """An id or text column taken for the label gives every row its own class: nothing to learn, so a guessed
    classification stops naming --label-column (and regression for numbers); an explicit one trains. Many whole
    numbers with gaps (amounts) are said; class ids 0..K-1 are not."""
    import logging

    def table(name, labels):
        path = tmp_path / name
        path.write_text("text,label\n" + "".join(f"row {i},{v}\n" for i, v in enumerate(labels)))
        return load_user_files(str(path), None, None, None, None).train, str(path)

    train, src = table("ids.csv", [f"item{i}" for i in range(12)])
    with pytest.raises(DataError, match=r"ids.csv: every row has a label of its own \(12 different labels in 12 "
                                        r"rows, e.g. 'item0'\).*--label-column NAME"):
        infer_label_schema(train, "auto", None, src)
    assert len(infer_label_schema(train, "single_label_classification", None, src).names) == 12
    train, src = table("prices.csv", [i * 7 for i in range(12)])
    with pytest.raises(DataError, match=r"if they are amounts or scores, give --problem-type regression"):
        infer_label_schema(train, "auto", None, src)
    small, src_small = table("two.csv", ["a", "b"])
    assert infer_label_schema(small, "auto", None, src_small).names == ["a", "b"]     # a toy file is not stopped

    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        train, src = table("scores.csv", [5 * (i % 25) for i in range(60)])
        assert len(infer_label_schema(train, "auto", None, src).names) == 25
        said = [r.getMessage() for r in caplog.records]
        assert any("25 different whole numbers from 0 to 120 with gaps" in m for m in said)
        caplog.clear()
        train, src = table("years.csv", [1990 + i % 25 for i in range(60)])
        infer_label_schema(train, "auto", None, src)
        assert any("25 different whole numbers from 1990 to 2014, trained as" in r.getMessage()
                   for r in caplog.records)
        caplog.clear()
        train, src = table("intents.csv", [i % 25 for i in range(60)])
        assert infer_label_schema(train, "auto", None, src).names == [str(i) for i in range(25)]
        assert not caplog.records


def test_the_baseline_fit_keeps_scikit_learns_many_classes_warning_to_itself():
    """The label check speaks for the data; scikit-learn's own warning is not shown twice, and the filter is the
    fit's alone (the same fit outside it still warns)."""
    import warnings

    from tuneloop.evaluation.baseline import _fitted, baseline_model

    texts, y = [f"text {i} here" for i in range(30)], list(range(30))

    def warned(fit) -> bool:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit()
        return any("unique classes" in str(w.message) for w in caught)

    assert not warned(lambda: _fitted(baseline_model("single_label_classification", 0), texts, y))
    assert warned(lambda: baseline_model("single_label_classification", 0).fit(texts, y))


def test_validation_rows_that_are_training_rows_are_counted_and_said(tiny_model, tmp_path, caplog):
    """The same text (up to whitespace) or pair on both sides is counted per split and said with an example; the
    training file given again as --validation-file is said as such; a held-out split of a file without
    duplicates has none; results.json's data stats carry the count."""
    import logging

    from tuneloop.data.overlap import check_overlap
    from tuneloop.model.tokenizer import load_tokenizer

    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"the cat {i},{i % 2}\n" for i in range(40)))
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\nthe   cat 3,1\nthe cat 7,0\na dog,1\none bird,0\n")
    raw = load_user_files(str(train), str(dev), None, None, None)
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        assert check_overlap(raw.train, raw.evaluation, raw.source, held_out=False) == {"validation": 2}
    said = [r.getMessage() for r in caplog.records]
    assert any("validation: 2 of 4 rows (50.0%) are also training rows" in m and "'the   cat 3'" in m
               for m in said)
    caplog.clear()
    same = load_user_files(str(train), str(train), None, None, None)
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        assert check_overlap(same.train, same.evaluation, same.source, held_out=False) == {"validation": 40}
    assert any("is also the training file" in r.getMessage() for r in caplog.records)

    tok = load_tokenizer(tiny_model)
    config = TrainConfig(train_file=str(train), model=tiny_model, quiet=True)
    assert prepare_data(config, tok).stats["validation"]["rows_in_training"] == 0
    config = TrainConfig(train_file=str(train), validation_file=str(dev), model=tiny_model, quiet=True)
    assert prepare_data(config, tok).stats["validation"]["rows_in_training"] == 2


def test_a_multi_label_row_with_none_of_the_labels_is_written_as_an_empty_list(tmp_path):
    """An empty cell stays an error (a row nobody labelled looks the same), naming the way to say "none of them":
    [] is a row negative for every label."""
    path = tmp_path / "tags.csv"
    path.write_text('text,tags\na b,"x,y"\nc d,"[]"\ne f,"y"\n')
    train = load_user_files(str(path), None, None, None, "tags").train
    schema = infer_label_schema(train, "auto", ",", str(path))
    encode = LabelEncoder(schema, str(path))
    assert schema.names == ["x", "y"] and [encode(r["label"], r["pos"]) for r in train] == [[1, 1], [0, 0], [0, 1]]
    path.write_text('text,tags\na b,"x,y"\nc d,\n')
    with pytest.raises(DataError, match=r"tags.csv: line 3: empty label in column 'tags'.*write \[\] for a row "
                                        r"with none of the labels"):
        load_user_files(str(path), None, None, None, "tags")


def test_json_files_in_the_shapes_people_write_them(tmp_path):
    """JSON Lines in a .json file (as `datasets` reads .json), columns of lists, and pandas' to_json in its default,
    index, split and table orientations all read as the same rows; a JSON array in a .jsonl file says to name it .json."""
    from tuneloop.data.readers import iter_rows

    rows = [{"text": f"the cat {i}", "label": "ab"[i % 2]} for i in range(5)]
    shapes = {
        "lines.json": "".join(json.dumps(r) + "\n\n" for r in rows),                     # was "Extra data"
        "columns.json": json.dumps({"text": [r["text"] for r in rows], "label": [r["label"] for r in rows]}),
        "pandas.json": json.dumps({c: {str(i): r[c] for i, r in enumerate(rows)} for c in ("text", "label")}),
        "index.json": json.dumps({str(i): r for i, r in enumerate(rows)}),
        "array.json": json.dumps(rows),
        "wrapped.json": json.dumps({"data": rows}),
        "split.json": json.dumps({"columns": ["text", "label"], "index": list(range(5)),        # orient="split"
                                  "data": [[r["text"], r["label"]] for r in rows]}),
        "table.json": json.dumps({"schema": {"fields": [], "primaryKey": ["index"]},            # orient="table"
                                  "data": [{"index": i, **r} for i, r in enumerate(rows)]}),
    }
    for name, text in shapes.items():
        (tmp_path / name).write_text(text)
        read = list(iter_rows(str(tmp_path / name)))
        assert [row for _, row in read] == rows, name
        assert [n for n, _ in read] == [1, 2, 3, 4, 5], name                     # items, whatever the lines
    for text in (json.dumps(rows), json.dumps(rows, indent=2)):
        (tmp_path / "array.jsonl").write_text(text)
        with pytest.raises(DataError, match=r"array\.jsonl: line 1: .*; the file holds a JSON array: name it \.json"):
            list(iter_rows(str(tmp_path / "array.jsonl")))
    (tmp_path / "broken.json").write_text('{"text": "a", "label": "b"}\n{"text": \n')
    with pytest.raises(DataError, match=r"broken\.json: line 2: not valid JSON"):
        list(iter_rows(str(tmp_path / "broken.json")))


def test_compressed_files_read_as_the_file_they_hold(tmp_path):
    import bz2
    import gzip
    import lzma
    import zipfile

    from tuneloop.data.readers import file_columns, iter_rows

    text = "text,label\nthe cat,a\nthe dog,b\n"
    expected = [(2, {"text": "the cat", "label": "a"}), (3, {"text": "the dog", "label": "b"})]
    (tmp_path / "d.csv.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "d.tsv.xz").write_bytes(lzma.compress(text.replace(",", "\t").encode()))
    (tmp_path / "d.csv.bz2").write_bytes(bz2.compress(text.replace(",", ";").encode()))     # its own separator
    with zipfile.ZipFile(tmp_path / "kaggle.zip", "w") as archive:                          # one file, any name
        archive.writestr("train.csv", text)
    for name in ("d.csv.gz", "d.tsv.xz", "d.csv.bz2", "kaggle.zip"):
        assert list(iter_rows(str(tmp_path / name))) == expected, name
        assert file_columns(str(tmp_path / name)) == ["text", "label"], name
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(b'{"text": "the cat", "label": "a"}\n{"text": \n'))
    with pytest.raises(DataError, match=r"d\.jsonl\.gz: line 2: not valid JSON"):          # lines as decompressed
        list(iter_rows(str(tmp_path / "d.jsonl.gz")))
    (tmp_path / "bad.csv.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match=r"bad\.csv\.gz: cannot be decompressed"):
        list(iter_rows(str(tmp_path / "bad.csv.gz")))
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as archive:
        archive.writestr("a.csv", text)
        archive.writestr("b.csv", text)
    with pytest.raises(DataError, match=r"two\.zip: a zip of data must hold one file, it holds 2 \(a\.csv, b\.csv\)"):
        list(iter_rows(str(tmp_path / "two.zip")))


def test_the_columns_a_training_file_is_read_by_are_said_when_detected(tmp_path, caplog):
    import logging

    path = tmp_path / "news.csv"
    path.write_text("id,title,body,author,category\n1,the cat,the dog sat,bob,a\n2,a cat,a dog ran,ann,b\n")
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        load_user_files(str(path), None, None, None, None)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("columns of")]
    assert said == [f"columns of {path}: text 'body', label 'category', id 'id' (detected; --text-columns / "
                    "--label-column name others); not read: title, author"]            # the title was left out unsaid
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        load_user_files(str(path), None, None, ["title", "body"], "category")
    assert not [r for r in caplog.records if r.getMessage().startswith("columns of")]    # named: nothing to say


def test_the_one_column_left_over_is_the_label_and_said(tmp_path, caplog):
    import logging

    path = tmp_path / "reviews.csv"
    path.write_text("Review,Mood\nthe cat sat,happy\nthe dog ran,sad\na cat ran,happy\n")
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        raw = load_user_files(str(path), None, None, None, None)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("columns of")]
    assert said == [f"columns of {path}: text 'Review', label 'Mood' (the one other column) (detected; "
                    "--text-columns / --label-column name others)"]
    assert raw.text_columns == ("Review",)
    assert sorted(raw.train["label"]) == ["happy", "happy", "sad"]


def test_an_excel_workbook_is_read_as_a_csv_file_is(tmp_path, caplog):
    import datetime as dt
    import logging

    import openpyxl

    from tuneloop.data.readers import file_columns, iter_rows

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["text", "label", "when", None])             # an empty cell after the last name: not a column
    sheet.append(["the cat", 1, dt.date(2020, 1, 2)])
    sheet.append([None, None, None])                          # an empty row: an empty row (training leaves it out)
    sheet.append(["the dog", 2.0, None])
    sheet.append([None, None, None])                          # after the last row with data: none
    book.create_sheet("notes").append(["not read"])
    book.save(tmp_path / "d.xlsx")
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        rows = list(iter_rows(str(tmp_path / "d.xlsx")))
    assert rows == [(2, {"text": "the cat", "label": "1", "when": "2020-01-02"}),
                    (3, {"text": "", "label": "", "when": ""}),
                    (4, {"text": "the dog", "label": "2", "when": ""})]       # the sheet's rows; 2.0 as written 2
    assert file_columns(str(tmp_path / "d.xlsx")) == ["text", "label", "when"]
    assert any("2 sheets; reading the first, 'Sheet'" in r.getMessage() for r in caplog.records)
    bad = openpyxl.Workbook()
    bad.active.append(["text", None, "label"])
    bad.active.append(["a", 1, "b"])
    bad.save(tmp_path / "blank.xlsx")
    with pytest.raises(DataError, match=r"blank\.xlsx: row 1, column B: no column name"):
        list(iter_rows(str(tmp_path / "blank.xlsx")))
    (tmp_path / "fake.xlsx").write_text("not a workbook")
    with pytest.raises(DataError, match=r"fake\.xlsx: not a readable \.xlsx workbook"):
        list(iter_rows(str(tmp_path / "fake.xlsx")))


def test_a_sheets_title_rows_above_its_column_names_are_left_out(tmp_path, caplog):
    """A report's title and a blank row above the column names: the header is the first row naming two columns or
    more, the rows keep the sheet's numbers, and the log says what was left out; a one-column sheet, or a first row
    that names the columns, reads as before."""
    import logging

    import openpyxl

    from tuneloop.data.readers import file_columns, iter_rows

    book = openpyxl.Workbook()
    book.active.append(["Customer feedback, December"])
    book.active.append([])
    book.active.append(["text", "label"])
    book.active.append(["the cat", "a"])
    book.active.append(["the dog", 7])
    book.save(tmp_path / "report.xlsx")
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        rows = list(iter_rows(str(tmp_path / "report.xlsx")))
    assert rows == [(4, {"text": "the cat", "label": "a"}), (5, {"text": "the dog", "label": "7"})]
    assert file_columns(str(tmp_path / "report.xlsx")) == ["text", "label"]
    assert "rows 1-2 above the column names left out (a title: 'Customer feedback, December'); the header is " \
        "row 3" in caplog.text
    single = openpyxl.Workbook()
    for value in ("text", "the cat", "the dog"):
        single.active.append([value])
    single.save(tmp_path / "single.xlsx")
    assert list(iter_rows(str(tmp_path / "single.xlsx"))) == [(2, {"text": "the cat"}), (3, {"text": "the dog"})]
    numbers = openpyxl.Workbook()                               # a row of numbers is not taken for column names
    for cells in (["scores"], [1, 2], [3, 4]):
        numbers.active.append(cells)
    numbers.save(tmp_path / "numbers.xlsx")
    assert file_columns(str(tmp_path / "numbers.xlsx")) == ["scores"]


def test_a_data_path_can_name_a_workbooks_sheet(tmp_path):
    import openpyxl

    from tuneloop.data.readers import file_columns, format_suffix, iter_rows
    from tuneloop.sheets import is_data_file, sheet_path

    book = openpyxl.Workbook()
    book.active.append(["first"])
    book.active.append(["1"])
    dev = book.create_sheet("dev #2")                       # a sheet name may hold the mark itself
    dev.append(["text", "label"])
    dev.append(["the cat", "yes"])
    empty = book.create_sheet("empty")
    empty.append(["text", "label"])
    book.save(tmp_path / "b.xlsx")
    path = str(tmp_path / "b.xlsx")
    assert sheet_path(f"{path}#dev #2") == (path, "dev #2") and format_suffix(f"{path}#dev #2") == ".xlsx"
    assert list(iter_rows(f"{path}#dev #2")) == [(2, {"text": "the cat", "label": "yes"})]
    assert list(iter_rows(f"{path}#DEV #2")) == list(iter_rows(f"{path}#dev #2"))     # case as the user types it
    assert file_columns(f"{path}#dev #2") == ["text", "label"] and file_columns(path) == ["first"]
    assert is_data_file(f"{path}#anything") and not is_data_file(str(tmp_path / "no.xlsx#dev"))
    with pytest.raises(DataError, match=r"#nope: the workbook has no sheet named 'nope'; its sheets: 'Sheet', "
                                        r"'dev #2', 'empty' \(name one after #, e.g. .*b\.xlsx#Sheet\)"):
        list(iter_rows(f"{path}#nope"))
    with pytest.raises(DataError, match=r"#empty: no data rows \(the sheet 'empty' holds only its header row\)"):
        list(iter_rows(f"{path}#empty"))
    odd = tmp_path / "b.xlsx#rows.csv"                      # a file whose whole name is that is that file
    odd.write_text("text,label\nthe dog,no\n")
    assert sheet_path(str(odd)) == (str(odd), None) and list(iter_rows(str(odd))) == [(2, {"text": "the dog",
                                                                                            "label": "no"})]
    assert sheet_path("rows.csv#x") == ("rows.csv#x", None)  # only workbooks have sheets


def test_a_models_recorded_text_columns_are_found_in_any_letter_case(tmp_path):
    from tuneloop.predict.evaluate import known_text

    path = tmp_path / "new.csv"
    path.write_text("Ticket_Text,Other\nprinter is down,x\n")
    assert known_text(str(path), {"text_columns": ["ticket_text"]}, None) == ("Ticket_Text",)


def test_a_row_without_its_id_stops_in_every_format_naming_it(tmp_path):
    """A JSON row without the id key, a JSON null and an empty CSV cell are one rule: an error naming the row (not
    a KeyError, a datasets traceback, or the id "None"), for a file to predict and a training file alike."""
    from tuneloop.data.sources import canonical_rows

    (tmp_path / "missing.jsonl").write_text('{"id": 1, "text": "alpha"}\n{"text": "beta two"}\n')
    (tmp_path / "null.json").write_text('[{"id": 1, "text": "alpha"}, {"id": null, "text": "beta"}]')
    (tmp_path / "empty.csv").write_text("id,text\n1,alpha\n,beta\n")
    for name, where, got in (("missing.jsonl", "line 2", "missing"), ("null.json", "item 2", "got None"),
                             ("empty.csv", "line 3", "got ''")):
        path = str(tmp_path / name)
        with pytest.raises(DataError, match=rf"{name}: {where}: no id in column 'id' \({got}\); give every row"):
            list(canonical_rows(path, None, ("text",), None, "id", False))
    rows = [{"id": i, "text": f"alpha {i}", "label": i % 2} for i in range(8)]
    del rows[4]["id"]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"^train\.jsonl: line 5: no id in column 'id' \(missing\)"):
        _in(tmp_path, lambda: load_user_files("train.jsonl", None, None, None, None))


def _in(folder, call):
    """`call()` with `folder` the working directory (paths given relative, as a user types them)."""
    import os

    before = os.getcwd()
    os.chdir(folder)
    try:
        return call()
    finally:
        os.chdir(before)


def test_row_errors_name_the_file_as_given_and_the_line_a_row_starts_on(tmp_path):
    (tmp_path / "ml.csv").write_text('id,text,label\n1,alpha,pos\n2,"beta\nsecond\nthird",\n3,alpha,pos\n')
    with pytest.raises(DataError, match=r"^ml\.csv: line 3: empty label in column 'label'"):
        _in(tmp_path, lambda: load_user_files("ml.csv", None, None, None, None))


def test_numbers_in_a_json_text_column_are_the_texts_they_are_written_as(tmp_path):
    from tuneloop.data.sources import canonical_rows

    (tmp_path / "n.jsonl").write_text('{"text": "alpha"}\n{"text": 42}\n{"text": 3.5}\n{"text": null, "note": "x"}\n')
    rows = canonical_rows(str(tmp_path / "n.jsonl"), None, ("text",), None, None, False)
    assert [next(rows)["text_a"] for _ in range(3)] == ["alpha", "42", "3.5"]
    with pytest.raises(DataError, match=r"n\.jsonl: line 4: column 'text' has no text \(got None\)"):
        next(rows)


def test_empty_rows_in_a_file_to_predict_stop_naming_them_and_training_leaves_them_out(tmp_path, caplog):
    """An empty line, a one-column file's "" and a sheet's blank row between rows: an error naming the line or row
    in a file to predict (its predictions are numbered by row: skipping one would shift the ids after it); left
    out of a training file and counted; blank lines and sheet rows after the last row are nothing."""
    import logging

    import openpyxl

    from tuneloop.data.sources import canonical_rows

    (tmp_path / "one.csv").write_text('text\nalpha one\n""\nbeta two\n\n\n')
    (tmp_path / "gap.csv").write_text("text\nalpha one\n\nbeta two\n")
    book = openpyxl.Workbook()
    for cells in (["text"], ["alpha one"], [None], ["beta two"], [None], [None]):
        book.active.append(cells)
    book.save(tmp_path / "gap.xlsx")
    for name, where in (("one.csv", "line 3"), ("gap.csv", "line 3"), ("gap.xlsx", "row 3")):
        with pytest.raises(DataError, match=rf"{name}: {where}: every field is empty; drop the row or fill it in"):
            list(canonical_rows(str(tmp_path / name), None, ("text",), None, None, False))
    (tmp_path / "end.csv").write_text("text\nalpha one\nbeta two\n\n\n")
    assert [r["pos"] for r in canonical_rows(str(tmp_path / "end.csv"), None, ("text",), None, None, False)] == [2, 3]
    (tmp_path / "train.csv").write_text("text,label\nalpha one,a\n\nbeta two,b\n,\nalpha,a\n")
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        raw = load_user_files(str(tmp_path / "train.csv"), None, None, None, None)
    assert list(raw.train["pos"]) == [2, 4, 6]
    assert any("2 line(s) with every field empty left out" in r.getMessage() for r in caplog.records)


def test_pandas_default_to_csv_and_to_excel_index_is_set_aside(tmp_path, caplog):
    """df.to_csv(path) and df.to_excel(path) write the index as a nameless first column: read as pandas' index
    ('Unnamed: 0', as pandas reads it back), said, so `review,mood` is detected as it is without the index; a
    nameless first column that does not hold whole numbers is not taken for one."""
    import logging

    import pandas as pd

    from tuneloop.data.readers import file_columns

    frame = pd.DataFrame({"review": ["alpha good", "beta bad"] * 5, "mood": ["pos", "neg"] * 5})
    frame.to_csv(tmp_path / "d.csv")
    frame.to_excel(tmp_path / "d.xlsx")
    for name in ("d.csv", "d.xlsx"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="tuneloop"):
            raw = load_user_files(str(tmp_path / name), None, None, None, None)
        assert raw.text_columns == ("review",) and sorted(set(raw.train["label"])) == ["neg", "pos"]
        said = " ".join(r.getMessage() for r in caplog.records)
        assert "its first column has no name and holds whole numbers: read as pandas' index" in said
        assert "label 'mood' (the one other column)" in said and "not read: Unnamed: 0" in said
    (tmp_path / "t.csv").write_text(",review,mood\nx,alpha,pos\n")
    assert file_columns(str(tmp_path / "t.csv")) == ["", "review", "mood"]


def test_columns_detected_in_the_training_file_and_missing_from_validation_are_said_so(tmp_path):
    """Not "fix --text-columns", a flag never given: the column was detected in the training file, named; the
    flag is suggested only where both files have the columns it would name."""
    (tmp_path / "train.csv").write_text("review,stars\nalpha good,pos\nbeta bad,neg\n")
    (tmp_path / "dev.csv").write_text("text,label\nalpha good,pos\nbeta bad,neg\n")
    (tmp_path / "dev2.csv").write_text("review,verdict\nalpha good,pos\nbeta bad,neg\n")
    with pytest.raises(DataError, match=r"^dev\.csv: no text column 'review', which tuneloop detected as the text in "
                                        r"the training file train\.csv \(columns here: text, label\); give both files "
                                        r"the same column names") as e:
        _in(tmp_path, lambda: load_user_files("train.csv", "dev.csv", None, None, None))
    assert "--text-columns" not in str(e.value)
    with pytest.raises(DataError, match=r"^dev2\.csv: no label column 'stars', which tuneloop detected as the label"):
        _in(tmp_path, lambda: load_user_files("train.csv", "dev2.csv", None, None, None))
    (tmp_path / "both.csv").write_text("text,review,stars\nalpha good,a,pos\nbeta bad,b,neg\n")
    (tmp_path / "dev3.csv").write_text("review,stars\nalpha good,pos\nbeta bad,neg\n")
    with pytest.raises(DataError, match=r"both files have 'review': name it with --text-columns review$"):
        _in(tmp_path, lambda: load_user_files("both.csv", "dev3.csv", None, None, None))


def test_tsv_predictions_are_written_as_tsv_is_read(tmp_path):
    """.tsv is read without quoting (GLUE's way) and written so: a text's quotes stay as they are and the file
    reads back; a text with a tab or a line break, which such a file cannot hold, is refused naming its line."""
    from tuneloop.data.readers import iter_rows
    from tuneloop.predict.rows import write_predictions

    rows = [{"id": "1", "text": 'beta "x"', "label": "pos"}, {"id": "2", "text": '"quoted"', "label": "neg"}]
    write_predictions(rows, str(tmp_path / "p.tsv"))
    assert (tmp_path / "p.tsv").read_text() == 'id\ttext\tlabel\n1\tbeta "x"\tpos\n2\t"quoted"\tneg\n'
    assert [row for _, row in iter_rows(str(tmp_path / "p.tsv"))] == rows
    write_predictions(rows, str(tmp_path / "p.csv"))                 # a .csv quotes as csv does, and reads back
    assert [row for _, row in iter_rows(str(tmp_path / "p.csv"))] == rows
    for bad in ("alpha line\nsecond", "a\tb"):
        with pytest.raises(DataError, match=r"--output .*q\.tsv: line 3 \(id 2\), column 'text': holds a tab or a "
                                            r"line break, .*write a \.csv or \.jsonl file instead"):
            write_predictions([rows[0], {**rows[1], "text": bad}], str(tmp_path / "q.tsv"))
        assert not (tmp_path / "q.tsv").exists()
