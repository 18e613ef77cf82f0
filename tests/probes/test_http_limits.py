"""Hostile HTTP servers over loopback: a gzip-of-gzip bomb, an endless SSE line, headers and
bodies dripped forever, a server that never answers. Each ends in one line, in seconds and
bounded memory."""

from __future__ import annotations

import contextlib
import socket
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import pytest

from probes import http
from probes.http_limits import BodyTooLarge, codings, decoded, lines

Handler = Callable[[socket.socket, threading.Event], None]


@contextlib.contextmanager
def serving(handler: Handler) -> Iterator[str]:
    """A raw TCP server on loopback running `handler` for each connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=_guarded, args=(handler, conn, stop), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def _guarded(handler: Handler, conn: socket.socket, stop: threading.Event) -> None:
    with contextlib.suppress(OSError), conn:
        conn.recv(65536)  # the request
        handler(conn, stop)


def _gzip(chunks: Iterator[bytes]) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(packer.compress(c) for c in chunks) + packer.flush()


def _zeros(total: int, step: int = 1 << 20) -> Iterator[bytes]:
    block = bytes(step)
    for _ in range(total // step):
        yield block


def _answer(body: bytes, headers: str) -> Handler:
    def handle(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{headers}"
                     "Connection: close\r\n\r\n".encode() + body)
    return handle


def test_a_gzip_of_gzip_bomb_is_refused_in_bounded_memory() -> None:
    bomb = _gzip(iter([_gzip(_zeros(64 << 20))]))  # 64 MiB behind a few KB
    assert len(bomb) < 16 * 1024
    with serving(_answer(bomb, "Content-Encoding: gzip, gzip\r\n")) as url:
        tracemalloc.start()
        try:
            with http.client(5.0) as client:
                fetched = http.get(client, url + "/metrics", max_bytes=4 << 20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    error = fetched.error
    assert fetched.status is None and ("larger than" in error or "decodes to more" in error)
    assert "\n" not in fetched.error
    assert peak < 24 << 20


def test_layers_decode_in_order_and_bad_codings_are_named() -> None:
    body = _gzip(iter([zlib.compress(b"hello")]))
    assert b"".join(decoded([body[:7], body[7:]], "deflate, gzip", 1 << 20, "u")) == b"hello"
    assert codings("identity, GZIP") == ["gzip"]
    with pytest.raises(ValueError, match="'br' is not read"):
        codings("br")
    with pytest.raises(ValueError, match="not valid gzip"):
        list(decoded([b"not gzip at all"], "gzip", 1 << 20, "u"))
    with pytest.raises(BodyTooLarge, match="layer 1 of 1"):
        list(decoded([_gzip(_zeros(8 << 20))], "gzip", 1 << 20, "u"))


def test_an_unfinished_line_is_capped() -> None:
    def endless() -> Iterator[bytes]:
        yield b"data: ok\n\n"
        while True:
            yield b"x" * 65536

    seen: list[str] = []
    with pytest.raises(BodyTooLarge, match="a line longer than 1,024 KiB"):
        seen.extend(lines(endless(), 1 << 20, "u"))
    assert seen == ["data: ok", ""]
    assert list(lines([b"a\r\nb", b"\nc"], 10, "u")) == ["a", "b", "c"]
    with pytest.raises(BodyTooLarge):
        list(lines([b"short\n" + b"y" * 20 + b"\n"], 10, "u"))


def test_an_sse_server_sending_an_endless_line_ends_in_a_line() -> None:
    def handle(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Connection: close\r\n\r\ndata: ")
        while not stop.is_set():
            conn.sendall(b"x" * 65536)

    with serving(handle) as url, http.client(5.0) as client, \
            client.stream("GET", url) as response, \
            pytest.raises(BodyTooLarge, match="a line longer than"):
        for _ in http.iter_lines(response):
            pass


def _drip(head: bytes, every_s: float) -> Handler:
    def handle(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head)
        while not stop.wait(every_s):
            conn.sendall(b"X-Drip: 1\r\n" if b"\r\n\r\n" not in head else b"1")
    return handle


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 200 OK\r\n",  # headers, one line every 0.2 s
    b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n",  # a body, a byte every 0.2 s
])
def test_a_dripping_server_meets_the_total_deadline(head: bytes) -> None:
    with serving(_drip(head, 0.2)) as url, http.client(30.0, total_s=1.0) as client:
        fetched = http.get(client, url + "/metrics")
    assert fetched.status is None and "total deadline" in fetched.error


def test_a_silent_server_meets_the_per_request_deadline() -> None:
    def silent(conn: socket.socket, stop: threading.Event) -> None:
        stop.wait(30)

    with serving(silent) as url, http.client(30.0) as client:
        fetched = http.get(client, url + "/v1/models", total_s=0.5)
    assert "total deadline" in fetched.error


def test_default_total_follows_the_timeouts() -> None:
    import httpx

    assert http.default_total_s(2.5) == 2.5
    assert http.default_total_s(httpx.Timeout(connect=5, read=60, write=1, pool=1)) == 65
    assert http.default_total_s(httpx.Timeout(None)) is None
