"""End to end: train the tiny model on a learnable toy task in MRPC's layout and check what a run leaves."""

from __future__ import annotations

import json
import re

import pytest
import torch
import yaml
from conftest import fast_options

import tuneloop
from tuneloop import TrainConfig
from tuneloop.cli.main import main
from tuneloop.training.progress import read_metrics


@pytest.fixture(scope="module")
def trained(tiny_model, shared_mrpc_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "toy"
    results = tuneloop.train(TrainConfig(task="mrpc", data_dir=str(shared_mrpc_dir), output_dir=str(out),
                                         **fast_options(tiny_model)))
    return out, results


def test_learns_the_toy_task(trained):
    out, results = trained
    assert results["eval"]["accuracy"] >= 0.85            # chance is 0.5
    losses = [r["train/loss"] for r in read_metrics(out / "metrics.jsonl") if "train/loss" in r]
    assert len(losses) >= 5
    assert sum(losses[-2:]) / 2 < 0.6 * losses[0]
    assert not (out / "report.html").exists() and not (out / "plots").exists()      # --no-report
    assert (out / "model" / "README.md").is_file()                                    # the model card still is


def test_results_json_layout(trained):
    out, results = trained
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk == results
    assert set(on_disk["eval"]) == {"accuracy", "f1", "f1_macro", "loss", "num_samples"}
    assert on_disk["eval"]["num_samples"] == 60
    train = on_disk["train"]
    assert train["num_samples"] == 200 and train["epochs"] == 3 and train["steps"] == 3 * 25
    assert train["runtime_s"] > 0 and train["samples_per_second"] > 0
    assert on_disk["main_metric"] == "f1"


def test_metrics_jsonl_has_every_log_step_and_each_evaluation(trained):
    out, _ = trained
    records = read_metrics(out / "metrics.jsonl")
    train_steps = [r["step"] for r in records if "train/loss" in r]
    assert train_steps == [*range(10, 76, 10), 75]              # every --log-every steps, and the last step
    evals = [r for r in records if "eval/accuracy" in r]
    assert [r["step"] for r in evals] == [25, 50, 75]
    assert [r["eval/epoch"] for r in evals] == [1, 2, 3]
    lrs = [r["train/lr"] for r in records if "train/lr" in r]
    assert lrs == sorted(lrs, reverse=True)               # linear decay after the warmup


def test_resolved_config_is_written(trained):
    out, _ = trained
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["task"] == "mrpc" and saved["lr"] == 3e-3 and saved["mixed_precision"] == "no"
    assert saved["output_dir"] == str(out)
    TrainConfig(**saved).validate()                       # the saved config is a valid config


def test_saved_model_answers_through_transformers_pipeline(trained):
    from transformers import pipeline

    out, _ = trained
    classify = pipeline("text-classification", model=str(out / "model"), device="cpu")
    answer = classify({"text": "the cat runs", "text_pair": "a dog alpha sees the bird"})
    answer = answer[0] if isinstance(answer, list) else answer
    assert answer["label"] in ("equivalent", "not_equivalent")
    assert answer["label"] == "equivalent"
    meta = json.loads((out / "model" / "tuneloop.json").read_text())
    assert meta["labels"]["names"] == ["not_equivalent", "equivalent"]
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["id2label"] == {"0": "not_equivalent", "1": "equivalent"}


def test_refuses_to_write_into_a_foreign_folder(tiny_model, shared_mrpc_dir, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    code = main(["train", "--task", "mrpc", "--data-dir", str(shared_mrpc_dir), "--model", tiny_model,
                 "--output-dir", str(out), "--max-steps", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert str(out) in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_overwrite_never_replaces_a_users_files_named_as_tuneloop_outputs(tiny_model, shared_mrpc_dir, tmp_path,
                                                                           capsys):
    """--overwrite on a folder no run wrote (no tuneloop-run.json) removed the user's own model/ and config.yaml."""
    out = tmp_path / "mine"
    (out / "model").mkdir(parents=True)
    (out / "model" / "weights.bin").write_text("precious")
    (out / "config.yaml").write_text("mine: 1")
    (out / "notes.txt").write_text("mine")
    code = main(["train", "--task", "mrpc", "--data-dir", str(shared_mrpc_dir), "--model", tiny_model,
                 "--output-dir", str(out), "--max-steps", "1", "--overwrite"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "config.yaml" in err and "model/" in err and "tuneloop-run.json" in err and "notes.txt" not in err
    assert (out / "model" / "weights.bin").read_text() == "precious" and (out / "config.yaml").read_text() == "mine: 1"
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "model", "notes.txt"]
    (out / "model" / "weights.bin").unlink()
    (out / "model").rmdir()
    (out / "config.yaml").unlink()              # only files of the user's that no run would write: --overwrite runs
    assert main(["train", "--task", "mrpc", "--data-dir", str(shared_mrpc_dir), "--model", tiny_model,
                 "--output-dir", str(out), "--max-steps", "1", "--overwrite", "--quiet"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "tuneloop-run.json").is_file()


def test_overwrite_replaces_only_tuneloop_outputs(tiny_model, shared_mrpc_dir, tmp_path):
    out = tmp_path / "run"
    opts = dict(task="mrpc", data_dir=str(shared_mrpc_dir), output_dir=str(out), **fast_options(tiny_model))
    opts.update(max_steps=2, epochs=1)
    tuneloop.train(TrainConfig(**opts))
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(tuneloop.TuneloopError, match="earlier tuneloop run"):
        tuneloop.train(TrainConfig(**opts))
    results = tuneloop.train(TrainConfig(**opts, overwrite=True))
    assert results["train"]["steps"] == 2
    assert (out / "notes.txt").read_text() == "keep me"
    assert len([r for r in read_metrics(out / "metrics.jsonl") if "eval/accuracy" in r]) == 1


def test_cli_with_yaml_config_and_flag_override(tiny_model, shared_mrpc_dir, tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({"task": "mrpc", "data-dir": str(shared_mrpc_dir), "model": tiny_model,
                                   "max_steps": 3, "lr": 0.001, "quiet": True, "batch_size": 4}))
    out = tmp_path / "out"
    code = main(["train", "--config", str(cfg), "--batch-size", "16", "--output-dir", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "accuracy=" in printed and str(out) in printed
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["batch_size"] == 16 and saved["lr"] == 0.001 and saved["max_steps"] == 3
    assert json.loads((out / "results.json").read_text())["train"]["global_batch_size"] == 16


def test_dry_run_shows_shapes_and_one_forward_pass_and_writes_nothing(tiny_model, shared_mrpc_dir, tmp_path, capsys):
    out = tmp_path / "never"
    code = main(["train", "--task", "mrpc", "--data-dir", str(shared_mrpc_dir), "--model", tiny_model,
                 "--output-dir", str(out), "--dry-run", "--quiet", "--batch-size", "4"])
    printed = yaml.safe_load(capsys.readouterr().out)
    assert code == 0 and not out.exists()
    assert printed["examples"] == {"train": 200, "validation": 60}
    # 200 rows are small data: 10 epochs of 50 steps (settings decided from the data show in the dry run)
    assert printed["steps_per_epoch"] == 50 and printed["total_steps"] == 500
    assert printed["batch_shapes"]["input_ids"][0] == 4 and printed["logits_shape"] == [4, 2]
    assert printed["loss"] > 0


def test_tensorboard_event_files(tiny_model, shared_mrpc_dir, tmp_path):
    out = tmp_path / "tb"
    tuneloop.train(TrainConfig(task="mrpc", data_dir=str(shared_mrpc_dir), output_dir=str(out), report_to="tensorboard",
                               **fast_options(tiny_model, max_steps=4, log_every=2)))
    events = list((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    assert "train/loss" in acc.Tags()["scalars"] and "eval/accuracy" in acc.Tags()["scalars"]


def test_dropout_option_sets_every_dropout_probability(tiny_model, tmp_path):
    from tuneloop.data.labels import LabelSchema
    from tuneloop.model.loading import load_model, model_config

    labels = LabelSchema("single_label_classification", ["no", "yes"])
    model = load_model(tiny_model, model_config(tiny_model, labels, dropout=0.25))
    assert model.config.hidden_dropout_prob == model.config.attention_probs_dropout_prob == 0.25
    assert model.config.classifier_dropout == 0.25
    rates = {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    assert rates == {0.25}
    assert load_model(tiny_model, model_config(tiny_model, labels)).config.classifier_dropout is None   # its own


def test_a_run_keeps_its_own_log_and_its_warnings(tiny_model, tmp_path, capsys):
    """OUT/train.log holds what the run said from the data on (held until the folder existed), the step lines and
    warnings, also under --quiet, whose console shows warnings only; a resume appends; results.json lists the
    warnings; the logger is left as it was."""
    import logging

    train, dev, out = tmp_path / "train.csv", tmp_path / "dev.csv", tmp_path / "run"
    train.write_text("text,label\n" + "".join(f"the cat {i},{i % 2}\n" for i in range(64)))
    dev.write_text("text,label\nthe cat 3,1\n" + "".join(f"the dog {i},{i % 2}\n" for i in range(20)))
    logger = logging.getLogger("tuneloop")
    before = (list(logger.handlers), logger.level)

    class Killed(Exception):
        pass

    def kill(state):
        if state.step == 4:
            raise Killed

    opts = {**fast_options(tiny_model, max_steps=8, save_every="2"), "train_file": str(train),
            "validation_file": str(dev), "output_dir": str(out)}
    with pytest.raises(Killed):
        tuneloop.train(**opts, on_step=kill)
    console = capsys.readouterr().err
    said = (out / "train.log").read_text()
    assert said[:4].isdigit() and " INFO    data train: 64 rows" in said           # timed, from the data on
    assert "also training rows" in said and "WARNING" in said                        # the overlap warning
    assert "data train" not in console and "also training rows" in console           # --quiet: warnings only
    results = tuneloop.train(**opts, resume="latest")
    said = (out / "train.log").read_text()
    assert said.count("--- resumed ") == 1 and said.count("data train: 64 rows") == 2
    assert "step 8/8 (epoch" in said                                                 # the step lines, quiet or not
    assert re.search(r"step 8/8 \(epoch [\d.]+\): loss \d", said)   # 8 steps < --log-every 10: it said "loss —"
    assert any("also training rows" in w for w in results["warnings"])
    assert json.loads((out / "results.json").read_text())["warnings"] == results["warnings"]
    assert (list(logger.handlers), logger.level) == before
