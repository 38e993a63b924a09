"""The decision rule: temperature scaling, tuned thresholds, abstaining, and their honest measurement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

from tuneloop.config.parsing import parse_objective
from tuneloop.decision.fit import fit_decision
from tuneloop.decision.rule import (MULTI, SINGLE, DecisionRule, assured_threshold, bagged_threshold, best_threshold,
                                   constraint_bound, ece, fit_temperature, fit_thresholds, lower_bound,
                                   precision_cuts)


def sample(n, k, temperature, seed=0):
    """Labels drawn from softmax(z); the model reports z * temperature (over-confident when temperature > 1)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 1.5
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    labels = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
    return z * temperature, labels


@pytest.mark.parametrize("temperature", [0.5, 2.0, 3.0])
def test_temperature_recovers_the_generating_one(temperature):
    logits, labels = sample(6000, 4, temperature)
    assert fit_temperature(logits, labels, SINGLE) == pytest.approx(temperature, rel=0.1)


def test_multi_label_temperature_and_ece_drop():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(5000, 3)) * 2
    labels = (rng.random(z.shape) < 1 / (1 + np.exp(-z))).astype(np.float32)
    assert fit_temperature(z * 2.5, labels, MULTI) == pytest.approx(2.5, rel=0.1)
    rule, report = fit_decision(z * 2.5, labels, MULTI, options(), seed=0)
    assert report["calibration"]["ece_after"] < report["calibration"]["ece_before"] / 2
    assert report["calibration"]["nll_after"] < report["calibration"]["nll_before"]


def brute_force(scores, positive, metric):
    """The best value of `metric` over every way of cutting these scores (each distinct score as a cut-off)."""
    best = -1.0
    for cut in [*np.unique(scores), np.inf]:
        pred = (scores >= cut).astype(int)
        best = max(best, metric(positive.astype(int), pred))
    return best


@pytest.mark.parametrize("objective", ["f1", "macro-f1", "precision@0.6", "recall@0.7"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_threshold_maximises_the_metric_on_the_fitting_rows(objective, seed):
    rng = np.random.default_rng(seed)
    positive = rng.random(300) < 0.3
    scores = np.round(np.clip(rng.normal(0.35 + 0.3 * positive, 0.2), 0, 1), 2)   # ties on purpose
    cut, met = best_threshold(scores, positive, objective)
    pred = (scores >= cut).astype(int)
    y = positive.astype(int)
    name, target = parse_objective(objective)
    if name == "f1":
        assert f1_score(y, pred) == pytest.approx(brute_force(scores, positive, f1_score))
    elif name == "macro-f1":
        macro = lambda a, b: f1_score(a, b, average="macro")  # noqa: E731
        assert macro(y, pred) == pytest.approx(brute_force(scores, positive, macro))
    else:
        goal, constraint = (precision_score, recall_score) if name == "precision" else (recall_score, precision_score)
        assert met and constraint(y, pred, zero_division=0) >= target
        best = brute_force(scores, positive, lambda a, b: goal(a, b, zero_division=0)
                           if constraint(a, b, zero_division=0) >= target else -1)
        assert goal(y, pred, zero_division=0) == pytest.approx(best)


def test_unreachable_constraint_is_reported():
    scores, positive = np.array([0.9, 0.8, 0.7]), np.array([False, True, False])
    _, met = best_threshold(scores, positive, "precision@1.0")     # precision at recall 1.0: reachable (1/2)
    assert met
    _, met = best_threshold(scores, positive, "recall@0.9")        # precision ≥ 0.9: only with nothing... never
    assert not met
    cuts, misses = fit_thresholds(np.c_[1 - scores, scores], positive.astype(int), SINGLE, "recall@0.9")
    assert misses == {"unreachable": [0], "unassured": []} and len(cuts) == 1
    rows = np.repeat(np.c_[1 - scores, scores], 10, axis=0)
    rule, report = fit_decision(np.log(rows), np.repeat(positive, 10).astype(int), SINGLE,
                                options(decision="threshold", objective="recall@0.9", calibrate="none"))
    assert "--optimize-threshold-for: recall@0.9 cannot be reached on the validation rows; the closest cut-off is " \
           "used" in report["notes"]


@pytest.mark.parametrize("successes, trials", [(1, 1), (3, 10), (40, 50), (199, 200)])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.99])
def test_the_lower_bound_is_clopper_pearsons(successes, trials, confidence):
    """At the bound, `successes` or more of `trials` happen with probability 1 - confidence (the exact binomial
    tail), so a rate any lower would have made them rarer than that."""
    from scipy.stats import binom

    bound = float(lower_bound(successes, trials, confidence))
    assert 0 < bound < successes / trials + 1e-12
    assert binom.sf(successes - 1, trials, bound) == pytest.approx(1 - confidence, rel=1e-6)
    assert float(lower_bound(0, trials, confidence)) == 0.0


@pytest.mark.parametrize("objective", ["precision@0.7", "recall@0.6"])
@pytest.mark.parametrize("seed", [0, 1])
def test_an_assured_cut_off_is_the_best_whose_bound_meets_the_target(objective, seed):
    """precision@R: among every cut of the rows; recall@P: among the cut-offs flagging 10%, 20%, ... of the rows,
    tested in that order up to the first whose bound falls short."""
    rng = np.random.default_rng(seed)
    positive = rng.random(400) < 0.4
    scores = np.round(np.clip(rng.normal(0.35 + 0.3 * positive, 0.2), 0, 1), 2)      # ties on purpose
    cut, how = assured_threshold(scores, positive, objective, 0.9)
    assert how == "assured"
    name, target = parse_objective(objective)
    goal = precision_score if name == "precision" else recall_score
    y = positive.astype(int)
    if name == "precision":
        candidates = [c for c in [*np.unique(scores), np.inf] if constraint_bound(scores, positive, objective, c, 0.9)
                      >= target]
    else:
        candidates = list(itertools.takewhile(lambda c: constraint_bound(scores, positive, objective, c, 0.9)
                                              >= target, precision_cuts(scores)))
    best = max(goal(y, (scores >= c).astype(int), zero_division=0) for c in candidates)
    assert goal(y, (scores >= cut).astype(int), zero_division=0) == pytest.approx(best)
    assert constraint_bound(scores, positive, objective, cut, 0.9) >= target
    assert name == "precision" or cut in precision_cuts(scores)
    rows_cut, _ = best_threshold(scores, positive, objective)
    assert goal(y, (scores >= cut).astype(int), zero_division=0) <= goal(y, (scores >= rows_cut).astype(int),
                                                                         zero_division=0)
    assert assured_threshold(scores, positive, objective, 0.0) == (rows_cut, "rows")


def test_the_precision_floors_cut_offs_flag_tenths_of_the_rows_from_the_scores_alone():
    scores = np.random.default_rng(0).random(200)
    cuts = precision_cuts(scores)
    assert len(cuts) == 10 and (np.diff(cuts) < 0).all()
    assert [int((scores >= c).sum()) for c in cuts] == list(range(20, 201, 20))
    tied = np.repeat([0.9, 0.6, 0.3], [5, 5, 10])                 # ties: fewer distinct cut-offs, still ordered
    assert [int((tied >= c).sum()) for c in precision_cuts(tied)] == [5, 10, 20]


def test_a_precision_floor_is_tested_fewest_flagged_first_and_stops_at_the_first_short_bound():
    """The fixed sequence: a cut-off whose count is too small to pass even with every row right is left out; the
    others are tested in order, each at the full confidence, and a cut-off after one that falls short is not taken
    even when its own bound passes."""
    scores = np.linspace(1, 0, 200, endpoint=False)                  # 20 rows a tenth, highest first
    positive = np.ones(200, dtype=bool)
    positive[20:40] = np.arange(20) % 4 != 0                         # tenth 2: 15 of 20 right
    positive[60:] = False                                            # from tenth 4 on: none
    # tenths 1-3 flagged: 20/20 (bound 0.891), 35/40 (0.79), 55/60 (0.862): 0.8 fails at the second
    bounds = [constraint_bound(scores, positive, "recall@0.8", c, 0.9) for c in precision_cuts(scores)[:3]]
    assert bounds[0] >= 0.8 > bounds[1] and bounds[2] >= 0.8
    cut, how = assured_threshold(scores, positive, "recall@0.8", 0.9)
    assert how == "assured" and int((scores >= cut).sum()) == 20          # not the third tenth
    few = np.linspace(1, 0, 100, endpoint=False), np.arange(100) < 25         # 10 rows a tenth, the top 25 right
    assert float(lower_bound(10, 10, 0.9)) < 0.8 <= float(lower_bound(20, 20, 0.9))
    cut, how = assured_threshold(*few, "recall@0.8", 0.9)
    assert how == "assured" and int((few[0] >= cut).sum()) == 20     # tenth 1 left out, not a failure that stops


def new_rows_held(objective, make_rows, size, draws=200):
    """(share of draws assured at 0.9, share of those whose constraint held on 20,000 new rows, the same share for
    the rows' best cut-off over every draw)."""
    new_scores, new_positive = make_rows(20000)
    name, target = parse_objective(objective)

    def held(cut):
        chosen = new_scores >= cut
        tp = (chosen & new_positive).sum()
        return (tp / new_positive.sum() if name == "precision" else tp / max(chosen.sum(), 1)) >= target

    assured, kept, plain = [], [], []
    for _ in range(draws):
        scores, positive = make_rows(size)
        cut, how = assured_threshold(scores, positive, objective, 0.9)
        assured.append(how == "assured")
        kept += [held(cut)] if how == "assured" else []
        plain.append(held(assured_threshold(scores, positive, objective, 0.0)[0]))
    return np.mean(assured), (np.mean(kept) if kept else None), np.mean(plain)


@pytest.mark.parametrize("objective", ["precision@0.8", "recall@0.8"])
def test_an_assured_constraint_holds_on_new_rows_where_the_rows_best_cut_often_does_not(objective):
    """200 validation sets of 400 rows from one weak model; each cut-off scored on 20,000 new rows."""
    rng = np.random.default_rng(11)

    def rows(n):
        positive = rng.random(n) < 0.5
        return 1 / (1 + np.exp(-rng.normal(np.where(positive, 1.2, -1.2), 1.5))), positive

    assured, held, plain = new_rows_held(objective, rows, 400)
    assert assured >= 0.8 and held >= 0.85 and plain <= 0.7


def test_a_precision_floor_the_model_never_reaches_is_not_assured_by_a_lucky_top():
    """A model whose precision is under 0.78 at every cut-off: a 90% bound searched over every cut of a sample
    passed 0.8 in 20% of 400-row samples (on a run of right answers at its top); the fixed sequence of cut-offs keeps
    any false "assured" to at most 1 - 0.9 of the samples."""
    rng = np.random.default_rng(5)

    def rows(n):
        scores = rng.random(n)
        return scores, rng.random(n) < 0.78 * scores ** 0.1

    assured, held, _ = new_rows_held("recall@0.8", rows, 400)
    assert assured <= 0.1 and held in (None, 0.0)


def test_a_constraint_the_rows_cannot_assure_is_said_and_the_rows_best_cut_is_kept():
    rng = np.random.default_rng(4)
    positive = np.r_[np.ones(10, dtype=bool), np.zeros(30, dtype=bool)]   # 10 of 10 right: bound 0.1 ** 0.1 < 0.8
    scores = np.clip(rng.normal(0.3 + 0.4 * positive, 0.15), 0.01, 0.99)
    logits = np.log(np.c_[1 - scores, scores])
    labels = positive.astype(int)
    rule, report = fit_decision(logits, labels, SINGLE, options(decision="threshold", objective="precision@0.8",
                                                                calibrate="none", confidence=0.9))
    assert rule.thresholds == [round(best_threshold(scores, positive, "precision@0.8")[0], 6)]
    assert any("the validation rows cannot assure recall >= 0.8 on new rows with 90% confidence" in n
               for n in report["notes"])
    assert rule.confidence is None and rule.describe().endswith("(precision@0.8)")      # not claimed
    assert report["thresholds"]["assured"]["all"] is False
    bound = report["thresholds"]["assured"]["lower_bounds"][0]
    assert bound == pytest.approx(constraint_bound(scores, positive, "precision@0.8", rule.thresholds[0], 0.9),
                                  abs=1e-4) and bound < 0.8
    more = np.repeat(logits, 10, axis=0), np.repeat(labels, 10)          # ten times the rows: assured
    rule, report = fit_decision(*more, SINGLE, options(decision="threshold", objective="precision@0.8",
                                                       calibrate="none", confidence=0.9))
    assert not any("confidence" in n for n in report.get("notes", []))
    assert report["thresholds"]["assured"]["lower_bounds"][0] >= 0.8 and report["thresholds"]["assured"]["all"]
    assert rule.confidence == 0.9 and "precision@0.8, 90% confidence" in rule.describe()


def test_multi_label_floors_are_assured_per_label_and_the_short_one_is_named():
    rng = np.random.default_rng(2)
    labels = np.c_[rng.random(600) < 0.5, np.r_[np.ones(10), np.zeros(590)]].astype(int)    # b: 10 positives
    logits = rng.normal(2.5 * (2 * labels - 1), 1.5)
    rule, report = fit_decision(logits, labels, MULTI, options(decision="threshold", objective="precision@0.8",
                                                               calibrate="none", confidence=0.9, names=["a", "b"]))
    bounds = report["thresholds"]["assured"]["lower_bounds"]
    assert bounds[0] >= 0.8 > bounds[1]
    assert any("cannot assure recall >= 0.8 on new rows with 90% confidence (--threshold-confidence) for labels b"
               in n for n in report["notes"])


def test_evaluating_a_floor_rule_reports_the_precision_and_recall_of_its_decisions():
    from tuneloop.decision.fit import decided_metrics

    logits, labels = sample(300, 2, 1.0, seed=3)
    rule, _ = fit_decision(logits, labels, SINGLE, options(decision="threshold", objective="precision@0.7",
                                                            calibrate="none", confidence=0.9))
    out = decided_metrics(rule, ["accuracy"], logits, labels)
    predicted = rule.predictions(logits)
    assert out["recall"] == pytest.approx(recall_score(labels, predicted))
    assert out["precision"] == pytest.approx(precision_score(labels, predicted))
    f1_rule, _ = fit_decision(logits, labels, SINGLE, options(decision="threshold", calibrate="none"))
    assert "recall" not in decided_metrics(f1_rule, ["accuracy"], logits, labels)     # only for a floor
    # --positive-label: F1 of that class, as the precision and recall beside it (was class 1's)
    negative = DecisionRule(kind=SINGLE, thresholds=[0.5], positive=0, objective="recall@0.7", confidence=0.9)
    out = decided_metrics(negative, ["f1"], logits, labels)
    predicted = negative.predictions(logits)
    assert out["f1"] == pytest.approx(f1_score(labels, predicted, pos_label=0))
    assert out["recall"] == pytest.approx(recall_score(labels, predicted, pos_label=0))
    assert out["f1"] != pytest.approx(f1_score(labels, predicted))


def noisy_scores(n, rng):
    """Scores of a weak binary model (30% positive), rounded so that ties occur."""
    positive = rng.random(n) < 0.3
    return np.round(np.clip(rng.normal(0.4 + 0.15 * positive, 0.15), 0, 1), 3), positive


@pytest.mark.parametrize("objective", ["f1", "macro-f1"])
def test_a_bagged_cut_off_moves_less_between_samples_and_scores_higher_on_new_rows(objective):
    rng = np.random.default_rng(7)
    new_scores, new_positive = noisy_scores(20000, rng)            # rows no cut-off was fitted on
    metric = (lambda y, p: f1_score(y, p)) if objective == "f1" else (lambda y, p: f1_score(y, p, average="macro"))
    plain, bagged = [], []
    for draw in range(40):                                         # 40 validation sets of 80 rows
        scores, positive = noisy_scores(80, rng)
        plain.append(best_threshold(scores, positive, objective)[0])
        bagged.append(bagged_threshold(scores, positive, objective, seed=draw)[0])
    logit = lambda c: np.log(c) - np.log1p(-np.asarray(c))        # noqa: E731
    assert np.std(logit(bagged)) < np.std(logit(plain))
    held = {name: np.mean([metric(new_positive, new_scores >= c) for c in cuts])
            for name, cuts in (("plain", plain), ("bagged", bagged))}
    assert held["bagged"] > held["plain"]


def test_a_bagged_cut_off_is_seeded_and_constraints_keep_the_best_cut():
    scores, positive = noisy_scores(80, np.random.default_rng(3))
    assert bagged_threshold(scores, positive, "f1", seed=1) == bagged_threshold(scores, positive, "f1", seed=1)
    assert bagged_threshold(scores, positive, "f1", seed=1)[0] != best_threshold(scores, positive, "f1")[0]
    for objective in ("precision@0.6", "recall@0.5"):
        assert bagged_threshold(scores, positive, objective, seed=1) == best_threshold(scores, positive, objective)
    one_side = np.zeros(80, dtype=bool)
    assert bagged_threshold(scores, one_side, "f1") == best_threshold(scores, one_side, "f1")


def test_the_saved_threshold_is_the_bagged_one_drawn_with_the_run_seed():
    logits, labels = sample(300, 2, 1.0, seed=8)
    for seed in (0, 5):
        rule, _ = fit_decision(logits, labels, SINGLE, options(decision="threshold", calibrate="none"), seed=seed)
        p = DecisionRule(kind=SINGLE).probabilities(logits)[:, 1]
        assert rule.thresholds == [round(bagged_threshold(p, labels == 1, "f1", seed)[0], 6)]


@pytest.mark.parametrize("bad", ["f2", "precision", "recall@", "recall@1.5", "precision@0", "f1@0.5"])
def test_bad_objectives_are_refused(bad):
    with pytest.raises(ValueError):
        parse_objective(bad)


def test_rule_applies_thresholds_as_a_logit_shift_and_abstains():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(200, 2)) * 3
    rule = DecisionRule(kind=SINGLE, temperature=2.0, thresholds=[0.3], abstain_below=0.7)
    p = rule.probabilities(logits)
    assert p == pytest.approx(np.exp(logits / 2) / np.exp(logits / 2).sum(1, keepdims=True))
    assert (rule.predictions(logits) == (p[:, 1] >= 0.3)).all()
    decided = np.where(rule.predictions(logits) == 1, p[:, 1], p[:, 0])
    assert (rule.abstains(logits) == (decided < 0.7)).all()
    multi = DecisionRule(kind=MULTI, thresholds=[0.2, 0.8])
    z = rng.normal(size=(100, 2)) * 2
    q = 1 / (1 + np.exp(-z))
    assert (multi.predictions(z) == (q >= [0.2, 0.8])).all()
    assert DecisionRule.from_dict(rule.to_dict()) == rule
    assert rule.describe() == "temperature 2; threshold 0.3 (None); abstain below 0.7"


def options(**extra):
    return {"calibrate": "temperature", "decision": "argmax", "objective": "f1", "abstain_below": None,
            "abstain_label": "abstain", **extra}


def test_reported_figures_are_cross_fitted_not_in_sample():
    logits, labels = sample(400, 2, 2.0, seed=4)
    rule, report = fit_decision(logits, labels, SINGLE, options(decision="threshold", abstain_below=0.8), seed=0)
    assert report["measured"].startswith("2-fold cross-fit")
    assert rule.thresholds and report["thresholds"]["at_tuned"]["f1"] > 0
    # the cross-fitted tuned F1 is not the in-sample one (which is the maximum on these rows)
    in_sample = f1_score(labels, rule.predictions(logits))
    assert report["thresholds"]["at_tuned"]["f1"] <= in_sample + 1e-9
    level = [row for row in report["abstain"]["curve"] if row[0] == 0.8][0]
    assert report["abstain"]["coverage"] == level[1] and report["abstain"]["accuracy"] == level[2]
    coverages = [row[1] for row in report["abstain"]["curve"]]
    assert coverages == sorted(coverages, reverse=True) and coverages[0] == 1.0
    small, small_report = fit_decision(logits[:30], labels[:30], SINGLE, options(), seed=0)
    assert small_report["measured"].startswith("in-sample")


def test_ece_of_a_perfectly_calibrated_sample_is_small():
    logits, labels = sample(20000, 3, 1.0, seed=5)
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    assert ece(p, labels, SINGLE) < 0.02
    assert ece(np.exp(3 * logits) / np.exp(3 * logits).sum(1, keepdims=True), labels, SINGLE) > 0.1


def test_combinations_of_options_all_fit():
    logits, labels = sample(120, 2, 1.5, seed=6)
    for calibrate, decision in itertools.product(["none", "temperature"], ["argmax", "threshold"]):
        rule, report = fit_decision(logits, labels, SINGLE, options(calibrate=calibrate, decision=decision))
        assert (rule.temperature == 1.0) == (calibrate == "none")
        assert bool(rule.thresholds) == (decision == "threshold") == ("thresholds" in report)


def test_the_positive_class_can_be_either():
    logits, labels = sample(400, 2, 1.0, seed=7)
    for positive in (0, 1):
        rule, report = fit_decision(logits, labels, SINGLE, options(decision="threshold", positive=positive))
        assert rule.positive == positive and report["thresholds"]["positive"] == positive
        p = rule.probabilities(logits)[:, positive]
        decided = rule.predictions(logits)
        assert ((decided == positive) == (p >= rule.thresholds[0])).all()
        assert report["thresholds"]["at_default"]["f1"] == pytest.approx(
            f1_score(labels, logits.argmax(1), pos_label=positive), abs=1e-4)


def test_a_temperature_fitted_on_perfectly_separated_rows_is_not_applied():
    """30 validation rows the model gets all right: the NLL falls without end as T shrinks (the fit ran to its
    bound, T = 0.05, and every probability to 1.0). The rule stays at T = 1 and says why."""
    rng = np.random.default_rng(0)
    labels = np.array([0, 1] * 15)
    logits = np.stack([np.where(labels == 0, 1.0, -1.0), np.where(labels == 1, 1.0, -1.0)], 1) * rng.uniform(
        0.3, 1.0, (30, 1))
    assert fit_temperature(logits, labels, SINGLE) == pytest.approx(0.05, rel=0.05)    # what a plain fit does
    rule, report = fit_decision(logits, labels, SINGLE, options(), seed=0)
    assert rule.temperature == 1.0 and report["calibration"]["temperature"] == 1.0
    assert report["notes"] == ["calibration not applied: 0 wrong prediction(s) on the 30 validation rows are too few "
                               "to fit a temperature on (it would shrink toward 0.05 and push every probability to "
                               "1); the probabilities stay the raw scores (T = 1)"]
    assert np.allclose(rule.probabilities(logits), DecisionRule(kind=SINGLE).probabilities(logits))


def test_a_temperature_at_its_search_bound_or_on_few_rows_is_not_applied_but_a_sound_one_is():
    rng = np.random.default_rng(1)
    noise = rng.normal(size=(200, 2)) * 8                 # confident logits that say nothing about the labels
    labels = rng.integers(0, 2, 200)
    rule, report = fit_decision(noise, labels, SINGLE, options(), seed=0)
    assert rule.temperature == 1.0 and "is at the edge of its search range (0.05 to 20)" in report["notes"][0]
    few_logits, few_labels = sample(12, 2, 3.0)
    rule, report = fit_decision(few_logits, few_labels, SINGLE, options(), seed=0)
    assert rule.temperature == 1.0 and "12 validation rows are too few" in report["notes"][0]
    logits, labels = sample(400, 2, 3.0)                  # over-confident by 3: fitted and applied
    rule, report = fit_decision(logits, labels, SINGLE, options(), seed=0)
    assert rule.temperature == pytest.approx(3.0, rel=0.3) and "notes" not in report


def test_thresholds_on_too_few_rows_of_a_class_stay_at_argmax():
    logits, labels = sample(200, 2, 1.0)
    labels = np.where(np.arange(200) < 4, 1, 0)           # 4 positives
    rule, report = fit_decision(logits, labels, SINGLE, options(decision="threshold", objective="f1"), seed=0)
    assert not rule.thresholds and "thresholds" not in report
    assert any("thresholds not applied: 200 validation rows with 4 on the rarer side" in n for n in report["notes"])


def test_a_multi_label_label_with_too_few_rows_keeps_one_half_and_the_others_are_tuned():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(300, 3)) * 2 - np.array([0.0, 1.0, 0.0])
    labels = (rng.random(z.shape) < 1 / (1 + np.exp(-z))).astype(np.float32)
    labels[:, 2] = 0
    labels[:3, 2] = 1                                     # the third label: 3 rows, too few to tune its cut-off on
    opts = options(decision="threshold", calibrate="none", names=["sports", "music", "rare-tag"])
    rule, report = fit_decision(z, labels, MULTI, opts, seed=0)
    assert len(rule.thresholds) == 3 and rule.thresholds[2] == 0.5
    probs = 1 / (1 + np.exp(-z))
    for k in (0, 1):                                      # tuned as a label on its own would be
        assert rule.thresholds[k] == round(bagged_threshold(probs[:, k], labels[:, k] == 1, "f1", k)[0], 6)
    assert rule.thresholds[1] != 0.5
    assert "thresholds not tuned for 1 of 3 labels (rare-tag): fewer than 5 of the 300 validation rows" in \
        " ".join(report["notes"])
    assert (rule.predictions(z)[:, 2] == (z[:, 2] >= 0)).all()
    alone, _ = fit_decision(z[:, :2], labels[:, :2], MULTI, options(decision="threshold", calibrate="none"), seed=0)
    assert alone.thresholds == rule.thresholds[:2]


def test_an_unreachable_target_names_the_label():
    z = np.c_[np.linspace(-3, 3, 100), np.linspace(-3, 3, 100)]
    labels = np.c_[z[:, 0] > 1, z[:, 1] < -1.8].astype(np.float32)   # the second label's rows score lowest
    opts = options(decision="threshold", objective="recall@0.9", calibrate="none", names=["good", "inverted"])
    rule, report = fit_decision(z, labels, MULTI, opts, seed=0)
    assert "--optimize-threshold-for: recall@0.9 cannot be reached on the validation rows for labels inverted; the " \
           "closest cut-off is used" in report["notes"]


def two_halves(over: float, under: float):
    """400 rows whose two cross-fit halves (the folds fit_decision draws with seed 0) disagree: one half's logits are
    over-confident by `over`, the other's under-confident (`under` < 1), so each half's temperature is wrong for the
    other, and the one fitted on all rows is a compromise the rows do not pin down."""
    from tuneloop.decision.fit import _folds
    from tuneloop.objective import objective_for

    labels = np.random.default_rng(0).integers(0, 2, 400)
    logits = np.zeros((400, 2))
    halves = _folds(labels, objective_for(SINGLE), 0)
    for (_, rows), temperature, seed in zip(halves, (over, under), (1, 2), strict=True):
        z, y = sample(4000, 2, temperature, seed=seed)
        for c in (0, 1):                                  # logits drawn given each row's label
            want = rows[labels[rows] == c]
            logits[want] = z[y == c][:len(want)]
    return logits, labels


def test_a_temperature_that_makes_the_cross_fitted_loss_and_ece_worse_is_not_applied():
    logits, labels = two_halves(3.0, 0.3)
    fitted = fit_temperature(logits, labels, SINGLE)
    assert fitted > 1.5                                    # what the rule applied before the guard
    rule, report = fit_decision(logits, labels, SINGLE, options(decision="threshold"), seed=0)
    c = report["calibration"]
    assert rule.temperature == 1.0 and c["temperature"] == 1.0 and c["method"] == "temperature"
    assert c["not_applied"]["temperature"] == pytest.approx(fitted, rel=1e-3)
    assert c["not_applied"]["nll_after"] > c["nll_before"] and c["not_applied"]["ece_after"] > c["ece_before"]
    assert c["nll_after"] == c["nll_before"] and c["ece_after"] == c["ece_before"]    # what is applied: T = 1
    assert report["notes"][0].startswith(f"calibration not applied: the temperature fitted on the validation rows "
                                         f"({fitted:.3g}) made the probabilities worse on rows it was not fitted on")
    assert np.allclose(rule.probabilities(logits), DecisionRule(kind=SINGLE).probabilities(logits))
    # the threshold is tuned on the probabilities the rule applies (raw), not on the refused temperature's
    p = DecisionRule(kind=SINGLE).probabilities(logits)[:, 1]
    assert ((rule.predictions(logits) == 1) == (p >= rule.thresholds[0])).all()
    assert rule.describe().startswith("temperature 1; threshold")


def test_halves_that_agree_keep_their_temperature():
    logits, labels = two_halves(3.0, 3.0)                  # over-confident by 3 throughout: fitted, helps, applied
    rule, report = fit_decision(logits, labels, SINGLE, options(), seed=0)
    assert rule.temperature == pytest.approx(3.0, rel=0.3) and "not_applied" not in report["calibration"]
    assert report["calibration"]["nll_after"] < report["calibration"]["nll_before"]


def test_the_cross_fitted_figures_measure_the_rule_that_was_saved():
    """A temperature refused on all the rows (at its search bound) was still fitted on each half, so results.json
    quoted a calibration gain the saved T = 1 never gives; assured cut-offs measured by halves that could not assure
    theirs are said to be less cautious."""
    from tuneloop.decision.fit import fit_decision

    rng = np.random.default_rng(0)
    rng.normal(0, 1.5, 50)
    logits, labels = np.c_[np.zeros(50), rng.normal(0, 1.5, 50)], np.ones(50, dtype=int)       # one class
    options = dict(calibrate="temperature", decision="argmax", objective="f1", abstain_below=None,
                   abstain_label="abstain", confidence=0.0, positive=1)
    rule, report = fit_decision(logits, labels, "single_label_classification", options)
    c = report["calibration"]
    assert rule.temperature == 1.0 and c["ece_after"] == c["ece_before"] and c["nll_after"] == c["nll_before"]
    rng = np.random.default_rng(3)
    said = []
    for _ in range(4):
        y = (rng.random(80) < 0.5).astype(int)
        x = np.c_[np.zeros(80), rng.normal(0, 1, 80) + 1.6 * (2 * y - 1)]
        rule, report = fit_decision(x, y, "single_label_classification",
                                    {**options, "calibrate": "none", "decision": "threshold",
                                     "objective": "precision@0.9", "confidence": 0.9})
        said.append((rule.confidence, report.get("notes", [])))
    assert any(confidence == 0.9 and any("could not assure with 90% confidence" in n for n in notes)
               for confidence, notes in said)
