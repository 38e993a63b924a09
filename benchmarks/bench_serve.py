"""Load test on loopback: `tuneloop serve` (its default `--precision auto`: the route the model folder records as
gated; `--precision fp32`; optionally an ONNX int8 export) against the naive server a user writes first (FastAPI
calling `transformers.pipeline` once per request, no batching), at concurrency 1, 8 and 32. The model folder is
copied and gated first when it records no route for this device (as bench_predict.py does). On a machine with a
CUDA GPU every server runs on it.

Each server runs in its own process on 127.0.0.1; the load generator (httpx, asyncio) keeps C requests in flight,
each one MRPC test pair, for at most --requests requests or --seconds seconds per level, whichever comes first,
and reports requests/s, p50/p95/p99 latency and errors. Servers are measured one after the other, levels in the
same order. The generator shares the machine's cores with the server, alike for every server.

    python benchmarks/bench_serve.py --run RUN            # RUN: a tuneloop run trained on MRPC (model/ inside)
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_predict import GATE  # noqa: E402
from bench_train import DEFAULT_DATA_DIR, default_out, machine_info, write_atomic  # noqa: E402

NAIVE = r"""
import sys
import uvicorn
from fastapi import FastAPI
from transformers import pipeline

import torch
classify = pipeline("text-classification", model=sys.argv[1], device=0 if torch.cuda.is_available() else -1)
app = FastAPI()

@app.get("/health")
def health():
    return {"status": "ok"}

@app.post("/predict")
def predict(body: dict):
    pairs = [{"text": a, "text_pair": b} for a, b in body["texts"]]
    return {"predictions": classify(pairs, truncation=True)}

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], port: int, log: str) -> subprocess.Popen:
    import urllib.request

    proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    end = time.monotonic() + 180
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"server failed: {open(log).read()[-2000:]}")
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("server did not start")


async def load(port: int, pairs: list, concurrency: int, requests: int, seconds: float) -> dict:
    try:
        import httpx
    except ImportError:                      # the same client under its newer name (what this venv has)
        import httpx2 as httpx

    done, errors, sent = [], 0, 0           # done: (index sent, seconds) of each answered request
    deadline = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120,
                                 limits=httpx.Limits(max_connections=concurrency)) as client:
        async def worker():
            nonlocal errors, sent
            while sent < requests and time.perf_counter() < deadline:
                index = sent
                pair = pairs[index % len(pairs)]
                sent += 1
                began = time.perf_counter()
                try:
                    r = await client.post("/predict", json={"texts": [list(pair)]})
                    ok = r.status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    done.append((index, time.perf_counter() - began))
                else:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    latencies = [s for _, s in sorted(done)]                  # in the order the requests were sent

    def pct(values, q):
        values = sorted(values)
        return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 1) if values else None

    # the tail by quarter of the requests in the order sent: a cost paid once per new request shape (the GPU's bf16
    # route had a p95 of 80 ms at 1 client against 13.5 ms for the naive server) shrinks from quarter to quarter
    quarters = [latencies[len(latencies) * q // 4:len(latencies) * (q + 1) // 4] for q in range(4)]
    return {"concurrency": concurrency, "requests": len(latencies), "errors": errors, "wall_s": round(wall, 2),
            "requests_per_s": round(len(latencies) / wall, 2), "p50_ms": pct(latencies, 0.50),
            "p95_ms": pct(latencies, 0.95), "p99_ms": pct(latencies, 0.99),
            "by_quarter": [{"p50_ms": pct(q, 0.5), "p95_ms": pct(q, 0.95),
                            "over_50_ms": sum(x > 0.05 for x in q)} for q in quarters]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--levels", default="1,8,32")
    p.add_argument("--requests", type=int, default=400, help="requests per level at most (default 400)")
    p.add_argument("--seconds", type=float, default=40, help="seconds per level at most (default 40)")
    p.add_argument("--servers", default="tuneloop,tuneloop-fp32,naive-pipeline",
                   help="of tuneloop (serve's default, --precision auto), tuneloop-fp32, tuneloop-onnx-int8, "
                        "naive-pipeline (default: tuneloop, tuneloop-fp32, naive-pipeline)")
    p.add_argument("--serve-args", default="", help="extra options for `tuneloop serve`, e.g. \"--max-wait-ms 20\"")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    with open(os.path.join(args.data_dir, "test.tsv"), encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader)
        pairs = [(r[3], r[4]) for r in reader]
    work = tempfile.mkdtemp(prefix="bench_serve_")
    int8 = os.path.join(work, "int8")
    if "tuneloop-onnx-int8" in args.servers:
        subprocess.run([sys.executable, "-m", "tuneloop", "export", args.run, "--output", int8, "--quantize", "int8",
                        "--quiet", "--allow-drop", "5"], check=True)      # the gate's verdict: bench_predict.py
    model = os.path.join(work, "model")                   # a copy: the gate writes into its tuneloop.json
    shutil.copytree(os.path.join(args.run, "model"), model)
    gate = subprocess.run([sys.executable, "-c", GATE, model], capture_output=True, text=True, check=True)
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-serve")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "serve_args": args.serve_args,
              "load_average_start": os.getloadavg(), "precision_gate": json.loads(gate.stdout.strip().splitlines()[-1]),
              "servers": {}}
    for name in args.servers.split(","):
        port = free_port()
        extra = args.serve_args.split()
        cmd = {"tuneloop": [sys.executable, "-m", "tuneloop", "serve", model, "--port", str(port), *extra],
               "tuneloop-fp32": [sys.executable, "-m", "tuneloop", "serve", model, "--port", str(port),
                                         "--precision", "fp32", *extra],
               "tuneloop-onnx-int8": [sys.executable, "-m", "tuneloop", "serve", int8, "--port", str(port), *extra],
               "naive-pipeline": [sys.executable, "-c", NAIVE, model, str(port)]}[name]
        proc = start(cmd, port, os.path.join(work, f"{name}.log"))
        try:
            levels = []
            for level in [int(x) for x in args.levels.split(",")]:
                record = asyncio.run(load(port, pairs, level, args.requests, args.seconds))
                levels.append(record)
                print(f"{name:20s} {json.dumps(record)}", flush=True)
            if name.startswith("tuneloop"):
                import urllib.request

                stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats").read())
                meta = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/metadata").read())
                result["servers"][name] = {"levels": levels, "stats": stats, "precision": meta.get("precision")}
            else:
                result["servers"][name] = {"levels": levels}
            write_atomic(out, result)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    result["load_average_end"] = os.getloadavg()
    levels = result["servers"].get("naive-pipeline", {}).get("levels", [])
    naive = {r["concurrency"]: r["requests_per_s"] for r in levels}
    result["x_naive"] = {name: {r["concurrency"]: round(r["requests_per_s"] / naive[r["concurrency"]], 2)
                                for r in server["levels"] if naive.get(r["concurrency"])}
                         for name, server in result["servers"].items()}
    write_atomic(out, result)
    print(json.dumps(result["x_naive"]))
    print(f"results: {out}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
