"""What the model card and report.html say of a run is true of it: each claim checked against results.json."""

from __future__ import annotations

import html
import json
import re

import yaml
from test_report import fabricate

from tuneloop.report import write_model_card, write_report

FP32_ON_THIS_CPU = "fp32 (bf16 asked; this CPU has no bf16 units: AMX or AVX512-BF16)"


def _text(path) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", path.read_text())))


def _card(run) -> str:
    results = json.loads((run / "results.json").read_text())
    config = yaml.safe_load((run / "config.yaml").read_text())
    return write_model_card(run / "model", results, config, {}).read_text()


def test_bf16_asked_on_a_cpu_without_bf16_units_is_said_to_have_run_fp32(tmp_path):
    """results.json's train.precision is what ran (machine.effective_precision); mixed_precision what was asked."""
    run = fabricate(tmp_path / "run", "single_label_classification", names=["neg", "pos"])
    results = json.loads((run / "results.json").read_text())
    results["train"] |= {"mixed_precision": "bf16", "precision": FP32_ON_THIS_CPU, "device": "cpu"}
    (run / "results.json").write_text(json.dumps(results))
    card = _card(run)
    assert "precision bf16" not in card and "| mixed precision | bf16 |" not in card
    assert f"precision {FP32_ON_THIS_CPU}" in card
    page = _text(write_report(run))
    assert "process(es), precision bf16" not in page                  # the Summary's device fact
    assert f"process(es), precision {FP32_ON_THIS_CPU}" in page


def test_a_regression_card_claims_no_saved_decision_rule(tmp_path):
    """A regression model saves no decision rule (tuneloop.json has no `decision`): its card says none is applied."""
    card = _card(fabricate(tmp_path / "run", "regression"))
    assert "decision rule" not in card.lower()
    assert "With tuneloop, in Python:" in card


def test_a_classification_card_still_names_its_saved_rule(tmp_path):
    run = fabricate(tmp_path / "run", "single_label_classification", names=["neg", "pos"])
    meta = json.loads((run / "model" / "tuneloop.json").read_text())
    meta["decision"] = {"kind": "single_label_classification", "temperature": 1.5}
    (run / "model" / "tuneloop.json").write_text(json.dumps(meta))
    card = _card(run)
    assert "(the model's saved decision rule — calibration, thresholds, abstaining — applied): A plain pipeline " \
           "does not apply it" in card


def _summary(runs: list[dict], kept: str) -> dict:
    return {"baseline": None, "kind": "seeds", "main_metric": "accuracy", "metric_for_best": "accuracy", "runs": runs,
            "metrics": {"accuracy": {"mean": 0.8, "std": 0.1, "ci95": None, "n": len(runs)}}, "kept": kept,
            "keep": "best", "collapsed": [r["name"] for r in runs if r["collapsed"]], "output_dir": "out"}


def test_summary_says_the_kept_model_is_the_best_of_the_runs_that_did_not_collapse(tmp_path):
    """experiments/runs.py keeps the best run that did not collapse; a collapsed run that scores higher (the majority
    class of skewed data) makes "best accuracy on validation" untrue of the kept one."""
    from tuneloop.report.summary import write_summary_page

    runs = [{"name": "seed-0", "seed": 0, "collapsed": True, "eval": {"accuracy": 0.9}},
            {"name": "seed-1", "seed": 1, "collapsed": False, "eval": {"accuracy": 0.8}}]
    page = _text(write_summary_page(tmp_path, _summary(runs, "seed-1")))
    assert "seed-1 (best accuracy on validation of the runs that did not collapse;" in page
    runs[0]["eval"]["accuracy"] = 0.5                     # the kept run is the best of all: said as before
    page = _text(write_summary_page(tmp_path, _summary(runs, "seed-1")))
    assert "seed-1 (best accuracy on validation; --keep best)" in page


def test_an_early_stopped_run_is_not_said_to_have_been_set_to_the_epochs_it_ran(tmp_path):
    """--epochs 4 stopped after 3: the card's hyperparameter row says both (the schedule was laid out over 4)."""
    run = fabricate(tmp_path / "run", "single_label_classification", names=["neg", "pos"])
    results = json.loads((run / "results.json").read_text())
    results["train"] |= {"epochs": 3.0, "steps": 45}
    results |= {"stopped_early": True, "best": {"metric": "accuracy", "value": 1.0, "step": 30, "epoch": 2.0}}
    (run / "results.json").write_text(json.dumps(results))
    config = yaml.safe_load((run / "config.yaml").read_text()) | {"epochs": 4}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    assert "| epochs | 3 of 4, stopped early (45 optimizer steps) |" in _card(run)
