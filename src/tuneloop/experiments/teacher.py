"""The teacher's side of `tuneloop distill`: the texts it labels, its outputs on them (a model through
`Classifier.run`, the one inference path, or a file of soft labels), the checks that its labels are the given
ones, and the student's training table: every text with the teacher's probabilities, and the given labels where
there are any (`data/soft_targets.SoftTargets`, saved once in the run folder and reused by a resume)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import signal
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.columns import detect_columns
from ..data.label_numbers import _regression_value, dots_group_thousands
from ..data.labels import LabelSchema, _split_labels
from ..data.readers import FORMATS, decimal_comma, file_columns, format_suffix, iter_rows, position_word
from ..data.sources import load_user_files
from ..exceptions import DataError, Interrupted, TuneloopError
from ..layout import model_folder
from ..sheets import is_data_file
from ..tasks import MULTI_LABEL, REGRESSION, SINGLE_LABEL

log = logging.getLogger("tuneloop")
SUM_TOLERANCE = 1e-3            # a row of class probabilities sums to 1 within this


@dataclass
class Texts:
    """Rows to train on: (text, second text or None) each, their given labels' raw text (None: none given)."""

    items: list
    labels: list
    columns: tuple[str, ...]


def is_soft_label_file(teacher: str) -> bool:
    return is_data_file(teacher) and format_suffix(teacher) in FORMATS


def read_texts(path, text_columns, label_column, labelled: bool) -> Texts:
    """A data file's rows as items (and raw labels when `labelled`), read like a training file."""
    raw = load_user_files(path if labelled else None, None, None if labelled else path, text_columns, label_column)
    table = raw.train if labelled else raw.test["test"]
    a, b = table["text_a"], table["text_b"]
    labels = table["label"] if labelled else [None] * len(a)
    return Texts(list(zip(a, b, strict=True)), labels, raw.text_columns)


def warn_unread_labels(path, texts: Texts, label_column) -> None:
    """An --unlabeled-file with a label column: said, as its labels are not read (the teacher labels every text)."""
    found = detect_columns(path, file_columns(path), list(texts.columns), label_column, False).label
    if found:
        log.warning(f"--unlabeled-file {path}: its labels ({found!r}) are not read, the teacher labels every text "
                    "there; to train on them too, give those rows as --train-file")


def read_soft_label_file(path: str, text_columns, problem_type: str) -> tuple[Texts, np.ndarray, LabelSchema]:
    """(texts, soft targets, schema) of a file of soft labels: text column(s) and one number column per class
    (single-label: each row sums to 1), per label (multi-label: each in [0, 1]) or one score (regression)."""
    available = file_columns(path)
    texts = detect_columns(path, available, text_columns, None, False).text
    columns = [c for c in available if c not in texts]
    word, items, values = position_word(path), [], []
    for position, row in iter_rows(path):
        items.append((str(row[texts[0]]), str(row[texts[1]]) if len(texts) > 1 else None))
        numbers = []
        for c in columns:
            try:
                numbers.append(float(row[c]))
            except (TypeError, ValueError):
                raise DataError(f"{path}: {word} {position}: column {c!r} holds {row[c]!r}, not a probability; "
                                "a soft-label file holds the text column(s) and one number per class") from None
        values.append((position, numbers))
    if not columns or not values:
        raise DataError(f"{path}: no probability columns or no rows (columns: {', '.join(available)})")
    kind = problem_type if problem_type != "auto" else REGRESSION if len(columns) == 1 else SINGLE_LABEL
    if (kind == REGRESSION) != (len(columns) == 1) and kind != MULTI_LABEL:      # a traceback in the student's loss
        need = "one number column (the score)" if kind == REGRESSION else "one number column per class (two or more)"
        raise DataError(f"{path}: --problem-type {kind} reads {need}; the file has {len(columns)} "
                        f"({', '.join(columns)}) besides its text column(s) ({', '.join(texts)})")
    soft = np.array([v for _, v in values], dtype=np.float64)
    for (position, numbers), row in zip(values, soft, strict=True):
        _check_row(path, word, position, row, kind)
    schema = LabelSchema(kind, [] if kind == REGRESSION else list(columns))
    return Texts(items, [None] * len(items), texts), soft.astype(np.float32), schema


def _check_row(path, word, position, row, kind) -> None:
    if not np.all(np.isfinite(row)):
        raise DataError(f"{path}: {word} {position}: a soft label is not a finite number")
    if kind == REGRESSION:
        return
    if np.any(row < 0) or np.any(row > 1):
        raise DataError(f"{path}: {word} {position}: probabilities must be in [0, 1], got {row.tolist()}")
    if kind == SINGLE_LABEL and not math.isclose(float(row.sum()), 1.0, abs_tol=SUM_TOLERANCE):
        raise DataError(f"{path}: {word} {position}: the class probabilities sum to {row.sum():.4g}, not 1; fix "
                        "the row, or pass --problem-type multi_label_classification for one probability per label")


def teacher_task(teacher: str) -> str | None:
    """The GLUE task a teacher model folder was trained on, when that task names its classes (MRPC's
    not_equivalent, equivalent): the given files may then write class ids, as GLUE's do."""
    from ..model.loading import read_metadata
    from ..tasks import get_task

    try:
        task = read_metadata(model_folder(teacher)).get("task")
        spec = get_task(task)
    except (OSError, ValueError, KeyError, AttributeError):
        return None
    return task if spec is not None and spec.label_names and spec.problem_type == SINGLE_LABEL else None


def check_same_labels(teacher: LabelSchema, given: Texts, source: str, ids: bool = False) -> None:
    """The given labels must be ones the teacher has (its classes or labels; numbers for a regression teacher);
    `ids`: class ids 0..K-1 too (teacher_task)."""
    raw = {v for v in given.labels if v is not None}
    if teacher.problem_type == REGRESSION:
        bad = sorted({v for v, x in zip(given.labels, given_scores(given.labels, source), strict=True)
                      if v is not None and x is None})
    else:
        names = set(teacher.names)
        items = {item for v in raw for item in (_split_labels(v, teacher.separator)
                                                if teacher.problem_type == MULTI_LABEL else [v])}
        known = names | ({str(i) for i in range(len(teacher.names))} if ids else set())
        bad = sorted(i for i in items if i not in known and _as_name(i) not in known)
    if bad:
        has = "scores" if teacher.problem_type == REGRESSION else ", ".join(teacher.names[:20])
        raise DataError(f"{source}: the teacher's labels ({has}) differ from the given labels ({', '.join(bad[:5])} "
                        "are not the teacher's); give labels the teacher predicts, or another teacher")


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def _as_name(text: str) -> str:
    x = _number(text)
    return str(int(x)) if x is not None and x.is_integer() else text


def given_scores(labels: list, source) -> list:
    """Given regression labels as numbers, read as tuneloop reads a training file's (data/labels: a decimal-comma
    file's commas, and its dots where they group thousands); None where a label is none or not a number."""
    comma = bool(source) and decimal_comma(str(source))
    values = sorted({v for v in labels if v is not None})
    thousands = comma and bool(dots_group_thousands(values))
    return [None if v is None else _regression_value(v, comma, thousands) for v in labels]


def teacher_key(teacher: str, texts: Texts, inputs: dict | None = None) -> str:
    """What the teacher's outputs depend on: the teacher (its files' names, sizes and times), the texts, and any
    other `inputs` the saved targets are made from (a soft-label file's: the given labels, the problem type)."""
    digest = hashlib.sha256()
    path = Path(teacher)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.exists() else []
    digest.update(json.dumps([str(path.resolve()) if path.exists() else teacher,
                              [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]]).encode())
    digest.update(json.dumps(texts.items).encode())
    if inputs:
        digest.update(json.dumps(inputs, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def teacher_outputs(classifier, items: list, batch_size: int, quiet: bool,
                    features: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """(the teacher's probabilities (its raw softmax or sigmoid; regression: its scores), its sentence features
    (`features_in_logits`) when `features`, else None) for `items`, batched through `Classifier.run`, longest texts
    first, with a progress bar."""
    from ..predict.inputs import encoded

    checked = classifier.items([item[0] if item[1] is None else list(item) for item in items])[0]
    with features_in_logits(classifier.model) if features else contextlib.nullcontext():
        logits = classifier.run(encoded(checked, classifier.tokenizer, classifier.policy), batch_size=batch_size,
                                quiet=quiet, desc="Teacher").all_logits
    outputs = max(classifier.label_schema.num_labels, 1)
    probabilities = classifier.objective.probabilities(logits[:, :outputs]).astype(np.float32)
    return probabilities, logits[:, outputs:].astype(np.float32) if features else None


@contextlib.contextmanager
def stop_told(output_dir):
    """A stop (Ctrl-C, or a run's own SIGINT/SIGTERM) while the teacher loads and labels the texts, told as one line
    naming the resume: nothing of the pass is saved, and `tuneloop distill --resume` on the same folder runs the
    teacher again, then starts the student (distill._student: no checkpoint yet, so from its beginning). A Ctrl-C
    is an Interrupted, as a stop in the student's run is (the CLI's one line, exit 130)."""
    try:
        yield
    except (KeyboardInterrupt, Interrupted) as stopped:
        number = getattr(stopped, "signal_number", signal.SIGINT)
        raise Interrupted(f"interrupted in the teacher's labelling pass; its outputs were not saved. Resume with the "
                          f"command that started it and --resume (tuneloop distill ... --output-dir {output_dir} "
                          "--resume: the teacher labels the texts again, then the student trains; in Python: "
                          f"tuneloop.distill(..., output_dir={str(output_dir)!r}, resume='latest'))", number) from None


@contextlib.contextmanager
def features_in_logits(model):
    """While open, `model`'s logits come with its sentence features appended: the attention-masked mean of its last
    hidden states (what a mean-pooled student's classifier reads: model/pooling.masked_mean, not normalised), so the
    one inference path (Classifier.run) gathers them, in row order, with the logits."""
    import torch

    from ..model.pooling import masked_mean

    def ask(module, args, kwargs):
        return args, {**kwargs, "output_hidden_states": True}

    def append(module, args, kwargs, output):
        if output.hidden_states is None:
            raise TuneloopError(f"--feature-weight: the teacher ({type(module).__name__}) gives no hidden states; "
                                "use --feature-weight 0")
        mean = masked_mean(output.hidden_states[-1], kwargs.get("attention_mask"), normalise=False)
        output.logits = torch.cat([output.logits, mean.to(output.logits.dtype)], dim=-1)
        output.hidden_states = None
        return output

    handles = [model.register_forward_pre_hook(ask, with_kwargs=True),
               model.register_forward_hook(append, with_kwargs=True)]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


def hidden_size(model_name: str) -> int | None:
    """A model's (a model or run folder's, a Hub id's) hidden size, from its config; None when it names none."""
    from transformers import AutoConfig

    from ..model.loading import resolve_model

    config = AutoConfig.from_pretrained(resolve_model(str(model_folder(model_name))))
    return next((getattr(config, f) for f in ("hidden_size", "d_model", "dim", "n_embd") if hasattr(config, f)),
                None)


# what makes two configs the same network (fine-tuning changes none of them)
SAME_NETWORK = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "vocab_size", "max_position_embeddings")


def same_network(teacher_folder: str, model_name: str) -> bool:
    """Whether the teacher's model folder is the same network as `model_name` (an alias, folder or Hub id): their
    configs agree on SAME_NETWORK, as a model fine-tuned from the other does. False when either cannot be read."""
    from transformers import AutoConfig

    from ..model.loading import resolve_model

    try:
        configs = [AutoConfig.from_pretrained(resolve_model(name)).to_dict() for name in (teacher_folder, model_name)]
    except (OSError, ValueError, TuneloopError):
        return False
    return all(configs[0].get(key) == configs[1].get(key) for key in SAME_NETWORK)


def decided_label(row: np.ndarray, schema: LabelSchema):
    """The teacher's answer as a label column holds it: the class, the labels carried (a list), or the score."""
    if schema.problem_type == REGRESSION:
        return float(row[0])
    if schema.problem_type == MULTI_LABEL:
        return [n for n, p in zip(schema.names, row, strict=True) if p > 0.5]
    return schema.names[int(np.argmax(row))]


def gold_targets(labels: list, schema: LabelSchema, source: str = "--train-file") -> np.ndarray:
    """Given labels (from `source`) as soft targets (one-hot, a 0/1 row, the score): a soft-label-file teacher has
    no outputs for the labelled rows."""
    from ..data.labels import LabelEncoder

    out = np.zeros((len(labels), max(schema.num_labels, 1)), dtype=np.float32)
    if schema.problem_type == REGRESSION:       # checked numbers (check_same_labels)
        out[:, 0] = given_scores(labels, source)
        return out
    encode = LabelEncoder(schema, "--train-file")
    for i, raw in enumerate(labels):
        target = encode(raw, i + 1)
        if schema.problem_type == SINGLE_LABEL:
            out[i, target] = 1.0
        else:
            out[i] = target
    return out
