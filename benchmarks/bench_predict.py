"""Inference speed in isolation: rows/s labelling GLUE MRPC's 1,725 test pairs with one fine-tuned model, five
ways, alternating and repeated: `tuneloop predict` on the PyTorch folder (fp32, and `--precision bf16`), on its ONNX
fp32 export and on its ONNX int8 export, and a `transformers.pipeline` loop (the baseline a user writes first:
batch_size 8 calls over the list of pairs). `--ways` runs some of them. Each way runs in its own process; the
time is the process's wall time (model load included, as a user experiences it) and, from the process's own clock,
the labelling alone. Each tuneloop way's labels are compared with the fp32 PyTorch ones (`agree_with_fp32`).

Needs a trained model folder (e.g. `tuneloop train --task mrpc --data-dir MRPC --recipe fast --output-dir RUN`);
the exports are made here with `tuneloop export` (their accuracy gate results are recorded too).

    python benchmarks/bench_predict.py --run RUN --repeats 2
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
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
model, path, out = sys.argv[1:4]
classify = pipeline("text-classification", model=model, device=-1)
with open(path, encoding="utf-8-sig", newline="") as f:
    reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
    next(reader)
    pairs = [{"text": r[3], "text_pair": r[4]} for r in reader]
loaded = time.perf_counter()
labels = [p["label"] for p in classify(pairs, batch_size=8, truncation=True)]
done = time.perf_counter()
json.dump({"rows": len(labels), "label_s": done - loaded, "labels": labels}, open(out, "w"))
"""


WAYS = ("pytorch", "pytorch-bf16", "onnx-fp32", "onnx-int8", "pipeline")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="a tuneloop run folder (with model/) trained on MRPC")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--allow-drop", type=float, default=5.0, help="--allow-drop for the int8 export (default 5)")
    p.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of {', '.join(WAYS)} (default: all)")
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
    models = {"pytorch": os.path.join(args.run, "model"), "pytorch-bf16": os.path.join(args.run, "model"),
              **{k: v["folder"] for k, v in exports.items()}}
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-predict")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "rows": None, "runs": [],
              "gates": {k: v["report"]["gate"] for k, v in exports.items()},
              "sizes_mb": {k: v["report"]["size_mb"] for k, v in exports.items()}}
    with open(test, encoding="utf-8-sig") as f:
        result["rows"] = sum(1 for _ in f) - 1
    labels = {}
    for repeat in range(args.repeats):
        for way in ways:
            target = os.path.join(work, f"{way}-{repeat}.tsv")
            if way == "pipeline":
                cmd = [sys.executable, "-c", PIPELINE, models["pytorch"], test, target + ".json"]
            else:
                precision = ["--precision", "bf16"] if way.endswith("bf16") else []
                cmd = [sys.executable, "-m", "tuneloop", "predict", "--model", models[way], "--input", test,
                       "--output", target, "--quiet", "--raw", *precision]
            child = run_child(cmd, os.path.join(work, f"{way}-{repeat}.log"), None)
            if child["returncode"] != 0:
                print(open(os.path.join(work, f"{way}-{repeat}.log")).read()[-2000:])
                return 1
            record = {"way": way, "repeat": repeat, "wall_s": child["process_wall_s"],
                      "rows_per_s": round(result["rows"] / child["process_wall_s"], 2)}
            if way == "pipeline":
                label_s = json.load(open(target + ".json"))["label_s"]
                record.update(label_s=round(label_s, 2), label_rows_per_s=round(result["rows"] / label_s, 2))
            else:
                with open(target, newline="") as f:
                    labels[way] = [row["label"] for row in csv.DictReader(f, delimiter="\t")]
                assert len(labels[way]) == result["rows"]
                if "pytorch" in labels:
                    record["agree_with_fp32"] = round(statistics.fmean(
                        a == b for a, b in zip(labels[way], labels["pytorch"])), 5)
            result["runs"].append(record)
            print(json.dumps(record), flush=True)
            write_atomic(out, result)
    result["summary"] = {way: {"rows_per_s": round(statistics.fmean(r["rows_per_s"] for r in result["runs"]
                                                                    if r["way"] == way), 2)}
                         for way in ways}
    return finish(out, result, work, shown=result["summary"])


if __name__ == "__main__":
    raise SystemExit(main())
