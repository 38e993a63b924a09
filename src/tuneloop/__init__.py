"""tuneloop: fine-tune pretrained transformer encoders for text classification and regression."""

from .config import TrainConfig
from .errors import ConfigError, DataError, Interrupted, TuneloopError
from .version import __version__


def train(config: TrainConfig | None = None, *, on_step=None, **options) -> dict:
    """Fine-tune, evaluate and save; returns the contents of results.json. See `TrainConfig` for options;
    `on_step(state)` is called after every optimizer step. With `seeds`, `num_seeds` or `folds`, one run per
    seed or fold and the summary (summary.json's contents) instead."""
    from .experiments import train as _train

    return _train(config, on_step=on_step, **options)


def notebook_train(config: TrainConfig | None = None, num_processes: int | None = None, **options) -> dict:
    """`train` on several processes from a notebook, through accelerate.notebook_launcher."""
    from .launch import notebook_train as _notebook_train

    return _notebook_train(config, num_processes=num_processes, **options)


__all__ = ["notebook_train", "TrainConfig", "train", "TuneloopError", "ConfigError", "DataError", "Interrupted",
           "__version__"]
