"""What a run leaves: model folders (model/, best/), results.json, the final evaluation's outputs, the model card
and report.html, test-split predictions; and what a dry run prints instead. Only the main process writes."""

from __future__ import annotations

import io
import logging

import numpy as np
import torch

from .atomic import atomic_write_bytes, atomic_write_json
from .calibrate import fit_decision
from .decision import DecisionRule
from .evaluation import Evaluation, predict_logits
from .failures import ERRORS_FILE, error_rows, per_class
from .label_issues import LABEL_ISSUES_FILE, issue_rows
from .model import save_model
from .predictions import prediction_rows, write_predictions

log = logging.getLogger("tuneloop")


def save_model_folder(run, name: str) -> None:
    """OUT/<name>/: save_pretrained model and tokenizer with tuneloop.json, replaced atomically."""
    if run.accelerator.is_main_process:
        # keep_torch_compile=False: a compiled model saves under its plain names (no `_orig_mod.`)
        model = run.accelerator.unwrap_model(run.model, keep_torch_compile=False)
        save_model(model, run.tokenizer, run.output_dir / name, run.metadata)


def results(run, state, train_log, evaluation: Evaluation, samples_before: int) -> dict:
    """What results.json holds. runtime_s is the whole loop, evaluations included; samples_per_second counts
    the examples this process's run trained on (not those before a resume) over training time only."""
    acc, cfg = run.accelerator, run.config
    out = {
        "task": cfg.task, "model": cfg.model, "main_metric": run.main_metric,
        "eval": evaluation.main_split,
        "train": {"runtime_s": round(train_log.runtime_s, 3), "training_s": round(train_log.training_s, 3),
                  "eval_s": round(train_log.eval_s, 3),
                  "samples_per_second": round((state.samples_seen - samples_before) / train_log.training_s, 3),
                  "steps": state.step, "epochs": state.epoch_progress(run.plan.steps_per_epoch),
                  "num_samples": len(run.data.train), "global_batch_size": run.plan.global_batch,
                  "setup_s": round(run.setup_s, 3), "num_processes": acc.num_processes,
                  "mixed_precision": cfg.mixed_precision, "compile": cfg.compile,
                  "first_step_s": round(train_log.first_step_s or 0.0, 3), "device": str(acc.device)},
        "data": run.data.stats,                   # rows, read/tokenize seconds per split, cache hits
        "labels": run.data.labels.names,
        "problem_type": run.data.labels.problem_type,
        "best": state.best,
        "stopped_early": state.stopped_early,
        "output_dir": str(run.output_dir),
    }
    if acc.device.type == "cuda":
        out["train"]["peak_gpu_memory_mb"] = round(torch.cuda.max_memory_allocated(acc.device) / 2**20, 1)
    if run.resumed_from:
        out["resumed_from"] = run.resumed_from
    if state.skipped_batches:
        out["train"]["skipped_nonfinite_batches"] = state.skipped_batches
    if len(evaluation.metrics) > 1:
        out["eval_splits"] = evaluation.metrics
    classes = {split: per_class(logits, labels, run.data.labels) for split, (logits, labels) in
               evaluation.outputs.items()}
    if any(classes.values()):
        out["per_class"] = classes                # precision, recall, F1 and support of every class, per split
    if run.data.split is not None:
        out["validation_split"] = {k: v for k, v in run.data.split.items() if k not in ("train", "validation")} | \
            {"train_rows": len(run.data.split["train"]), "validation_rows": len(run.data.split["validation"])}
    return out


def decide(run, evaluation: Evaluation) -> dict | None:
    """Fit the decision rule (calibrate.py) on the final evaluation's first split into model/tuneloop.json, so
    that evaluate and predict apply it; returns results.json's "decision" section (measured cross-fitted)."""
    kind, cfg = run.data.labels.problem_type, run.config
    if kind == "regression":
        return None
    logits, labels = next(iter(evaluation.outputs.values()))
    names = run.data.labels.names
    options = {"calibrate": cfg.calibrate, "decision": cfg.decision, "objective": cfg.optimize_threshold_for,
               "abstain_below": cfg.abstain_below, "abstain_label": cfg.abstain_label,
               "positive": names.index(cfg.positive_label) if cfg.positive_label else 1}
    rule, report = fit_decision(logits, labels, kind, options, cfg.seed)
    run.metadata["decision"] = rule.to_dict()
    c = report["calibration"]
    log.info(f"decision rule: {rule.describe()} | ECE {c['ece_before']:.4f} → {c['ece_after']:.4f}, NLL "
             f"{c['nll_before']:.4f} → {c['nll_after']:.4f} ({report['measured'].split(' (')[0]})")
    for note in rule.notes:
        log.warning(f"--optimize-threshold-for: {note}")
    return report


def write_results(run, results_: dict, evaluation: Evaluation) -> None:
    """results.json, the final evaluation's logits and labels (predictions/eval_<split>.npz, for the report's
    confusion matrix or scatter plot), the model card and report.html."""
    if not run.accelerator.is_main_process:
        return
    atomic_write_json(run.output_dir / "results.json", results_)
    for split, (logits, labels) in evaluation.outputs.items():
        buffer = io.BytesIO()
        np.savez_compressed(buffer, logits=logits.astype(np.float32), labels=labels)
        atomic_write_bytes(run.output_dir / "predictions" / f"eval_{split}.npz", buffer.getvalue())
    write_errors(run, evaluation)
    from .report import write_model_card, write_report

    try:
        write_model_card(run.output_dir / "model", results_, run.config.to_dict(), run.metadata)
        if run.config.report:
            write_report(run.output_dir)
    except Exception as e:  # noqa: BLE001 - a report must never cost a finished run
        log.warning(f"could not write the model card / report: {type(e).__name__}: {e}")


def write_errors(run, evaluation: Evaluation) -> None:
    """OUT/errors.csv: the first evaluation split's rows the model gets wrong, most confidently wrong first."""
    split = next(iter(evaluation.outputs))
    logits, labels = evaluation.outputs[split]          # a row per text, in the split's row order
    rows = error_rows(run.data.raw.evaluation[split], logits, labels, run.data.labels)
    write_predictions(rows, str(run.output_dir / ERRORS_FILE))


def write_label_issues(run) -> dict | None:
    """OUT/label_issues.csv: every training row, the one whose label is most probably wrong first, and the
    probabilities behind it (predictions/train_dynamics.npz). Called by every process (totals are summed over
    them); returns results.json's summary on the main process."""
    if run.dynamics is None:
        return None
    arrays = run.dynamics.collect(run.accelerator)
    if not run.accelerator.is_main_process:
        return None
    train = run.data.train.with_format("numpy").select_columns(["doc", "labels"])[:]
    given = np.zeros((arrays["sums"].shape[1], *train["labels"].shape[1:]), dtype=train["labels"].dtype)
    given[train["doc"]] = train["labels"]
    rows, summary = issue_rows(run.data.raw.train, given, arrays, run.data.labels)
    run.dynamics.save({**arrays, "given": given}, run.output_dir / "predictions")
    write_predictions(rows, str(run.output_dir / LABEL_ISSUES_FILE))
    return summary


def predict_test(run) -> None:
    """Predictions for the test split(s) in OUT/predictions/ (and GLUE's submission layout for GLUE tasks)."""
    if not run.data.test:
        log.warning("--predict-test: this data has no test split (give --test-file FILE)")
    for split, ds in run.data.test.items():
        logits = predict_logits(run.model, ds, run.tokenizer, run.accelerator, run.data.labels.problem_type,
                                run.config.eval_batch_size, run.config.quiet, f"Predicting {split}",
                                run.config.window_pooling)
        if run.accelerator.is_main_process:
            rule = DecisionRule.from_dict(run.metadata.get("decision"))        # the model's own decisions
            ids = list(run.data.raw.test[split]["id"])
            folder = run.output_dir / "predictions"
            rows = prediction_rows(ids, logits, run.data.labels, rule)
            write_predictions(rows, str(folder / f"{split}.tsv"))
            if run.data.task is not None:                 # GLUE scores every row: no abstaining there
                rows = prediction_rows(ids, logits, run.data.labels, rule and rule.without_abstain())
                write_predictions(rows, str(folder / f"{split}.glue.tsv"), glue=True, labels=run.data.labels,
                                  task=run.data.task)
            log.info(f"wrote {len(rows)} {split} predictions to {folder}")


def dry_run(run) -> dict:
    """What the chapter checks before training: config, sizes, step counts, a batch, one forward pass. Printed
    as YAML; nothing is written."""
    import yaml

    batch = next(iter(run.loaders.train))
    with torch.no_grad():
        out = run.model(**{k: v for k, v in batch.items() if k not in ("labels", "doc")})
        loss = run.loss(out.logits, batch["labels"])
    info = {"config": run.config.to_dict(),
            "examples": {"train": len(run.data.train), **{k: len(v) for k, v in run.data.evaluation.items()}},
            "labels": run.data.labels.names or "regression", "steps_per_epoch": run.plan.steps_per_epoch,
            "total_steps": run.plan.total_steps, "epochs": run.plan.epochs, "global_batch_size": run.plan.global_batch,
            "batch_shapes": {k: list(v.shape) for k, v in batch.items() if k != "doc"},
            "loss": round(float(loss), 4), "logits_shape": list(out.logits.shape)}
    if run.accelerator.is_main_process:
        print(yaml.safe_dump(info, sort_keys=False), end="")
    return info
