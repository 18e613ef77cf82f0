"""The chat pane's controller: gets the backend ready, queues what is typed before that, starts
one reply at a time in a worker thread and renders its events. State: `ChatSession`.

An endpoint that is down (at start, or later: a failed reply, or its /metrics stops answering)
is asked again in the background after `RETRY_S` (growing); meanwhile what is typed is queued
as while a model loads, and sent once the endpoint lists its models again."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.chat.backend import BackendUnavailable, ChatBackend, ChatSettings
from console.chat.openai import EndpointBackend
from console.chat.reply import ReplyDelta, ReplyDone, ReplyEvent, ReplyStats, Stopper, run_reply
from console.chat.session import QUEUED_NOTE, ChatSession, Prompt
from console.ui import safe
from console.ui.messages import BackendFailed, BackendProgress, BackendReady
from console.ui.messages import ReplyEvent as ReplyMessage
from console.ui.widgets.chat import ChatPane
from console.ui.wiring import Wiring
from probes.textsafe import one_line

if TYPE_CHECKING:
    from textual.timer import Timer

RETRY_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)  # waits before each new try; the last repeats
RECONNECT_NOTE = "endpoint not reachable — sent when it answers"


def _without_url(reason: str) -> str:
    """"http://h:8000/v1/models: cannot connect (…)" -> "cannot connect (…)": the status line
    already names the endpoint (the title bar does)."""
    head, sep, rest = reason.partition(": ")
    return rest if sep and head.startswith(("http://", "https://")) and rest else reason


class ChatController:
    def __init__(self, wiring: Wiring, backend: ChatBackend | None,
                 engine_changed: Callable[[ChatBackend | None], None],
                 reply_finished: Callable[[ChatBackend | None, ReplyStats], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.w, self.app = wiring, wiring.app
        self.backend = backend
        self.engine_changed = engine_changed
        self.reply_finished = reply_finished
        self.session = ChatSession()
        self.stopper: Stopper | None = None
        self._clock = clock
        self._started_at = 0.0
        self._stage = ""
        self._timer: Timer | None = None
        self._retry_timer: Timer | None = None
        self._attempts = 0  # failed tries in a row to reach the endpoint
        self._down_reason = ""
        self._retry_at = 0.0

    @property
    def pane(self) -> ChatPane:
        return self.w.widget(ChatPane)

    @property
    def generating(self) -> bool:
        return self.stopper is not None

    # --- getting ready -------------------------------------------------------------------------

    def start(self) -> None:
        if self.backend is None:
            self.session.state = "unavailable"
            self.pane.set_status("no model: pass --model DIR, --demo-model KIND or "
                                 "--endpoint URL", ready=False)
            return
        self._started_at = self._clock()
        self._stage = "starting"
        self._show_loading()
        self._timer = self.app.set_interval(1.0, self._show_loading, name="chat-loading")
        self.app.run_worker(self._prepare, thread=True, group="backend", exclusive=True,
                            exit_on_error=False)

    def _prepare(self) -> None:
        """In a worker thread: only messages leave it."""
        assert self.backend is not None
        post = self.app.post_message

        def progress(stage: str) -> None:
            post(BackendProgress(stage))

        try:
            line = self.backend.prepare(progress)
        except BackendUnavailable as exc:
            post(BackendFailed(exc.reason, exc.remedy, exc.transient))
            return
        except Exception as exc:  # the app keeps running; the pane says what broke
            post(BackendFailed(f"{type(exc).__name__}: {exc}"))
            return
        post(BackendReady(line))

    def loading_line(self) -> str:
        elapsed_s = self._clock() - self._started_at
        label = self.backend.label if self.backend is not None else ""
        if self._attempts:
            wait_s = max(0.0, self._retry_at - self._clock())
            line = (f"endpoint down: {self._down_reason} · try {self._attempts + 1} "
                    + (f"in {wait_s:.0f} s" if wait_s >= 0.5 else "now"))
        else:
            line = f"loading {label}… {self._stage} ({elapsed_s:.0f} s)"
        queued = len(self.session.queue)
        if queued:
            when = "it answers" if self._attempts else "ready"
            line += f" · {queued} message{'s' if queued > 1 else ''} queued, sent when {when}"
        return line

    def _show_loading(self) -> None:
        if self.session.state == "preparing":
            self.pane.set_status(self.loading_line(), ready=False)

    def progress(self, stage: str) -> None:
        self._stage = one_line(stage)
        self._show_loading()

    async def ready(self, line: str) -> None:
        self._stop_timer()
        self._attempts, self._down_reason = 0, ""
        self.session.state = "ready"
        self.pane.set_status(f"model: {self.label} — {one_line(line)}", ready=True)
        self.engine_changed(self.backend)
        await self._send_next()

    def failed(self, reason: str, remedy: str, transient: bool = False) -> None:
        if transient:
            self._reconnect_later(reason)
            return
        self._stop_timer()
        self.session.state = "unavailable"
        self.pane.set_status(reason + (f"\n{remedy}" if remedy else ""), ready=False)
        while self.session.queue:
            prompt = self.session.queue.popleft()
            self.pane.set_user_note(prompt.turn_id, "not sent: the model is not available")
            self.pane.restore_prompt(prompt.text)
        self.engine_changed(None)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self._retry_timer is not None:
            self._retry_timer.stop()
            self._retry_timer = None

    # --- an endpoint that comes and goes -----------------------------------------------------

    @property
    def reconnecting(self) -> bool:
        return self._attempts > 0

    def _reconnect_later(self, reason: str) -> None:
        """The endpoint did not answer: queue what is typed, say so, and try again later."""
        self._stop_timer()
        self.session.state = "preparing"
        self._attempts += 1
        self._down_reason = _without_url(one_line(reason))
        wait_s = RETRY_S[min(self._attempts, len(RETRY_S)) - 1]
        self._retry_at = self._clock() + wait_s
        self._retry_timer = self.app.set_timer(wait_s, self._try_again, name="chat-retry")
        self._timer = self.app.set_interval(1.0, self._show_loading, name="chat-loading")
        self._show_loading()
        self.engine_changed(None)

    def _try_again(self) -> None:
        if self.session.state != "preparing" or self._closing():
            return
        self._retry_at = self._clock()
        self._stage = "reconnecting"
        self._show_loading()
        self.app.run_worker(self._prepare, thread=True, group="backend", exclusive=True,
                            exit_on_error=False)

    def _closing(self) -> bool:
        return bool(getattr(self.app, "_leaving", False))

    def endpoint_seen(self, answered: bool, reason: str) -> None:
        """What the serving panel's scrape learned: a ready chat whose endpoint stopped
        answering reconnects; one waiting to reconnect tries at once when it answers again."""
        if not answered and self.session.state == "ready" and not self.generating:
            self._reconnect_later(reason or "its /metrics does not answer")
        elif answered and self.reconnecting and self._retry_timer is not None:
            self._retry_timer.stop()
            self._retry_timer = None
            self._try_again()

    @property
    def label(self) -> str:
        return self.backend.label if self.backend is not None else "no model"

    # --- sending -------------------------------------------------------------------------------

    async def send(self, text: str, settings: ChatSettings) -> None:
        action, prompt = self.session.submit(text, settings)
        if prompt is None:
            self.pane.restore_prompt(text)
            safe.notify(self.app, "a reply is still streaming; Esc cancels it" if action == "busy"
                        else "no model to send to (see the line above the chat)",
                        severity="warning")
            return
        queued_note = RECONNECT_NOTE if self.reconnecting else QUEUED_NOTE
        note = queued_note if action == "queued" else ""
        await self.pane.add_user(prompt.turn_id, text, note)
        if action == "queued":
            safe.notify(self.app, queued_note, timeout=3)
            self._show_loading()
            return
        await self._start(prompt)

    async def _start(self, prompt: Prompt) -> None:
        assert self.backend is not None
        messages = self.session.start(prompt)
        await self.pane.begin_reply(prompt.turn_id)
        self.stopper = stopper = Stopper()
        backend, post = self.backend, self.app.post_message

        def work() -> None:
            run_reply(backend, messages, prompt.settings, prompt.turn_id,
                      lambda event: post(ReplyMessage(event)), stopper)

        self.app.run_worker(work, thread=True, group="chat", exclusive=True,
                            exit_on_error=False)

    async def _send_next(self) -> None:
        prompt = self.session.next_queued()
        if prompt is not None:
            self.pane.set_user_note(prompt.turn_id, "")
            await self._start(prompt)

    async def reply_event(self, event: ReplyEvent) -> None:
        if isinstance(event, ReplyDelta):
            await self.pane.append_reply(event.reply_id, event.text, event.tokens)
            return
        await self._finished(event)

    async def _finished(self, event: ReplyDone) -> None:
        text = await self.pane.finish_reply(event.reply_id, event.stats, event.error)
        in_flight = self.session.in_flight
        if in_flight is None or in_flight.turn_id != event.reply_id:
            return
        prompt = self.session.finish(text, event.stats, event.error)
        self.stopper = None
        if event.error:
            safe.notify(self.app, event.error, title="the reply failed", severity="error")
            if prompt is not None:
                self.pane.restore_prompt(prompt.text)
        self.reply_finished(self.backend, event.stats)
        if (event.error and event.stats.finish_reason != "cancelled"
                and isinstance(self.backend, EndpointBackend)):
            self._check_backend()  # a server that died mid-reply: reconnect if it is down
            return
        await self._send_next()

    def _check_backend(self) -> None:
        """Ask the backend again (in a worker): ready as before, or down and reconnecting."""
        self.session.state = "preparing"
        self._stage = "checking the endpoint after the failed reply"
        self._started_at = self._clock()
        self.app.run_worker(self._prepare, thread=True, group="backend", exclusive=True,
                            exit_on_error=False)

    def cancel(self) -> bool:
        if self.stopper is None:
            return False
        self.stopper.set()
        if self.backend is not None:
            self.backend.cancel()
        safe.notify(self.app, "generation cancelled", timeout=2)
        return True
