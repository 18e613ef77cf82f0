"""The chat pane mounted alone in a tiny host app: it renders and posts, it keeps no state."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Input, Static

from console.chat.reply import ReplyStats
from console.ui.widgets.chat import ChatPane


class Host(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[ChatPane.Send] = []

    def compose(self) -> ComposeResult:
        yield ChatPane()

    def on_chat_pane_send(self, message: ChatPane.Send) -> None:
        self.sent.append(message)


async def test_pane_sends_valid_prompts_even_while_loading() -> None:
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        pane = app.query_one(ChatPane)
        pane.focus_prompt()
        pane.query_one("#set-top-p", Input).value = "2"
        await pilot.press("h", "i", "enter")
        await pilot.pause()
        assert app.sent == []  # top_p out of range: refused, the text stays
        assert pane.query_one("#prompt", Input).value == "hi"
        pane.query_one("#set-top-p", Input).value = "0.9"
        await pilot.press("enter")
        await pilot.pause()
        [sent] = app.sent  # not ready: sent all the same, the controller queues it
        assert sent.prompt == "hi" and sent.settings.top_p == 0.9
        assert pane.query_one("#prompt", Input).value == ""


async def test_pane_places_each_reply_after_its_message() -> None:
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        pane = app.query_one(ChatPane)
        await pane.add_user(1, "first", note="model still loading — sent when ready")
        await pane.add_user(2, "second", note="model still loading — sent when ready")
        pane.set_user_note(1, "")
        await pane.begin_reply(1)
        await pane.append_reply(1, "High-bandwidth ", 1)
        await pane.append_reply(1, "memory.", 2)
        text = await pane.finish_reply(1, ReplyStats(2, 0.05, 20.0, 0.1, "stop"))
        await pilot.pause()
        assert text == "High-bandwidth memory."
        log = list(pane.query_one("#chat-log").children)
        assert log == [pane.users[1], pane.replies[1], pane.users[2]]
        assert "TTFT 50 ms" in str(pane.replies[1].query_one(".turn-footer", Static).render())
        assert not pane.users[1].query_one(".turn-note").display
        assert pane.users[2].query_one(".turn-note").display
