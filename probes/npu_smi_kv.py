"""Parsers of the key/value outputs of `npu-smi info -t <type>` (FORMATS.md §1.7, §0 point 10).

    \tHBM Usage Rate(%)              : 0
    \tChip ID                        : 0

npu-smi prints `\\t%-30s : value` (`-t ecc`: 40-char keys). Copies in docs and issues turn the
TAB into spaces or drop it and lose blank lines, so block boundaries are taken from the keys
(`Chip ID`, `Chip Name : mcu`, a repeated key), never from blank lines or column offsets.

Covered: board, usages, health, common, memory, ecc, temp, power, pcie-err (`parse_kv`),
proc-mem (`parse_proc_mem`, and a per-chip summary through `parse_kv`) and the topo matrix
(`parse_topo`). Values stay as printed where a number would lose meaning (hex ids, versions,
serial numbers, error codes); `NA` is kept as the string "NA" for the consumer to judge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

from probes.errors import ParseError

SCHEMA = "ascend-npu/1"

Value: TypeAlias = int | float | str

KV_KINDS = (
    "usages",
    "health",
    "board",
    "common",
    "memory",
    "ecc",
    "proc-mem",
    "temp",
    "power",
    "pcie-err",
    "kv",
)

# Kinds whose `Chip ID : n` line closes the chip's fields; every other kind opens with it.
_CHIP_ID_AFTER = frozenset({"usages", "ecc", "proc-mem"})

# Card-level lines: they describe the `-i` card, not a chip block.
_NPU_ID_KEY = "npu_id"
_CHIP_COUNT_KEY = "chip_count"
_CHIP_ID_KEY = "chip_id"
_CHIP_NAME_KEY = "chip_name"
_MCU_NAMES = frozenset({"mcu"})

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
# Bounded so that a pasted wall of digits cannot hit int()'s digit limit.
_INT = re.compile(r"^[+-]?\d{1,30}$")
_FLOAT = re.compile(r"^[+-]?\d{1,30}\.\d{1,30}$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


# ---------------------------------------------------------------------------------------------
# facts


@dataclass(frozen=True)
class KvBlock:
    """One chip's fields (or the card's, for flat outputs). `name` marks the MCU block."""

    chip_id: int | None
    name: str | None
    fields: Mapping[str, Value]


@dataclass(frozen=True)
class KvOutput:
    kind: str  # one of KV_KINDS
    npu_id: int | None  # the `NPU ID` card-level line
    blocks: tuple[KvBlock, ...]
    warnings: tuple[str, ...]  # lines not understood, with their line numbers
    chip_count: int | None = None  # the `Chip Count` card-level line


@dataclass(frozen=True)
class HealthReport:
    status: str | None  # `OK`, `Warning`, `Alarm`, `Critical`, ... as printed
    error_codes: tuple[str, ...]  # 8-hex codes; empty when `NA`
    error_information: tuple[str, ...]  # one text per line; empty when `NA`


@dataclass(frozen=True)
class Process:
    pid: int
    name: str  # kernel comm, may be "" (npu-smi prints a blank name on A3)
    memory_mb: int | None


@dataclass(frozen=True)
class ChipProcesses:
    chip_id: int | None  # None when the output was cut before the chip's `Chip ID` line
    processes: tuple[Process, ...]


@dataclass(frozen=True)
class ProcMem:
    npu_id: int | None
    chips: tuple[ChipProcesses, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Topology:
    devices: tuple[str, ...]  # header labels in order: `NPU0`.. or `Phy-ID0`.. (A3)
    links: Mapping[tuple[str, str], str]  # (row, column) -> `HCCS`, `SYS`, `X` (self), ...
    cpu_affinity: Mapping[str, str | None]  # `144-167`; None without the column (A3 on ARM)
    legend: Mapping[str, str]  # code -> explanation
    warnings: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# keys and values


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


def parse_value(raw: str, key: str = "") -> Value:
    """A number when the whole value is one, else the stripped text (hex, versions, `NA`)."""
    text = raw.strip()
    if key in _TEXT_KEYS or key.endswith(_TEXT_KEY_SUFFIXES):
        return text
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


def _as_int(value: Value) -> int | None:
    return value if isinstance(value, int) else None


# ---------------------------------------------------------------------------------------------
# lines


@dataclass(frozen=True)
class _Line:
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


def _split_process(line: str) -> tuple[str, str, str] | None:
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


def _classify(line_no: int, line: str) -> _Line | None:
    """None for a blank line: blank lines carry no structure once copies have lost them."""
    if not line.strip():
        return None
    process = _split_process(line)
    if process is not None:
        pid, name, memory = process
        return _Line(line_no, "proc", line, pid=pid, name=name, memory=memory)
    if _NO_PROCESS.match(line):
        return _Line(line_no, "noproc", line)
    colon = line.find(":")
    # npu-smi always prints ` : `; a colon glued to text is an address or a time (`c1:00.0`).
    after = line[colon + 1 : colon + 2]
    if colon < 0 or (after and not after.isspace()):
        return _Line(line_no, "other", line)
    # The first colon separates key and value: keys never hold one, values may (bus ids).
    label, value = line[:colon].strip(), line[colon + 1 :].strip()
    if not label:
        # `\t<30 spaces> : text`: a continuation of the previous value (health, #032).
        return _Line(line_no, "cont", line, value=value)
    if not _LABEL.match(label) or label.lower() == "usage":
        # `Usage: npu-smi info <...>` follows npu-smi's own errors (#031); it is not a field.
        return _Line(line_no, "other", line)
    return _Line(line_no, "kv", line, key=normalise_key(label), label=label, value=value)


def _classify_all(text: str) -> list[_Line]:
    lines = (_classify(n, line) for n, line in enumerate(text.splitlines(), start=1))
    return [line for line in lines if line is not None]


def _warn(line: _Line, reason: str) -> str:
    return f"line {line.line_no}: {reason}: {line.text.strip()!r}"


# ---------------------------------------------------------------------------------------------
# kind


def guess_kv_kind(fields: Iterable[str]) -> str:
    """The `-t` kind from the keys present, in order of appearance (labels or normalised keys).

    Pass `Process id` for proc-mem lines. Returns "kv" when no kind fits.
    """
    keys = [normalise_key(key) for key in fields]
    data = [key for key in keys if key not in (_NPU_ID_KEY, _CHIP_COUNT_KEY, _CHIP_ID_KEY)]
    present = set(keys)

    def any_key(predicate: Any) -> bool:
        return any(predicate(key) for key in data)

    if "process_id" in present or "no_process_in_device" in present:
        return "proc-mem"
    if present & {"health_status", "health", "error_code", "error_information"}:
        return "health"
    if any_key(lambda k: k.endswith(("bit_error_count", "err_cnt", "isolated_pages_count"))):
        return "ecc"
    if any_key(lambda k: k.endswith("error_count") or k == "retry_count"):
        return "pcie-err"
    board_keys = {"software_version", "pcb_id", "bom_id", "chip_version", "board_id"}
    if present & board_keys or any_key(lambda k: k.startswith(("pci_", "subsystem_"))):
        return "board"
    if any_key(lambda k: k.startswith(("aicore_freq", "aicore_cur_freq", "aicore_count"))):
        return "common"
    if any_key(lambda k: k.endswith("clock_speed_mhz") or k == "capacity_mb"):
        return "memory"
    if present & {"hbm_manufacturer_id", "hbm_temperature_c"}:
        return "memory"
    if any_key(lambda k: k.endswith("usage_rate_percent")):
        return _usages_or_common(keys)
    if _CHIP_NAME_KEY in present and any_key(lambda k: k.endswith(("_c", "_w"))):
        return "common"  # only the MCU block of `-t common` survived
    if data and all(key.endswith("_c") for key in data):
        return "temp"
    if data and all(key.endswith("_w") for key in data):
        return "power"
    return "kv"


def _usages_or_common(keys: Sequence[str]) -> str:
    """Both print usage rates; `-t usages` puts `Chip ID` after them, `-t common` before."""
    if _CHIP_ID_KEY not in keys:
        return "usages"
    first_rate = next(i for i, key in enumerate(keys) if key.endswith("usage_rate_percent"))
    return "common" if keys.index(_CHIP_ID_KEY) < first_rate else "usages"


def _canonical_kind(kind: str) -> str:
    canonical = kind.strip().lower().replace("_", "-")
    if canonical not in KV_KINDS:
        hint = " (use parse_topo)" if canonical == "topo" else ""
        raise ValueError(f"unknown npu-smi key/value kind {kind!r}{hint}; known: {KV_KINDS}")
    return canonical


# ---------------------------------------------------------------------------------------------
# parse_kv


@dataclass
class _BlockBuilder:
    """The block being filled (mutable scratch of one parse_kv call)."""

    chip_id: int | None = None
    name: str | None = None
    fields: dict[str, Value] = field(default_factory=dict)
    has_chip_line: bool = False
    last_key: str | None = None
    processes: list[Process] = field(default_factory=list)
    saw_no_process: bool = False

    @property
    def has_content(self) -> bool:
        return bool(self.fields or self.processes or self.saw_no_process)

    @property
    def is_empty(self) -> bool:
        return not (self.has_content or self.has_chip_line or self.name)

    def build(self, kind: str) -> KvBlock:
        fields = dict(self.fields)
        if kind == "proc-mem":
            fields["process_count"] = len(self.processes)
            memory = [p.memory_mb for p in self.processes]
            if all(m is not None for m in memory):
                fields["process_memory_mb"] = sum(m for m in memory if m is not None)
        return KvBlock(self.chip_id, self.name, MappingProxyType(fields))


@dataclass
class _KvState:
    kind: str
    chip_id_after: bool
    current: _BlockBuilder = field(default_factory=_BlockBuilder)
    blocks: list[KvBlock] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    npu_id: int | None = None
    chip_count: int | None = None
    saw_npu_id: bool = False

    def close(self) -> None:
        if not self.current.is_empty:
            self.blocks.append(self.current.build(self.kind))
        self.current = _BlockBuilder()


def _chip_id_after(kind: str, lines: Sequence[_Line]) -> bool:
    if kind != "kv":
        return kind in _CHIP_ID_AFTER
    # Unknown kind: follow the text, as `-t usages` and `-t common` differ only in this.
    first_data = next((ln.line_no for ln in lines if _is_data(ln)), None)
    first_chip = next((ln.line_no for ln in lines if ln.key == _CHIP_ID_KEY), None)
    return first_data is not None and first_chip is not None and first_data < first_chip


def _is_data(line: _Line) -> bool:
    return line.kind == "kv" and line.key not in (_NPU_ID_KEY, _CHIP_COUNT_KEY, _CHIP_ID_KEY)


def parse_kv(text: str, kind: str | None = None) -> KvOutput:
    """Parse `npu-smi info -t <kind>` key/value output; `kind` None guesses it from the keys."""
    given = None if kind is None else _canonical_kind(kind)
    lines = _classify_all(text)
    if not any(line.kind in ("kv", "proc", "noproc") for line in lines):
        raise ParseError(f"npu-smi info -t {given or '<type>'}", _no_kv_reason(lines))
    if given is None:
        guess_keys = [line.key or _PSEUDO_KEYS.get(line.kind, "") for line in lines]
        resolved = guess_kv_kind(key for key in guess_keys if key)
    else:
        resolved = given
    state = _KvState(resolved, _chip_id_after(resolved, lines))
    for line in lines:
        _feed(state, line)
    state.close()
    return KvOutput(
        kind=resolved,
        npu_id=state.npu_id,
        blocks=tuple(state.blocks),
        warnings=tuple(state.warnings),
        chip_count=state.chip_count,
    )


def _no_kv_reason(lines: Sequence[_Line]) -> str:
    if not lines:
        return "empty output, no `key : value` line"
    return f"no `key : value` line; it starts with {lines[0].text.strip()[:120]!r}"


def _no_proc_reason(lines: Sequence[_Line]) -> str:
    if not lines:
        return "empty output, no process line"
    first = lines[0].text.strip()[:120]
    return f"no process line and no `No process in device.`; it starts with {first!r}"


_PSEUDO_KEYS = {"proc": "process_id", "noproc": "no_process_in_device"}


def _feed(state: _KvState, line: _Line) -> None:
    if line.kind == "kv":
        _feed_kv(state, line)
    elif line.kind == "cont":
        _feed_continuation(state, line)
    elif line.kind == "proc":
        _feed_process(state, line)
    elif line.kind == "noproc":
        state.current.saw_no_process = True
    else:
        state.warnings.append(_warn(line, "not understood"))


def _feed_kv(state: _KvState, line: _Line) -> None:
    value = parse_value(line.value, line.key)
    if line.key == _NPU_ID_KEY:
        _feed_npu_id(state, line, value)
    elif line.key == _CHIP_COUNT_KEY:
        state.chip_count = _as_int(value)
    elif line.key == _CHIP_ID_KEY:
        _feed_chip_id(state, line, value)
    elif line.key == _CHIP_NAME_KEY and line.value.lower() in _MCU_NAMES:
        state.close()
        state.current.name = "mcu"
    else:
        if line.key in state.current.fields:
            state.close()  # a repeated key: the copy lost the line that separated two blocks
        state.current.fields[line.key] = value
        state.current.last_key = line.key


def _feed_npu_id(state: _KvState, line: _Line, value: Value) -> None:
    npu_id = _as_int(value)
    if state.saw_npu_id and npu_id != state.npu_id:
        reason = f"a second card in one output; kept NPU ID {state.npu_id}"
        state.warnings.append(_warn(line, reason))
        state.close()
        return
    if npu_id is None:
        state.warnings.append(_warn(line, "NPU ID is not an integer"))
    state.npu_id = npu_id
    state.saw_npu_id = True


def _feed_chip_id(state: _KvState, line: _Line, value: Value) -> None:
    chip_id = _as_int(value)
    if chip_id is None:
        state.warnings.append(_warn(line, "Chip ID is not an integer"))
    current = state.current
    if state.chip_id_after:
        # Closes the chip even when its fields were cut off: they belong to no other chip.
        if current.has_chip_line:
            state.close()
        state.current.chip_id, state.current.has_chip_line = chip_id, True
        state.close()
        return
    if not current.is_empty:
        state.close()
    state.current.chip_id, state.current.has_chip_line = chip_id, True


def _feed_continuation(state: _KvState, line: _Line) -> None:
    key = state.current.last_key
    if key is None:
        state.warnings.append(_warn(line, "continuation line without a key before it"))
        return
    if line.value:
        state.current.fields[key] = f"{state.current.fields[key]}\n{line.value}"


def _feed_process(state: _KvState, line: _Line) -> None:
    process = _process_of(line)
    if process is None:
        state.warnings.append(_warn(line, "process id is not an integer"))
    else:
        state.current.processes.append(process)


def _process_of(line: _Line) -> Process | None:
    if not _INT.match(line.pid):
        return None
    memory = int(line.memory) if _INT.match(line.memory) else None
    return Process(pid=int(line.pid), name=line.name, memory_mb=memory)


# ---------------------------------------------------------------------------------------------
# health


def health_report(block: KvBlock | KvOutput) -> HealthReport:
    """The typed view of `-t health`: status, error codes, one text per error."""
    fields = _health_fields(block)
    status = fields.get("health_status", fields.get("health"))
    codes = str(fields.get("error_code", "NA")).split()
    info = str(fields.get("error_information", "NA")).split("\n")
    return HealthReport(
        status=None if status is None else str(status),
        error_codes=tuple(code for code in codes if code.upper() != "NA"),
        error_information=tuple(t.strip() for t in info if t.strip() and t.strip() != "NA"),
    )


def _health_fields(block: KvBlock | KvOutput) -> Mapping[str, Value]:
    if isinstance(block, KvBlock):
        return block.fields
    health_keys = ("health_status", "health", "error_code")
    for candidate in block.blocks:
        if any(key in candidate.fields for key in health_keys):
            return candidate.fields
    return {}


# ---------------------------------------------------------------------------------------------
# proc-mem


def parse_proc_mem(text: str) -> ProcMem:
    """`npu-smi info -t proc-mem -i N`: per chip, the processes and their device memory."""
    lines = _classify_all(text)
    # Every chip prints a process line or `No process in device.`; without one this is
    # some other output (its `Chip ID` lines alone would pass for empty chips).
    if not any(line.kind in ("proc", "noproc") for line in lines):
        raise ParseError("npu-smi info -t proc-mem", _no_proc_reason(lines))
    chips: list[ChipProcesses] = []
    processes: list[Process] = []
    pending = False  # lines seen since the last `Chip ID`: a chip without its id line
    warnings: list[str] = []
    npu_id: int | None = None
    for line in lines:
        if line.kind == "proc":
            process = _process_of(line)
            if process is None:
                warnings.append(_warn(line, "process id is not an integer"))
            else:
                processes.append(process)
            pending = True
        elif line.kind == "noproc":
            pending = True
        elif line.kind == "kv" and line.key == _CHIP_ID_KEY:
            chips.append(ChipProcesses(_as_int(parse_value(line.value)), tuple(processes)))
            processes, pending = [], False
        elif line.kind == "kv" and line.key == _NPU_ID_KEY:
            npu_id = _as_int(parse_value(line.value))
        elif line.kind == "kv" and line.key == _CHIP_COUNT_KEY:
            continue
        else:
            # `Get pid name failed.` among others: kept for the reader, never dropped.
            warnings.append(_warn(line, "not a process line"))
    if pending:
        chips.append(ChipProcesses(None, tuple(processes)))
    return ProcMem(npu_id=npu_id, chips=tuple(chips), warnings=tuple(warnings))


# ---------------------------------------------------------------------------------------------
# topo


_DEVICE_LABEL = re.compile(r"^[A-Za-z][A-Za-z_-]*\d+$")
_AFFINITY_HEADER = re.compile(r"\bCPU\s+Affinity\b", re.IGNORECASE)
_LEGEND_TITLE = re.compile(r"^\s*Legend\s*:?\s*$", re.IGNORECASE)
_LEGEND_LINE = re.compile(r"^\s*(?P<code>[A-Za-z_][A-Za-z0-9_-]*)\s*=(?P<text>.*)$")


def _topo_header(line: str) -> tuple[tuple[str, ...], bool] | None:
    """(device labels, has affinity column) when the line is the matrix header."""
    has_affinity = _AFFINITY_HEADER.search(line) is not None
    tokens = _AFFINITY_HEADER.sub(" ", line).split()
    if tokens and all(_DEVICE_LABEL.match(token) for token in tokens):
        return tuple(tokens), has_affinity
    return None


def parse_topo(text: str) -> Topology:
    """`npu-smi info -t topo`: the link matrix, CPU affinity per device and the legend."""
    devices: tuple[str, ...] = ()
    has_affinity = False
    links: dict[tuple[str, str], str] = {}
    affinity: dict[str, str | None] = {}
    legend: dict[str, str] = {}
    warnings: list[str] = []
    seen_rows: set[str] = set()
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or _LEGEND_TITLE.match(raw):
            continue
        tokens = raw.split()
        if devices and tokens[0] in devices:
            if tokens[0] in seen_rows:
                warnings.append(f"line {line_no}: repeated row, kept the first: {raw.strip()!r}")
                continue
            seen_rows.add(tokens[0])
            row_warning = _topo_row(tokens, devices, has_affinity, links, affinity)
            if row_warning:
                warnings.append(f"line {line_no}: {row_warning}: {raw.strip()!r}")
            continue
        header = None if devices else _topo_header(raw)
        if header is not None:
            devices, has_affinity = header
            affinity = dict.fromkeys(devices)
            continue
        legend_line = _LEGEND_LINE.match(raw)
        if legend_line is not None:
            legend[legend_line.group("code")] = legend_line.group("text").strip()
            continue
        warnings.append(f"line {line_no}: not understood: {raw.strip()!r}")
    if not devices:
        first = next((w for w in warnings), "empty output")
        raise ParseError("npu-smi info -t topo", f"no matrix header (NPU0 NPU1 ...); {first}")
    return Topology(
        devices=devices,
        links=MappingProxyType(links),
        cpu_affinity=MappingProxyType(affinity),
        legend=MappingProxyType(legend),
        warnings=tuple(warnings),
    )


def _topo_row(
    tokens: Sequence[str],
    devices: Sequence[str],
    has_affinity: bool,
    links: dict[tuple[str, str], str],
    affinity: dict[str, str | None],
) -> str | None:
    """Record one matrix row; returns a warning when the row is cut or has extra cells."""
    row, rest = tokens[0], tokens[1:]
    cells, extra = rest[: len(devices)], rest[len(devices) :]
    for column, cell in zip(devices, cells, strict=False):
        links[(row, column)] = cell
    if has_affinity and extra:
        affinity[row] = " ".join(extra)
    if len(cells) < len(devices):
        return f"row has {len(cells)} of {len(devices)} link cells"
    if extra and not has_affinity:
        return "cells beyond the header"
    return None


# ---------------------------------------------------------------------------------------------
# JSON


def to_json(obj: KvOutput | ProcMem | Topology) -> dict[str, Any]:
    """The `ascend-npu/1` JSON form of a parsed output."""
    if isinstance(obj, KvOutput):
        return _kv_json(obj)
    if isinstance(obj, ProcMem):
        return _proc_mem_json(obj)
    if isinstance(obj, Topology):
        return _topo_json(obj)
    raise TypeError(f"to_json takes KvOutput, ProcMem or Topology, not {type(obj).__name__}")


def _kv_json(out: KvOutput) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": out.kind,
        "npu_id": out.npu_id,
        "chip_count": out.chip_count,
        "blocks": [
            {"chip_id": b.chip_id, "name": b.name, "fields": dict(b.fields)} for b in out.blocks
        ],
        "warnings": list(out.warnings),
    }


def _proc_mem_json(out: ProcMem) -> dict[str, Any]:
    chips = [
        {
            "chip_id": chip.chip_id,
            "processes": [
                {"pid": p.pid, "name": p.name, "memory_mb": p.memory_mb} for p in chip.processes
            ],
        }
        for chip in out.chips
    ]
    return {
        "schema": SCHEMA,
        "kind": "proc-mem",
        "npu_id": out.npu_id,
        "chips": chips,
        "warnings": list(out.warnings),
    }


def _topo_json(out: Topology) -> dict[str, Any]:
    links: dict[str, dict[str, str]] = {}
    for (row, column), link in out.links.items():
        links.setdefault(row, {})[column] = link
    return {
        "schema": SCHEMA,
        "kind": "topo",
        "devices": list(out.devices),
        "links": links,
        "cpu_affinity": dict(out.cpu_affinity),
        "legend": dict(out.legend),
        "warnings": list(out.warnings),
    }
