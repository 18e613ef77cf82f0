"""A real HTTP server on loopback for the tests that talk to one: any handler class, on a free
port, shut down and closed when the block ends (so no test leaves a listening socket behind)."""

from __future__ import annotations

import contextlib
import http.server
import socketserver
import threading
from collections.abc import Callable, Iterator
from typing import Any

Handler = Callable[..., socketserver.BaseRequestHandler]


@contextlib.contextmanager
def loopback_server(handler: Handler, daemon_threads: bool = False) -> Iterator[str]:
    """`http://127.0.0.1:PORT` of a threading server running `handler`; `daemon_threads` for a
    handler that may still be stalling when the test ends."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = daemon_threads
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def loopback_servers() -> Iterator[Callable[..., str]]:
    """A `start(handler)` that starts one more server each call; all stop when the block ends."""
    with contextlib.ExitStack() as stack:

        def start(handler: Handler, **options: Any) -> str:
            return stack.enter_context(loopback_server(handler, **options))

        yield start
