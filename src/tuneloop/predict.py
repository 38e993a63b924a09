"""Using a saved model: `tuneloop evaluate` (metrics on a labeled split, the run's own by default) and
`tuneloop predict` (a file, or one example given on the command line). The model's text columns, labels and
data come from its tuneloop.json, so no option has to be repeated; a plain save_pretrained folder works too."""

from __future__ import annotations

import torch

from . import tasks
from .atomic import atomic_write_json
from .config import TrainConfig
from .data.batching import eval_loader, make_collator
from .data.labels import LabelSchema
from .data.prepare import prepare_data
from .data.readers import detect_columns, file_columns
from .data.sources import load_user_files
from .data.tokenize import tokenize
from .errors import DataError, TuneloopError
from .evaluation import evaluate, predict_logits
from .model import load_tokenizer, read_metadata, resolve_model
from .predictions import prediction_rows, write_predictions
from .scope import command_scope


def load_trained(model_dir: str):
    """(model, tokenizer, metadata, LabelSchema) of a saved model; plain transformers folders work too."""
    from transformers import AutoModelForSequenceClassification

    path = resolve_model(model_dir)
    tokenizer = load_tokenizer(model_dir)
    try:
        model = AutoModelForSequenceClassification.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise TuneloopError(f"--model {model_dir}: could not load a classification model ({e})") from None
    meta = read_metadata(path)
    labels = LabelSchema.from_dict(meta["labels"]) if "labels" in meta else LabelSchema.from_model_config(model.config)
    return model, tokenizer, meta, labels


def data_config_for(model_dir: str, meta: dict, overrides: dict) -> TrainConfig:
    """Data options for evaluate/predict: what the run recorded next to the model, then the user's flags."""
    recorded = {k: v for k, v in (meta.get("data") or {}).items() if v is not None}
    chosen = {**recorded, **overrides}
    if any(k in overrides for k in ("data_dir", "validation_file", "task")):
        # new data replaces the recorded source as a whole, not piecemeal
        chosen = {**{k: v for k, v in recorded.items() if k in ("text_columns", "label_column", "task")},
                  **overrides}
    chosen.setdefault("task", meta.get("task"))
    return TrainConfig(model=model_dir, **chosen).validate()


def _accelerator(cpu: bool):
    from accelerate import Accelerator

    return Accelerator(cpu=cpu)


def evaluate_model(model_dir: str, overrides: dict, output: str | None = None) -> dict:
    """`tuneloop evaluate`: metrics of a saved model on a labeled split (the run's own by default)."""
    quiet = overrides.get("quiet", False)
    with command_scope(quiet):
        model, tokenizer, meta, labels = load_trained(model_dir)
        config = data_config_for(model_dir, meta, overrides)
        accelerator = _accelerator(config.cpu)
        with accelerator.main_process_first():
            data = prepare_data(config, tokenizer, labels=labels, with_train=False,
                                text_columns=meta.get("text_columns"))
        if not data.evaluation:
            raise DataError("nothing to evaluate: give --validation-file FILE, or --task with --data-dir")
        collator = make_collator(tokenizer, False, None)
        loaders = {n: accelerator.prepare(eval_loader(ds, tokenizer, config.eval_batch_size, collator)[0])
                   for n, ds in data.evaluation.items()}
        model = accelerator.prepare(model)
        task = tasks.get_task(config.task)
        names = tuple(meta.get("metrics") or tasks.metric_names(task, labels.problem_type, labels.num_labels))
        per_split = evaluate(model, loaders, accelerator, names, labels.problem_type, quiet).metrics
        results = {"model": model_dir, "task": config.task,
                   "main_metric": meta.get("main_metric") or tasks.main_metric(task, labels.problem_type),
                   "eval": next(iter(per_split.values()))}
        if len(per_split) > 1:
            results["eval_splits"] = per_split
        if output and accelerator.is_main_process:
            atomic_write_json(output, results)
        return results


def predict_file(model_dir: str, input_path: str, output: str, glue: bool = False, batch_size: int = 64,
                 text_columns=None, cpu: bool = False, quiet: bool = False) -> int:
    """`tuneloop predict --input FILE`: writes one row per input row; returns the number written."""
    with command_scope(quiet):
        model, tokenizer, meta, labels = load_trained(model_dir)
        accelerator = _accelerator(cpu)
        raw = load_user_files(None, None, input_path, text_columns, None,
                              known_text=_known_text(input_path, meta, text_columns))
        tokenized = tokenize(raw.test["test"], tokenizer, meta.get("max_length") or None, raw.pair, None,
                             "Tokenizing")
        model = accelerator.prepare(model)
        logits = predict_logits(model, tokenized, tokenizer, accelerator, labels.problem_type, batch_size, quiet)
        rows = prediction_rows(list(tokenized["id"]), logits, labels)
        if accelerator.is_main_process:
            write_predictions(rows, output, glue=glue, labels=labels, task=tasks.get_task(meta.get("task")))
        return len(rows)


def _known_text(path: str, meta: dict, given) -> tuple | None:
    """The model's own text columns when the file has them; otherwise detection; a pair model needs two."""
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
    with command_scope(quiet=True):
        model, tokenizer, meta, labels = load_trained(model_dir)
        recorded = meta.get("text_columns") or []
        if recorded and len(texts) != len(recorded):
            raise TuneloopError(f"the model reads {len(recorded)} text(s) ({', '.join(recorded)}); give "
                                f"{len(recorded)} quoted argument(s), got {len(texts)}")
        model.eval()
        with torch.no_grad():
            enc = tokenizer(*texts, truncation=True, return_tensors="pt")
            logits = model(**enc).logits.float().numpy()
        return prediction_rows(["0"], logits, labels)[0]
