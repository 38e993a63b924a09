"""Benchmark harness: the course-chapter baseline vs tuneloop vs the HF Trainer on GLUE MRPC.

For each seed it runs every implementation once, alternating (baseline, tuneloop, trainer[, tuneloop_fast]) so
that slow drifts of the machine hit all of them alike. Each run is its own subprocess; the harness measures
the process's wall time and peak RSS itself (os.wait4 on the child), reads what the run reports, and writes
everything to one JSON file (rewritten atomically after every run, so a long benchmark keeps what it did).

    python benchmarks/bench_train.py                       # 3 seeds x 3 implementations (long!)
    python benchmarks/bench_train.py --seeds 1 --impls baseline,trainer --max-train-samples 64 --epochs 1 \
        --out /tmp/bench_smoke.json                        # smoke test
    git worktree add /tmp/before <commit>                  # this tree against an earlier one, side by side:
    python benchmarks/bench_train.py --reference-src /tmp/before \
        --impls tuneloop,tuneloop_ref,tuneloop_fast,tuneloop_ref_fast
    python benchmarks/bench_train.py --impls tuneloop,tuneloop_alt --alt-args "--mixed-precision bf16"
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_DATA_DIR = os.path.normpath(os.path.join(REPO, "..", "shared", "glue", "MRPC"))
WORK_DIR = os.path.join(REPO, "benchmarks", "work")  # git-ignored: logs and per-run reports
# the order runs alternate in; tuneloop_ref*: the same runs of the checkout given by --reference-src;
# tuneloop_alt: this tree's tuneloop with --alt-args added (one setting against its default, side by side)
IMPLS = ("baseline", "tuneloop", "tuneloop_alt", "tuneloop_ref", "trainer", "tuneloop_fast", "tuneloop_ref_fast")
SUMMARY_METRICS = ("wall_s", "train_loop_s", "samples_per_s", "tokens_per_s", "accuracy", "f1", "peak_rss_mb")


# ---------------------------------------------------------------------------------------------- machine
def ram_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def probe_torch() -> dict:
    """torch's version and GPU as the runs will see them, asked in a child so the harness stays light."""
    code = ("import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
            "'gpu': torch.cuda.get_device_name(0) if c else None, 'gpu_count': torch.cuda.device_count() if c "
            "else 0}))")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {"torch": version("torch"), "gpu": None, "gpu_count": 0}


def machine_info() -> dict:
    probe = probe_torch()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    from tuneloop.runtime.machine import cpu_identity, cpu_name

    return {"cpu": cpu_name(), **cpu_identity(), "cores": os.cpu_count(), "usable_cores": usable, "ram_gb": ram_gb(),
            "platform": platform.platform(), "python": platform.python_version(), "torch": probe["torch"],
            "transformers": version("transformers"), "datasets": version("datasets"),
            "accelerate": version("accelerate"), "tuneloop": version("tuneloop"),
            "gpu": probe["gpu"], "gpu_count": probe["gpu_count"]}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def machine_slug(machine: dict) -> str:
    """`xeon-2c`, `epyc-16c`, `apple-m2-8c`, or the GPU (`nvidia-h100-80gb-hbm3`)."""
    if machine["gpu"]:
        name = slug(machine["gpu"])
        return name + (f"-x{machine['gpu_count']}" if machine["gpu_count"] > 1 else "")
    cpu = re.sub(r"\((r|tm)\)|\bcpu\b|@.*$|\b\d+(-core)?\s+processor\b|\bprocessor\b", " ", machine["cpu"].lower())
    words = slug(cpu).split("-")
    family = next((w for w in ("xeon", "epyc", "ryzen", "threadripper", "neoverse", "graviton") if w in words), None)
    if family is None:
        if "apple" in words and len(words) > 1:
            family = "-".join(words[:2])
        elif "core" in words and words.index("core") + 1 < len(words):
            family = words[words.index("core") + 1].split("-")[0]   # Intel Core i7-... -> i7
        else:
            family = next((w for w in words if w not in ("intel", "amd", "genuine", "authentic", "")), "cpu")
    return f"{family}-{machine['cores']}c"


# ---------------------------------------------------------------------------------------------- running
def run_child(cmd: list[str], log_path: str, timeout: float | None, extra_env: dict | None = None) -> dict:
    """Run cmd with its output in log_path; the process's wall time and peak RSS come from os.wait4, which
    returns the resource usage of exactly this child (ru_maxrss: the largest resident set of the child or of
    any of its own waited-for children -- a maximum over processes, not a sum)."""
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra_env or {})
    with open(log_path, "wb") as log:
        log.write(("$ " + shlex.join(cmd) + "\n").encode())
        log.flush()
        start, started_at = time.perf_counter(), time.time()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
                                env=env)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            while True:
                try:
                    _, status, usage = os.wait4(proc.pid, 0)
                    break
                except InterruptedError:
                    continue
                except KeyboardInterrupt:
                    proc.kill()
                    raise
        finally:
            if timer:
                timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
    rss = usage.ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else usage.ru_maxrss / 1024
    return {"returncode": proc.returncode, "timed_out": timed_out.is_set(), "process_wall_s": round(wall, 3),
            "process_started_at": started_at,
            "process_peak_rss_mb": round(rss, 1), "user_cpu_s": round(usage.ru_utime, 2),
            "sys_cpu_s": round(usage.ru_stime, 2)}


def log_tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def build_command(impl: str, seed: int, args, report_path: str, tl_out: str) -> list[str]:
    common = []
    if args.epochs is not None:
        common += ["--epochs", str(args.epochs)]
    if args.max_train_samples is not None:
        common += ["--max-train-samples", str(args.max_train_samples)]
    if impl in ("baseline", "trainer"):
        script = "baseline_chapter.py" if impl == "baseline" else "trainer_peer.py"
        return [sys.executable, os.path.join(HERE, script), "--data-dir", args.data_dir, "--seed", str(seed),
                "--output", report_path, *common]
    cmd = [sys.executable, "-m", "tuneloop", "train", "--task", "mrpc", "--data-dir", args.data_dir, "--model",
           "minilm", "--seed", str(seed), "--output-dir", tl_out, "--quiet", *common]
    if impl in ("tuneloop_fast", "tuneloop_ref_fast"):
        cmd += ["--recipe", "fast"]
    return cmd + shlex.split(args.tuneloop_args) + (shlex.split(args.alt_args) if impl == "tuneloop_alt" else [])


def read_tuneloop(run_dir: str, child: dict) -> dict:
    with open(os.path.join(run_dir, "results.json")) as f:
        res = json.load(f)
    ev, tr = res["eval"], res["train"]
    # every evaluation's F1 and when it was logged, in seconds from process start: the time-to-quality curve
    curve = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if "eval/f1" in rec:
                curve.append([round(rec["time"] - child["process_started_at"], 2), rec["eval/f1"], rec["step"]])
    out = {"epochs": tr.get("epochs"), "steps": tr.get("steps"), "train_samples": tr.get("num_samples"),
           "eval_samples": ev.get("num_samples"), "eval_curve": curve,
           # training time without the evaluations, like the baseline's train_loop_s
           "train_loop_s": tr.get("training_s", tr.get("runtime_s")),
           "samples_per_s": tr.get("samples_per_second"), "accuracy": ev.get("accuracy"), "f1": ev.get("f1"),
           "eval_loss": ev.get("loss"),
           # no inner clock for the whole process: its wall time and peak RSS are what the harness measured
           "wall_s": child["process_wall_s"], "peak_rss_mb": child["process_peak_rss_mb"]}
    for key, ours in (("tokens_per_second", "tokens_per_s"), ("padded_tokens_per_second", "padded_tokens_per_s")):
        if key in tr:
            out[ours] = tr[key]
    out["tuneloop_results"] = {"eval": ev, "train": tr}
    if "timeline" in res:         # where the process's seconds went outside the loop (load, evaluations, saves)
        out["timeline"] = res["timeline"]
    return out


def run_one(impl: str, seed: int, args, work: str) -> dict:
    name = f"{impl}-seed{seed}"
    report_path = os.path.join(work, name + ".json")
    log_path = os.path.join(work, name + ".log")
    tl_parent = tempfile.mkdtemp(prefix=f"bench_{name}_")
    tl_out = os.path.join(tl_parent, "run")
    cmd = build_command(impl, seed, args, report_path, tl_out)
    record = {"impl": impl, "seed": seed}
    try:
        # tuneloop_ref*: the checkout at --reference-src comes first on the path (before the installed tuneloop)
        extra = {"PYTHONPATH": os.path.join(args.reference_src, "src")} if impl.startswith("tuneloop_ref") else None
        child = run_child(cmd, log_path, args.timeout, extra)
        record.update(child)
        record["cmd"] = shlex.join(cmd)
        record["log"] = log_path
        if child["returncode"] != 0:
            why = "timed out" if child["timed_out"] else f"exit status {child['returncode']}"
            raise RuntimeError(f"{why}; last lines of {log_path}:\n{log_tail(log_path)}")
        if impl.startswith("tuneloop"):
            record.update(read_tuneloop(tl_out, child))
        else:
            with open(report_path) as f:
                reported = json.load(f)
            record.update({k: v for k, v in reported.items() if k not in ("impl", "seed")})
        record["ok"] = True
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        record["ok"] = False
        record["error"] = str(e)
    finally:
        shutil.rmtree(tl_parent, ignore_errors=True)  # tuneloop's run folder holds a saved model
    return record


# ---------------------------------------------------------------------------------------------- summary
def stats(values: list[float]) -> dict:
    return {"mean": round(statistics.fmean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0, "n": len(values)}


def summarize(runs: list[dict], impls: list[str]) -> dict:
    summary = {}
    for impl in impls:
        ok = [r for r in runs if r["impl"] == impl and r.get("ok")]
        entry = {"runs": len(ok), "failed": sum(1 for r in runs if r["impl"] == impl and not r.get("ok"))}
        for metric in SUMMARY_METRICS:
            # wall time and peak RSS: the harness's own measurement of the process, the same for every impl
            key = {"wall_s": "process_wall_s", "peak_rss_mb": "process_peak_rss_mb"}.get(metric, metric)
            values = [r[key] for r in ok if isinstance(r.get(key), (int, float))]
            if values:
                entry[metric] = stats(values)
        summary[impl] = entry
    base = summary.get("baseline", {})
    for impl, entry in summary.items():
        if impl == "baseline":
            continue
        ratios = {}
        if "samples_per_s" in entry and "samples_per_s" in base and base["samples_per_s"]["mean"]:
            ratios["samples_per_s_ratio"] = round(entry["samples_per_s"]["mean"] / base["samples_per_s"]["mean"], 3)
        if "wall_s" in entry and "wall_s" in base and base["wall_s"]["mean"]:
            ratios["wall_time_ratio"] = round(entry["wall_s"]["mean"] / base["wall_s"]["mean"], 3)
        f1_target = base.get("f1", {}).get("mean")
        if impl.startswith("tuneloop") and f1_target is not None:
            # time to quality: seconds from process start to the first evaluation at or above the baseline's mean F1
            times = []
            for r in runs:
                if r["impl"] == impl and r.get("ok"):
                    hit = next((t for t, f1, _ in r.get("eval_curve", []) if f1 >= f1_target), None)
                    times.append(hit)
            entry["time_to_baseline_f1_s"] = times
            reached = [t for t in times if t is not None]
            if reached and len(reached) == len(times) and "wall_s" in base:
                ratios["time_to_baseline_f1_vs_baseline_wall"] = round(statistics.fmean(reached) /
                                                                       base["wall_s"]["mean"], 3)
        if ratios:
            entry["vs_baseline"] = ratios
    return summary


def table(summary: dict) -> str:
    def cell(entry, metric, fmt):
        s = entry.get(metric)
        if not s:
            return "-"
        return f"{s['mean']:{fmt}}" + (f"±{s['std']:{fmt}}" if s["n"] > 1 else "")

    head = ["impl", "ok", "wall s", "train s", "samples/s", "tokens/s", "accuracy", "f1", "RSS MB",
            "samp/s ×", "wall ×"]
    rows = [head]
    for impl, e in summary.items():
        vs = e.get("vs_baseline", {})
        rows.append([impl, f"{e['runs']}/{e['runs'] + e['failed']}", cell(e, "wall_s", ".1f"),
                     cell(e, "train_loop_s", ".1f"), cell(e, "samples_per_s", ".2f"), cell(e, "tokens_per_s", ".0f"),
                     cell(e, "accuracy", ".4f"), cell(e, "f1", ".4f"), cell(e, "peak_rss_mb", ".0f"),
                     f"{vs['samples_per_s_ratio']:.2f}" if "samples_per_s_ratio" in vs else "-",
                     f"{vs['wall_time_ratio']:.2f}" if "wall_time_ratio" in vs else "-"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def write_atomic(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def finish(out: str, result: dict, work: str | None = None, shown: dict | None = None) -> int:
    """The end of a benchmark script: the results written atomically, `shown` printed (the summary), where the
    file is, the scratch folder removed; returns the exit status 0."""
    write_atomic(out, result)
    if shown is not None:
        print(json.dumps(shown, indent=2))
    print(f"results: {out}")
    if work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def default_out(date: str, machine: dict, suffix: str = "") -> str:
    base = os.path.join(HERE, "results", f"{date}-{machine_slug(machine)}{suffix}")
    path, n = base + ".json", 2
    while os.path.exists(path):  # never overwrite an earlier benchmark of the same day
        path, n = f"{base}-{n}.json", n + 1
    return path


# ---------------------------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"GLUE MRPC folder (default: {DEFAULT_DATA_DIR})")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="seeds, one run of each impl per seed")
    p.add_argument("--impls", default="baseline,tuneloop,trainer",
                   help=f"comma-separated subset of {','.join(IMPLS)} (default: baseline,tuneloop,trainer)")
    p.add_argument("--with-fast", action="store_true", help="also run tuneloop --recipe fast (as tuneloop_fast)")
    p.add_argument("--tuneloop-args", default="", help='extra arguments for tuneloop, e.g. "--weight-decay 0"')
    p.add_argument("--alt-args", default="", help='tuneloop_alt: arguments added to tuneloop\'s, e.g. '
                   '"--mixed-precision bf16"')
    p.add_argument("--max-train-samples", type=int, default=None, help="first N training examples (smoke tests)")
    p.add_argument("--epochs", type=int, default=None, help="epochs for every impl (default: each one's, 3)")
    p.add_argument("--timeout", type=float, default=None, help="kill a run after this many seconds")
    p.add_argument("--reference-src", default=None, metavar="DIR",
                   help="a checkout of tuneloop (e.g. a git worktree of an earlier commit) for tuneloop_ref and "
                        "tuneloop_ref_fast: the same runs, side by side with this tree's")
    p.add_argument("--out", default=None, help="result JSON (default: benchmarks/results/<date>-<machine>.json)")
    args = p.parse_args(argv)
    impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    unknown = [i for i in impls if i not in IMPLS]
    if unknown or not impls:
        p.error(f"--impls: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(IMPLS)}")
    if ("tuneloop_alt" in impls) != bool(args.alt_args.strip()):
        p.error("tuneloop_alt and --alt-args go together: the arguments it adds to tuneloop's")
    if args.with_fast and "tuneloop_fast" not in impls:
        impls.append("tuneloop_fast")
    if any(i.startswith("tuneloop_ref") for i in impls) and not (
            args.reference_src and os.path.isdir(os.path.join(args.reference_src, "src", "tuneloop"))):
        p.error("tuneloop_ref and tuneloop_ref_fast need --reference-src DIR: a checkout with src/tuneloop")
    args.impls = [i for i in IMPLS if i in impls]  # always alternate in the fixed order
    args.data_dir = os.path.abspath(args.data_dir)
    if not os.path.isfile(os.path.join(args.data_dir, "train.tsv")):
        p.error(f"--data-dir {args.data_dir}: no train.tsv there")
    return args


def git_commit(folder: str | None) -> str | None:
    if not folder:
        return None
    try:
        out = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv=None) -> int:
    args = parse_args(argv)
    now = dt.datetime.now()
    machine = machine_info()
    out = os.path.abspath(args.out) if args.out else default_out(now.strftime("%Y-%m-%d"), machine)
    work = os.path.join(WORK_DIR, now.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}")
    os.makedirs(work, exist_ok=True)
    result = {"date": now.isoformat(timespec="seconds"), "machine": machine,
              "command": shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])),
              "settings": {"seeds": args.seeds, "impls": args.impls, "epochs": args.epochs,
                           "max_train_samples": args.max_train_samples, "tuneloop_args": args.tuneloop_args,
                           "alt_args": args.alt_args,
                           "data_dir": args.data_dir, "reference_src": args.reference_src,
                           "reference_commit": git_commit(args.reference_src), "commit": git_commit(REPO)},
              "notes": "summary wall_s and peak_rss_mb are measured by the harness for every process (os.wait4); "
                       "per-run wall_s/peak_rss_mb are the scripts' own (tuneloop: the harness's). tuneloop's "
                       "train_loop_s is results.json train.training_s (evaluations excluded).",
              "complete": False, "runs": [], "summary": {}}
    total = len(args.seeds) * len(args.impls)
    print(f"{total} runs -> {out}\nlogs: {work}\nmachine: {machine_slug(machine)} ({machine['cpu']}, "
          f"{machine['cores']} cores, gpu {machine['gpu']})", flush=True)
    done = 0
    for seed in args.seeds:
        for impl in args.impls:
            done += 1
            print(f"[{done}/{total}] seed {seed} {impl} ...", end=" ", flush=True)
            record = run_one(impl, seed, args, work)
            result["runs"].append(record)
            result["summary"] = summarize(result["runs"], args.impls)
            write_atomic(out, result)
            if record["ok"]:
                print(f"{record['process_wall_s']:.1f}s wall, {record.get('train_loop_s', float('nan')):.1f}s "
                      f"train, {record.get('samples_per_s') or float('nan'):.2f} samples/s, "
                      f"acc {record.get('accuracy', float('nan')):.4f}, f1 {record.get('f1', float('nan')):.4f}, "
                      f"{record['process_peak_rss_mb']:.0f} MB", flush=True)
            else:
                print("FAILED: " + record["error"], flush=True)
    result["complete"] = True
    write_atomic(out, result)
    print()
    print(table(result["summary"]))
    print(f"\nresults: {out}")
    return 0 if all(r["ok"] for r in result["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
