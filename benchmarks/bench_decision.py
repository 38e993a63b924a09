"""Decisions you can act on, measured on rows the rule was not fitted on: calibration (ECE, NLL), tuned thresholds
against the default cut-off, and coverage/accuracy at two abstain levels, for GLUE MRPC (binary) and a multi-label
set built from Debian's package descriptions and debtags (benchmarks/_debtags.py).

Each set has three parts: training rows, validation rows (the run fits its decision rule there, and reports it
cross-fitted) and test rows nobody fitted anything on (MRPC: dev.tsv split in two halves, stratified, seed 0).
The test rows are scored with `tuneloop predict --raw` and the saved rule applied here from model/tuneloop.json.

    python benchmarks/bench_decision.py --tuneloop-args "--recipe fast"
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import random
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
from _debtags import write_debtags  # noqa: E402
from bench_train import DEFAULT_DATA_DIR, default_out, machine_info, run_child, write_atomic  # noqa: E402

from tuneloop.decision.rule import MULTI, SINGLE, DecisionRule, coverage_curve, ece, nll  # noqa: E402

LEVELS = (0.8, 0.9)


def write_mrpc(data_dir: str, out_dir: str) -> dict:
    def rows(name):
        with open(os.path.join(data_dir, name), encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            next(reader)
            return [[r[3], r[4], "equivalent" if r[0] == "1" else "not_equivalent"] for r in reader]

    dev = rows("dev.tsv")
    rng = random.Random(0)
    halves = [[], []]
    for label in ("equivalent", "not_equivalent"):
        group = [r for r in dev if r[2] == label]
        rng.shuffle(group)
        halves[0] += group[: len(group) // 2]
        halves[1] += group[len(group) // 2:]
    for name, data in (("train", rows("train.tsv")), ("validation", halves[0]), ("test", halves[1])):
        with open(os.path.join(out_dir, f"{name}.csv"), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["sentence1", "sentence2", "label"])
            writer.writerows(data)
    return {"rows": {"train": 3668, "validation": len(halves[0]), "test": len(halves[1])},
            "source": "GLUE MRPC: train.tsv; dev.tsv split into validation/test halves (stratified, seed 0)"}


def test_scores(model_dir: str, test_csv: str, work: str, kind: str) -> dict:
    """Raw and decided figures on the test rows, from `tuneloop predict --raw` and the saved rule."""
    out = os.path.join(work, "test_raw.csv")
    child = run_child([sys.executable, "-m", "tuneloop", "predict", "--model", model_dir, "--input", test_csv,
                       "--output", out, "--raw", "--quiet", "--overwrite"], os.path.join(work, "predict.log"), None)
    assert child["returncode"] == 0, f"predict failed: see {work}"
    meta = json.load(open(os.path.join(model_dir, "tuneloop.json")))
    names = meta["labels"]["names"]
    with open(out, newline="", encoding="utf-8") as f:
        probs = np.array([[float(r[f"prob_{n}"]) for n in names] for r in csv.DictReader(f)])
    with open(test_csv, newline="", encoding="utf-8") as f:
        gold = [r["label" if kind == SINGLE else "labels"] for r in csv.DictReader(f)]
    p = np.clip(probs, 1e-7, 1 - 1e-7)
    logits = np.log(p) - np.log1p(-p) if kind == MULTI else np.log(p)         # raw scores back as logits
    labels = (np.array([[n in g.split("|") for n in names] for g in gold], dtype=float) if kind == MULTI
              else np.array([names.index(g) for g in gold]))
    rule = DecisionRule.from_dict(meta["decision"])
    raw = DecisionRule(kind=kind)
    result = {"rule": rule.describe(), "rows": len(labels),
              "ece_raw": round(ece(raw.probabilities(logits), labels, kind), 4),
              "ece_calibrated": round(ece(rule.probabilities(logits), labels, kind), 4),
              "nll_raw": round(nll(raw.probabilities(logits), labels, kind), 4),
              "nll_calibrated": round(nll(rule.probabilities(logits), labels, kind), 4)}
    from sklearn.metrics import f1_score

    for name, r in (("default_cutoff", raw), ("tuned_cutoff", rule)):
        pred = r.predictions(logits)
        if kind == MULTI:
            y = labels.astype(int)
            result[name] = {"f1_micro": round(f1_score(y, pred, average="micro"), 4),
                            "f1_macro": round(f1_score(y, pred, average="macro", zero_division=0), 4)}
        else:
            result[name] = {"f1": round(f1_score(labels, pred, pos_label=rule.positive), 4),
                            "accuracy": round(float(np.mean(pred == labels)), 4)}
    result["abstain"] = coverage_curve(rule.probabilities(logits), labels, kind, rule.predictions(logits),
                                       (0.0, *LEVELS))
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--sets", default="mrpc,debtags")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tuneloop-args", default="", help="extra options for every run")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-decision")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "sets": {}}
    for name in [s for s in args.sets.split(",") if s]:
        work = tempfile.mkdtemp(prefix=f"bench_decision_{name}_")
        data = write_mrpc(args.data_dir, work) if name == "mrpc" else write_debtags(work)
        extra = ["--label-separator", "|", "--max-length", "128"] if name == "debtags" else \
            ["--positive-label", "equivalent"]
        run_dir = os.path.join(work, "run")
        cmd = [sys.executable, "-m", "tuneloop", "train", "--train-file", os.path.join(work, "train.csv"),
               "--validation-file", os.path.join(work, "validation.csv"), "--seed", str(args.seed), "--output-dir",
               run_dir, "--quiet", "--decision", "threshold", "--optimize-threshold-for", "f1", "--abstain-below",
               str(LEVELS[-1]), *extra, *args.tuneloop_args.split()]
        child = run_child(cmd, os.path.join(work, "train.log"), None)
        if child["returncode"] != 0:
            print(f"{name}: training failed; see {work}", flush=True)
            return 1
        res = json.load(open(os.path.join(run_dir, "results.json")))
        kind = MULTI if name == "debtags" else SINGLE
        record = {"data": data, "train_wall_s": child["process_wall_s"], "eval": res["eval"],
                  "validation_cross_fitted": {k: v for k, v in res["decision"].items() if k != "reliability"},
                  "test": test_scores(os.path.join(run_dir, "model"), os.path.join(work, "test.csv"), work, kind)}
        result["sets"][name] = record
        print(f"{name}: {json.dumps(record['test'])}", flush=True)
        write_atomic(out, result)
        shutil.rmtree(work, ignore_errors=True)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
