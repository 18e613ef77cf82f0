"""The memory-pressure reading (headless): one heuristic, its thresholds from the policy, and
the documented zero readings named instead of "idle"."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from checks.policy import load_policy
from console.pressure import (
    UNKNOWN_CAUSES,
    CauseReader,
    PressureLimits,
    ZeroCauses,
    causes_note,
    pressure_limits,
    read_pressure,
    zero_causes,
)
from console.snapshots import ChipSample, NpuSnapshot
from console.ui.app import ConsoleApp
from probes.live import LiveHost
from probes.virt import VirtReading, read_virt
from tests.conftest import FakeRoot
from tests.console.test_app import SIZE, fake_npu_smi, make_app, wait_for

LIMITS = pressure_limits(load_policy())
KVM = VirtReading("KVM", "/sys/class/dmi/id/product_name: KVM Virtual Machine")
BARE = VirtReading(None, "no hypervisor marker in DMI, the device tree or the CPU flags")


def test_the_thresholds_are_the_policy_s_project_defaults() -> None:
    assert PressureLimits(high_percent=60.0, low_percent=30.0, idle_percent=10.0) == LIMITS
    text = (Path(__file__).resolve().parents[2] / "checks" / "policy.yaml").read_text()
    block = text[text.index("project defaults, not vendor figures: the pressure panel"):
                 text.index("pressure_idle_percent")]
    assert "dcmi_get_device_utilization_rate.md @ 999c25d74069" in block


def test_a_policy_file_moves_the_thresholds(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("console:\n  pressure_high_percent: 90\n")
    limits = pressure_limits(load_policy(path))
    assert read_pressure(80, 10, LIMITS).kind == "memory-bound"
    assert read_pressure(80, 10, limits).kind == "unclear"


@pytest.mark.parametrize(("bw", "core", "kind"), [
    (None, 10, "not-sampled"), (50, None, "not-sampled"),
    (82, 0, "memory-bound"), (60, 29, "memory-bound"), (59, 10, "unclear"),
    (10, 60, "compute-bound"), (90, 95, "compute-bound"),
    (0, 0, "idle"), (9, 9, "idle"), (10, 5, "unclear"),
])
def test_one_heuristic(bw: float | None, core: float | None, kind: str) -> None:
    reading = read_pressure(bw, core, LIMITS)
    assert reading.kind == kind
    assert "measured" not in reading.text and "bank" not in reading.text


def test_a_documented_zero_is_named_not_read_as_idle() -> None:
    profiling = ZeroCauses(((4242, "msprof"),), BARE)
    vm = ZeroCauses((), KVM)
    assert read_pressure(0, 0, LIMITS, profiling).text == (
        "AI-core reads 0 while profiling (msprof runs): not judged")
    assert read_pressure(85, 0, LIMITS, profiling).kind == "profiling-zero"
    assert read_pressure(0, 0, LIMITS, vm).text == (
        "HBM-BW reads 0 in a VM pass-through: not judged")
    assert read_pressure(0, 70, LIMITS, vm).kind == "vm-zero"
    assert read_pressure(40, 70, LIMITS, vm).kind == "compute-bound"  # no zero, no caveat
    assert read_pressure(0, 0, LIMITS, ZeroCauses((), BARE)).kind == "idle"


def test_the_note_says_what_this_machine_shows() -> None:
    assert "not knowable" in causes_note([UNKNOWN_CAUSES])
    assert causes_note([ZeroCauses(((4242, "msprof"),), KVM)]).endswith(
        "here: msprof running (pid 4242), a VM (KVM: /sys/class/dmi/id/product_name: KVM "
        "Virtual Machine)")
    assert causes_note([ZeroCauses(None, BARE)]).endswith(
        "here: no chip reads AI-core 0, no hypervisor marker")
    assert "here: processes not readable," in causes_note([ZeroCauses((), BARE, False)])


def chip(aicore: int | None) -> ChipSample:
    return ChipSample(0, 0, "910B4", "OK", 40, 90.0, aicore, 1, 2, 0.0, "0/0")


def test_the_profiler_is_looked_for_only_when_a_chip_reads_ai_core_0(
        fake_root: FakeRoot) -> None:
    fake_root.file("/proc/4242/comm", "msprof\n")
    host = LiveHost(root=str(fake_root.path), env={})
    busy = NpuSnapshot(0.0, (chip(55),), (), True, None, 0.1)
    idle = NpuSnapshot(0.0, (chip(0),), (), True, None, 0.1)
    assert zero_causes(host, busy, BARE).profilers is None
    assert zero_causes(host, idle, BARE).profilers == ((4242, "msprof"),)
    unreadable = LiveHost(root=str(fake_root.path / "nothing"), env={})
    assert not zero_causes(unreadable, idle, BARE).processes_read


# -- in the app: the fake npu-smi's usages read AI-core 0 and HBM-BW 0 -------------------------


def readings(app: ConsoleApp) -> list[str]:
    table = app.query_one("#pressure-chips", DataTable)
    return [str(table.get_row_at(i)[3]) for i in range(table.row_count)]


def note(app: ConsoleApp) -> str:
    return str(app.query_one("#pressure-chips-note").render())


async def pressure_readings(fake_root: FakeRoot) -> tuple[list[str], str]:
    app = make_app(fake_npu_smi(fake_root))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "here:" in note(app) and bool(readings(app)),
                       what="a sample read with this machine's causes")
        return readings(app), note(app)


async def test_the_panel_names_a_running_msprof(fake_root: FakeRoot) -> None:
    fake_root.file("/proc/4242/comm", "msprof\n")
    shown, line = await pressure_readings(fake_root)
    assert shown[0] == "AI-core reads 0 while profiling (msprof runs): not judged"
    assert "here: msprof running (pid 4242), no hypervisor marker" in line


async def test_the_panel_names_a_virtual_machine(fake_root: FakeRoot) -> None:
    fake_root.file("/sys/class/dmi/id/product_name", "KVM Virtual Machine\n")
    shown, line = await pressure_readings(fake_root)
    assert shown[0] == "HBM-BW reads 0 in a VM pass-through: not judged"
    assert read_virt(LiveHost(root=str(fake_root.path), env={})).is_vm
    assert "a VM (KVM" in line


async def test_without_either_cause_zero_reads_idle(fake_root: FakeRoot) -> None:
    fake_root.file("/proc/1/comm", "systemd\n")
    shown, line = await pressure_readings(fake_root)
    assert shown[0] == "idle, or host/launch-bound"
    assert "here: no msprof process, no hypervisor marker" in line


def test_the_process_table_is_read_at_most_every_rescan_interval(fake_root: FakeRoot) -> None:
    comm = fake_root.file("/proc/4242/comm", "msprof\n")
    fake_root.file("/sys/class/dmi/id/product_name", "KVM Virtual Machine\n")
    now = [100.0]
    reader = CauseReader(LiveHost(root=str(fake_root.path), env={}), rescan_s=10.0,
                         clock=lambda: now[0])
    idle = NpuSnapshot(0.0, (chip(0),), (), True, None, 0.1)
    assert reader.read(idle).profilers == ((4242, "msprof"),) and reader.read(idle).in_vm
    comm.unlink()
    now[0] += 5.0
    assert reader.read(idle).profilers == ((4242, "msprof"),)  # not read again yet
    now[0] += 5.0
    assert reader.read(idle).profilers == ()
    assert reader.read(NpuSnapshot(0.0, (chip(50),), (), True, None, 0.1)).profilers is None
