"""What a task reports: the GLUE tasks (columns, labels, metrics, Hub ids, the file layout the GLUE distribution
ships) and, for the user's own data, the metrics of each problem type; which metric is the main one and which
are better when lower. How the metrics are computed is evaluation/metrics.py's job."""

from __future__ import annotations

from dataclasses import dataclass, field

HUB_DATASET = "nyu-mll/glue"

# the problem types (transformers' names, as config.json and tuneloop.json record them)
SINGLE_LABEL = "single_label_classification"
MULTI_LABEL = "multi_label_classification"
REGRESSION = "regression"
PROBLEM_TYPES = (SINGLE_LABEL, MULTI_LABEL, REGRESSION)


@dataclass(frozen=True)
class GlueFile:
    """One GLUE .tsv file: which columns hold the texts, the label and the example index.

    `names` is set for files that have no header line (CoLA train/dev): the columns in order.
    """

    name: str
    text_columns: tuple[str, ...]
    label_column: str | None = None
    index_column: str | None = None
    names: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TaskSpec:
    name: str
    description: str
    text_columns: tuple[str, ...]          # canonical (Hub) column names
    label_names: tuple[str, ...] | None    # None: regression
    metrics: tuple[str, ...]
    main_metric: str
    train: GlueFile | None
    validation: dict[str, GlueFile] = field(default_factory=dict)   # split name -> file
    test: dict[str, GlueFile] = field(default_factory=dict)
    hub_config: str = ""
    folder: str = ""                       # the task's folder name in the GLUE distribution

    @property
    def problem_type(self) -> str:
        return REGRESSION if self.label_names is None else SINGLE_LABEL

    @property
    def num_labels(self) -> int:
        return 1 if self.label_names is None else len(self.label_names)


def _pair(a, b, label=None, index=None, names=None, file=""):
    return GlueFile(file, (a, b), label, index, names)


_MRPC_TEXT = ("#1 String", "#2 String")
_COLA_NAMES = ("source", "label", "original_label", "sentence")
_NLI_TEXT = ("sentence1", "sentence2")

TASKS: dict[str, TaskSpec] = {t.name: t for t in [
    TaskSpec("cola", "single sentence: is it grammatical English?", ("sentence",),
             ("unacceptable", "acceptable"), ("matthews_correlation",), "matthews_correlation",
             GlueFile("train.tsv", ("sentence",), "label", None, _COLA_NAMES),
             {"validation": GlueFile("dev.tsv", ("sentence",), "label", None, _COLA_NAMES)},
             {"test": GlueFile("test.tsv", ("sentence",), None, "index")}, "cola", "CoLA"),
    TaskSpec("sst2", "single sentence: movie review sentiment", ("sentence",), ("negative", "positive"),
             ("accuracy",), "accuracy", GlueFile("train.tsv", ("sentence",), "label"),
             {"validation": GlueFile("dev.tsv", ("sentence",), "label")},
             {"test": GlueFile("test.tsv", ("sentence",), None, "index")}, "sst2", "SST-2"),
    TaskSpec("mrpc", "sentence pair: are they paraphrases?", ("sentence1", "sentence2"),
             ("not_equivalent", "equivalent"), ("accuracy", "f1"), "f1",
             _pair(*_MRPC_TEXT, label="Quality", file="train.tsv"),
             {"validation": _pair(*_MRPC_TEXT, label="Quality", file="dev.tsv")},
             {"test": _pair(*_MRPC_TEXT, index="index", file="test.tsv")}, "mrpc", "MRPC"),
    TaskSpec("qqp", "question pair: same question?", ("question1", "question2"), ("not_duplicate", "duplicate"),
             ("accuracy", "f1"), "f1", _pair("question1", "question2", label="is_duplicate", file="train.tsv"),
             {"validation": _pair("question1", "question2", label="is_duplicate", file="dev.tsv")},
             {"test": _pair("question1", "question2", index="id", file="test.tsv")}, "qqp", "QQP"),
    TaskSpec("stsb", "sentence pair: similarity score 0-5 (regression)", ("sentence1", "sentence2"), None,
             ("pearson", "spearmanr"), "pearson", _pair(*_NLI_TEXT, label="score", file="train.tsv"),
             {"validation": _pair(*_NLI_TEXT, label="score", file="dev.tsv")},
             {"test": _pair(*_NLI_TEXT, index="index", file="test.tsv")}, "stsb", "STS-B"),
    TaskSpec("mnli", "sentence pair: entailment, neutral or contradiction", ("premise", "hypothesis"),
             ("entailment", "neutral", "contradiction"), ("accuracy",), "accuracy",
             _pair(*_NLI_TEXT, label="gold_label", file="train.tsv"),
             {"validation_matched": _pair(*_NLI_TEXT, label="gold_label", file="dev_matched.tsv"),
              "validation_mismatched": _pair(*_NLI_TEXT, label="gold_label", file="dev_mismatched.tsv")},
             {"test_matched": _pair(*_NLI_TEXT, index="index", file="test_matched.tsv"),
              "test_mismatched": _pair(*_NLI_TEXT, index="index", file="test_mismatched.tsv")}, "mnli", "MNLI"),
    TaskSpec("qnli", "question/sentence: does the sentence answer it?", ("question", "sentence"),
             ("entailment", "not_entailment"), ("accuracy",), "accuracy",
             _pair("question", "sentence", label="label", file="train.tsv"),
             {"validation": _pair("question", "sentence", label="label", file="dev.tsv")},
             {"test": _pair("question", "sentence", index="index", file="test.tsv")}, "qnli", "QNLI"),
    TaskSpec("rte", "sentence pair: textual entailment", ("sentence1", "sentence2"),
             ("entailment", "not_entailment"), ("accuracy",), "accuracy",
             _pair(*_NLI_TEXT, label="label", file="train.tsv"),
             {"validation": _pair(*_NLI_TEXT, label="label", file="dev.tsv")},
             {"test": _pair(*_NLI_TEXT, index="index", file="test.tsv")}, "rte", "RTE"),
    TaskSpec("wnli", "sentence pair: Winograd-schema entailment", ("sentence1", "sentence2"),
             ("not_entailment", "entailment"), ("accuracy",), "accuracy",
             _pair(*_NLI_TEXT, label="label", file="train.tsv"),
             {"validation": _pair(*_NLI_TEXT, label="label", file="dev.tsv")},
             {"test": _pair(*_NLI_TEXT, index="index", file="test.tsv")}, "wnli", "WNLI"),
    TaskSpec("ax", "diagnostic set (test only; predict it with an MNLI model)", ("premise", "hypothesis"),
             ("entailment", "neutral", "contradiction"), ("accuracy",), "accuracy", None, {},
             {"test": _pair(*_NLI_TEXT, index="index", file="diagnostic.tsv")}, "ax", "diagnostic"),
]}


def get_task(name: str | None) -> TaskSpec | None:
    return TASKS[name.lower()] if name else None


# ---------------------------------------------------------------------------------------------- metric catalogue
CLASSIFICATION_METRICS = ("accuracy", "f1_macro")
BINARY_METRICS = ("accuracy", "f1")
MULTI_LABEL_METRICS = ("f1_micro", "f1_macro", "exact_match")
REGRESSION_METRICS = ("pearson", "spearmanr", "mse")
LOWER_IS_BETTER = ("loss", "mse")
# the values a metric can take (an interval of its mean is cut to them); one not named here: any number
METRIC_RANGES = {**dict.fromkeys(("accuracy", "f1", "f1_macro", "f1_micro", "exact_match"), (0.0, 1.0)),
                 **dict.fromkeys(("pearson", "spearmanr", "matthews_correlation"), (-1.0, 1.0)),
                 **dict.fromkeys(("mse", "loss"), (0.0, float("inf")))}
ALWAYS_REPORTED = ("loss",)                # every evaluation also reports the loss (and num_samples)


def metric_names(task: TaskSpec | None, problem_type: str, num_labels: int) -> tuple[str, ...]:
    """The metrics reported for a GLUE task (GLUE's names) or, for the user's own data, by problem type; every
    single-label classification also reports macro-F1 (the mean of the classes' F1, blind to their sizes)."""
    if task is not None:
        names = task.metrics
    elif problem_type == REGRESSION:
        return REGRESSION_METRICS
    elif problem_type == MULTI_LABEL:
        return MULTI_LABEL_METRICS
    else:
        names = BINARY_METRICS if num_labels == 2 else CLASSIFICATION_METRICS
    return names if "f1_macro" in names or problem_type == REGRESSION else names + ("f1_macro",)


def main_metric(task: TaskSpec | None, problem_type: str) -> str:
    if task is not None:
        return task.main_metric
    return {REGRESSION: "pearson", MULTI_LABEL: "f1_micro"}.get(problem_type, "accuracy")


def possible_metrics(task: TaskSpec | None, problem_type: str = "auto") -> tuple[str, ...]:
    """Every metric a run could report before its labels are read (to check --metric-for-best up front)."""
    if task is not None:
        names = task.metrics
    else:
        kinds = PROBLEM_TYPES if problem_type == "auto" else (problem_type,)
        names = tuple(dict.fromkeys(n for kind in kinds for count in (2, 3) for n in metric_names(None, kind, count)))
    return names + ALWAYS_REPORTED


def metric_range(metric: str) -> tuple[float, float]:
    return METRIC_RANGES.get(metric, (float("-inf"), float("inf")))


def lower_is_better(metric: str) -> bool:
    return metric in LOWER_IS_BETTER


def signed_score(metric: str, value: float) -> float:
    """The value to maximise: `value`, negated for metrics that are better when lower (loss, mse)."""
    return -value if lower_is_better(metric) else value


def unknown_metric_message(metric: str, known) -> str | None:
    """Why `metric` cannot choose the best evaluation (None when it can): --metric-for-best names one of `known`."""
    if metric in known:
        return None
    return f"{metric!r} is not reported for this data; choose one of {', '.join(known)}"
