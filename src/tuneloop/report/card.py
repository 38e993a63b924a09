"""The model card: README.md beside a saved model, with the Hub's front matter, what the model is, its labels,
inputs, hyperparameters, final metrics, training time and how to use it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import atomic_write_bytes
from ..data.labels import LabelSchema, recorded_schema
from ..exceptions import TuneloopError
from ..model.loading import ALIASES, read_metadata
from ..objective import MultiLabel, Objective, Regression, SingleLabel
from ..runtime.machine import package_version
from ..tasks import TASKS, TaskSpec
from .card_rule import decision_section, metrics_note, problem_note
from .fmt import (UNTIMED, fmt, fmt_metric, fmt_seconds, md_code, md_text, runtime_words, setfit_stage_rows,
                  stage_only)
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


_md, _code = md_text, md_code       # a user's text in Markdown; a code span


@dataclass(frozen=True)
class _Wording:
    """What the card says of one problem type."""

    task: str                      # the Task bullet of custom data ({n}: the number of labels)
    kind: str                      # "fine-tuned ... for single-text <kind> on ..."
    note: str                      # after the Problem type bullet
    pipeline: str                  # what a plain transformers pipeline gives
    kwargs: str = ""               # the pipeline call's extra arguments


WORDING = {
    SingleLabel: _Wording("text classification ({n} labels)", "classification", "",
                          "the label with the highest probability"),
    MultiLabel: _Wording("multi-label classification ({n} labels)", "multi-label classification",
                         " (one sigmoid per label; a label is predicted when its probability is above 0.5)",
                         "top_k=None returns every label with its sigmoid probability", ", top_k=None"),
    Regression: _Wording("regression (one score per example)", "regression", "",
                         "the score is the model's raw output (no softmax)")}


@dataclass
class _Facts:
    """What the card's sections share, worked out once from results, config and metadata."""

    model_dir: Path
    results: dict
    config: dict
    metadata: dict
    spec: TaskSpec | None
    objective: Objective           # what the labels mean (objective/)
    names: list[str]               # label names (empty for regression)
    text_columns: list[str]
    base: Any                      # the base model as given (Hub id, alias or local path)
    base_hub: str | None           # its Hub id, None for a local path
    eval_splits: dict              # split name -> metrics
    metric_names: list[str]
    main: Any                      # the main metric's name
    train: dict                    # results.json's "train"

    @property
    def wording(self) -> _Wording:
        return WORDING[type(self.objective)]

    @property
    def pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def precision(self) -> Any:
        """The precision training ran in (train.precision: bf16 asked on a CPU without bf16 units runs fp32)."""
        return self.train.get("precision") or self.train.get("mixed_precision") or self.config.get("mixed_precision")


def _gather(model_dir: Path, results: dict, config: dict, metadata: dict) -> _Facts:
    """The task, labels, inputs, base model and recorded metrics the card describes."""
    task = (metadata.get("task") or results.get("task") or config.get("task") or None)
    spec = TASKS.get(str(task).lower()) if task else None
    labels = recorded_schema(metadata, config, results, spec) or LabelSchema(Regression.kind)
    text_columns = [str(c) for c in (metadata.get("text_columns") or config.get("text_columns") or
                                     (spec.text_columns if spec else []))]
    base = metadata.get("base_model") or config.get("model") or results.get("model")
    base_hub = hub_id(str(base)) if base else None
    eval_splits = results.get("eval_splits") or ({"validation": results["eval"]} if results.get("eval") else {})
    metric_names = list(metadata.get("metrics") or [])
    for metrics in eval_splits.values():
        metric_names += [m for m in metrics if m not in NOT_METRICS and m not in metric_names]
    main = results.get("main_metric") or metadata.get("main_metric")
    return _Facts(model_dir, results, config, metadata, spec, labels.objective, labels.names, text_columns,
                  base, base_hub, eval_splits, metric_names, main, results.get("train") or {})


def _front_matter(f: _Facts) -> list[str]:
    """The Hub's YAML front matter between `---` lines."""
    import yaml

    front: dict[str, Any] = {"library_name": "transformers", "pipeline_tag": "text-classification"}
    if f.base_hub:
        front["base_model"] = f.base_hub
    front["tags"] = ["tuneloop", "text-classification"]
    if f.spec is not None and f.config.get("data_dir") != "sample":
        front["datasets"] = ["nyu-mll/glue"]
    if f.metric_names:
        front["metrics"] = f.metric_names
    return ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip(), "---", ""]


def _glue_data(spec: TaskSpec, config: dict) -> tuple[str, str, str]:
    """(title, description, task text) of a GLUE task's training data: the sample, a local folder or the Hub."""
    data_title = f"GLUE {spec.folder or spec.name.upper()}"
    if config.get("data_dir") == "sample":
        data_text = (f"tuneloop's built-in sample in GLUE {spec.folder}'s layout (synthetic sentence pairs, "
                     "not the GLUE data)")
        data_title = "the built-in MRPC-style sample"
    elif config.get("data_dir"):
        data_text = f"GLUE {spec.folder} from the local folder {_code(Path(str(config['data_dir'])).name)}"
    else:
        data_text = f"GLUE {spec.folder} from the Hugging Face Hub (`nyu-mll/glue`, config `{spec.hub_config}`)"
    return data_title, data_text, f"{spec.folder} ({_code(spec.name)}): {spec.description}"


def _custom_data(config: dict, wording: _Wording, names: list[str]) -> tuple[str, str, str]:
    """(title, description, task text) of custom training data (train_file, validation_file)."""
    train_name = Path(str(config["train_file"])).name if config.get("train_file") else None
    data_title = train_name or "custom data"
    data_text = f"the file {_code(train_name)}" if train_name else "custom data"
    if config.get("validation_file"):
        data_text += f", evaluated on {_code(Path(str(config['validation_file'])).name)}"
    return data_title, data_text, wording.task.format(n=len(names))


def _base_model_line(base: Any, base_hub: str | None) -> str:
    """The "Base model" bullet: the Hub id, and what was given when that was an alias or a local folder."""
    base_line = f"- **Base model:** {_code(base_hub or base)}"
    if base_hub and base_hub != base:
        base_line += f" (given as {_code(base)}, {ALIASES[base].description if base in ALIASES else base})"
    elif not base_hub and base:
        base_line += " (a local folder or alias, not a Hub id)"
    return base_line


def _overview(f: _Facts) -> list[str]:
    """The title, what the model is and the bullets: base model, task, training data, problem type, input and
    max length."""
    from ..version import __version__

    if f.spec is not None:
        data_title, data_text, task_text = _glue_data(f.spec, f.config)
    else:
        data_title, data_text, task_text = _custom_data(f.config, f.wording, f.names)
    base, base_hub, metadata, config = f.base, f.base_hub, f.metadata, f.config
    short_base = base_hub.split("/")[-1] if base_hub else (Path(str(base)).name if base else "model")
    lines = [f"# {_md(short_base)} fine-tuned on {_md(data_title)}", ""]
    lines += [f"This model is {_code(base_hub or base) if base else 'a model'} fine-tuned with tuneloop "
              f"{metadata.get('tuneloop_version') or __version__} for {'sentence-pair' if f.pair else 'single-text'} "
              f"{f.wording.kind} on {data_text}.", "",
              _base_model_line(base, base_hub),
              f"- **Task:** {task_text}",
              f"- **Training data:** {data_text}",
              f"- **Problem type:** {_code(f.objective.kind)}" + problem_note(f.wording.note, f.metadata),
              "- **Input:** " + (" and ".join(_code(c) for c in f.text_columns) +
                                 (" (a text pair)" if f.pair else " (one text)") if f.text_columns else "—"),
              f"- **Max length:** {metadata.get('max_length') or config.get('max_length') or 'the tokenizer maximum'}"
              + (" tokens" if (metadata.get("max_length") or config.get("max_length")) else ""), ""]
    return lines


def _labels_section(f: _Facts) -> list[str]:
    """## Labels: the id -> label table (and the data's label separator), or what the regression score is."""
    lines = ["## Labels", ""]
    if not f.objective.classes:
        lines += ["Regression: one score (the model outputs a single number"
                  + ("; GLUE STS-B scores run from 0 to 5" if f.spec is not None and f.spec.name == "stsb" else "")
                  + ").", ""]
        scale = f.results.get("target_scale")
        if scale:                       # model/target_scale.py: learned standardised, saved in the targets' units
            lines += [f"The targets were far from unit scale, so the model learned them standardised (mean "
                      f"{scale['mean']:,.6g}, scale {scale['scale']:,.6g}); that scale is folded into the final layer, "
                      "so the output is in the targets' own units.", ""]
    else:
        labels_meta = f.metadata.get("labels") or {}
        lines += ["| id | label |", "|---:|---|"] + [f"| {i} | {_md(n)} |" for i, n in enumerate(f.names)] + [""]
        if labels_meta.get("separator"):
            lines += [f"Labels in the data were separated by {_code(labels_meta['separator'])}.", ""]
    return lines


def _warmup_text(config: dict) -> str:
    return ("none" if not (config.get("warmup_steps") or config.get("warmup_ratio")) else
            f"{config['warmup_steps']} steps" if config.get("warmup_steps") else
            f"{config['warmup_ratio']:.0%} of the steps (warmup_ratio {config['warmup_ratio']:g})")


def _epochs_text(train: dict, config: dict, stopped_early: bool = False) -> str:
    epochs = f"{fmt(train.get('epochs', config.get('epochs')))}"
    if stopped_early and config.get("epochs") is not None:    # the schedule was laid out over --epochs
        epochs += f" of {fmt(config['epochs'])}, stopped early"
    if train.get("steps") is not None:
        epochs += f" ({train['steps']} optimizer steps)"
    if config.get("max_steps"):
        epochs += f", max_steps {config['max_steps']}"
    return epochs


def _global_batch_text(train: dict, config: dict) -> str:
    global_batch = train.get("global_batch_size")
    batch_text = fmt(global_batch)
    if global_batch is not None:
        batch_text += (f" ({fmt(config.get('batch_size'))} per device × {fmt(train.get('num_processes'))} "
                       f"process(es) × {fmt(config.get('gradient_accumulation_steps', 1))} accumulation step(s))")
    return batch_text


def _hyperparameters_section(f: _Facts) -> list[str]:
    """## Training hyperparameters: a table of the options that shaped training; for --method setfit its stage
    first, and the training loop's options only when the loop trained (an end-to-end head)."""
    config, train, precision = f.config, f.train, f.precision
    stage = f.results.get("setfit")
    hyper = setfit_stage_rows(stage) if stage else []
    if not stage_only(f.results):
        hyper += [("epochs", _epochs_text(train, config, bool(f.results.get("stopped_early")))),
                  ("batch size per device", fmt(config.get("batch_size"))),
                  ("global batch size", _global_batch_text(train, config)),
                  ("learning rate (AdamW, peak)", fmt(config.get("lr"))),
                  ("schedule", fmt(config.get("lr_scheduler"))), ("warmup", _warmup_text(config)),
                  ("weight decay", fmt(config.get("weight_decay"))),
                  ("max gradient norm",
                   fmt(config.get("max_grad_norm")) if config.get("max_grad_norm") else "no clipping")]
    hyper += [("max length", fmt(config.get("max_length")) if config.get("max_length") else "tokenizer maximum"),
              ("mixed precision", "fp32 (none)" if precision == "no" else fmt(precision)),
              ("seed", fmt(config.get("seed")))]
    lines = ["## Training hyperparameters", "", "| hyperparameter | value |", "|---|---|"]
    return lines + [f"| {_md(k)} | {_md(v)} |" for k, v in hyper] + [""]


def _evaluation_section(f: _Facts) -> list[str]:
    """## Evaluation results: a metric × split table, the main metric first and in bold, then loss and examples."""
    lines = ["## Evaluation results", ""]
    eval_splits, metric_names, main = f.eval_splits, f.metric_names, f.main
    if not eval_splits:
        return lines + ["No evaluation results were recorded.", ""]
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
    return lines + [""] + metrics_note(f.metadata)


def _decision_section(f: _Facts) -> list[str]:
    """## Decision rule (card_rule.py): what tuneloop's predict and evaluate apply."""
    return decision_section(f.metadata, f.results, f.names)


def _stage_time(f: _Facts, stage: dict) -> str:
    """The Training time sentence of --method setfit's contrastive stage, or of --method probe's linear probe."""
    if stage.get("method") == "probe":
        return (f"The linear probe: {fmt_seconds(stage.get('seconds'))} (the frozen encoder's embeddings of the "
                f"{fmt(f.train.get('num_samples'))} training rows, and a logistic-regression head fitted on them in "
                f"{fmt_seconds(stage.get('head_fit_s'))}; the encoder is not trained)")
    return (f"The SetFit stage: {fmt_seconds(stage.get('seconds'))} ({fmt(stage.get('pairs'))} pairs in "
            f"{fmt(stage.get('steps'))} steps, the head fitted in {fmt_seconds(stage.get('head_fit_s'))})")


def _training_time_section(f: _Facts) -> list[str]:
    """## Training time: wall time, throughput and hardware; nothing when results.json records no training. A
    resumed run's times are those since the resume (its checkpoints keep no clock)."""
    train, precision, stage = f.train, f.precision, f.results.get("setfit")
    if not train:
        return []
    lines = ["## Training time", ""]
    where = (f"on {fmt(train.get('num_processes'))} process(es)" + (f" ({train['device']})" if train.get("device")
                                                                     else "")
             + f", precision {'fp32' if precision == 'no' else fmt(precision)}.")
    if stage:
        lines += [f"{_stage_time(f, stage)}, {where}", ""]
        if stage_only(f.results):
            return lines
    since = runtime_words(f.results)
    resumed = since != "in all"
    return lines + [
            f"{fmt_seconds(train.get('runtime_s'))} {since} (training {fmt_seconds(train.get('training_s'))}, "
            f"evaluation {fmt_seconds(train.get('eval_s'))}{'; ' + UNTIMED if resumed else ''}) for "
            f"{fmt(train.get('num_samples'))} training examples × {fmt(train.get('epochs'))} epochs, "
            f"{fmt(train.get('samples_per_second'))} samples/s{' after the resume' if resumed else ''}, {where}", ""]


def _usage_section(f: _Facts) -> list[str]:
    """## How to use: tuneloop (the saved decision rule applied), a plain transformers pipeline (raw scores), then
    tuneloop predict (a file, one example) and evaluate. MODEL stands for this folder's path (or its Hub id once
    uploaded): the card travels with the folder, so no path of the machine that trained it is written."""
    kwargs = f.wording.kwargs
    example = ('{"text": "The cat sat on the mat.", "text_pair": "A cat was sitting on the mat."}' if f.pair
               else '"This was a pleasure to read."')
    ours = ('("The cat sat on the mat.", "A cat was sitting on the mat.")' if f.pair
            else '"This was a pleasure to read."')
    what = f.wording.pipeline
    column_hint = " and ".join(_code(c) for c in f.text_columns) if f.text_columns else "the model's text column(s)"
    texts = '"The cat sat on the mat." "A cat was sitting on the mat."' if f.pair else '"This was a pleasure to read."'
    rule = f.metadata.get("decision")
    ours_intro = ("With tuneloop, in Python (the model's saved decision rule — calibration, thresholds, abstaining "
                  "— applied): A plain pipeline does not apply it: it gives the raw softmax/sigmoid scores." if rule
                  else "With tuneloop, in Python:")        # regression saves no rule: nothing to apply
    return ["## How to use", "", "`MODEL` below is this folder's path (or its Hub id once uploaded).", "",
            ours_intro, "", "```python", "import tuneloop", "",
            'classifier = tuneloop.load("MODEL")', f"print(classifier.predict({ours}))", "```", "",
            "With 🤗 Transformers alone (" + what + "):", "", "```python",
            "from transformers import pipeline", "",
            f"classify = pipeline(\"text-classification\", model=\"MODEL\"{kwargs})",
            f"print(classify({example}))", "```", "",
            "With tuneloop, a file (.csv, .tsv, .json, .jsonl, .parquet or .xlsx with the column(s) "
            f"{column_hint}, or name yours with `--text-columns`):", "", "```bash",
            "tuneloop predict --model MODEL --input FILE --output predictions.tsv", "```", "",
            "or one example:", "", "```bash", f"tuneloop predict --model MODEL {texts}", "```", "",
            "and its metrics again on the validation data recorded with it:", "", "```bash",
            "tuneloop evaluate --model MODEL", "```", ""]


def _versions_section() -> list[str]:
    """## Framework versions: those of the installed packages that matter to the model."""
    versions = [(p, package_version(p)) for p in ("tuneloop", "transformers", "torch", "accelerate", "datasets")]
    return ["## Framework versions", ""] + [f"- {p} {v}" for p, v in versions if v] + [""]


def write_model_card(model_dir: str | os.PathLike, results: dict, config: dict, metadata: dict) -> Path:
    """Write `model_dir/README.md`: Hub metadata (front matter), what the model is, its labels, inputs,
    hyperparameters, final metrics, training time and how to use it. Returns the card's path.

    `results`: the contents of results.json; `config`: the resolved config (a dict or a TrainConfig);
    `metadata`: the model's tuneloop.json (read from `model_dir` when empty)."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise TuneloopError(f"{model_dir}: not a folder; give the saved model folder (RUN/model)")
    config = config.to_dict() if hasattr(config, "to_dict") else dict(config or {})
    results = dict(results or {})
    if not metadata:
        metadata = read_metadata(model_dir)
    facts = _gather(model_dir, results, config, metadata)
    lines: list[str] = []
    for section in (_front_matter, _overview, _labels_section, _hyperparameters_section, _evaluation_section,
                    _decision_section, _training_time_section, _usage_section):
        lines += section(facts)
    lines += _versions_section()
    card = model_dir / MODEL_CARD_FILE
    atomic_write_bytes(card, "\n".join(lines).encode("utf-8"))
    return card
