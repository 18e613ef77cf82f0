"""RecordingHost: forwards every question to another Host and keeps question and answer;
`save()` writes them (probes.recording.writer).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from probes.errors import HostError
from probes.host import CommandResult, DiskUsage, Host, PathKind, PythonEnvironment
from probes.recording.model import (
    SCHEMA,
    CommandRecord,
    FileRecord,
    Manifest,
    RangeRecord,
    RecordedError,
    Recording,
)
from probes.recording.writer import save_recording

T = TypeVar("T")


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


