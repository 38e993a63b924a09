"""Optional capabilities and the pip extra that installs each. The core (`pip install tuneloop`) trains,
evaluates and predicts; a command whose extra is missing stops with one line naming the install command."""

from __future__ import annotations

import importlib
import importlib.util

from .exceptions import TuneloopError

# extra -> (what it enables, the modules it must make importable)
EXTRAS = {
    "export": ("tuneloop export and exported (ONNX) model folders", ("onnx", "onnxruntime")),
    "serve": ("tuneloop serve", ("fastapi", "uvicorn")),
    "search": ("tuneloop search", ("optuna",)),
    "postgres": ("tuneloop search --storage postgresql://...", ("optuna", "psycopg")),
    "lora": ("--lora (LoRA adapters) and LoRA model folders", ("peft",)),
    "excel": ("reading .xlsx files", ("openpyxl",)),
}


def missing(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here."""
    return [m for m in EXTRAS[extra][1] if importlib.util.find_spec(m) is None]


def problem(extra: str) -> str | None:
    """The one line saying what is missing for `extra` and how to install it; None when nothing is."""
    absent = missing(extra)
    if not absent:
        return None
    return f'{EXTRAS[extra][0]} needs {", ".join(absent)} (not installed here): pip install "tuneloop[{extra}]"'


def require(extra: str) -> None:
    """Stop with a one-line TuneloopError when the extra's packages are not installed."""
    line = problem(extra)
    if line:
        raise TuneloopError(line)
