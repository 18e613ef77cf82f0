"""Whether the observed machine is a virtual machine, from the markers systemd-detect-virt reads.

Read, never judged: the DMI strings under `/sys/class/dmi/id/` that start with a hypervisor
vendor's name (`product_name` first, so KVM is told from QEMU), the device tree's hypervisor
node on ARM (`/proc/device-tree/hypervisor/compatible`), and the `hypervisor` CPU flag x86
kernels print in `/proc/cpuinfo`. Vendor prefixes and file order follow systemd's
`detect_vm_dmi_vendor` and `detect_vm_device_tree` (systemd/systemd `src/basic/virt.c` @
0099e5589762), less "Amazon EC2", which names bare-metal instances too; the flag is the
kernel's `X86_FEATURE_HYPERVISOR` (torvalds/linux `arch/x86/include/asm/cpufeatures.h` @
v6.6).
A machine without any marker is reported as such, not as proven bare metal.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.errors import HostError
from probes.host import Host

DMI_FILES = ("product_name", "sys_vendor", "board_vendor", "bios_vendor")
DMI_VENDORS = (
    ("KVM", "KVM"), ("OpenStack", "KVM (OpenStack)"), ("KubeVirt", "KVM (KubeVirt)"),
    ("QEMU", "QEMU"), ("VMware", "VMware"), ("VMW", "VMware"),
    ("innotek GmbH", "VirtualBox"), ("VirtualBox", "VirtualBox"), ("Xen", "Xen"),
    ("Bochs", "Bochs"), ("Parallels", "Parallels"), ("BHYVE", "bhyve"),
    ("Hyper-V", "Hyper-V"), ("Google Compute Engine", "Google Compute Engine"),
)
DEVICE_TREE_HYPERVISOR = "/proc/device-tree/hypervisor/compatible"
CPUINFO = "/proc/cpuinfo"
_READ_CAP_BYTES = 64 * 1024  # the first processor's flags come long before this


@dataclass(frozen=True, slots=True)
class VirtReading:
    """`hypervisor` names the one found ("KVM"), None when no marker was; `evidence` says
    which file said so, or which were read."""

    hypervisor: str | None
    evidence: str

    @property
    def is_vm(self) -> bool:
        return self.hypervisor is not None


def read_virt(host: Host) -> VirtReading:
    """The first marker found, in systemd's order of trust: DMI, device tree, CPU flag."""
    for name in DMI_FILES:
        path = f"/sys/class/dmi/id/{name}"
        value = _first_line(host, path)
        for prefix, hypervisor in DMI_VENDORS:
            if value is not None and value.startswith(prefix):
                return VirtReading(hypervisor, f"{path}: {value}")
    compatible = _first_line(host, DEVICE_TREE_HYPERVISOR)
    if compatible:
        return VirtReading(_device_tree_name(compatible),
                           f"{DEVICE_TREE_HYPERVISOR}: {compatible}")
    if _has_hypervisor_flag(host):
        return VirtReading("a hypervisor", f"{CPUINFO}: `hypervisor` CPU flag")
    return VirtReading(None, "no hypervisor marker in DMI, the device tree or the CPU flags")


def _device_tree_name(compatible: str) -> str:
    if compatible == "linux,kvm":
        return "KVM"
    for word, name in (("xen", "Xen"), ("vmware", "VMware")):
        if word in compatible:
            return name
    return "a hypervisor"


def _first_line(host: Host, path: str) -> str | None:
    try:
        data = host.read_bytes(path, 0, 4096)
    except HostError:
        return None
    text = data.decode("utf-8", "replace").replace("\x00", "\n")
    return text.splitlines()[0].strip() if text.strip() else None


def _has_hypervisor_flag(host: Host) -> bool:
    try:
        data = host.read_bytes(CPUINFO, 0, _READ_CAP_BYTES)
    except HostError:
        return False
    for line in data.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return "hypervisor" in value.split()
    return False
