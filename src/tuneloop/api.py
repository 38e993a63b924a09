"""The public Python API: `train` (one entry for a run or an experiment; the command line calls it too),
`notebook_train`, and `load` (a trained model as a `Classifier`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

from .config.options import TrainConfig

if TYPE_CHECKING:
    from .predict.classifier import Classifier


def train(config: TrainConfig | str | os.PathLike | None = None, *, on_step: Callable | None = None,
          **options) -> dict:
    """Fine-tune, evaluate and save; returns what results.json holds. `config`: a TrainConfig, or a YAML file of
    options (as `tuneloop train --config FILE`); keywords are options like the CLI's flags (`train(epochs=1)`)
    and win over both. With `seeds`, `num_seeds` or `folds`: one run per seed or fold, and the summary
    (summary.json's contents) instead. `on_step(state)` is called after every optimizer step."""
    from .config.resolve import resolve_config
    from .experiments.runs import is_experiment, run_experiment
    from .training.loop import run_training

    if isinstance(config, (str, os.PathLike)):
        resolved = resolve_config(config_file=str(config), **options)
    else:
        resolved = resolve_config(config, **options)
    return run_experiment(resolved, on_step) if is_experiment(resolved) else run_training(resolved, on_step)


def notebook_train(config: TrainConfig | None = None, num_processes: int | None = None, **options) -> dict:
    """`train` on several processes from a notebook, through accelerate.notebook_launcher."""
    from .training.notebook import notebook_train as _notebook_train

    return _notebook_train(config, num_processes=num_processes, **options)


def load(path: str | os.PathLike, *, cpu: bool = False, precision: str = "fp32") -> "Classifier":
    """A trained model as a `Classifier`: a tuneloop model folder (RUN/model), a run folder, a plain transformers
    folder, or a folder `tuneloop export` wrote. `predict`, `predict_proba` and `evaluate` use it; it loads once."""
    from .predict.classifier import Classifier

    return Classifier.load(path, cpu=cpu, precision=precision)
