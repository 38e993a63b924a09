"""The command line's option flags, one per TrainConfig field (options.py): grouped, typed, help from the field's
metadata; parsed values are only the flags given, so resolve.py can layer them over presets and YAML."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ..exceptions import ConfigError
from .options import GROUPS, TrainConfig, with_trait
from .parsing import coerce, field_type

# what `tuneloop train --help` shows; `--help-all` shows every option (all of them parse either way)
COMMON = with_trait("common")


def add_config_arguments(parser: argparse.ArgumentParser, cls=TrainConfig, only: tuple[str, ...] | None = None,
                         listed: tuple[str, ...] | None = None):
    """Add one flag per config field, grouped, defaults shown; parsed values are only the flags given. `listed`:
    the fields whose help is printed (the others parse but stay out of --help)."""
    groups = {g: parser.add_argument_group(f"{g} options") for g in GROUPS}
    for f in dataclasses.fields(cls):
        if not f.metadata.get("cli", True) or (only is not None and f.name not in only):
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = field_type(cls, f)
        default = f.default if f.default is not dataclasses.MISSING else None
        shown = ",".join(default) if isinstance(default, list) else default
        help_text = f.metadata["help"] + (f" (default: {shown})" if shown not in (None, False) else "")
        hidden = listed is not None and f.name not in listed
        kwargs: dict[str, Any] = dict(dest=f.name, default=argparse.SUPPRESS,
                                      help=argparse.SUPPRESS if hidden else help_text.replace("%", "%%"))
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _cli_type(cls, f)
            if f.metadata.get("nargs"):
                kwargs.update(nargs=f.metadata["nargs"], const=f.metadata["const"])
            kwargs["metavar"] = f.metadata.get("metavar") or (
                "{" + ",".join(f.metadata["choices"]) + "}" if f.metadata.get("choices") else None)
        groups[f.metadata["group"]].add_argument(flag, **kwargs)
    return parser


def _cli_type(cls, f: dataclasses.Field):
    def convert(text: str):
        # `none`/`null` unsets an optional option, but a label name is text: a class may be called "none"
        if text.lower() in ("none", "null") and f.default is None and f.metadata.get("metavar") != "LABEL":
            return None
        try:
            return coerce(cls, f, text, source="--" + f.name.replace("_", "-"))
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1]) from None

    convert.__name__ = getattr(field_type(cls, f), "__name__", "value")
    return convert


def options_from_namespace(ns: argparse.Namespace, cls=TrainConfig) -> dict:
    """The options given as flags (argparse leaves the others out: their defaults are resolve.py's business)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {k: v for k, v in vars(ns).items() if k in fields}
    for name, value in out.items():          # `--seeds 1 2 3` and `--seeds 1,2,3`: each word gave a list
        if fields[name].metadata.get("nargs") == "+" and value is not None:
            out[name] = [item for part in value for item in (part if isinstance(part, list) else [part])]
    return out
