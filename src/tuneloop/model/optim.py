"""The optimizer and the learning-rate schedule: AdamW (fused where the device has it) without weight decay on
biases and LayerNorm weights, and a transformers schedule with warmup."""

from __future__ import annotations

import logging

log = logging.getLogger("tuneloop")


def build_optimizer(model, lr: float, weight_decay: float, device_type: str, exclude=(), capturable: bool = False):
    """torch AdamW over the model's trainable parameters but those in `exclude`; no decay on biases and LayerNorm
    weights; fused kernel where the device has one. `capturable`: its state and step count on the device, so the
    step can be recorded in a CUDA graph (training.step.CapturedStep)."""
    import torch

    decay, no_decay, left_out = [], [], {id(p) for p in exclude}
    for name, param in model.named_parameters():
        if not param.requires_grad or id(param) in left_out:
            continue
        lowered = name.lower()
        skip = param.ndim < 2 or "bias" in lowered or "layernorm" in lowered or "layer_norm" in lowered
        (no_decay if skip else decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = device_type in ("cuda", "cpu", "xpu", "mps")
    try:
        return torch.optim.AdamW(groups, lr=lr, fused=fused, capturable=capturable)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(groups, lr=lr, capturable=capturable)


def build_scheduler(optimizer, name: str, total_steps: int, warmup_steps: int, warmup_ratio: float,
                    cycles: int = 1):
    """transformers' schedule `name` with the warmup asked; `constant`, which takes no warmup (transformers ignores
    it), becomes `constant_with_warmup` when there is one (said). `cosine_with_restarts` restarts `cycles` times
    (the run gives its epochs: a restart at each epoch's start); transformers' default of one cycle is `cosine`."""
    from transformers import get_scheduler

    warmup = warmup_steps or int(round(warmup_ratio * total_steps))
    if warmup >= total_steps > 0:                # the rate would never reach --lr
        asked = f"--warmup-steps {warmup}" if warmup_steps else f"--warmup-ratio {warmup_ratio:g}"
        log.warning(f"{asked}: the run has {total_steps} optimizer steps, so the learning rate never reaches --lr (it "
                    f"ends at {total_steps / warmup:.0%} of it); give fewer warmup steps or --warmup-ratio")
    if name == "constant" and warmup:
        log.info(f"--lr-scheduler constant with {warmup} warmup steps: constant_with_warmup (constant alone ignores "
                 "a warmup)")
        name = "constant_with_warmup"
    extra = {"scheduler_specific_kwargs": {"num_cycles": max(1, cycles)}} if name == "cosine_with_restarts" else {}
    return get_scheduler(name, optimizer=optimizer, num_warmup_steps=warmup, num_training_steps=total_steps, **extra)
