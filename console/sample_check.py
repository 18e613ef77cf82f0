"""Is a snapshot read back from a recording one the console can show? (pure, no I/O)

A recording is a file anyone can edit or damage: text where a number belongs, NaN or a
timestamp in the year 30000, a list where a name belongs. Such a row must be skipped and
counted, never handed to the panels, where it would crash the app mid-replay. The rules follow
the snapshot dataclasses' own field types, so a field added there is checked without an edit
here (an unknown type accepts only plain scalars).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

# project defaults: far beyond any real value (HBM in MB, bytes of a KV cache, tokens/s)
MAX_NUMBER = 1e15
# a process name, an error line, a path: far longer than any real one
MAX_TEXT_CHARS = 4096
# 1970 .. 2100: a sample time outside is a damaged row (and past 9999 datetime cannot show it)
MIN_TIME_S = 0.0
MAX_TIME_S = 4_102_444_800.0
TIME_FIELDS = ("taken_at", "raised_at")
ALERT_LEVELS = ("warn", "fail")


def problem(snapshot: Any) -> str | None:
    """Why `snapshot` (a frozen snapshot dataclass) cannot be shown, or None when it can."""
    for f in dataclasses.fields(snapshot):
        value = getattr(snapshot, f.name)
        why = _field_problem(str(f.type), value)
        if why is None and f.name in TIME_FIELDS and not MIN_TIME_S <= value <= MAX_TIME_S:
            why = "a time outside 1970-2100"
        if why is not None:
            return f"{f.name}: {why}"
    return None


def is_time(value: Any) -> bool:
    return _number(value) and MIN_TIME_S <= value <= MAX_TIME_S


def _field_problem(annotation: str, value: Any) -> str | None:
    optional = annotation.endswith(" | None")
    kind = annotation.removesuffix(" | None")
    if value is None:
        return None if optional else "missing"
    if kind == "int":
        return None if _integer(value) else "not a whole number in range"
    if kind == "float":
        return None if _number(value) else "not a finite number in range"
    if kind == "str":
        return None if _text(value) else "not a short text"
    if kind == "bool":
        return None if isinstance(value, bool) else "not true or false"
    if kind == "AlertLevel":
        return None if value in ALERT_LEVELS else "not an alert level"
    if kind == "tuple[str, ...]":
        ok = isinstance(value, tuple) and len(value) <= 256 and all(map(_text, value))
        return None if ok else "not a list of short texts"
    if kind == "tuple[float, ...]":  # the host's per-core CPU use
        ok = isinstance(value, tuple) and len(value) <= 4096 and all(map(_number, value))
        return None if ok else "not a list of finite numbers"
    if kind.startswith("tuple[") and kind.endswith(", ...]"):
        if not isinstance(value, tuple) or len(value) > 4096:
            return "not a list"
        return next((why for item in value if (why := _item_problem(item)) is not None), None)
    return None if _scalar(value) else "not a plain value"


def _item_problem(item: Any) -> str | None:
    """An element of a tuple field: a snapshot dataclass, or a short tuple of plain values
    (such as a (metric, name) pair)."""
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return problem(item)
    if isinstance(item, tuple):
        ok = len(item) <= 16 and all(map(_scalar, item))
        return None if ok else "not a list of plain values"
    return "not a recorded sample"


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_NUMBER


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and abs(value) <= MAX_NUMBER)


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TEXT_CHARS


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool) or _number(value) or _text(value)
