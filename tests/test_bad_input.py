"""Bad input: one line naming the file, row/line and column and how to fix it; exit code 2; no traceback."""

from __future__ import annotations

import pytest
from conftest import fast_options

from tuneloop.cli.main import main


def run_cli(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    return code, err


def train_argv(tiny_model, tmp_path, train, dev, *extra):
    return ["train", "--model", tiny_model, "--train-file", str(train), "--validation-file", str(dev),
            "--output-dir", str(tmp_path / "out"), "--max-steps", "1", "--quiet", *extra]


def check(code, err, *fragments):
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def write(path, text, mode="w"):
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.fixture
def good(tmp_path):
    return write(tmp_path / "good.csv", "text,label\n" + "".join(f"the cat {i},{i % 2}\n" for i in range(10)))


@pytest.fixture
def good_dev(tmp_path):
    """Validation rows other than `good`'s (the same file on both sides is said: data/overlap.py)."""
    return write(tmp_path / "good_dev.csv", "text,label\n" + "".join(f"the dog {i},{i % 2}\n" for i in range(6)))


def test_missing_text_column(tiny_model, tmp_path, good, capsys):
    bad = write(tmp_path / "bad.csv", "words,label\nthe cat,1\n")
    check(*run_cli(train_argv(tiny_model, tmp_path, bad, good), capsys), "bad.csv", "--text-columns", "words")


def test_named_text_column_absent(tiny_model, tmp_path, good, good_dev, capsys):
    check(*run_cli(train_argv(tiny_model, tmp_path, good, good_dev, "--text-columns", "body"), capsys),
          "good.csv", "'body'", "--text-columns")


def test_missing_label_column(tiny_model, tmp_path, good, capsys):
    bad = write(tmp_path / "dev.csv", "text,category\nthe cat,1\n")
    check(*run_cli(train_argv(tiny_model, tmp_path, good, bad, "--label-column", "label"), capsys),
          "dev.csv", "'label'", "--label-column")


def test_label_unseen_in_training(tiny_model, tmp_path, good, capsys):
    dev = write(tmp_path / "dev.csv", "text,label\nthe cat,0\nthe dog,1\nthe cow,7\n")
    check(*run_cli(train_argv(tiny_model, tmp_path, good, dev), capsys), "dev.csv", "line 4", "'7'",
          "not seen in the training data")


def test_empty_and_header_only_files(tiny_model, tmp_path, good, capsys):
    empty = write(tmp_path / "empty.csv", "")
    check(*run_cli(train_argv(tiny_model, tmp_path, empty, good), capsys), "empty.csv", "empty")
    header = write(tmp_path / "header.csv", "text,label\n")
    check(*run_cli(train_argv(tiny_model, tmp_path, good, header), capsys), "header.csv", "no data rows")


def test_non_numeric_regression_target(tiny_model, tmp_path, capsys):
    train = write(tmp_path / "scores.csv", "text,score\na b,1.5\nc d,2.25\ne f,n/a\n")
    check(*run_cli(train_argv(tiny_model, tmp_path, train, train, "--problem-type", "regression"), capsys),
          "scores.csv", "line 4", "'n/a'", "not a number")


def test_row_with_wrong_number_of_fields(tiny_model, tmp_path, good, capsys):
    bad = write(tmp_path / "bad.tsv", "sentence\tlabel\nthe cat\t1\nthe\tdog\t0\n")
    check(*run_cli(train_argv(tiny_model, tmp_path, bad, good), capsys), "bad.tsv", "line 3", "expected 2",
          "found 3")


def test_a_quote_left_open_names_the_line_it_opened_on(tiny_model, tmp_path, good, capsys):
    """A CSV field whose closing quote is missing carries the row across the lines after it: the error names the
    line the quote opened on, not only the line where reading gave up."""
    open_to_end = write(tmp_path / "open.csv", 'text,label\nthe cat,1\n"the dog,0\nthe cow,1\nthe hen,0\n')
    check(*run_cli(train_argv(tiny_model, tmp_path, open_to_end, good), capsys), "open.csv: lines 3-5 (a quoted "
          "field opened on line 3 runs across the line breaks after it: is a closing quote missing?): malformed CSV")
    closed_late = write(tmp_path / "late.csv", 'text,label\nthe cat,1\n"the dog,0\nthe cow",1,x\nthe hen,0\n')
    check(*run_cli(train_argv(tiny_model, tmp_path, closed_late, good), capsys), "late.csv: lines 3-4 (a quoted "
          "field opened on line 3", "expected 2 comma-separated fields (text, label), found 3")
    quoted = write(tmp_path / "quoted.csv", 'text,label\n"the cat\nsat",1\nthe dog,0,x\n')   # a real line break
    check(*run_cli(train_argv(tiny_model, tmp_path, quoted, good), capsys), "quoted.csv: line 4: expected 2")


def test_a_tsv_field_quoted_around_a_tab_says_why_it_splits(tiny_model, tmp_path, good, capsys):
    bad = write(tmp_path / "quoted.tsv", 'sentence\tlabel\nthe cat\t1\n"the\tdog"\t0\n')   # as pandas writes it
    check(*run_cli(train_argv(tiny_model, tmp_path, bad, good), capsys), "quoted.tsv: line 3: expected 2",
          "found 3; a quoted field holds a tab, and .tsv files are read without quoting (as GLUE writes them): save "
          "the file as .csv, or take the tabs out of its texts")


def test_a_folder_given_as_a_data_file_is_said_as_a_folder(tiny_model, tmp_path, good, capsys):
    folder = tmp_path / "data"
    folder.mkdir()
    check(*run_cli(train_argv(tiny_model, tmp_path, str(folder), good), capsys),
          f"--train-file: {folder} is a folder; give a data file in it (a GLUE task's folder is --data-dir DIR with "
          "--task NAME)")


def test_evaluate_on_a_file_that_is_not_there(tiny_model, tmp_path, good, good_dev, capsys):
    """It was a FileNotFoundError traceback from reading the file's header for its columns."""
    assert main(train_argv(tiny_model, tmp_path, good, good_dev, "--no-report", "--baseline", "none")) == 0
    capsys.readouterr()
    missing = tmp_path / "nope.csv"
    check(*run_cli(["evaluate", "--model", str(tmp_path / "out"), "--validation-file", str(missing)], capsys),
          f"--validation-file: {missing} does not exist or is not a file")


def test_bytes_that_are_not_utf8(tiny_model, tmp_path, good, capsys):
    bad = write(tmp_path / "latin1.csv", "text,label\nthe cat,1\n".encode() + "café,0\n".encode("latin-1"))
    check(*run_cli(train_argv(tiny_model, tmp_path, bad, good), capsys), "latin1.csv", "line 3", "not UTF-8")


def test_malformed_jsonl(tiny_model, tmp_path, good, capsys):
    bad = write(tmp_path / "bad.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": \n')
    check(*run_cli(train_argv(tiny_model, tmp_path, bad, good), capsys), "bad.jsonl", "line 2", "not valid JSON")
    nested = write(tmp_path / "nested.jsonl", '{"text": "a", "label": 1}\n{"text": {"body": "b"}, "label": 0}\n')
    check(*run_cli(train_argv(tiny_model, tmp_path, nested, good), capsys),      # trained on "{'body': 'b'}"
          "nested.jsonl: line 2: column 'text' holds a JSON object, not a text ({'body': 'b'}); give the text itself")


def test_half_a_character_in_a_json_text_is_one_line_in_training_and_predicting(tiny_model, tmp_path, good,
                                                                                   capsys):
    """JSON's \\ud83d escapes carry half of an emoji (a text cut inside it): the tokenizer's TypeError was a
    traceback, in predict too."""
    bad = write(tmp_path / "cut.jsonl", '{"text": "a good film", "label": 1}\n{"text": "good \\ud83d", "label": 0}\n')
    said = "cut.jsonl: line 2: column 'text' holds half of a character ('\\ud83d' at character 6, a lone surrogate"
    check(*run_cli(train_argv(tiny_model, tmp_path, bad, good), capsys), said)
    check(*run_cli(["predict", "--model", tiny_model, "--input", str(bad), "--output", str(tmp_path / "p.tsv")],
                   capsys), said)


def test_unsupported_file_type(tiny_model, tmp_path, good, capsys):
    bad = write(tmp_path / "data.xls", "x")                         # the old Excel format (.xlsx is read)
    check(*run_cli(train_argv(tiny_model, tmp_path, bad, good), capsys), "data.xls", "unsupported file type .xls; use "
          ".csv, .tsv, .json, .jsonl, .parquet or .xlsx")
    fake = write(tmp_path / "data.xlsx", "x")
    check(*run_cli(train_argv(tiny_model, tmp_path, fake, good), capsys), "data.xlsx", "not a readable .xlsx workbook")


def test_predict_input_without_the_models_text_columns(tiny_model, shared_mrpc_dir, tmp_path, capsys):
    import tuneloop
    from tuneloop import TrainConfig

    out = tmp_path / "run"
    tuneloop.train(TrainConfig(task="mrpc", data_dir=str(shared_mrpc_dir), output_dir=str(out),
                               **fast_options(tiny_model, max_steps=1)))
    capsys.readouterr()                           # the training's own warnings (a one-step model may collapse)
    single = write(tmp_path / "single.csv", "text\nthe cat\n")
    check(*run_cli(["predict", "--model", str(out / "model"), "--input", str(single), "--output",
                    str(tmp_path / "p.csv")], capsys), "single.csv", "2 text column(s)", "--text-columns")
    odd = write(tmp_path / "odd.csv", "foo,bar\nthe cat,the dog\n")
    check(*run_cli(["predict", "--model", str(out / "model"), "--input", str(odd), "--output",
                    str(tmp_path / "p.csv")], capsys), "odd.csv", "--text-columns")
    blank = write(tmp_path / "blank.csv", "sentence1,sentence2\nthe cat,the dog\nthe cow, \n")
    code, err = run_cli(["predict", "--model", str(out / "model"), "--input", str(blank), "--output",
                         str(tmp_path / "p.csv")], capsys)
    check(code, err, "blank.csv: line 3: column 'sentence2' is empty; fill it in or drop the row (an empty text gives "
          "the model nothing to read)")
    assert "trained" not in err                   # said as predicting, not as training
    assert not (tmp_path / "p.csv").exists()
    # one example on the command line: an empty text is said as the argument it is
    check(*run_cli(["predict", "--model", str(out / "model"), "the cat", "  "], capsys), "the second text is empty")
    check(*run_cli(["predict", "--model", str(out / "model"), "the cat"], capsys), "the model reads 2 texts "
          "(sentence1, sentence2) per example; got 1 argument: quote each text (\"first text\" \"second text\"); "
          "for many examples give --input FILE")


def test_offline_hub_task_says_how_to_pass_files(tiny_model, tmp_path, capsys):
    code, err = run_cli(["train", "--task", "rte", "--model", tiny_model, "--output-dir", str(tmp_path / "o")],
                        capsys)
    check(code, err, "nyu-mll/glue", "--data-dir")


def test_max_length_beyond_the_position_embeddings_is_refused_up_front(tiny_model, tmp_path, good, good_dev, capsys):
    out = tmp_path / "out"
    argv = train_argv(tiny_model, tmp_path, good, good_dev, "--max-length", "100")
    check(*run_cli(argv, capsys), "--max-length 100", "position embeddings for 64 tokens", "64 or less")
    assert not out.exists()


def test_a_tracker_whose_package_is_missing_is_refused_up_front(monkeypatch):
    import importlib.util

    from tuneloop import ConfigError, TrainConfig

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match=r"--report-to: wandb needs the wandb package, which is not installed: "
                                          r"`pip install wandb`"):
        TrainConfig(report_to="wandb").validate()
    TrainConfig(report_to="tensorboard").validate()            # installed with the test extras


def test_progress_in_a_log_file_is_plain_lines(tiny_model, shared_mrpc_dir, tmp_path, capfd):
    """stderr that is not a terminal (here pytest's capture file, as a log file would be): no carriage-return bar
    frames, no datasets bars, a plain progress line."""
    from tuneloop.cli.main import main

    assert main(["train", "--task", "mrpc", "--data-dir", str(shared_mrpc_dir), "--model", tiny_model,
                 "--output-dir", str(tmp_path / "run"), "--max-steps", "6", "--mixed-precision", "no",
                 "--no-report", "--method", "finetune"]) == 0           # the loop's progress, not auto's choice
    err = capfd.readouterr().err
    assert "\r" not in err and "Generating" not in err
    assert "step 6/6 (epoch 0.24): loss " in err and "samples/s, done" in err


def test_a_hub_id_without_a_network_fails_in_seconds_not_a_minute(tmp_path, monkeypatch, capsys):
    import socket
    import time

    from tuneloop.cli import main

    with socket.socket() as s:                    # a port on this machine that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))      # an empty cache
    started = time.monotonic()
    assert main(["train", "--model", "someone/no-such-model", "--output-dir", str(tmp_path / "run"), "--quiet"]) == 2
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "someone/no-such-model: no folder of that name here, not in the Hugging Face cache, " \
        f"and the Hub (http://127.0.0.1:{port}) cannot be reached" in err[0]
    assert not (tmp_path / "run").exists()


def test_an_empty_text_cell_in_a_file_stops_the_run(tiny_model, tmp_path, capsys):
    from tuneloop.cli import main

    data = tmp_path / "train.csv"
    data.write_text("text,label\nthe cat sat,a\n  ,b\ndog,a\n")
    assert main(["train", "--model", tiny_model, "--train-file", str(data), "--output-dir", str(tmp_path / "run"),
                 "--quiet"]) == 2
    assert f"{data}: line 3: column 'text' is empty; fill it in or drop the row (an empty text would be trained on" \
        in capsys.readouterr().err
    assert not (tmp_path / "run").exists()



def test_a_checkpoint_missing_encoder_weights_stops_the_run(tiny_model, tmp_path, good, good_dev, capsys):
    """A partial or foreign checkpoint: transformers would draw the missing encoder weights at random and the run
    would train a different model without a word. The head alone being new is the normal case and passes."""
    import shutil

    from safetensors.torch import load_file, save_file

    partial = tmp_path / "partial"
    shutil.copytree(tiny_model, partial)
    weights = load_file(partial / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("bert.encoder.layer.1.")},
              partial / "model.safetensors", metadata={"format": "pt"})
    out = tmp_path / "out"
    code, err = run_cli(train_argv(str(partial), tmp_path, good, good_dev), capsys)
    check(code, err, f"--model {partial}", "no weights", "16 of the encoder's", "bert.encoder.layer.1.",
          "random values")
    assert not out.exists()
    headless = tmp_path / "headless"                  # a base checkpoint: only the classifier is new
    shutil.copytree(tiny_model, headless)
    save_file({k: v for k, v in weights.items() if not k.startswith("classifier.")},
              headless / "model.safetensors", metadata={"format": "pt"})
    assert run_cli(train_argv(str(headless), tmp_path, good, good_dev), capsys)[0] == 0


def test_texts_the_tokenizer_cannot_read_stop_the_run_before_training(tiny_model, tmp_path, good, capsys):
    """Words outside the tiny model's vocabulary are its [UNK]: from half of the training tokens on, the run stops
    (one line naming the file, the share and the worst text) before any step."""
    unread = write(tmp_path / "unread.csv", "text,label\n" + "".join(
        f"zebra quokka {'tapir ' * (i % 3)}the,{i % 2}\n" for i in range(10)))
    check(*run_cli(train_argv(tiny_model, tmp_path, unread, good), capsys), "unread.csv",
          "tokenizer's unknown token [UNK]", "'zebra quokka tapir tapir the'", "--model")
    assert not (tmp_path / "out" / "model").exists()


def test_some_unknown_tokens_are_said_and_the_run_trains(tiny_model, tmp_path, good, capsys):
    some = write(tmp_path / "some.csv", "text,label\n" + "".join(
        f"the cat {'zebra ' if i < 4 else ''}runs on the red bus,{i % 2}\n" for i in range(10)))
    code = main(train_argv(tiny_model, tmp_path, some, good))
    err = capsys.readouterr().err
    assert code == 0
    # 4 [UNK] among 6 rows of 7 words and 4 of 8: 4 / 74 of the tokens ([CLS] and [SEP] left out)
    assert "some.csv: 5% of the training texts' tokens are the tokenizer's unknown token [UNK]" in err
    import json

    data = json.loads((tmp_path / "out" / "results.json").read_text())["data"]
    assert data["train"]["unknown_token_share"] == pytest.approx(4 / 74, abs=1e-4)


def test_a_file_given_as_the_glue_folder_names_the_file_options(tiny_model, tmp_path, good, capsys):
    """`--data-dir FILE`: the message says which options take a file."""
    code, err = run_cli(["evaluate", "--model", tiny_model, "--data-dir", str(good)], capsys)
    check(code, err, "--data-dir", "is not a folder but a file", f"--validation-file {good}")


def test_one_column_named_twice_as_a_pair_is_refused(tiny_model, tmp_path, good, good_dev, capsys):
    check(*run_cli(train_argv(tiny_model, tmp_path, good, good_dev, "--text-columns", "text,text"), capsys),
          "--text-columns", "'text,text' names one column twice")


def test_a_max_length_with_no_room_for_text_is_refused(tiny_model, tmp_path, good, good_dev, capsys):
    """--max-length 1 trained on [CLS] and [SEP] alone (and exited 0)."""
    check(*run_cli(train_argv(tiny_model, tmp_path, good, good_dev, "--max-length", "2"), capsys),
          "--max-length 2: the model adds 2 special token(s) to a text, leaving no room for it; give at least 3")


def test_command_arguments_out_of_range_are_one_line(tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.json"
    config.write_text("{}")
    check(*run_cli(["inspect", str(tmp_path), "--top", "-3"], capsys), "--top: must be at least 1")   # all but 3
    check(*run_cli(["predict", "--model", str(config), "the cat"], capsys), "config.json: is a file; give the folder")
    missing = str(tmp_path / "runs" / "model")                # was looked up on the Hub: "Repo id must be in the form"
    check(*run_cli(["predict", "--model", missing, "the cat"], capsys), f"--model {missing}: no such folder")
    (tmp_path / "runs" / "first").mkdir(parents=True)            # a typo beside a folder: the near one is named
    typo = str(tmp_path / "runs" / "frist")
    check(*run_cli(["predict", "--model", typo, "the cat"], capsys), f"did you mean {tmp_path / 'runs' / 'first'}?")
    monkeypatch.chdir(tmp_path)                                   # runs/frist: a name like org/name, and a typo
    check(*run_cli(["predict", "--model", "runs/frist", "the cat"], capsys),    # also a Hub id's form: looked up,
          "--model runs/frist: ", "(did you mean runs/first?)")                   # and the failure names the folder
    check(*run_cli(["predict", "--model", "./runs/frist", "the cat"], capsys),
          "--model ./runs/frist: no such folder")                 # "./" was dropped, then looked up on the Hub


def test_an_output_place_under_a_file_or_not_writable_is_one_line(tiny_model, tmp_path, good, good_dev, capsys,
                                                                   monkeypatch):
    """A file standing where a folder of --output-dir would go was a NotADirectoryError traceback (train, --seeds
    and search alike); a folder that cannot be made or written in was a traceback too."""
    import errno
    import os
    from pathlib import Path

    blocker = write(tmp_path / "afile", "mine")
    space = write(tmp_path / "space.yaml", "lr:\n  low: 0.0001\n  high: 0.001\n")
    search = ["search", "--model", tiny_model, "--train-file", str(good), "--validation-file", str(good_dev),
              "--space", str(space), "--trials", "1", "--max-steps", "1", "--quiet"]
    for out, argv in ((blocker / "run", train_argv(tiny_model, tmp_path, good, good_dev)),
                      (blocker / "runs" / "x", train_argv(tiny_model, tmp_path, good, good_dev, "--seeds", "1,2")),
                      (blocker / "s", search)):
        check(*run_cli([*argv, "--output-dir", str(out)], capsys), f"--output-dir {out}: {blocker} is a file, not a "
              "folder; choose another place")
    assert blocker.read_text() == "mine"
    locked, access = tmp_path / "locked", os.access
    locked.mkdir()
    monkeypatch.setattr(os, "access", lambda p, mode, **k: Path(p) != locked and access(p, mode, **k))
    check(*run_cli(train_argv(tiny_model, tmp_path, good, good_dev, "--output-dir", str(locked / "run")), capsys),
          f"this user may not write in the folder {locked}")
    mkdir = Path.mkdir

    def read_only(self, *a, **k):
        if self.name == "run":
            raise OSError(errno.EROFS, "Read-only file system")
        return mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", read_only)
    check(*run_cli(train_argv(tiny_model, tmp_path, good, good_dev, "--output-dir", str(tmp_path / "run")), capsys),
          "cannot create this folder (Read-only file system)")


def test_regression_targets_no_model_can_learn_are_refused(tiny_model, tmp_path, good_dev, capsys):
    """A target of 1e308 (inf in the model's floats) trained to an eval MSE of inf and exited 0; so did a column
    holding one value in every row."""
    rows = "text,label\n" + "".join(f"the cat {i},{i / 10}\n" for i in range(10))
    big = write(tmp_path / "big.csv", rows + "the dog,1e308\n")
    check(*run_cli(train_argv(tiny_model, tmp_path, big, good_dev, "--problem-type", "regression"), capsys),
          "big.csv: line 12: regression target '1e308' is beyond ±3.4e38")
    same = write(tmp_path / "same.csv", "text,label\n" + "".join(f"the cat {i},5\n" for i in range(10)))
    check(*run_cli(train_argv(tiny_model, tmp_path, same, good_dev, "--problem-type", "regression"), capsys),
          "same.csv: the regression target is 5 in every row; there is nothing to learn")


def test_multi_label_rows_that_all_carry_a_label_are_said(tiny_model, tmp_path, capsys):
    """Every row carrying every label trained (exit 0) a model that had nothing to learn; a label on every row is
    one the model will always predict, said."""
    every = write(tmp_path / "every.csv", "text,labels\n" + "".join(f"the cat {i},x|y\n" for i in range(10)))
    dev = write(tmp_path / "dev.csv", "text,labels\nthe dog,x\nthe bird,y\n")
    check(*run_cli(train_argv(tiny_model, tmp_path, every, dev, "--label-separator", "|"), capsys),
          "every.csv: every row carries every label (x, y); there is nothing to learn")
    some = write(tmp_path / "some.csv", "text,labels\n" + "".join(f"the cat {i},x|{'yz'[i % 2]}\n" for i in range(10)))
    assert main(train_argv(tiny_model, tmp_path, some, dev, "--label-separator", "|")) == 0
    assert "every training row carries the label(s) x; the model learns to always predict them" in \
        capsys.readouterr().err


def test_a_header_naming_a_column_twice_is_refused_and_spaces_around_names_are_read(tiny_model, tmp_path, good_dev,
                                                                                    capsys):
    """`text,text,label` trained on the second column without a word; `text, label` (a space after the comma, as
    people type it) was "cannot tell which column holds the text"."""
    twice = write(tmp_path / "twice.csv", "text,text,label\n" + "".join(f"the cat {i},the dog,{i % 2}\n"
                                                                        for i in range(10)))
    check(*run_cli(train_argv(tiny_model, tmp_path, twice, good_dev), capsys),
          "twice.csv: the header names the column 'text' 2 times; give each column its own name")
    spaced = write(tmp_path / "spaced.csv", " text , label,,\n" + "".join(f"the cat {i}, {i % 2},,\n"
                                                                        for i in range(10)))
    assert main(train_argv(tiny_model, tmp_path, spaced, good_dev)) == 0, capsys.readouterr().err
    import json

    assert json.loads((tmp_path / "out" / "results.json").read_text())["labels"] == ["0", "1"]


def test_a_place_the_system_will_not_write_in_is_one_line(tmp_path, monkeypatch):
    """A read-only or virtual file system (/proc for root, whom permission checks let through) was a FileNotFoundError
    or OSError traceback from the temporary file an atomic write makes beside its target."""
    import errno
    import os

    from tuneloop.atomic import atomic_folder, atomic_write_text
    from tuneloop.exceptions import TuneloopError

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(TuneloopError, match=r"out\.csv: cannot be written there \(Read-only file system\); choose"):
        atomic_write_text(tmp_path / "out.csv", "x")
    monkeypatch.undo()
    monkeypatch.setattr(os, "mkdir", read_only)
    with pytest.raises(TuneloopError, match=r"onnx: cannot be written there \(Read-only file system\)"):
        with atomic_folder(tmp_path / "sub" / "onnx"):
            pass
