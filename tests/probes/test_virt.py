"""probes.virt: the hypervisor markers systemd-detect-virt reads, under a fake root."""

from __future__ import annotations

import pytest

from probes.live import LiveHost
from probes.virt import read_virt
from tests.conftest import FakeRoot


def host(fake_root: FakeRoot) -> LiveHost:
    return LiveHost(root=str(fake_root.path), env={})


@pytest.mark.parametrize(("path", "value", "hypervisor"), [
    ("/sys/class/dmi/id/product_name", "KVM Virtual Machine\n", "KVM"),
    ("/sys/class/dmi/id/sys_vendor", "QEMU\n", "QEMU"),
    ("/sys/class/dmi/id/sys_vendor", "OpenStack Foundation\n", "KVM (OpenStack)"),
    ("/sys/class/dmi/id/bios_vendor", "Xen\n", "Xen"),
])
def test_a_dmi_vendor_prefix_names_the_hypervisor(fake_root: FakeRoot, path: str, value: str,
                                                   hypervisor: str) -> None:
    fake_root.file(path, value)
    reading = read_virt(host(fake_root))
    assert reading.is_vm and reading.hypervisor == hypervisor
    assert reading.evidence == f"{path}: {value.strip()}"


def test_a_bare_metal_server_has_no_marker(fake_root: FakeRoot) -> None:
    fake_root.file("/sys/class/dmi/id/product_name", "Atlas 800I A2\n")
    fake_root.file("/sys/class/dmi/id/sys_vendor", "Huawei\n")
    fake_root.file("/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu sse sse2 avx2\n")
    reading = read_virt(host(fake_root))
    assert not reading.is_vm and "no hypervisor marker" in reading.evidence


def test_the_arm_device_tree_node_and_the_x86_flag(fake_root: FakeRoot) -> None:
    fake_root.file("/proc/device-tree/hypervisor/compatible", b"linux,kvm\x00")
    assert read_virt(host(fake_root)).hypervisor == "KVM"
    other = FakeRoot(fake_root.path.parent / "x86")
    other.path.mkdir()
    other.file("/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu sse hypervisor avx2\n")
    assert read_virt(host(other)).hypervisor == "a hypervisor"


def test_nothing_readable_is_no_marker(fake_root: FakeRoot) -> None:
    assert read_virt(host(fake_root)).hypervisor is None
