"""npu.hbm-fit and the NUMA affinity part of pcie.contention for a target in a container: its
ASCEND_RT_VISIBLE_DEVICES counts the container's devices, found on the host through the
container's /dev/davinci<N> nodes (real files under a fake /proc/PID/root) and npu-smi's
Phy-ID, or not judged."""

from __future__ import annotations

from pathlib import Path

from conftest import CORPUS_DIR, FakeRoot

from checks.builtin.affinity import chips_used
from checks.builtin.hbm_fit import hbm_fit
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from probes.inventory import NpuReading, parse_output
from probes.live import LiveHost
from probes.target.model import Target
from probes.target.parts import ProcessInfo
from tests.fp8_fixtures import bf16_model_tensors, model_config, write_model

PID = 4242
A3_4X64 = "065-info-25.2.0-A3-Ascend910-4chips-mixed-proc-peerfixture.txt"  # Phy-ID 0..3
A2_8X32 = "014-info-25.0.rc1.1-910B4-8cards-noproc.txt"  # no Phy-ID column


def reading(name: str) -> NpuReading:
    return parse_output((CORPUS_DIR / "npu-smi" / name).read_text())


def in_container(tmp_path: Path, nodes: tuple[int, ...], npu: str,
                 visible: str | None) -> Context:
    """A process in another mount namespace whose root holds `/dev/davinci<N>` for `nodes`."""
    root = FakeRoot(tmp_path / "proc" / str(PID) / "root")
    for n in nodes:
        root.file(f"/dev/davinci{n}")
    root.file("/dev/davinci_manager")
    env = {} if visible is None else {"ASCEND_RT_VISIBLE_DEVICES": visible}
    process = ProcessInfo(PID, ("vllm", "serve", "/models/m"), mount_ns="other",
                          files_root=str(root.path))
    target = Target("process", f"process {PID} (vllm serve)", f"--pid {PID}",
                    f"/proc/{PID}/environ", process=process, npus_known=True)
    # the model as the process sees it: /models/m inside its root
    write_model(root.path / "models" / "m", bf16_model_tensors(), model_config(fp8=False))
    ctx = Context(LiveHost(root=str(root.path), env=env), load_policy(None),
                  model_dir=Path("/models/m"), target=target)
    found = reading(npu)
    ctx.fact("npu", lambda: found)
    return ctx


def chips_line(finding: Finding) -> str:
    return next(e for e in finding.evidence if e.startswith("chips: "))


def test_a3_container_index_is_the_chip_with_that_phy_id(tmp_path: Path) -> None:
    """Given /dev/davinci1 and davinci3, container device 1 is davinci3: npu-smi's NPU 1 chip 1
    (Phy-ID 3), not the table's second row (NPU 0 chip 1)."""
    ctx = in_container(tmp_path, (1, 3), A3_4X64, "1")
    finding = hbm_fit(ctx)
    assert finding.status == "pass", finding
    line = chips_line(finding)
    assert "tightest NPU 1 chip 1:" in line and "of 1 x Ascend910" in line
    assert "inside a container that sees /dev/davinci1, /dev/davinci3" in line
    assert "Phy-ID N" in line
    chips, how = chips_used(ctx)
    assert [(c.npu_id, c.chip_id, c.phy_id) for c in chips] == [(1, 1, 3)]
    assert how.startswith("ASCEND_RT_VISIBLE_DEVICES=1 inside a container")


def test_a3_container_without_the_variable_uses_every_device_it_was_given(
        tmp_path: Path) -> None:
    finding = hbm_fit(in_container(tmp_path, (1, 3), A3_4X64, None))
    line = chips_line(finding)
    assert "of 2 x Ascend910" in line and "with ASCEND_RT_VISIBLE_DEVICES unset" in line
    # tensor parallel 1: the freer of Phy-ID 1 (2876 MB used) and Phy-ID 3 (10568 MB used)
    assert "the 1 of 2 visible chips" in line and "tightest NPU 0 chip 1:" in line


def test_a2_container_with_some_devices_is_not_judged_per_chip(tmp_path: Path) -> None:
    """910B tables print no Phy-ID: with davinci4 and davinci7 only, nothing ties the
    container's devices to npu-smi's rows, so no chip is judged (and none wrongly)."""
    ctx = in_container(tmp_path, (4, 7), A2_8X32, "0,1")
    finding = hbm_fit(ctx)
    assert finding.status == "skip" and finding.rules == ("container-chips-unmapped",)
    assert "not judged: cannot map container devices to host chips" in finding.summary
    assert "(it sees /dev/davinci4, /dev/davinci7)" in finding.summary
    assert any(e.startswith("needed per chip at tensor parallel") for e in finding.evidence)
    chips, how = chips_used(ctx)
    assert chips == [] and "cannot map container devices to host chips" in how


def test_a2_container_with_every_device_keeps_the_hosts_numbering(tmp_path: Path) -> None:
    ctx = in_container(tmp_path, tuple(range(8)), A2_8X32, "5")
    finding = hbm_fit(ctx)
    assert finding.status == "pass", finding
    line = chips_line(finding)
    assert "tightest NPU 5 chip 0:" in line and "sees every device of the host" in line
    assert [c.npu_id for c in chips_used(ctx)[0]] == [5]


def test_a_container_whose_dev_cannot_be_listed_is_not_judged(tmp_path: Path) -> None:
    ctx = in_container(tmp_path, (), A3_4X64, "0")
    (tmp_path / "proc" / str(PID) / "root" / "dev" / "davinci_manager").unlink()
    (tmp_path / "proc" / str(PID) / "root" / "dev").rmdir()
    finding = hbm_fit(ctx)
    assert finding.rules == ("container-chips-unmapped",)
    assert "its /dev could not be listed" in finding.summary
