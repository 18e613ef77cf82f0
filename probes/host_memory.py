"""/proc/meminfo -> the host's total and available memory (read through the Host, so a
recording or a --root answers the same). Pure parser plus one reader."""

from __future__ import annotations

from dataclasses import dataclass

from probes.errors import HostError
from probes.host import Host

MEMINFO = "/proc/meminfo"


@dataclass(frozen=True)
class HostMemory:
    """MemTotal and MemAvailable, in bytes (the kernel prints kB, i.e. KiB)."""

    total_bytes: int
    available_bytes: int | None  # None on kernels that print no MemAvailable


def parse_meminfo(text: str) -> HostMemory | None:
    """The figures of /proc/meminfo; None when it has no MemTotal."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in ("MemTotal", "MemAvailable") and parts and parts[0].isdigit():
            values[name] = int(parts[0]) * 1024
    if "MemTotal" not in values:
        return None
    return HostMemory(values["MemTotal"], values.get("MemAvailable"))


def read_host_memory(host: Host) -> HostMemory | str:
    """The host's memory, or why it could not be read."""
    try:
        found = parse_meminfo(host.read_text(MEMINFO))
    except HostError as exc:
        return f"{MEMINFO} not read: {exc}"
    return found if found is not None else f"{MEMINFO} has no MemTotal line"
