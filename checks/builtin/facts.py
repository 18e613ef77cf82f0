"""Facts several checks share, read once per run through the Context, and what the target
lets a check say about them."""

from __future__ import annotations

from dataclasses import replace

from checks.context import Context
from checks.model import Finding
from probes.environment import AscendEnvironment, DeviceNodes, ascend_environment
from probes.environment import read_device_nodes as _read_device_nodes
from probes.host import PythonEnvironment
from probes.inventory import NpuReading, read_live
from probes.stack import StackVersions, read_stack


def npu(ctx: Context) -> NpuReading:
    return ctx.fact("npu", lambda: read_live(ctx.host, ctx.timeout_s))


def chip_count(ctx: Context) -> int | None:
    reading = npu(ctx)
    if reading.is_error or reading.kind != "info":
        return None
    return len(reading.document.get("chips", []))


def stack(ctx: Context) -> StackVersions:
    """The Ascend version files, read once per run (versions.parity, cann.environment and the
    serving checks share them)."""
    return ctx.fact("stack", lambda: read_stack(ctx.host))


def environment(ctx: Context) -> AscendEnvironment:
    return ctx.fact("environment", lambda: ascend_environment(ctx.host.env, chip_count(ctx)))


def device_nodes(ctx: Context) -> DeviceNodes:
    return ctx.fact("device_nodes", lambda: _read_device_nodes(ctx.host))


def python(ctx: Context) -> PythonEnvironment:
    return ctx.fact("python", ctx.host.python_packages)


def judged_environment(ctx: Context) -> str:
    """One evidence line: whose environment an environment-based verdict judged."""
    target = ctx.target
    if target.kind == "shell":
        return (f"environment judged: this shell's ({target.chosen}); name the service with "
                "--pid PID or --env-file FILE")
    who = f"process {target.pid}'s" if target.pid is not None else "the service's"
    return f"environment judged: {who}, from {target.environment}"


def about_target(ctx: Context, finding: Finding) -> Finding:
    """An environment-based verdict that says whose environment it judged: an evidence line
    always, and in the summary when that is this shell (not a deployment)."""
    if finding.status == "skip":
        return finding
    note = " (judged: this shell's environment)" if ctx.target.kind == "shell" else ""
    return replace(finding, summary=finding.summary + note,
                   evidence=(judged_environment(ctx), *finding.evidence))


def files_seen(ctx: Context) -> list[str]:
    """An evidence line when the files judged are a container's: those its process sees."""
    proc = ctx.target.process
    if proc is None or proc.mount_ns != "other":
        return []
    return [f"as process {proc.pid} sees them: its mount namespace, read through "
            f"{proc.files_root}"]
