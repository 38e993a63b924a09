"""Scale benchmark: does tuneloop keep memory flat when the training file grows 10x?

For each size in --sizes it writes a synthetic MRPC-like sentence-pair file (jsonl, streamed to disk, fixed by
--seed) and runs `python -m tuneloop train` on it in a fresh process, with a fresh, empty Arrow cache
(HF_DATASETS_CACHE), so every run reads and tokenizes cold. It measures, from outside:

- the process's wall time and peak RSS (os.wait4 ru_maxrss: the largest resident set of the tuneloop process or
  of any one of its waited-for children, e.g. tokenization workers -- a maximum, not a sum);
- every 0.25 s, the resident memory of the whole process tree from /proc: the peak of the sum of PSS (shared
  pages split between the processes that share them), and the tuneloop process's own peak RssAnon (heap: Python
  objects, tensors) and RssFile (mapped files: the Arrow tables, libraries);

and takes from tuneloop itself what only it knows: the `data <split>: ...` log line (rows, seconds to read the
file into Arrow, seconds and rows/s to tokenize, processes used, each marked `(Arrow cache)` when the cache
served it) and results.json (training steps and seconds).

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/bench_scale.py                     # 40k and 400k rows
    python benchmarks/bench_scale.py --sizes 4000,40000 --max-steps 5 --out /tmp/scale_smoke.json   # smoke test

Acceptance: peak RSS of the largest size within --max-ratio (1.5) of the smallest's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shlex
import shutil
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import (WORK_DIR, default_out, log_tail, machine_info, machine_slug, run_child,  # noqa: E402
                         write_atomic)

DEFAULT_WORK = os.path.join(WORK_DIR, "scale")   # git-ignored (/benchmarks/work/)
GENERATOR_VERSION = 1                            # in the file names: bump when the generated text changes

# ---------------------------------------------------------------------------------------------- synthetic data
# MRPC-like news sentences: a subject, a reporting or action verb, objects, figures, places and times.
SUBJECTS = ("The company", "The government", "Officials", "The court", "Police", "The senator", "Analysts",
            "The bank", "Investors", "The agency", "Researchers", "The union", "Microsoft", "The president",
            "Shares of the company", "The board", "The state", "The department", "Prosecutors", "The network",
            "The airline", "Doctors", "The committee", "Sales", "The group", "The judge", "Authorities")
VERBS = ("said", "reported", "announced", "told reporters", "expects", "rose", "fell", "agreed", "denied",
         "confirmed", "warned", "plans", "will pay", "has filed", "was charged with", "declined to comment on",
         "approved", "rejected", "estimated", "posted", "cut", "raised", "launched", "sued", "acquired")
WORDS = ("profit quarter percent shares market price deal contract billion million dollars earnings revenue "
         "year week month officials report statement analysts investors stock trading plan program law bill "
         "vote decision case trial charges lawsuit court federal state city county police investigation "
         "attack troops war peace talks agreement leaders meeting summit election campaign support opposition "
         "tax budget spending cuts growth economy jobs workers union strike company firm bank chief executive "
         "officer director spokesman spokeswoman president minister government agency department system "
         "software computer network internet service customers users security virus research study patients "
         "drug treatment health hospital doctors school students teachers children families residents area "
         "new first last former second third major small large higher lower early late recent previous "
         "national international local public private financial economic political military legal "
         "said says told added according including during after before since while under over against "
         "about between into through on in at by for with from of to and the a an its their his her "
         "than more less most also only still about nearly almost some several many few other").split()
PLACES = ("in Washington", "in New York", "in London", "in California", "in Baghdad", "in Tokyo", "in Texas",
          "on Wall Street", "in Europe", "in Boston", "in Chicago", "in Paris", "in the region", "nationwide")
TIMES = ("on Monday", "on Tuesday", "on Wednesday", "on Thursday", "on Friday", "last week", "last year",
         "this month", "in the third quarter", "earlier this year", "yesterday", "in March", "in June")
SYNONYMS = {"said": "stated", "rose": "increased", "fell": "declined", "profit": "earnings", "company": "firm",
            "officials": "authorities", "percent": "per cent", "plans": "intends", "cut": "reduced",
            "shares": "stock", "report": "statement", "nearly": "almost", "billion": "bn", "told": "informed"}


def figure(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return f"{rng.randint(1, 99)} percent"
    if kind < 0.7:
        return f"${rng.randint(1, 999)}.{rng.randint(0, 9)} {rng.choice(('million', 'billion'))}"
    return f"{rng.randint(2, 20000):,}"


def sentence_words(rng: random.Random) -> list[str]:
    """10-40 words (MRPC's sentences are mostly 10-35): subject, verb, a body of words, a figure, place, time."""
    target = min(40, max(10, int(rng.triangular(10, 40, 20))))
    words = rng.choice(SUBJECTS).split() + rng.choice(VERBS).split()
    extras = [figure(rng).split(), rng.choice(PLACES).split(), rng.choice(TIMES).split()]
    rng.shuffle(extras)
    while len(words) < target:
        if extras and rng.random() < 0.2:
            words += extras.pop()
        else:
            words.append(rng.choice(WORDS))
    return words[:target]


def render(words: list[str]) -> str:
    text = " ".join(words)
    return text[0].upper() + text[1:] + " ."   # MRPC's text is tokenized: a space before the full stop


def paraphrase(rng: random.Random, words: list[str]) -> list[str]:
    """Label 1: the same content reworded -- synonyms, a few words dropped or added, a clause moved."""
    out = [SYNONYMS.get(w, w) if rng.random() < 0.5 else w for w in words]
    out = [w for w in out if rng.random() > 0.08 or len(out) < 12]
    for _ in range(rng.randint(0, 3)):
        out.insert(rng.randint(0, len(out)), rng.choice(WORDS))
    if len(out) > 12 and rng.random() < 0.5:
        cut = rng.randint(4, len(out) - 4)
        out = out[cut:] + [","] + out[:cut]
    return out[:40]


def related(rng: random.Random, words: list[str]) -> list[str]:
    """Label 0: about the same subject, but saying something else (MRPC's negatives overlap a lot too)."""
    keep = words[:rng.randint(2, max(3, len(words) // 2))]
    other = sentence_words(rng)
    return (keep + other[len(keep):])[:40] if rng.random() < 0.7 else other


def write_pairs(path: str, rows: int, seed: int) -> None:
    """Stream `rows` pairs to `path` (via a temporary file, renamed at the end): no list of the set in memory."""
    rng = random.Random(seed)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i in range(rows):
            first = sentence_words(rng)
            label = 1 if rng.random() < 0.68 else 0                  # MRPC: 68% paraphrases
            second = paraphrase(rng, first) if label else related(rng, first)
            f.write(json.dumps({"idx": i, "sentence1": render(first), "sentence2": render(second), "label": label})
                    + "\n")
    os.replace(tmp, path)


def data_file(folder: str, split: str, rows: int, seed: int) -> str:
    path = os.path.join(folder, f"{split}-{rows}-seed{seed}-v{GENERATOR_VERSION}.jsonl")
    if not os.path.isfile(path):
        t0 = time.perf_counter()
        write_pairs(path, rows, seed)
        print(f"  wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s)", flush=True)
    return path


# ---------------------------------------------------------------------------------------------- memory sampling
def _status(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, RssShmem of a process, in KiB (empty if it is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "RssAnon:", "RssFile:", "RssShmem:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def _pss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


class TreeSampler(threading.Thread):
    """Samples the memory of this process's children (the tuneloop run and its workers) until stopped."""

    def __init__(self, interval: float = 0.25):
        super().__init__(daemon=True)
        self.interval, self.stop_event = interval, threading.Event()
        self.peak = {"tree_pss_mb": 0.0, "tree_rss_mb": 0.0, "main_rss_anon_mb": 0.0, "main_rss_file_mb": 0.0,
                     "max_processes": 0}
        self.timeline: list[list[float]] = []   # [seconds, main VmRSS MB, main RssAnon MB, tree PSS MB, processes]
        self.available = os.path.isdir("/proc/self")

    def run(self):
        if not self.available:
            return
        me, start = os.getpid(), time.perf_counter()
        while not self.stop_event.wait(self.interval):
            pids = _descendants(me)
            if not pids:
                continue
            direct = _direct_children(me) & set(pids)
            main = min(direct) if direct else pids[0]   # the tuneloop process; the rest are its workers
            tree_pss = tree_rss = 0
            main_status = {}
            for pid in pids:
                status = _status(pid)
                if pid == main:
                    main_status = status
                tree_rss += status.get("VmRSS", 0)
                tree_pss += _pss_kib(pid) or status.get("VmRSS", 0)
            p = self.peak
            p["tree_pss_mb"] = max(p["tree_pss_mb"], tree_pss / 1024)
            p["tree_rss_mb"] = max(p["tree_rss_mb"], tree_rss / 1024)
            p["main_rss_anon_mb"] = max(p["main_rss_anon_mb"], main_status.get("RssAnon", 0) / 1024)
            p["main_rss_file_mb"] = max(p["main_rss_file_mb"], main_status.get("RssFile", 0) / 1024)
            p["max_processes"] = max(p["max_processes"], len(pids))
            self.timeline.append([round(time.perf_counter() - start, 2), round(main_status.get("VmRSS", 0) / 1024),
                                  round(main_status.get("RssAnon", 0) / 1024), round(tree_pss / 1024), len(pids)])

    def result(self) -> dict:
        out = {k: round(v, 1) for k, v in self.peak.items()} if self.available else {}
        if self.timeline:   # at most ~120 points
            step = max(1, len(self.timeline) // 120)
            out["timeline"] = {"columns": ["s", "main_rss_mb", "main_rss_anon_mb", "tree_pss_mb", "processes"],
                               "rows": self.timeline[::step] + ([self.timeline[-1]] if step > 1 else [])}
        return out


def _direct_children(pid: int) -> set[int]:
    found = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.update(int(c) for c in f.read().split())
    except OSError:
        pass
    return found


# ---------------------------------------------------------------------------------------------- one run
DATA_LINE = re.compile(r"data (?P<split>\S+): (?P<rows>\d+) rows \| read (?P<read_s>[\d.]+) s(?P<read_cached> "
                       r"\(Arrow cache\))? \| tokenized (?P<tokenized_rows>\d+) rows in (?P<tokenize_s>[\d.]+) s"
                       r"(?P<tokenize_cached> \(Arrow cache\))? \((?P<rows_per_s>\d+) rows/s, (?P<num_proc>\d+) "
                       r"process")


def data_lines(log_path: str) -> dict[str, dict]:
    """tuneloop's `data <split>: ...` lines (logged at INFO, so the run must not be --quiet)."""
    with open(log_path, errors="replace") as f:
        text = f.read()
    out = {}
    for m in DATA_LINE.finditer(text):
        out[m["split"]] = {"rows": int(m["rows"]), "read_s": float(m["read_s"]), "read_cached": bool(m["read_cached"]),
                           "tokenized_rows": int(m["tokenized_rows"]), "tokenize_s": float(m["tokenize_s"]),
                           "tokenize_cached": bool(m["tokenize_cached"]), "num_proc": int(m["num_proc"])}
    return out


def run_size(rows: int, args, files: dict, logs: str) -> dict:
    run_dir = os.path.join(args.work, "runs", f"rows-{rows}")
    cache = os.path.join(args.work, f"hf-datasets-cache-{rows}-{os.getpid()}")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    cmd = [sys.executable, "-m", "tuneloop", "train", "--train-file", files["train"], "--validation-file",
           files["validation"], "--model", "minilm", "--max-steps", str(args.max_steps), "--seed", str(args.seed),
           "--output-dir", run_dir, "--overwrite"]
    if args.num_proc:
        cmd += ["--num-proc", str(args.num_proc)]
    cmd += shlex.split(args.tuneloop_args)
    log_path = os.path.join(logs, f"rows-{rows}.log")
    record = {"rows": rows, "train_file": files["train"],
              "file_mb": round(os.path.getsize(files["train"]) / 1e6, 1), "cmd": shlex.join(cmd), "log": log_path}
    saved_cache = os.environ.get("HF_DATASETS_CACHE")
    os.environ["HF_DATASETS_CACHE"] = cache          # run_child passes os.environ on: a cold cache for this run
    sampler = TreeSampler()
    sampler.start()
    try:
        child = run_child(cmd, log_path, args.timeout)
    finally:
        sampler.stop_event.set()
        sampler.join()
        if saved_cache is None:
            os.environ.pop("HF_DATASETS_CACHE", None)
        else:
            os.environ["HF_DATASETS_CACHE"] = saved_cache
        if not args.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)
    record.update({"process_wall_s": child["process_wall_s"], "peak_rss_mb": child["process_peak_rss_mb"],
                   "user_cpu_s": child["user_cpu_s"], "sys_cpu_s": child["sys_cpu_s"], "sampled": sampler.result()})
    if child["returncode"] != 0:
        why = "timed out" if child["timed_out"] else f"exit status {child['returncode']}"
        record.update(ok=False, error=f"{why}; last lines of {log_path}:\n{log_tail(log_path)}")
        return record
    data = data_lines(log_path)
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    train = data.get("train")
    if train is None:
        record.update(ok=False, error=f"no `data train:` line in {log_path}")
        return record
    seconds = train["read_s"] + train["tokenize_s"]
    record.update({
        "read_s": train["read_s"], "tokenize_s": train["tokenize_s"], "read_tokenize_s": round(seconds, 3),
        "tokenize_rows_per_s": round(train["tokenized_rows"] / train["tokenize_s"], 1),
        "read_rows_per_s": round(train["rows"] / train["read_s"], 1),
        "read_tokenize_rows_per_s": round(train["rows"] / seconds, 1),
        "cold": not (train["read_cached"] or train["tokenize_cached"]),
        "tokenize_num_proc": train["num_proc"], "data": data,
        "train_steps": results["train"]["steps"], "train_s": results["train"].get("training_s"),
        "train_runtime_s": results["train"]["runtime_s"], "setup_s": results["train"].get("setup_s"),
        "eval_samples": results["eval"].get("num_samples"), "ok": True})
    if not args.keep_runs:
        shutil.rmtree(run_dir, ignore_errors=True)   # a saved model, ~90 MB
    return record


# ---------------------------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="40000,400000", help="training rows per run, comma-separated (default: "
                   "40000,400000); the memory ratio compares the largest with the smallest")
    p.add_argument("--validation-rows", type=int, default=2000, help="rows of the validation file (default: 2000)")
    p.add_argument("--max-steps", type=int, default=20, help="training steps per run (default: 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic data and of the runs (default: 0)")
    p.add_argument("--num-proc", type=int, default=None, help="pass --num-proc to tuneloop (default: its automatic "
                   "choice)")
    p.add_argument("--tuneloop-args", default="", help="extra tuneloop train flags, e.g. \"--max-length 128\"")
    p.add_argument("--max-ratio", type=float, default=1.5, help="acceptance: peak RSS of the largest size within this "
                   "factor of the smallest's (default: 1.5)")
    p.add_argument("--work", default=DEFAULT_WORK, help=f"data files, logs, run folders (default: {DEFAULT_WORK})")
    p.add_argument("--keep-cache", action="store_true", help="keep each run's Arrow cache folder")
    p.add_argument("--keep-runs", action="store_true", help="keep each run's output folder (a saved model)")
    p.add_argument("--timeout", type=float, default=None, help="kill a run after this many seconds")
    p.add_argument("--out", default=None, help="result JSON (default: benchmarks/results/<date>-<machine>-scale.json)")
    args = p.parse_args(argv)
    try:
        args.sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        p.error(f"--sizes: expected comma-separated numbers, got {args.sizes!r}")
    if not args.sizes or min(args.sizes) < 1:
        p.error("--sizes: give at least one positive number of rows")
    args.work = os.path.abspath(args.work)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    now = dt.datetime.now()
    machine = machine_info()
    out = os.path.abspath(args.out) if args.out else default_out(now.strftime("%Y-%m-%d"), machine, "-scale")
    data_dir = os.path.join(args.work, "data")
    logs = os.path.join(args.work, "logs", now.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}")
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(logs, exist_ok=True)
    result = {"date": now.isoformat(timespec="seconds"), "machine": machine,
              "command": shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])),
              "settings": {"sizes": args.sizes, "validation_rows": args.validation_rows, "max_steps": args.max_steps,
                           "seed": args.seed, "num_proc": args.num_proc, "tuneloop_args": args.tuneloop_args,
                           "max_ratio": args.max_ratio, "work": args.work},
              "environment": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM",
                                                              "RAYON_NUM_THREADS")},
              "niceness": os.nice(0),
              "notes": "Each size runs `python -m tuneloop train` in a fresh process with an empty HF_DATASETS_CACHE "
                       "(cold read and tokenization; `cold` checks tuneloop's own cache flags). peak_rss_mb: os.wait4 "
                       "ru_maxrss of the run (max over the process and its waited-for children, not a sum). "
                       "sampled: /proc every 0.25 s -- tree_pss_mb sums PSS over the process tree (tokenization "
                       "workers included); main_rss_anon_mb / main_rss_file_mb split the tuneloop process's RSS "
                       "into heap and mapped files (Arrow tables are memory-mapped and count as RssFile once "
                       "touched). read_s / tokenize_s / num_proc: tuneloop's `data train:` log line (train split "
                       "only). TOKENIZERS_PARALLELISM unset means tuneloop sets it to true (Rust threads per "
                       "process, one per core).",
              "complete": False, "runs": []}
    print(f"{len(args.sizes)} runs -> {out}\nlogs: {logs}\nmachine: {machine_slug(machine)} ({machine['cpu']}, "
          f"{machine['cores']} cores)", flush=True)
    validation = data_file(data_dir, "validation", args.validation_rows, args.seed + 1)
    for rows in args.sizes:
        print(f"[{rows} rows]", flush=True)
        files = {"train": data_file(data_dir, "train", rows, args.seed), "validation": validation}
        record = run_size(rows, args, files, logs)
        result["runs"].append(record)
        write_atomic(out, result)
        if record["ok"]:
            print(f"  read {record['read_s']:.1f} s + tokenize {record['tokenize_s']:.1f} s "
                  f"({record['tokenize_rows_per_s']:.0f} rows/s, {record['tokenize_num_proc']} proc, "
                  f"{'cold' if record['cold'] else 'CACHED'}), train {record['train_steps']} steps "
                  f"{record['train_s']:.1f} s, wall {record['process_wall_s']:.1f} s, peak RSS "
                  f"{record['peak_rss_mb']:.0f} MB (tree PSS {record['sampled'].get('tree_pss_mb', 0):.0f} MB, "
                  f"anon {record['sampled'].get('main_rss_anon_mb', 0):.0f} MB)", flush=True)
        else:
            print("  FAILED: " + record["error"], flush=True)
    ok = [r for r in result["runs"] if r["ok"]]
    if len(ok) >= 2 and len(ok) == len(result["runs"]):
        small, large = ok[0], ok[-1]
        ratio = large["peak_rss_mb"] / small["peak_rss_mb"]
        result["memory"] = {
            "compared": [small["rows"], large["rows"]],
            "peak_rss_ratio": round(ratio, 3), "max_ratio": args.max_ratio, "pass": ratio <= args.max_ratio,
            "tree_pss_ratio": round(large["sampled"]["tree_pss_mb"] / small["sampled"]["tree_pss_mb"], 3)
            if small["sampled"].get("tree_pss_mb") else None,
            "main_rss_anon_ratio": round(large["sampled"]["main_rss_anon_mb"] / small["sampled"]["main_rss_anon_mb"],
                                         3) if small["sampled"].get("main_rss_anon_mb") else None}
        m = result["memory"]
        print(f"peak RSS {large['rows']} / {small['rows']} rows: {ratio:.3f} (limit {args.max_ratio}) -> "
              f"{'PASS' if m['pass'] else 'FAIL'}; tree PSS ratio {m['tree_pss_ratio']}, heap (RssAnon) ratio "
              f"{m['main_rss_anon_ratio']}")
    result["complete"] = True
    write_atomic(out, result)
    print(f"results: {out}")
    return 0 if ok and len(ok) == len(result["runs"]) and result.get("memory", {}).get("pass", True) else 1


if __name__ == "__main__":
    raise SystemExit(main())
