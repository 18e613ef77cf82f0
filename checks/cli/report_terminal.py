"""The terminal report of a doctor run: grouped by category, one line per check."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby
from typing import TextIO

from checks.cli.ansi import Span, Writer
from checks.model import Result, Status
from checks.report import TOOL_VERSION, HostInfo, target_lines
from checks.runner import Run

_LABEL: Mapping[Status, tuple[str, str]] = {
    "pass": ("PASS", "green"),
    "warn": ("WARN", "yellow"),
    "fail": ("FAIL", "bold red"),
    "skip": ("SKIP", "dim"),
    "error": ("ERROR", "magenta"),
}
_VERDICT = {0: ("no problems found", "green"), 1: ("usable, with warnings", "yellow"),
            2: ("NOT ready", "bold red")}
_DETAIL_INDENT = 8


def render_terminal(run: Run, host: HostInfo, stream: TextIO, verbose: bool = False,
                    color: bool | None = None, width: int | None = None) -> None:
    out = Writer(stream, color, width)
    out.line((f"ascend-doctor {TOOL_VERSION} — {host.description}", "bold"))
    for number, text in enumerate(target_lines(host.target)):
        style = "bold" if number == 0 else ("yellow" if text.startswith("  !") else "dim")
        out.line((text, style))
    out.line((f"python: {host.python}   policy: {host.policy}"
              + (f"   model: {host.model}" if host.model else ""), ""))
    for category, results in groupby(run.results, key=lambda r: r.category):
        stream.write("\n")
        out.line((category, "bold underline"))
        for result in results:
            _render_result(result, out, verbose)
    stream.write("\n")
    out.line(*summary_line(run), hang=0)


def _render_result(result: Result, out: Writer, verbose: bool) -> None:
    label, style = _LABEL[result.status]
    out.line(("  ", ""), (f"{label:<5}", style), (f" {result.id:<22} ", "bold"),
             (result.summary, ""))
    if result.waiver:
        _detail(out, f"waived: {result.waiver}", "dim")
    if verbose and result.rules:
        _detail(out, f"rules: {', '.join(result.rules)}", "dim")
    if verbose or result.status in ("warn", "fail", "error"):
        for item in result.evidence:
            _detail(out, f"· {item}", "dim")
    if result.status in ("warn", "fail", "error"):
        if result.remedy:
            _detail(out, f"fix: {result.remedy}")
        _detail(out, f"see: ascend-doctor explain {result.playbook}", "cyan")


def _detail(out: Writer, text: str, style: str = "") -> None:
    out.line((" " * _DETAIL_INDENT, ""), (text, style), hang=_DETAIL_INDENT + 2)


def summary_line(run: Run) -> tuple[Span, ...]:
    counts = run.counts()
    words: tuple[tuple[Status, str], ...] = (
        ("pass", "passed"), ("warn", "warnings"), ("fail", "failed"),
        ("skip", "skipped"), ("error", "errors"))
    parts = [f"{counts[s]} {word}" for s, word in words if counts[s]]
    noun = "check" if len(run.results) == 1 else "checks"
    verdict, style = _VERDICT[run.exit_code()]
    return ((f"{len(run.results)} {noun}: " + ", ".join(parts) + " in "
             f"{run.duration_ms / 1000:.1f} s — ", ""), (verdict, style))
