"""The machine's PCI functions by vendor, read once per run, and pcie.contention's front
(checks/registry.py): a machine with no Ascend function, or whose /sys/bus/pci cannot be read,
is answered here, before the link, uplink and RoCE judges and their classes are imported."""

from __future__ import annotations

from checks.context import Context
from checks.model import Finding, skipped
from probes.errors import HostError, NotRecorded
from probes.pci_ids import HUAWEI, pci_vendor_ids

NO_ASCEND_FUNCTION = "no Ascend PCI function (vendor 0x19e5) on this machine"


def vendors(ctx: Context) -> dict[str, str]:
    """address -> vendor id of every PCI function (probes.pci_ids); raises HostError."""
    return ctx.fact("pci.vendors", lambda: pci_vendor_ids(ctx.host))


def no_ascend_function(ctx: Context) -> Finding | None:
    """The check's skip without an Ascend function or a readable /sys/bus/pci, else None."""
    try:
        found = vendors(ctx)
    except NotRecorded:
        return skipped("/sys/bus/pci was not recorded", rules=("pci-unreadable",))
    except HostError as exc:
        return skipped(f"cannot read /sys/bus/pci/devices: {exc.reason}",
                       rules=("pci-unreadable",))
    if HUAWEI not in found.values():
        return skipped(NO_ASCEND_FUNCTION, rules=("no-ascend-function",))
    return None
