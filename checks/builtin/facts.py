"""Facts several checks share, read once per run through the Context."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from checks.context import Context
from probes.environment import AscendEnvironment, DeviceNodes, ascend_environment
from probes.environment import read_device_nodes as _read_device_nodes
from probes.host import CommandResult, PythonEnvironment
from probes.inventory import NpuReading, read_live

# npu-smi must not run from several threads at once (facts/PATHS.md §6, HARDWARE.md §5):
# every check's npu-smi call goes through this lock.
NPU_SMI_LOCK = threading.Lock()


def npu(ctx: Context) -> NpuReading:
    def read() -> NpuReading:
        with NPU_SMI_LOCK:
            return read_live(ctx.host, ctx.timeout_s)

    return ctx.fact("npu", read)


def run_npu_smi(ctx: Context, args: Sequence[str]) -> CommandResult:
    """`npu-smi ARGS`, one call at a time across the run's checks."""
    with NPU_SMI_LOCK:
        return ctx.host.run(["npu-smi", *args], timeout_s=ctx.timeout_s)


def chip_count(ctx: Context) -> int | None:
    reading = npu(ctx)
    if reading.is_error or reading.kind != "info":
        return None
    return len(reading.document.get("chips", []))


def environment(ctx: Context) -> AscendEnvironment:
    return ctx.fact("environment", lambda: ascend_environment(ctx.host.env, chip_count(ctx)))


def device_nodes(ctx: Context) -> DeviceNodes:
    return ctx.fact("device_nodes", lambda: _read_device_nodes(ctx.host))


def python(ctx: Context) -> PythonEnvironment:
    return ctx.fact("python", ctx.host.python_packages)
