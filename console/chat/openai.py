"""An OpenAI-compatible endpoint (vLLM, vllm-ascend, MindIE, llama.cpp) as a chat backend.

`POST {base}/chat/completions` with `"stream": true` answers with server-sent events, each
`data:` a `chat.completion.chunk` and the last `data: [DONE]` (OpenAI API reference, "Create
chat completion", streaming); `GET {base}/models` lists what the server serves. Timeouts:
connect (httpx), first event and idle between events (a watchdog that aborts the read, so a
stalled server never holds the reply). Cancel shuts the connection down.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.chat.backend import (
    BackendError,
    BackendUnavailable,
    ChatSettings,
    Progress,
    ReplyChunk,
)
from probes import http, json_limits
from probes.sse import Event, EventParser
from probes.textsafe import one_line

if TYPE_CHECKING:
    import httpx

    from console.snapshots import EngineSnapshot

MAX_STREAM_BYTES = 16 * 1024 * 1024
MAX_REPLY_S = 600.0
MODELS_TOTAL_S = 30.0  # /v1/models is a small list: a server dripping it is not waited for


@dataclass(frozen=True)
class EndpointSpec:
    """Where the endpoint is and how long to wait for it (seconds)."""

    url: str  # the API root, ".../v1"
    model: str | None = None  # None: the first model /v1/models lists
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key
    connect_timeout_s: float = 5.0
    first_token_timeout_s: float = 120.0
    idle_timeout_s: float = 60.0


def short_model_id(model: str, limit: int = 40) -> str:
    """A model id short enough for one status line: a path (llama.cpp lists the GGUF file's
    path) keeps its file name; anything still too long keeps its two ends."""
    if len(model) <= limit:
        return model
    if "/" in model.rstrip("/"):
        model = "…/" + model.rstrip("/").rsplit("/", 1)[1]
    if len(model) <= limit:
        return model
    half = (limit - 1) // 2
    return f"{model[:half]}…{model[-(limit - 1 - half):]}"


def list_models(http_client: httpx.Client, base: str) -> list[str]:
    """The ids /v1/models lists; raises BackendUnavailable with one line."""
    fetched = http.get(http_client, f"{base}/models", max_bytes=4 * 1024 * 1024,
                       total_s=MODELS_TOTAL_S)
    if not fetched.ok:
        raise BackendUnavailable(fetched.error, "check --endpoint (and --api-key-env)")
    try:
        data = json_limits.loads(fetched.text, f"{base}/models").get("data")
        ids = [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
    except (ValueError, AttributeError, TypeError):
        raise BackendUnavailable(f"{base}/models: not an OpenAI model list",
                                 "is --endpoint an OpenAI-compatible server?") from None
    return [one_line(i) for i in ids]


def pick_model(models: list[str], wanted: str | None, base: str) -> str:
    if not models:
        raise BackendUnavailable(f"{base}/models lists no model", "is a model loaded?")
    if wanted is None:
        return models[0]
    if wanted not in models:
        raise BackendUnavailable(f"{base}/models does not list {wanted!r} "
                                 f"(it lists {', '.join(models[:8])})",
                                 "pass --model with one of those names")
    return wanted


class _Watchdog:
    """Calls `expire(reason)` when `arm(seconds, reason)` is not renewed in time."""

    def __init__(self, expire: Callable[[str], None]) -> None:
        self._expire = expire
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._reason = ""
        self._stopped = False
        threading.Thread(target=self._run, daemon=True, name="sse-watchdog").start()

    def arm(self, seconds: float, reason: str) -> None:
        with self._cond:
            self._deadline, self._reason = time.monotonic() + seconds, reason
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                left = None if self._deadline is None else self._deadline - time.monotonic()
                if left is not None and left <= 0:
                    self._stopped = True
                    reason = self._reason
                    break
                self._cond.wait(left)
            else:
                return
        self._expire(reason)


class EndpointBackend:
    """Chat with an OpenAI-compatible server; `transport` replaces the network in tests."""

    def __init__(self, spec: EndpointSpec, api_key: http.Secret | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.spec = spec
        self.model: str | None = spec.model
        self._api_key = api_key
        self._transport = transport
        self._lock = threading.Lock()
        self._response: httpx.Response | None = None
        self._abort_reason = ""
        self._client = http.client(self._timeout(), transport, api_key)

    @property
    def label(self) -> str:
        return f"{short_model_id(self.model or '?')} @ {self.spec.url}"

    def _timeout(self) -> httpx.Timeout:
        import httpx

        spec = self.spec
        # the socket's own read timeout is only a backstop: the watchdog enforces both waits
        read_s = max(spec.first_token_timeout_s, spec.idle_timeout_s) + 5.0
        return httpx.Timeout(connect=spec.connect_timeout_s, read=read_s, write=30.0, pool=5.0)

    def _total_s(self) -> float:
        """A whole reply's deadline: the first token's wait, then MAX_REPLY_S of tokens (the
        watchdog ends a stalled stream sooner; this ends one that drips forever)."""
        return self.spec.connect_timeout_s + self.spec.first_token_timeout_s + MAX_REPLY_S

    def prepare(self, progress: Progress) -> str:
        """Every failure here is transient: a server that is down, starting or loading another
        model may answer later, and the console asks again."""
        progress(f"asking {self.spec.url}/models")
        try:
            models = list_models(self._client, self.spec.url)
            self.model = pick_model(models, self.spec.model, self.spec.url)
        except BackendUnavailable as exc:
            raise BackendUnavailable(exc.reason, exc.remedy, transient=True) from None
        return "ready" if len(models) == 1 else f"ready ({len(models)} models served)"

    def request_body(self, messages: Sequence[Mapping[str, str]],
                     settings: ChatSettings) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages],
                                "stream": True, "max_tokens": settings.max_new_tokens,
                                "temperature": settings.temperature, "top_p": settings.top_p}
        if settings.seed is not None:
            body["seed"] = settings.seed
        return body

    def stream(self, messages: Sequence[Mapping[str, str]],
               settings: ChatSettings) -> Iterator[ReplyChunk]:
        import httpx

        url = f"{self.spec.url}/chat/completions"
        self._abort_reason = ""
        watchdog = _Watchdog(self._abort)
        watchdog.arm(self.spec.connect_timeout_s + self.spec.first_token_timeout_s,
                     f"no reply within {self.spec.first_token_timeout_s:g} s "
                     "(the first-token timeout)")
        try:
            with self._client.stream("POST", url, json=self.request_body(messages, settings),
                                     extensions={http.TOTAL_KEY: self._total_s()}) as response:
                with self._lock:
                    self._response = response
                _check_response(response, url)
                yield from self._chunks(response, url, watchdog)
        except httpx.HTTPError as exc:
            raise BackendError(self._abort_reason or http.describe(exc, url)) from None
        except (http.BodyTooLarge, ValueError) as exc:  # a line or a layer over its cap
            raise BackendError(one_line(str(exc))) from None
        finally:
            watchdog.stop()
            with self._lock:
                self._response = None

    def _chunks(self, response: httpx.Response, url: str,
                watchdog: _Watchdog) -> Iterator[ReplyChunk]:
        parser, size, done, finished = EventParser(), 0, False, False
        for line in http.iter_lines(response):
            size += len(line) + 1
            if size > MAX_STREAM_BYTES:
                raise BackendError(f"{url}: the stream passed {MAX_STREAM_BYTES >> 20} MiB; "
                                   "stopped reading")
            event = parser.feed(line)
            if event is None:
                continue
            watchdog.arm(self.spec.idle_timeout_s,
                         f"the stream stalled: nothing for {self.spec.idle_timeout_s:g} s "
                         "(the idle timeout)")
            if event.data.strip() == "[DONE]":
                done = True
                break
            chunk = parse_chunk(event, url)
            finished = finished or chunk.finish_reason is not None
            yield chunk
        if self._abort_reason:
            raise BackendError(self._abort_reason)
        if not done and not finished:
            cut = "mid-event" if parser.pending else "before [DONE]"
            raise BackendError(f"{url}: the stream ended {cut}; the reply may be incomplete")

    def cancel(self) -> None:
        self._abort("cancelled")

    def _abort(self, reason: str) -> None:
        """Shut the connection down from another thread: a blocked read returns at once."""
        with self._lock:
            response = self._response
            if response is None:
                return
            self._abort_reason = self._abort_reason or reason
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def engine_snapshot(self, taken_at: float) -> EngineSnapshot | None:
        return None  # the engine runs elsewhere: the serving panel reads its /metrics

    def close(self) -> None:
        self._client.close()


def _check_response(response: httpx.Response, url: str) -> None:
    if response.status_code != 200:
        body = http.read_capped(response, 64 * 1024).decode("utf-8", errors="replace")
        raise BackendError(http.status_problem(response.status_code, body, url))
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" not in content_type:
        raise BackendError(f"{url}: the server answered {content_type or 'no content type'}, "
                           "not an event stream (does it support \"stream\": true?)")


def parse_chunk(event: Event, url: str) -> ReplyChunk:
    """One `chat.completion.chunk` event; a server error event or malformed data is a
    BackendError with one line."""
    try:
        doc = json_limits.loads(event.data, url)
    except ValueError:
        raise BackendError(f"{url}: malformed event: data is not JSON "
                           f"({one_line(event.data[:80])})") from None
    if not isinstance(doc, dict):
        raise BackendError(f"{url}: malformed event: data is not a JSON object")
    if event.event == "error" or "error" in doc or doc.get("object") == "error":
        message = http.error_message(event.data) or "no message"
        raise BackendError(f"{url}: the server reported an error mid-stream: {message}")
    choices = doc.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    delta = choice.get("delta") or {}
    text = delta.get("content") if isinstance(delta, dict) else None
    usage = doc.get("usage")
    reported = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return ReplyChunk(text if isinstance(text, str) else "", 1 if text else 0,
                      choice.get("finish_reason") or None,
                      reported if isinstance(reported, int) else None)
