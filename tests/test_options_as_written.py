"""Options read as the user wrote them: a class named "none" for --positive-label, a --config file of JSON indented
with tabs, and a resume whose data folder is written another way (`MRPC/`, its absolute path)."""

from __future__ import annotations

import json
import os

import pytest

from tuneloop import TrainConfig, TuneloopError
from tuneloop.cli import build_parser
from tuneloop.cli.main import main
from tuneloop.config.flags import options_from_namespace
from tuneloop.config.resolve import resolve_config


def flags(*argv: str) -> dict:
    return options_from_namespace(build_parser().parse_args(["train", *argv]))


@pytest.mark.parametrize("name", ["none", "None", "null"])
def test_positive_label_none_is_the_class_named_so(name):
    """`--positive-label none` was read as "not set", so the second label was cut instead of the class `none`."""
    assert flags("--positive-label", name) == {"positive_label": name}
    c = resolve_config(**flags("--positive-label", name, "--decision", "threshold"), machine=False)
    assert c.positive_label == name


def test_a_run_cuts_the_class_named_none(tiny_model, tmp_path):
    """End to end: with `--positive-label none` the threshold is on the class `none` (label 0), not the second."""
    import random

    from conftest import sentence

    rng = random.Random(0)
    for name, n in (("train.csv", 80), ("dev.csv", 40)):
        rows = [f"{'good' if i % 2 else 'bad'} {sentence(rng)},{'none' if i % 2 else 'spam'}" for i in range(n)]
        (tmp_path / name).write_text("text,label\n" + "\n".join(rows) + "\n")
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(tmp_path / "train.csv"), "--validation-file", str(tmp_path / "dev.csv"),
                 "--output-dir", str(out), "--model", tiny_model, "--lr", "3e-3", "--epochs", "1", "--quiet",
                 "--mixed-precision", "no", "--no-report", "--baseline", "none", "--small-data", "off",
                 "--decision", "threshold", "--positive-label", "none"]) == 0
    assert json.loads((out / "results.json").read_text())["decision"]["thresholds"]["positive"] == 0
    assert TrainConfig.from_yaml(out / "config.yaml").positive_label == "none"      # and so a --resume reads it


def test_none_still_unsets_the_other_optional_options():
    assert flags("--abstain-below", "none", "--max-steps", "null") == {"abstain_below": None, "max_steps": None}


TABBED = '{\n\t"epochs": 2,\n\t"lr": 0.0001,\n\t"text_columns": [\n\t\t"a",\n\t\t"b"\n\t],\n\t"positive_label": "no"\n}\n'


def test_a_config_of_json_indented_with_tabs_is_read(tmp_path):
    """YAML forbids tabs for indentation: a tab-indented JSON --config was refused as "not valid YAML"."""
    path = tmp_path / "run.json"
    path.write_text(TABBED)
    c = resolve_config(config_file=path, machine=False)
    assert (c.epochs, c.lr, c.text_columns, c.positive_label) == (2, 1e-4, ["a", "b"], "no")
    assert TrainConfig.from_yaml(path).epochs == 2


@pytest.mark.parametrize("content, fragment", [
    ('{\n\t"epochs": 2,\n\t"epoch": 3\n}\n', "unknown option 'epoch'"),         # read as JSON, then checked
    ('{\n\t"epochs": 2,\n\t"epochs": 3\n}\n', "'epochs' is given twice; keep one"),
    ('{\n\t"epochs": 2,\n}\n', "is not valid YAML"),                          # neither YAML nor JSON
    ('[\n\t1\n]\n', "must hold a mapping of option: value"),
])
def test_json_config_mistakes_are_one_line_errors(content, fragment, tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(content)
    assert main(["train", "--config", str(path), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and str(path) in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def checkpoint_with(folder, config: dict):
    newest = folder / "checkpoints" / "step-0000010"
    newest.mkdir(parents=True)
    (newest / "tuneloop_state.json").write_text(json.dumps({"step": 10, "config": config, "num_processes": 1}))


def test_resume_takes_a_data_folder_written_another_way_as_the_same(tmp_path, monkeypatch):
    """`--data-dir MRPC/` (or its absolute path) against a checkpoint made with `MRPC` was refused as a change."""
    from tuneloop.training.checkpoint import check_resumable, incompatible_changes

    monkeypatch.chdir(tmp_path)
    (tmp_path / "MRPC").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "train.csv").write_text("text,label\na,0\n")
    saved = TrainConfig(data_dir="MRPC", train_file="train.csv").to_dict()
    out = tmp_path / "run"
    checkpoint_with(out, saved)
    for data_dir in ("MRPC/", "./MRPC", str(tmp_path / "MRPC"), str(tmp_path / "MRPC") + os.sep):
        for train_file in ("train.csv", str(tmp_path / "train.csv"), "./train.csv"):
            current = {**saved, "data_dir": data_dir, "train_file": train_file}
            assert incompatible_changes(saved, current) == [], (data_dir, train_file)
            check_resumable(out, "latest", current, 1)
    with pytest.raises(TuneloopError, match=r"other settings \(--data-dir 'MRPC' → 'other/'\)"):
        check_resumable(out, "latest", {**saved, "data_dir": "other/"}, 1)
    assert incompatible_changes(saved, {**saved, "train_file": "./train.tsv"})      # another file is a change
    assert incompatible_changes(saved, {**saved, "task": "rte"})                     # and other options as before


def test_a_path_in_a_text_option_is_text():
    from tuneloop.training.checkpoint import PATH_OPTIONS, incompatible_changes

    assert {"data_dir", "train_file", "validation_file", "model"} <= PATH_OPTIONS and "task" not in PATH_OPTIONS
    saved = TrainConfig(task="mrpc").to_dict()
    assert incompatible_changes(saved, {**saved, "task": "./mrpc"})


def test_cli_resume_with_the_data_folder_written_with_a_slash(tiny_model, tmp_path, monkeypatch):
    """End to end: a run on `--data-dir MRPC` resumed with `--data-dir MRPC/` and then with its absolute path."""
    import tuneloop
    from conftest import fast_options, write_mrpc_folder

    monkeypatch.chdir(tmp_path)
    write_mrpc_folder(tmp_path / "MRPC", n_train=80, n_dev=20, n_test=5)
    opts = {"task": "mrpc", "data_dir": "MRPC", "output_dir": "run",
            **fast_options(tiny_model, epochs=1, max_steps=10, save_every="5", predict_test=False)}
    tuneloop.train(TrainConfig(**opts))
    for data_dir in ("MRPC/", str(tmp_path / "MRPC")):
        assert main(["train", "--output-dir", "run", "--resume", "--data-dir", data_dir, "--quiet"]) == 0, data_dir
        assert json.loads((tmp_path / "run" / "results.json").read_text())["resumed_from"].endswith("step-0000010")
