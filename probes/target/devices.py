"""The NPU device nodes a container target sees (`/dev/davinci<N>` under its root), and which
chips of the host's `npu-smi info` table its ASCEND_RT_VISIBLE_DEVICES names.

Inside a container the runtime counts the devices the container was given, so
ASCEND_RT_VISIBLE_DEVICES (logical ids, positions among the visible devices: CANN envref_07_0028,
https://www.hiascend.com/document/detail/zh/canncommercial/800/apiref/envvar/envref_07_0028.html)
indexes those, not the rows of the host's table. The container numbers the devices it was given
from 0 in the order of their host ids: host NPUs 3..7 mounted are 0..4 inside, and
ASCEND_RT_VISIBLE_DEVICES=2 there is host device 5 (vllm-project/vllm-ascend#16256,
vllm-project/vllm-ascend#16309). `N` in `/dev/davinci<N>` is the chip's physical id (Ascend
Docker Runtime and the vllm-ascend `docker run` pass `--device /dev/davinciN`:
vllm-project/vllm-ascend docs/source/installation.md; "/dev/davinci0 means physical id 0":
https://hiascend.com/document/detail/zh/300Vtest/300VG/300V_0049.html), which npu-smi prints as
`Phy-ID` where its table has that column (A3). Without that column nothing we have ties a
physical id to a row, so the chips are matched only when the container sees every device of the
host (`davinci0` .. `davinci<n-1>` for the n rows: its numbering is then the host's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from probes.errors import HostError, NotRecorded
from probes.host import Host

if TYPE_CHECKING:
    from probes.target.parts import ProcessInfo

_NODE = re.compile(r"^davinci(\d+)$")
UNMAPPED = "not judged: cannot map container devices to host chips"


def in_container(process: ProcessInfo | None) -> bool:
    """A process in another mount namespace than the doctor's: a container, whose
    ASCEND_RT_VISIBLE_DEVICES counts its own devices."""
    return process is not None and process.mount_ns == "other"


def davinci_nodes(host: Host) -> tuple[int, ...] | None:
    """The N of each `/dev/davinci<N>` the host (a target's root) shows, ascending; None when
    /dev cannot be listed. NotRecorded propagates."""
    try:
        names = host.list_dir("/dev")
    except HostError:
        return None
    return tuple(sorted(int(m.group(1)) for n in names if (m := _NODE.match(n))))


def container_rows(host: Host, visible_ids: tuple[int, ...] | None, raw: str | None,
                   phy_ids: Sequence[int | None]) -> tuple[tuple[int, ...] | None, str]:
    """Positions in npu-smi's table (whose rows carry `phy_ids`) of the chips a container
    target uses, and how that is known; None positions and why when they cannot be known.
    `visible_ids` None: ASCEND_RT_VISIBLE_DEVICES is unset, every device of the container."""
    try:
        nodes = davinci_nodes(host)
    except NotRecorded:
        nodes = None
    setting = "with ASCEND_RT_VISIBLE_DEVICES unset" if raw is None \
        else f"ASCEND_RT_VISIBLE_DEVICES={raw}"
    if nodes is None:
        return None, f"{setting} inside a container: its /dev could not be listed; {UNMAPPED}"
    seen = ", ".join(f"/dev/davinci{n}" for n in nodes) or "no /dev/davinci node"
    ids = range(len(nodes)) if visible_ids is None else visible_ids
    physical = [nodes[i] for i in ids if 0 <= i < len(nodes)]
    if phy_ids and all(p is not None for p in phy_ids):
        rows = tuple(phy_ids.index(n) for n in physical if n in phy_ids)
        return rows, (f"{setting} inside a container that sees {seen}: container device i is "
                      "its i-th node, /dev/davinci<N> the chip npu-smi shows with Phy-ID N")
    if nodes == tuple(range(len(phy_ids))):
        return tuple(physical), (f"{setting} inside a container that sees every device of the "
                                 f"host ({seen}): its numbering is the host's")
    if raw is None:
        return None, (f"inside a container that sees {seen}; npu-smi prints no Phy-ID to tie "
                      f"them to its rows: {UNMAPPED}")
    return None, (f"{setting} inside a container indexes the container's own devices (it sees "
                  f"{seen}), not the rows of the host's npu-smi table, and npu-smi prints no "
                  f"Phy-ID to tie them to its rows: {UNMAPPED}")
