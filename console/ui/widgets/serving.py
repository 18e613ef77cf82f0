"""Serving panel: a serving endpoint's load, KV cache, latency and throughput from its /metrics.

Every row says where its number came from or that the server does not export it; rates and
quantiles are over the window the snapshot names (deltas between scrapes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static

from console.history import History
from console.snapshots import ServingSnapshot
from console.sources import GENERATION_HISTORY_KEY
from console.ui import safe
from console.ui.widgets.npu import format_age, trend_text

if TYPE_CHECKING:
    from console.source import Source
    from console.ui.widgets.feed import FeedView, PanelSetup

NOT_EXPORTED = "not exported"
NO_TRAFFIC = "– (no requests)"  # in the window the status line names
WAITING_FIRST = "– (needs two scrapes)"

# row label, logical metric(s) it shows (console/serving.py, probes/serving_metrics.py)
ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("running", ("running",)),
    ("waiting", ("waiting",)),
    ("KV cache", ("kv_cache_usage",)),
    ("TTFT p50 / p95", ("ttft",)),
    ("ITL p50 / p95", ("itl",)),
    ("prompt tok/s", ("prompt_tokens",)),
    ("generation tok/s", ("generation_tokens",)),
    ("preemptions", ("preemptions",)),
    ("aborted requests", ("aborted_requests",)),
    ("failed requests", ("failed_requests",)),
)


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.0f} ms"


def _pair(low: float | None, high: float | None, snapshot: ServingSnapshot) -> str:
    if snapshot.window_s is None:
        return WAITING_FIRST
    if low is None and high is None:
        return NO_TRAFFIC
    return f"{_ms(low)} / {_ms(high)}"


def _rate(value: float | None, snapshot: ServingSnapshot) -> str:
    if snapshot.window_s is None:
        return WAITING_FIRST
    return "–" if value is None else f"{value:.1f}"


def _count(total: float | None, in_window: float | None) -> str:
    if total is None:
        return "–"
    return f"{total:g}" + ("" if in_window is None else f" (+{in_window:g})")


def row_values(s: ServingSnapshot) -> dict[str, str]:
    """Each row's text, before the not-exported rule is applied."""
    return {
        "running": "–" if s.running is None else f"{s.running:g}",
        "waiting": "–" if s.waiting is None else f"{s.waiting:g}",
        "KV cache": "–" if s.kv_cache_usage is None else f"{s.kv_cache_usage:.1%}",
        "TTFT p50 / p95": _pair(s.ttft_p50_s, s.ttft_p95_s, s),
        "ITL p50 / p95": _pair(s.itl_p50_s, s.itl_p95_s, s),
        "prompt tok/s": _rate(s.prompt_tokens_per_s, s),
        "generation tok/s": _rate(s.generation_tokens_per_s, s),
        "preemptions": _count(s.preemptions_total, s.preemptions_in_window),
        "aborted requests": _count(s.aborted_total, s.aborted_in_window),
        "failed requests": _count(s.failed_total, s.failed_in_window),
    }


def serving_table(snapshot: ServingSnapshot, columns: int = 2) -> Table:
    """The rows as label/value pairs, `columns` pairs a line (the panel keeps its height
    small so that the NPU panel below it stays on screen)."""
    grid = Table.grid(padding=(0, 1))
    for _ in range(columns):
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
    values = row_values(snapshot)
    missing = set(snapshot.not_exported)
    cells: list[str | Text] = []
    for label, logical in ROWS:
        cells.append(label)
        if all(m in missing for m in logical):
            cells.append(Text(NOT_EXPORTED, style="dim"))
        else:
            cells.append(safe.text(values[label]))
    width = 2 * columns
    for start in range(0, len(cells), width):
        row = cells[start:start + width]
        grid.add_row(*row, *[""] * (width - len(row)))
    return grid


def status_text(snapshot: ServingSnapshot, now: float) -> Text:
    if not snapshot.ok:
        return safe.text(snapshot.error or "no data", style="bold")
    text = safe.text(f"{snapshot.server} · {snapshot.url}")
    text.append(f" · data {format_age(now - snapshot.taken_at)} old", style="dim")
    if snapshot.window_s is not None:
        text.append(f" · window {snapshot.window_s:.0f} s", style="dim")
    return text


class ServingPanel(Widget):
    """The endpoint's serving metrics; `show()` draws one snapshot."""

    DEFAULT_CSS = """
    ServingPanel {
        height: auto;
        border: round $primary;
        padding: 0 1;
    }
    ServingPanel #serving-status { height: auto; }
    ServingPanel #serving-table { height: auto; }
    ServingPanel #serving-trend { height: 1; }
    """

    def __init__(self, url: str, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.url = url
        self.border_title = "Serving"

    def compose(self) -> ComposeResult:
        yield Static(safe.text(f"waiting for the first scrape of {self.url}…"),
                     id="serving-status")
        yield Static("", id="serving-table")
        yield Static("", id="serving-trend")

    @classmethod
    def for_feed(cls, feed: Source, panel_id: str, setup: PanelSetup) -> ServingPanel:
        return cls(setup.options.serving_metrics_url or "", id=panel_id)

    def show_feed(self, view: FeedView) -> None:
        if view.latest is not None:
            self.show(view.latest, view.history, view.now)

    def show(self, snapshot: ServingSnapshot, history: History, now: float) -> None:
        self.query_one("#serving-status", Static).update(status_text(snapshot, now))
        table = self.query_one("#serving-table", Static)
        table.display = snapshot.ok
        if snapshot.ok:
            table.update(serving_table(snapshot, 2 if self.size.width >= 60 else 1))
        trend = trend_text(history.values(GENERATION_HISTORY_KEY), " tok/s")
        self.query_one("#serving-trend", Static).update(
            Text(f"generation {trend}") if trend else Text(""))
