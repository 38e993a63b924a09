"""Which training step a run trains with, and why (the log and results.json say both): the captured step
(step.CapturedStep) where `--captured-step` asks for it and the run allows it, else the Accelerate step."""

from __future__ import annotations

from ..exceptions import ConfigError

# `auto` turns the captured step on only once benchmarks/gpu_check.sh has shown it equal to the eager step on a GPU
# (losses and weights within its tolerance after N steps) and faster there. Shown on an H100 on 2026-11-27
# (benchmarks/results/2026-11-27-h100-gpu-check.json): MiniLM's losses and weights after 60 MRPC steps equal to the
# eager step's (differences 0.0), 2.6 against 11.5 ms a step; bert-base's 3-epoch loop 11.0 s against 37.4 s; MiniLM
# dev F1 0.8697 against 0.8700 (mean of 3 seeds). Set it back to False to make `auto` train eagerly again.
PROVEN_ON_GPU = True


def blockers(config, device_type: str, num_processes: int, precision: str, has_targets: bool) -> list[str]:
    """What in this run keeps its step from being captured (empty: it can be)."""
    found = []
    if device_type != "cuda":
        found.append(f"it runs on {device_type}, not a CUDA GPU")
    if num_processes > 1:
        found.append(f"{num_processes} processes (gradients are averaged across them between steps)")
    if config.gradient_accumulation_steps > 1:
        found.append("--gradient-accumulation-steps > 1")
    if precision != "no":
        found.append(f"{precision} mixed precision (fp32 with TF32 is captured)")
    if config.compiled:
        found.append(f"--compile {config.compile}")
    if config.skip_nonfinite_batches:
        found.append("--skip-nonfinite-batches (a host sync per step)")
    if config.method not in ("finetune", "auto"):        # auto: fine-tuning unless choose.py chose another
        found.append(f"--method {config.method}")
    if has_targets:
        found.append("row weights or soft targets in the data")
    return found


def decide(config, device_type: str, num_processes: int, precision: str, has_targets: bool = False) -> tuple[bool, str]:
    """(capture the step?, why), for the log and results.json. `--captured-step on` where it cannot run is refused
    before anything is written."""
    choice = config.captured_step
    if choice == "off":
        return False, "--captured-step off"
    found = blockers(config, device_type, num_processes, precision, has_targets)
    if found:
        if choice == "on":
            raise ConfigError(f"--captured-step on: this run's step cannot be captured: {'; '.join(found)}. "
                              "Leave --captured-step auto to train with the eager step")
        return False, "auto: " + "; ".join(found)
    if choice == "auto" and not PROVEN_ON_GPU:
        return False, ("auto: not yet proven equal to the eager step on a GPU (benchmarks/gpu_check.sh); "
                       "--captured-step on uses it")
    return True, f"{choice}: one CUDA process, fp32 with TF32, no accumulation"
