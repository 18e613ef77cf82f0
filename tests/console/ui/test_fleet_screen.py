"""The fleet screen under Pilot at 80×24: nodes worst first, Enter drills into a node's chips
(with its history), a node that vanishes is marked gone, a failed read is said; and the
console's `f` over a real Prometheus scraping fake NPU-Exporters."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from checks.errors import UsageError
from console import fleet
from console.options import ConsoleOptions
from console.ui.app import ConsoleApp
from console.ui.cli import parse_options
from console.ui.screens.fleet import FleetScreen, NodeScreen
from tests.conftest import FakeRoot
from tests.console.test_app import no_npu_host
from tests.console.test_fleet import LIMITS, chip_fields, normal_chip, series
from tests.prometheus_fixture import (
    FakeExporter,
    PrometheusServer,
    scraped_fleet,
    send,
    stub_server,
    vector_body,
)

SIZE = (80, 24)


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("main screen", id="main")


def plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def rows(table: DataTable[Text]) -> list[list[str]]:
    return [[plain(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def summary(screen: FleetScreen | NodeScreen, selector: str) -> str:
    return plain(screen.query_one(selector, Static).content)


def fleets() -> list[fleet.Fleet]:
    nodes = {
        "calm": {i: normal_chip(45 + i) for i in range(4)},
        "hot": {**{i: normal_chip(45) for i in range(4)}, 2: normal_chip(85)},
        "sick": {**{i: normal_chip(45) for i in range(4)}, 1: normal_chip(45, health=0)},
    }
    seen = [series("", n, None, 4) for n in nodes]
    first = fleet.build_fleet(chip_fields(nodes), seen, [], LIMITS, 0.0)
    del nodes["calm"]  # its exporter stops: Prometheus has no series for it now
    second = fleet.build_fleet(chip_fields(nodes), seen, [], LIMITS, 10.0)
    failed = replace(second, error="http://prom:9090/api/v1/query: cannot connect")
    return [first, second, failed]


async def test_nodes_worst_first_enter_drills_in_and_a_vanished_node_is_marked() -> None:
    reads = iter(fleets())
    asked: list[str] = []

    def history(node: fleet.Node) -> dict[int, list[float]]:
        asked.append(node.name)
        return {2: [45.0, 60.0, 85.0]}

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = FleetScreen(lambda: next(reads), history, interval_s=3600)
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = screen.query_one("#fleet-nodes", DataTable)
        assert [r[:3] for r in rows(table)] == [
            ["FAIL", "sick", "4"], ["WARN", "hot", "4"], ["ok", "calm", "4"]]
        assert rows(table)[0][5] == "NPU 1: unhealthy (health status 0)"
        assert "3 nodes: 1 fail, 1 warn, 1 ok" in summary(screen, "#fleet-summary")
        assert table.size.width <= SIZE[0] and table.region.height > 3

        await pilot.press("down", "enter")  # the hot node
        await app.workers.wait_for_complete()
        await pilot.pause()
        node_screen = app.screen
        assert isinstance(node_screen, NodeScreen) and asked == ["hot"]
        chips = rows(node_screen.query_one("#node-chips", DataTable))
        assert chips[0][:4] == ["WARN", "2", "85°C", "+40°C"]
        assert chips[0][6] and chips[0][6] != chips[1][6]  # a sparkline for chip 2 only
        assert "above" in chips[0][7]
        await pilot.press("escape")
        assert app.screen is screen

        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert [r[:2] for r in rows(table)] == [["GONE", "calm"], ["FAIL", "sick"],
                                                ["WARN", "hot"]]
        assert "1 gone" in summary(screen, "#fleet-summary")
        assert table.cursor_row == 2  # still on the node chosen before the ranking moved

        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "last read failed: http://prom:9090/api/v1/query: cannot connect" in \
            summary(screen, "#fleet-summary")
        await pilot.press("escape")
        assert app.screen is not screen


async def test_outside_text_in_a_node_name_is_shown_not_obeyed() -> None:
    nodes = {"[bold]x\x1b]0;pwned\x07": {0: normal_chip()}}
    built = fleet.build_fleet(chip_fields(nodes), [], [], LIMITS, 0.0)
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = FleetScreen(lambda: built, None, interval_s=3600)
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        [row] = rows(screen.query_one("#fleet-nodes", DataTable))
    assert row[1].startswith("[bold]x\\x1b")


def test_the_console_takes_a_prometheus_url() -> None:
    assert parse_options(["--no-model", "--prometheus", "http://prom:9090/"]).prometheus_url \
        == "http://prom:9090"
    with pytest.raises(UsageError, match="--prometheus 'prom:9090': use http://HOST:PORT"):
        parse_options(["--no-model", "--prometheus", "prom:9090"])


async def test_f_opens_the_fleet_of_the_consoles_prometheus(fake_root: FakeRoot) -> None:
    body = vector_body([({"node": "n1", "instance": "n1:8082", "job": "npu", "id": "0"}, "1")])
    with stub_server(lambda h: send(h, 200, body)) as (url, paths):
        app = ConsoleApp(ConsoleOptions(interval_s=3600, log_dir=None, sample_live=False,
                                        prometheus_url=url),
                         backend=None, host=no_npu_host(fake_root))
        async with app.run_test(size=SIZE) as pilot:
            app.set_focus(None)  # letter keys reach the app, not the prompt
            await pilot.press("f")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert [r[1] for r in rows(screen.query_one("#fleet-nodes", DataTable))] == ["n1"]
            await pilot.press("escape")
            assert not isinstance(app.screen, FleetScreen)
    assert any(p.startswith("/api/v1/query?query=min+by") for p in paths)


async def test_f_without_prometheus_says_how_to_get_the_fleet(fake_root: FakeRoot) -> None:
    app = ConsoleApp(ConsoleOptions(interval_s=3600, log_dir=None, sample_live=False),
                     backend=None, host=no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        app.set_focus(None)
        await pilot.press("f")
        await pilot.pause()
        assert not isinstance(app.screen, FleetScreen)
        assert any("--prometheus URL" in str(n.message) for n in app._notifications)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[PrometheusServer, dict[str, FakeExporter]]]:
    yield from scraped_fleet(tmp_path)


async def test_the_console_lists_every_node_a_real_prometheus_scrapes_worst_first(
        prometheus: tuple[PrometheusServer, dict[str, FakeExporter]],
        fake_root: FakeRoot) -> None:
    server, exporters = prometheus
    app = ConsoleApp(ConsoleOptions(interval_s=3600, log_dir=None, sample_live=False,
                                    prometheus_url=server.url),
                     backend=None, host=no_npu_host(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        app.set_focus(None)
        await pilot.press("f")
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = screen.query_one("#fleet-nodes", DataTable)
        assert [r[:2] for r in rows(table)] == [["FAIL", "node-c"], ["WARN", "node-b"],
                                                ["WARN", "node-a"], ["ok", "node-d"]]
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        chips = rows(app.screen.query_one("#node-chips", DataTable))
        assert chips[0][:2] == ["FAIL", "5"] and len(chips) == 8
        await pilot.press("escape")
        exporters["node-d"].stop()
        for _ in range(60):  # bounded: Prometheus marks the series stale at its next scrape
            await pilot.press("r")
            await app.workers.wait_for_complete()
            await pilot.pause()
            if rows(table)[0][0] == "GONE":
                break
            await asyncio.sleep(0.5)
        assert rows(table)[0][:2] == ["GONE", "node-d"] and table.row_count == 4
