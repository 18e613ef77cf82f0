"""probes.host_memory: /proc/meminfo figures, read through a Host."""

from __future__ import annotations

from probes.host_memory import parse_meminfo, read_host_memory
from probes.live import LiveHost
from tests.conftest import FakeRoot

MEMINFO = "MemTotal:       65536000 kB\nMemFree:         1000 kB\nMemAvailable:   32768000 kB\n"


def test_parse_meminfo_in_bytes() -> None:
    found = parse_meminfo(MEMINFO)
    assert found is not None
    assert found.total_bytes == 65536000 * 1024 and found.available_bytes == 32768000 * 1024
    old = parse_meminfo("MemTotal: 1024 kB\n")
    assert old is not None and old.available_bytes is None
    assert parse_meminfo("nonsense\n") is None


def test_read_through_the_host(fake_root: FakeRoot) -> None:
    host = LiveHost(root=str(fake_root.path), env={})
    assert "not read" in str(read_host_memory(host))
    fake_root.file("/proc/meminfo", MEMINFO)
    found = read_host_memory(host)
    assert not isinstance(found, str) and found.total_bytes == 65536000 * 1024
    fake_root.file("/proc/meminfo", "MemFree: 1 kB\n")
    assert read_host_memory(host) == "/proc/meminfo has no MemTotal line"
