"""Tokenizers: loaded from the model's folder (or the Hub) and checked before anything is written: the tokenizer
files are there, its ids fit the model's embeddings, and it can pad (decoders ship without a pad token: EOS pads,
written into tokenizer and config) and separate the texts of a pair (a newline token written into the pair
template of decoders that run them together, so a plain `pipeline` on the saved folder reads pairs the same way)."""

from __future__ import annotations

from pathlib import Path

from ..data.tokenize import PAIR_JOIN, pair_is_separated
from ..exceptions import TuneloopError
from .loading import load_error, resolve_model

# the files a tokenizer is saved as, by kind (any one of them makes a folder's tokenizer)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model", "spm.model")


def check_tokenizer_files(name: str, path: str) -> None:
    """A local folder must hold a tokenizer: transformers would otherwise build an empty one (every word [UNK])."""
    folder = Path(path)
    if folder.is_dir() and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise TuneloopError(f"--model {name}: the folder has no tokenizer files (none of "
                            f"{', '.join(TOKENIZER_FILES)}); save it beside the model with "
                            "tokenizer.save_pretrained(folder)")


def load_tokenizer(name: str):
    """The model's tokenizer, checked and able to pad, on the right (`pad_right`)."""
    from transformers import AutoTokenizer

    path = resolve_model(name)
    check_tokenizer_files(name, path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise load_error(name, "tokenizer", e) from None
    ensure_pad_token(tokenizer, name)
    ensure_pair_separator(tokenizer)
    pad_right(tokenizer)
    fit_to_model(tokenizer, path, name)
    return tokenizer


def fit_to_model(tokenizer, path: str, name: str) -> None:
    """The tokenizer against the model's config, read before any weights (a model folder loaded to predict is
    checked here, before its first batch): more tokens than the config's vocabulary stop as `check_vocabulary`
    does at training (an id past the embeddings fails inside the model at the first text that has it). A model
    with a single token type (type_vocab_size 1: trained without segment ids) under a tokenizer that gives a pair's
    second text type 1 (BERT's) would fail at the first pair: the tokenizer then gives no token_type_ids (the model
    reads type 0 throughout)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError):
        return
    size = getattr(config, "vocab_size", None)
    if isinstance(size, int) and len(tokenizer) > size:
        raise TuneloopError(vocabulary_error(name, len(tokenizer), size))
    if getattr(config, "type_vocab_size", None) == 1 and "token_type_ids" in tokenizer.model_input_names:
        tokenizer.model_input_names = [n for n in tokenizer.model_input_names if n != "token_type_ids"]


def pad_right(tokenizer) -> None:
    """Pad batches on the right, whatever side the tokenizer was saved with (decoders often ship `left`, for
    generation): a model that numbers positions from the first column (BERT's and GPT-2's absolute embeddings)
    would read a left-padded row's tokens at shifted positions, so its prediction would depend on the longest row
    of its batch. Right padding keeps every row's tokens at the positions they have alone, in every family, and a
    decoder's head still pools the last token that is not a pad. Saved with the tokenizer."""
    if getattr(tokenizer, "padding_side", "right") != "right":
        tokenizer.padding_side = "right"


def ensure_pair_separator(tokenizer) -> str | None:
    """Give a tokenizer whose pair encoding runs the two texts together (Qwen's: `$A $B`) a separator in its pair
    template: its newline token (else EOS), `… $A <newline> $B …`. Returns the token it put there, None when the
    pair was separated already or the tokenizer has no `tokenizers` backend (data/tokenize then joins the two
    texts a line apart). Saved with the tokenizer, so every reader of the folder encodes pairs alike."""
    import json

    from tokenizers import Tokenizer

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or pair_is_separated(tokenizer):
        return None
    token = tokenizer.convert_ids_to_tokens(tokenizer(PAIR_JOIN, add_special_tokens=False)["input_ids"][-1:])
    token = token[0] if token and token[0] != tokenizer.unk_token else tokenizer.eos_token
    if token is None:
        return None
    state = json.loads(backend.to_str())
    processor = state.get("post_processor")
    if processor is None or processor.get("type") == "Sequence":
        steps = (processor or {}).get("processors", [])
    else:
        steps = [processor]
    templates = [step for step in steps if step.get("type") == "TemplateProcessing"]
    if not templates:
        templates = [{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                      "special_tokens": {}}]
        steps = steps + templates
    template = templates[0]
    template["pair"] = []
    for item in template["single"]:
        if item.get("Sequence", {}).get("id") == "A":
            template["pair"] += [item, {"SpecialToken": {"id": token, "type_id": 0}},
                                 {"Sequence": {"id": "B", "type_id": 1}}]
        else:
            template["pair"].append(item)
    template["special_tokens"][token] = {"id": token, "ids": [tokenizer.convert_tokens_to_ids(token)],
                                         "tokens": [token]}
    state["post_processor"] = {"type": "Sequence", "processors": steps} if len(steps) > 1 else steps[0]
    backend.post_processor = Tokenizer.from_str(json.dumps(state)).post_processor
    return token


def ensure_pad_token(tokenizer, name: str = "the model") -> str | None:
    """Give a tokenizer without a pad token (decoder LLMs as they ship) its EOS token (else UNK) as pad token;
    returns which it took, None when it had one. The sequence-classification heads of decoders pool the last
    token that is not a pad, so padding on either side gives the same logits."""
    if tokenizer.pad_token is not None:
        return None
    for kind in ("eos_token", "unk_token"):
        token = getattr(tokenizer, kind, None)
        if token is not None:
            tokenizer.pad_token = token
            return kind
    raise TuneloopError(f"--model {name}: the tokenizer has no pad, EOS or UNK token to pad batches with; add one "
                        "(tokenizer.add_special_tokens({'pad_token': ...}) and resize the embeddings) and save it")


def check_vocabulary(tokenizer, model, name: str) -> None:
    """The tokenizer's ids must exist in the model's input embeddings (a mismatched tokenizer crashes mid-run or
    silently reads other words)."""
    embeddings = model.get_input_embeddings()
    size = getattr(embeddings, "num_embeddings", None)
    if size is not None and len(tokenizer) > size:
        raise TuneloopError(vocabulary_error(name, len(tokenizer), size))


def vocabulary_error(name: str, tokens: int, size: int) -> str:
    return (f"--model {name}: the tokenizer has {tokens} tokens but the model's embeddings only {size}; the "
            "tokenizer does not belong to this model (or resize the embeddings after adding tokens)")
