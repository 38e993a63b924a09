"""The scripts in examples/ run as written (public API only), here on the tiny model and small data."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import build_tiny_model, sample_words

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, args: list[str], monkeypatch, cwd: Path) -> None:
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / name), *args])
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def test_notebook_dataframe_example(tmp_path, monkeypatch, capsys):
    model = str(build_tiny_model(tmp_path / "tiny", extra_words=sample_words()))     # it trains on the MRPC sample
    run_example("notebook_dataframe.py", [model], monkeypatch, tmp_path)
    out = capsys.readouterr().out
    assert "dev metrics:" in out and "prob_equivalent" in out and "per class:" in out
    assert (tmp_path / "runs" / "notebook-dataframe" / "model" / "config.json").is_file()


def test_train_and_predict_example(tiny_model, tmp_path, monkeypatch, capsys):
    rows = [("the cat sat alpha", "yes"), ("a dog ran beta", "no")] * 12
    frame = pd.DataFrame(rows, columns=["text", "label"])
    frame.to_csv(tmp_path / "train.csv", index=False)
    frame.head(8).to_csv(tmp_path / "dev.csv", index=False)
    frame[["text"]].head(5).to_csv(tmp_path / "new.csv", index=False)
    run_example("train_and_predict.py", ["train.csv", "dev.csv", "new.csv", tiny_model], monkeypatch, tmp_path)
    predictions = pd.read_csv(tmp_path / "predictions.csv")
    assert len(predictions) == 5 and {"text", "label", "prob_no", "prob_yes"} <= set(predictions.columns)
    assert "wrote 5 predictions" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_examples_use_only_the_public_api(name):
    text = (EXAMPLES / name).read_text()
    assert "tuneloop." in text
    private = [line for line in text.splitlines() if "from tuneloop." in line or "tuneloop._" in line]
    assert not private, private
