"""Triage screen: the ranked findings of the target's logs (read in a thread worker) or of a
pasted log; the highlighted finding's cause, fix and lines below; Enter opens its playbook.
`LogWatcher` follows the target's logs while the console runs and raises a toast when a new
error signature appears in them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from checks.triage import Finding, TriageReport, describe_read, triage_text
from console.ui import safe
from console.ui.screens.playbook import PlaybookScreen

READING = "reading the target's logs…"


def summary_text(report: TriageReport, origin: str) -> Text:
    read = report.read
    found = len(report.findings)
    head = (f"Triage of {origin}: {describe_read(read)}; {found} finding"
            + ("" if found == 1 else "s"))
    if not report.findings:
        closest = ", ".join(report.closest_playbooks) or "none"
        head += f"; nothing recognised, closest playbooks: {closest}"
    lines = [safe.text(head, style="bold")]
    lines += [safe.text(f"skipped {s.path}: {s.reason}", style="dim") for s in read.skipped[:3]]
    lines += [safe.text(note, style="dim") for note in read.notes[:3]]
    return Text("\n").join(lines)


def finding_option(rank: int, finding: Finding) -> Option:
    where = f"{finding.evidence[0].file}:{finding.evidence[0].line}" if finding.evidence else ""
    times = f" ×{finding.count}" if finding.count > 1 else ""
    tag = " (consequence)" if finding.role == "consequence" else ""
    return Option(safe.line(f"{rank:>2}. {finding.title}{tag}{times}  {where}"), id=str(rank))


def detail_text(finding: Finding) -> Text:
    lines = [safe.text(f"{finding.title} ({finding.id})", style="bold"),
             safe.text(f"cause: {finding.cause}"), safe.text(f"fix: {finding.fix}",
                                                             style="yellow")]
    lines += [safe.text(f"  | {line}", style="dim") for line in finding.context]
    lines.append(safe.text(f"Enter opens playbook {finding.playbook}", style="italic"))
    return Text("\n").join(lines)


class TriageScreen(Screen[None]):
    """`read_logs` runs in a thread (it reads files), never on the UI thread."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="Esc"),
        Binding("ctrl+r", "triage_paste", "Triage the paste", key_display="Ctrl+R"),
        Binding("ctrl+l", "reread", "Read the logs again", key_display="Ctrl+L"),
    ]
    # the app's actions this screen's keys replace: the app's Ctrl+R (record) has priority and
    # would otherwise take the key the paste box names (ConsoleApp.check_action)
    TAKES_OVER: ClassVar[frozenset[str]] = frozenset({"toggle_record"})
    DEFAULT_CSS = """
    TriageScreen #triage-summary { height: auto; max-height: 5; margin: 0 1; }
    TriageScreen #triage-findings { height: 1fr; margin: 0 1; }
    TriageScreen #triage-detail { height: auto; max-height: 14; border: round $primary;
                                  margin: 0 1; padding: 0 1; }
    TriageScreen #triage-paste { height: 6; margin: 0 1; }
    """

    class Done(Message):
        def __init__(self, report: TriageReport, origin: str) -> None:
            super().__init__()
            self.report = report
            self.origin = origin

    class Failed(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, read_logs: Callable[[], TriageReport]) -> None:
        super().__init__()
        self._read_logs = read_logs
        self.report: TriageReport | None = None

    def compose(self) -> ComposeResult:
        yield Static(READING, id="triage-summary")
        yield OptionList(id="triage-findings", markup=False)
        yield Static("", id="triage-detail")
        area = TextArea(id="triage-paste")
        area.border_title = "paste a log here, then ctrl+r"
        yield area
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Triage"
        # typed letters go to the paste box, not to the app's one-letter keys (q quits)
        self.query_one("#triage-paste", TextArea).focus()
        self._read()

    @work(thread=True, exclusive=True, group="triage")
    def _read(self) -> None:
        try:
            report = self._read_logs()
        except Exception as exc:  # any failure is shown; the console lives on
            self.post_message(self.Failed(f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(self.Done(report, "the target's logs"))

    @on(Done)
    def _show(self, message: Done) -> None:
        self.report = message.report
        self.query_one("#triage-summary", Static).update(summary_text(message.report,
                                                                     message.origin))
        found = self.query_one("#triage-findings", OptionList)
        found.clear_options()
        found.add_options(finding_option(i, f) for i, f in enumerate(message.report.findings, 1))
        if message.report.findings:
            found.highlighted = 0
            found.focus()
        self._detail(0)

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        self.query_one("#triage-summary", Static).update(
            safe.text(f"triage could not read the logs: {message.error}", style="bold red"))

    @on(OptionList.OptionHighlighted, "#triage-findings")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._detail(event.option_index)

    @on(OptionList.OptionSelected, "#triage-findings")
    def _open(self, event: OptionList.OptionSelected) -> None:
        if self.report and event.option_index < len(self.report.findings):
            self.app.push_screen(PlaybookScreen(self.report.findings[event.option_index]
                                                .playbook))

    def _detail(self, index: int) -> None:
        findings = self.report.findings if self.report else ()
        shown = detail_text(findings[index]) if index < len(findings) else Text("")
        self.query_one("#triage-detail", Static).update(shown)

    def action_triage_paste(self) -> None:
        text = self.query_one("#triage-paste", TextArea).text
        if text.strip():
            self.post_message(self.Done(triage_text(text), "the paste"))

    def action_reread(self) -> None:
        self.query_one("#triage-summary", Static).update(READING)
        self._read()

    def action_close(self) -> None:
        self.dismiss()


# -- watching the target's logs while the console runs ----------------------------------------

WATCH_INTERVAL_S = 30.0


class LogWatcher:
    """Polls the target's log directories (checks.triage.watch) in a thread worker every
    `interval_s` and raises a toast when an error signature appears that was not there before;
    `t` then shows the findings."""

    def __init__(self, app: App[Any], directories: Callable[[], Sequence[Path]],
                 interval_s: float = WATCH_INTERVAL_S) -> None:
        from checks.triage.watch import LogWatch

        self.app = app
        self.watch = LogWatch(directories)
        self.interval_s = interval_s

    def start(self) -> None:
        self.app.set_interval(self.interval_s, self._tick, name="triage-watch")
        self._tick()

    def _tick(self) -> None:
        self.app.run_worker(self._poll, thread=True, group="triage-watch", exclusive=True,
                            exit_on_error=False)

    def _poll(self) -> None:
        try:
            new = self.watch.poll()
        except Exception:  # a target gone or unreadable: nothing to report this time
            return
        if new:
            self.app.call_from_thread(self._alert, new)

    def _alert(self, new: tuple[Finding, ...]) -> None:
        titles = "; ".join(f.title for f in new[:3])
        safe.notify(self.app, f"new in the target's log: {titles}. Press t to triage.",
                    title="triage", severity="warning", timeout=20)
