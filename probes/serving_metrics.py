"""What a serving engine's /metrics says about load, KV cache, latency and throughput.

Each logical metric has an ordered list of the names servers have used for it, because the
names move: vLLM renamed `vllm:gpu_cache_usage_perc` to `vllm:kv_cache_usage_perc` and
`vllm:time_per_output_token_seconds` to `vllm:inter_token_latency_seconds` (deprecated in 0.9,
hidden a release later: docs.vllm.ai "Production Metrics"; vllm-project/vllm
`vllm/v1/metrics/loggers.py`), and MindIE exports the same facts without the `vllm:` prefix on
its management port (hiascend.com MindIE Service "服务监控指标查询接口（普罗格式）"). The first
name found wins; a logical metric with none is "not exported", never zero.

Pure reading, no judgement. Counts (requests, tokens) are summed over label sets (engines,
models); a gauge that is a ratio (the KV cache's share in use) is not a count: summing two
data-parallel engines at 48 % and 47 % would say 95 %. A ratio is kept per engine (vLLM's
`engine` label: PrometheusStatLogger in vllm/v1/metrics/loggers.py labels each engine index),
and its reading is the largest engine's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from probes.prometheus import Exposition, Sample

# logical metric -> (kind, candidate sample base names, label filter)
GAUGES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "num_requests_running"),
    "waiting": ("vllm:num_requests_waiting", "num_requests_waiting"),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                       "npu_cache_usage_perc"),
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "prompt_tokens": ("vllm:prompt_tokens_total", "prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "generation_tokens_total"),
    "preemptions": ("vllm:num_preemptions_total", "num_preemptions_total"),
    "failed_requests": ("request_failed_total",),
}
# finished requests by reason: vLLM counts aborts as a finished_reason of request_success
ABORTS: tuple[tuple[str, str, str], ...] = (
    ("vllm:request_success_total", "finished_reason", "abort"),
)
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "time_to_first_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
            "time_per_output_token_seconds"),
}
# gauges that are ratios: max over engines, never summed
RATIOS = frozenset({"kv_cache_usage"})
ENGINE_LABEL = "engine"
LOGICAL = (*GAUGES, *COUNTERS, "aborted_requests", *HISTOGRAMS)
# what ascend-console's serving panel and `endpoint.metrics` need at the least
REQUIRED = ("running", "waiting", "kv_cache_usage", "ttft", "itl", "prompt_tokens",
            "generation_tokens")
MINDIE_ONLY = frozenset({"request_received_total", "request_failed_total",
                         "npu_cache_usage_perc", "failed_request_perc"})


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts by upper bound (summed over label sets), count and sum."""

    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), ascending le
    count: float
    sum: float


@dataclass(frozen=True)
class ServingReading:
    """One scrape, read: the value of each logical metric that was exported, and the name
    each was read from."""

    server: str  # "vLLM", "MindIE" or "unknown"
    gauges: Mapping[str, float]
    counters: Mapping[str, float]
    histograms: Mapping[str, Histogram]
    names: Mapping[str, str]  # logical metric -> the sample name it was read from
    # ratio gauge -> (engine, value) per engine, in the order exported ("" without a label)
    engines: Mapping[str, tuple[tuple[str, float], ...]] = field(
        default_factory=lambda: MappingProxyType({}))

    @property
    def missing(self) -> tuple[str, ...]:
        """Logical metrics this server does not export."""
        return tuple(m for m in LOGICAL if m not in self.names)


def read_serving(expo: Exposition) -> ServingReading:
    names: dict[str, str] = {}
    engines = {m: e for m in RATIOS if (e := _per_engine(expo, GAUGES[m], m, names))}
    gauges = {m: v for m, c in GAUGES.items() if m not in RATIOS
              and (v := _summed(expo, c, m, names)) is not None}
    gauges.update({m: max(v for _, v in e) for m, e in engines.items()})
    counters = {m: v for m, c in COUNTERS.items()
                if (v := _summed(expo, c, m, names)) is not None}
    aborted = _aborts(expo, names)
    if aborted is not None:
        counters["aborted_requests"] = aborted
    if "kv_cache_usage" in gauges and names["kv_cache_usage"] == "npu_cache_usage_perc":
        # MindIE's HELP line says 1 means 100 % (hiascend MindIE Service "服务监控指标查询接口
        # （普罗格式）"); which scale a live server reports is not in our data, so a value
        # above 1 is read as percent (project default)
        engines["kv_cache_usage"] = tuple((e, v / 100 if v > 1 else v)
                                          for e, v in engines["kv_cache_usage"])
        gauges["kv_cache_usage"] = max(v for _, v in engines["kv_cache_usage"])
    histograms = {m: h for m, c in HISTOGRAMS.items()
                  if (h := _histogram(expo, c, m, names)) is not None}
    return ServingReading(_server(expo), MappingProxyType(gauges), MappingProxyType(counters),
                          MappingProxyType(histograms), MappingProxyType(names),
                          MappingProxyType(engines))


def _server(expo: Exposition) -> str:
    present = expo.names
    if any(name.startswith("vllm:") for name in present):
        return "vLLM"
    bases = {name.removesuffix("_bucket").removesuffix("_count") for name in present}
    if present & MINDIE_ONLY or bases & {"num_requests_running", "time_to_first_token_seconds"}:
        return "MindIE"
    return "unknown"


def _summed(expo: Exposition, candidates: tuple[str, ...], logical: str,
            names: dict[str, str]) -> float | None:
    for name in candidates:
        samples = expo.named(name)
        if samples:
            names[logical] = name
            return sum(s.value for s in samples)
    return None


def _per_engine(expo: Exposition, candidates: tuple[str, ...], logical: str,
                names: dict[str, str]) -> tuple[tuple[str, float], ...]:
    """(engine, value) of the first candidate exported: the largest value per engine label
    (an engine may export one sample per model name)."""
    for name in candidates:
        samples = expo.named(name)
        if samples:
            names[logical] = name
            found: dict[str, float] = {}
            for sample in samples:
                engine = sample.label(ENGINE_LABEL) or ""
                found[engine] = max(found.get(engine, sample.value), sample.value)
            return tuple(found.items())
    return ()


def _aborts(expo: Exposition, names: dict[str, str]) -> float | None:
    for name, label, value in ABORTS:
        samples = expo.named(name)
        if samples:
            names["aborted_requests"] = f'{name}{{{label}="{value}"}}'
            return sum(s.value for s in samples if s.label(label) == value)
    return None


def _histogram(expo: Exposition, candidates: tuple[str, ...], logical: str,
               names: dict[str, str]) -> Histogram | None:
    for name in candidates:
        buckets = expo.named(f"{name}_bucket")
        if not buckets:
            continue
        names[logical] = name
        return Histogram(_cumulative(buckets), _total(expo.named(f"{name}_count")),
                         _total(expo.named(f"{name}_sum")))
    return None


def _cumulative(buckets: list[Sample]) -> tuple[tuple[float, float], ...]:
    by_le: dict[float, float] = {}
    for sample in buckets:
        le = sample.label("le")
        if le is None:
            continue
        try:
            bound = float(le)
        except ValueError:
            continue
        by_le[bound] = by_le.get(bound, 0.0) + sample.value
    return tuple(sorted(by_le.items()))


def _total(samples: list[Sample]) -> float:
    return sum(s.value for s in samples)
