"""The parts of a target that only a process has: its /proc facts, the NPU rows it holds, the
candidates discovery found, and settings with where each was read.

Apart from probes.target.model so that a run judging no process never builds these classes
(start-up time: a doctor run is budgeted against `python -c "import rich"`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

if TYPE_CHECKING:
    from probes.bounded import Owner

V = TypeVar("V", str, int, float)
MountNs = Literal["same", "other", "unknown"]
MOUNT_NS: tuple[MountNs, ...] = ("same", "other", "unknown")


@dataclass(frozen=True)
class Sourced(Generic[V]):
    """One setting and where it was read (a flag of the command line, a config file key)."""

    value: V
    source: str


@dataclass(frozen=True)
class ProcessInfo:
    """One process, as /proc shows it. Paths are in the process's own mount namespace."""

    pid: int
    cmdline: tuple[str, ...]
    name: str = ""  # the kernel's short name (status `Name`)
    exe: str | None = None  # /proc/PID/exe; None when it could not be read
    cwd: str | None = None
    uid: int | None = None  # real uid
    ppid: int | None = None
    ns_pid: int | None = None  # its pid inside its own pid namespace, when that differs
    cpus_allowed: tuple[int, ...] | None = None  # status Cpus_allowed_list
    mems_allowed: tuple[int, ...] | None = None  # status Mems_allowed_list (NUMA nodes)
    mount_ns: MountNs = "same"  # relative to the doctor's own mount namespace
    files_root: str = "/"  # where its files are read on this machine (/proc/PID/root)
    start_ticks: int | None = None  # /proc/PID/stat starttime: a reused pid differs
    gids: tuple[int, ...] = ()  # real gid and supplementary groups (status Gid, Groups)

    def owner(self) -> Owner | None:
        """Whose rights its files are read with; None when its uid is unknown."""
        from probes.bounded import Owner

        return None if self.uid is None else Owner(self.uid, frozenset(self.gids))

    @property
    def command(self) -> str:
        """The command line as one line (arguments joined by spaces)."""
        return " ".join(self.cmdline) or f"[{self.name or self.pid}]"


@dataclass(frozen=True)
class NpuUse:
    """A row of npu-smi's process table that belongs to the target (it or a child)."""

    npu_id: int
    chip_id: int | None
    pid: int
    memory_mb: int | None = None


@dataclass(frozen=True)
class Candidate:
    """A process discovery found: a known server, or a holder of an NPU."""

    pid: int
    label: str  # its command line, shortened
    why: str  # why it is a candidate
    server: str = ""
    npus: tuple[NpuUse, ...] = ()


@dataclass(frozen=True)
class Rank:
    """One process of a multi-process server (its API server, engine cores, workers) and
    whether its own environment could be read and agrees with the one judged."""

    pid: int
    role: str  # its command line or process title, shortened
    environment: str  # "read", or why it could not be read
    differs: tuple[str, ...] = ()  # judged variable names whose value differs from the judged

    @property
    def readable(self) -> bool:
        return self.environment == "read"
