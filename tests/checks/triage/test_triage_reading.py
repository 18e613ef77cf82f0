"""Reading hostile and ordinary inputs: gzip (and a gzip bomb), directories (newest first,
--since, caps), binary files, over-long lines, unreadable paths, FIFOs, a growing file, and
outside text shown, never obeyed."""

from __future__ import annotations

import gzip
import io
import os
import time
from pathlib import Path

import pytest

from checks.triage import Limits, reading, to_json, triage_paths, triage_text

OOM = "RuntimeError: NPU out of memory. Tried to allocate 20.00 MiB (NPU 0; 60.96 GiB total)"


def test_gzip_files_are_read_by_their_content_not_their_name(tmp_path: Path) -> None:
    path = tmp_path / "service.log.1"  # gzip without a .gz name
    path.write_bytes(gzip.compress(f"INFO start\n{OOM}\n".encode()))
    report = triage_paths([path])
    assert [f.id for f in report.findings] == ["torch-npu.out-of-memory"]
    assert report.findings[0].evidence[0].line == 2
    assert report.read.lines == 2


def test_a_gzip_bomb_stops_at_the_byte_cap_with_a_note(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.gz"
    with gzip.open(bomb, "wb") as out:
        for _ in range(64):
            out.write(b"A" * (1024 * 1024))
    assert bomb.stat().st_size < 1024 * 1024  # 64 MiB of text in well under 1 MiB
    report = triage_paths([bomb], limits=Limits(max_total_bytes=4 * 1024 * 1024,
                                               chunk_bytes=1024 * 1024))
    assert report.read.bytes <= 4 * 1024 * 1024
    assert any("total byte cap" in note for note in report.read.notes)


def test_a_truncated_gzip_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    data = gzip.compress((f"{OOM}\n" + "INFO filler line\n" * 20000).encode())
    path = tmp_path / "cut.gz"
    path.write_bytes(data[: len(data) // 2])
    report = triage_paths([path])
    assert report.findings and report.findings[0].id == "torch-npu.out-of-memory"


def test_binary_files_are_skipped_with_a_note(tmp_path: Path) -> None:
    blob = tmp_path / "core.1234"
    blob.write_bytes(b"\x7fELF\0\0\0" + OOM.encode())
    report = triage_paths([blob])
    assert not report.findings and not report.read.files
    assert report.read.skipped[0].reason.startswith("binary")


def test_a_line_past_the_cap_is_cut_and_the_next_line_still_read(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    with path.open("wb") as out:  # a 6 MiB line stands in for a 1 GB one under a 64 KiB cap
        out.write(b"x" * (6 * 1024 * 1024) + b"\n" + OOM.encode() + b"\n")
    limits = Limits(max_line_bytes=64 * 1024, chunk_bytes=256 * 1024)
    report = triage_paths([path], limits=limits)
    assert [f.id for f in report.findings] == ["torch-npu.out-of-memory"]
    assert report.findings[0].evidence[0].line == 2
    assert any("cut at 65536" in note for note in report.read.notes)


def test_blocks_never_hold_more_than_a_block_and_a_line(tmp_path: Path) -> None:
    limits = Limits(max_line_bytes=1024, chunk_bytes=4096)
    stream = io.BytesIO(b"y" * 100_000 + b"\nshort\n")
    read = reading.FileRead("x")
    sizes = [len(b) for b in reading.blocks(stream, None, reading.Budget(1 << 30), limits,
                                            read)]
    assert max(sizes) <= limits.chunk_bytes + limits.max_line_bytes + 1
    assert read.lines == 2


def test_unreadable_and_missing_paths_are_noted_not_fatal(tmp_path: Path) -> None:
    good = tmp_path / "good.log"
    good.write_text(OOM + "\n")
    dangling = tmp_path / "dangling.log"
    dangling.symlink_to(tmp_path / "nowhere")
    report = triage_paths([tmp_path / "missing.log", dangling, good])
    assert report.read.files == (str(good),)
    reasons = {s.path: s.reason for s in report.read.skipped}
    assert reasons[str(tmp_path / "missing.log")] == "No such file or directory"
    assert str(dangling) in reasons


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_noted(tmp_path: Path) -> None:
    locked = tmp_path / "locked.log"
    locked.write_text(OOM)
    locked.chmod(0)
    report = triage_paths([locked])
    assert report.read.skipped[0].reason == "Permission denied"


def test_a_fifo_is_skipped_instead_of_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    report = triage_paths([fifo])
    assert "not a regular file" in report.read.skipped[0].reason


def test_a_growing_file_is_read_up_to_its_size_at_open(tmp_path: Path) -> None:
    path = tmp_path / "growing.log"
    path.write_text("INFO one\n")
    stream, limit, _ = reading.open_file(path)
    with path.open("a") as writer:  # the service writes on while triage reads
        writer.write(OOM + "\n")
    with stream:
        read = reading.FileRead("g")
        data = b"".join(reading.blocks(stream, limit, reading.Budget(1 << 30), Limits(), read))
    assert data == b"INFO one\n"


def test_directories_newest_files_within_since_read_oldest_first(tmp_path: Path) -> None:
    now = time.time()
    for age_h, name in ((30, "old.log"), (2, "older.log"), (1, "newer.log")):
        path = tmp_path / "plog" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"{OOM} {name}\n")
        os.utime(path, (now - age_h * 3600, now - age_h * 3600))
    report = triage_paths([tmp_path], since_s=24 * 3600)
    assert [Path(f).name for f in report.read.files] == ["older.log", "newer.log"]
    assert report.findings[0].count == 2
    assert report.findings[0].evidence[0].file.endswith("older.log")


def test_a_huge_directory_is_walked_within_its_caps(tmp_path: Path) -> None:
    for index in range(3000):  # stands in for 100,000 files under caps 30x smaller
        (tmp_path / f"f{index:05d}.log").write_text("INFO\n")
    limits = Limits(max_walk_entries=1000, max_files=50)
    report = triage_paths([tmp_path], limits=limits)
    assert len(report.read.files) == 50
    assert any("stopped after 1000 directory entries" in n for n in report.read.notes)
    assert any("the newest 50 read" in n for n in report.read.notes)


def test_an_asys_output_leaves_its_binary_folders_out(tmp_path: Path) -> None:
    (tmp_path / "software_info.txt").write_text("CANN 8.5.0\n")
    (tmp_path / "dfx" / "log" / "host" / "cann").mkdir(parents=True)
    (tmp_path / "dfx" / "log" / "host" / "cann" / "plog-1_1.log").write_text(OOM + "\n")
    (tmp_path / "dfx" / "data-dump").mkdir()
    (tmp_path / "dfx" / "data-dump" / "dump.txt").write_text(OOM + "\n")
    report = triage_paths([tmp_path])
    assert not any("data-dump" in f for f in report.read.files)
    assert report.findings[0].count == 1
    assert any("asys collect output" in n for n in report.read.notes)


def test_escapes_and_markup_in_log_lines_are_shown_not_obeyed() -> None:
    line = f"\x1b[2J\x1b]0;pwned\x07[bold red]{OOM}[/bold red] \u202eevil"
    report = triage_text(line + "\n")
    text = report.findings[0].evidence[0].text
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "\\x1b[2J" in text and "[bold red]" in text and "\\u202e" in text
    assert all("\x1b" not in c for c in report.findings[0].context)
    assert "\x1b" not in str(to_json(report))


def test_timestamps_give_the_time_span() -> None:
    report = triage_text("[ERROR] X(1,p):2026-12-07-10:11:12.1 a\nmid\n2026-12-07 10:15:00 b\n")
    assert (report.read.first_time, report.read.last_time) == ("2026-12-07 10:11:12",
                                                               "2026-12-07 10:15:00")


def _tar_gz(path: Path, members: dict[str, bytes]) -> None:
    import tarfile

    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_an_asys_tar_gz_is_read_member_by_member(tmp_path: Path) -> None:
    archive = tmp_path / "asys_output_20261207.tar.gz"
    _tar_gz(archive, {"asys_output/software_info.txt": b"CANN 8.5.0\n",
                      "asys_output/dfx/log/host/cann/plog-1_1.log": f"ok\n{OOM}\n".encode(),
                      "asys_output/dfx/data-dump/dump.txt": f"{OOM}\n".encode(),
                      "asys_output/dfx/log/\x1b[2Jbad.log": b"fine\n"})
    report = triage_paths([archive])
    assert f"{archive}:asys_output/dfx/log/host/cann/plog-1_1.log" in report.read.files
    assert not any("data-dump" in f for f in report.read.files)
    assert any("\\x1b[2J" in f for f in report.read.files)
    assert not any("\x1b" in f for f in report.read.files)
    oom = report.findings[0]
    assert oom.count == 1 and oom.evidence[0].line == 2
    assert oom.evidence[0].file.endswith(":asys_output/dfx/log/host/cann/plog-1_1.log")
    assert any("1 members under asys's binary folders left out" in n for n in report.read.notes)


def test_a_cut_tar_gz_is_refused_with_a_reason(tmp_path: Path) -> None:
    whole = tmp_path / "whole.tar.gz"
    _tar_gz(whole, {f"m{i}.log": os.urandom(2000).hex().encode() for i in range(20)})
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    report = triage_paths([cut])
    assert not report.read.files
    assert report.read.skipped[0].reason.startswith("a tar.gz archive refused:")
