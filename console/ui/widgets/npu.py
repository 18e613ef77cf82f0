"""NPU panel: one row per chip with a temperature sparkline, and the process list with a filter.

Data arrives only through `NpuPanel.show()`; the widget never runs npu-smi itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from checks.health import HealthLevel, health_level
from checks.thermal import ThermalLimits, ThermalVerdict, thermal_limits
from console.alerts import thermal_verdicts
from console.history import History
from console.snapshots import ChipSample, NpuSnapshot, ProcessSample
from console.sources import temperature_history_key
from console.ui import safe

if TYPE_CHECKING:
    from console.source import Source
    from console.ui.widgets.feed import FeedView, PanelSetup

Level = HealthLevel  # the same four words colour temperatures too
LEVEL_STYLES: dict[Level, str] = {
    "ok": "green",
    "warn": "bold yellow",
    "fail": "bold white on red",
    "unknown": "dim",
}
LEVEL_ORDER: dict[Level, int] = {"unknown": 0, "ok": 1, "warn": 2, "fail": 3}
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 16
NO_VALUE = "–"

CHIP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("npu", "NPU"),
    ("chip", "Chip"),
    ("name", "Name"),
    ("health", "Health"),
    ("temp", "Temp"),
    ("power", "Power"),
    ("aicore", "AICore"),
    ("hbm", "HBM used / total"),
    ("trend", "Temp history"),
)
PROCESS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("npu", "NPU"),
    ("chip", "Chip"),
    ("pid", "PID"),
    ("name", "Process"),
    ("memory", "HBM"),
)


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """The last `width` values as unicode blocks, scaled between their own min and max."""
    recent = list(values)[-width:]
    if not recent:
        return ""
    low, high = min(recent), max(recent)
    if high <= low:
        return SPARK_BLOCKS[0] * len(recent)
    top = len(SPARK_BLOCKS) - 1
    return "".join(SPARK_BLOCKS[round((v - low) / (high - low) * top)] for v in recent)


def trend_text(values: Sequence[float], unit: str, width: int = SPARK_WIDTH) -> str:
    """A sparkline with its scale: the range its lowest and highest blocks stand for."""
    recent = list(values)[-width:]
    if not recent:
        return ""
    low, high = min(recent), max(recent)
    scale = f"{low:g}{unit}" if high <= low else f"{low:g}–{high:g}{unit}"
    return f"{sparkline(recent, width)} {scale}"


def format_mb(used_mb: int | None, total_mb: int | None) -> str:
    if used_mb is None and total_mb is None:
        return NO_VALUE
    used = NO_VALUE if used_mb is None else str(used_mb)
    total = NO_VALUE if total_mb is None else str(total_mb)
    percent = f" ({100 * used_mb / total_mb:.0f}%)" if used_mb is not None and total_mb else ""
    return f"{used} / {total} MB{percent}"


def format_age(age_s: float) -> str:
    if age_s < 60:
        return f"{max(age_s, 0.0):.1f} s"
    if age_s < 3600:
        return f"{age_s / 60:.0f} min"
    return f"{age_s / 3600:.1f} h"


def _num(value: float | None, unit: str, fmt: str = "g") -> str:
    return NO_VALUE if value is None else f"{value:{fmt}}{unit}"


def process_matches(process: ProcessSample, text: str) -> bool:
    """Case-insensitive substring match on pid, name and "npu/chip"."""
    needle = text.strip().lower()
    if not needle:
        return True
    chip = "-" if process.chip_id is None else str(process.chip_id)
    haystack = f"{process.pid} {process.name} {process.npu_id}/{chip}".lower()
    return needle in haystack


class NpuPanel(Widget):
    """Chips (temperature/HBM/power/AI-core/health, coloured by policy) and their processes."""

    DEFAULT_CSS = """
    NpuPanel {
        height: auto;
        border: round $primary;
        border-title-color: $text;
        padding: 0 1;
    }
    NpuPanel #npu-status { height: auto; }
    NpuPanel #npu-status.-stale { background: $warning 30%; }
    NpuPanel #npu-status.-error { color: $error; text-style: bold; }
    NpuPanel #npu-chips { height: auto; max-height: 20; }
    NpuPanel #npu-filter { height: 1; border: none; padding: 0 1; background: $boost; }
    NpuPanel #npu-processes { height: auto; max-height: 12; }
    NpuPanel #npu-process-note { height: auto; color: $text-muted; }
    """

    def __init__(
        self,
        thermal: ThermalLimits,
        *,
        source: str = "",
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.thermal = thermal  # the doctor's temperature rule colours the temperatures
        self._thermal_verdicts: dict[str, ThermalVerdict] = {}
        self._processes: tuple[ProcessSample, ...] = ()
        self._processes_known = False
        self._history = History(maxlen=1)
        self.source = source  # "" for this machine's npu-smi, else the exporter's host:port
        self.border_title = safe.text(f"NPU · {source}" if source else "NPU")

    def compose(self) -> ComposeResult:
        first = (safe.text(f"waiting for {self.source}…") if self.source
                 else "waiting for the first npu-smi sample…")
        yield Static(first, id="npu-status")
        chips: DataTable[Text] = DataTable(
            id="npu-chips", cursor_type="row", zebra_stripes=True)
        for key, label in CHIP_COLUMNS:
            chips.add_column(label, key=key)
        yield chips
        yield Input(placeholder="filter processes by pid, name or npu/chip", id="npu-filter")
        processes: DataTable[Text] = DataTable(id="npu-processes", cursor_type="row")
        for key, label in PROCESS_COLUMNS:
            processes.add_column(label, key=key)
        yield processes
        yield Static("", id="npu-process-note")

    # -- public API -------------------------------------------------------------------------

    @classmethod
    def for_feed(cls, feed: Source, panel_id: str, setup: PanelSetup) -> NpuPanel:
        return cls(thermal_limits(setup.policy), source=feed.feed, id=panel_id)

    def show_feed(self, view: FeedView) -> None:
        """The last good snapshot (a failed sample keeps it on screen, marked stale in time)."""
        shown = view.last_good or view.latest
        if shown is not None:
            self.show(shown, view.history, view.now, view.stale)

    def show(self, snapshot: NpuSnapshot, history: History, now: float, stale: bool) -> None:
        """Draw one snapshot; `stale` marks data that npu-smi has not refreshed in time."""
        self._history = history
        self._show_status(snapshot, now, stale)
        if not snapshot.ok:
            self._show_chips(())
            self._processes, self._processes_known = (), False
            self._show_processes(error=True)
            return
        self._show_chips(snapshot.chips)
        self._processes, self._processes_known = snapshot.processes, snapshot.processes_known
        self._show_processes()

    @property
    def filter_text(self) -> str:
        return self.query_one("#npu-filter", Input).value

    # -- status line ------------------------------------------------------------------------

    def _show_status(self, snapshot: NpuSnapshot, now: float, stale: bool) -> None:
        status = self.query_one("#npu-status", Static)
        status.set_class(stale, "-stale")
        status.set_class(not snapshot.ok, "-error")
        status.update(self._status_text(snapshot, now, stale))

    def _status_text(self, snapshot: NpuSnapshot, now: float, stale: bool) -> Text:
        text = Text()
        if stale:
            text.append(" STALE ", style="bold white on red")
            text.append(" ")
        if not snapshot.ok and snapshot.source:
            text.append_text(safe.text(f"no data from {snapshot.source}: {snapshot.error}",
                                       style="bold"))
            return text
        if not snapshot.ok:
            text.append_text(safe.text(f"no NPU found: {snapshot.error}", style="bold"))
            return text
        chips = len(snapshot.chips)
        text.append(f"{chips} chip{'s' if chips != 1 else ''}")
        text.append(f" · data {format_age(now - snapshot.taken_at)} old")
        tool = "the exporter" if snapshot.source else "npu-smi"
        text.append(f" · {tool} took {snapshot.sample_duration_s:.2f} s", style="dim")
        text.append(f" · temp warn: +{self.thermal.above_peers_warn_c:g} °C over peers' median",
                    style="dim")
        return text

    # -- chips ------------------------------------------------------------------------------

    def _show_chips(self, chips: Sequence[ChipSample]) -> None:
        self._thermal_verdicts = thermal_verdicts(chips, self.thermal)
        table: DataTable[Text] = self.query_one("#npu-chips", DataTable)
        rows = {chip.key: self._chip_cells(chip) for chip in chips}
        if [key.value for key in table.rows] == list(rows):
            for key, cells in rows.items():
                for (column, _), cell in zip(CHIP_COLUMNS, cells, strict=True):
                    table.update_cell(key, column, cell)
            return
        table.clear()
        for key, cells in rows.items():
            table.add_row(*cells, key=key)

    def _chip_cells(self, chip: ChipSample) -> list[Text]:
        temp_level = self._temperature_level(chip)
        used_mb, total_mb = chip.hbm_used_mb, chip.hbm_total_mb
        if used_mb is None and total_mb is None:  # 310P: only its DDR is shown
            used_mb, total_mb = chip.memory_used_mb, chip.memory_total_mb
        trend = trend_text(self._history.values(temperature_history_key(chip.key)), " °C")
        level = self.chip_level(chip)
        return [
            Text(str(chip.npu_id), style=LEVEL_STYLES[level] if level in ("warn", "fail") else ""),
            Text(NO_VALUE if chip.chip_id is None else str(chip.chip_id)),
            safe.text(chip.name),
            safe.text(chip.health, style=LEVEL_STYLES[health_level(chip.health)]),
            Text(_num(chip.temperature_c, " °C"), style=LEVEL_STYLES[temp_level]),
            Text(_num(chip.power_w, " W", ".1f")),
            Text(_num(chip.aicore_percent, " %")),
            Text(format_mb(used_mb, total_mb)),
            Text(trend, style=LEVEL_STYLES[temp_level]),
        ]

    def _temperature_level(self, chip: ChipSample) -> Level:
        verdict = self._thermal_verdicts.get(chip.key)
        return "unknown" if verdict is None else verdict.level

    def chip_level(self, chip: ChipSample) -> Level:
        """The worse of the chip's temperature and health levels (its NPU id is coloured so)."""
        levels = (self._temperature_level(chip), health_level(chip.health))
        return max(levels, key=LEVEL_ORDER.__getitem__)

    # -- processes --------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "npu-filter":
            event.stop()
            self._show_processes()

    def _show_processes(self, error: bool = False) -> None:
        table: DataTable[Text] = self.query_one("#npu-processes", DataTable)
        table.clear()
        shown = [p for p in self._processes if process_matches(p, self.filter_text)]
        for process in shown:
            table.add_row(*self._process_cells(process))
        note = self.query_one("#npu-process-note", Static)
        note.update(safe.text(self._process_note(len(shown), error)))

    def _process_note(self, shown: int, error: bool) -> str:
        if error:
            return ""
        if not self._processes_known:
            return "process list unknown: npu-smi printed no process section"
        if not self._processes:
            return "no processes on any NPU"
        if shown < len(self._processes):
            return f"{shown} of {len(self._processes)} processes match {self.filter_text!r}"
        return ""

    @staticmethod
    def _process_cells(process: ProcessSample) -> list[Text]:
        return [
            Text(str(process.npu_id)),
            Text(NO_VALUE if process.chip_id is None else str(process.chip_id)),
            Text(str(process.pid)),
            safe.text(process.name or None),
            Text(_num(process.memory_mb, " MB")),
        ]
