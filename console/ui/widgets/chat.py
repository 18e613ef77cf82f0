"""The chat pane: the conversation as streamed Markdown, a prompt, and a small settings form.

The pane renders; it holds no conversation state (that is `console.chat.session`, owned by the
chat controller). It posts `ChatPane.Send` when the user presses Enter; the controller answers
by adding turns and feeding the reply through `append_reply` / `finish_reply`
(Markdown.get_stream batches the appends, so a fast backend never makes the widget fall behind).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Collapsible, Input, Label, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from console.chat.backend import ChatSettings
from console.chat.reply import ReplyStats
from console.ui import safe

WAITING = "waiting for the first token…"


class Turn(Vertical):
    """One message: who, the Markdown body, and (for replies) a footer with its numbers."""

    DEFAULT_CSS = """
    Turn { height: auto; margin: 0 0 1 0; }
    Turn > .turn-who { color: $text-muted; text-style: bold; }
    Turn > Markdown { margin: 0; padding: 0 1; }
    Turn > .turn-footer { color: $text-muted; padding: 0 1; }
    Turn > .turn-note { color: $warning; padding: 0 1; }
    Turn.user > Markdown { background: $boost; }
    """

    def __init__(self, role: str, text: str = "", reply_id: int | None = None,
                 note: str = "") -> None:
        super().__init__(classes=role)
        self.role = role
        self.text = text
        self.reply_id = reply_id
        self.note = note
        self.stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Label("you" if self.role == "user" else "model", classes="turn-who")
        yield Markdown(safe.markdown(self.text))
        if self.role == "assistant":
            yield Static(WAITING, classes="turn-footer")
        else:
            note = Static(safe.block(self.note), classes="turn-note")
            note.display = bool(self.note)
            yield note

    @property
    def body(self) -> Markdown:
        return self.query_one(Markdown)

    def set_footer(self, text: str) -> None:
        self.query_one(".turn-footer", Static).update(safe.block(text))

    def set_note(self, text: str) -> None:
        """A line under a user message ("model still loading — sent when ready")."""
        note = self.query_one(".turn-note", Static)
        note.update(safe.block(text))
        note.display = bool(text)


class ChatPane(Vertical):
    """Conversation + prompt + settings. Public calls are made on the UI thread."""

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
        self.users: dict[int, Turn] = {}
        self.replies: dict[int, Turn] = {}
        self.ready = False

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
        status.update(safe.block(text))
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
        settings = self.settings()
        if isinstance(settings, str):
            safe.notify(self.app, settings, severity="error")
            return
        event.input.value = ""
        self.post_message(self.Send(prompt, settings))

    def restore_prompt(self, text: str) -> None:
        """Give a prompt back to the input (refused, or its reply failed)."""
        prompt = self.query_one("#prompt", Input)
        if not prompt.value:
            prompt.value = text

    async def add_user(self, turn_id: int, text: str, note: str = "") -> None:
        turn = Turn("user", text, note=note)
        self.users[turn_id] = turn
        await self.query_one("#chat-log", VerticalScroll).mount(turn)

    def set_user_note(self, turn_id: int, note: str) -> None:
        turn = self.users.get(turn_id)
        if turn is not None:
            turn.set_note(note)

    async def begin_reply(self, turn_id: int) -> None:
        """An empty reply right after user message `turn_id`; the reply's id is `turn_id`."""
        turn = Turn("assistant", reply_id=turn_id)
        self.replies[turn_id] = turn
        log = self.query_one("#chat-log", VerticalScroll)
        user = self.users.get(turn_id)
        await log.mount(turn, after=user) if user is not None else await log.mount(turn)
        turn.stream = Markdown.get_stream(turn.body)

    async def append_reply(self, reply_id: int, text: str, tokens: int) -> None:
        turn = self.replies.get(reply_id)
        if turn is None or turn.stream is None:
            return
        turn.text += text
        turn.set_footer(f"streaming… {tokens} tokens")
        await turn.stream.write(safe.markdown(text))

    async def finish_reply(self, reply_id: int, stats: ReplyStats, error: str = "") -> str:
        """Close the reply's stream and show its footer; returns its text."""
        turn = self.replies.get(reply_id)
        if turn is None:
            return ""
        if turn.stream is not None:
            await turn.stream.stop()
            turn.stream = None
        if error:
            turn.set_footer(f"error: {error}")
            turn.add_class("failed")
            return turn.text
        turn.set_footer(stats.footer())
        if stats.finish_reason == "cancelled":
            turn.add_class("cancelled")
        return turn.text

    def focus_prompt(self) -> None:
        self.query_one("#prompt", Input).focus()
