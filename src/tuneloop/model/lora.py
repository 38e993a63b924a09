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
# the names attention layers give their query and value projections (or a fused one), for the families neither
# peft nor TARGETS knows (CamemBERT, Data2Vec, Gemma 3, Ministral, GLM, ...): the first pair a model has all of
PROJECTIONS = (("q_proj", "v_proj"), ("query", "value"), ("q_lin", "v_lin"), ("q", "v"), ("Wqkv",), ("c_attn",),
               ("query_key_value",), ("qkv_proj",))


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
    """`model` wrapped by peft with LoRA on the target modules; the new modules trained and saved in full. The
    adapter records its base model by an absolute path where it is a local folder (loading.recorded_model)."""
    from .. import extras
    from .loading import recorded_model

    extras.require("lora")
    from peft import LoraConfig, TaskType, get_peft_model

    kind = model.config.model_type
    targets = config.lora_target_modules or default_targets(model, kind)
    saved = new_modules(missing_keys, model)
    if config.lora_target_modules:
        _check_targets(model, config.lora_target_modules, kind, saved)
    if model.__dict__.get("name_or_path"):                 # what peft writes as base_model_name_or_path
        model.name_or_path = recorded_model(model.name_or_path)
    lora = LoraConfig(task_type=TaskType.SEQ_CLS, r=config.lora_r, lora_alpha=config.lora_alpha,
                      lora_dropout=config.lora_dropout, target_modules=targets,
                      modules_to_save=saved or None, fan_in_fan_out=_transposed(model, targets, kind))
    try:
        return get_peft_model(model, lora)
    except ValueError as e:
        first = str(e).strip().splitlines()[0][:200]
        layers = ", ".join(sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if _adaptable(m)}))
        raise ConfigError(f"--lora: {first}; name the modules to adapt with --lora-target-modules A,B "
                          f"(e.g. the attention's query and value projections of {kind}; its Linear layers are "
                          f"named {layers})") from None


def default_targets(model, kind: str) -> list[str] | None:
    """The modules --lora adapts without --lora-target-modules: TARGETS' for its family, None where peft has its
    own default, else the first of PROJECTIONS the model has (None when it has none: peft then refuses)."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULTS

    if kind in TARGETS or kind in DEFAULTS:
        return TARGETS.get(kind)
    leaves = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if _adaptable(m)}
    return next((list(names) for names in PROJECTIONS if set(names) <= leaves), None)


def _transposed(model, targets: list[str] | None, kind: str) -> bool:
    """Whether the modules LoRA adapts store their weight transposed (GPT-2's Conv1D): peft's `fan_in_fan_out`,
    which peft otherwise corrects itself with a UserWarning on every --lora run of such a model."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULTS

    names = targets or DEFAULTS.get(kind) or []
    adapted = [m for n, m in model.named_modules() if any(n == t or n.endswith("." + t) for t in names)]
    return bool(adapted) and all(type(m).__name__ == "Conv1D" for m in adapted)


# the heads peft's sequence classification trains and saves in full whatever modules_to_save names
HEADS = ("classifier", "score")


def _check_targets(model, targets: list[str], kind: str, saved: list[str]) -> None:
    """Each name of --lora-target-modules names some module as peft matches a list (the whole dotted name or its
    last parts): peft adapts the ones that match and ignores the rest without a word (query,valeu: query only). A
    name that matches only modules inside the head or the other new modules (`saved`) is refused too: those are
    trained and saved in full, and peft would find nothing to adapt."""
    names = [name for name, _ in model.named_modules()]
    matches = {t: [n for n in names if n == t or n.endswith("." + t)] for t in targets}
    unmatched = [t for t in targets if not matches[t]]
    full = [*saved, *(h for h in HEADS if h in names)]
    head = [t for t in targets if matches[t] and all(any(n == s or n.startswith(s + ".") for s in full)
                                                       for n in matches[t])]
    linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if _adaptable(m)
                     and not any(n == s or n.startswith(s + ".") for s in full)})
    if unmatched:
        raise ConfigError(f"--lora-target-modules: {', '.join(unmatched)} names no module of this {kind} model; its "
                          f"Linear layers are named {', '.join(linear)}")
    if head:
        raise ConfigError(f"--lora-target-modules: {', '.join(head)} {'is' if len(head) == 1 else 'are'} in the "
                          f"model's head ({', '.join(dict.fromkeys(full))}), which --lora trains and saves in full "
                          f"anyway; name modules of the body to adapt (its Linear layers: {', '.join(linear)})")


def _adaptable(module) -> bool:
    """A layer LoRA adapts: an nn.Linear, or GPT-2's Conv1D (a Linear that stores its weight transposed)."""
    import torch

    return isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D"


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
    LoRA matrices, and transformers' report is hidden while tuneloop loads), since they would be random. A base that
    is itself a LoRA model folder (a --lora run trained from another) is loaded merged first."""
    from transformers import AutoConfig

    from .. import extras
    from .loading import check_complete, not_loaded

    extras.require("lora")
    from peft import PeftModel
    from safetensors import SafetensorError

    try:
        model, info = _read(base, AutoConfig.from_pretrained(folder))
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


def adapter_base(folder) -> str:
    """The base model of the LoRA model folder `folder`, as resolve_model gives it: tuneloop.json's base_model (an
    alias stays one), else peft's base_model_name_or_path. A relative record (tuneloop recorded --model as given
    before it recorded absolute paths) is looked for from the folder first — in it and the folders above it, a
    model folder of the adapter's own model type —, then from the working directory, then as a Hub id."""
    import json

    from ..layout import MODEL_CONFIG_FILE, model_folder
    from .loading import ALIASES, read_metadata, resolve_model

    here = Path(folder).resolve()
    recorded = read_metadata(folder).get("base_model") or json.loads(
        (here / ADAPTER_CONFIG_FILE).read_text(encoding="utf-8")).get("base_model_name_or_path")
    if not recorded:
        raise TuneloopError(f"--model {folder}: the LoRA adapter names no base model; write the one it was trained "
                            "on into its adapter_config.json (base_model_name_or_path)")

    def model_type(path: Path):
        config = model_folder(path) / MODEL_CONFIG_FILE
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") if config.is_file() else None

    relative = Path(recorded).expanduser()
    if recorded not in ALIASES and not relative.is_absolute():
        kind = model_type(here)
        found = next((p for p in (up / relative for up in (here, *here.parents))
                      if model_type(p) is not None and kind in (None, model_type(p))), None)
        if found is not None:
            return resolve_model(str(found))
    return resolve_model(recorded)


def _read(source: str, config, **options):
    """(model, transformers' loading info) of the checkpoint `source` with `config`, weights of another shape drawn
    afresh (a head for other labels); a LoRA model folder is read as its base with its adapters merged in."""
    from transformers import AutoModelForSequenceClassification

    if not is_adapter_folder(source):
        return AutoModelForSequenceClassification.from_pretrained(
            source, config=config, ignore_mismatched_sizes=True, output_loading_info=True, **options)
    from .loading import model_class

    merged = load_adapter_model(source, adapter_base(source))
    model, info = model_class(config).from_pretrained(None, config=config, state_dict=merged.state_dict(),
                                                      ignore_mismatched_sizes=True, output_loading_info=True, **options)
    model.name_or_path = str(Path(source).resolve())          # the base an adapter trained on it records
    return model, info


def load_starting_model(name: str, config, attention: str = "sdpa"):
    """(the model a run starts from, the names of the parameters drawn afresh): loading.load_model's, and for a
    LoRA model folder — a --lora run's, a run folder like any other as --model — its base with the adapters merged
    in, read as a full checkpoint of it would be (a head for other labels drawn afresh)."""
    from safetensors import SafetensorError

    from .loading import load_error, load_model, not_loaded, resolve_model

    source = resolve_model(name)
    if not is_adapter_folder(source):
        return load_model(name, config, attention, loading_info=True)
    try:
        model, info = _read(source, config, attn_implementation="sdpa" if attention == "chunked" else attention)
    except (OSError, ValueError, SafetensorError) as e:
        raise load_error(name, "model", e) from None
    return model, not_loaded(info)
