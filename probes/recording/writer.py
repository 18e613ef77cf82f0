"""Writing a Recording: a snapshot directory of JSON members and content-addressed blobs, or a
.tar.gz bundle of one, staged and renamed so that no half-written bundle has the final name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from probes.host import DiskUsage, PythonEnvironment
from probes.recording.model import (
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
