"""Noise lines around npu-smi outputs: printed by the driver or left in by whoever copied them.

One rule for every kind of output: the registry takes these lines out before any parser sees
the text and reports them as `noise`; none is dropped.
"""

from __future__ import annotations

import re

# driver log-level noise (#057, #058), the "driver not completely installed" trailer (#060),
# and shell prompts / `$ npu-smi ...` echo lines that transcriptions leave in (#043, #057)
_NOISE = (
    re.compile(r"^\s*DrvMng\w*\s+failed\b"),
    re.compile(r"^\s*\[WARNING\]\s*The driver package may not be completely installed"),
    re.compile(r"^\s*(?:\S+@\S+?:\S*\s*[#$]|\$)\s*npu-smi\b"),
)


def is_noise(line: str) -> bool:
    return any(pattern.search(line) for pattern in _NOISE)


def split_noise(text: str) -> tuple[str, tuple[str, ...]]:
    """Separate known noise lines from the output; returns (clean text, noise lines as printed)."""
    kept: list[str] = []
    noise: list[str] = []
    # line ends kept, so the clean text is the original minus whole lines, byte for byte
    for line in text.splitlines(keepends=True):
        (noise if is_noise(line) else kept).append(line)
    return "".join(kept), tuple(line.rstrip() for line in noise)
