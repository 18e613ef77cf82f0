"""The serving panel's source: scrape an endpoint's /metrics, turn scrapes into numbers.

Gauges are shown as scraped. Token rates are counter deltas over time; TTFT and inter-token
latency quantiles come from the histogram buckets' deltas (Prometheus' histogram_quantile:
linear interpolation inside the bucket that holds the rank), both over the scrapes of the
last `window_s`. A counter that went down (a restarted server) starts the window again.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.snapshots import ServingSnapshot
from probes import http
from probes.prometheus import parse
from probes.serving_metrics import Histogram, ServingReading, read_serving

if TYPE_CHECKING:
    import httpx

Clock = Callable[[], float]
NOT_EXPORTED_NOTE = "this server exports no /metrics"


def scrape(http_client: httpx.Client, url: str) -> tuple[ServingReading | None, str]:
    """One /metrics scrape, read; or (None, why)."""
    fetched = http.get(http_client, url)
    if fetched.status == 404:
        return None, f"{url}: HTTP 404 — {NOT_EXPORTED_NOTE}"
    if not fetched.ok:
        return None, fetched.error
    reading = read_serving(parse(fetched.text))
    if not reading.names:
        return None, f"{url}: none of the serving metrics the panel reads is exported"
    return reading, ""


def quantile(q: float, buckets: tuple[tuple[float, float], ...]) -> float | None:
    """The q-quantile of cumulative (le, count) buckets; None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound  # the +Inf bucket: the highest finite bound is all we know
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


def histogram_delta(new: Histogram, old: Histogram) -> tuple[tuple[float, float], ...] | None:
    """Bucket counts observed between two scrapes; None when the buckets differ or reset."""
    old_counts = dict(old.buckets)
    if set(old_counts) != {b for b, _ in new.buckets}:
        return None
    delta = tuple((bound, count - old_counts[bound]) for bound, count in new.buckets)
    return None if any(c < 0 for _, c in delta) else delta


class ServingTracker:
    """Keeps the scrapes of the last `window_s` and turns the newest into a ServingSnapshot."""

    def __init__(self, url: str, window_s: float = 30.0) -> None:
        self.url = url
        self.window_s = window_s
        self._readings: deque[tuple[float, ServingReading]] = deque()

    def update(self, reading: ServingReading | None, error: str, taken_at: float,
               duration_s: float) -> ServingSnapshot:
        if reading is None:
            return ServingSnapshot(taken_at, self.url, "unknown", error or "no data", duration_s)
        if self._readings and _went_down(reading, self._readings[-1][1]):
            self._readings.clear()  # the server restarted: old counters mean nothing now
        self._readings.append((taken_at, reading))
        while len(self._readings) > 2 and taken_at - self._readings[1][0] >= self.window_s:
            self._readings.popleft()
        return self._snapshot(taken_at, duration_s)

    def _snapshot(self, taken_at: float, duration_s: float) -> ServingSnapshot:
        first_t, first = self._readings[0]
        reading = self._readings[-1][1]
        span = taken_at - first_t if len(self._readings) > 1 else None
        g, c = reading.gauges, reading.counters
        return ServingSnapshot(
            taken_at, self.url, reading.server, None, duration_s,
            running=g.get("running"), waiting=g.get("waiting"),
            kv_cache_usage=g.get("kv_cache_usage"),
            ttft_p50_s=self._q(0.5, "ttft", reading, first, span),
            ttft_p95_s=self._q(0.95, "ttft", reading, first, span),
            itl_p50_s=self._q(0.5, "itl", reading, first, span),
            itl_p95_s=self._q(0.95, "itl", reading, first, span),
            prompt_tokens_per_s=_rate("prompt_tokens", reading, first, span),
            generation_tokens_per_s=_rate("generation_tokens", reading, first, span),
            preemptions_total=c.get("preemptions"),
            preemptions_in_window=_delta("preemptions", reading, first, span),
            aborted_total=c.get("aborted_requests"),
            aborted_in_window=_delta("aborted_requests", reading, first, span),
            failed_total=c.get("failed_requests"),
            failed_in_window=_delta("failed_requests", reading, first, span),
            window_s=span, not_exported=reading.missing,
            read_from=tuple(sorted(reading.names.items())))

    @staticmethod
    def _q(q: float, name: str, new: ServingReading, old: ServingReading,
           span: float | None) -> float | None:
        if span is None or name not in new.histograms or name not in old.histograms:
            return None
        delta = histogram_delta(new.histograms[name], old.histograms[name])
        return None if delta is None else quantile(q, delta)


def _delta(name: str, new: ServingReading, old: ServingReading,
           span: float | None) -> float | None:
    if span is None or name not in new.counters or name not in old.counters:
        return None
    return new.counters[name] - old.counters[name]


def _rate(name: str, new: ServingReading, old: ServingReading, span: float | None) -> float | None:
    delta = _delta(name, new, old, span)
    return None if delta is None or not span else delta / span


def _went_down(new: ServingReading, old: ServingReading) -> bool:
    return any(new.counters[k] < v for k, v in old.counters.items() if k in new.counters)


def sample(http_client: httpx.Client, tracker: ServingTracker,
           clock: Clock = time.time) -> ServingSnapshot:
    """Scrape once and update the tracker (meant for a worker thread)."""
    started, taken_at = time.monotonic(), clock()
    reading, error = scrape(http_client, tracker.url)
    return tracker.update(reading, error, taken_at, time.monotonic() - started)
