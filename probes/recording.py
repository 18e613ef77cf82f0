"""Record what a Host was asked and answered; answer again from the recording anywhere.

`RecordingHost(inner)` forwards every question to `inner` and keeps question + answer;
`save()` writes the "ascend-snapshot/1.2" format (docs/snapshot-format.md). `SnapshotHost(path)`
answers from such a directory or a `.tar.gz` of one, and says "not recorded" for anything
else. Reading a bundle is hostile-input code: every member name, kind, size and JSON shape is
checked, and each problem is one SnapshotError naming the member.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar, cast

from probes.errors import HostError, NotRecorded, PathMissing, PathUnreadable, ProbeError
from probes.host import CommandResult, DiskUsage, Host, PathKind, PythonEnvironment

if TYPE_CHECKING:
    import tarfile

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
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")

T = TypeVar("T")


class SnapshotError(ProbeError):
    """A snapshot could not be written or read; the message names the member and the problem."""


# -- the recording, in memory -------------------------------------------------------------


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


# -- recording ----------------------------------------------------------------------------


class RecordingHost:
    """Forwards every question to `inner` and records question and answer.

    HostErrors raised by `inner` are recorded and raised again; other exceptions (bugs, bad
    arguments) pass through unrecorded. Safe to use from several threads.
    """

    def __init__(
        self, inner: Host, hostname: str | None = None, tool_version: str | None = None
    ) -> None:
        self.inner = inner
        self._manifest = Manifest(
            schema=SCHEMA,
            created_at=utc_now_iso(),
            hostname=hostname if hostname is not None else observed_hostname(inner),
            root=str(getattr(inner, "root", "/")),
            tool_version=tool_version if tool_version is not None else own_version(),
            source=inner.description,
        )
        self._lock = threading.Lock()
        self._env: dict[str, str] | None = None
        self._python: PythonEnvironment | None = None
        self._commands: list[CommandRecord] = []
        self._files: dict[str, FileRecord] = {}

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def env(self) -> Mapping[str, str]:
        env = dict(self.inner.env)
        with self._lock:
            self._env = env
        return env

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        argv = tuple(argv)
        result = self.inner.run(argv) if timeout_s is None else self.inner.run(argv, timeout_s)
        with self._lock:
            self._commands.append(CommandRecord(result=result, timeout_s=timeout_s))
        return result

    def python_packages(self) -> PythonEnvironment:
        found = self.inner.python_packages()
        with self._lock:
            self._python = found
        return found

    def read_text(self, path: str) -> str:
        return self._ask(path, "text", lambda: self.inner.read_text(path))

    def list_dir(self, path: str) -> list[str]:
        names = self._ask(path, "listing", lambda: tuple(self.inner.list_dir(path)))
        return list(names)

    def kind(self, path: str) -> PathKind:
        return self._ask(path, "kind", lambda: self.inner.kind(path))

    def exists(self, path: str) -> bool:
        return self._ask(path, "exists", lambda: self.inner.exists(path))

    def realpath(self, path: str) -> str:
        return self._ask(path, "realpath", lambda: self.inner.realpath(path))

    def file_size(self, path: str) -> int:
        return self._ask(path, "file_size", lambda: self.inner.file_size(path))

    def disk_usage(self, path: str) -> DiskUsage:
        return self._ask(path, "disk_usage", lambda: self.inner.disk_usage(path))

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        try:
            data = self.inner.read_bytes(path, offset, length)
        except HostError as exc:
            self._add_range(path, RangeRecord(offset, length, error=RecordedError.of(exc)))
            raise
        self._add_range(path, RangeRecord(offset, length, data=data))
        return data

    def _ask(self, path: str, question: str, ask: Callable[[], T]) -> T:
        try:
            answer = ask()
        except HostError as exc:
            self._update(path, question, RecordedError.of(exc))
            raise
        self._update(path, question, answer)
        return answer

    def _update(self, path: str, question: str, answer: Any) -> None:
        with self._lock:
            entry = self._files.get(path, FileRecord())
            self._files[path] = replace(entry, **{question: answer})

    def _add_range(self, path: str, record: RangeRecord) -> None:
        with self._lock:
            entry = self._files.get(path, FileRecord())
            self._files[path] = replace(entry, ranges=(*entry.ranges, record))

    def snapshot(self) -> Recording:
        with self._lock:
            return Recording(
                manifest=self._manifest,
                env=None if self._env is None else dict(self._env),
                python=self._python,
                commands=tuple(self._commands),
                files=dict(self._files),
            )

    def save(self, path: Path) -> Path:
        """Write the recording: a directory, or a bundle when `path` ends in .tar.gz."""
        return save_recording(self.snapshot(), path)


def utc_now_iso() -> str:
    from datetime import datetime, timezone  # only a recorder needs the time

    now = datetime.now(timezone.utc).replace(microsecond=0)
    return now.isoformat().replace("+00:00", "Z")


def own_version() -> str:

    try:
        return metadata.version("ascend-doctor")
    except metadata.PackageNotFoundError:
        return "unknown"


def observed_hostname(inner: Host) -> str:
    import socket

    if getattr(inner, "root", None) == "/":
        return socket.gethostname()
    try:  # asked of inner directly: the hostname is metadata, not a recorded question
        return inner.read_text("/etc/hostname").strip() or "unknown"
    except HostError:
        return "unknown"


# -- answering from a recording ----------------------------------------------------------


class SnapshotHost:
    """Answers exactly what a recording holds; anything else is "not recorded".

    A command asked several times is answered with its recorded answers in order, the last
    one repeating. A read_bytes range is answered when one recorded range covers it.
    """

    def __init__(self, path: Path, limits: BundleLimits | None = None) -> None:
        self.path = Path(path)
        self.recording = load_recording(self.path, limits or BundleLimits())
        self._answers = _commands_by_argv(self.recording.commands)
        self._asked: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()

    @property
    def manifest(self) -> Manifest:
        return self.recording.manifest

    @property
    def root(self) -> str:
        return self.manifest.root

    @property
    def description(self) -> str:
        return f"recording of {self.manifest.hostname} taken {self.manifest.created_at}"

    @property
    def env(self) -> Mapping[str, str]:
        if self.recording.env is None:
            raise NotRecorded("environment")
        return self.recording.env

    def python_packages(self) -> PythonEnvironment:
        if self.recording.python is None:
            return PythonEnvironment(interpreter="", error="python packages were not recorded")
        return self.recording.python

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        argv = tuple(argv)
        answers = self._answers.get(argv)
        if not answers:
            return CommandResult(argv=argv, outcome="not_recorded", error="not recorded")
        with self._lock:
            index = self._asked.get(argv, 0)
            self._asked[argv] = index + 1
        return answers[min(index, len(answers) - 1)]

    def read_text(self, path: str) -> str:
        entry = self._entry(path)
        if entry.text is not None:
            return _value_or_raise(entry.text, path)
        whole = next((r.data for r in entry.ranges if r.offset == 0 and r.reached_eof()), None)
        if whole is None:
            raise NotRecorded(path)
        return whole.decode("utf-8", errors="replace")

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        entry = self._entry(path)
        for record in entry.ranges:
            if record.error is not None and (record.offset, record.length) == (offset, length):
                raise record.error.to_exception(path)
            data = record.answer(offset, length)
            if data is not None:
                return data
        raise NotRecorded(path)

    def list_dir(self, path: str) -> list[str]:
        return list(_value_or_raise(self._asked_about(path, "listing"), path))

    def kind(self, path: str) -> PathKind:
        return _value_or_raise(self._asked_about(path, "kind"), path)

    def realpath(self, path: str) -> str:
        return _value_or_raise(self._asked_about(path, "realpath"), path)

    def file_size(self, path: str) -> int:
        return _value_or_raise(self._asked_about(path, "file_size"), path)

    def disk_usage(self, path: str) -> DiskUsage:
        return _value_or_raise(self._asked_about(path, "disk_usage"), path)

    def exists(self, path: str) -> bool:
        entry = self._entry(path)
        if entry.exists is not None:
            return entry.exists
        if entry.kind is None:
            raise NotRecorded(path)
        return isinstance(entry.kind, str) and entry.kind != "missing"

    def _entry(self, path: str) -> FileRecord:
        entry = self.recording.files.get(path)
        if entry is None:
            raise NotRecorded(path)
        return entry

    def _asked_about(self, path: str, question: str) -> Any:
        answer = getattr(self._entry(path), question)
        if answer is None:
            raise NotRecorded(path)
        return answer


def _value_or_raise(answer: T | RecordedError, path: str) -> T:
    if isinstance(answer, RecordedError):
        raise answer.to_exception(path)
    return answer


def _commands_by_argv(
    commands: Sequence[CommandRecord],
) -> dict[tuple[str, ...], list[CommandResult]]:
    by_argv: dict[tuple[str, ...], list[CommandResult]] = {}
    for record in commands:
        by_argv.setdefault(record.result.argv, []).append(record.result)
    return by_argv


# -- writing ------------------------------------------------------------------------------


def save_recording(recording: Recording, path: Path) -> Path:
    """Write `recording` to a new directory, or to a bundle when `path` ends in .tar.gz."""
    import tarfile
    import tempfile

    path = Path(path)
    if not path.name.endswith((".tar.gz", ".tgz")):
        write_directory(recording, path)
        return path
    top = path.name.removesuffix(".tar.gz").removesuffix(".tgz") or "snapshot"
    with tempfile.TemporaryDirectory() as tmp:
        write_directory(recording, Path(tmp) / top)
        with tarfile.open(path, "w:gz") as tar:
            tar.add(Path(tmp) / top, arcname=top, filter=_anonymous_member)
    return path


def _anonymous_member(member: tarfile.TarInfo) -> tarfile.TarInfo:
    # The bundle travels to other people: no local user or group names in it.
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    return member


def write_directory(recording: Recording, path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise SnapshotError(f"{path}: exists and is not an empty directory; choose a new path")
    blobs: dict[str, bytes] = {}
    (path / "blobs").mkdir(parents=True, exist_ok=True)
    _write_json(path / "manifest.json", _manifest_json(recording.manifest))
    if recording.env is not None:
        _write_json(path / "env.json", dict(recording.env))
    if recording.python is not None:
        _write_json(path / "python.json", _python_json(recording.python))
    if recording.target is not None:
        _write_json(path / "target.json", dict(recording.target))
    _write_json(path / "commands.json", [_command_json(c) for c in recording.commands])
    files = {p: _file_json(e, blobs) for p, e in sorted(recording.files.items())}
    _write_json(path / "files.json", files)
    for digest, data in blobs.items():
        (path / "blobs" / digest).write_bytes(data)


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _manifest_json(manifest: Manifest) -> dict[str, str]:
    return {
        "schema": manifest.schema,
        "created_at": manifest.created_at,
        "hostname": manifest.hostname,
        "root": manifest.root,
        "tool_version": manifest.tool_version,
        "source": manifest.source,
    }


def _python_json(found: PythonEnvironment) -> dict[str, object]:
    return {
        "interpreter": found.interpreter,
        "python_version": found.python_version,
        "packages": dict(found.packages),
        "locations": dict(found.locations),
        "error": found.error,
    }


def _command_json(record: CommandRecord) -> dict[str, object]:
    result = record.result
    return {
        "argv": list(result.argv),
        "timeout_s": record.timeout_s,
        "outcome": result.outcome,
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "duration_s": result.duration_s,
        "error": result.error,
    }


def _file_json(entry: FileRecord, blobs: dict[str, bytes]) -> dict[str, object]:
    out: dict[str, object] = {}
    for question in ("kind", "exists", "realpath", "file_size"):
        answer = getattr(entry, question)
        if answer is not None:
            out[question] = _answer_json(answer, lambda v: {"value": v})
    if entry.listing is not None:
        out["listing"] = _answer_json(entry.listing, lambda v: {"value": list(v)})
    if entry.text is not None:
        out["text"] = _answer_json(entry.text, lambda v: _blob_ref(v.encode(), blobs))
    if entry.disk_usage is not None:
        out["disk_usage"] = _answer_json(entry.disk_usage, _disk_usage_json)
    if entry.ranges:
        out["ranges"] = [_range_json(r, blobs) for r in entry.ranges]
    return out


def _disk_usage_json(usage: DiskUsage) -> dict[str, Any]:
    # the path is the files.json key; it is not repeated
    return {"value": {"total_bytes": usage.total_bytes, "free_bytes": usage.free_bytes}}


def _answer_json(answer: T | RecordedError, ok: Callable[[T], dict[str, Any]]) -> object:
    if isinstance(answer, RecordedError):
        return {"error": {"type": answer.type, "reason": answer.reason}}
    return ok(answer)


def _range_json(record: RangeRecord, blobs: dict[str, bytes]) -> dict[str, object]:
    out: dict[str, object] = {"offset": record.offset, "length": record.length}
    if record.error is not None:
        out["error"] = {"type": record.error.type, "reason": record.error.reason}
    elif record.data is not None:
        out.update(_blob_ref(record.data, blobs))
    return out


def _blob_ref(data: bytes, blobs: dict[str, bytes]) -> dict[str, object]:
    import hashlib  # OpenSSL's loading costs more than a small recording's reading

    digest = hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"blob": digest, "size": len(data)}


# -- reading: limits and bundles ---------------------------------------------------------


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


def load_recording(path: Path, limits: BundleLimits) -> Recording:
    """A Recording from a snapshot directory or a .tar.gz bundle of one."""
    if path.is_dir():
        return read_directory(path, limits)
    import tempfile

    if not path.is_file():
        raise SnapshotError(f"{path}: no such snapshot directory or bundle")
    with tempfile.TemporaryDirectory(prefix="ascend-snapshot-") as tmp:
        extract_bundle(path, Path(tmp), limits)
        return read_directory(_bundle_top(Path(tmp), path), limits)


def extract_bundle(archive: Path, dest: Path, limits: BundleLimits) -> None:
    """Extract a .tar.gz into `dest`, member by member, refusing anything unsafe.

    The raw headers are walked first (probes.tar_guard), so `tarfile` only ever reads an
    archive whose every header, size and count is within the limits; it must then see as many
    members as that walk did.
    """
    import tarfile  # a directory recording is read without it

    from probes.tar_guard import TarRefused, check_tar_gz

    try:
        with open(archive, "rb") as source:
            try:
                expected = check_tar_gz(source, limits.tar())
            except TarRefused as exc:
                raise SnapshotError(f"{archive}: not a readable .tar.gz bundle ({exc})") from None
            source.seek(0)
            with tarfile.open(fileobj=source, mode="r:gz") as tar:
                seen = _extract_all(tar, dest, limits)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise SnapshotError(f"{archive}: not a readable .tar.gz bundle ({exc})") from exc
    if seen != expected:
        raise SnapshotError(f"{archive}: not a readable .tar.gz bundle: tarfile stopped "
                            f"after {seen} of {expected} members (a corrupt header inside)")


def _extract_all(tar: tarfile.TarFile, dest: Path, limits: BundleLimits) -> int:
    total_bytes = count = 0
    for count, member in enumerate(_members(tar), start=1):
        total_bytes += member.size
        _check_member(member, count, total_bytes, limits)
        _extract_member(tar, member, dest)
    return count


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    # Iterating reads headers lazily, so a bundle with millions of members stops early.
    member = tar.next()
    while member is not None:
        yield member
        member = tar.next()


def _check_member(
    member: tarfile.TarInfo, count: int, total_bytes: int, limits: BundleLimits
) -> None:
    name = member.name
    if "\x00" in name:
        raise SnapshotError(f"{name!r}: NUL byte in a member name")
    if count > limits.max_members:
        raise SnapshotError(f"{name}: bundle has more than {limits.max_members} members")
    if name.startswith("/"):
        raise SnapshotError(f"{name}: absolute member name in bundle")
    if ".." in PurePosixPath(name).parts:
        raise SnapshotError(f"{name}: member name with '..' would escape the bundle")
    if member.issym() or member.islnk():
        raise SnapshotError(f"{name}: links are not allowed in a bundle")
    if not (member.isfile() or member.isdir()):
        raise SnapshotError(f"{name}: device or special file not allowed in a bundle")
    if member.size < 0:
        raise SnapshotError(f"{name}: a negative size ({member.size} bytes)")
    if member.size > limits.max_member_bytes:
        raise SnapshotError(
            f"{name}: {member.size} bytes, over the {limits.max_member_bytes} limit"
        )
    if total_bytes > limits.max_total_bytes:
        raise SnapshotError(f"{name}: bundle exceeds {limits.max_total_bytes} bytes in total")


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path) -> None:
    import shutil

    target = dest.joinpath(*PurePosixPath(member.name).parts)
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    if source is None:
        raise SnapshotError(f"{member.name}: unreadable member")
    with source, open(target, "wb") as out:
        shutil.copyfileobj(source, out)


def _bundle_top(extracted: Path, archive: Path) -> Path:
    """The snapshot directory inside an extracted bundle: its top or its one folder."""
    if (extracted / "manifest.json").is_file():
        return extracted
    folders = [p for p in extracted.iterdir() if p.is_dir()]
    if len(folders) == 1 and (folders[0] / "manifest.json").is_file():
        return folders[0]
    raise SnapshotError(f"{archive}: no manifest.json at the top of the bundle")


# -- reading: the directory ----------------------------------------------------------------


def read_directory(path: Path, limits: BundleLimits) -> Recording:
    budget = JsonBudget(limits)
    manifest = _checked(path, "manifest.json", budget, _parse_manifest, required=True)
    env = _checked(path, "env.json", budget, _parse_env)
    python = _checked(path, "python.json", budget, _parse_python)
    target = _checked(path, "target.json", budget, _parse_target)
    commands = _checked(path, "commands.json", budget, _parse_commands) or ()
    blobs = _BlobReader(path / "blobs", limits)
    files = _checked(path, "files.json", budget, lambda raw: _parse_files(raw, blobs)) or {}
    verdicts = _checked(path, "report.json", budget, _parse_verdicts)
    assert manifest is not None  # required=True
    return Recording(manifest=manifest, env=env, python=python, commands=commands, files=files,
                     target=target, verdicts=verdicts)


_STRUCTURE = (b",", b":", b"[", b"{")


def json_values_bound(raw: bytes | str) -> int:
    """An upper bound of the values json.loads makes of `raw`: each one but the first follows a
    `,`, `:`, `[` or `{` (those inside strings count too, so it never undercounts)."""
    data = raw.encode("utf-8", errors="replace") if isinstance(raw, str) else raw
    return 1 + sum(data.count(mark) for mark in _STRUCTURE)


class JsonBudget:
    """What the JSON members of one snapshot may cost together, spent member by member before
    each is parsed."""

    def __init__(self, limits: BundleLimits) -> None:
        self.limits = limits
        self.bytes_left = limits.max_json_bytes
        self.values_left = limits.max_json_values

    def read(self, path: Path, member: str, required: bool) -> bytes | None:
        raw = _read_member(path, member, self.limits, required, self.bytes_left)
        if raw is None:
            return None
        values = json_values_bound(raw)
        if values > self.values_left:
            raise SnapshotError(
                f"{member}: up to {values:,} JSON values, over what is left of the "
                f"{self.limits.max_json_values:,} the JSON members may hold together")
        self.bytes_left -= len(raw)
        self.values_left -= values
        return raw


def _checked(
    directory: Path,
    member: str,
    budget: JsonBudget,
    parse: Callable[[Any], T],
    required: bool = False,
) -> T | None:
    """Parse one JSON member; any shape problem becomes a SnapshotError naming it."""
    raw = budget.read(directory / member, member, required)
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
        return parse(value)
    except SnapshotError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise SnapshotError(f"{member}: not a valid {SCHEMA} member ({exc})") from exc


def _read_member(path: Path, member: str, limits: BundleLimits, required: bool,
                 json_bytes_left: int | None = None) -> bytes | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if required:
            raise SnapshotError(f"{member}: missing from the snapshot") from None
        return None
    if not stat.S_ISREG(info.st_mode):
        raise SnapshotError(f"{member}: not a regular file (links are not followed)")
    if info.st_size > limits.max_member_bytes:
        raise SnapshotError(f"{member}: {info.st_size} bytes, over the limit")
    if json_bytes_left is not None and info.st_size > json_bytes_left:
        raise SnapshotError(f"{member}: {info.st_size:,} bytes of JSON, over what is left of "
                            f"the {limits.max_json_bytes:,} bytes the JSON members may hold "
                            "together")
    limit = limits.max_member_bytes if json_bytes_left is None else json_bytes_left
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)  # the file may have grown since lstat
    if len(data) > limit:
        raise SnapshotError(f"{member}: grew past {limit:,} bytes while being read")
    return data


class _BlobReader:
    """Blobs by digest, each read, checked and decoded once however often it is referenced
    (identical contents are stored once, so one blob may answer many questions)."""

    def __init__(self, directory: Path, limits: BundleLimits) -> None:
        self.directory = directory
        self.limits = limits
        self._bytes: dict[str, bytes] = {}
        self._texts: dict[str, str] = {}

    def read(self, digest: object) -> bytes:
        if not isinstance(digest, str) or not _SHA256_RE.match(digest):
            raise ValueError(f"blob reference {digest!r:.80} is not a sha256 hex digest")
        cached = self._bytes.get(digest)
        if cached is not None:
            return cached
        import hashlib  # only a recording with blobs needs it

        member = f"blobs/{digest}"
        data = _read_member(self.directory / digest, member, self.limits, required=True)
        assert data is not None
        if hashlib.sha256(data).hexdigest() != digest:
            raise SnapshotError(f"{member}: content does not match its sha256 name")
        self._bytes[digest] = data
        return data

    def text(self, digest: object) -> str:
        data = self.read(digest)
        assert isinstance(digest, str)  # read() checked it
        if digest not in self._texts:
            self._texts[digest] = data.decode("utf-8", "replace")
        return self._texts[digest]


def _parse_manifest(raw: Any) -> Manifest:
    schema = _expect(raw["schema"], str, "schema")
    name, _, version = schema.partition("/")
    major = version.split(".", 1)[0]
    if name != SCHEMA_NAME or major != str(SCHEMA_MAJOR):
        raise SnapshotError(
            f"manifest.json: schema {schema!r} is not supported "
            f"(reads {SCHEMA_NAME}/{SCHEMA_MAJOR} and {SCHEMA_NAME}/{SCHEMA_MAJOR}.x)"
        )
    return Manifest(
        schema=schema,
        created_at=_expect(raw["created_at"], str, "created_at"),
        hostname=_expect(raw["hostname"], str, "hostname"),
        root=_expect(raw.get("root", "/"), str, "root"),
        tool_version=_expect(raw.get("tool_version", ""), str, "tool_version"),
        source=_expect(raw.get("source", ""), str, "source"),
    )


def _parse_verdicts(raw: Any) -> dict[str, str]:
    """report.json's results as check id -> status (a bundle member beside the snapshot)."""
    results = raw.get("results") if isinstance(raw, dict) else None
    if not isinstance(results, list):
        return {}  # not a report this replay can compare with: nothing is listed
    return {r["id"]: r["status"] for r in results
            if isinstance(r, dict) and isinstance(r.get("id"), str)
            and isinstance(r.get("status"), str)}


def _parse_target(raw: Any) -> dict[str, Any]:
    # its fields are checked where it is used (probes.target.model.from_json)
    if not isinstance(raw, dict):
        raise SnapshotError("target.json: not a JSON object")
    return raw


def _parse_env(raw: Any) -> dict[str, str]:
    return _str_map(raw, "environment")


def _parse_python(raw: Any) -> PythonEnvironment:
    return PythonEnvironment(
        interpreter=_expect(raw["interpreter"], str, "interpreter"),
        python_version=_expect(raw.get("python_version", ""), str, "python_version"),
        packages=_str_map(raw.get("packages", {}), "packages"),
        locations=_str_map(raw.get("locations", {}), "locations"),
        error=_expect(raw.get("error", ""), str, "error"),
    )


def _parse_commands(raw: Any) -> tuple[CommandRecord, ...]:
    return tuple(_parse_command(item) for item in _expect(raw, list, "commands"))


def _parse_command(raw: Any) -> CommandRecord:
    argv = tuple(_expect(a, str, "argv item") for a in _expect(raw["argv"], list, "argv"))
    outcome = _expect(raw["outcome"], str, "outcome")
    if not argv:
        raise ValueError("a command with an empty argv")
    error = _expect(raw.get("error", ""), str, "error")
    if outcome not in OUTCOMES:  # a later minor version's outcome: it did not exit normally
        outcome, error = "error", f"outcome {outcome[:40]!r}: {error}"
    exit_code = raw.get("exit_code")
    timeout_s = raw.get("timeout_s")
    result = CommandResult(
        argv=argv,
        outcome=cast(Any, outcome),
        exit_code=None if exit_code is None else _expect(exit_code, int, "exit_code"),
        stdout=_expect(raw.get("stdout", ""), str, "stdout"),
        stderr=_expect(raw.get("stderr", ""), str, "stderr"),
        duration_s=float(_expect(raw.get("duration_s", 0.0), (int, float), "duration_s")),
        error=error,
    )
    return CommandRecord(result=result, timeout_s=None if timeout_s is None else float(timeout_s))


def _parse_files(raw: Any, blobs: _BlobReader) -> dict[str, FileRecord]:
    return {
        _expect(path, str, "path"): _parse_file(path, _expect(entry, dict, path), blobs)
        for path, entry in _expect(raw, dict, "files").items()
    }


def _parse_file(path: str, raw: dict[str, Any], blobs: _BlobReader) -> FileRecord:
    return FileRecord(
        kind=_answer(raw, "kind", _parse_kind),
        exists=_expect(raw["exists"]["value"], bool, "exists") if "exists" in raw else None,
        realpath=_answer(raw, "realpath", lambda a: _expect(a["value"], str, "realpath")),
        text=_answer(raw, "text", lambda a: blobs.text(a["blob"])),
        listing=_answer(raw, "listing", _parse_listing),
        ranges=tuple(
            _parse_range(r, blobs) for r in _expect(raw.get("ranges", []), list, "ranges")
        ),
        file_size=_answer(raw, "file_size", lambda a: _byte_count(a["value"], "file_size")),
        disk_usage=_answer(raw, "disk_usage", lambda a: _parse_disk_usage(a["value"], path)),
    )


def _byte_count(value: Any, what: str) -> int:
    count = _expect(value, int, what)
    if count < 0:
        raise ValueError(f"{what}: negative byte count {count}")
    return count


def _parse_disk_usage(raw: Any, path: str) -> DiskUsage:
    usage = _expect(raw, dict, "disk_usage")
    return DiskUsage(
        total_bytes=_byte_count(usage["total_bytes"], "total_bytes"),
        free_bytes=_byte_count(usage["free_bytes"], "free_bytes"),
        path=path,
    )


def _answer(raw: dict[str, Any], key: str, parse: Callable[[Any], T]) -> T | RecordedError | None:
    if key not in raw:
        return None
    answer = _expect(raw[key], dict, key)
    if "error" in answer:
        return _parse_error(answer["error"])
    return parse(answer)


def _parse_kind(answer: Any) -> PathKind:
    kind = _expect(answer["value"], str, "kind")
    if kind not in PATH_KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    return cast(PathKind, kind)


def _parse_listing(answer: Any) -> tuple[str, ...]:
    return tuple(_expect(n, str, "listing item") for n in _expect(answer["value"], list, "listing"))


def _parse_range(raw: Any, blobs: _BlobReader) -> RangeRecord:
    offset = _expect(raw["offset"], int, "offset")
    length = raw.get("length")
    if length is not None:
        length = _expect(length, int, "length")
    if "error" in raw:
        return RangeRecord(offset, length, error=_parse_error(raw["error"]))
    return RangeRecord(offset, length, data=blobs.read(raw["blob"]))


def _parse_error(raw: Any) -> RecordedError:
    return RecordedError(
        type=_expect(raw["type"], str, "error type"), reason=_expect(raw["reason"], str, "reason")
    )


def _str_map(raw: Any, what: str) -> dict[str, str]:
    return {
        _expect(k, str, f"{what} key"): _expect(v, str, f"{what} value")
        for k, v in _expect(raw, dict, what).items()
    }


def _expect(value: Any, kind: type[T] | tuple[type, ...], what: str) -> T:
    # bool is an int in Python; a JSON true must not pass as an offset or exit code.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        expected = getattr(kind, "__name__", kind)
        raise TypeError(f"{what}: expected {expected}, got {_short(value)}")
    return cast(T, value)


def _short(value: Any) -> str:
    """What a wrong value was, cheaply: the repr of a huge list is never built."""
    if isinstance(value, (str, bytes)):
        return repr(value[:60])
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18:
        return "a very long integer"
    return repr(value)[:60]
