"""A recording in memory: what a recorded Host was asked and answered (Recording, Manifest,
CommandRecord, FileRecord, RangeRecord, RecordedError), the "ascend-snapshot/1.2" schema name
(docs/snapshot-format.md) and the limits a reader holds a bundle to (BundleLimits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probes.errors import HostError, NotRecorded, PathMissing, PathUnreadable, ProbeError
from probes.host import CommandResult, DiskUsage, PathKind, PythonEnvironment

if TYPE_CHECKING:
    from probes.tar_guard import TarLimits


SCHEMA_NAME = "ascend-snapshot"
SCHEMA_MAJOR = 1
# 1.1 added the file_size and disk_usage answers, 1.2 the output_limit outcome; readers take
# 1 and any 1.x.
SCHEMA_MINOR = 2
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_MAJOR}.{SCHEMA_MINOR}"

MIB = 1024 * 1024
PATH_KINDS = ("file", "dir", "char_device", "block_device", "other", "missing")
OUTCOMES = ("exited", "not_found", "timeout", "output_limit", "error", "not_recorded")


class SnapshotError(ProbeError):
    """A snapshot could not be written or read; the message names the member and the problem."""


@dataclass(frozen=True)
class Manifest:
    """Who recorded what, when and where (manifest.json)."""

    schema: str
    created_at: str  # ISO 8601, UTC, e.g. 2025-06-01T12:00:00Z
    hostname: str
    root: str  # the root the recorded host read under ("/" for the live machine)
    tool_version: str
    source: str = ""  # the recorded host's description, e.g. "live under /mnt/img"


@dataclass(frozen=True)
class RecordedError:
    """A HostError, by class name, so it can be raised again as the same class."""

    type: str  # PathMissing, PathUnreadable, NotRecorded or HostError
    reason: str

    @staticmethod
    def of(exc: HostError) -> RecordedError:
        return RecordedError(type=type(exc).__name__, reason=exc.reason)

    def to_exception(self, path: str) -> HostError:
        if self.type == "PathMissing":
            return PathMissing(path)
        if self.type == "NotRecorded":
            return NotRecorded(path)
        if self.type == "PathUnreadable":
            return PathUnreadable(path, self.reason)
        return HostError(path, self.reason)


@dataclass(frozen=True)
class CommandRecord:
    """One command the host was asked to run, and its result."""

    result: CommandResult
    timeout_s: float | None  # as asked; None when the host's default was used


@dataclass(frozen=True)
class RangeRecord:
    """One read_bytes(offset, length) question and its bytes (or error)."""

    offset: int
    length: int | None
    data: bytes | None = None
    error: RecordedError | None = None

    def reached_eof(self) -> bool:
        return self.data is not None and (self.length is None or len(self.data) < self.length)

    def answer(self, offset: int, length: int | None) -> bytes | None:
        """The bytes of (offset, length) when this record covers them, else None."""
        if self.data is None or offset < self.offset:
            return None
        start = offset - self.offset
        if length is None:
            return self.data[start:] if self.reached_eof() else None
        if start + length <= len(self.data) or self.reached_eof():
            return self.data[start : start + length]
        return None


@dataclass(frozen=True)
class FileRecord:
    """Everything asked about one path; None means that question was never asked."""

    kind: PathKind | RecordedError | None = None
    exists: bool | None = None
    realpath: str | RecordedError | None = None
    text: str | RecordedError | None = None
    listing: tuple[str, ...] | RecordedError | None = None
    ranges: tuple[RangeRecord, ...] = ()
    file_size: int | RecordedError | None = None
    disk_usage: DiskUsage | RecordedError | None = None


@dataclass(frozen=True)
class Recording:
    """Everything a recorded host was asked and answered."""

    manifest: Manifest
    env: Mapping[str, str] | None = None
    python: PythonEnvironment | None = None
    commands: tuple[CommandRecord, ...] = ()
    files: Mapping[str, FileRecord] = field(default_factory=dict)
    # the target the recording judged (probes.target.model.to_json), as a JSON object
    target: Mapping[str, Any] | None = None
    # check id -> status of the recorded run (a bundle's report.json), for a replay to compare
    verdicts: Mapping[str, str] | None = None


@dataclass(frozen=True)
class BundleLimits:
    """What a bundle may hold; anything beyond is refused as hostile or broken."""

    max_member_bytes: int = 64 * MIB
    max_total_bytes: int = 512 * MIB
    max_members: int = 20000
    max_extended_header_bytes: int = 16 * 1024  # one pax or GNU long-name header
    max_extended_headers: int = 4  # in a row, before one member
    # The JSON members together (manifest, env, python, target, commands, files). Parsed JSON
    # costs up to ~75 bytes of memory per value (an empty list, a two-letter string) and a
    # decoded string up to 4 bytes per byte, so their bytes and an upper bound of their values
    # are limited far below a blob's; a bundle's written JSON stays within half of each.
    max_json_bytes: int = 8 * MIB
    max_json_values: int = 1_000_000

    def tar(self) -> TarLimits:
        from probes.tar_guard import TarLimits

        return TarLimits(max_members=self.max_members, max_member_bytes=self.max_member_bytes,
                         max_total_bytes=self.max_total_bytes,
                         max_extended_header_bytes=self.max_extended_header_bytes,
                         max_extended_headers=self.max_extended_headers)

