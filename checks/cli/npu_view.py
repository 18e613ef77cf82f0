"""Rendering of an npu-smi reading for `ascend-doctor npu` (rich tables).

Every string that came from the output (names, cells, process names, warnings, errors) is
shown, never obeyed: it passes `probes.textsafe.one_line` and reaches rich as a `Text`, so
neither a control sequence nor rich markup (`[/x]`, `[link=...]`) in it has any effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from checks.health import health_level
from probes.inventory import NpuReading
from probes.textsafe import one_line, visible

_LEVEL_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "unknown": "dim"}


def render(reading: NpuReading, console: Console) -> None:
    doc = reading.document
    if reading.is_error:
        error = visible(str(doc.get("error", "unknown error")))
        console.print(Text(f"npu-smi: {error}", style="red"))
    else:
        console.print(_body(doc))
    for line in doc.get("warnings", []):
        console.print(Text(f"warning: {one_line(str(line))}", style="yellow"))
    for line in doc.get("noise", []):
        console.print(Text(f"noise (not part of the output): {one_line(str(line))}", style="dim"))


def _body(doc: dict[str, Any]) -> RenderableType:
    kind = doc.get("kind")
    if kind == "info":
        return _info(doc)
    if kind == "mapping":
        return _rows_table("npu-smi info -m", doc.get("rows", []))
    if kind == "list":
        title = f"npu-smi info -l: {_text(doc.get('total_count'))} NPU(s)"
        return _rows_table(title, doc.get("npus", []))
    if kind == "watch":
        return _watch(doc)
    if kind == "topo":
        return _topo(doc)
    if "blocks" in doc:
        return _blocks(doc)
    if "chips" in doc:
        return _proc_mem(doc)
    return Text(one_line(str(doc)))


def _text(value: Any) -> str:
    """A value from the output as one safe line; `-` for a value npu-smi did not print."""
    return "-" if value is None else one_line(str(value))


def _cell(value: Any, style: str = "") -> Text:
    return Text(_text(value), style=style)


def _title(text: str) -> Text:
    return Text(one_line(text))


def _pair(used: Any, total: Any) -> Text:
    if used is None and total is None:
        return Text("-")
    return Text(f"{_text(used)}/{_text(total)}")


def _has_values(chips: Sequence[dict[str, Any]], *keys: str) -> bool:
    """A column is shown only when some chip has a non-zero value in it."""
    return any(chip.get(key) for chip in chips for key in keys)


def _info(doc: dict[str, Any]) -> RenderableType:
    versions = _text(doc.get("npu_smi_version")), _text(doc.get("driver_version"))
    title = f"npu-smi {versions[0]}, driver {versions[1]}"
    chips_doc = doc.get("chips", [])
    pairs = [(h, u, t) for h, u, t in (("HBM MB", "hbm_used_mb", "hbm_total_mb"),
                                      ("DDR MB", "memory_used_mb", "memory_total_mb"))
             if _has_values(chips_doc, u, t)]
    util = any(chip.get("npu_util_percent") is not None for chip in chips_doc)
    chips = Table(title=_title(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    headers = ("NPU", "Chip", "Name", "Health", "Power W", "Temp C", "AICore%",
               *(("Util%",) if util else ()), *(h for h, _, _ in pairs), "Bus-Id")
    for header in headers:
        chips.add_column(header, no_wrap=True,
                         justify="right" if header.endswith(("W", "C", "%", "MB")) else "left")
    for chip in chips_doc:
        health = _text(chip.get("health"))
        chips.add_row(
            _cell(chip.get("npu_id")), _cell(chip.get("chip_id")), _cell(chip.get("name")),
            Text(health, style=_LEVEL_STYLE[health_level(chip.get("health"))]),
            _cell(chip.get("power_w")), _cell(chip.get("temperature_c")),
            _cell(chip.get("aicore_percent")),
            *((_cell(chip.get("npu_util_percent")),) if util else ()),
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
    table = Table(title=_title("processes"), title_justify="left")
    for header in ("NPU", "Chip", "PID", "Name", "Memory MB"):
        table.add_column(header)
    for proc in rows:
        table.add_row(*(_cell(proc.get(k)) for k in ("npu_id", "chip_id", "pid", "name",
                                                      "memory_mb")))
    return table


def _rows_table(title: str, rows: Sequence[dict[str, Any]]) -> RenderableType:
    table = Table(title=_title(title), title_justify="left")
    keys = list(rows[0].keys()) if rows else []
    for key in keys:
        table.add_column(Text(one_line(key)))
    for row in rows:
        table.add_row(*(_cell(row.get(k)) for k in keys))
    return table


def _watch(doc: dict[str, Any]) -> RenderableType:
    columns = [str(column) for column in doc.get("columns", [])]
    table = Table(title=_title("npu-smi info watch"), title_justify="left")
    for column in columns:
        table.add_column(Text(one_line(column)))
    for row in doc.get("rows", []):
        values = row.get("values", {})
        table.add_row(*(_cell(values.get(c, row.get(c))) for c in columns))
    return table


def _topo(doc: dict[str, Any]) -> RenderableType:
    devices = [str(device) for device in doc.get("devices", [])]
    affinity = doc.get("cpu_affinity", {})
    with_affinity = any(value is not None for value in affinity.values())
    table = Table(title=_title("npu-smi info -t topo"), title_justify="left")
    for header in ("", *devices, *(("CPU Affinity",) if with_affinity else ())):
        table.add_column(Text(one_line(header)))
    links = doc.get("links", {})
    for row in devices:
        cells = [_cell(links.get(row, {}).get(column)) for column in devices]
        extra = [_cell(affinity.get(row))] if with_affinity else []
        table.add_row(_cell(row), *cells, *extra)
    legend = [Text(f"{one_line(code)} = {one_line(str(text))}", style="dim")
              for code, text in doc.get("legend", {}).items()]
    return Group(table, *legend)


def _blocks(doc: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    for block in doc.get("blocks", []):
        label = block.get("name") or f"chip {_text(block.get('chip_id'))}"
        table = Table(title=_title(f"{doc.get('kind')} — {label}"), title_justify="left")
        table.add_column("field")
        table.add_column("value")
        for key, value in block.get("fields", {}).items():
            table.add_row(_cell(key), _cell(value))
        parts.append(table)
    return Group(*parts)


def _proc_mem(doc: dict[str, Any]) -> RenderableType:
    table = Table(title=_title(f"npu-smi info -t proc-mem, NPU {_text(doc.get('npu_id'))}"),
                  title_justify="left")
    for header in ("Chip", "PID", "Name", "Memory MB"):
        table.add_column(header)
    for chip in doc.get("chips", []):
        for proc in chip.get("processes", []):
            table.add_row(_cell(chip.get("chip_id")), _cell(proc.get("pid")),
                          _cell(proc.get("name")), _cell(proc.get("memory_mb")))
    return table
