"""Parser of pasted `lspci` lines (plain or `-nn`, with or without `-D` domains).

    c1:00.0 Processing accelerators: Huawei Technologies Co., Ltd. Device d802 (rev 20)
    0000:c1:00.0 Processing accelerators [1200]: Huawei Technologies Co., Ltd.
        Device [19e5:d802] (rev 20)                 (-nn -D; one line in the real output)

pci.ids has no names for the Ascend devices (pciutils/pciids @ c1c12547), so lspci prints
`Device <id>`; that is what lets the vendor name and the device id be split apart. When
lspci knows a device name the split is ambiguous, and vendor name / device id stay None
rather than being guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.errors import ParseError
from probes.pci_ids import HUAWEI, family_of

# The name pci.ids gives vendor 0x19e5, as lspci prints it (corpus #017, #030).
HUAWEI_VENDOR_NAME = "Huawei Technologies Co., Ltd."

_LINE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4,}):)?"
    r"(?P<bus>[0-9a-fA-F]{2}):(?P<slot>[0-9a-fA-F]{2})\.(?P<function>[0-7])\s+"
    r"(?P<class_name>[^:\[]+?)(?:\s*\[(?P<class_code>[0-9a-fA-F]{4})\])?:\s+"
    r"(?P<description>.*?)\s*$"
)
_REVISION = re.compile(r"\s*\(rev (?P<revision>[0-9a-fA-F]{2})\)$")
_PROG_IF = re.compile(r"\s*\(prog-if [0-9a-fA-F]{2}(?: \[[^\]]*\])?\)$")
# `Device d802` (plain) or `Device [19e5:d802]` (-nn): the unnamed-device forms.
_UNNAMED_DEVICE = re.compile(
    r"^(?P<vendor_name>.+?)\s+Device\s+"
    r"(?:\[(?P<vendor_id>[0-9a-fA-F]{4}):(?P<nn_device_id>[0-9a-fA-F]{4})\]"
    r"|(?P<device_id>[0-9a-fA-F]{4}))$"
)
# `-nn` with a named device: `... Some Name [abcd:1234]`.
_NN_IDS = re.compile(r"\s*\[(?P<vendor_id>[0-9a-fA-F]{4}):(?P<device_id>[0-9a-fA-F]{4})\]$")


@dataclass(frozen=True)
class LspciDevice:
    """One device line of lspci output."""

    line_no: int  # 1-based, in the pasted text
    address: str  # as printed, lower-case: `c1:00.0` or `0000:c1:00.0`
    domain: str | None  # `0000` when lspci printed one (-D)
    bus: str
    slot: str
    function: int
    class_name: str  # `Processing accelerators`
    class_code: str | None  # `1200` with -nn
    description: str  # everything after the class, revision removed
    vendor_name: str | None
    vendor_id: str | None  # only with -nn
    device_id: str | None  # lower-case hex: `d802`
    revision: str | None  # `20`

    @property
    def is_huawei(self) -> bool:
        return self.vendor_id == HUAWEI or self.vendor_name == HUAWEI_VENDOR_NAME

    @property
    def family(self) -> str | None:
        """Ascend family by device id, only for Huawei devices (ids of other vendors clash)."""
        if self.device_id is None or not self.is_huawei:
            return None
        return family_of(self.device_id)

    @property
    def sysfs_address(self) -> str:
        """The address as /sys/bus/pci/devices names it; lspci omits domain 0000 by default."""
        return self.address if self.domain is not None else f"0000:{self.address}"


@dataclass(frozen=True)
class LspciListing:
    """The devices of an `lspci` listing and the lines that were not device lines."""

    devices: tuple[LspciDevice, ...]
    ignored_lines: tuple[str, ...] = ()  # non-empty lines that are not device lines


def parse_lspci_line(line: str, line_no: int = 1) -> LspciDevice | None:
    """One lspci line -> LspciDevice; None when the line is not a device line."""
    match = _LINE.match(line.strip())
    if match is None:
        return None
    description = match["description"]
    revision = None
    rev = _REVISION.search(description)
    if rev is not None:
        revision = rev["revision"].lower()
        description = description[: rev.start()]
    description = _PROG_IF.sub("", description)
    vendor_name, vendor_id, device_id = _split_vendor_device(description)
    domain = match["domain"].lower() if match["domain"] else None
    bus, slot = match["bus"].lower(), match["slot"].lower()
    address = f"{bus}:{slot}.{match['function']}"
    return LspciDevice(
        line_no=line_no,
        address=f"{domain}:{address}" if domain else address,
        domain=domain,
        bus=bus,
        slot=slot,
        function=int(match["function"]),
        class_name=match["class_name"].strip(),
        class_code=match["class_code"].lower() if match["class_code"] else None,
        description=description,
        vendor_name=vendor_name,
        vendor_id=vendor_id,
        device_id=device_id,
        revision=revision,
    )


def _split_vendor_device(description: str) -> tuple[str | None, str | None, str | None]:
    """(vendor name, vendor id, device id) from the text after the class; None where unknown."""
    unnamed = _UNNAMED_DEVICE.match(description)
    if unnamed is not None:
        device_id = unnamed["device_id"] or unnamed["nn_device_id"]
        vendor_id = unnamed["vendor_id"].lower() if unnamed["vendor_id"] else None
        return unnamed["vendor_name"], vendor_id, device_id.lower()
    ids = _NN_IDS.search(description)
    if ids is not None:
        return None, ids["vendor_id"].lower(), ids["device_id"].lower()
    return None, None, None


def parse_lspci(text: str, what: str = "lspci output") -> LspciListing:
    """Every device line of a pasted lspci output (prompts and other noise kept aside).

    Empty text is a valid answer (`lspci | grep d802` on a machine without one). Raises
    ParseError when there is text but not one device line in it.
    """
    devices = []
    ignored = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        device = parse_lspci_line(line, line_no)
        if device is None:
            ignored.append(line)
        else:
            devices.append(device)
    if ignored and not devices:
        raise ParseError(
            what,
            "no lspci device line found (expected `bus:slot.fn Class: Vendor Device id`)",
            line_no=1,
        )
    return LspciListing(tuple(devices), tuple(ignored))
