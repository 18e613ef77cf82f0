"""Reading a recording: a snapshot directory or a .tar.gz bundle of one. Hostile-input code:
every member name, kind, size and JSON shape is checked, and each problem is one SnapshotError
naming the member.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar, cast

from probes.host import CommandResult, DiskUsage, PathKind, PythonEnvironment
from probes.recording.model import (
    OUTCOMES,
    PATH_KINDS,
    SCHEMA,
    SCHEMA_MAJOR,
    SCHEMA_NAME,
    BundleLimits,
    CommandRecord,
    FileRecord,
    Manifest,
    RangeRecord,
    RecordedError,
    Recording,
    SnapshotError,
)

if TYPE_CHECKING:
    import tarfile


T = TypeVar("T")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")

# -- bundles ------------------------------------------------------------------------------


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


# -- the directory ------------------------------------------------------------------------


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
