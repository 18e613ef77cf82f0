"""tokenizer.token-ids with --endpoint: the ids the server itself makes of a prompt holding
ids above 65,535 (`<|im_start|>` is 151644 in Qwen3), against the --model tokenizer's.

vLLM's OpenAI-compatible server answers `POST /tokenize` at its root with the ids of a
`prompt` (`{"tokens": [...], "count": N, "max_model_len": M}`: docs.vllm.ai, "OpenAI-Compatible
Server", Tokenizer API, https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html).
The same ids prove the server loads the same tokenizer and keeps them whole; ids narrowed to 16
bits or taken from another tokenizer differ. A server without /tokenize (MindIE, llama.cpp) is
said in the evidence: the round trip was not made, and nothing about the served ids is passed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from checks.context import Context
from probes import http

ROUND_TRIP_BYTES = 1 << 20
UINT16_LIMIT = 65536


@dataclass(frozen=True)
class RoundTrip:
    """The served ids of the probe prompt, or why there are none."""

    url: str
    ids: tuple[int, ...] | None
    why_not: str = ""


def served_ids(ctx: Context, prompt: str) -> RoundTrip:
    """POST the prompt to the endpoint's /tokenize (bounded, never raises for the network)."""
    from checks.builtin.endpoint import served_models

    target = ctx.endpoint
    assert target is not None
    url = target.api_base.removesuffix("/v1") + "/tokenize"
    models, error = served_models(ctx)
    if error or not models:
        return RoundTrip(url, None, error or "the endpoint lists no model")
    model = target.model if target.model in models else models[0]
    body = {"model": model, "prompt": prompt, "add_special_tokens": False}
    timeout_s = float(ctx.policy.get("endpoint", "timeout_s"))
    try:
        with http.client(timeout_s, api_key=target.api_key) as client, \
                client.stream("POST", url, json=body) as response:
            raw = http.read_capped(response, ROUND_TRIP_BYTES).decode("utf-8", "replace")
            if response.status_code != 200:
                return RoundTrip(url, None, http.status_problem(response.status_code, raw, url))
    except http.BodyTooLarge as exc:
        return RoundTrip(url, None, str(exc))
    except Exception as exc:  # httpx's errors, imported lazily: described, never raised
        return RoundTrip(url, None, http.describe(exc, url))
    return _parsed(url, raw)


def _parsed(url: str, raw: str) -> RoundTrip:
    try:
        tokens = json.loads(raw)["tokens"]
    except (ValueError, KeyError, TypeError):
        return RoundTrip(url, None, f"{url}: the answer has no `tokens` list")
    if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        return RoundTrip(url, None, f"{url}: `tokens` is not a list of integers")
    return RoundTrip(url, tuple(tokens))


def judge_round_trip(local: Sequence[int], trip: RoundTrip) -> tuple[str, str]:
    """(problem or "", evidence line) of the served ids against the local ones (pure)."""
    if trip.ids is None:
        return "", f"served ids not checked: {trip.why_not}"
    largest = max(local, default=0)
    if tuple(local) == trip.ids:
        return "", (f"served ids match the --model tokenizer's: {len(local)} ids up to "
                    f"{largest}, through {trip.url}")
    narrowed = tuple(i % UINT16_LIMIT for i in local)
    how = (" (each id modulo 65536: narrowed to 16 bits)" if trip.ids == narrowed
           and largest >= UINT16_LIMIT else "")
    served_max = max(trip.ids, default=0)
    return (f"the server's ids for the probe prompt differ from the --model tokenizer's{how} "
            f"({len(trip.ids)} ids up to {served_max} served, {len(local)} up to {largest} "
            "here): it loads another tokenizer or changes the ids",
            f"served ids through {trip.url}: {list(trip.ids[:12])}")
