"""PCI functions as sysfs shows them: ids, family, PCIe link, NUMA node, AER counters, bridges.

Pure parsers (`parse_link_speed_gt_s`, `parse_aer_counts`, `bridge_addresses`, ...) plus
readers that go through a Host: `read_pci_functions(host)`, and `read_pci_function` for a
caller that looked at the vendors first (`probes.pci_ids.pci_vendor_ids`).

Error policy of the reader:
- the listing of /sys/bus/pci/devices is the question everything else hangs on: any HostError
  there propagates (PathMissing = this machine or tree has no sysfs PCI view, which is not the
  same answer as "no Huawei functions" = an empty tuple; NotRecorded = the recording cannot say).
- a `vendor` file that was not recorded also re-raises NotRecorded: without it the reader cannot
  tell which functions belong in the answer, and a partial list must never pass for a full one.
- every other attribute that is missing or unreadable becomes None; one that a SnapshotHost
  did not record also becomes None *and* its file name is listed in `not_recorded`, so a check
  can report `skip` (not recorded) instead of treating it as absent on the machine.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from probes.errors import HostError, NotRecorded
from probes.host import Host
from probes.pci_ids import (
    HUAWEI,
    HUAWEI_VENDOR_ID,
    SYSFS_PCI_DEVICES,
    family_of,
    is_pci_address,
    normalise_id,
    pci_vendor_ids,
)

AER_FILES = ("aer_dev_correctable", "aer_dev_fatal", "aer_dev_nonfatal")

_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s\b")
_WIDTH = re.compile(r"^\s*x?(\d+)\s*$")


# ----------------------------------------------------------------------------- pure parsers


def parse_link_speed_gt_s(raw: str | None) -> float | None:
    """`16.0 GT/s PCIe`, `8.0 GT/s`, `5 GT/s`, `2.5 GT/s` -> GT/s; `Unknown`, None -> None."""
    if raw is None:
        return None
    match = _SPEED.match(raw)
    return float(match.group(1)) if match else None


def parse_link_width(raw: str | None) -> int | None:
    """`16`, `x8` -> lanes. Kernels print a bare decimal; anything else -> None."""
    if raw is None:
        return None
    match = _WIDTH.match(raw)
    return int(match.group(1)) if match else None


def parse_numa_node(raw: str | None) -> int | None:
    """`0`, `3` -> node; `-1` (no NUMA affinity reported) and unparsable text -> None."""
    if raw is None:
        return None
    try:
        node = int(raw.strip())
    except ValueError:
        return None
    return node if node >= 0 else None


def parse_aer_counts(text: str) -> dict[str, int]:
    """`RxErr 0\\nBadTLP 3\\nTOTAL_ERR_COR 3\\n` -> {"RxErr": 0, "BadTLP": 3, "TOTAL_ERR_COR": 3}.

    Lines that are not `NAME <integer>` are skipped: the set of names differs by kernel version
    and the counters are what matters.
    """
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts


def bridge_addresses(resolved_path: str) -> tuple[str, ...]:
    """PCI addresses above the device in its resolved sysfs path, nearest bridge first.

    `/sys/devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0` -> (`0000:c0:00.0`,). The host bridge
    component (`pci0000:c0`) is not a PCI function and is skipped.
    """
    parts = [p for p in resolved_path.split("/") if p]
    above = [p for p in parts[:-1] if is_pci_address(p)]
    return tuple(reversed(above))


# ----------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class PcieLink:
    """Link state as sysfs reports it; parsed values are None when the file is missing/odd."""

    current_speed_gt_s: float | None = None
    current_width: int | None = None
    max_speed_gt_s: float | None = None
    max_width: int | None = None
    current_speed_raw: str | None = None
    current_width_raw: str | None = None
    max_speed_raw: str | None = None
    max_width_raw: str | None = None

    @property
    def degraded(self) -> bool | None:
        """True when current speed or width is below max; None when that cannot be told.

        Only an observation: links of idle devices may train down to save power, so judging
        belongs to the checks, not here.
        """
        pairs = (
            (self.current_speed_gt_s, self.max_speed_gt_s),
            (self.current_width, self.max_width),
        )
        known = [(cur, top) for cur, top in pairs if cur is not None and top is not None]
        if any(cur < top for cur, top in known):
            return True
        return False if len(known) == len(pairs) else None


@dataclass(frozen=True)
class PciBridge:
    """One upstream function (root port or switch port) on the path to a device."""

    address: str
    vendor_id: str | None = None
    device_id: str | None = None
    link: PcieLink = field(default_factory=PcieLink)
    not_recorded: tuple[str, ...] = ()  # sysfs attribute files a recording did not hold


@dataclass(frozen=True)
class PciFunction:
    """One PCI function from /sys/bus/pci/devices/<address>."""

    address: str  # `0000:c1:00.0`, as sysfs names it
    vendor_id: str  # lower-case hex without prefix: `19e5`
    device_id: str | None
    class_code: str | None  # `120000` (class 0x12 subclass 0x00 = Processing accelerators)
    family: str | None
    link: PcieLink = field(default_factory=PcieLink)
    numa_node: int | None = None
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    aer: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # aer file -> counters
    parents: tuple[PciBridge, ...] = ()  # nearest bridge first, root port last
    resolved_path: str | None = None
    not_recorded: tuple[str, ...] = ()  # attribute files (or `realpath`) a recording lacked

    @property
    def link_degraded(self) -> bool | None:
        return self.link.degraded

    @property
    def is_huawei(self) -> bool:
        return self.vendor_id == HUAWEI


# ----------------------------------------------------------------------------- reader


class _AttributeReader:
    """Reads attribute files of one sysfs directory, remembering which were not recorded."""

    def __init__(self, host: Host, directory: str) -> None:
        self._host = host
        self._dir = directory
        self.not_recorded: list[str] = []

    def text(self, name: str) -> str | None:
        path = posixpath.join(self._dir, name)
        try:
            return self._host.read_text(path).strip()
        except NotRecorded:
            self.not_recorded.append(name)
            return None
        except HostError:
            return None

    def id(self, name: str) -> str | None:
        raw = self.text(name)
        return normalise_id(raw) if raw else None

    def link(self) -> PcieLink:
        cur_speed = self.text("current_link_speed")
        cur_width = self.text("current_link_width")
        max_speed = self.text("max_link_speed")
        max_width = self.text("max_link_width")
        return PcieLink(
            current_speed_gt_s=parse_link_speed_gt_s(cur_speed),
            current_width=parse_link_width(cur_width),
            max_speed_gt_s=parse_link_speed_gt_s(max_speed),
            max_width=parse_link_width(max_width),
            current_speed_raw=cur_speed,
            current_width_raw=cur_width,
            max_speed_raw=max_speed,
            max_width_raw=max_width,
        )


def _read_bridge(host: Host, directory: str, address: str) -> PciBridge:
    attrs = _AttributeReader(host, directory)
    return PciBridge(
        address=address,
        vendor_id=attrs.id("vendor"),
        device_id=attrs.id("device"),
        link=attrs.link(),
        not_recorded=tuple(attrs.not_recorded),
    )


def _read_parents(host: Host, resolved: str) -> tuple[PciBridge, ...]:
    # Bridges are read at their own directory inside the resolved path: that directory is
    # where the device's path says they are, no second symlink lookup needed.
    bridges = []
    for address in bridge_addresses(resolved):
        head, _, _ = resolved.partition("/" + address + "/")
        bridges.append(_read_bridge(host, posixpath.join(head, address), address))
    return tuple(bridges)


def read_pci_function(host: Host, address: str, vendor_id: str) -> PciFunction:
    """One function's attributes, links, AER counters and parent bridges."""
    directory = posixpath.join(SYSFS_PCI_DEVICES, address)
    attrs = _AttributeReader(host, directory)
    device_id = attrs.id("device")
    aer = {}
    for name in AER_FILES:
        text = attrs.text(name)
        if text is not None:
            aer[name] = parse_aer_counts(text)
    resolved: str | None
    try:
        resolved = host.realpath(directory)
    except NotRecorded:
        attrs.not_recorded.append("realpath")
        resolved = None
    parents = _read_parents(host, resolved) if resolved else ()
    return PciFunction(
        address=address,
        vendor_id=vendor_id,
        device_id=device_id,
        class_code=attrs.id("class"),
        family=family_of(device_id) if device_id and vendor_id == HUAWEI else None,
        link=attrs.link(),
        numa_node=parse_numa_node(attrs.text("numa_node")),
        subsystem_vendor_id=attrs.id("subsystem_vendor"),
        subsystem_device_id=attrs.id("subsystem_device"),
        aer=aer,
        parents=parents,
        resolved_path=resolved,
        not_recorded=tuple(attrs.not_recorded),
    )


def read_pci_functions(
    host: Host, vendor: str | None = HUAWEI_VENDOR_ID
) -> tuple[PciFunction, ...]:
    """Every PCI function of `vendor` (all vendors when None), in sysfs listing order.

    Raises HostError (PathMissing, NotRecorded, ...) when /sys/bus/pci/devices cannot be listed
    or a vendor file was not recorded; see the module docstring.
    """
    wanted = normalise_id(vendor) if vendor is not None else None
    return tuple(read_pci_function(host, address, vendor_id)
                 for address, vendor_id in pci_vendor_ids(host).items()
                 if wanted is None or vendor_id == wanted)
