"""The student's start for `tuneloop distill`: `--model` as it is, or `--student-layers` of a model cut once into
OUT/distill/student_init, from the teacher's own fine-tuned layers or from `--model` (`--student-init`)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..atomic import atomic_folder
from ..config.options import TrainConfig
from ..exceptions import ConfigError, TuneloopError
from ..layout import STUDENT_INIT_DIR, model_folder
from . import teacher as t

log = logging.getLogger("tuneloop")


def student_model(cfg: TrainConfig, folder: Path) -> tuple[str, dict]:
    """(--model, or a copy of the model `student_source` names with --student-layers of its layers, made once in
    OUT/distill/student_init; where it was cut from and why)."""
    if not cfg.student_layers:
        return cfg.model, {"model": cfg.model, "why": "--model as it is (no --student-layers)"}
    from ..model.shrink import keep_layers

    source, why = student_source(cfg)
    init = folder / STUDENT_INIT_DIR
    if not (init / "config.json").is_file():
        log.info(f"student: cut from {source} ({why})")
        with atomic_folder(init) as tmp:    # a stop mid-save left config.json without weights, reused by --resume
            keep_layers(source, cfg.student_layers, tmp)
    return str(init), {"model": source, "why": why}


def check_student_layers(cfg: TrainConfig) -> None:
    """--student-layers against the layer count in the config of the model `student_source` cuts, before the
    teacher's work: a count or index it does not have is refused with keep_layers' own line (as a ConfigError). A
    config that cannot be read or names no count is left to keep_layers, which refuses it after the teacher."""
    if not cfg.student_layers:
        return
    from ..model.shrink import chosen_layers

    source = student_source(cfg)[0]
    total = layer_count(source)
    if total is None:
        return
    try:
        chosen_layers(list(cfg.student_layers), total, source)
    except TuneloopError as e:
        raise ConfigError(str(e)) from None


def layer_count(model_name: str) -> int | None:
    """A model's (an alias, a model or run folder, a Hub id) number of transformer layers, from its config (the
    field keep_layers sets); None when it cannot be read or names none."""
    from transformers import AutoConfig

    from ..model.loading import resolve_model
    from ..model.shrink import COUNT_FIELDS

    try:
        config = AutoConfig.from_pretrained(resolve_model(str(model_folder(model_name))))
    except (OSError, ValueError, TuneloopError):
        return None
    count = next((getattr(config, f) for f in COUNT_FIELDS if hasattr(config, f)), None)
    return count if isinstance(count, int) and count > 0 else None


def student_source(cfg: TrainConfig) -> tuple[str, str]:
    """(the model --student-layers cuts the student from, why), by --student-init: the teacher's own folder (its
    fine-tuned layers: DistilBERT's initialisation), --model, or by default the teacher where it is the same network
    as --model. Measured (bench_distill.py, 3 seeds): cut from a fine-tuned MiniLM teacher, a 3-layer student kept
    more of it than one cut from the pretrained MiniLM on both sets (see docs/guides/distill.md)."""
    folder = teacher_layers(cfg)               # --student-init teacher without any: refused by check_options
    if cfg.student_init == "model":
        return cfg.model, "--student-init model"
    if cfg.student_init == "teacher":
        return folder, "--student-init teacher"
    if folder is None:
        return cfg.model, "auto: the teacher has no PyTorch layers to cut (a soft-label file or an exported model)"
    if t.same_network(folder, cfg.model):
        return folder, "auto: the teacher is the same network as --model, so its fine-tuned layers"
    return cfg.model, "auto: the teacher is another network than --model"


def teacher_layers(cfg: TrainConfig) -> str | None:
    """The teacher's PyTorch model folder, or None (a soft-label file, an exported model)."""
    from ..model.onnx_model import is_onnx_folder

    if t.is_soft_label_file(cfg.teacher):
        return None
    folder = model_folder(cfg.teacher)
    return None if is_onnx_folder(folder) else str(folder)
