"""`tuneloop distill` on real data: a 3-layer student (`--student-layers 3`: layers 0, 2 and 4 of the fine-tuned 6-layer
MiniLM teacher itself, DistilBERT's initialisation, which `--student-init auto` picks for a teacher fine-tuned from
--model; results before 2026-11-27 08:20 cut them from the pretrained all-MiniLM-L6-v2) distilled from that teacher,
against the same 3-layer student trained on the gold labels alone, 3 seeds, scored on rows neither model trained on.

Data (both real):
  mrpc        GLUE MRPC as shipped (../shared/glue/MRPC). The teacher is fine-tuned on all of train.tsv (3,668 pairs,
              seed 42, 1 epoch). The student gets LABELLED rows of train.tsv (a seeded random sample, their labels
              kept) and UNLABELLED further rows of train.tsv as texts (labels dropped before tuneloop sees them);
              scored on dev.tsv (408 pairs).
  docstrings  benchmarks/_fewshot_sets.py's docstring_set: the first paragraph of docstrings of six installed
              packages (numpy, scipy, pandas, scikit-learn, networkx, sympy), label = package, 100 per package held
              out for scoring. The teacher is fine-tuned on TEACHER_ROWS rows of the rest (the pool; 3 epochs); the
              student gets LABELLED rows of the pool with labels and up to UNLABELLED further pool rows without.

Every model is validated on the scored rows during training (tuneloop needs a validation split), but nothing is chosen
on them: the final model is kept (not the best evaluation), decisions are argmax (the fitted temperature changes
probabilities, not the argmax), and every option is fixed in advance (--recipe fast, T = 2, gold weight 0.5, the
defaults). The labels-only student is a `tuneloop train` run on the labelled rows from the same initial weights
(OUT/distill/student_init), options and seed, with tuneloop's small-data settings for its rows (at least 200 optimizer
steps and 10 epochs), as `tuneloop distill --compare-labels-only` trains it. (Results before 2026-11-26 23:00 trained
it 10 epochs, 40 steps, in folders named labels-only-SEED: it stayed at chance.) Accuracy phases run unlocked; the
rows/s phase runs under the lock of /tmp/tuneloop-timing.lock (flock): the teacher and each student labelling the
scored rows, after a warm-up, best of 3 passes, in this process, the same threads.

    python benchmarks/bench_distill.py --datasets docstrings --output /tmp/docstrings.json    # one after the other:
    python benchmarks/bench_distill.py --datasets mrpc --output /tmp/mrpc.json    # two at once on 2 cores: ~5x slower
    python benchmarks/bench_distill.py --merge /tmp/docstrings.json /tmp/mrpc.json \
        --output benchmarks/results/2026-11-26-epyc-2c-distill.json
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import json
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _mrpc import read_rows  # noqa: E402

DEFAULT_DATA_DIR = os.environ.get("MRPC_DIR", "/work/shared/glue/MRPC")

SEEDS = (42, 43, 44)
LOCK = "/tmp/tuneloop-timing.lock"
COMMON = {"recipe": "fast", "max_length": 128, "eval_every": None, "report": False, "quiet": True,
          "baseline": "none", "model": "minilm"}
# sized for a shared 2-core CPU (under an hour in all): the student trains tuneloop distill's default epochs (at least
# 500 steps; --student-epochs N sets them), the teacher 3 on
# docstrings (1 epoch gave 0.378 accuracy there: too weak a teacher to mean anything) and 1 on MRPC (3,668 pairs)
SIZES = {"mrpc": {"labelled": 300, "unlabelled": 1200},
         "docstrings": {"labelled": 120, "unlabelled": 1000, "teacher_rows": 1200}}
TEACHER = {"mrpc": {"epochs": 1}, "docstrings": {"epochs": 3}}
LABELS_ONLY = "labels-only-defaults"     # its folder: tuneloop's own small-data settings (what --compare-labels-only runs)
STUDENT: dict = {}          # --student-epochs N: the distilled student's epochs


def write(path: Path, header: list[str], rows: list[list]) -> str:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def mrpc_files(folder: Path, labelled: int, unlabelled: int) -> dict:
    train, dev = read_rows(f"{DEFAULT_DATA_DIR}/train.tsv"), read_rows(f"{DEFAULT_DATA_DIR}/dev.tsv")
    rows = list(zip(train["sentence1"], train["sentence2"], train["label"]))
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    gold, rest = [rows[i] for i in order[:labelled]], [rows[i] for i in order[labelled:labelled + unlabelled]]
    header = ["sentence1", "sentence2", "label"]
    return {"teacher_train": write(folder / "teacher_train.csv", header, [list(r) for r in rows]),
            "labelled": write(folder / "labelled.csv", header, [list(r) for r in gold]),
            "unlabeled": write(folder / "unlabeled.csv", header[:2], [[a, b] for a, b, _ in rest]),
            "dev": write(folder / "dev.csv", header, [list(r) for r in zip(dev["sentence1"], dev["sentence2"],
                                                                            dev["label"])]),
            "rows": {"teacher_train": len(rows), "labelled": len(gold), "unlabeled": len(rest),
                     "scored": len(dev["label"])},
            "source": f"{DEFAULT_DATA_DIR}: the teacher on all of train.tsv; the student on {labelled} train.tsv rows "
                      f"with labels and the next {unlabelled} without (train.tsv shuffled with random.Random(0)); "
                      "scored on dev.tsv"}


def docstring_files(folder: Path, labelled: int, unlabelled: int, teacher_rows: int) -> dict:
    from _fewshot_sets import docstring_set

    data = docstring_set()
    pool = list(data["pool"])
    random.Random(0).shuffle(pool)
    teacher, gold, rest = pool[:teacher_rows], pool[:labelled], pool[labelled:labelled + unlabelled]
    header = ["text", "label"]
    return {"teacher_train": write(folder / "teacher_train.csv", header, [[x, y] for x, y in teacher]),
            "labelled": write(folder / "labelled.csv", header, [[x, y] for x, y in gold]),
            "unlabeled": write(folder / "unlabeled.csv", header[:1], [[x] for x, _ in rest]),
            "dev": write(folder / "dev.csv", header, [[x, y] for x, y in data["eval"]]),
            "rows": {"teacher_train": len(teacher), "labelled": len(gold), "unlabeled": len(rest),
                     "scored": len(data["eval"])},
            "versions": data["versions"],
            "source": data["source"] + f"; pool shuffled with random.Random(0): the teacher trains on its first "
                      f"{teacher_rows} rows (labels), the student on its first {labelled} (labels) and the next "
                      f"{unlabelled} (labels dropped)"}


def train_teacher(files: dict, out: Path, options: dict) -> dict:
    import tuneloop

    if (out / "results.json").is_file():
        return json.loads((out / "results.json").read_text())
    started = time.perf_counter()
    r = tuneloop.train(train_file=files["teacher_train"], validation_file=files["dev"], output_dir=str(out),
                       seed=42, overwrite=True, **{**COMMON, **options})
    return {**dict(r), "wall_s": time.perf_counter() - started}


def distill_seed(files: dict, teacher: Path, out: Path, seed: int, cache: Path | None) -> dict:
    import tuneloop

    if (out / "results.json").is_file() and "distillation" in json.loads((out / "results.json").read_text()):
        return json.loads((out / "results.json").read_text())
    if cache is not None and cache.is_file():       # the teacher's outputs, computed once for the first seed
        (out / "distill").mkdir(parents=True, exist_ok=True)
        shutil.copy(cache, out / "distill" / "soft_targets.npz")
    started = time.perf_counter()
    r = tuneloop.distill(teacher=str(teacher / "model"), unlabeled_file=files["unlabeled"],
                         train_file=files["labelled"], validation_file=files["dev"], output_dir=str(out),
                         student_layers=3, seed=seed, overwrite=True, compare_labels_only=False,
                         **{**COMMON, **STUDENT})
    return {**dict(r), "wall_s": time.perf_counter() - started}


def labels_only(files: dict, student: Path, out: Path, seed: int) -> dict:
    """The same 3-layer student (the same initial weights, options and seed) on the labelled rows alone, with
    tuneloop's small-data settings for them (at least 200 optimizer steps and 10 epochs), fine-tuned in the loop
    (--method finetune): what `tuneloop distill --compare-labels-only` trains."""
    import tuneloop

    if (out / "results.json").is_file():
        return json.loads((out / "results.json").read_text())
    started = time.perf_counter()
    r = tuneloop.train(train_file=files["labelled"], validation_file=files["dev"], output_dir=str(out), seed=seed,
                       overwrite=True, method="finetune", **{**COMMON, "model": str(student)})
    return {**dict(r), "wall_s": time.perf_counter() - started}


def rows_per_s(folders: dict, dev: str, repeats: int = 3) -> dict:
    """Each model labelling the scored rows, best of `repeats` passes after a warm-up, under the timing lock."""
    import tuneloop
    from tuneloop.experiments.teacher import read_texts

    items = read_texts(dev, None, None, True).items
    out = {"load_before": os.getloadavg()}
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out["load_locked"] = os.getloadavg()
        for name, folder in folders.items():
            with tuneloop.load(folder) as clf:
                clf.logits(items[:64])
                times = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    clf.logits(items)
                    times.append(time.perf_counter() - started)
            out[name] = {"rows_per_s": round(len(items) / min(times), 1), "seconds": [round(s, 3) for s in times]}
        out["load_after"] = os.getloadavg()
    return out


def summary(values: list[float]) -> dict:
    return {"mean": statistics.mean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "values": values}


def run_dataset(name: str, files: dict, work: Path) -> dict:
    teacher_dir = work / "teacher"
    teacher = train_teacher(files, teacher_dir, TEACHER[name])
    students, cache = {}, None
    baseline = {}
    for seed in SEEDS:
        students[seed] = distill_seed(files, teacher_dir, work / f"student-{seed}", seed, cache)
        cache = work / f"student-{SEEDS[0]}" / "distill" / "soft_targets.npz"
        baseline[seed] = labels_only(files, work / f"student-{seed}" / "distill" / "student_init",
                                     work / f"{LABELS_ONLY}-{seed}", seed)
    folders = {"teacher": str(teacher_dir / "model")}
    for seed in SEEDS:
        folders[f"student-{seed}"] = str(work / f"student-{seed}" / "model")
        folders[f"labels_only-{seed}"] = str(work / f"{LABELS_ONLY}-{seed}" / "model")
    timing = rows_per_s(folders, files["dev"])
    d = {seed: s["distillation"] for seed, s in students.items()}
    acc = {"student": summary([d[s]["student"]["metrics"]["accuracy"] for s in SEEDS]),
           "labels_only": summary([baseline[s]["eval"]["accuracy"] for s in SEEDS])}
    teacher_acc = d[SEEDS[0]]["teacher"]["metrics"]["accuracy"]
    speed = [timing[f"student-{s}"]["rows_per_s"] / timing["teacher"]["rows_per_s"] for s in SEEDS]
    kept = summary([a / teacher_acc for a in acc["student"]["values"]])
    margin = acc["student"]["mean"] - acc["labels_only"]["mean"]
    return {"data": {k: v for k, v in files.items() if k in ("rows", "source", "versions")},
            "teacher": {"accuracy": teacher_acc, "metrics": d[SEEDS[0]]["teacher"]["metrics"],
                        "parameters": d[SEEDS[0]]["teacher"]["parameters"], "train": teacher.get("train"),
                        "options": TEACHER[name],
                        "rows_per_s": timing["teacher"]["rows_per_s"]},
            "student_accuracy": acc["student"], "labels_only_accuracy": acc["labels_only"],
            "student_parameters": d[SEEDS[0]]["student"]["parameters"],
            "kept": kept, "speedup": summary(speed),
            "agreement": summary([d[s]["student_vs_teacher"]["agreement"] for s in SEEDS]),
            "margin_over_labels_only": margin,
            "targets": {"kept_97": kept["mean"] >= 0.97, "speedup_1_8": min(speed) >= 1.8,
                        "beats_labels_only_by_more_than_std": margin > max(acc["student"]["std"],
                                                                           acc["labels_only"]["std"])},
            "timing": timing,
            "runs": {str(seed): {"student": d[seed]["student"], "labels_only": baseline[seed]["eval"],
                                 "labels_only_train": baseline[seed]["train"],
                                 "agreement": d[seed]["student_vs_teacher"], "student_train": students[seed]["train"],
                                 "wall_s": students[seed].get("wall_s")} for seed in SEEDS}}


def retime(path: Path, work: Path) -> None:
    """The rows/s phase again, e.g. once the machine is quieter; the first measurement is kept beside it."""
    result = json.loads(path.read_text())
    for name, r in result["datasets"].items():
        folders = {"teacher": str(work / name / "teacher" / "model")}
        for seed in SEEDS:
            folders[f"student-{seed}"] = str(work / name / f"student-{seed}" / "model")
            folders[f"labels_only-{seed}"] = str(work / name / f"{LABELS_ONLY}-{seed}" / "model")
        timing = rows_per_s(folders, str(work / name / "dev.csv"))
        speed = [timing[f"student-{s}"]["rows_per_s"] / timing["teacher"]["rows_per_s"] for s in SEEDS]
        r.setdefault("timing_first", r["timing"])
        r.update(timing=timing, speedup=summary(speed))
        r["teacher"]["rows_per_s"] = timing["teacher"]["rows_per_s"]
        r["targets"]["speedup_1_8"] = min(speed) >= 1.8
        print(name, r["speedup"], timing["load_locked"], timing["load_after"], flush=True)
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")


def machine() -> dict:
    import platform

    import torch
    import transformers

    from tuneloop.runtime.machine import cpu_identity, cpu_name

    return {"cpu": cpu_name(), **cpu_identity(), "cores": os.cpu_count(), "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "threads": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/distill-bench", help="work folder (runs are kept and reused)")
    parser.add_argument("--datasets", default="docstrings,mrpc")
    parser.add_argument("--output", default=None, help="results JSON")
    parser.add_argument("--student-epochs", type=int, default=None, help="the distilled student's epochs (default: "
                        "tuneloop distill's: enough for its 500-step floor)")
    parser.add_argument("--feature-weight", type=float, default=None, help="the distilled student's --feature-weight "
                        "(default: tuneloop distill's)")
    parser.add_argument("--temperature", type=float, default=None, help="the distilled student's --temperature "
                        "(default: tuneloop distill's)")
    parser.add_argument("--unlabelled", type=int, default=None, help="the student's unlabelled texts (default: "
                        "SIZES' per data set)")
    parser.add_argument("--retime", default=None, help="measure rows/s again (under the lock) for the data sets of "
                        "this results file, from the models in --out; the speed figures are replaced, the first "
                        "measurement kept as timing_first")
    parser.add_argument("--merge", nargs="+", default=None, help="merge the results files of separate --datasets runs "
                        "(run side by side) into --output")
    args = parser.parse_args()
    if args.student_epochs:
        STUDENT["epochs"] = args.student_epochs
    STUDENT["feature_weight"] = args.feature_weight       # None: tuneloop distill's default (1 where it applies)
    if args.temperature is not None:
        STUDENT["temperature"] = args.temperature
    if args.unlabelled:
        for sizes in SIZES.values():
            sizes["unlabelled"] = args.unlabelled
    if args.retime:
        retime(Path(args.retime), Path(args.out))
        return
    if args.merge:
        parts = [json.loads(Path(p).read_text()) for p in args.merge]
        def key(part, name):   # one data set run with other student epochs or texts: each kept, named by them
            options = part["distill_options"]
            if "unlabelled" not in options:     # parts from before --unlabelled: the recipe's 2 epochs by default
                return f"{name}, student {options.get('epochs', 2)} epochs"
            epochs = f"{options['epochs']} epochs" if "epochs" in options else "the default epochs (500-step floor)"
            weight = options.get("feature_weight", 0)           # parts from before the feature loss: none
            features = "" if weight == 0 else ", feature weight the default" if weight is None else \
                f", feature weight {weight:g}"
            heat = "" if options.get("temperature", 2.0) == 2.0 else f", temperature {options['temperature']:g}"
            return f"{name}, {options['unlabelled']} unlabelled texts, student {epochs}{features}{heat}"

        merged = {**parts[0], "datasets": {key(p, k): v for p in parts for k, v in p["datasets"].items()},
                  "parts": [{k: p[k] for k in ("load_start", "load_end", "wall_s", "machine", "distill_options")}
                            for p in parts]}
        Path(args.output).write_text(json.dumps(merged, indent=1, default=str) + "\n")
        return
    work = Path(args.out)
    result = {"benchmark": "tuneloop distill: 3-layer student vs 6-layer MiniLM teacher vs labels-only student",
              "date": time.strftime("%Y-%m-%d"), "machine": machine(), "seeds": list(SEEDS), "options": COMMON,
              "distill_options": {"student_layers": 3, "temperature": 2.0, "gold_weight": 0.5, **STUDENT,
                                  **({"unlabelled": args.unlabelled} if args.unlabelled else {})},
              "load_start": os.getloadavg(), "datasets": {}}
    started = time.perf_counter()
    for name in args.datasets.split(","):
        folder = work / name
        folder.mkdir(parents=True, exist_ok=True)
        files = mrpc_files(folder, **SIZES["mrpc"]) if name == "mrpc" else docstring_files(folder, **SIZES[name])
        result["datasets"][name] = run_dataset(name, files, folder)
        print(json.dumps({k: v for k, v in result["datasets"][name].items() if k not in ("runs", "timing")},
                         default=str)[:2000], flush=True)
    result.update(load_end=os.getloadavg(), wall_s=round(time.perf_counter() - started, 1))
    text = json.dumps(result, indent=1, default=str)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text[-3000:])


if __name__ == "__main__":
    main()
