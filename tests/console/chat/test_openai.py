"""The endpoint backend against httpx.MockTransport (recorded streams) and a real loopback
server that stalls (timeouts and cancel need a real socket)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.chat.backend import BackendUnavailable, ChatSettings
from console.chat.openai import EndpointBackend, EndpointSpec
from console.chat.reply import ReplyDelta, ReplyDone, Stopper, run_reply
from console.options import api_key
from probes.http import Secret
from probes.sse import EventParser
from tests.loopback_fixtures import loopback_server

SERVING = Path(__file__).resolve().parents[2] / "corpus" / "serving"
STREAM = (SERVING / "llamacpp_chat_stream.sse").read_bytes()
MODELS = (SERVING / "llamacpp_models.json").read_bytes()
BASE = "http://serving.test:8000/v1"
SSE = {"content-type": "text/event-stream"}


def transport(chat: Callable[[httpx.Request], httpx.Response],
              seen: list[httpx.Request] | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if request.url.path == "/v1/models":
            return httpx.Response(200, content=MODELS, headers={"content-type": "application/json"})
        return chat(request)
    return httpx.MockTransport(handler)


def backend(chat: Callable[[httpx.Request], httpx.Response], model: str | None = None,
            key: Secret | None = None, seen: list[httpx.Request] | None = None
            ) -> EndpointBackend:
    made = EndpointBackend(EndpointSpec(BASE, model=model), key, transport(chat, seen))
    made.prepare(lambda stage: None)
    return made


def reply(made: EndpointBackend, stopper: Stopper | None = None) -> tuple[str, ReplyDone]:
    events: list[Any] = []
    run_reply(made, [{"role": "user", "content": "What is HBM?"}], ChatSettings(), 1,
              events.append, stopper or Stopper())
    text = "".join(e.text for e in events if isinstance(e, ReplyDelta))
    done = events[-1]
    assert isinstance(done, ReplyDone)
    return text, done


def recorded_text() -> str:
    parser, parts = EventParser(), []
    for line in STREAM.decode().splitlines():
        event = parser.feed(line)
        if event is not None and event.data != "[DONE]":
            parts.append(json.loads(event.data)["choices"][0]["delta"].get("content", ""))
    return "".join(parts)


def test_a_recorded_llama_cpp_stream_is_read_and_measured() -> None:
    seen: list[httpx.Request] = []
    made = backend(lambda r: httpx.Response(200, content=STREAM, headers=SSE), seen=seen)
    assert made.model and made.model.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    text, done = reply(made)
    assert text == recorded_text() and text
    assert not done.error and done.stats.finish_reason == "length"
    assert done.stats.tokens == 12 and done.stats.ttft_s is not None
    body = json.loads(seen[-1].content)
    assert body["stream"] is True and body["model"] == made.model
    assert body["messages"][-1] == {"role": "user", "content": "What is HBM?"}
    assert body["max_tokens"] == 256 and body["temperature"] == 0.0


def test_a_stream_cut_mid_event_is_one_clear_line() -> None:
    cut = STREAM[: STREAM.rindex(b"data: {") + 40]  # inside the JSON of the last chunk
    text, done = reply(backend(lambda r: httpx.Response(200, content=cut, headers=SSE)))
    assert done.stats.finish_reason == "error"
    assert "the stream ended mid-event" in done.error and "\n" not in done.error
    assert text  # what arrived before the cut is kept


def test_a_stream_without_done_or_finish_reason_is_reported() -> None:
    events = [b for b in STREAM.split(b"\n\n") if b and b"finish_reason\": \"length" not in b
              and b"[DONE]" not in b]
    body = b"\n\n".join(events) + b"\n\n"
    _, done = reply(backend(lambda r: httpx.Response(200, content=body, headers=SSE)))
    assert "ended before [DONE]" in done.error


def test_a_server_error_event_mid_stream() -> None:
    # the shape vLLM's OpenAI server streams when a request fails after the stream began
    first = STREAM.split(b"\n\n")[1] + b"\n\n"
    error = {"error": {"object": "error", "message": "The model ran out of KV cache blocks",
                       "type": "InternalServerError", "param": None, "code": 500}}
    body = first + b"data: " + json.dumps(error).encode() + b"\n\n"
    text, done = reply(backend(lambda r: httpx.Response(200, content=body, headers=SSE)))
    assert text == "H" and done.stats.finish_reason == "error"  # the one token before it
    assert "server reported an error mid-stream: The model ran out of KV cache blocks" in \
        done.error


@pytest.mark.parametrize(("status", "body", "expected"), [
    (401, {"error": {"message": "Invalid API key", "type": "invalid_request_error"}},
     "HTTP 401 unauthorised: Invalid API key — the server wants an API key: pass "
     "--api-key-env NAME"),
    (500, {"object": "error", "message": "engine dead", "code": 500}, "HTTP 500: engine dead"),
    (404, {"detail": "Not Found"}, "HTTP 404 not found: Not Found"),
])
def test_http_errors_are_one_line(status: int, body: dict[str, Any], expected: str) -> None:
    _, done = reply(backend(lambda r: httpx.Response(status, json=body)))
    assert expected in done.error and "\n" not in done.error


def test_malformed_data_and_a_json_answer_are_named() -> None:
    bad = b"data: {not json\n\n"
    _, done = reply(backend(lambda r: httpx.Response(200, content=bad, headers=SSE)))
    assert "malformed event: data is not JSON" in done.error
    _, done = reply(backend(lambda r: httpx.Response(200, json={"choices": []})))
    assert "not an event stream" in done.error


def test_models_are_listed_and_a_named_one_must_be_served() -> None:
    with pytest.raises(BackendUnavailable) as caught:
        backend(lambda r: httpx.Response(500), model="qwen3-30b-a3b")
    assert "does not list 'qwen3-30b-a3b'" in caught.value.reason
    assert "SmolLM2" in caught.value.reason


def test_the_api_key_goes_in_the_header_and_nowhere_else() -> None:
    seen: list[httpx.Request] = []
    key = api_key(EndpointSpec(BASE, api_key_env="SERVING_KEY"), {"SERVING_KEY": "sk-secret"})
    assert key is not None and "sk-secret" not in repr(key) and "sk-secret" not in str(key)
    made = backend(lambda r: httpx.Response(200, content=STREAM, headers=SSE), key=key,
                   seen=seen)
    reply(made)
    assert all(r.headers["authorization"] == "Bearer sk-secret" for r in seen)
    assert "sk-secret" not in made.label and "sk-secret" not in repr(made.spec)


def test_a_refused_connection_is_unavailable_with_one_line() -> None:
    made = EndpointBackend(EndpointSpec("http://127.0.0.1:9/v1", connect_timeout_s=2))
    with pytest.raises(BackendUnavailable) as caught:
        made.prepare(lambda stage: None)
    assert "cannot connect (connection refused); is the server running?" in caught.value.reason


# --- a real server on loopback that stalls -------------------------------------------------------


class _Stalling(http.server.BaseHTTPRequestHandler):
    stall_s = 30.0
    first = STREAM.split(b"\n\n")[1] + b"\n\n"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(self.first)
        self.wfile.flush()
        time.sleep(self.stall_s)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stalling_server() -> Iterator[str]:
    with loopback_server(_Stalling, daemon_threads=True) as url:
        yield f"{url}/v1"


def test_the_idle_timeout_ends_a_stalled_stream(stalling_server: str) -> None:
    made = EndpointBackend(EndpointSpec(stalling_server, model="m", idle_timeout_s=0.5))
    started = time.monotonic()
    text, done = reply(made)
    assert time.monotonic() - started < 10
    assert text and done.stats.finish_reason == "error"
    assert "the stream stalled: nothing for 0.5 s (the idle timeout)" in done.error


def test_cancel_closes_a_stalled_stream_at_once(stalling_server: str) -> None:
    made = EndpointBackend(EndpointSpec(stalling_server, model="m", idle_timeout_s=60))
    stopper = Stopper()

    def cancel() -> None:
        stopper.set()
        made.cancel()

    timer = threading.Timer(0.5, cancel)
    timer.start()
    started = time.monotonic()
    _, done = reply(made, stopper)
    timer.join()
    assert time.monotonic() - started < 10
    assert done.stats.finish_reason == "cancelled" and not done.error


def test_the_first_token_timeout(stalling_server: str) -> None:
    _Stalling.first = b": ping\n\n"  # headers and a comment, never a token
    try:
        made = EndpointBackend(EndpointSpec(stalling_server, model="m", first_token_timeout_s=0.5))
        _, done = reply(made)
    finally:
        _Stalling.first = STREAM.split(b"\n\n")[1] + b"\n\n"
    assert "no reply within 0.5 s (the first-token timeout)" in done.error
