"""Labels: what they are (regression, classes, several labels per example), how raw label text maps to model
targets, and how a saved run or model says what its labels were. Every inference of the problem type and the
label names lives here."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Optional

from ..exceptions import DataError
from ..tasks import MULTI_LABEL, REGRESSION, SINGLE_LABEL, TaskSpec
from .label_notes import (_check_guessed_classes, _say_label_sets, _say_labels_on_every_row, _say_missing_markers,
                          _say_near_duplicates, _say_no_labels, _say_number_reading, _say_odd_words,
                          _say_unsplit_sets)
from .label_numbers import (_LEADING_ZERO, _as_float, _comma_hint, _not_a_target, _regression_value,
                            _written_with_comma, dots_group_thousands, written_as_decimals)
from .readers import decimal_comma, position_word

log = logging.getLogger("tuneloop")


@dataclass
class LabelSchema:
    """What the labels are and how they map to model outputs; saved with the model."""

    problem_type: str                     # single_label_classification | multi_label_classification | regression
    names: list[str] = field(default_factory=list)   # empty for regression
    separator: Optional[str] = None
    thousands: bool = False               # a decimal-comma file whose training labels group thousands with dots
                                          # (1.250 is 1250): read so in its other splits too (dots_group_thousands)

    @property
    def objective(self):
        """What these labels mean for a model's outputs (objective/): loss, probabilities, predictions (a new one
        each time: a schema travels into `datasets.map`'s fingerprint, so it holds no derived state)."""
        from ..objective import objective_for

        return objective_for(self)

    @property
    def num_labels(self) -> int:
        return 1 if self.problem_type == REGRESSION else len(self.names)

    @property
    def index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}

    def separator_join(self, names: list[str]) -> str:
        return (self.separator or ",").join(names)

    def to_dict(self) -> dict:
        return {"problem_type": self.problem_type, "names": self.names, "separator": self.separator,
                **({"thousands": True} if self.thousands else {})}

    @classmethod
    def from_dict(cls, data: dict) -> "LabelSchema":
        return cls(data["problem_type"], list(data.get("names") or []), data.get("separator"),
                   bool(data.get("thousands")))

    @classmethod
    def from_model_config(cls, config) -> "LabelSchema":
        """From a transformers config alone (a plain save_pretrained folder): its problem_type and id2label."""
        problem = config.problem_type or (REGRESSION if config.num_labels == 1 else SINGLE_LABEL)
        names = [] if problem == REGRESSION else [str(config.id2label[i]) for i in range(config.num_labels)]
        return cls(problem, names)


def _split_labels(raw: str, separator: str | None) -> list[str]:
    if raw.startswith("[") and raw.endswith("]"):
        try:
            return [str(v).strip() for v in json.loads(raw)]
        except json.JSONDecodeError:
            pass
    return [part.strip() for part in raw.split(separator)] if separator else [raw]


def infer_label_schema(train, problem_type: str, separator: str | None, source: str,
                       task: TaskSpec | None = None) -> LabelSchema:
    """Decide regression / classes / multi-label from the training labels (or take the task's)."""
    if task is not None:
        return LabelSchema(task.problem_type, list(task.label_names or []))
    values = [v for v in train.unique("label") if v is not None]
    comma, guessed = separator != "," and decimal_comma(source), problem_type == "auto"
    grouping = dots_group_thousands(values) if comma and problem_type != MULTI_LABEL and not separator else None
    thousands = bool(grouping)
    numeric = [_as_float(v, comma, thousands) for v in values]
    looks_listy = bool(values) and all(v.startswith("[") and v.endswith("]") for v in values)
    if problem_type == "auto":
        if separator or looks_listy:
            problem_type = MULTI_LABEL
        elif values and all(x is not None for x in numeric) and any(not x.is_integer() for x in numeric):
            problem_type = REGRESSION
        else:
            problem_type = SINGLE_LABEL
    if problem_type == REGRESSION:
        bad = next((v for v in values if _regression_value(v, comma, thousands) is None), None)
        if bad is not None:
            row = train.filter(lambda b: [x == bad for x in b], input_columns="label", batched=True)[0]["pos"]
            raise DataError(f"{source}: {position_word(source)} {row}: regression target {bad!r} {_not_a_target(bad)}; "
                            f"{_comma_hint(bad, '; ')}fix the label column or drop --problem-type regression")
        if len(set(numeric)) < 2:
            raise DataError(f"{source}: the regression target is {values[0] if values else 'absent'} in every row; "
                            "there is nothing to learn: give targets that vary")
        _say_number_reading(values, comma, grouping, source)
        return LabelSchema(REGRESSION, [], thousands=thousands)
    if problem_type == MULTI_LABEL:
        sets = [{item for item in _split_labels(v, separator) if item} for v in values]
        names = sorted(set().union(*sets))
        _say_no_labels(names, source)
        _say_unsplit_sets(values, separator, source)
        _say_near_duplicates(names, source)
        _say_labels_on_every_row(names, sets, source)
        return LabelSchema(problem_type, names, separator)
    whole = bool(values) and all(x is not None and x.is_integer() for x in numeric)
    codes = [v for v in values if _LEADING_ZERO.fullmatch(v)] if whole else []
    if whole and not codes:
        _say_number_reading(values, comma, grouping, source)
        names = [str(int(x)) for x in sorted(set(numeric))]   # 0, 1, 2 ... in numeric order
        if guessed and written_as_decimals(values, comma, thousands):
            # 4.0, 2.0, 1.0: scores saved as floats, or class ids saved by pandas as a float column (0.0 / 1.0, a
            # column that held a missing value): no reading can tell, so the choice is said
            mark = "comma" if comma and _written_with_comma(values[0]) else "point"
            log.warning(f"{source}: every label is a whole number written with a decimal {mark} "
                        f"({min(values, key=len)!r}), trained as {len(names)} classes ({', '.join(names[:6])}"
                        f"{', ...' if len(names) > 6 else ''}); if they are scores to predict, give --problem-type "
                        "regression")
    elif codes:                       # "01", "02": codes, whose zeros are part of the name ("01" and "1" two classes)
        names = sorted(values)
        twice = [v for v, x in zip(values, numeric, strict=True) if numeric.count(x) > 1]
        log.info(f"{source}: labels written with leading zeros ({', '.join(map(repr, codes[:3]))}) are kept as "
                 "written, as codes" + (f"; {', '.join(map(repr, sorted(twice)[:4]))} are different classes" if twice
                                        else ""))
    else:
        names = sorted(values)
        if guessed and all(x is not None or _written_with_comma(v) for v, x in zip(values, numeric, strict=True)):
            log.warning(f"{source}: the labels look like numbers with a decimal comma ({max(values, key=len)!r}) and "
                        f"are trained as {len(names)} classes; for regression write a decimal point, or save the file "
                        "with ';' separators (a decimal-comma file)")
        elif guessed:
            _say_odd_words(values, numeric, source)
    if guessed:
        _check_guessed_classes(names, numeric, len(train), source)
        _say_label_sets(names, source)
        _say_missing_markers(names, source)
    if len(names) < 2:
        raise DataError(f"{source}: the label column holds only {names or 'no values'}; classification needs at "
                        "least two classes")
    _say_near_duplicates(names, source)
    return LabelSchema(problem_type, names, thousands=thousands and whole and not codes)


class LabelEncoder:
    """Maps raw label text to model targets for one split; unknown labels name their file and position."""

    def __init__(self, schema: LabelSchema, source: str, accept_ids: bool = False):
        """`accept_ids`: also take class ids ("0", "1") for named classes, as GLUE's files store them."""
        self.schema, self.source, self.where = schema, source, position_word(source)
        self.comma = schema.separator != "," and decimal_comma(source)
        self.thousands = self.comma and schema.thousands
        self.index = schema.index
        if schema.problem_type == SINGLE_LABEL:
            for i, name in enumerate(schema.names):
                x = _as_float(name)
                if x is not None and x.is_integer():  # "1" and "1.0" are the same class
                    self.index.setdefault(str(int(x)), i)
                    self.index.setdefault(repr(float(x)), i)
                if accept_ids:
                    self.index.setdefault(str(i), i)

    def _unknown(self, value, pos):
        known = ", ".join(self.schema.names[:20])
        amounts = "; if the labels are amounts, give --problem-type regression" if _as_float(value) is not None and \
            all(_as_float(n) is not None for n in self.schema.names) else ""
        return DataError(f"{self.source}: {self.where} {pos}: label {value!r} was not seen in the training data "
                         f"(known: {known}); fix the label or add examples of it to the training data{amounts}")

    def __call__(self, raw: str, pos: int):
        """The target of the label text `raw` found at position `pos` of the source."""
        kind = self.schema.problem_type
        if kind == REGRESSION:
            value = _regression_value(raw, self.comma, self.thousands)
            if value is None:
                hint = _comma_hint(raw)
                raise DataError(f"{self.source}: {self.where} {pos}: regression target {raw!r} {_not_a_target(raw)}"
                                + (f"; {hint}" if hint else ""))
            return value
        if kind == MULTI_LABEL:
            target = [0.0] * len(self.schema.names)
            for item in _split_labels(raw, self.schema.separator):
                if item:
                    if item not in self.index:
                        raise self._unknown(item, pos)
                    target[self.index[item]] = 1.0
            return target
        key = raw
        if key not in self.index:
            x = _as_float(raw, self.comma, self.thousands)
            key = str(int(x)) if x is not None and x.is_integer() else raw
        if key not in self.index:
            raise self._unknown(raw, pos)
        return self.index[key]


def recorded_schema(metadata: dict | None = None, config: dict | None = None, results: dict | None = None,
                    task: TaskSpec | None = None) -> Optional[LabelSchema]:
    """What a run folder or saved model records about its labels: the model's tuneloop.json first, then the
    config's problem type and results.json's label names, then the GLUE task's; None when none of them says."""
    meta = (metadata or {}).get("labels") or {}
    configured = (config or {}).get("problem_type")
    kind = meta.get("problem_type") or (configured if configured not in (None, "auto") else None) or \
        (task.problem_type if task is not None else None)
    names = meta.get("names") or (results or {}).get("labels") or \
        (list(task.label_names) if task is not None and task.label_names else [])
    if kind is None and not names:
        return None
    kind = kind or SINGLE_LABEL
    return LabelSchema(kind, [] if kind == REGRESSION else [str(n) for n in names], meta.get("separator"),
                       bool(meta.get("thousands")))


def problem_type_of_outputs(logits, labels) -> str:
    """The problem type that saved evaluation outputs (logits and labels arrays) must come from."""
    if labels.ndim == 2:
        return MULTI_LABEL
    if labels.dtype.kind == "f" and logits.shape[-1] == 1:
        return REGRESSION
    return SINGLE_LABEL
