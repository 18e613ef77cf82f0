"""devices.nodes' front (checks/registry.py): a machine with no /dev/davinci* node and no usable
npu-smi is not an NPU machine, and one whose /dev cannot be listed is not judged; both are said
here, before the node rules and their classes (checks.builtin.devices) are imported."""

from __future__ import annotations

from checks.builtin import facts
from checks.context import Context
from checks.model import Finding, skipped
from probes.errors import HostError, NotRecorded


def not_an_npu_machine(ctx: Context) -> Finding | None:
    """The check's skip without device nodes or npu-smi, or without a /dev listing; else None."""
    try:
        nodes = facts.device_nodes(ctx)
    except NotRecorded:
        return skipped("the /dev listing was not recorded", rules=("dev-unreadable",))
    except HostError as exc:
        return skipped(f"cannot list /dev: {exc.reason}", rules=("dev-unreadable",))
    reading = facts.npu(ctx)
    if not nodes.davinci and reading.is_error:
        return skipped("no /dev/davinci* nodes and no usable npu-smi: not an NPU machine",
                       reading.document.get("error", ""), rules=("not-an-npu-machine",))
    return None
