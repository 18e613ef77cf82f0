"""Text from outside is shown, never obeyed: no control character and no markup from npu-smi,
exporters, serving endpoints, recordings, engines, check results or playbooks reaches the
terminal as anything but visible text.

The terminal's bytes are what Textual would write for the whole screen (its compositor's full
update): only Textual's own CSI sequences and OSC 8 hyperlinks may remain in them.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual.app import App
from textual.widgets import DataTable, Markdown, Static

import playbooks
from checks.model import Result
from checks.runner import Run
from checks.thermal import ThermalLimits
from console.history import History
from console.snapshots import (
    ChipSample,
    EngineSnapshot,
    HostSnapshot,
    NpuSnapshot,
    ProcessSample,
    ServingSnapshot,
)
from console.ui import safe
from console.ui.app import ConsoleApp
from console.ui.screens.doctor import DoctorScreen
from console.ui.screens.playbook import PlaybookScreen
from console.ui.widgets.npu import NpuPanel
from probes.live import LiveHost
from probes.textsafe import one_line
from tests.conftest import CORPUS_DIR, FakeRoot
from tests.console.fakes import FakeEngine
from tests.console.test_app import ENV, SIZE, make_app, pane, send, wait_for

HOSTILE = "\x1b]0;pwned\x07[/x][bold]"  # sets a terminal's title; closes a tag never opened
SHOWN = "\\x1b]0;pwned\\x07[/x][bold]"
NOW = 1_700_000_000.0
NPU_SMI = CORPUS_DIR / "npu-smi"
A3_WITH_PROCESS = NPU_SMI / "065-info-25.2.0-A3-Ascend910-4chips-mixed-proc-peerfixture.txt"
USAGES = NPU_SMI / "012-info-t-usages-910-DDR-HBM.txt"

_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_OSC8 = re.compile(r"\x1b\]8;[^\x1b\x07]*\x1b\\")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_output(app: App[Any]) -> str:
    """The bytes a terminal would get for the whole current screen."""
    update = app.screen._compositor.render_update(full=True)
    assert update is not None
    return update.render_segments(app.console)  # type: ignore[attr-defined]


def foreign_controls(output: str) -> list[str]:
    """Control characters that are not Textual's own CSI or OSC 8 sequences."""
    return _CONTROL.findall(_OSC8.sub("", _CSI.sub("", output)))


def assert_shown_not_obeyed(app: App[Any]) -> str:
    output = terminal_output(app)
    assert "\x1b]0;" not in output and "\x07" not in output
    assert foreign_controls(output) == []
    return _OSC8.sub("", _CSI.sub("", output))


def hostile_npu_smi(fake_root: FakeRoot) -> LiveHost:
    """The real A3 table whose one process is named HOSTILE (any user chooses its name)."""
    table = A3_WITH_PROCESS.read_text().replace(
        "python                  ", HOSTILE + " " * (24 - len(HOSTILE)))
    fake_root.file("/data/info.txt", table)
    fake_root.script("/usr/local/bin/npu-smi",
                     f'if [ "$1 $2" = "info -t" ]; then cat "{USAGES}"; exit 0; fi\n'
                     f'cat "{fake_root.path}/data/info.txt"\n')
    return LiveHost(root=str(fake_root.path), env=ENV)


def process_names(app: ConsoleApp) -> list[str]:
    table = app.query_one(NpuPanel).query_one("#npu-processes", DataTable)
    return [str(table.get_row_at(i)[3]) for i in range(table.row_count)]


# -- the process name of the issue, from a fake npu-smi ---------------------------------------


async def test_a_hostile_process_name_is_shown_literally(fake_root: FakeRoot) -> None:
    app = make_app(hostile_npu_smi(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: bool(process_names(app)), what="the process table")
        await pilot.pause()
        assert process_names(app) == [SHOWN]
        screen_text = assert_shown_not_obeyed(app)
        assert "pwned\\x07[/x][bold]" in screen_text
        app.query_one(NpuPanel).query_one("#npu-filter").value = "pwned"  # type: ignore[attr-defined]
        await pilot.pause()
        assert process_names(app) == [SHOWN]
        assert app.is_running  # no MarkupError took it down


# -- every panel, fed hostile snapshots (what a replayed recording can hold) ------------------


def hostile_snapshots() -> tuple[NpuSnapshot, NpuSnapshot, HostSnapshot, ServingSnapshot,
                                 EngineSnapshot]:
    chip = ChipSample(0, 0, HOSTILE, HOSTILE, 40, 90.0, 0, 1000, 32768, 0.0, "0/0")
    local = NpuSnapshot(NOW, (chip,), (ProcessSample(0, 0, 7, HOSTILE, 10),), True, None, 0.1)
    remote = NpuSnapshot(NOW, (), (), False, HOSTILE, 0.1, source=HOSTILE)
    host = HostSnapshot(NOW, 5.0, 1.0, 2.0, HOSTILE, 1.0, 2.0)
    serving = ServingSnapshot(NOW, HOSTILE, HOSTILE, HOSTILE, 0.1)
    engine = EngineSnapshot(NOW, HOSTILE, HOSTILE, HOSTILE, HOSTILE, (HOSTILE,), None, None,
                            None, 0, 0, 16, HOSTILE, 512)
    return local, remote, host, serving, engine


async def test_every_panel_shows_hostile_snapshots_literally(fake_root: FakeRoot) -> None:
    engine = FakeEngine(reply=f"a reply holding {HOSTILE} in its text")
    app = make_app(LiveHost(root=str(fake_root.path), env=ENV), engine, sample_live=False,
                   serving_metrics_url="http://127.0.0.1:9/metrics")
    local, remote, host, serving, engine_snapshot = hostile_snapshots()
    async with app.run_test(size=(200, 80)) as pilot:
        await send(pilot, HOSTILE)
        await wait_for(pilot, lambda: len(app.chat.session.history) == 2, what="the reply")
        telemetry = app.telemetry
        telemetry.take(local)
        telemetry.take(remote)
        telemetry.take(host)
        telemetry.take(serving)
        telemetry.take(engine_snapshot)
        engine.fail_with = HOSTILE
        await send(pilot, "again")
        await wait_for(pilot, lambda: "error" in str(pane(app).replies[max(pane(app).replies)]
                                                     .query_one(".turn-footer", Static).render()),
                       what="the failed reply")
        await pilot.pause()
        screen_text = assert_shown_not_obeyed(app)
        assert screen_text.count("pwned\\x07") >= 8  # chat, panels, the toast: all visible
        assert app.is_running


async def test_check_results_and_playbooks_are_shown_literally(
        fake_root: FakeRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run((Result("npu.health", HOSTILE, HOSTILE, "fail", HOSTILE, (HOSTILE, "a\nb"),
                      HOSTILE, "npu.health", 1.0),), 1.0)
    real = playbooks.get("npu.health")
    hostile_book = playbooks.Playbook(real.id, HOSTILE, real.kind, (), (), (
        f"a source {HOSTILE} https://example.com/{HOSTILE}",), f"## {HOSTILE}\n\n{HOSTILE}\n",
        real.path)
    monkeypatch.setattr(playbooks, "get", lambda _id: hostile_book)
    app = make_app(LiveHost(root=str(fake_root.path), env=ENV), sample_live=False)
    async with app.run_test(size=SIZE) as pilot:
        doctor = DoctorScreen(lambda: run)
        await app.push_screen(doctor)
        await wait_for(pilot, lambda: doctor.last_run is not None, what="the run")
        await pilot.pause()
        assert "pwned\\x07" in assert_shown_not_obeyed(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PlaybookScreen), what="playbook")
        await pilot.pause()
        assert "pwned\\x07" in assert_shown_not_obeyed(app)
        assert "pwned" in app.screen.query_one(Markdown).source


# -- the helper itself ------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_the_helper_leaves_no_control_and_no_markup(value: str) -> None:
    for shown in (safe.text(value), safe.block(value)):
        assert isinstance(shown, Text) and not shown.spans  # nothing parsed as markup
        assert not _CONTROL.search(shown.plain.replace("\n", ""))
    assert safe.text(value).plain == one_line(value)  # all of it, escaped, one line
    assert "\n" not in safe.line(value) and not _CONTROL.search(safe.line(value))
    assert not _CONTROL.search(safe.markdown(value).replace("\n", "").replace("\t", ""))


class PanelHost(App[None]):
    def __init__(self, panel: NpuPanel) -> None:
        super().__init__()
        self.panel = panel

    def compose(self) -> Any:
        yield self.panel


async def show_process_named(value: str) -> str:
    panel = NpuPanel(ThermalLimits(95.0, 15.0))
    snapshot = NpuSnapshot(NOW, (), (ProcessSample(0, 0, 1, value, 1),), True, None, 0.1)
    app = PanelHost(panel)
    async with app.run_test(size=(100, 20)) as pilot:
        panel.show(snapshot, History(), NOW, False)
        await pilot.pause()
        assert_shown_not_obeyed(app)
        return str(panel.query_one("#npu-processes", DataTable).get_row_at(0)[3])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["[", "]", "/", "b", "link=", "\x1b", "\x07", "\n", "\u202e",
                                  "x", "@click=app.quit", "bold"]), max_size=20).map("".join))
def test_any_markup_or_escape_in_a_process_name_renders(value: str) -> None:
    assert asyncio.run(show_process_named(value)) == (one_line(value) or "–")


def test_hostile_file_name_stays_out_of_this_file() -> None:
    assert Path(__file__).read_text().count("\x1b") == 0  # the escapes above are spelled out
