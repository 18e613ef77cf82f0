"""The key help at 80x24, the smallest terminal the console is run in: every description whole
(wrapped, not cut at the box's edge) and the way out on screen."""

from __future__ import annotations

import html

from textual.widgets import DataTable

from console.ui.screens.help import HelpScreen
from tests.conftest import FakeRoot
from tests.console.test_app import make_app, no_npu_host


async def test_the_help_wraps_and_says_how_to_close_at_80x24(fake_root: FakeRoot) -> None:
    app = make_app(no_npu_host(fake_root))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        screen = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "Esc, q or ? closes" in screen
        assert "(then the" in screen and "letter keys work)" in screen  # Esc's row, wrapped
        table = app.screen.query_one("#help-keys", DataTable)
        assert max(row.height for row in table.ordered_rows) > 1
