"""What the precision gate costs at the end of a run, and what skipping it in an experiment's runs saves: the
embedded MiniLM on GLUE MRPC (3,668 training pairs, 408 dev pairs), each as its own `tuneloop train` process,
one after another on this machine:

- one run of --max-steps N with the gate (the default) and with --precision-gate off: the process's wall time and
  results.json's timeline (`precision gate` among the phases);
- two seeds of the same run (`--seeds 1 2`): since 2026-11-29 only the kept OUT/model is gated, once; the
  timeline of each seed's run shows none (before, each seed's run gated its own model, which --keep best then
  deleted: the single run's gate phase is what each cost).

    python benchmarks/bench_gate_cost.py                         # --max-steps 20, MRPC from ../shared/glue/MRPC
    python benchmarks/bench_gate_cost.py --max-steps 100 --data-dir glue_data/MRPC
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import DEFAULT_DATA_DIR, default_out, finish, machine_info  # noqa: E402


def run(argv: list[str], out: str) -> dict:
    """One `tuneloop train` process: its wall time and results (summary.json's for seeds)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tuneloop", "train", *argv, "--output-dir", out, "--quiet"], check=True)
    wall = round(time.perf_counter() - started, 2)
    summary = os.path.join(out, "summary.json")
    if os.path.exists(summary):
        with open(summary, encoding="utf-8") as f:
            data = json.load(f)
        runs = {}
        for name in os.listdir(out):
            path = os.path.join(out, name, "results.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    runs[name] = json.load(f)["timeline"]["phases"]
        with open(os.path.join(out, "model", "tuneloop.json"), encoding="utf-8") as f:
            route = json.load(f).get("precision_routes", {}).get("cpu", {}).get("route")
        return {"wall_s": wall, "runs_phases": runs, "kept": data.get("kept"), "kept_model_route": route}
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    return {"wall_s": wall, "phases": results["timeline"]["phases"], "f1": results["eval"].get("f1")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"GLUE MRPC folder (default: {DEFAULT_DATA_DIR})")
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--out", help="results JSON (default: results/<date>-<machine>-gate-cost.json)")
    args = p.parse_args(argv)
    machine = machine_info()
    work = tempfile.mkdtemp(prefix="gate-cost-")
    base = ["--task", "mrpc", "--data-dir", args.data_dir, "--max-steps", str(args.max_steps)]
    result = {"benchmark": "bench_gate_cost", "date": dt.datetime.now().isoformat(timespec="seconds"),
              "machine": machine, "data": f"GLUE MRPC from {args.data_dir} (3,668 train / 408 dev pairs)",
              "model": "minilm (embedded all-MiniLM-L6-v2)", "max_steps": args.max_steps, "runs": {}}
    for name, extra in (("gated", []), ("gate_off", ["--precision-gate", "off"]), ("two_seeds", ["--seeds", "1", "2"])):
        result["runs"][name] = run(base + extra, os.path.join(work, name))
        print(name, json.dumps(result["runs"][name])[:300], flush=True)
    gated, off = result["runs"]["gated"], result["runs"]["gate_off"]
    result["findings"] = [
        f"one run of {args.max_steps} steps: {gated['wall_s']} s with the gate "
        f"({gated['phases'].get('precision gate', 0):.1f} s of it the gate), {off['wall_s']} s with "
        f"--precision-gate off; two seeds: {result['runs']['two_seeds']['wall_s']} s, the kept model gated once "
        f"(route {result['runs']['two_seeds']['kept_model_route']}), no seed's run gated"]
    return finish(args.out or default_out(dt.date.today().isoformat(), machine, "-gate-cost"), result, work,
                  {"findings": result["findings"]})


if __name__ == "__main__":
    sys.exit(main())
