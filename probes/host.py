"""The Host interface: the one way the project asks a machine anything.

Implementations: `probes.live.LiveHost` (the real machine, optionally under a root
directory), `probes.recording.recorder.RecordingHost` (records questions and answers) and
`probes.recording.snapshot.SnapshotHost` (answers from a recording).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

DEFAULT_TIMEOUT_S = 10.0
# project default: the outputs the doctor reads are small (the largest `npu-smi` output of
# the recorded corpus, tests/corpus/npu-smi, is 7 KB; the package scan of an environment is
# about 90 bytes a package, 180 KiB for 2,000); 4 MiB is twenty times the larger and still
# bounds a program that prints without end. Policy: runner.command_output_mb.
DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024

# exited: the program ran and exited (any exit code); not_found: no such program on PATH;
# timeout: killed after timeout_s; output_limit: killed when its output passed the cap
# (probes.spawn); error: could not be started (permission, bad format); not_recorded: a
# SnapshotHost has no answer for this argv.
Outcome = Literal["exited", "not_found", "timeout", "output_limit", "error", "not_recorded"]

PathKind = Literal["file", "dir", "char_device", "block_device", "other", "missing"]


@dataclass(frozen=True)
class CommandResult:
    """What running one program gave: how it ended, its output, how long it took."""

    argv: tuple[str, ...]
    outcome: Outcome
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    error: str = ""  # why it did not exit normally, one line

    @property
    def ok(self) -> bool:
        return self.outcome == "exited" and self.exit_code == 0

    def describe(self) -> str:
        """One line saying what happened, for evidence and error messages."""
        cmd = " ".join(self.argv)
        if self.outcome == "exited":
            return f"`{cmd}` exited with code {self.exit_code}"
        if self.outcome == "not_found":
            return f"`{cmd}`: {self.argv[0]} not found on PATH"
        if self.outcome == "timeout":
            return f"`{cmd}` timed out after {self.duration_s:.1f} s"
        if self.outcome == "output_limit":
            return f"`{cmd}` printed too much ({self.error})"
        if self.outcome == "not_recorded":
            return f"`{cmd}` was not recorded"
        return f"`{cmd}` could not run: {self.error}"


@dataclass(frozen=True)
class PythonEnvironment:
    """What importlib.metadata reports inside one interpreter, with its environment."""

    interpreter: str
    python_version: str = ""
    packages: Mapping[str, str] = field(default_factory=dict)  # normalised name -> version
    error: str = ""  # non-empty when the interpreter could not be inspected
    # normalised name -> the sys.path entry it was found in (shows which copy shadows which)
    locations: Mapping[str, str] = field(default_factory=dict)

    def version_of(self, name: str) -> str | None:
        return self.packages.get(normalise_dist_name(name))


@dataclass(frozen=True)
class DiskUsage:
    """The file system holding `path`: its size, and what an unprivileged user may still write."""

    total_bytes: int
    free_bytes: int  # statvfs f_bavail: root's reserved blocks are not counted
    path: str  # the path that was asked about, on the observed machine


def normalise_dist_name(name: str) -> str:
    """PEP 503 normalisation: `Torch_NPU` and `torch-npu` are the same distribution."""
    out = []
    prev_sep = False
    for ch in name.strip().lower():
        if ch in "-_.":
            if not prev_sep:
                out.append("-")
            prev_sep = True
        else:
            out.append(ch)
            prev_sep = False
    return "".join(out)


@runtime_checkable
class Host(Protocol):
    """Questions about one machine. Paths are absolute paths *on the observed machine*."""

    @property
    def description(self) -> str:
        """One line naming the machine: `live`, `live under /mnt/img`, `recording of X at T`."""
        ...

    @property
    def env(self) -> Mapping[str, str]: ...

    def run(self, argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        """Run a program without a shell. Never raises for a missing program or a timeout."""
        ...

    def read_text(self, path: str) -> str:
        """Whole file decoded as UTF-8 (undecodable bytes replaced). Raises HostError."""
        ...

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """`length` bytes from `offset` (to the end when None). Raises HostError."""
        ...

    def list_dir(self, path: str) -> list[str]:
        """Sorted entry names. Raises HostError."""
        ...

    def file_size(self, path: str) -> int:
        """Size in bytes (symlinks followed). Raises HostError (PathMissing, PathUnreadable)."""
        ...

    def disk_usage(self, path: str) -> DiskUsage:
        """The file system holding `path`. Raises PathMissing when nothing is at `path`."""
        ...

    def exists(self, path: str) -> bool: ...

    def kind(self, path: str) -> PathKind:
        """What is at `path` (symlinks followed); `missing` when nothing is."""
        ...

    def realpath(self, path: str) -> str:
        """Symlinks resolved, as a path on the observed machine."""
        ...

    def python_packages(self) -> PythonEnvironment: ...


def read_ranges(host: Host, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """`host.read_bytes(path, offset, length)` for each range, in order: through the host's
    own `read_ranges` when it has one (a LiveHost opens the file once for all of them), else
    one read_bytes each (a recording records, and a replay answers, range by range). Raises
    HostError, or ValueError for a negative offset or length."""
    batched = getattr(host, "read_ranges", None)
    if batched is not None:
        return list(batched(path, ranges))
    return [host.read_bytes(path, offset, length) for offset, length in ranges]
