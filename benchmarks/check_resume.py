"""Kill-and-resume on a real model: the embedded MiniLM on GLUE MRPC.

Runs an uninterrupted reference, then the same run killed with SIGKILL right after a mid-epoch checkpoint and
resumed with --resume; compares final weights, metrics and metrics.jsonl. Writes benchmarks/results/<date>-resume.json.

    python benchmarks/check_resume.py --data-dir ../shared/glue/MRPC
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "glue" / "MRPC"))
    parser.add_argument("--kill-after", type=int, default=60, help="kill once the checkpoint of this step exists")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                             f"{time.strftime('%Y-%m-%d')}-resume.json"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tuneloop-resume-"))
    common = ["--task", "mrpc", "--data-dir", args.data_dir, "--model", "minilm", "--max-train-samples", "400",
              "--epochs", "2", "--save-every", "20", "--seed", "42", "--log-every", "1", "--quiet"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    tuneloop = [sys.executable, "-m", "tuneloop", "train"]

    start = time.perf_counter()
    subprocess.run(tuneloop + common + ["--output-dir", str(work / "reference")], check=True, env=env)
    reference_s = time.perf_counter() - start

    resumed = work / "resumed"
    proc = subprocess.Popen(tuneloop + common + ["--output-dir", str(resumed)], env=env)
    target = resumed / "checkpoints" / f"step-{args.kill_after:07d}" / "tuneloop_state.json"
    while not target.exists():
        if proc.poll() is not None:
            raise SystemExit("the run finished before the checkpoint appeared")
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lines_at_kill = len((resumed / "metrics.jsonl").read_text().splitlines())
    start = time.perf_counter()
    subprocess.run(tuneloop + ["--output-dir", str(resumed), "--resume", "--quiet"], check=True, env=env)
    resume_s = time.perf_counter() - start

    from safetensors.torch import load_file

    a = load_file(str(work / "reference" / "model" / "model.safetensors"))
    b = load_file(str(resumed / "model" / "model.safetensors"))
    max_diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    ref = json.loads((work / "reference" / "results.json").read_text())
    res = json.loads((resumed / "results.json").read_text())
    records = [json.loads(line) for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in records if "train/loss" in r]
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M"), "killed_after_checkpoint": args.kill_after,
        "metrics_lines_at_kill": lines_at_kill, "resumed_from": res.get("resumed_from"),
        "max_abs_weight_difference": max_diff, "reference_eval": ref["eval"], "resumed_eval": res["eval"],
        "steps_logged_once": steps == list(range(1, ref["train"]["steps"] + 1)),
        "reference_wall_s": round(reference_s, 1), "resume_wall_s": round(resume_s, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0 if max_diff <= 1e-6 and report["steps_logged_once"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
