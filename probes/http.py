"""HTTP to a serving endpoint or an exporter: URLs, a client with timeouts, bounded reads, and
one-line explanations of what went wrong (refused, TLS, auth, timeouts).

httpx is imported when a client is made, so importing this module costs nothing. Every call
has a timeout and every body an output cap; a transport can be handed in
(httpx.MockTransport in tests).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from probes import json_limits
from probes.http_limits import (
    TOTAL_KEY,
    BodyTooLarge,
    deadline_passed,
    decoded,
    install_deadline,
    lines,
)
from probes.textsafe import one_line

if TYPE_CHECKING:
    import httpx

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024  # one SSE line: a chunk of a reply is a few hundred bytes
MAX_STREAM_BYTES = 256 * 1024 * 1024  # decoded, over a whole streamed reply
USER_AGENT = "ascend-doctor"


class EndpointURLError(ValueError):
    """A URL that cannot name an endpoint; the message says what to type."""


@dataclass(frozen=True)
class Secret:
    """A credential that never shows up in a repr, a log line or a recording."""

    value: str

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


@dataclass(frozen=True)
class EndpointTarget:
    """A serving endpoint to judge: its OpenAI API root (".../v1"), the model it must serve
    (None: any), its /metrics URL, and the API key (from an environment variable)."""

    api_base: str
    model: str | None = None
    metrics_url: str = ""
    api_key: Secret | None = None

    @classmethod
    def of(cls, url: str, model: str | None = None, metrics: str | None = None,
           api_key: Secret | None = None) -> EndpointTarget:
        return cls(api_base(url), model or None, check_url(metrics) if metrics else
                   metrics_url(url), api_key)


def check_url(url: str, what: str = "URL") -> str:
    """`url` without a trailing slash, or EndpointURLError."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointURLError(f"{what} {url!r}: use http://HOST:PORT or https://HOST:PORT")
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        raise EndpointURLError(f"{what} {url!r}: the port is not a number") from None
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), parts.query, ""))


def api_base(url: str) -> str:
    """The OpenAI API root of an endpoint URL: `http://h:8000` and `http://h:8000/v1` both give
    `http://h:8000/v1`."""
    url = check_url(url, "endpoint")
    return url if urlsplit(url).path.endswith("/v1") else url + "/v1"


def metrics_url(url: str) -> str:
    """Where a vLLM-style server exports its metrics: `/metrics` at the server's root."""
    parts = urlsplit(check_url(url, "endpoint"))
    return urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


def client(timeout: httpx.Timeout | float, transport: httpx.BaseTransport | None = None,
           api_key: Secret | None = None, total_s: float | None = None) -> httpx.Client:
    """A client whose every request ends within `total_s` (default: the connect and read
    timeouts together), however slowly the server drips its answer; a request may carry
    its own total as the `total_timeout_s` extension."""
    import httpx

    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key.value}"
    made = httpx.Client(timeout=timeout, transport=transport, headers=headers,
                        follow_redirects=False)
    install_deadline(made, total_s if total_s is not None else default_total_s(timeout))
    return made


def default_total_s(timeout: httpx.Timeout | float) -> float | None:
    if isinstance(timeout, int | float):
        return float(timeout)
    parts = [timeout.connect, timeout.read]
    return None if None in parts else sum(p for p in parts if p is not None)


@dataclass(frozen=True)
class Fetched:
    """A bounded GET: the status and body, or why there is none (`error`, one line)."""

    url: str
    status: int | None
    text: str
    content_type: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.status is not None and 200 <= self.status < 300


def get(http: httpx.Client, url: str, max_bytes: int = MAX_BODY_BYTES,
        total_s: float | None = None) -> Fetched:
    """GET `url`, reading at most `max_bytes` (within `total_s` when given, else the
    client's total); never raises for network trouble."""
    import httpx

    extensions = {} if total_s is None else {TOTAL_KEY: total_s}
    try:
        with http.stream("GET", url, extensions=extensions) as response:
            body = read_capped(response, max_bytes)
            content_type = response.headers.get("content-type", "")
            text = body.decode(response.encoding or "utf-8", errors="replace")
            error = "" if response.is_success else status_problem(response.status_code, text, url)
            return Fetched(url, response.status_code, text, content_type, error)
    except (BodyTooLarge, ValueError) as exc:
        return Fetched(url, None, "", error=one_line(str(exc)))
    except httpx.HTTPError as exc:
        return Fetched(url, None, "", error=describe(exc, url))


def body_chunks(response: httpx.Response, max_bytes: int) -> Iterator[bytes]:
    """The decoded body, every content-coding layer counted as it inflates. Raises
    BodyTooLarge, or ValueError for a coding not read or data that is not it."""
    url = str(response.request.url)
    if response.is_stream_consumed:  # a body built in memory (a test's transport): decoded
        return decoded([response.content], "", max_bytes, url)
    return decoded(response.iter_raw(), response.headers.get("content-encoding", ""),
                   max_bytes, url)


def read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    return b"".join(body_chunks(response, max_bytes))


def iter_lines(response: httpx.Response, max_line_bytes: int = MAX_LINE_BYTES,
               max_bytes: int = MAX_STREAM_BYTES) -> Iterator[str]:
    """The lines of a streamed body (server-sent events), each under `max_line_bytes`
    whether finished or not. Raises BodyTooLarge or ValueError."""
    return lines(body_chunks(response, max_bytes), max_line_bytes, str(response.request.url))


def describe(exc: BaseException, url: str) -> str:
    """One line for a failed request: what happened and what to do."""
    import httpx

    cause = _root(exc)
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (f"{url}: TLS certificate not trusted ({cause.verify_message}); set "
                "SSL_CERT_FILE to the CA bundle that signed it")
    if isinstance(cause, ssl.SSLError):
        return (f"{url}: TLS handshake failed ({one_line(str(cause))}); is the server "
                "speaking plain HTTP? try http://")
    if isinstance(exc, httpx.ConnectTimeout):
        return f"{url}: no connection within the connect timeout (host down or firewalled?)"
    if isinstance(exc, httpx.ConnectError):
        return f"{url}: cannot connect ({_connect_reason(cause)}); is the server running?"
    if deadline_passed(exc):
        return f"{url}: no whole answer within the request's total deadline (a slow server?)"
    if isinstance(exc, httpx.TimeoutException):
        return f"{url}: the server stopped answering (timed out waiting for data)"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"{url}: the server broke the HTTP exchange ({one_line(str(exc))[:160]})"
    return f"{url}: {type(exc).__name__}: {one_line(str(exc))[:200]}"


def _root(exc: BaseException) -> BaseException:
    seen = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        nxt = seen.__cause__ or seen.__context__
        if nxt is None or nxt is seen:
            break
        seen = nxt
    return seen


def _connect_reason(cause: BaseException) -> str:
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    text = one_line(str(cause)) or type(cause).__name__
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host name"
    return text[:160]


def status_problem(status: int, body: str, url: str) -> str:
    """One line for an HTTP error status, with the server's own message when it sent one."""
    message = error_message(body)
    said = f": {message}" if message else ""
    if status == 401:
        return (f"{url}: HTTP 401 unauthorised{said} — the server wants an API key: pass "
                "--api-key-env NAME with the key in that environment variable")
    if status == 403:
        return f"{url}: HTTP 403 forbidden{said} — the API key is not accepted for this"
    if status == 404:
        return f"{url}: HTTP 404 not found{said} — is this the right path (…/v1)?"
    return f"{url}: HTTP {status}{said}"


def error_message(body: str) -> str:
    """The message of an OpenAI-style (`{"error": {"message"}}`), vLLM (`{"message"}`) or
    FastAPI (`{"detail"}`) error body; "" when there is none."""
    try:
        doc: Any = json_limits.loads(body, "error body")
    except ValueError:
        return one_line(body.strip())[:200]
    if not isinstance(doc, dict):
        return ""
    error = doc.get("error")
    if isinstance(error, dict):
        doc = error
    elif isinstance(error, str):
        return one_line(error)[:200]
    for key in ("message", "detail"):
        if isinstance(doc.get(key), str):
            return one_line(doc[key])[:200]
    return ""
