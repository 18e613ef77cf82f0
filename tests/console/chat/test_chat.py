"""The headless chat layer: one reply's driver, the local backend, the session (no Textual)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from console.chat.backend import BackendUnavailable, ChatSettings
from console.chat.local import DEMO_DIR_ENV, LocalBackend, ModelSpec, demo_dir
from console.chat.reply import ReplyDelta, ReplyDone, ReplyStats, Stopper, run_reply
from console.chat.session import QUEUED_NOTE, ChatSession
from tests.console.fakes import FakeEngine, fake_backend


class Clock:
    """A fake perf_counter: each call advances by `step` seconds."""

    def __init__(self, step: float = 0.01) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def collect() -> tuple[list[Any], Any]:
    posted: list[Any] = []
    return posted, posted.append


def test_stream_reply_batches_deltas_and_measures() -> None:
    posted, post = collect()
    engine = FakeEngine(reply="one two three four five")
    stats = run_reply(fake_backend(engine), [{"role": "user", "content": "hi"}], ChatSettings(), 7,
                      post, Stopper(),
                         clock=Clock(0.01))
    deltas = [m for m in posted if isinstance(m, ReplyDelta)]
    assert "".join(d.text for d in deltas) == "one two three four five "
    assert deltas[0].tokens == 1  # the first token is shown at once (TTFT)
    assert len(deltas) < 5  # later tokens are batched (40 ms windows)
    assert isinstance(posted[-1], ReplyDone) and posted[-1].reply_id == 7
    assert stats.tokens == 5 and stats.finish_reason == "stop"
    assert stats.ttft_s == pytest.approx(0.01)
    assert stats.tokens_per_s == pytest.approx(100.0)


def test_stream_reply_stops_when_asked_before_the_engine_starts() -> None:
    _, post = collect()
    stopper = Stopper()
    stopper.set()
    stats = run_reply(fake_backend(FakeEngine(endless=True)), [], ChatSettings(), 1, post, stopper)
    assert stats.finish_reason == "cancelled" and stats.tokens == 1


def test_stream_reply_cancel_from_another_thread() -> None:
    posted, post = collect()
    engine, stopper = FakeEngine(endless=True, token_delay_s=0.01), Stopper()
    backend = fake_backend(engine)

    def stop() -> None:
        stopper.set()
        backend.cancel()

    timer = threading.Timer(0.1, stop)
    timer.start()
    stats = run_reply(backend, [], ChatSettings(), 1, post, stopper)
    timer.join()
    assert stats.finish_reason == "cancelled" and stats.tokens > 1
    finished = posted[-1]
    assert isinstance(finished, ReplyDone) and not finished.error


def test_stream_reply_reports_engine_errors() -> None:
    posted, post = collect()
    stats = run_reply(fake_backend(FakeEngine(fail_with="HBM ECC error")), [], ChatSettings(), 1,
                      post, Stopper())
    finished = posted[-1]
    assert isinstance(finished, ReplyDone)
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
    # "length" is OpenAI's finish_reason for a reply cut at max_tokens: said in words
    assert ReplyStats(256, 0.1, 20.0, 13.0, "length", 256).footer().endswith(
        "256 tokens · stopped at the 256-token limit")


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
    backend = LocalBackend(ModelSpec(tmp_path / "smollm2-moe-fp8", demo_kind="smollm2-moe-fp8"))
    with pytest.raises(BackendUnavailable) as caught:
        backend.prepare(lambda stage: None)
    assert "not built" in caught.value.reason
    assert "make demo" in caught.value.remedy
    assert "python -m demo_models build --out" in caught.value.remedy
    assert "--kind smollm2-moe-fp8" in caught.value.remedy

    with pytest.raises(BackendUnavailable) as caught:
        LocalBackend(ModelSpec(tmp_path / "nowhere")).prepare(lambda stage: None)
    assert "--model" in caught.value.remedy


def test_broken_model_dir_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    stages: list[str] = []
    with pytest.raises(BackendUnavailable) as caught:
        LocalBackend(ModelSpec(tmp_path, device="cpu", dtype="float32")).prepare(stages.append)
    assert str(tmp_path) in caught.value.reason and "ascend-doctor" in caught.value.remedy
    assert stages[0] == "importing torch"  # the loading line says what it is doing


def test_control_characters_in_a_reply_are_shown_not_obeyed() -> None:
    posted, post = collect()
    run_reply(fake_backend(FakeEngine(reply="hello \x1b[2Jworld")), [], ChatSettings(), 1, post,
              Stopper())
    text = "".join(m.text for m in posted if isinstance(m, ReplyDelta))
    assert "\x1b" not in text and "\\x1b[2J" in text


# --- the session ------------------------------------------------------------------------------


def test_session_queues_while_preparing_and_sends_in_order() -> None:
    session = ChatSession()
    action, first = session.submit("one", ChatSettings(system_prompt=""))
    assert action == "queued" and first is not None
    action, second = session.submit("two", ChatSettings(system_prompt=""))
    assert action == "queued" and second is not None
    assert session.next_queued() is None  # not ready yet
    session.state = "ready"
    assert session.next_queued() == first
    assert session.start(first) == [{"role": "user", "content": "one"}]
    assert session.submit("three", ChatSettings())[0] == "busy"
    session.finish("reply one", ReplyStats(2, 0.1, 10.0, 0.3, "stop"))
    assert session.next_queued() == second
    assert session.start(second)[-3:] == [{"role": "user", "content": "one"},
                                          {"role": "assistant", "content": "reply one"},
                                          {"role": "user", "content": "two"}]
    failed = session.finish("", ReplyStats(finish_reason="error"), error="HTTP 500")
    assert failed == second and len(session.history) == 2  # a failed reply is not history
    assert QUEUED_NOTE == "model still loading — sent when ready"


def test_session_refuses_when_unavailable_and_writes_a_transcript(tmp_path: Path) -> None:
    session = ChatSession(state="unavailable")
    assert session.submit("x", ChatSettings()) == ("unavailable", None)
    session.state = "ready"
    action, prompt = session.submit("What is HBM?", ChatSettings())
    assert action == "send" and prompt is not None
    session.start(prompt)
    session.finish("High-bandwidth memory.", ReplyStats(2, 0.05, 20.0, 0.1, "stop"))
    assert session.last_reply() == "High-bandwidth memory."
    md, js = session.save_transcript(tmp_path, "fake", ChatSettings())
    text = md.read_text()
    assert "## user\n\nWhat is HBM?" in text and "High-bandwidth memory." in text
    assert "TTFT 50 ms" in text
    assert '"format": "ascend-console-transcript/1"' in js.read_text()
