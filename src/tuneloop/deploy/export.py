"""`tuneloop export`: a trained model as ONNX (optionally int8), checked against the PyTorch model before it is
written. The exported folder holds model.onnx, the tokenizer, config.json and tuneloop.json (labels, text policy,
decision rule, the run's validation data), so `tuneloop evaluate`, `predict` and `serve` take it as they take
the PyTorch folder, running on ONNX Runtime.

The accuracy gate: the PyTorch model and the exported one are both evaluated on the run's validation data, or on
the data given (raw scores); the export reports the data and rows it ran on, both metrics and the largest logit
difference, and is refused — nothing is written — when the main metric drops by more than 0.5 points, or by more
than `--allow-drop X` points when given (a drop over 0.5 but within X is a warning).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path


from .. import extras
from ..atomic import atomic_folder, check_place
from ..exceptions import ConfigError, TuneloopError
from ..layout import (EXPORT_REPORT_FILE, METADATA_FILE, MODEL_CONFIG_FILE, ONNX_FILE, RUN_MARKER, model_folder,
                      no_model_here)
from ..model.onnx_model import export_file, is_onnx_folder
from ..predict.classifier import Classifier
from ..predict.evaluate import check_output, evaluation
from ..predict import routes
from ..predict.routes import compare
from ..runtime.process import command_scope, notes_said_once

log = logging.getLogger("tuneloop")


def source_folder(source: str) -> Path:
    """The model folder to export: a run folder's model/, or a model folder."""
    path = model_folder(source)
    if not (path / MODEL_CONFIG_FILE).is_file():
        if (Path(source) / RUN_MARKER).is_file():     # an experiment's other seed/fold, a search's trial
            raise ConfigError(f"{source}: a run folder without its model/ ({no_model_here(source)})")
        raise ConfigError(f"{source}: neither a run folder (with model/) nor a model folder (with config.json)")
    return path


def gate(torch_eval, onnx_eval, main: str, allow_drop: float | None, objective) -> dict:
    """Compare two evaluations of the first split with the one accuracy gate (predict/routes.compare; raw scores,
    the main metric's drop decides): both metrics, the drop in points, the largest logit (and probability)
    difference, the share of identical predictions, and the verdict."""
    split = next(iter(torch_eval.outputs))
    ours = {"metrics": torch_eval.main_split, "logits": torch_eval.outputs[split][0]}
    theirs = {"metrics": onnx_eval.main_split, "logits": onnx_eval.outputs[split][0]}
    checked = compare(ours, theirs, main, objective, None, allow_drop)
    scores_off = checked.get("score_agreement", 1.0) < routes.MIN_AGREEMENT    # regression: Pearson misses a shift
    if scores_off and checked["verdict"] != "fail":                               # or a rescaling of the scores
        checked.update(verdict="fail", min_score_agreement=routes.MIN_AGREEMENT, refused_for="score_agreement")
    # the raw decisions' agreement (multi-label: the whole label set); regression has none (None)
    return {"split": split, "pytorch": ours["metrics"], "exported": theirs["metrics"], **checked,
            "prediction_agreement": checked.get("decision_agreement")}


def gated_data(data: dict, recorded: dict | None) -> dict:
    """The data the gate ran on, as the report names it: the data options given (--validation-file FILE by its
    absolute path, a table from Python by its description), else those recorded with the model."""
    given = {k: os.path.abspath(v) if k.endswith("_file") and isinstance(v, str) and os.path.isfile(v) else
             v if isinstance(v, (str, int, float, bool, list)) else str(v) for k, v in data.items() if v is not None}
    return given or {k: v for k, v in (recorded or {}).items() if v is not None}


def check_target(target: Path, folder: Path, overwrite: bool) -> None:
    """--output may be new, empty, or (with --overwrite) an earlier export; never the model's own folder or one
    that holds it, nor a folder of other files (the export replaces the folder whole)."""
    if target.resolve() == folder.resolve() or target.resolve() in folder.resolve().parents:
        raise TuneloopError(f"--output {target}: holds the model being exported ({folder}), which the export would "
                            f"replace; choose a folder outside it, e.g. {folder.parent / 'onnx'}")
    check_output(str(target), file=False)      # not inside a saved model's folder, nor one of a run's own outputs
    here = Path.cwd().resolve()
    if target.resolve() == here or target.resolve() in here.parents:
        # replaced whole, `--output .` left this shell in a deleted folder (and `.` has no name to write beside)
        raise TuneloopError(f"--output {target}: is (or holds) the current folder, which the export would replace "
                            f"whole; name a folder outside it, e.g. --output {Path(target) / 'onnx'}")
    if target.exists() and not target.is_dir():
        raise TuneloopError(f"--output {target}: is a file; give a folder for the exported model")
    check_place(target, "--output", folder=True)
    if not target.exists() or not any(target.iterdir()):
        return
    if not overwrite:
        raise TuneloopError(f"--output {target}: already exists and is not empty; choose another folder or pass "
                            "--overwrite")
    if not (target / EXPORT_REPORT_FILE).is_file():
        held = sorted(p.name for p in target.iterdir())
        raise TuneloopError(f"--output {target}: --overwrite replaces an earlier export, and this folder is not one "
                            f"(it holds {', '.join(held[:4])}{', ...' if len(held) > 4 else ''}); choose a new or "
                            "empty folder")


def export_model(source: str, output: str, quantize: str | None = None, allow_drop: float | None = None,
                 overwrite: bool = False, quiet: bool = False, data: dict | None = None, validation=None) -> dict:
    """Export, gate, and write `output` atomically; returns the export report (raises TuneloopError on a failed
    gate, leaving `output` as it was). The gate's rows: the validation data recorded with the model, or `data`
    (data options as `tuneloop evaluate` takes them: --validation-file FILE, --task with --data-dir, ...) or
    `validation` (a DataFrame, datasets.Dataset or (texts, labels), as Classifier.evaluate takes): a run fed from
    Python records its tables only by their description."""
    from ..data.memory import data_option

    data = dict(data or {})
    for key, value in data.items():     # a missing --validation-file was a FileNotFoundError, after the export's work
        if key.endswith("_file") and isinstance(value, (str, os.PathLike)) and not os.path.isfile(value):
            raise ConfigError(f"--{key.replace('_', '-')} {value}: " + ("a folder, not a file" if os.path.isdir(
                value) else "no such file") + "; give the labelled file for the accuracy gate (or leave it out "
                "to use the run's recorded validation data)")
    if quantize in (None, "none"):
        quantize = None
    elif quantize != "int8":          # anything else was exported fp32 and reported as quantized
        raise TuneloopError(f"--quantize: int8 (or none), got {quantize!r}")
    if validation is not None:
        data["validation_file"] = data_option(validation, "validation")
    if allow_drop is not None and not (math.isfinite(allow_drop) and allow_drop >= 0):
        raise TuneloopError(f"--allow-drop: a number of points, at least 0 (0.5 is the default), got {allow_drop}")
    extras.require("export")
    folder = source_folder(source)
    if is_onnx_folder(folder):
        raise TuneloopError(f"{source}: already an exported model; export the PyTorch model folder")
    if not str(output).strip():         # Path("") is ".": it was said to be the current folder, or to hold the model
        raise ConfigError("--output: empty; name the folder to write the exported model to, e.g. --output onnx")
    target = Path(output)
    check_target(target, folder, overwrite)
    target = Path(os.path.abspath(target))        # written beside its own name: `out/..` is not a name
    with command_scope(quiet), Classifier.load(folder, cpu=True) as clf:
        model, tokenizer, meta = clf.model, clf.tokenizer, clf.metadata
        main = meta.get("main_metric")
        if not main or not (meta.get("data") or data):
            raise TuneloopError(f"{source}: the model has no recorded validation data to check the export against "
                                "(the model folder of a tuneloop run has)" +
                                ("; give --validation-file FILE" if main else ""))
        with atomic_folder(target) as tmp:
            started = time.perf_counter()
            export_file(model, tokenizer, tmp / ONNX_FILE, quantize)
            tokenizer.save_pretrained(tmp)
            model.config.save_pretrained(tmp)
            info = {"format": "onnx", "quantize": quantize or "none", "source": str(folder.resolve()),
                    "seconds": round(time.perf_counter() - started, 2),
                    "size_mb": round((tmp / ONNX_FILE).stat().st_size / 2**20, 2)}
            kept = {k: v for k, v in meta.items() if k != routes.RECORD}     # the source's routes are not the copy's
            (tmp / METADATA_FILE).write_text(json.dumps({**kept, "export": info}, indent=2), encoding="utf-8")
            checked = [evaluation(clf, {**data, "quiet": quiet}, raw=True)[1]]
            with Classifier.load(tmp, cpu=True) as exported, notes_said_once():    # the same rows: said above
                checked.append(evaluation(exported, {**data, "quiet": True}, raw=True)[1])
            # the rows the gate ran on (rows: how many): those given, not the run's recorded data they replace
            report = {**info, "gate": {"data": gated_data(data, meta.get("data")),
                                       **gate(*checked, main, allow_drop, clf.objective)}}
            (tmp / EXPORT_REPORT_FILE).write_text(json.dumps(report, indent=2), encoding="utf-8")
            g = report["gate"]
            if g.get("refused_for") == "score_agreement":
                raise TuneloopError(f"export refused: the exported scores keep {g['score_agreement']:.1%} of the "
                                    f"variance of PyTorch's (R² against them; at least {routes.MIN_AGREEMENT:.0%}: "
                                    f"{main} does not see a shift or a rescaling of the scores); nothing written. " + (
                                        "Export without --quantize" if quantize else "The fp32 graph does not "
                                        "compute as PyTorch does"))
            if g["verdict"] == "fail":
                raise TuneloopError(f"export refused: {main} {g['exported'][main]:.4f} exported against "
                                    f"{g['pytorch'][main]:.4f} in PyTorch, a drop of {g['drop_points']:.2f} points "
                                    f"(allowed {g['allowed_drop_points']:g}); nothing written. " + (
                                        "Export without --quantize, or accept" if quantize else
                                        "The fp32 graph does not compute as PyTorch does; accept") +
                                    " the drop with --allow-drop X")
            if g["verdict"] == "warn":
                log.warning(f"the export loses {g['drop_points']:.2f} points of {main} (allowed by --allow-drop)")
    return report
