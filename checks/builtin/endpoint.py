"""endpoint.health, endpoint.smoke, endpoint.metrics: a serving endpoint before traffic is sent.

The OpenAI-compatible API (OpenAI API reference, "Models" and "Create chat completion" with
`stream`); vLLM's and MindIE's `/metrics` (docs.vllm.ai "Production Metrics"; MindIE Service
"服务监控指标查询接口（普罗格式）"). A server that cannot be reached is `fail` with one line:
the doctor could look, and what it saw is a stopped server. httpx is imported only here, and
only when `--endpoint` is given (the registry skips these checks without it).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from checks.context import Context
from checks.model import Finding, failed, passed, warned
from probes import http, json_limits
from probes.prometheus import parse
from probes.serving_metrics import REQUIRED, ServingReading, read_serving
from probes.sse import EventParser
from probes.textsafe import one_line

if TYPE_CHECKING:
    import httpx

    from probes.http import EndpointTarget

SMOKE_PROMPT = "Reply with the single word: ready"
# The delta fields that carry text: the answer, and the thinking a reasoning parser splits
# off (vLLM's `--reasoning-parser` streams it as `reasoning_content`, newer releases also as
# `reasoning`: docs.vllm.ai "Reasoning Outputs"), so a Qwen3 model's first tokens count.
TEXT_FIELDS = ("content", "reasoning_content", "reasoning")
SMOKE_TOKENS = 8
START_HINT = "start the server (vllm serve ...), or fix --endpoint"
CRASH_HINT = "the server closed the connection mid-reply: did it crash? see its log"

# The checks' rules, by name -> the statuses they give (each check's playbook lists the same
# rules under "What the check does"; tests/checks/test_check_rules.py).
CHECK_RULES: dict[str, dict[str, str]] = {
    "endpoint.health": {
        "unreachable": "fail",
        "no-model-listed": "fail",
        "model-not-served": "fail",
    },
    "endpoint.smoke": {
        "unreachable": "fail",
        "no-model-listed": "fail",
        "reply-too-long": "fail",
        "no-text": "fail",
        "malformed-stream": "fail",
        "slow-first-token": "warn",
    },
    "endpoint.metrics": {
        "no-metrics": "warn",
        "unreachable": "fail",
        "not-serving-metrics": "warn",
        "loaded": "warn",
        "metrics-missing": "warn",
    },
}
UNREACHABLE = ("unreachable",)


def _target(ctx: Context) -> EndpointTarget:
    assert ctx.endpoint is not None  # the registry skips these checks without --endpoint
    return ctx.endpoint


def _client(ctx: Context) -> httpx.Client:
    timeout_s = float(ctx.policy.get("endpoint", "timeout_s"))
    return http.client(timeout_s, api_key=_target(ctx).api_key)


def _models(ctx: Context) -> tuple[list[str], str]:
    """(model ids, "") or ([], why not) — read once per run."""
    def read() -> tuple[list[str], str]:
        target = _target(ctx)
        with _client(ctx) as client:
            fetched = http.get(client, f"{target.api_base}/models", max_bytes=4 << 20)
        if not fetched.ok:
            return [], fetched.error
        try:
            data = json_limits.loads(fetched.text, "/v1/models")["data"]
            return [one_line(str(m["id"])) for m in data], ""
        except (ValueError, KeyError, TypeError):
            return [], f"{target.api_base}/models: not an OpenAI model list"
    return ctx.fact("endpoint.models", read)


def served_models(ctx: Context) -> tuple[list[str], str]:
    """The endpoint's model ids (read once per run), or why none: for other checks."""
    return _models(ctx)


def _remedy(error: str) -> str:
    if "TLS" in error:
        return "trust the server's CA (SSL_CERT_FILE) or use the scheme the server speaks"
    if "HTTP 401" in error or "HTTP 403" in error:
        return "pass the key with --endpoint-api-key-env NAME (the variable holding it)"
    if "broke the HTTP exchange" in error:  # it was up: it answered, then went away
        return CRASH_HINT
    return START_HINT


def endpoint_health(ctx: Context) -> Finding:
    target = _target(ctx)
    models, error = _models(ctx)
    if error:
        return failed(error, _remedy(error), rules=UNREACHABLE)
    if not models:
        return failed(f"{target.api_base}/models lists no model", "load a model into the server",
                      rules=("no-model-listed",))
    evidence = [f"served: {', '.join(models[:10])}"]
    if target.model is not None and target.model not in models:
        return failed(f"{target.api_base} does not serve {target.model!r}",
                      "pass --endpoint-model with a listed name (vllm serve "
                      "--served-model-name sets it)", *evidence, rules=("model-not-served",))
    model = target.model or models[0]
    return passed(f"{target.api_base} answers and serves {model}", *evidence)


# --- smoke ----------------------------------------------------------------------------------


def endpoint_smoke(ctx: Context) -> Finding:
    target = _target(ctx)
    models, error = _models(ctx)
    if error or not models:
        return failed(error or f"{target.api_base}/models lists no model", _remedy(error),
                      rules=UNREACHABLE if error else ("no-model-listed",))
    model = target.model if target.model in models else models[0]
    budget_s = float(ctx.policy.get("endpoint", "ttft_budget_s"))
    url = f"{target.api_base}/chat/completions"
    body = {"model": model, "messages": [{"role": "user", "content": SMOKE_PROMPT}],
            "stream": True, "max_tokens": SMOKE_TOKENS, "temperature": 0}
    try:
        with _client(ctx) as client:
            outcome = _stream(client, url, body)
    except http.BodyTooLarge as exc:
        return failed(str(exc), "the server streams more than a short reply; check it",
                      rules=("reply-too-long",))
    except Exception as exc:
        text = http.describe(exc, url)
        return failed(text, _remedy(text), rules=UNREACHABLE)
    return _judge_smoke(outcome, url, model, budget_s)


def _stream(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """Read one streamed completion: text, TTFT, and every way the stream was malformed."""
    out: dict[str, Any] = {"text": "", "ttft_s": None, "problems": [], "done": False,
                           "finish": None, "status": None, "error": "", "fields": []}
    start = time.perf_counter()
    with client.stream("POST", url, json=body) as response:
        out["status"] = response.status_code
        if response.status_code != 200:
            raw = http.read_capped(response, 64 << 10).decode("utf-8", errors="replace")
            out["error"] = http.status_problem(response.status_code, raw, url)
            return out
        if "text/event-stream" not in response.headers.get("content-type", ""):
            out["problems"].append("the answer is not an event stream "
                                   f"({response.headers.get('content-type', 'no content type')})")
            return out
        parser, size = EventParser(), 0
        for line in http.iter_lines(response, 64 << 10, 2 << 20):
            size += len(line)
            if size > 1 << 20:
                raise http.BodyTooLarge(f"{url}: the stream passed 1 MiB for {SMOKE_TOKENS} "
                                        "tokens")
            event = parser.feed(line)
            if event is not None and _take(event.data, out, start):
                break
        if not out["done"] and parser.pending:
            out["problems"].append("the stream was cut mid-event")
    return out


def _take(data: str, out: dict[str, Any], start: float) -> bool:
    """One event into `out`; True at [DONE]."""
    if data.strip() == "[DONE]":
        out["done"] = True
        return True
    try:
        doc = json_limits.loads(data, "an event")
        choice = doc["choices"][0] if doc.get("choices") else {}
    except (ValueError, KeyError, TypeError, AttributeError):
        out["problems"].append(f"an event is not a chat.completion.chunk: {one_line(data[:80])}")
        return False
    if "error" in doc:
        out["problems"].append(f"error event: {http.error_message(data) or 'no message'}")
        return False
    delta = choice.get("delta") or {}
    for field in TEXT_FIELDS:
        content = delta.get(field) if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            if out["ttft_s"] is None:
                out["ttft_s"] = time.perf_counter() - start
            if field not in out["fields"]:
                out["fields"].append(field)
            out["text"] += content
    out["finish"] = choice.get("finish_reason") or out["finish"]
    return False


def _judge_smoke(outcome: dict[str, Any], url: str, model: str, budget_s: float) -> Finding:
    if outcome["error"]:
        return failed(outcome["error"], _remedy(outcome["error"]), rules=UNREACHABLE)
    ttft = outcome["ttft_s"]
    fields = outcome.get("fields") or []
    evidence = [f"model {model}, {SMOKE_TOKENS} greedy tokens",
                f"reply: {one_line(outcome['text'])[:120]!r}",
                "text arrived in: " + (", ".join(f"delta.{f}" for f in fields) or "nothing")]
    if ttft is not None:
        evidence.append(f"time to first token {ttft * 1000:.0f} ms (budget {budget_s:g} s)")
    problems = list(outcome["problems"])
    if not outcome["done"]:
        problems.append("no data: [DONE] at the end")
    if outcome["finish"] is None:
        problems.append("no finish_reason")
    if not outcome["text"]:
        return failed(f"{url}: the completion returned no text", "read the server's log",
                      *problems, *evidence, rules=("no-text",))
    if problems:
        return failed(f"{url}: the stream is malformed: {problems[0]}",
                      "the client libraries rely on the OpenAI stream format; check the "
                      "server version", *problems, *evidence, rules=("malformed-stream",))
    if ttft is not None and ttft > budget_s:
        return warned(f"first token after {ttft:.1f} s, over the {budget_s:g} s budget",
                      "warm the server up, or look at its queue (endpoint.metrics)", *evidence,
                      rules=("slow-first-token",))
    first = "" if ttft is None else f" ({ttft * 1000:.0f} ms to the first token)"
    kind = "text" if fields == ["content"] else f"text ({', '.join(fields)})"
    return passed(f"a short greedy completion streamed {kind}, well-formed{first}", *evidence)


# --- metrics --------------------------------------------------------------------------------


def endpoint_metrics(ctx: Context) -> Finding:
    target = _target(ctx)
    with _client(ctx) as client:
        fetched = http.get(client, target.metrics_url)
    if fetched.status == 404:
        return warned(f"{target.metrics_url}: HTTP 404 — this server exports no /metrics",
                      "without it neither ascend-console's serving panel nor Prometheus can "
                      "watch load, KV cache and latency; vLLM serves /metrics by default, "
                      "MindIE on its management port with MIES_SERVICE_MONITOR_MODE=1 "
                      "(pass that URL with --endpoint-metrics)", rules=("no-metrics",))
    if not fetched.ok:
        return failed(fetched.error, _remedy(fetched.error), rules=UNREACHABLE)
    reading = read_serving(parse(fetched.text))
    return _judge_metrics(ctx, reading, target.metrics_url)


def _per_engine(reading: ServingReading, logical: str) -> str:
    """`engine 0 48%, engine 1 47%` for a ratio read per engine; "" for one engine."""
    engines = reading.engines.get(logical, ())
    if len(engines) < 2:
        return ""
    return ", ".join(f"engine {e or '?'} {v:.0%}" for e, v in engines)


def _judge_metrics(ctx: Context, reading: ServingReading, url: str) -> Finding:
    evidence = [f"{name} <- {source}" for name, source in sorted(reading.names.items())]
    each = _per_engine(reading, "kv_cache_usage")
    if each:
        evidence.append(f"KV cache in use per engine: {each} (a share per engine: the "
                        "largest is judged, never the sum)")
    missing = [m for m in REQUIRED if m not in reading.names]
    if len(missing) == len(REQUIRED):
        return warned(f"{url} exports none of the serving metrics the console reads",
                      "is this the serving engine's /metrics (not an exporter's)?",
                      rules=("not-serving-metrics",))
    kv = reading.gauges.get("kv_cache_usage")
    waiting = reading.gauges.get("waiting")
    kv_limit = float(ctx.policy.get("endpoint", "kv_cache_usage_warn_ratio"))
    waiting_limit = float(ctx.policy.get("endpoint", "waiting_warn_requests"))
    load = []
    shown_kv = "" if kv is None else f"KV cache {kv:.0%}" + (
        f" on the fullest engine ({each})" if each else "")
    if kv is not None and kv >= kv_limit:
        load.append(f"{shown_kv} in use (warn at {kv_limit:.0%})")
    if waiting is not None and waiting > waiting_limit:
        load.append(f"{waiting:g} requests waiting (warn above {waiting_limit:g})")
    if load:
        return warned(f"{reading.server} is loaded before traffic: " + "; ".join(load),
                      "add capacity or lower --max-num-seqs / request rate before routing more "
                      "traffic here", *evidence, rules=("loaded",))
    if missing:
        return warned(f"{reading.server} /metrics lacks {', '.join(missing)}",
                      "these show as 'not exported' in the console; a newer vLLM renamed some "
                      "(see the playbook)", *evidence, rules=("metrics-missing",))
    summary = f"{reading.server} exports what the console reads"
    if kv is not None:
        summary += f"; {shown_kv}"
    if waiting is not None:
        summary += f", {waiting:g} waiting"
    return passed(summary, *evidence)
