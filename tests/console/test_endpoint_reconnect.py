"""An endpoint that comes and goes, served for real on loopback: the console started before it
queues what is typed and chats once it answers; its death and return raise and clear the
"down" alert, and a new process start time raises "restarted"."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.widgets import Static

from console.chat.openai import EndpointSpec
from console.options import ConsoleOptions
from console.ui.app import ConsoleApp
from console.ui.chat_controller import RECONNECT_NOTE
from tests.conftest import FakeRoot
from tests.console.loopback import FakeOpenAI
from tests.console.test_app import history, no_npu_host, send, wait_for

SIZE = (160, 45)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    made = FakeOpenAI()  # its port is chosen, nothing listens yet
    yield made
    made.stop()


def app_for(fake_root: FakeRoot, server: FakeOpenAI) -> ConsoleApp:
    options = ConsoleOptions(endpoint=EndpointSpec(server.url, connect_timeout_s=1.0),
                             serving_metrics_url=server.metrics_url, log_dir=None,
                             interval_s=0.2, npu_timeout_s=2.0)
    return ConsoleApp(options, host=no_npu_host(fake_root))


def status(app: ConsoleApp) -> str:
    return str(app.query_one("#chat-status", Static).render())


def active(app: ConsoleApp) -> set[str]:
    return set(app.telemetry.alert_log.active)


async def test_a_late_endpoint_gets_the_queued_message(fake_root: FakeRoot,
                                                       server: FakeOpenAI) -> None:
    app = app_for(fake_root, server)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "endpoint down" in status(app), what="the down state")
        assert "cannot connect" in status(app)
        assert "serving:down" in active(app)
        await send(pilot, "are you there?")
        await pilot.pause()
        assert app.chat.session.queue and not history(app)
        note = app.query(".turn-note").last()
        assert RECONNECT_NOTE in str(note.render())
        server.start()
        await wait_for(pilot, lambda: len(history(app)) == 2, timeout_s=20,
                       what="the queued message answered once the endpoint is up")
        assert server.chats == 1 and history(app)[0]["content"] == "are you there?"
        assert "ready" in status(app)
        await wait_for(pilot, lambda: "serving:down" not in active(app), what="the alert cleared")


async def test_death_and_return_raise_and_clear_alerts(fake_root: FakeRoot,
                                                       server: FakeOpenAI) -> None:
    server.start()
    app = app_for(fake_root, server)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in status(app), what="ready")
        await wait_for(pilot, lambda: app.telemetry.latest("serving") is not None
                       and app.telemetry.latest("serving").ok, what="a scrape")
        server.stop()
        await wait_for(pilot, lambda: "serving:down" in active(app), what="the down alert")
        await wait_for(pilot, lambda: "endpoint down" in status(app),
                       what="the chat saying so, not 'ready'")
        logged = [a.key for a in app.telemetry.alert_log.entries]
        assert "serving:down" in logged
        server.started_at += 600  # the process that comes back is a new one
        server.start()
        await wait_for(pilot, lambda: "serving:down" not in active(app), timeout_s=20,
                       what="the down alert cleared")
        await wait_for(pilot, lambda: "serving:restarted" in active(app), what="restarted")
        await wait_for(pilot, lambda: "ready" in status(app), timeout_s=20, what="ready again")
        await send(pilot, "back?")
        await wait_for(pilot, lambda: len(history(app)) == 2, what="a reply after the return")
