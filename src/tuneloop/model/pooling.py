"""The sentence embedding a classification head reads (`--setfit-pooling`).

A plain AutoModelForSequenceClassification feeds its classifier the first token's vector, through a dense layer: BERT's
pooler (dense + tanh), DeBERTa's context pooler (dense + activation), the RoBERTa/MPNet/XLM-R/ELECTRA classification
head (dense + tanh, then its output Linear). A sentence-transformer (the embedded all-MiniLM-L6-v2, all-mpnet-base-v2)
was never trained through that dense layer: it was trained to give the attention-masked mean of its last hidden
states, L2-normalised (its `1_Pooling` and `Normalize` modules), and that is what the setfit package's head reads.
`mean` makes the classifier read exactly that mean; `head` keeps the model's own:
- a pooler (BERT's `base_model.pooler`, DeBERTa's `pooler`) is swapped for MeanPooler (no weights);
- a classification head with `dense` and `out_proj` becomes MeanHead: the mean, then the head's own dropout and
  `out_proj` (the head's `dense` is dropped), so the logits are a Linear of the mean, as SetFit's logistic regression.

The swap is recorded in the model's config (CONFIG_KEY: "mean"), and `restore` re-makes it whenever tuneloop loads
the folder (tuneloop.load, predict, export, serve). The saved folder holds no weights for the dense layer that was
dropped, so plain transformers loads it with its warning that they are newly initialised: a loud sign that the folder
needs tuneloop, never a silently different model. tuneloop's own load (model/loading.load_saved_model) does not count
them as missing.

Which models: those three shapes (BERT and its kin, DeBERTa, RoBERTa/XLM-R/MPNet/ELECTRA). DistilBERT and ALBERT-style
heads pool inline in their forward, and decoders read the last token: they keep `head`.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import torch

from ..exceptions import ConfigError

CONFIG_KEY = "tuneloop_pooling"          # in the model's config.json: "mean" when the pooler was swapped
MEAN_RAW = "mean-raw"                     # ... the mean without the L2 normalisation (a cut student: model/shrink.py)
ST_POOLING_FILE = "1_Pooling/config.json"  # a sentence-transformers folder's pooling


class MeanPooler(torch.nn.Module):
    """Stands where a pooler stood: the attention-masked mean of the hidden states, L2-normalised. The mask is handed
    over by a forward pre-hook on the whole model (a pooler is called with the hidden states alone)."""

    def __init__(self, normalise: bool = True):
        super().__init__()
        self.mask, self.normalise = None, normalise

    def forward(self, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
        mask, self.mask = self.mask, None
        return masked_mean(hidden_states, mask, self.normalise)


class MeanHead(MeanPooler):
    """Stands where a RoBERTa-style classification head stood: the mean (MeanPooler), then that head's dropout and
    output Linear (`out_proj`, kept under its name so the saved weights keep theirs)."""

    def __init__(self, head: torch.nn.Module, normalise: bool = True):
        super().__init__(normalise)
        self.dropout = getattr(head, "dropout", None) or torch.nn.Identity()
        self.out_proj = head.out_proj

    def forward(self, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
        return self.out_proj(self.dropout(super().forward(hidden_states)))


def masked_mean(hidden_states: torch.Tensor, mask: torch.Tensor | None, normalise: bool = True) -> torch.Tensor:
    """[rows, tokens, features] → [rows, features]: the mean over the tokens the attention mask keeps (all of them
    without a mask), L2-normalised, as sentence-transformers' Pooling + Normalize (unless not `normalise`)."""
    if mask is None:
        mask = torch.ones(hidden_states.shape[:2], device=hidden_states.device)
    weights = mask.unsqueeze(-1).to(hidden_states.dtype)
    mean = (hidden_states * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(mean, dim=-1) if normalise else mean


def _keep_mask(module, args, kwargs) -> None:
    """A forward pre-hook on the whole model: hands the call's attention mask to the swapped pooler (or head) of
    `module` itself. Found through `module`, not held in a closure: a copy of the model (copy.deepcopy, the int8
    and bf16 routes, torch's dynamic quantization) copies its hooks by reference, and a closure's pooler would be the
    original's, so the copy would average over padding while the original kept a stale mask."""
    found = _swappable(module)
    if found is None or not found.done:
        return
    mask = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
    getattr(found.owner, found.name).mask = mask if mask is not None and mask.dim() == 2 else None


class Swap(NamedTuple):
    """Where the mean goes: `owner.name` is swapped; `dropped` is the state-dict prefix of the weights it drops."""
    owner: torch.nn.Module
    name: str
    dropped: str

    @property
    def done(self) -> bool:
        return isinstance(getattr(self.owner, self.name), MeanPooler)


def _swappable(model) -> Swap | None:
    """The first shape model/pooling knows in `model`, or None."""
    base = getattr(model, "base_model", None)
    for owner, prefix in ((base, f"{getattr(model, 'base_model_prefix', '')}.pooler."), (model, "pooler.")):
        pooler = getattr(owner, "pooler", None)
        if isinstance(pooler, MeanPooler) or (type(pooler).__name__.endswith("Pooler")
                                               and isinstance(getattr(pooler, "dense", None), torch.nn.Linear)):
            return Swap(owner, "pooler", prefix)
    head = getattr(model, "classifier", None)
    if isinstance(head, MeanHead) or (isinstance(getattr(head, "dense", None), torch.nn.Linear)
                                      and isinstance(getattr(head, "out_proj", None), torch.nn.Linear)):
        return Swap(model, "classifier", "classifier.dense.")
    return None


def supports_mean(model) -> bool:
    """Whether the model's classifier reads a pooler or head of the hidden states that can be swapped for the mean."""
    return _swappable(model) is not None


def use_mean(model, normalise: bool = True) -> None:
    """Swap the model's pooler (or RoBERTa-style head) for the mean, in place, and record it in the model's config
    (`normalise=False`: the mean as it is, MEAN_RAW)."""
    found = _swappable(model)
    if found is None:
        raise ConfigError(f"--setfit-pooling mean: the {model.config.model_type} architecture's classifier does not "
                          "read a pooler or head that can be swapped (BERT, DeBERTa, RoBERTa, XLM-R, MPNet and ELECTRA "
                          "models do); use --setfit-pooling head")
    if found.done:
        return
    current = getattr(found.owner, found.name)
    swapped = (MeanHead(current, normalise) if found.name == "classifier" else MeanPooler(normalise)).to(model.device)
    setattr(found.owner, found.name, swapped)
    model.register_forward_pre_hook(_keep_mask, with_kwargs=True)
    setattr(model.config, CONFIG_KEY, "mean" if normalise else MEAN_RAW)


def restore(model):
    """The model as its run saved it: the swap re-made where its config records one. Returns the model."""
    if getattr(model.config, CONFIG_KEY, None) in ("mean", MEAN_RAW):
        use_mean(model, getattr(model.config, CONFIG_KEY) == "mean")
    return model


def unsaved_on_purpose(model, missing) -> set[str]:
    """Of the weights a load found missing, those of the dense layer the swap dropped: a `mean` folder never holds
    them."""
    found = _swappable(model)
    if found is None or not found.done:
        return set()
    return {key for key in missing if key.startswith(found.dropped)}


def sentence_transformer_pooling(name: str) -> str | None:
    """The pooling a sentence-transformers model folder (or Hub id) declares ("mean", "cls", ...), or None."""
    from transformers.utils import cached_file

    try:
        path = cached_file(name, ST_POOLING_FILE, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False)
        if not path:
            return None
        with open(path, encoding="utf-8") as f:
            modes = json.load(f)
    except (OSError, ValueError):
        return None
    chosen = [k[len("pooling_mode_"):] for k, on in modes.items() if k.startswith("pooling_mode_") and on is True]
    return {"mean_tokens": "mean", "cls_token": "cls"}.get(chosen[0], chosen[0]) if len(chosen) == 1 else None


def choose(asked: str, name: str, model, lora: bool = False) -> tuple[str, str]:
    """(the pooling --method setfit's head reads, why) for `asked` (auto, head or mean); `mean` is refused with
    --lora (the adapters keep the model's pooler)."""
    if asked == "mean" and lora:
        raise ConfigError("--setfit-pooling mean does not combine with --lora (the adapters keep the model's "
                          "pooler); use --setfit-pooling head, or train without --lora")
    if asked != "auto":
        return asked, "as asked"
    if getattr(model.config, CONFIG_KEY, None) in ("mean", MEAN_RAW):      # restored from its saved config
        return "mean", "the model was saved by tuneloop reading the mean, and still reads it"
    declared = sentence_transformer_pooling(name)
    if declared != "mean":
        return "head", "the model declares no sentence-transformers mean pooling"
    if not supports_mean(model):
        return "head", f"a sentence-transformer, but {model.config.model_type}'s classifier pools inside its head"
    if lora:
        return "head", "--lora keeps the model's pooler"
    return "mean", "the model is a sentence-transformer trained with mean pooling"
