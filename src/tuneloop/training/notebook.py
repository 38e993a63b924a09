"""Training on several processes from a notebook (accelerate.notebook_launcher)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from ..config.options import TrainConfig
from ..exceptions import TuneloopError


def notebook_train(config: TrainConfig, run: Callable[[TrainConfig], object], results_file: str,
                   num_processes: int | None = None, mixed_precision: str | None = None) -> dict:
    """`run(config)` on several processes (GPUs, TPU cores, or CPU processes) through
    `accelerate.notebook_launcher`; returns what they wrote to OUT/`results_file` (results.json, or an
    experiment's summary.json). `config`: resolved with `machine=False` (config.resolve), so that this process
    touches no CUDA before the launcher forks the workers. Call it once per notebook kernel."""
    from accelerate import notebook_launcher

    notebook_launcher(run, args=(config,), num_processes=num_processes,
                      mixed_precision=mixed_precision or (config.mixed_precision
                                                          if config.mixed_precision != "auto" else "no"))
    written = Path(config.output_dir) / results_file
    if not written.is_file():                   # processes that stopped without raising here
        raise TuneloopError(f"notebook_train: the processes wrote no {written} (see their output above)")
    return json.loads(written.read_text(encoding="utf-8"))
