"""Bounded per-key histories for sparklines: memory stays fixed however long the console runs."""

from __future__ import annotations

from collections import deque

DEFAULT_MAXLEN = 300  # 10 minutes at the default 2 s interval


class History:
    """Ring buffers of (t, value) per key ("0/1:temperature_c", "engine:decode_tokens_per_s");
    each source in console/sources.py names the keys it feeds.

    Each key keeps at most `maxlen` points; at most `max_keys` keys are kept (the key
    touched least recently is dropped first), so a churn of chip or process keys cannot
    grow memory without bound. Not thread-safe: feed it from the UI thread.
    """

    def __init__(self, maxlen: int = DEFAULT_MAXLEN, max_keys: int = 1024) -> None:
        if maxlen < 1 or max_keys < 1:
            raise ValueError("History needs maxlen >= 1 and max_keys >= 1")
        self.maxlen = maxlen
        self.max_keys = max_keys
        self._series: dict[str, deque[tuple[float, float]]] = {}

    def add(self, key: str, t: float, value: float | None) -> None:
        """Append one point; None (no reading) is skipped so gaps do not read as zero."""
        if value is None:
            return
        series = self._series.pop(key, None)  # re-insert: dict order = least recently used
        if series is None:
            series = deque(maxlen=self.maxlen)
            while len(self._series) >= self.max_keys:
                del self._series[next(iter(self._series))]
        series.append((t, float(value)))
        self._series[key] = series

    def values(self, key: str) -> list[float]:
        return [v for _, v in self._series.get(key, ())]

    def points(self, key: str) -> list[tuple[float, float]]:
        return list(self._series.get(key, ()))

    def latest(self, key: str) -> float | None:
        series = self._series.get(key)
        return series[-1][1] if series else None

    def keys(self) -> list[str]:
        return list(self._series)

    def __contains__(self, key: object) -> bool:
        return key in self._series

    def __len__(self) -> int:
        """Total number of points held."""
        return sum(len(s) for s in self._series.values())
