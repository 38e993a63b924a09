"""Inference on one GPU, side by side in one run (issue #55's GPU acceptance): bert-base (the bert-base-uncased
architecture, random init with the embedded MiniLM's tokenizer, as bench_gpu.py builds it) fine-tuned one epoch on
GLUE MRPC by `tuneloop train` (so its end-of-run precision gate records the GPU's route), then N MRPC test pairs
(the 1,725 repeated; default 20,000) labelled by:

  pipeline-8 / pipeline-64   `transformers.pipeline("text-classification", device=0)`, batch 8 / 64
  tuneloop                   `tuneloop.load(model, precision="auto").predict(pairs)` (the gated route)
  tuneloop-fp32              the same with precision="fp32"
  tuneloop-trace             `tuneloop` with every forward pass timed (the GPU synchronised before and after it, so
                             slower than `tuneloop`): where a first call's time goes, per (rows, width) shape, each
                             pass split into the CPU's launching (until the forward returns) and the wait for the
                             GPU after it; the garbage collector's pauses and the card's SM clock (nvidia-smi every
                             100 ms) during each call. On H100s bf16's first call ran 3.6-4.7x slower than its
                             second (fp32 1.1x); SDPA's cuDNN backend tried last did not change that (2026-11-27
                             15:12: +11%), and the 17:43 trace found repeated shapes as slow as new ones in a first
                             call (forward 5.8 s first, 1.1 s second; [126, 65] 90 and 84 ms, then 5 ms)
  tuneloop-no-cudnn-sdpa     `tuneloop` with SDPA's cuDNN backend switched off in its process (an ablation)
  plain-sorted-256           a plain loop: tokenize all, sort by length, batch 256, fp32 (a reference)

Each way in its own process; model load is excluded, tokenization included; the first call is the figure (a
user's one call); for all but the pipelines a second call on the same rows is recorded as `warm_rows_per_s`.
Every way's labels are compared with tuneloop-fp32's. Writes one JSON (--out); the figures print as they come.

    python3 benchmarks/gpu_infer.py --data-dir .gpu/MRPC --minilm /tmp/minilm --out $OUT/gpu_infer.json
    python benchmarks/gpu_infer.py --rows 300 --max-train-samples 64 --out /tmp/infer.json    # smoke, CPU too
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_gpu import make_bert_base  # noqa: E402
from bench_train import DEFAULT_DATA_DIR, machine_info, write_atomic  # noqa: E402

WAYS = ("pipeline-8", "pipeline-64", "tuneloop", "tuneloop-trace", "tuneloop-no-cudnn-sdpa", "tuneloop-fp32",
        "plain-sorted-256")

CHILD = r"""
import csv, datetime as dt, gc, json, os, shutil, subprocess, sys, tempfile, time
way, model, test, rows, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
import torch
cuda = torch.cuda.is_available()
def sync():
    if cuda:
        torch.cuda.synchronize()
with open(test, encoding="utf-8-sig", newline="") as f:
    reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
    next(reader)
    base = [(r[3], r[4]) for r in reader]
pairs = (base * (rows // len(base) + 1))[:rows]
t0 = time.perf_counter()
if way.startswith("pipeline"):
    from transformers import pipeline
    clf = pipeline("text-classification", model=model, device=0 if cuda else -1)
    batch = int(way.split("-")[1])
    dicts = [{"text": a, "text_pair": b} for a, b in pairs]
    label = lambda: [p["label"] for p in clf(dicts, batch_size=batch, truncation=True)]
    precision = "fp32"
elif way.startswith("tuneloop"):
    import tuneloop
    if way == "tuneloop-no-cudnn-sdpa":   # an ablation, in this child process only
        torch.backends.cuda.enable_cudnn_sdp(False)
    clf = tuneloop.load(model, precision="fp32" if way.endswith("fp32") else "auto")
    if way == "tuneloop-trace":     # (shape, launch s, total s) of every forward pass, the GPU synchronised around it
        calls, began, pauses, gc_began = [], [], [], []
        def before(module, args, kwargs):
            sync()
            began.append(time.perf_counter())
        def after(module, args, kwargs, output):
            launched = time.perf_counter()
            sync()
            ids = kwargs.get("input_ids", args[0] if args else None)
            start = began.pop()
            calls.append((tuple(ids.shape), launched - start, time.perf_counter() - start))
        def collected(phase, info):
            if phase == "start":
                gc_began.append(time.perf_counter())
            elif gc_began:
                pauses.append((gc_began.pop(), time.perf_counter(), info.get("generation")))
        gc.callbacks.append(collected)
        if isinstance(clf.model, torch.nn.Module):        # not the ONNX route a CPU's gate may keep
            clf.model.register_forward_pre_hook(before, with_kwargs=True)
            clf.model.register_forward_hook(after, with_kwargs=True)
        clocks = None
        if cuda and shutil.which("nvidia-smi"):       # the SM clock every 100 ms while the calls run
            clock_file = tempfile.NamedTemporaryFile("w+", suffix=".csv", delete=False)
            clocks = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.max.sm,pstate,"
                                       "utilization.gpu,power.draw", "--format=csv,noheader,nounits", "-lms", "100"],
                                      stdout=clock_file, stderr=subprocess.DEVNULL)
            wall_minus_perf = time.time() - time.perf_counter()
            time.sleep(0.5)      # its first samples: the card idle, as a user's call finds it (in load_s)
    label = lambda: [str(r["label"]) for r in clf.predict(pairs, raw=True)]
    precision = clf.precision
else:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model)
    net = AutoModelForSequenceClassification.from_pretrained(model).to("cuda" if cuda else "cpu").eval()
    names = net.config.id2label
    precision = "fp32"
    def label():
        enc = tok([a for a, _ in pairs], [b for _, b in pairs], truncation=True)
        order = sorted(range(len(pairs)), key=lambda i: len(enc["input_ids"][i]))
        got = [None] * len(pairs)
        with torch.inference_mode():
            for s in range(0, len(order), 256):
                idx = order[s:s + 256]
                b = tok.pad({k: [enc[k][i] for i in idx] for k in enc}, return_tensors="pt").to(net.device)
                for i, c in zip(idx, net(**b).logits.argmax(-1).tolist()):
                    got[i] = names[c]
        return got
sync()
t1 = time.perf_counter()
labels = label()
sync()
t2 = time.perf_counter()
again = label() if not way.startswith("pipeline") else None   # a second call (the pipelines': time spared)
sync()
t3 = time.perf_counter()
peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
trace = None
if way == "tuneloop-trace" and not calls:
    trace = {"skipped": f"the route ({precision}) is not a PyTorch module"}
elif way == "tuneloop-trace":             # the first call's passes, split by whether their shape was new
    first, second = calls[:len(calls) // 2], calls[len(calls) // 2:]     # the same rows twice: as many passes
    seen, new, repeat = set(), [], []
    for shape, _, s in first:
        (repeat if shape in seen else new).append(s)
        seen.add(shape)
    warm = {}
    for shape, _, s in second:
        warm.setdefault(shape, []).append(s)
    slow = sorted(first, key=lambda c: -c[2])[:12]
    paused = lambda a, b: round(sum(e - s for s, e, _ in pauses if a <= s < b), 3)
    trace = {"CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING"), "passes": len(first),
             "shapes": len(seen), "new_shape_s": round(sum(new), 3), "repeat_shape_s": round(sum(repeat), 3),
             "forward_s": round(sum(c[2] for c in first), 3), "launch_s": round(sum(c[1] for c in first), 3),
             "second_call_forward_s": round(sum(c[2] for c in second), 3),
             "second_call_launch_s": round(sum(c[1] for c in second), 3),
             "gc_pause_s": {"first_call": paused(t1, t2), "second_call": paused(t2, t3),
                            "full_collections": sum(g == 2 for s, _, g in pauses if t1 <= s < t3)},
             "passes_in_order": [[*sh, round(l, 4), round(s, 4)] for sh, l, s in first],
             "slowest": [{"shape": list(sh), "launch_s": round(l, 4), "s": round(s, 4),
                          "second_call_s": round(min(warm.get(sh, [float("nan")])), 4)} for sh, l, s in slow]}
    if clocks is not None:         # [seconds from the first call's start, SM MHz, max MHz, P-state, util %, W]
        clocks.terminate()
        clocks.wait()
        clock_file.seek(0)
        samples = []
        for line in clock_file.read().splitlines():
            x = line.split(", ")
            try:
                at = dt.datetime.strptime(x[0], "%Y/%m/%d %H:%M:%S.%f").timestamp() - wall_minus_perf - t1
            except ValueError:
                continue
            samples.append([round(at, 2), *x[1:]])
        clock_file.close()
        os.unlink(clock_file.name)
        trace["sm_clock"] = {"first_call_s": round(t2 - t1, 2), "second_call_s": round(t3 - t2, 2),
                             "samples": samples}
json.dump({**({"trace": trace} if trace else {}), "way": way, "rows": len(labels), "precision": precision,
           "load_s": round(t1 - t0, 2), "label_s": round(t2 - t1, 3),
           "rows_per_s": round(len(labels) / (t2 - t1), 1),
           "warm_rows_per_s": again and round(len(again) / (t3 - t2), 1),
           "same_on_second_call": again and again == labels,
           "peak_gpu_memory_mb": peak and round(peak), "labels": labels}, open(out, "w"))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="GLUE MRPC folder as shipped")
    p.add_argument("--minilm", default=None, help="all-MiniLM-L6-v2 folder (its tokenizer; default: the embedded one)")
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--max-train-samples", type=int, default=None, help="train on the first N pairs (smoke tests)")
    p.add_argument("--ways", default=",".join(WAYS))
    p.add_argument("--keep-run", default=None, help="keep the trained run folder here (for bench_serve.py)")
    p.add_argument("--timeout", type=float, default=240, help="seconds per process")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    minilm = args.minilm
    if minilm is None:
        from _mrpc import default_model

        minilm = str(default_model())
    work = tempfile.mkdtemp(prefix="gpu_infer_")
    run = args.keep_run or os.path.join(work, "run")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine_info(),
              "command": " ".join([sys.executable, *sys.argv]), "rows": args.rows,
              "model": "bert-base architecture, random init, fine-tuned 1 epoch on MRPC train by tuneloop",
              "runs": {}}
    try:
        bert = make_bert_base(os.path.join(work, "bert-base-random"), minilm)
        train = [sys.executable, "-m", "tuneloop", "train", "--task", "mrpc", "--data-dir", args.data_dir,
                 "--model", bert, "--epochs", "1", "--method", "finetune", "--output-dir", run, "--quiet",
                 "--no-report", "--calibrate", "none"]
        if args.max_train_samples:
            train += ["--max-train-samples", str(args.max_train_samples)]
        started = time.perf_counter()
        done = subprocess.run(train, capture_output=True, text=True, timeout=args.timeout * 2)
        result["train"] = {"returncode": done.returncode, "process_s": round(time.perf_counter() - started, 1)}
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-3000:])
            write_atomic(args.out, result)
            return 1
        meta = json.load(open(os.path.join(run, "model", "tuneloop.json")))
        from tuneloop.predict.routes import RECORD

        result["train"]["precision_routes"] = meta.get(RECORD)
        print("trained:", json.dumps(result["train"]), flush=True)
        test = os.path.join(args.data_dir, "test.tsv")
        labels = {}
        for way in args.ways.split(","):
            target = os.path.join(work, f"{way}.json")
            try:
                child = subprocess.run([sys.executable, "-c", CHILD, way, os.path.join(run, "model"), test,
                                        str(args.rows), target], capture_output=True, text=True,
                                       timeout=args.timeout)
            except subprocess.TimeoutExpired:
                result["runs"][way] = {"error": f"over {args.timeout} s"}
                print(way, "timed out", flush=True)
                continue
            if child.returncode != 0:
                result["runs"][way] = {"error": child.stderr[-1500:]}
                print(way, "failed:", child.stderr[-1500:], flush=True)
                continue
            record = json.load(open(target))
            labels[way] = record.pop("labels")
            result["runs"][way] = record
            print(json.dumps(record), flush=True)
            write_atomic(args.out, result)
        exact = labels.get("tuneloop-fp32")
        if exact:
            for way, got in labels.items():
                result["runs"][way]["agree_with_fp32"] = round(sum(a == b for a, b in zip(got, exact)) / len(exact), 5)
        pipes = [result["runs"][w]["rows_per_s"] for w in ("pipeline-8", "pipeline-64") if "rows_per_s" in
                 result["runs"].get(w, {})]
        if pipes and "rows_per_s" in result["runs"].get("tuneloop", {}):
            result["tuneloop_x_best_pipeline"] = round(result["runs"]["tuneloop"]["rows_per_s"] / max(pipes), 2)
        write_atomic(args.out, result)
        print(json.dumps({w: {k: r.get(k) for k in ("precision", "rows_per_s", "warm_rows_per_s", "agree_with_fp32",
                                                    "error")} for w, r in result["runs"].items()}))
        print("tuneloop x best pipeline:", result.get("tuneloop_x_best_pipeline"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all("error" not in r for r in result["runs"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
