"""Is `--method setfit`'s pair stage the `setfit` package's training step? The package and tuneloop on the same
training rows with every dropout at 0, so that nothing random is left but the pairs: the package's pairs are
recorded step by step as its Trainer feeds them, then replayed in the same order through tuneloop's stage (one
pass, as the package makes). Same pairs, same step: the trained bodies' weights agree to float noise and so do the
predictions; anything else is a difference in the recipe (learning rate, schedule, warmup, clipping, weight decay,
loss, pooling, the head).

What this leaves out by design: the draws (which pairs, in which order, which dropout masks), which differ between
any two runs of either, and tuneloop's step floor (more passes on small sets; README, few-shot guide). Rows: the
cells of bench_small_data.py (`SET:PER_CLASS:SEED`, the same rows its runs train and are scored on).

    python benchmarks/check_setfit_same_step.py --setfit-python /tmp/sf/bin/python \\
        --cells fortunes:8:2 questions:8:1 sentiment:16:1 --data-packages /tmp/smalldata
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _setfit_package as setfit_package  # noqa: E402
import bench_small_data as bench  # noqa: E402
from _fewshot_sets import DATA_PACKAGES, data_builders  # noqa: E402
from _mrpc import DEFAULT_DATA_DIR, default_model  # noqa: E402
from bench_train import default_out, finish, machine_info  # noqa: E402

# The package's defaults (as _setfit_package.SETFIT_SCRIPT runs it), every dropout at 0, each step's pairs recorded
# as its data collator receives them (in training order), the trained body's transformer weights saved.
RECORDING_SCRIPT = r"""
import json, sys, torch
from datasets import Dataset
from setfit import SetFitModel, Trainer, TrainingArguments
from sentence_transformers.base.data_collator import BaseDataCollator
job = json.load(open(sys.argv[1]))
model = SetFitModel.from_pretrained(job["model"])
for module in model.model_body.modules():
    if isinstance(module, torch.nn.Dropout):
        module.p = 0.0
steps, collate = [], BaseDataCollator.__call__
def recording(self, features):
    steps.append([[f["sentence_1"], f["sentence_2"], float(f["label"])] for f in features])
    return collate(self, features)
BaseDataCollator.__call__ = recording
train = Dataset.from_dict({"text": job["texts"], "label": job["labels"]})
Trainer(model=model, args=TrainingArguments(seed=job["seed"]), train_dataset=train).train()
body = model.model_body[0].auto_model
torch.save({k: v.detach().clone() for k, v in body.state_dict().items()}, sys.argv[2] + "-body.pt")
predicted = [int(p) for p in model.predict(job["eval_texts"], as_numpy=True)]
json.dump({"steps": steps, "predicted": predicted}, open(sys.argv[2] + ".json", "w"))
"""


def package_run(job: dict, python: str, work: str) -> tuple[dict, dict]:
    """(the recorded steps and predictions, the trained body's weights) of the package on `job`."""
    import torch

    path, prefix = os.path.join(work, "job.json"), os.path.join(work, "package")
    with open(path, "w") as f:
        json.dump(job, f)
    setfit_package.in_setfit_python(python, RECORDING_SCRIPT, [path, prefix], work)
    with open(prefix + ".json") as f:
        return json.load(f), torch.load(prefix + "-body.pt")


def replayed_run(job: dict, steps: list, train: list, pair: bool, work: str, texts: list):
    """tuneloop's stage on the package's pairs in their order (one pass; every dropout 0); (predictions on `texts`,
    the trained model's weights, results.json's setfit section). `texts` as tuneloop was trained on them: a pair set's
    rows as (first, second) pairs, not the package's joined texts."""
    import numpy as np
    from safetensors.torch import load_file

    from tuneloop.training import contrastive

    index = {text: i for i, text in reversed(list(enumerate(job["texts"])))}       # a repeated text: its first row
    flat = [p for step in steps for p in step]
    pairs = (np.array([index[a] for a, _, _ in flat]), np.array([index[b] for _, b, _ in flat]),
             np.array([y for _, _, y in flat], dtype=np.float32))
    folder = os.path.join(work, "tuneloop")
    with mock.patch.object(contrastive, "MIN_STEPS", 1), \
            mock.patch.object(contrastive, "make_pairs", lambda labels, iterations, seed: pairs):
        result = bench.tuneloop_run(train, {"pair": pair}, job["seed"], job["model"], folder, method="setfit",
                                    dropout=0.0)
    predicted = [int(row["label"]) for row in result.classifier.predict(texts)]
    return predicted, load_file(os.path.join(folder, "model", "model.safetensors")), result["setfit"]


def compare(package: dict, mine: dict, pretrained: dict) -> dict:
    """The largest difference of any weight (each package tensor against tuneloop's tensor of the same name under
    the model's prefix; the unused pooler has none), and each body's distance from the pretrained weights."""
    worst, moved = 0.0, {"package": 0.0, "tuneloop": 0.0}
    compared = 0
    for name, theirs in package.items():
        found = [k for k in mine if k == name or k.endswith("." + name)]
        if len(found) != 1 or name.startswith("pooler."):
            continue
        ours, start = mine[found[0]].float(), pretrained[name].float()
        worst = max(worst, float((ours - theirs.float()).abs().max()))
        moved["package"] += float(((theirs.float() - start) ** 2).sum())
        moved["tuneloop"] += float(((ours - start) ** 2).sum())
        compared += 1
    return {"tensors_compared": compared, "max_abs_weight_difference": worst,
            "update_norm": {k: round(v ** 0.5, 6) for k, v in moved.items()}}


def check_cell(cell: str, builders: dict, model: str, python: str) -> dict:
    from transformers import AutoModel

    name, size, seed = cell.split(":")
    data = builders[name]()
    train = bench.sample(data["pool"], int(size), int(seed))
    scored = bench.scored_rows(data)
    job = bench.setfit_job(train, data, int(seed), model)
    with tempfile.TemporaryDirectory(prefix="same-step-") as work:
        t0 = time.perf_counter()
        recorded, package_body = package_run(job, python, work)
        package_s = time.perf_counter() - t0
        predicted, weights, stage = replayed_run(job, recorded["steps"], train, data["pair"], work,
                                                 [x for x, _ in scored])
        tuneloop_s = time.perf_counter() - t0 - package_s
    pretrained = AutoModel.from_pretrained(model).state_dict()
    truth = [y for _, y in scored]
    return {"cell": cell, "rows": len(train), "pairs": sum(len(s) for s in recorded["steps"]),
            "steps": len(recorded["steps"]), "tuneloop_steps": stage["steps"],
            **compare(package_body, weights, pretrained),
            "package": bench.scores(recorded["predicted"], {"eval": scored}),
            "tuneloop": bench.scores(predicted, {"eval": scored}),
            "same_prediction": round(sum(a == b for a, b in zip(predicted, recorded["predicted"])) / len(truth), 4),
            "seconds": {"package": round(package_s, 1), "tuneloop": round(tuneloop_s, 1)}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", nargs="+", default=["fortunes:8:2", "questions:8:1", "sentiment:16:1"],
                   help="SET:PER_CLASS:SEED, bench_small_data.py's rows")
    p.add_argument("--setfit-python", required=True, help="a Python with the setfit package")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="GLUE MRPC folder")
    p.add_argument("--data-packages", default=DATA_PACKAGES, help="as bench_small_data.py's")
    p.add_argument("--out", default=None, help="results JSON (default: benchmarks/results/<date>-<machine>-"
                                               "setfit-same-step.json)")
    args = p.parse_args(argv)
    builders, model = data_builders(args.data_dir, args.data_packages), str(default_model())
    unknown = {c.split(":")[0] for c in args.cells} - set(builders)
    if unknown or any(len(c.split(":")) != 3 for c in args.cells):
        p.error(f"--cells: SET:PER_CLASS:SEED with SET one of {', '.join(builders)}")
    machine, date = machine_info(), dt.date.today().isoformat()
    machine["setfit_env"] = setfit_package.setfit_versions(args.setfit_python)
    out = args.out or default_out(date, machine, "-setfit-same-step")
    result = {"benchmark": "the setfit package's step against tuneloop's pair stage on the same pairs, dropout 0",
              "date": date, "machine": machine, "model": model, "cells": []}
    started = time.perf_counter()
    for cell in args.cells:
        row = check_cell(cell, builders, model, args.setfit_python)
        print(json.dumps(row), flush=True)
        result["cells"].append(row)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return finish(out, result)


if __name__ == "__main__":
    sys.exit(main())
