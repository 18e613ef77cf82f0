"""A small OpenAI-compatible server on loopback for the console's tests: `/v1/models`, a
streamed `/v1/chat/completions` (the recorded llama.cpp stream) and `/metrics` (a rendered
vLLM exposition), on a port that stays the same across `stop()` and `start()` so that a test can
make the endpoint come, go and come back."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path
from typing import Any

SERVING = Path(__file__).resolve().parents[1] / "corpus" / "serving"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeOpenAI:
    """`start()`/`stop()` any number of times; `started_at` is the `process_start_time_seconds`
    its /metrics reports (change it to stand for a restarted server)."""

    def __init__(self, port: int | None = None, metrics: bool = True,
                 crash_mid_reply: bool = False) -> None:
        self.port = port or free_port()
        self.metrics = metrics
        self.crash_mid_reply = crash_mid_reply  # promise a whole reply, send part, hang up
        self.started_at = 1_700_000_000.0
        self.chats = 0
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self) -> FakeOpenAI:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def metrics_text(self) -> str:
        text = (SERVING / "vllm_v1_names_a.prom").read_text()
        return text + ("# TYPE process_start_time_seconds gauge\n"
                       f"process_start_time_seconds {self.started_at}\n")


class _Handler(http.server.BaseHTTPRequestHandler):
    server_owner: FakeOpenAI
    protocol_version = "HTTP/1.0"  # one request a connection: a stopped server is gone

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        owner = self.server_owner
        if self.path == "/v1/models":
            self._send(200, (SERVING / "llamacpp_models.json").read_bytes(), "application/json")
        elif self.path == "/metrics" and owner.metrics:
            self._send(200, owner.metrics_text().encode(), "text/plain; version=0.0.4")
        else:
            self._send(404, b"not found", "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        if self.path != "/v1/chat/completions":
            self._send(404, b"not found", "text/plain")
            return
        self.server_owner.chats += 1
        body = (SERVING / "llamacpp_chat_stream.sse").read_bytes()
        if not self.server_owner.crash_mid_reply:
            self._send(200, body, "text/event-stream")
            return
        # as a server that dies mid-reply: its length promised, a third of it sent
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 3])
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
