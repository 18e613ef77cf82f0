"""Engine panel: what the in-process engine runs on, its KV cache, and how fast its last
generation went.

The KV cache's base-address alignment is shown for information: the engine allocates it
512-byte aligned by its own choice, and no vendor source asks a KV cache for an alignment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Sparkline, Static

from console.history import History
from console.snapshots import EngineSnapshot
from console.sources import DECODE_HISTORY_KEY, PREFILL_HISTORY_KEY
from console.ui import safe

if TYPE_CHECKING:
    from console.source import Source
    from console.ui.widgets.feed import FeedView, PanelSetup

NO_MODEL = "no model loaded"
REMOTE_ENGINE = "the engine runs behind --endpoint: see the Serving panel"
NO_VALUE = "–"
KV_ALIGNMENT_NOTE = "informational: no vendor source asks for an alignment"


def format_rate(tokens_per_s: float | None) -> str:
    return NO_VALUE if tokens_per_s is None else f"{tokens_per_s:.1f} tok/s"


def format_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - the loop always returns


def kv_occupancy_text(snapshot: EngineSnapshot) -> str:
    return (f"{snapshot.kv_occupancy:.0%} ({snapshot.kv_tokens_used} / "
            f"{snapshot.max_seq_len} positions)")


def engine_facts(snapshot: EngineSnapshot) -> list[tuple[str, str]]:
    ttft = NO_VALUE if snapshot.ttft_s is None else f"{snapshot.ttft_s * 1000:.0f} ms"
    kernel = [("CPU kernel", snapshot.kernel_layers)] if snapshot.kernel_layers else []
    # related facts share a line: the panel stays short enough for the others to show
    return [
        ("device", f"{snapshot.device} · {snapshot.dtype} · {snapshot.architecture}"),
        ("fp8 mode", f"{snapshot.fp8_mode} ({snapshot.fp8_decode})" if snapshot.fp8_decode
         else snapshot.fp8_mode),
        ("fused ops", ", ".join(snapshot.fused_ops) or "none active (standard torch ops)"),
        *kernel,
        ("speed", f"TTFT {ttft} · prefill {format_rate(snapshot.prefill_tokens_per_s)} · "
                  f"decode {format_rate(snapshot.decode_tokens_per_s)}"),
        ("KV cache", f"{format_bytes(snapshot.kv_cache_bytes)}, {kv_occupancy_text(snapshot)}"
                     f" · layout {snapshot.kv_layout}"),
        ("KV alignment", f"{snapshot.kv_alignment_bytes} B base address ({KV_ALIGNMENT_NOTE})"),
    ]


def trend_label(name: str, values: list[float]) -> str:
    """A sparkline's name with its scale: its lowest bar is the smallest value shown, its
    highest the largest (Textual's Sparkline scales to the data's own range)."""
    if not values:
        return name
    return f"{name} {min(values):.1f}–{max(values):.1f} tok/s"


def facts_table(rows: list[tuple[str, str]]) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for label, value in rows:
        grid.add_row(label, safe.text(value))
    return grid


class EnginePanel(Widget):
    """Engine facts plus prefill and decode tokens/s sparklines from the History."""

    DEFAULT_CSS = """
    EnginePanel {
        height: auto;
        border: round $primary;
        padding: 0 1;
    }
    EnginePanel #engine-facts { height: auto; }
    EnginePanel .engine-trend { height: 1; }
    EnginePanel .engine-trend-label { width: auto; min-width: 10; padding-right: 1; }
    EnginePanel Sparkline { width: 1fr; height: 1; }
    """

    def __init__(
        self, *, empty: str = NO_MODEL, name: str | None = None, id: str | None = None,
        classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.border_title = "Engine"
        self.empty = empty  # what the panel says with no engine in this process

    def compose(self) -> ComposeResult:
        yield Static(self.empty, id="engine-facts")
        # no trend lines until the engine has a snapshot (none ever beside an endpoint)
        with Horizontal(classes="engine-trend") as prefill:
            prefill.display = False
            yield Static("prefill", id="engine-prefill-label", classes="engine-trend-label")
            yield Sparkline([], id="engine-prefill-trend")
        with Horizontal(classes="engine-trend") as decode:
            decode.display = False
            yield Static("decode", id="engine-decode-label", classes="engine-trend-label")
            yield Sparkline([], id="engine-decode-trend")

    @classmethod
    def for_feed(cls, feed: Source, panel_id: str, setup: PanelSetup) -> EnginePanel:
        return cls(id=panel_id, empty=REMOTE_ENGINE if setup.options.endpoint else NO_MODEL)

    def show_feed(self, view: FeedView) -> None:
        self.show(view.latest, view.history)

    def show(self, snapshot: EngineSnapshot | None, history: History) -> None:
        facts = self.query_one("#engine-facts", Static)
        if snapshot is None:
            facts.update(safe.text(self.empty, style="dim"))
        else:
            facts.update(facts_table(engine_facts(snapshot)))
        for trend in self.query(".engine-trend"):
            trend.display = snapshot is not None
        for name, key in (("prefill", PREFILL_HISTORY_KEY), ("decode", DECODE_HISTORY_KEY)):
            values = history.values(key)
            self.query_one(f"#engine-{name}-trend", Sparkline).data = values
            self.query_one(f"#engine-{name}-label", Static).update(trend_label(name, values))
