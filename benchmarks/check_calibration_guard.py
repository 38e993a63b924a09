"""Does the decision rule's calibration guard keep a temperature that helps and refuse one that hurts, on rows no
rule was fitted on? (decision/fit.py `_calibration_refused`: a temperature fitted on the validation rows is not
applied when, cross-fitted on those rows, it made both the NLL and the ECE worse.)

For each model (trained here on a set of bench_small_data.py, `SET:METHOD:PER_CLASS`, seed --seed), its raw logits
are computed once on up to --held-rows rows of the set that it did not train on. Then, --draws times for each
validation size n: n of those rows are drawn as the validation set, the rule is fitted on them twice, as it was
before the guard (always applied) and as it ships (guarded), and both rules' probabilities are scored on every
other row (NLL and ECE), beside the raw scores (T = 1). The summary says how often the guard fired and, when it
did, whether the held-out rows agreed (T = 1 scored a lower held-out NLL than the fitted temperature).

    python benchmarks/check_calibration_guard.py --data-packages /tmp/smalldata \\
        --models sentiment:setfit:16 questions:setfit:8 fortunes:setfit:8 mrpc:setfit:32 questions:finetune:64
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_small_data as bench  # noqa: E402
from _fewshot_sets import DATA_PACKAGES, data_builders  # noqa: E402
from _mrpc import DEFAULT_DATA_DIR, default_model  # noqa: E402
from bench_train import default_out, finish, machine_info, write_atomic  # noqa: E402


def add_model_options(p) -> None:
    """--held-rows, --seed, --data-dir, --data-packages: what model_logits' models are trained and scored from."""
    p.add_argument("--held-rows", type=int, default=3000, help="rows a model is scored on, at most")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="GLUE MRPC folder")
    p.add_argument("--data-packages", default=DATA_PACKAGES, help="as bench_small_data.py's")


def checked_models(p, args, also: tuple = ()) -> tuple[dict, str]:
    """(the data builders, the embedded model's path); p.error for a --models entry that is neither
    SET:METHOD:PER_CLASS with a known SET nor one of `also`."""
    builders, model = data_builders(args.data_dir, args.data_packages), str(default_model())
    bad = [s for s in args.models if s not in also and (len(s.split(":")) != 3 or s.split(":")[0] not in builders)]
    if bad:
        p.error(f"--models {' '.join(bad)}: {''.join(a + ' or ' for a in also)}SET:METHOD:PER_CLASS with SET one of "
                f"{', '.join(builders)}")
    return builders, model


def model_logits(spec: str, builders: dict, model: str, seed: int, held_rows: int) -> dict:
    """Train `SET:METHOD:PER_CLASS` and return its raw logits and labels on rows it did not train on."""
    name, method, per_class = spec.split(":")
    data = builders[name]()
    train = bench.sample(data["pool"], int(per_class), seed)
    seen = {x for x, _ in train}
    rows = [r for r in data["pool"] + data["eval"] if r[0] not in seen]
    rng = np.random.default_rng(seed)
    rows = [rows[i] for i in sorted(rng.choice(len(rows), min(held_rows, len(rows)), replace=False))]
    with tempfile.TemporaryDirectory(prefix="calibration-guard-") as work:
        t0 = time.perf_counter()
        result = bench.tuneloop_run(train, data, seed, model, os.path.join(work, "run"), method=method)
        train_s = time.perf_counter() - t0
        clf = result.classifier
        items, _ = clf.items([x for x, _ in rows])
        logits = clf.logits(items)
    return {"logits": logits, "labels": np.array([y for _, y in rows]), "train_rows": len(train),
            "train_s": round(train_s, 1)}


def draws(logits: np.ndarray, labels: np.ndarray, size: int, count: int, seed: int) -> dict:
    """The rule before the guard and as shipped, fitted on `count` draws of `size` rows, scored on the rest."""
    from tuneloop.decision import fit as fitting
    from tuneloop.decision.rule import DecisionRule, ece, nll

    options = {"calibrate": "temperature", "decision": "argmax", "objective": "f1", "abstain_below": None,
               "abstain_label": "abstain"}
    kind, rng = "single_label_classification", np.random.default_rng([seed, size])
    held = {k: [] for k in ("raw", "before", "guarded")}
    fired, agreed, gains = 0, 0, []
    for d in range(count):
        chosen = np.zeros(len(labels), dtype=bool)
        chosen[rng.choice(len(labels), size, replace=False)] = True
        fit_rows, other = logits[chosen], logits[~chosen]
        guarded, report = fitting.fit_decision(fit_rows, labels[chosen], kind, options, seed=d)
        with mock.patch.object(fitting, "_calibration_refused", lambda *a: None):
            before, _ = fitting.fit_decision(fit_rows, labels[chosen], kind, options, seed=d)
        for key, rule in (("raw", DecisionRule(kind=kind)), ("before", before), ("guarded", guarded)):
            probs = rule.probabilities(other)
            held[key].append((nll(probs, labels[~chosen], kind), ece(probs, labels[~chosen], kind)))
        if "not_applied" in report["calibration"]:
            fired += 1
            gain = held["before"][-1][0] - held["guarded"][-1][0]      # > 0: T = 1 was better on held-out rows
            gains.append(gain)
            agreed += gain > 0
    mean = {k: {"nll": round(float(np.mean([v[0] for v in vs])), 4),
                "ece": round(float(np.mean([v[1] for v in vs])), 4)} for k, vs in held.items()}
    return {"validation_rows": size, "draws": count, "held_out_mean": mean, "guard_fired": fired,
            "held_out_agreed_when_fired": agreed,
            "held_out_nll_gain_when_fired": round(float(np.mean(gains)), 4) if gains else None}



def keep_row(out: str, result: dict, row: dict) -> None:
    """One model's row: printed, added to the results and the file rewritten (atomically) at once, so a run stopped
    later keeps what it measured (this check and check_threshold_bagging / check_threshold_confidence)."""
    print(row, flush=True)
    result["models"].append(row)
    write_atomic(out, result)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["sentiment:setfit:16", "questions:setfit:8"],
                   help="SET:METHOD:PER_CLASS (bench_small_data.py's sets; METHOD a tuneloop --method)")
    p.add_argument("--sizes", nargs="+", type=int, default=[100, 200, 400], help="validation rows a draw")
    p.add_argument("--draws", type=int, default=200)
    add_model_options(p)
    p.add_argument("--out", default=None, help="results JSON (default: benchmarks/results/<date>-<machine>-"
                                               "calibration-guard.json), written after each model")
    p.add_argument("--resume", default=None, metavar="JSON", help="an earlier run's results: its models are kept "
                                                                   "and not run again")
    args = p.parse_args(argv)
    builders, model = checked_models(p, args)
    machine, date = machine_info(), dt.date.today().isoformat()
    out = args.out or default_out(date, machine, "-calibration-guard")
    result = {"benchmark": "the calibration guard against always applying the fitted temperature, on held-out rows",
              "date": date, "machine": machine, "model": model, "seed": args.seed, "models": []}
    if args.resume:
        with open(args.resume) as f:
            earlier = json.load(f)
        result["models"], result["command_lines"] = earlier["models"], earlier.get("command_lines", [])
    result["command_lines"] = result.get("command_lines", []) + [" ".join(sys.argv)]
    started = time.perf_counter()
    for spec in args.models:
        if any(row["model"] == spec for row in result["models"]):
            continue
        made = model_logits(spec, builders, model, args.seed, args.held_rows)
        row = {"model": spec, "train_rows": made["train_rows"], "train_s": made["train_s"],
               "scored_rows": len(made["labels"]),
               "sizes": [draws(made["logits"], made["labels"], n, args.draws, args.seed) for n in args.sizes
                         if n < len(made["labels"])]}
        keep_row(out, result, row)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return finish(out, result)


if __name__ == "__main__":
    sys.exit(main())
