"""The `setfit` package as bench_small_data.py runs it: in its own Python (--setfit-python, a virtualenv: setfit pins
its own dependencies), offline, with its default hyperparameters (or `num_iterations`), from a job file of texts, labels
and the texts to predict. A run keeps its folder with the package's checkpoints (every 500 steps) and goes on from the
last one when it is started again; its wall time then sums the parts (benchmarks/check_setfit_resume.py checks that
this gives the uninterrupted run's predictions)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train import write_atomic  # noqa: E402

SETFIT_PACKAGES = ("setfit", "sentence-transformers", "transformers", "torch")   # recorded from --setfit-python
SETFIT_SCRIPT = r"""
import functools, json, os, sys
from datasets import Dataset
from setfit import SetFitModel, Trainer, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint
job = json.load(open(sys.argv[1]))
model = SetFitModel.from_pretrained(job["model"])
pairs = {"num_iterations": job["num_iterations"]} if job["num_iterations"] else {}
args = TrainingArguments(seed=job["seed"], **pairs)
train = Dataset.from_dict({"text": job["texts"], "label": job["labels"]})
trainer = Trainer(model=model, args=args, train_dataset=train)
last = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
if last:   # a run cut off earlier goes on from its last checkpoint (weights, optimizer, schedule, RNG, batch order)
    trainer.st_trainer.train = functools.partial(trainer.st_trainer.train, resume_from_checkpoint=last)
trainer.train()
json.dump([int(p) for p in model.predict(job["eval_texts"], as_numpy=True)], open(sys.argv[2], "w"))
"""


def setfit_versions(python: str) -> dict:
    """{package: version} of SETFIT_PACKAGES in the interpreter that runs the setfit package."""
    code = f"import importlib.metadata as m, json; print(json.dumps({{p: m.version(p) for p in {SETFIT_PACKAGES!r}}}))"
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


def job(texts: list[str], labels: list[int], eval_texts: list[str], seed: int, model: str,
        num_iterations: int | None = None) -> dict:
    """What the program run in the setfit interpreter reads: the model, seed, training rows and the texts to predict."""
    return {"model": model, "seed": seed, "num_iterations": num_iterations, "texts": texts, "labels": labels,
            "eval_texts": eval_texts}


def in_setfit_python(python: str, script: str, args: list[str], work: str) -> None:
    """`script` run with `python -c` in the setfit package's interpreter, offline, in `work` (its Trainer writes
    checkpoints/ into its working folder); a failure raises with the end of its stderr."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_DISABLED": "true"}
    done = subprocess.run([python, "-c", script, *args], env=env, capture_output=True, text=True, cwd=work,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"setfit failed: {done.stderr[-2000:]}")


def run(spec: dict, python: str, work: str) -> tuple[list[int], dict]:
    """The setfit package in its own Python, in `work`, a folder kept for this run: its Trainer saves a checkpoint
    every 500 steps there, and a run cut off (a session's end, a kill) goes on from the last one when the benchmark
    is run again. Its wall time then is the sum of its parts, each counted up to the checkpoint the next part went
    on from (the steps redone after it are not counted twice), and the row says from which steps it went on.
    Returns (the predicted labels of spec's eval_texts, {"wall_s", "resumed_at_steps"} if it was resumed, else {})."""
    os.makedirs(work, exist_ok=True)
    job_file, out, log = (os.path.join(work, name) for name in ("setfit-job.json", "setfit-predictions.json",
                                                                  "segments.json"))
    if not os.path.exists(job_file) or read_json(job_file) != spec:     # another run's checkpoints are never resumed
        shutil.rmtree(os.path.join(work, "checkpoints"), ignore_errors=True)
        write_atomic(job_file, spec)
        write_atomic(log, [])
    segments = read_json(log) if os.path.exists(log) else []
    last = latest_checkpoint(os.path.join(work, "checkpoints"))
    segments.append({"start": time.time(), "from_step": last[0] if last else None,
                     "from_time": last[1] if last else None})
    write_atomic(log, segments)
    in_setfit_python(python, SETFIT_SCRIPT, [job_file, out], work)
    predicted, row = read_json(out), {}
    if len(segments) > 1:
        row["wall_s"] = round(segmented_seconds(segments, time.time()), 1)
        row["resumed_at_steps"] = [s["from_step"] for s in segments[1:]]
    shutil.rmtree(work, ignore_errors=True)
    return predicted, row


def read_json(path: str):
    with open(path) as f:
        return json.load(f)


def latest_checkpoint(folder: str) -> tuple[int, float] | None:
    """(step, the time it was written) of the newest complete checkpoint in `folder` (the Trainer writes its
    trainer_state.json last), or None."""
    found = []
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        state = os.path.join(folder, name, "trainer_state.json")
        if name.startswith("checkpoint-") and name[11:].isdigit() and os.path.exists(state):
            found.append((int(name[11:]), os.path.getmtime(state)))
    return max(found) if found else None


def segmented_seconds(segments: list, end: float) -> float:
    """A run's wall seconds over the parts it ran in: each cut-off part counts up to the checkpoint the next part
    went on from (nothing if that one was older than the part, or if the next part started over); the last part
    counts to `end`."""
    total = end - segments[-1]["start"]
    for part, after in itertools.pairwise(segments):
        if after["from_time"] is not None:
            total += max(0.0, after["from_time"] - part["start"])
    return total
