"""The chat pieces without the full app: the reply worker, the fake engine, the pane."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.message import Message
from textual.widgets import Input

from console.engine_worker import (
    DEMO_DIR_ENV,
    ChatSettings,
    FakeEngine,
    ModelSpec,
    ReplyStats,
    Stopper,
    demo_dir,
    load_engine,
    stream_reply,
)
from console.messages import ModelUnavailable, ReplyDelta, ReplyFinished
from console.widgets.chat import ChatPane


class Clock:
    """A fake perf_counter: each call advances by `step` seconds."""

    def __init__(self, step: float = 0.01) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def collect() -> tuple[list[Message], Any]:
    posted: list[Message] = []
    return posted, posted.append


def test_stream_reply_batches_deltas_and_measures() -> None:
    posted, post = collect()
    engine = FakeEngine(reply="one two three four five")
    stats = stream_reply(engine, [{"role": "user", "content": "hi"}], None, 7, post, Stopper(),
                         clock=Clock(0.01))
    deltas = [m for m in posted if isinstance(m, ReplyDelta)]
    assert "".join(d.text for d in deltas) == "one two three four five "
    assert deltas[0].tokens == 1  # the first token is shown at once (TTFT)
    assert len(deltas) < 5  # later tokens are batched (40 ms windows)
    assert isinstance(posted[-1], ReplyFinished) and posted[-1].reply_id == 7
    assert stats.tokens == 5 and stats.finish_reason == "stop"
    assert stats.ttft_s == pytest.approx(0.01)
    assert stats.tokens_per_s == pytest.approx(100.0)


def test_stream_reply_stops_when_asked_before_the_engine_starts() -> None:
    _, post = collect()
    stopper = Stopper()
    stopper.set()
    stats = stream_reply(FakeEngine(endless=True), [], None, 1, post, stopper)
    assert stats.finish_reason == "cancelled" and stats.tokens == 1


def test_stream_reply_cancel_from_another_thread() -> None:
    posted, post = collect()
    engine, stopper = FakeEngine(endless=True, token_delay_s=0.01), Stopper()

    def stop() -> None:
        stopper.set()
        engine.cancel()

    timer = threading.Timer(0.1, stop)
    timer.start()
    stats = stream_reply(engine, [], None, 1, post, stopper)
    timer.join()
    assert stats.finish_reason == "cancelled" and stats.tokens > 1
    finished = posted[-1]
    assert isinstance(finished, ReplyFinished) and not finished.error


def test_stream_reply_reports_engine_errors() -> None:
    posted, post = collect()
    stats = stream_reply(FakeEngine(fail_with="HBM ECC error"), [], None, 1, post, Stopper())
    finished = posted[-1]
    assert isinstance(finished, ReplyFinished)
    assert stats.finish_reason == "error" and "HBM ECC error" in finished.error
    assert stats.tokens == 2  # what arrived before the failure was still shown


def test_fake_engine_respects_max_new_tokens() -> None:
    events = list(FakeEngine(reply="a b c d e").chat([], ChatSettings(max_new_tokens=2)))
    assert [e.text for e in events] == ["a ", "b "]
    assert events[-1].finish_reason == "length"


def test_reply_stats_footer() -> None:
    assert ReplyStats(12, 0.0853, 41.96, 1.0, "stop").footer() == \
        "TTFT 85 ms · 42.0 tok/s · 12 tokens"
    assert ReplyStats(0, None, None, 0.0, "cancelled").footer() == \
        "TTFT — · — tok/s · 0 tokens · cancelled"


def test_settings_validation_and_messages() -> None:
    assert ChatSettings().problems() == []
    bad = ChatSettings(temperature=-1, top_p=0, max_new_tokens=0)
    assert len(bad.problems()) == 3
    messages = ChatSettings(system_prompt="be brief").messages([{"role": "user", "content": "x"}])
    assert messages == [{"role": "system", "content": "be brief"},
                        {"role": "user", "content": "x"}]
    assert ChatSettings(system_prompt="").messages([]) == []


def test_demo_dir_default_and_env(tmp_path: Path) -> None:
    assert demo_dir("smollm2-moe-fp8", {}).parts[-2:] == ("demo-assets", "smollm2-moe-fp8")
    assert demo_dir("smollm2", {DEMO_DIR_ENV: str(tmp_path)}) == tmp_path / "smollm2"
    (tmp_path / "config.json").write_text("{}")
    assert demo_dir("smollm2", {DEMO_DIR_ENV: str(tmp_path)}) == tmp_path


def test_missing_model_is_reported_with_the_build_command(tmp_path: Path) -> None:
    posted, post = collect()
    load_engine(ModelSpec(tmp_path / "smollm2-moe-fp8", demo_kind="smollm2-moe-fp8"), post)
    [message] = posted
    assert isinstance(message, ModelUnavailable)
    assert "not built" in message.reason
    assert "make demo" in message.remedy
    assert "python -m demo_models build --out" in message.remedy
    assert "--kind smollm2-moe-fp8" in message.remedy

    posted.clear()
    load_engine(ModelSpec(tmp_path / "nowhere"), post)
    assert isinstance(posted[0], ModelUnavailable) and "--model" in posted[0].remedy


def test_broken_model_dir_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    posted, post = collect()
    load_engine(ModelSpec(tmp_path, device="cpu", dtype="float32"), post)
    assert isinstance(posted[0], ModelUnavailable)
    assert str(tmp_path) in posted[0].reason and "ascend-doctor" in posted[0].remedy


# --- the pane in a tiny host app -------------------------------------------------------------


class Host(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[ChatPane.Send] = []

    def compose(self) -> ComposeResult:
        yield ChatPane()

    def on_chat_pane_send(self, message: ChatPane.Send) -> None:
        self.sent.append(message)


async def test_pane_sends_only_when_ready_and_valid() -> None:
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        pane = app.query_one(ChatPane)
        pane.focus_prompt()
        await pilot.press("h", "i", "enter")
        assert app.sent == []  # not ready: the model is loading
        pane.set_status("ready", ready=True)
        pane.query_one("#set-top-p", Input).value = "2"
        await pilot.press("enter")
        await pilot.pause()
        assert app.sent == []  # top_p out of range
        pane.query_one("#set-top-p", Input).value = "0.9"
        await pilot.press("enter")
        await pilot.pause()
        [sent] = app.sent
        assert sent.prompt == "hi" and sent.settings.top_p == 0.9
        assert pane.query_one("#prompt", Input).value == ""


async def test_pane_transcript(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        pane = app.query_one(ChatPane)
        reply_id = await pane.begin_reply("What is HBM?")
        await pane.append_reply(reply_id, "High-bandwidth ", 1)
        await pane.append_reply(reply_id, "memory.", 2)
        await pane.finish_reply(reply_id, ReplyStats(2, 0.05, 20.0, 0.1, "stop"))
        await pilot.pause()
        assert pane.last_reply() == "High-bandwidth memory."
        md, js = pane.save_transcript(tmp_path, "fake")
        text = md.read_text()
        assert "## user\n\nWhat is HBM?" in text and "High-bandwidth memory." in text
        assert "TTFT 50 ms" in text
        assert '"format": "ascend-console-transcript/1"' in js.read_text()
