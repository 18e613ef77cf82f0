"""Timing one call on one device, as `ascend-doctor bench` does it (engine.tools.microbench says
what is timed): median of several samples after warm-up, the device synchronised around each
sample, small operators repeated within a sample and cycled through copies of their tensors so
their weights come from memory, not a cache.
"""

from __future__ import annotations

import math
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

COLD_BYTES = 256 * 2**20
MAX_COPIES = 512
BATCH_TOKENS = (1, 16, 256, 2048)  # tokens in flight, for the expert GEMMs
CONTEXTS = (1024, 4096, 16384, 65536)


@dataclass(frozen=True)
class Settings:
    samples: int = 7
    warmup: int = 2
    min_sample_s: float = 0.02
    max_reps: int = 1000
    copy_bytes: int | None = None  # None: 256 MiB on the CPU, 1 GiB on an accelerator
    matmul_n: int | None = None  # None: 2048 on the CPU, 8192 on an accelerator
    contexts: tuple[int, ...] = CONTEXTS
    batches: tuple[int, ...] = BATCH_TOKENS
    cold_bytes: int = COLD_BYTES  # copies of each operator's tensors cycled through


# --quick: a smoke run. Its matmul peak is a 512-cube: a CPU without a bfloat16 GEMM path (AVX2
# only: 1.3 GFLOP/s measured on a 2-core guest) takes 13 s for one 2048-cube call
QUICK = Settings(samples=3, warmup=1, min_sample_s=0.005, matmul_n=512, contexts=(1024, 4096),
                 batches=(1, 256), cold_bytes=64 * 2**20)


@dataclass(frozen=True)
class Timing:
    median_s: float
    best_s: float
    reps: int
    samples: int


class Device:
    """A torch device with its synchronisation and a name for the report."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "npu":
            torch.npu.synchronize(self.device)  # type: ignore[attr-defined]

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    def name(self) -> str:
        if self.device.type == "cuda":
            return str(torch.cuda.get_device_name(self.device))
        if self.device.type == "npu":
            getter = getattr(torch.npu, "get_device_name", None)  # type: ignore[attr-defined]
            return str(getter(self.device)) if getter else "npu"
        return _cpu_name()


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def time_call(fn: Callable[[], Any], device: Device, settings: Settings) -> Timing:
    """Median seconds per call after warm-up; calls are repeated within a sample until it
    lasts min_sample_s, and the device is synchronised after every sample."""
    for _ in range(settings.warmup):
        fn()
    device.sync()
    calibrate(fn, device, settings)  # a sample's worth of warm-up keeps worker threads awake
    reps = calibrate(fn, device, settings)
    per_call = []
    for _ in range(settings.samples):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        device.sync()
        per_call.append((time.perf_counter() - start) / reps)
    return Timing(statistics.median(per_call), min(per_call), reps, settings.samples)


def calibrate(fn: Callable[[], Any], device: Device, settings: Settings) -> int:
    """Calls per sample: as many as fit in min_sample_s (counted, not extrapolated from one
    call, which a descheduled thread can make look a hundred times slower)."""
    count, start = 0, time.perf_counter()
    while count < settings.max_reps:
        fn()
        count += 1
        device.sync()
        if time.perf_counter() - start >= settings.min_sample_s:
            break
    return count


def copies_for(nbytes: int, cold_bytes: int = COLD_BYTES) -> int:
    """How many copies of an operator's tensors make at least `cold_bytes`."""
    return max(1, min(MAX_COPIES, math.ceil(cold_bytes / max(nbytes, 1))))


def cycling(calls: Sequence[Callable[[], Any]]) -> Callable[[], Any]:
    """One call of the next copy each time (round robin)."""
    position = [0]

    def call() -> Any:
        i = position[0]
        position[0] = (i + 1) % len(calls)
        return calls[i]()

    return call
