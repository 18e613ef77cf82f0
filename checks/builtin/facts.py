"""Facts several checks share, read once per run through the Context."""

from __future__ import annotations

from checks.context import Context
from probes.environment import AscendEnvironment, DeviceNodes, ascend_environment
from probes.environment import read_device_nodes as _read_device_nodes
from probes.host import PythonEnvironment
from probes.inventory import NpuReading, read_live


def npu(ctx: Context) -> NpuReading:
    return ctx.fact("npu", lambda: read_live(ctx.host, ctx.timeout_s))


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
