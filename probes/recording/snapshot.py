"""SnapshotHost: answers exactly what a recording (a directory or a .tar.gz bundle of one, read
by probes.recording.reader) holds, and says "not recorded" for anything else.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from probes.errors import NotRecorded
from probes.host import CommandResult, DiskUsage, PathKind, PythonEnvironment
from probes.recording.model import BundleLimits, CommandRecord, FileRecord, Manifest, RecordedError
from probes.recording.reader import load_recording

T = TypeVar("T")


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

