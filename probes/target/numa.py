"""Which NUMA node each CPU belongs to: /sys/devices/system/node/node<N>/cpulist (the kernel's
sysfs-devices-node ABI document), read through a Host so recordings replay it."""

from __future__ import annotations

import re

from probes.errors import HostError, NotRecorded
from probes.host import Host
from probes.target.proc import parse_cpu_list

NODES = "/sys/devices/system/node"
_NODE = re.compile(r"^node(\d+)$")


def read_cpu_nodes(host: Host) -> dict[int, int]:
    """CPU number -> NUMA node. Empty when the machine shows no NUMA nodes. NotRecorded
    propagates; a node whose cpulist cannot be read is left out."""
    try:
        names = host.list_dir(NODES)
    except NotRecorded:
        raise
    except HostError:
        return {}
    nodes: dict[int, int] = {}
    for name in names:
        match = _NODE.match(name)
        if not match:
            continue
        try:
            cpus = parse_cpu_list(host.read_text(f"{NODES}/{name}/cpulist"))
        except NotRecorded:
            raise
        except (HostError, ValueError):
            continue
        nodes.update({cpu: int(match.group(1)) for cpu in cpus})
    return nodes
