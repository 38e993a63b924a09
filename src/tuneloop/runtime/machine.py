"""What this machine and Python environment are: CPU features, accelerators, how the process was launched,
package versions. Read-only: nothing here changes the process."""

from __future__ import annotations

import functools
import os
import platform
import sys
from importlib import metadata


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_flags() -> set[str]:
    return set(_cpuinfo().get("flags", "").split())


def cpu_name() -> str:
    """The CPU's model name: /proc/cpuinfo (x86 'model name', some ARM/POWER kernels' 'cpu model'/'Hardware'),
    macOS's sysctl, else what platform knows."""
    info = _cpuinfo()
    for key in ("model name", "cpu model", "Hardware"):
        if info.get(key):
            return info[key]
    if sys.platform == "darwin":
        import subprocess

        try:
            return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                  check=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


# the instruction sets CPU speed depends on here (oneDNN/MKL kernels, bf16 units); a virtual machine's model name can
# hide them ("AMD EPYC" was both an AVX2-only Zen 3 and a Zen 4 with AVX-512 and AVX512-BF16 in this project's hosts)
MATH_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve")


def cpu_identity() -> dict:
    """What tells two CPUs with one model name apart: vendor, family, model, stepping, and which MATH_FLAGS it has."""
    info = _cpuinfo()
    flags = cpu_flags() | set(info.get("Features", "").split())                         # Features: ARM's flags
    ident = " ".join(f"{key} {info[key]}" for key in ("cpu family", "model", "stepping") if key in info)
    return {"cpu_id": f"{info.get('vendor_id', platform.machine())} {ident}".strip(),
            "cpu_features": [flag for flag in MATH_FLAGS if flag in flags]}


def accelerator_present() -> bool:
    import torch

    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


def launched_by_a_launcher() -> bool:
    """Started by torchrun / accelerate launch / mpirun with several processes."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 or os.environ.get("LOCAL_RANK") is not None


def use_cpu(cpu_option: bool) -> bool:
    """--cpu, or several processes on a machine without accelerators: Accelerate only sets up multi-process
    CPU training (gloo) when asked for the CPU, so `torchrun`/`accelerate launch --multi_gpu` on a CPU machine
    would otherwise start N independent single-process runs."""
    return cpu_option or (launched_by_a_launcher() and not accelerator_present())


def runs_on_cpu(cpu_option: bool) -> bool:
    """Whether a run's device will be the CPU."""
    return use_cpu(cpu_option) or not accelerator_present()


def runs_on_cuda(cpu_option: bool) -> bool:
    """Whether a run's device will be an NVIDIA (or ROCm) GPU."""
    import torch

    return not use_cpu(cpu_option) and torch.cuda.is_available()


def native_bf16(cpu_only: bool) -> bool:
    """bf16 that the hardware computes natively: Ampere+ GPUs, or CPUs with AMX."""
    import torch

    if torch.cuda.is_available() and not cpu_only:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return "amx_bf16" in cpu_flags()


def single_process_cpu_launch() -> bool:
    """`accelerate launch --cpu --num_processes N` without mpirun: Accelerate starts one process, not N."""
    return (not launched_by_a_launcher() and os.environ.get("ACCELERATE_USE_CPU", "").lower() == "true"
            and bool(os.environ.get("MASTER_ADDR"))
            and not any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")))


def package_version(name: str) -> str | None:
    """The installed version of a distribution package, None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def interactive() -> bool:
    """stderr is a terminal: progress bars redraw in place. Elsewhere (a log file, CI, a cluster job) progress
    comes as plain lines, every PLAIN_EVERY_S seconds."""
    return sys.stderr.isatty()


def effective_precision(mixed_precision: str, cpu_option: bool) -> str:
    """What --mixed-precision does on this device: on a CPU, bf16 is oneDNN's bf16 matrix products, which need
    bf16 units (AMX or AVX512-BF16); without them the products stay fp32 and bf16 is reported as such."""
    if mixed_precision != "bf16" or not runs_on_cpu(cpu_option):
        return mixed_precision
    return "bf16" if native_bf16(cpu_only=True) or "avx512_bf16" in cpu_flags() else \
        "fp32 (bf16 asked; this CPU has no bf16 units: AMX or AVX512-BF16)"
