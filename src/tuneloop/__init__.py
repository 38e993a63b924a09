"""tuneloop: fine-tune pretrained transformer encoders for text classification and regression."""

__version__ = "0.1.0"

from .config import TrainConfig  # noqa: E402
from .errors import ConfigError, DataError, TuneloopError  # noqa: E402
from .checkpoint import Interrupted  # noqa: E402


def train(config: TrainConfig | None = None, **options) -> dict:
    """Fine-tune, evaluate and save; returns the contents of results.json. See `TrainConfig` for options."""
    from .loop import train as _train

    return _train(config, **options)


__all__ = ["TrainConfig", "train", "TuneloopError", "ConfigError", "DataError", "Interrupted", "__version__"]
