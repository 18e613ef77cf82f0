"""Memory-pressure panel ("bandwidth and bank conflicts").

Three sources, each labelled for what it is: the per-chip HBM bandwidth % against AI-core %
(a heuristic reading of two npu-smi counters, never a measurement of boundness), the engine's
KV cache (layout, base-address alignment, size, occupancy), and msprof's per-operator UB bank
conflict ratios (measured PMU counters) when a profile was given.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import DataTable, Static

from console.msprof import OpConflict
from console.snapshots import ChipSample, EngineSnapshot, NpuSnapshot
from console.ui.widgets.engine_panel import format_bytes, kv_occupancy_text

HEURISTIC_LABEL = "heuristic: high HBM-BW% with low AI-core% suggests memory-bound"
MSPROF_LABEL = "msprof measurements: UB bank-conflict ratio per operator (highest first)"
NO_VALUE = "–"
HIGH_PERCENT = 60.0
LOW_PERCENT = 30.0
IDLE_PERCENT = 10.0
MAX_CONFLICTS = 8
CONFLICT_WARN = 0.05
CONFLICT_FAIL = 0.20

PRESSURE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("chip", "Chip"),
    ("hbm_bw", "HBM-BW %"),
    ("aicore", "AI-core %"),
    ("reading", "Heuristic reading"),
)
CONFLICT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("operator", "Operator"),
    ("bank", "Bank"),
    ("bankgroup", "Bank group"),
    ("worst", "Worst row"),
    ("rows", "Rows"),
)


def heuristic_reading(hbm_bandwidth_percent: float | None,
                      aicore_percent: float | None) -> Text:
    """What the two counters suggest, worded as a suggestion (facts HARDWARE.md §5)."""
    if hbm_bandwidth_percent is None or aicore_percent is None:
        return Text("not sampled (npu-smi info -t usages)", style="dim")
    if hbm_bandwidth_percent >= HIGH_PERCENT and aicore_percent < LOW_PERCENT:
        return Text("suggests memory-bound", style="bold yellow")
    if aicore_percent >= HIGH_PERCENT:
        return Text("suggests compute-bound", style="green")
    if hbm_bandwidth_percent < IDLE_PERCENT and aicore_percent < IDLE_PERCENT:
        return Text("idle, or host/launch-bound", style="dim")
    return Text("no clear pressure")


def _percent(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.0f} %"


def chip_label(chip: ChipSample) -> str:
    return f"NPU {chip.key}"


def ratio_text(ratio: float | None) -> Text:
    if ratio is None:
        return Text(NO_VALUE, style="dim")
    style = "bold red" if ratio >= CONFLICT_FAIL else "yellow" if ratio >= CONFLICT_WARN else ""
    return Text(f"{ratio:.1%}", style=style)


def kv_table(engine: EngineSnapshot) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("KV layout", Text(engine.kv_layout))
    grid.add_row("alignment", Text(f"{engine.kv_alignment_bytes} B base-address alignment"))
    grid.add_row("KV bytes", Text(format_bytes(engine.kv_cache_bytes)))
    grid.add_row("occupancy", Text(kv_occupancy_text(engine)))
    return grid


class PressurePanel(Widget):
    """HBM-BW % vs AI-core % per chip (heuristic), the engine KV cache, msprof conflicts."""

    DEFAULT_CSS = """
    PressurePanel {
        height: auto;
        border: round $primary;
        padding: 0 1;
    }
    PressurePanel .pressure-label { height: auto; color: $text-muted; text-style: italic; }
    PressurePanel #pressure-chips { height: auto; max-height: 18; }
    PressurePanel #pressure-kv { height: auto; margin-top: 1; }
    PressurePanel #pressure-conflicts { height: auto; max-height: 10; }
    """

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.border_title = "Bandwidth and bank conflicts"

    def compose(self) -> ComposeResult:
        yield Static(HEURISTIC_LABEL, id="pressure-heuristic", classes="pressure-label")
        chips: DataTable[Text] = DataTable(id="pressure-chips", cursor_type="none")
        for key, label in PRESSURE_COLUMNS:
            chips.add_column(label, key=key)
        yield chips
        yield Static("", id="pressure-chips-note")
        yield Static("KV cache: no model loaded", id="pressure-kv")
        yield Static(MSPROF_LABEL, id="pressure-msprof", classes="pressure-label")
        conflicts: DataTable[Text] = DataTable(id="pressure-conflicts", cursor_type="none")
        for key, label in CONFLICT_COLUMNS:
            conflicts.add_column(label, key=key)
        yield conflicts
        yield Static("", id="pressure-msprof-note")

    def show(self, npu: NpuSnapshot | None, engine: EngineSnapshot | None,
             conflicts: Sequence[OpConflict] | None) -> None:
        self._show_chips(npu)
        self._show_kv(engine)
        self._show_conflicts(conflicts)

    def _show_chips(self, npu: NpuSnapshot | None) -> None:
        table: DataTable[Text] = self.query_one("#pressure-chips", DataTable)
        table.clear()
        chips = npu.chips if npu is not None and npu.ok else ()
        for chip in chips:
            table.add_row(Text(chip_label(chip)), Text(_percent(chip.hbm_bandwidth_percent)),
                          Text(_percent(chip.aicore_percent)),
                          heuristic_reading(chip.hbm_bandwidth_percent, chip.aicore_percent),
                          key=chip.key)
        table.display = bool(chips)
        note = "" if chips else "no NPU data" + (f": {npu.error}" if npu and npu.error else "")
        self.query_one("#pressure-chips-note", Static).update(Text(note))

    def _show_kv(self, engine: EngineSnapshot | None) -> None:
        kv = self.query_one("#pressure-kv", Static)
        if engine is None:
            kv.update(Text("KV cache: no model loaded", style="dim"))
        else:
            kv.update(kv_table(engine))

    def _show_conflicts(self, conflicts: Sequence[OpConflict] | None) -> None:
        table: DataTable[Text] = self.query_one("#pressure-conflicts", DataTable)
        table.clear()
        top = sorted(conflicts or (), key=lambda c: c.conflict_ratio, reverse=True)
        for conflict in top[:MAX_CONFLICTS]:
            table.add_row(Text(conflict.operator), ratio_text(conflict.bank_cflt_ratio),
                          ratio_text(conflict.bankgroup_cflt_ratio),
                          ratio_text(conflict.worst_ratio), Text(str(conflict.rows)))
        table.display = bool(top)
        self.query_one("#pressure-msprof", Static).display = conflicts is not None
        self.query_one("#pressure-msprof-note", Static).update(Text(self._conflict_note(conflicts)))

    @staticmethod
    def _conflict_note(conflicts: Sequence[OpConflict] | None) -> str:
        if conflicts is None:
            return "bank conflicts: start with --msprof DIR (msprof ResourceConflictRatio)"
        if not conflicts:
            return "the msprof output holds no ResourceConflictRatio rows"
        if len(conflicts) > MAX_CONFLICTS:
            return f"{MAX_CONFLICTS} of {len(conflicts)} operators shown"
        return ""
