"""Reading one process from /proc (proc(5)): its environment, command line, interpreter,
status, working directory and mount namespace.

The reads are plain file reads on this machine (not through a Host: /proc is the kernel's
view of this machine, whatever root the checks read under). `proc_dir` is a parameter so a
test can point the reads at a tree it built. Parsers are pure; a read that the kernel refuses
is a ProcDenied, a process that is not there (or went away) a ProcGone.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probes.target.parts import MountNs, ProcessInfo

PROC = "/proc"
OWN_MOUNT_NS = "/proc/self/ns/mnt"  # the doctor's own, always from the real /proc
# environ and cmdline are bounded by the kernel (ARG_MAX-ish); this only guards a fake tree
MAX_PROC_FILE_BYTES = 4 * 1024 * 1024


class ProcError(Exception):
    """A /proc read failed; `path` names the file, `reason` says why in a few words."""

    def __init__(self, pid: int, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.pid = pid
        self.path = path
        self.reason = reason


class ProcGone(ProcError):
    """No such process (never was, or it exited while being read)."""


class ProcDenied(ProcError):
    """The kernel refuses the read: another user's process, and this one is not root."""


class EnvironBlank(ProcError):
    """/proc/PID/environ holds no NAME=VALUE entry: the process wrote over its environment
    area (setproctitle does, and vLLM's EngineCore and workers call it: vllm-project/vllm
    vllm/utils/system_utils.py set_process_title). Its environment cannot be read there;
    an empty reading is never "nothing set"."""


# -- pure parsers ------------------------------------------------------------------------------


def parse_nul_list(data: bytes) -> tuple[str, ...]:
    """NUL-separated strings (cmdline, environ), the trailing empty one dropped."""
    if not data:
        return ()
    parts = data.split(b"\0")
    if parts[-1] == b"":
        parts.pop()
    return tuple(p.decode("utf-8", errors="replace") for p in parts)


def parse_environ(data: bytes) -> dict[str, str]:
    """/proc/PID/environ: NAME=VALUE entries; one without `=` is not a variable."""
    env: dict[str, str] = {}
    for entry in parse_nul_list(data):
        name, sep, value = entry.partition("=")
        if sep and name:
            env.setdefault(name, value)  # as getenv(3): the first one wins
    return env


def parse_cmdline(data: bytes) -> tuple[str, ...]:
    """/proc/PID/cmdline. A process that rewrote its title into argv[0] (setproctitle) has
    one string with spaces and no NUL: it is split on whitespace, which is how it reads; the
    NUL padding after a title is dropped."""
    args = parse_nul_list(data)
    end = len(args)
    while end > 1 and args[end - 1] == "":
        end -= 1
    args = args[:end]
    if len(args) == 1 and " " in args[0].strip():
        return tuple(args[0].split())
    return args


def blank_reason(size_bytes: int) -> str:
    what = f"{size_bytes} bytes of padding" if size_bytes else "empty"
    return (f"no NAME=VALUE entry ({what}): the process wrote over its environment area "
            "(setproctitle), so its environment is unknown, not empty")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """A kernel cpulist (`0-3,8,10-11`) as sorted numbers. Raises ValueError."""
    found: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, sep, high = part.partition("-")
        first = int(low)
        last = int(high) if sep else first
        if last < first or last - first > 65536:
            raise ValueError(f"bad cpu range {part!r}")
        found.update(range(first, last + 1))
    return tuple(sorted(found))


def format_cpu_list(cpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> `0-2,5`, as the kernel writes a cpulist."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


@dataclass(frozen=True)
class Status:
    """The lines of /proc/PID/status the doctor uses."""

    name: str = ""
    ppid: int | None = None
    uid: int | None = None
    gids: tuple[int, ...] = ()  # the real gid, then the supplementary groups
    ns_pid: int | None = None
    cpus_allowed: tuple[int, ...] | None = None
    mems_allowed: tuple[int, ...] | None = None


def parse_status(text: str) -> Status:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return Status(
        name=fields.get("Name", ""),
        ppid=_first_int(fields.get("PPid")),
        uid=_first_int(fields.get("Uid")),
        gids=_ints(" ".join([*fields.get("Gid", "").split()[:1], fields.get("Groups", "")])),
        ns_pid=_last_int(fields.get("NSpid")),
        cpus_allowed=_cpu_list(fields.get("Cpus_allowed_list")),
        mems_allowed=_cpu_list(fields.get("Mems_allowed_list")),
    )


def _first_int(value: str | None) -> int | None:
    words = (value or "").split()
    return int(words[0]) if words and words[0].isdigit() else None


def _ints(value: str) -> tuple[int, ...]:
    return tuple(int(w) for w in value.split() if w.isascii() and w.isdigit() and len(w) < 11)


def _last_int(value: str | None) -> int | None:
    words = (value or "").split()
    return int(words[-1]) if len(words) > 1 and words[-1].isdigit() else None


def _cpu_list(value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        return parse_cpu_list(value)
    except ValueError:
        return None


def parse_start_ticks(stat: str) -> int | None:
    """Field 22 (starttime) of /proc/PID/stat; the name in parentheses may hold spaces."""
    rest = stat.rpartition(")")[2].split()
    # after the name: state is field 3, so starttime (22) is the 20th word
    return int(rest[19]) if len(rest) > 19 and rest[19].isdigit() else None


# -- reading -----------------------------------------------------------------------------------


class ProcReader:
    """Reads processes under `proc_dir` (the real /proc unless a test says otherwise)."""

    def __init__(self, proc_dir: str | None = None) -> None:
        self.proc_dir = PROC if proc_dir is None else proc_dir

    def path(self, pid: int, name: str) -> str:
        return f"{self.proc_dir}/{pid}/{name}"

    def pids(self) -> list[int]:
        """Every process id, ascending."""
        try:
            names = os.listdir(self.proc_dir)
        except OSError:
            return []
        return sorted(int(n) for n in names if n.isdigit())

    def read(self, pid: int, name: str) -> bytes:
        path = self.path(pid, name)
        try:
            with open(path, "rb") as handle:
                return handle.read(MAX_PROC_FILE_BYTES)
        except OSError as exc:
            raise _error(pid, path, exc) from None

    def readlink(self, pid: int, name: str) -> str:
        path = self.path(pid, name)
        try:
            return os.readlink(path)
        except OSError as exc:
            raise _error(pid, path, exc) from None

    def cmdline(self, pid: int) -> tuple[str, ...]:
        return parse_cmdline(self.read(pid, "cmdline"))

    def environ(self, pid: int) -> dict[str, str]:
        """Raises EnvironBlank when the area holds no NAME=VALUE entry (module docstring)."""
        data = self.read(pid, "environ")
        env = parse_environ(data)
        if not env:
            raise EnvironBlank(pid, self.path(pid, "environ"), blank_reason(len(data)))
        return env

    def status(self, pid: int) -> Status:
        return parse_status(self.read(pid, "status").decode("utf-8", errors="replace"))

    def start_ticks(self, pid: int) -> int | None:
        return parse_start_ticks(self.read(pid, "stat").decode("utf-8", errors="replace"))

    def alive(self, pid: int, start_ticks: int | None) -> bool:
        """The same process is still there (a pid reused by another one is not)."""
        try:
            now = self.start_ticks(pid)
        except ProcError as exc:
            return isinstance(exc, ProcDenied)
        return start_ticks is None or now == start_ticks

    def mount_ns(self, pid: int) -> MountNs:
        """Whether `pid` shares the doctor's mount namespace."""
        try:
            theirs = self.readlink(pid, "ns/mnt")
            ours = os.readlink(OWN_MOUNT_NS)
        except (ProcError, OSError):
            return "unknown"
        return "same" if theirs == ours else "other"

    def process(self, pid: int) -> tuple[ProcessInfo, list[str]]:
        """Everything but the environment; the facts that could not be read, one line each.

        Raises ProcGone when the process is not there, ProcDenied when even its status is
        refused.
        """
        from probes.target.parts import ProcessInfo

        status = self.status(pid)
        start = self.start_ticks(pid)
        problems: list[str] = []
        cmdline = self.cmdline(pid)
        exe = self._optional(pid, "exe", problems)
        cwd = self._optional(pid, "cwd", problems)
        mount_ns = self.mount_ns(pid)
        if mount_ns == "unknown":
            problems.append(f"{self.path(pid, 'ns/mnt')}: unreadable: its files are read "
                            "from / (as if it shared this mount namespace)")
        root = self.path(pid, "root") if mount_ns == "other" else "/"
        info = ProcessInfo(
            pid=pid, cmdline=cmdline, name=status.name, exe=_deleted(exe), cwd=_deleted(cwd),
            uid=status.uid, gids=status.gids, ppid=status.ppid,
            ns_pid=status.ns_pid if status.ns_pid != pid else None,
            cpus_allowed=status.cpus_allowed, mems_allowed=status.mems_allowed,
            mount_ns=mount_ns, files_root=root, start_ticks=start)
        return info, problems

    def _optional(self, pid: int, name: str, problems: list[str]) -> str | None:
        try:
            return self.readlink(pid, name)
        except ProcGone:
            raise
        except ProcError as exc:
            problems.append(str(exc))
            return None


def _deleted(path: str | None) -> str | None:
    """The kernel marks an unlinked file ` (deleted)`; the path is still the best name."""
    return path.removesuffix(" (deleted)") if path else path


def _error(pid: int, path: str, exc: OSError) -> ProcError:
    if exc.errno in (errno.ENOENT, errno.ESRCH, errno.ENOTDIR):
        return ProcGone(pid, path, "no such process (it is not running, or it exited)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ProcDenied(pid, path, "permission denied")
    return ProcError(pid, path, exc.strerror or str(exc))
