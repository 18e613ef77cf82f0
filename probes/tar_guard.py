"""The raw checks of a `.tar.gz` bundle, made before `tarfile` reads a byte of it.

`tarfile` trusts what a header says: a pax header of any size is read into memory, chained
extended headers recurse, a base-256 size may be negative, a corrupt header after the first
member is taken for the end of the archive (and the members after it silently vanish), and in
the interpreters before 3.11.10 a pax header with a long run of digits makes a regular
expression backtrack for minutes (CVE-2024-6232). So the archive is walked here first, one
512-byte block at a time, with every count and size bounded (`TarLimits`):

- every header's checksum is right, its size field is plain octal or non-negative base-256,
  and its type is one a snapshot may hold (files, directories; links and devices are named
  and refused by the reader after this walk);
- pax (`x`) and GNU long-name (`L`, `K`) headers are small, few per member, and their records
  parse strictly (no global `g` headers, no sparse files, no digit runs that feed the regex);
- members, their sizes and their sum stay under the limits (negative sizes never count);
- the archive ends with its end-of-archive marker (two zero blocks), only zeros follow it, and
  the gzip stream ends there (nothing after it but zero padding).

The walk decompresses in bounded steps and keeps nothing but counters, so its cost is that of
reading the file once. It returns how many members it saw: the reader checks that `tarfile`
saw the same number, so no header `tarfile` would skip or stop at goes unnoticed.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import BinaryIO

BLOCK = 512
KIB = 1024
MIB = 1024 * KIB
_ZERO_BLOCK = bytes(BLOCK)
_CHUNK = 64 * KIB

_EXTENDED = {b"x": "pax", b"X": "pax", b"L": "GNU long name", b"K": "GNU long link name"}
_REGULAR = (b"0", b"\x00", b"7")
_OTHER_KNOWN = (b"1", b"2", b"3", b"4", b"5", b"6")  # links, devices, directory, FIFO
# pax keywords a snapshot writer may set (POSIX.1-2008 pax, plus the vendor prefixes of GNU
# tar and bsdtar for attributes; both are ignored by the reader)
_PAX_KEYS = frozenset({b"path", b"linkpath", b"size", b"mtime", b"atime", b"ctime", b"uid",
                       b"gid", b"uname", b"gname", b"hdrcharset", b"comment"})
_PAX_KEY_PREFIXES = (b"SCHILY.", b"LIBARCHIVE.")
_PAX_LENGTH = re.compile(rb"([1-9][0-9]{0,5}) ")
_DIGIT_RUN = 32  # longest run of digits a pax header may hold (the CVE-2024-6232 trigger)
_DIGITS = re.compile(rb"[0-9]{%d}" % (_DIGIT_RUN + 1))


class TarRefused(Exception):
    """The archive is refused; the message says where and why, in one line."""


@dataclass(frozen=True)
class TarLimits:
    """How much a bundle may hold before it is refused unread."""

    max_members: int
    max_member_bytes: int
    max_total_bytes: int
    max_extended_header_bytes: int = 16 * KIB  # a pax or long-name header (PATH_MAX is 4 KiB)
    max_extended_headers: int = 4  # in a row, before one member
    max_pax_records: int = 64  # in one pax header
    max_trailing_zero_bytes: int = 1 * MIB  # after the end-of-archive marker (record padding)


class _Inflater:
    """The decompressed bytes of a gzip file, read in bounded steps."""

    def __init__(self, source: BinaryIO) -> None:
        self.source = source
        self.inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)  # a gzip header and trailer
        self.buffer = bytearray()
        self.position = 0  # offset in the decompressed stream of buffer[0]

    def read(self, size: int) -> bytes:
        """`size` bytes, or fewer at the end of the gzip stream."""
        while len(self.buffer) < size and self._more():
            pass
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        self.position += len(data)
        return data

    def skip(self, size: int) -> int:
        """Skip `size` bytes; returns how many there were."""
        skipped = 0
        while skipped < size:
            got = len(self.read(min(_CHUNK, size - skipped)))
            if not got:
                break
            skipped += got
        return skipped

    def _more(self) -> bool:
        if self.inflate.eof:
            return False
        data = self.inflate.unconsumed_tail or self.source.read(_CHUNK)
        if not data:
            raise TarRefused("the gzip stream is cut short (no gzip trailer)")
        try:
            self.buffer += self.inflate.decompress(data, _CHUNK)
        except zlib.error as exc:
            raise TarRefused(f"not a valid gzip stream ({exc})") from None
        return True

    def check_end(self, limit: int) -> None:
        """Once the stream has ended: nothing after it but (bounded) zero padding."""
        trailing, seen = self.inflate.unused_data, 0
        while trailing:
            if trailing.strip(b"\x00"):
                raise TarRefused("data after the end of the gzip stream")
            seen += len(trailing)
            if seen > limit:
                raise TarRefused(f"more than {limit} bytes of padding after the gzip stream")
            trailing = self.source.read(_CHUNK)


def check_tar_gz(source: BinaryIO, limits: TarLimits) -> int:
    """Walk the headers of a .tar.gz; returns the number of members. Raises TarRefused."""
    stream = _Inflater(source)
    walk = _Walk(limits)
    while True:
        block = stream.read(BLOCK)
        if len(block) < BLOCK:
            raise TarRefused(f"the archive ends at byte {stream.position} without its "
                             "end-of-archive marker (cut short?)")
        if block == _ZERO_BLOCK:
            walk.finish()
            _check_after_marker(stream, limits)
            return walk.members
        walk.header(block, stream)


def _check_after_marker(stream: _Inflater, limits: TarLimits) -> None:
    if stream.read(BLOCK) != _ZERO_BLOCK:
        raise TarRefused(f"a zero block at byte {stream.position - BLOCK} is not followed by "
                         "a second one: a corrupt or cut archive, not its end")
    padding = 0
    while chunk := stream.read(_CHUNK):
        if chunk.strip(b"\x00"):
            raise TarRefused(f"data after the end-of-archive marker (byte {stream.position})")
        padding += len(chunk)
        if padding > limits.max_trailing_zero_bytes:
            raise TarRefused(f"more than {limits.max_trailing_zero_bytes} bytes of padding "
                             "after the end-of-archive marker")
    stream.check_end(limits.max_trailing_zero_bytes)


class _Walk:
    """Counters and the extended headers waiting for their member."""

    def __init__(self, limits: TarLimits) -> None:
        self.limits = limits
        self.members = 0
        self.total_bytes = 0
        self.pending: list[bytes] = []  # types of the extended headers in a row
        self.name: str | None = None  # from a pax path or a GNU long name
        self.size: int | None = None  # from a pax size

    def finish(self) -> None:
        if self.pending:
            raise TarRefused("an extended header is not followed by its member")

    def header(self, block: bytes, stream: _Inflater) -> None:
        at = stream.position - BLOCK
        _check_checksum(block, at)
        kind = block[156:157]
        size = _size_field(block[124:136], at)
        if kind in _EXTENDED:
            self._extended(kind, size, stream, at)
            return
        name = self.name or _ustar_name(block)
        self.members += 1
        if self.members > self.limits.max_members:
            raise TarRefused(f"{name}: more than {self.limits.max_members} members")
        size = self.size if self.size is not None else size
        self.pending, self.name, self.size = [], None, None
        data_bytes = self._data_bytes(kind, size, name, block)
        if stream.skip(_blocks(data_bytes)) < _blocks(data_bytes):
            raise TarRefused(f"{name}: the archive ends inside this member (cut short?)")

    def _data_bytes(self, kind: bytes, size: int, name: str, block: bytes) -> int:
        if size > self.limits.max_member_bytes:
            raise TarRefused(f"{name}: {size} bytes, over the {self.limits.max_member_bytes} "
                             "byte limit of a member")
        self.total_bytes += size
        if self.total_bytes > self.limits.max_total_bytes:
            raise TarRefused(f"{name}: the bundle exceeds {self.limits.max_total_bytes} "
                             "bytes in total")
        old_style_dir = kind == b"\x00" and block[:100].split(b"\x00", 1)[0].endswith(b"/")
        if kind in _REGULAR and not old_style_dir:
            return size
        if kind in _OTHER_KNOWN or old_style_dir:
            if size:  # tarfile reads no data after these: a size would desynchronise it
                raise TarRefused(f"{name}: a directory, link or device member with a size")
            return 0
        raise TarRefused(f"{name}: unsupported tar member type {kind!r} (sparse, global "
                         "or vendor headers are not used by snapshots)")

    def _extended(self, kind: bytes, size: int, stream: _Inflater, at: int) -> None:
        what = _EXTENDED[kind]
        self.pending.append(kind)
        if len(self.pending) > self.limits.max_extended_headers:
            raise TarRefused(f"more than {self.limits.max_extended_headers} extended headers "
                             f"in a row at byte {at}")
        if size > self.limits.max_extended_header_bytes:
            raise TarRefused(f"a {what} header of {size} bytes at byte {at}, over the "
                             f"{self.limits.max_extended_header_bytes} byte limit")
        data = stream.read(size)
        if len(data) < size or stream.skip(_blocks(size) - size) < _blocks(size) - size:
            raise TarRefused(f"the archive ends inside a {what} header (cut short?)")
        if kind in (b"L", b"K"):
            if kind == b"L":
                self.name = _text(data.split(b"\x00", 1)[0])
            return
        records = _pax_records(data, self.limits, at)
        if b"path" in records:
            self.name = _text(records[b"path"])
        if b"size" in records:
            value = records[b"size"]
            if not value.isdigit():
                raise TarRefused(f"a pax header at byte {at} has a size that is not a number")
            self.size = int(value)


def _pax_records(data: bytes, limits: TarLimits, at: int) -> dict[bytes, bytes]:
    """The records of a pax header, parsed strictly: `LEN KEY=VALUE\\n`, LEN counting all."""
    if _DIGITS.search(data):
        raise TarRefused(f"a pax header at byte {at} holds a run of more than {_DIGIT_RUN} "
                         "digits (CVE-2024-6232)")
    records: dict[bytes, bytes] = {}
    pos = count = 0
    while pos < len(data):
        match = _PAX_LENGTH.match(data, pos)
        end = pos + int(match.group(1)) if match else 0
        if match is None or end > len(data) or data[end - 1 : end] != b"\n":
            raise TarRefused(f"a malformed pax header record at byte {at}")
        key, sep, value = data[match.end() : end - 1].partition(b"=")
        if not sep or not _known_pax_key(key):
            raise TarRefused(f"a pax header at byte {at} has the unsupported keyword "
                             f"{_text(key)[:40]!r}")
        records[key] = value
        count += 1
        if count > limits.max_pax_records:
            raise TarRefused(f"a pax header at byte {at} has more than "
                             f"{limits.max_pax_records} records")
        pos = end
    return records


def _known_pax_key(key: bytes) -> bool:
    return key in _PAX_KEYS or key.startswith(_PAX_KEY_PREFIXES)


def _check_checksum(block: bytes, at: int) -> None:
    field = block[148:156].split(b"\x00", 1)[0].strip()
    if not field or not all(48 <= c <= 55 for c in field):
        raise TarRefused(f"a corrupt tar header at byte {at} (no checksum)")
    unsigned = 256 + sum(block[:148]) + sum(block[156:])
    signed = 256 + sum(b - 256 if b > 127 else b for b in (*block[:148], *block[156:]))
    if int(field, 8) not in (unsigned, signed):
        raise TarRefused(f"a corrupt tar header at byte {at} (bad checksum)")


def _size_field(field: bytes, at: int) -> int:
    if field[0] in (0o200, 0o377):  # GNU base-256; 0o377 starts a negative number
        if field[0] == 0o377:
            raise TarRefused(f"a negative member size in the tar header at byte {at}")
        return int.from_bytes(field[1:], "big")
    digits = field.split(b"\x00", 1)[0].strip()
    if not all(48 <= c <= 55 for c in digits):
        raise TarRefused(f"a corrupt size field in the tar header at byte {at}")
    return int(digits, 8) if digits else 0


def _ustar_name(block: bytes) -> str:
    name = block[:100].split(b"\x00", 1)[0]
    prefix = block[345:500].split(b"\x00", 1)[0]
    return _text(prefix + b"/" + name if prefix else name)


def _blocks(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
