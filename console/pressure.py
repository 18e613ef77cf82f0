"""The memory-pressure reading: HBM-bandwidth % against AI-core %, a heuristic (headless).

Both figures come from `npu-smi info -t usages` (or the NPU-Exporter's
`npu_chip_info_hbm_bandwidth_utilization` / `npu_chip_info_utilization`). No vendor document
defines "memory-bound": high bandwidth with low AI-core use *suggests* it (typical of MoE
decode), high AI-core use suggests compute-bound; the thresholds are project defaults in the
policy (`console.pressure_*_percent`). It says nothing about bank conflicts, which exist in the
AI Core's on-chip Unified Buffer and are measured only by msprof (`console/msprof.py`).

Two zero readings carry no meaning, by the DCMI reference (hicann/driver
`docs/en/Ascend_910B_DCMI_API/Ascend_910B_DCMI_API/dcmi_get_device_utilization_rate.md` @
999c25d74069, NOTE; npu-smi reads its figures through DCMI): AI Core (and Vector Core) read 0
while profiling is enabled, and on-chip memory (HBM) bandwidth reads 0 in a VM pass-through.
Where this machine shows either cause (an `msprof` process, a hypervisor marker) the reading
says so instead of "idle".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from checks.policy import Policy
from console.snapshots import NpuSnapshot
from probes.host import Host
from probes.processes import processes_named
from probes.virt import VirtReading, read_virt

# the profiler's launcher (CANN toolkit `msprof`); a profiler inside the serving process
# (torch_npu.profiler) has no process of its own and is not seen
PROFILER_NAMES = ("msprof",)

ReadingKind = Literal["not-sampled", "profiling-zero", "vm-zero", "memory-bound",
                      "compute-bound", "idle", "unclear"]


@dataclass(frozen=True, slots=True)
class PressureLimits:
    """The heuristic's thresholds (policy `console.pressure_*_percent`, project defaults)."""

    high_percent: float
    low_percent: float
    idle_percent: float


def pressure_limits(policy: Policy) -> PressureLimits:
    return PressureLimits(float(policy.get("console", "pressure_high_percent")),
                          float(policy.get("console", "pressure_low_percent")),
                          float(policy.get("console", "pressure_idle_percent")))


@dataclass(frozen=True, slots=True)
class ZeroCauses:
    """What the sampled machine shows of the two documented causes of a meaningless 0.

    `profilers`: (pid, name) of profiler processes seen, None when not looked for (no chip
    read AI-core 0) or not knowable (an NPU-Exporter's host, a replay). `virt`: the hypervisor
    reading, None when not knowable. `processes_read` is False when /proc could not be read
    whole (then "none seen" proves nothing)."""

    profilers: tuple[tuple[int, str], ...] | None
    virt: VirtReading | None
    processes_read: bool = True

    @property
    def profiling(self) -> bool:
        return bool(self.profilers)

    @property
    def in_vm(self) -> bool:
        return self.virt is not None and self.virt.is_vm


UNKNOWN_CAUSES = ZeroCauses(None, None)


def zero_causes(host: Host, snapshot: NpuSnapshot, virt: VirtReading) -> ZeroCauses:
    """Look for a profiler only when a chip reads AI-core 0: that is when it matters."""
    if not any(chip.aicore_percent == 0 for chip in snapshot.chips):
        return ZeroCauses(None, virt)
    scan = processes_named(host, PROFILER_NAMES)
    return ZeroCauses(scan.found, virt, scan.complete)


class CauseReader:
    """The zero causes of one machine, for its NPU sampler (one worker at a time): the
    hypervisor markers once, the process table at most every `rescan_s` (~30 µs a process,
    so a box with thousands costs tens of ms a scan)."""

    def __init__(self, host: Host, rescan_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.host, self.rescan_s, self._clock = host, rescan_s, clock
        self._virt: VirtReading | None = None
        self._last: ZeroCauses | None = None
        self._scanned_at = -math.inf

    def read(self, snapshot: NpuSnapshot) -> ZeroCauses:
        if self._virt is None:
            self._virt = read_virt(self.host)
        now = self._clock()
        if self._last is None or self._last.profilers is None or \
                now - self._scanned_at >= self.rescan_s:
            self._last = zero_causes(self.host, snapshot, self._virt)
            self._scanned_at = now
        if not any(chip.aicore_percent == 0 for chip in snapshot.chips):
            return ZeroCauses(None, self._virt)
        return self._last


@dataclass(frozen=True, slots=True)
class PressureReading:
    kind: ReadingKind
    text: str


def read_pressure(hbm_bandwidth_percent: float | None, aicore_percent: float | None,
                  limits: PressureLimits, causes: ZeroCauses = UNKNOWN_CAUSES
                  ) -> PressureReading:
    """What the two counters suggest, worded as a suggestion; a documented meaningless 0 is
    named as such, never read as "idle"."""
    bw, core = hbm_bandwidth_percent, aicore_percent
    if bw is None or core is None:
        return PressureReading("not-sampled", "not sampled (npu-smi info -t usages)")
    if core == 0 and causes.profiling:
        return PressureReading("profiling-zero",
                               "AI-core reads 0 while profiling (msprof runs): not judged")
    if bw == 0 and causes.in_vm:
        return PressureReading("vm-zero", "HBM-BW reads 0 in a VM pass-through: not judged")
    if bw >= limits.high_percent and core < limits.low_percent:
        return PressureReading("memory-bound", "suggests memory-bound")
    if core >= limits.high_percent:
        return PressureReading("compute-bound", "suggests compute-bound")
    if bw < limits.idle_percent and core < limits.idle_percent:
        return PressureReading("idle", "idle, or host/launch-bound")
    return PressureReading("unclear", "no clear pressure")


@dataclass(frozen=True, slots=True)
class PressureRow:
    chip_key: str
    hbm_bandwidth_percent: float | None
    aicore_percent: float | None
    reading: PressureReading


def pressure_rows(sources: Sequence[tuple[NpuSnapshot, ZeroCauses]],
                  limits: PressureLimits) -> list[PressureRow]:
    """One row per chip of every good snapshot, read with its own machine's causes."""
    rows = []
    for snapshot, causes in sources:
        if not snapshot.ok:
            continue
        for chip in snapshot.chips:
            reading = read_pressure(chip.hbm_bandwidth_percent, chip.aicore_percent, limits,
                                    causes)
            rows.append(PressureRow(chip.key, chip.hbm_bandwidth_percent, chip.aicore_percent,
                                    reading))
    return rows


def causes_note(causes: Sequence[ZeroCauses]) -> str:
    """One line on the zero readings: what DCMI documents, and what this machine shows."""
    known = [c for c in causes if c.virt is not None]
    if not known:
        return ("a 0 can be meaningless: AI-core reads 0 while profiling, HBM-BW reads 0 in a "
                "VM pass-through (not knowable for these sources)")
    return ("a 0 can be meaningless: AI-core reads 0 while profiling, HBM-BW reads 0 in a VM "
            f"pass-through; here: {_profiling_text(known[0])}, {_virt_text(known[0])}")


def _profiling_text(causes: ZeroCauses) -> str:
    if causes.profilers is None:
        return "no chip reads AI-core 0"
    if not causes.profilers:
        return "no msprof process" if causes.processes_read else "processes not readable"
    pids = ", ".join(str(pid) for pid, _ in causes.profilers[:3])
    return f"msprof running (pid {pids})"


def _virt_text(causes: ZeroCauses) -> str:
    virt = causes.virt
    if virt is None or not virt.is_vm:
        return "no hypervisor marker"
    return f"a VM ({virt.hypervisor}: {virt.evidence})"
