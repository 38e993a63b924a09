"""Every GLUE task from files in its exact distribution layout: the task's metrics, by their GLUE names."""

from __future__ import annotations

import json
import math

import pytest
from conftest import fast_options
from glue_fixtures import write_glue_task

import tuneloop
from tuneloop import TrainConfig
from tuneloop.cli.main import main
from tuneloop.tasks import TASKS

RANGES = {"accuracy": (0, 1), "f1": (0, 1), "matthews_correlation": (-1, 1), "pearson": (-1, 1),
          "spearmanr": (-1, 1)}


@pytest.mark.parametrize("task", [t for t in TASKS if t != "ax"])
def test_each_glue_task_trains_and_reports_its_metrics(task, tiny_model, tmp_path):
    folder = write_glue_task(task, tmp_path / task)
    out = tmp_path / "run"
    tuneloop.train(TrainConfig(task=task, data_dir=str(folder), output_dir=str(out),
                               **fast_options(tiny_model, max_steps=6, predict_test=True)))
    spec = TASKS[task]
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["main_metric"] == spec.main_metric
    macro = {"f1_macro"} if spec.label_names else set()          # every classification also reports macro-F1
    assert set(on_disk["eval"]) == set(spec.metrics) | macro | {"loss", "num_samples"}
    for name in spec.metrics:
        low, high = RANGES[name]
        assert low <= on_disk["eval"][name] <= high and math.isfinite(on_disk["eval"][name])
    assert on_disk["eval"]["num_samples"] == 21
    assert on_disk["train"]["num_samples"] == 48
    model_config = json.loads((out / "model" / "config.json").read_text())
    if spec.label_names is None:
        assert model_config["problem_type"] == "regression" and len(model_config["id2label"]) == 1
    else:
        assert [model_config["id2label"][str(i)] for i in range(spec.num_labels)] == list(spec.label_names)
    for split in spec.test:
        lines = (out / "predictions" / f"{split}.glue.tsv").read_text().splitlines()
        assert lines[0] == "index\tprediction" and len(lines) == 11
    if task == "mnli":   # both dev files are evaluated
        assert set(on_disk["eval_splits"]) == {"validation_matched", "validation_mismatched"}
        assert on_disk["eval_splits"]["validation_mismatched"]["num_samples"] == 17


def test_ax_is_predicted_with_an_mnli_model(tiny_model, tmp_path):
    mnli = write_glue_task("mnli", tmp_path / "MNLI")
    ax = write_glue_task("ax", tmp_path / "AX")
    out = tmp_path / "run"
    tuneloop.train(TrainConfig(task="mnli", data_dir=str(mnli), output_dir=str(out),
                               **fast_options(tiny_model, max_steps=2)))
    target = tmp_path / "AX.tsv"
    assert main(["predict", "--model", str(out / "model"), "--input", str(ax / "diagnostic.tsv"), "--glue",
                 "--output", str(target), "--quiet"]) == 0
    lines = target.read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 11
    assert {line.split("\t")[1] for line in lines[1:]} <= {"entailment", "neutral", "contradiction"}


def test_evaluate_gives_every_splits_per_class_table_as_the_run_records_them(tiny_model, tmp_path, capsys):
    """evaluate showed and returned the per-class table of MNLI's matched split only."""
    mnli = write_glue_task("mnli", tmp_path / "MNLI")
    out = tmp_path / "run"
    tuneloop.train(TrainConfig(task="mnli", data_dir=str(mnli), output_dir=str(out),
                               **fast_options(tiny_model, max_steps=2, decision="argmax", calibrate="none")))
    recorded = json.loads((out / "results.json").read_text())["per_class"]
    with tuneloop.load(out) as clf:
        results = clf.evaluate()
    assert set(results["per_class_splits"]) == {"validation_matched", "validation_mismatched"}
    for split, table in results["per_class_splits"].items():
        assert table == recorded[split], split
    assert results["per_class"] == results["per_class_splits"]["validation_matched"]
    assert main(["evaluate", str(out), "--quiet"]) == 0
    shown = capsys.readouterr().out
    assert "per class in validation_matched:" in shown and "per class in validation_mismatched:" in shown


def test_tasks_command_lists_every_task(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    for name in TASKS:
        assert f"\n{name} " in out
    assert "matthews_correlation" in out and "spearmanr" in out
