"""The one reader of a file someone else named: a target's config, a model directory, a venv.

A path that comes from outside may lead anywhere: to a FIFO that never answers, to
`/dev/zero` whose size is 0 and whose content never ends, to a sparse file of gigabytes, to
a file the person who named it cannot read themselves. So a read here:

- refuses anything but a regular file by its type, first with `stat` (a FIFO or a device is
  never opened) and again with `fstat` on a descriptor opened `O_NONBLOCK` (the path may have
  been swapped between the two);
- counts the bytes it actually reads (never `st_size`: procfs says 0, a sparse file lies
  about nothing but costs its full size) and stops past a cap;
- stops at a deadline, checked between chunks (a file on a hung network mount);
- given an `Owner`, reads only what that user may read by the mode bits of the file and of
  every directory above it under the root, so a file root can read and a service's owner
  cannot never reaches a report (ACLs and capabilities are not consulted: a file only an ACL
  opens to the owner is withheld, which errs on the side of showing less).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass

from probes.errors import PathMissing, PathUnreadable

# The largest whole file the doctor reads from a model directory is tokenizer.json (Qwen3's:
# 11 MB); 64 MiB leaves room and bounds /dev/zero or a sparse file at a price a run can pay.
MAX_READ_BYTES = 64 * 1024 * 1024
# A caller that names a range bounds it itself (a shard index: 128 MiB); this only stops a
# length no caller should ask for.
MAX_RANGE_BYTES = 1024 * 1024 * 1024
READ_DEADLINE_S = 10.0
_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Owner:
    """Whose rights a read takes: a process owner's uid and all its groups."""

    uid: int
    gids: frozenset[int]

    def may(self, info: os.stat_result, want: int) -> bool:
        """`want` (4 read, 1 search) allowed by the mode bits for this user; uid 0 may all."""
        if self.uid == 0:
            return True
        if info.st_uid == self.uid:
            return bool((info.st_mode >> 6) & want)
        if info.st_gid in self.gids:
            return bool((info.st_mode >> 3) & want)
        return bool(info.st_mode & want)


def kind_name(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _refuse_type(shown: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise PathUnreadable(shown, f"{kind_name(mode)}, not a regular file: not read")


def _error(shown: str, exc: OSError) -> PathUnreadable | PathMissing:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return PathMissing(shown)
    return PathUnreadable(shown, exc.strerror or str(exc))


def check_owner(path: str, root: str, owner: Owner, shown: str) -> None:
    """Raise PathUnreadable unless `owner` may search every directory from `root` down to
    `path` and read `path` itself (mode bits)."""
    root = root.rstrip("/")
    rel = path[len(root):] if root and path.startswith(root + "/") else path
    here = root
    for part in [p for p in rel.split("/") if p][:-1]:
        here = f"{here}/{part}"
        if not owner.may(os.stat(here), 1):
            raise PathUnreadable(shown, f"uid {owner.uid} may not enter {here[len(root):]}: "
                                        "not read with the owner's rights")
    if not owner.may(os.stat(path), 4):
        raise PathUnreadable(shown, f"uid {owner.uid} may not read it: not read with the "
                                    "owner's rights")


def read_regular(path: str, offset: int = 0, length: int | None = None, *,
                 max_bytes: int = MAX_READ_BYTES, deadline_s: float = READ_DEADLINE_S,
                 owner: Owner | None = None, root: str = "/", shown: str = "") -> bytes:
    """`length` bytes from `offset` of the regular file at `path` (to the end when None).

    Raises PathMissing or PathUnreadable (not a regular file, more than `max_bytes` to read
    to the end, a range over MAX_RANGE_BYTES, past the deadline, refused to `owner`).
    `shown` is the name errors use (default `path`).
    """
    shown = shown or path
    want = max_bytes if length is None else length
    if want > max(max_bytes, MAX_RANGE_BYTES):
        raise PathUnreadable(shown, f"asks for {want:,} bytes, more than the "
                                    f"{max(max_bytes, MAX_RANGE_BYTES):,} a read may take")
    fd = _open_regular(path, owner, root, shown)
    try:
        limit = want + 1 if length is None else want
        data = _read_fd(fd, offset, limit, time.monotonic() + deadline_s, shown)
    except OSError as exc:
        raise _error(shown, exc) from None
    finally:
        os.close(fd)
    if length is None and len(data) > max_bytes:
        raise PathUnreadable(shown, f"larger than {max_bytes:,} bytes: not read")
    return data


def read_ranges(path: str, ranges: Sequence[tuple[int, int]], *,
                deadline_s: float = READ_DEADLINE_S, owner: Owner | None = None,
                root: str = "/", shown: str = "") -> list[bytes]:
    """Each `(offset, length)` of the regular file at `path`, through one descriptor: what
    read_regular gives for each range (a range past the end of the file comes back short,
    or empty), for one stat, open and owner check instead of one per range. The deadline
    holds for all the ranges together.

    Raises ValueError for a negative offset or length, PathMissing or PathUnreadable as
    read_regular does (a range over MAX_RANGE_BYTES, not a regular file, refused to `owner`,
    past the deadline).
    """
    shown = shown or path
    for offset, length in ranges:
        if offset < 0 or length < 0:
            raise ValueError(f"{shown}: the range ({offset}, {length}): offset and length "
                             "must be >= 0")
        if length > MAX_RANGE_BYTES:
            raise PathUnreadable(shown, f"asks for {length:,} bytes, more than the "
                                        f"{MAX_RANGE_BYTES:,} a read may take")
    fd = _open_regular(path, owner, root, shown)
    try:
        deadline = time.monotonic() + deadline_s
        return [_read_fd(fd, offset, length, deadline, shown) for offset, length in ranges]
    except OSError as exc:
        raise _error(shown, exc) from None
    finally:
        os.close(fd)


def _open_regular(path: str, owner: Owner | None, root: str, shown: str) -> int:
    """A read-only descriptor of the regular file at `path` (checked before and after the
    open, so a swap in between is refused), its owner checked; the caller closes it."""
    try:
        _refuse_type(shown, os.stat(path).st_mode)
        if owner is not None:
            check_owner(path, root, owner, shown)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _error(shown, exc) from None
    try:
        _refuse_type(shown, os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise _error(shown, exc) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_fd(fd: int, offset: int, limit: int, deadline: float, shown: str) -> bytes:
    """Up to `limit` bytes from `offset`."""
    chunks: list[bytes] = []
    got = 0
    position = offset
    while got < limit:
        if time.monotonic() > deadline:
            raise PathUnreadable(shown, "still reading at the deadline: not read")
        chunk = os.pread(fd, min(_CHUNK_BYTES, limit - got), position)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        position += len(chunk)
    return b"".join(chunks)


def regular_file_problem(path: str, max_bytes: int = MAX_READ_BYTES) -> str:
    """Why a library (one that opens files itself, as tokenizers does) must not be handed
    `path`: not a regular file, or larger than `max_bytes`; "" when it may, or when nothing
    is there (the library says that in its own words)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return f"{path}: {kind_name(info.st_mode)}, not a regular file"
    if info.st_size > max_bytes:
        return f"{path}: {info.st_size:,} bytes, more than the {max_bytes:,} read"
    return ""
