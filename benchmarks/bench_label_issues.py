"""Finding wrong training labels on real data: GLUE MRPC's training pairs with a share of labels flipped on
purpose (seeded), one `tuneloop train` run, and how many of the flipped rows `label_issues.csv` puts on top.

Reports precision at k = the number of flipped rows (so also the recall at k) of the ranking by the mean
probability of the given label over the epochs, the area under the ROC curve of that score,
what cleanlab's confident learning flags
(how many, and which share of them were flipped), and the same ranking computed from the first epoch's
probabilities only (scored before the model learned each row) and from the last epoch's only. MRPC's own labels
are not perfect either: a flagged row that was not flipped is not necessarily a mistake of the method.

    python benchmarks/bench_label_issues.py --tuneloop-args "--recipe fast"
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import random
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import DEFAULT_DATA_DIR, default_out, finish, machine_info, run_child  # noqa: E402


def write_noisy(data_dir: str, out_dir: str, share: float, seed: int) -> dict:
    """train.csv with `share` of its labels flipped (ids listed in the return value), dev.csv as shipped."""
    def rows(name):
        with open(os.path.join(data_dir, name), encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            next(reader)
            return [[f"{name[:-4]}-{i}", r[3], r[4], "equivalent" if r[0] == "1" else "not_equivalent"]
                    for i, r in enumerate(reader)]

    train, dev = rows("train.tsv"), rows("dev.tsv")
    flipped = random.Random(seed).sample(range(len(train)), round(len(train) * share))
    for i in flipped:
        train[i][3] = "not_equivalent" if train[i][3] == "equivalent" else "equivalent"
    for name, data in (("train.csv", train), ("dev.csv", dev)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "sentence1", "sentence2", "label"])
            writer.writerows(data)
    return {"train_rows": len(train), "flipped": sorted(train[i][0] for i in flipped), "dev_rows": len(dev)}


def scores(ranked_ids: list[str], flipped: set[str]) -> dict:
    from sklearn.metrics import roc_auc_score

    k = len(flipped)
    hits = sum(i in flipped for i in ranked_ids[:k])
    is_flipped = [i in flipped for i in ranked_ids]
    return {"precision_at_k": round(hits / k, 4), "k": k,   # k = the number flipped: recall at k is the same
            "auroc": round(float(roc_auc_score(is_flipped, -np.arange(len(ranked_ids)))), 4)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--share", type=float, default=0.1, help="share of training labels flipped (default 0.1)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tuneloop-args", default="", help="extra options for the run")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench_label_issues_")
    data = write_noisy(args.data_dir, work, args.share, seed=0)
    flipped = set(data["flipped"])
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-label-issues")
    run_dir = os.path.join(work, "run")
    cmd = [sys.executable, "-m", "tuneloop", "train", "--train-file", os.path.join(work, "train.csv"),
           "--validation-file", os.path.join(work, "dev.csv"), "--seed", str(args.seed), "--output-dir", run_dir,
           "--quiet", *args.tuneloop_args.split()]
    child = run_child(cmd, os.path.join(work, "run.log"), None)
    if child["returncode"] != 0:
        print(f"the run failed; see {work}", flush=True)
        return 1
    with open(os.path.join(run_dir, "label_issues.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(run_dir, "results.json")) as f:
        res = json.load(f)
    ranked = [r["id"] for r in rows]
    flags = [r["id"] for r in rows if r["likely_wrong"] == "True"]
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "share": args.share,
              "source": "GLUE MRPC train.tsv with labels flipped (seed 0); dev.tsv as shipped",
              "data": {k: v for k, v in data.items() if k != "flipped"}, "dev_accuracy": res["eval"]["accuracy"],
              "dev_f1": res["eval"]["f1"], "wall_s": child["process_wall_s"],
              "mean_over_epochs": scores(ranked, flipped),
              "cleanlab": {"flagged": len(flags), "flipped_among_flagged": sum(i in flipped for i in flags),
                           "precision": round(sum(i in flipped for i in flags) / max(len(flags), 1), 4),
                           "recall": round(sum(i in flipped for i in flags) / len(flipped), 4)}}
    # the same ranking from one epoch's probabilities (train_dynamics.npz: sums and counts per epoch and row)
    with np.load(os.path.join(run_dir, "predictions", "train_dynamics.npz")) as d:
        sums, counts, given = d["sums"], d["counts"], d["given"].astype(int)
    for name, epoch in (("first_epoch", 0), ("last_epoch", len(counts) - 1)):
        seen = np.flatnonzero(counts[epoch])
        p_given = sums[epoch, seen, given[seen]] / counts[epoch, seen]
        result[name] = scores([f"train-{int(i)}" for i in seen[np.argsort(p_given, kind="stable")]], flipped)
    return finish(out, result, work, shown={k: v for k, v in result.items() if k not in ("machine",)})


if __name__ == "__main__":
    raise SystemExit(main())
