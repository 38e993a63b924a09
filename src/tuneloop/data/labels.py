"""Labels: what they are (regression, classes, several labels per example), how raw label text maps to model
targets, and how a saved run or model says what its labels were. Every inference of the problem type and the
label names lives here."""

from __future__ import annotations

import json
import logging
import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Optional

from ..exceptions import DataError
from ..tasks import MULTI_LABEL, REGRESSION, SINGLE_LABEL, TaskSpec
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


_LEADING_ZERO = re.compile(r"[+-]?0\d+")      # 01, 007: a code (a department, a ZIP code), not a number
_COMMA_NUMBER = re.compile(r"[+-]?\d*,\d+")   # 2,6  -0,5  ,25: a number with a decimal comma and nothing else
_GROUPED_COMMA_NUMBER = re.compile(r"[+-]?\d{1,3}(\.\d{3})+,\d+")   # 1.250,50: dots group thousands (a bare 1.250
                                                                     # could be either: dots_group_thousands)
_GROUPED_NUMBER = re.compile(r"[+-]?[1-9]\d{0,2}(\.\d{3})+")     # 1.250, 12.400, 1.000.000: grouped, or 3 decimals


def _written_with_comma(text: str) -> bool:
    return bool(_COMMA_NUMBER.fullmatch(text) or _GROUPED_COMMA_NUMBER.fullmatch(text))


def dots_group_thousands(values: list[str]) -> Optional[bool]:
    """Whether the labels of a decimal-comma file (decimal_comma) write dots that group thousands, as a spreadsheet
    in such a locale writes 1.250 for 1250 beside 950: True when every dotted label is so grouped and some label
    has a decimal comma, or the labels without a dot are whole numbers under 1000 (what grouping leaves undotted);
    False when a dot cannot group (1.25, 0.125, 1.2500); None when no label has a dot, or the dotted ones could be
    either (every label dotted, as 1.250 and 2.500 written with three decimals are)."""
    dotted = [v for v in values if "." in v]
    if not dotted:
        return None
    if not all(_GROUPED_NUMBER.fullmatch(v) or _GROUPED_COMMA_NUMBER.fullmatch(v) for v in dotted):
        return False
    if any(_written_with_comma(v) for v in values):
        return True
    bare = [v for v in values if "." not in v]
    return True if bare and all(re.fullmatch(r"[+-]?\d{1,3}", v) for v in bare) else None


def _as_float(text: str, comma: bool = False, thousands: bool = False) -> Optional[float]:
    """The number `text` writes, or None; `comma`: the source writes its decimal mark as a comma (decimal_comma);
    `thousands`: and its bare dots group thousands (dots_group_thousands)."""
    if comma and (_GROUPED_COMMA_NUMBER.fullmatch(text) or thousands and _GROUPED_NUMBER.fullmatch(text)):
        text = text.replace(".", "")
    if comma and _COMMA_NUMBER.fullmatch(text):
        text = text.replace(",", ".")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


FLOAT32_MAX = 3.4028234663852886e38     # a model computes in 32-bit floats (or narrower): larger targets are inf


def _regression_value(text: str, comma: bool = False, thousands: bool = False) -> Optional[float]:
    """The regression target `text` writes, or None when it is not a number a model can hold (nan, inf, ±1e39)."""
    value = _as_float(text, comma, thousands)
    return value if value is not None and abs(value) <= FLOAT32_MAX else None


def _not_a_target(text: str) -> str:
    return "is beyond ±3.4e38, what 32-bit floats hold (rescale the column)" if _as_float(text) is not None else \
        "is not a number"


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
        _say_decimal_comma(values, comma, source)
        _say_grouping(values, grouping, source)
        return LabelSchema(REGRESSION, [], thousands=thousands)
    if problem_type == MULTI_LABEL:
        sets = [{item for item in _split_labels(v, separator) if item} for v in values]
        names = sorted(set().union(*sets))
        _say_near_duplicates(names, source)
        _say_labels_on_every_row(names, sets, source)
        return LabelSchema(problem_type, names, separator)
    whole = bool(values) and all(x is not None and x.is_integer() for x in numeric)
    codes = [v for v in values if _LEADING_ZERO.fullmatch(v)] if whole else []
    if whole and not codes:
        _say_decimal_comma(values, comma, source)
        _say_grouping(values, grouping, source)
        names = [str(int(x)) for x in sorted(set(numeric))]   # 0, 1, 2 ... in numeric order
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
    if len(names) < 2:
        raise DataError(f"{source}: the label column holds only {names or 'no values'}; classification needs at "
                        "least two classes")
    _say_near_duplicates(names, source)
    return LabelSchema(problem_type, names, thousands=thousands and whole and not codes)


SET_SEPARATORS = ("|", ";", ",", "+")     # what joins several labels in one cell, as spreadsheets write sets


def _say_label_sets(names: list[str], source: str) -> None:
    """Single-label classes guessed from labels where some are others joined ('sports|tech' beside 'sports' and
    'tech'): almost always a multi-label column missing its --label-separator, so the log says so."""
    alone = set(names)
    for separator in SET_SEPARATORS:
        joined = [n for n in names if separator in n
                  and all(part.strip() in alone for part in n.split(separator))]
        if joined:
            shown = ", ".join(repr(n) for n in joined[:3]) + (f" and {len(joined) - 3} more" if len(joined) > 3 else "")
            log.warning(f"{source}: the labels {shown} are other labels joined by {separator!r}, and are trained as "
                        f"classes of their own ({len(names)} in all); if a row can carry several labels, give "
                        f"--label-separator '{separator}' to train one output per label (multi-label)")
            return


def _say_labels_on_every_row(names: list[str], sets: list[set], source: str) -> None:
    """Multi-label: a label every training row carries teaches nothing (the model learns to always say it); when
    every label is on every row there is nothing to learn at all."""
    always = [name for name in names if all(name in labels for labels in sets)]
    if always and len(always) == len(names):
        raise DataError(f"{source}: every row carries every label ({', '.join(names[:10])}); there is nothing to "
                        "learn: give rows without some of them")
    if always:
        log.warning(f"{source}: every training row carries the label(s) {', '.join(always[:10])}; the model learns "
                    "to always predict them")


UNIQUE_LABELS_FROM = 10     # rows from which a label column whose every row differs stops a guessed classification
MANY_NUMBERS = 20           # whole-number labels with more values than this, not ids 0..K-1 or 1..K: said


def _check_guessed_classes(names: list[str], numeric: list, rows: int, source: str) -> None:
    """Classes auto guessed from the labels that cannot be what was meant: every row its own class (an id or a text
    column taken for the label: nothing to learn a class from) stops the run; many whole numbers that are not class
    ids (gaps between them, or a first one other than 0 or 1: amounts, years, ages) are said."""
    whole = all(x is not None and x.is_integer() for x in numeric)
    amounts = "if they are amounts or scores, give --problem-type regression"
    if rows >= UNIQUE_LABELS_FROM and len(names) == rows:
        raise DataError(f"{source}: every row has a label of its own ({rows} different labels in {rows} rows, e.g. "
                        f"{names[0]!r}): a class needs rows to learn it from; {amounts + '; ' if whole else ''}if "
                        "this is not the label column, name it with --label-column NAME (or give --problem-type "
                        "single_label_classification to train these classes anyway)")
    if whole and len(names) > MANY_NUMBERS:
        gaps = int(names[-1]) - int(names[0]) + 1 > len(names)
        if gaps or int(names[0]) not in (0, 1):          # class ids run 0..K-1 or 1..K; years, ages, prices do not
            log.warning(f"{source}: the labels are {len(names)} different whole numbers from {names[0]} to "
                        f"{names[-1]}{' with gaps' if gaps else ''}, trained as {len(names)} classes; {amounts}")


def _comma_hint(value: str, end: str = "") -> str:
    """What to do about a number written with a decimal comma in a source that writes a decimal point (then `end`);
    "" for any other value."""
    if not _written_with_comma(value):
        return ""
    return "it has a decimal comma: write a decimal point, or save the file with ';' separators (a decimal-comma " \
        f"file){end}"


def _say_decimal_comma(values: list[str], comma: bool, source: str) -> None:
    example = next((v for v in values if comma and "," in v), None)
    if example is not None:
        log.info(f"{source}: labels with a decimal comma read as numbers ({example!r} as {_as_float(example, True)})")


def _say_odd_words(values: list[str], numeric: list, source: str) -> None:
    """Classes guessed from labels that are numbers but for one or two words ('1', '2', 'two'): almost always a
    number written out or a stray note, trained as a class of its own; said."""
    words = sorted(v for v, x in zip(values, numeric, strict=True) if x is None and not _written_with_comma(v))
    numbers = [v for x, v in sorted((x, v) for v, x in zip(values, numeric, strict=True) if x is not None)]
    if len(numbers) >= 2 and 1 <= len(words) <= 2:
        log.warning(f"{source}: the labels are numbers ({', '.join(numbers[:6])}{' ...' if len(numbers) > 6 else ''})"
                    f" but for {' and '.join(map(repr, words))}, trained as "
                    + ("a class of its own; if it is a number, write it as the others are; if it marks a row "
                       "without a label, leave the row out" if len(words) == 1 else "classes of their own; if they "
                       "are numbers, write them as the others are; if they mark rows without a label, leave the rows "
                       "out"))


def _say_grouping(values: list[str], grouping: Optional[bool], source: str) -> None:
    """How a decimal-comma file's dotted labels were read (dots_group_thousands): as grouped thousands, or, where
    they could be either, as decimal points, with what to do if that is wrong."""
    example = next((v for v in values if "." in v and "," not in v), None)
    if grouping and example is not None:
        log.info(f"{source}: labels with dots that group thousands read as numbers ({example!r} as "
                 f"{_as_float(example, True, True):g}), as a ';' file with decimal commas writes them")
    elif grouping is None and example is not None:
        log.warning(f"{source}: labels such as {example!r} are read with a decimal point ({float(example):g}); in a "
                    f"';' file they may be grouped thousands ({float(example.replace('.', '')):g}): if so, write "
                    "them without the dots")


def _say_near_duplicates(names: list[str], source: str) -> None:
    """Classes whose names differ only in case, inner spacing or Unicode form ('neg' and 'Neg', 'not spam' and 'not
    spam', 'café' in one character or two) are different classes to the model; almost always one class typed two
    ways, so the log says so."""
    groups: dict[str, list[str]] = {}
    for name in names:                    # NFKC: 'café' typed as one character or as e and an accent are alike
        groups.setdefault(" ".join(unicodedata.normalize("NFKC", name).casefold().split()), []).append(name)
    alike = [" and ".join(repr(n) for n in group) for group in groups.values() if len(group) > 1]
    if alike:
        log.warning(f"{source}: the labels {'; '.join(alike[:5])} differ only in case or spacing" + (
                        " (or in how an accent is stored: Unicode's composed and decomposed forms)" if any(
                            unicodedata.normalize("NFC", n) != n for n in names) else "") + " and are trained as "
                    "different classes; if they mean the same, write them one way")


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
