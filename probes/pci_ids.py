"""Which PCI functions a machine has, whose they are, and which Ascend family a device id is.

Pure helpers plus one small reader (`pci_vendor_ids`: one `vendor` file per function), so a
caller can learn whether there is any Ascend function before reading links and bridges
(probes.pci). A `vendor` file that was not recorded re-raises NotRecorded: without it nobody
can tell which functions belong in the answer.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from probes.errors import HostError, NotRecorded
from probes.host import Host

HUAWEI_VENDOR_ID = "0x19e5"
SYSFS_PCI_DEVICES = "/sys/bus/pci/devices"

# From Huawei's driver scripts (hicann/driver scripts/package/custom/driver/common/scripts/
# ascend_bug_report.sh). Unknown ids map to nothing: never guess.
_FAMILY_BY_DEVICE_ID: Mapping[str, str] = {
    "d100": "Ascend 310",
    "d500": "Ascend 310P",
    "d801": "Ascend 910",
    "d802": "Ascend 910B (A2)",
    "d803": "Ascend 910_93 (A3)",
    "d806": "Ascend 950",
}

HUAWEI = "19e5"  # as normalise_id spells it

_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def normalise_id(raw: str) -> str:
    """`0x19E5\\n`, `19e5`, ` 0X19e5 ` -> `19e5` (lower-case hex digits, no prefix)."""
    text = raw.strip().lower()
    return text[2:] if text.startswith("0x") else text


def family_of(device_id: str) -> str | None:
    """Ascend family of a Huawei PCI device id (`d802`, `0xd802`, `0xD802`); None if unknown."""
    return _FAMILY_BY_DEVICE_ID.get(normalise_id(device_id))


def is_pci_address(name: str) -> bool:
    """`0000:c1:00.0` yes; `pci0000:c0`, `power`, `c1:00.0` (no domain) no."""
    return bool(_PCI_ADDRESS.match(name))


def _vendor_of(host: Host, directory: str) -> str | None:
    """The function's vendor id; NotRecorded propagates (see the module docstring)."""
    try:
        raw = host.read_text(posixpath.join(directory, "vendor"))
    except NotRecorded:
        raise
    except HostError:
        return None
    return normalise_id(raw) or None


def ascend_families(host: Host) -> dict[str, str]:
    """address -> Ascend family of every Huawei function whose device id names one.

    Huawei functions whose id is not an Ascend device (NICs, NVMe drives) are left out. A
    `device` file that was not recorded re-raises NotRecorded; one that cannot be read leaves
    its function out. Raises HostError as `pci_vendor_ids` does.
    """
    families = {}
    for address, vendor_id in pci_vendor_ids(host).items():
        if vendor_id != HUAWEI:
            continue
        try:
            raw = host.read_text(posixpath.join(SYSFS_PCI_DEVICES, address, "device"))
        except NotRecorded:
            raise
        except HostError:
            continue
        family = family_of(raw)
        if family is not None:
            families[address] = family
    return families


def pci_vendor_ids(host: Host) -> dict[str, str]:
    """address -> vendor id of every PCI function, in sysfs listing order: one small read
    each, so a caller can tell whether a full read is worth it.

    An entry without a readable `vendor` file is not a PCI function and is left out.
    Raises HostError as `read_pci_functions` does.
    """
    vendors = {}
    for address in host.list_dir(SYSFS_PCI_DEVICES):
        vendor_id = _vendor_of(host, posixpath.join(SYSFS_PCI_DEVICES, address))
        if vendor_id is not None:
            vendors[address] = vendor_id
    return vendors
