"""Fitting the decision rule (rule.py) on the validation outputs after training, and measuring it honestly.

The rule saved with the model is fitted on every validation row. What results.json and the report quote about it
(ECE and NLL after calibration, the metrics at the tuned thresholds, coverage and accuracy when abstaining) come
from a 2-fold cross-fit instead: the rule is fitted on one half of the validation rows and measured on the other,
both ways round, so no row is scored by a rule fitted on it. With fewer than MIN_CROSS_FIT rows (or a class with
fewer than 2 rows) the figures are in-sample, and say so.

A fit that cannot be trusted is not applied (`trusted_temperature`, thresholds on too few rows — multi-label: per
label, the others tuned —, and a temperature that made both the cross-fitted NLL and ECE worse:
`_calibration_refused`): the rule falls back to T = 1 / argmax and says why in its notes (the log and the report
show them). Thirty perfectly separated validation rows, for one, drove the temperature to its search bound
(T = 0.05) and every saved-rule probability to 1.0; on 200 review snippets a few-shot model's two halves fitted
T = 2.27 and 0.84, and the T = 1.29 of all rows made the out-of-fold NLL (0.664 → 0.682) and ECE (0.041 → 0.103)
worse.
"""

from __future__ import annotations

import numpy as np

from ..objective import Objective, objective_for
from .rule import (TEMPERATURE_RANGE, DecisionRule, logit, constraint_bound, coverage_curve, ece,
                   fit_temperature, fit_thresholds, floor_of, nll, reliability)

MIN_CROSS_FIT = 40
MIN_FIT_ROWS = 20          # fewer validation rows: no temperature, no thresholds
MIN_ERRORS = 3             # fewer wrong predictions: NLL falls without end as T shrinks (no temperature)
VALIDATION_ROWS = "validation rows"   # what the rows are unless the caller names them (options["rows"])
MIN_CLASS_ROWS = 5         # a threshold needs this many rows on each side (binary) / of each label (multi-label)


def _errors(logits: np.ndarray, labels: np.ndarray, problem: Objective) -> int:
    """Wrong decisions (multi-label: wrong (row, label) pairs) of the identity rule."""
    return int((problem.gold(labels) != DecisionRule(kind=problem.kind).predictions(logits)).sum())


def trusted_temperature(logits: np.ndarray, labels: np.ndarray, problem: Objective,
                        rows: str = VALIDATION_ROWS) -> tuple[float, str | None]:
    """(the temperature to apply, why the fitted one is not applied or None); `rows`: what the rows are, as the
    notes name them."""
    n, (low, high) = len(labels), TEMPERATURE_RANGE
    raw = "; the probabilities stay the raw scores (T = 1)"
    if n < MIN_FIT_ROWS:
        return 1.0, f"calibration not applied: {n} {rows} are too few to fit a temperature on " \
                    f"(fewer than {MIN_FIT_ROWS}){raw}"
    errors = _errors(logits, labels, problem)
    if errors < MIN_ERRORS:
        return 1.0, f"calibration not applied: {errors} wrong prediction(s) on the {n} {rows} are too few " \
                    f"to fit a temperature on (it would shrink toward {low} and push every probability to 1){raw}"
    temperature = fit_temperature(logits, labels, problem)
    if temperature <= low * 1.05 or temperature >= high / 1.05:
        return 1.0, f"calibration not applied: the fitted temperature ({temperature:.3g}) is at the edge of its " \
                    f"search range ({low:g} to {high:g}), so the {rows} do not pin it down{raw}"
    return temperature, None


def _thresholds_trusted(labels: np.ndarray, problem: Objective, positive: int, rows: str,
                        names=None) -> tuple[np.ndarray, str | None]:
    """(which cut-offs can be tuned on these rows: one per column of cut_targets, the note on those that cannot or
    None). Multi-label: a label with fewer than MIN_CLASS_ROWS rows on a side keeps 0.5 and the others are tuned;
    `names` (the labels' names, optional) names them in the note."""
    n, sides = len(labels), problem.cut_targets(labels, positive)
    counts = np.minimum(sides.sum(0), (~sides).sum(0))           # the rarer side of each cut-off
    enough = counts >= MIN_CLASS_ROWS if n >= MIN_FIT_ROWS else np.zeros(len(counts), dtype=bool)
    if enough.all():
        return enough, None
    if not enough.any():
        return enough, (f"thresholds not applied: {n} {rows} with {int(counts.min())} on the rarer side are too "
                        f"few to tune a cut-off on (at least {MIN_FIT_ROWS} rows and {MIN_CLASS_ROWS} on each "
                        "side); the decision stays argmax / 0.5")
    short = np.flatnonzero(~enough)
    return enough, (f"thresholds not tuned for {len(short)} of {len(enough)} labels ({_named(short, names)}): "
                    f"fewer than {MIN_CLASS_ROWS} of the {n} {rows} on a side; they stay at 0.5, the other labels "
                    "are tuned")


def _named(columns, names=None) -> str:
    """'a, b': the names of these label columns (their numbers without `names`)."""
    return ", ".join(str(names[k]) if names is not None else str(k) for k in columns)


def _folds(labels: np.ndarray, problem: Objective, seed: int) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Two (fit rows, measured rows) pairs, stratified by class for single-label; None when too few rows."""
    from sklearn.model_selection import KFold, StratifiedKFold

    n = len(labels)
    if n < MIN_CROSS_FIT:
        return None
    y = problem.classes_of(labels)
    if y is None:
        return list(KFold(2, shuffle=True, random_state=seed).split(np.zeros(n)))
    if np.bincount(y)[np.unique(y)].min() < 2:
        return None
    return list(StratifiedKFold(2, shuffle=True, random_state=seed).split(np.zeros(n), y))


def _why_in_sample(labels: np.ndarray, problem: Objective, names=None) -> str:
    """Why _folds made no halves: too few rows, or a class with one row (no two halves can each hold it)."""
    if len(labels) < MIN_CROSS_FIT:
        return "too few to hold any out"
    y = problem.classes_of(labels)
    lone = np.flatnonzero(np.bincount(y) == 1) if y is not None else []
    return (f"the class {_named(lone[:1], names)} has a single row, so no two halves can each hold it" if len(lone)
            else "none held out")


def _fit(logits, labels, problem, options, seed: int = 0) -> DecisionRule:
    """The rule fitted on these rows (the parts that cannot be trusted left at their defaults, with a note); `seed`
    draws the thresholds' bootstrap resamples."""
    rows = options.get("rows", VALIDATION_ROWS)
    temperature, note = trusted_temperature(logits, labels, problem, rows) if options["calibrate"] == "temperature" \
        else (1.0, None)
    rule = DecisionRule(kind=problem.kind, temperature=round(temperature, 6),
                        abstain_below=options["abstain_below"], abstain_label=options["abstain_label"],
                        positive=options.get("positive", 1))
    rule.notes = [note] if note else []
    if options["decision"] == "threshold":
        enough, refused = _thresholds_trusted(labels, problem, rule.positive, rows, options.get("names"))
        rule.notes += [refused] if refused else []
        saved = options.get("saved")               # a cross-fit's half: (the rule of all the rows, its tuned columns)
        borrow = saved[1] & ~enough if saved else np.zeros(len(enough), dtype=bool)
        if enough.any() or borrow.any():
            confidence = options.get("confidence", 0.0)
            misses = {"unreachable": [], "unassured": []}
            rule.thresholds = [0.5] * len(enough)
            if enough.any():
                rule.thresholds, misses = fit_thresholds(rule.probabilities(logits), labels, problem,
                                                         options["objective"], rule.positive, seed, enough, confidence)
                rule.notes += _threshold_notes(misses, options, problem, rows)
            for k in np.flatnonzero(borrow):
                rule.thresholds[k] = _rescaled_cut(saved[0], k, rule.temperature)
            rule.objective = options["objective"]
            sure = not borrow.any() or saved[0].confidence is not None
            if _assuring(rule.objective, confidence) and (enough | borrow).all() and sure and not any(misses.values()):
                rule.confidence = confidence           # every cut-off tuned and assured: the rule says so
    return rule


def _rescaled_cut(saved: DecisionRule, k: int, temperature: float) -> float:
    """The saved rule's k-th cut-off on probabilities at `temperature`: the one deciding every row as it does
    (p >= t at T <=> logit >= T * logit(t))."""
    return float(1 / (1 + np.exp(-saved.temperature / temperature * logit(saved.thresholds[k]))))


def _assuring(objective: str, confidence: float) -> bool:
    """Whether this objective's cut-offs are chosen with a confidence bound (precision@R / recall@P, confidence > 0)."""
    return floor_of(objective) is not None and confidence > 0


def _threshold_notes(misses: dict, options: dict, problem: Objective, rows: str) -> list[str]:
    """What fit_thresholds could not do, in words: an objective not reached, a constraint not assured."""
    objective, notes = options["objective"], []

    def which(columns):
        return f" for labels {_named(columns, options.get('names'))}" if problem.multi_label else ""

    if misses["unreachable"]:
        notes.append(f"--optimize-threshold-for: {objective} cannot be reached on the {rows}"
                     f"{which(misses['unreachable'])}; the closest cut-off is used")
    if misses["unassured"]:
        constraint, target = floor_of(objective)
        notes.append(f"--optimize-threshold-for: {objective}: the {rows} cannot assure {constraint} >= {target:g} "
                     f"on new rows with {options['confidence']:.0%} confidence (--threshold-confidence)"
                     f"{which(misses['unassured'])}; the best cut-off meeting it on them is used, and new rows may "
                     f"fall short (more rows, or a model further above {target:g}, would assure it)")
    return notes


def _cross_fit(logits, labels, problem, options, folds, rule, seed: int) -> tuple[np.ndarray, np.ndarray, list]:
    """(probabilities, decisions) of every row by a rule fitted on the other fold (in-sample: `rule`'s), and the
    halves' rules. A part `rule` (fitted on all rows) did not apply is not fitted on the halves either: a
    temperature or thresholds refused there are measured as refused (the figures describe the saved rule)."""
    if rule.temperature == 1.0:
        options = {**options, "calibrate": "none"}
    if not rule.thresholds:
        options = {**options, "decision": "argmax"}
    else:       # a half too small to tune a cut-off the rule has keeps the rule's (_borrowed_cuts says which)
        rows = options.get("rows", VALIDATION_ROWS)
        options = {**options, "saved": (rule, _thresholds_trusted(labels, problem, rule.positive, rows)[0])}
    probs = np.zeros_like(logits)
    tuned = np.zeros(DecisionRule(kind=problem.kind).predictions(logits).shape, dtype=np.int64)
    parts = []
    for fit_rows, measured in folds or [(np.arange(len(labels)), np.arange(len(labels)))]:
        part = _fit(logits[fit_rows], labels[fit_rows], problem, options, seed) if folds else rule
        probs[measured] = part.probabilities(logits[measured])
        tuned[measured] = part.predictions(logits[measured])
        parts.append(part)
    return probs, tuned, parts


def _borrowed_cuts(labels, problem: Objective, rule: DecisionRule, folds, rows: str, names=None) -> str | None:
    """What the cross-fitted threshold figures (at_tuned) measure where a half of the rows has too few on a side to
    tune a cut-off the rule (fitted on all of them) has: that half's rows are decided by the rule's own cut-off,
    fitted on them too (in-sample), not by argmax, which would measure no cut-off at all."""
    if not rule.thresholds or not folds:
        return None
    tuned = _thresholds_trusted(labels, problem, rule.positive, rows)[0]
    short = sorted({int(k) for fit_rows, _ in folds
                    for k in np.flatnonzero(tuned & ~_thresholds_trusted(labels[fit_rows], problem, rule.positive,
                                                                         rows)[0])})
    if not short:
        return None
    which = f" (labels {_named(short, names)})" if problem.multi_label else ""
    return (f"the cross-fitted threshold figures (at_tuned) are partly in-sample (optimistic): where a half of the "
            f"{rows} has fewer than {MIN_CLASS_ROWS} on a side to tune a cut-off on{which}, its rows are decided by "
            f"the saved cut-off, fitted on all the {len(labels)} {rows}, them included (argmax there would measure "
            "no cut-off at all)")


def _halves_unassured(rule, parts, rows: str) -> str | None:
    """What the cross-fitted threshold figures measure when the saved cut-offs are assured and a half's could not
    be (half the rows give a wider bound): its rows' best cut-off, less cautious than the saved one."""
    if rule.confidence is None or all(part.confidence is not None for part in parts):
        return None
    return (f"the cross-fitted threshold figures (at_tuned) are of cut-offs the halves of the {rows} could not "
            f"assure with {rule.confidence:.0%} confidence, each half's best meeting the floor on its rows: they are "
            "less cautious than the saved, assured cut-off, whose lower bounds on all the rows are under 'assured'")


def _scored(probs, labels, problem) -> dict:
    """NLL and ECE of these probabilities (results.json rounds them to 4 decimals)."""
    return {"nll": nll(probs, labels, problem), "ece": ece(probs, labels, problem)}


def _calibration_refused(rule, before: dict, after: dict, folds, rows: str) -> str | None:
    """Why the temperature fitted on all rows is not applied: on rows it was not fitted on (2-fold cross-fit: each
    half's fitted temperature applied to the other half; `after`, against the raw scores' `before`) it made both the
    loss (NLL) and the calibration error (ECE) worse, so these rows do not pin it down. None when either improved
    (one of them alone moves by noise: on 203 MRPC rows the cross-fitted NLL rose by 0.001 while ECE fell by 0.014,
    and on held-out rows both fell), when nothing was fitted (T = 1) or when there are too few rows to hold any
    out."""
    if rule.temperature == 1.0 or not folds or after["nll"] <= before["nll"] or after["ece"] <= before["ece"]:
        return None
    return (f"calibration not applied: the temperature fitted on the {rows} ({rule.temperature:.3g}) made "
            f"the probabilities worse on rows it was not fitted on (NLL {before['nll']:.4f} → {after['nll']:.4f}, ECE "
            f"{before['ece']:.4f} → {after['ece']:.4f}, each half scored by a temperature fitted on the other); the "
            "probabilities stay the raw scores (T = 1)")


def fit_decision(logits: np.ndarray, labels: np.ndarray, problem: str | Objective, options: dict, seed: int = 0
                 ) -> tuple[DecisionRule, dict]:
    """(the rule fitted on all rows, results.json's "decision" section measured out of fold). `problem`: the
    Objective or its problem type's name; `options`: calibrate (none|temperature), decision (argmax|threshold),
    objective, abstain_below, abstain_label; `rows` (optional): what the rows are (VALIDATION_ROWS), as the notes
    and the report name them; `names` (optional): the labels' names, for the notes."""
    logits, problem = np.asarray(logits, dtype=np.float64), objective_for(problem)
    rule = _fit(logits, labels, problem, options, seed)
    folds = _folds(labels, problem, seed)
    raw = DecisionRule(kind=problem.kind).probabilities(logits)
    default = DecisionRule(kind=problem.kind).predictions(logits)
    probs, tuned, parts = _cross_fit(logits, labels, problem, options, folds, rule, seed)
    before, after = _scored(raw, labels, problem), _scored(probs, labels, problem)
    asked = options["calibrate"]
    rows = options.get("rows", VALIDATION_ROWS)
    refused = _calibration_refused(rule, before, after, folds, rows)
    if refused:                 # the rule without the temperature (thresholds refitted on the raw probabilities)
        not_applied = {"temperature": rule.temperature, "ece_after": round(after["ece"], 4),
                       "nll_after": round(after["nll"], 4)}
        options = {**options, "calibrate": "none"}
        rule = _fit(logits, labels, problem, options, seed)
        rule.notes.insert(0, refused)
        probs, tuned, parts = _cross_fit(logits, labels, problem, options, folds, rule, seed)
        after = _scored(probs, labels, problem)
    n = len(labels)
    if rule.abstain_below is not None and rule.abstains(logits).all():    # predict would answer no row like these
        rule.notes.append(f"--abstain-below {rule.abstain_below:g}: the rule abstains on every one of the {n} {rows} "
                          f"(no prediction's calibrated probability reaches it), so tuneloop predict would "
                          f"answer {rule.abstain_label!r} to rows like them; the coverage table of report.html "
                          "shows the levels that answer some")
    how = (f"2-fold cross-fit on the {n} {rows} (each half scored by a rule fitted on the other)" if folds
           else f"in-sample on the {n} {rows} ({_why_in_sample(labels, problem, options.get('names'))}: optimistic)")
    rule.fitted_on = f"all {n} {rows}"
    report = {"rule": rule.describe(), "fitted_on": rule.fitted_on, "measured": how,
              "calibration": {"method": asked, "temperature": rule.temperature,
                              "ece_before": round(before["ece"], 4), "ece_after": round(after["ece"], 4),
                              "nll_before": round(before["nll"], 4), "nll_after": round(after["nll"], 4)},
              "reliability": {"before": reliability(raw, labels, problem),
                              "after": reliability(probs, labels, problem)}}
    if refused:
        report["calibration"]["not_applied"] = not_applied
    if rule.thresholds:
        report["thresholds"] = {"objective": rule.objective, "values": rule.thresholds,
                                "positive": rule.positive,
                                "at_default": _rounded(problem.decision_metrics(default, labels, rule.positive)),
                                "at_tuned": _rounded(problem.decision_metrics(tuned, labels, rule.positive))}
        confidence = options.get("confidence", 0.0)
        if _assuring(rule.objective, confidence):     # the constraint's lower bound at each cut-off, on all the rows
            columns = zip(problem.cut_scores(rule.probabilities(logits), rule.positive).T,
                          problem.cut_targets(labels, rule.positive).T, rule.thresholds, strict=True)
            floor, target = floor_of(rule.objective)
            report["thresholds"]["assured"] = {"floor": floor, "target": target, "confidence": confidence,
                                               "all": rule.confidence is not None,
                                               "lower_bounds": [round(constraint_bound(s, y, rule.objective, cut,
                                                                                       confidence), 4)
                                                                for s, y, cut in columns]}
    curve = coverage_curve(probs, labels, problem, tuned)
    report["abstain"] = {"level": rule.abstain_below, "label": rule.abstain_label, "curve": curve}
    if rule.abstain_below is not None:
        _, coverage, accuracy = coverage_curve(probs, labels, problem, tuned, (rule.abstain_below,))[0]
        report["abstain"].update(coverage=coverage, accuracy=accuracy)
    halves = [note for note in (_halves_unassured(rule, parts, rows) if folds else None,
                                _borrowed_cuts(labels, problem, rule, folds, rows, options.get("names"))) if note]
    if rule.notes or halves:
        report["notes"] = rule.notes + halves
    return rule, report


def _rounded(d: dict) -> dict:
    return {k: round(float(v), 4) for k, v in d.items()}


def decided_metrics(rule: DecisionRule, names, logits: np.ndarray, labels: np.ndarray) -> dict:
    """An evaluation's metrics under the rule (`tuneloop evaluate` on a model that has one): the task's metrics of
    its decisions, the loss (NLL) and ECE of its probabilities, and with an abstain level the coverage and the
    accuracy (multi-label: exact match) on the rows it answers. A precision@R / recall@P rule adds the precision and
    recall of its decisions (of the positive class; multi-label: micro), so that its floor can be checked on these
    rows."""
    from ..evaluation.metrics import compute

    problem = rule.problem
    probs = rule.probabilities(logits)
    # F1 of the rule's positive class (--positive-label), as the precision and recall beside it
    out = compute(names, rule.decision_logits(logits), labels, problem, rule.positive)
    out.update(loss=nll(probs, labels, problem), ece=ece(probs, labels, problem), num_samples=len(labels))
    if rule.thresholds and floor_of(rule.objective):
        decided = problem.decision_metrics(rule.predictions(logits), labels, rule.positive)
        out.update({k: float(decided[k + suffix]) for k in ("precision", "recall")
                    for suffix in ("", "_micro") if k + suffix in decided})
    if rule.abstain_below is not None:
        level, coverage, accuracy = coverage_curve(probs, labels, problem, rule.predictions(logits),
                                                   (rule.abstain_below,))[0]
        out.update(coverage=coverage, accuracy_answered=accuracy)
    return out


def check_decision_options(config, labels) -> None:
    """Refuse, before training, decision options this data cannot use."""
    from ..exceptions import ConfigError

    if config.positive_label is not None and config.positive_label not in labels.names:
        raise ConfigError(f"--positive-label {config.positive_label!r}: not a label of this data "
                          f"({', '.join(labels.names)})")
    if config.abstain_below is not None and config.abstain_label in labels.names:   # abstaining would read as it
        raise ConfigError(f"--abstain-label {config.abstain_label!r}: is a label of this data; give a name no class "
                          "has (the default: abstain)")
    objective = objective_for(labels)
    if config.decision == "threshold" and objective.classes and not objective.multi_label \
            and labels.num_labels != 2:
        raise ConfigError(f"--decision threshold: needs two classes (a cut-off on the second) or multi-label data; "
                          f"this data has {labels.num_labels} classes: use --decision argmax")
    if not objective.classes and (config.decision == "threshold" or config.abstain_below is not None):
        raise ConfigError("--decision threshold / --abstain-below: regression has no classes to decide between")
