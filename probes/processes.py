"""Processes of the observed machine by command name, from `/proc/<pid>/comm` (proc(5)).

Read through the Host, so a fake root's `/proc` answers in tests. `comm` is the kernel's
15-byte command name, which anyone can set: callers show it through `probes.textsafe`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from probes.errors import HostError
from probes.host import Host

# project default: a box with more processes than this is scanned only this far (a few ms of
# small reads per thousand); the result says it stopped
MAX_PIDS_SCANNED = 20_000


@dataclass(frozen=True, slots=True)
class NamedProcesses:
    """The (pid, comm) pairs found; `complete` is False when /proc could not be listed or the
    scan stopped at MAX_PIDS_SCANNED."""

    found: tuple[tuple[int, str], ...]
    complete: bool


def processes_named(host: Host, names: Collection[str],
                    max_pids: int = MAX_PIDS_SCANNED) -> NamedProcesses:
    """Every process whose `comm` is one of `names` (exact, as the kernel keeps it)."""
    try:
        entries = host.list_dir("/proc")
    except HostError:
        return NamedProcesses((), False)
    pids = sorted(int(e) for e in entries if e.isdigit())
    found: list[tuple[int, str]] = []
    for pid in pids[:max_pids]:
        try:
            comm = host.read_bytes(f"/proc/{pid}/comm", 0, 64).decode("utf-8", "replace")
        except HostError:
            continue  # the process ended between the listing and the read
        comm = comm.rstrip("\n")
        if comm in names:
            found.append((pid, comm))
    return NamedProcesses(tuple(found), len(pids) <= max_pids)
