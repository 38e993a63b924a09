"""The public Python API: `train` (one entry for a run or an experiment; the command line calls it too),
`distill`, `notebook_train`, and `load` (a trained model as a `Classifier`)."""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .config.options import TrainConfig

if TYPE_CHECKING:
    from .predict.classifier import Classifier


class TrainResult(dict):
    """What results.json holds (summary.json's for seeds and folds), as a dict, plus `output_dir` and
    `classifier`: the saved model loaded as a Classifier (loaded once, on first use)."""

    def __init__(self, results: dict, output_dir: str):
        super().__init__(results)
        self.output_dir = output_dir
        self._classifier = None

    @property
    def classifier(self) -> "Classifier":
        if self._classifier is None:
            from .exceptions import TuneloopError
            from .layout import MODEL_DIR

            if not (Path(self.output_dir) / MODEL_DIR).is_dir():     # seeds and folds copy their best run's here
                raise TuneloopError(f"{self.output_dir}: no saved model to load (the run saved none)")
            self._classifier = load(self.output_dir)
        return self._classifier


def _resolved(caller: str, config, data: tuple, options: dict, machine: bool = True) -> TrainConfig:
    """The run's TrainConfig from what `train` and `notebook_train` both take: a TrainConfig or a YAML file, the
    data from Python (`data`: train=, validation=, test=) or as `*_file=` paths or tables, and the options."""
    from .config.resolve import resolve_config
    from .data.memory import as_table, data_option
    from .exceptions import ConfigError

    train, validation, test = data
    _check_config(caller, config)
    for name, keyword in (("train_file", "train"), ("validation_file", "validation"), ("test_file", "test")):
        given = options.get(name)                # train_file=df: the data, as train= would take it
        if given is not None and not isinstance(given, (str, os.PathLike)):
            options[name] = as_table(given, keyword)
    if type(train).__name__ == "DatasetDict" and validation is None and "validation" in train \
            and options.get("validation_file") is None:
        validation = train["validation"]
    for name, table in (("train_file", data_option(train, "train")),
                        ("validation_file", data_option(validation, "validation")),
                        ("test_file", data_option(test, "test"))):
        if table is not None:
            if options.get(name) is not None:
                keyword = name.removesuffix("_file")
                raise ConfigError(f"{caller}: both {keyword}= and {name}= give the {keyword} data; keep one")
            options[name] = table
    if isinstance(config, (str, os.PathLike)):
        resolved = resolve_config(config_file=str(config), machine=machine, **options)
    else:
        resolved = resolve_config(config, machine=machine, **options)
    if resolved.teacher:
        raise ConfigError("--teacher: distilling a teacher is `tuneloop distill` (tuneloop.distill in Python)")
    return resolved


def train(config: TrainConfig | str | os.PathLike | None = None, *, train=None, validation=None, test=None,
          on_step: Callable | None = None, **options) -> TrainResult:
    """Fine-tune, evaluate and save; returns what results.json holds (a TrainResult: a dict with `.classifier` and
    `.output_dir`). `config`: a TrainConfig, or a YAML file of options (as `tuneloop train --config FILE`); keywords
    are options like the CLI's flags (`train(epochs=1)`; a string is read as the flag's, `lr="2e-5"`) and win over
    both. `train=`, `validation=`, `test=`: data from Python — a pandas DataFrame, a datasets.Dataset (a DatasetDict
    gives its "train" and, unless `validation=` or `validation_file=` is given, "validation" splits), a dict of
    columns or `(texts, labels)` with texts as strings or (first, second) pairs — read like files (columns detected
    unless `text_columns=`/`label_column=` name them; a split given both ways is refused). With `seeds`, `num_seeds`
    or `folds`: one run per seed or fold, and the summary (summary.json's contents) instead. `on_step(state)` is
    called after every optimizer step."""
    from .runtime.kept import imports_kept

    _check_on_step("tuneloop.train", on_step)
    with imports_kept():                 # what the libraries' first import sets: the caller's process as it was
        resolved = _resolved("tuneloop.train", config, (train, validation, test), options)
        return TrainResult(_launched(resolved, on_step), resolved.output_dir)


def distill(config: TrainConfig | str | os.PathLike | None = None, *, on_step: Callable | None = None,
            **options) -> TrainResult:
    """Distil a teacher into a small student (`tuneloop distill`): `teacher=` a model or run folder (or a file of
    soft labels), `unlabeled_file=` the texts it labels, optionally `train_file=` labelled rows and
    `validation_file=`; `model=` and `student_layers=` make the student; every `train` option applies to it.
    Returns results.json's contents (a TrainResult) with `distillation`: teacher vs student on validation."""
    from .config.resolve import resolve_config
    from .exceptions import ConfigError
    from .experiments.distill import distill as run_distill
    from .experiments.distill import saved_options

    _check_on_step("tuneloop.distill", on_step)
    _check_config("tuneloop.distill", config, "unlabeled_file=PATH")
    for name in ("train", "validation", "test"):      # "unknown option 'train'", or a DataFrame's truth value, had
        if name in options:                           # said it
            raise ConfigError(f"tuneloop.distill: takes no {name}=; give that data as a file, {name}_file=PATH")
    if options.get("teacher") is not None and not isinstance(options["teacher"], (str, os.PathLike)):
        raise ConfigError(f"tuneloop.distill: teacher= takes a model or run folder (or a file of soft labels), got "
                          f"{type(options['teacher']).__name__}")
    for name in ("unlabeled_file", "train_file", "validation_file", "test_file"):
        if options.get(name) is not None and not isinstance(options[name], (str, os.PathLike)):
            raise ConfigError(f"tuneloop.distill: {name}= takes a path, got {type(options[name]).__name__}; write "
                              "the data to a file first (e.g. df.to_csv(\"data.csv\", index=False))")
    from .runtime.kept import imports_kept

    with imports_kept():                 # what the libraries' first import sets: the caller's process as it was
        options = {**saved_options(options), **options}     # --resume: the distillation's, not the student's
        if isinstance(config, (str, os.PathLike)):
            resolved = resolve_config(config_file=str(config), **options)
        else:
            resolved = resolve_config(config, **options)
        results = run_distill(resolved, on_step)
    return TrainResult(results, resolved.output_dir)


def notebook_train(config: TrainConfig | str | os.PathLike | None = None, num_processes: int | None = None, *,
                   train=None, validation=None, test=None, mixed_precision: str | None = None,
                   **options) -> TrainResult:
    """`train` on several processes from a notebook, through accelerate.notebook_launcher: the same arguments
    (a TrainConfig or YAML file, data as train=/validation=/test=, options; seeds or folds run every run and
    return the summary), and the same TrainResult."""
    from .exceptions import ConfigError
    from .experiments.runs import is_experiment
    from .layout import RESULTS_FILE, SUMMARY_FILE
    from .training.notebook import notebook_train as launch

    if "on_step" in options:              # not a TrainConfig option: "unknown option 'on_step'" misled
        raise ConfigError("tuneloop.notebook_train: on_step= is not taken (the run goes on in the launched "
                          "processes); for a callback per step use tuneloop.train(..., on_step=...)")
    if num_processes is not None:        # 0 ran in the kernel unsaid; "2" failed deep in accelerate
        if isinstance(num_processes, bool) or not isinstance(num_processes, numbers.Integral) or num_processes < 1:
            raise ConfigError(f"tuneloop.notebook_train: num_processes is a whole number of processes, 1 or more "
                              f"(or left out), got {num_processes!r}")
        num_processes = int(num_processes)
    # resolved here, so that we know where the processes put their results; `auto` precision and attention are left
    # to the workers: this process must not touch CUDA before notebook_launcher forks them
    if mixed_precision is not None:          # the run's precision, not only the launcher's environment (the run's
        options = {**options, "mixed_precision": mixed_precision}       # own option would win over it)
    resolved = _resolved("tuneloop.notebook_train", config, (train, validation, test), options, machine=False)
    if resolved.dry_run:
        raise ConfigError("--dry-run: it writes nothing for notebook_train to give back; check the run with "
                          "tuneloop.train(..., dry_run=True)")
    written = SUMMARY_FILE if is_experiment(resolved) else RESULTS_FILE
    return TrainResult(launch(resolved, _launched, written, num_processes, mixed_precision), resolved.output_dir)


def _check_config(caller: str, config, data: str = "train=... (e.g. train=df)") -> None:
    if not (config is None or isinstance(config, (TrainConfig, str, os.PathLike))):
        from .exceptions import ConfigError

        raise ConfigError(f"{caller}: the first argument is a TrainConfig or a YAML file, got "
                          f"{type(config).__name__}; pass data as {data}")


def _check_on_step(caller: str, on_step) -> None:
    """`on_step` refused before the run is set up (a non-function failed at the first step, deep in the loop)."""
    if on_step is not None and not callable(on_step):
        from .exceptions import ConfigError

        raise ConfigError(f"{caller}: on_step is a function called with the training state after every optimizer "
                          f"step, got {type(on_step).__name__}")


def _launched(config: TrainConfig, on_step: Callable | None = None) -> dict:
    """What `train` runs, and each of notebook_train's processes: the run, or every run of an experiment (seeds,
    folds) and its summary, as `accelerate launch -m tuneloop train` does; returns results.json's (summary.json's)
    contents."""
    from .experiments.runs import is_experiment, run_experiment
    from .training.loop import run_training

    return run_experiment(config, on_step) if is_experiment(config) else run_training(config, on_step)


def load(path: str | os.PathLike, *, cpu: bool = False, precision: str = "fp32") -> "Classifier":
    """A trained model as a `Classifier`: a tuneloop model folder (RUN/model), a run folder, a plain transformers
    folder, or a folder `tuneloop export` wrote. `predict`, `predict_proba` and `evaluate` use it; it loads once."""
    from .runtime.kept import imports_kept

    with imports_kept():                 # torch's first import (the classifier's) sets warnings filters: given back
        from .predict.classifier import Classifier

        return Classifier.load(path, cpu=cpu, precision=precision)
