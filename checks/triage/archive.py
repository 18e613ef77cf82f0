"""A .tar.gz handed to triage (what `asys collect --tar=True` leaves): its text members read
as inputs, in archive order, named `ARCHIVE:MEMBER`.

The archive is walked first by probes.tar_guard (checksums, sizes, member count and pax
headers bounded; a cut-short or malformed archive is refused with a one-line reason), then
read once more as a stream by tarfile, one member at a time: nothing is extracted to disk.
Members under asys's binary folders (dfx/bbox, data-dump, graph, ops, stackcore) are left
out, as in an asys output directory.
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from checks.triage.model import Limits
from checks.triage.reading import ASYS_BINARY_DIRS

TAR_MAGIC_AT = 257  # "ustar" in a POSIX tar header (POSIX.1-1988 ustar format)
TAR_MAGIC = b"ustar"


def is_tar(head: bytes) -> bool:
    return head[TAR_MAGIC_AT:TAR_MAGIC_AT + len(TAR_MAGIC)] == TAR_MAGIC


def refusal(path: Path, limits: Limits) -> str:
    """Why the archive cannot be read ('' when it can)."""
    from probes.tar_guard import TarLimits, TarRefused, check_tar_gz

    bounds = TarLimits(max_members=limits.max_walk_entries,
                       max_member_bytes=limits.max_total_bytes,
                       max_total_bytes=limits.max_total_bytes * 4)
    try:
        with path.open("rb") as source:
            check_tar_gz(source, bounds)
    except TarRefused as exc:
        return f"a tar.gz archive refused: {exc}"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return ""


def read_members(path: Path, name: str, read: Callable[[str, BinaryIO, int], None],
                 limits: Limits) -> tuple[int, list[str]]:
    """Each regular member through `read(member name, stream, size)`: (read, notes)."""
    count, left_out = 0, 0
    notes: list[str] = []
    with tarfile.open(path, mode="r|gz") as archive:
        for member in archive:
            if not member.isfile():
                continue
            if ASYS_BINARY_DIRS & set(Path(member.name).parts[:-1]):
                left_out += 1
                continue
            if count >= limits.max_files:
                notes.append(f"{name}: more than {limits.max_files} members; the rest not read")
                break
            stream = archive.extractfile(member)
            if stream is not None:
                read(f"{name}:{member.name}", stream, member.size)  # type: ignore[arg-type]
                count += 1
    if left_out:
        notes.append(f"{name}: {left_out} members under asys's binary folders left out")
    return count, notes
