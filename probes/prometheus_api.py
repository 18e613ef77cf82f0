"""A bounded client of the Prometheus HTTP API: instant (`/api/v1/query`) and range
(`/api/v1/query_range`) queries.

The API and its JSON shapes are Prometheus's own (https://prometheus.io/docs/prometheus/latest/
querying/api/): `{"status": "success", "data": {"resultType": "vector"|"matrix", "result":
[...]}}`, sample values as strings ("NaN", "+Inf" included), `timeout` a query parameter.

Every request has a connect and a read timeout and a total deadline, reads at most
`max_bytes`, refuses JSON nested deeper than `max_depth` before decoding it, and keeps at most
`max_series` series (the answer says when it kept fewer), so a million series or a server that
drips bytes never exhausts memory or time. Redirects are not followed: the error names where
the server pointed. Every failure is a `PromAPIError` with one line naming the URL.
"""

from __future__ import annotations

import json
import math
import re
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from probes import http
from probes.textsafe import one_line

if TYPE_CHECKING:
    import httpx

Labels = tuple[tuple[str, str], ...]  # sorted by label name
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


class PromAPIError(Exception):
    """One line: the URL and what went wrong."""


@dataclass(frozen=True)
class Limits:
    connect_s: float = 3.0
    read_s: float = 10.0
    deadline_s: float = 15.0  # the whole request, however slowly the bytes come
    max_bytes: int = 32 * 1024 * 1024
    max_depth: int = 16  # a matrix answer nests 5 deep
    max_series: int = 50_000


@dataclass(frozen=True)
class Series:
    """One series of an instant answer; `value` None where Prometheus said NaN or ±Inf."""

    labels: Labels
    value: float | None
    timestamp_s: float

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


@dataclass(frozen=True)
class RangeSeries:
    labels: Labels
    points: tuple[tuple[float, float | None], ...]  # (unix seconds, value or None)

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


@dataclass(frozen=True)
class Answer:
    series: tuple[Series, ...]
    dropped: int = 0  # series past max_series, not kept
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class RangeAnswer:
    series: tuple[RangeSeries, ...]
    dropped: int = 0
    warnings: tuple[str, ...] = ()


def base_url(url: str, what: str = "--prometheus") -> str:
    """The server's root (`http://prom:9090`, a path prefix kept); raises PromAPIError."""
    try:
        checked = http.check_url(url, what)
    except http.EndpointURLError as exc:
        raise PromAPIError(str(exc)) from None
    return checked.removesuffix("/api/v1")


def client(limits: Limits = Limits(), transport: httpx.BaseTransport | None = None) -> httpx.Client:
    import httpx

    timeout = httpx.Timeout(limits.read_s, connect=limits.connect_s)
    return http.client(timeout, transport)


def instant(http_client: httpx.Client, base: str, query: str, at_s: float | None = None,
            limits: Limits = Limits()) -> Answer:
    """`query` evaluated at `at_s` (None: the server's now); a vector or scalar answer."""
    params = {"query": query, "timeout": f"{limits.deadline_s:.3f}"}
    if at_s is not None:
        params["time"] = f"{at_s:.3f}"
    url = base + "/api/v1/query"
    data, warnings = _request(http_client, url, params, limits)
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, list):
        return Answer((_instant_series({"metric": {}, "value": result}, url),))
    if kind != "vector" or not isinstance(result, list):
        raise PromAPIError(f"{url}: expected a vector answer, got {one_line(str(kind))[:40]}")
    kept = tuple(_instant_series(item, url) for item in result[: limits.max_series])
    return Answer(kept, max(0, len(result) - limits.max_series), warnings)


def range_query(http_client: httpx.Client, base: str, query: str, start_s: float, end_s: float,
                step_s: float, limits: Limits = Limits()) -> RangeAnswer:
    """`query` from `start_s` to `end_s` every `step_s` seconds; a matrix answer."""
    if step_s <= 0 or end_s < start_s:
        raise PromAPIError(f"{base}/api/v1/query_range: need start <= end and a positive step")
    params = {"query": query, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}",
              "step": f"{step_s:g}", "timeout": f"{limits.deadline_s:.3f}"}
    url = base + "/api/v1/query_range"
    data, warnings = _request(http_client, url, params, limits)
    result = data.get("result")
    if data.get("resultType") != "matrix" or not isinstance(result, list):
        raise PromAPIError(f"{url}: expected a matrix answer")
    kept = tuple(_range_series(item, url) for item in result[: limits.max_series])
    return RangeAnswer(kept, max(0, len(result) - limits.max_series), warnings)


def _request(http_client: httpx.Client, url: str, params: Mapping[str, str],
             limits: Limits) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The answer's `data` object and its warnings."""
    import httpx

    try:
        body, status, location = _read(http_client, url, params, limits)
    except httpx.HTTPError as exc:
        raise PromAPIError(http.describe(exc, url)) from None
    if 300 <= status < 400:
        where = f" to {one_line(str(location))[:160]}" if location else ""
        raise PromAPIError(f"{url}: HTTP {status}, redirected{where}; redirects are not "
                           "followed: give --prometheus the final URL")
    try:
        doc = _decode(body, url, limits)
    except PromAPIError:
        if status < 400:
            raise
        raise PromAPIError(f"{url}: HTTP {status} (not a Prometheus error answer)") from None
    if status >= 400 or doc.get("status") != "success":
        said, kind = str(doc.get("error") or ""), str(doc.get("errorType") or "")
        detail = one_line(f"{kind}: {said}" if kind else said)[:200] or "no error message"
        raise PromAPIError(f"{url}: HTTP {status}, query failed ({detail})")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise PromAPIError(f"{url}: the answer has no data object; is this Prometheus?")
    return data, _warnings(doc)


def _read(http_client: httpx.Client, url: str, params: Mapping[str, str],
          limits: Limits) -> tuple[bytes, int, str]:
    started = time.monotonic()
    # gzip only: the one encoding _inflate unpacks under the byte cap
    with http_client.stream("GET", url, params=params,
                            headers={"Accept-Encoding": "gzip"}) as response:
        if 300 <= response.status_code < 400:
            return b"", response.status_code, response.headers.get("location", "")
        chunks, size = [], 0
        for chunk in response.iter_raw():  # raw: a compressed body is capped as sent
            size += len(chunk)
            if size > limits.max_bytes:
                raise PromAPIError(f"{url}: the answer is larger than "
                                   f"{_size(limits.max_bytes)}; not read (narrow the query)")
            if time.monotonic() - started > limits.deadline_s:
                raise PromAPIError(f"{url}: no complete answer within {limits.deadline_s:.3g} s")
            chunks.append(chunk)
        return _inflate(b"".join(chunks), response, url, limits), response.status_code, ""


def _inflate(raw: bytes, response: httpx.Response, url: str, limits: Limits) -> bytes:
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise PromAPIError(f"{url}: unexpected content encoding {one_line(encoding)[:40]}")

    inflater = zlib.decompressobj(wbits=31)
    try:
        body = inflater.decompress(raw, limits.max_bytes + 1)
    except zlib.error:
        raise PromAPIError(f"{url}: the gzip answer is corrupt") from None
    if len(body) > limits.max_bytes:
        raise PromAPIError(f"{url}: the answer unpacks to more than "
                           f"{_size(limits.max_bytes)}; not read")
    return body


def _size(n_bytes: int) -> str:
    mib = n_bytes / (1024 * 1024)
    return f"{mib:g} MiB" if mib >= 1 else f"{n_bytes / 1024:g} KiB"


def nests_within(body: bytes, max_depth: int) -> bool:
    """Whether arrays and objects in `body` nest at most `max_depth` deep (brackets inside
    strings not counted): strip innermost pairs, one level a round, at C speed."""
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    for _ in range(max_depth):
        if not brackets:
            return True
        brackets = _INNERMOST.sub(b"", brackets)
    return not brackets


def _decode(body: bytes, url: str, limits: Limits) -> dict[str, Any]:
    if not nests_within(body, limits.max_depth):
        raise PromAPIError(f"{url}: the answer nests deeper than {limits.max_depth} levels; "
                           "not a Prometheus answer")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        head = one_line(body[:80].decode("utf-8", errors="replace"))
        raise PromAPIError(f"{url}: the answer is not JSON ({head!r}); is this the Prometheus "
                           "server's root URL?") from None
    if not isinstance(doc, dict):
        raise PromAPIError(f"{url}: the answer is not a JSON object")
    return doc


def _number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _labels(item: Any, url: str) -> Labels:
    metric = item.get("metric") if isinstance(item, dict) else None
    if not isinstance(metric, dict):
        raise PromAPIError(f"{url}: a series without labels (\"metric\")")
    return tuple(sorted((str(k), str(v)) for k, v in metric.items()))


def _pair(pair: Any, url: str) -> tuple[float, float | None]:
    if not isinstance(pair, list) or len(pair) != 2:
        raise PromAPIError(f"{url}: a sample is not [time, \"value\"]")
    stamp = _number(pair[0])
    if stamp is None:
        raise PromAPIError(f"{url}: a sample time is not a number")
    return stamp, _number(pair[1])


def _instant_series(item: Any, url: str) -> Series:
    stamp, value = _pair(item.get("value") if isinstance(item, dict) else None, url)
    return Series(_labels(item, url), value, stamp)


def _range_series(item: Any, url: str) -> RangeSeries:
    values = item.get("values") if isinstance(item, dict) else None
    if not isinstance(values, list):
        raise PromAPIError(f"{url}: a range series without \"values\"")
    return RangeSeries(_labels(item, url), tuple(_pair(p, url) for p in values))


def _warnings(data: Mapping[str, Any]) -> tuple[str, ...]:
    raw = data.get("warnings")
    return tuple(one_line(str(w))[:200] for w in raw[:5]) if isinstance(raw, list) else ()


def host_of(instance: str) -> str:
    """`10.0.0.5:8082` -> `10.0.0.5`, `[fe80::1]:9100` -> `fe80::1`; other text as it is."""
    try:
        return urlsplit("//" + instance).hostname or instance
    except ValueError:  # brackets that are no IPv6 address: keep the text
        return instance
