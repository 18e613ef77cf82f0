"""Parser of the `npu-smi info` main table and its process section, for every known layout.

Rows are split on `|` and then on whitespace, never by column offsets: widths differ between
versions (80 to 116 columns) and copies in the wild are re-spaced. The meaning of each cell comes
from the header rows, so a layout is recognised by its labels:

- `310-legacy`  `Chip Device`, no hugepages (20.x, 80 columns)
- `310-wide`    `Chip Device` + hugepages (310/310B/310P, 102 and 106 columns); Device = logic id
- `hbm`         `Chip` + `HBM-Usage(MB)` (910A/910/910B: 93, 98 and the 116-column 26.0 layout)
- `hbm-a3`      `Chip Phy-ID` (A3 / 910_93, two dies per card)
- `npu-id`      `NPU ID | Name | Health` columns, `NPU Util(%)` (Ascend 950: known from npu-smi's
                source and synthetic tests only, tests/corpus/npu-smi/FORMATS.md §1.3; the first
                driver that prints it is not in our data)
- a `+container` suffix when the process header has `Process id in container`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from probes.errors import ParseError
from probes.npu_smi.model import ChipRow, NpuInfo, ProcessRow
from probes.npu_smi.noise import is_noise
from probes.npu_smi.text import (
    box_cells,
    is_border,
    is_box_row,
    is_placeholder,
    normalise_spaces,
    not_a_number,
    split_pair,
    to_float,
    to_int,
    to_text,
    value_tokens,
)
from probes.words import counted

WHAT = "npu-smi info"

_TITLE = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_NO_PROCESS = re.compile(r"^No\s+running\s+processes\s+found\s+in\s+NPU\s+(\d+)")
_BUS_ID = re.compile(r"^[0-9A-Fa-fx]{4}:[0-9A-Fa-fx]{2}:")
_KNOWN_HEALTH = frozenset(
    {"OK", "Warning", "Alarm", "Critical", "Error", "General Warning", "Important Warning",
     "Emergency Warning", "Unknown"}
)
# labels whose cell is one free-text value (may hold spaces), not whitespace-separated numbers
_TEXT_CELL_LABELS = frozenset({"Health", "Bus-Id"})
_PAIR_FIELDS = {
    "Hugepages-Usage(page)": ("hugepages_used", "hugepages_total"),
    "Memory-Usage(MB)": ("memory_used_mb", "memory_total_mb"),
    "HBM-Usage(MB)": ("hbm_used_mb", "hbm_total_mb"),
}
# labels printed with a space inside; every other label is one whitespace-free word
_LABEL_TOKEN = re.compile(r"NPU\s+ID\b|NPU\s+Util\(%\)|\S+")
_NPU_LABELS = ("NPU", "NPU ID")
_INT_FIELDS = {
    "NPU": "npu_id",
    "NPU ID": "npu_id",
    "Chip": "chip_id",
    "Phy-ID": "phy_id",
    "Device": "logic_id",
    "Temp(C)": "temperature_c",
    "AICore(%)": "aicore_percent",
    "NPU Util(%)": "npu_util_percent",
}
_TEXT_FIELDS = {"Name": "name", "Health": "health", "Bus-Id": "bus_id"}
_FLOAT_FIELDS = {"Power(W)": "power_w"}
_KNOWN_LABELS = frozenset(
    set(_PAIR_FIELDS) | set(_INT_FIELDS) | set(_TEXT_FIELDS) | set(_FLOAT_FIELDS)
)
# process header cell (whitespace-normalised, lower case) -> field
_PROCESS_CELLS = {
    "npu chip": "ids",
    "npu id": "ids",
    "process id": "pid",
    "process name": "name",
    "process memory(mb)": "memory_mb",
    "process id in container": "container_pid",
}

Labels = tuple[tuple[str, ...], ...]
_Converter = Callable[[str], "int | float | None"]


@dataclass
class _RowText:
    """The cells of one table line, with its line number for warnings."""

    line_no: int
    cells: list[str]


@dataclass
class _State:
    """What the line walk has seen so far; only parse_info builds and reads it."""

    npu_smi_version: str | None = None
    driver_version: str | None = None
    header1: Labels | None = None
    header2: Labels | None = None
    process_header: tuple[str, ...] | None = None
    pending: _RowText | None = None
    chips: list[ChipRow] = field(default_factory=list)
    processes: list[ProcessRow] = field(default_factory=list)
    cards_listed: set[int] = field(default_factory=set)
    process_closed: bool = False
    warnings: list[str] = field(default_factory=list)

    def warn(self, line_no: int, message: str) -> None:
        self.warnings.append(f"line {line_no}: {message}")


# ----------------------------------------------------------------------------- public


def parse_info(text: str) -> NpuInfo:
    """Parse `npu-smi info`; raises ParseError when the text holds no main-table header."""
    state = _State()
    for line_no, line in enumerate(text.splitlines(), start=1):
        _take_line(state, line_no, line)
    if state.header1 is None:
        raise ParseError(WHAT, "no table header (a row with 'Health') found")
    _flush_pending(state)
    return _result(state)


# ----------------------------------------------------------------------------- line walk


def _take_line(state: _State, line_no: int, line: str) -> None:
    if not line.strip():
        return
    if is_border(line):
        _take_border(state, line_no)
    elif is_box_row(line) and not is_noise(line):
        _take_row(state, line_no, box_cells(line))
    else:
        state.warn(line_no, f"not part of the table: {line.strip()}")


def _take_border(state: _State, line_no: int) -> None:
    if state.process_header is not None:
        state.process_closed = True
    else:
        _flush_pending(state)


def _take_row(state: _State, line_no: int, cells: list[str]) -> None:
    joined = " ".join(cells)
    if _TITLE.search(joined):
        _take_title(state, joined)
    elif _is_header(cells):
        _take_header(state, line_no, cells)
    elif state.process_header is not None:
        _take_process_row(state, line_no, cells)
    elif state.header1 is not None:
        _take_chip_row(state, line_no, cells)
    else:
        state.warn(line_no, f"row before the table header: {joined.strip()}")


def _take_title(state: _State, joined: str) -> None:
    match = _TITLE.search(joined)
    if match:
        state.npu_smi_version, state.driver_version = match.group(1), match.group(2)


def _is_header(cells: list[str]) -> bool:
    words = set(" ".join(cells).split())
    return bool(words & {"Health", "Bus-Id"}) or "Process id" in normalise_spaces(" ".join(cells))


def _take_header(state: _State, line_no: int, cells: list[str]) -> None:
    labels = tuple(_cell_labels(cell) for cell in cells)
    if "Process id" in normalise_spaces(" ".join(cells)):
        _flush_pending(state)
        state.process_header = tuple(normalise_spaces(cell).lower() for cell in cells)
    elif any("Health" in cell for cell in labels):
        state.header1 = labels
    else:
        state.header2 = labels
    _warn_unknown_labels(state, line_no, labels if state.process_header is None else ())


def _cell_labels(cell: str) -> tuple[str, ...]:
    return tuple(normalise_spaces(label) for label in _LABEL_TOKEN.findall(cell))


def _warn_unknown_labels(state: _State, line_no: int, labels: Labels) -> None:
    unknown = [label for cell in labels for label in cell if label not in _KNOWN_LABELS]
    if unknown:
        state.warn(line_no, f"unknown column label(s) {', '.join(unknown)}: values ignored")


# ----------------------------------------------------------------------------- chip rows


def _take_chip_row(state: _State, line_no: int, cells: list[str]) -> None:
    row = _RowText(line_no, cells)
    if state.pending is not None:
        pending, state.pending = state.pending, None
        _emit_chip(state, pending, row)
    elif _looks_like_second_row(state, cells):
        state.warn(line_no, "second chip row without its first row (output cut?): ignored")
    else:
        state.pending = row


def _looks_like_second_row(state: _State, cells: list[str]) -> bool:
    """A bus id where row 1 has its health: the text was cut between the two rows of a chip."""
    index = _label_cell_index(state.header2 or (), "Bus-Id")
    return index is not None and index < len(cells) and bool(_BUS_ID.match(cells[index]))


def _label_cell_index(labels: Labels, label: str) -> int | None:
    return next((i for i, cell in enumerate(labels) if label in cell), None)


def _flush_pending(state: _State) -> None:
    if state.pending is not None:
        pending, state.pending = state.pending, None
        state.warn(pending.line_no, "chip row without its second row (output cut?)")
        _emit_chip(state, pending, None)


def _emit_chip(state: _State, first: _RowText, second: _RowText | None) -> None:
    values = _assign_row(state, first, state.header1 or ())
    if second is not None:
        values.update(_assign_row(state, second, state.header2 or (("Chip",),)))
    chip = _chip_from_values(state, first.line_no, values)
    if chip is not None:
        state.chips.append(chip)


def _assign_row(state: _State, row: _RowText, labels: Labels) -> dict[str, str]:
    """Label -> raw text for one row, cell by cell."""
    values: dict[str, str] = {}
    for index, cell_labels in enumerate(labels):
        cell = row.cells[index] if index < len(row.cells) else ""
        values.update(_assign_cell(state, row.line_no, cell_labels, cell))
    if len(row.cells) > len(labels):
        state.warn(row.line_no, f"{counted(len(row.cells) - len(labels), 'cell')} more than the "
                   "header")
    return values


def _assign_cell(state: _State, line_no: int, labels: tuple[str, ...], cell: str) -> dict[str, str]:
    if len(labels) == 1 and labels[0] in _TEXT_CELL_LABELS:
        return {labels[0]: cell}
    tokens = value_tokens(cell)
    if labels and labels[-1] == "Name" and len(tokens) >= len(labels):
        # a name is the rest of the cell; today's names have no spaces, masked copies may
        tokens = [*tokens[: len(labels) - 1], " ".join(tokens[len(labels) - 1 :])]
    if len(tokens) != len(labels):
        state.warn(line_no, f"{counted(len(tokens), 'value')} under "
                   f"{'the label' if len(labels) == 1 else 'the labels'} {' '.join(labels)}")
    return dict(zip(labels, tokens, strict=False))


def _chip_from_values(state: _State, line_no: int, values: dict[str, str]) -> ChipRow | None:
    raw_id = next((values[label] for label in _NPU_LABELS if label in values), "")
    npu_id = to_int(raw_id)
    if npu_id is None:
        state.warn(line_no, f"chip row without an NPU id: {raw_id!r}: ignored")
        return None
    fields: dict[str, object] = {"npu_id": npu_id}
    for label, raw in values.items():
        fields.update(_convert(state, line_no, label, raw))
    _check_health(state, line_no, fields.get("health"))
    return ChipRow(**fields)  # type: ignore[arg-type]


def _convert(state: _State, line_no: int, label: str, raw: str) -> dict[str, object]:
    if label in _TEXT_FIELDS:
        return {_TEXT_FIELDS[label]: to_text(raw)}
    if label in _PAIR_FIELDS:
        return _convert_pair(state, line_no, label, raw)
    if label in _FLOAT_FIELDS:
        return {_FLOAT_FIELDS[label]: _number(state, line_no, label, raw, to_float)}
    if label in _INT_FIELDS and label not in _NPU_LABELS:
        return {_INT_FIELDS[label]: _number(state, line_no, label, raw, to_int)}
    return {}


def _number(state: _State, line_no: int, label: str, raw: str, convert: _Converter) -> object:
    value = convert(raw)
    if value is None and not is_placeholder(raw):
        state.warn(line_no, not_a_number(label, raw))
    return value


def _convert_pair(state: _State, line_no: int, label: str, raw: str) -> dict[str, object]:
    used_field, total_field = _PAIR_FIELDS[label]
    halves = split_pair(raw)
    if halves is None:
        if not is_placeholder(raw):
            state.warn(line_no, f"{label} value {raw!r} is not a used/total pair")
        return {used_field: None, total_field: None}
    used = _number(state, line_no, label, halves[0], to_int)
    total = _number(state, line_no, label, halves[1], to_int)
    return {used_field: used, total_field: total}


def _check_health(state: _State, line_no: int, health: object) -> None:
    if isinstance(health, str) and health not in _KNOWN_HEALTH:
        state.warn(line_no, f"unexpected health {health!r} (kept as printed)")


# ----------------------------------------------------------------------------- process rows


def _take_process_row(state: _State, line_no: int, cells: list[str]) -> None:
    state.process_closed = False
    idle = _NO_PROCESS.match(cells[0]) if cells else None
    if idle:
        state.cards_listed.add(int(idle.group(1)))
        return
    process = _process_from_cells(state, line_no, cells)
    if process is not None:
        state.processes.append(process)
        state.cards_listed.add(process.npu_id)


def _process_cells(header: tuple[str, ...], cells: list[str]) -> dict[str, str]:
    named = {_PROCESS_CELLS.get(label, label): i for i, label in enumerate(header)}
    return {name: cells[i] for name, i in named.items() if i < len(cells)}


def _process_from_cells(state: _State, line_no: int, cells: list[str]) -> ProcessRow | None:
    by_field = _process_cells(state.process_header or (), cells)
    ids = by_field.get("ids", "").split()
    npu_id = to_int(ids[0]) if ids else None
    pid = to_int(by_field.get("pid", ""))
    if npu_id is None or pid is None:
        state.warn(line_no, f"process row not understood: {' | '.join(cells)}")
        return None
    return ProcessRow(
        npu_id=npu_id,
        chip_id=to_int(ids[1]) if len(ids) > 1 else None,
        pid=pid,
        name=by_field.get("name", ""),
        memory_mb=to_int(by_field.get("memory_mb", "")),
        container_pid=to_int(by_field.get("container_pid", "")),
    )


# ----------------------------------------------------------------------------- result


def _layout(state: _State) -> str:
    first_cell = state.header2[0] if state.header2 else ()
    all_labels = {label for cell in (state.header1 or ()) for label in cell}
    all_labels |= {label for cell in (state.header2 or ()) for label in cell}
    if "NPU ID" in all_labels:
        base = "npu-id"
    elif "Phy-ID" in first_cell:
        base = "hbm-a3"
    elif "Device" in first_cell:
        base = "310-wide" if "Hugepages-Usage(page)" in all_labels else "310-legacy"
    else:
        base = "hbm" if "HBM-Usage(MB)" in all_labels else "unknown"
    container = "process id in container" in (state.process_header or ())
    return base + ("+container" if container else "")


def _processes_known(state: _State) -> bool:
    """Known only when the section is there, closed by a border, and covers every card."""
    if state.process_header is None:
        return False
    cards = {chip.npu_id for chip in state.chips}
    known = state.process_closed and cards <= state.cards_listed
    if not known:
        state.warnings.append("process section incomplete (output cut?): processes unknown")
    return known


def _result(state: _State) -> NpuInfo:
    known = _processes_known(state)
    return NpuInfo(
        npu_smi_version=state.npu_smi_version,
        driver_version=state.driver_version,
        layout=_layout(state),
        chips=tuple(state.chips),
        processes=tuple(state.processes),
        processes_known=known,
        warnings=tuple(state.warnings),
    )

