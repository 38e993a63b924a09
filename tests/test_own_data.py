"""The user's own files: string labels, regression, multi-label; then evaluate and predict without repeating options."""

from __future__ import annotations

import csv
import json
import random
import re

import pytest
import yaml
from conftest import fast_options, sentence

import tuneloop
from tuneloop import TrainConfig
from tuneloop.cli.main import main

TOPICS = {"sport": "alpha", "politics": "beta", "science": "gamma"}


def write_topics(path, n, seed, fmt="csv"):
    """Three string classes, each signalled by a keyword."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        topic = rng.choice(sorted(TOPICS))
        words = sentence(rng).split()
        words.insert(rng.randint(0, len(words)), TOPICS[topic])
        rows.append({"id": f"doc{i}", "text": " ".join(words), "topic": topic})
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["id", "text", "topic"])
            writer.writeheader()
            writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def topic_run(tiny_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("topics")
    train, dev = write_topics(root / "train.csv", 240, 1), write_topics(root / "dev.jsonl", 45, 2, "jsonl")
    out = root / "run"
    results = tuneloop.train(TrainConfig(train_file=str(train), validation_file=str(dev), label_column="topic",
                                         output_dir=str(out), **fast_options(tiny_model, epochs=4)))
    return root, out, results


def test_string_labels_train_and_round_trip_into_predictions(topic_run, tmp_path, capsys):
    root, out, results = topic_run
    assert results["labels"] == ["politics", "science", "sport"]
    assert set(results["eval"]) == {"accuracy", "f1_macro", "loss", "num_samples"}
    assert results["eval"]["accuracy"] > 0.6                       # chance is 1/3
    new = write_topics(tmp_path / "new.csv", 30, 3)
    target = tmp_path / "pred.jsonl"
    assert main(["predict", "--model", str(out / "model"), "--input", str(new), "--output", str(target),
                 "--quiet"]) == 0
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    truth = list(csv.DictReader(open(new)))
    assert [r["id"] for r in rows] == [t["id"] for t in truth]      # input order and ids kept
    assert {r["label"] for r in rows} <= set(TOPICS)
    assert all(abs(sum(r[f"prob_{t}"] for t in TOPICS) - 1) < 1e-4 for r in rows)
    assert sum(r["label"] == t["topic"] for r, t in zip(rows, truth, strict=True)) >= 18


def test_predictions_carry_the_inputs_columns_unless_told_otherwise(topic_run, tmp_path, capsys):
    _, out, _ = topic_run
    model = str(out / "model")
    source = tmp_path / "tickets.jsonl"
    tickets = [{"ticket": f"T-{i}", "text": f"the dog runs {word} on the boat", "label": "sport",
                **({"meta": {"a": [1, 2]}, "open": True} if i else {"seen": None})}
               for i, word in enumerate(["alpha", "beta", "gamma"])]
    source.write_text("".join(json.dumps(t) + "\n" for t in tickets))

    def predict(target, *extra):
        assert main(["predict", "--model", model, "--input", str(source), "--output", str(target), "--quiet",
                     *extra]) == 0
        return target

    rows = [json.loads(line) for line in predict(tmp_path / "all.jsonl").read_text().splitlines()]
    assert list(rows[1]) == ["id", "ticket", "text", "input_label", "seen", "meta", "open", "label",
                             "prob_politics", "prob_science", "prob_sport", "decision_rule"]
    assert [(r["ticket"], r["text"], r["input_label"]) for r in rows] == [
        (t["ticket"], t["text"], "sport") for t in tickets]                    # the gold label kept beside the guess
    assert rows[0]["meta"] is None and rows[1]["meta"] == {"a": [1, 2]} and rows[2]["open"] is True
    assert [r["label"] for r in rows] == ["sport", "politics", "science"]
    table = list(csv.DictReader(open(predict(tmp_path / "all.csv"))))
    assert (table[0]["seen"], table[0]["meta"], table[1]["meta"], table[1]["open"]) == ("", "", '{"a": [1, 2]}',
                                                                                         "True")
    assert [list(r) for r in csv.DictReader(open(predict(tmp_path / "some.csv", "--keep-columns", "ticket")))][0][:3] \
        == ["id", "ticket", "label"]
    assert list(next(csv.DictReader(open(predict(tmp_path / "none.csv", "--keep-columns", "none"))))) == [
        "id", "label", "prob_politics", "prob_science", "prob_sport", "decision_rule"]
    capsys.readouterr()
    assert main(["predict", "--model", model, "--input", str(source), "--output", str(tmp_path / "x.csv"),
                 "--keep-columns", "ticket,tickt"]) == 2
    assert "has no column 'tickt' (its columns: ticket, text, label, seen)" in capsys.readouterr().err
    assert main(["predict", "--model", model, "--input", str(source), "--output", str(tmp_path / "g.tsv"),
                 "--keep-columns", "ticket", "--glue"]) == 2
    assert "GLUE's two-column layout" in capsys.readouterr().err
    assert main(["predict", "--model", model, "the dog", "--keep-columns", "all"]) == 2
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "g.tsv").exists()


def test_predictions_to_standard_output_are_json_lines_and_a_closed_pipe_is_not_an_error(topic_run, tmp_path,
                                                                                        capsys):
    import subprocess
    import sys

    _, out, _ = topic_run
    new = write_topics(tmp_path / "new.csv", 3000, 4)
    capsys.readouterr()
    assert main(["predict", "--model", str(out / "model"), "--input", str(new), "--output", "-", "--quiet",
                 "--keep-columns", "id"]) == 0
    said = capsys.readouterr()
    rows = [json.loads(line) for line in said.out.splitlines()]
    assert [r["id"] for r in rows] == [f"doc{i}" for i in range(3000)] and "prob_sport" in rows[0]
    assert "wrote 3000 predictions to standard output" in said.err
    assert not list(tmp_path.glob("*.predictions.*")) and not (tmp_path / "-").exists()
    child = subprocess.Popen([sys.executable, "-m", "tuneloop", "predict", "--model", str(out / "model"), "--input",
                              str(new), "--output", "-", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout.read(40)                   # `| head -c 40`: the reader goes away before the rest
    child.stdout.close()
    assert child.wait(timeout=120) == 0 and b"Traceback" not in child.stderr.read()


def test_a_runs_test_predictions_are_the_predict_commands_with_the_files_columns(tiny_model, tmp_path):
    train = write_topics(tmp_path / "train.csv", 90, 5)
    test = tmp_path / "test.csv"
    test.write_text("ticket,text,topic\nT-1,the dog runs alpha,sport\nT-2,\"a boat, beta\",politics\nT-3,gamma,x\n")
    out = tmp_path / "run"
    tuneloop.train(**fast_options(tiny_model, epochs=1), train_file=str(train), label_column="topic",
                   test_file=str(test), output_dir=str(out))
    with open(out / "predictions" / "test.tsv", newline="") as f:
        made = list(csv.DictReader(f, delimiter="\t"))
    assert list(made[0]) == ["id", "ticket", "text", "topic", "label", "prob_politics", "prob_science",
                             "prob_sport", "decision_rule"]
    assert [(r["ticket"], r["text"]) for r in made] == [("T-1", "the dog runs alpha"), ("T-2", "a boat, beta"),
                                                        ("T-3", "gamma")]
    assert main(["predict", "--model", str(out / "model"), "--input", str(test), "--output",
                 str(tmp_path / "p.tsv"), "--quiet", "--precision", "fp32"]) == 0
    with open(tmp_path / "p.tsv", newline="") as f:
        assert list(csv.DictReader(f, delimiter="\t")) == made
    test.write_text('ticket,text,topic\nT-1,"the dog\nruns alpha",sport\n')    # a line break .tsv cannot hold
    results = tuneloop.train(**fast_options(tiny_model, epochs=1), train_file=str(train), label_column="topic",
                             test_file=str(test), output_dir=str(out), overwrite=True)
    made = [json.loads(line) for line in (out / "predictions" / "test.jsonl").read_text().splitlines()]
    assert [r["text"] for r in made] == ["the dog\nruns alpha"] and not (out / "predictions" / "test.tsv").exists()
    assert any("test predictions written as JSON Lines" in w and "line 2 (id 0), column 'text'" in w
               for w in results["warnings"]), results["warnings"]


def test_a_reader_gone_from_standard_output_ends_the_predictions_quietly(monkeypatch, tmp_path):
    """Where the system says so (EPIPE: `| head` has what it wanted), the rest is dropped, as Python's docs do it."""
    import os
    import sys

    from tuneloop.predict.rows import write_predictions

    class Gone:
        def __init__(self, fd):
            self.fd = fd

        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            return self.fd

    with open(tmp_path / "stdout", "w") as stand_in:
        monkeypatch.setattr(sys, "stdout", Gone(stand_in.fileno()))
        write_predictions([{"id": "0", "label": "a"}], "-")          # no BrokenPipeError
        assert os.path.samefile(f"/proc/self/fd/{stand_in.fileno()}", os.devnull)


def test_evaluate_reuses_the_recorded_data_and_columns(topic_run, tmp_path, capsys):
    root, out, results = topic_run
    target = tmp_path / "metrics.json"
    assert main(["evaluate", "--model", str(out / "model"), "--output", str(target), "--quiet"]) == 0
    metrics = json.loads(target.read_text())["eval"]
    assert metrics["num_samples"] == 45
    assert metrics["accuracy"] == pytest.approx(results["eval"]["accuracy"])
    said = capsys.readouterr().out
    assert "accuracy=" in said and "per class:" in said
    table = json.loads(target.read_text())["per_class"]
    for topic in TOPICS:                                   # a line per class, as in the file
        c = table[topic]
        assert f"{topic:<8}  {c['precision']:9.4f}  {c['recall']:6.4f}  {c['f1']:6.4f}  {c['support']:7d}" in said


def test_evaluate_shows_the_classes_with_the_lowest_f1_when_there_are_many():
    from tuneloop.cli.commands import per_class_lines

    classes = {f"c{i}": {"precision": 1.0, "recall": 1.0, "f1": i / 30, "support": 3} for i in range(30)}
    lines = per_class_lines(classes, written=False)
    assert lines[0] == "per class (the 20 lowest F1 of 30; every class with --output FILE):"
    assert [line.split()[0] for line in lines[2:]] == [f"c{i}" for i in range(20)]
    assert len(per_class_lines(dict(list(classes.items())[:20]), written=True)) == 22
    assert per_class_lines(None, written=False) == []
    short = per_class_lines({"a": {"precision": 0.5, "recall": 1.0, "f1": 0.6667, "support": 2}}, written=False)
    assert short[1:] == ["  class  precision  recall      f1  support", "  a         0.5000  1.0000  0.6667        2"]


def test_single_example_prediction(topic_run, capsys):
    _, out, _ = topic_run
    assert main(["predict", "--model", str(out / "model"), "the dog runs gamma on the boat"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["label"] in TOPICS
    assert set(answer) == {"label", "prob_politics", "prob_science", "prob_sport", "decision_rule"}


def test_columns_in_another_letter_case_are_found_to_predict_and_evaluate(topic_run, tmp_path, capsys):
    """A model trained on `text`/`topic` reads a file headed `ID,TEXT,Topic` (as a spreadsheet writes them)."""
    root, out, _ = topic_run
    rows = list(csv.DictReader(open(write_topics(tmp_path / "new.csv", 30, 3))))
    upper = tmp_path / "upper.csv"
    with open(upper, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["ID", "TEXT", "Topic"])
        writer.writerows([r["id"], r["text"], r["topic"]] for r in rows)
    target = tmp_path / "pred.jsonl"
    assert main(["predict", "--model", str(out / "model"), "--input", str(upper), "--output", str(target),
                 "--keep-columns", "none", "--quiet"]) == 0
    predicted = [json.loads(line) for line in target.read_text().splitlines()]
    assert [p["id"] for p in predicted] == [r["id"] for r in rows]          # its ID column, found as `id` is
    assert sum(p["label"] == r["topic"] for p, r in zip(predicted, rows, strict=True)) >= 18
    metrics = tmp_path / "metrics.json"                    # the run's recorded columns, text and topic, read too
    assert main(["evaluate", "--model", str(out / "model"), "--validation-file", str(upper), "--output",
                 str(metrics), "--quiet"]) == 0
    assert json.loads(metrics.read_text())["eval"]["num_samples"] == 30


def test_regression_reports_correlations(tiny_model, tmp_path):
    rng = random.Random(0)

    def write(path, n):
        with open(path, "w") as f:
            f.write("sentence1\tsentence2\tscore\n")
            for _ in range(n):
                k = rng.randrange(3)
                words = sentence(rng).split()
                words.insert(1, ["alpha", "beta", "gamma"][k])
                f.write(f"{sentence(rng)}\t{' '.join(words)}\t{[0.5, 2.5, 4.5][k] + rng.uniform(-.3, .3):.2f}\n")
        return path

    out = tmp_path / "run"
    results = tuneloop.train(TrainConfig(train_file=str(write(tmp_path / "t.tsv", 200)),
                                         validation_file=str(write(tmp_path / "d.tsv", 40)), output_dir=str(out),
                                         **fast_options(tiny_model, epochs=4)))
    assert results["main_metric"] == "pearson"
    assert {"pearson", "spearmanr", "mse"} <= set(results["eval"])
    assert results["eval"]["pearson"] > 0.5
    target = tmp_path / "p.csv"
    assert main(["predict", "--model", str(out / "model"), "--input", str(tmp_path / "d.tsv"),
                 "--output", str(target), "--quiet"]) == 0
    rows = list(csv.DictReader(open(target)))
    assert len(rows) == 40 and list(rows[0]) == ["id", "sentence1", "sentence2", "input_score", "score"]
    given = list(csv.DictReader(open(tmp_path / "d.tsv"), delimiter="\t"))
    assert [r["input_score"] for r in rows] == [g["score"] for g in given]       # the gold score, renamed
    assert all(r["score"] != r["input_score"] for r in rows)


def test_multi_label_with_a_separator_reports_micro_f1(tiny_model, tmp_path):
    rng = random.Random(0)

    def write(path, n):
        with open(path, "w") as f:
            f.write("text,tags\n")
            for _ in range(n):
                tags = sorted(rng.sample(["alpha", "beta", "gamma"], rng.randint(1, 2)))
                words = sentence(rng).split() + tags
                rng.shuffle(words)
                f.write(f"{' '.join(words)},{'|'.join(tags)}\n")
        return path

    out = tmp_path / "run"
    results = tuneloop.train(TrainConfig(train_file=str(write(tmp_path / "t.csv", 240)),
                                         validation_file=str(write(tmp_path / "d.csv", 40)), label_column="tags",
                                         label_separator="|", output_dir=str(out),
                                         **fast_options(tiny_model, epochs=4)))
    assert results["main_metric"] == "f1_micro"
    assert {"f1_micro", "f1_macro", "exact_match"} <= set(results["eval"])
    assert results["eval"]["f1_micro"] > 0.6
    assert results["labels"] == ["alpha", "beta", "gamma"]
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"


def test_multi_label_from_json_lists(tiny_model, tmp_path):
    rows = [{"text": f"the cat {t[0]}", "labels": t} for t in (["alpha"], ["beta", "gamma"], ["gamma"])] * 10
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = tuneloop.train(TrainConfig(train_file=str(path), validation_file=str(path),
                                         output_dir=str(tmp_path / "r"),
                                         **fast_options(tiny_model, max_steps=2)))
    assert results["labels"] == ["alpha", "beta", "gamma"] and "f1_micro" in results["eval"]


def test_one_workbook_holds_the_training_validation_and_new_rows_as_sheets(tiny_model, tmp_path, capsys,
                                                                          monkeypatch):
    """book.xlsx#train names a sheet: the run equals the same rows given as CSV files, predict reads another sheet,
    and nothing writes over the workbook."""
    import openpyxl

    train, dev, new = (write_topics(tmp_path / f"{n}.csv", size, seed) for n, size, seed in
                       (("train", 120, 1), ("dev", 30, 2), ("new", 12, 3)))
    book = openpyxl.Workbook()
    book.active.title = "read me"                                  # the first sheet holds no rows
    book.active.append(["these sheets hold the topics"])
    for name, path in (("train", train), ("dev", dev), ("new rows", new)):
        sheet = book.create_sheet(name)
        for row in csv.reader(open(path, newline="")):
            sheet.append(row)
    workbook = tmp_path / "book.xlsx"
    book.save(workbook)
    before = workbook.read_bytes()
    options = fast_options(tiny_model, epochs=4, label_column="topic")
    sheets = tuneloop.train(train_file=f"{workbook}#train", validation_file=f"{workbook}#Dev",   # case as typed
                            output_dir=str(tmp_path / "sheets"), **options)
    files = tuneloop.train(train_file=str(train), validation_file=str(dev), output_dir=str(tmp_path / "files"),
                           **options)
    assert sheets["eval"] == files["eval"] and sheets["eval"]["accuracy"] > 0.6            # chance is 1/3
    whole = tuneloop.train(train_file=str(workbook), output_dir=str(tmp_path / "whole"), **options)
    assert whole["eval"] == files["eval"]            # its sheets named train and dev are the splits, not the first
    saved = yaml.safe_load((tmp_path / "whole" / "config.yaml").read_text())
    assert (saved["train_file"], saved["validation_file"]) == (f"{workbook}#train", f"{workbook}#dev")
    from tuneloop.config.resolve import resolve_config
    from tuneloop.data.sources import workbook_splits

    asked = workbook_splits(resolve_config(train_file=str(workbook), validation_file=str(dev), machine=False))
    assert (asked.train_file, asked.validation_file) == (f"{workbook}#train", str(dev))   # the file given, kept
    resumed = resolve_config(train_file=str(workbook), resume="latest", output_dir=str(tmp_path / "r"), machine=False)
    assert workbook_splits(resumed) is resumed                       # a resume reads its config.yaml's paths
    for kept in (dict(validation_split=0.2), dict(folds=3)):         # rows held out of the train sheet, as asked
        config = workbook_splits(resolve_config(train_file=str(workbook), machine=False, **kept))
        assert (config.train_file, config.validation_file) == (f"{workbook}#train", None)
    book.worksheets[2].title = "holdout"                             # no sheet named as validation rows
    book.save(tmp_path / "other.xlsx")
    other = workbook_splits(resolve_config(train_file=str(tmp_path / "other.xlsx"), machine=False))
    assert (other.train_file, other.validation_file) == (f"{tmp_path / 'other.xlsx'}#train", None)
    held = tuneloop.train(train_file=str(tmp_path / "other.xlsx"), output_dir=str(tmp_path / "held"), **options)
    assert held["data"]["train"]["rows"] == 120 and held["data"]["validation"]["tokenized_rows"] == 12  # 10% held
    book.worksheets[1].title = "rows"                                # no sheet named as the training rows
    book.save(tmp_path / "none.xlsx")
    none = resolve_config(train_file=str(tmp_path / "none.xlsx"), machine=False)
    assert workbook_splits(none) is none
    first = openpyxl.Workbook()
    first.active.title = "Train"
    first.save(tmp_path / "first.xlsx")                              # the first sheet alone: read as any book
    assert workbook_splits(resolve_config(train_file=str(tmp_path / "first.xlsx"), machine=False)).train_file == \
        str(tmp_path / "first.xlsx")
    assert sheets["data"]["train"]["rows"] == files["data"]["train"]["rows"] == 120
    model = str(tmp_path / "sheets")
    monkeypatch.chdir(tmp_path / "sheets")                           # predict writes in the current folder
    assert main(["predict", "--model", model, "--input", f"{workbook}#new rows", "--quiet"]) == 0
    written = tmp_path / "sheets" / "book.new rows.predictions.tsv"  # the default name says the sheet
    rows = list(csv.DictReader(open(written), delimiter="\t"))
    assert [r["id"] for r in rows] == [f"doc{i}" for i in range(12)] and all(r["label"] in TOPICS for r in rows)
    capsys.readouterr()
    for argv, said in ((["predict", "--model", model, "--input", f"{workbook}#nope"],
                        f"{workbook}#nope: the workbook has no sheet named 'nope'; its sheets: 'read me', 'train', "
                        "'dev', 'new rows'"),
                       (["evaluate", model, "--validation-file", f"{workbook}#dev", "--output", str(workbook)],
                        "is the --validation-file whose rows are evaluated"),
                       (["predict", "--model", model, "--input", f"{workbook}#new rows", "--output", str(workbook),
                         "--overwrite"], "is the --input file")):
        assert main([*argv, "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1, err
    assert workbook.read_bytes() == before


def test_predictions_to_a_workbook_equal_the_tsv_and_never_hold_a_formula(topic_run, tmp_path, capsys):
    import openpyxl

    _, out, _ = topic_run
    model = str(out / "model")
    new = tmp_path / "new.csv"
    write_topics(new, 10, 4)
    lines = new.read_text().splitlines()
    lines[1] = 'doc0,"=HYPERLINK(""http://x"",""sport"") sport",sport'      # a text that Excel would run
    new.write_text("\n".join(lines) + "\n")
    said = {}
    for name in ("p.tsv", "p.xlsx"):
        capsys.readouterr()
        assert main(["predict", "--model", model, "--input", str(new), "--output", str(tmp_path / name),
                     "--quiet"]) == 0
        said[name] = capsys.readouterr().err
    assert f"--output {tmp_path / 'p.tsv'}: 1 text starts with =, +, - or @ (id doc0: " \
        "'=HYPERLINK(\"http://x\",\"sport\")" in said["p.tsv"] and "whose texts stay text" in said["p.tsv"]
    assert "with =, +, - or @" not in said["p.xlsx"]
    tsv = list(csv.DictReader(open(tmp_path / "p.tsv", newline=""), delimiter="\t"))
    sheet = openpyxl.load_workbook(tmp_path / "p.xlsx").active
    header, *cells = list(sheet.iter_rows())
    assert [c.value for c in header] == list(tsv[0])
    for row, cells_of in zip(tsv, cells, strict=True):
        for (name, text), cell in zip(row.items(), cells_of, strict=True):
            if name.startswith("prob_"):
                assert cell.data_type == "n" and cell.value == float(text)   # numbers a sheet can sum
            else:
                assert cell.data_type == "s" and cell.value == text          # the formula-looking text too
    assert cells[0][[c.value for c in header].index("text")].value.startswith("=HYPERLINK")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "the dog sport", "note": "a\x01b"}) + "\n")
    assert main(["predict", "--model", model, "--input", str(bad), "--output", str(tmp_path / "b.xlsx"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "row 2, column 'note': a control character an Excel cell cannot hold; write a .csv" in err
    assert len([line for line in err.splitlines() if "unknown token" not in line]) == 1    # the one error line
    assert not (tmp_path / "b.xlsx").exists()
    assert main(["predict", "--model", model, "--input", str(bad), "--output", str(tmp_path / "b.xlsx"),
                 "--quiet", "--keep-columns", "none"]) == 0              # as the message says


def test_unquoted_words_for_a_one_text_model_say_to_quote_them(topic_run, capsys):
    _, out, _ = topic_run
    capsys.readouterr()
    assert main(["predict", "--model", str(out), "the", "vote", "passed"]) == 2       # three words, one text each?
    err = capsys.readouterr().err.strip()
    assert err == "tuneloop predict: error: one example has one or two texts; got 3 arguments: quote each text " \
        "(\"the vote passed\" as one); for many examples give --input FILE"
    assert main(["predict", "--model", str(out), "vote", "passed"]) == 2
    assert capsys.readouterr().err.strip() == "tuneloop predict: error: the model reads 1 text (text) per example; " \
        "got 2 arguments: quote the text (\"vote passed\"); for many examples give --input FILE"
    assert main(["predict", "--model", str(out), "the vote passed"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["label"] in TOPICS


def test_tsv_predictions_read_back_and_bad_rows_to_predict_are_one_line(topic_run, tmp_path, capsys):
    """predict's .tsv is written as tuneloop reads a .tsv (no quoting): a text's quotes stay as they are and the
    file is read back; a text with a line break is refused naming its line (write .csv or .jsonl); a row without
    its id, or with every field empty, stops with one line naming it (not a traceback, not ids shifted)."""
    root, out, _ = topic_run
    model = str(out / "model")
    (tmp_path / "in.csv").write_text('id,text\n1,"alpha ""x"" one"\n2,beta two\n')
    assert main(["predict", "--model", model, "--input", str(tmp_path / "in.csv"), "--output",
                 str(tmp_path / "p.tsv"), "--quiet"]) == 0
    lines = (tmp_path / "p.tsv").read_text().splitlines()
    assert lines[1].startswith('1\talpha "x" one\t')
    assert main(["predict", "--model", model, "--input", str(tmp_path / "p.tsv"), "--output",
                 str(tmp_path / "again.jsonl"), "--quiet"]) == 0
    again = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert [(r["id"], r["text"]) for r in again] == [("1", 'alpha "x" one'), ("2", "beta two")]
    capsys.readouterr()
    for body, output, said in (
            ('id,text\n1,"alpha\nsecond"\n', "q.tsv", r"q\.tsv: line 2 \(id 1\), column 'text': holds a tab or a "
                                                      r"line break"),
            ('{"id": 1, "text": "alpha"}\n{"text": "beta"}\n', "q.csv", r"line 2: no id in column 'id' \(missing\)"),
            ("text\nalpha\n\nbeta\n", "q.csv", r"line 3: every field is empty")):
        name = "bad.jsonl" if body.startswith("{") else "bad.csv"
        (tmp_path / name).write_text(body)
        assert main(["predict", "--model", model, "--input", str(tmp_path / name), "--output",
                     str(tmp_path / output), "--quiet"]) == 2
        assert re.search(said, capsys.readouterr().err) and not (tmp_path / output).exists()
