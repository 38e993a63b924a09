"""The student's start for `tuneloop distill`: `--model` as it is, or `--student-layers` of a model cut once into
OUT/distill/student_init, from the teacher's own fine-tuned layers or from `--model` (`--student-init`)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..atomic import atomic_folder
from ..config.options import TrainConfig
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
