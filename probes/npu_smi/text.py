"""Small text helpers shared by the npu-smi parsers: placeholders, numbers, box-table cells."""

from __future__ import annotations

import re

# printed where a value does not exist or is not known (NA: 310P power, no bus; -: A3 die 1 power)
PLACEHOLDERS = frozenset({"", "NA", "N/A", "-", "--"})

# No counter, id or reading npu-smi prints has more digits than a 64-bit integer (20); a longer
# number is a damaged or hostile paste. It must not reach int() either, which refuses strings
# of more than 4,300 digits with an exception.
MAX_DIGITS = 20
_INT = re.compile(rf"[+-]?\d{{1,{MAX_DIGITS}}}")
_DIGITS = rf"\d{{1,{MAX_DIGITS}}}"
_FLOAT = re.compile(rf"[+-]?(?:{_DIGITS}(?:\.\d{{0,{MAX_DIGITS}}})?|\.{_DIGITS})")
_NUMBER_SHAPED = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")
_SLASH = re.compile(r"\s*/\s*")
_BORDER = re.compile(r"\+[-=+]*")


def is_placeholder(token: str) -> bool:
    return token.strip() in PLACEHOLDERS


def to_int(token: str) -> int | None:
    """An integer as printed, or None for a placeholder or anything that is not one."""
    text = token.strip()
    return int(text) if _INT.fullmatch(text) else None


def to_float(token: str) -> float | None:
    text = token.strip()
    return float(text) if _FLOAT.fullmatch(text) else None


def is_number(token: str) -> bool:
    return _FLOAT.fullmatch(token.strip()) is not None


def is_implausible(token: str) -> bool:
    """A number by its shape, but longer than any npu-smi prints (see MAX_DIGITS)."""
    text = token.strip()
    return _NUMBER_SHAPED.fullmatch(text) is not None and _FLOAT.fullmatch(text) is None


def not_a_number(label: str, token: str) -> str:
    """The warning for a value that should be a number and is not (or not a plausible one)."""
    text = token.strip()
    if is_implausible(text):
        return f"{label} value of {sum(c.isdigit() for c in text)} digits is implausible: null"
    return f"{label} value {text!r} is not a number"


def to_text(token: str) -> str | None:
    """A string kept as printed, None for a placeholder."""
    text = token.strip()
    return None if text in PLACEHOLDERS else text


def is_border(line: str) -> bool:
    """`+----+====+` lines; the A3 chip separator has no column joints, 059 has odd widths."""
    text = line.strip()
    return len(text) > 1 and _BORDER.fullmatch(text) is not None


def is_box_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def box_cells(line: str) -> list[str]:
    """The cells of a `| a | b |` row, stripped; a row cut before its closing bar keeps its tail."""
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|"):
        text = text[:-1]
    return [cell.strip() for cell in text.split("|")]


def value_tokens(cell: str) -> list[str]:
    """Whitespace tokens of a value cell, with `a / b` pairs glued to one `a/b` token.

    npu-smi prints pairs as `%-5d/ %-13d`, so a 5-digit value touches the slash (`53444/ 65536`)
    and a short one does not (`0    / 0`); gluing both ways makes them the same token.
    """
    return _SLASH.sub("/", cell).split()


def split_pair(token: str) -> tuple[str, str] | None:
    """`used/total` -> its two halves; None when the token is not a pair."""
    used, sep, total = token.partition("/")
    return (used, total) if sep else None


def normalise_spaces(text: str) -> str:
    return " ".join(text.split())
