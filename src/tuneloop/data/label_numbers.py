"""Label text as numbers: decimal points and commas, thousands grouped with dots, codes with leading zeros, and
what a model can hold as a regression target. data/labels.py decides with these what the labels are."""

from __future__ import annotations

import math
import re
from typing import Optional

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


def written_as_decimals(values: list[str], comma: bool = False, thousands: bool = False) -> bool:
    """Whether every label is written with a decimal mark (4.0, 3.5; 4,0 in a decimal-comma file; not a dot that
    groups thousands): numbers, even when each is whole, as a column of floats is written."""
    def decimal(text: str) -> bool:
        if comma and _written_with_comma(text):
            return True
        return "." in text and not (comma and thousands and _GROUPED_NUMBER.fullmatch(text))

    return bool(values) and all(decimal(v) for v in values)


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


def _comma_hint(value: str, end: str = "") -> str:
    """What to do about a number written with a decimal comma in a source that writes a decimal point (then `end`);
    "" for any other value."""
    if not _written_with_comma(value):
        return ""
    return "it has a decimal comma: write a decimal point, or save the file with ';' separators (a decimal-comma " \
        f"file){end}"
