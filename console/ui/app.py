"""The console app: composition, keys and the routing of worker messages to controllers.

Threads never touch widgets: the chat, telemetry and replay workers post immutable values
(console/ui/messages.py); each handler here hands its value to a controller
(`ChatController`, `TelemetryController`, `RecordingController`) on the UI thread.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from typing import Any, ClassVar, TypeVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header

from checks.policy import Policy, load_policy
from console.chat.backend import ChatBackend
from console.msprof import MsprofError, OpConflict, read_conflicts
from console.options import ConsoleOptions, api_key, backend_for
from console.snapshots import ServingSnapshot
from console.target import FINDING, Found, TargetError
from console.ui import messages as msg
from console.ui import safe
from console.ui.chat_controller import ChatController
from console.ui.keys import key_rows
from console.ui.panels import layout
from console.ui.recording_controller import RecordingController
from console.ui.telemetry_controller import TelemetryController
from console.ui.widgets.alerts import AlertsPanel
from console.ui.widgets.chat import ChatPane
from console.ui.widgets.feed import PanelSetup
from console.ui.widgets.host import HostPanel
from console.ui.wiring import Wiring
from probes.host import Host
from probes.http import EndpointTarget
from probes.target.find import Observed
from probes.target.model import Target, shell_target

Clock = Callable[[], float]
W = TypeVar("W", bound=Widget)
_FROM_OPTIONS: Any = object()  # backend=_FROM_OPTIONS: the one the options name
# how long the doctor screen waits for the target beyond npu-smi's own timeout
TARGET_WAIT_S = 30.0
TRIAGE_SINCE_S = 24 * 3600.0  # the triage screen reads the logs written in the last day
# below this width the chat and the panels stack (console.tcss, Screen.-narrow)
NARROW_BELOW_COLUMNS = 100
# a second Ctrl+C within this time quits while a reply streams
QUIT_CONFIRM_S = 3.0
QUIT_CONFIRM = "a reply is streaming: Ctrl+C again quits (Esc only cancels the reply)"


class ConsoleApp(App[int]):
    """ascend-console: chat beside live NPU, serving, pressure, engine and host panels."""

    CSS_PATH = "console.tcss"
    TITLE = "ascend-console"
    ENABLE_COMMAND_PALETTE = True

    # focus starts in the prompt, where letters are typed: every action has a key that works
    # from there too (an F-key or a ctrl chord, with priority), and that one is in the footer
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "escape", "cancel", key_display="Esc",
                tooltip="cancel the reply; else leave the prompt (then the letter keys work)"),
        Binding("f1", "help", "help", key_display="F1", priority=True),
        Binding("question_mark", "help", "help", show=False),
        Binding("f2", "toggle_panels", "panels", key_display="F2", priority=True,
                tooltip="the panels take the whole screen, or share it with the chat again"),
        Binding("f3", "doctor", "doctor", key_display="F3", priority=True),
        Binding("d", "doctor", "doctor", show=False),
        Binding("f4", "playbooks", "playbooks", key_display="F4", priority=True),
        Binding("slash", "playbooks", "playbooks", show=False),
        Binding("ctrl+r", "toggle_record", "record", key_display="Ctrl+R", priority=True),
        Binding("r", "toggle_record", "record", show=False),
        Binding("ctrl+y", "copy_reply", "copy reply", show=False, priority=True),
        Binding("y", "copy_reply", "copy reply", show=False),
        Binding("ctrl+s", "save_transcript", "save chat", key_display="Ctrl+S", priority=True),
        Binding("f5", "triage", "triage", key_display="F5", priority=True, show=False),
        Binding("t", "triage", "triage", show=False),
        Binding("f6", "fleet", "fleet", key_display="F6", priority=True, show=False),
        Binding("f", "fleet", "fleet", show=False),
        Binding("i", "focus_prompt", "prompt", show=False),
        Binding("ctrl+c", "interrupt", "quit", key_display="Ctrl+C", priority=True,
                tooltip="quit (while a reply streams: press it twice)"),
        Binding("q", "quit", "quit", show=False),
    ]
    # Textual types these as plain class attributes: ClassVar would not type-check
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW_COLUMNS, "-wide")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (50, "-tall")]  # noqa: RUF012

    def __init__(self, options: ConsoleOptions | None = None, *,
                 backend: ChatBackend | None = _FROM_OPTIONS, host: Host | None = None,
                 clock: Clock = time.time, policy: Policy | None = None,
                 target: Target | None = None,
                 find_target: Callable[[], Found] | None = None) -> None:
        """`find_target`: how to find the target (console.target.find), run in a worker once
        the app is open; until it answers, the host panel and the doctor screen say so."""
        super().__init__()
        self.options = options or ConsoleOptions()
        self.clock = clock
        self.policy = policy or load_policy(self.options.policy_path)
        self.host = host if host is not None else _live_host(self.options.root)
        self.target = target or shell_target("ascend-console without a target")
        self.observed: Any = None  # the target as found (probes.target.find.Observed), if found
        self._find_target = find_target if target is None else None
        self.target_error = ""  # why the target could not be found
        self.target_known = threading.Event()  # also set when the app closes
        self._leaving = False
        self._interrupted_at: float | None = None  # the first Ctrl+C while generating
        if self._find_target is None:
            self.target_known.set()
        self.conflicts, self.msprof_error = _read_conflicts(self.options)
        if backend is _FROM_OPTIONS:
            backend = backend_for(self.options)
        wiring = Wiring(self, self.options, self.policy, clock, lambda: self._main)
        self.telemetry = TelemetryController(wiring, self.host, self.conflicts, self._record,
                                             lambda: self.chat.backend)
        self.recording = RecordingController(wiring, self.set_subtitle,
                                             self.telemetry.take_recorded)
        self.chat = ChatController(wiring, backend, self.telemetry.take_engine_from,
                                   self.telemetry.reply_finished)

    # --- composition -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        options = self.options
        yield Header()
        with Horizontal(id="main"):
            yield ChatPane(options.settings)
            with VerticalScroll(id="panels"):
                yield from layout(self.telemetry.panel_feeds(),
                                  PanelSetup(self.policy, options, self.target_line()))
        yield AlertsPanel(id="alerts")
        yield Footer()

    def _record(self, snapshot: Any) -> None:
        self.recording.record(snapshot)

    def target_line(self) -> str:
        """Whose deployment the panels and the doctor judge, or that it is being found."""
        if not self.target_known.is_set():
            return FINDING
        if self.target_error:
            return f"no target: {self.target_error}"
        return self.target.label

    def target_pending(self) -> str:
        """What the doctor waits for before it can run ("" when nothing)."""
        return "" if self.target_known.is_set() else FINDING

    @property
    def main(self) -> Screen[Any]:
        """The main screen, whichever screen is on top (doctor, help, …)."""
        return self._main

    def main_widget(self, kind: type[W]) -> W:
        return self._main.query_one(kind)

    def on_mount(self) -> None:
        self._main = self.screen
        self.set_subtitle()
        self.telemetry.redraw_pressure()
        if self.msprof_error:
            safe.notify(self, self.msprof_error, title="--msprof", severity="error", timeout=20)
        if self.options.record is not None and not self.options.read_only:
            self.recording.start(self.options.record)
        self.chat.start()
        if self._find_target is not None:
            self.run_worker(self._find, thread=True, group="target", exit_on_error=False)
        if self.options.replay is not None:
            self.recording.replay(self.options.replay, self.options.replay_speed)
        elif self.options.sample_live:
            self.telemetry.tick()
            self.set_interval(self.options.interval_s, self.telemetry.tick, name="telemetry")
        if self._find_target is None:
            self.watch_target_logs()
        self.main_widget(ChatPane).focus_prompt()

    def watch_target_logs(self) -> None:
        """Follow the target process's CANN logs: a toast when a new error signature appears
        (console.ui.screens.triage.LogWatcher). Nothing to follow without a process."""
        process = self.target.process
        if process is None or self.options.replay is not None:
            return
        from checks.triage import logdirs
        from console.ui.screens.triage import LogWatcher

        LogWatcher(self, lambda: logdirs.for_process(process.pid).directories).start()

    def set_subtitle(self) -> None:
        parts = [self.chat.label]
        if self.options.replay is not None:
            when = self.telemetry.replay_time
            parts.insert(0, f"REPLAY {'…' if when is None else _clock_text(when)}")
        if self.recording.recorder is not None:
            parts.append(f"● REC {self.recording.recorder.path.name}")
        if self.options.read_only:
            parts.append("read-only")
        self.sub_title = safe.line(" · ".join(p for p in parts if p))

    # --- the target, found in a worker ----------------------------------------------------------

    def _find(self) -> None:
        # a thread: npu-smi may take its whole timeout; only post messages from here
        assert self._find_target is not None
        try:
            found = self._find_target()
        except TargetError as exc:
            self.post_message(msg.TargetFailed(str(exc)))
        except Exception as exc:  # a bug in the finding must not leave the doctor waiting
            self.post_message(msg.TargetFailed(f"{type(exc).__name__}: {exc}"))
        else:
            self.post_message(msg.TargetFound(found))

    def on_target_found(self, message: msg.TargetFound) -> None:
        found = message.found
        self.host, self.target = found.host, found.target
        self.observed = found.observed
        self.telemetry.log_dir = found.log_dir
        self.target_known.set()  # after host and target: the doctor's worker reads them
        with suppress(NoMatches):
            self.main_widget(HostPanel).show_target(self.target_line())
        self.watch_target_logs()

    def on_target_failed(self, message: msg.TargetFailed) -> None:
        self.target_error = message.reason
        self.target_known.set()
        safe.notify(self, f"the serving process could not be read: {message.reason}",
                    title="target", severity="error", timeout=20)
        with suppress(NoMatches):
            self.main_widget(HostPanel).show_target(self.target_line())

    # --- worker messages -> controllers ---------------------------------------------------------
    # a message that lands while the app closes finds no widget: it is dropped

    def on_sampled(self, message: msg.Sampled) -> None:
        with suppress(NoMatches):
            self.telemetry.take_sampled(message)
            snapshot = message.snapshot
            # the endpoint's /metrics also tells the chat whether its endpoint is up
            if (isinstance(snapshot, ServingSnapshot) and self.options.endpoint is not None
                    and self.options.replay is None):
                self.chat.endpoint_seen(snapshot.answered, snapshot.error or "")

    def on_replayed(self, message: msg.Replayed) -> None:
        with suppress(NoMatches):
            self.recording.replayed(message)

    def on_replay_ended(self, message: msg.ReplayEnded) -> None:
        self.recording.ended(message)

    def on_backend_progress(self, message: msg.BackendProgress) -> None:
        with suppress(NoMatches):
            self.chat.progress(message.stage)

    async def on_backend_ready(self, message: msg.BackendReady) -> None:
        with suppress(NoMatches):
            await self.chat.ready(message.line)
            self.set_subtitle()

    def on_backend_failed(self, message: msg.BackendFailed) -> None:
        with suppress(NoMatches):
            self.chat.failed(message.reason, message.remedy, message.transient)

    async def on_reply_event(self, message: msg.ReplyEvent) -> None:
        with suppress(NoMatches):
            await self.chat.reply_event(message.event)

    @on(ChatPane.Send)
    async def _send(self, message: ChatPane.Send) -> None:
        await self.chat.send(message.prompt, message.settings)

    # --- actions -------------------------------------------------------------------------------

    @property
    def generating(self) -> bool:
        return self.chat.generating

    def action_escape(self) -> None:
        """Esc: cancel the running reply; otherwise leave the prompt so letter keys work."""
        if self.chat.cancel():
            return
        if self.focused is not None:
            self.set_focus(None)

    def cancel_generation(self) -> bool:
        return self.chat.cancel()

    def action_focus_prompt(self) -> None:
        self.main_widget(ChatPane).focus_prompt()

    def action_toggle_panels(self) -> None:
        """F2: the panels take the whole screen, or share it with the chat again."""
        main = self._main.query_one("#main")
        main.toggle_class("-panels-only")
        if main.has_class("-panels-only"):
            self._main.set_focus(None)
        else:
            self.main_widget(ChatPane).focus_prompt()

    def action_interrupt(self) -> None:
        """Ctrl+C quits; while a reply streams, only when pressed twice within a few seconds."""
        now = time.monotonic()
        first = self._interrupted_at
        if self.generating and (first is None or now - first > QUIT_CONFIRM_S):
            self._interrupted_at = now
            safe.notify(self, QUIT_CONFIRM, severity="warning", timeout=QUIT_CONFIRM_S)
            return
        self.run_worker(self.action_quit(), exclusive=True, group="quit")

    def action_doctor(self) -> None:
        from console.ui.screens.doctor import DoctorScreen

        if isinstance(self.screen, DoctorScreen):
            return  # F3 on the doctor screen: it is already open
        self.push_screen(DoctorScreen(self.run_doctor, waiting_for=self.target_pending))

    def run_doctor(self) -> Any:
        from console.doctor_run import run_doctor

        if not self.target_known.wait(self.options.npu_timeout_s + TARGET_WAIT_S):
            raise TargetError("the serving process was not found in time")
        if self._leaving:
            raise TargetError("the console is closing")
        if self.target_error:
            raise TargetError(self.target_error)

        observed = self.observed or Observed(self.host, self.target)
        return run_doctor(self.options, observed, self.policy, self._endpoint_target())

    def _endpoint_target(self) -> Any:
        """The console's --endpoint as the doctor's endpoint checks take it."""
        endpoint = self.options.endpoint
        if endpoint is None:
            return None

        return EndpointTarget(endpoint.url, endpoint.model, self.options.serving_metrics_url
                              or "", api_key(endpoint, os.environ))

    def action_triage(self) -> None:
        from console.ui.screens.triage import TriageScreen

        self.push_screen(TriageScreen(self.triage_logs))

    def triage_logs(self) -> Any:
        """What the triage screen reads (in its worker): the CANN logs of the last day of this
        console's target process, or of the serving process found as the doctor finds it."""
        from checks.triage import triage_logs

        process = self.target.process if self.target_known.is_set() else None
        return triage_logs(process.pid if process else None, since_s=TRIAGE_SINCE_S)

    def action_fleet(self) -> None:
        from console.ui.screens.fleet import open_fleet

        open_fleet(self, self.options.prometheus_url, self.policy, self.options.interval_s)

    def action_playbooks(self) -> None:
        from console.ui.screens.playbook import PlaybookBrowser

        if isinstance(self.screen, PlaybookBrowser):
            return
        self.push_screen(PlaybookBrowser())

    def action_help(self) -> None:
        from console.ui.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.key_help()))

    def key_help(self) -> list[tuple[str, str]]:
        """(keys, what they do) for every binding of the app and of the doctor screen, as
        people write keys ("Esc", "/", "?"), for the help screen."""
        from console.ui.screens.doctor import DoctorScreen

        out = key_rows(self.BINDINGS)
        out.append(("Ctrl+P", "command palette: every action by name"))
        out.append(("Enter", "send the prompt (queued while the model loads)"))
        out += [(keys, f"doctor screen: {does}") for keys, does in key_rows(DoctorScreen.BINDINGS)]
        out.append(("Enter", "doctor screen: open the highlighted check's playbook"))
        return out

    def action_toggle_record(self) -> None:
        self.recording.toggle()

    def action_copy_reply(self) -> None:
        text = self.chat.session.last_reply()
        if text is None:
            safe.notify(self, "no reply to copy yet", severity="warning")
            return
        self.copy_to_clipboard(text)  # OSC 52: works over ssh and inside tmux
        safe.notify(self, f"copied the last reply ({len(text)} characters)")

    def action_save_transcript(self) -> None:
        settings = self.main_widget(ChatPane).settings()
        directory = self.options.transcript_dir
        try:
            md_path, json_path = self.chat.session.save_transcript(
                directory, self.chat.label, None if isinstance(settings, str) else settings)
        except OSError as exc:
            safe.notify(self, f"{directory}: cannot save the transcript ({exc})", severity="error")
            return
        safe.notify(self, f"transcript saved: {md_path} (and {json_path.name})", timeout=10)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Doctor", "run every check (F3, d)", self.action_doctor)
        yield SystemCommand("Playbooks", "search the playbooks by symptom (F4, /)",
                            self.action_playbooks)
        yield SystemCommand("Help", "every key (F1, ?)", self.action_help)
        yield SystemCommand("Cancel generation", "stop the running reply (Esc)",
                            self.cancel_generation)
        yield SystemCommand("Copy last reply", "to the clipboard via OSC 52 (Ctrl+Y, y)",
                            self.action_copy_reply)
        yield SystemCommand("Save transcript", "write the chat as Markdown and JSON (Ctrl+S)",
                            self.action_save_transcript)
        yield SystemCommand("Focus prompt", "type a message (i)", self.action_focus_prompt)
        yield SystemCommand("Chat / panels", "give the panels the whole screen, or not (F2)",
                            self.action_toggle_panels)
        if not self.options.read_only:
            yield SystemCommand("Toggle recording", "record telemetry to SQLite (Ctrl+R, r)",
                                self.action_toggle_record)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        screen = self.screen_stack[-1] if self.screen_stack else None
        if action in getattr(screen, "TAKES_OVER", ()):  # its own binding of the key runs
            return False
        return not (action == "toggle_record" and self.options.read_only)

    async def action_quit(self) -> None:
        self.chat.cancel()
        self.recording.stop()
        self.telemetry.close()
        self.exit(0)

    def exit(self, result: int | None = None, return_code: int = 0,
             message: Any = None) -> None:
        # a doctor screen waiting for the target must not keep the closed app's process alive
        self._leaving = True
        self.target_known.set()
        super().exit(result, return_code, message)


def _live_host(root: str) -> Host:
    from probes.live import LiveHost

    return LiveHost(root=root)


def _read_conflicts(options: ConsoleOptions) -> tuple[list[OpConflict] | None, str]:
    """The msprof bank-conflict ratios (read once: a profile does not change), or the error."""
    if options.msprof is None:
        return None, ""
    try:
        return read_conflicts(options.msprof), ""
    except MsprofError as exc:
        return None, str(exc)


def _clock_text(t: float) -> str:
    return dt.datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
