"""Do two versions of tuneloop train to the same numbers? Runs a set of small runs (the tests' tiny BERT and toy
data, built here) with whichever tuneloop is importable, and writes their figures; `compare` checks two such files
agree to 1e-6. Used for behaviour-preserving redesigns: run it once with PYTHONPATH pointing at each tree.

    PYTHONPATH=/tmp/before/src python benchmarks/check_same_results.py run before.json
    PYTHONPATH=src python benchmarks/check_same_results.py run after.json
    python benchmarks/check_same_results.py compare before.json after.json

The runs: the default loop on pairs, --class-weights balanced with --decision threshold, --lora, --method setfit,
multi-label, regression and --windows; each records results.json's eval, decision, baseline and label-issue
summary, the training loss per logged step, and the final model's probabilities on a few texts."""

from __future__ import annotations

import json
import math
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import build_tiny_model, fast_options, sentence, write_mrpc_folder  # noqa: E402

PROBE = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog"), ("alpha beta gamma", "the cow")]


def _write(path: Path, header: list[str], rows: list[list]) -> str:
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows))
    return str(path)


def own_data(root: Path) -> dict:
    """Multi-label tags, regression scores and long single texts, each signalled by keywords."""
    rng = random.Random(0)
    keys = ["alpha", "beta", "gamma"]

    def tags(n):
        rows = []
        for _ in range(n):
            chosen = sorted(rng.sample(keys, rng.randint(1, 2)))
            words = sentence(rng).split() + chosen
            rng.shuffle(words)
            rows.append([" ".join(words), "|".join(chosen)])
        return rows

    def scores(n):
        rows = []
        for _ in range(n):
            k = rng.randrange(3)
            rows.append([sentence(rng), f"{sentence(rng)} {keys[k]}", f"{[0.5, 2.5, 4.5][k] + rng.uniform(-.3, .3):.2f}"])
        return rows

    def long(n):
        rows = []
        for _ in range(n):
            k = rng.randrange(2)
            words = " ".join(sentence(rng) for _ in range(3)).split()
            words.insert(rng.randrange(len(words)), ["good", "awful"][k])
            rows.append([" ".join(words), ["pos", "neg"][k]])
        return rows

    return {"multi": (_write(root / "m_train.tsv", ["text", "tags"], tags(240)),
                      _write(root / "m_dev.tsv", ["text", "tags"], tags(40))),
            "regression": (_write(root / "r_train.tsv", ["sentence1", "sentence2", "score"], scores(200)),
                           _write(root / "r_dev.tsv", ["sentence1", "sentence2", "score"], scores(40))),
            "long": (_write(root / "l_train.tsv", ["text", "label"], long(160)),
                     _write(root / "l_dev.tsv", ["text", "label"], long(40)))}


def runs(root: Path, model: str) -> dict[str, dict]:
    mrpc = write_mrpc_folder(root / "MRPC", n_train=200, n_dev=60, n_test=30)
    data = own_data(root)
    pairs = {"task": "mrpc", "data_dir": str(mrpc)}
    return {
        "default": {**fast_options(model), **pairs, "baseline": "tfidf"},
        "weighted-threshold": {**fast_options(model), **pairs, "class_weights": "balanced", "decision": "threshold"},
        "lora": {**fast_options(model, epochs=2, lr=1e-2), **pairs, "lora": True},
        "setfit": {**fast_options(model, method="setfit", setfit_iterations=2, epochs=1), **pairs},
        "multi-label": {**fast_options(model, epochs=4), "train_file": data["multi"][0],
                        "validation_file": data["multi"][1], "label_column": "tags", "label_separator": "|"},
        "regression": {**fast_options(model, epochs=4), "train_file": data["regression"][0],
                       "validation_file": data["regression"][1]},
        "windows": {**fast_options(model, epochs=6), "train_file": data["long"][0], "validation_file": data["long"][1],
                    "max_length": 16, "windows": 4},
    }


def figures(out: Path, results: dict) -> dict:
    import tuneloop
    from tuneloop.training.progress import read_metrics

    losses = [r["train/loss"] for r in read_metrics(out / "metrics.jsonl") if "train/loss" in r]
    with tuneloop.load(out) as clf:
        texts = PROBE if clf.pair else [a + " " + b for a, b in PROBE]
        probabilities = clf.predict_proba(texts, raw=True).tolist()
    return {"eval": results["eval"], "decision": results.get("decision"), "baseline": results.get("baseline", {}).get(
        "eval") if isinstance(results.get("baseline"), dict) else None, "label_issues": results.get("label_issues"),
        "losses": losses, "probabilities": probabilities}


def run(target: str) -> None:
    import tuneloop
    from tuneloop import TrainConfig

    root = Path(tempfile.mkdtemp(prefix="same-results-"))
    model = str(build_tiny_model(root / "tiny"))
    found = {"tuneloop": tuneloop.__file__}
    for name, options in runs(root, model).items():
        out = root / name
        results = tuneloop.train(TrainConfig(output_dir=str(out), **options))
        found[name] = figures(out, results)
        print(name, json.dumps(found[name]["eval"]), flush=True)
    Path(target).write_text(json.dumps(found, indent=1, default=str))


def differences(a, b, where="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = (set(a) | set(b)) - {"tuneloop", "seconds", "fit_s", "runtime_s"}
        return [d for k in sorted(keys) for d in differences(a.get(k), b.get(k), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        same = (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-6
        return [] if same else [f"{where}: {a} vs {b}"]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


def compare(first: str, second: str) -> int:
    a, b = json.loads(Path(first).read_text()), json.loads(Path(second).read_text())
    found = differences(a, b)
    print("\n".join(found) if found else f"the same to 1e-6: {', '.join(k for k in a if k != 'tuneloop')}")
    return 1 if found else 0


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
