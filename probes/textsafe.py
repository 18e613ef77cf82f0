"""The one place where text from outside is made safe to show.

Host names, process names, package versions, environment values, npu-smi cells, tensor
names, bundle member names and recorded errors are written by others. Before any of it
reaches a terminal, a TUI, an error message or an XML report it passes through here, so a
string can be shown but never obeyed: control characters become visible escapes (an ESC
cannot clear a screen or set a window title), bidirectional overrides cannot reorder a line,
and a one-line field cannot forge a second line.

Markup (rich, Textual) is a property of the renderer, not of the text: renderers that parse
markup must be given `Text` objects or escaped strings; see `checks/terminal.py` and the
console widgets.
"""

from __future__ import annotations

import functools
import re

# C0 controls except tab and newline, DEL, and C1 controls (ECMA-48: ESC [, CSI, OSC, ...)
_CONTROLS = [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]
# Unicode format characters that reorder or hide text (Trojan Source, CVE-2021-42574)
_FORMATS = [0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A),
            0x2028, 0x2029, 0xFEFF]


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_VISIBLE = {code: _escape(code) for code in (*_CONTROLS, *_FORMATS)}
_ONE_LINE = {**_VISIBLE, 0x0A: "\\n", 0x09: "\\t"}
# XML 1.0 §2.2 Char: tab, LF, CR, U+0020-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF
_XML_FORBIDDEN = "[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


@functools.cache
def _regex(pattern: str) -> re.Pattern[str]:
    """Compiled on first use: the XML class takes milliseconds to compile, and most runs
    write no XML."""
    return re.compile(pattern)


def visible(text: str) -> str:
    """`text` with every control or reordering character shown as an escape (`\\x1b`);
    tab and newline are kept."""
    return text.translate(_VISIBLE)


def one_line(text: str) -> str:
    """`visible(text)` that also shows newline and tab as `\\n` and `\\t`: a value that
    must stay on its own line (a host name, an error, a table cell)."""
    return text.translate(_ONE_LINE)


_JSON_UNSAFE = "[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069\ufeff]"


def json_text(dumped: str) -> str:
    """A JSON document (as `json.dumps` wrote it, with `ensure_ascii=False`) with DEL, the C1
    controls and the reordering characters written as `\\uXXXX`: the same JSON value, but
    nothing a terminal obeys when the document is printed (json.dumps already escapes C0)."""
    return _regex(_JSON_UNSAFE).sub(lambda m: f"\\u{ord(m.group(0)):04x}", dumped)


def xml_text(text: str) -> str:
    """`visible(text)` without the characters XML 1.0 forbids (a JUnit report stays
    well-formed whatever a recorded error contained)."""
    return _regex(_XML_FORBIDDEN).sub("", visible(text))


# A value read from a file or a recording is shown on one line of a report; a driver version
# of megabytes is still one line of this budget, in every output.
LINE_BUDGET_CHARS = 400


def cut(text: str, max_chars: int = LINE_BUDGET_CHARS) -> str:
    """`text` when it fits in `max_chars`, else its start and how much was left out."""
    if len(text) <= max_chars:
        return text
    keep = max(0, max_chars - 32)
    return f"{text[:keep]}…(+{len(text) - keep:,} characters)"


# A report's budget: each summary, remedy or evidence line, and the number of evidence lines.
REPORT_VALUE_CHARS = 2000
REPORT_MAX_LINES = 400


def cut_lines(lines: tuple[str, ...], max_lines: int = REPORT_MAX_LINES,
              max_chars: int = REPORT_VALUE_CHARS) -> tuple[str, ...]:
    """Each line cut to `max_chars`, and at most `max_lines` of them (the last one says how
    many were left out)."""
    kept = tuple(cut(line, max_chars) for line in lines[:max_lines])
    if len(lines) > max_lines:
        kept = (*kept[:-1], f"…(+{len(lines) - max_lines + 1:,} more lines)")
    return kept
