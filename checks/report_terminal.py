"""The terminal report of a doctor run: grouped by category, one line per check."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby

from rich.console import Console
from rich.text import Text

from checks.model import Result, Status
from checks.report import TOOL_VERSION, HostInfo
from checks.runner import Run

_LABEL: Mapping[Status, tuple[str, str]] = {
    "pass": ("PASS", "green"),
    "warn": ("WARN", "yellow"),
    "fail": ("FAIL", "bold red"),
    "skip": ("SKIP", "dim"),
    "error": ("ERROR", "magenta"),
}


def render_terminal(run: Run, host: HostInfo, console: Console, verbose: bool = False) -> None:
    console.print(Text(f"ascend-doctor {TOOL_VERSION} — {host.description}", style="bold"))
    console.print(f"python: {host.python}   policy: {host.policy}"
                  + (f"   model: {host.model}" if host.model else ""))
    for category, results in groupby(run.results, key=lambda r: r.category):
        console.print()
        console.print(Text(category, style="bold underline"))
        for result in results:
            _render_result(result, console, verbose)
    console.print()
    console.print(summary_line(run))


def _render_result(result: Result, console: Console, verbose: bool) -> None:
    label, style = _LABEL[result.status]
    line = Text("  ")
    line.append(f"{label:<5}", style=style)
    line.append(f" {result.id:<22} ", style="bold")
    line.append(result.summary)
    console.print(line)
    if result.waiver:
        _detail(console, f"waived: {result.waiver}", "dim")
    if verbose or result.status in ("warn", "fail", "error"):
        for item in result.evidence:
            _detail(console, f"· {item}", "dim")
    if result.status in ("warn", "fail", "error"):
        if result.remedy:
            _detail(console, f"fix: {result.remedy}")
        _detail(console, f"see: ascend-doctor explain {result.playbook}", "cyan")


def _detail(console: Console, text: str, style: str = "") -> None:
    console.print(Text(" " * 8 + text, style=style))


def summary_line(run: Run) -> Text:
    counts = run.counts()
    words: tuple[tuple[Status, str], ...] = (
        ("pass", "passed"), ("warn", "warnings"), ("fail", "failed"),
        ("skip", "skipped"), ("error", "errors"))
    parts = [f"{counts[s]} {word}" for s, word in words if counts[s]]
    verdict = {0: "no problems found", 1: "usable, with warnings", 2: "NOT ready"}[run.exit_code()]
    noun = "check" if len(run.results) == 1 else "checks"
    text = Text(f"{len(run.results)} {noun}: " + ", ".join(parts) + f" in "
                f"{run.duration_ms / 1000:.1f} s — ")
    text.append(verdict, style={0: "green", 1: "yellow", 2: "bold red"}[run.exit_code()])
    return text
