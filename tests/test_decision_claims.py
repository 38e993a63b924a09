"""Decision rules, their report and card: a claim of confidence over cut-offs never tuned, cross-fitted figures of a
cut-off the halves could not tune, a rule that abstains on every row, why figures are in-sample, a decision section
the report cannot read, the confusion matrix under a threshold rule."""

from __future__ import annotations

import html
import json

import numpy as np
from test_report import fabricate

from tuneloop.decision.fit import _cross_fit, _folds, fit_decision
from tuneloop.decision.rule import MULTI, SINGLE
from tuneloop.objective import objective_for
from tuneloop.report import write_model_card, write_report


def options(**extra):
    return {"calibrate": "temperature", "decision": "threshold", "objective": "f1", "abstain_below": None,
            "abstain_label": "abstain", **extra}


def test_a_label_left_at_half_keeps_the_rule_from_claiming_the_confidence():
    """precision@R with a label too rare to tune: its 0.5 was never assured (its recall bound 0), so the rule does
    not describe itself as held with 90% confidence and `all` is false (both said so before)."""
    rng = np.random.default_rng(0)
    labels = np.zeros((300, 2), dtype=np.float32)
    labels[:, 0] = rng.random(300) < 0.5
    labels[:4, 1] = 1                                  # 4 rows: too few to tune, keeps 0.5
    z = np.where(labels > 0, 3.0, -3.0) + rng.normal(size=labels.shape) * 1.5
    z[:4, 1] = -2.5                                    # at 0.5 its recall is 0
    rule, report = fit_decision(z, labels, MULTI, options(calibrate="none", objective="precision@0.9",
                                                          confidence=0.9, names=["common", "rare"]))
    assured = report["thresholds"]["assured"]
    assert rule.thresholds[1] == 0.5 and assured["lower_bounds"][1] == 0.0
    assert assured["all"] is False and rule.confidence is None and "confidence" not in rule.describe()
    # every label tuned and assured: the claim stands
    labels[:40, 1] = 1
    z = np.where(labels > 0, 3.0, -3.0) + rng.normal(size=labels.shape) * 0.5
    rule, report = fit_decision(z, labels, MULTI, options(calibrate="none", objective="precision@0.9", confidence=0.9))
    assert report["thresholds"]["assured"]["all"] is True and "90% confidence" in rule.describe()


def test_halves_too_small_to_tune_measure_the_saved_cut_off_not_argmax():
    """60 rows, 7 positive: all rows tune a cut-off, each half (3-4 positives) cannot. The halves fell back to
    argmax, so the 'tuned cut-off' figures were argmax's to the digit; now they decide by the saved cut-off (at
    their own temperature, rescaled) and a note says those figures are partly in-sample."""
    rng = np.random.default_rng(3)
    y = np.zeros(60, dtype=int)
    y[:7] = 1
    z = np.zeros((60, 2))
    z[:, 1] = np.where(y == 1, 0.2, -1.5) + rng.normal(size=60)
    rule, report = fit_decision(z, y, SINGLE, options())
    t = report["thresholds"]
    assert rule.thresholds and t["at_tuned"] != t["at_default"]
    assert any("partly in-sample (optimistic)" in n and "fewer than 5 on a side" in n for n in report["notes"])
    assert not any("partly in-sample" in n for n in rule.notes)           # about the figures, not the rule


def test_a_borrowed_cut_off_decides_each_row_as_the_saved_rule_does():
    rng = np.random.default_rng(0)
    labels = np.zeros((80, 2), dtype=np.float32)
    labels[:, 0] = rng.random(80) < 0.5
    labels[:6, 1] = 1                                  # tuned on all rows, not on a half
    z = np.where(labels > 0, 2.0, -3.0) + rng.normal(size=labels.shape) * 1.5
    opts = options(names=["common", "rare"])
    rule, report = fit_decision(z, labels, MULTI, opts)
    assert any("(labels rare)" in n for n in report["notes"])
    problem = objective_for(MULTI)
    folds = _folds(labels, problem, 0)
    _, _, parts = _cross_fit(z, labels, problem, opts, folds, rule, 0)
    assert len({part.temperature for part in parts} | {rule.temperature}) > 1       # rescaled, not copied
    for (_, measured), part in zip(folds, parts, strict=True):
        assert (part.predictions(z[measured])[:, 1] == rule.predictions(z[measured])[:, 1]).all()


def test_a_rule_that_abstains_on_every_row_says_so():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 50)
    z = rng.normal(size=(50, 2)) * 0.1                 # every probability near 0.5
    rule, report = fit_decision(z, y, SINGLE, options(decision="argmax", abstain_below=0.9))
    assert rule.abstains(z).all()
    assert any(n.startswith("--abstain-below 0.9: the rule abstains on every one of the 50 validation rows")
               for n in rule.notes) and rule.notes == report["notes"]
    rule, _ = fit_decision(z, y, SINGLE, options(decision="argmax", abstain_below=0.5))
    assert not any("abstains on every" in n for n in rule.notes)


def test_in_sample_figures_say_why_when_a_class_has_one_row():
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(30, dtype=int), np.ones(29, dtype=int), [2]]
    z = rng.normal(size=(60, 3))
    z[np.arange(60), y] += 1
    _, report = fit_decision(z, y, SINGLE, options(decision="argmax", names=["a", "b", "c"]))
    assert report["measured"] == ("in-sample on the 60 validation rows (the class c has a single row, so no two "
                                  "halves can each hold it: optimistic)")
    _, report = fit_decision(z[:30], y[:30], SINGLE, options(decision="argmax"))
    assert "(too few to hold any out: optimistic)" in report["measured"]


def decided_run(tmp_path, kind=SINGLE, names=("no", "yes"), **extra):
    """A fabricated run whose results.json and model/tuneloop.json hold a threshold rule fitted on its saved
    validation outputs."""
    run = fabricate(tmp_path / "run", kind, names=list(names))
    saved = np.load(run / "predictions" / "eval_validation.npz")
    rule, decision = fit_decision(saved["logits"].astype(np.float64), saved["labels"], kind,
                                  options(names=list(names), **extra))
    assert rule.thresholds
    results = json.loads((run / "results.json").read_text()) | {"decision": decision}
    (run / "results.json").write_text(json.dumps(results))
    metadata = json.loads((run / "model" / "tuneloop.json").read_text()) | {"decision": rule.to_dict()}
    (run / "model" / "tuneloop.json").write_text(json.dumps(metadata))
    return run, results, metadata


def test_the_confusion_matrix_under_a_threshold_rule_says_it_is_the_raw_argmax(tmp_path):
    run, _, _ = decided_run(tmp_path)
    text = html.unescape((write_report(run)).read_text(encoding="utf-8"))
    assert "Confusion matrix: validation" in text
    assert "These are the raw model's decisions (argmax; multi-label: 0.5), as in the final evaluation" in text


def test_a_decision_section_missing_its_parts_is_noted_not_a_traceback(tmp_path):
    run, results, _ = decided_run(tmp_path)
    for broken in ({k: v for k, v in results["decision"].items() if k != "reliability"},      # KeyError before
                   {**results["decision"], "calibration": {"temperature": 1.0}},
                   {**results["decision"], "thresholds": {"values": [0.4]}}):
        (run / "results.json").write_text(json.dumps({**results, "decision": broken}))
        page = write_report(run).read_text(encoding="utf-8")
        text = html.unescape(page)
        assert "results.json: 'decision' lacks or mistypes" in text and "it is left out" in text
        assert "<h2>Decision rule</h2>" not in page and "Learning rate" in text


def test_the_card_says_what_its_cross_fitted_threshold_figures_measure(tmp_path):
    run, results, metadata = decided_run(tmp_path)
    caveat = ("the cross-fitted threshold figures (at_tuned) are partly in-sample (optimistic): where a half of "
              "the validation rows has fewer than 5 on a side")
    results["decision"]["notes"] = [*results["decision"].get("notes", []), caveat + " <b>"]
    card = write_model_card(run / "model", results, {}, metadata).read_text(encoding="utf-8")
    measured = card.split("| metric | default cut-off | tuned cut-off |")[1]
    assert f"Note: {caveat} &lt;b&gt;" in measured
    assert card.count(caveat) == 1


def test_inspect_says_a_run_has_not_finished_and_whose_model_an_experiments_is(tmp_path):
    import pytest

    from tuneloop.analysis.inspect import describe_failures
    from tuneloop.exceptions import TuneloopError

    going = tmp_path / "going"                         # stopped mid-run: metrics.jsonl, no results.json
    going.mkdir()
    (going / "metrics.jsonl").write_text('{"step": 5, "train/loss": 0.7}\n')
    with pytest.raises(TuneloopError, match=r"the run has not finished \(no results.json\), and they are written "
                                            r"at its end; `tuneloop report .*going` shows it so far"):
        describe_failures(going)
    experiment = tmp_path / "exp"                      # --seeds: its model/ is a copy of one seed's
    for seed in ("seed-1", "seed-2"):
        (experiment / seed).mkdir(parents=True)
        (experiment / seed / "tuneloop-run.json").write_text("{}")
        (experiment / seed / "errors.csv").write_text("id,text,gold,predicted,p_predicted,p_gold\n")
    (experiment / "summary.json").write_text("{}")
    (experiment / "model").mkdir()
    (experiment / "model" / "tuneloop.json").write_text("{}")
    with pytest.raises(TuneloopError, match=r"it is a saved model of .*exp; it is an experiment's: .*\(seed-1, "
                                            r"seed-2\); inspect one of those runs"):
        describe_failures(experiment / "model")
    assert "0 validation rows" in describe_failures(experiment / "seed-1")


def test_the_reports_multi_label_thresholds_and_bounds_name_their_labels(tmp_path):
    run, results, _ = decided_run(tmp_path, MULTI, ("<b>", "x|y"), objective="precision@0.5", confidence=0.9)
    assert len(results["decision"]["thresholds"]["values"]) == 2
    text = html.unescape(write_report(run).read_text(encoding="utf-8"))
    cut = results["decision"]["thresholds"]["values"]
    assert f"Thresholds for precision@0.5: <b> {cut[0]:.3g}, x|y {cut[1]:.3g}" in text
    bounds = results["decision"]["thresholds"]["assured"]["lower_bounds"]
    assert f"at least {bounds[0]:.3f} (<b>), {bounds[1]:.3f} (x|y) at the cut-off" in text


def test_the_reports_binary_threshold_names_the_class_it_cuts(tmp_path):
    run, results, _ = decided_run(tmp_path, positive=0)             # --positive-label no: the first class
    cut = results["decision"]["thresholds"]["values"][0]
    text = html.unescape(write_report(run).read_text(encoding="utf-8"))
    assert f"Thresholds for f1 on the probability of no: {cut:.3g}" in text


def test_inspect_names_the_multi_label_score_and_an_empty_label_set(tmp_path):
    from tuneloop.analysis.inspect import describe_failures

    (tmp_path / "errors.csv").write_text("id,text,gold,predicted,confidence_wrong\n"
                                         "r1,cat dog,,a,0.91\n")       # gold: no label at all
    (tmp_path / "label_issues.csv").write_text("id,row,text,given,suggested,p_given,likely_wrong,epochs\n"
                                               "r2,3,red cow,a|b,,0.12,True,2\n")
    text = describe_failures(tmp_path)
    assert "1. id r1: gold (none), predicted a (confidence_wrong 0.91)" in text        # was "gold , ... (p 0.91)"
    assert "1. id r2, row 3: given a|b, the model says (none) (p_given 0.12) — likely wrong" in text
