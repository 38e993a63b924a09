"""Every model family through every command: the matrix of issue 24, run by hand, results in JSON.

For each family of tests/families.py (a tiny random model of that architecture with a real tokenizer of its kind,
decoders saved as they ship: no pad token) this runs, on toy data built here:

  train_pairs   tuneloop.train on an MRPC-layout folder (sentence pairs)
  train_single  tuneloop.train on a CSV of single texts (own data)
  windows       --windows 2 with --max-length 12, reloaded: the same loss
  resume        killed at step 13, resumed from step 10: the same dev loss as an unbroken run (1e-6)
  evaluate      `tuneloop evaluate` on the run: the in-run dev loss
  predict       `tuneloop predict --input`: the labels of tuneloop.load(...).predict
  pipeline      transformers.pipeline on the saved folder: the same probabilities as the Classifier
  export        `tuneloop export` (ONNX) and its gate; tuneloop.load on it: the same probabilities (1e-4)
  export_int8   `tuneloop export --quantize int8`: the gate's verdict (a refusal is the gate doing its job)
  serve         `tuneloop serve` on the ONNX folder, a real uvicorn on 127.0.0.1: the Classifier's answer

A cell is "ok" (with figures where there are some) or the first line of what went wrong.

    python benchmarks/family_matrix.py [--families bert,qwen2] [--out FILE]
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
import traceback
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
from bench_train import machine_info, write_atomic  # noqa: E402
from conftest import fast_options, write_mrpc_folder  # noqa: E402
from families import FAMILIES, build_family_model  # noqa: E402

ROWS = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog"), ("red green", "the alpha")]
STEPS = ("train_pairs", "train_single", "windows", "resume", "evaluate", "predict", "pipeline", "export",
         "export_int8", "serve")


def cli(*args: str) -> str:
    """Run `tuneloop ARGS` in its own process; its stdout, or an error with its last stderr line."""
    done = subprocess.run([sys.executable, "-m", "tuneloop", *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["(no output)"]
        raise RuntimeError(f"tuneloop {args[0]} exit {done.returncode}: {lines[-1]}")
    return done.stdout


def close(a, b, tol: float, what: str) -> None:
    import numpy as np

    gap = float(np.max(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))))
    if gap > tol:
        raise AssertionError(f"{what}: differ by {gap:.2e} (> {tol:g})")


class Killed(Exception):
    pass


def family_cells(key: str, model: str, pairs: Path, single: Path, work: Path) -> dict:
    import tuneloop

    cells: dict = {}
    run = work / "run"

    def cell(name, fn):
        started = time.perf_counter()
        try:
            cells[name] = {"ok": True, **(fn() or {})}
        except Exception as e:                       # noqa: BLE001 - a matrix records every failure
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            cells[name] = {"ok": False, "error": f"{type(e).__name__}: {first}"[:300],
                           "where": traceback.format_exc().strip().splitlines()[-3][:200]}
        cells[name]["s"] = round(time.perf_counter() - started, 2)

    opts = fast_options(model, epochs=2)
    results = {}

    def train_pairs():
        results.update(tuneloop.train(**opts, task="mrpc", data_dir=str(pairs), output_dir=str(run)))
        attention = next(line.split(": ", 1)[1] for line in (run / "config.yaml").read_text().splitlines()
                         if line.startswith("attention: "))
        return {"accuracy": results["eval"]["accuracy"], "attention": attention}

    def train_single():
        r = tuneloop.train(**opts, train_file=str(single), output_dir=str(work / "single"))
        with tuneloop.load(work / "single") as clf:
            clf.predict(["the cat sat", "beta dog"])
        return {"accuracy": r["eval"]["accuracy"]}

    def windows():
        r = tuneloop.train(**opts, task="mrpc", data_dir=str(pairs), output_dir=str(work / "windows"),
                           max_length=12, windows=2)
        assert r["data"]["validation"]["long_texts"] > 0, "no text was long enough for windows"
        with tuneloop.load(work / "windows") as clf:
            again = clf.evaluate(raw=True)["eval"]
        close(again["loss"], r["eval"]["loss"], 1e-5, "reloaded windowed dev loss")
        return {"long_texts": r["data"]["validation"]["long_texts"]}

    def resume():
        def kill(state):
            if state.step == 13:
                raise Killed

        keep = dict(opts, save_every="5")
        try:
            tuneloop.train(**keep, task="mrpc", data_dir=str(pairs), output_dir=str(work / "killed"), on_step=kill)
        except Killed:
            pass
        r = tuneloop.train(**keep, task="mrpc", data_dir=str(pairs), output_dir=str(work / "killed"),
                           resume="latest")
        close(r["eval"]["loss"], results["eval"]["loss"], 1e-6, "resumed vs unbroken dev loss")
        return {"resumed_from": Path(r["resumed_from"]).name}

    def evaluate():
        cli("evaluate", "--model", str(run), "--raw", "--output", str(work / "evaluation.json"), "--quiet")
        out = json.loads((work / "evaluation.json").read_text())
        close(out["eval"]["loss"], results["eval"]["loss"], 1e-5, "evaluate vs in-run dev loss")

    def predict():
        source, written = work / "new.csv", work / "new.jsonl"
        source.write_text("sentence1,sentence2\n" + "".join(f"{a},{b}\n" for a, b in ROWS))
        cli("predict", "--model", str(run / "model"), "--input", str(source), "--output", str(written), "--quiet")
        from_file = [json.loads(line)["label"] for line in written.read_text().splitlines()]
        with tuneloop.load(run) as clf:
            assert from_file == [r["label"] for r in clf.predict(ROWS)], "predict file != Classifier.predict"

    def pipeline():
        from transformers import pipeline as hf_pipeline

        classify = hf_pipeline("text-classification", model=str(run / "model"), top_k=None)
        answers = classify([{"text": a, "text_pair": b} for a, b in ROWS])
        with tuneloop.load(run) as clf:
            ours = clf.predict_proba(ROWS, raw=True)
            labels = clf.labels
        theirs = [[{d["label"]: d["score"] for d in row}[name] for name in labels] for row in answers]
        close(theirs, ours, 1e-4, "pipeline vs Classifier probabilities")

    def export():
        cli("export", str(run), "--output", str(work / "onnx"), "--quiet")
        report = json.loads((work / "onnx" / "export_report.json").read_text())
        with tuneloop.load(work / "onnx") as onnx, tuneloop.load(run) as torch_model:
            close(onnx.predict_proba(ROWS, raw=True), torch_model.predict_proba(ROWS, raw=True), 1e-4,
                  "ONNX vs PyTorch probabilities")
        return {"max_logit_difference": report["gate"]["max_logit_difference"], "verdict": report["gate"]["verdict"]}

    def export_int8():
        target = work / "int8"
        try:
            cli("export", str(run), "--output", str(target), "--quantize", "int8", "--quiet")
        except RuntimeError as e:
            if "export refused" not in str(e):
                raise
            return {"verdict": "refused by the gate", "message": str(e).split(": ", 1)[-1][:200]}
        gate = json.loads((target / "export_report.json").read_text())["gate"]
        return {"verdict": gate["verdict"], "max_logit_difference": gate["max_logit_difference"]}

    def serve():
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "tuneloop", "serve", str(work / "onnx"), "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"})
        try:
            end = time.monotonic() + 90
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > end:
                        raise RuntimeError("the server did not start: " + (proc.stderr.read() or "")[-300:])
                    time.sleep(0.2)
            body = json.dumps({"texts": [list(r) for r in ROWS]}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/predict", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as r:
                served = json.loads(r.read())["predictions"]
            with tuneloop.load(work / "onnx") as clf:
                assert [p["label"] for p in served] == [p["label"] for p in clf.predict(ROWS)], "served != predict"
        finally:
            proc.terminate()
            proc.wait(timeout=60)

    for name, fn in zip(STEPS, (train_pairs, train_single, windows, resume, evaluate, predict, pipeline, export,
                                 export_int8, serve)):
        needs_run = name not in ("train_pairs", "train_single", "windows")
        if needs_run and not cells.get("train_pairs", {}).get("ok"):
            cells[name] = {"ok": False, "error": "skipped: train_pairs failed"}
            continue
        if name == "serve" and not cells.get("export", {}).get("ok"):
            cells[name] = {"ok": False, "error": "skipped: export failed"}
            continue
        cell(name, fn)
    return cells


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    machine = machine_info()
    out = args.out or str(ROOT / "benchmarks" / "results" / f"{dt.date.today().isoformat()}-family-matrix.json")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine, "steps": STEPS,
              "families": {}}
    scratch = Path(tempfile.mkdtemp(prefix="family_matrix_"))
    try:
        pairs = write_mrpc_folder(scratch / "MRPC", n_train=120, n_dev=40, n_test=10)
        single = scratch / "single.csv"
        import csv

        with open(pairs / "train.tsv", encoding="utf-8-sig") as f, open(single, "w", newline="") as g:
            writer = csv.writer(g)
            writer.writerow(["text", "label"])
            for row in list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]:
                writer.writerow([row[3] + " " + row[4], "yes" if row[0] == "1" else "no"])
        for key in args.families.split(","):
            started = time.perf_counter()
            model = build_family_model(key, scratch / "models" / key)
            cells = family_cells(key, str(model), pairs, single, scratch / "work" / key)
            result["families"][key] = cells
            write_atomic(out, result)
            bad = {k: v["error"] for k, v in cells.items() if not v["ok"]}
            print(f"{key:12s} {len(STEPS) - len(bad)}/{len(STEPS)} ok in {time.perf_counter() - started:.0f} s"
                  + (f"  {json.dumps(bad)}" if bad else ""), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    green = all(c["ok"] for cells in result["families"].values() for c in cells.values())
    print(f"results: {out}; {'all green' if green else 'NOT all green'}")
    return 0 if green else 1


if __name__ == "__main__":
    raise SystemExit(main())
