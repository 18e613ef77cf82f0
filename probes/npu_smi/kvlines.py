"""The lines of `npu-smi info -t <type>` outputs: `key : value`, process lines, continuations.

    \tHBM Usage Rate(%)              : 0
    \tChip ID                        : 0

npu-smi prints `\\t%-30s : value` (`-t ecc`: 40-char keys). Copies in docs and issues turn the
TAB into spaces or drop it, so a line is classified by its own text, never by column offsets.
Shared by the key/value parser (`probes.npu_smi.kv`) and the proc-mem parser.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from probes.npu_smi.model import Value
from probes.npu_smi.model_kv import Process
from probes.npu_smi.text import MAX_DIGITS, is_implausible

# Values that look numeric but are identifiers: an all-digit serial number or error code must
# not lose leading zeros, and a chip name `310` is a name.
_TEXT_KEYS = frozenset(
    {
        "error_code",
        "error_information",
        "vdie_id",
        "ndie_id",
        "die_id",
        "serial_number",
        "model",
        "manufacturer",
        "compatibility",
        "pcie_bus_info",
        "health_status",
        "health",
    }
)
_TEXT_KEY_SUFFIXES = ("_name", "_version")

_UNIT_WORDS = {"%": "percent"}

# A label as npu-smi prints it: words, units in parentheses, `Phy-ID`, `Real-time`.
_LABEL = re.compile(r"^[A-Za-z(][A-Za-z0-9 ()%/._+-]*$")
_PROC_ID_MARK = re.compile(r"\s*Process id\b", re.IGNORECASE)
_PROC_NAME_MARK = re.compile(r"Process name", re.IGNORECASE)
_PROC_MEMORY_MARK = re.compile(r"Process memory\(MB\)", re.IGNORECASE)
_NO_PROCESS = re.compile(r"^\s*No process in device\.?\s*$", re.IGNORECASE)
# Bounded (probes.npu_smi.text.MAX_DIGITS) so that a pasted wall of digits cannot reach
# int(), whose digit limit raises; a longer number is implausible: null and a warning.
_INT = re.compile(rf"^[+-]?\d{{1,{MAX_DIGITS}}}$")
_FLOAT = re.compile(rf"^[+-]?\d{{1,{MAX_DIGITS}}}\.\d{{1,{MAX_DIGITS}}}$")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalise_key(label: str) -> str:
    """`HBM Usage Rate(%)` -> `hbm_usage_rate_percent`: snake_case, unit as a suffix."""
    text, unit = _split_unit(label.strip())
    for symbol, word in _UNIT_WORDS.items():
        unit = unit.replace(symbol, f" {word} ")
    # `curFreq` and `PCIeBusInfo` (older drivers) split like `cur Freq` / `PCIe Bus Info`.
    words = _CAMEL.sub(" ", f"{text} {unit}").lower()
    return _NON_ALNUM.sub("_", words).strip("_")


def _split_unit(label: str) -> tuple[str, str]:
    """`Temperature (C)` -> (`Temperature`, `C`); string ops keep long hostile lines linear."""
    if not label.endswith(")"):
        return label, ""
    start = label.rfind("(")
    if start < 0 or ")" in label[start + 1 : -1]:
        return label, ""
    return label[:start], label[start + 1 : -1].strip()


def is_text_key(key: str) -> bool:
    return key in _TEXT_KEYS or key.endswith(_TEXT_KEY_SUFFIXES)


def parse_value(raw: str, key: str = "") -> Value:
    """A number when the whole value is one, else the stripped text (hex, versions, `NA`);
    None for a number longer than any npu-smi prints (the caller warns)."""
    text = raw.strip()
    if is_text_key(key):
        return text
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return None if is_implausible(text) else text


def as_int(value: Value) -> int | None:
    return value if isinstance(value, int) else None


@dataclass(frozen=True)
class Line:
    """One classified input line. `kind`: kv, cont, proc, noproc, other."""

    line_no: int
    kind: str
    text: str
    key: str = ""  # normalised, for kv
    label: str = ""  # as printed, for kv
    value: str = ""  # stripped, for kv and cont
    pid: str = ""
    name: str = ""
    memory: str = ""


def _after_colon(segment: str) -> str:
    text = segment.strip()
    return text[1:].strip() if text.startswith(":") else text


def split_process(line: str) -> tuple[str, str, str] | None:
    """(pid, name, memory) of `Process id:<pid> Process name:<comm> Process memory(MB):<n>`.

    Markers are searched, not matched with one pattern: the name is padded and may be blank,
    and a pattern with lazy groups backtracks badly on long hostile lines.
    """
    head = _PROC_ID_MARK.match(line)
    if head is None:
        return None
    name_mark = _PROC_NAME_MARK.search(line, head.end())
    memory_mark = _PROC_MEMORY_MARK.search(line, name_mark.end() if name_mark else head.end())
    pid_end = name_mark.start() if name_mark else memory_mark.start() if memory_mark else None
    pid = _after_colon(line[head.end() : pid_end])
    name = ""
    if name_mark is not None:
        name = _after_colon(line[name_mark.end() : memory_mark.start() if memory_mark else None])
    memory = _after_colon(line[memory_mark.end() :]) if memory_mark else ""
    return pid, name, memory


def is_no_process(line: str) -> bool:
    return _NO_PROCESS.match(line) is not None


def classify(line_no: int, line: str) -> Line | None:
    """None for a blank line: blank lines carry no structure once copies have lost them."""
    if not line.strip():
        return None
    process = split_process(line)
    if process is not None:
        pid, name, memory = process
        return Line(line_no, "proc", line, pid=pid, name=name, memory=memory)
    if is_no_process(line):
        return Line(line_no, "noproc", line)
    colon = line.find(":")
    # npu-smi always prints ` : `; a colon glued to text is an address or a time (`c1:00.0`).
    after = line[colon + 1 : colon + 2]
    if colon < 0 or (after and not after.isspace()):
        return Line(line_no, "other", line)
    # The first colon separates key and value: keys never hold one, values may (bus ids).
    label, value = line[:colon].strip(), line[colon + 1 :].strip()
    if not label:
        # `\t<30 spaces> : text`: a continuation of the previous value (health, #032).
        return Line(line_no, "cont", line, value=value)
    if not _LABEL.match(label) or label.lower() == "usage":
        # `Usage: npu-smi info <...>` follows npu-smi's own errors (#031); it is not a field.
        return Line(line_no, "other", line)
    return Line(line_no, "kv", line, key=normalise_key(label), label=label, value=value)


def classify_all(text: str) -> list[Line]:
    lines = (classify(n, line) for n, line in enumerate(text.splitlines(), start=1))
    return [line for line in lines if line is not None]


def warning(line: Line, reason: str) -> str:
    return f"line {line.line_no}: {reason}: {line.text.strip()!r}"


def implausible_warning(line: Line) -> str | None:
    """The warning for a `key : value` line whose value is an implausibly long number."""
    if line.kind != "kv" or is_text_key(line.key) or not is_implausible(line.value):
        return None
    digits = sum(c.isdigit() for c in line.value)
    return f"line {line.line_no}: {line.label} value of {digits} digits is implausible: null"


def process_of(line: Line) -> Process | None:
    if not _INT.match(line.pid):
        return None
    memory = int(line.memory) if _INT.match(line.memory) else None
    return Process(pid=int(line.pid), name=line.name, memory_mb=memory)


def first_text(lines: Sequence[Line]) -> str:
    return lines[0].text.strip()[:120] if lines else ""
