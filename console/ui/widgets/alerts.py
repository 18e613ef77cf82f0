"""Alerts panel: raised alerts with their time, level, message and value, newest first."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import DataTable, Static

from console.snapshots import Alert
from console.ui import safe

LEVEL_STYLES = {"warn": "bold yellow", "fail": "bold white on red"}
ALERT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("time", "Time"),
    ("level", "Level"),
    ("message", "Message"),
    ("value", "Value"),
)


def format_clock(epoch_s: float) -> str:
    """Local wall-clock time of an alert, HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(epoch_s))


class AlertsPanel(Widget):
    """The alert log; `show()` replaces the list (the caller owns the bounded log)."""

    DEFAULT_CSS = """
    AlertsPanel {
        height: auto;
        max-height: 12;
        border: round $primary;
        padding: 0 1;
    }
    AlertsPanel.-empty { border: none; height: 1; }
    AlertsPanel #alerts-empty { height: auto; color: $text-muted; }
    AlertsPanel #alerts-table { height: auto; max-height: 10; }
    """

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.border_title = "Alerts"
        self.add_class("-empty")  # one line, no border: the rows go to the panels

    def compose(self) -> ComposeResult:
        yield Static("no alerts raised", id="alerts-empty")
        table: DataTable[Text] = DataTable(id="alerts-table", cursor_type="row")
        for key, label in ALERT_COLUMNS:
            table.add_column(label, key=key)
        yield table

    def show(self, alerts: Sequence[Alert]) -> None:
        table: DataTable[Text] = self.query_one("#alerts-table", DataTable)
        table.clear()
        for alert in sorted(alerts, key=lambda a: a.raised_at, reverse=True):
            table.add_row(*self._cells(alert))
        self.query_one("#alerts-empty", Static).display = not alerts
        table.display = bool(alerts)
        self.border_title = f"Alerts ({len(alerts)})" if alerts else "Alerts"
        self.set_class(not alerts, "-empty")

    @staticmethod
    def _cells(alert: Alert) -> list[Text]:
        style = LEVEL_STYLES.get(alert.level, "")
        return [
            Text(format_clock(alert.raised_at)),
            safe.text(alert.level.upper(), style=style),
            safe.text(alert.message),
            safe.text(alert.value),
        ]
