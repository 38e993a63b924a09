"""The small-data guide's learning-curve tables are copied by hand from the committed results file: every figure in
them must be the results' own (mean ± std of accuracy, seconds per run), and a cell with fewer runs than the grid's
seeds must say so."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "small-data.md"
RESULTS_LINK = re.compile(r"benchmarks/results/([\w.-]+-small-data)\.png")
METHODS = {"tuneloop, usual settings": "tuneloop", "tuneloop defaults": "tuneloop-small",
           "tuneloop `--method setfit` (": "tuneloop-setfit", "tuneloop `--method setfit --setfit-pooling head`":
           "tuneloop-setfit-head", "the `setfit` package 1.2.0": "setfit", "the `setfit` package, `num_iterations=20`":
           "setfit-n20", "TF-IDF": "tfidf"}
FIGURE = re.compile(r"^\**(\d+\.\d+)(?: ± (\d+\.\d+))?\**")


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
                    if shown is not None:       # three decimals of the summary's four (0.6745 may show as 0.675)
                        assert abs(float(shown) - value) <= 0.0005 + 1e-9, (dataset, label, size, cell, value)
                if got["runs"] < seeds:
                    assert "seeds" in cell, f"{dataset} {label} {size}: {got['runs']} of {seeds} seeds, not said"
                if walls and walls[i] not in ("–", ""):
                    digits = len(walls[i].partition(".")[2])
                    assert abs(float(walls[i]) - got["wall_s_mean"]) <= 0.5 * 10 ** -digits + 1e-9, \
                        (dataset, label, size, walls[i], got["wall_s_mean"])
                checked += 1
    assert checked == sum(len(sizes) for methods in results["summary"].values() for sizes in methods.values())
