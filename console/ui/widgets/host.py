"""Host panel: CPU, memory and the log directory's disk, from a HostSnapshot (psutil)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static

from console.snapshots import HostSnapshot
from console.ui import safe

if TYPE_CHECKING:
    from console.source import Source
    from console.ui.widgets.feed import FeedView, PanelSetup

BAR_WIDTH = 20
WARN_PERCENT = 80.0
FAIL_PERCENT = 95.0
CORE_BLOCKS = "▁▂▃▄▅▆▇█"


def bar(percent: float, width: int = BAR_WIDTH) -> Text:
    """A fixed-width usage bar coloured green / yellow / red at 80 % and 95 %."""
    clamped = min(max(percent, 0.0), 100.0)
    filled = round(clamped / 100 * width)
    style = "red" if clamped >= FAIL_PERCENT else "yellow" if clamped >= WARN_PERCENT else "green"
    text = Text("▕")
    text.append("█" * filled, style=style)
    text.append("·" * (width - filled), style="dim")
    text.append("▏")
    return text


def format_size_mb(size_mb: float) -> str:
    if size_mb >= 1024 * 1024:
        return f"{size_mb / (1024 * 1024):.1f} TiB"
    if size_mb >= 1024:
        return f"{size_mb / 1024:.1f} GiB"
    return f"{size_mb:.0f} MiB"


def _line(label: str, percent: float, detail: str) -> Text:
    text = Text(f"{label:<5}")
    text.append_text(bar(percent))
    text.append_text(safe.text(f" {percent:5.1f} %  {detail}"))
    return text


class HostPanel(Widget):
    """CPU (and one block per core), memory, and the disk where the logs are written."""

    DEFAULT_CSS = """
    HostPanel {
        height: auto;
        border: round $primary;
        padding: 0 1;
    }
    HostPanel #host-lines { height: auto; }
    """

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None,
        target: str = "",
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.border_title = "Host"
        # whose deployment the doctor screen judges: outside text, shown and never interpreted
        self.border_subtitle = safe.text(target) if target else ""

    def compose(self) -> ComposeResult:
        yield Static("waiting for the first host sample…", id="host-lines")

    def show_target(self, target: str) -> None:
        """Whose deployment is judged, once it is known (outside text, never interpreted)."""
        self.border_subtitle = safe.text(target) if target else ""

    @classmethod
    def for_feed(cls, feed: Source, panel_id: str, setup: PanelSetup) -> HostPanel:
        return cls(id=panel_id, target=setup.target_line)

    def show_feed(self, view: FeedView) -> None:
        if view.latest is not None:
            self.show(view.latest)

    def show(self, snapshot: HostSnapshot) -> None:
        cores = self._cores(snapshot)
        lines = [self._cpu(snapshot), *([cores] if cores else []), self._memory(snapshot),
                 self._disk(snapshot)]
        self.query_one("#host-lines", Static).update(Text("\n").join(lines))

    @staticmethod
    def _cpu(snapshot: HostSnapshot) -> Text:
        if snapshot.cpu_percent is None:
            return Text(f"{'CPU':<5}measuring (needs two samples)…", style="dim")
        cores = snapshot.cpu_cores_percent
        busiest = f"busiest core {max(cores):.0f} %  " if cores else ""
        return _line("CPU", snapshot.cpu_percent, f"{busiest}{len(cores) or '?'} cores")

    @staticmethod
    def _cores(snapshot: HostSnapshot) -> Text | None:
        """One block per core, 0 % (▁) to 100 % (█): a single pegged core shows here."""
        if not snapshot.cpu_cores_percent:
            return None
        text = Text("cores ")
        for percent in snapshot.cpu_cores_percent:
            level = min(max(percent, 0.0), 100.0) / 100
            style = ("red" if percent >= FAIL_PERCENT else "yellow" if percent >= WARN_PERCENT
                     else "green")
            text.append(CORE_BLOCKS[round(level * (len(CORE_BLOCKS) - 1))], style=style)
        text.append("  (0–100 % each)", style="dim")
        return text

    @staticmethod
    def _memory(snapshot: HostSnapshot) -> Text:
        total = snapshot.mem_total_mb
        percent = 100 * snapshot.mem_used_mb / total if total else 0.0
        detail = f"{format_size_mb(snapshot.mem_used_mb)} / {format_size_mb(total)}"
        return _line("Mem", percent, detail)

    @staticmethod
    def _disk(snapshot: HostSnapshot) -> Text:
        free, total = snapshot.log_disk_free_mb, snapshot.log_disk_total_mb
        where = snapshot.log_dir or "log directory"
        if free is None or not total:
            return safe.text(f"{'Logs':<5}disk of {where}: not measured", style="dim")
        used = total - free
        percent = 100 * used / total
        # the bar and the percent are used space: the sizes say used first, as for memory
        detail = (f"{format_size_mb(used)} / {format_size_mb(total)} · {format_size_mb(free)} "
                  f"free ({where})")
        return _line("Logs", percent, detail)
