"""A stand-in OpenAI-compatible server on loopback for tests that run `ascend-doctor
--endpoint` in another process: fixed routes answer fixed bodies, in a thread of this one."""

from __future__ import annotations

import http.server
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from loopback_fixtures import loopback_server

Reply = tuple[str, bytes]  # content type, body


def chat_stream(*deltas: Mapping[str, str]) -> bytes:
    """An OpenAI chat stream of `deltas`, then a finish_reason and [DONE]."""
    events: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": dict(d), "finish_reason": None}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return body + b"data: [DONE]\n\n"


def models_list(model_id: str) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": model_id, "object": "model"}]}
                      ).encode()


Answer = tuple[int, str, bytes]  # status, content type, body
Routes = Mapping[str, Callable[[dict[str, str]], Answer]]  # path -> the answer to its headers
NOT_FOUND: Answer = (404, "application/json", b'{"detail": "Not Found"}')


def route_handler(routes: Routes) -> type[http.server.BaseHTTPRequestHandler]:
    """A handler answering GET and POST on `routes` (its body read and dropped); others 404."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            route = routes.get(self.path)
            status, kind, body = route(dict(self.headers)) if route else NOT_FOUND
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def stub_server(routes: Mapping[str, Reply]) -> Iterator[str]:
    """Serve `routes` (path -> reply; others 404) on 127.0.0.1; yields its base URL."""
    fixed: Routes = {path: (lambda headers, r=reply: (200, *r))
                     for path, reply in routes.items()}
    with loopback_server(route_handler(fixed)) as url:
        yield url
