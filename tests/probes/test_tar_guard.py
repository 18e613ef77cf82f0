"""Hostile .tar.gz bundles, each built here, small: refused with one line, before `tarfile`
reads them, in bounded time and memory (the resource bounds: tests/checks/test_bounded.py)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tar_builder import (
    BLOCK,
    END,
    header,
    manifest_member,
    member,
    pad,
    pax,
    pax_record,
)
from tar_builder import (
    gz as gzipped,
)

from probes.recording.model import BundleLimits, SnapshotError
from probes.recording.snapshot import SnapshotHost
from probes.tar_guard import TarLimits, TarRefused, check_tar_gz

LIMITS = BundleLimits().tar()


def check(data: bytes, limits: TarLimits = LIMITS) -> int:
    return check_tar_gz(io.BytesIO(data), limits)


def refused(data: bytes, match: str, tmp_path: Path) -> None:
    with pytest.raises(TarRefused, match=match):
        check(data)
    path = tmp_path / "hostile.tar.gz"
    path.write_bytes(data)
    with pytest.raises(SnapshotError) as caught:
        SnapshotHost(path)
    assert "\n" not in str(caught.value)


def test_a_bundle_tarfile_writes_passes(tmp_path: Path) -> None:
    path = tmp_path / "ok.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(_snapshot_dir(tmp_path), arcname="snap")
    assert check(path.read_bytes()) == 3  # the folder, manifest.json, a long-named file
    SnapshotHost(path)


def test_gnu_and_pax_long_names_pass(tmp_path: Path) -> None:
    folder = _snapshot_dir(tmp_path)
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        path = tmp_path / f"long-{fmt}.tar.gz"
        with tarfile.open(path, "w:gz", format=fmt) as tar:
            tar.add(folder, arcname="snap")
        assert check(path.read_bytes()) == 3
        SnapshotHost(path)


def _snapshot_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "snap"
    folder.mkdir(exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(
        {"schema": "ascend-snapshot/1.1", "created_at": "2025-06-01T12:00:00Z",
         "hostname": "h", "root": "/", "tool_version": "t"}))
    (folder / ("x" * 150)).write_text("a name longer than a ustar header holds")
    return folder


def test_cve_2024_6232_digits_before_hdrcharset(tmp_path: Path) -> None:
    # the interpreter's pax regex backtracks over a long run of digits (minutes for 7 KB)
    records = b"1" * 7000 + b" hdrcharset"
    refused(gzipped(pax(records), manifest_member(), END), "CVE-2024-6232", tmp_path)


def test_pax_header_with_too_many_records(tmp_path: Path) -> None:
    records = pax_record("uid", "0") * 200_000  # 9.5 GB in the interpreter's tarfile
    refused(gzipped(pax(records), manifest_member(), END), "over the 16384 byte limit",
            tmp_path)
    small = pax_record("uid", "0") * 65  # within the size limit, over the record limit
    refused(gzipped(pax(small), manifest_member(), END), "more than 64 records", tmp_path)


@pytest.mark.parametrize("kind", [b"x", b"L"])
def test_huge_extended_header_is_refused_unread(kind: bytes, tmp_path: Path) -> None:
    # 4 GiB declared, a few KB of zeros given: tarfile would read it all into memory
    data = gzipped(header(b"././@LongLink", 4 * 1024**3, kind), bytes(64 * 1024))
    assert len(data) < 8 * 1024
    refused(data, "over the 16384 byte limit", tmp_path)


@pytest.mark.parametrize("kind", [b"x", b"L"])
def test_chained_extended_headers(kind: bytes, tmp_path: Path) -> None:
    body = pax_record("path", "snap/a") if kind == b"x" else b"snap/a\x00"
    chain = (header(b"././@LongLink", len(body), kind) + pad(body)) * 5000
    refused(gzipped(manifest_member(), chain, member("snap/a", b""), END),
            "extended headers in a row", tmp_path)


def test_negative_size(tmp_path: Path) -> None:
    negative = b"\xff" + (-(1 << 30) % (1 << 88)).to_bytes(11, "big")
    data = gzipped(manifest_member(), header(b"snap/blobs/x", size_field=negative), END)
    refused(data, "negative member size", tmp_path)


def test_corrupt_header_after_the_manifest_is_not_the_end(tmp_path: Path) -> None:
    # tarfile takes a bad header after the first member for the end of the archive
    damaged = bytearray(header(b"snap/env.json", 2))
    damaged[5] ^= 0x20  # one flipped bit in the name
    broken = bytes(damaged) + pad(b"{}")
    refused(gzipped(manifest_member(), broken, END), "corrupt tar header at byte 1024",
            tmp_path)
    blank = header(b"snap/env.json", 2, checksum=False) + pad(b"{}")
    refused(gzipped(manifest_member(), blank, END), "corrupt tar header", tmp_path)


def test_a_lone_zero_block_inside_the_archive(tmp_path: Path) -> None:
    data = gzipped(manifest_member(), bytes(BLOCK), member("snap/env.json", b"{}"), END)
    refused(data, "not followed by a second one", tmp_path)


def test_end_of_archive_marker_is_required(tmp_path: Path) -> None:
    refused(gzipped(manifest_member()), "without its end-of-archive marker", tmp_path)


def test_the_gzip_stream_must_end(tmp_path: Path) -> None:
    whole = gzipped(manifest_member(), END)
    refused(whole[:-4], "cut short", tmp_path)
    refused(whole + b"more", "after the end of the gzip stream", tmp_path)
    refused(whole + gzip.compress(b"x"), "after the end of the gzip stream", tmp_path)
    assert check(whole + bytes(100)) == 1  # zero padding after the stream is allowed


def test_data_after_the_end_marker(tmp_path: Path) -> None:
    refused(gzipped(manifest_member(), END, b"hidden"), "after the end-of-archive", tmp_path)
    refused(gzipped(manifest_member(), END, bytes(2 * 1024 * 1024)), "padding", tmp_path)


def test_directories_and_links_may_not_carry_data(tmp_path: Path) -> None:
    data = gzipped(header(b"snap/", 1024, b"5"), bytes(1024), manifest_member(), END)
    refused(data, "with a size", tmp_path)


def test_sparse_and_global_headers_are_refused(tmp_path: Path) -> None:
    for kind in (b"S", b"g", b"V"):
        refused(gzipped(header(b"snap/x", 0, kind), manifest_member(), END),
                "unsupported|extended", tmp_path)


def test_unknown_pax_keywords_are_refused(tmp_path: Path) -> None:
    records = pax_record("GNU.sparse.map", "0,1")
    refused(gzipped(pax(records), member("snap/x", b""), manifest_member(), END),
            "unsupported keyword", tmp_path)


def test_pax_size_counts_against_the_limits(tmp_path: Path) -> None:
    records = pax_record("size", str(65 * 1024 * 1024))
    refused(gzipped(pax(records), member("snap/blobs/big", b""), END), "snap/blobs/big",
            tmp_path)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=BLOCK, max_size=4 * BLOCK))
def test_random_headers_are_refused_or_counted(data: bytes) -> None:
    try:
        count = check(gzipped(pad(data), END))
    except TarRefused as exc:
        assert "\n" not in str(exc)
        return
    assert count >= 0


def test_tarfile_must_see_every_member_the_walk_saw(tmp_path: Path) -> None:
    # a header the walk accepts but tarfile stops at (a field that is not octal): the
    # members after it must not vanish from the replay unnoticed
    odd = bytearray(header(b"snap/env.json", 2))
    odd[136:148] = b"not a time!\x00"
    odd[148:156] = b" " * 8
    odd[148:156] = b"%06o\x00 " % sum(odd)
    data = gzipped(manifest_member(), bytes(odd) + pad(b"{}"), END)
    assert check(data) == 2
    path = tmp_path / "odd.tar.gz"
    path.write_bytes(data)
    with pytest.raises(SnapshotError, match="stopped after 1 of 2 members"):
        SnapshotHost(path)
