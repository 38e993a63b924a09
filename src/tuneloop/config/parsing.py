"""Option values from text: YAML files of options and the type each option's value is turned into (the same
rules for YAML and command-line flags), for any dataclass of options (config.TrainConfig, search spaces), and the
two options whose values are small languages: --optimize-threshold-for and --eval-every."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import typing
from typing import Any

import yaml

from ..exceptions import ConfigError


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load, except that a key given twice in one mapping is an error (PyYAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice (lines {seen[key] + 1} and {key_node.start_mark.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def read_yaml_mapping(path: str | os.PathLike, flag: str, what: str = "a mapping of option: value") -> dict:
    """A YAML file that must hold a mapping, each key once; ConfigError naming `flag` and the file otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            data = yaml.load(text, Loader=_UniqueKeyLoader) or {}     # noqa: S506 - a SafeLoader
        except yaml.YAMLError:
            data = _json_instead(text, path, flag)    # JSON indented with tabs, which YAML refuses
            if data is None:
                raise
    except FileNotFoundError:
        raise ConfigError(f"{flag}: {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{flag}: {path} is a folder; give the YAML file in it") from None
    except PermissionError:
        raise ConfigError(f"{flag}: {path} cannot be read (permission denied)") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{flag}: {path} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except yaml.MarkedYAMLError as e:
        where = f" (line {e.problem_mark.line + 1})" if e.problem_mark is not None else ""
        raise ConfigError(f"{flag}: {path} is not valid YAML{where}: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{flag}: {path} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{flag}: {path} must hold {what}")
    return data


def _json_instead(text: str, path, flag: str):
    """The file as JSON (YAML forbids the tabs that JSON may indent with), each key once; None when it is not
    JSON either (then the YAML error is the one said)."""
    def unique(pairs):
        keys = [k for k, _ in pairs]
        twice = next((k for k in keys if keys.count(k) > 1), None)
        if twice is not None:
            raise ConfigError(f"{flag}: {path}: {twice!r} is given twice; keep one")
        return dict(pairs)

    try:
        return json.loads(text.lstrip("\ufeff"), object_pairs_hook=unique)
    except ValueError:
        return None


def read_options_file(path: str | os.PathLike, cls, flag: str = "--config") -> dict:
    """Read a YAML file of options; unknown keys are an error (a typo should not be silently ignored)."""
    data = read_yaml_mapping(path, flag)
    known = {f.name: f for f in dataclasses.fields(cls)}
    out, spelled = {}, {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise ConfigError(f"{flag}: {path}: unknown option {key!r}; see `tuneloop train --help`")
        if name in spelled:                                  # max-length and max_length: one option
            raise ConfigError(f"{flag}: {path}: {spelled[name]!r} and {key!r} are the same option; keep one")
        spelled[name] = key
        out[name] = coerce(cls, known[name], value, source=f"{path}: {key}")
    return out


@functools.cache
def type_hints(cls) -> dict:
    """The class's resolved annotations, once per class (resolving them costs about a millisecond a field, over half
    a second for the parser of every command if done per field)."""
    return typing.get_type_hints(cls)


def takes_none(cls, f: dataclasses.Field) -> bool:
    """Whether the field is Optional (None means "not set": the default decides)."""
    hint = type_hints(cls)[f.name] if f.name in cls.__dataclass_fields__ else f.type
    return hint is type(None) or type(None) in typing.get_args(hint)


def field_type(cls, f: dataclasses.Field):
    """The field's type, Optional[...] unwrapped."""
    hint = type_hints(cls)[f.name] if f.name in cls.__dataclass_fields__ else f.type
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Union and len(args) == 1:
        hint = args[0]
    return hint


def _whole(value) -> int:
    """An int from an int, a whole float or its text; ValueError for 2.5, True or 'a'."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(value)
    return int(value.strip()) if isinstance(value, str) else int(value)


def coerce(cls, f: dataclasses.Field, value: Any, source: str):
    """Turn a YAML/CLI value into the field's type, with a message naming the option on failure."""
    kind = field_type(cls, f)
    if value is None:
        if takes_none(cls, f):
            return None
        raise ConfigError(f"{source}: expected {getattr(kind, '__name__', kind)}, got none (null); give a value, "
                          f"or leave the option out for its default")
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "yes", "1", "on"):
                return True
            if text in ("false", "no", "0", "off"):
                return False
            raise ValueError(value)
        if typing.get_origin(kind) is list:
            items = value if isinstance(value, (list, tuple)) else str(value).split(",")
            element = (typing.get_args(kind) or (str,))[0]
            return [_whole(v) if element is int else str(v).strip() for v in items]
        if kind is int:
            return _whole(value)
        if kind is float:
            return float(value)
        if isinstance(value, (list, tuple, dict, set)):                 # output_dir: [a] is not a path
            raise TypeError(value)
        return str(value) if not isinstance(value, bool) else str(value).lower()
    except (TypeError, ValueError):
        name = getattr(kind, "__name__", str(kind))
        if typing.get_origin(kind) is list:
            name = f"a comma-separated list of {getattr((typing.get_args(kind) or (str,))[0], '__name__', 'str')}"
        raise ConfigError(f"{source}: expected {name}, got {value!r}") from None


def parse_objective(text: str) -> tuple[str, float | None]:
    """--optimize-threshold-for: 'f1' | 'macro-f1' | 'precision@R' | 'recall@P' → (name, target); ValueError if not."""
    name, _, value = str(text).partition("@")
    if name in ("f1", "macro-f1") and not value:
        return name, None
    try:
        target = float(value) if name in ("precision", "recall") else None
    except ValueError:
        target = None
    if target is not None and 0 < target <= 1:
        return name, target
    raise ValueError(f"{text!r}: use f1, macro-f1, precision@R or recall@P with R, P in (0, 1]")


def eval_every_parts(value) -> tuple[str, int] | None:
    """`--eval-every` as ("steps", N) or ("per_epoch", K); None when it is neither."""
    text = str(value).strip().lower().replace(" ", "")
    per_epoch = text.endswith("/epoch")
    number = text[:-len("/epoch")] if per_epoch else text
    if not number.isdigit() or int(number) < 1:
        return None
    return ("per_epoch" if per_epoch else "steps", int(number))
