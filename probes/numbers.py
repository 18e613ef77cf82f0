"""The one parser of numbers written by others: a server's command line, a config file, a flag.

Python's `int()` and `float()` read far more than a person types: `²` and other Unicode
digits (`str.isdigit` is true for them), `1_000`, surrounding blanks, thousands of digits
(quadratic work, and 4,300 digits raise), `nan`, `inf`, `1e300`. Here a number is ASCII
digits (with a dot and an exponent for a float), at most a few of them, and inside a range
that belongs to the field; anything else is a NumberError whose one line names the field and
says what would be read.

The ranges are bounds of what the doctor reads, not of the servers: a value past them is
reported unread, never judged.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_INT_DIGITS = 18  # below 2**63: every count and size the doctor reads fits
_INT = re.compile(r"[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[0-9]{1,20}(?:\.[0-9]{0,20})?(?:[eE][-+]?[0-9]{1,3})?|\.[0-9]{1,20}",
                    re.ASCII)


class NumberError(ValueError):
    """A number from outside that is not read; the message is one line naming the field."""


@dataclass(frozen=True)
class Field:
    """A named number and the range the doctor reads it in (both ends included, except
    `low_open`: the low end itself is refused, as for a fraction that must be above 0)."""

    name: str
    low: float
    high: float
    low_open: bool = False

    def check(self, value: float, shown: str) -> None:
        below = value <= self.low if self.low_open else value < self.low
        if below or value > self.high:
            low = f"above {self.low:g}" if self.low_open else f"at least {self.low:g}"
            raise NumberError(f"{self.name}: {shown} is out of range ({low}, at most "
                              f"{self.high:g})")


def _shown(text: str) -> str:
    """The text as an error may quote it: one line, short, escapes visible."""
    from probes.textsafe import cut, one_line

    return repr(one_line(cut(text, 60)))


def parse_int(text: str, field: Field, max_digits: int = MAX_INT_DIGITS) -> int:
    """`text` as a non-negative integer of ASCII digits in `field`'s range."""
    if len(text) > max_digits or not _INT.fullmatch(text):
        raise NumberError(f"{field.name}: {_shown(text)} is not a whole number of at most "
                          f"{max_digits} ASCII digits")
    value = int(text)
    field.check(value, str(value))
    return value


def parse_float(text: str, field: Field) -> float:
    """`text` as a finite decimal number (`0.9`, `.9`, `9e-1`) in `field`'s range; `nan`,
    `inf` and signs are refused."""
    if len(text) > 48 or not _FLOAT.fullmatch(text):
        raise NumberError(f"{field.name}: {_shown(text)} is not a decimal number")
    value = float(text)
    if not math.isfinite(value):
        raise NumberError(f"{field.name}: {_shown(text)} is not a finite number")
    field.check(value, f"{value:g}")
    return value
