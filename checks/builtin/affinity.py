"""pcie.contention's target part: the NUMA nodes of the CPUs the target may run on against
the NUMA nodes of the NPUs it uses.

The NPUs it uses: npu-smi's process table rows of the target and its children, else the
chips its ASCEND_RT_VISIBLE_DEVICES names (positions in npu-smi's table) for a target on
this machine's namespace. In a container the variable indexes the container's own devices,
mapped to host chips through the container's /dev/davinci<N> nodes where that can be done
(probes.target.devices.container_rows, the mapping npu.hbm-fit uses too); otherwise they are
not matched, and the evidence says so with the container's nodes. Their NUMA node is
the PCI function's `numa_node` (sysfs), matched by bus id. The CPUs: `Cpus_allowed_list` of
/proc/PID/status, mapped to nodes through /sys/devices/system/node/node<N>/cpulist. A target
allowed only on nodes that hold none of an NPU's node is pinned far from it: every transfer
to that NPU crosses the inter-socket link (Huawei lists each NPU's CPU affinity in `npu-smi
info -t topo` for this reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.context import Context
from probes.errors import NotRecorded
from probes.target.model import TargetUnreadable
from probes.target.proc import format_cpu_list

if TYPE_CHECKING:
    from probes.npu_smi import ChipRow
    from probes.pci import PciFunction

REMEDY = ("let the serving process run on the CPUs of its NPUs' NUMA node (numactl "
          "--cpunodebind=N, taskset, or the container's --cpuset-cpus); `npu-smi info -t topo` "
          "shows each NPU's CPU affinity")


@dataclass(frozen=True)
class Affinity:
    problems: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


def _bus(address: str | None) -> str:
    """`0000:C1:00.0`, `00000000:c1:00.0` -> `c1:00.0`: bus, device, function."""
    return ":".join((address or "").lower().split(":")[-2:])


def chips_used(ctx: Context) -> tuple[list[ChipRow], str]:
    """The chips the target uses and how that is known; no chips when it is not known."""
    reading = facts.npu(ctx)
    info = reading.info if not reading.is_error else None
    if info is None:
        return [], "npu-smi gave no chip table"
    target = ctx.target
    if target.npus:
        held = {(u.npu_id, u.chip_id) for u in target.npus}
        chips = [c for c in info.chips
                 if (c.npu_id, c.chip_id) in held or (c.npu_id, None) in held]
        return chips, "npu-smi's process table"
    try:
        visible = facts.environment(ctx).visible_devices
    except TargetUnreadable:
        return [], "its environment could not be read"
    from probes.target.devices import container_rows, in_container

    if visible.ids is not None and in_container(ctx.target.process):
        rows, how = container_rows(ctx.host, visible.ids, visible.raw,
                                   [c.phy_id for c in info.chips])
        return ([info.chips[i] for i in rows] if rows is not None else []), how
    if visible.ids is not None:
        chips = [info.chips[i] for i in visible.ids if 0 <= i < len(info.chips)]
        return chips, f"ASCEND_RT_VISIBLE_DEVICES={visible.raw}"
    return [], "it holds no NPU in npu-smi's process table and sets no ASCEND_RT_VISIBLE_DEVICES"


def target_affinity(ctx: Context, npus: list[PciFunction]) -> Affinity:
    """What the target's CPU affinity says about its NPUs (module docstring)."""
    proc = ctx.target.process
    if proc is None:
        return Affinity(evidence=["NUMA affinity: not judged (the target is not a process)"])
    if proc.cpus_allowed is None:
        return Affinity(evidence=[f"NUMA affinity: process {proc.pid}'s allowed CPUs unknown"])
    chips, how = chips_used(ctx)
    if not chips:
        return Affinity(evidence=[f"NUMA affinity: the NPUs process {proc.pid} uses are "
                                  f"unknown ({how})"])
    from probes.target.numa import read_cpu_nodes

    try:
        cpu_nodes = read_cpu_nodes(ctx.host)
    except NotRecorded:
        return Affinity(evidence=["NUMA affinity: /sys/devices/system/node was not recorded"])
    mine = sorted({cpu_nodes[c] for c in proc.cpus_allowed if c in cpu_nodes})
    allowed = (f"process {proc.pid} may run on CPUs {format_cpu_list(proc.cpus_allowed)} (NUMA "
               f"node {', '.join(map(str, mine)) or 'unknown'})")
    if not mine:
        return Affinity(evidence=[f"NUMA affinity: {allowed}: no CPU-to-node map"])
    by_bus = {_bus(fn.address): fn for fn in npus}
    far, evidence = [], [f"NUMA affinity: {allowed}; its NPUs from {how}"]
    for chip in chips:
        fn = by_bus.get(_bus(chip.bus_id))
        node = fn.numa_node if fn is not None else None
        name = f"NPU {chip.npu_id}" + ("" if chip.chip_id is None else f" chip {chip.chip_id}")
        evidence.append(f"{name} ({chip.bus_id or 'no bus id'}): NUMA node "
                        f"{'unknown' if node is None else node}")
        if node is not None and node not in mine:
            far.append(f"{name} on node {node}")
    if far:
        return Affinity([f"{allowed} only, far from {', '.join(far)}"], evidence)
    return Affinity(evidence=evidence)
