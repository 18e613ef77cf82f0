"""Doctor, playbook, browser and help screens, each pushed over a tiny host app."""

from __future__ import annotations

import threading
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Input, LoadingIndicator, Markdown, OptionList, Static

import playbooks
from checks.model import Result, Status
from checks.runner import Run
from checks.sources_view import split_source
from console.ui.screens.doctor import DoctorScreen
from console.ui.screens.help import HelpScreen
from console.ui.screens.playbook import PlaybookBrowser, PlaybookScreen, playbook_markdown

SIZE = (120, 40)


def result(check_id: str, category: str, status: Status, summary: str,
           playbook: str = "", evidence: tuple[str, ...] = (), remedy: str = "") -> Result:
    return Result(check_id, check_id.replace(".", " "), category, status, summary, evidence,
                  remedy, playbook or check_id, 12.0)


def sample_run() -> Run:
    return Run((
        result("versions.parity", "versions", "pass", "CANN 8.5.0 matches torch_npu 2.6.0.post5"),
        result("npu.temperature", "npu", "warn", "NPU 5/0 at 88 °C (warn at 85 °C)",
               evidence=("npu-smi info: 88 °C",), remedy="check the airflow of card 5"),
        result("npu.health", "npu", "fail", "NPU 1/0 health is Alarm [0x80E01801]",
               remedy="npu-smi info -t health -i 1"),
        result("tokenizer.token-ids", "tokenizer", "skip", "no model directory given"),
    ), 1234.0)


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("main screen", id="main")


def plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def rows(table: DataTable[Any]) -> list[list[str]]:
    return [[plain(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def static_text(screen: Any, selector: str) -> str:
    return static_text_of(screen.query_one(selector, Static))


def static_text_of(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


# -- DoctorScreen -----------------------------------------------------------------------------

async def test_doctor_runs_checks_in_a_thread_and_groups_results() -> None:
    app = Host()
    release = threading.Event()
    callers: list[str] = []

    def run_checks() -> Run:
        callers.append(threading.current_thread().name)
        release.wait(5)
        return sample_run()

    async with app.run_test(size=SIZE) as pilot:
        screen = DoctorScreen(run_checks)
        await app.push_screen(screen)
        await pilot.pause()
        assert screen.query_one(LoadingIndicator).display
        assert "running the checks" in static_text(screen, "#doctor-summary")
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert callers and callers[0] != threading.main_thread().name
        assert not screen.query_one(LoadingIndicator).display
        shown = rows(screen.query_one("#doctor-results", DataTable))
        assert shown == [
            ["", "versions", ""],
            ["PASS", "versions.parity", "CANN 8.5.0 matches torch_npu 2.6.0.post5"],
            ["", "npu", ""],
            ["FAIL", "npu.health", "NPU 1/0 health is Alarm [0x80E01801]"],
            ["WARN", "npu.temperature", "NPU 5/0 at 88 °C (warn at 85 °C)"],
            ["", "tokenizer", ""],
            ["SKIP", "tokenizer.token-ids", "no model directory given"],
        ]
        summary = static_text(screen, "#doctor-summary")
        assert "1 pass · 1 warn · 1 fail · 1 skip · 0 error" in summary


async def test_doctor_starts_on_the_first_problem_wraps_and_shows_problems_only() -> None:
    app = Host()
    long_summary = "the HBM does not hold the weights and the KV cache: " + "needs more " * 20
    run = Run((*sample_run().results,
               result("npu.hbm-fit", "npu", "warn", long_summary)), 10.0)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = DoctorScreen(lambda: run)
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = screen.query_one("#doctor-results", DataTable)
        assert plain(table.get_row_at(table.cursor_row)[1]) == "npu.health"  # not the PASS
        row = table.rows[next(k for k in table.rows if k.value and "hbm-fit" in k.value)]
        assert row.height > 1  # the long summary wraps instead of running off the screen
        await pilot.press("p")
        await pilot.pause()
        shown = [r[1] for r in rows(table) if r[0]]
        assert shown == ["npu.health", "npu.temperature", "npu.hbm-fit"]  # no PASS, no SKIP
        assert "versions" not in [r[1] for r in rows(table)]  # nor their empty categories
        await pilot.press("p")
        await pilot.pause()
        assert len([r for r in rows(table) if r[0]]) == 5


async def test_problems_only_says_when_there_is_none() -> None:
    app = Host()
    clean = Run((result("versions.parity", "versions", "pass", "all pair"),), 1.0)
    async with app.run_test(size=SIZE) as pilot:
        screen = DoctorScreen(lambda: clean)
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        assert rows(screen.query_one("#doctor-results", DataTable)) == [
            ["", "no FAIL, ERROR or WARN", "p shows every result"]]


async def test_doctor_enter_opens_the_results_playbook_and_escape_comes_back() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = DoctorScreen(sample_run)
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = screen.query_one("#doctor-results", DataTable)
        assert table.has_focus and table.cursor_row == 3  # the first problem: npu.health
        assert "fix: npu-smi info -t health -i 1" in static_text(screen, "#doctor-detail")
        await pilot.press("enter")
        await pilot.pause()
        book = app.screen
        assert isinstance(book, PlaybookScreen) and book.playbook_id == "npu.health"
        title = playbooks.get("npu.health").title
        assert book.markdown_text.startswith(f"# {title}")
        assert book.query_one(Markdown).source.startswith(f"# {title}")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("q")
        await pilot.pause()
        assert app.screen is not screen


async def test_doctor_shows_a_broken_run_and_can_run_again() -> None:
    app = Host()
    calls: list[int] = []

    def run_checks() -> Run:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("policy.yaml: bad threshold")
        return sample_run()

    async with app.run_test(size=SIZE) as pilot:
        screen = DoctorScreen(run_checks)
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "RuntimeError: policy.yaml: bad threshold" in static_text(
            screen, "#doctor-summary")
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.query_one("#doctor-results", DataTable).row_count == 7


# -- PlaybookScreen and browser ---------------------------------------------------------------

def test_playbook_markdown_has_the_title_and_a_sources_heading() -> None:
    book = playbooks.get("symptom.garbled-output")
    text = playbook_markdown(book)
    assert text.startswith(f"# {book.title}\n")
    assert text.rstrip().endswith("## Sources")


def books_with_addresses() -> list[playbooks.Playbook]:
    return [b for b in playbooks.load_all() if any(split_source(s)[1] for s in b.sources)]


async def test_every_source_address_stays_whole_on_one_line_of_a_narrow_screen() -> None:
    app = Host()
    books = books_with_addresses()
    assert len(books) >= 5  # the test looks at real playbooks that cite web addresses
    async with app.run_test(size=(60, 30)) as pilot:
        for book in books:
            screen = PlaybookScreen(book.id)
            await app.push_screen(screen)
            await pilot.pause()
            expected = [u for s in book.sources for u in split_source(s)[1]]
            shown = list(screen.query(".source-url").results(Static))
            assert [static_text_of(w) for w in shown] == expected
            for widget in shown:  # one row, as wide as the address, however narrow the screen
                assert widget.region.height == 1
                assert widget.region.width == len(static_text_of(widget))
                content = widget.content
                assert isinstance(content, Text) and str(content.style).endswith(
                    f"link {content.plain}")  # a terminal hyperlink to the whole address
            prose = list(screen.query(".source-prose").results(Static))
            assert len(prose) == len(book.sources)
            assert all(w.region.right <= 60 for w in prose)  # sentences wrap at the screen
            app.pop_screen()
            await pilot.pause()


async def test_unknown_playbook_suggests_close_ones() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = PlaybookScreen("npu.temprature")
        await app.push_screen(screen)
        await pilot.pause()
        assert screen.playbook is None
        assert "npu.temperature" in screen.markdown_text


async def test_browser_search_lists_garbled_output_first_and_enter_opens_it() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        browser = PlaybookBrowser()
        await app.push_screen(browser)
        await pilot.pause()
        assert len(browser.result_ids) == len(playbooks.load_all())
        assert browser.query_one(Input).has_focus
        await pilot.press(*"garbled output")
        await pilot.pause()
        assert browser.result_ids[0] == "symptom.garbled-output"
        assert "matches for 'garbled output'" in static_text(browser, "#browser-hint")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PlaybookScreen)
        assert app.screen.playbook_id == "symptom.garbled-output"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is browser


async def test_browser_list_selection_and_no_match() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        browser = PlaybookBrowser()
        await app.push_screen(browser)
        await pilot.pause()
        browser.query_one(Input).value = "zzzz qqqq"
        await pilot.pause()
        assert browser.result_ids == []
        assert "nothing matches" in static_text(browser, "#browser-hint")
        browser.query_one(Input).value = "slow first token"
        await pilot.pause()
        await pilot.press("down")
        assert browser.query_one(OptionList).has_focus
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, PlaybookScreen)
        assert app.screen.playbook_id == browser.result_ids[1]


# -- HelpScreen -------------------------------------------------------------------------------

async def test_help_lists_every_binding_it_is_given() -> None:
    keys = [("d", "doctor"), ("/", "playbooks"), ("?", "help"), ("[", "older [sample]"),
            ("q", "quit")]
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(HelpScreen(keys))
        await pilot.pause()
        assert rows(app.screen.query_one(DataTable)) == [list(k) for k in keys]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


# -- snapshot ---------------------------------------------------------------------------------

class DoctorHost(Host):
    def on_mount(self) -> None:
        self.push_screen(DoctorScreen(sample_run))


def test_doctor_screen_snapshot(snap_compare: Any) -> None:
    async def run_before(pilot: Any) -> None:
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(DoctorHost(), terminal_size=SIZE, run_before=run_before)
