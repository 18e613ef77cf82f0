"""What an npu-smi health word means: one rule for the doctor, the console's colours and alerts.

npu-smi prints `OK`, `Warning` (minor alarm), `Alarm` (major), `Critical` (critical) — the
levels of `dcmi_get_device_health` (hicann/driver DCMI API reference: 0 normal, 1 minor,
2 major, 3 critical alarm) — and `UNKNOWN` when it could not read the chip; a table cell can
also be `NA`, `-` or empty. Reading nothing is not a pass and not a fault: `unknown`, which a
verdict turns into `warn`. Any other word is treated as a failure: a doctor never passes what it
cannot read.
"""

from __future__ import annotations

from typing import Literal

HealthLevel = Literal["ok", "warn", "fail", "unknown"]
HealthVerdict = Literal["ok", "warn", "fail"]

_UNREAD = frozenset({"", "NA", "N/A", "-", "UNKNOWN"})


def health_level(word: str | None) -> HealthLevel:
    text = (word or "").strip().upper()
    if text in _UNREAD:
        return "unknown"
    if text == "OK":
        return "ok"
    return "warn" if text == "WARNING" else "fail"


def health_verdict(word: str | None) -> HealthVerdict:
    """The verdict on a chip's health word: health that could not be read is `warn`."""
    level = health_level(word)
    return "warn" if level == "unknown" else level
