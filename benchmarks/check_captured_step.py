"""Is the captured training step the eager one? On a CUDA GPU: the same model from the same weights trained N steps
on the same GLUE MRPC batches (padded to tuneloop's length buckets, the short last batch included, dropout off),
once with tuneloop's Accelerate step and once with its CapturedStep (CUDA graphs), fp32 with TF32 as tuneloop runs
such models; then the milliseconds per step of each.

Pass (both): every step's loss within --loss-tol of the eager one, and the weights' distance after N steps within
--update-tol of how far the eager step moved them (||w_captured - w_eager|| / ||w_eager - w_start||; attention key
biases left out: their gradient is exactly 0, so AdamW turns rounding noise into steps). Writes one JSON.

    python benchmarks/check_captured_step.py --model DIR --data-dir MRPC --out check.json        # a GPU machine
    python benchmarks/check_captured_step.py --device cpu --steps 6 --out /tmp/c.json            # smoke (no capture)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time

import torch


def mrpc_rows(data_dir: str, n: int):
    with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader)
        return [(row[3], row[4], int(row[0])) for row, _ in zip(reader, range(n))]


def batches(tokenizer, rows, batch_size: int, max_length: int):
    from tuneloop.data.batch import BatchCollator
    from tuneloop.data.batching import length_bucket

    collate = BatchCollator(tokenizer, pad_to_multiple_of=length_bucket(max_length))
    encoded = [dict(tokenizer(a, b, truncation=True, max_length=max_length), labels=y) for a, b, y in rows]
    return [collate(encoded[i:i + batch_size]) for i in range(0, len(encoded), batch_size)]


def train(model_dir, batches_, device, captured: bool, lr: float, seed: int = 0):
    from accelerate import Accelerator
    from transformers import AutoModelForSequenceClassification, get_scheduler

    from tuneloop.model.optim import build_optimizer
    from tuneloop.objective import objective_for
    from tuneloop.tasks import SINGLE_LABEL
    from tuneloop.training.step import AccelerateStep, CapturedStep

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2, hidden_dropout_prob=0.0,
                                                               attention_probs_dropout_prob=0.0)
    start = {k: v.detach().clone().to(device) for k, v in model.state_dict().items()}
    accelerator = Accelerator(cpu=device == "cpu")
    optimizer = build_optimizer(model, lr, 0.01, device, capturable=captured)
    model, optimizer = accelerator.prepare(model, optimizer)
    scheduler = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=len(batches_) // 10,
                              num_training_steps=len(batches_))
    objective = objective_for(SINGLE_LABEL)
    step = CapturedStep(model, optimizer, objective, max_grad_norm=1.0, capture=device == "cuda") if captured \
        else AccelerateStep(accelerator, model, optimizer, objective, max_grad_norm=1.0)
    model.train()
    losses, first_s = [], None
    started = time.perf_counter()
    for i, batch in enumerate(batches_):
        out = step(batch.to(accelerator.device))
        losses.append(out.loss)
        scheduler.step()
        if i == 0:
            sync(device)
            first_s = time.perf_counter() - started
    sync(device)
    seconds = time.perf_counter() - started
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return {"losses": [float(x) for x in losses], "seconds": seconds, "first_step_s": first_s,
            "shapes": getattr(step, "shapes", None)}, start, weights


def timing(model_dir, batches_, device, captured: bool, repeats: int) -> float:
    """ms per step once every shape is recorded: the batches again, after a first pass."""
    from accelerate import Accelerator
    from transformers import AutoModelForSequenceClassification

    from tuneloop.model.optim import build_optimizer
    from tuneloop.objective import objective_for
    from tuneloop.tasks import SINGLE_LABEL
    from tuneloop.training.step import AccelerateStep, CapturedStep

    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    accelerator = Accelerator(cpu=device == "cpu")
    optimizer = build_optimizer(model, 5e-5, 0.01, device, capturable=captured)
    model, optimizer = accelerator.prepare(model, optimizer)
    objective = objective_for(SINGLE_LABEL)
    step = CapturedStep(model, optimizer, objective, capture=device == "cuda") if captured \
        else AccelerateStep(accelerator, model, optimizer, objective)
    model.train()
    on_device = [b.to(accelerator.device) for b in batches_]
    for batch in on_device:
        step(batch)
    sync(device)
    started = time.perf_counter()
    for _ in range(repeats):
        for batch in on_device:
            step(batch)
    sync(device)
    return (time.perf_counter() - started) / (repeats * len(on_device)) * 1000


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def distance(a: dict, b: dict, skip=("attention.self.key.bias",)) -> float:
    return sum(float((a[k].float() - b[k].float()).pow(2).sum()) for k in a
               if a[k].is_floating_point() and not k.endswith(skip)) ** 0.5


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "src"))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="a model folder (default: the embedded all-MiniLM-L6-v2)")
    p.add_argument("--data-dir", default=os.path.join(here, "..", "..", "shared", "glue", "MRPC"))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=60, help="training steps compared (batch 8)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--loss-tol", type=float, default=1e-3)
    p.add_argument("--update-tol", type=float, default=0.02)
    p.add_argument("--timing-repeats", type=int, default=3)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    from transformers import AutoTokenizer

    from tuneloop.model.loading import resolve_model

    model_dir = a.model or resolve_model("minilm")
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True          # as tuneloop's fp32 runs on GPUs (SpeedLevers)
        torch.backends.cudnn.allow_tf32 = True
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # N full batches and a short last one (rows not a multiple of the batch size)
    rows = mrpc_rows(a.data_dir, a.steps * a.batch_size - a.batch_size // 2)
    bs = batches(tokenizer, rows, a.batch_size, a.max_length)
    eager, start, w_eager = train(model_dir, bs, a.device, captured=False, lr=a.lr)
    captured, _, w_captured = train(model_dir, bs, a.device, captured=True, lr=a.lr)
    loss_diff = max(abs(x - y) for x, y in zip(eager["losses"], captured["losses"]))
    moved = distance(w_eager, start)
    update_diff = distance(w_captured, w_eager) / max(moved, 1e-12)
    timed = {name: round(timing(model_dir, bs[:20], a.device, name == "captured", a.timing_repeats), 3)
             for name in ("eager", "captured")}
    result = {
        "device": torch.cuda.get_device_name(0) if a.device == "cuda" else a.device, "torch": torch.__version__,
        "model": model_dir, "steps": len(bs), "batch_size": a.batch_size, "shapes": captured["shapes"],
        "recorded": a.device == "cuda", "max_loss_diff": loss_diff, "update_diff": update_diff,
        "eager_moved": moved, "loss_tol": a.loss_tol, "update_tol": a.update_tol,
        "passed": loss_diff <= a.loss_tol and update_diff <= a.update_tol,
        "ms_per_step": timed, "speedup": round(timed["eager"] / timed["captured"], 2),
        "first_step_s": {"eager": eager["first_step_s"], "captured": captured["first_step_s"]},
        "losses": {"eager": eager["losses"], "captured": captured["losses"]},
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "losses"}))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
