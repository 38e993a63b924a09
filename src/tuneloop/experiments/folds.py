"""What k-fold gives beyond its summary: each training row predicted by the fold run that did not train on it
(OUT/out_of_fold.csv), and the training labels ranked by those out-of-fold probabilities (OUT/label_issues.csv,
with cleanlab's confident-learning flags: out-of-sample probabilities are what it is designed for)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..analysis.label_issues import issue_rows
from ..config.options import TrainConfig
from ..data.labels import LabelSchema
from ..data.sources import load_raw
from ..layout import (
    LABEL_ISSUES_FILE,
    METADATA_FILE,
    MODEL_DIR,
    OUT_OF_FOLD_FILE,
    PREDICTIONS_DIR,
    SPLIT_FILE,
    eval_outputs_file,
)
from ..predict.rows import prediction_rows, write_predictions


def write_out_of_fold(config: TrainConfig, out: Path, run_names: list[str]) -> dict:
    """Write OUT/out_of_fold.csv (and label_issues.csv for classification); returns what summary.json says."""
    meta = json.loads((out / MODEL_DIR / METADATA_FILE).read_text(encoding="utf-8"))
    schema = LabelSchema.from_dict(meta["labels"])
    table = load_raw(config, with_train=True, text_columns=meta.get("text_columns")).train
    logits, labels, fold_of = None, None, np.zeros(len(table), dtype=np.int64)
    for name in run_names:
        split = json.loads((out / name / SPLIT_FILE).read_text(encoding="utf-8"))
        with np.load(out / name / PREDICTIONS_DIR / eval_outputs_file("validation")) as saved:
            part_logits, part_labels = saved["logits"], saved["labels"]
        if logits is None:
            logits = np.zeros((len(table), part_logits.shape[1]), dtype=np.float32)
            labels = np.zeros((len(table), *part_labels.shape[1:]), dtype=part_labels.dtype)
        rows = np.asarray(split["validation"], dtype=np.int64)
        logits[rows], labels[rows], fold_of[rows] = part_logits, part_labels, split["fold"][0]
    if (fold_of == 0).any():
        raise RuntimeError(f"{int((fold_of == 0).sum())} training rows have no out-of-fold prediction")
    predicted, objective = prediction_rows(list(table["id"]), logits, schema), schema.objective
    for row, fold, g in zip(predicted, fold_of, labels, strict=True):
        row["fold"] = int(fold)
        row["gold"] = objective.name(g, schema)
    write_predictions(predicted, str(out / OUT_OF_FOLD_FILE))
    summary = {"file": OUT_OF_FOLD_FILE, "rows": len(predicted)}
    if objective.classes:
        arrays = {"sums": objective.probabilities(logits)[None], "counts": np.ones((1, len(table)))}
        issues, found = issue_rows(table, labels, arrays, schema)
        write_predictions(issues, str(out / LABEL_ISSUES_FILE))
        summary["label_issues"] = {**found, "method": "out-of-fold probabilities; " + found["method"].split("; ")[1]}
    return summary
