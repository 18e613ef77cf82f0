"""The chat pane's controller: gets the backend ready, queues what is typed before that, starts
one reply at a time in a worker thread and renders its events. State: `ChatSession`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.chat.backend import BackendUnavailable, ChatBackend, ChatSettings
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
            post(BackendFailed(exc.reason, exc.remedy))
            return
        except Exception as exc:  # the app keeps running; the pane says what broke
            post(BackendFailed(f"{type(exc).__name__}: {exc}"))
            return
        post(BackendReady(line))

    def loading_line(self) -> str:
        elapsed_s = self._clock() - self._started_at
        label = self.backend.label if self.backend is not None else ""
        line = f"loading {label}… {self._stage} ({elapsed_s:.0f} s)"
        queued = len(self.session.queue)
        if queued:
            line += f" · {queued} message{'s' if queued > 1 else ''} queued, sent when ready"
        return line

    def _show_loading(self) -> None:
        if self.session.state == "preparing":
            self.pane.set_status(self.loading_line(), ready=False)

    def progress(self, stage: str) -> None:
        self._stage = one_line(stage)
        self._show_loading()

    async def ready(self, line: str) -> None:
        self._stop_timer()
        self.session.state = "ready"
        self.pane.set_status(f"model: {self.label} — {one_line(line)}", ready=True)
        self.engine_changed(self.backend)
        await self._send_next()

    def failed(self, reason: str, remedy: str) -> None:
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
        note = QUEUED_NOTE if action == "queued" else ""
        await self.pane.add_user(prompt.turn_id, text, note)
        if action == "queued":
            safe.notify(self.app, QUEUED_NOTE, timeout=3)
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
        await self._send_next()

    def cancel(self) -> bool:
        if self.stopper is None:
            return False
        self.stopper.set()
        if self.backend is not None:
            self.backend.cancel()
        safe.notify(self.app, "generation cancelled", timeout=2)
        return True
