"""Using a saved model: `tuneloop evaluate` (metrics on a labeled split, the run's own by default) and
`tuneloop predict` (a file, or one example given on the command line). The model's text columns, labels and
data come from its tuneloop.json, so no option has to be repeated; a plain save_pretrained folder works too."""

from __future__ import annotations

import numpy as np
import torch

from . import tasks
from .atomic import atomic_write_json
from .config import TrainConfig
from .calibrate import decided_metrics
from .data.batching import eval_loader, make_collator
from .data.labels import LabelSchema
from .data.prepare import prepare_data
from .data.readers import detect_columns, file_columns
from .data.sources import load_user_files
from .data.long_texts import TextPolicy, default_max_length
from .data.tokenize import Tokenize, tokenize
from .decision import DecisionRule
from .errors import DataError, TuneloopError
from .evaluation import evaluate, predict_logits
from .metrics import pool_windows
from .model import load_tokenizer, read_metadata, resolve_model
from .onnx_backend import OnnxModel, is_onnx_folder
from .predictions import prediction_rows, write_predictions
from .scope import command_scope


def load_trained(model_dir: str):
    """(model, tokenizer, metadata, LabelSchema) of a saved model: a tuneloop model folder, a plain transformers
    folder, or a folder `tuneloop export` wrote (model.onnx, run by ONNX Runtime)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    path = resolve_model(model_dir)
    tokenizer = load_tokenizer(model_dir)
    try:
        if is_onnx_folder(path):
            model, config = OnnxModel(path), AutoConfig.from_pretrained(path)
        else:
            model = AutoModelForSequenceClassification.from_pretrained(path)
            config = model.config
    except (OSError, ValueError) as e:
        raise TuneloopError(f"--model {model_dir}: could not load a classification model ({e})") from None
    meta = read_metadata(path)
    labels = LabelSchema.from_dict(meta["labels"]) if "labels" in meta else LabelSchema.from_model_config(config)
    return model, tokenizer, meta, labels


def text_policy(meta: dict, tokenizer) -> TextPolicy:
    """How the model reads long texts, as its run recorded it (a plain folder: head truncation)."""
    default = meta.get("max_length") or default_max_length(tokenizer)
    return TextPolicy.from_dict(meta.get("text_policy"), default)


def data_config_for(model_dir: str, meta: dict, overrides: dict) -> TrainConfig:
    """Data options for evaluate/predict: what the run recorded next to the model, then the user's flags."""
    recorded = {k: v for k, v in (meta.get("data") or {}).items() if v is not None}
    policy = meta.get("text_policy") or {}       # how the model reads long texts: kept for any data
    reading = {k: policy[k] for k in ("max_length", "truncation", "windows") if policy.get(k) is not None}
    if policy.get("pooling"):
        reading["window_pooling"] = policy["pooling"]
    chosen = {**recorded, **reading, **overrides}
    if any(k in overrides for k in ("data_dir", "validation_file", "task")):
        # new data replaces the recorded source as a whole, not piecemeal
        chosen = {**{k: v for k, v in recorded.items() if k in ("text_columns", "label_column", "task")},
                  **reading, **overrides}
    chosen.setdefault("task", meta.get("task"))
    return TrainConfig(model=model_dir, **chosen).validate()


def _accelerator(cpu: bool):
    from accelerate import Accelerator

    return Accelerator(cpu=cpu)


def decision_rule(meta: dict, labels, raw: bool) -> DecisionRule | None:
    """The model's saved decision rule (temperature, thresholds, abstain level), unless --raw asks for plain
    softmax/sigmoid and argmax (0.5 per label); None for regression and for folders without one."""
    if raw or labels.problem_type == "regression":
        return None
    return DecisionRule.from_dict(meta.get("decision"))


def evaluate_model(model_dir: str, overrides: dict, output: str | None = None, raw_scores: bool = False) -> dict:
    """`tuneloop evaluate`: metrics of a saved model on a labeled split (the run's own by default), under the
    model's decision rule unless `raw_scores`."""
    return evaluation_of(model_dir, overrides, output, raw_scores)[0]


def evaluation_of(model_dir: str, overrides: dict, output: str | None = None, raw_scores: bool = False):
    """(evaluate's results, the Evaluation with every split's logits) — export's accuracy gate compares two."""
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
        loaders = {n: accelerator.prepare(eval_loader(ds, tokenizer, config.eval_batch_size, collator))
                   for n, ds in data.evaluation.items()}
        model = accelerator.prepare(model)
        task = tasks.get_task(config.task)
        names = tuple(meta.get("metrics") or tasks.metric_names(task, labels.problem_type, labels.num_labels))
        evaluation = evaluate(model, loaders, accelerator, names, labels.problem_type, quiet, config.window_pooling)
        per_split, rule = evaluation.metrics, decision_rule(meta, labels, raw_scores)
        if rule is not None:
            per_split = {split: decided_metrics(rule, names, logits, gold)
                         for split, (logits, gold) in evaluation.outputs.items()}
        results = {"model": model_dir, "task": config.task,
                   "main_metric": meta.get("main_metric") or tasks.main_metric(task, labels.problem_type),
                   "eval": next(iter(per_split.values())),
                   "decision_rule": rule.describe() if rule is not None else "raw scores: argmax / 0.5"}
        if len(per_split) > 1:
            results["eval_splits"] = per_split
        if output and accelerator.is_main_process:
            atomic_write_json(output, results)
        return results, evaluation


def predict_file(model_dir: str, input_path: str, output: str, glue: bool = False, batch_size: int = 64,
                 text_columns=None, cpu: bool = False, quiet: bool = False, raw_scores: bool = False) -> int:
    """`tuneloop predict --input FILE`: writes one row per input row, decided by the model's rule unless
    `raw_scores` (GLUE's layout needs a label on every row: no abstaining there); returns the number written."""
    with command_scope(quiet):
        model, tokenizer, meta, labels = load_trained(model_dir)
        accelerator = _accelerator(cpu)
        data = load_user_files(None, None, input_path, text_columns, None,
                              known_text=_known_text(input_path, meta, text_columns))
        policy = text_policy(meta, tokenizer)
        tokenized = tokenize(data.test["test"], tokenizer, policy, data.pair, None, "Tokenizing")
        model = accelerator.prepare(model)
        logits = predict_logits(model, tokenized, tokenizer, accelerator, labels.problem_type, batch_size, quiet,
                                pooling=policy.pooling)
        rule = decision_rule(meta, labels, raw_scores)
        rows = prediction_rows(list(data.test["test"]["id"]), logits, labels,
                               rule.without_abstain() if glue and rule is not None else rule)
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


def predict_texts(model_dir: str, texts: list[str], cpu: bool = False, raw_scores: bool = False) -> dict:
    """One example given on the command line: the predicted label and every class's probability (under the
    model's decision rule unless `raw_scores`)."""
    with command_scope(quiet=True):
        model, tokenizer, meta, labels = load_trained(model_dir)
        recorded = meta.get("text_columns") or []
        if recorded and len(texts) != len(recorded):
            raise TuneloopError(f"the model reads {len(recorded)} text(s) ({', '.join(recorded)}); give "
                                f"{len(recorded)} quoted argument(s), got {len(texts)}")
        policy = text_policy(meta, tokenizer)
        rows = Tokenize(tokenizer, policy, len(texts) == 2, None)(
            {"idx": [0], "pos": [1], "id": ["0"], "text_a": [texts[0]],
             "text_b": [texts[1] if len(texts) > 1 else None], "label": [None]})
        inputs = tokenizer.pad({k: rows[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in rows},
                               return_tensors="pt")
        model.eval()
        with torch.no_grad():
            logits = model(**inputs).logits.float().numpy()
        logits = pool_windows(logits, None, np.zeros(len(logits), dtype=np.int64), labels.problem_type,
                              policy.pooling)[0]
        return prediction_rows(["0"], logits, labels, decision_rule(meta, labels, raw_scores))[0]
