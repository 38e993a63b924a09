"""Inference speed as a user meets it: GLUE MRPC's 1,725 test pairs labelled by one fine-tuned model, each way in
its own process, alternating and repeated: `tuneloop predict` (its default, `--precision auto`: the route the model
folder records as gated), `tuneloop predict --precision fp32` (the exact model), optionally on ONNX fp32 / int8
exports, and a `transformers.pipeline` loop as a user writes it first (batch_size 8; `pipeline-64` for 64). The
time is the process's wall time (imports and model load included) and its CPU time; from the process's own clock,
the labelling alone. Every way's labels are compared with the fp32 ones (`agree_with_fp32`). On a machine with a
CUDA GPU every way runs on it (pipeline device=0).

The model folder is copied and, when it records no gated route for this device (a run from before the gate), the
gate is run on the copy first (predict/classifier.gate_folder, as a run's end does; its figures are recorded). Needs a
trained model (e.g. `tuneloop train --task mrpc --data-dir MRPC --max-train-samples 400 --output-dir RUN`).

    flock /tmp/tuneloop-timing.lock python benchmarks/bench_predict.py --run RUN --repeats 3
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import DEFAULT_DATA_DIR, default_out, finish, machine_info, run_child, write_atomic  # noqa: E402

PIPELINE = r"""
import csv, json, sys, time
started = time.perf_counter()
from transformers import pipeline
model, path, out, batch = sys.argv[1:5]
import torch
classify = pipeline("text-classification", model=model, device=0 if torch.cuda.is_available() else -1)
with open(path, encoding="utf-8-sig", newline="") as f:
    reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
    next(reader)
    pairs = [{"text": r[3], "text_pair": r[4]} for r in reader]
loaded = time.perf_counter()
labels = [p["label"] for p in classify(pairs, batch_size=int(batch), truncation=True)]
done = time.perf_counter()
json.dump({"rows": len(labels), "label_s": done - loaded, "labels": labels}, open(out, "w"))
"""


WAYS = ("tuneloop", "tuneloop-fp32", "onnx-fp32", "onnx-int8", "pipeline", "pipeline-64")
DEFAULT_WAYS = "tuneloop,tuneloop-fp32,pipeline"
GATE = ("import json, sys; from tuneloop.predict.routes import RECORD; "
        "from tuneloop.predict.classifier import gate_folder; "
        "from tuneloop.runtime.machine import accelerator_present; "
        "m = json.load(open(sys.argv[1] + '/tuneloop.json')).get(RECORD, {}); "
        "d = 'cuda' if accelerator_present() else 'cpu'; "
        "print(json.dumps(m[d] if d in m else gate_folder(sys.argv[1], cpu=d == 'cpu')))")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="a tuneloop run folder (with model/) trained on MRPC")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--allow-drop", type=float, default=5.0, help="--allow-drop for the int8 export (default 5)")
    p.add_argument("--ways", default=DEFAULT_WAYS, help=f"comma-separated, of {', '.join(WAYS)} (default: "
                   f"{DEFAULT_WAYS})")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    ways = [w for w in WAYS if w in args.ways.split(",")]
    work = tempfile.mkdtemp(prefix="bench_predict_")
    test = os.path.join(args.data_dir, "test.tsv")
    exports = {}
    # int8 may lose more than the gate's 0.5 points: accept up to --allow-drop to measure its speed (the gate's
    # verdict and the drop are recorded)
    for name, flags in (("onnx-fp32", []), ("onnx-int8", ["--quantize", "int8", "--allow-drop", str(args.allow_drop)])):
        if name not in ways:
            continue
        folder = os.path.join(work, name)
        child = run_child([sys.executable, "-m", "tuneloop", "export", args.run, "--output", folder, "--quiet",
                           *flags], os.path.join(work, f"export-{name}.log"), None)
        if child["returncode"] != 0:
            print(open(os.path.join(work, f"export-{name}.log")).read()[-2000:])
            return 1
        exports[name] = {"folder": folder, "export_s": child["process_wall_s"],
                         "report": json.load(open(os.path.join(folder, "export_report.json")))}
    model = os.path.join(work, "model")                   # a copy: the gate writes into its tuneloop.json
    shutil.copytree(os.path.join(args.run, "model"), model)
    gate_log = os.path.join(work, "gate.log")
    gate = run_child([sys.executable, "-c", GATE, model], gate_log, None)
    if gate["returncode"] != 0:
        print(open(gate_log).read()[-2000:])
        return 1
    models = {"tuneloop": model, "tuneloop-fp32": model, **{k: v["folder"] for k, v in exports.items()}}
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-predict")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "load_average_start": os.getloadavg(),
              "rows": None, "runs": [], "precision_gate": json.loads(open(gate_log).read().strip().splitlines()[-1]),
              "precision_gate_process_s": gate["process_wall_s"],
              "export_gates": {k: v["report"]["gate"] for k, v in exports.items()},
              "sizes_mb": {k: v["report"]["size_mb"] for k, v in exports.items()}}
    with open(test, encoding="utf-8-sig") as f:
        result["rows"] = sum(1 for _ in f) - 1
    labels = {}
    for repeat in range(args.repeats):
        for way in ways:
            target = os.path.join(work, f"{way}-{repeat}.tsv")
            if way.startswith("pipeline"):
                cmd = [sys.executable, "-c", PIPELINE, model, test, target + ".json", way.partition("-")[2] or "8"]
            else:
                precision = ["--precision", "fp32"] if way.endswith("fp32") and way.startswith("tuneloop") else []
                cmd = [sys.executable, "-m", "tuneloop", "predict", "--model", models[way], "--input", test,
                       "--output", target, "--quiet", "--raw", "--keep-columns", "none", *precision]
            child = run_child(cmd, os.path.join(work, f"{way}-{repeat}.log"), None)
            if child["returncode"] != 0:
                print(open(os.path.join(work, f"{way}-{repeat}.log")).read()[-2000:])
                return 1
            record = {"way": way, "repeat": repeat, "wall_s": child["process_wall_s"],
                      "cpu_s": round(child["user_cpu_s"] + child["sys_cpu_s"], 2),
                      "peak_rss_mb": child["process_peak_rss_mb"],
                      "rows_per_s": round(result["rows"] / child["process_wall_s"], 2)}
            if way.startswith("pipeline"):
                done = json.load(open(target + ".json"))
                labels[way] = done["labels"]
                record.update(label_s=round(done["label_s"], 2),
                              label_rows_per_s=round(result["rows"] / done["label_s"], 2))
            else:
                with open(target, newline="") as f:
                    labels[way] = [row["label"] for row in csv.DictReader(f, delimiter="\t")]
                said = open(os.path.join(work, f"{way}-{repeat}.log")).read()
                record["precision"] = said.rpartition("(precision: ")[2].partition(")")[0] or None
            assert len(labels[way]) == result["rows"]
            result["runs"].append(record)
            print(json.dumps(record), flush=True)
            write_atomic(out, result)
    result["load_average_end"] = os.getloadavg()
    if "tuneloop-fp32" in labels:                         # the last repeat's labels against the exact model's
        result["agree_with_fp32"] = {way: round(statistics.fmean(a == b for a, b in zip(got, labels["tuneloop-fp32"])),
                                                5) for way, got in labels.items()}
    result["summary"] = summary(result["runs"], ways)
    return finish(out, result, work, shown=result["summary"])


def summary(runs: list[dict], ways: list[str]) -> dict:
    """Per way: mean wall and CPU seconds and rows/s; each way's speed-up over the pipeline at batch 8 (wall and
    CPU time), from the means."""
    out = {}
    for way in ways:
        mine = [r for r in runs if r["way"] == way]
        out[way] = {"wall_s": round(statistics.fmean(r["wall_s"] for r in mine), 2),
                    "cpu_s": round(statistics.fmean(r["cpu_s"] for r in mine), 2),
                    "rows_per_s": round(statistics.fmean(r["rows_per_s"] for r in mine), 2)}
    if "pipeline" in out:
        for way in ways:
            out[way]["x_pipeline_wall"] = round(out["pipeline"]["wall_s"] / out[way]["wall_s"], 2)
            out[way]["x_pipeline_cpu"] = round(out["pipeline"]["cpu_s"] / out[way]["cpu_s"], 2)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
