"""tuneloop: fine-tune pretrained transformers for text classification and regression.

    import tuneloop
    results = tuneloop.train(train_file="train.csv", validation_file="dev.csv", epochs=3)
    with tuneloop.load(results["output_dir"]) as clf:
        clf.predict(["a text", "another text"])
"""

import time as _time

_IMPORTED_AT = _time.perf_counter()    # when tuneloop's import began: training/timeline.py's start-up

from .api import distill, load, notebook_train, train  # noqa: E402
from .config.options import TrainConfig  # noqa: E402
from .exceptions import ConfigError, DataError, Interrupted, TuneloopError  # noqa: E402
from .version import __version__  # noqa: E402

__all__ = ["Classifier", "ConfigError", "DataError", "Interrupted", "TrainConfig", "TuneloopError", "__version__",
           "distill", "load", "notebook_train", "train"]


def __getattr__(name):
    if name == "Classifier":        # imported on first use: `import tuneloop` stays light (no torch)
        from .predict.classifier import Classifier

        return Classifier
    raise AttributeError(f"module 'tuneloop' has no attribute {name!r}")
