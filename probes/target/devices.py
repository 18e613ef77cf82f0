"""The NPU device nodes a container target sees: `/dev/davinci<N>` under its root.

Inside a container the runtime counts the devices the container was given, so
ASCEND_RT_VISIBLE_DEVICES (logical ids, positions among the visible devices: CANN envref_07_0028,
https://www.hiascend.com/document/detail/zh/canncommercial/800/apiref/envvar/envref_07_0028.html)
indexes those, not the rows of the host's `npu-smi info` table. `N` in `/dev/davinci<N>` is
the device's physical id on the host (Ascend Docker Runtime and the vllm-ascend `docker run`
pass `--device /dev/davinciN`: vllm-project/vllm-ascend docs/source/installation.md), which
is not necessarily an npu-smi row number either.
"""

from __future__ import annotations

import re

from probes.errors import HostError
from probes.host import Host

_NODE = re.compile(r"^davinci(\d+)$")


def davinci_nodes(host: Host) -> tuple[int, ...] | None:
    """The N of each `/dev/davinci<N>` the host (a target's root) shows, ascending; None when
    /dev cannot be listed. NotRecorded propagates."""
    try:
        names = host.list_dir("/dev")
    except HostError:
        return None
    return tuple(sorted(int(m.group(1)) for n in names if (m := _NODE.match(n))))
