"""The serving panel and per-host NPU panels in the app, fed over real loopback HTTP."""

from __future__ import annotations

import functools
import http.server
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.app import App, ComposeResult
from textual.widgets import Static

from console import serving
from console.history import History
from console.options import ConsoleOptions
from console.snapshots import ServingSnapshot
from console.ui.app import ConsoleApp
from console.ui.widgets.npu import NpuPanel
from console.ui.widgets.serving import NOT_EXPORTED, ServingPanel, serving_table
from probes.live import LiveHost
from tests.console.fakes import fake_backend
from tests.loopback_fixtures import loopback_server

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


class PanelHost(App[None]):
    def compose(self) -> ComposeResult:
        yield ServingPanel("http://node:8000/metrics")


def rendered(widget: Any) -> str:
    return str(widget.render())


def as_text(renderable: Any) -> str:
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def test_serving_panel_says_not_exported_and_no_traffic() -> None:
    snap = ServingSnapshot(10.0, "http://node:8000/metrics", "MindIE", None, 0.01, running=4,
                           waiting=0, kv_cache_usage=0.3, window_s=5.0,
                           not_exported=("aborted_requests",))
    app = PanelHost()
    async with app.run_test(size=(100, 30)) as pilot:
        panel = app.query_one(ServingPanel)
        panel.show(snap, History(), 11.0)
        await pilot.pause()
        table = panel.query_one("#serving-table", Static)
        text = as_text(serving_table(snap))
        assert table.display
        assert "KV cache" in text and "30.0%" in text
        assert NOT_EXPORTED in text and "no requests" in text
        assert "MindIE" in rendered(panel.query_one("#serving-status"))
        panel.show(ServingSnapshot(12.0, "u", "unknown", "u: HTTP 404 — "
                                   + serving.NOT_EXPORTED_NOTE, 0.0), History(), 12.0)
        await pilot.pause()
        assert serving.NOT_EXPORTED_NOTE in rendered(panel.query_one("#serving-status"))
        assert not table.display


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def file_server(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "metrics").write_bytes(
        (CORPUS / "npu-exporter" / "npu_exporter_testdata_prometheus_metrics.prom").read_bytes())
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "metrics").write_bytes(
        (CORPUS / "serving" / "vllm_v1_names_a.prom").read_bytes())
    with loopback_server(functools.partial(_Files, directory=str(tmp_path))) as url:
        yield url


async def test_two_exporters_and_a_serving_endpoint(file_server: str, tmp_path: Path) -> None:
    options = ConsoleOptions(interval_s=0.5, log_dir=None,
                             npu_exporters=(file_server, "http://127.0.0.1:9"),
                             serving_metrics_url=f"{file_server}/serving/metrics")
    app = ConsoleApp(options, backend=fake_backend(),
                     host=LiveHost(root=str(tmp_path), env={"PATH": "/nonexistent"}))
    async with app.run_test(size=(160, 60)) as pilot:
        deadline = time.monotonic() + 15
        panels = list(app.query(NpuPanel))
        while time.monotonic() < deadline and not all(
                "waiting" not in rendered(p.query_one("#npu-status")) for p in panels):
            await pilot.pause(0.1)
        good, dead = panels
        assert good.source == file_server.removeprefix("http://")
        assert "8 chips" in rendered(good.query_one("#npu-status"))
        assert good.query_one("#npu-chips").row_count == 8  # type: ignore[attr-defined]
        assert "no data from 127.0.0.1:9" in rendered(dead.query_one("#npu-status"))
        assert "connection refused" in rendered(dead.query_one("#npu-status"))
        while time.monotonic() < deadline and app.telemetry.latest("serving") is None:
            await pilot.pause(0.1)
        snap = app.telemetry.latest("serving")
        assert snap is not None and snap.server == "vLLM" and snap.running == 3
