"""tuneloop: fine-tune pretrained transformer encoders for text classification and regression."""

__version__ = "0.1.0"

from .config import TrainConfig  # noqa: E402
from .errors import ConfigError, DataError, TuneloopError  # noqa: E402
from .checkpoint import Interrupted  # noqa: E402


def train(config: TrainConfig | None = None, **options) -> dict:
    """Fine-tune, evaluate and save; returns the contents of results.json. See `TrainConfig` for options."""
    from .loop import train as _train

    return _train(config, **options)


def notebook_train(config: TrainConfig | None = None, num_processes: int | None = None, **options) -> dict:
    """`train` on several processes from a notebook, through accelerate.notebook_launcher."""
    from .launch import notebook_train as _notebook_train

    return _notebook_train(config, num_processes=num_processes, **options)


__all__ = ["notebook_train", "TrainConfig", "train", "TuneloopError", "ConfigError", "DataError", "Interrupted", "__version__"]
