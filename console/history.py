"""Bounded per-key histories for sparklines: memory stays fixed however long the console runs."""

from __future__ import annotations

from collections import deque

from console.snapshots import EngineSnapshot, HostSnapshot, NpuSnapshot

DEFAULT_MAXLEN = 300  # 10 minutes at the default 2 s interval

# per-chip series fed by add_npu(): key "npu_id/chip_id:<metric>", e.g. "0/1:temperature_c"
CHIP_METRICS = (
    "temperature_c",
    "power_w",
    "aicore_percent",
    "hbm_used_mb",
    "hbm_bandwidth_percent",
)
ENGINE_METRICS = ("ttft_s", "prefill_tokens_per_s", "decode_tokens_per_s", "kv_tokens_used")
HOST_METRICS = ("cpu_percent", "mem_used_mb")


class History:
    """Ring buffers of (t, value) per key ("0/1:temperature_c", "engine:decode_tokens_per_s").

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



def chip_series_key(chip_key: str, metric: str) -> str:
    return f"{chip_key}:{metric}"


def add_npu(history: History, snapshot: NpuSnapshot) -> None:
    """Every chip's CHIP_METRICS at the snapshot's time; a failed snapshot adds nothing."""
    if not snapshot.ok:
        return
    for chip in snapshot.chips:
        for metric in CHIP_METRICS:
            history.add(chip_series_key(chip.key, metric), snapshot.taken_at,
                        getattr(chip, metric))


def add_engine(history: History, snapshot: EngineSnapshot) -> None:
    """Keys "engine:<metric>" for ENGINE_METRICS."""
    for metric in ENGINE_METRICS:
        history.add(f"engine:{metric}", snapshot.taken_at, getattr(snapshot, metric))


def add_host(history: History, snapshot: HostSnapshot) -> None:
    """Keys "host:<metric>" for HOST_METRICS."""
    for metric in HOST_METRICS:
        history.add(f"host:{metric}", snapshot.taken_at, getattr(snapshot, metric))
