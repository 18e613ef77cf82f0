"""probes.processes: /proc/<pid>/comm read through the Host (a fake root's /proc)."""

from __future__ import annotations

from probes.live import LiveHost
from probes.processes import processes_named
from tests.conftest import FakeRoot


def test_processes_by_comm(fake_root: FakeRoot) -> None:
    fake_root.file("/proc/1/comm", "systemd\n")
    fake_root.file("/proc/4242/comm", "msprof\n")
    fake_root.file("/proc/4300/comm", "msprof-helper\n")
    fake_root.dir("/proc/sys")
    fake_root.dir("/proc/77")  # ended between the listing and the read: no comm
    found = processes_named(LiveHost(root=str(fake_root.path), env={}), ("msprof",))
    assert found.found == ((4242, "msprof"),) and found.complete


def test_a_scan_that_stops_early_says_so(fake_root: FakeRoot) -> None:
    for pid in range(1, 6):
        fake_root.file(f"/proc/{pid}/comm", "msprof\n")
    found = processes_named(LiveHost(root=str(fake_root.path), env={}), ("msprof",), max_pids=3)
    assert [pid for pid, _ in found.found] == [1, 2, 3] and not found.complete


def test_no_proc_is_an_incomplete_empty_answer(fake_root: FakeRoot) -> None:
    found = processes_named(LiveHost(root=str(fake_root.path), env={}), ("msprof",))
    assert found.found == () and not found.complete
