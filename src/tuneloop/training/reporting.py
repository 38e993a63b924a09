"""What a run reports: results.json, the final evaluation's outputs (predictions/eval_<split>.npz, errors.csv),
the model card and report.html. Only the main process writes."""

from __future__ import annotations

import io
import logging

import numpy as np
import torch

from ..analysis.wrong_rows import error_columns, error_rows
from ..atomic import atomic_write_bytes, atomic_write_json
from ..decision.rule import DecisionRule
from ..evaluation.baseline import score_baseline
from ..evaluation.inference import Evaluation
from ..evaluation.metrics import per_class
from ..layout import ERRORS_FILE, MODEL_DIR, PREDICTIONS_DIR, RESULTS_FILE, eval_outputs_file
from ..model.loading import read_metadata
from ..predict.rows import write_predictions
from ..runtime import machine, run_log
from . import small_data

log = logging.getLogger("tuneloop")


def results(run, state, train_log, evaluation: Evaluation, samples_before: int, step_name: str) -> dict:
    """What results.json holds. runtime_s is the whole loop, evaluations included; samples_per_second counts
    the examples this process's run trained on (not those before a resume) over training time only; `step_name`:
    the step the loop trained with (train.step, with setup's reason)."""
    acc, cfg = run.accelerator, run.config
    trained = state.samples_seen - samples_before
    if not trained and run.resumed_from:            # a resume from the last step's checkpoint: nothing to time
        log.info(f"resumed at step {state.step}, the run's last: no step left to train; its evaluation, decision "
                 "rule, model folders and results are made again (samples/s: none, in this process)")
    out = {
        "task": cfg.task, "model": cfg.model, "main_metric": run.main_metric,
        "eval": evaluation.main_split,
        "train": {"runtime_s": round(train_log.runtime_s, 3),
                  "training_s": round(train_log.training_s, 3) if trained else 0.0,
                  "eval_s": round(train_log.eval_s, 3),
                  "samples_per_second": round(trained / train_log.training_s, 3) if trained else None,
                  "steps": state.step, "epochs": state.epoch_progress(run.plan.steps_per_epoch),
                  "num_samples": len(run.data.train), "global_batch_size": run.plan.global_batch,
                  "setup_s": round(run.setup_s, 3), "num_processes": acc.num_processes,
                  "mixed_precision": cfg.mixed_precision, "compile": cfg.compile,
                  "precision": machine.effective_precision(cfg.mixed_precision, cfg.cpu),
                  "first_step_s": round(train_log.first_step_s or 0.0, 3), "device": str(acc.device),
                  "step": {"name": step_name, "why": run.step_reason}},
        "data": run.data.stats,                   # rows, read/tokenize seconds per split, cache hits
        "labels": run.data.labels.names,
        "problem_type": run.objective.kind,
        "best": state.best,
        "stopped_early": state.stopped_early,
        "output_dir": str(run.output_dir),
    }
    if acc.device.type == "cuda":
        out["train"]["peak_gpu_memory_mb"] = round(torch.cuda.max_memory_allocated(acc.device) / 2**20, 1)
    if run.target_scale is not None:           # regression targets learned standardised (model/target_scale.py)
        out["target_scale"] = run.target_scale.to_dict()
    if run.resumed_from:
        out["resumed_from"] = run.resumed_from
    if state.skipped_batches:
        out["train"]["skipped_nonfinite_batches"] = state.skipped_batches
    if len(evaluation.metrics) > 1:
        out["eval_splits"] = evaluation.metrics
    only = evaluation.collapsed_to(run.objective)
    out["collapsed"] = None if only is None else run.data.labels.names[only]   # the single class it predicts
    if (constant := mean_predictor(run, evaluation, state.step)) is not None:
        out["mean_predictor"] = constant          # regression: the figure a constant answer gets, to beat
    classes = {split: per_class(logits, labels, run.data.labels) for split, (logits, labels) in
               evaluation.outputs.items()}
    if any(classes.values()):
        out["per_class"] = classes                # precision, recall, F1 and support of every class, per split
    if run.data.split is not None:
        out["validation_split"] = {k: v for k, v in run.data.split.items() if k not in ("train", "validation")} | \
            {"train_rows": len(run.data.split["train"]), "validation_rows": len(run.data.split["validation"])}
    if run.setfit is not None:
        out["setfit"] = run.setfit                # --method setfit: pairs, steps, seconds, the head's fit
    if run.auto is not None:
        out["auto"] = run.auto                    # --method auto: the choice, each candidate's score (choose.py)
    with run.timeline.phase("baseline"):
        out["baseline"] = baseline(run, out)     # evaluation/baseline.py: TF-IDF + logistic regression
    return out


def collapse_warning(run, evaluation, step: int) -> str | None:
    """What to say when the model predicts one class for every validation row (None when it does not)."""
    only = evaluation.collapsed_to(run.objective)
    return None if only is None else (
        f"step {step}: the model predicts {run.data.labels.names[only]!r} for every validation row (collapsed to one "
        "class); on small data try more epochs, a smaller --lr with warmup, --class-weights balanced, or --seeds")


def mean_predictor(run, evaluation: Evaluation, steps: int) -> dict | None:
    """Regression: the validation rows' mean squared error of always answering the training targets' mean, and a
    warning when the model's is higher: a model that ranks rows somewhat (its Pearson) can still be further off
    than a constant (under-trained in few steps, over-trained on noise, or texts that carry little of the
    target)."""
    if run.objective.classes or not evaluation.outputs or run.data.train is None or len(run.data.train) == 0:
        return None
    split, (logits, gold) = next(iter(evaluation.outputs.items()))
    mean = float(np.mean(run.data.train_labels))
    gold = np.asarray(gold, dtype=np.float64).reshape(-1)
    constant = float(np.mean((gold - mean) ** 2))
    ours = float(np.mean((np.asarray(run.objective.predictions(logits), dtype=np.float64).reshape(-1) - gold) ** 2))
    if ours > constant:
        log.warning(f"the model's mean squared error on the {split} rows, {ours:.4g}, is above that of always "
                    f"answering the training targets' mean ({mean:.4g}): {constant:.4g}; its scores are further off "
                    "than a constant: " + (f"{steps} optimizer steps leave a head short of its targets, train more "
                                           "--epochs" if steps < small_data.MIN_STEPS else
                                           "the texts may carry little of the target, or it trained on the rows' "
                                           "noise: compare the baseline, try fewer --epochs or more rows"))
    return {"value": round(mean, 6), "mse": round(constant, 6), "model_mse": round(ours, 6), "split": split}


def baseline(run, results_: dict) -> dict | None:
    """The classical baseline on the run's rows (evaluation/baseline.py), said beside the model's figure; None
    with --baseline none and on processes other than the main one."""
    if run.config.baseline == "none" or not run.accelerator.is_main_process:
        return None
    scored = score_baseline(run.data, run.metric_names, run.config.seed)
    if scored is not None:
        main = run.main_metric if run.main_metric in scored["eval"] else "loss"
        ours = results_["eval"].get(main)
        log.info(f"baseline ({scored['method']}, {scored['fit_s']:.1f} s): {main} {scored['eval'][main]:.4f}"
                 + (f" | the model: {ours:.4f}" if ours is not None else ""))
    return scored


def saved_model(run, rule: DecisionRule | None = None) -> tuple[dict, DecisionRule | None]:
    """(OUT/model's tuneloop.json as saved — the decision rule and the precision gate's figures in it —, the rule):
    what the card describes and errors.csv decides by. `rule`: the one the run fitted (finish.fit_decision_rule),
    else the one saved."""
    metadata = read_metadata(run.output_dir / MODEL_DIR) or dict(run.metadata)
    if rule is None:
        rule = DecisionRule.from_dict(metadata.get("decision"))
    elif not metadata.get("decision"):
        metadata["decision"] = rule.to_dict()
    return metadata, rule


def write_results(run, results_: dict, evaluation: Evaluation, rule: DecisionRule | None = None) -> None:
    """results.json, the final evaluation's logits and labels (predictions/eval_<split>.npz, for the report's
    confusion matrix or scatter plot), errors.csv under the saved decision rule (`rule`, else the one in OUT/model),
    the model card and report.html."""
    if not run.accelerator.is_main_process:
        return
    metadata, rule = saved_model(run, rule)
    results_["timeline"] = run.timeline.to_dict()     # the phases so far: write_timeline completes it
    results_["warnings"] = run_log.warnings()         # what the run warned of (all of it in train.log)
    atomic_write_json(run.output_dir / RESULTS_FILE, results_)
    for split, (logits, labels) in evaluation.outputs.items():
        buffer = io.BytesIO()
        np.savez_compressed(buffer, logits=logits.astype(np.float32), labels=labels)
        atomic_write_bytes(run.output_dir / PREDICTIONS_DIR / eval_outputs_file(split), buffer.getvalue())
    write_errors(run, evaluation, rule)
    from ..report import write_model_card, write_report

    run.timeline.mark("results files")
    try:
        with run.timeline.phase("model card, report"):
            write_model_card(run.output_dir / MODEL_DIR, results_, run.config.to_dict(), metadata)
            if run.config.report:
                write_report(run.output_dir)
    except Exception as e:  # noqa: BLE001 - a report must never cost a finished run
        log.warning(f"could not write the model card / report: {type(e).__name__}: {e}")


def write_timeline(run, results_: dict) -> None:
    """results.json again, its timeline complete (the report and test predictions had not run when it was first
    written); logged as one line."""
    run.timeline.mark("test predictions" if run.config.predict_test else "end")
    results_["timeline"] = timeline = run.timeline.to_dict()
    results_["warnings"] = run_log.warnings()
    if run.accelerator.is_main_process:
        atomic_write_json(run.output_dir / RESULTS_FILE, results_)
        before = timeline["before_run_s"]
        log.info("where the time went: " + (f"start-up {before:.1f} s, " if before is not None else "") +
                 ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timeline["phases"].items()))


def write_errors(run, evaluation: Evaluation, rule: DecisionRule | None = None) -> None:
    """OUT/errors.csv: the first evaluation split's rows the model gets wrong under the saved decision rule `rule`,
    most confidently wrong first; with none wrong, the header alone."""
    split = next(iter(evaluation.outputs))
    logits, labels = evaluation.outputs[split]          # a row per text, in the split's row order
    table = run.data.raw.evaluation[split]
    rows = error_rows(table, logits, labels, run.data.labels, rule)
    path = run.output_dir / ERRORS_FILE
    if rows:
        write_predictions(rows, str(path))
    else:                                               # the documented columns, for a script that reads them
        atomic_write_bytes(path, (",".join(error_columns(table, run.data.labels, rule)) + "\n").encode("utf-8"))
