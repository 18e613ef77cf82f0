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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.snapshots import ServingSnapshot
from probes import http
from probes.prometheus import parse
from probes.serving_metrics import Histogram, ServingReading, read_serving

if TYPE_CHECKING:
    import httpx

Clock = Callable[[], float]
NOT_EXPORTED_NOTE = "this server exports no /metrics"
# the start time prometheus_client's process collector exports (client_python docs,
# "Process Collector"); a server without it is judged by its counters alone
START_TIME_METRIC = "process_start_time_seconds"
NOT_EXPORTED_RETRY_S = (10.0, 30.0, 60.0, 300.0)  # after a 404: asked again so rarely


@dataclass(frozen=True, slots=True)
class Scrape:
    """One /metrics scrape: the reading, or why there is none; `answered` is False when no
    HTTP answer came at all; `status` the HTTP status when one did."""

    reading: ServingReading | None
    error: str = ""
    answered: bool = True
    status: int | None = None
    started_at_s: float | None = None  # the server process's start time, where exported


def scrape(http_client: httpx.Client, url: str) -> Scrape:
    """One /metrics scrape, read."""
    fetched = http.get(http_client, url)
    if fetched.status == 404:
        return Scrape(None, f"{url}: HTTP 404 — {NOT_EXPORTED_NOTE}", status=404)
    if not fetched.ok:
        return Scrape(None, fetched.error, fetched.status is not None, fetched.status)
    exposition = parse(fetched.text)
    reading = read_serving(exposition)
    started = [s.value for s in exposition.named(START_TIME_METRIC)]
    if not reading.names:
        return Scrape(None, f"{url}: none of the serving metrics the panel reads is exported",
                      status=fetched.status)
    return Scrape(reading, status=fetched.status, started_at_s=max(started) if started else None)


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
    """Keeps the scrapes of the last `window_s` and turns the newest into a ServingSnapshot.

    A restart is seen when the exported process start time changes or a counter goes down
    (a Prometheus counter only resets when its process restarts: prometheus.io "Metric types",
    Counter). After a 404 (no /metrics at all) the endpoint is asked again only after
    `NOT_EXPORTED_RETRY_S`, growing: the panel says "not exported" once, not every interval.
    """

    def __init__(self, url: str, window_s: float = 30.0) -> None:
        self.url = url
        self.window_s = window_s
        self._readings: deque[tuple[float, ServingReading]] = deque()
        self._started_at_s: float | None = None
        self.restarted_at: float | None = None
        self._not_found = 0  # 404s in a row
        self._next_due = 0.0

    def due(self, now: float) -> bool:
        """Whether to scrape now (False while backing off after a 404)."""
        return now >= self._next_due

    def update(self, scraped: Scrape | ServingReading | None, error: str, taken_at: float,
               duration_s: float) -> ServingSnapshot:
        if not isinstance(scraped, Scrape):  # a reading handed in directly (tests, replays)
            scraped = Scrape(scraped, error)
        self._back_off(scraped.status, taken_at)
        reading = scraped.reading
        if reading is None:
            return ServingSnapshot(taken_at, self.url, "unknown", scraped.error or "no data",
                                   duration_s, answered=scraped.answered,
                                   restarted_at=self.restarted_at)
        if self._restarted(reading, scraped.started_at_s):
            self._readings.clear()  # old counters mean nothing now
            self.restarted_at = taken_at
        self._readings.append((taken_at, reading))
        while len(self._readings) > 2 and taken_at - self._readings[1][0] >= self.window_s:
            self._readings.popleft()
        return self._snapshot(taken_at, duration_s)

    def _back_off(self, status: int | None, now: float) -> None:
        self._not_found = self._not_found + 1 if status == 404 else 0
        if self._not_found:
            steps = NOT_EXPORTED_RETRY_S
            self._next_due = now + steps[min(self._not_found, len(steps)) - 1]
        else:
            self._next_due = 0.0

    def _restarted(self, reading: ServingReading, started_at_s: float | None) -> bool:
        before, self._started_at_s = self._started_at_s, started_at_s or self._started_at_s
        if before is not None and started_at_s is not None and started_at_s != before:
            return True
        return bool(self._readings) and _went_down(reading, self._readings[-1][1])

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
            read_from=tuple(sorted(reading.names.items())), restarted_at=self.restarted_at)

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
    scraped = scrape(http_client, tracker.url)
    return tracker.update(scraped, "", taken_at, time.monotonic() - started)
