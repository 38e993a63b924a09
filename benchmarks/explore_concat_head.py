"""Exploration, not a shipped setting: does a head that reads both the frozen sentence embedding and the contrastive
stage's trained one keep the stage's gain where it gains and the frozen embedding's where more training costs? (The
grid's misses part that way: more pair steps lift questions 8 and cost fortunes 8 and docstrings 8; the weight mix
and a prediction ensemble of three stage runs did not close them: small-data-results.md.)

For each data set, size and seed (bench_small_data.py's data sets and row draws), tuneloop trains `--method setfit`
and `--method probe` once each; every row is embedded by both bodies (explore_weight_mix.embedded: the input of the
final classification Linear). Heads, each a logistic regression fitted on the training rows as the stage fits its
own, scored on the held-out rows (and the wide rows with --wide-eval):
  stage   the stage's embedding alone (checked against the run's own predictions: `check`)
  probe   the frozen embedding alone
  concat  both, side by side
  average the stage's and the probe's heads' class probabilities averaged

    python benchmarks/explore_concat_head.py --datasets questions,fortunes --sizes 8 --seeds 1 2 3 \
        --wide-eval 1000 --out /tmp/concat.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fewshot_sets import DATA_PACKAGES, data_builders  # noqa: E402
from _mrpc import DEFAULT_DATA_DIR, default_model  # noqa: E402
from bench_small_data import sample, scored_rows, tuneloop_run, wide_rows  # noqa: E402
from bench_train import default_out, machine_info, write_atomic  # noqa: E402
from explore_weight_mix import embedded, split  # noqa: E402


def one(data: dict, size: int, seed: int, model: str, work: str) -> dict:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    rows = sample(data["pool"], size, seed)
    t0 = time.perf_counter()
    stage = tuneloop_run(rows, data, seed, model, os.path.join(work, "setfit"), method="setfit").classifier
    stage_s = time.perf_counter() - t0
    probe = tuneloop_run(rows, data, seed, model, os.path.join(work, "probe"), method="probe").classifier
    texts, scored = [x for x, _ in rows], [x for x, _ in scored_rows(data)]
    labels, n = [y for _, y in rows], len(rows)
    out = {"stage_s": round(stage_s, 1), "check": {}, "heads": {}}
    predicted = [int(r["label"]) for r in stage.predict(scored)]
    out["check"]["setfit"] = split(predicted, data)
    trained = embedded(stage.model, stage.tokenizer, texts + scored, data["pair"])
    frozen = embedded(probe.model, probe.tokenizer, texts + scored, data["pair"])
    probs = {}
    for name, features in (("stage", trained), ("probe", frozen), ("concat", np.hstack([trained, frozen]))):
        head = LogisticRegression(max_iter=1000, random_state=seed).fit(features[:n], labels)
        probs[name] = head.predict_proba(features[n:])
        out["heads"][name] = split(head.classes_[probs[name].argmax(1)].tolist(), data)
    average = (probs["stage"] + probs["probe"]) / 2
    out["heads"]["average"] = split(head.classes_[average.argmax(1)].tolist(), data)
    stage.close()
    probe.close()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="questions,fortunes")
    p.add_argument("--sizes", type=int, nargs="+", default=[8])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--wide-eval", type=int, default=0, metavar="N", help="as bench_small_data.py's")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--data-packages", default=DATA_PACKAGES)
    p.add_argument("--model", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    builders = data_builders(args.data_dir, args.data_packages)
    model, machine, date = str(args.model or default_model()), machine_info(), dt.date.today().isoformat()
    out = args.out or default_out(date, machine, "-concat-head-explore")
    result = {"benchmark": "a head on the frozen and the stage's embeddings side by side (exploration)", "date": date,
              "machine": machine, "model": model, "wide_eval": args.wide_eval, "runs": []}
    started = time.perf_counter()
    for name in args.datasets.split(","):
        data = builders[name]()
        if args.wide_eval:
            data["wide"] = wide_rows(data["pool"], args.sizes, args.seeds, args.wide_eval)
        for size in args.sizes:
            for seed in args.seeds:
                work = tempfile.mkdtemp(prefix="concat-")
                try:
                    row = {"dataset": name, "per_class": size, "seed": seed, **one(data, size, seed, model, work)}
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                result["runs"].append(row)
                result["wall_s"] = round(time.perf_counter() - started, 1)
                print(json.dumps(row), flush=True)
                write_atomic(out, result)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
