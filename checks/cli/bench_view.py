"""Rendering of `ascend-doctor bench` (an ascend-doctor-bench/1 document, and a comparison).

The table is sorted by percent of roofline, lowest first: the operators furthest from what
this device measured it can do are the ones to look at. Text from a document (names, device
names from another machine) is shown, never obeyed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from checks.bench_compare import Comparison, change_text, summary
from probes.textsafe import one_line

LOW_PCT = 25.0  # shown in yellow: a quarter of the roofline or less


def _t(value: Any) -> str:
    return one_line(str(value))


def duration_text(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def achieved_text(op: Mapping[str, Any]) -> str:
    if op.get("bound") == "compute":
        return f"{float(op.get('tflop_per_s', 0)):.3g} TFLOP/s"
    return f"{float(op.get('gb_per_s', 0)):.3g} GB/s"


def header_lines(doc: Mapping[str, Any]) -> list[str]:
    peaks = doc.get("peaks") or {}
    count = doc.get("threads")
    threads = f", {count} thread{'' if count == 1 else 's'}" if count else ""
    fp8 = f", FP8 {doc['fp8_mode']}" if doc.get("fp8_mode") else ""
    npu = f", torch_npu {doc['torch_npu']}" if doc.get("torch_npu") else ""
    return [f"ascend-doctor bench: {_t(doc.get('model'))} ({_t(doc.get('architecture'))}, "
            f"{_t(doc.get('dtype'))}{fp8})",
            f"  device: {_t(doc.get('device'))} {_t(doc.get('device_name'))}{threads}, "
            f"torch {_t(doc.get('torch'))}{npu}",
            f"  measured peaks: copy {float(peaks.get('copy_gb_per_s', 0)):.1f} GB/s "
            f"({_t(peaks.get('copy_shape'))}), matmul "
            f"{float(peaks.get('matmul_tflop_per_s', 0)):.3g} TFLOP/s "
            f"({_t(peaks.get('matmul_shape'))}, {_t(doc.get('dtype'))})"]


def results_table(doc: Mapping[str, Any]) -> Table:
    table = Table(title="hot operators at the model's shapes, furthest from the roofline first",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("operator", "shape", "weights", "median", "achieved", "% of roofline",
                 "bound"):
        table.add_column(name, justify="right" if name in ("median", "achieved",
                                                           "% of roofline") else "left",
                         overflow="fold" if name == "shape" else "ellipsis")
    for op in doc.get("operators", []):
        pct = float(op.get("pct_of_roofline", 0))
        style = "yellow" if pct <= LOW_PCT else ""
        table.add_row(_t(op.get("name")), _t(op.get("shape")), _t(op.get("dtype")),
                      duration_text(float(op.get("median_s", 0))), achieved_text(op),
                      Text(f"{pct:.0f}%", style=style), _t(op.get("bound")))
    return table


def render(doc: Mapping[str, Any], console: Console) -> None:
    for line in header_lines(doc):
        console.print(Text(line))
    console.print(results_table(doc))
    for note in doc.get("notes", []):
        console.print(Text(f"note: {_t(note)}", style="dim"))


def render_comparison(comparison: Comparison, console: Console) -> None:
    table = Table(title=f"against {_t(comparison.other)} (time here / time there)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("operator", "there", "here", "change"):
        table.add_column(name, justify="left" if name == "operator" else "right")
    for peak in comparison.peaks:
        table.add_row(f"peak {peak.name} ({peak.unit})", f"{peak.then:.3g}", f"{peak.now:.3g}",
                      change_text(1 / peak.ratio))
    slower = set(id(d) for d in comparison.slower)
    for delta in comparison.deltas:
        note = " (shape differs)" if delta.shape_changed else ""
        style = "bold yellow" if id(delta) in slower else ""
        table.add_row(Text(_t(delta.name) + note, style=style),
                      duration_text(delta.then_s) if delta.then_s else "not measured",
                      duration_text(delta.now_s) if delta.now_s else "not measured",
                      Text(change_text(delta.ratio), style=style))
    console.print(table)
    style = "bold yellow" if comparison.slower else "bold green"
    console.print(Text(summary(comparison), style=style))


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[int, int, str], None] | None]:
    """A transient progress bar on stderr (a terminal only), fed with (done, total, name)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return

    from checks.terminal import make_console

    with Progress(TextColumn("bench"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), console=make_console(sys.stderr),
                  transient=True) as bar:
        task = bar.add_task("", total=None)

        def update(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, description=one_line(name))

        yield update
