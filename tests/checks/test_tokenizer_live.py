"""tokenizer.token-ids with --endpoint: the ids a loopback stub server returns from
/tokenize against the --model tokenizer's, for a prompt holding ids above 65,535."""

from __future__ import annotations

import http.server
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from checks.builtin.tokenizer import PROBE_PLAIN
from checks.builtin.tokenizer_ids import tokenizer_token_ids
from checks.builtin.tokenizer_load import load
from checks.context import Context
from checks.policy import load_policy
from probes.http import EndpointTarget
from probes.live import LiveHost
from tests.loopback_fixtures import loopback_servers
from tests.tokenizer_fixtures import write_qwen3_model_dir

Tokenize = Callable[[dict[str, Any]], tuple[int, bytes]]  # request body -> status, body
MODELS = json.dumps({"object": "list", "data": [{"id": "qwen3", "object": "model"}]}).encode()


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tokenizers")
    return write_qwen3_model_dir(tmp_path_factory.mktemp("q") / "m")


@pytest.fixture
def stub() -> Iterator[Callable[[Tokenize], str]]:
    with loopback_servers() as serve:
        yield lambda tokenize: serve(_handler(tokenize))


def _handler(tokenize: Tokenize) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._send(200, MODELS) if self.path == "/v1/models" else self._send(404, b"{}")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            self._send(*tokenize(body)) if self.path == "/tokenize" else \
                self._send(404, b'{"detail": "Not Found"}')

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def ctx(model: Path, url: str) -> Context:
    return Context(LiveHost(root="/", env={}), load_policy(None), model_dir=model,
                   endpoint=EndpointTarget.of(url))


def local_ids(model: Path) -> list[int]:
    return load(model, LiveHost(root="/", env={})).encode(PROBE_PLAIN)


def test_the_same_served_ids_pass_and_say_so(model: Path, stub: Any) -> None:
    ids = local_ids(model)
    assert max(ids) > 65535  # the probe holds <|im_start|>
    asked: list[dict[str, Any]] = []

    def tokenize(body: dict[str, Any]) -> tuple[int, bytes]:
        asked.append(body)
        return 200, json.dumps({"count": len(ids), "max_model_len": 4096,
                                "tokens": ids}).encode()

    finding = tokenizer_token_ids(ctx(model, stub(tokenize)))
    assert finding.status == "pass", finding
    assert asked == [{"model": "qwen3", "prompt": PROBE_PLAIN, "add_special_tokens": False}]
    assert any(e.startswith(f"served ids match the --model tokenizer's: {len(ids)} ids up to "
                            f"{max(ids)}") for e in finding.evidence)


def test_ids_narrowed_by_the_server_fail(model: Path, stub: Any) -> None:
    ids = [i % 65536 for i in local_ids(model)]
    url = stub(lambda body: (200, json.dumps({"tokens": ids}).encode()))
    finding = tokenizer_token_ids(ctx(model, url))
    assert finding.status == "fail" and finding.rules == ("served-ids-differ",)
    assert "each id modulo 65536: narrowed to 16 bits" in finding.summary


def test_a_server_without_tokenize_is_said_not_passed(model: Path, stub: Any) -> None:
    url = stub(lambda body: (404, b'{"detail": "Not Found"}'))
    finding = tokenizer_token_ids(ctx(model, url))
    assert finding.status == "pass"  # the local judgement stands; the served ids are unknown
    assert any(e.startswith("served ids not checked: ") and "404" in e
               for e in finding.evidence)
