"""Pure parsers of the table- and line-shaped `npu-smi` outputs, and their JSON form.

- `parse_info`     `npu-smi info` main table + process section (every known layout)
- `parse_mapping`  `npu-smi info -m`
- `parse_list`     `npu-smi info -l`
- `parse_watch`    `npu-smi info watch`
- `split_noise`, `detect_error`, `detect_kind`  noise lines, error outputs, what a text is
- `to_json`        the `ascend-npu/1` JSON form of any of the results above

Key/value outputs (`-t ...`) are only recognised here (`detect_kind` -> "kv"); their parser
lives in `probes.npu_smi_kv`. Each parser raises `probes.errors.ParseError` when the text is not
its output at all; anything it does not understand inside its output becomes a warning.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from probes.npu_smi_lines import parse_list, parse_mapping, parse_watch, watch_columns
from probes.npu_smi_model import (
    ChipRow,
    ListEntry,
    MappingRow,
    NpuInfo,
    NpuList,
    NpuMapping,
    NpuSmiError,
    ProcessRow,
    WatchRow,
    WatchTable,
)
from probes.npu_smi_noise import detect_error, split_noise
from probes.npu_smi_table import parse_info

SCHEMA = "ascend-npu/1"

__all__ = [
    "SCHEMA",
    "ChipRow",
    "ListEntry",
    "MappingRow",
    "NpuInfo",
    "NpuList",
    "NpuMapping",
    "NpuSmiError",
    "ProcessRow",
    "WatchRow",
    "WatchTable",
    "detect_error",
    "detect_kind",
    "parse_info",
    "parse_list",
    "parse_mapping",
    "parse_watch",
    "split_noise",
    "to_json",
]

# ----------------------------------------------------------------------------- detect_kind

_INFO_TITLE = re.compile(r"^\s*\|\s*npu-smi\s+\S+\s+Version:")
_INFO_HEADER = re.compile(r"^\s*\|.*\bHealth\b")
_MAPPING_HEADER = re.compile(r"^\s*NPU ID\s+Chip ID\b")
_LIST_COUNT = re.compile(r"^\s*(?:Total|Card) Count\s*:")
# npu-smi pads keys (`\t%-30s : `), so its separator always has blank space before the colon
_KV_LINE = re.compile(r"^\s*\S.*?\s:(?:\s|$)")
_TOPO_HEADER = re.compile(r"^\s*(?:NPU\d+\s+){2,}|^\s*NPU\d+\s+X\b")


def detect_kind(text: str) -> str:
    """What an npu-smi output is: info, mapping, list, watch, error, kv or unknown."""
    clean, _ = split_noise(text)
    lines = [line for line in clean.splitlines() if line.strip()]
    if any(_INFO_TITLE.match(ln) or _INFO_HEADER.match(ln) for ln in lines):
        return "info"
    if any(len(watch_columns(ln)) >= 2 for ln in lines):
        return "watch"
    if any(_MAPPING_HEADER.match(ln) for ln in lines):
        return "mapping"
    if any(_LIST_COUNT.match(ln) for ln in lines):
        return "list"
    if detect_error(clean) is not None:
        return "error"
    return "kv" if lines and _looks_key_value(lines) else "unknown"


def _looks_key_value(lines: list[str]) -> bool:
    """`Key   : value` lines, or the `-t topo` matrix, which the same kv parser owns."""
    kv_lines = sum(1 for ln in lines if _KV_LINE.match(ln))
    return 2 * kv_lines >= len(lines) or any(_TOPO_HEADER.match(ln) for ln in lines)


# ----------------------------------------------------------------------------- to_json

ParseResult = NpuInfo | NpuMapping | NpuList | WatchTable | NpuSmiError


def to_json(obj: ParseResult) -> dict[str, Any]:
    """The `ascend-npu/1` JSON form (a dict of plain values) of a parse result."""
    if isinstance(obj, NpuInfo):
        return info_to_json(obj)
    if isinstance(obj, NpuMapping):
        return mapping_to_json(obj)
    if isinstance(obj, NpuList):
        return list_to_json(obj)
    if isinstance(obj, WatchTable):
        return watch_to_json(obj)
    if isinstance(obj, NpuSmiError):
        return error_to_json(obj)
    raise TypeError(f"to_json: not an npu-smi parse result: {type(obj).__name__}")


def info_to_json(info: NpuInfo) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "info",
        "npu_smi_version": info.npu_smi_version,
        "driver_version": info.driver_version,
        "layout": info.layout,
        "chips": [asdict(chip) for chip in info.chips],
        "processes": [asdict(process) for process in info.processes],
        "processes_known": info.processes_known,
        "warnings": list(info.warnings),
    }


def mapping_to_json(mapping: NpuMapping) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "mapping",
        "rows": [asdict(row) for row in mapping.rows],
        "warnings": list(mapping.warnings),
    }


def list_to_json(listing: NpuList) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "list",
        "total_count": listing.total_count,
        "npus": [asdict(entry) for entry in listing.npus],
        "warnings": list(listing.warnings),
    }


def watch_to_json(table: WatchTable) -> dict[str, Any]:
    rows = [
        {"npu_id": row.npu_id, "chip_id": row.chip_id, "values": dict(row.values)}
        for row in table.rows
    ]
    return {
        "schema": SCHEMA,
        "kind": "watch",
        "columns": list(table.columns),
        "rows": rows,
        "warnings": list(table.warnings),
    }


def error_to_json(error: NpuSmiError) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "error",
        "error": error.message,
        "code": error.code,
        "error_kind": error.kind,
    }
