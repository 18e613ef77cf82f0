"""What an npu-smi health word means: one rule for the doctor, the console's colours and alerts.

npu-smi prints `OK`, `Warning`, `Alarm`, `Critical` (corpus/npu-smi/FORMATS.md §2); `NA` or `-`
when it cannot tell. Any other word is treated as a failure: a doctor never passes what it
cannot read.
"""

from __future__ import annotations

from typing import Literal

HealthLevel = Literal["ok", "warn", "fail", "unknown"]


def health_level(word: str | None) -> HealthLevel:
    text = (word or "").strip()
    if text.upper() in ("", "NA", "-"):
        return "unknown"
    if text.upper() == "OK":
        return "ok"
    return "warn" if text.lower() == "warning" else "fail"
