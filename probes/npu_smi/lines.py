"""Parsers of the line-shaped npu-smi outputs: `info -m` (mapping), `info -l` (list), `info watch`.

In each, the header line is the schema and data rows are split on whitespace: copies of these
outputs are re-spaced by their authors (TAB kept, TAB expanded, spacing normalised), so column
offsets mean nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from probes.errors import ParseError
from probes.npu_smi.model import WatchValue
from probes.npu_smi.model_lines import (
    ListEntry,
    MappingRow,
    NpuList,
    NpuMapping,
    WatchRow,
    WatchTable,
)
from probes.npu_smi.noise import is_noise
from probes.npu_smi.text import is_placeholder, not_a_number, to_float, to_int, to_text
from probes.words import counted

# ----------------------------------------------------------------------------- -m (mapping)

MAPPING_WHAT = "npu-smi info -m"
# longest first, so `Chip Logic ID` is not read as `Chip` + ...
_MAPPING_LABELS = ("Chip Logic ID", "Chip Phy-ID", "Chip Name", "Chip ID", "NPU ID", "Slot ID")
_MAPPING_LABEL = re.compile("|".join(re.escape(label) for label in _MAPPING_LABELS))
_MAPPING_FIELDS = {
    "NPU ID": "npu_id",
    "Chip ID": "chip_id",
    "Chip Logic ID": "logic_id",
    "Chip Phy-ID": "phy_id",
    "Chip Name": "name",
}


def _mapping_header(line: str) -> tuple[str, ...] | None:
    labels = tuple(_MAPPING_LABEL.findall(line))
    return labels if "NPU ID" in labels and len(labels) >= 2 else None


def parse_mapping(text: str) -> NpuMapping:
    """Parse `npu-smi info -m`; raises ParseError when no `NPU ID ... Chip ...` header is found."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _mapping_header(ln)), None)
    if start is None:
        raise ParseError(MAPPING_WHAT, "no header with 'NPU ID' and 'Chip' labels found")
    labels = _mapping_header(lines[start]) or ()
    warnings = _unexpected_lines(lines[:start], first_line_no=1)
    rows: list[MappingRow] = []
    for line_no, line in enumerate(lines[start + 1 :], start=start + 2):
        row = _mapping_row(labels, line, line_no, warnings)
        if row is not None:
            rows.append(row)
    return NpuMapping(rows=tuple(rows), warnings=tuple(warnings))


def _mapping_row(
    labels: tuple[str, ...], line: str, line_no: int, warnings: list[str]
) -> MappingRow | None:
    if not line.strip():
        return None
    # the name is last and may hold spaces (`Ascend 910B4`), hence maxsplit
    tokens = line.split(maxsplit=len(labels) - 1)
    npu_id = to_int(tokens[0]) if tokens else None
    if npu_id is None or len(tokens) < len(labels) - 1:
        warnings.append(f"line {line_no}: not a mapping row: {line.strip()}")
        return None
    # a row without a name (fewer tokens) leaves the name out, hence strict=False
    pairs = zip(labels, tokens, strict=False)
    values = {_MAPPING_FIELDS.get(label, label): tok for label, tok in pairs}
    return MappingRow(
        npu_id=npu_id,
        chip_id=to_int(values.get("chip_id", "")),
        logic_id=to_int(values.get("logic_id", "")),
        phy_id=to_int(values.get("phy_id", "")),
        name=to_text(values.get("name", "")),
    )


def _unexpected_lines(lines: list[str], first_line_no: int) -> list[str]:
    return [
        f"line {no}: not part of the output: {ln.strip()}"
        for no, ln in enumerate(lines, start=first_line_no)
        if ln.strip()
    ]


# ----------------------------------------------------------------------------- -l (list)

LIST_WHAT = "npu-smi info -l"
_COUNT_KEYS = frozenset({"Total Count", "Card Count"})


@dataclass
class _ListState:
    """What the walk over `info -l` has seen so far; only parse_list builds it."""

    total_count: int | None = None
    seen_count: bool = False
    entries: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def parse_list(text: str) -> NpuList:
    """Parse `npu-smi info -l`; raises ParseError when it has neither a count nor an NPU ID."""
    state = _ListState()
    for line_no, line in enumerate(text.splitlines(), start=1):
        _list_line(state, line_no, line)
    if not state.seen_count and not state.entries:
        raise ParseError(LIST_WHAT, "no 'Total Count', 'Card Count' or 'NPU ID' line found")
    npus = tuple(entry for entry in map(_list_entry, state.entries) if entry is not None)
    if state.total_count is not None and state.total_count != len(npus):
        state.warnings.append(f"count says {state.total_count}, {counted(len(npus), 'NPU')} listed")
    return NpuList(total_count=state.total_count, npus=npus, warnings=tuple(state.warnings))


def _list_line(state: _ListState, line_no: int, line: str) -> None:
    if not line.strip():
        return
    key, colon, value = (part.strip() for part in line.partition(":"))
    if not colon:
        state.warnings.append(f"line {line_no}: not a key : value line: {line.strip()}")
        return
    if key in _COUNT_KEYS:
        state.total_count, state.seen_count = to_int(value), True
        if state.total_count is None:
            state.warnings.append(f"line {line_no}: {not_a_number(key, value)}")
    elif key == "NPU ID":
        if to_int(value) is None:
            state.warnings.append(f"line {line_no}: {not_a_number(key, value)}: card not listed")
        state.entries.append({key: value})
    elif state.entries and key in ("Product Name", "Serial Number", "Chip Count"):
        state.entries[-1][key] = value
    else:
        state.warnings.append(f"line {line_no}: unexpected key {key!r}")


def _list_entry(values: dict[str, str]) -> ListEntry | None:
    npu_id = to_int(values["NPU ID"])
    if npu_id is None:
        return None
    return ListEntry(
        npu_id=npu_id,
        chip_count=to_int(values.get("Chip Count", "")),
        product_name=to_text(values.get("Product Name", "")),
        serial_number=to_text(values.get("Serial Number", "")),
    )


# ----------------------------------------------------------------------------- watch

WATCH_WHAT = "npu-smi info watch"
_NPU_COLUMN = "NpuID"
_CHIP_COLUMN = "ChipId"


def watch_columns(line: str) -> tuple[str, ...]:
    """The column labels of a watch header line, as printed; () when it is not one.

    A label is words ending in a parenthesised unit: `NpuID(Idx)`, `AI Core(%)`; the line is
    cut at each `)` (string operations: linear on any line)."""
    if not line.strip().startswith(_NPU_COLUMN):
        return ()
    labels: list[str] = []
    for chunk in line.split(")")[:-1]:
        label = chunk.strip()
        if label.count("(") != 1 or label.startswith("("):
            return tuple(labels)
        labels.append(label + ")")
    return tuple(labels)


@dataclass
class _WatchState:
    """What the walk over a `watch` log has seen so far; only parse_watch builds it."""

    columns: tuple[str, ...]
    rows: list[WatchRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # width of the last value plus its trailing padding, on complete rows: `%-12s` -> 12
    pad_widths: list[int] = field(default_factory=list)


def parse_watch(text: str) -> WatchTable:
    """Parse `npu-smi info watch`; raises ParseError when no `NpuID(Idx) ...` header exists."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if len(watch_columns(ln)) >= 2), None)
    if start is None:
        raise ParseError(WATCH_WHAT, "no header line starting with 'NpuID(Idx)' found")
    state = _WatchState(columns=watch_columns(lines[start]))
    state.warnings.extend(_unexpected_lines(lines[:start], first_line_no=1))
    for line_no, line in enumerate(lines[start + 1 :], start=start + 2):
        _watch_line(state, line_no, line)
    _check_last_row_cut(state)
    return WatchTable(columns=state.columns, rows=tuple(state.rows), warnings=tuple(state.warnings))


def _watch_line(state: _WatchState, line_no: int, line: str) -> None:
    if not line.strip():
        return
    tokens = line.split()
    if is_noise(line) or watch_columns(line) or len(tokens) > len(state.columns):
        state.warnings.append(f"line {line_no}: not a row of this table: {line.strip()}")
        return
    if len(tokens) < len(state.columns):
        state.warnings.append(f"line {line_no}: row cut ({len(tokens)} of "
                              f"{len(state.columns)} values), not read: {line.strip()}")
        return
    state.rows.append(_watch_row(state, line_no, tokens))
    state.pad_widths.append(len(line) - len(line.rstrip()) + len(tokens[-1]))


def _watch_row(state: _WatchState, line_no: int, tokens: list[str]) -> WatchRow:
    pairs = zip(state.columns, tokens, strict=True)  # callers check the counts
    values = {col: _watch_value(state, line_no, col, tok) for col, tok in pairs}
    npu = next((v for c, v in values.items() if c.startswith(_NPU_COLUMN)), None)
    chip = next((v for c, v in values.items() if c.startswith(_CHIP_COLUMN)), None)
    return WatchRow(npu_id=_as_id(npu), chip_id=_as_id(chip), values=values)


def _as_id(value: WatchValue) -> int | None:
    return value if isinstance(value, int) else None


def _watch_value(state: _WatchState, line_no: int, column: str, token: str) -> WatchValue:
    if is_placeholder(token):
        return None
    number: WatchValue = to_int(token)
    if number is None:
        number = to_float(token)
    if number is None:
        state.warnings.append(f"line {line_no}: {not_a_number(column, token)}")
    return number


def _check_last_row_cut(state: _WatchState) -> None:
    """Every value is padded (`%-12s`); a last row with less padding than the rows before it
    was cut after its last digit, which may itself be partial."""
    widths = state.pad_widths
    if len(widths) >= 2 and max(widths[:-1]) > widths[-1] and min(widths[:-1]) == max(widths[:-1]):
        state.warnings.append("last row may be cut (shorter padding than the rows before it)")
