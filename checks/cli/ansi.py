"""Styled, wrapped lines for a terminal, without rich.

The run report is the doctor's hot path, and importing rich's console costs more than the whole
run. Colour follows the usual conventions: a TTY gets colour unless NO_COLOR is set (no-color.org)
or TERM is dumb; FORCE_COLOR asks for it anyway. Only a TTY is wrapped, at its width.

Every span is text from outside as far as this writer knows (a host name, a recorded error, an
npu-smi cell): it passes `probes.textsafe.one_line` here, the one way into the terminal, so an
escape sequence is shown, never obeyed, and a newline cannot start a forged line. The only
escape sequences written are this module's own colours.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TextIO

from probes.textsafe import one_line

_CODES: Mapping[str, str] = {
    "bold": "1", "dim": "2", "underline": "4",
    "red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36",
}

Span = tuple[str, str]  # (text, style words such as "bold red"; "" for none)


def wants_color(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    return _is_tty(stream) and env.get("TERM", "") not in ("dumb", "unknown")


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


def styled(text: str, style: str) -> str:
    codes = ";".join(_CODES[word] for word in style.split() if word in _CODES)
    return f"\x1b[{codes}m{text}\x1b[0m" if codes and text else text


class Writer:
    """Writes lines made of styled spans; on a TTY, wraps long ones with a hanging indent."""

    def __init__(self, stream: TextIO, color: bool | None = None,
                 width: int | None = None) -> None:
        self.stream = stream
        self.color = wants_color(stream) if color is None else color
        self.width = width if width is not None else _tty_width(stream)

    def line(self, *spans: Span, hang: int | None = None) -> None:
        """One logical line; continuation rows start `hang` columns in (default: where the
        last span starts, so a summary or a detail wraps under itself)."""
        spans = tuple((one_line(t), style) for t, style in spans)
        text = "".join(t for t, _ in spans)
        if hang is None:
            hang = len(text) - len(spans[-1][0]) if spans else 0
        hang = min(hang, self.width // 2)
        cuts = _wrap(text, self.width, hang) if self.width else [(0, len(text))]
        styles = [style for t, style in spans for _ in t]
        rows = []
        for n, (lo, hi) in enumerate(cuts):
            row = self._paint(text, styles, lo, hi)
            rows.append(row if n == 0 else " " * hang + row)
        self.stream.write("\n".join(rows) + "\n")

    def _paint(self, text: str, styles: list[str], lo: int, hi: int) -> str:
        if not self.color:
            return text[lo:hi]
        out, start = [], lo
        for pos in range(lo + 1, hi + 1):
            if pos == hi or styles[pos] != styles[start]:
                out.append(styled(text[start:pos], styles[start]))
                start = pos
        return "".join(out)


def _wrap(text: str, width: int, hang: int) -> list[tuple[int, int]]:
    """Greedy word wrap as (start, end) ranges of `text`; the spaces at a break are dropped;
    a word longer than a row is cut."""
    ranges: list[tuple[int, int]] = []
    start, room = 0, width
    while len(text) - start > room:
        cut = text.rfind(" ", start, start + room + 1)
        end = cut if cut > start else start + room
        while end > start and text[end - 1] == " ":
            end -= 1
        if end == start:
            end = start + room
        ranges.append((start, end))
        start = end
        while start < len(text) and text[start] == " ":
            start += 1
        room = max(1, width - hang)
    ranges.append((start, len(text)))
    return ranges


def _tty_width(stream: TextIO) -> int:
    if not _is_tty(stream):
        return 0
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80
