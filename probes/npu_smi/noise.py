"""Noise lines around npu-smi outputs: printed by the driver or left in by whoever copied them.

One rule for every kind of output: the registry takes these lines out before any parser sees
the text and reports them as `noise`; none is dropped, and line numbers in warnings still
count them.

- driver log-level noise: `DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)` (#057, #058)
- the trailer `[WARNING]The driver package may not be completely installed ...` (#060)
- shell prompt lines with the command typed after them, in any common prompt style:
  `root@host:/# npu-smi info` (#057), `$ npu-smi info watch ...` (#043), `# npu-smi info -m`
  (#067), `[root@node ~]# ls -l /dev/davinci*`, `(base) user@host:~$ npu-smi info`.
  npu-smi itself never starts a line with a prompt: its lines start with `|`, `+`, a TAB, a
  label, a number or one of the messages of `probes.npu_smi.error`.
"""

from __future__ import annotations

import re

_DRIVER_LOG = re.compile(r"\s*DrvMng\w*\s+failed\b")
_TRAILER = re.compile(r"\s*\[WARNING\]\s*The driver package may not be completely installed")
# an optional `(venv) `, then `[user@host dir]#`, `user@host:dir$` or a bare `$`/`#`/`%`,
# then a command; matched from the line start, without nested repeats (linear on any line)
_PROMPT = re.compile(
    r"\s*(?:\([^()\s]{1,64}\)\s+)?"
    r"(?:\[[^\[\]\s]+@[^\[\]]*\]\s*|[^\s@\[\]|]+@[^\s:|]+:\S*?\s*)?"
    r"[#$%]\s+[^\s|+=-]"
)


def is_noise(line: str) -> bool:
    return any(pattern.match(line) for pattern in (_DRIVER_LOG, _TRAILER, _PROMPT))


def split_noise(text: str) -> tuple[str, tuple[str, ...]]:
    """Separate known noise lines from the output; returns (clean text, noise lines as printed)."""
    kept: list[str] = []
    noise: list[str] = []
    # line ends kept, so the clean text is the original minus whole lines, byte for byte
    for line in text.splitlines(keepends=True):
        (noise if is_noise(line) else kept).append(line)
    return "".join(kept), tuple(line.rstrip() for line in noise)


def blank_noise(text: str) -> tuple[str, tuple[str, ...]]:
    """Like `split_noise`, but each noise line leaves an empty line behind, so that the line
    numbers a parser gives in its warnings are the line numbers of `text`."""
    kept: list[str] = []
    noise: list[str] = []
    for line in text.splitlines():
        if is_noise(line):
            noise.append(line.rstrip())
            kept.append("")
        else:
            kept.append(line)
    return "\n".join(kept), tuple(noise)
