"""A search's space: the YAML file of options, each a range, a log range or a list of choices, checked against
`tuneloop train`'s options and their types; the options a space may not vary; and one trial's values drawn from
it (`suggest`)."""

from __future__ import annotations

import dataclasses
import difflib

from ..config.options import TrainConfig
from ..config.parsing import coerce, read_yaml_mapping
from ..exceptions import ConfigError

# options a space may not vary: what the trials are scored on, what the search sets for each trial, and what is
# not one run's (a trial is one run)
SCORED_ON = ("task", "data_dir", "train_file", "validation_file", "test_file", "text_columns", "label_column",
             "problem_type", "label_separator", "validation_split", "split_seed", "max_eval_samples", "soft_targets")
RANKED_BY = ("metric_for_best",)          # and what they are ranked by: both the same for every trial of a study
SET_PER_TRIAL = ("output_dir", "resume", "overwrite", "chosen")
SPEC_KEYS = ("low", "high", "log", "choices")


def _fixed(name: str) -> str | None:
    """Why the option `name` cannot vary between trials, or None."""
    if name in SCORED_ON:
        return "every trial is scored on the same data: give it as a flag of `tuneloop search`"
    if name in SET_PER_TRIAL:
        return "the search sets it for each trial, OUT/trials/trial-NNN"
    if "search" not in TrainConfig.__dataclass_fields__[name].metadata["commands"]:
        return "a trial is one run, and this is not an option of one; see `tuneloop search --help`"
    return None


def read_space(path: str, base: TrainConfig | None = None) -> dict[str, dict]:
    """{option: spec} from the YAML file, each checked against TrainConfig's options and their types, and each
    choice and bound against `base` (the search's options: the trial's config must validate)."""
    space = read_yaml_mapping(path, "--space", "a mapping of options to ranges")
    if not space:
        raise ConfigError(f"--space: {path} must map options to ranges, e.g. `lr: {{low: 1.0e-5, high: 1.0e-4, "
                          "log: true}`")
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    out, spelled = {}, {}
    for key, spec in space.items():
        name = str(key).replace("-", "_")
        where = f"--space {path}: {key}"
        if name in spelled:                               # batch-size and batch_size: one option, the last kept
            raise ConfigError(f"--space {path}: {spelled[name]!r} and {key!r} are the same option; keep one")
        spelled[name] = key
        if name not in fields:
            near = difflib.get_close_matches(name, list(fields), n=1)
            raise ConfigError(f"{where}: not a tuneloop option" + (f" (did you mean {near[0]}?)" if near else "")
                              + "; see `tuneloop train --help`")
        if _fixed(name):
            raise ConfigError(f"{where}: cannot vary between trials: {_fixed(name)}")
        out[name] = _spec(spec, fields[name], where)
        for value in out[name].get("choices", ()) or (out[name]["low"], out[name]["high"]):
            _check_value(base, name, _value(out[name], value), where)
    return out


def _spec(spec, field: dataclasses.Field, where: str) -> dict:
    """One option's {choices: [...]} or {low, high, log, int} (list-valued options' choices held as "a,b" text:
    Optuna's storages keep plain values)."""
    if not isinstance(spec, dict) or not ({"choices"} <= set(spec) or {"low", "high"} <= set(spec)):
        raise ConfigError(f"{where}: give {{low: A, high: B}} (with `log: true` for a log range) or {{choices: [...]}}")
    unknown = [str(k) for k in spec if k not in SPEC_KEYS]
    if unknown or ("choices" in spec and spec.keys() & {"low", "high", "log"}):
        raise ConfigError(f"{where}: " + (f"unknown key(s) {', '.join(unknown)}; a range takes low, high and log, "
                                          "a list choices" if unknown else "give either choices or a range, not both"))
    if "choices" in spec:
        if not isinstance(spec["choices"], list) or not spec["choices"]:
            raise ConfigError(f"{where}: choices must be a non-empty list, e.g. {{choices: [a, b]}}; got "
                              f"{spec['choices']!r}")
        choices = [coerce(TrainConfig, field, c, where) for c in spec["choices"]]
        return {"choices": [",".join(map(str, c)) if isinstance(c, list) else c for c in choices],
                **({"list": True} if any(isinstance(c, list) for c in choices) else {})}
    low, high = (coerce(TrainConfig, field, spec[k], where) for k in ("low", "high"))
    if not isinstance(low, (int, float)) or isinstance(low, bool) or not low < high:
        raise ConfigError(f"{where}: a range needs numbers with low < high, got {spec['low']!r}, {spec['high']!r}")
    log_range = spec.get("log", False)
    if not isinstance(log_range, bool):
        raise ConfigError(f"{where}: log must be true or false, got {log_range!r}")
    if log_range and low <= 0:
        raise ConfigError(f"{where}: a log range needs low > 0")
    return {"low": low, "high": high, "log": log_range, "int": isinstance(low, int)}


def _value(spec: dict, value):
    """A sampled value as the option takes it ("a,b" back to a list for a list-valued option)."""
    return value.split(",") if spec.get("list") and isinstance(value, str) else value


def _check_value(base: TrainConfig | None, name: str, value, where: str) -> None:
    if base is None:
        return
    try:
        base.replace(**{name: value}).validate()
    except ConfigError as e:
        raise ConfigError(f"{where}: {value!r} would not run: {e}") from None


def suggest(trial, space: dict) -> dict:
    params = {}
    for name, spec in space.items():
        if "choices" in spec:
            params[name] = _value(spec, trial.suggest_categorical(name, spec["choices"]))
        elif spec["int"]:
            params[name] = trial.suggest_int(name, spec["low"], spec["high"], log=spec["log"])
        else:
            params[name] = trial.suggest_float(name, spec["low"], spec["high"], log=spec["log"])
    return params
