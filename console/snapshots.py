"""Immutable snapshots the console's workers hand to the UI (nvitop-style: swap, never mutate).

Every snapshot carries `taken_at` (seconds since the epoch, `time.time()`). Nothing here
imports textual or torch: the app, the recorder, the alert rules and the benchmarks share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from engine.config import ModelConfig
    from engine.generate import EngineStats

AlertLevel = Literal["warn", "fail"]


def chip_key(npu_id: int, chip_id: int | None, source: str = "") -> str:
    """The history key of one chip: "npu_id/chip_id" ("3/-" when the chip id is unknown);
    chips read from an NPU-Exporter are "HOST#id" (the exporter's logic id)."""
    if source:
        return f"{source}#{npu_id}"
    return f"{npu_id}/{'-' if chip_id is None else chip_id}"


@dataclass(frozen=True, slots=True)
class ChipSample:
    """One chip as `npu-smi info` (plus `-t usages`) showed it at one moment."""

    npu_id: int
    chip_id: int | None
    name: str | None
    health: str | None  # as printed: OK, Warning, Alarm, Critical, ...
    temperature_c: int | None
    power_w: float | None
    aicore_percent: int | None
    hbm_used_mb: int | None
    hbm_total_mb: int | None
    # `HBM Bandwidth Usage Rate(%)` from `npu-smi info -t usages`; None when not sampled
    hbm_bandwidth_percent: float | None
    key: str  # "npu_id/chip_id", see chip_key()
    # the chip's own DDR (`Memory-Usage(MB)`): the only memory figure a 310P shows
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    # `npu-smi info -t health` error codes (checks.health_codes): () for a chip whose health
    # is OK (no alarm is active), the codes read for one that is not; None where nothing was
    # read (an NPU-Exporter, a recording made before they were sampled)
    fault_codes: tuple[str, ...] | None = None
    codes_unread: str | None = None  # why they could not be read for a chip that is not OK

    @property
    def hbm_used_percent(self) -> float | None:
        if self.hbm_used_mb is None or not self.hbm_total_mb:
            return None
        return 100.0 * self.hbm_used_mb / self.hbm_total_mb


@dataclass(frozen=True, slots=True)
class ProcessSample:
    npu_id: int
    chip_id: int | None
    pid: int
    name: str
    memory_mb: int | None


@dataclass(frozen=True, slots=True)
class NpuSnapshot:
    """All chips at one moment, or why there is no data (`error`)."""

    taken_at: float
    chips: tuple[ChipSample, ...]
    processes: tuple[ProcessSample, ...]
    processes_known: bool  # False when npu-smi printed no process section
    # why there is no data: "npu-smi not found on PATH", npu-smi's error text,
    # "timed out after 5 s"; None when the table was read
    error: str | None
    sample_duration_s: float
    source: str = ""  # "" for this machine's npu-smi, else the NPU-Exporter's host:port

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def where(self) -> str:
        return self.source or "this machine"


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """CPU, memory and the log directory's file system, from psutil."""

    taken_at: float
    cpu_percent: float | None  # None: the first sample, before there is an interval to average
    mem_used_mb: float
    mem_total_mb: float
    log_dir: str | None  # the directory whose file system was measured (may be a parent)
    log_disk_free_mb: float | None
    log_disk_total_mb: float | None
    cpu_cores_percent: tuple[float, ...] = ()  # per logical core, same interval


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """The in-process engine's numbers after its latest generation."""

    taken_at: float
    device: str
    dtype: str
    architecture: str
    fp8_mode: str
    fused_ops: tuple[str, ...]  # fused ops that passed their start-up self-check
    ttft_s: float | None
    prefill_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    kv_cache_bytes: int
    kv_tokens_used: int
    max_seq_len: int
    kv_layout: str
    kv_alignment_bytes: int
    fp8_decode: str = ""  # EngineStats.fp8_decode
    kernel_layers: str = ""  # EngineStats.kernel_layers: decode steps in the CPU kernel

    @property
    def kv_occupancy(self) -> float:
        """Fraction (0..1) of the preallocated KV cache's positions in use."""
        return self.kv_tokens_used / self.max_seq_len if self.max_seq_len else 0.0

    @classmethod
    def from_stats(
        cls, stats: EngineStats, config: ModelConfig, taken_at: float
    ) -> EngineSnapshot:
        return cls(
            taken_at=taken_at,
            device=stats.device,
            dtype=stats.dtype,
            architecture=config.architecture,
            fp8_mode=stats.fp8_mode,
            fused_ops=tuple(stats.fused_ops),
            ttft_s=stats.ttft_s,
            prefill_tokens_per_s=stats.prefill_tokens_per_s,
            decode_tokens_per_s=stats.decode_tokens_per_s,
            kv_cache_bytes=stats.kv_cache_bytes,
            kv_tokens_used=stats.kv_tokens_used,
            max_seq_len=stats.max_seq_len,
            kv_layout=stats.kv_layout,
            kv_alignment_bytes=stats.kv_alignment_bytes,
            fp8_decode=stats.fp8_decode,
            kernel_layers=stats.kernel_layers,
        )


@dataclass(frozen=True, slots=True)
class ServingSnapshot:
    """A serving endpoint's /metrics, read: gauges as scraped, rates and latency quantiles
    over the last `window_s` (deltas between scrapes). None: not exported, or no traffic in
    the window to measure (see `not_exported` for which)."""

    taken_at: float
    url: str
    server: str  # "vLLM", "MindIE", "unknown"
    error: str | None  # why there is no data (unreachable, HTTP 404: no /metrics, ...)
    sample_duration_s: float
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # fraction 0..1
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    preemptions_total: float | None = None
    preemptions_in_window: float | None = None
    aborted_total: float | None = None
    aborted_in_window: float | None = None
    failed_total: float | None = None
    failed_in_window: float | None = None
    window_s: float | None = None  # the span the rates and quantiles cover; None: first scrape
    not_exported: tuple[str, ...] = ()  # logical metrics this server lacks
    read_from: tuple[tuple[str, str], ...] = ()  # (logical metric, metric name it came from)
    answered: bool = True  # False: no HTTP answer at all (down, or unreachable from here)
    restarted_at: float | None = None  # when the tracker last saw the server restart

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class Alert:
    """A threshold crossed at `raised_at`; `key` identifies the condition (and its chip)."""

    raised_at: float
    key: str  # e.g. "temperature:0/1", "stale:npu", "decode_drop"
    level: AlertLevel
    message: str
    value: str  # the value that crossed, with its unit ("97 °C")
