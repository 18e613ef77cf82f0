"""Rendering of `ascend-doctor ops` (an ascend-doctor-ops/1 document) as rich tables.

Operators without a kernel come first with where in the model they are called; then every
other operator, most calls first. The model path and the kernel details are shown as text,
never obeyed (rich markup off, `probes.textsafe.one_line`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from probes.textsafe import one_line

_MARK = {"native": ("ok", "green"), "composite": ("comp", "dim"),
         "fallback": ("FALLBACK", "bold yellow"), "missing": ("MISSING", "bold yellow")}
WARN = ("fallback", "missing")


def _t(value: Any) -> str:
    return one_line(str(value))


_SHORT_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64",
                 "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8"}
SITE_NAMES = 2  # innermost engine functions shown per site


def site_text(op: Mapping[str, Any], names: int = SITE_NAMES) -> str:
    sites = op.get("sites") or []
    if not sites:
        return "-"
    first = sites[0]
    where = " > ".join(_t(first.get("where") or "-").split(" > ")[-names:])
    layers = f" [{_t(first['layers'])}]" if first.get("layers") else ""
    more = f" +{len(sites) - 1}" if len(sites) > 1 else ""
    return f"{where}{layers}{more}"


def dtypes_text(op: Mapping[str, Any]) -> str:
    return ",".join(_SHORT_DTYPES.get(str(d), _t(d)) for d in op.get("dtypes") or []) or "-"


def shapes_text(op: Mapping[str, Any]) -> str:
    shapes = op.get("shapes") or []
    more = int(op.get("distinct_shapes", 0)) - 1
    return (_t(shapes[0]) if shapes else "-") + (f" +{more}" if more > 0 else "")


def summary_line(doc: Mapping[str, Any]) -> str:
    ops = doc.get("operators", [])
    counts = {status: sum(1 for op in ops if op.get("status") == status)
              for status in ("native", "composite", "fallback", "missing")}
    lacking = counts["fallback"] + counts["missing"]
    verdict = "predicted" if doc.get("predicted") else "probed"
    return (f"{len(ops)} operators reach {_t(doc.get('device'))}: {counts['native']} native, "
            f"{counts['composite']} composite, {lacking} without a kernel ({verdict})")


def _header(doc: Mapping[str, Any]) -> list[Text]:
    fp8 = f", FP8 {doc['fp8_mode']}" if doc.get("fp8_mode") else ""
    lines = [Text(f"ascend-doctor ops: {_t(doc.get('model'))}", style="bold"),
             Text(f"  {_t(doc.get('architecture'))}, {doc.get('num_layers')} layers, "
                  f"{_t(doc.get('dtype'))}{fp8}"),
             Text(f"  target: {_t(doc.get('target'))}")]
    if doc.get("predicted"):
        lines.append(Text("  PREDICTED from published registries, not probed on an NPU",
                          style="bold"))
    return lines


def _table(ops: Sequence[Mapping[str, Any]], title: str, why: bool) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    columns = [*(["kernel"] if why else []), "operator", "prefill", "decode", "dtypes",
               "first shape", "called from", *(["why"] if why else [])]
    longest = min(40, max((len(_t(op.get("op"))) for op in ops), default=8))
    minimum = {"operator": longest, "dtypes": 14, "why": 20}
    maximum = {"operator": 40, "first shape": 28, "called from": 56}
    for name in columns:
        table.add_column(name, justify="right" if name in ("prefill", "decode") else "left",
                         no_wrap=name != "why", overflow="fold" if name == "why" else "ellipsis",
                         min_width=minimum.get(name, len(name)), max_width=maximum.get(name))
    for op in ops:
        style = _MARK.get(str(op.get("status")), ("?", ""))[1]
        mark = [Text(_MARK.get(str(op.get("status")), ("?", ""))[0], style=style)] if why else []
        row: list[Text | str] = [*mark, Text(_t(op.get("op")), style=style),
               f"{op.get('prefill_calls', 0):,}", f"{op.get('decode_calls', 0):,}",
               dtypes_text(op), shapes_text(op), site_text(op)]
        table.add_row(*row, *([_t(op.get("detail", ""))] if why else []))
    return table


def _fused(doc: Mapping[str, Any]) -> Table:
    table = Table(title="vendor fused ops the engine can use", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("op", "status", "detail"):
        table.add_column(name, overflow="fold")
    for op in doc.get("fused_ops", []):
        style = "green" if op.get("status") in ("admitted", "available") else "yellow"
        table.add_row(_t(op.get("name")), Text(_t(op.get("status")), style=style),
                      _t(op.get("detail")))
    return table


def render(doc: Mapping[str, Any], console: Console) -> None:
    for line in _header(doc):
        console.print(line)
    ops = doc.get("operators", [])
    lacking = [op for op in ops if op.get("status") in WARN]
    console.print(Text(summary_line(doc), style="bold yellow" if lacking else "bold green"))
    if lacking:
        console.print(_table(lacking, "operators WITHOUT a kernel on the device", why=True))
    native = [op for op in ops if op.get("status") == "native"]
    console.print(_table(native, "operators with a kernel on the device", why=False))
    composite = [_t(op.get("op")) for op in ops if op.get("status") == "composite"]
    if composite:
        console.print(Text(f"run by torch as other operators (composite): "
                           f"{', '.join(composite)}", style="dim"))
    if doc.get("fused_ops"):
        console.print(_fused(doc))
    for note in doc.get("notes", []):
        console.print(Text(f"note: {_t(note)}", style="dim"))
