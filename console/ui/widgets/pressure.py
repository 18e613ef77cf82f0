"""Memory-pressure panel: HBM-bandwidth % against AI-core % per chip, a heuristic reading.

The reading comes from `console.pressure` (policy thresholds, the documented zero readings).
Bank conflicts are not live: they are per-kernel Unified Buffer counters that only msprof
reads, so the panel lists them only from a profile given with `--msprof DIR`, labelled as such.
The engine's KV cache (layout, alignment) is the engine panel's.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import DataTable, Static

from console.msprof import OpConflict
from console.pressure import PressureReading, PressureRow, ReadingKind
from console.ui import safe

TITLE = "Memory pressure"
HEURISTIC_LABEL = ("heuristic, not a measurement: high HBM-BW % with low AI-core % suggests "
                   "memory-bound")
MSPROF_LABEL = ("from the msprof profile (--msprof), not live: UB bank-conflict ratio per "
                "operator, highest first")
NO_PROFILE = ("bank conflicts are not measured live: they are per-kernel UB counters that "
              "msprof reads; --msprof DIR lists a profile's worst operators")
NO_PROFILE_SHORT = "bank conflicts: not live; --msprof DIR reads a profile"
NO_VALUE = "–"
MAX_CONFLICTS = 8
CONFLICT_WARN = 0.05
CONFLICT_FAIL = 0.20

READING_STYLES: dict[ReadingKind, str] = {
    "not-sampled": "dim",
    "profiling-zero": "italic",
    "vm-zero": "italic",
    "memory-bound": "bold yellow",
    "compute-bound": "green",
    "idle": "dim",
    "unclear": "",
}
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


def reading_text(reading: PressureReading) -> Text:
    return Text(reading.text, style=READING_STYLES[reading.kind])


def _percent(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.0f} %"


def ratio_text(ratio: float | None) -> Text:
    if ratio is None:
        return Text(NO_VALUE, style="dim")
    style = "bold red" if ratio >= CONFLICT_FAIL else "yellow" if ratio >= CONFLICT_WARN else ""
    return Text(f"{ratio:.1%}", style=style)


class PressurePanel(Widget):
    """Per chip: HBM-BW %, AI-core % and the heuristic reading; msprof conflicts if profiled."""

    DEFAULT_CSS = """
    PressurePanel {
        height: auto;
        border: round $primary;
        padding: 0 1;
    }
    PressurePanel .pressure-label { height: auto; color: $text-muted; text-style: italic; }
    PressurePanel #pressure-chips { height: auto; max-height: 18; }
    PressurePanel #pressure-chips-note { height: auto; color: $text-muted; }
    PressurePanel #pressure-conflicts { height: auto; max-height: 10; }
    """

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.border_title = f"{TITLE} (heuristic)"

    def compose(self) -> ComposeResult:
        yield Static(HEURISTIC_LABEL, id="pressure-heuristic", classes="pressure-label")
        chips: DataTable[Text] = DataTable(id="pressure-chips", cursor_type="none")
        for key, label in PRESSURE_COLUMNS:
            chips.add_column(label, key=key)
        yield chips
        yield Static("", id="pressure-chips-note")
        yield Static(MSPROF_LABEL, id="pressure-msprof", classes="pressure-label")
        conflicts: DataTable[Text] = DataTable(id="pressure-conflicts", cursor_type="none")
        for key, label in CONFLICT_COLUMNS:
            conflicts.add_column(label, key=key)
        yield conflicts
        yield Static("", id="pressure-msprof-note")

    def show(self, rows: Sequence[PressureRow], note: str,
             conflicts: Sequence[OpConflict] | None) -> None:
        """`note`: why there are no rows, or what the zero readings mean on this machine."""
        self._show_chips(rows, note)
        self._show_conflicts(conflicts)

    def _show_chips(self, rows: Sequence[PressureRow], note: str) -> None:
        table: DataTable[Text] = self.query_one("#pressure-chips", DataTable)
        table.clear()
        for row in rows:
            table.add_row(safe.text(f"NPU {row.chip_key}"),
                          Text(_percent(row.hbm_bandwidth_percent)),
                          Text(_percent(row.aicore_percent)), reading_text(row.reading),
                          key=row.chip_key)
        table.display = bool(rows)
        self.query_one("#pressure-chips-note", Static).update(safe.block(note))

    def _show_conflicts(self, conflicts: Sequence[OpConflict] | None) -> None:
        table: DataTable[Text] = self.query_one("#pressure-conflicts", DataTable)
        table.clear()
        top = sorted(conflicts or (), key=lambda c: c.conflict_ratio, reverse=True)
        for conflict in top[:MAX_CONFLICTS]:
            table.add_row(safe.text(conflict.operator), ratio_text(conflict.bank_cflt_ratio),
                          ratio_text(conflict.bankgroup_cflt_ratio),
                          ratio_text(conflict.worst_ratio), Text(str(conflict.rows)))
        table.display = bool(top)
        self.query_one("#pressure-msprof", Static).display = conflicts is not None
        note = self.query_one("#pressure-msprof-note", Static)
        note.update(Text(self._conflict_note(conflicts)))
        note.display = conflicts is not None
        # without a profile, one line on the border says where bank conflicts come from
        self.border_subtitle = NO_PROFILE_SHORT if conflicts is None else ""

    @staticmethod
    def _conflict_note(conflicts: Sequence[OpConflict] | None) -> str:
        if conflicts is None:
            return NO_PROFILE
        if not conflicts:
            return "the msprof output holds no ResourceConflictRatio rows"
        if len(conflicts) > MAX_CONFLICTS:
            return f"{MAX_CONFLICTS} of {len(conflicts)} operators shown"
        return ""
