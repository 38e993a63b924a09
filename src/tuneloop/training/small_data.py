"""Small training sets: the settings that keep them from collapsing to one predicted class, decided once the training
rows are counted (`--small-data auto`) and recorded in config.yaml as what ran (`on` or `off` and the values).

Why: a run of a few dozen optimizer steps ends before the model has left the majority class (Mosbach et al., ICLR
2021, trace small-data "failed runs" to too few steps with no warmup and too large a learning rate; they and Zhang et
al., ICLR 2021, find that small sets want many more passes than the usual 3 epochs). What changes, for an option
left at its default or at the --recipe's value (one you set, by flag, keyword or YAML key, is kept):

- training length: at least MIN_STEPS optimizer steps, and at least MIN_EPOCHS epochs as long as those stay within
  EPOCH_FLOOR_STEPS steps (so that a set just under SMALL_ROWS does not triple its time); at most MAX_EPOCHS,
- warmup: WARMUP_RATIO of the steps when no warmup is given,
- learning rate: at most MAX_LR,
- evaluation: once per epoch (at most 20 times, training/state.py), not a recipe's several times per epoch.

Measured (benchmarks/results/*-small-data*.json: the built-in 400-pair sample over 5 seeds, bench_small_data.py at
8 to 256 rows per class, the 10-epoch floor before and after; bench_small_regression.py for regression, which few
steps under-train as well: its heads end short of their targets): see the small-data guide. --method setfit and
probe are left alone, built for few rows (training/choose.py picks among them and fine-tuning under --method auto).
"""

from __future__ import annotations

import logging
import math

from ..config.options import TrainConfig, with_trait
from . import state

log = logging.getLogger("tuneloop")

SMALL_ROWS = 1000            # training rows below which `auto` turns the small-data settings on
MIN_STEPS = 200              # optimizer steps a small-data run trains at least
MIN_EPOCHS = 10              # ... and epochs (measured against 5: the small-data guide, docstrings at 64 per class)
EPOCH_FLOOR_STEPS = 500      # ... the epochs floor adding steps up to this many
MAX_EPOCHS = 100             # ... reached with at most this many epochs
WARMUP_RATIO = 0.1
MAX_LR = 5e-5
DECIDES = with_trait("small_data")        # what `adapt` may change (`small_data=True` in the options)


def left_to_tuneloop(config: TrainConfig, name: str) -> bool:
    """Whether an option holds its default or the --recipe's value: one the user set (`chosen`, filled in by
    resolve_config) is theirs."""
    return name not in (config.chosen or ())


def applies(config: TrainConfig, train_rows: int) -> bool:
    if config.small_data == "off" or config.method not in ("finetune", "auto"):
        return False
    return config.small_data == "on" or train_rows < SMALL_ROWS


def adapt(config: TrainConfig, train_rows: int, num_processes: int = 1, quiet: bool = False) -> TrainConfig:
    """The run's config with the small-data settings decided: `small_data` becomes on or off, and on small data the
    options left to tuneloop change as the module says (each change said in the log). A resumed run keeps what its
    config.yaml recorded."""
    if config.resume is not None and config.small_data != "auto":
        return config                  # config.yaml recorded it (a search trial resumes from `auto`: decided again)
    if not applies(config, train_rows):
        if config.small_data == "on" and config.method != "finetune" and not quiet:     # asked for, not given: said
            how = "" if not left_to_tuneloop(config, "method") else " (--method auto's choice)"
            log.warning(f"--small-data on does nothing with --method {config.method}{how}: its stage keeps its own "
                        "settings (the few-shot guide), and config.yaml records small_data: off; for the small-data "
                        "settings, use --method finetune")
        return config.replace(small_data="off")
    changes: dict = {"small_data": "on"}
    said = []
    batches = math.ceil(train_rows / (config.batch_size * num_processes))       # each process's loader batches
    steps_per_epoch = max(1, state.optimizer_steps_per_epoch(batches, config.gradient_accumulation_steps))
    steps = max(MIN_STEPS, min(MIN_EPOCHS * steps_per_epoch, EPOCH_FLOOR_STEPS))
    epochs = min(MAX_EPOCHS, math.ceil(steps / steps_per_epoch))
    if config.max_steps is None and left_to_tuneloop(config, "epochs") and config.epochs < epochs:
        changes["epochs"] = epochs
        said.append(f"{epochs} epochs ({epochs * steps_per_epoch} steps instead of {config.epochs * steps_per_epoch})")
    if not config.warmup_steps and left_to_tuneloop(config, "warmup_ratio") and config.warmup_ratio < WARMUP_RATIO:
        changes["warmup_ratio"] = WARMUP_RATIO
        said.append(f"warmup over {WARMUP_RATIO:.0%} of the steps")
    if left_to_tuneloop(config, "lr") and config.lr > MAX_LR:
        changes["lr"] = MAX_LR
        said.append(f"learning rate {MAX_LR:g} instead of {config.lr:g}")
    if config.eval_every is not None and left_to_tuneloop(config, "eval_every"):
        changes["eval_every"] = None                 # a recipe's 4/epoch would evaluate every few steps
        said.append("evaluation once per epoch")
    why = f"{train_rows} training rows" + (f" (fewer than {SMALL_ROWS})" if config.small_data == "auto" else "")
    if not quiet:                      # choose.py's folds decide it again, silently
        log.info(f"small data, {why}: " + (", ".join(said) if said else "your settings already fit it") +
                 "; --small-data off keeps the usual settings")
    return config.replace(**changes)
