"""Reading the inputs of triage in bounded memory: text, stdin, files, .gz files, directories.

Everything is read in blocks that end at a line boundary (checks.triage.model.Limits): a line
that runs past a block and past `max_line_bytes` is cut there and the rest of it skipped; a
file is read up to the size it had when opened (a log being written ends there); a gzip
stream stops at the total byte cap with a note (a gzip bomb is a bounded read); a file whose
first block holds a NUL byte is binary and skipped; a directory is walked with a cap on the
entries looked at, and its newest files (by modification time, within `since_s`) are read,
oldest of them first so that "earliest" means earliest in time.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from checks.triage.model import Limits, Skipped

GZIP_MAGIC = b"\x1f\x8b"
BINARY_PROBE_BYTES = 8192
# asys collect output (CANN troubleshooting guide, "asys tool usage"): these dfx/ folders hold
# dumps, operator binaries, core files and the device black box, not text logs
ASYS_MARKER = "software_info.txt"
ASYS_BINARY_DIRS = frozenset({"bbox", "data-dump", "ops", "stackcore", "graph"})


@dataclass
class Budget:
    """What is left of the total byte cap, shared by every input of one triage."""

    left_bytes: int


@dataclass
class FileRead:
    """One input being read: its blocks come from `blocks()`; the counters fill as it goes."""

    name: str
    bytes_read: int = 0
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    first_block: bytes = b""
    last_block: bytes = b""


@dataclass(frozen=True)
class Planned:
    """A file chosen to be read, with where it came from."""

    path: Path
    name: str


def blocks(stream: BinaryIO, limit_bytes: int | None, budget: Budget, limits: Limits,
           read: FileRead) -> Iterator[bytes]:
    """The stream as blocks of whole lines (a last line without a newline gets one)."""
    carry = b""
    skipping = False
    left = limit_bytes
    while True:
        want = min(limits.chunk_bytes, budget.left_bytes, left if left is not None else 1 << 62)
        if want <= 0:
            if budget.left_bytes <= 0 and stream.read(1):
                read.notes.append("stopped at the total byte cap; the rest was not read")
            break
        data = stream.read(want)
        if not data:
            break
        budget.left_bytes -= len(data)
        read.bytes_read += len(data)
        if left is not None:
            left -= len(data)
        if skipping:
            newline = data.find(b"\n")
            if newline < 0:
                continue
            data, skipping = data[newline + 1:], False
        body, carry, skipping = _split(carry + data, limits.max_line_bytes, read)
        if body:
            yield _counted(body, read)
    if carry and not skipping:
        yield _counted(carry + b"\n", read)


def _split(buffer: bytes, max_line: int, read: FileRead) -> tuple[bytes, bytes, bool]:
    """(whole lines, the unfinished last line, whether it was cut and its rest is skipped)."""
    newline = buffer.rfind(b"\n")
    body, carry = (buffer[: newline + 1], buffer[newline + 1:]) if newline >= 0 else (b"", buffer)
    if len(carry) > max_line:
        if not any("cut at" in n for n in read.notes):
            read.notes.append(f"a line longer than {max_line} bytes was cut at {max_line}")
        return body + carry[:max_line] + b"\n", b"", True
    return body, carry, False


def _counted(body: bytes, read: FileRead) -> bytes:
    read.lines += body.count(b"\n")
    if not read.first_block:
        read.first_block = body[:65536]
    read.last_block = body[-65536:]
    return body


def is_regular(path: Path) -> bool:
    """True for a regular file (after links) and for a path that cannot be stat'ed (its open
    then says why); False for FIFOs, devices and sockets, whose reads may block forever."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True


def is_binary(head: bytes) -> bool:
    return b"\0" in head[:BINARY_PROBE_BYTES]


def open_file(path: Path) -> tuple[BinaryIO, int | None, str]:
    """(stream, how many bytes to read at most, kind) of a file: a gzip file is decompressed
    (its size bound does not apply to the decompressed bytes: the total cap does). Raises
    OSError."""
    handle = open(path, "rb")  # noqa: SIM115 - the caller closes it
    try:
        size = os.fstat(handle.fileno()).st_size
        magic = handle.read(2)
        handle.seek(0)
    except OSError:
        handle.close()
        raise
    if magic == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=handle, mode="rb"), None, "gzip"  # type: ignore[return-value]
    return handle, size, "file"


def peekable(stream: BinaryIO) -> tuple[BinaryIO, bytes]:
    """The stream with its first bytes read ahead (for the binary probe) and put back."""
    try:
        head = stream.read(BINARY_PROBE_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise OSError(f"cannot be decompressed: {exc}") from None
    return _Prefixed(head, stream, _is_terminal(stream)), head  # type: ignore[return-value]


def _is_terminal(stream: BinaryIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class _Prefixed(io.RawIOBase):
    def __init__(self, head: bytes, rest: BinaryIO, terminal: bool = False) -> None:
        self._head = head
        self._rest = rest
        # a terminal's Ctrl+D ends one read, not the terminal: a short read from one is the end
        # of the paste (else each read would wait for another Ctrl+D)
        self._terminal = terminal
        self._ended = terminal and len(head) < BINARY_PROBE_BYTES

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._head:
            data, self._head = self._head[:size], self._head[size:]
            return data
        if self._ended:
            return b""
        try:
            data = self._rest.read(size)
            self._ended = self._terminal and len(data) < size
            return data
        except (EOFError, zlib.error, gzip.BadGzipFile):
            return b""  # a truncated gzip ends where its data ends


# -- directories ----------------------------------------------------------------------------


@dataclass
class Walk:
    files: list[tuple[float, Path]] = field(default_factory=list)
    entries: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def walk(root: Path, limits: Limits, since_s: float | None, now_s: float | None = None) -> Walk:
    """The regular files under `root` (no symbolic links followed), with their mtimes."""
    found = Walk()
    oldest = (now_s if now_s is not None else time.time()) - since_s if since_s else None
    if (root / ASYS_MARKER).is_file() and (root / "dfx").is_dir():
        found.notes.append(f"{root}: an asys collect output; its text files and dfx/log are "
                           f"read, dfx/{{{','.join(sorted(ASYS_BINARY_DIRS))}}} left out")
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if found.entries >= limits.max_walk_entries:
                        found.notes.append(f"{root}: stopped after {limits.max_walk_entries} "
                                           "directory entries")
                        return found
                    found.entries += 1
                    _visit(entry, root, oldest, found, pending)
        except OSError as exc:
            found.skipped.append(Skipped(str(directory), _reason(exc)))
    return found


def _visit(entry: os.DirEntry[str], root: Path, oldest: float | None, found: Walk,
           pending: list[Path]) -> None:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError as exc:
        found.skipped.append(Skipped(entry.path, _reason(exc)))
        return
    if stat.S_ISDIR(info.st_mode):
        if not (entry.name in ASYS_BINARY_DIRS and (root / ASYS_MARKER).is_file()):
            pending.append(Path(entry.path))
    elif stat.S_ISREG(info.st_mode) and (oldest is None or info.st_mtime >= oldest):
        found.files.append((info.st_mtime, Path(entry.path)))


def plan_directory(root: Path, limits: Limits, since_s: float | None,
                   max_files: int | None = None) -> tuple[list[Planned], Walk]:
    """The newest files of a directory tree, read oldest first."""
    found = walk(root, limits, since_s)
    cap = limits.max_files if max_files is None else max_files
    newest = sorted(found.files, key=lambda f: f[0], reverse=True)
    if len(newest) > cap:
        found.notes.append(f"{root}: {len(newest)} files; the newest {cap} read")
    chosen = sorted(newest[:cap], key=lambda f: f[0])
    return [Planned(path, str(path)) for _, path in chosen], found


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
