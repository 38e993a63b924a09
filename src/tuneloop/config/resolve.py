"""One function turns the layers of options into the final TrainConfig, before any data is read:

    defaults < preset (--recipe NAME: presets/NAME.yaml) < the run's own config.yaml (when resuming)
             < --config FILE < a TrainConfig object's non-default values < flags / keyword arguments

then fills in what the user left to tuneloop (the built-in sample when no data is named, the run folder's name,
`auto` precision and attention for this machine) and validates everything, so config.yaml records what ran.
"""

from __future__ import annotations

import os
import time
import typing
from pathlib import Path
from typing import Any, Callable, Mapping

from ..exceptions import ConfigError
from ..layout import CONFIG_FILE
from ..runtime import machine
from .options import PRESETS_DIR, TrainConfig, read_yaml_options
from .parsing import coerce, field_type, takes_none


def default_output_dir(task: str | None) -> str:
    return str(Path("runs") / f"{task or 'custom'}-{time.strftime('%Y%m%d-%H%M%S')}")


def preset(name: str) -> dict:
    """The options of presets/NAME.yaml ({} for `none`)."""
    if name in (None, "none"):
        return {}
    path = PRESETS_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(p.stem for p in sorted(PRESETS_DIR.glob("*.yaml")))
        raise ConfigError(f"--recipe: unknown value {name!r}; choose one of none, {known}")
    return read_yaml_options(path, flag="--recipe")


RUN_ACTIONS = ("resume", "dry_run", "overwrite")     # what a run did to its folder, not one of its settings


def saved_run_options(options: Mapping[str, Any]) -> dict:
    """When resuming, the run folder's config.yaml stands in for the defaults, so `--output-dir OUT --resume`
    alone continues the same run."""
    folder = options.get("output_dir")
    if not options.get("resume") or not folder or not (Path(folder) / CONFIG_FILE).is_file():
        return {}
    saved = read_yaml_options(Path(folder) / CONFIG_FILE, flag="--resume")
    for key in RUN_ACTIONS:
        saved.pop(key, None)
    return saved


def file_options(path: str | os.PathLike) -> tuple[dict, set]:
    """The options of a --config file and those its user chose. A run's own config.yaml (it lists `chosen`, which
    only resolve_config fills in) spells out every option, defaults included, and what that run did to its folder:
    there the options its user chose are its `chosen` (else its spelled-out split defaults beside --data-dir were
    refused as ignored), and the actions are left out (else `--config OUT/config.yaml` resumed, or with
    `overwrite: true` replaced, the run in its output_dir rather than starting one with the same settings)."""
    values = read_yaml_options(path)
    if "chosen" not in values:
        return values, set(values)
    for key in RUN_ACTIONS:
        values.pop(key, None)
    return values, set(values.pop("chosen") or ()) - set(RUN_ACTIONS)


def resume_value(value):
    """--resume as a run reads it: `resume=True` / `resume: true` the newest checkpoint, False / `false` none
    (a bool is otherwise read as the text of a path, and `resume=False` went looking for a checkpoint `false`)."""
    text = str(value).strip().lower() if isinstance(value, (bool, str)) else None
    return "latest" if text == "true" else None if text == "false" else value


def resolve_config(config: TrainConfig | None = None, *, config_file: str | os.PathLike | None = None,
                   machine: bool = True, **options) -> TrainConfig:
    """The final, validated TrainConfig of a run. A TrainConfig object counts as the options that differ from
    the defaults (pass a value equal to a default as a keyword to keep it over a preset's). `machine=False`
    leaves `auto` precision and attention to the process that trains (`for_this_machine`): notebook_train's
    parent process must not touch CUDA before it forks the workers."""
    user: dict[str, Any] = {}
    chosen: set[str] = set()           # what the user set: settings decided by the data leave these alone
    if config_file is not None:
        from_file, chose = file_options(config_file)
        user.update(from_file)
        chosen |= chose
    if config is not None:
        changes = config.changes()
        earlier = changes.pop("chosen", None)       # a resolved config knows what its user chose
        user.update(changes)
        chosen |= set(changes) if earlier is None else set(earlier)
    user.update(options)
    chosen |= set(options)
    unknown = set(user) - set(TrainConfig.__dataclass_fields__)
    if unknown:
        raise ConfigError(unknown_options_message(unknown))
    for name, value in user.items():     # from Python as from the flag: model=Path(...), lr="2e-5", seeds="1,2"
        if isinstance(value, os.PathLike):
            user[name] = value = os.fspath(value)
        field = TrainConfig.__dataclass_fields__[name]
        kind = field_type(TrainConfig, field)
        if name == "chosen" or (value is None and takes_none(TrainConfig, field)):
            continue
        if kind in (int, float) and isinstance(value, bool):
            raise ConfigError(f"{name}: expected {kind.__name__}, got {value!r}")     # epochs=True
        if (value is None or typing.get_origin(kind) is list or isinstance(value, (list, tuple, dict, set))
                or (kind in (bool, int, float) and not isinstance(value, kind))     # epochs=None, output_dir=[..]
                or (kind is str and isinstance(value, (int, float)))):              # output_dir=3: the folder "3"
            user[name] = coerce(TrainConfig, field, value, source=name)              # lr="fast": an error
    if "resume" in user:
        user["resume"] = resume_value(user["resume"])
    if not user.get("resume"):
        check_split_options(user, chosen)
    below = saved_run_options(user)
    layers = {**below, **user}
    # a resumed run's user chose what its config.yaml says (every option, were it older than `chosen`): not every
    # option it spells out (its config.yaml then listed its split defaults as chosen: refused when reused)
    chosen |= set(layers.pop("chosen", None) or ()) | (set() if "chosen" in below else set(below))
    values = {**preset(layers.get("recipe", "none")), **layers, "chosen": sorted(chosen - {"chosen"})}
    resolved = fill_defaults(TrainConfig(**values))
    return (for_this_machine(resolved) if machine else resolved).validate()


def check_split_options(user: dict, chosen: set) -> None:
    """--validation-split and --split-seed hold validation rows out of --train-file when no validation data is
    given (data/prepare.holds_out_validation); named beside a --validation-file, a --data-dir or no training file
    (GLUE, the Hub and the built-in sample have their own validation rows), they would be ignored."""
    named = [name for name in ("validation_split", "split_seed") if name in chosen]
    if not named or (user.get("train_file") is not None and user.get("validation_file") is None
                     and user.get("data_dir") is None):
        return
    flags = " and ".join("--" + name.replace("_", "-") for name in named)
    source = ("--validation-file" if user.get("validation_file") is not None else
              "--data-dir" if user.get("data_dir") is not None else "the data's own validation split")
    raise ConfigError(f"{flags}: would be ignored: the validation rows come from {source} (rows are held out of "
                      f"--train-file only when no validation data is given); drop {flags}")


def unknown_options_message(unknown) -> str:
    """Names the nearest real option of each unknown one, for Python keywords and YAML keys alike."""
    import difflib

    fields = list(TrainConfig.__dataclass_fields__)
    named = []
    for key in sorted(unknown):
        near = difflib.get_close_matches(key, fields, n=1)
        named.append(f"{key!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    return (f"unknown option(s) {', '.join(named)}; the options are TrainConfig's fields: "
            "help(tuneloop.TrainConfig), or `tuneloop train --help` for their flags")


def fill_defaults(config: TrainConfig) -> TrainConfig:
    """Decide what the user left to tuneloop that does not depend on the machine."""
    changes: dict[str, Any] = {}
    if config.validation_file and not config.train_file and config.task is None and not config.teacher:
        raise ConfigError("--validation-file needs --train-file (the labels and columns come from training data)")
    if config.resume is not None and not config.output_dir:
        raise ConfigError("--resume needs --output-dir: the run folder to continue")
    if config.task is None and config.data_dir is None and config.train_file is None and not config.teacher:
        changes.update(task="mrpc", data_dir="sample")        # the built-in sample, offline
    task = (changes.get("task") or config.task or "").lower() or None
    if config.task:
        changes["task"] = task
    if config.test_file is not None and "predict_test" not in (config.chosen or ()):
        changes["predict_test"] = True                         # a test file given is a file to predict
    if config.max_grad_norm == 0:
        changes["max_grad_norm"] = None
    if not config.output_dir:
        changes["output_dir"] = default_output_dir(task)
    return config.replace(**changes)


# On an H200, fp32 with TF32 matmuls trained bert-base (85.6M parameters outside embeddings; batch 8 and 32) 1.64-1.74x
# and MiniLM 1.38x faster than bf16 autocast, whose casts cost ~15 ms a step at either batch size (launch-bound
# steps; results/2026-11-26-h200-gpu-precision.json). Larger bodies keep bf16, where the matmuls should dominate
# (not measured here).
FP32_BODY_MAX_ON_GPU = 100_000_000


def for_this_machine(config: TrainConfig, body_parameters: Callable[[], int] | None = None) -> TrainConfig:
    """`auto` precision, compilation and loader workers for the device this process trains on (a no-op once
    decided). On CPUs these keep the choices measured there; CUDA GPUs get their own. On a GPU with TF32 the
    precision depends on the model's size, `body_parameters()` (its parameters outside embeddings, from the
    process that trains): without it `auto` stays for that process to decide. `auto` attention is decided when
    the model's architecture is known (model/attention.py)."""
    changes = {}
    cuda = machine.runs_on_cuda(config.cpu)
    if config.mixed_precision == "auto":
        native_bf16 = machine.native_bf16(config.cpu)
        if not (cuda and native_bf16):  # AMX CPUs: 13-15% faster MiniLM steps at batch 8; older GPUs: fp16 (unmeasured)
            changes["mixed_precision"] = "bf16" if native_bf16 else "fp16" if cuda else "no"
        elif body_parameters is not None:                       # Ampere and later: TF32 for what stays fp32
            changes["mixed_precision"] = "no" if body_parameters() <= FP32_BODY_MAX_ON_GPU else "bf16"
    if config.compile == "auto":
        # eager everywhere: on an H100 (bert-base, MRPC, batch 8, 3 epochs) compiling made the training loop 1.85x
        # slower (126 s vs 68 s, results/2026-11-23-h100-gpu-bert-base.json); steps this small are launch-bound
        changes["compile"] = "no"
    if config.dataloader_workers is None:
        changes["dataloader_workers"] = 2 if cuda else 0
    return config.replace(**changes) if changes else config
