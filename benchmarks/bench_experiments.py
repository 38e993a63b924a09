"""Experiments instead of single runs, measured: several seeds on GLUE MRPC, and a search against the seed mean.

Parts (each one `tuneloop` process; the embedded MiniLM, --recipe fast):
  seeds-mrpc   tuneloop train --task mrpc --data-dir MRPC --seeds 1..N      → dev F1 mean ± std, 95% interval
  seeds-sample tuneloop train --seeds 1..N  (the built-in 400-pair MRPC sample) → the default's mean F1 there
  search       tuneloop search --trials T on the sample                     → wall time, share pruned, best F1
  best-seeds   the best trial's options with seeds 1..N on the sample        → its mean F1: the best trial's own F1
               was picked on the same dev rows, so it is optimistic; the seed mean is the fair comparison

    python benchmarks/bench_experiments.py                      # all parts (about 35 minutes on 2 CPU cores)
    python benchmarks/bench_experiments.py --parts search --trials 4
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import DEFAULT_DATA_DIR, default_out, finish, machine_info, run_child, write_atomic  # noqa: E402

SPACE = """lr: {low: 1.0e-5, high: 3.0e-4, log: true}
epochs: {low: 1, high: 4}
warmup_ratio: {low: 0.0, high: 0.2}
batch_size: {choices: [16, 32]}
weight_decay: {low: 0.0, high: 0.1}
"""


def tuneloop(args: list[str], work: str, name: str) -> float:
    child = run_child([sys.executable, "-m", "tuneloop", *args, "--quiet"], os.path.join(work, f"{name}.log"), None)
    if child["returncode"] != 0:
        raise SystemExit(f"{name} failed; see {work}/{name}.log")
    return child["process_wall_s"]


def seed_summary(folder: str) -> dict:
    s = json.load(open(os.path.join(folder, "summary.json")))
    return {"f1": s["metrics"]["f1"], "accuracy": s["metrics"]["accuracy"], "collapsed": s["collapsed"],
            "per_seed_f1": {r["name"]: r["eval"]["f1"] for r in s["runs"]}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--parts", default="seeds-mrpc,seeds-sample,search,best-seeds")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--trials", type=int, default=12)
    p.add_argument("--out", default=None)
    p.add_argument("--keep-mrpc", metavar="DIR", help="keep the MRPC seeds' kept model as DIR/model (a run folder "
                   "for bench_predict.py and bench_serve.py)")
    args = p.parse_args(argv)
    parts = args.parts.split(",")
    work = tempfile.mkdtemp(prefix="bench_experiments_")
    seeds = [str(s) for s in range(1, args.seeds + 1)]
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-experiments")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "space": SPACE, "parts": {}}
    fast = ["--recipe", "fast"]
    if "seeds-mrpc" in parts:
        folder = os.path.join(work, "seeds-mrpc")
        wall = tuneloop(["train", "--task", "mrpc", "--data-dir", args.data_dir, *fast, "--seeds", *seeds,
                         "--output-dir", folder], work, "seeds-mrpc")
        result["parts"]["seeds-mrpc"] = {**seed_summary(folder), "wall_s": wall}
        if args.keep_mrpc:
            shutil.copytree(os.path.join(folder, "model"), os.path.join(args.keep_mrpc, "model"), dirs_exist_ok=True)
        print(f"seeds-mrpc: {json.dumps(result['parts']['seeds-mrpc'])}", flush=True)
        write_atomic(out, result)
    if "seeds-sample" in parts:
        folder = os.path.join(work, "seeds-sample")
        wall = tuneloop(["train", *fast, "--seeds", *seeds, "--output-dir", folder], work, "seeds-sample")
        result["parts"]["seeds-sample"] = {**seed_summary(folder), "wall_s": wall}
        print(f"seeds-sample: {json.dumps(result['parts']['seeds-sample'])}", flush=True)
        write_atomic(out, result)
    if "search" in parts or "best-seeds" in parts:
        space = os.path.join(work, "space.yaml")
        with open(space, "w") as f:
            f.write(SPACE)
        folder = os.path.join(work, "search")
        wall = tuneloop(["search", "--space", space, "--trials", str(args.trials), *fast, "--output-dir", folder],
                        work, "search")
        s = json.load(open(os.path.join(folder, "search.json")))
        result["parts"]["search"] = {"wall_s": wall, "finished": s["finished"], "pruned": s["pruned"],
                                     "pruned_share": round(s["pruned"] / max(s["finished"], 1), 3),
                                     "best": s["best"], "trials": s["trials"]}
        print(f"search: best {json.dumps(s['best'])}, {s['pruned']} of {s['finished']} pruned, {wall:.0f} s",
              flush=True)
        write_atomic(out, result)
        if "best-seeds" in parts:
            options = [x for k, v in s["best"]["params"].items() for x in ("--" + k.replace("_", "-"), str(v))]
            folder = os.path.join(work, "best-seeds")
            wall = tuneloop(["train", *fast, *options, "--seeds", *seeds, "--output-dir", folder], work, "best-seeds")
            result["parts"]["best-seeds"] = {**seed_summary(folder), "wall_s": wall, "params": s["best"]["params"]}
            print(f"best-seeds: {json.dumps(result['parts']['best-seeds'])}", flush=True)
            write_atomic(out, result)
    return finish(out, result, work)


if __name__ == "__main__":
    raise SystemExit(main())
