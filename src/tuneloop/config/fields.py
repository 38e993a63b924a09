"""How an option is declared: `opt` makes the dataclass field, whose metadata builds its flag (help, group, choices)
and holds its traits, the facts other modules read about it; `having` lists the options with a trait."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from ..exceptions import ConfigError

GROUPS = ("data", "model", "training", "evaluation", "decision", "experiment", "checkpointing", "output",
          "distillation")
TRAIN_AND_SEARCH = ("train", "search")            # `commands` by default: a run and a search's trials take it
WITH_EVALUATE = ("train", "evaluate", "search")   # ... and `tuneloop evaluate`
TRAIN_ONLY = ("train",)                           # a run's, not a search trial's (the search has its own)
DISTILL = ("distill",)                            # `tuneloop distill`'s own (it also takes every train option)


def opt(default: Any, help: str, group: str, choices: tuple | None = None, metavar: str | None = None,
        cli: bool = True, nargs: str | None = None, const: Any = None, *,
        commands: tuple[str, ...] = TRAIN_AND_SEARCH, common: bool = False, resumable: bool = False,
        small_data: bool = False, sklearn: str | None = None):
    """One option. Its traits:

    - commands: the commands that take it as a flag (cli/parsers.py); `tuneloop train` takes every option,
    - common: listed by `tuneloop train --help` (the others by --help-all; all of them parse),
    - resumable: a --resume may change it; any other change is refused (training/checkpoint.py),
    - small_data: the small-data rule may decide it (training/small_data.py),
    - sklearn: "own", the scikit-learn estimators set it themselves and refuse it in options= (sklearn.py).
    """
    return field(default=default, metadata=dict(help=help, group=group, choices=choices, metavar=metavar, cli=cli,
                                                 nargs=nargs, const=const, commands=commands, common=common,
                                                 resumable=resumable, small_data=small_data, sklearn=sklearn))


def having(cls, trait: str, value: Any = True) -> tuple[str, ...]:
    """The options of `cls` whose trait is `value` (for `commands`: includes it), in the order of the fields."""
    def has(f: dataclasses.Field) -> bool:
        held = f.metadata.get(trait)
        return value in held if isinstance(held, tuple) else held == value

    return tuple(f.name for f in dataclasses.fields(cls) if has(f))


def path_options(cls) -> frozenset[str]:
    """The options of `cls` that name a file or folder (DIR or FILE in their metavar): `MRPC`, `MRPC/`, `./MRPC` and
    its absolute path name one folder."""
    return frozenset(f.name for f in dataclasses.fields(cls)
                     if any(word in (f.metadata.get("metavar") or "") for word in ("DIR", "FILE")))


def need(cond: bool, name: str, msg: str) -> None:
    """Refuse an option's value: ConfigError naming its flag."""
    if not cond:
        raise ConfigError(f"--{name.replace('_', '-')}: {msg}")


def need_choices(config, names_and_choices) -> None:
    """Each named option holds one of its choices."""
    for name, choices in names_and_choices:
        need(getattr(config, name) in choices, name,
             f"unknown value {getattr(config, name)!r}; choose one of {', '.join(choices)}")
