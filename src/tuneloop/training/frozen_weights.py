"""Checkpoints without the weights a run does not train: a LoRA run's base model, --freeze-embeddings' embeddings.
They never change during the run, and a resume loads them again from --model before the checkpoint, so a checkpoint
holds the trained weights and the buffers only (a LoRA run of a 7B decoder: its adapters and head, megabytes, not
the 14 GB base at every --save-every). What would make that silently wrong is a --model whose files changed
between the save and the resume: the checkpoint records a fingerprint of the frozen weights (a sample of each
tensor, hashed) and a resume whose frozen weights differ is refused. A checkpoint saved whole (earlier versions, or
a run that trains every weight) loads as before. Through accelerate's save/load state hooks; where accelerate saves
the model its own way (FSDP, DeepSpeed, Megatron-LM), it is left to."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from ..exceptions import TuneloopError

FROZEN_FILE = "frozen_weights.json"      # in a checkpoint: the frozen weights left out, and their fingerprint
SAMPLES = 1024                           # elements of each frozen tensor that the fingerprint reads


def frozen_names(model: torch.nn.Module) -> set[str]:
    """The state-dict keys of the parameters nothing trains (a tied weight under each of its names)."""
    return {name for name, p in model.named_parameters(remove_duplicate=False) if not p.requires_grad}


def fingerprint(model: torch.nn.Module, names: set[str]) -> str:
    """A hash of each frozen tensor's shape, dtype and SAMPLES evenly spaced elements: cheap on a 7B model, and
    different for any other revision of its weights."""
    digest = hashlib.sha256()
    params = dict(model.named_parameters(remove_duplicate=False))
    for name in sorted(names):
        tensor = params[name].detach()
        flat = tensor.reshape(-1)
        sample = flat[:: max(1, flat.numel() // SAMPLES)][:SAMPLES].to("cpu", torch.float32)
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype};".encode())
        digest.update(sample.numpy().tobytes())
    return digest.hexdigest()


def register(accelerator) -> None:
    """The hooks, on an accelerator whose save_state writes the model's state dict itself (not FSDP, DeepSpeed or
    Megatron-LM: those save theirs)."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED, DistributedType.MEGATRON_LM):
        return
    accelerator.register_save_state_pre_hook(lambda models, weights, folder: _leave_out(accelerator, models,
                                                                                          weights, folder))
    accelerator.register_load_state_pre_hook(_load)


def _leave_out(accelerator, models, weights, folder) -> None:
    """Before save_state writes `weights` (one state dict per model): the frozen ones out, recorded beside."""
    if len(models) != 1 or len(weights) != 1:
        return
    names = frozen_names(models[0])
    if not names:
        return
    record = {"left_out": sorted(names), "fingerprint": fingerprint(models[0], names)}
    weights[0] = {key: value for key, value in weights[0].items() if key not in names}
    if accelerator.is_main_process:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / FROZEN_FILE).write_text(json.dumps(record), encoding="utf-8")


def _load(models, folder) -> None:
    """Before load_state reads the model: a checkpoint that left frozen weights out is loaded here (the weights it
    holds; those it left out must be frozen in this run, and the same), and its model taken off accelerate's list."""
    from accelerate.utils import SAFE_WEIGHTS_NAME      # where save_state wrote the (only) model's state dict
    from safetensors.torch import load_file

    recorded, weights = Path(folder) / FROZEN_FILE, Path(folder) / SAFE_WEIGHTS_NAME
    if len(models) != 1 or not recorded.is_file():
        return                                    # saved whole: accelerate loads it, strictly
    record = json.loads(recorded.read_text(encoding="utf-8"))
    model, left_out = models[0], set(record["left_out"])
    names = frozen_names(model)
    if not left_out <= names:
        raise TuneloopError(f"--resume: the checkpoint {Path(folder).name} left out weights this run trains "
                            f"({', '.join(sorted(left_out - names)[:3])}): resume with the settings it was saved with")
    if fingerprint(model, left_out) != record["fingerprint"]:
        raise TuneloopError(f"--resume: the frozen weights --model loads now differ from those the checkpoint "
                            f"{Path(folder).name} was trained on (its files changed since): resume with the same "
                            "--model files, or start a new run")
    state = load_file(str(weights), device=str(next(model.parameters()).device))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = sorted(set(missing) - left_out)
    if missing or unexpected:
        raise TuneloopError(f"checkpoint {Path(folder).name}: its {SAFE_WEIGHTS_NAME} lacks "
                            f"{', '.join(missing[:3]) or 'nothing'} and holds unknown "
                            f"{', '.join(unexpected[:3]) or 'nothing'}")
    models.remove(model)
