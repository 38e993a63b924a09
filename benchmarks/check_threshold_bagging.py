"""Does a bagged cut-off (decision/rule.py `bagged_threshold`: the median of the best cut-offs of 50 bootstrap
resamples of the validation rows) score a higher F1 / macro-F1 on new rows than the one best cut-off of those rows
(before 2026-11-29)? And how does either compare with no tuned cut-off at all (argmax)?

For each model (trained here: `SET:METHOD:PER_CLASS` on a set of bench_small_data.py, seed --seed; or `debtags`: a
multi-label model fine-tuned on 3,000 Debian package descriptions, benchmarks/_debtags.py), its raw logits are
computed once on rows it did not train on (at most --held-rows). Binary sets are also scored with their held rows'
positives thinned to --prevalence of the rows (the negatives all kept): a model trained on balanced rows meeting a
rarer positive class, where a tuned cut-off matters most. Then, --draws times for each validation size n, n of the
held rows are drawn as the validation set, `fit_decision` fits the rule as it ships (bagged) and as it was (the
best cut, `bagged_threshold` replaced by `best_threshold`), and both, with argmax, are scored on every other row.
"guarded" is a guard tried and not shipped: argmax wherever the rule's own 2-fold cross-fit scored the tuned
cut-off below argmax (results.json's at_tuned < at_default), else the bagged cut-off. "all_or_none" is the rule
before multi-label cut-offs were tuned per label (2026-11-29): argmax wherever any label had fewer than 5 validation
rows on a side, else the bagged cut-offs.

    python benchmarks/check_threshold_bagging.py --data-packages /tmp/smalldata \\
        --models sentiment:setfit:16 tweets:setfit:16 mrpc:setfit:32 sentiment:finetune:64 tweets:probe:32 \\
        mrpc:finetune:64 debtags
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _debtags import write_debtags  # noqa: E402
from bench_train import default_out, finish, machine_info  # noqa: E402
from check_calibration_guard import add_model_options, checked_models, keep_row, model_logits  # noqa: E402

OBJECTIVES = ("f1", "macro-f1")
SINGLE, MULTI = "single_label_classification", "multi_label_classification"


def debtags_logits(model: str, seed: int, held_rows: int) -> dict:
    """A multi-label model fine-tuned (--recipe fast, 128 tokens) on write_debtags' 3,000 training rows; its raw
    logits on its validation and test rows (2,000, nobody fitted anything on them here)."""
    import csv

    import tuneloop

    with tempfile.TemporaryDirectory(prefix="threshold-bagging-") as work:
        built = write_debtags(work)
        t0 = time.perf_counter()
        result = tuneloop.train(train=os.path.join(work, "train.csv"), validation=os.path.join(work, "validation.csv"),
                                model=model, seed=seed, output_dir=os.path.join(work, "run"), overwrite=True,
                                quiet=True, report=False, baseline="none", calibrate="none", recipe="fast",
                                label_separator="|", max_length=128)
        train_s = time.perf_counter() - t0
        clf, rows = result.classifier, []
        for name in ("validation", "test"):
            with open(os.path.join(work, f"{name}.csv"), encoding="utf-8", newline="") as f:
                rows += [(r["text"], r["labels"].split("|")) for r in csv.DictReader(f)]
        rows = rows[:held_rows]
        items, _ = clf.items([text for text, _ in rows])
        logits = clf.logits(items)
    names = list(clf.labels)
    labels = np.array([[name in tags for name in names] for _, tags in rows], dtype=np.float32)
    return {"logits": logits, "labels": labels, "train_rows": built["rows"]["train"], "train_s": round(train_s, 1),
            "kind": MULTI}


def thinned(logits: np.ndarray, labels: np.ndarray, prevalence: float | None, seed: int):
    """Every negative row and as many positive rows as make `prevalence` of the rows (None: all rows)."""
    if prevalence is None:
        return logits, labels
    neg, pos = np.flatnonzero(labels == 0), np.flatnonzero(labels == 1)
    keep = round(prevalence * len(neg) / (1 - prevalence))
    rows = np.sort(np.r_[neg, np.random.default_rng(seed).choice(pos, min(keep, len(pos)), replace=False)])
    return logits[rows], labels[rows]


def objective_value(predictions: np.ndarray, labels: np.ndarray, objective: str, kind: str) -> float:
    """F1 of the positive class (multi-label: micro over the labels) or macro-F1 (multi-label: over the labels)."""
    from sklearn.metrics import f1_score

    y = labels.astype(int)
    if kind == MULTI:
        return float(f1_score(y, predictions, average="micro" if objective == "f1" else "macro", zero_division=0.0))
    return float(f1_score(y, predictions, average="binary" if objective == "f1" else "macro", zero_division=0.0))


def draws(logits: np.ndarray, labels: np.ndarray, kind: str, objective: str, size: int, count: int,
          seed: int) -> dict:
    """The rule as shipped (bagged cut-offs) and as before (the best cut), fitted on `count` draws of `size` rows,
    scored with argmax on the rest; means over the draws, and in how many draws the bagged cut-off scored higher /
    lower than the best cut."""
    from tuneloop.decision import fit as fitting, rule as rules
    from tuneloop.decision.rule import DecisionRule
    from tuneloop.objective import objective_for

    options = {"calibrate": "temperature", "decision": "threshold", "objective": objective, "abstain_below": None,
               "abstain_label": "abstain"}
    rng, held = np.random.default_rng([seed, size]), {k: [] for k in ("argmax", "best_cut", "bagged", "guarded",
                                                                       "all_or_none")}
    tuned = refused = 0
    metric = {"f1": "f1_micro" if kind == MULTI else "f1", "macro-f1": "f1_macro"}[objective]
    for d in range(count):
        chosen = np.zeros(len(labels), dtype=bool)
        chosen[rng.choice(len(labels), size, replace=False)] = True
        bagged, report = fitting.fit_decision(logits[chosen], labels[chosen], kind, options, seed=d)
        with mock.patch.object(rules, "bagged_threshold", lambda s, p, o, seed=0: rules.best_threshold(s, p, o)):
            best, _ = fitting.fit_decision(logits[chosen], labels[chosen], kind, options, seed=d)
        tuned += bool(bagged.thresholds)
        cross = report.get("thresholds")       # a guard tried, not shipped: argmax where the cross-fit says worse
        worse = bool(cross) and cross["at_tuned"][metric] < cross["at_default"][metric]
        refused += worse
        other, y = logits[~chosen], labels[~chosen]
        short = not fitting._thresholds_trusted(labels[chosen], objective_for(kind), 1, "rows")[0].all()
        for key, rule in (("argmax", DecisionRule(kind=kind)), ("best_cut", best), ("bagged", bagged),
                          ("guarded", DecisionRule(kind=kind) if worse else bagged),
                          ("all_or_none", DecisionRule(kind=kind) if short else bagged)):
            held[key].append(objective_value(rule.predictions(other), y, objective, kind))
    gain = np.array(held["bagged"]) - np.array(held["best_cut"])
    return {"validation_rows": size, "draws": count, "thresholds_tuned": tuned,
            "held_out_mean": {k: round(float(np.mean(v)), 4) for k, v in held.items()},
            "bagged_minus_best_cut": round(float(gain.mean()), 4),
            "bagged_higher": int((gain > 0).sum()), "bagged_lower": int((gain < 0).sum()),
            "guard_refused": refused}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["sentiment:setfit:16", "tweets:setfit:16"],
                   help="SET:METHOD:PER_CLASS (bench_small_data.py's binary sets; METHOD a tuneloop --method) or "
                        "debtags")
    p.add_argument("--sizes", nargs="+", type=int, default=[40, 100, 200], help="validation rows a draw")
    p.add_argument("--draws", type=int, default=150)
    p.add_argument("--prevalence", type=float, default=0.1, help="binary sets: also scored with positives thinned "
                                                                  "to this share of the rows")
    add_model_options(p)
    p.add_argument("--out", default=None, help="results JSON (default: benchmarks/results/<date>-<machine>-"
                                               "threshold-bagging.json), written after each model")
    args = p.parse_args(argv)
    builders, model = checked_models(p, args, also=("debtags",))
    machine, date = machine_info(), dt.date.today().isoformat()
    out = args.out or default_out(date, machine, "-threshold-bagging")
    result = {"benchmark": "tuned cut-offs on rows they were not fitted on: bagged (as shipped) against the one "
                           "best cut of the validation rows, and argmax", "date": date, "machine": machine,
              "model": model, "seed": args.seed, "command_line": " ".join(sys.argv), "models": []}
    started = time.perf_counter()
    for spec in args.models:
        made = debtags_logits(model, args.seed, args.held_rows) if spec == "debtags" else \
            {**model_logits(spec, builders, model, args.seed, args.held_rows), "kind": SINGLE}
        kind = made["kind"]
        for prevalence in (None,) if kind == MULTI else (None, args.prevalence):
            logits, labels = thinned(made["logits"], made["labels"], prevalence, args.seed)
            row = {"model": spec, "train_rows": made["train_rows"], "train_s": made["train_s"],
                   "scored_rows": len(labels), "positive_share": round(float(labels.mean()), 3),
                   "thinned_to": prevalence,
                   "objectives": {o: [draws(logits, labels, kind, o, n, args.draws, args.seed) for n in args.sizes
                                      if n < len(labels)] for o in OBJECTIVES}}
            keep_row(out, result, row)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return finish(out, result)


if __name__ == "__main__":
    sys.exit(main())
