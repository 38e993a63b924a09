"""LoRA adapters on a sequence classifier (peft; `pip install "tuneloop[lora]"`).

The well-known trap of LoRA on classifiers is a head that is neither trained nor saved: peft trains and saves the
modules named `classifier`/`score`, but some families add other new modules (DeBERTa's `pooler`, ModernBERT's
`head`): those stay frozen at their random start and are re-drawn on every reload. Here every module whose weights
were not in the checkpoint is trained and saved in full (`modules_to_save`). A LoRA model folder is peft's adapter
(adapter_config.json, adapter_model.safetensors with the head) beside the classifier's config.json and the
tokenizer; tuneloop loads it onto its base model and merges the adapters for inference (export and serve run the
merged model)."""

from __future__ import annotations

from pathlib import Path

from ..exceptions import ConfigError, TuneloopError
from ..layout import ADAPTER_CONFIG_FILE

# how peft's adapter file names a module saved in full: its name in the plain model, under the peft wrapper
SAVED_PREFIX = "base_model.model."
# families peft has no default for: their attention's query and value projections
TARGETS = {"distilbert": ["q_lin", "v_lin"], "albert": ["query", "value"], "mpnet": ["q", "v"],
           "modernbert": ["Wqkv"]}


def is_adapter_folder(folder) -> bool:
    return (Path(folder) / ADAPTER_CONFIG_FILE).is_file()


def new_modules(missing_keys: list[str], model) -> list[str]:
    """The modules of `model` whose parameters the checkpoint lacked (the new head and pooler), by dotted name."""
    names = {name for name, _ in model.named_modules()}
    found = set()
    for key in missing_keys:
        parts = key.split(".")
        for i in range(1, len(parts)):       # the outermost module that holds it and is not the whole model body
            prefix = ".".join(parts[:i])
            if prefix in names and prefix != getattr(model, "base_model_prefix", None):
                found.add(prefix)
                break
    return sorted(found)


def add_adapters(model, config, missing_keys: list[str]):
    """`model` wrapped by peft with LoRA on the target modules; the new modules trained and saved in full."""
    from .. import extras

    extras.require("lora")
    from peft import LoraConfig, TaskType, get_peft_model

    kind = model.config.model_type
    targets = config.lora_target_modules or TARGETS.get(kind)
    if config.lora_target_modules:
        _check_targets(model, config.lora_target_modules, kind)
    lora = LoraConfig(task_type=TaskType.SEQ_CLS, r=config.lora_r, lora_alpha=config.lora_alpha,
                      lora_dropout=config.lora_dropout, target_modules=targets,
                      modules_to_save=new_modules(missing_keys, model) or None)
    try:
        return get_peft_model(model, lora)
    except ValueError as e:
        first = str(e).strip().splitlines()[0][:200]
        raise ConfigError(f"--lora: {first}; name the modules to adapt with --lora-target-modules A,B "
                          f"(e.g. the attention's query and value projections of {kind})") from None


def _check_targets(model, targets: list[str], kind: str) -> None:
    """Each name of --lora-target-modules names some module as peft matches a list (the whole dotted name or its
    last parts): peft adapts the ones that match and ignores the rest without a word (query,valeu: query only)."""
    import torch

    names = [name for name, _ in model.named_modules()]
    unmatched = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if unmatched:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})
        raise ConfigError(f"--lora-target-modules: {', '.join(unmatched)} names no module of this {kind} model; its "
                          f"Linear layers are named {', '.join(linear)}")


def saved_keys(folder) -> list[str]:
    """The tensor names in a LoRA folder's adapter file, read from the safetensors header alone (peft reads the
    tensors when it loads the adapter); an older adapter_model.bin is loaded whole."""
    from peft.utils import load_peft_weights
    from peft.utils.constants import SAFETENSORS_WEIGHTS_NAME
    from safetensors import safe_open

    file = Path(folder) / SAFETENSORS_WEIGHTS_NAME
    if file.is_file():
        with safe_open(file, framework="pt") as f:
            return list(f.keys())
    return list(load_peft_weights(folder, device="cpu"))


def trainable_summary(model) -> str:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return f"{trainable:,} of {total:,} parameters trained ({100 * trainable / total:.2f}%)"


def load_adapter_model(folder: str, base: str):
    """A LoRA model folder as a plain transformers model: the base model with the folder's config (labels, pad
    token), the adapters and the saved head loaded, then merged. The weights the base checkpoint lacks (the head, a
    new pooler) must come from the adapter file: any that do not stop the load, named (peft's own check counts only
    LoRA matrices, and transformers' report is hidden while tuneloop loads), since they would be random."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from .. import extras
    from .loading import check_complete, not_loaded

    extras.require("lora")
    from peft import PeftModel
    from safetensors import SafetensorError

    try:
        config = AutoConfig.from_pretrained(folder)
        model, info = AutoModelForSequenceClassification.from_pretrained(
            base, config=config, ignore_mismatched_sizes=True, output_loading_info=True)
        saved = {key.removeprefix(SAVED_PREFIX) for key in saved_keys(folder)}
        check_complete(folder, [key for key in not_loaded(info) if key not in saved],
                       why=f"neither the base model {base} nor the adapter file has them: a partial copy, an "
                           "adapter saved without its modules_to_save, or a base model other than its own",
                       fix="save it with its head and pooler (tuneloop train --lora saves them), or name the base "
                           "model it was trained on in its adapter_config.json")
        try:
            return PeftModel.from_pretrained(model, folder).merge_and_unload()
        except KeyError as e:                        # peft: a module listed as saved in full that the file lacks
            raise TuneloopError(f"--model {folder}: could not load the LoRA adapter onto its base model {base} (its "
                                f"adapter file has no {e.args[0]}: a damaged or partial copy)") from None
    except (OSError, ValueError, SafetensorError) as e:          # SafetensorError: a truncated or damaged file
        raise TuneloopError(f"--model {folder}: could not load the LoRA adapter onto its base model {base} "
                            f"({str(e).strip().splitlines()[0][:200]})") from None
