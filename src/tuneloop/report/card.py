"""The model card: README.md beside a saved model, with the Hub's front matter, what the model is, its labels,
inputs, hyperparameters, final metrics, training time and how to use it."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from ..atomic import atomic_write_bytes
from ..data.labels import LabelSchema, recorded_schema
from ..errors import TuneloopError
from ..model import ALIASES, read_metadata
from ..system import package_version
from ..tasks import TASKS
from .fmt import fmt, fmt_metric, fmt_seconds
from .run import NOT_METRICS

MODEL_CARD_FILE = "README.md"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def hub_id(model: str | None) -> str | None:
    """The model's Hub id when `model` is one (or a known alias), None for a local path."""
    if not model:
        return None
    if model in ALIASES:
        return ALIASES[model].hub_id
    if Path(model).expanduser().exists() or ".." in model or model.endswith((".json", ".bin", ".safetensors")):
        return None
    return model if _HUB_ID.match(model) else None


def _md(text: Any) -> str:
    """Text for a markdown table cell."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: Any) -> str:
    text = str(text).replace("\n", " ")
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def write_model_card(model_dir: str | os.PathLike, results: dict, config: dict, metadata: dict) -> Path:
    """Write `model_dir/README.md`: Hub metadata (front matter), what the model is, its labels, inputs,
    hyperparameters, final metrics, training time and how to use it. Returns the card's path.

    `results`: the contents of results.json; `config`: the resolved config (a dict or a TrainConfig);
    `metadata`: the model's tuneloop.json (read from `model_dir` when empty)."""
    import yaml

    from ..version import __version__

    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise TuneloopError(f"{model_dir}: not a folder; give the saved model folder (RUN/model)")
    config = config.to_dict() if hasattr(config, "to_dict") else dict(config or {})
    results = dict(results or {})
    if not metadata:
        metadata = read_metadata(model_dir)
    labels_meta = metadata.get("labels") or {}
    task = (metadata.get("task") or results.get("task") or config.get("task") or None)
    spec = TASKS.get(str(task).lower()) if task else None
    labels = recorded_schema(metadata, config, results, spec) or LabelSchema("regression")
    kind, names = labels.problem_type, labels.names
    text_columns = [str(c) for c in (metadata.get("text_columns") or config.get("text_columns") or
                                     (spec.text_columns if spec else []))]
    pair = len(text_columns) == 2
    base = metadata.get("base_model") or config.get("model") or results.get("model")
    base_hub = hub_id(str(base)) if base else None

    eval_splits = results.get("eval_splits") or ({"validation": results["eval"]} if results.get("eval") else {})
    metric_names = list(metadata.get("metrics") or [])
    for metrics in eval_splits.values():
        metric_names += [m for m in metrics if m not in NOT_METRICS and m not in metric_names]
    main = results.get("main_metric") or metadata.get("main_metric")

    # ---- front matter
    front: dict[str, Any] = {"library_name": "transformers", "pipeline_tag": "text-classification"}
    if base_hub:
        front["base_model"] = base_hub
    front["tags"] = ["tuneloop", "text-classification"]
    if spec is not None and config.get("data_dir") != "sample":
        front["datasets"] = ["nyu-mll/glue"]
    if metric_names:
        front["metrics"] = metric_names
    lines = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip(), "---", ""]

    # ---- what it is
    if spec is not None:
        data_title = f"GLUE {spec.folder or spec.name.upper()}"
        if config.get("data_dir") == "sample":
            data_text = (f"tuneloop's built-in sample in GLUE {spec.folder}'s layout (synthetic sentence pairs, "
                         "not the GLUE data)")
            data_title = "the built-in MRPC-style sample"
        elif config.get("data_dir"):
            data_text = f"GLUE {spec.folder} from the local folder {_code(Path(str(config['data_dir'])).name)}"
        else:
            data_text = f"GLUE {spec.folder} from the Hugging Face Hub (`nyu-mll/glue`, config `{spec.hub_config}`)"
        task_text = f"{spec.folder} ({_code(spec.name)}): {spec.description}"
    else:
        train_name = Path(str(config["train_file"])).name if config.get("train_file") else None
        data_title = train_name or "custom data"
        data_text = f"the file {_code(train_name)}" if train_name else "custom data"
        if config.get("validation_file"):
            data_text += f", evaluated on {_code(Path(str(config['validation_file'])).name)}"
        task_text = {"regression": "regression (one score per example)",
                     "multi_label_classification": f"multi-label classification ({len(names)} labels)"}.get(
            kind, f"text classification ({len(names)} labels)")
    short_base = base_hub.split("/")[-1] if base_hub else (Path(str(base)).name if base else "model")
    lines += [f"# {short_base} fine-tuned on {data_title}", ""]
    base_line = f"- **Base model:** {_code(base_hub or base)}"
    if base_hub and base_hub != base:
        base_line += f" (given as {_code(base)}, {ALIASES[base].description if base in ALIASES else base})"
    elif not base_hub and base:
        base_line += " (a local folder or alias, not a Hub id)"
    kind_text = {"regression": "regression", "multi_label_classification": "multi-label classification"}.get(
        kind, "classification")
    lines += [f"This model is {_code(base_hub or base) if base else 'a model'} fine-tuned with tuneloop "
              f"{metadata.get('tuneloop_version') or __version__} for {'sentence-pair' if pair else 'single-text'} "
              f"{kind_text} on {data_text}.", "",
              base_line,
              f"- **Task:** {task_text}",
              f"- **Training data:** {data_text}",
              f"- **Problem type:** {_code(kind)}" +
              (" (one sigmoid per label; a label is predicted when its probability is above 0.5)"
               if kind == "multi_label_classification" else ""),
              "- **Input:** " + (" and ".join(_code(c) for c in text_columns) +
                                 (" (a text pair)" if pair else " (one text)") if text_columns else "—"),
              f"- **Max length:** {metadata.get('max_length') or config.get('max_length') or 'the tokenizer maximum'}"
              + (" tokens" if (metadata.get("max_length") or config.get("max_length")) else ""), ""]

    # ---- labels
    lines += ["## Labels", ""]
    if kind == "regression":
        lines += ["Regression: one score (the model outputs a single number"
                  + ("; GLUE STS-B scores run from 0 to 5" if spec is not None and spec.name == "stsb" else "")
                  + ").", ""]
    else:
        lines += ["| id | label |", "|---:|---|"] + [f"| {i} | {_md(n)} |" for i, n in enumerate(names)] + [""]
        if labels_meta.get("separator"):
            lines += [f"Labels in the data were separated by {_code(labels_meta['separator'])}.", ""]

    # ---- hyperparameters
    train = results.get("train") or {}
    warmup = ("none" if not (config.get("warmup_steps") or config.get("warmup_ratio")) else
              f"{config['warmup_steps']} steps" if config.get("warmup_steps") else
              f"{config['warmup_ratio']:.0%} of the steps (warmup_ratio {config['warmup_ratio']:g})")
    epochs = f"{fmt(train.get('epochs', config.get('epochs')))}"
    if train.get("steps") is not None:
        epochs += f" ({train['steps']} optimizer steps)"
    if config.get("max_steps"):
        epochs += f", max_steps {config['max_steps']}"
    global_batch = train.get("global_batch_size")
    batch_text = fmt(global_batch)
    if global_batch is not None:
        batch_text += (f" ({fmt(config.get('batch_size'))} per device × {fmt(train.get('num_processes'))} "
                       f"process(es) × {fmt(config.get('gradient_accumulation_steps', 1))} accumulation step(s))")
    precision = train.get("mixed_precision") or config.get("mixed_precision")
    hyper = [("epochs", epochs), ("batch size per device", fmt(config.get("batch_size"))),
             ("global batch size", batch_text), ("learning rate (AdamW, peak)", fmt(config.get("lr"))),
             ("schedule", fmt(config.get("lr_scheduler"))), ("warmup", warmup),
             ("weight decay", fmt(config.get("weight_decay"))),
             ("max gradient norm", fmt(config.get("max_grad_norm")) if config.get("max_grad_norm") else "no clipping"),
             ("max length", fmt(config.get("max_length")) if config.get("max_length") else "tokenizer maximum"),
             ("mixed precision", "fp32 (none)" if precision == "no" else fmt(precision)),
             ("seed", fmt(config.get("seed")))]
    lines += ["## Training hyperparameters", "", "| hyperparameter | value |", "|---|---|"]
    lines += [f"| {_md(k)} | {_md(v)} |" for k, v in hyper] + [""]

    # ---- results
    lines += ["## Evaluation results", ""]
    if eval_splits:
        lines += ["| metric | " + " | ".join(_md(s) for s in eval_splits) + " |",
                  "|---|" + "---:|" * len(eval_splits)]
        ordered = sorted(metric_names, key=lambda n: (n != main, metric_names.index(n)))
        for name in ordered + ["loss", "num_samples"]:
            if name in ("loss", "num_samples") and not any(name in m for m in eval_splits.values()):
                continue
            label = {"num_samples": "examples"}.get(name, name) + (" (main)" if name == main else "")
            cells = [fmt(m.get(name)) if name == "num_samples" else fmt_metric(m.get(name))
                     for m in eval_splits.values()]
            bold = "**" if name == main else ""
            lines.append(f"| {bold}{_md(label)}{bold} | " + " | ".join(_md(c) for c in cells) + " |")
        lines.append("")
    else:
        lines += ["No evaluation results were recorded.", ""]
    if train:
        lines += ["## Training time", "",
                  f"{fmt_seconds(train.get('runtime_s'))} in all (training {fmt_seconds(train.get('training_s'))}, "
                  f"evaluation {fmt_seconds(train.get('eval_s'))}) for {fmt(train.get('num_samples'))} training "
                  f"examples × {fmt(train.get('epochs'))} epochs, {fmt(train.get('samples_per_second'))} "
                  f"samples/s, on {fmt(train.get('num_processes'))} process(es)"
                  + (f" ({train['device']})" if train.get("device") else "")
                  + f", precision {'fp32' if precision == 'no' else fmt(precision)}.", ""]

    # ---- how to use
    path = str(model_dir.resolve())
    kwargs = ", top_k=None" if kind == "multi_label_classification" else ""
    example = ('{"text": "The cat sat on the mat.", "text_pair": "A cat was sitting on the mat."}' if pair
               else '"This was a pleasure to read."')
    what = {"regression": "the score is the model's raw output (no softmax)",
            "multi_label_classification": "top_k=None returns every label with its sigmoid probability"}.get(
        kind, "the label with the highest probability")
    column_hint = " and ".join(_code(c) for c in text_columns) if text_columns else "the model's text column(s)"
    texts = '"The cat sat on the mat." "A cat was sitting on the mat."' if pair else '"This was a pleasure to read."'
    quoted = shlex.quote(path)
    lines += ["## How to use", "", "With 🤗 Transformers (" + what + "):", "", "```python",
              "from transformers import pipeline", "",
              f"classify = pipeline(\"text-classification\", model={json.dumps(path)}{kwargs})",
              f"print(classify({example}))", "```", "",
              "With tuneloop, a file (.csv, .tsv, .json, .jsonl or .parquet with the column(s) "
              f"{column_hint}, or name yours with `--text-columns`):", "", "```bash",
              f"tuneloop predict --model {quoted} --input FILE --output predictions.tsv", "```", "",
              "or one example:", "", "```bash", f"tuneloop predict --model {quoted} {texts}", "```", "",
              "and its metrics again on the validation data recorded with it:", "", "```bash",
              f"tuneloop evaluate --model {quoted}", "```", ""]

    versions = [(p, package_version(p)) for p in ("tuneloop", "transformers", "torch", "accelerate", "datasets")]
    lines += ["## Framework versions", ""] + [f"- {p} {v}" for p, v in versions if v] + [""]
    card = model_dir / MODEL_CARD_FILE
    atomic_write_bytes(card, "\n".join(lines).encode("utf-8"))
    return card

