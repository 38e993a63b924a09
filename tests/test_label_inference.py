"""--problem-type auto: a label column of whole numbers written with decimal points (4.0, 2.0, 1.0) trains as
classes, as class ids saved as a float column (0.0 / 1.0) are, and the run says how to make it regression; a
fraction (3.5) means regression."""

from __future__ import annotations

import logging

import pytest

from tuneloop.data.labels import infer_label_schema
from tuneloop.data.sources import load_user_files


def schema_of(tmp_path, labels: list[str], name: str = "train.csv", problem_type: str = "auto", sep: str = ","):
    path = tmp_path / name
    path.write_text(f"text{sep}label\n" + "".join(f"row {i}{sep}{v}\n" for i, v in enumerate(labels)))
    return infer_label_schema(load_user_files(str(path), None, None, None, None).train, problem_type, None, str(path))


def test_whole_numbers_written_with_a_decimal_point_are_classes_said(tmp_path, caplog):
    """4.0, 2.0, 1.0 trained as three classes without a word: scores saved as floats looked like class ids."""
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        schema = schema_of(tmp_path, ["4.0", "2.0", "1.0", "2.0", "4.0"])
    assert (schema.problem_type, schema.names) == ("single_label_classification", ["1", "2", "4"])
    said = [r for r in caplog.records if "written with a decimal point ('" in r.getMessage()]
    assert said and said[0].levelno == logging.WARNING and "--problem-type regression" in said[0].getMessage()
    assert "3 classes (1, 2, 4)" in said[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        binary = schema_of(tmp_path, ["0.0", "1.0", "1.0"], "binary.csv")     # pandas' float column of class ids
    assert (binary.problem_type, binary.names) == ("single_label_classification", ["0", "1"])
    assert schema_of(tmp_path, ["4.0", "3.5", "1.0"], "fraction.csv").problem_type == "regression"     # as before
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        schema_of(tmp_path, ["4", "2", "1"], "integers.csv")
    assert not [r for r in caplog.records if "decimal" in r.getMessage()]


@pytest.mark.parametrize("labels, names", [
    (["4", "2", "1", "2"], ["1", "2", "4"]),              # whole numbers written as integers: classes, as before
    (["1", "1.0", "0"], ["0", "1"]),                      # not every one with a point: `1` and `1.0` one class
])
def test_integers_and_mixed_spellings_stay_classes(tmp_path, labels, names):
    schema = schema_of(tmp_path, labels)
    assert (schema.problem_type, schema.names) == ("single_label_classification", names)


def test_the_user_may_train_decimal_labels_for_regression_and_is_not_warned(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        schema = schema_of(tmp_path, ["4.0", "2.0", "1.0"], problem_type="regression")
    assert (schema.problem_type, schema.names) == ("regression", [])
    assert not [r for r in caplog.records if "decimal point" in r.getMessage()]


def test_decimal_comma_files(tmp_path, caplog):
    """In a file with ';' separators a decimal comma is the decimal mark; dots there that group thousands are not."""
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        comma = schema_of(tmp_path, ["4,0", "2,0", "1,0"], "comma.csv", sep=";")
    assert (comma.problem_type, comma.names) == ("single_label_classification", ["1", "2", "4"])
    assert any("written with a decimal comma ('" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        grouped = schema_of(tmp_path, ["1.250", "2.500", "950", "1.250"], "grouped.csv", sep=";")   # 1250, 2500, 950
    assert (grouped.problem_type, grouped.names) == ("single_label_classification", ["950", "1250", "2500"])
    assert not [r for r in caplog.records if "written with a decimal" in r.getMessage()]
