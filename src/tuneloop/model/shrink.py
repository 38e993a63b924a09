"""A smaller model from a bigger one: keep some of its transformer layers, evenly spaced from the first (3 of 6:
layers 0, 2 and 4, every other one, as DistilBERT's student was initialised from BERT) or the ones named, and save
it as a model folder that trains like any other (`tuneloop distill --student-layers N` or `--student-layers 0,2,5`).
Which layers matters by data set: see docs/guides/distill.md ("Which layers"). Cut from a sentence-transformer (the
embedded MiniLM), the student's classifier reads the mean of its hidden states, not L2-normalised (model/pooling.py's
MEAN_RAW, recorded in its config). Measured on the docstrings set (6 classes, 70 steps at lr 1e-4): a 3-layer MiniLM
reading BERT's pooler of the first token gave every text nearly the same small features and stayed at chance (1/6),
distilled or on labels alone, and so did the normalised mean (unit-length features: logits AdamW cannot grow in 70
steps)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..exceptions import TuneloopError
from .loading import resolve_model
from .lora import adapter_base, is_adapter_folder, load_adapter_model

log = logging.getLogger("tuneloop")

# where encoder families keep their ModuleList of layers, and the config field that counts them
LAYER_PATHS = ("encoder.layer", "transformer.layer", "layers", "encoder.layers", "h")
COUNT_FIELDS = ("num_hidden_layers", "n_layers", "num_layers", "n_layer")


def kept_layers(total: int, keep: int) -> list[int]:
    """`keep` of `total` layer indices, evenly spaced from the first: 3 of 6 -> [0, 2, 4], 2 of 6 -> [0, 3]."""
    return [(i * total) // keep for i in range(keep)]


def _layer_list(model):
    for path in LAYER_PATHS:
        node = model
        for part in path.split("."):
            node = getattr(node, part, None)
        if node is not None and hasattr(node, "__len__") and len(node) > 0:
            return path, node
    return None, None


def chosen_layers(asked: list[int], total: int, model_name: str) -> list[int]:
    """--student-layers as layer indices: one number is how many to keep (`kept_layers`), several are which ones
    (counted from 0). Refuses a count or an index the model does not have."""
    given = ",".join(map(str, asked))
    if len(asked) == 1:
        if not 1 <= asked[0] <= total:
            raise TuneloopError(f"--student-layers {given}: {model_name} has {total} layers; choose 1 to {total}")
        return kept_layers(total, asked[0])
    if max(asked) >= total:
        raise TuneloopError(f"--student-layers {given}: {model_name} has {total} layers, numbered 0 to {total - 1}")
    return list(asked)


def keep_layers(model_name: str, keep: int | list[int], folder: str | Path) -> list[int]:
    """Save `model_name` (an alias, folder or Hub id) with some of its layers into `folder` (weights, config and
    tokenizer): `keep` is how many (evenly spaced) or, as several indices, which (`chosen_layers`); returns the
    kept layers' indices. A LoRA model folder (a --lora teacher's) is cut with its adapters merged in. Refuses a
    count or index it cannot make, and a model whose layers it does not know where to find."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    source = resolve_model(model_name)
    if is_adapter_folder(source):          # a --lora run's folder: its base with the adapters merged in, the body
        model = load_adapter_model(source, adapter_base(source)).base_model
    else:
        model = AutoModel.from_pretrained(source)
    path, layers = _layer_list(model)
    if layers is None:
        raise TuneloopError(f"--student-layers: cannot find the layers of {model_name} "
                            f"({type(model).__name__}); pass a smaller --model instead")
    chosen = chosen_layers([keep] if isinstance(keep, int) else list(keep), len(layers), model_name)
    total = len(layers)
    parent = model
    for part in path.split(".")[:-1]:
        parent = getattr(parent, part)
    setattr(parent, path.split(".")[-1], torch.nn.ModuleList([layers[i] for i in chosen]))
    field = next((f for f in COUNT_FIELDS if hasattr(model.config, f)), None)
    if field is None:
        raise TuneloopError(f"--student-layers: {model_name}'s config names no layer count; pass a smaller --model")
    setattr(model.config, field, len(chosen))
    if getattr(model.config, "layer_types", None):          # per-layer attention kinds (newer configs)
        model.config.layer_types = [model.config.layer_types[i] for i in chosen]
    for i, layer in enumerate(model_layers(model)):          # caches index layers by their position
        for module in layer.modules():
            if hasattr(module, "layer_idx"):
                module.layer_idx = i
    from .pooling import CONFIG_KEY, MEAN_RAW, sentence_transformer_pooling

    mean = sentence_transformer_pooling(source) == "mean"
    if mean:          # a sentence-transformer: its classifier will read the mean of the hidden states (pooling.py)
        setattr(model.config, CONFIG_KEY, MEAN_RAW)
    folder = Path(folder)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    log.info(f"student: {len(chosen)} of {model_name}'s {total} layers ({', '.join(map(str, chosen))}) in {folder}"
             + (", reading the mean of its hidden states" if mean else ""))
    return chosen


def model_layers(model):
    return _layer_list(model)[1] or []
