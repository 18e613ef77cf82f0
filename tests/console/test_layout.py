"""Every panel on screen at the sizes people run the console at: 80×24 (stacked), 120×40,
160×45 and 200×60 (side by side), with a fake npu-smi and a real endpoint on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from textual.widget import Widget
from textual.widgets import DataTable

from console.chat.openai import EndpointSpec
from console.options import ConsoleOptions
from console.ui.app import ConsoleApp
from tests.conftest import FakeRoot
from tests.console.loopback import FakeOpenAI
from tests.console.test_app import fake_npu_smi, make_app, wait_for

LOCAL_PANELS = ("#chat", "#npu", "#pressure", "#engine", "#host", "#alerts")


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def endpoint_app(fake_root: FakeRoot, server: FakeOpenAI) -> ConsoleApp:
    options = ConsoleOptions(endpoint=EndpointSpec(server.url), log_dir=None, interval_s=0.2,
                             npu_timeout_s=2.0, serving_metrics_url=server.metrics_url)
    return ConsoleApp(options, host=fake_npu_smi(fake_root))


def on_screen(app: ConsoleApp, selector: str) -> bool:
    """The widget is displayed and its whole region lies inside the screen."""
    widget = app.query_one(selector, Widget)
    region = widget.region
    return widget.display and region.area > 0 and app.screen.region.contains_region(region)


def chip_rows(app: ConsoleApp) -> int:
    return app.query_one("#npu-chips", DataTable).row_count


async def settle(app: ConsoleApp, pilot: Any, serving: bool = False) -> None:
    await wait_for(pilot, lambda: chip_rows(app) == 8, what="the first npu-smi sample")
    if serving:
        await wait_for(pilot, lambda: app.telemetry.latest("serving") is not None
                       and app.telemetry.latest("serving").ok, what="the first scrape")
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", [(120, 40), (200, 60)])
async def test_every_panel_fits_side_by_side(fake_root: FakeRoot, size: tuple[int, int]) -> None:
    app = make_app(fake_npu_smi(fake_root))
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        missing = [s for s in LOCAL_PANELS if not on_screen(app, s)]
        assert not missing, f"off screen at {size}: {missing}"
        assert app.query_one("#panels").max_scroll_y == 0  # nothing behind a scrollbar
        assert not app.screen.has_class("-narrow")


@pytest.mark.parametrize("size", [(120, 40), (160, 45), (200, 60)])
async def test_every_panel_fits_beside_an_endpoint(fake_root: FakeRoot, endpoint: FakeOpenAI,
                                                   size: tuple[int, int]) -> None:
    app = endpoint_app(fake_root, endpoint)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot, serving=True)
        missing = [s for s in (*LOCAL_PANELS, "#serving") if not on_screen(app, s)]
        assert not missing, f"off screen at {size}: {missing}"
        assert app.query_one("#panels").max_scroll_y == 0
        # no empty engine sparklines beside an endpoint: its panel is one line
        assert not any(t.display for t in app.query(".engine-trend"))


async def test_80x24_stacks_chat_over_the_npu_chips_and_f2_switches(
        fake_root: FakeRoot) -> None:
    app = make_app(fake_npu_smi(fake_root))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert app.screen.has_class("-narrow")
        assert on_screen(app, "#chat") and on_screen(app, "#npu") and on_screen(app, "#prompt")
        assert app.query_one("#chat").region.bottom <= app.query_one("#npu").region.y
        chips = app.query_one("#npu-chips", DataTable).region
        assert chips.height >= 4  # the header and at least three chips, not just a title
        await pilot.press("f2")  # from the prompt: the panels take the screen
        await pilot.pause()
        assert not app.query_one("#chat").display
        assert app.query_one("#npu-chips", DataTable).region.height > chips.height
        for selector in ("#npu", "#pressure", "#engine", "#host"):
            app.query_one(selector).scroll_visible(animate=False, immediate=True)
            await pilot.pause()
            assert on_screen(app, selector), f"{selector} cannot be scrolled onto the screen"
        await pilot.press("f2")
        await pilot.pause()
        assert on_screen(app, "#chat") and app.focused is app.query_one("#prompt")
