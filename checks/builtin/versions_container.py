"""versions.parity's container side: the driver files a container sees against the host's.

A container carries no kernel driver of its own: the documented `docker run` of vLLM-Ascend
bind-mounts the host's `/usr/local/Ascend/driver/lib64/` and
`/usr/local/Ascend/driver/version.info` into it
(https://docs.vllm.ai/projects/ascend/en/v0.13.0/quick_start.html, "Setup environment using
container"), and Ascend Docker Runtime mounts the host's driver directories unless told not to
(`ASCEND_RUNTIME_OPTIONS=NODRV`,
https://www.hiascend.com/document/detail/en/mindcluster/730/clustersched/schedulingug/dlruntime_ug_004.html).
A container whose driver version.info differs from the host's, or that sees none while the
host has one, does not run on the mounted host driver files those pages set up.
"""

from __future__ import annotations

from checks.builtin.versions_model import Installed, Judgement
from checks.context import Context
from probes.host import Host
from probes.stack import read_stack

MOUNT_SOURCE = ("vLLM-Ascend quick start `docker run` mounts the host's driver/lib64 and "
                "driver/version.info: https://docs.vllm.ai/projects/ascend/en/v0.13.0/"
                "quick_start.html")
MOUNT_REMEDY = ("Start the container with the host's driver mounted (`-v /usr/local/Ascend/"
                "driver/lib64/:/usr/local/Ascend/driver/lib64/ -v /usr/local/Ascend/driver/"
                "version.info:/usr/local/Ascend/driver/version.info`, or Ascend Docker "
                "Runtime without NODRV) instead of driver files baked into the image.")


def in_container(ctx: Context) -> bool:
    """The target is a process in another mount namespace (a container)."""
    proc = ctx.target.process
    return proc is not None and proc.mount_ns == "other"


def machine_of(ctx: Context) -> Host | None:
    """The host machine's own files beside a container target's; None where the run has no
    such view (a bundle records, and a replay holds, the target's files only)."""
    machine = getattr(ctx.host, "machine", None)
    return machine if isinstance(machine, Host) else None


def judge_container_driver(ctx: Context, inst: Installed, j: Judgement) -> None:
    """The container's driver/version.info (what `inst.driver` read through its root) against
    the host's."""
    if not in_container(ctx):
        return
    machine = machine_of(ctx)
    if machine is None:
        j.evidence.append("the host's driver files are not read in a bundle or a replay: the "
                          "container's driver not compared with them")
        return
    found = read_stack(machine).driver
    host = found.value.driver_version if found.value is not None else None
    mine = inst.driver.driver_version if inst.driver is not None else None
    if host is None:
        j.evidence.append(f"the host's driver version.info: {found.error or found.state}; "
                          "the container's driver files not compared with it")
        return
    if mine is None:
        j.add("warn", f"the container sees no driver version.info, while the host's "
              f"{found.path} says driver {host}: the host's driver files are not mounted "
              f"({MOUNT_SOURCE})", MOUNT_REMEDY, rules=("container-driver-mount",))
        return
    if mine.strip().lower() == host.strip().lower():
        j.add("pass", f"the container's driver version.info is the host's ({host})")
        return
    j.add("warn", f"the container's driver version.info says {mine} but the host's "
          f"{found.path} says {host}: the container carries driver files of another release "
          f"instead of the host's mounted ones ({MOUNT_SOURCE})", MOUNT_REMEDY,
          rules=("container-driver-mount",))
