"""LoRA against full fine-tuning on the CPU: the embedded MiniLM on GLUE MRPC, side by side in one run.

Each run is `tuneloop train` in its own process (alternating full / lora per seed); per run: wall time, training
samples/s, peak RSS (os.wait4), the optimizer state as saved in the epoch checkpoint (optimizer.bin: AdamW's two
moments of every trained weight), the model folder's size, trainable parameters, dev accuracy/F1.

    python benchmarks/bench_lora.py --data-dir ../shared/glue/MRPC --max-train-samples 1000 --seeds 1 2
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import default_out, finish, machine_info, run_child  # noqa: E402


def folder_mb(path: str) -> float:
    return round(sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs) / 2**20, 2)


def run(impl: str, seed: int, args, work: str) -> dict:
    out = os.path.join(work, f"{impl}-{seed}")
    cmd = [sys.executable, "-m", "tuneloop", "train", "--model", "minilm", "--task", "mrpc", "--data-dir",
           args.data_dir, "--epochs", str(args.epochs), "--seed", str(seed), "--output-dir", out, "--no-report",
           "--save-every", "epoch", "--overwrite"]
    if args.max_train_samples:
        cmd += ["--max-train-samples", str(args.max_train_samples)]
    cmd += ["--lora", "--lr", str(args.lora_lr)] if impl == "lora" else ["--lr", str(args.full_lr)]
    child = run_child(cmd, out + ".log", args.timeout)
    record = {"impl": impl, "seed": seed, **child}
    if child["returncode"] != 0:
        return {**record, "error": open(out + ".log").read()[-2000:]}
    results = json.load(open(os.path.join(out, "results.json")))
    log = open(out + ".log").read()
    trained = re.search(r"LoRA r=\d+: ([\d,]+) of ([\d,]+) parameters", log)
    checkpoints = sorted(os.listdir(os.path.join(out, "checkpoints")))
    optimizer = os.path.join(out, "checkpoints", checkpoints[-1], "optimizer.bin")
    return {**record, "samples_per_s": results["train"]["samples_per_second"],
            "training_s": results["train"]["training_s"], "accuracy": results["eval"]["accuracy"],
            "f1": results["eval"]["f1"], "optimizer_state_mb": round(os.path.getsize(optimizer) / 2**20, 2),
            "model_folder_mb": folder_mb(os.path.join(out, "model")),
            "trained_parameters": int(trained.group(1).replace(",", "")) if trained else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(HERE, "..", "..", "shared", "glue", "MRPC"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-train-samples", type=int, default=1000)
    parser.add_argument("--full-lr", type=float, default=5e-5, help="the chapter's learning rate")
    parser.add_argument("--lora-lr", type=float, default=5e-4, help="LoRA's usual 10x")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    machine = machine_info()
    date = dt.date.today().isoformat()
    out = args.out or default_out(date, machine, "-lora")
    work = tempfile.mkdtemp(prefix="bench-lora-")
    runs = []
    for seed in args.seeds:
        for impl in ("full", "lora"):
            runs.append(run(impl, seed, args, work))
            print(json.dumps(runs[-1]), flush=True)
    keys = ("samples_per_s", "process_peak_rss_mb", "optimizer_state_mb", "model_folder_mb", "f1", "accuracy",
            "trained_parameters", "process_wall_s")
    summary = {impl: {k: [r.get(k) for r in runs if r["impl"] == impl] for k in keys} for impl in ("full", "lora")}
    result = {"benchmark": "lora vs full fine-tuning, MiniLM, MRPC", "date": date, "machine": machine,
              "args": vars(args), "runs": runs, "summary": summary}
    return finish(out, result, work, summary)


if __name__ == "__main__":
    raise SystemExit(main())
