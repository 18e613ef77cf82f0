"""The console app driven with Textual's Pilot: fake engine, fake npu-smi under a fake root."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.binding import Binding
from textual.pilot import Pilot
from textual.widgets import Input, Static

from console.chat.local import ModelSpec
from console.options import ConsoleOptions
from console.recording import Recorder
from console.snapshots import ChipSample, HostSnapshot, NpuSnapshot
from console.ui.app import ConsoleApp
from console.ui.widgets.chat import ChatPane, Turn
from console.ui.widgets.npu import NpuPanel
from probes.live import LiveHost
from tests.conftest import CORPUS_DIR, FakeRoot
from tests.console.fakes import FakeEngine, FakeStats, SlowBackend, fake_backend

SIZE = (160, 50)
NPU_SMI = CORPUS_DIR / "npu-smi"
A2_8 = "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"
A3_DUAL = "065-info-25.2.0-A3-Ascend910-4chips-mixed-proc-peerfixture.txt"
DUO = "049-info-25.2.0-300IDuo-310P3-2chips-same-busid-PARTIAL.txt"
USAGES = "012-info-t-usages-910-DDR-HBM.txt"
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


# --- helpers ---------------------------------------------------------------------------------


def fake_npu_smi(fake_root: FakeRoot, info: str = A2_8, hang_after: int | None = None,
                 hang_s: int = 30) -> LiveHost:
    """npu-smi printing a corpus table (and usages); after `hang_after` samples (counted by
    their `npu-smi info` table call) the table call hangs."""
    count = fake_root.path / "calls"
    body = ""
    if hang_after is not None:
        body += (f'if [ "$#" = 1 ]; then\n'
                 f'  n=$(cat "{count}" 2>/dev/null || echo 0); echo $((n+1)) > "{count}"\n'
                 f'  if [ "$n" -ge {hang_after} ]; then sleep {hang_s}; fi\n'
                 f'fi\n')
    body += (f'if [ "$1 $2" = "info -t" ]; then cat "{NPU_SMI / USAGES}"; exit 0; fi\n'
             f'cat "{NPU_SMI / info}"\n')
    fake_root.script("/usr/local/bin/npu-smi", body)
    return LiveHost(root=str(fake_root.path), env=ENV)


def no_npu_host(fake_root: FakeRoot) -> LiveHost:
    return LiveHost(root=str(fake_root.path), env=ENV)


def make_app(host: LiveHost, engine: FakeEngine | None = None, **options: Any) -> ConsoleApp:
    defaults: dict[str, Any] = {"interval_s": 0.2, "npu_timeout_s": 2.0, "log_dir": None}
    defaults.update(options)
    return ConsoleApp(ConsoleOptions(**defaults), backend=fake_backend(engine), host=host)


async def wait_for(pilot: Pilot[Any], condition: Callable[[], bool], timeout_s: float = 10.0,
                   what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def text_of(app: ConsoleApp, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


async def send(pilot: Pilot[Any], prompt: str) -> None:
    """Type the prompt (all but its last character set at once, to keep tests fast), Enter."""
    pilot.app.query_one(ChatPane).focus_prompt()
    prompt_input = pilot.app.query_one("#prompt", Input)
    prompt_input.value = prompt[:-1]
    prompt_input.cursor_position = len(prompt_input.value)
    await pilot.press(prompt[-1], "enter")


def pane(app: ConsoleApp) -> ChatPane:
    return app.query_one(ChatPane)


def last_turn(app: ConsoleApp) -> Turn:
    return pane(app).replies[max(pane(app).replies)]


def history(app: ConsoleApp) -> list[dict[str, str]]:
    return app.chat.session.history


# --- chat --------------------------------------------------------------------------------------


async def test_chat_streams_reply_with_footer(fake_root: FakeRoot) -> None:
    engine = FakeEngine(reply="The **answer** is 42, streamed word by word.",
                        token_delay_s=0.01)
    app = make_app(no_npu_host(fake_root), engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "what is the answer?")
        await wait_for(pilot, lambda: len(history(app)) == 2, what="the reply")
        await pilot.pause()
        assert history(app)[-1]["content"].strip() == engine.reply
        assert engine.calls[0][-1] == {"role": "user", "content": "what is the answer?"}
        assert engine.calls[0][0]["role"] == "system"
        footer = str(last_turn(app).query_one(".turn-footer", Static).render())
        assert "TTFT" in footer and "tok/s" in footer and "8 tokens" in footer
        assert last_turn(app).body.source.strip() == engine.reply


async def test_escape_cancels_generation(fake_root: FakeRoot) -> None:
    engine = FakeEngine(endless=True, token_delay_s=0.05)
    app = make_app(no_npu_host(fake_root), engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "talk forever")
        await wait_for(pilot, lambda: bool(last_turn(app).text), what="first tokens")
        assert app.generating
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.generating, timeout_s=3, what="the cancel")
        footer = str(last_turn(app).query_one(".turn-footer", Static).render())
        assert "cancelled" in footer
        assert last_turn(app).has_class("cancelled")
        assert history(app)[-1]["role"] == "assistant" and history(app)[-1]["content"]
        # the engine is free again: a second message gets a reply
        engine.endless = False
        await send(pilot, "short one")
        await wait_for(pilot, lambda: len(history(app)) == 4, what="second reply")


async def test_engine_error_restores_prompt(fake_root: FakeRoot) -> None:
    app = make_app(no_npu_host(fake_root), FakeEngine(fail_with="device lost"))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello")
        await wait_for(pilot, lambda: not app.generating and bool(pane(app).replies),
                       what="failure")
        await pilot.pause()
        assert "device lost" in str(last_turn(app).query_one(".turn-footer", Static).render())
        assert history(app) == []
        assert app.query_one("#prompt").value == "hello"  # type: ignore[attr-defined]


async def test_copy_and_save_transcript(fake_root: FakeRoot, tmp_path: Path) -> None:
    app = make_app(no_npu_host(fake_root), transcript_dir=tmp_path / "chats")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hi")
        await wait_for(pilot, lambda: len(history(app)) == 2, what="the reply")
        await pilot.press("escape", "y")
        assert app.clipboard == app.chat.session.last_reply()
        await pilot.press("ctrl+s")
        saved = sorted((tmp_path / "chats").iterdir())
        assert [p.suffix for p in saved] == [".json", ".md"]
        assert "## user\n\nhi" in saved[1].read_text()
        assert "tok/s" in saved[1].read_text()


# --- the model ---------------------------------------------------------------------------------


async def test_typing_while_the_model_loads_is_queued_then_sent(fake_root: FakeRoot) -> None:
    backend = SlowBackend(FakeEngine(reply="queued answer"))
    app = ConsoleApp(ConsoleOptions(interval_s=0.2, log_dir=None), backend=backend,
                     host=no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "reading the weights" in text_of(app, "#chat-status"),
                       what="the loading line")
        await send(pilot, "first question")
        await send(pilot, "second question")
        await pilot.pause()
        assert app.query_one("#prompt", Input).value == ""  # taken, not dropped
        assert [str(t.query_one(".turn-note", Static).render()) for t in pane(app).users.values()] \
            == ["model still loading — sent when ready"] * 2
        status = text_of(app, "#chat-status")
        assert "2 messages queued" in status and "s)" in status  # elapsed seconds shown
        assert pane(app).replies == {} and backend.engine is not None and not history(app)
        backend.loaded.set()
        await wait_for(pilot, lambda: len(history(app)) == 4, what="both queued replies")
        assert [m["content"] for m in history(app) if m["role"] == "user"] == [
            "first question", "second question"]
        fake = backend.engine
        assert isinstance(fake, FakeEngine)
        assert fake.calls[1][-1] == {"role": "user", "content": "second question"}
        assert fake.calls[1][-2]["role"] == "assistant"  # the first exchange came first
        assert "ready" in text_of(app, "#chat-status")


async def test_missing_demo_model_says_how_to_build(fake_root: FakeRoot, tmp_path: Path) -> None:
    spec = ModelSpec(tmp_path / "demo-assets" / "smollm2-moe-fp8", demo_kind="smollm2-moe-fp8")
    app = ConsoleApp(ConsoleOptions(model=spec, interval_s=0.2, log_dir=None),
                     host=no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "make demo" in text_of(app, "#chat-status"),
                       what="the how-to-build message")
        status = text_of(app, "#chat-status")
        assert "smollm2-moe-fp8 demo model is not built" in status
        assert "python -m demo_models build --out" in status
        assert "--kind smollm2-moe-fp8" in status
        assert not app.query_one(ChatPane).ready
        # the rest works: the NPU panel still reports
        await wait_for(pilot, lambda: "no NPU found" in text_of(app, "#npu-status"),
                       what="npu panel")


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from demo_models.base import BuildOptions
    from demo_models.build import build

    out = tmp_path_factory.mktemp("models") / "qwen3-moe-fp8-tiny"
    build(out, BuildOptions(kind="qwen3-moe-fp8-tiny"))
    return out


async def test_real_engine_streams_through_the_worker(fake_root: FakeRoot,
                                                      tiny_qwen: Path) -> None:
    spec = ModelSpec(tiny_qwen, device="cpu", dtype="float32", max_seq_len=256,
                     fp8="resident")
    app = ConsoleApp(ConsoleOptions(model=spec, interval_s=1.0, log_dir=None),
                     host=no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: pane(app).ready, timeout_s=120, what="the model to load")
        assert "ready" in text_of(app, "#chat-status")
        pane(app).query_one("#set-max-new").value = "12"  # type: ignore[attr-defined]
        await send(pilot, "Say hello")
        await wait_for(pilot, lambda: len(history(app)) == 2, timeout_s=120, what="reply")
        await pilot.pause()
        footer = str(last_turn(app).query_one(".turn-footer", Static).render())
        assert "TTFT" in footer and "12 tokens" in footer
        assert app.telemetry.latest("engine") is not None
        assert app.telemetry.latest("engine").architecture == "qwen3_moe"
        assert app.telemetry.latest("engine").decode_tokens_per_s


# --- telemetry ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("table", "chips"), [(A2_8, 8), (A3_DUAL, 4), (DUO, 2)])
async def test_npu_panel_from_fake_npu_smi(fake_root: FakeRoot, table: str, chips: int) -> None:
    # a 1 s interval: STALE only after 3 s, however busy the test machine is
    app = make_app(fake_npu_smi(fake_root, table), interval_s=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.telemetry.state("npu").last_good is not None,
                       what="a sample")
        await pilot.pause()
        snapshot = app.telemetry.state("npu").last_good
        assert snapshot is not None and len(snapshot.chips) == chips
        panel = app.query_one(NpuPanel)
        assert panel.query_one("#npu-chips").row_count == chips  # type: ignore[attr-defined]
        assert "STALE" not in text_of(app, "#npu-status")
        assert app.telemetry.history.values(f"{snapshot.chips[0].key}:temperature_c")


async def test_no_npu_smi_says_so(fake_root: FakeRoot) -> None:
    app = make_app(no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "no NPU found" in text_of(app, "#npu-status"),
                       what="no-npu message")
        assert "npu-smi not found on PATH" in text_of(app, "#npu-status")


async def test_hung_npu_smi_goes_stale_while_chat_works(fake_root: FakeRoot) -> None:
    app = make_app(fake_npu_smi(fake_root, hang_after=1), npu_timeout_s=8.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.telemetry.state("npu").last_good is not None,
                       what="a good sample")

        def in_flight() -> list[Any]:  # after the first good sample, every table call hangs
            return [w for w in app.workers if w.group == "npu" and not w.is_finished]

        # A slow first sample can come back stale already: wait for the hung one as well.
        await wait_for(pilot, lambda: "STALE" in text_of(app, "#npu-status")
                       and bool(in_flight()), timeout_s=5, what="the stale marker, hung")
        hung = in_flight()
        await send(pilot, "still there?")
        await wait_for(pilot, lambda: len(history(app)) == 2, timeout_s=8, what="reply")
        # The reply came while that same npu-smi call still hung: it never blocked the UI.
        # (Proved by identity, not elapsed time: a loaded CI machine is slow, not blocked.)
        assert any(not w.is_finished for w in hung)
        assert "stale:npu" in app.telemetry.alert_log.active


# --- doctor, playbooks, help, palette --------------------------------------------------------


async def test_doctor_runs_and_opens_a_playbook(fake_root: FakeRoot) -> None:
    from console.ui.screens.doctor import DoctorScreen
    from console.ui.screens.playbook import PlaybookScreen

    app = make_app(fake_npu_smi(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape", "d")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen), what="doctor")
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        await wait_for(pilot, lambda: screen.last_run is not None, timeout_s=60, what="checks")
        table = screen.query_one("#doctor-results")
        table.focus()
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PlaybookScreen),
                       what="playbook screen")
        await pilot.press("escape")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, DoctorScreen), what="back")


async def test_playbook_search_and_help(fake_root: FakeRoot) -> None:
    from console.ui.screens.help import HelpScreen
    from console.ui.screens.playbook import PlaybookBrowser

    app = make_app(no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape", "slash")
        await wait_for(pilot, lambda: isinstance(app.screen, PlaybookBrowser), what="browser")
        await pilot.press("escape")
        await pilot.press("escape", "question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        rows = app.key_help()
        words = {word for keys, _ in rows for word in keys.split()}
        # keys as people write them, never Textual's names
        assert {"Esc", "/", "?", "d", "q", "r", "y", "i", "F1", "F2", "F3", "F4", "Ctrl+C",
                "Ctrl+S", "Ctrl+P", "Enter"} <= words
        assert not words & {"escape", "slash", "question_mark", "ctrl+s"}
        actions = {b.action for b in app.BINDINGS if isinstance(b, Binding)}
        assert len(rows) >= len(actions)  # every action of the app has a row
        doctor = [does for _, does in rows if does.startswith("doctor screen:")]
        assert any("Run again" in d for d in doctor) and any("Back" in d for d in doctor)
        await pilot.press("escape")


async def test_app_keys_work_from_the_prompt(fake_root: FakeRoot) -> None:
    from console.ui.screens.doctor import DoctorScreen
    from console.ui.screens.help import HelpScreen
    from console.ui.screens.playbook import PlaybookBrowser

    app = make_app(no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        assert app.focused is app.query_one("#prompt")
        shown = {b.key for b in app.BINDINGS if isinstance(b, Binding) and b.show}
        assert {"f1", "f3", "f4", "ctrl+c"} <= shown  # in the footer
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.main, what="back")
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, PlaybookBrowser), what="browser")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.main, what="back")
        app.action_focus_prompt()
        await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen), what="doctor")
        await pilot.press("f3")  # already open: not a second one
        await pilot.pause()
        assert len(app.screen_stack) == 2
        # the NPU filter does not advertise "/", which opens the playbooks
        assert "/" not in str(app.main.query_one("#npu-filter", Input).placeholder).split()[0]


async def test_ctrl_c_quits_and_asks_first_while_a_reply_streams(fake_root: FakeRoot) -> None:
    app = make_app(no_npu_host(fake_root), FakeEngine(endless=True, token_delay_s=0.05))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "go on forever")
        await wait_for(pilot, lambda: app.generating, what="the reply to start")
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running and app.generating  # a confirmation, not a quit
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running, what="the quit")
    assert app.return_code == 0


async def test_ctrl_c_quits_at_once_when_idle(fake_root: FakeRoot) -> None:
    app = make_app(no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running, what="the quit")


async def test_command_palette_lists_every_action(fake_root: FakeRoot) -> None:
    app = make_app(no_npu_host(fake_root))
    async with app.run_test(size=SIZE):
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Doctor", "Playbooks", "Help", "Cancel generation", "Copy last reply",
                "Save transcript", "Toggle recording", "Quit"} <= titles


# --- recording and replay --------------------------------------------------------------------


async def test_record_toggle_and_read_only(fake_root: FakeRoot, tmp_path: Path) -> None:
    path = tmp_path / "rec.db"
    app = make_app(fake_npu_smi(fake_root), record=path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.telemetry.state("npu").last_good is not None,
                       what="a sample")
        await pilot.pause(0.3)
        assert app.recording.recorder is not None and "REC" in app.sub_title
        await pilot.press("escape", "r")
        assert app.recording.recorder is None
    from console.recording import Player

    assert len(Player(path)) >= 1

    app = make_app(no_npu_host(fake_root), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape", "r")
        assert app.recording.recorder is None
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert "Toggle recording" not in titles


async def test_record_toggle_without_a_file_writes_to_the_default_place(
        fake_root: FakeRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recordings = tmp_path / "state" / "recordings"  # not there yet: the toggle makes it
    monkeypatch.setenv("ASCEND_CONSOLE_RECORDINGS", str(recordings))
    app = make_app(fake_npu_smi(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape", "r")
        recorder = app.recording.recorder
        assert recorder is not None and recorder.path.parent == recordings
        await wait_for(pilot, lambda: app.telemetry.state("npu").last_good is not None,
                       what="a sample")
        await pilot.pause(0.3)
        await pilot.press("r")
        assert app.recording.recorder is None
    from console.recording import Player

    files = list(recordings.glob("*.sqlite"))
    assert len(files) == 1 and len(Player(files[0])) >= 1


def _chip(npu_id: int, temperature_c: int) -> ChipSample:
    return ChipSample(npu_id, 0, "910B4", "OK", temperature_c, 90.5, 12, 3000, 32768, 40.0,
                      f"{npu_id}/0")


async def test_replay_plays_a_recording(fake_root: FakeRoot, tmp_path: Path) -> None:
    path = tmp_path / "box.db"
    t0 = 1_750_000_000.0
    with Recorder(path) as recorder:
        for i in range(3):
            chips = (_chip(0, 40 + i), _chip(1, 97), _chip(2, 40), _chip(3, 41))
            recorder.add(NpuSnapshot(t0 + 2 * i, chips, (), True, None, 0.1))
            recorder.add(HostSnapshot(t0 + 2 * i, 12.0, 1000.0, 8000.0, None, None, None))
    app = make_app(no_npu_host(fake_root), replay=path, replay_speed=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.telemetry.replay_time == t0 + 4, what="the last sample")
        await pilot.pause()
        assert app.sub_title.startswith("REPLAY ")
        assert app.telemetry.state("npu").last_good is not None
        assert app.telemetry.history.values("0/0:temperature_c") == [40.0, 41.0, 42.0]
        assert "temperature:1/0" in app.telemetry.alert_log.active  # 97 °C, far above the others
        assert "STALE" not in text_of(app, "#npu-status")  # replay time, not wall time


# --- the main screen, as a snapshot ----------------------------------------------------------

FIXED_NOW = 1_750_000_000.0


def snapshot_app(fake_root: FakeRoot) -> ConsoleApp:
    """Fixed data and a fixed clock: no live sampling, one recorded-style state."""
    engine = FakeEngine(reply="Ascend 910B4 has **32 GB** of HBM per chip.",
                        pinned_stats=FakeStats(ttft_s=0.085, prefill_tokens_per_s=310.0,
                                               decode_tokens_per_s=42.0, kv_tokens_used=41))
    app = ConsoleApp(ConsoleOptions(interval_s=3600, log_dir=None, sample_live=False),
                     backend=fake_backend(engine),
                     host=no_npu_host(fake_root), clock=lambda: FIXED_NOW)
    return app


async def _snapshot_state(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    chips = tuple(_chip(i, 40 + 3 * i) for i in range(4))
    app.telemetry.take(NpuSnapshot(FIXED_NOW - 1, chips, (), True, None, 0.1))
    app.telemetry.take(HostSnapshot(FIXED_NOW, 7.5, 6144.0, 24576.0, "/var/log/npu", 51200.0,
                                102400.0))
    await send(pilot, "How much HBM does a 910B4 have?")
    deadline = time.monotonic() + 5
    while len(history(app)) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await pilot.pause()
    # the measured footer varies run to run; pin it for the picture
    last_turn(app).set_footer("TTFT 85 ms · 42.0 tok/s · 9 tokens")
    app.set_focus(None)
    await pilot.pause()


def test_main_screen_snapshot(snap_compare: Callable[..., bool], fake_root: FakeRoot) -> None:
    run_before: Callable[[Pilot[Any]], Awaitable[None]] = _snapshot_state
    assert snap_compare(snapshot_app(fake_root), terminal_size=SIZE, run_before=run_before)


# --- an OpenAI-compatible endpoint -------------------------------------------------------------


def endpoint_app(fake_root: FakeRoot, chat: Any) -> ConsoleApp:
    import httpx

    from console.chat.openai import EndpointBackend, EndpointSpec

    serving = CORPUS_DIR / "serving"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, content=(serving / "llamacpp_models.json").read_bytes())
        return chat(request)

    spec = EndpointSpec("http://serving.test/v1")
    backend = EndpointBackend(spec, transport=httpx.MockTransport(handler))
    return ConsoleApp(ConsoleOptions(interval_s=0.2, npu_timeout_s=2.0, log_dir=None,
                                     endpoint=spec), backend=backend,
                      host=no_npu_host(fake_root))


async def test_endpoint_chat_streams_and_an_http_error_is_one_line(fake_root: FakeRoot) -> None:
    import httpx

    stream = (CORPUS_DIR / "serving" / "llamacpp_chat_stream.sse").read_bytes()
    answers = [httpx.Response(200, content=stream, headers={"content-type": "text/event-stream"}),
               httpx.Response(503, json={"object": "error", "message": "server overloaded"})]
    app = endpoint_app(fake_root, lambda request: answers.pop(0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: pane(app).ready, what="the model list")
        assert "SmolLM2-135M-Instruct.Q4_1.gguf @ http://serving.test/v1" in app.sub_title
        await send(pilot, "What is HBM?")
        await wait_for(pilot, lambda: len(history(app)) == 2, what="the streamed reply")
        await pilot.pause()
        footer = str(last_turn(app).query_one(".turn-footer", Static).render())
        assert "12 tokens" in footer and "stopped at the 256-token limit" in footer
        assert "Serving panel" in text_of(app, "#engine-facts")
        await send(pilot, "again")
        await wait_for(pilot, lambda: last_turn(app).has_class("failed"), what="the failure")
        footer = str(last_turn(app).query_one(".turn-footer", Static).render())
        assert "HTTP 503: server overloaded" in footer and "\n" not in footer
        assert app.query_one("#prompt", Input).value == "again"  # given back to send again
