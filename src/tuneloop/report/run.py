"""Reading a run folder for the report: metrics.jsonl, results.json, config.yaml, model/tuneloop.json and the
saved evaluation outputs, each optional (a run still going has only some), problems noted instead of raised."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

from ..data.labels import LabelSchema, problem_type_of_outputs, recorded_schema
from ..exceptions import TuneloopError
from ..layout import (CONFIG_FILE, METADATA_FILE, METRICS_FILE, MODEL_DIR, PREDICTIONS_DIR, RESULTS_FILE,
                      not_one_run)
from ..objective import Objective
from ..tasks import TASKS

NOT_METRICS = ("loss", "num_samples", "epoch")
EVAL_KEY = re.compile(r"^(eval(?:_[^/]+)?)/(.+)$")


@dataclasses.dataclass
class Run:
    folder: Path
    records: list = dataclasses.field(default_factory=list)
    results: dict | None = None
    config: dict | None = None
    metadata: dict = dataclasses.field(default_factory=dict)
    predictions: dict = dataclasses.field(default_factory=dict)   # split -> (logits, labels) or error string
    notes: list = dataclasses.field(default_factory=list)          # problems reading the folder

    @property
    def complete(self) -> bool:
        return self.results is not None

    @property
    def task(self) -> str | None:
        for source in (self.results or {}, self.metadata, self.config or {}):
            if source.get("task"):
                return str(source["task"]).lower()
        return None

    @property
    def task_spec(self):
        return TASKS.get(self.task) if self.task else None

    @property
    def labels(self) -> LabelSchema | None:
        """What the run records about its labels (data.labels.recorded_schema), else what its saved
        evaluation outputs imply."""
        schema = recorded_schema(self.metadata, self.config, self.results, self.task_spec)
        if schema is None:
            outputs = [value for value in self.predictions.values() if not isinstance(value, str)]
            if outputs:
                schema = LabelSchema(problem_type_of_outputs(*outputs[0]))
        return schema

    @property
    def label_names(self) -> list[str] | None:
        return (self.labels.names or None) if self.labels else None

    @property
    def objective(self) -> Objective | None:
        return self.labels.objective if self.labels else None

    @property
    def primary_split(self) -> str:
        """The split metrics.jsonl calls plain `eval/` (the first evaluation split)."""
        splits = (self.results or {}).get("eval_splits")
        if splits:
            return str(next(iter(splits)))
        if self.task_spec is not None and self.task_spec.validation:
            return next(iter(self.task_spec.validation))
        if len(self.predictions) == 1:
            return next(iter(self.predictions))
        return "validation"

    def split_name(self, prefix: str) -> str:
        return self.primary_split if prefix == "eval" else prefix[len("eval_"):]


def _read_json(path: Path, notes: list, what: str):
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        notes.append(f"{what} could not be read ({type(e).__name__}: {str(e)[:200]}); it is left out.")
        return None


def _read_metrics(path: Path, notes: list) -> list[dict]:
    """metrics.jsonl, skipping lines that do not parse (the last one may be half written while a run goes on)."""
    if not path.is_file():
        return []
    records, bad = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), (int, float)):
            records.append(record)
    if bad:
        notes.append(f"metrics.jsonl: {bad} line(s) could not be parsed and were skipped.")
    return records


def _read_predictions(folder: Path) -> dict:
    import numpy as np

    out = {}
    for path in sorted(folder.glob("eval_*.npz")):
        split = path.stem[len("eval_"):]
        try:
            with np.load(path, allow_pickle=False) as data:
                logits, labels = np.asarray(data["logits"]), np.asarray(data["labels"])
        except Exception as e:       # a damaged or foreign file must not stop the report
            out[split] = f"{path.name} could not be read ({type(e).__name__}: {str(e)[:200]})"
            continue
        if logits.ndim == 1:
            logits = logits[:, None]
        if logits.ndim != 2 or len(logits) != len(labels):
            out[split] = (f"{path.name}: logits of shape {logits.shape} do not match labels of shape "
                          f"{labels.shape}")
            continue
        out[split] = (logits.astype(np.float64), labels)
    return out


# The shape tuneloop writes each results.json section in (training/reporting.py, experiments/): a section of
# another shape (a file edited by hand) is left out with a note, as a file that does not parse is.
SECTION_SHAPES = {**dict.fromkeys(("eval", "train", "data", "best", "per_class", "decision", "label_issues",
                                   "timeline", "setfit", "auto", "distillation", "target_scale",
                                   "validation_split", "eval_splits", "baseline"), (dict, type(None))),
                  **dict.fromkeys(("task", "model", "main_metric", "problem_type", "output_dir", "collapsed"),
                                  (str, type(None))),
                  "labels": (list, type(None)), "warnings": (list, type(None)), "stopped_early": (bool, type(None))}
JSON_NAMES = {dict: "an object", list: "a list", str: "a text", bool: "true or false", int: "a number",
              float: "a number", type(None): "null"}


def _checked_results(results, notes: list) -> dict | None:
    """results.json's sections that have the shape tuneloop writes (SECTION_SHAPES; the metrics of `eval` and of
    each `eval_splits` split numbers); the others left out, each with a note naming it."""
    if results is None:
        return None
    if not isinstance(results, dict):
        notes.append(f"results.json holds {JSON_NAMES.get(type(results), type(results).__name__)}, not the object "
                     "tuneloop writes; it is left out.")
        return None
    kept = {}
    for key, value in results.items():
        shapes = SECTION_SHAPES.get(key)
        if shapes is not None and not isinstance(value, shapes):
            notes.append(f"results.json: {key!r} is {JSON_NAMES.get(type(value), type(value).__name__)}, not "
                         f"{JSON_NAMES[shapes[0]]} as tuneloop writes it; it is left out.")
            continue
        kept[key] = value
    if "eval" in kept and not _metrics_ok("eval", kept["eval"], notes):
        kept.pop("eval")
    if kept.get("decision") and not _decision_ok(kept["decision"], notes):
        kept.pop("decision")
    if kept.get("eval_splits"):
        kept["eval_splits"] = {split: metrics for split, metrics in kept["eval_splits"].items()
                               if _metrics_ok(f"eval_splits.{split}", metrics, notes)}
    return kept


# what the report's Decision rule section and figures read of results.json's decision (decision/fit.py writes them)
DECISION_PARTS = {"rule": str, "fitted_on": str, "measured": str, "calibration": dict, "reliability": dict,
                  "abstain": dict}
DECISION_FIELDS = {"calibration": ("temperature", "ece_before", "ece_after", "nll_before", "nll_after"),
                   "reliability": ("before", "after"), "abstain": ("curve",)}


def _decision_ok(decision: dict, notes: list) -> bool:
    """Whether results.json's decision holds what the report reads (DECISION_PARTS); a note naming what is not."""
    wrong = [key for key, kind in DECISION_PARTS.items() if not isinstance(decision.get(key), kind)]
    wrong += [f"{key}.{name}" for key, names in DECISION_FIELDS.items() if key not in wrong for name in names
              if decision[key].get(name) is None or isinstance(decision[key][name], (str, bool))]
    t = decision.get("thresholds")
    if t is not None and not (isinstance(t, dict) and "objective" in t and isinstance(t.get("values"), list) and
                              all(isinstance(t.get(k), dict) for k in ("at_default", "at_tuned"))):
        wrong.append("thresholds")
    abstain = decision.get("abstain")
    if isinstance(abstain, dict) and abstain.get("level") is not None and \
            not isinstance(abstain.get("coverage"), (int, float)):
        wrong.append("abstain.coverage")
    if not wrong:
        return True
    notes.append(f"results.json: 'decision' lacks or mistypes {', '.join(map(repr, wrong[:3]))}, which tuneloop "
                 "writes; it is left out (model/tuneloop.json keeps the rule itself).")
    return False


def _metrics_ok(where: str, metrics, notes: list) -> bool:
    """Whether `metrics` is an object of numbers (None: nothing recorded); a note naming `where` when not."""
    if metrics is None:
        return True
    wrong = [name for name, v in metrics.items() if isinstance(v, bool) or not isinstance(v, (int, float))] \
        if isinstance(metrics, dict) else None
    if wrong == []:
        return True
    notes.append(f"results.json: {where} " + (f"has {', '.join(map(repr, wrong[:3]))} that are not numbers" if wrong
                                              else "is not an object of metrics") + "; it is left out.")
    return False


def read_run(run_dir: str | os.PathLike) -> Run:
    folder = Path(run_dir)
    if not folder.is_dir():
        raise TuneloopError(f"{folder}: not a folder; give a tuneloop run folder (the --output-dir of a training "
                            "run)")
    if not (folder / METRICS_FILE).is_file() and not (folder / RESULTS_FILE).is_file():
        raise TuneloopError(f"{folder}: not a tuneloop run folder (it has neither metrics.jsonl nor results.json)"
                            + not_one_run(folder))
    run = Run(folder)
    run.records = _read_metrics(folder / METRICS_FILE, run.notes)
    run.results = _checked_results(_read_json(folder / RESULTS_FILE, run.notes, "results.json"), run.notes)
    if (folder / CONFIG_FILE).is_file():
        import yaml

        try:
            config = yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8"))
            run.config = config if isinstance(config, dict) else None
        except (OSError, yaml.YAMLError) as e:
            run.notes.append(f"config.yaml could not be read ({type(e).__name__}); it is left out.")
    metadata = _read_json(folder / MODEL_DIR / METADATA_FILE, run.notes, "model/tuneloop.json")
    run.metadata = metadata if isinstance(metadata, dict) else {}
    if (folder / PREDICTIONS_DIR).is_dir():
        run.predictions = _read_predictions(folder / PREDICTIONS_DIR)
    return run

