"""endpoint.health / endpoint.smoke / endpoint.metrics against a real loopback HTTP server that
answers with recorded bodies (tests/corpus/serving; provenance in its README)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from checks.builtin.endpoint import endpoint_health, endpoint_metrics, endpoint_smoke
from checks.context import Context
from checks.policy import load_policy
from probes.http import EndpointTarget, Secret
from probes.live import LiveHost
from tests.endpoint_fixtures import Answer as Reply
from tests.endpoint_fixtures import Routes, route_handler
from tests.loopback_fixtures import loopback_servers

SERVING = Path(__file__).resolve().parents[1] / "corpus" / "serving"
STREAM = (SERVING / "llamacpp_chat_stream.sse").read_bytes()
MODELS = (SERVING / "llamacpp_models.json").read_bytes()
MODEL_ID = json.loads(MODELS)["data"][0]["id"]



def ok_json(body: bytes) -> Callable[[dict[str, str]], Reply]:
    return lambda headers: (200, "application/json", body)


def sse(body: bytes) -> Callable[[dict[str, str]], Reply]:
    return lambda headers: (200, "text/event-stream", body)


def text(body: bytes) -> Callable[[dict[str, str]], Reply]:
    return lambda headers: (200, "text/plain; version=0.0.4", body)


@pytest.fixture
def server() -> Iterator[Callable[[Routes], str]]:
    with loopback_servers() as serve:
        yield lambda routes: serve(route_handler(routes))


def ctx(url: str, model: str | None = None, key: Secret | None = None) -> Context:
    return Context(LiveHost(), load_policy(), endpoint=EndpointTarget.of(url, model,
                                                                         api_key=key))


def vllm_routes(metrics: bytes) -> Routes:
    return {"/v1/models": ok_json(MODELS), "/v1/chat/completions": sse(STREAM),
            "/metrics": text(metrics)}


def test_a_healthy_vllm_like_server_passes(server: Callable[[Routes], str]) -> None:
    a = (SERVING / "vllm_v1_names_a.prom").read_bytes()
    url = server(vllm_routes(a))
    context = ctx(url)
    health, smoke, metrics = (endpoint_health(context), endpoint_smoke(context),
                              endpoint_metrics(context))
    assert health.status == "pass" and MODEL_ID in health.summary
    assert smoke.status == "pass" and "well-formed" in smoke.summary
    assert metrics.status == "pass" and "vLLM exports what the console reads" in metrics.summary
    assert health.rules == smoke.rules == metrics.rules == ()
    assert any("kv_cache_usage <- vllm:kv_cache_usage_perc" in e for e in metrics.evidence)


def test_the_named_model_must_be_served(server: Callable[[Routes], str]) -> None:
    url = server({"/v1/models": ok_json(MODELS)})
    finding = endpoint_health(ctx(url, "qwen3-30b-a3b"))
    assert finding.status == "fail" and "does not serve 'qwen3-30b-a3b'" in finding.summary
    assert finding.rules == ("model-not-served",)


def test_a_server_without_a_model_fails(server: Callable[[Routes], str]) -> None:
    context = ctx(server({"/v1/models": ok_json(b'{"object": "list", "data": []}')}))
    for check in (endpoint_health, endpoint_smoke):
        finding = check(context)
        assert finding.status == "fail" and "lists no model" in finding.summary
        assert finding.rules == ("no-model-listed",)


def test_auth_is_explained_and_the_key_is_sent(server: Callable[[Routes], str]) -> None:
    def models(headers: dict[str, str]) -> Reply:
        if headers.get("Authorization") != "Bearer sk-test":
            return 401, "application/json", b'{"error": {"message": "Unauthorized"}}'
        return 200, "application/json", MODELS

    url = server({"/v1/models": models})
    refused = endpoint_health(ctx(url))
    assert refused.status == "fail" and "HTTP 401" in refused.summary
    assert refused.rules == ("unreachable",)
    assert "--endpoint-api-key-env" in refused.remedy
    assert endpoint_health(ctx(url, key=Secret("sk-test"))).status == "pass"


def test_a_loaded_server_and_old_names_warn(server: Callable[[Routes], str]) -> None:
    b = (SERVING / "vllm_v1_names_b.prom").read_bytes()  # 2 waiting
    finding = endpoint_metrics(ctx(server(vllm_routes(b))))
    assert finding.status == "warn" and "2 requests waiting" in finding.summary
    assert finding.rules == ("loaded",)
    mindie = (SERVING / "mindie_a.prom").read_bytes()
    finding = endpoint_metrics(ctx(server(vllm_routes(mindie))))
    assert finding.status == "pass" and finding.summary.startswith("MindIE")


def test_no_metrics_is_a_warn_saying_so(server: Callable[[Routes], str]) -> None:
    url = server({"/v1/models": ok_json(MODELS)})
    finding = endpoint_metrics(ctx(url))
    assert finding.status == "warn" and "exports no /metrics" in finding.summary
    assert finding.rules == ("no-metrics",)


def test_metrics_of_another_exporter_or_with_gaps_warn(server: Callable[[Routes], str]) -> None:
    other = b"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n"
    finding = endpoint_metrics(ctx(server(vllm_routes(other))))
    assert finding.status == "warn" and finding.rules == ("not-serving-metrics",)
    partial = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"
    finding = endpoint_metrics(ctx(server(vllm_routes(partial))))
    assert finding.status == "warn" and "lacks" in finding.summary
    assert finding.rules == ("metrics-missing",)


def test_a_malformed_or_cut_stream_fails_the_smoke(server: Callable[[Routes], str]) -> None:
    cut = STREAM[: STREAM.rindex(b"data: {") + 30]
    finding = endpoint_smoke(ctx(server({"/v1/models": ok_json(MODELS),
                                         "/v1/chat/completions": sse(cut)})))
    assert finding.status == "fail" and "malformed" in finding.summary
    assert finding.rules == ("malformed-stream",)
    assert any("cut mid-event" in e for e in finding.evidence)
    error = b'data: {"error": {"message": "engine dead", "code": 500}}\n\n'
    finding = endpoint_smoke(ctx(server({"/v1/models": ok_json(MODELS),
                                         "/v1/chat/completions": sse(error)})))
    assert finding.status == "fail" and "no text" in finding.summary
    assert finding.rules == ("no-text",)


def test_a_reply_past_the_stream_cap_fails(server: Callable[[Routes], str]) -> None:
    chunk = b'data: {"choices": [{"delta": {"content": "' + b"x" * 4000 + b'"}}]}\n\n'
    url = server({"/v1/models": ok_json(MODELS), "/v1/chat/completions": sse(chunk * 300)})
    finding = endpoint_smoke(ctx(url))
    assert finding.status == "fail" and "1 MiB" in finding.summary
    assert finding.rules == ("reply-too-long",)


def test_an_over_budget_first_token_warns(server: Callable[[Routes], str],
                                          tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("endpoint:\n  ttft_budget_s: 0.0\n")
    url = server({"/v1/models": ok_json(MODELS), "/v1/chat/completions": sse(STREAM)})
    context = Context(LiveHost(), load_policy(policy), endpoint=EndpointTarget.of(url))
    finding = endpoint_smoke(context)
    assert finding.status == "warn" and "over the 0 s budget" in finding.summary
    assert finding.rules == ("slow-first-token",)


def test_a_stopped_server_fails_each_check_with_one_line() -> None:
    context = ctx("http://127.0.0.1:9/v1")
    for check in (endpoint_health, endpoint_smoke, endpoint_metrics):
        finding = check(context)
        assert finding.status == "fail" and "connection refused" in finding.summary
        assert finding.rules == ("unreachable",)
        assert "\n" not in finding.summary


def _chunks(*deltas: dict[str, str]) -> bytes:
    """An OpenAI chat stream of `deltas`, then a finish_reason and [DONE]."""
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return body + b"data: [DONE]\n\n"


@pytest.mark.parametrize(("deltas", "arrived"), [
    ([{"role": "assistant", "content": ""}, {"reasoning_content": "Okay, the user"},
      {"reasoning_content": " wants one word"}], "reasoning_content"),
    ([{"reasoning": "Okay"}, {"content": "ready"}], "reasoning, content"),
])
def test_a_reasoning_model_behind_a_reasoning_parser_passes(
        server: Callable[[Routes], str], deltas: list[dict[str, str]], arrived: str) -> None:
    url = server({"/v1/models": ok_json(MODELS), "/v1/chat/completions": sse(_chunks(*deltas))})
    finding = endpoint_smoke(ctx(url))
    assert finding.status == "pass", finding.summary
    assert f"streamed text ({arrived}), well-formed" in finding.summary
    assert "text arrived in: " + ", ".join(f"delta.{f}" for f in arrived.split(", ")) \
        in finding.evidence
    assert finding.rules == ()


def test_kv_cache_of_two_engines_is_the_fullest_never_the_sum(
        server: Callable[[Routes], str]) -> None:
    one = (SERVING / "vllm_v1_names_a.prom").read_text()
    line = 'vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-30B-A3B"} 0.21'
    two = one.replace(line, line.replace("0.21", "0.48") + "\n" +
                      line.replace('"0"', '"1"').replace("0.21", "0.47"))
    assert two != one
    finding = endpoint_metrics(ctx(server(vllm_routes(two.encode()))))
    assert "95%" not in finding.summary
    assert "KV cache 48% on the fullest engine (engine 0 48%, engine 1 47%)" in finding.summary
    assert any(e.startswith("KV cache in use per engine: engine 0 48%, engine 1 47%")
               for e in finding.evidence)
    assert finding.status == "pass" and finding.rules == ()  # 48% is under the 90% warning
