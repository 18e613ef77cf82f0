"""Samplers the console runs in worker threads: pure functions from a machine to a snapshot.

They never touch widgets; the app posts the returned immutable snapshot to the UI. A slow or
hung `npu-smi` costs at most `timeout_s` per sample and is reported in the snapshot's `error`;
`Sampler` keeps the last good NPU snapshot so the panel can show its age and a stale marker.

For a chip whose health is not OK the sampler reads `npu-smi info -t health` as the doctor does
(checks.health_codes), within the same time budget, so the console's alerts judge thermal
alarm codes by the doctor's rule (checks.thermal); a healthy box costs no extra call.

`hbm_bandwidth_percent` and `aicore_percent` (both from `npu-smi info -t usages`) feed the
pressure panel's heuristic reading, never a measurement of bank conflicts.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psutil

from console.snapshots import ChipSample, HostSnapshot, NpuSnapshot, ProcessSample, chip_key
from probes import inventory
from probes.host import Host
from probes.npu_smi import ChipRow, NpuInfo, reading
from probes.npu_smi.model import Usages

NOT_FOUND = "npu-smi not found on PATH"
MB = 1024 * 1024

Clock = Callable[[], float]


UsageMap = Mapping[tuple[int, int | None], Usages]  # (npu_id, chip_id) -> usages
# (npu_id, chip_id) -> (fault codes or None, why they could not be read)
FaultMap = Mapping[tuple[int, int | None], tuple[tuple[str, ...] | None, str | None]]


# ---------------------------------------------------------------------------------------------
# NPU


def sample_npu(host: Host, timeout_s: float, clock: Clock = time.time) -> NpuSnapshot:
    """One sample through npu-smi's front door: the table, the health codes of chips that are
    not OK, `-t usages` per card, all within `timeout_s` together."""
    taken_at = clock()
    got = reading.sample(host, timeout_s)
    info = got.reading.info
    if info is None:
        error = _reading_error(got.reading, timeout_s)
        return NpuSnapshot(taken_at, (), (), False, error, got.duration_s)
    return snapshot_from_info(info, got.usages, taken_at, got.duration_s, _faults(got.health))


def sample_fault_codes(host: Host, chips: Sequence[ChipRow], deadline: float) -> FaultMap:
    """`-t health` codes of every chip that is not OK (none for a chip that is: no alarm is
    active), each call within what is left of the sample's time."""
    return _faults(reading.read_health_of(host, chips, deadline))


def _faults(health: Mapping[tuple[int, int | None], reading.HealthCodes]) -> FaultMap:
    return {key: (read.codes, read.unread) for key, read in health.items()}


def snapshot_from_info(
    info: NpuInfo, usages: UsageMap, taken_at: float, sample_duration_s: float,
    faults: FaultMap | None = None,
) -> NpuSnapshot:
    """A parsed `npu-smi info` table (and usages, fault codes) as a snapshot; pure."""
    faults = faults or {}
    chips = tuple(_chip_sample(row, usages.get((row.npu_id, row.chip_id)),
                               faults.get((row.npu_id, row.chip_id), (None, None)))
                  for row in info.chips)
    processes = tuple(
        ProcessSample(p.npu_id, p.chip_id, p.pid, p.name, p.memory_mb) for p in info.processes
    )
    return NpuSnapshot(taken_at, chips, processes, info.processes_known, None, sample_duration_s)


def _chip_sample(row: ChipRow, usage: Usages | None,
                 fault: tuple[tuple[str, ...] | None, str | None]) -> ChipSample:
    aicore = row.aicore_percent
    if usage is not None and usage.aicore_percent is not None:
        aicore = usage.aicore_percent  # same moment as the bandwidth figure it is compared with
    return ChipSample(
        npu_id=row.npu_id,
        chip_id=row.chip_id,
        name=row.name,
        health=row.health,
        temperature_c=row.temperature_c,
        power_w=row.power_w,
        aicore_percent=aicore,
        hbm_used_mb=row.hbm_used_mb,
        hbm_total_mb=row.hbm_total_mb,
        hbm_bandwidth_percent=None if usage is None else usage.hbm_bandwidth_percent,
        key=chip_key(row.npu_id, row.chip_id),
        memory_used_mb=row.memory_used_mb if row.memory_total_mb else None,
        memory_total_mb=row.memory_total_mb or None,
        fault_codes=fault[0],
        codes_unread=fault[1],
    )


def _reading_error(reading: inventory.NpuReading, timeout_s: float) -> str:
    result = reading.command
    if result is not None and result.outcome == "not_found":
        return NOT_FOUND
    if result is not None and result.outcome == "timeout":
        return f"`npu-smi info` timed out after {timeout_s:g} s"
    text = reading.error_text or str(reading.document.get("error", ""))
    return text or f"`npu-smi info` printed no table (kind {reading.kind})"


# ---------------------------------------------------------------------------------------------
# host


class _CpuMeter:
    """psutil's CPU use since its previous call. The very first call has no interval behind
    it (psutil answers 0.0, meaningless): it is reported as None, never as 0 %."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._primed = False

    def read(self) -> tuple[float | None, tuple[float, ...]]:
        with self._lock:
            total = float(psutil.cpu_percent(interval=None))
            cores = tuple(float(c) for c in psutil.cpu_percent(interval=None, percpu=True))
            primed, self._primed = self._primed, True
        return (total, cores) if primed else (None, ())


_CPU = _CpuMeter()


def sample_host(log_dir: str | None, clock: Clock = time.time) -> HostSnapshot:
    """CPU and each core (since the previous call), memory, log disk."""
    taken_at = clock()
    cpu, cores = _CPU.read()
    mem = psutil.virtual_memory()
    measured, free_mb, total_mb = _disk_of(log_dir)
    return HostSnapshot(
        taken_at=taken_at,
        cpu_percent=cpu,
        cpu_cores_percent=cores,
        mem_used_mb=(mem.total - mem.available) / MB,
        mem_total_mb=mem.total / MB,
        log_dir=measured,
        log_disk_free_mb=free_mb,
        log_disk_total_mb=total_mb,
    )


def _disk_of(log_dir: str | None) -> tuple[str | None, float | None, float | None]:
    where = nearest_existing(log_dir) if log_dir else None
    if where is None:
        return log_dir, None, None
    try:
        usage = psutil.disk_usage(where)
    except OSError:
        return where, None, None
    return where, usage.free / MB, usage.total / MB


def nearest_existing(path: str) -> str | None:
    """`path` or its nearest existing parent (a log dir not created yet lives on that disk)."""
    current = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return current


# ---------------------------------------------------------------------------------------------
# staleness


class Sampler:
    """One feed's latest snapshot, its last good one and that one's age; pure logic, time
    injected. Every source's feed has one; a snapshot without `ok` (host, engine) is good.

    `update()` takes every snapshot (good or failed); a failed one keeps the previous good
    data on screen and records the error. Data is stale when older than
    `stale_after_intervals` x `interval_s` (policy console.stale_after_intervals).
    """

    def __init__(
        self, interval_s: float, stale_after_intervals: float = 3.0, clock: Clock = time.time
    ) -> None:
        self.interval_s = interval_s
        self.stale_after_s = stale_after_intervals * interval_s
        self._clock = clock
        self.last_good: Any = None
        self.latest: Any = None

    def update(self, snapshot: Any) -> None:
        self.latest = snapshot
        if getattr(snapshot, "ok", True):
            self.last_good = snapshot

    def clear(self) -> None:
        """Nothing to show any more (the engine went away)."""
        self.latest = self.last_good = None

    def age_s(self, now: float | None = None) -> float | None:
        """Seconds since the last good snapshot was taken; None before any."""
        if self.last_good is None:
            return None
        return max(0.0, (self._clock() if now is None else now) - self.last_good.taken_at)

    def is_stale(self, now: float | None = None) -> bool:
        """True once the good data on screen is older than the limit.

        Before any good snapshot there is nothing stale to show: the panel shows the error."""
        age = self.age_s(now)
        return age is not None and age > self.stale_after_s
