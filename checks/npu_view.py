"""Rendering of an npu-smi reading for `ascend-doctor npu` (rich tables)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from probes.inventory import NpuReading

_HEALTH_STYLE = {"OK": "green", "Warning": "yellow", "Alarm": "red", "Critical": "bold red"}


def render(reading: NpuReading, console: Console) -> None:
    doc = reading.document
    if reading.is_error:
        console.print(Text(f"npu-smi: {doc.get('error', 'unknown error')}", style="red"))
        return
    console.print(_body(doc))
    for line in doc.get("warnings", []):
        console.print(Text(f"warning: {line}", style="yellow"))


def _body(doc: dict[str, Any]) -> RenderableType:
    kind = doc.get("kind")
    if kind == "info":
        return _info(doc)
    if kind == "mapping":
        return _rows_table("npu-smi info -m", doc.get("rows", []))
    if kind == "list":
        title = f"npu-smi info -l: {doc.get('total_count')} NPU(s)"
        return _rows_table(title, doc.get("npus", []))
    if kind == "watch":
        return _watch(doc)
    if "blocks" in doc:
        return _blocks(doc)
    return Text(str(doc))


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _pair(used: Any, total: Any) -> str:
    if used is None and total is None:
        return "-"
    return f"{_cell(used)}/{_cell(total)}"


def _has_values(chips: Sequence[dict[str, Any]], used: str, total: str) -> bool:
    """A memory column is shown only when some chip has a non-zero total."""
    return any(chip.get(total) or chip.get(used) for chip in chips)


def _info(doc: dict[str, Any]) -> RenderableType:
    title = (
        f"npu-smi {_cell(doc.get('npu_smi_version'))}, driver {_cell(doc.get('driver_version'))}"
    )
    chips_doc = doc.get("chips", [])
    pairs = [(h, u, t) for h, u, t in (("HBM MB", "hbm_used_mb", "hbm_total_mb"),
                                      ("DDR MB", "memory_used_mb", "memory_total_mb"))
             if _has_values(chips_doc, u, t)]
    chips = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    for header in ("NPU", "Chip", "Name", "Health", "Power W", "Temp C", "AICore%",
                   *(h for h, _, _ in pairs), "Bus-Id"):
        chips.add_column(header, no_wrap=True,
                         justify="right" if header.endswith(("W", "C", "%", "MB")) else "left")
    for chip in chips_doc:
        health = _cell(chip.get("health"))
        chips.add_row(
            _cell(chip.get("npu_id")), _cell(chip.get("chip_id")), _cell(chip.get("name")),
            Text(health, style=_HEALTH_STYLE.get(health, "red")),
            _cell(chip.get("power_w")), _cell(chip.get("temperature_c")),
            _cell(chip.get("aicore_percent")),
            *(_pair(chip.get(u), chip.get(t)) for _, u, t in pairs),
            _cell(chip.get("bus_id")),
        )
    return Group(chips, _processes(doc))


def _processes(doc: dict[str, Any]) -> RenderableType:
    if doc.get("processes_known") is False:
        return Text("processes: not in this output (the table was cut)", style="yellow")
    rows = doc.get("processes", [])
    if not rows:
        return Text("processes: none running on any NPU")
    table = Table(title="processes", title_justify="left")
    for header in ("NPU", "Chip", "PID", "Name", "Memory MB"):
        table.add_column(header)
    for proc in rows:
        table.add_row(*(_cell(proc.get(k)) for k in ("npu_id", "chip_id", "pid", "name",
                                                      "memory_mb")))
    return table


def _rows_table(title: str, rows: Sequence[dict[str, Any]]) -> RenderableType:
    table = Table(title=title, title_justify="left")
    keys = list(rows[0].keys()) if rows else []
    for key in keys:
        table.add_column(key)
    for row in rows:
        table.add_row(*(_cell(row.get(k)) for k in keys))
    return table


def _watch(doc: dict[str, Any]) -> RenderableType:
    columns = list(doc.get("columns", []))
    table = Table(title="npu-smi info watch", title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in doc.get("rows", []):
        values = row.get("values", {})
        cells = [_cell(values.get(c, row.get(c))) for c in columns]
        table.add_row(*cells)
    return table


def _blocks(doc: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    for block in doc.get("blocks", []):
        label = block.get("name") or f"chip {_cell(block.get('chip_id'))}"
        table = Table(title=f"{doc.get('kind')} — {label}", title_justify="left")
        table.add_column("field")
        table.add_column("value")
        for key, value in block.get("fields", {}).items():
            table.add_row(key, _cell(value))
        parts.append(table)
    return Group(*parts)
