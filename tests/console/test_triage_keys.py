"""The triage screen inside the real console app, at 80x24: what a newcomer types goes into
the paste box, and Ctrl+R (the key the box names) triages the paste instead of recording."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static, TextArea

from checks.triage import triage_text
from console.ui.screens.triage import TriageScreen
from tests.conftest import FakeRoot
from tests.console.test_app import make_app, no_npu_host

OOM = "RuntimeError: NPU out of memory. Tried to allocate 20.00 MiB (NPU 0; 60.96 GiB total)"


async def test_typing_then_ctrl_r_triages_the_paste(fake_root: FakeRoot, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_CONSOLE_RECORDINGS", str(tmp_path / "recordings"))
    app = make_app(no_npu_host(fake_root))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = TriageScreen(lambda: triage_text(""))
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        # letters that are app keys elsewhere: r records, y copies, q quits
        await pilot.press(*"rqy")
        assert app.screen is screen and app.recording.recorder is None
        assert screen.query_one("#triage-paste", TextArea).text == "rqy"
        screen.query_one("#triage-paste", TextArea).load_text(OOM)
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.recording.recorder is None
        summary = screen.query_one("#triage-summary", Static).content
        assert "Triage of the paste" in str(summary)
        assert not list((tmp_path / "recordings").glob("*.sqlite"))


async def test_ctrl_r_still_records_on_the_main_screen(fake_root: FakeRoot, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_CONSOLE_RECORDINGS", str(tmp_path / "recordings"))
    app = make_app(no_npu_host(fake_root))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.recording.recorder is not None
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.recording.recorder is None
