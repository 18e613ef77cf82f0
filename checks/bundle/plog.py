"""The tails of the newest CANN plog and device log files for `ascend-doctor bundle`: found from
the observed environment's log directory, read through the run's host (so recorded and redacted
like the rest), cut to whole lines, and named as bundle members.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from dataclasses import dataclass

from checks.bundle.redact import Redactor
from probes.environment import resolve_log_dir
from probes.errors import HostError
from probes.host import Host
from probes.recording.model import Recording

# Where CANN writes application logs below the log directory (CANN environment-variable
# reference, page envref_07_0120: {debug,run,security}/plog).
PLOG_SUBDIRS = ("debug/plog", "run/plog")
DEVICE_LOG_PARENTS = ("debug", "run")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
_LOG_TIME = re.compile(r"_(\d{8,})\.log$")


@dataclass(frozen=True)
class PlogTail:
    path: str  # on the observed machine
    size_bytes: int
    offset: int  # the first byte kept: the start of a line
    length: int  # whole lines only
    member: str = ""  # plog/<two directories>/<file>, unique in the bundle


def _member_names(paths: list[str]) -> list[str]:
    """plog/debug/plog/NAME, plog/run/device-0/NAME: the two directories above a file keep
    debug/ and run/ apart; a name still taken gets -2, -3, ..."""
    taken: set[str] = set()
    names = []
    for path in paths:
        parts = [p for p in path.split("/") if p][-3:]
        base = "plog/" + "/".join(safe_name(p) for p in parts)
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        names.append(name)
    return names


@dataclass(frozen=True)
class PlogCollection:
    tails: tuple[PlogTail, ...] = ()
    found: int = 0  # plog files seen in all directories looked at
    dirs: tuple[str, ...] = ()  # the directories that exist and were listed
    note: str = ""  # why nothing was collected, when nothing was


def safe_name(name: str) -> str:
    """`name` as one path part of a bundle member: no separator, no leading dot, never empty."""
    cleaned = _SAFE_NAME.sub("_", name).lstrip(".")
    return cleaned or "_"


def _newest_first(name: str) -> tuple[str, str]:
    # plog-<pid>_<yyyymmddhhmmssfff>.log: the time in the name orders files without a stat
    match = _LOG_TIME.search(name)
    return (match.group(1) if match else "", name)


def list_names(host: Host, path: str) -> list[str]:
    """The names in a directory of the observed machine; none where it cannot be listed."""
    try:
        return host.list_dir(path)
    except HostError:
        return []


def plog_dirs(host: Host) -> list[str]:
    """Directories that may hold CANN application logs, from the observed environment."""
    log_dir = resolve_log_dir(host.env)
    if not log_dir.path or not log_dir.path.startswith("/"):
        return []
    base = log_dir.path
    dirs = [posixpath.join(base, sub) for sub in PLOG_SUBDIRS]
    for parent in DEVICE_LOG_PARENTS:
        where = posixpath.join(base, parent)
        dirs += [posixpath.join(where, n) for n in list_names(host, where)
                 if n.startswith("device-")]
    return dirs


def collect_plog(host: Host, files: int, tail_bytes: int) -> PlogCollection:
    """The tails of the newest plog/device log files, read through `host` (so recorded), cut
    to whole lines: a secret split by the start of a tail would no longer match the rules
    that find it, so the partial first line is never kept (nor a partial last one)."""
    candidates: list[tuple[tuple[str, str], str]] = []
    listed: list[str] = []
    for directory in plog_dirs(host):
        names = [n for n in list_names(host, directory) if n.endswith(".log")]
        if names:
            listed.append(directory)
        candidates += [(_newest_first(n), posixpath.join(directory, n)) for n in names]
    if not candidates:
        return PlogCollection(note="no plog files found in the CANN log directory")
    candidates.sort(reverse=True)
    peek: Host = getattr(host, "inner", host)  # finds the line boundaries, unrecorded
    tails = [t for _, path in candidates[:files] if (t := _tail(host, peek, path, tail_bytes))]
    members = _member_names([t.path for t in tails])
    tails = [dataclasses.replace(t, member=m) for t, m in zip(tails, members, strict=True)]
    return PlogCollection(tuple(tails), len(candidates), tuple(listed))


def _tail(host: Host, peek: Host, path: str, tail_bytes: int) -> PlogTail | None:
    try:
        size = host.file_size(path)
        offset = max(0, size - tail_bytes)
        start, end = _whole_lines(peek.read_bytes(path, offset, tail_bytes), offset > 0)
        if end <= start:
            return None  # no whole line in the tail
        data = host.read_bytes(path, offset + start, end - start)
    except HostError:
        return None  # rotated away or unreadable: the listing still shows it was there
    return PlogTail(path, size, offset + start, len(data))


def _whole_lines(data: bytes, cut_start: bool) -> tuple[int, int]:
    """(start, end) of the whole lines in `data`: after its first newline when the data
    begins inside a line, up to and with its last newline."""
    start = data.find(b"\n") + 1 if cut_start else 0
    end = data.rfind(b"\n") + 1
    if cut_start and start == 0:
        return 0, 0
    return start, end


def tail_bytes(recording: Recording, tail: PlogTail) -> bytes:
    """The (redacted) bytes of a tail, as the recording holds them (`tail.path` redacted)."""
    entry = recording.files.get(tail.path)
    for rng in entry.ranges if entry else ():
        if rng.offset == tail.offset and rng.data is not None:
            return rng.data
    return b""


def redacted_plog(plog: PlogCollection, redactor: Redactor) -> PlogCollection:
    """The collection as the bundle shows it: paths redacted, member names made from them."""
    paths = [redactor.path(t.path, "bundle.json") for t in plog.tails]
    tails = tuple(dataclasses.replace(t, path=p, member=m)
                  for t, p, m in zip(plog.tails, paths, _member_names(paths), strict=True))
    return dataclasses.replace(plog, tails=tails,
                               dirs=tuple(redactor.path(d, "bundle.json") for d in plog.dirs))
