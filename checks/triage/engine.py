"""One triage run: inputs read in order through one matcher into one tally, then ranked."""

from __future__ import annotations

import functools
import re
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from checks.triage import reading
from checks.triage.matching import GENERIC_SAMPLE, Matcher, Tally, scan_block
from checks.triage.model import Finding, Limits, ReadSummary, Skipped, TriageReport
from checks.triage.ranking import CodeBook, rank
from checks.triage.rows import ErrorCode, Signature
from probes.textsafe import one_line

_TIMESTAMP = re.compile(rb"(\d{4}-\d{2}-\d{2})[ T-](\d{2}:\d{2}:\d{2})")
CLOSEST = 3


@functools.cache
def knowledge() -> tuple[Matcher, CodeBook]:
    """The signatures and error codes of checks/data, compiled once per process."""
    from checks import data

    book = CodeBook.of(data.load("error_codes", ErrorCode))
    return Matcher.build(data.load("signatures", Signature), book.names()), book


@dataclass
class Run:
    limits: Limits = field(default_factory=Limits)
    matcher: Matcher = field(init=False)
    book: CodeBook = field(init=False)
    tally: Tally = field(init=False)
    budget: reading.Budget = field(init=False)
    files: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lines: int = 0
    bytes_read: int = 0
    first_time: str = ""
    last_time: str = ""

    def __post_init__(self) -> None:
        self.matcher, self.book = knowledge()
        self.tally = Tally(self.limits)
        self.budget = reading.Budget(self.limits.max_total_bytes)

    def read_stream(self, name: str, stream: BinaryIO, limit_bytes: int | None = None) -> None:
        name = one_line(name)  # a file or member name is outside text too
        try:
            stream, head = reading.peekable(stream)
        except OSError as exc:
            self.skipped.append(Skipped(name, one_line(str(exc))))
            return
        if reading.is_binary(head):
            self.skipped.append(Skipped(name, "binary (a NUL byte in its first 8 KiB)"))
            return
        read = reading.FileRead(name)
        source = len(self.files)
        self.files.append(name)
        line = 1
        try:
            for block in reading.blocks(stream, limit_bytes, self.budget, self.limits, read):
                scan_block(self.matcher, self.tally, block, source, name, line)
                line += block.count(b"\n")
        except OSError as exc:
            read.notes.append(f"read stopped: {one_line(str(exc))}")
        self._account(read)

    def read_path(self, path: Path, name: str | None = None) -> None:
        shown = name or str(path)
        if self.budget.left_bytes <= 0:
            self.skipped.append(Skipped(shown, "not read: the total byte cap was reached"))
            return
        if not reading.is_regular(path):
            self.skipped.append(Skipped(shown, "not a regular file (a FIFO, device or socket "
                                        "would block or never end)"))
            return
        try:
            stream, limit, kind = reading.open_file(path)
        except OSError as exc:
            self.skipped.append(Skipped(shown, _reason(exc)))
            return
        with stream:
            if kind == "gzip" and self._is_tar(stream):
                self._read_archive(path, shown)
            else:
                self.read_stream(shown, stream, limit)

    @staticmethod
    def _is_tar(stream: BinaryIO) -> bool:
        from checks.triage.archive import is_tar

        try:
            head = stream.read(512)
            stream.seek(0)
        except (OSError, EOFError, zlib.error):
            return False
        return is_tar(head)

    def _read_archive(self, path: Path, name: str) -> None:
        from checks.triage import archive

        why = archive.refusal(path, self.limits)
        if why:
            self.skipped.append(Skipped(name, one_line(why)))
            return
        try:
            _, notes = archive.read_members(path, name, self.read_stream, self.limits)
        except (OSError, EOFError, tarfile.TarError, zlib.error) as exc:
            self.skipped.append(Skipped(name, one_line(f"archive read stopped: {exc}")))
            return
        self.notes.extend(notes)

    def read_directory(self, root: Path, since_s: float | None) -> None:
        planned, walked = reading.plan_directory(root, self.limits, since_s)
        self.notes.extend(walked.notes)
        self.skipped.extend(walked.skipped)
        if not planned:
            self.notes.append(f"{root}: no files" + (" within --since" if since_s else ""))
        for item in planned:
            self.read_path(item.path, item.name)

    def _account(self, read: reading.FileRead) -> None:
        self.lines += read.lines
        self.bytes_read += read.bytes_read
        self.notes.extend(f"{read.name}: {note}" for note in read.notes)
        first = _TIMESTAMP.search(read.first_block)
        last = _last(_TIMESTAMP.finditer(read.last_block))
        if first:
            stamp = _stamp(first)
            self.first_time = min(self.first_time or stamp, stamp)
        if last:
            stamp = _stamp(last)
            self.last_time = max(self.last_time, stamp)

    def report(self) -> TriageReport:
        findings = rank(self.matcher, self.book, self.tally)
        summary = ReadSummary(tuple(self.files), self.lines, self.bytes_read, self.first_time,
                              self.last_time, tuple(self.skipped), tuple(self.notes))
        return TriageReport(summary, findings, closest(findings, self.tally.generic))


def _last(found: Iterator[re.Match[bytes]]) -> re.Match[bytes] | None:
    match = None
    for match in found:  # noqa: B007 - the last one is wanted
        continue
    return match


def _stamp(found: re.Match[bytes]) -> str:
    return f"{found.group(1).decode()} {found.group(2).decode()}"


def _reason(exc: OSError) -> str:
    if isinstance(exc, IsADirectoryError):
        return "a directory"
    return exc.strerror or one_line(str(exc)) or type(exc).__name__


def closest(findings: Sequence[Finding], generic: Sequence[str]) -> tuple[str, ...]:
    """The findings' playbooks; with none, the playbooks nearest to the error-looking lines."""
    if findings:
        return tuple(dict.fromkeys(f.playbook for f in findings))[:CLOSEST]
    if not generic:
        return ()
    import playbooks

    query = " ".join(generic[:GENERIC_SAMPLE])[:2000]
    return tuple(book.id for book, _ in playbooks.search(query, limit=CLOSEST))
