"""Exploration, not a shipped setting: does mixing the contrastive stage's trained body with the pretrained one
(weight-space ensembling, "WiSE-FT": Wortsman et al., Robust fine-tuning of zero-shot models, CVPR 2022) keep the
stage's gain where it gains and the frozen embedding's where the stage loses? (Asked when the held-out disaster
tweets' 300 scored rows had the stage below the probe from 16 rows a class on; on 2,000 more rows it was not. Run on
questions at 8 per class, 2026-11-28: mixing back loses, moving further along the update, a > 1, gains: the guide.)

For each data set, size and seed (bench_small_data.py's data sets and row draws: the same training and scored rows),
tuneloop trains `--method setfit` and `--method probe` once each. Then, for each mix a of --mixes, the body's weights
are (1 - a) x the probe's (the pretrained body) + a x the stage's, every row is embedded by that body (the input of
the final classification Linear, as the stage reads it), and a logistic regression fitted on the training rows'
embeddings (as the stage fits its head) is scored on the held-out rows (and the wide rows with --wide-eval). a = 0 is
the probe and a = 1 the stage: their scores are checked against the two runs' own predictions (`check`), so the
embedding here is the runs' embedding.

    python benchmarks/explore_weight_mix.py --datasets tweets,sentiment --sizes 16 --seeds 1 2 3 \
        --data-packages /tmp/smalldata --out /tmp/mix.json
"""

from __future__ import annotations

import argparse
import copy
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
from bench_small_data import on, sample, scored_rows, tuneloop_run, wide_rows  # noqa: E402
from bench_train import default_out, machine_info, write_atomic  # noqa: E402


def embedded(model, tokenizer, texts: list, pair: bool, batch: int = 64):
    """The input of the model's final classification Linear for every text, in eval mode, in order."""
    import numpy as np
    import torch

    from tuneloop.data.long_texts import default_max_length
    from tuneloop.training.contrastive import head_linear

    head, caught, out = head_linear(model, model.config.num_labels), [], []
    longest = default_max_length(tokenizer)             # the runs' truncation (no --max-length given)
    handle = head.register_forward_pre_hook(lambda module, args: caught.append(args[0].detach()))
    model.eval()
    try:
        with torch.no_grad():
            for s in range(0, len(texts), batch):
                part = texts[s:s + batch]
                enc = (tokenizer([a for a, _ in part], [b for _, b in part], padding=True, truncation=True,
                                 max_length=longest, return_tensors="pt") if pair else
                       tokenizer(part, padding=True, truncation=True, max_length=longest, return_tensors="pt"))
                model(**{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")})
                out.append(caught.pop().float().cpu().numpy())
    finally:
        handle.remove()
    return np.concatenate(out)


def mixed(probe_model, stage_model, a: float):
    """A copy of the probe's model whose floating weights are (1 - a) x its own + a x the stage's."""
    model, theirs = copy.deepcopy(probe_model), stage_model.state_dict()
    state = {k: ((1 - a) * v + a * theirs[k]) if v.is_floating_point() else v
             for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    return model


def one(data: dict, size: int, seed: int, model: str, mixes: list, work: str) -> dict:
    from sklearn.linear_model import LogisticRegression

    rows = sample(data["pool"], size, seed)
    t0 = time.perf_counter()
    stage = tuneloop_run(rows, data, seed, model, os.path.join(work, "setfit"), method="setfit").classifier
    stage_s = time.perf_counter() - t0
    probe = tuneloop_run(rows, data, seed, model, os.path.join(work, "probe"), method="probe").classifier
    texts, scored = [x for x, _ in rows], [x for x, _ in scored_rows(data)]
    out = {"stage_s": round(stage_s, 1), "check": {}, "mix": {}}
    for name, clf in (("probe", probe), ("setfit", stage)):   # the runs' own predictions on the scored rows
        predicted = [int(r["label"]) for r in clf.predict(scored)]
        out["check"][name] = split(predicted, data)
    for a in mixes:
        body = mixed(probe.model, stage.model, a)
        features = embedded(body, stage.tokenizer, texts + scored, data["pair"])
        head = LogisticRegression(max_iter=1000, random_state=seed).fit(features[:len(rows)], [y for _, y in rows])
        out["mix"][str(a)] = split(head.predict(features[len(rows):]).tolist(), data)
    stage.close()
    probe.close()
    return out


def split(predicted: list, data: dict) -> dict:
    n = len(data["eval"])
    row = {"accuracy": on(predicted[:n], [y for _, y in data["eval"]])["accuracy"]}
    if data.get("wide"):
        row["wide_accuracy"] = on(predicted[n:], [y for _, y in data["wide"]])["accuracy"]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="tweets,sentiment")
    p.add_argument("--sizes", type=int, nargs="+", default=[16])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--mixes", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    p.add_argument("--wide-eval", type=int, default=0, metavar="N", help="as bench_small_data.py's")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--data-packages", default=DATA_PACKAGES)
    p.add_argument("--model", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    builders = data_builders(args.data_dir, args.data_packages)
    model, machine, date = str(args.model or default_model()), machine_info(), dt.date.today().isoformat()
    out = args.out or default_out(date, machine, "-weight-mix-explore")
    result = {"benchmark": "weight mix of the contrastive stage and the pretrained body (exploration)", "date": date,
              "machine": machine, "model": model, "mixes": args.mixes, "wide_eval": args.wide_eval, "runs": []}
    started = time.perf_counter()
    for name in args.datasets.split(","):
        data = builders[name]()
        if args.wide_eval:
            data["wide"] = wide_rows(data["pool"], args.sizes, args.seeds, args.wide_eval)
        for size in args.sizes:
            for seed in args.seeds:
                work = tempfile.mkdtemp(prefix="mix-")
                try:
                    row = {"dataset": name, "per_class": size, "seed": seed,
                           **one(data, size, seed, model, args.mixes, work)}
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
