"""Training on several processes from a notebook (accelerate.notebook_launcher)."""

from __future__ import annotations

import json
from pathlib import Path

from ..config.options import TrainConfig
from ..config.resolve import resolve_config
from ..layout import RESULTS_FILE
from .loop import run_training


def notebook_train(config: TrainConfig | None = None, num_processes: int | None = None,
                   mixed_precision: str | None = None, **options) -> dict:
    """Train from a notebook on several processes (GPUs, TPU cores, or CPU processes) through
    `accelerate.notebook_launcher`; returns what results.json holds. Call it once per notebook kernel."""
    from accelerate import notebook_launcher

    # resolved here, so we know where the processes put results.json; `auto` precision and attention are left
    # to the workers: this process must not touch CUDA before notebook_launcher forks them
    config = resolve_config(config, machine=False, **options)
    notebook_launcher(run_training, args=(config,), num_processes=num_processes,
                      mixed_precision=mixed_precision or (config.mixed_precision
                                                          if config.mixed_precision != "auto" else "no"))
    return json.loads((Path(config.output_dir) / RESULTS_FILE).read_text(encoding="utf-8"))


