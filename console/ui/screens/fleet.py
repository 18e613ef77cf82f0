"""The fleet view: every node Prometheus scrapes, worst first; Enter shows one node's chips.

The screen only draws: console.fleet reads and ranks. Reads run in a worker thread (a
Prometheus answer may take its whole deadline) and come back as messages; node names, label
values and errors are outside text and go through console.ui.safe.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from console.fleet import Chip, Fleet, FleetReader, Node, fleet_limits
from console.ui import safe
from console.ui.widgets.npu import sparkline
from probes import prometheus_api

if TYPE_CHECKING:
    from textual.app import App

    from checks.policy import Policy

ReadFleet = Callable[[], Fleet]
ReadHistory = Callable[[Node], dict[int, list[float]]]
STYLE = {"gone": "bold white on red", "fail": "bold red", "warn": "yellow",
         "unknown": "dim", "ok": "green"}
WORD = {"gone": "GONE", "fail": "FAIL", "warn": "WARN", "unknown": "?", "ok": "ok"}
MIN_INTERVAL_S = 10.0  # a read is 11 instant queries: not every 2 s, for a whole fleet
# one reader per app: it remembers the nodes it saw, to mark the ones that go
_readers: weakref.WeakKeyDictionary[Any, FleetReader] = weakref.WeakKeyDictionary()


def open_fleet(app: App[Any], url: str | None, policy: Policy, interval_s: float) -> None:
    """Push the fleet view of the Prometheus at `url` (the console's --prometheus)."""
    if not url:
        safe.notify(app, "the fleet view reads Prometheus: start with --prometheus URL",
                    severity="warning")
        return
    reader = _readers.get(app)
    if reader is None:

        reader = FleetReader(prometheus_api.client(), url, fleet_limits(policy))
        _readers[app] = reader
    app.push_screen(FleetScreen(reader.read, reader.history, max(interval_s, MIN_INTERVAL_S)))


def _number(value: float | None, unit: str = "", digits: int = 0) -> str:
    return safe.NO_VALUE if value is None else f"{value:.{digits}f}{unit}"


def _level(level: str) -> Text:
    return Text(WORD.get(level, level), style=STYLE.get(level, ""))


class FleetRead(Message):
    def __init__(self, fleet: Fleet) -> None:
        super().__init__()
        self.fleet = fleet


class HistoryRead(Message):
    def __init__(self, history: dict[int, list[float]], error: str) -> None:
        super().__init__()
        self.history, self.error = history, error


class FleetScreen(Screen[None]):
    """Nodes worst first; Enter drills into one, r reads now, Esc goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "back", key_display="Esc"),
        Binding("r", "refresh", "read now"),
    ]
    DEFAULT_CSS = """
    FleetScreen #fleet-summary { height: auto; padding: 0 1; }
    FleetScreen #fleet-nodes { height: 1fr; }
    """

    def __init__(self, read: ReadFleet, history: ReadHistory | None = None,
                 interval_s: float = 10.0, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.read, self.read_history = read, history
        self.interval_s, self.clock = interval_s, clock
        self.fleet: Fleet | None = None

    def compose(self) -> ComposeResult:
        yield Static("reading the fleet from Prometheus…", id="fleet-summary")
        table: DataTable[Text] = DataTable(id="fleet-nodes", cursor_type="row")
        for label, key in (("", "level"), ("Node", "node"), ("NPUs", "chips"),
                           ("Hot", "hot"), ("HBM", "hbm"), ("Why", "why")):
            table.add_column(label, key=key)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.action_refresh()
        self.set_interval(self.interval_s, self.action_refresh, name="fleet")

    @work(thread=True, exclusive=True, group="fleet", exit_on_error=False)
    def action_refresh(self) -> None:
        self.post_message(FleetRead(self.read()))

    def on_fleet_read(self, message: FleetRead) -> None:
        chosen = self._chosen_name()  # the cursor stays on its node as the ranking moves
        self.fleet = message.fleet
        self.query_one("#fleet-summary", Static).update(self._summary(message.fleet))
        table: DataTable[Text] = self.query_one(DataTable)
        table.clear()
        for node in message.fleet.nodes:
            table.add_row(_level(node.level), safe.text(node.name), Text(str(len(node.chips))),
                          Text(_number(node.hottest_c, "°")),
                          Text(_number(node.worst_hbm_percent, "%")),
                          safe.text(node.reasons[0] if node.reasons else ""), key=node.name)
        names = [n.name for n in message.fleet.nodes]
        if chosen in names:
            table.move_cursor(row=names.index(chosen))

    def _chosen_name(self) -> str | None:
        table: DataTable[Text] = self.query_one(DataTable)
        if self.fleet is None or not table.row_count:
            return None
        row = table.cursor_row
        return self.fleet.nodes[row].name if 0 <= row < len(self.fleet.nodes) else None

    def _summary(self, fleet: Fleet) -> Text:
        counts = fleet.counts()
        shown = ", ".join(f"{counts[k]} {k}" for k in counts if counts[k])
        out = Text(f"{len(fleet.nodes)} nodes: {shown or 'none scraped'}", style="bold")
        out.append("  Enter: a node's chips", style="dim")
        if fleet.error:
            out.append("\n")
            out.append(safe.text(f"last read failed: {fleet.error}", style="red"))
        for note in fleet.notes[:3]:
            out.append("\n")
            out.append(safe.text(note, style="yellow"))
        return out

    @on(DataTable.RowSelected, "#fleet-nodes")
    def _drill(self, event: DataTable.RowSelected) -> None:
        if self.fleet is None:
            return
        node = next((n for n in self.fleet.nodes if n.name == event.row_key.value), None)
        if node is not None:
            self.app.push_screen(NodeScreen(node, self.read_history, self.clock))

    def action_close(self) -> None:
        self.app.pop_screen()


class NodeScreen(Screen[None]):
    """One node's chips, worst first, with their temperature over the last half hour."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "back", key_display="Esc")]
    DEFAULT_CSS = """
    NodeScreen #node-summary { height: auto; padding: 0 1; }
    NodeScreen #node-chips { height: 1fr; }
    """

    def __init__(self, node: Node, history: ReadHistory | None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.node, self.read_history, self.clock = node, history, clock

    def compose(self) -> ComposeResult:
        yield Static(self._summary(), id="node-summary")
        table: DataTable[Text] = DataTable(id="node-chips", cursor_type="row")
        for label, key in (("", "level"), ("NPU", "npu"), ("Temp", "temp"),
                           ("vs fleet", "fleet"), ("HBM", "hbm"), ("AICore", "aicore"),
                           ("30 min", "history"), ("Why", "why")):
            table.add_column(label, key=key)
        for chip in self.node.chips:
            table.add_row(*self._cells(chip), key=str(chip.npu_id))
        yield table
        yield Footer()

    def _summary(self) -> Text:
        node = self.node
        out = Text.assemble(_level(node.level), " ", safe.text(node.name, style="bold"),
                            f"  {len(node.chips)} NPUs")
        if node.doctor is not None:
            out.append("\n" + node.doctor.line(self.clock()))
        for reason in node.reasons[:4]:
            out.append("\n")
            out.append(safe.text(reason))
        return out

    @staticmethod
    def _cells(chip: Chip) -> tuple[Text, ...]:
        above = chip.above_fleet_c
        return (_level(chip.level), Text(str(chip.npu_id)),
                Text(_number(chip.value("temperature_c"), "°C")),
                Text(safe.NO_VALUE if above is None else f"{above:+.0f}°C"),
                Text(_number(chip.hbm_percent, "%")),
                Text(_number(chip.value("aicore_percent"), "%")), Text(""),
                safe.text("; ".join(chip.reasons)))

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        if self.read_history is not None and self.node.chips:
            self._history()

    @work(thread=True, exclusive=True, group="node-history", exit_on_error=False)
    def _history(self) -> None:
        assert self.read_history is not None
        try:
            self.post_message(HistoryRead(self.read_history(self.node), ""))
        except Exception as exc:  # a failed range query costs the sparklines, not the screen
            self.post_message(HistoryRead({}, str(exc)))

    def on_history_read(self, message: HistoryRead) -> None:
        table: DataTable[Text] = self.query_one(DataTable)
        for chip in self.node.chips:
            values = message.history.get(chip.npu_id, [])
            table.update_cell(str(chip.npu_id), "history", Text(sparkline(values, 12)))
        if message.error:
            safe.notify(self.app, message.error, title="history", severity="warning")

    def action_close(self) -> None:
        self.app.pop_screen()
