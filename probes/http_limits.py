"""The bounds of an HTTP exchange that httpx does not give: a total deadline per request,
decompression counted layer by layer as it decodes, and a cap on a line still unfinished.

- Deadline: httpx's timeouts bound each socket operation, so a server that sends its headers
  a line a second, or a body a byte every half second, never trips one. Here every read,
  write and connect of a client's connections is given at most the time left before the
  request's deadline (set when the request starts, by an event hook), and past it raises
  httpcore's ReadTimeout/WriteTimeout/ConnectTimeout, which httpx reports as its own.
- Decompression: `Content-Encoding: gzip, gzip` turns 16 KB into 10 GB, and httpx decodes a
  whole chunk through every layer before anyone counts. Here each layer inflates at most a
  step at a time (zlib's `max_length`) and the bytes coming out of every layer are counted.
- Lines: a server-sent event line with no newline is one growing buffer; the unfinished
  line is capped, not only finished ones.
"""

from __future__ import annotations

import codecs
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

STEP_BYTES = 64 * 1024
TOTAL_KEY = "total_timeout_s"  # a request's extension: its own total deadline (None: none)
DEADLINE_WORDS = "the total deadline of the request passed"
_state = threading.local()


class BodyTooLarge(Exception):
    """An answer (or one layer of it, or one line) over its cap; one line naming the URL."""


# -- the deadline ----------------------------------------------------------------------------


def _left_s(timeout: float | None) -> float | None:
    deadline = getattr(_state, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    return max(0.0, left) if timeout is None else max(0.0, min(timeout, left))


def _expired() -> bool:
    deadline = getattr(_state, "deadline", None)
    return deadline is not None and time.monotonic() >= deadline


class _DeadlineStream:
    """A network stream whose operations end by the request's deadline."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        import httpcore

        if _expired():
            raise httpcore.ReadTimeout(DEADLINE_WORDS)
        try:
            return bytes(self._inner.read(max_bytes, _left_s(timeout)))
        except httpcore.ReadTimeout:
            raise httpcore.ReadTimeout(DEADLINE_WORDS if _expired() else "timed out") from None

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        import httpcore

        if _expired():
            raise httpcore.WriteTimeout(DEADLINE_WORDS)
        self._inner.write(buffer, _left_s(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> _DeadlineStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                     _left_s(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend:
    """httpcore's network backend, its streams wrapped in `_DeadlineStream`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> Any:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _left_s(timeout),
                                                       local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> Any:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _left_s(timeout),
                                                               socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install_deadline(client: httpx.Client, total_s: float | None) -> bool:
    """Give every request of `client` a total deadline: `total_s`, or the request's own
    `total_timeout_s` extension. False when the client's transports are not httpx's own
    (a MockTransport in a test has no sockets to bound)."""
    import httpcore

    pools = [getattr(t, "_pool", None) for t in (client._transport, *client._mounts.values())
             if t is not None]
    wrapped = False
    for pool in pools:
        if isinstance(pool, httpcore.ConnectionPool | httpcore.HTTPProxy):
            backend = pool._network_backend
            if not isinstance(backend, _DeadlineBackend):
                pool._network_backend = _DeadlineBackend(backend)  # type: ignore[assignment]
            wrapped = True

    def start(request: httpx.Request) -> None:
        given = request.extensions.get(TOTAL_KEY, total_s)
        _state.deadline = None if given is None else time.monotonic() + float(given)

    client.event_hooks["request"] = [*client.event_hooks["request"], start]
    return wrapped


def deadline_passed(exc: BaseException) -> bool:
    """Whether an httpx error was this module's deadline."""
    return DEADLINE_WORDS in str(exc)


# -- decoding, layer by layer -----------------------------------------------------------------


class _Layer:
    """One content coding, inflated at most STEP_BYTES a call."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.wbits = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS,
                      "deflate": zlib.MAX_WBITS}[coding]
        self._inflate = zlib.decompressobj(self.wbits)
        self._first = True

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._first and self.coding == "deflate" and data:
            self._first = False
            if data[0] & 0x0F != 8:  # no zlib header: raw deflate, as some servers send
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        pending = data
        while True:
            out = self._inflate.decompress(pending, STEP_BYTES)
            if out:
                yield out
            pending = self._inflate.unconsumed_tail
            if self._inflate.eof and self._inflate.unused_data:  # another gzip member
                pending = self._inflate.unused_data
                self._inflate = zlib.decompressobj(self.wbits)
                continue
            if not pending and len(out) < STEP_BYTES:
                return


def codings(header: str) -> list[str]:
    """The codings of a Content-Encoding header, in the order they were applied; ValueError
    for one that is not read here."""
    found = [c.strip().lower() for c in header.split(",") if c.strip()]
    for coding in found:
        if coding not in ("gzip", "x-gzip", "deflate", "identity"):
            raise ValueError(f"Content-Encoding {coding!r} is not read")
    return [c for c in found if c != "identity"]


def decoded(raw: Iterable[bytes], header: str, max_bytes: int, what: str) -> Iterator[bytes]:
    """The body under `header`'s codings, undone last first; every layer's output counted
    against `max_bytes` as it comes. Raises BodyTooLarge or ValueError (bad data)."""
    layers = [_Layer(c) for c in reversed(codings(header))]
    stream: Iterable[bytes] = raw
    for depth, layer in enumerate(layers, 1):
        stream = _through(layer, stream, max_bytes, f"{what} (layer {depth} of {len(layers)})")
    total = 0
    for chunk in stream:
        total += len(chunk)
        if total > max_bytes:
            raise BodyTooLarge(f"{what}: the answer is larger than {max_bytes // 1024:,} KiB; "
                               "not read")
        yield chunk


def _through(layer: _Layer, chunks: Iterable[bytes], max_bytes: int,
             what: str) -> Iterator[bytes]:
    total = 0
    for chunk in chunks:
        try:
            for out in layer.feed(chunk):
                total += len(out)
                if total > max_bytes:
                    raise BodyTooLarge(f"{what}: decodes to more than {max_bytes // 1024:,} "
                                       "KiB; not read")
                yield out
        except zlib.error as exc:
            raise ValueError(f"{what}: not valid {layer.coding} data ({exc})") from None


# -- lines ------------------------------------------------------------------------------------


def lines(chunks: Iterable[bytes], max_line_bytes: int, what: str) -> Iterator[str]:
    """The lines of a text body (ending in LF or CRLF; the last one may lack it), decoded as
    UTF-8 with bad bytes replaced. Raises BodyTooLarge for a line, finished or not, over
    `max_line_bytes`."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buffer = bytearray()
    for chunk in chunks:
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if end - start > max_line_bytes:
                break
            yield decoder.decode(bytes(buffer[start:end])).removesuffix("\r")
            start = end + 1
        del buffer[:start]
        if len(buffer) > max_line_bytes or buffer.find(b"\n") > max_line_bytes:
            raise BodyTooLarge(f"{what}: a line longer than {max_line_bytes // 1024:,} KiB; "
                               "stopped reading")
    if buffer:
        yield decoder.decode(bytes(buffer), final=True).removesuffix("\r")
