"""The error messages npu-smi prints instead of its output (tests/corpus/npu-smi/FORMATS.md §4)."""

from __future__ import annotations

import re

from probes.npu_smi.model import NpuSmiError
from probes.npu_smi.noise import is_noise
from probes.npu_smi.text import MAX_DIGITS, is_border, is_box_row

_RET_CODE = re.compile(rf"\bret(?:\s+is|\s*=)?\s*(-?\d{{1,{MAX_DIGITS}}})\b")
# npu-smi's messages are short and start their line: the kind is read from the line's start
_MAX_MESSAGE_CHARS = 512

# (pattern, kind); the first match decides; order puts specific messages first. Every pattern
# is matched from the line start and reaches the first occurrence of its leading word without
# backtracking over the others (`(?:(?!word).)*word`), so a line full of `dcmi` stays linear.
_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r".*?(?:because the device is used|ret is -8020\b)", re.I), "device_in_use"),
    (re.compile(r"(?:(?!\bdcmi\b).)*\bdcmi\b.*?\binitiali[sz]e", re.I), "dcmi_init_failed"),
    (re.compile(r"(?:(?!\bdcmi\b).)*\bdcmi\b(?:(?!\bfailed\b).)*\bfailed\b.*?\bret\b", re.I),
     "dcmi_error"),
    (re.compile(r"Invalid (?:card|chip|device) id\b|Error parameter of\b", re.I), "invalid_card"),
    (re.compile(r".*?(?:permission denied|operation not permitted|must be root)", re.I),
     "permission_denied"),
    (re.compile(r"There is no NPU (?:card|chip)\b", re.I), "no_npu"),
    (re.compile(r".*?error while loading shared libraries", re.I), "driver_library_missing"),
    (re.compile(r".*?npu-smi:?\s*(?:command )?not found"
                r"|(?:(?!npu-smi).)*npu-smi.*No such file or directory", re.I),
     "command_not_found"),
    # "dose" is how the tool spells it
    (re.compile(r".*?\bdo(?:es|se) not support querying", re.I), "unsupported"),
)

_USAGE = re.compile(r"^\s*Usage:\s*npu-smi\b")
_KV_LINE = re.compile(r"^\s*\S.*?\s:(?:\s|$)")


def error_kind(line: str) -> str | None:
    """The kind of error a single line announces, or None."""
    stripped = line.strip()[:_MAX_MESSAGE_CHARS]
    for pattern, kind in _ERRORS:
        if pattern.match(stripped):
            return kind
    return None


def _ret_code(line: str) -> int | None:
    match = _RET_CODE.search(line)
    return int(match.group(1)) if match else None


def _is_candidate(line: str) -> bool:
    """A line that may carry an error: not noise, not a table line (a process name says
    anything), not a `key : value` line (an `Error Information` value says anything)."""
    return not (is_noise(line) or is_box_row(line) or is_border(line) or _KV_LINE.match(line))


def detect_error(text: str) -> NpuSmiError | None:
    """The error npu-smi printed instead of its output, or None when the text holds none.

    Every other non-blank line of `text` is kept as a warning with its line number: a paste
    often goes on after the error (the next command and its output)."""
    numbered = [(no, line.strip()) for no, line in enumerate(text.splitlines(), start=1)
                if line.strip()]
    kinds = [(no, line, error_kind(line) if _is_candidate(line) else None)
             for no, line in numbered]
    found = [(line, kind) for _, line, kind in kinds if kind is not None]
    if not found:
        return None
    usage = {no for no, line, kind in kinds if kind is None and _USAGE.match(line)}
    message_lines = [line for line, _ in found] + [line for no, line in numbered if no in usage]
    others = [f"line {no}: not part of the error message: {line}" for no, line, kind in kinds
              if kind is None and no not in usage and not is_noise(line)]
    codes = [code for code in (_ret_code(line) for line, _ in found) if code is not None]
    return NpuSmiError(code=codes[0] if codes else None, kind=found[0][1],
                       message="\n".join(message_lines), warnings=tuple(others))
