"""What a distilled student kept (results.json's `distillation`): teacher, student and the same student trained on
the labelled rows alone, on the same validation rows — metrics (under each model's decision rule), how often the
student answers as the teacher does, and rows/s of each on this machine (one pass over the validation texts after
a warm-up batch, in this process)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..config.options import TrainConfig
from ..layout import DISTILL_DIR, LABELS_ONLY_DIR, MODEL_DIR
from ..runtime import machine
from ..tasks import lower_is_better
from . import teacher as t

WARM_UP = 32            # rows run before timing (first-call costs: kernels, allocations)


def measure(classifier, validation: "t.Texts", source: str, ids: bool = False) -> tuple[dict, list]:
    """(metrics under the model's decision rule, rows/s, parameters) of `classifier` on the validation rows, and its
    decided answers per row. In this process only (`Classifier.logits`): it runs after the student's run, whose
    processes have ended. `ids`: the labels may be class ids (a GLUE task's teacher: teacher.teacher_task)."""
    from ..data.labels import LabelEncoder
    from ..decision.fit import decided_metrics
    from ..evaluation.metrics import compute
    from ..tasks import metric_names

    schema, items = classifier.label_schema, validation.items
    encode = LabelEncoder(schema, source, accept_ids=ids)
    gold = np.asarray([encode(raw, i + 2) for i, raw in enumerate(validation.labels)])
    names = tuple(classifier.metadata.get("metrics") or metric_names(None, schema.problem_type, schema.num_labels))
    classifier.logits(items[:WARM_UP])
    started = time.perf_counter()
    logits = classifier.logits(items)
    seconds = time.perf_counter() - started
    rule = classifier.decision_rule()
    metrics = decided_metrics(rule, names, logits, gold) if rule is not None else \
        {**compute(names, logits, gold, classifier.objective), "num_samples": len(gold)}
    answers = [r.get("label", r.get("score")) for r in classifier.rows(logits)]
    parameters = sum(p.numel() for p in classifier.model.parameters()) if classifier.backend == "pytorch" else None
    return {"metrics": metrics, "rows_per_s": round(len(items) / max(seconds, 1e-9), 1),
            "seconds": round(seconds, 3), "parameters": parameters}, answers


def agreement(a: list, b: list, regression: bool) -> dict:
    """How often two models give the same answer (regression: the mean absolute difference of the scores and their
    correlation)."""
    if regression:
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        corr = float(np.corrcoef(x, y)[0, 1]) if len(x) > 1 and x.std() > 0 and y.std() > 0 else None
        return {"mean_abs_difference": float(np.mean(np.abs(x - y))), "pearson": corr}
    same = [json_key(p) == json_key(q) for p, q in zip(a, b, strict=True)]
    return {"agreement": float(np.mean(same))}


def json_key(value):
    return tuple(value) if isinstance(value, list) else value


def comparison(cfg: TrainConfig, out: Path, table: dict, labels_only: dict | None) -> dict:
    """Teacher vs student (vs labels-only student) on --validation-file; a note when there is none."""
    from ..predict.classifier import Classifier

    if not cfg.validation_file:
        return {"note": "no --validation-file: the student was validated on rows held out of its training table "
                        "(labelled by the teacher); give --validation-file to compare it with the teacher"}
    columns, label = table["text_columns"], cfg.label_column
    validation = t.read_texts(cfg.validation_file, columns, label, True)
    regression = table["problem_type"] == "regression"
    models = {"student": str(out)}
    if not t.is_soft_label_file(cfg.teacher):
        models["teacher"] = cfg.teacher
    if labels_only is not None:
        models["labels_only"] = str(out / DISTILL_DIR / LABELS_ONLY_DIR / MODEL_DIR)
    measured, answers = {}, {}
    for name, path in models.items():
        with Classifier.load(path, cpu=cfg.cpu) as classifier:
            measured[name], answers[name] = measure(classifier, validation, cfg.validation_file,
                                                    ids=table.get("task") is not None)
    result = {"validation_file": str(cfg.validation_file), "rows": len(validation.items), "cpu": machine.cpu_name(),
              **measured}
    main = main_metric(out)                 # the student's: what each model is shown by, a teacher model or not
    if main:
        result["main_metric"] = main
    if "teacher" in measured:
        result["student_vs_teacher"] = agreement(answers["teacher"], answers["student"], regression)
        result["speedup"] = round(measured["student"]["rows_per_s"] / max(measured["teacher"]["rows_per_s"], 1e-9),
                                  2)
        result.update(kept(main, measured["student"]["metrics"].get(main), measured["teacher"]["metrics"].get(main)))
    return result


def kept(main: str | None, student: float | None, teacher: float | None) -> dict:
    """What the student kept of the teacher's main metric: `kept`, a share, only where one means something (a
    teacher's value above 0 of a metric better when higher); else `difference`, student minus teacher in the
    metric's units (a loss or mse, a correlation at or below 0: "-641% of the teacher's pearson" says nothing)."""
    if not main or student is None or teacher is None:
        return {}
    if teacher > 0 and not lower_is_better(main):
        return {"kept": round(student / teacher, 4)}
    return {"difference": round(student - teacher, 6)}


def main_metric(out: Path) -> str | None:
    import json

    from ..layout import METADATA_FILE

    meta = out / MODEL_DIR / METADATA_FILE
    return json.loads(meta.read_text(encoding="utf-8")).get("main_metric") if meta.is_file() else None
