"""Does a precision@R / recall@P cut-off keep its constraint on rows it was not fitted on? As shipped since
2026-11-29 (`--threshold-confidence 0.9`, decision/rule.py `assured_threshold`: the best cut-off whose recall /
precision has a 90% Clopper-Pearson lower bound of at least R / P on the validation rows) against the best cut-off
of the validation rows (before; `--threshold-confidence 0`).

For each binary model (trained here: `SET:METHOD:PER_CLASS` on a set of bench_small_data.py, seed --seed), its raw
logits are computed once on rows it did not train on (at most --held-rows), and again with the positives thinned to
--prevalence of the rows (every negative kept). Then, --draws times for each validation size n, n of the rows are
drawn as the validation set, the rule is fitted as `tuneloop train` fits it (a temperature, then the cut-off;
decision/fit.py) at each --confidences level, and scored on every other row: in what share of the draws the
constraint held there, the mean of what the cut-off maximises (precision for precision@R, recall for recall@P),
and in how many draws the constraint could be assured (else the rows' best cut-off is kept, with a note).

    python benchmarks/check_threshold_confidence.py --data-packages /tmp/smalldata \\
        --models sentiment:setfit:16 tweets:setfit:16 mrpc:setfit:32 sentiment:finetune:64 tweets:probe:32 \\
        mrpc:finetune:64
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import default_out, finish, machine_info  # noqa: E402
from check_calibration_guard import add_model_options, checked_models, keep_row, model_logits  # noqa: E402
from check_threshold_bagging import thinned  # noqa: E402

SINGLE = "single_label_classification"


def cached_logits(folder: str | None, spec: str, make, seed: int, held_rows: int) -> dict:
    """model_logits' dict, from `folder` when a run with the same model, seed and rows saved it there."""
    path = os.path.join(folder, f"{spec.replace(':', '-')}-{seed}-{held_rows}.npz") if folder else None
    if path and os.path.exists(path):
        with np.load(path) as saved:
            return {"logits": saved["logits"], "labels": saved["labels"], "train_rows": int(saved["train_rows"]),
                    "train_s": float(saved["train_s"]), "cached": True}
    made = make()
    if path:
        os.makedirs(folder, exist_ok=True)
        np.savez(path, **{k: made[k] for k in ("logits", "labels", "train_rows", "train_s")})
    return made


def rates(predicted: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """(precision, recall) of these decisions; precision 0 when nothing is predicted positive."""
    tp = float((predicted & positive).sum())
    return tp / max(float(predicted.sum()), 1.0), tp / max(float(positive.sum()), 1.0)


def draws(logits: np.ndarray, labels: np.ndarray, objective: str, size: int, count: int, confidences: list[float],
          seed: int) -> dict:
    """The rule fitted at each confidence on `count` draws of `size` rows, scored on the rest."""
    from tuneloop.config.parsing import parse_objective
    from tuneloop.decision import fit as fitting
    from tuneloop.objective import objective_for

    name, target = parse_objective(objective)
    problem, rng = objective_for(SINGLE), np.random.default_rng([seed, size])
    out = {c: {"held": [], "goal": [], "assured": [], "tuned": 0} for c in confidences}
    for d in range(count):
        chosen = np.zeros(len(labels), dtype=bool)
        chosen[rng.choice(len(labels), size, replace=False)] = True
        positive = labels[~chosen] == 1
        for c in confidences:
            options = {"calibrate": "temperature", "decision": "threshold", "objective": objective,
                       "abstain_below": None, "abstain_label": "abstain", "confidence": c}
            rule = fitting._fit(logits[chosen], labels[chosen], problem, options, seed=d)
            if not rule.thresholds:
                continue                                   # too few rows on a side: argmax, nothing to measure
            precision, recall = rates(rule.predictions(logits[~chosen]) == 1, positive)
            constraint, goal = (recall, precision) if name == "precision" else (precision, recall)
            row = out[c]
            row["tuned"] += 1
            row["held"].append(constraint >= target)
            row["goal"].append(goal)
            row["assured"].append(c > 0 and not any("confidence" in n or "cannot be reached" in n
                                                    for n in rule.notes))
    return {"validation_rows": size, "draws": count, "by_confidence": {str(c): summary(r) for c, r in out.items()}}


def summary(r: dict) -> dict:
    """One confidence level's draws: how many were tuned and assured; the constraint's held share on the other
    rows (over every tuned draw, and over the assured ones) and the goal's mean."""
    held, assured = np.array(r["held"], dtype=bool), np.array(r["assured"], dtype=bool)

    def share(x):
        return round(float(np.mean(x)), 3) if len(x) else None

    return {"thresholds_tuned": r["tuned"], "assured": int(assured.sum()), "constraint_held_share": share(held),
            "held_share_when_assured": share(held[assured]) if assured.any() else None,
            "goal_mean": round(float(np.mean(r["goal"])), 4) if r["goal"] else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["sentiment:setfit:16", "tweets:setfit:16"],
                   help="SET:METHOD:PER_CLASS (bench_small_data.py's binary sets; METHOD a tuneloop --method)")
    p.add_argument("--objectives", nargs="+", default=["precision@0.8", "recall@0.8", "recall@0.9"])
    p.add_argument("--confidences", nargs="+", type=float, default=[0.0, 0.9])
    p.add_argument("--sizes", nargs="+", type=int, default=[100, 200, 400], help="validation rows a draw")
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--prevalence", type=float, default=0.1, help="also scored with positives thinned to this share")
    add_model_options(p)
    p.add_argument("--cache", default=None, help="a folder keeping each model's logits (SPEC-seed-rows.npz): a run "
                                                 "with the same models, seed and --held-rows reuses them")
    p.add_argument("--out", default=None, help="results JSON (default: benchmarks/results/<date>-<machine>-"
                                               "threshold-confidence.json), written after each model")
    args = p.parse_args(argv)
    builders, model = checked_models(p, args)
    machine, date = machine_info(), dt.date.today().isoformat()
    out = args.out or default_out(date, machine, "-threshold-confidence")
    result = {"benchmark": "precision@R / recall@P cut-offs on rows they were not fitted on: assured with a lower "
                           "confidence bound (as shipped) against the best cut-off of the validation rows",
              "date": date, "machine": machine, "model": model, "seed": args.seed,
              "command_line": " ".join(sys.argv), "models": []}
    started = time.perf_counter()
    for spec in args.models:
        made = cached_logits(args.cache, spec, lambda s=spec: model_logits(s, builders, model, args.seed,
                                                                         args.held_rows), args.seed, args.held_rows)
        for prevalence in (None, args.prevalence):
            logits, labels = thinned(made["logits"], made["labels"], prevalence, args.seed)
            row = {"model": spec, "train_rows": made["train_rows"], "train_s": made["train_s"],
                   "logits_from_cache": made.get("cached", False),
                   "scored_rows": len(labels), "positive_share": round(float(labels.mean()), 3),
                   "thinned_to": prevalence,
                   "objectives": {o: [draws(logits, labels, o, n, args.draws, args.confidences, args.seed)
                                      for n in args.sizes if n < len(labels)] for o in args.objectives}}
            keep_row(out, result, row)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return finish(out, result)


if __name__ == "__main__":
    sys.exit(main())
