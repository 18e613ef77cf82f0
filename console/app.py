"""The console app: composition, keys, workers and message handlers; nothing else.

Threads never touch widgets: telemetry and engine work run in `@work(thread=True)` workers that
return or post immutable snapshots (console/messages.py); the handlers here own the state
(History, Sampler, AlertLog, the engine handle) and hand it to the panels' `show()` calls.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header
from textual.worker import Worker

from checks.policy import Policy, load_policy
from console import telemetry
from console.alerts import AlertLog, evaluate
from console.engine_worker import (
    ChatEngine,
    ChatSettings,
    ModelSpec,
    ReplyStats,
    Stopper,
    generation_config,
    load_engine,
    stream_reply,
)
from console.history import History
from console.messages import (
    HostSampled,
    ModelLoaded,
    ModelUnavailable,
    NpuSampled,
    ReplayEnded,
    ReplayTick,
    ReplyDelta,
    ReplyFinished,
)
from console.msprof import MsprofError, OpConflict, read_conflicts
from console.recording import (
    Player,
    Recorder,
    RecordingError,
    default_recordings_dir,
    new_recording_path,
)
from console.snapshots import Alert, EngineSnapshot, HostSnapshot, NpuSnapshot
from console.widgets.alerts import AlertsPanel
from console.widgets.chat import ChatPane
from console.widgets.engine_panel import EnginePanel
from console.widgets.host import HostPanel
from console.widgets.npu import NpuPanel, hbm_history_key, temperature_history_key
from console.widgets.pressure import PressurePanel
from probes.host import Host

Clock = Callable[[], float]
W = TypeVar("W", bound=Widget)


@dataclass(frozen=True)
class ConsoleOptions:
    """Everything the command line decides; the app reads nothing else from the outside."""

    model: ModelSpec | None = None  # None: no local model (or an engine handed in)
    interval_s: float = 2.0
    npu_timeout_s: float = 5.0
    policy_path: Path | None = None
    record: Path | None = None
    replay: Path | None = None
    replay_speed: float = 1.0
    root: str = "/"
    msprof: Path | None = None
    read_only: bool = False
    sample_live: bool = True  # False: no telemetry timers (fixed-data tests, bench baseline)
    log_dir: str | None = None  # the CANN application log directory, resolved by the CLI
    transcript_dir: Path = field(default_factory=Path.cwd)
    # the default place of recordings (`r` without --record FILE, `--record` without FILE)
    recordings_dir: Path = field(
        default_factory=lambda: default_recordings_dir(os.environ).expanduser())
    settings: ChatSettings = field(default_factory=ChatSettings)


class ConsoleApp(App[int]):
    """ascend-console: chat with the engine beside live NPU, pressure, engine and host panels."""

    CSS_PATH = "console.tcss"
    TITLE = "ascend-console"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "escape", "cancel / leave prompt", show=True),
        Binding("d", "doctor", "doctor"),
        Binding("slash", "playbooks", "playbooks"),
        Binding("question_mark", "help", "help"),
        Binding("r", "toggle_record", "record"),
        Binding("y", "copy_reply", "copy reply"),
        Binding("ctrl+s", "save_transcript", "save chat", priority=True),
        Binding("i", "focus_prompt", "prompt", show=False),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, options: ConsoleOptions | None = None, *, engine: ChatEngine | None = None,
                 host: Host | None = None, clock: Clock = time.time,
                 policy: Policy | None = None) -> None:
        super().__init__()
        self.options = options or ConsoleOptions()
        self.clock = clock
        self.policy = policy or load_policy(self.options.policy_path)
        self.host = host if host is not None else _live_host(self.options.root)
        self.engine: ChatEngine | None = engine
        self.model_name = "fake engine" if engine is not None else _model_name(self.options)
        self.history = History()
        self.sampler = telemetry.Sampler(
            self.options.interval_s,
            float(self.policy.get("console", "stale_after_intervals")), clock)
        self.alert_log = AlertLog()
        self.host_snapshot: HostSnapshot | None = None
        self.engine_snapshot: EngineSnapshot | None = None
        self.best_decode_tokens_per_s: float | None = None
        self.conflicts, self.msprof_error = _read_conflicts(self.options.msprof)
        self.recorder: Recorder | None = None
        self.replay_time: float | None = None
        self._npu_worker: Worker[NpuSnapshot] | None = None
        self._stopper: Stopper | None = None
        self._reply_id: int | None = None

    # --- composition -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            yield ChatPane(self.options.settings)
            with VerticalScroll(id="panels"):
                yield NpuPanel(float(self.policy.get("npu", "temperature_warn_c")),
                               float(self.policy.get("npu", "temperature_fail_c")), id="npu")
                yield PressurePanel(id="pressure")
                yield EnginePanel(id="engine")
                yield HostPanel(id="host")
        yield AlertsPanel(id="alerts")
        yield Footer()

    def _w(self, kind: type[W]) -> W:
        """A widget of the main screen, whichever screen is on top (doctor, help, …)."""
        return self._main.query_one(kind)

    def on_mount(self) -> None:
        self._main = self.screen
        self._set_subtitle()
        chat = self._w(ChatPane)
        if self.engine is not None:
            chat.set_status(f"model: {self.model_name} — ready", ready=True)
            self._show_engine()
        elif self.options.model is not None:
            chat.set_status(f"loading model… {self.options.model.path}", ready=False)
            self.load_model(self.options.model)
        else:
            chat.set_status("no model: pass --model DIR or --demo-model KIND", ready=False)
        self._w(PressurePanel).show(None, None, self.conflicts)
        if self.msprof_error:
            self.notify(self.msprof_error, title="--msprof", severity="error", timeout=20)
        if self.options.record is not None and not self.options.read_only:
            self._start_recording(self.options.record)
        if self.options.replay is not None:
            self.replay(self.options.replay, self.options.replay_speed)
        elif self.options.sample_live:
            self.tick()
            self.set_interval(self.options.interval_s, self.tick, name="telemetry")
        chat.focus_prompt()

    def _set_subtitle(self) -> None:
        parts = [self.model_name]
        if self.options.replay is not None:
            when = "…" if self.replay_time is None else _clock_text(self.replay_time)
            parts.insert(0, f"REPLAY {when}")
        if self.recorder is not None:
            parts.append(f"● REC {self.recorder.path.name}")
        if self.options.read_only:
            parts.append("read-only")
        self.sub_title = " · ".join(parts)

    # --- telemetry ---------------------------------------------------------------------------

    def tick(self) -> None:
        """Every interval: start the samplers; never two npu-smi at once (late: show its age)."""
        self.sample_host()
        if self._npu_worker is None or self._npu_worker.is_finished:
            self._npu_worker = self.sample_npu()  # its NpuSampled redraws the panel
            return
        with suppress(NoMatches):  # npu-smi is late: redraw the age, STALE and the alert
            self._show_npu()
            self._update_alerts()

    @work(thread=True, exclusive=True, group="npu", exit_on_error=False)
    def sample_npu(self) -> NpuSnapshot:
        snapshot = telemetry.sample_npu(self.host, self.options.npu_timeout_s, self.clock)
        self.post_message(NpuSampled(snapshot))
        return snapshot

    @work(thread=True, exclusive=True, group="host", exit_on_error=False)
    def sample_host(self) -> None:
        self.post_message(HostSampled(telemetry.sample_host(self.options.log_dir, self.clock)))

    def on_npu_sampled(self, message: NpuSampled) -> None:
        with suppress(NoMatches):  # a sample that lands while the app closes is dropped
            self._take_npu(message.snapshot)

    def on_host_sampled(self, message: HostSampled) -> None:
        with suppress(NoMatches):
            self._take_host(message.snapshot)

    def _take_npu(self, snapshot: NpuSnapshot) -> None:
        self.sampler.update(snapshot)
        for chip in snapshot.chips:
            self.history.add(temperature_history_key(chip.key), snapshot.taken_at,
                             chip.temperature_c)
            self.history.add(hbm_history_key(chip.key), snapshot.taken_at, chip.hbm_used_mb)
        self._record(snapshot)
        self._show_npu()
        self._update_alerts()

    def _take_host(self, snapshot: HostSnapshot) -> None:
        self.host_snapshot = snapshot
        self._record(snapshot)
        self._w(HostPanel).show(snapshot)

    def _now(self) -> float:
        return self.replay_time if self.replay_time is not None else self.clock()

    def _show_npu(self) -> None:
        shown = self.sampler.last_good or self.sampler.latest
        if shown is None:
            return
        now = self._now()
        self._w(NpuPanel).show(shown, self.history, now, self.sampler.is_stale(now))
        self._w(PressurePanel).show(shown if shown.ok else None, self.engine_snapshot,
                                           self.conflicts)

    def _update_alerts(self) -> None:
        now = self._now()
        alerts = evaluate(self.sampler.last_good, self.engine_snapshot, self.policy, now,
                          self.sampler.stale_after_s, self.best_decode_tokens_per_s)
        raised = self.alert_log.update(alerts)
        self._w(AlertsPanel).show(list(self.alert_log.entries))
        for alert in raised:  # a toast reaches whatever screen is on top
            self._notify_alert(alert)
            self._record(alert)

    def _notify_alert(self, alert: Alert) -> None:
        self.notify(f"{alert.message}: {alert.value}", title="alert",
                    severity="error" if alert.level == "fail" else "warning")

    # --- replay ------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def replay(self, path: Path, speed: float) -> None:
        try:
            player = Player(path, speed=speed)
            for snapshot in player.play():
                if isinstance(snapshot, NpuSnapshot):
                    self.post_message(ReplayTick(snapshot.taken_at, snapshot, None))
                elif isinstance(snapshot, HostSnapshot):
                    self.post_message(ReplayTick(snapshot.taken_at, None, snapshot))
                elif isinstance(snapshot, EngineSnapshot):
                    self.post_message(ReplayTick(snapshot.taken_at, None, None, snapshot))
        except RecordingError as exc:
            self.post_message(ReplayEnded(str(exc)))
            return
        self.post_message(ReplayEnded(skipped_rows=player.skipped_rows))

    def on_replay_tick(self, message: ReplayTick) -> None:
        with suppress(NoMatches):
            self._replayed(message)

    def _replayed(self, message: ReplayTick) -> None:
        self.replay_time = message.recorded_at
        self._set_subtitle()
        if message.npu is not None:
            self._take_npu(message.npu)
        if message.host is not None:
            self._take_host(message.host)
        if isinstance(message.engine, EngineSnapshot):
            self._take_engine(message.engine)

    def on_replay_ended(self, message: ReplayEnded) -> None:
        if message.error:
            self.notify(message.error, title="replay", severity="error", timeout=30)
        elif message.skipped_rows:
            self.notify(f"end of the recording; {message.skipped_rows} damaged row(s) were "
                        "skipped", title="replay", severity="warning")
        else:
            self.notify("end of the recording", title="replay")

    # --- the model ---------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="engine", exit_on_error=False)
    def load_model(self, spec: ModelSpec) -> None:
        load_engine(spec, self.post_message)

    def on_model_loaded(self, message: ModelLoaded) -> None:
        self.engine = message.engine
        self._w(ChatPane).set_status(
            f"model: {self.model_name} — ready (loaded in {message.load_s:.1f} s)", ready=True)
        self._show_engine()

    def on_model_unavailable(self, message: ModelUnavailable) -> None:
        text = message.reason + (f"\n{message.remedy}" if message.remedy else "")
        self._w(ChatPane).set_status(text, ready=False)
        self._w(EnginePanel).show(None, self.history)

    def _show_engine(self) -> None:
        if self.engine is None:
            return
        try:
            snapshot = EngineSnapshot.from_stats(self.engine.stats, self.engine.config,
                                                 self.clock())
        except Exception:  # an engine without stats still chats; the panel says so
            return
        self._take_engine(snapshot)

    def _take_engine(self, snapshot: EngineSnapshot) -> None:
        self.engine_snapshot = snapshot
        t = snapshot.taken_at
        self.history.add("engine:decode_tokens_per_s", t, snapshot.decode_tokens_per_s)
        self.history.add("engine:prefill_tokens_per_s", t, snapshot.prefill_tokens_per_s)
        self.history.add("engine:ttft_s", t, snapshot.ttft_s)
        self._w(EnginePanel).show(snapshot, self.history)
        self._record(snapshot)

    # --- chat ----------------------------------------------------------------------------

    @on(ChatPane.Send)
    async def _send(self, message: ChatPane.Send) -> None:
        if self.engine is None:
            return
        chat = self._w(ChatPane)
        reply_id = await chat.begin_reply(message.prompt)
        self._reply_id, self._stopper = reply_id, Stopper()
        self.generate(self.engine, message.settings.messages(chat.history), message.settings,
                      reply_id, self._stopper)

    @work(thread=True, exclusive=True, group="chat", exit_on_error=False)
    def generate(self, engine: ChatEngine, messages: list[dict[str, str]],
                 settings: ChatSettings, reply_id: int, stopper: Stopper) -> ReplyStats:
        try:
            config = generation_config(settings) if _is_real(engine) else settings
        except Exception as exc:
            stats = ReplyStats(finish_reason="error")
            self.post_message(ReplyFinished(reply_id, stats, f"{type(exc).__name__}: {exc}"))
            return stats
        return stream_reply(engine, messages, config, reply_id, self.post_message, stopper)

    async def on_reply_delta(self, message: ReplyDelta) -> None:
        await self._w(ChatPane).append_reply(message.reply_id, message.text,
                                                    message.tokens)

    async def on_reply_finished(self, message: ReplyFinished) -> None:
        await self._w(ChatPane).finish_reply(message.reply_id, message.stats,
                                                    message.error)
        if message.reply_id == self._reply_id:
            self._reply_id, self._stopper = None, None
        if message.error:
            self.notify(message.error, title="generation failed", severity="error")
        self._show_engine()
        rate = self.engine_snapshot.decode_tokens_per_s if self.engine_snapshot else None
        if rate is not None and message.stats.finish_reason != "cancelled":
            self.best_decode_tokens_per_s = max(rate, self.best_decode_tokens_per_s or 0.0)
        self._update_alerts()

    # --- actions -----------------------------------------------------------------------------

    @property
    def generating(self) -> bool:
        return self._stopper is not None

    def action_escape(self) -> None:
        """Esc: cancel the running reply; otherwise leave the prompt so letter keys work."""
        if self.cancel_generation():
            return
        if self.focused is not None:
            self.set_focus(None)

    def cancel_generation(self) -> bool:
        if self._stopper is None:
            return False
        self._stopper.set()
        if self.engine is not None:
            self.engine.cancel()
        self.notify("generation cancelled", timeout=2)
        return True

    def action_focus_prompt(self) -> None:
        self._w(ChatPane).focus_prompt()

    def action_doctor(self) -> None:
        from console.screens.doctor import DoctorScreen

        self.push_screen(DoctorScreen(self.run_doctor))

    def run_doctor(self) -> Any:
        """What the doctor screen runs (in its worker): every check against this console's host."""
        from checks.context import Context
        from checks.registry import all_checks
        from checks.runner import run_checks

        model_dir = None
        spec = self.options.model
        if spec is not None and spec.path.is_dir() and self.options.root == "/":
            model_dir = spec.path.resolve()
        return run_checks(all_checks(), Context(self.host, self.policy, model_dir))

    def action_playbooks(self) -> None:
        from console.screens.playbook import PlaybookBrowser

        self.push_screen(PlaybookBrowser())

    def action_help(self) -> None:
        from console.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.key_help()))

    def key_help(self) -> list[tuple[str, str]]:
        """(key, what it does) for every binding, for the help screen."""
        out = []
        for binding in self.BINDINGS:
            if isinstance(binding, Binding):
                out.append((binding.key_display or binding.key, binding.description
                            or binding.action))
        out.append(("ctrl+p", "command palette: every action by name"))
        out.append(("enter", "send the prompt"))
        return out

    def action_toggle_record(self) -> None:
        if self.options.read_only:
            self.notify("read-only: recording is disabled", severity="warning")
            return
        if self.recorder is not None:
            path = self.recorder.path
            self._stop_recording()
            self.notify(f"recording stopped: {path}")
            return
        path = self.options.record or new_recording_path(self.options.recordings_dir)
        self._start_recording(path)

    def _start_recording(self, path: Path) -> None:
        try:
            if path.parent == self.options.recordings_dir:  # the default place: make it
                path.parent.mkdir(parents=True, exist_ok=True)
            self.recorder = Recorder(path)
        except (RecordingError, OSError) as exc:
            self.notify(str(exc), title="record", severity="error", timeout=15)
            return
        self.notify(f"recording telemetry to {path}")
        self._set_subtitle()

    def _stop_recording(self) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            try:
                recorder.close()
            except RecordingError as exc:
                self.notify(str(exc), title="record", severity="error")
        self._set_subtitle()

    def _record(self, snapshot: Any) -> None:
        if self.recorder is None or self.options.replay is not None:
            return
        try:
            self.recorder.add(snapshot)
        except RecordingError as exc:
            self.notify(f"{exc}; recording stopped", title="record", severity="error")
            self.recorder = None
            self._set_subtitle()

    def action_copy_reply(self) -> None:
        text = self._w(ChatPane).last_reply()
        if text is None:
            self.notify("no reply to copy yet", severity="warning")
            return
        self.copy_to_clipboard(text)  # OSC 52: works over ssh and inside tmux
        self.notify(f"copied the last reply ({len(text)} characters)")

    def action_save_transcript(self) -> None:
        chat = self._w(ChatPane)
        try:
            md_path, json_path = chat.save_transcript(self.options.transcript_dir,
                                                      self.model_name)
        except OSError as exc:
            self.notify(f"{self.options.transcript_dir}: cannot save the transcript ({exc})",
                        severity="error")
            return
        self.notify(f"transcript saved: {md_path} (and {json_path.name})", timeout=10)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Doctor", "run every check (d)", self.action_doctor)
        yield SystemCommand("Playbooks", "search the playbooks by symptom (/)",
                            self.action_playbooks)
        yield SystemCommand("Help", "every key (?)", self.action_help)
        yield SystemCommand("Cancel generation", "stop the running reply (esc)",
                            self.cancel_generation)
        yield SystemCommand("Copy last reply", "to the clipboard via OSC 52 (y)",
                            self.action_copy_reply)
        yield SystemCommand("Save transcript", "write the chat as Markdown and JSON (ctrl+s)",
                            self.action_save_transcript)
        yield SystemCommand("Focus prompt", "type a message (i)", self.action_focus_prompt)
        if not self.options.read_only:
            yield SystemCommand("Toggle recording", "record telemetry to SQLite (r)",
                                self.action_toggle_record)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "toggle_record" and self.options.read_only)

    async def action_quit(self) -> None:
        self.cancel_generation()
        self._stop_recording()
        self.exit(0)


def _is_real(engine: ChatEngine) -> bool:
    return type(engine).__module__.startswith("engine.")


def _live_host(root: str) -> Host:
    from probes.live import LiveHost

    return LiveHost(root=root)


def _model_name(options: ConsoleOptions) -> str:
    if options.model is None:
        return "no model"
    return options.model.demo_kind or options.model.path.name


def _read_conflicts(directory: Path | None) -> tuple[list[OpConflict] | None, str]:
    """The msprof bank-conflict ratios (read once: a profile does not change), or the error."""
    if directory is None:
        return None, ""
    try:
        return read_conflicts(directory), ""
    except MsprofError as exc:
        return None, str(exc)


def _clock_text(t: float) -> str:
    return dt.datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
