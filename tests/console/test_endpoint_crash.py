"""A server that dies mid-reply, served for real on loopback: the doctor's endpoint.smoke says
it closed the connection mid-reply and to read its log (not "start the server"), and the
console's chat shows the reply failed in one line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from checks.builtin.endpoint import CRASH_HINT
from checks.context import Context
from checks.policy import load_policy
from checks.registry import all_checks
from checks.runner import run_checks
from console.chat.backend import ChatSettings
from console.chat.openai import EndpointBackend, EndpointSpec
from console.chat.reply import ReplyDone, Stopper, run_reply
from probes.http import EndpointTarget
from probes.live import LiveHost
from tests.console.loopback import FakeOpenAI


@pytest.fixture
def crashing() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(crash_mid_reply=True).start()
    yield server
    server.stop()


def test_the_smoke_check_says_the_server_closed_mid_reply(crashing: FakeOpenAI) -> None:
    smoke = tuple(c for c in all_checks() if c.id == "endpoint.smoke")
    ctx = Context(LiveHost(), load_policy(), endpoint=EndpointTarget.of(crashing.url))
    result = run_checks(smoke, ctx).results[0]
    assert result.status == "fail" and crashing.chats == 1
    assert "broke the HTTP exchange" in result.summary and "\n" not in result.summary
    assert result.remedy == CRASH_HINT and "start the server" not in result.remedy


def test_the_chat_reply_fails_in_one_line(crashing: FakeOpenAI) -> None:
    backend = EndpointBackend(EndpointSpec(crashing.url))
    backend.prepare(lambda stage: None)
    events: list[Any] = []
    run_reply(backend, [{"role": "user", "content": "hi"}], ChatSettings(), 1, events.append,
              Stopper())
    done = events[-1]
    assert isinstance(done, ReplyDone) and done.stats.finish_reason == "error"
    assert "broke the HTTP exchange" in done.error and "\n" not in done.error
    backend.close()
