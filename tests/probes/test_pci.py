from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from probes.errors import NotRecorded, PathMissing
from probes.live import LiveHost
from probes.pci import (
    PcieLink,
    bridge_addresses,
    parse_aer_counts,
    parse_link_speed_gt_s,
    parse_link_width,
    parse_numa_node,
    read_pci_functions,
)
from probes.pci_ids import ascend_families, family_of

AER_CORRECTABLE = (
    "RxErr 0\nBadTLP 2\nBadDLLP 0\nRollover 0\nTimeout 1\nNonFatalErr 0\n"
    "CorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 3\n"
)
AER_FATAL = (
    "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\n"
    "RxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\n"
    "AtomicOpBlocked 0\nTLPBlockedErr 0\nPoisonTLPBlocked 0\nTOTAL_ERR_FATAL 0\n"
)
AER_NONFATAL = AER_FATAL.replace("TOTAL_ERR_FATAL", "TOTAL_ERR_NONFATAL")


# ----------------------------------------------------------------------------- pure parsers


@pytest.mark.parametrize(
    ("device_id", "family"),
    [
        ("d100", "Ascend 310"),
        ("0xd500", "Ascend 310P"),
        ("0xD801\n", "Ascend 910"),
        ("d802", "Ascend 910B (A2)"),
        ("0xd803", "Ascend 910_93 (A3)"),
        ("d806", "Ascend 950"),
        ("d804", None),
        ("0x1234", None),
        ("", None),
    ],
)
def test_family_of(device_id: str, family: str | None) -> None:
    assert family_of(device_id) == family


@pytest.mark.parametrize(
    ("raw", "gt_s"),
    [
        ("16.0 GT/s PCIe", 16.0),
        ("8.0 GT/s PCIe\n", 8.0),
        ("8.0 GT/s", 8.0),
        ("5 GT/s", 5.0),
        ("2.5 GT/s", 2.5),
        ("32.0 GT/s PCIe", 32.0),
        ("Unknown", None),
        ("Unknown speed", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_link_speed(raw: str | None, gt_s: float | None) -> None:
    assert parse_link_speed_gt_s(raw) == gt_s


def test_parse_link_width_and_numa() -> None:
    assert parse_link_width("16\n") == 16
    assert parse_link_width("x8") == 8
    assert parse_link_width("0") == 0
    assert parse_link_width("garbage") is None
    assert parse_numa_node("1\n") == 1
    assert parse_numa_node("-1\n") is None
    assert parse_numa_node("") is None
    assert parse_numa_node(None) is None


def test_parse_aer_counts_keeps_totals_and_skips_odd_lines() -> None:
    counts = parse_aer_counts(AER_CORRECTABLE + "not a counter line\n\n")
    assert counts["BadTLP"] == 2
    assert counts["Timeout"] == 1
    assert counts["TOTAL_ERR_COR"] == 3
    assert len(counts) == 9


def test_bridge_addresses_nearest_first() -> None:
    path = "/sys/devices/pci0000:80/0000:80:02.0/0000:81:00.0/0000:82:01.0/0000:83:00.0"
    assert bridge_addresses(path) == ("0000:82:01.0", "0000:81:00.0", "0000:80:02.0")
    assert bridge_addresses("/sys/devices/pci0000:c0/0000:c1:00.0") == ()


@pytest.mark.parametrize(
    ("link", "degraded"),
    [
        (PcieLink(8.0, 8, 16.0, 16), True),
        (PcieLink(8.0, 16, 16.0, 16), True),
        (PcieLink(16.0, 8, 16.0, 16), True),
        (PcieLink(16.0, 16, 16.0, 16), False),
        (PcieLink(None, 16, 16.0, 16), None),  # speed unknown, width fine: cannot tell
        (PcieLink(None, 8, None, 16), True),  # width alone already shows it
        (PcieLink(), None),
    ],
)
def test_link_degraded(link: PcieLink, degraded: bool | None) -> None:
    assert link.degraded is degraded


# ----------------------------------------------------------------------------- fake sysfs


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _function(directory: Path, attrs: Mapping[str, str]) -> None:
    for name, value in attrs.items():
        _write(directory / name, value + "\n" if not value.endswith("\n") else value)


def _link(speed: str, width: str, max_speed: str, max_width: str) -> dict[str, str]:
    return {
        "current_link_speed": speed,
        "current_link_width": width,
        "max_link_speed": max_speed,
        "max_link_width": max_width,
    }


def _expose(root: Path, bus_dir: Path, address: str) -> None:
    """/sys/bus/pci/devices/<address> -> ../../../devices/..., a relative link like the kernel's."""
    link_dir = root / "sys/bus/pci/devices"
    link_dir.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(bus_dir, link_dir), link_dir / address)


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    devices = tmp_path / "sys/devices"
    # NPU 1: healthy link behind root port c0:00.0
    port_c0 = devices / "pci0000:c0/0000:c0:00.0"
    _function(port_c0, {"vendor": "0x19e5", "device": "0x3a30", "class": "0x060400"})
    _function(port_c0, _link("16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16"))
    npu_c1 = port_c0 / "0000:c1:00.0"
    _function(npu_c1, {"vendor": "0x19e5", "device": "0xd802", "class": "0x120000"})
    _function(npu_c1, {"subsystem_vendor": "0x19e5", "subsystem_device": "0x6000"})
    _function(npu_c1, _link("16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16"))
    _function(npu_c1, {"numa_node": "3"})
    _function(
        npu_c1,
        {
            "aer_dev_correctable": AER_CORRECTABLE,
            "aer_dev_fatal": AER_FATAL,
            "aer_dev_nonfatal": AER_NONFATAL,
        },
    )
    # NPU 2: degraded link behind a switch (root port 80:02.0 -> switch 81:00.0 -> 82:01.0)
    port_80 = devices / "pci0000:80/0000:80:02.0"
    _function(port_80, {"vendor": "0x8086", "device": "0x2030", "class": "0x060400"})
    _function(port_80, _link("16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16"))
    up_81 = port_80 / "0000:81:00.0"
    _function(up_81, {"vendor": "0x10b5", "device": "0x8747", "class": "0x060400"})
    down_82 = up_81 / "0000:82:01.0"
    _function(down_82, {"vendor": "0x10b5", "device": "0x8747", "class": "0x060400"})
    _function(down_82, _link("8.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"))
    npu_83 = down_82 / "0000:83:00.0"
    _function(npu_83, {"vendor": "0x19e5", "device": "0xd802", "class": "0x120000"})
    _function(npu_83, _link("8.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"))
    _function(npu_83, {"numa_node": "-1"})
    # A non-Huawei function with everything else in place: must be filtered out
    nic = devices / "pci0000:00/0000:00:1f.6"
    _function(nic, {"vendor": "0x8086", "device": "0x15bc", "class": "0x020000"})
    _function(nic, _link("2.5 GT/s", "1", "2.5 GT/s", "1"))
    # An unknown Huawei id: listed, but no family guessed
    other = devices / "pci0000:00/0000:00:05.0"
    _function(other, {"vendor": "0x19e5", "device": "0xa222", "class": "0x020000"})
    for directory in (port_c0, npu_c1, port_80, up_81, down_82, npu_83, nic, other):
        _expose(tmp_path, directory, directory.name)
    return tmp_path


def test_reads_huawei_functions_only(sysfs: Path) -> None:
    functions = read_pci_functions(LiveHost(root=str(sysfs), env={}))
    # sysfs listing order; the Kunpeng-style root port c0:00.0 is a Huawei function too
    assert [f.address for f in functions] == [
        "0000:00:05.0",
        "0000:83:00.0",
        "0000:c0:00.0",
        "0000:c1:00.0",
    ]
    assert all(f.vendor_id == "19e5" for f in functions)


def test_ascend_families_leave_out_other_huawei_functions(sysfs: Path) -> None:
    # the Kunpeng root port (0x3a30) and the unknown Huawei id (0xa222) are not NPUs
    assert ascend_families(LiveHost(root=str(sysfs), env={})) == {
        "0000:83:00.0": "Ascend 910B (A2)",
        "0000:c1:00.0": "Ascend 910B (A2)",
    }


def test_all_vendors_when_vendor_is_none(sysfs: Path) -> None:
    functions = read_pci_functions(LiveHost(root=str(sysfs), env={}), vendor=None)
    assert len(functions) == 8
    nic = next(f for f in functions if f.address == "0000:00:1f.6")
    assert nic.vendor_id == "8086"
    assert nic.family is None
    assert nic.link.current_speed_gt_s == 2.5
    assert nic.link_degraded is False


def test_healthy_npu(sysfs: Path) -> None:
    npu = next(
        f
        for f in read_pci_functions(LiveHost(root=str(sysfs), env={}))
        if f.address == "0000:c1:00.0"
    )
    assert npu.device_id == "d802"
    assert npu.family == "Ascend 910B (A2)"
    assert npu.class_code == "120000"
    assert npu.subsystem_vendor_id == "19e5"
    assert npu.subsystem_device_id == "6000"
    assert npu.numa_node == 3
    assert npu.link == PcieLink(16.0, 16, 16.0, 16, "16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16")
    assert npu.link_degraded is False
    assert set(npu.aer) == {"aer_dev_correctable", "aer_dev_fatal", "aer_dev_nonfatal"}
    assert npu.aer["aer_dev_correctable"]["TOTAL_ERR_COR"] == 3
    assert npu.aer["aer_dev_correctable"]["BadTLP"] == 2
    assert npu.aer["aer_dev_fatal"]["TOTAL_ERR_FATAL"] == 0
    assert npu.aer["aer_dev_nonfatal"]["TOTAL_ERR_NONFATAL"] == 0
    assert npu.resolved_path == "/sys/devices/pci0000:c0/0000:c0:00.0/0000:c1:00.0"
    assert [p.address for p in npu.parents] == ["0000:c0:00.0"]
    port = npu.parents[0]
    assert (port.vendor_id, port.device_id) == ("19e5", "3a30")
    assert port.link.max_width == 16
    assert npu.not_recorded == ()


def test_degraded_npu_behind_a_switch(sysfs: Path) -> None:
    npu = next(
        f
        for f in read_pci_functions(LiveHost(root=str(sysfs), env={}))
        if f.address == "0000:83:00.0"
    )
    assert npu.link.current_speed_gt_s == 8.0
    assert npu.link.current_width == 8
    assert npu.link.max_speed_gt_s == 16.0
    assert npu.link.max_width == 16
    assert npu.link_degraded is True
    assert npu.numa_node is None  # -1 in sysfs
    assert npu.aer == {}  # no aer files: absent, not an error
    assert npu.subsystem_vendor_id is None
    assert [p.address for p in npu.parents] == ["0000:82:01.0", "0000:81:00.0", "0000:80:02.0"]
    downstream, upstream, root_port = npu.parents
    assert downstream.link.degraded is True
    assert upstream.link == PcieLink()  # the switch upstream port has no link files here
    assert upstream.vendor_id == "10b5"
    assert root_port.link.degraded is False


def test_unknown_huawei_id_gets_no_family(sysfs: Path) -> None:
    other = next(
        f
        for f in read_pci_functions(LiveHost(root=str(sysfs), env={}))
        if f.address == "0000:00:05.0"
    )
    assert other.device_id == "a222"
    assert other.family is None
    assert other.link_degraded is None


def test_no_sysfs_is_path_missing_not_empty(tmp_path: Path) -> None:
    with pytest.raises(PathMissing):
        read_pci_functions(LiveHost(root=str(tmp_path), env={}))


def test_empty_sysfs_is_empty(tmp_path: Path) -> None:
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    assert read_pci_functions(LiveHost(root=str(tmp_path), env={})) == ()


class _Unrecorded(LiveHost):
    """A LiveHost that answers NotRecorded for chosen paths, like a SnapshotHost would."""

    def __init__(self, root: str, missing: set[str]) -> None:
        super().__init__(root=root, env={})
        self.missing = missing

    def read_text(self, path: str) -> str:
        if path in self.missing:
            raise NotRecorded(path)
        return super().read_text(path)

    def realpath(self, path: str) -> str:
        if path in self.missing:
            raise NotRecorded(path)
        return super().realpath(path)

    def list_dir(self, path: str) -> list[str]:
        if path in self.missing:
            raise NotRecorded(path)
        return super().list_dir(path)


def test_not_recorded_attribute_is_marked(sysfs: Path) -> None:
    base = "/sys/bus/pci/devices/0000:c1:00.0"
    host = _Unrecorded(str(sysfs), {f"{base}/current_link_speed", f"{base}/aer_dev_fatal", base})
    npu = next(f for f in read_pci_functions(host) if f.address == "0000:c1:00.0")
    assert npu.link.current_speed_gt_s is None
    assert npu.link_degraded is None  # width is known equal, speed is not: cannot tell
    assert "aer_dev_fatal" not in npu.aer
    assert npu.parents == ()
    assert npu.resolved_path is None
    assert set(npu.not_recorded) == {"current_link_speed", "aer_dev_fatal", "realpath"}


def test_not_recorded_listing_or_vendor_reraises(sysfs: Path) -> None:
    with pytest.raises(NotRecorded):
        read_pci_functions(_Unrecorded(str(sysfs), {"/sys/bus/pci/devices"}))
    with pytest.raises(NotRecorded):
        read_pci_functions(_Unrecorded(str(sysfs), {"/sys/bus/pci/devices/0000:83:00.0/vendor"}))
