"""Inference over a DataLoader on every process, gathered so each example counts exactly once."""

from __future__ import annotations

import sys

import numpy as np
import torch

from .metrics import Accumulator


def run_inference(model, loader, accelerator, accumulator: Accumulator, desc: str, quiet: bool) -> Accumulator:
    """Forward every batch without gradients; gather logits (and labels) across processes, dropping the
    duplicates that even batches add at the end (`gather_for_metrics`)."""
    from tqdm.auto import tqdm

    was_training = model.training
    model.eval()
    bar = tqdm(loader, desc=desc, leave=False, disable=quiet or not accelerator.is_main_process, file=sys.stderr,
               dynamic_ncols=True)
    with torch.no_grad():
        for batch in bar:
            labels = batch.pop("labels", None)
            logits = model(**batch).logits
            if labels is None:
                accumulator.add_batch(accelerator.gather_for_metrics(logits))
            else:
                logits, labels = accelerator.gather_for_metrics((logits, labels))
                accumulator.add_batch(logits, labels)
    model.train(was_training)
    return accumulator


def evaluate(model, loaders: dict, accelerator, metric_names, problem_type: str, quiet: bool = False,
             outputs: dict | None = None) -> dict:
    """{split: {metric: value, "loss": x, "num_samples": n}} for every evaluation split; `outputs`, when given,
    receives each split's (logits, labels) arrays."""
    results = {}
    for split, loader in loaders.items():
        acc = run_inference(model, loader, accelerator, Accumulator(metric_names, problem_type),
                            f"Evaluating {split}", quiet)
        results[split] = acc.compute()
        if outputs is not None:
            outputs[split] = (acc.all_logits, acc.all_labels)
    return results


# ---------------------------------------------------------------------------------------------- a trained model
def load_trained(model_dir: str, cpu: bool = False, quiet: bool = False):
    """(model, tokenizer, metadata, LabelSchema) of a saved model; plain transformers folders work too."""
    from .data import LabelSchema
    from .model import load_tokenizer, quiet_libraries, read_metadata, resolve_model
    from transformers import AutoModelForSequenceClassification
    from .errors import TuneloopError

    quiet_libraries(quiet)
    path = resolve_model(model_dir)
    tokenizer = load_tokenizer(model_dir)
    try:
        model = AutoModelForSequenceClassification.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise TuneloopError(f"--model {model_dir}: could not load a classification model ({e})") from None
    meta = read_metadata(path)
    if "labels" in meta:
        labels = LabelSchema.from_dict(meta["labels"])
    else:
        problem = model.config.problem_type or ("regression" if model.config.num_labels == 1
                                                else "single_label_classification")
        names = [] if problem == "regression" else [model.config.id2label[i] for i in range(model.config.num_labels)]
        labels = LabelSchema(problem, [str(n) for n in names])
    return model, tokenizer, meta, labels


def probabilities(logits: np.ndarray, problem_type: str) -> np.ndarray:
    x = torch.from_numpy(logits).float()
    if problem_type == "multi_label_classification":
        return torch.sigmoid(x).numpy()
    if problem_type == "regression":
        return x.reshape(-1, 1).numpy()
    return torch.softmax(x, dim=-1).numpy()


def prediction_rows(ids, logits: np.ndarray, labels) -> list[dict]:
    """One dict per example: id, predicted label name(s), class probabilities (or the score)."""
    from .metrics import predictions_from_logits

    kind = labels.problem_type
    probs = probabilities(logits, kind)
    preds = predictions_from_logits(logits, kind)
    rows = []
    for i, row_id in enumerate(ids):
        if kind == "regression":
            rows.append({"id": row_id, "score": round(float(preds[i]), 6)})
            continue
        if kind == "multi_label_classification":
            label = labels.separator_join([n for n, on in zip(labels.names, preds[i]) if on])
        else:
            label = labels.names[int(preds[i])]
        rows.append({"id": row_id, "label": label,
                     **{f"prob_{n}": round(float(p), 6) for n, p in zip(labels.names, probs[i])}})
    return rows


def glue_submission_value(row: dict, labels, task) -> str:
    """GLUE's submission files take class ids for tasks whose files store ids, names for the others."""
    if "score" in row:
        return f"{row['score']:.3f}"
    if task is not None and task.name in ("cola", "sst2", "mrpc", "qqp", "wnli"):
        return str(labels.names.index(row["label"]))
    return row["label"]


def write_predictions(rows: list[dict], path: str, glue: bool = False, labels=None, task=None) -> None:
    """csv / tsv / jsonl by extension (--glue: GLUE's `index<TAB>prediction` layout), written atomically."""
    import csv
    import io
    import json
    from pathlib import Path

    from .checkpoint import atomic_write_text
    from .errors import TuneloopError

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if glue:
        text = "index\tprediction\n" + "".join(f"{r['id']}\t{glue_submission_value(r, labels, task)}\n"
                                                for r in rows)
    else:
        suffix = Path(path).suffix.lower()
        if suffix == ".jsonl":
            text = "".join(json.dumps(r) + "\n" for r in rows)
        elif suffix in (".csv", ".tsv"):
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else ["id"],
                                    delimiter="\t" if suffix == ".tsv" else ",", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            text = buffer.getvalue()
        else:
            raise TuneloopError(f"--output {path}: use a .csv, .tsv or .jsonl file name (or --glue)")
    atomic_write_text(path, text)


def predict_dataset(model, tokenized, tokenizer, accelerator, labels, batch_size: int, quiet: bool,
                    desc: str = "Predicting") -> list[dict]:
    """Predictions for a tokenized split in its original row order (batches run longest first)."""
    from .data import eval_loader, make_collator
    from .metrics import Accumulator

    loader, order = eval_loader(tokenized, tokenizer, batch_size, make_collator(tokenizer, False, None))
    loader = accelerator.prepare(loader)
    acc = run_inference(model, loader, accelerator, Accumulator((), labels.problem_type), desc, quiet)
    logits = np.empty_like(acc.all_logits)
    logits[order] = acc.all_logits                       # undo the length sort
    return prediction_rows(list(tokenized["id"]), logits, labels)


def _accelerator(cpu: bool):
    from accelerate import Accelerator

    from .session import reset_accelerator_state

    reset_accelerator_state()
    return Accelerator(cpu=cpu)


def data_config_for(model_dir: str, meta: dict, overrides: dict):
    """Data options for evaluate/predict: what the run recorded next to the model, then the user's flags."""
    from .config import TrainConfig

    recorded = {k: v for k, v in (meta.get("data") or {}).items() if v is not None}
    chosen = {**recorded, **overrides}
    if any(k in overrides for k in ("data_dir", "validation_file", "task")):
        # new data replaces the recorded source as a whole, not piecemeal
        chosen = {**{k: v for k, v in recorded.items() if k in ("text_columns", "label_column", "task")},
                  **overrides}
    chosen.setdefault("task", meta.get("task"))
    return TrainConfig(model=model_dir, **chosen).validate()


def evaluate_model(model_dir: str, overrides: dict, output: str | None = None) -> dict:
    """`tuneloop evaluate`: metrics of a saved model on a labeled split (the run's own by default)."""
    from . import data as data_lib
    from .checkpoint import atomic_write_json
    from .errors import DataError
    from .metrics import main_metric, metric_names
    from .tasks import get_task

    quiet = overrides.get("quiet", False)
    model, tokenizer, meta, labels = load_trained(model_dir, overrides.get("cpu", False), quiet)
    config = data_config_for(model_dir, meta, overrides)
    accelerator = _accelerator(config.cpu)
    with accelerator.main_process_first():
        data = data_lib.prepare_data(config, tokenizer, labels=labels, with_train=False,
                                     text_columns=meta.get("text_columns"))
    if not data.evaluation:
        raise DataError("nothing to evaluate: give --validation-file FILE, or --task with --data-dir")
    collator = data_lib.make_collator(tokenizer, False, None)
    loaders = {n: accelerator.prepare(data_lib.eval_loader(ds, tokenizer, config.eval_batch_size, collator)[0])
               for n, ds in data.evaluation.items()}
    model = accelerator.prepare(model)
    task = get_task(config.task)
    names = tuple(meta.get("metrics") or metric_names(task, labels))
    per_split = evaluate(model, loaders, accelerator, names, labels.problem_type, quiet)
    results = {"model": model_dir, "task": config.task, "main_metric": meta.get("main_metric") or
               main_metric(task, labels), "eval": next(iter(per_split.values()))}
    if len(per_split) > 1:
        results["eval_splits"] = per_split
    if output and accelerator.is_main_process:
        atomic_write_json(output, results)
    return results


def predict_file(model_dir: str, input_path: str, output: str, glue: bool = False, batch_size: int = 64,
                 text_columns=None, cpu: bool = False, quiet: bool = False) -> int:
    """`tuneloop predict --input FILE`: writes one row per input row; returns the number written."""
    from . import data as data_lib
    from .tasks import get_task

    model, tokenizer, meta, labels = load_trained(model_dir, cpu, quiet)
    accelerator = _accelerator(cpu)
    raw = data_lib.load_user_files(None, None, input_path, text_columns, None,
                                   known_text=_known_text(input_path, meta, text_columns))
    tokenized = data_lib.tokenize(raw.test["test"], tokenizer, meta.get("max_length") or None, raw.pair, None,
                                  "Tokenizing")
    model = accelerator.prepare(model)
    rows = predict_dataset(model, tokenized, tokenizer, accelerator, labels, batch_size, quiet)
    if accelerator.is_main_process:
        write_predictions(rows, output, glue=glue, labels=labels, task=get_task(meta.get("task")))
    return len(rows)


def _known_text(path: str, meta: dict, given) -> tuple | None:
    """The model's own text columns when the file has them; otherwise detection; a pair model needs two."""
    from .data import detect_columns, file_columns
    from .errors import DataError

    if given:
        return tuple(given)
    columns = file_columns(path)
    recorded = meta.get("text_columns") or []
    if recorded and set(recorded) <= set(columns):
        return tuple(recorded)
    found = detect_columns(path, columns, None, None, need_label=False).text
    if recorded and len(found) != len(recorded):
        raise DataError(f"{path}: the model reads {len(recorded)} text column(s) ({', '.join(recorded)}) but the file "
                        f"has {', '.join(columns)}; name them with --text-columns")
    return found


def predict_texts(model_dir: str, texts: list[str], cpu: bool = False) -> dict:
    """One example given on the command line: the predicted label and every class's probability."""
    model, tokenizer, meta, labels = load_trained(model_dir, cpu, quiet=True)
    recorded = meta.get("text_columns") or []
    if recorded and len(texts) != len(recorded):
        from .errors import TuneloopError
        raise TuneloopError(f"the model reads {len(recorded)} text(s) ({', '.join(recorded)}); give "
                            f"{len(recorded)} quoted argument(s), got {len(texts)}")
    model.eval()
    with torch.no_grad():
        enc = tokenizer(*texts, truncation=True, return_tensors="pt")
        logits = model(**enc).logits.float().numpy()
    return prediction_rows(["0"], logits, labels)[0]
