"""devices.nodes and pcie.contention on fake machines (logging.level: test_logging_check.py);
pcie.contention's RoCE ports with hccn_tool answering the recorded vendor lines."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import CORPUS_DIR, FakeRoot
from machines import pci_function

from checks.builtin.devices import device_nodes
from checks.builtin.pcie import pcie_contention, port_ids
from checks.context import Context
from checks.policy import load_policy
from probes.hccn import HCCN_CONF, HCCN_TOOL
from probes.host import CommandResult
from probes.live import LiveHost
from probes.npu_smi import parse_info
from probes.recording.recorder import RecordingHost
from probes.recording.snapshot import SnapshotHost

PATH = "/usr/local/bin:/usr/bin:/bin"
A2_INFO = CORPUS_DIR / "npu-smi" / "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"


def ctx_for(root: FakeRoot, env: dict[str, str] | None = None) -> Context:
    return Context(LiveHost(root=str(root.path), env={"PATH": PATH, **(env or {})}),
                   load_policy())


def with_npu_smi(root: FakeRoot) -> None:
    root.script("/usr/local/bin/npu-smi", f'cat "{A2_INFO}"\n')


def with_nodes(root: FakeRoot, count: int, shared: tuple[str, ...] = (
        "davinci_manager", "devmm_svm", "hisi_hdc")) -> None:
    root.dir("/dev")
    for n in range(count):
        root.file(f"/dev/davinci{n}")
    for name in shared:
        root.file(f"/dev/{name}")


# --- devices.nodes ----------------------------------------------------------------------------

def test_nodes_all_present_but_plain_files_warn(fake_root: FakeRoot) -> None:
    with_npu_smi(fake_root)
    with_nodes(fake_root, 8)
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "warn" and finding.rules == ("not-a-character-device",)
    assert "not character devices" in finding.summary


def test_missing_manager_nodes_fail_naming_them(fake_root: FakeRoot) -> None:
    with_npu_smi(fake_root)
    with_nodes(fake_root, 8, shared=("davinci_manager",))
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "fail" and finding.rules == ("missing-shared-node",)
    assert "/dev/devmm_svm" in finding.summary and "/dev/hisi_hdc" in finding.summary
    assert "--device /dev/devmm_svm" in finding.remedy


def test_fewer_davinci_nodes_than_chips_fail(fake_root: FakeRoot) -> None:
    with_npu_smi(fake_root)
    with_nodes(fake_root, 2)
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "fail" and "6 of 8 /dev/davinci<N>" in finding.summary
    assert finding.rules == ("missing-davinci-node",)


def test_no_npu_machine_skips(fake_root: FakeRoot) -> None:
    fake_root.dir("/dev")
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "skip" and "not an NPU machine" in finding.summary
    assert finding.rules == ("not-an-npu-machine",)


def test_an_unlistable_dev_skips(fake_root: FakeRoot) -> None:
    fake_root.file("/dev", "a file where /dev should be a directory")
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "skip" and finding.summary.startswith("cannot list /dev")
    assert finding.rules == ("dev-unreadable",)


def test_real_character_devices_pass(fake_root: FakeRoot) -> None:
    with_npu_smi(fake_root)
    dev = fake_root.dir("/dev")
    names = [f"davinci{n}" for n in range(8)] + ["davinci_manager", "devmm_svm", "hisi_hdc"]
    try:
        for name in names:  # the same major/minor as /dev/null: harmless, but a real char device
            os.mknod(dev / name, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "pass", finding
    assert "8 davinci nodes" in finding.summary


def char_nodes(root: FakeRoot, names: list[str]) -> None:
    dev = root.dir("/dev")
    try:
        for name in names:  # the same major/minor as /dev/null: harmless, but a real char device
            os.mknod(dev / name, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")


def ascend_950(root: FakeRoot, cards: int = 2) -> None:
    for n in range(cards):
        pci_function(root, [f"0000:{n}0:00.0", f"0000:{n}1:00.0"], "0x19e5", "0xd806",
                     "0x120000")


def test_ascend_950_needs_no_devmm_svm(fake_root: FakeRoot) -> None:
    ascend_950(fake_root)
    char_nodes(fake_root, ["davinci0", "davinci1", "davinci_manager", "hisi_hdc"])
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "pass", finding
    assert "(Ascend 950)" in finding.summary and "devmm_svm" not in finding.summary
    assert "NPU family Ascend 950 from the PCI device ids of 2 functions" in finding.evidence


def test_ascend_950_without_hisi_hdc_fails(fake_root: FakeRoot) -> None:
    ascend_950(fake_root)
    char_nodes(fake_root, ["davinci0", "davinci1", "davinci_manager"])
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "fail"
    assert finding.summary == "missing /dev/hisi_hdc (Ascend 950)"
    assert "--device /dev/devmm_svm" not in finding.remedy


def test_a2_by_pci_id_still_needs_devmm_svm(fake_root: FakeRoot) -> None:
    for bus in ("01", "02"):
        pci_function(fake_root, [f"0000:{bus[0]}0:00.0", f"0000:{bus}:00.0"], *NPU)
    # a Huawei NIC is not an NPU: it names no family
    pci_function(fake_root, ["0000:30:00.0", "0000:31:00.0"], "0x19e5", "0x1822", "0x020000")
    char_nodes(fake_root, ["davinci0", "davinci1", "davinci_manager", "hisi_hdc"])
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "fail"
    assert finding.summary == "missing /dev/devmm_svm (Ascend 910/910B/910_93)"
    assert "NPU family Ascend 910B (A2) from the PCI device ids of 2 functions" in \
        finding.evidence


def test_family_from_npu_smi_names_without_pci(fake_root: FakeRoot) -> None:
    with_npu_smi(fake_root)
    char_nodes(fake_root, [f"davinci{n}" for n in range(8)] + ["davinci_manager", "hisi_hdc"])
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "fail" and "/dev/devmm_svm" in finding.summary
    assert "NPU family from npu-smi chip names 910B4" in finding.evidence


def test_unknown_family_says_so_and_warns_for_the_common_nodes(fake_root: FakeRoot) -> None:
    char_nodes(fake_root, ["davinci0", "davinci_manager", "hisi_hdc"])
    fake_root.script("/usr/local/bin/npu-smi", "echo 'dcmi module initialize failed' >&2\n"
                     "exit 1\n")
    finding = device_nodes(ctx_for(fake_root))
    assert finding.status == "warn" and finding.rules == ("missing-usual-node",), finding
    assert "missing /dev/devmm_svm (NPU family unknown" in finding.summary
    assert any(e.startswith("NPU family unknown") for e in finding.evidence)


@pytest.mark.parametrize(("name", "rule"), [
    ("910B4", "910"), ("Ascend910", "910"), ("910A", "910"), ("310P3", "310P"),
    ("310B4", "310B"), ("310", "310"), ("Ascend950PR", "950"), ("XPU9", None),
])
def test_chip_names_map_to_node_rules(name: str, rule: str | None) -> None:
    from checks.builtin.devices import rule_of_chip_name

    assert rule_of_chip_name(name) == rule


# --- pcie.contention --------------------------------------------------------------------------

NPU = ("0x19e5", "0xd802", "0x120000")


def test_healthy_npu_links_pass_and_show_numa(fake_root: FakeRoot) -> None:
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU, numa="1")
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "pass"
    assert finding.rules == ()
    assert any("NUMA node 1" in e for e in finding.evidence)


def test_link_trained_at_x8_warns(fake_root: FakeRoot) -> None:
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU,
                 link=("16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"))
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "warn"
    assert "0000:01:00.0 link trained at 16.0 GT/s PCIe x8 of 16.0 GT/s PCIe x16" in finding.summary
    assert finding.rules == ("link-degraded",)


def test_nvme_behind_the_same_switch_at_any_depth_warns(fake_root: FakeRoot) -> None:
    switch = ["0000:00:01.0", "0000:01:00.0"]  # root port, switch upstream port
    pci_function(fake_root, [*switch, "0000:02:00.0", "0000:03:00.0"], *NPU)
    pci_function(fake_root, [*switch, "0000:02:04.0", "0000:04:00.0", "0000:05:00.0"],
                 "0x144d", "0xa808", "0x010802")
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "warn"
    assert "0000:03:00.0 shares the uplink" in finding.summary
    assert "NVMe device 0000:05:00.0" in finding.summary
    assert finding.rules == ("shared-uplink",)


def bridge_caps(root: FakeRoot, bridge: str, speed: str, width: str) -> None:
    """A root port (under pci0000:00) that allows only `speed` x`width`; pci_function keeps it."""
    base = f"/sys/devices/pci0000:00/{bridge}"
    for name, value in (("current_link_speed", speed), ("current_link_width", width),
                        ("max_link_speed", speed), ("max_link_width", width)):
        root.file(f"{base}/{name}", value + "\n")


def test_x16_card_in_an_x8_slot_is_not_degraded(fake_root: FakeRoot) -> None:
    bridge_caps(fake_root, "0000:00:01.0", "16.0 GT/s PCIe", "8")
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU,
                 link=("16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"))
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "pass", finding
    assert any("upstream port 0000:00:01.0 allows 16.0 GT/s PCIe x8" in e
               for e in finding.evidence)


def test_gen5_card_in_a_gen4_slot_is_not_degraded(fake_root: FakeRoot) -> None:
    bridge_caps(fake_root, "0000:00:01.0", "16.0 GT/s PCIe", "16")
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU,
                 link=("16.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"))
    assert pcie_contention(ctx_for(fake_root)).status == "pass"


def test_below_both_ends_warns_naming_the_bound(fake_root: FakeRoot) -> None:
    bridge_caps(fake_root, "0000:00:01.0", "16.0 GT/s PCIe", "8")
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU,
                 link=("16.0 GT/s PCIe", "4", "16.0 GT/s PCIe", "16"))
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "warn"
    assert ("below the lower of its own and upstream port 0000:00:01.0's capability "
            "(16 GT/s x8)") in finding.summary


def test_unknown_port_capability_falls_back_to_the_device_and_says_so(
        fake_root: FakeRoot) -> None:
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU,
                 link=("16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"))
    port = fake_root.path / "sys/devices/pci0000:00/0000:00:01.0"
    (port / "max_link_width").unlink()
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "warn"
    assert "upstream port capability unknown" in finding.summary


def test_a_huawei_nic_behind_the_same_switch_is_a_neighbour(fake_root: FakeRoot) -> None:
    switch = ["0000:00:01.0", "0000:01:00.0"]
    pci_function(fake_root, [*switch, "0000:02:00.0", "0000:03:00.0"], *NPU)
    pci_function(fake_root, [*switch, "0000:02:04.0", "0000:04:00.0"],
                 "0x19e5", "0x1822", "0x020000")
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "warn"
    assert "network device 0000:04:00.0" in finding.summary


def test_two_npus_behind_one_switch_are_not_neighbours(fake_root: FakeRoot) -> None:
    switch = ["0000:00:01.0", "0000:01:00.0"]
    pci_function(fake_root, [*switch, "0000:02:00.0", "0000:03:00.0"], *NPU)
    pci_function(fake_root, [*switch, "0000:02:04.0", "0000:04:00.0"], *NPU)
    assert pcie_contention(ctx_for(fake_root)).status == "pass"


def test_devices_sharing_only_the_root_complex_pass(fake_root: FakeRoot) -> None:
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU)
    pci_function(fake_root, ["0000:00:02.0", "0000:02:00.0"], "0x15b3", "0x1017", "0x020000")
    assert pcie_contention(ctx_for(fake_root)).status == "pass"


def test_aer_counters_above_policy_warn(fake_root: FakeRoot) -> None:
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU, aer_cor=500)
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "warn" and "500 correctable AER errors" in finding.summary
    assert finding.rules == ("aer-correctable",)


def test_uncorrectable_aer_errors_above_policy_warn(fake_root: FakeRoot) -> None:
    pci_function(fake_root, ["0000:00:01.0", "0000:01:00.0"], *NPU,
                 link=("16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"))
    fake_root.file("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/aer_dev_nonfatal",
                   "TOTAL_ERR_NONFATAL 3\n")
    finding = pcie_contention(ctx_for(fake_root))  # policy pcie.aer_uncorrectable_warn: 0
    assert finding.status == "warn"
    assert "0000:01:00.0: 0 fatal and 3 non-fatal AER errors" in finding.summary
    assert finding.rules == ("link-degraded", "aer-uncorrectable")  # in the summary's order


def test_no_ascend_function_skips(fake_root: FakeRoot) -> None:
    pci_function(fake_root, ["0000:00:02.0", "0000:02:00.0"], "0x15b3", "0x1017", "0x020000")
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "skip"
    assert finding.rules == ("no-ascend-function",)


def test_no_sysfs_skips(fake_root: FakeRoot) -> None:
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "skip" and "/sys/bus/pci/devices" in finding.summary
    assert finding.rules == ("pci-unreadable",)


# --- pcie.contention: the NPUs' RoCE ports (hccn_tool) ------------------------------------------

HCCN_SAMPLES = Path(__file__).resolve().parents[1] / "data" / "hccn"
LINK_UP = HCCN_SAMPLES / "link-up.txt"
LINK_DOWN = HCCN_SAMPLES / "link-down.txt"


def multi_node_a2(root: FakeRoot, link_3: str = f'cat "{LINK_UP}"',
                  health: str = "net-health-success.txt", health_3: str | None = None) -> None:
    """An A2 server set up for multi-node serving: 8 chips, /etc/hccn.conf, and hccn_tool
    answering with the recorded lines (port 3 may answer otherwise)."""
    pci_function(root, ["0000:00:01.0", "0000:01:00.0"], *NPU)
    with_npu_smi(root)
    root.file(HCCN_CONF, "address_0=192.168.100.100\nnetdetect_0=192.168.100.1\n")
    other = HCCN_SAMPLES / (health_3 or health)
    root.script(HCCN_TOOL, f'''case "$2$3" in
  3-link) {link_3};;
  *-link) cat "{LINK_UP}";;
  3-net_health) cat "{other}";;
  *) cat "{HCCN_SAMPLES / health}";;
esac
''')


def test_ports_up_and_healthy_pass_and_say_how_many_were_read(fake_root: FakeRoot) -> None:
    multi_node_a2(fake_root)
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "pass" and finding.rules == ()
    assert "8 NPU ports link UP and net health Success" in finding.summary
    assert "NPU port 7: link UP, net health Success" in finding.evidence


def test_a_port_whose_link_went_down_warns_with_its_net_health(fake_root: FakeRoot) -> None:
    # the mind-cluster fault drill: `-link -s down`, then net health reads Fault
    multi_node_a2(fake_root, link_3=f'cat "{LINK_DOWN}"', health_3="net-health-fault.txt")
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "warn"
    assert finding.rules == ("roce-link-down", "roce-net-health")
    assert "NPU port 3 link DOWN" in finding.summary
    assert "NPU port 3 net health Fault (the port shows this when its link is down" \
        in finding.summary
    assert "hccn_tool -i N -link -g" in (finding.remedy or "")
    assert "reseat the card" not in (finding.remedy or "")  # no PCIe link problem here


def test_ports_still_initialising_count_healthy_and_are_named(fake_root: FakeRoot) -> None:
    multi_node_a2(fake_root, health="net-health-init.txt")
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "pass" and finding.rules == ()
    assert "8 NPU ports link UP and net health Success (8 still Init)" in finding.summary


def test_a_net_health_word_we_have_no_meaning_for_warns_as_printed(fake_root: FakeRoot) -> None:
    multi_node_a2(fake_root)
    # a word made up for the test: no source lists the words beyond the recorded ones
    fake_root.file("/tmp/odd.txt", "net health status: Madeup word\n")
    script = (fake_root.path / HCCN_TOOL.lstrip("/")).read_text()
    fake_root.script(HCCN_TOOL, script.replace("#!/bin/sh\n", "").replace(
        str(HCCN_SAMPLES / "net-health-success.txt"), str(fake_root.path / "tmp/odd.txt")))
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "warn" and finding.rules == ("roce-net-health",)
    assert "NPU port 0 net health Madeup word (not in our data)" in finding.summary


@pytest.mark.parametrize("sample, ports", [
    ("014-info-25.0.rc1.1-910B4-8cards-noproc.txt", list(range(8))),  # no Phy-ID: 0 up
    ("065-info-25.2.0-A3-Ascend910-4chips-mixed-proc-peerfixture.txt", [0, 1, 2, 3]),
])
def test_ports_are_numbered_by_physical_id_where_the_table_prints_it(sample: str,
                                                                     ports: list[int]) -> None:
    assert port_ids(parse_info((CORPUS_DIR / "npu-smi" / sample).read_text()).chips) == ports


def test_a_single_server_without_hccn_conf_asks_no_port(fake_root: FakeRoot) -> None:
    multi_node_a2(fake_root)
    (fake_root.path / HCCN_CONF.lstrip("/")).unlink()
    fake_root.script(HCCN_TOOL, "exit 99\n")  # would make every port unread if it were asked
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "pass" and "port" not in finding.summary


def test_ports_that_cannot_be_read_are_said_unjudged_never_passed(fake_root: FakeRoot) -> None:
    multi_node_a2(fake_root)
    (fake_root.path / HCCN_TOOL.lstrip("/")).unlink()
    finding = pcie_contention(ctx_for(fake_root))
    assert finding.status == "pass"  # the PCIe part was judged
    assert "link UP" not in finding.summary
    assert "RoCE ports not judged: 8 of 8 NPU ports not read" in finding.summary
    assert "hccn_tool not found" in finding.summary


class WithoutHccnTool(RecordingHost):
    """A recorder of a tool version that did not record hccn_tool."""

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        if argv[0] == HCCN_TOOL:
            return self.inner.run(argv) if timeout_s is None else self.inner.run(argv, timeout_s)
        return super().run(argv, timeout_s)


def test_a_recording_without_the_ports_leaves_them_unjudged(fake_root: FakeRoot,
                                                            tmp_path: Path) -> None:
    multi_node_a2(fake_root, link_3=f'cat "{LINK_DOWN}"')
    live = ctx_for(fake_root)
    recorder = WithoutHccnTool(live.host)
    pcie_contention(Context(recorder, load_policy()))
    replay = SnapshotHost(recorder.save(tmp_path / "snap"))
    assert pcie_contention(live).rules == ("roce-link-down",)
    finding = pcie_contention(Context(replay, load_policy()))
    assert finding.status == "pass" and "link UP" not in finding.summary
    assert "RoCE ports not judged: 8 of 8 NPU ports not read" in finding.summary
    assert "was not recorded" in finding.summary
