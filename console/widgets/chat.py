"""The chat pane: the conversation as streamed Markdown, a prompt, and a small settings form.

The pane owns the session's history and its rendering; it never runs the engine. It posts
`ChatPane.Send` when the user presses Enter; the app starts the worker and feeds the reply back
through `append_reply` / `finish_reply` (Markdown.get_stream batches the appends, so a fast
engine never makes the widget fall behind or flicker).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Collapsible, Input, Label, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from console.engine_worker import ChatSettings, ReplyStats

WAITING = "waiting for the first token…"


class Turn(Vertical):
    """One message: who, the Markdown body, and (for replies) a footer with its numbers."""

    DEFAULT_CSS = """
    Turn { height: auto; margin: 0 0 1 0; }
    Turn > .turn-who { color: $text-muted; text-style: bold; }
    Turn > Markdown { margin: 0; padding: 0 1; }
    Turn > .turn-footer { color: $text-muted; padding: 0 1; }
    Turn.user > Markdown { background: $boost; }
    """

    def __init__(self, role: str, text: str = "", reply_id: int | None = None) -> None:
        super().__init__(classes=role)
        self.role = role
        self.text = text
        self.reply_id = reply_id
        self.stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Label("you" if self.role == "user" else "model", classes="turn-who")
        yield Markdown(self.text)
        if self.role == "assistant":
            yield Static(WAITING, classes="turn-footer")

    @property
    def body(self) -> Markdown:
        return self.query_one(Markdown)

    def set_footer(self, text: str) -> None:
        self.query_one(".turn-footer", Static).update(text)


class ChatPane(Vertical):
    """Conversation + prompt + settings. Public calls are made by the app on the UI thread."""

    BORDER_TITLE = "chat"

    class Send(Message):
        """The user pressed Enter on a non-empty prompt (and the settings are valid)."""

        def __init__(self, prompt: str, settings: ChatSettings) -> None:
            super().__init__()
            self.prompt = prompt
            self.settings = settings

    def __init__(self, settings: ChatSettings | None = None, *, id: str | None = "chat") -> None:
        super().__init__(id=id)
        self._initial = settings or ChatSettings()
        self.history: list[dict[str, str]] = []  # the session, as sent to the engine
        self.replies: dict[int, Turn] = {}
        self.footers: list[dict[str, Any]] = []
        self.ready = False
        self.busy = False
        self._next_id = 1

    def compose(self) -> ComposeResult:
        yield Static("loading model…", id="chat-status")
        with VerticalScroll(id="chat-log"):
            pass
        with Collapsible(title="settings", collapsed=True, id="chat-settings"):
            yield Label("system prompt")
            yield Input(self._initial.system_prompt, id="set-system")
            with Horizontal(id="chat-numbers"):
                yield Label("temperature")
                yield Input(str(self._initial.temperature), id="set-temperature",
                            type="number")
                yield Label("top_p")
                yield Input(str(self._initial.top_p), id="set-top-p", type="number")
                yield Label("max new")
                yield Input(str(self._initial.max_new_tokens), id="set-max-new",
                            type="integer")
        yield Input(placeholder="ask the model… (Enter sends, Esc cancels)", id="prompt")

    def on_mount(self) -> None:
        self.query_one("#chat-log", VerticalScroll).anchor()

    # --- state shown at the top -----------------------------------------------------------

    def set_status(self, text: str, ready: bool) -> None:
        self.ready = ready
        status = self.query_one("#chat-status", Static)
        status.update(text)
        status.set_class(not ready, "not-ready")

    # --- settings --------------------------------------------------------------------------

    def settings(self) -> ChatSettings | str:
        """The form's values, or one line saying what is wrong with them."""
        try:
            settings = ChatSettings(
                system_prompt=self.query_one("#set-system", Input).value.strip(),
                temperature=float(self.query_one("#set-temperature", Input).value or 0),
                top_p=float(self.query_one("#set-top-p", Input).value or 1),
                max_new_tokens=int(self.query_one("#set-max-new", Input).value or 256),
                seed=self._initial.seed)
        except ValueError as exc:
            return f"settings: {exc}"
        problems = settings.problems()
        return "settings: " + "; ".join(problems) if problems else settings

    # --- sending ---------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        prompt = event.value.strip()
        if not prompt:
            return
        if not self.ready:
            self.notify("the model is not loaded yet", severity="warning")
            return
        if self.busy:
            self.notify("a reply is still streaming; Esc cancels it", severity="warning")
            return
        settings = self.settings()
        if isinstance(settings, str):
            self.notify(settings, severity="error")
            return
        event.input.value = ""
        self.post_message(self.Send(prompt, settings))

    async def begin_reply(self, prompt: str) -> int:
        """Show the user's message and an empty reply; returns the reply's id."""
        reply_id, self._next_id = self._next_id, self._next_id + 1
        self.history.append({"role": "user", "content": prompt})
        turn = Turn("assistant", reply_id=reply_id)
        self.replies[reply_id] = turn
        log = self.query_one("#chat-log", VerticalScroll)
        await log.mount_all([Turn("user", prompt), turn])
        turn.stream = Markdown.get_stream(turn.body)
        self.busy = True
        return reply_id

    async def append_reply(self, reply_id: int, text: str, tokens: int) -> None:
        turn = self.replies.get(reply_id)
        if turn is None or turn.stream is None:
            return
        turn.text += text
        turn.set_footer(f"streaming… {tokens} tokens")
        await turn.stream.write(text)

    async def finish_reply(self, reply_id: int, stats: ReplyStats, error: str = "") -> None:
        turn = self.replies.get(reply_id)
        if turn is None:
            return
        if turn.stream is not None:
            await turn.stream.stop()
            turn.stream = None
        self.busy = False
        if error:
            turn.set_footer(f"error: {error}")
            turn.add_class("failed")
            # give the prompt back so it can be sent again; the failed turn is not history
            prompt = self.history.pop()["content"] if self.history else ""
            self.query_one("#prompt", Input).value = prompt
            return
        turn.set_footer(stats.footer())
        if stats.finish_reason == "cancelled":
            turn.add_class("cancelled")
        self.history.append({"role": "assistant", "content": turn.text})
        self.footers.append({"reply_id": reply_id, **asdict(stats)})

    # --- copy and save -----------------------------------------------------------------------

    def last_reply(self) -> str | None:
        return next((m["content"] for m in reversed(self.history)
                     if m["role"] == "assistant"), None)

    def transcript_markdown(self, model: str) -> str:
        lines = ["# ascend-console transcript", "", f"- model: {model}",
                 f"- saved: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}", ""]
        settings = self.settings()
        if isinstance(settings, ChatSettings) and settings.system_prompt:
            lines += ["## system", "", settings.system_prompt, ""]
        footers = iter(self.footers)
        for message in self.history:
            lines += [f"## {message['role']}", "", message["content"].rstrip(), ""]
            if message["role"] == "assistant":
                footer = next(footers, None)
                if footer is not None:
                    lines += [f"*{ReplyStats(**_stats_fields(footer)).footer()}*", ""]
        return "\n".join(lines)

    def save_transcript(self, directory: Path, model: str) -> tuple[Path, Path]:
        """Write <stamp>.md (for people) and <stamp>.json (for programs); returns both paths."""
        directory.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        md_path = directory / f"ascend-console-{stamp}.md"
        json_path = md_path.with_suffix(".json")
        settings = self.settings()
        document = {"format": "ascend-console-transcript/1", "model": model,
                    "settings": asdict(settings) if isinstance(settings, ChatSettings) else None,
                    "messages": self.history, "replies": self.footers}
        md_path.write_text(self.transcript_markdown(model), encoding="utf-8")
        json_path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
        return md_path, json_path

    def focus_prompt(self) -> None:
        self.query_one("#prompt", Input).focus()


def _stats_fields(footer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in footer.items() if k != "reply_id"}
