"""The end of a run, each step returning what it made: the decision rule fitted on the final evaluation, the model
folders (model/, best/) with that rule written into them, and the test split's predictions through the model's
`Classifier` (the same inference path as `tuneloop predict`). Only the main process writes."""

from __future__ import annotations

import logging

import numpy as np

from ..decision.fit import MIN_FIT_ROWS, VALIDATION_ROWS, fit_decision
from ..decision.rule import DecisionRule
from ..evaluation.inference import Evaluation
from ..exceptions import TuneloopError
from ..layout import PREDICTIONS_DIR
from ..model import target_scale
from ..model.loading import save_model
from ..predict.classifier import Classifier
from ..predict.evaluate import file_inputs
from ..predict.rows import with_input, write_predictions
from ..runtime import machine
from ..runtime.process import end_process_group, settle_processes

log = logging.getLogger("tuneloop")


ROWS = {"validation": VALIDATION_ROWS, "out_of_fold": "out-of-fold training rows"}   # results.json decision.source


def decision_rows(run, evaluation: Evaluation) -> tuple[np.ndarray, np.ndarray, str]:
    """(logits, labels, their ROWS key) the rule is fitted on: the final evaluation's first split; or, where it has
    too few rows to fit a temperature on (fewer than MIN_FIT_ROWS: a few-shot set's 10% held out) and the run has
    out-of-fold outputs of its own model on at least that many training rows (`run.out_of_fold`: the probe's head
    fitted head_fit.FOLDS times, each on the other folds' rows), those: as scikit-learn's
    CalibratedClassifierCV(ensemble=False) calibrates on out-of-fold predictions and applies the fit to the model
    trained on every row."""
    logits, labels = next(iter(evaluation.outputs.values()))
    if len(labels) < MIN_FIT_ROWS and run.out_of_fold is not None and len(run.out_of_fold[1]) >= MIN_FIT_ROWS:
        return (*run.out_of_fold, "out_of_fold")
    return logits, labels, "validation"


def fit_decision_rule(run, evaluation: Evaluation) -> tuple[DecisionRule | None, dict | None]:
    """(the rule, results.json's "decision" section): temperature, thresholds and abstain level fitted on
    `decision_rows` (decision/fit.py), measured cross-fitted; (None, None) for regression."""
    objective, cfg = run.objective, run.config
    if not objective.classes:
        return None, None
    logits, labels, source = decision_rows(run, evaluation)
    names = run.data.labels.names
    options = {"calibrate": cfg.calibrate, "decision": cfg.decision, "objective": cfg.optimize_threshold_for,
               "confidence": cfg.threshold_confidence,
               "abstain_below": cfg.abstain_below, "abstain_label": cfg.abstain_label,
               "positive": names.index(cfg.positive_label) if cfg.positive_label else 1, "rows": ROWS[source],
               "names": names}
    rule, report = fit_decision(logits, labels, objective, options, cfg.seed)
    report["source"] = source
    c = report["calibration"]
    log.info(f"decision rule: {rule.describe()} | how far confidence is from accuracy (ECE) {c['ece_before']:.4f} → "
             f"{c['ece_after']:.4f}, loss (NLL) {c['nll_before']:.4f} → {c['nll_after']:.4f}; "
             f"measured {report['measured']}")
    for note in rule.notes:
        log.warning(f"decision rule: {note}")
    return rule, report


def model_metadata(run, rule: DecisionRule | None) -> dict:
    """tuneloop.json of a model folder: the run's metadata, with the decision rule when there is one."""
    return {**run.metadata, "decision": rule.to_dict()} if rule is not None else dict(run.metadata)


def save_model_folder(run, name: str, rule: DecisionRule | None = None) -> None:
    """OUT/<name>/: save_pretrained model and tokenizer with tuneloop.json (and `rule`), replaced atomically."""
    if run.accelerator.is_main_process:
        # keep_torch_compile=False: a compiled model saves under its plain names (no `_orig_mod.`)
        model = run.accelerator.unwrap_model(run.model, keep_torch_compile=False)
        with run.timeline.phase("model folders"), target_scale.folded(model):    # a regression head in its units
            save_model(model, run.tokenizer, run.output_dir / name, model_metadata(run, rule))


def predict_test(run, rule: DecisionRule | None) -> None:
    """Predictions for the test split(s) in OUT/predictions/ (and GLUE's submission layout for GLUE tasks), by
    the trained model under its rule, as `tuneloop predict --input` makes them from the saved folder: a --test-file's
    columns beside the predictions (a GLUE folder's or an in-memory test split's: the id and the predictions)."""
    if not run.data.test:
        log.warning("--predict-test: this data has no test split (give --test-file FILE)")
    clf = Classifier(run.model, run.tokenizer, model_metadata(run, rule), run.data.labels, accelerator=run.accelerator)
    for split, ds in run.data.test.items():
        logits = clf.run(ds, batch_size=run.config.eval_batch_size, quiet=run.config.quiet,
                         desc=f"Predicting {split}").all_logits
        if run.accelerator.is_main_process:
            ids, folder = list(run.data.raw.test[split]["id"]), run.output_dir / PREDICTIONS_DIR
            rows = clf.table_rows(ids, logits)
            if isinstance(run.config.test_file, str) and split == "test":
                inputs, id_column = file_inputs(run.config.test_file, clf.metadata, run.data.raw.test[split]["idx"])
                rows = with_input(rows, inputs, "all", id_column)
            _write_test_rows(rows, folder, split)
            if run.data.task is not None:                 # GLUE scores every row: no abstaining there
                rows = clf.table_rows(ids, logits, glue=True)
                write_predictions(rows, str(folder / f"{split}.glue.tsv"), glue=True, labels=run.data.labels,
                                  task=run.data.task)
            log.info(f"wrote {len(rows)} {split} predictions to {folder}")


def _write_test_rows(rows: list[dict], folder, split: str) -> None:
    """OUT/predictions/<split>.tsv; a text holding a tab or a line break, which .tsv cannot hold (predict/rows.py
    refuses it), makes it <split>.jsonl instead, said."""
    try:
        write_predictions(rows, str(folder / f"{split}.tsv"))
    except TuneloopError as e:
        (folder / f"{split}.tsv").unlink(missing_ok=True)             # an earlier run's, not this model's
        write_predictions(rows, str(folder / f"{split}.jsonl"))
        where = str(e).split(": ", 1)[-1].split(": holds")[0]           # line 2 (id 0), column 'text'
        log.warning(f"{split} predictions written as JSON Lines, {folder / f'{split}.jsonl'}: the text of {where} "
                    "holds a tab or a line break, which a .tsv file cannot hold")


def end_training(accelerator) -> None:
    """The last barrier (runtime/process.settle_processes), then accelerate's end of training: the run's trackers
    closed, and the process group destroyed unless the caller trains more runs in these processes (an experiment,
    a search, a distillation: runtime/process.process_group_kept, whose end takes it down)."""
    settle_processes(accelerator)
    for tracker in accelerator.trackers:
        tracker.finish()
    end_process_group()


def gate_precision(run, stop=None) -> None:
    """The precision gate (predict/routes.py) on OUT/model: each faster route this device computes natively,
    checked against fp32 on the validation rows and timed there; the chosen one (or fp32) and every figure written
    into model/tuneloop.json, which `--precision auto` reads. A run with fewer than routes.GATE_MIN_ROWS validation
    rows is not gated (its models stay fp32 under `auto`), nor one with --precision-gate off (an experiment's runs:
    it gates the model it keeps); a gate that fails to run is a warning, not the run's end. `stop()` true
    (SIGTERM/Ctrl-C after the loop) skips it, or ends it between routes: the run's files are written without it, and
    `timeout` or a scheduler's stop does not wait for a CPU gate's ONNX export."""
    from ..layout import MODEL_DIR
    from ..data.batch import text_count
    from ..predict.routes import GATE_MIN_ROWS

    rows = text_count(next(iter(run.data.evaluation.values()))) if run.data.evaluation else 0     # windows: texts
    if run.accelerator.is_main_process and run.config.precision_gate != "off" and rows >= GATE_MIN_ROWS:
        with run.timeline.phase("precision gate"):
            gate_model(run.output_dir / MODEL_DIR, run.accelerator.device.type, run.config.eval_batch_size, rows, stop,
                       tables=run.config.python_tables())


def gate_kept_model(folder, config, rows: int) -> None:
    """An experiment's kept model or a search's best, gated once after its runs (which skip the gate), on the device
    they trained on; not with --precision-gate off."""
    if config.precision_gate != "off":
        gate_model(folder, "cuda" if machine.runs_on_cuda(config.cpu) else "cpu", config.eval_batch_size, rows,
                   tables=config.python_tables())


def gate_model(folder, device_type: str, eval_batch_size: int, rows: int, stop=None, tables=None) -> None:
    """gate_precision's gate for a saved model folder, said before and after (an experiment's kept model, a
    search's best: their runs skip it); `tables`: the run's config.python_tables(), read for its rows."""
    from ..predict import routes
    from ..predict.classifier import gate_folder

    if rows < routes.GATE_MIN_ROWS:
        return
    cpu, tried = device_type == "cpu", routes.candidates(device_type)
    if tried:
        log.info(f"precision gate: {', '.join(tried)} checked against fp32 on the recorded validation rows and "
                 "timed" + (" (an ONNX export among them: tens of seconds; Ctrl-C skips the gate, the model is "
                            "saved)" if routes.ONNX in tried else ""))
    try:
        record = gate_folder(folder, cpu=cpu, batch_size=eval_batch_size if cpu else None, stop=stop, tables=tables,
                             rows=rows)
    except routes.GateStopped:
        log.warning("precision gate: skipped, a stop signal arrived after training (the model is saved); "
                    "--precision auto stays fp32")
        return
    except Exception as e:  # noqa: BLE001 - the model is saved; only the faster route is missing
        log.warning(f"precision gate: not run ({type(e).__name__}: {e}); --precision auto stays fp32")
        return
    log.info(f"precision gate: {routes.describe(record)}")
