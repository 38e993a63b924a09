"""Kill-and-resume of a `setfit` package run in bench_small_data.py: the package's defaults on the docstrings set.

A package run on docstrings at 64 rows per class is about 3 hours on a 2-core CPU, longer than a working session,
so bench_small_data.py keeps each package run's folder and goes on from its last checkpoint when run again. This
checks that going on gives the run an uninterrupted one gives: an uninterrupted reference, then the same run
killed (SIGKILL) right after a checkpoint and run again through the benchmark's own run_setfit; compares the
predicted probabilities on the 600 scored rows, and the wall time the benchmark records (its parts, each counted
up to the checkpoint the next went on from) with the reference's. Checkpoints here come every --save-steps steps
(the package's default is 500) so that the check takes minutes. Writes benchmarks/results/<date>-setfit-resume.json.

    python benchmarks/check_setfit_resume.py --setfit-python /tmp/sf/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _setfit_package as setfit_package  # noqa: E402
import bench_small_data as bench  # noqa: E402
from _fewshot_sets import docstring_set  # noqa: E402
from _mrpc import default_model  # noqa: E402
from bench_train import machine_info, write_atomic  # noqa: E402

ARGS_LINE = 'args = TrainingArguments(seed=job["seed"], **pairs)\n'
PREDICT_LINE = 'json.dump([int(p) for p in model.predict(job["eval_texts"], as_numpy=True)], open(sys.argv[2], "w"))\n'


def patched_script(save_steps: int) -> str:
    script = setfit_package.SETFIT_SCRIPT
    if ARGS_LINE not in script or PREDICT_LINE not in script:
        raise SystemExit("_setfit_package.SETFIT_SCRIPT changed: update this check's patch")
    script = script.replace(ARGS_LINE, ARGS_LINE.replace("**pairs", f"save_steps={save_steps}, **pairs"))
    return script + ('import numpy\nnumpy.save(os.environ["CHECK_PROBA"], '
                     'model.predict_proba(job["eval_texts"], as_numpy=True))\n')


def kill_after(folder: str, step: int, marker: str, killed: dict) -> None:
    """SIGKILLs the package's process (found by `marker` in its command line) once checkpoint-`step` is whole."""
    state = os.path.join(folder, "checkpoints", f"checkpoint-{step}", "trainer_state.json")
    while not os.path.exists(state):
        time.sleep(0.05)
    time.sleep(0.5)                                  # the Trainer writes trainer_state.json last; let it close
    killed["at"] = time.time()
    subprocess.run(["pkill", "-KILL", "-f", marker], check=False)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--setfit-python", required=True)
    p.add_argument("--per-class", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--save-steps", type=int, default=20)
    p.add_argument("--kill-after", type=int, default=60, help="kill once the checkpoint of this step exists")
    p.add_argument("--out", default=os.path.join(HERE, "results", f"{time.strftime('%Y-%m-%d')}-setfit-resume.json"))
    args = p.parse_args()
    setfit_package.SETFIT_SCRIPT = patched_script(args.save_steps)
    data = docstring_set()
    train = bench.sample(data["pool"], args.per_class, args.seed)
    model, scratch = str(default_model()), tempfile.mkdtemp(prefix="check-setfit-resume-")
    probs = {}
    for name in ("reference", "resumed"):
        folder = os.path.join(scratch, name)
        os.environ["CHECK_PROBA"] = probs[name] = os.path.join(scratch, f"{name}.npy")
        killed: dict = {}
        if name == "resumed":
            watcher = threading.Thread(target=kill_after, daemon=True,
                                       args=(folder, args.kill_after, os.path.join(folder, "setfit-job.json"), killed))
            watcher.start()
            try:
                bench.run_setfit(train, data, args.seed, model, args.setfit_python, folder)
                raise SystemExit(f"the run finished before checkpoint-{args.kill_after} (fewer steps?)")
            except RuntimeError:                     # the killed part: its folder and checkpoints are kept
                pass
            first_part_s = killed["at"] - setfit_package.read_json(os.path.join(folder, "segments.json"))[0]["start"]
        start = time.time()
        row = bench.run_setfit(train, data, args.seed, model, args.setfit_python, folder)
        row.setdefault("wall_s", round(time.time() - start, 1))
        if name == "reference":
            reference = row
        else:
            resumed = row
    import numpy

    a, b = numpy.load(probs["reference"]), numpy.load(probs["resumed"])
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine_info(), "dataset": "docstrings",
        "per_class": args.per_class, "seed": args.seed, "save_steps": args.save_steps,
        "killed_after_checkpoint": args.kill_after, "resumed_at_steps": resumed.get("resumed_at_steps"),
        "max_abs_probability_difference": float(abs(a - b).max()),
        "same_predictions": bool((a.argmax(1) == b.argmax(1)).all()),
        "reference": reference, "resumed": resumed,
        "killed_part_s": round(first_part_s, 1),
        "note": "resumed.wall_s is what the benchmark records: the killed part up to the checkpoint it was resumed "
                "from, plus the resumed part; killed_part_s is the killed part up to the kill",
    }
    write_atomic(args.out, report)
    print(json.dumps(report, indent=2))
    return 0 if report["same_predictions"] and report["resumed_at_steps"] == [args.kill_after] else 1


if __name__ == "__main__":
    raise SystemExit(main())
