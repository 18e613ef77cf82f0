"""The NPU panel's remote source: Huawei MindCluster NPU-Exporter's /metrics, one host each.

Names, labels and units are the exporter's (Ascend/mind-cluster, `docs/en/scheduling/api/
npu_exporter/01_prometheus_metrics_api.md`; `component/npu-exporter/collector/metrics/`):
one chip per `id` label (the logic NPU id), memory in MB, power in W, utilisation in %.
A metric the exporter could not read is omitted, not zeroed, so it shows as "–" here. The
exporter answers scrapes from a cache it refreshes every `-updateTime` seconds (5 by default,
1 to 60; Ascend/mind-cluster `component/npu-exporter/cmd/npu-exporter/main.go` @ 1918bd079db6):
a scrape can be newer than its data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from console.snapshots import ChipSample, NpuSnapshot, ProcessSample, chip_key
from probes import http
from probes.numbers import Field, NumberError, parse_int
from probes.prometheus import Exposition, Sample, parse

if TYPE_CHECKING:
    import httpx

Clock = Callable[[], float]
DEFAULT_PORT = 8082  # npu-exporter's default -port: the same main.go as the docstring cites

FIELDS = {
    "temperature_c": "npu_chip_info_temperature",
    "power_w": "npu_chip_info_power",
    "aicore_percent": "npu_chip_info_utilization",
    "hbm_used_mb": "npu_chip_info_hbm_used_memory",
    "hbm_total_mb": "npu_chip_info_hbm_total_memory",
    "hbm_bandwidth_percent": "npu_chip_info_hbm_bandwidth_utilization",
    "memory_used_mb": "npu_chip_info_used_memory",
    "memory_total_mb": "npu_chip_info_total_memory",
}
HEALTH = "npu_chip_info_health_status"
PROCESS = "npu_chip_info_process_info"
PROCESS_COUNT = "npu_chip_info_process_info_num"
# Bounds of this panel, not hardware facts: an exporter reports the chips of its own node,
# and a table of a hundred thousand rows froze the console; past the bound the scrape is
# refused with a line.
MAX_CHIPS = 256
MAX_PROCESSES = 4096
CHIP_ID = Field("the exporter's id label", 0, 65535)
PID = Field("the exporter's process_id label", 0, 2**32)


def metrics_url(url: str) -> str:
    """`http://node:8082` or `http://node:8082/metrics` -> the /metrics URL."""
    url = http.check_url(url, "--npu-exporter")
    return url if urlsplit(url).path.endswith("/metrics") else url + "/metrics"


def host_label(url: str) -> str:
    return urlsplit(url).netloc


def health_word(value: float | None) -> str | None:
    """1 healthy, 0 unhealthy; anything else (the exporter's -1 or MaxInt32) unknown."""
    if value is None:
        return None
    return {1.0: "OK", 0.0: "unhealthy"}.get(value, "NA")


def snapshot_from_exposition(expo: Exposition, source: str, taken_at: float,
                             duration_s: float) -> NpuSnapshot:
    """The chips and processes one exporter reported; pure."""
    by_id: dict[int, dict[str, Sample]] = {}
    names: dict[int, str | None] = {}
    for sample in expo.samples:  # every chip any per-chip metric names, even with no field here
        chip = _chip_id(sample) if sample.name.startswith("npu_chip_info_") else None
        if chip is not None:
            by_id.setdefault(chip, {})
            names.setdefault(chip, sample.label("model_name"))
            if len(by_id) > MAX_CHIPS:
                return NpuSnapshot(taken_at, (), (), False, f"the exporter reported more than "
                                   f"{MAX_CHIPS} chips: not shown (is this one node's "
                                   "exporter?)", duration_s, source)
    for field, name in (*FIELDS.items(), ("health", HEALTH)):
        for sample in expo.named(name):
            chip = _chip_id(sample)
            if chip is not None:
                by_id.setdefault(chip, {})[field] = sample
    chips = tuple(_chip(chip_id, fields, names.get(chip_id), source)
                  for chip_id, fields in sorted(by_id.items()))
    processes = tuple(_process(s) for s in expo.named(PROCESS)[:MAX_PROCESSES]
                      if _chip_id(s) is not None)
    known = bool(expo.named(PROCESS_COUNT)) or bool(processes)
    if not chips:
        return NpuSnapshot(taken_at, (), (), False, "the exporter reported no NPU chip metrics",
                           duration_s, source)
    return NpuSnapshot(taken_at, chips, processes, known, None, duration_s, source)


def _chip_id(sample: Sample) -> int | None:
    try:
        return parse_int(sample.label("id") or "", CHIP_ID, max_digits=5)
    except NumberError:
        return None


def _finite(value: float) -> float | None:
    """A reported value, or None (unknown) for NaN and the infinities."""
    return value if math.isfinite(value) else None


def _whole(value: float | None) -> int | None:
    return None if value is None or not math.isfinite(value) else round(value)


def _chip(chip_id: int, fields: dict[str, Sample], name: str | None, source: str) -> ChipSample:
    def number(field: str) -> float | None:
        sample = fields.get(field)
        return None if sample is None else _finite(sample.value)

    def whole(field: str) -> int | None:
        return _whole(number(field))

    return ChipSample(
        npu_id=chip_id, chip_id=None, name=name or None, health=health_word(number("health")),
        temperature_c=whole("temperature_c"), power_w=number("power_w"),
        aicore_percent=whole("aicore_percent"), hbm_used_mb=whole("hbm_used_mb"),
        hbm_total_mb=whole("hbm_total_mb"), hbm_bandwidth_percent=number("hbm_bandwidth_percent"),
        key=chip_key(chip_id, None, source), memory_used_mb=whole("memory_used_mb"),
        memory_total_mb=whole("memory_total_mb"))


def _process(sample: Sample) -> ProcessSample:
    try:
        pid = parse_int(sample.label("process_id") or "0", PID, max_digits=10)
    except NumberError:
        pid = 0
    return ProcessSample(_chip_id(sample) or 0, None, pid,
                         sample.label("container_name") or "(host)", _whole(sample.value))


def sample_exporter(http_client: httpx.Client, url: str, clock: Clock = time.time) -> NpuSnapshot:
    """Scrape one exporter (meant for a worker thread); a failure is the snapshot's error."""
    started, taken_at, source = time.monotonic(), clock(), host_label(url)
    fetched = http.get(http_client, url)
    duration = time.monotonic() - started
    if not fetched.ok:
        return NpuSnapshot(taken_at, (), (), False, fetched.error, duration, source)
    return snapshot_from_exposition(parse(fetched.text), source, taken_at, duration)
