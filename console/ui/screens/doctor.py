"""Doctor screen: runs the checks in a thread worker, shows results grouped by category, and
opens a result's playbook on Enter."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, LoadingIndicator, Static

from checks.model import STATUSES, Result, Status
from checks.runner import Run
from console.ui import safe
from console.ui.screens.playbook import PlaybookScreen

if TYPE_CHECKING:
    from textual.timer import Timer

STATUS_STYLES: dict[Status, str] = {
    "pass": "green",
    "warn": "bold yellow",
    "fail": "bold white on red",
    "skip": "dim",
    "error": "bold magenta",
}
STATUS_ORDER: dict[Status, int] = {"fail": 0, "error": 1, "warn": 2, "pass": 3, "skip": 4}
CATEGORY_PREFIX = "category:"
RUNNING = "running the checks…"
STAGE_POLL_S = 0.2
PROBLEMS: frozenset[Status] = frozenset({"fail", "error", "warn"})
FIXED_COLUMNS_WIDTH = 6 + 24 + 8  # status, check id, cell padding and the scrollbar


def status_cell(status: Status) -> Text:
    return Text(status.upper(), style=STATUS_STYLES[status])


def group_by_category(results: tuple[Result, ...]) -> dict[str, list[Result]]:
    """Categories in order of first appearance; worst results first within each."""
    groups: dict[str, list[Result]] = {}
    for result in results:
        groups.setdefault(result.category, []).append(result)
    return {cat: sorted(rs, key=lambda r: STATUS_ORDER[r.status]) for cat, rs in groups.items()}


def counts_text(run: Run) -> Text:
    counts = run.counts()
    text = Text("Doctor  ", style="bold")
    for index, status in enumerate(STATUSES):
        if index:
            text.append(" · ")
        text.append(f"{counts[status]} {status}", style=STATUS_STYLES[status] if counts[status]
                    else "dim")
    text.append(f"  in {run.duration_ms / 1000:.1f} s", style="dim")
    return text


def detail_text(result: Result) -> Text:
    """A result's lines; each is outside text (evidence quotes the machine), one line each."""
    lines = [safe.text(f"{result.title} ({result.id})", style="bold"), safe.text(result.summary)]
    lines += [safe.text(f"  · {line}", style="dim") for line in result.evidence]
    if result.remedy:
        lines.append(safe.text(f"fix: {result.remedy}", style="yellow"))
    if result.waiver:
        lines.append(safe.text(f"waived: {result.waiver}", style="cyan"))
    lines.append(safe.text(f"Enter opens playbook {result.playbook or result.id}",
                           style="italic"))
    return Text("\n").join(lines)


class DoctorScreen(Screen[None]):
    """The doctor inside the console: `run_checks` is called in a thread, never on the UI."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="Esc"),
        Binding("q", "close", "Back", show=False),
        Binding("r", "rerun", "Run again"),
        Binding("p", "problems_only", "Problems only"),
    ]
    DEFAULT_CSS = """
    DoctorScreen #doctor-summary { height: 1; margin: 0 1; }
    DoctorScreen #doctor-loading { height: 3; }
    DoctorScreen #doctor-results { height: 1fr; margin: 0 1; }
    DoctorScreen #doctor-detail {
        height: auto;
        max-height: 12;
        border: round $primary;
        margin: 0 1;
        padding: 0 1;
    }
    """

    class ChecksDone(Message):
        def __init__(self, run: Run) -> None:
            super().__init__()
            self.run = run

    class ChecksFailed(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, run_checks: Callable[[], Run],
                 waiting_for: Callable[[], str] | None = None) -> None:
        """`waiting_for`: what `run_checks` waits for before it checks anything (the console's
        target: "finding the serving process…"), "" once nothing; shown until then."""
        super().__init__()
        self._run_checks = run_checks
        self._waiting_for = waiting_for or (lambda: "")
        self._stage_timer: Timer | None = None
        self._results: dict[str, Result] = {}
        self.last_run: Run | None = None
        self.problems_only = False

    def compose(self) -> ComposeResult:
        yield Static(RUNNING, id="doctor-summary")
        yield LoadingIndicator(id="doctor-loading")
        table: DataTable[Text] = DataTable(id="doctor-results", cursor_type="row")
        table.add_column("Status", key="status", width=6)
        table.add_column("Check", key="id", width=22)
        table.add_column("Summary", key="summary", width=self._summary_width())
        yield table
        yield Static("", id="doctor-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Doctor"
        self._start()

    def _start(self) -> None:
        self._stop_stage_timer()
        self.query_one("#doctor-loading").display = True
        self.query_one("#doctor-results").display = False
        self.query_one("#doctor-detail").display = False
        self._show_stage()
        if self._waiting_for():
            self._stage_timer = self.set_interval(STAGE_POLL_S, self._show_stage)
        self._work()

    def _show_stage(self) -> None:
        """While the run waits (for the target), say for what; then that it runs."""
        waiting = self._waiting_for()
        if not waiting:
            self._stop_stage_timer()
        if self.query_one("#doctor-loading").display:
            self.query_one("#doctor-summary", Static).update(Text(waiting or RUNNING))

    def _stop_stage_timer(self) -> None:
        if self._stage_timer is not None:
            self._stage_timer.stop()
            self._stage_timer = None

    @work(thread=True, exclusive=True, group="doctor", exit_on_error=False)
    def _work(self) -> None:
        # a thread: only post messages from here, never touch widgets
        try:
            run = self._run_checks()
        except Exception as exc:
            self.post_message(self.ChecksFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(self.ChecksDone(run))

    @on(ChecksDone)
    def _show_run(self, message: ChecksDone) -> None:
        self._stop_stage_timer()
        self.last_run = message.run
        self.query_one("#doctor-loading").display = False
        self.query_one("#doctor-summary", Static).update(counts_text(message.run))
        table: DataTable[Text] = self.query_one("#doctor-results", DataTable)
        table.display = True
        self._fill(table, message.run)
        table.focus()

    @on(ChecksFailed)
    def _show_failure(self, message: ChecksFailed) -> None:
        self._stop_stage_timer()
        self.query_one("#doctor-loading").display = False
        self.query_one("#doctor-summary", Static).update(
            safe.text(f"the doctor could not run: {message.error} (press r to try again)",
                      style="bold red"))

    def _summary_width(self) -> int:
        """The summary column fills the screen's width, so that long summaries wrap in it."""
        return max(20, self.app.size.width - FIXED_COLUMNS_WIDTH)

    def _fill(self, table: DataTable[Text], run: Run) -> None:
        """Results by category (only the problems when toggled), each summary wrapped over as
        many lines as it needs; the cursor starts on the first FAIL, ERROR or WARN."""
        table.clear()
        table.columns["summary"].width = self._summary_width()  # type: ignore[index]
        self._results = {}
        first_problem: int | None = None
        for category, results in group_by_category(run.results).items():
            shown = [r for r in results if not self.problems_only or r.status in PROBLEMS]
            if not shown:
                continue
            table.add_row(Text(""), safe.text(category, style="bold underline"), Text(""),
                          key=CATEGORY_PREFIX + category)
            for index, result in enumerate(shown):
                key = f"{category}:{index}:{result.id}"
                self._results[key] = result
                if first_problem is None and result.status in PROBLEMS:
                    first_problem = table.row_count
                table.add_row(status_cell(result.status), safe.text(result.id),
                              safe.text(result.summary), key=key, height=None)
        if self.problems_only and not self._results:
            table.add_row(Text(""), Text("no FAIL, ERROR or WARN", style="green"),
                          Text("p shows every result", style="dim"), key="none")
        if table.row_count > 1:
            table.move_cursor(row=first_problem if first_problem is not None else 1)

    def action_problems_only(self) -> None:
        """p: show only FAIL, ERROR and WARN results, or every result again."""
        self.problems_only = not self.problems_only
        if self.last_run is not None:
            self._fill(self.query_one("#doctor-results", DataTable), self.last_run)
        self.notify("problems only" if self.problems_only else "every result", timeout=2)

    def result_at(self, row_key: str | None) -> Result | None:
        return self._results.get(row_key or "")

    @on(DataTable.RowHighlighted, "#doctor-results")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        result = self.result_at(event.row_key.value)
        detail = self.query_one("#doctor-detail", Static)
        detail.display = result is not None
        if result is not None:
            detail.update(detail_text(result))

    @on(DataTable.RowSelected, "#doctor-results")
    def _selected(self, event: DataTable.RowSelected) -> None:
        result = self.result_at(event.row_key.value)
        if result is not None:
            self.app.push_screen(PlaybookScreen(result.playbook or result.id))

    def action_rerun(self) -> None:
        self._start()

    def action_close(self) -> None:
        self.dismiss()
