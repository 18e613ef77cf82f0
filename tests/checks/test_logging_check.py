"""logging.level: the log level's meaning, and the log directory's size and free space."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import FakeRoot
from machines import A2, build_a2

from checks.builtin import logging as logging_check
from checks.builtin.logging import logging_level, measure_dir
from checks.cli import main
from checks.context import Context
from checks.policy import load_policy
from probes.errors import NotRecorded
from probes.host import DiskUsage
from probes.live import LiveHost
from probes.recording.recorder import RecordingHost
from probes.recording.snapshot import SnapshotHost

PATH = "/usr/local/bin:/usr/bin:/bin"
# the disk thresholds never bite unless a test asks: free space differs from box to box
NO_DISK_LIMITS = "logging:\n  min_free_disk_mb: 0\n  max_log_dir_mb: 1000000\n"


def policy_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def ctx_for(root: FakeRoot, env: dict[str, str] | None = None,
            policy: str = NO_DISK_LIMITS) -> Context:
    host = LiveHost(root=str(root.path), env={"PATH": PATH, **(env or {})})
    return Context(host, load_policy(policy_file(root.path.parent, policy)))


def plogs(root: FakeRoot, log_dir: str, count: int = 3, size: int = 1000) -> None:
    for n in range(count):
        root.file(f"{log_dir}/debug/plog/plog-{100 + n}_20250601.log", "x" * size)


# --- the log level (unchanged behaviour) ------------------------------------------------------

@pytest.mark.parametrize(("value", "status", "words"), [
    (None, "pass", "level 3 (ERROR)"),
    ("3", "pass", "level 3 (ERROR)"),
    ("2", "pass", "level 2 (WARNING)"),
    ("4", "pass", "level 4 (NULL)"),
    ("1", "warn", "level 1 (INFO)"),
    ("0", "warn", "level 0 (DEBUG)"),
    ("5", "warn", "not one of 0 (DEBUG)"),
    ("debug", "warn", "not one of 0 (DEBUG)"),
    ("", "pass", "level 3 (ERROR)"),  # set but empty: the default (envref_07_0122)
])
def test_log_level_meanings(fake_root: FakeRoot, value: str | None, status: str,
                            words: str) -> None:
    env = {"HOME": "/root"} | ({"ASCEND_GLOBAL_LOG_LEVEL": value} if value is not None else {})
    finding = logging_level(ctx_for(fake_root, env))
    assert finding.status == status
    assert words in finding.summary
    assert finding.rules == (("level-illegal",) if "not one of" in words else
                             ("verbose-in-production",) if status == "warn" else ())


def test_verbose_level_says_the_floor_is_a_project_default(fake_root: FakeRoot) -> None:
    info = logging_level(ctx_for(fake_root, {"ASCEND_GLOBAL_LOG_LEVEL": "1"}))
    assert "a project default, not a vendor rule" in info.summary
    assert "DEBUG can cost performance" not in info.summary  # the page says it of DEBUG only
    debug = logging_level(ctx_for(fake_root, {"ASCEND_GLOBAL_LOG_LEVEL": "0"}))
    assert "DEBUG can cost performance" in debug.summary
    for finding in (info, debug):
        assert "never rotates" not in finding.summary and "fills the disk" not in finding.summary
        assert finding.rules == ("verbose-in-production",)


def test_per_process_file_cap_is_evidence(fake_root: FakeRoot) -> None:
    unset = logging_level(ctx_for(fake_root, {"HOME": "/root"}))
    assert any(e.startswith("ASCEND_HOST_LOG_FILE_NUM unset: each process keeps at most 10 "
                            "files of 20 MB") and "the cap is per process, not per directory" in e
               for e in unset.evidence)
    set_to = logging_level(ctx_for(fake_root, {"ASCEND_HOST_LOG_FILE_NUM": "50"}))
    assert set_to.status == "pass"
    assert any("ASCEND_HOST_LOG_FILE_NUM=50: each process keeps at most 50 files" in e
               for e in set_to.evidence)


@pytest.mark.parametrize("value", ["0", "1001", "ten"])
def test_illegal_file_cap_warns(fake_root: FakeRoot, value: str) -> None:
    finding = logging_level(ctx_for(fake_root, {"ASCEND_HOST_LOG_FILE_NUM": value}))
    assert finding.status == "warn"
    assert f"ASCEND_HOST_LOG_FILE_NUM={value!r} is not an integer 1..1000" in finding.summary
    assert "ASCEND_HOST_LOG_FILE_NUM to an integer 1..1000" in finding.remedy
    assert "ASCEND_GLOBAL_LOG_LEVEL" not in finding.remedy
    assert finding.rules == ("file-num-illegal",)


def test_print_to_stdout_warns(fake_root: FakeRoot) -> None:
    finding = logging_level(ctx_for(fake_root, {"ASCEND_SLOG_PRINT_TO_STDOUT": "1"}))
    assert finding.status == "warn" and "ASCEND_SLOG_PRINT_TO_STDOUT=1" in finding.summary
    assert finding.rules == ("print-to-stdout",)


def test_log_dir_precedence_is_reported(fake_root: FakeRoot) -> None:
    env = {"HOME": "/home/svc", "ASCEND_WORK_PATH": "/data/work",
           "ASCEND_PROCESS_LOG_PATH": "/data/logs"}
    finding = logging_level(ctx_for(fake_root, env))
    assert "/data/logs (from ASCEND_PROCESS_LOG_PATH)" in finding.summary


def test_debug_box_policy_accepts_info(fake_root: FakeRoot, tmp_path: Path) -> None:
    ctx = ctx_for(fake_root, {"ASCEND_GLOBAL_LOG_LEVEL": "1"})
    ctx.policy = load_policy(policy_file(tmp_path, NO_DISK_LIMITS + "  production: false\n"))
    assert logging_level(ctx).status == "pass"


# --- the log directory on disk ----------------------------------------------------------------

def test_size_and_free_space_are_evidence(fake_root: FakeRoot) -> None:
    plogs(fake_root, "/root/ascend/log", count=3, size=1000)
    finding = logging_level(ctx_for(fake_root, {"HOME": "/root"}))
    assert finding.status == "pass"
    assert "log directory /root/ascend/log holds 3000 bytes in 3 files" in finding.evidence
    assert any("free of" in e and "holding /root/ascend/log" in e for e in finding.evidence)


def test_low_free_space_warns_with_numbers_and_key(fake_root: FakeRoot) -> None:
    plogs(fake_root, "/root/ascend/log")
    policy = "logging:\n  min_free_disk_mb: 1000000000\n"
    finding = logging_level(ctx_for(fake_root, {"HOME": "/root"}, policy))
    assert finding.status == "warn"
    assert "logging.min_free_disk_mb=1000000000 MB" in finding.summary
    assert "MB free on the file system holding /root/ascend/log" in finding.summary
    assert "CANN caps the files of each process, not of the directory" in finding.remedy
    assert "never the logs of processes that have ended" not in finding.remedy  # unsourced
    assert "never rotates" not in finding.remedy  # CANN does cap each running process
    assert "ASCEND_GLOBAL_LOG_LEVEL" not in finding.remedy  # the level is fine
    assert finding.rules == ("low-free-disk",)


def test_large_log_dir_warns_with_numbers_and_key(fake_root: FakeRoot) -> None:
    plogs(fake_root, "/data/logs", count=4, size=250)
    policy = "logging:\n  min_free_disk_mb: 0\n  max_log_dir_mb: 0\n"
    finding = logging_level(ctx_for(fake_root, {"ASCEND_PROCESS_LOG_PATH": "/data/logs"},
                                    policy))
    assert finding.status == "warn"
    assert finding.summary == ("log directory /data/logs holds 1000 bytes, over "
                               "logging.max_log_dir_mb=0 MB (judged: this shell's environment)")
    assert finding.rules == ("log-dir-too-large",)


def test_empty_log_dir_is_within_a_zero_limit(fake_root: FakeRoot) -> None:
    fake_root.dir("/data/logs")
    policy = "logging:\n  min_free_disk_mb: 0\n  max_log_dir_mb: 0\n"
    finding = logging_level(ctx_for(fake_root, {"ASCEND_PROCESS_LOG_PATH": "/data/logs"},
                                    policy))
    assert finding.status == "pass"


def test_missing_log_dir_measures_nearest_parent(fake_root: FakeRoot) -> None:
    fake_root.dir("/data")
    finding = logging_level(ctx_for(fake_root, {"ASCEND_PROCESS_LOG_PATH": "/data/logs/app"}))
    assert finding.status == "pass"
    assert "log directory /data/logs/app does not exist yet" in finding.evidence
    assert any("holding /data (nearest existing parent of /data/logs/app)" in e
               for e in finding.evidence)


def test_log_dir_that_is_a_file_warns(fake_root: FakeRoot) -> None:
    fake_root.file("/data/logs", "not a directory")
    finding = logging_level(ctx_for(fake_root, {"ASCEND_PROCESS_LOG_PATH": "/data/logs"}))
    assert finding.status == "warn" and "/data/logs is a file, not a directory" in \
        finding.summary
    assert finding.rules == ("log-dir-not-a-directory",)


def test_relative_or_unknown_log_dir_is_said(fake_root: FakeRoot) -> None:
    relative = logging_level(ctx_for(fake_root, {"ASCEND_PROCESS_LOG_PATH": "logs"}))
    unknown = logging_level(ctx_for(fake_root, {}))
    for finding in (relative, unknown):
        assert finding.status == "pass"
        assert "log disk usage not measured" in finding.summary
        assert finding.rules == ()


def test_walk_bound_says_at_least(fake_root: FakeRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    plogs(fake_root, "/data/logs", count=5, size=100)
    monkeypatch.setattr(logging_check, "MAX_ENTRIES", 4)
    policy = "logging:\n  min_free_disk_mb: 0\n  max_log_dir_mb: 0\n"
    finding = logging_level(ctx_for(fake_root, {"ASCEND_PROCESS_LOG_PATH": "/data/logs"},
                                    policy))
    assert finding.status == "warn"
    assert "holds at least 200 bytes (stopped after 4 files)" in finding.summary


def test_walk_default_bound_is_20000_entries_and_depth_8() -> None:
    assert (logging_check.MAX_ENTRIES, logging_check.MAX_DEPTH) == (20000, 8)


def test_walk_stops_at_depth(fake_root: FakeRoot) -> None:
    fake_root.file("/logs/a.log", "x" * 10)
    fake_root.file("/logs/1/b.log", "x" * 20)
    fake_root.file("/logs/1/2/c.log", "x" * 40)
    host = LiveHost(root=str(fake_root.path))
    full = measure_dir(host, "/logs")
    assert (full.total_bytes, full.files, full.complete) == (70, 3, True)
    shallow = measure_dir(host, "/logs", max_depth=2)
    assert (shallow.total_bytes, shallow.files) == (30, 2)
    assert shallow.stopped == "stopped at depth 2"


def test_walk_follows_links_and_survives_loops(fake_root: FakeRoot) -> None:
    fake_root.file("/elsewhere/big.log", "x" * 50)
    fake_root.file("/logs/a.log", "x" * 10)
    fake_root.link("/logs/link.log", "/elsewhere/big.log")
    fake_root.link("/logs/loop", "/logs")
    size = measure_dir(LiveHost(root=str(fake_root.path)), "/logs", max_depth=3)
    assert size.stopped == "stopped at depth 3"  # the loop is cut by the bound
    assert size.total_bytes == 3 * 60 and size.files == 6


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_unreadable_subdirectory_makes_size_a_lower_bound(fake_root: FakeRoot) -> None:
    fake_root.file("/logs/a.log", "x" * 10)
    locked = fake_root.dir("/logs/locked")
    locked.chmod(0)
    try:
        size = measure_dir(LiveHost(root=str(fake_root.path)), "/logs")
    finally:
        locked.chmod(0o755)
    assert size.total_bytes == 10 and size.unreadable == 1 and not size.complete


# --- from a recording ------------------------------------------------------------------------

def record(root: FakeRoot, env: dict[str, str], tmp_path: Path) -> SnapshotHost:
    recorder = RecordingHost(LiveHost(root=str(root.path), env=env))
    logging_level(Context(recorder, load_policy(policy_file(tmp_path, NO_DISK_LIMITS))))
    return SnapshotHost(recorder.save(tmp_path / "snap"))


def test_recording_answers_the_same(fake_root: FakeRoot, tmp_path: Path) -> None:
    plogs(fake_root, "/root/ascend/log")
    env = {"HOME": "/root"}
    live = logging_level(ctx_for(fake_root, env))
    replay = record(fake_root, env, tmp_path)
    replayed = logging_level(Context(replay, load_policy(tmp_path / "policy.yaml")))
    assert replayed.status == live.status == "pass"
    assert replayed.evidence[:3] == live.evidence[:3]  # free space may move in between


class NoDiskAnswers(SnapshotHost):
    """A recording from before the disk questions: they are not recorded."""

    def file_size(self, path: str) -> int:
        raise NotRecorded(path)

    def disk_usage(self, path: str) -> DiskUsage:
        raise NotRecorded(path)


def test_not_recorded_disk_answers_are_said_not_passed(fake_root: FakeRoot,
                                                       tmp_path: Path) -> None:
    plogs(fake_root, "/root/ascend/log")
    replay = NoDiskAnswers(record(fake_root, {"HOME": "/root"}, tmp_path).path)
    finding = logging_level(Context(replay, load_policy(tmp_path / "policy.yaml")))
    assert finding.status == "pass"  # the level part passes ...
    assert "log directory size not recorded" in finding.summary  # ... the disk part is said
    assert "log file system free space not recorded" in finding.summary
    assert "log directory /root/ascend/log size: not recorded" in finding.evidence
    assert "free space for /root/ascend/log: not recorded" in finding.evidence


# --- module levels, MindIE, plog files per process id ----------------------------------------

@pytest.mark.parametrize(("value", "status", "rule", "words"), [
    ("RUNTIME=0:GE=0", "warn", "module-verbose-in-production", "RUNTIME=0 (DEBUG), GE=0"),
    ("RUNTIME=3:GE=2", "pass", "", "RUNTIME 3 (ERROR), GE 2 (WARNING)"),
    ("RUNTIME=0 GE=0", "warn", "module-level-illegal", "ignores the whole setting"),
    ("RUNTIME=7", "warn", "module-level-illegal", "'RUNTIME=7' is not MODULE=0..4"),
])
def test_module_levels_override_the_global_level(fake_root: FakeRoot, value: str, status: str,
                                                 rule: str, words: str) -> None:
    env = {"HOME": "/root", "ASCEND_GLOBAL_LOG_LEVEL": "3", "ASCEND_MODULE_LOG_LEVEL": value}
    finding = logging_level(ctx_for(fake_root, env))
    assert finding.status == status
    assert words in finding.summary + " ".join(finding.evidence)
    assert finding.rules == ((rule,) if rule else ())
    assert rule in ("", "module-verbose-in-production", "module-level-illegal")  # rules


def test_mindie_logging_is_read_for_a_mindie_target(fake_root: FakeRoot) -> None:
    env = {"HOME": "/root", "MINDIE_LOG_LEVEL": "info; llm:DEBUG",
           "MINDIE_LOG_PATH": "/data/mindie-logs"}
    finding = logging_level(ctx_for(fake_root, env))
    assert finding.status == "warn" and finding.rules == ("mindie-debug",)
    assert "MINDIE_LOG_LEVEL: llm at DEBUG" in finding.summary
    assert any("MINDIE_LOG_PATH=/data/mindie-logs" in e for e in finding.evidence)
    quiet = logging_level(ctx_for(fake_root, {"HOME": "/root", "MINDIE_LOG_LEVEL": "loud"}))
    assert quiet.rules == ("mindie-level-illegal",)
    default = logging_level(ctx_for(fake_root, {"HOME": "/root"}))
    assert not any("MINDIE" in e for e in default.evidence)  # not a MindIE target


def test_plog_files_are_counted_per_process_id(fake_root: FakeRoot) -> None:
    plogs(fake_root, "/root/ascend/log", count=3)
    root = fake_root
    root.file("/root/ascend/log/debug/plog/plog-100_20250602.log", "x")
    few = logging_level(ctx_for(fake_root, {"HOME": "/root"}))
    assert few.status == "pass"
    assert ("/root/ascend/log/debug/plog: 4 plog files from 3 process ids, name times "
            "20250601 to 20250602") in few.evidence
    plogs(fake_root, "/root/ascend/log", count=logging_check.MAX_PLOG_PIDS + 1)
    many = logging_level(ctx_for(fake_root, {"HOME": "/root"}))
    assert many.status == "warn" and many.rules == ("many-process-logs",)
    assert "65 process ids left plog files" in many.summary and "restart loop" in many.summary


# --- the newest plog lines through triage ---------------------------------------------------

INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents" / "hccl.yaml"
PLOG_DIR = "/root/ascend/log/debug/plog"


def incident(incident_id: str) -> dict[str, str]:
    rows = yaml.safe_load(INCIDENTS.read_text())["incidents"]
    row: dict[str, str] = next(r for r in rows if r["id"] == incident_id)
    return row


BUFFSIZE = incident("va-pr5287-hccl-buffsize-dispatch")


def test_a_known_error_in_the_newest_plog_warns_with_its_playbook(fake_root: FakeRoot) -> None:
    plogs(fake_root, "/root/ascend/log", count=3)
    fake_root.file(f"{PLOG_DIR}/plog-17833_20251223073619.log", BUFFSIZE["excerpt"])
    finding = logging_level(ctx_for(fake_root, {"HOME": "/root"}))
    assert finding.status == "warn"
    assert finding.rules == ("known-error-in-logs",)
    assert "the newest plog files hold known error signatures: hccl.buffsize-too-small " \
        "(open playbook symptom.hccl-settings)" in finding.summary
    assert "ascend-doctor explain symptom.hccl-settings" in finding.remedy
    assert any(e.startswith("triage: hccl.buffsize-too-small (") and
               f"{PLOG_DIR}/plog-17833_20251223073619.log:" in e for e in finding.evidence)


def test_a_healthy_newest_plog_stays_quiet(fake_root: FakeRoot) -> None:
    fake_root.file(f"{PLOG_DIR}/plog-17833_20251223073619.log", BUFFSIZE["healthy"])
    finding = logging_level(ctx_for(fake_root, {"HOME": "/root"}))
    assert finding.status == "pass" and finding.rules == ()
    assert any(e.startswith("triage of the newest plog files (the last 256 KiB of "
                            "plog-17833_20251223073619.log): no known error signature")
               for e in finding.evidence)


def test_only_the_newest_files_and_their_tails_are_read(fake_root: FakeRoot) -> None:
    # the error sits in an older file than the newest three, and before the last 256 KiB of
    # a newer one: both are outside the bounded read
    fake_root.file(f"{PLOG_DIR}/plog-1_20250101000000.log", BUFFSIZE["excerpt"])
    filler = ("INFO nothing happened here\n" * (logging_check.TAIL_BYTES // 20))
    fake_root.file(f"{PLOG_DIR}/plog-2_20250102000000.log", BUFFSIZE["excerpt"] + filler)
    for n in (3, 4):
        fake_root.file(f"{PLOG_DIR}/plog-{n}_2025010{n}000000.log", BUFFSIZE["healthy"])
    finding = logging_level(ctx_for(fake_root, {"HOME": "/root"}))
    assert finding.status == "pass", finding.summary
    assert any("plog-4_20250104000000.log, plog-3_20250103000000.log, "
               "plog-2_20250102000000.log" in e for e in finding.evidence)


def test_a_bundle_replays_the_triage_of_its_newest_plogs(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    host = build_a2(fake_root, A2())
    fake_root.file(f"{PLOG_DIR}/plog-17833_20251223073619.log", BUFFSIZE["excerpt"])
    out = tmp_path / "b.tar.gz"
    monkeypatch.setattr("checks.cli.os.environ", dict(host.env))
    main(["bundle", "--root", str(fake_root.path), "--python", "/usr/bin/python3",
          "--policy", str(policy_file(tmp_path, NO_DISK_LIMITS)), "-o", str(out)])
    capsys.readouterr()
    main(["--from", str(out), "--json", "--only", "logging.level", "--policy",
          str(policy_file(tmp_path, NO_DISK_LIMITS))])
    replayed = json.loads(capsys.readouterr().out)["results"][0]
    assert replayed["rules"] == ["known-error-in-logs"]
    assert "hccl.buffsize-too-small" in replayed["summary"]
