"""Regression targets far from unit scale (prices, counts, 0-100 scores, tiny rates) learned standardised.

A new head starts with outputs within about ±1 of zero and AdamW moves each weight by about the learning rate a
step, so a model asked for targets around 36,000 ends predicting near zero (measured: MSE 1.8e9 against the TF-IDF
baseline's Pearson 0.98 on the docs' price set), and one asked for targets of ±0.001 spends its steps on the head's
noise. The textbook cure is to train on z = (y − mean) / scale; here the model's final Linear keeps its usual
weights and a forward hook turns its output z into y = z·scale + mean, while the objective's loss divides the
residual by `scale` (objective.Regression): the weights then take exactly the steps training on standardised
targets takes (tests/test_target_scale.py checks it step by step), and everything downstream (evaluation, metrics,
the decision rule, predictions) sees scores in the targets' own units.

A saved model folder holds the head folded (weight·scale, bias·scale + mean), so a plain transformers load gives
the targets' units too; its config records `tuneloop_target_scale`, and a run loading such a folder unfolds the
head (when it loaded it rather than drawing a new one) before hooking its own scale. A head without a bias (a
decoder's score) cannot hold the mean: it is scaled by the targets' root mean square and not shifted.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import torch

from .loading import final_linear

CONFIG_KEY = "tuneloop_target_scale"    # model.config: the scale folded into a saved head
# Targets are standardised when their standard deviation is outside [LOW, HIGH] or their mean beyond ±HIGH; inside,
# nothing changes (GLUE STS-B's 0-5 scores: mean 2.7, sd 1.5).
LOW, HIGH = 0.1, 10.0


@dataclass(frozen=True)
class TargetScale:
    mean: float
    scale: float
    root_mean_square: bool = False      # a head without a bias: scaled by the RMS, not shifted

    def to_dict(self) -> dict:
        return {"mean": self.mean, "scale": self.scale}


def decide(targets, with_bias: bool = True) -> TargetScale | None:
    """The scale regression targets train at: None when they are near unit scale (or constant), else their mean
    and standard deviation (no bias: 0 and the root mean square)."""
    y = np.asarray(targets, dtype=np.float64).reshape(-1)
    if len(y) == 0:
        return None
    mean, sd = float(y.mean()), float(y.std())
    if sd == 0 or (LOW <= sd <= HIGH and abs(mean) <= HIGH):
        return None
    if not with_bias:
        return TargetScale(0.0, float(np.sqrt(np.mean(y * y))), root_mean_square=True)
    return TargetScale(mean, sd)


def head_of(model) -> torch.nn.Linear:
    """The regression head's final Linear (loading.final_linear with one output; with LoRA, its trained copy)."""
    found = final_linear(model, 1)
    if found is None:
        raise ValueError("no final Linear with one output: not a regression head")
    return found[1]


def has_bias(model) -> bool:
    return head_of(model).bias is not None


def _hook(scale: TargetScale):
    def forward(module, inputs, output):
        return output.float() * scale.scale + scale.mean     # in fp32: bf16 cannot hold 36,000 to better than 256
    return forward


def unfold_saved(model, new: list[str]) -> None:
    """A model loaded from a folder whose config records a folded head (`CONFIG_KEY`): the head back in
    standardised units when its weights came from the folder (`new`: the parameters the load drew afresh), so that
    a run starting from it hooks its own scale on the same function; the record dropped either way (a fresh head,
    e.g. a student cut from the teacher, was never folded, and a model saved later is not)."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, CONFIG_KEY):
        return
    saved = getattr(config, CONFIG_KEY)
    delattr(config, CONFIG_KEY)
    head = final_linear(model, 1)
    if saved and head is not None and f"{head[0]}.weight" not in new:
        _refold(head[1], TargetScale(**saved), inverse=True)


def attach(model, scale: TargetScale) -> None:
    """Hook `scale` on the model's regression head."""
    head = head_of(model)
    head._tuneloop_target_scale = (scale, head.register_forward_hook(_hook(scale)))


@torch.no_grad()
def _refold(head: torch.nn.Linear, scale: TargetScale, inverse: bool = False) -> None:
    if not inverse:
        head.weight.mul_(scale.scale)
        if head.bias is not None:
            head.bias.mul_(scale.scale).add_(scale.mean)
        return
    if head.bias is not None:
        head.bias.sub_(scale.mean).div_(scale.scale)
    head.weight.div_(scale.scale)


@contextlib.contextmanager
def folded(model):
    """The model as a plain one giving the targets' units while inside (to save it): the hook off and its scale in
    the head's weights, the config recording it; as it was after."""
    found = [m for m in model.modules() if hasattr(m, "_tuneloop_target_scale")]
    if not found:
        yield model
        return
    head = found[-1]
    scale, handle = head._tuneloop_target_scale
    weight, bias = head.weight.detach().clone(), None if head.bias is None else head.bias.detach().clone()
    configs = [c for c in (getattr(model, "config", None),
                           getattr(getattr(model, "get_base_model", lambda: None)(), "config", None)) if c is not None]
    handle.remove()
    _refold(head, scale)
    for config in configs:
        setattr(config, CONFIG_KEY, scale.to_dict())
    try:
        yield model
    finally:
        with torch.no_grad():                          # the exact weights back, not an unfold's rounding
            head.weight.copy_(weight)
            if bias is not None:
                head.bias.copy_(bias)
        for config in configs:
            if hasattr(config, CONFIG_KEY):
                delattr(config, CONFIG_KEY)
        head._tuneloop_target_scale = (scale, head.register_forward_hook(_hook(scale)))


def describe(scale: TargetScale) -> str:
    digits = max(0, 3 - int(math.floor(math.log10(max(abs(scale.scale), 1e-12)))))
    return (f"scale {scale.scale:,.{digits}f} (root mean square; the head has no bias to hold a mean)"
            if scale.root_mean_square else f"mean {scale.mean:,.{digits}f}, scale {scale.scale:,.{digits}f}")
