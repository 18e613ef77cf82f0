"""Following logs: only what is appended after the first look alerts, each id once."""

from __future__ import annotations

from pathlib import Path

from checks.triage.watch import LogWatch

OOM = "RuntimeError: NPU out of memory. Tried to allocate 20.00 MiB (NPU 0; 60.96 GiB total)"


def test_new_signatures_appended_after_the_first_poll_are_reported_once(tmp_path: Path) -> None:
    log = tmp_path / "plog-1_1.log"
    log.write_text(f"old: {OOM}\n")
    watch = LogWatch(lambda: [tmp_path])
    assert watch.poll() == ()  # what was there before is not news
    assert watch.poll() == ()
    with log.open("a") as out:
        out.write("INFO fine\nEZ1001: Parameter validation failed\nTraceback (most recent "
                  "call last):\n")
    assert [f.id for f in watch.poll()] == ["EZ1001"]  # consequences do not alert
    with log.open("a") as out:
        out.write("EZ1001: again\n")
    assert watch.poll() == ()
    (tmp_path / "plog-2_2.log").write_text(f"{OOM}\n")  # a new file is read from its start
    assert [f.id for f in watch.poll()] == ["torch-npu.out-of-memory"]


def test_a_truncated_log_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "service.log"
    log.write_text("INFO " * 100 + "\n")
    watch = LogWatch(lambda: [tmp_path])
    watch.poll()
    log.write_text("EI0006: Getting socket times out\n")  # rotated: shorter than before
    assert [f.id for f in watch.poll()] == ["hccl.socket-timeout"]
