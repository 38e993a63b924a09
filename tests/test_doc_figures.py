"""The learning-curve tables of the small-data results page are copied by hand from the committed results file:
every figure in them must be the results' own (mean ± std of accuracy, seconds per run), and a cell with fewer runs
than the grid's seeds must say so. Every "mean ± std" in that page's prose, the small-data guide's, the README's
small-data paragraph and the benchmarks page's small-data rows must be one a results file the results page links
holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "small-data-results.md"     # the tables; the guide quotes from them
SHORT = ROOT / "docs" / "guides" / "small-data.md"
RESULTS_LINK = re.compile(r"benchmarks/results/([\w.-]+-small-data)\.png")
METHODS = {"tuneloop, usual settings": "tuneloop", "tuneloop defaults": "tuneloop-small",
           "tuneloop `--method setfit` (": "tuneloop-setfit", "tuneloop `--method setfit --setfit-pooling head`":
           "tuneloop-setfit-head", "the `setfit` package 1.2.0": "setfit", "the `setfit` package, `num_iterations=20`":
           "setfit-n20", "TF-IDF": "tfidf"}
FIGURE = re.compile(r"^\**(\d+\.\d+)(?: ± (\d+\.\d+))?\**")
LINKED = re.compile(r"benchmarks/results/([\w.-]+\.json)")
MEAN_STD = re.compile(r"([−-]?\d+\.\d+)\s+±\s+(\d+\.\d+)")      # a mean's sign is part of it


def shows(shown: str, value: float) -> bool:
    """A figure shown to three decimals is the results' four-decimal value (0.6745 may show as 0.675)."""
    return abs(float(shown.replace("−", "-")) - value) <= 0.0005 + 1e-9


def tables(text: str) -> dict[str, list[list[str]]]:
    """{data set: rows of cells} for the tables under the guide's "Docstrings:" and "MRPC:" lines."""
    found, current = {}, None
    for line in text.splitlines():
        if line in ("Docstrings:", "MRPC:"):
            current = found.setdefault(line[:-1].lower(), [])
        elif current is not None and line.startswith("| ") and not line.startswith(("| method", "| ---")):
            current.append([cell.strip() for cell in line.strip("|").split("|")])
        elif current is not None and current and not line.startswith("|"):
            current = None
    return found


def method_of(label: str) -> str:
    matches = [key for prefix, key in METHODS.items() if label.startswith(prefix)]
    assert len(matches) == 1, f"a table row the test does not know: {label!r}"
    return matches[0]


def test_the_learning_curve_tables_carry_the_results_files_figures():
    text = GUIDE.read_text(encoding="utf-8")
    name = RESULTS_LINK.search(text).group(1)
    results = json.loads((ROOT / "benchmarks" / "results" / f"{name}.json").read_text(encoding="utf-8"))
    sizes, seeds = [str(s) for s in results["sizes"]], len(results["seeds"])
    found = tables(text)
    assert set(found) == set(results["summary"]) and all(len(rows) == len(METHODS) for rows in found.values())
    checked = 0
    for dataset, rows in found.items():
        for label, *cells, seconds in rows:
            summary = results["summary"][dataset].get(method_of(label), {})
            walls = [part.strip().split(" ")[0].replace(",", "") for part in seconds.split("/")] if seconds else []
            for i, (size, cell) in enumerate(zip(sizes, cells, strict=True)):
                figure = FIGURE.match(cell)
                if figure is None:                               # "(not run ...)" or an empty cell
                    assert size not in summary or not cell, f"{dataset} {label} {size}: {cell!r} but results exist"
                    continue
                got = summary[size]
                accuracy = got["accuracy"]
                for shown, value in zip(figure.groups(), (accuracy["mean"], accuracy["std"]), strict=True):
                    if shown is not None:
                        assert shows(shown, value), (dataset, label, size, cell, value)
                if got["runs"] < seeds:
                    assert "seeds" in cell, f"{dataset} {label} {size}: {got['runs']} of {seeds} seeds, not said"
                if walls and walls[i] not in ("–", ""):
                    digits = len(walls[i].partition(".")[2])
                    assert abs(float(walls[i]) - got["wall_s_mean"]) <= 0.5 * 10 ** -digits + 1e-9, \
                        (dataset, label, size, walls[i], got["wall_s_mean"])
                checked += 1
    assert checked == sum(len(sizes) for methods in results["summary"].values() for sizes in methods.values())


def mean_std_pairs(value) -> set[tuple[float, float]]:
    """Every {"mean": m, "std": s} anywhere in a results file."""
    if isinstance(value, dict):
        found = {(value["mean"], value["std"])} if {"mean", "std"} <= set(value) else set()
        return found.union(*(mean_std_pairs(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(mean_std_pairs(v) for v in value))
    return set()


def test_the_small_data_prose_quotes_only_figures_the_results_hold():
    guide = GUIDE.read_text(encoding="utf-8")
    results = [ROOT / "benchmarks" / "results" / name for name in set(LINKED.findall(guide))]
    held = set().union(*(mean_std_pairs(json.loads(path.read_text(encoding="utf-8"))) for path in results))
    paragraphs = (ROOT / "README.md").read_text(encoding="utf-8").split("\n\n")
    readme = [p for p in paragraphs if "small-data-results.md#learning-curves" in p]
    benchmarks = [line for line in (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()
                  if any("-small-data" in name for name in LINKED.findall(line))]
    places = {"the results page": [guide], "the guide": [SHORT.read_text(encoding="utf-8")], "README.md": readme,
              "docs/benchmarks.md": benchmarks}
    assert readme and benchmarks, "the README's small-data paragraph or the benchmarks page's row was not found"
    quoted = 0
    for place, texts in places.items():
        for text in texts:
            for mean, std in MEAN_STD.findall(text):
                assert any(shows(mean, m) and shows(std, s) for m, s in held), \
                    f"{place}: {mean} ± {std} is in no linked results file"
                quoted += 1
    assert quoted > 20
