"""Several ranges of one file read through one descriptor (probes.bounded.read_ranges, its
LiveHost face and probes.host.read_ranges): the same bytes as one read_regular per range,
a range past the end short or empty (as read_regular's), bad input a one-line error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probes.bounded import MAX_RANGE_BYTES, Owner, read_ranges, read_regular
from probes.errors import PathMissing, PathUnreadable
from probes.host import read_ranges as host_read_ranges
from probes.live import LiveHost

STRANGER = Owner(os.getuid() + 4242, frozenset({os.getgid() + 4242}))
DATA = bytes(range(256)) * 4  # 1024 bytes


@pytest.fixture
def blob(tmp_path: Path) -> Path:
    path = tmp_path / "blob.bin"
    path.write_bytes(DATA)
    return path


def test_each_range_is_what_read_regular_gives(blob: Path) -> None:
    ranges = [(0, 8), (1000, 24), (17, 0), (512, 100), (0, 8)]
    got = read_ranges(str(blob), ranges)
    assert got == [read_regular(str(blob), o, n) for o, n in ranges]
    assert got[1] == DATA[1000:1024] and got[2] == b""


def test_a_range_past_the_end_comes_back_short_or_empty(blob: Path) -> None:
    short, empty = read_ranges(str(blob), [(1000, 100), (4096, 16)])
    assert short == DATA[1000:] and len(short) == 24
    assert empty == b""


def test_a_negative_range_is_refused_naming_the_file(blob: Path) -> None:
    with pytest.raises(ValueError, match=r"blob\.bin: the range \(-1, 4\)"):
        read_ranges(str(blob), [(0, 4), (-1, 4)])
    with pytest.raises(ValueError, match=r"offset and length must be >= 0"):
        read_ranges(str(blob), [(0, -4)])


def test_a_range_over_the_cap_is_refused_before_the_file_is_opened(blob: Path) -> None:
    with pytest.raises(PathUnreadable, match="more than"):
        read_ranges(str(blob), [(0, MAX_RANGE_BYTES + 1)])


def test_missing_fifo_and_foreign_files_are_errors(tmp_path: Path, blob: Path) -> None:
    with pytest.raises(PathMissing):
        read_ranges(str(tmp_path / "absent"), [(0, 1)])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(PathUnreadable, match="FIFO"):  # never opened: no hang
        read_ranges(str(fifo), [(0, 1)])
    blob.chmod(0o600)  # the stranger is neither its owner nor in its group
    with pytest.raises(PathUnreadable, match="uid"):
        read_ranges(str(blob), [(0, 1)], owner=STRANGER, root="/")


def test_live_host_reads_ranges_under_its_root(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.bin").write_bytes(DATA)
    host = LiveHost(root=str(tmp_path), env={})
    assert host.read_ranges("/models/a.bin", [(4, 4), (1020, 10)]) == [DATA[4:8], DATA[1020:]]
    with pytest.raises(PathMissing, match=r"/models/b\.bin"):
        host.read_ranges("/models/b.bin", [(0, 1)])


class _OneByOne:
    """A host with read_bytes only (a recording, a replay): asked range by range."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int, int | None]] = []

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        self.asked.append((path, offset, length))
        end = None if length is None else offset + length
        return DATA[offset:end]


def test_a_host_without_read_ranges_is_asked_once_per_range() -> None:
    host = _OneByOne()
    got = host_read_ranges(host, "/m/x", [(0, 2), (1023, 5)])  # type: ignore[arg-type]
    assert got == [DATA[:2], DATA[1023:]]
    assert host.asked == [("/m/x", 0, 2), ("/m/x", 1023, 5)]


def test_a_live_host_is_asked_once_for_all_ranges(blob: Path) -> None:
    host = LiveHost(env={})
    calls: list[int] = []
    real = host.read_ranges

    def counted(path: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        calls.append(len(ranges))
        return real(path, ranges)

    host.read_ranges = counted  # type: ignore[method-assign]
    got = host_read_ranges(host, str(blob), [(0, 1), (1, 1), (2, 1)])
    assert got == [DATA[:1], DATA[1:2], DATA[2:3]]
    assert calls == [3]
