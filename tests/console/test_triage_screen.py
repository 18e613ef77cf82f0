"""The triage screen over a tiny host app: findings of real files read in a worker, the
detail of the highlighted one, Enter to its playbook, a paste, a failing read."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import OptionList, Static, TextArea

from checks.triage import TriageReport, triage_paths
from console.ui.app import ConsoleApp
from console.ui.screens.playbook import PlaybookScreen
from console.ui.screens.triage import LogWatcher, TriageScreen

SIZE = (120, 40)
OOM = "RuntimeError: NPU out of memory. Tried to allocate 20.00 MiB (NPU 0; 60.96 GiB total)"


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("main screen", id="main")


def shown(screen: TriageScreen, selector: str) -> str:
    content = screen.query_one(selector, Static).content
    return content.plain if isinstance(content, Text) else str(content)


async def test_findings_of_the_logs_and_enter_opens_the_playbook(tmp_path: Path) -> None:
    (tmp_path / "plog.log").write_text(f"EZ1001: [PID: 1] bad [bold]arg[/bold]\nok\n{OOM}\n")
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = TriageScreen(lambda: triage_paths([tmp_path]))
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        found = screen.query_one("#triage-findings", OptionList)
        assert found.option_count == 2 and found.has_focus
        assert "2 findings" in shown(screen, "#triage-summary")
        detail = shown(screen, "#triage-detail")
        assert detail.startswith("EZ1001") and "[bold]arg[/bold]" in detail
        await pilot.press("down")
        assert "fix: Set --max-model-len to what you serve" in shown(screen, "#triage-detail")
        await pilot.press("enter")
        await pilot.pause()
        book = app.screen
        assert isinstance(book, PlaybookScreen)
        assert book.playbook_id == "symptom.memory-above-plan"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


async def test_a_paste_is_triaged_and_a_failed_read_is_shown() -> None:
    def broken() -> TriageReport:
        raise OSError("permission denied: /root/ascend/log")

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = TriageScreen(broken)
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "could not read the logs: OSError" in shown(screen, "#triage-summary")
        screen.query_one("#triage-paste", TextArea).text = "x\nerror code is 507015\n"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert "Triage of the paste" in shown(screen, "#triage-summary")
        assert screen.report is not None
        assert [f.id for f in screen.report.findings] == ["core.aicore-error"]


def test_the_console_binds_t_to_triage() -> None:
    keys = {binding.key: binding.action for binding in ConsoleApp.BINDINGS}  # type: ignore[union-attr]
    assert keys["t"] == "triage"


async def test_a_new_error_in_the_watched_logs_raises_a_toast(tmp_path: Path) -> None:
    log = tmp_path / "plog-1_1.log"
    log.write_text(f"old: {OOM}\n")
    app = Host()
    toasts: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda message, **_: toasts.append(message)  # type: ignore[method-assign]
        watcher = LogWatcher(app, lambda: [tmp_path], interval_s=0.05)
        watcher.start()
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        assert toasts == []  # what was there before the console looked is not news
        with log.open("a") as out:
            out.write("EZ1001: Parameter validation failed\n")
        for _ in range(100):
            await pilot.pause(0.05)
            if toasts:
                break
        assert toasts and "new in the target's log: EZ1001" in toasts[0]
        assert "Press t to triage" in toasts[0]
