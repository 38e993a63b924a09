"""Imbalanced classes on real data: GLUE MRPC's training pairs with the minority class ("not_equivalent")
subsampled to 1 in 10 (seeded), evaluated on the untouched dev set (129 not_equivalent, 279 equivalent). Each
variant is one `tuneloop train` process (the embedded MiniLM, the chapter's settings), variants alternating seed
by seed; reports macro-F1 and the minority class's precision/recall/F1 from results.json's per_class.

    python benchmarks/bench_imbalance.py                          # seeds 1 2, plain vs --class-weights balanced
    python benchmarks/bench_imbalance.py --variants plain,weights,sampler --seeds 1
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import random
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import DEFAULT_DATA_DIR, default_out, finish, machine_info, run_child, write_atomic  # noqa: E402

VARIANTS = {"plain": [], "weights": ["--class-weights", "balanced"], "sampler": ["--sampler", "balanced"]}
MINORITY = "not_equivalent"


def write_imbalanced(data_dir: str, out_dir: str, ratio: float, seed: int) -> dict:
    """train.csv (minority subsampled so that minority : majority = ratio : 1) and dev.csv, as sentence1,
    sentence2, label."""
    def rows(name):
        with open(os.path.join(data_dir, name), encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            next(reader)
            return [(r[3], r[4], "equivalent" if r[0] == "1" else MINORITY) for r in reader]

    train, dev = rows("train.tsv"), rows("dev.tsv")
    majority = [r for r in train if r[2] != MINORITY]
    minority = [r for r in train if r[2] == MINORITY]
    rng = random.Random(seed)
    kept = rng.sample(minority, round(len(majority) * ratio))
    train = majority + kept
    rng.shuffle(train)
    for name, data in (("train.csv", train), ("dev.csv", dev)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["sentence1", "sentence2", "label"])
            writer.writerows(data)
    return {"train_rows": len(train), "train_minority": len(kept), "dev_rows": len(dev),
            "dev_minority": sum(r[2] == MINORITY for r in dev)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--variants", default="plain,weights")
    p.add_argument("--ratio", type=float, default=0.1, help="minority rows per majority row (default 0.1 = 1:10)")
    p.add_argument("--tuneloop-args", default="", help="extra options for every run")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    work = tempfile.mkdtemp(prefix="bench_imbalance_")
    data = write_imbalanced(args.data_dir, work, args.ratio, seed=0)
    print(f"data: {data}", flush=True)
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-imbalance")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "data": data, "ratio": args.ratio,
              "source": "GLUE MRPC (train.tsv minority subsampled with seed 0; dev.tsv as shipped)", "runs": []}
    for seed in args.seeds:
        for variant in variants:
            run_dir = os.path.join(work, f"{variant}-{seed}")
            cmd = [sys.executable, "-m", "tuneloop", "train", "--train-file", os.path.join(work, "train.csv"),
                   "--validation-file", os.path.join(work, "dev.csv"), "--seed", str(seed), "--output-dir", run_dir,
                   "--quiet", *VARIANTS[variant], *args.tuneloop_args.split()]
            child = run_child(cmd, os.path.join(work, f"{variant}-{seed}.log"), None)
            if child["returncode"] != 0:
                print(f"{variant} seed {seed} failed; see {work}", flush=True)
                return 1
            with open(os.path.join(run_dir, "results.json")) as f:
                res = json.load(f)
            minority = res["per_class"]["validation"][MINORITY]
            record = {"variant": variant, "seed": seed, "accuracy": res["eval"]["accuracy"],
                      "f1_macro": res["eval"]["f1_macro"], "minority": minority,
                      "wall_s": child["process_wall_s"]}
            result["runs"].append(record)
            print(f"{variant:8s} seed {seed}: macro-F1 {record['f1_macro']:.4f}, {MINORITY} recall "
                  f"{minority['recall']:.4f} precision {minority['precision']:.4f}, accuracy {record['accuracy']:.4f}, "
                  f"{child['process_wall_s']:.0f} s", flush=True)
            shutil.rmtree(run_dir, ignore_errors=True)
            write_atomic(out, result)
    result["summary"] = {v: {k: round(statistics.fmean(get(r) for r in result["runs"] if r["variant"] == v), 4)
                             for k, get in (("f1_macro", lambda r: r["f1_macro"]),
                                            ("minority_recall", lambda r: r["minority"]["recall"]),
                                            ("minority_f1", lambda r: r["minority"]["f1"]),
                                            ("accuracy", lambda r: r["accuracy"]))}
                         for v in variants}
    return finish(out, result, work, shown=result["summary"])


if __name__ == "__main__":
    raise SystemExit(main())
