"""`ascend-doctor triage` as a user runs it: a real interpreter, real files, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
OOM = "RuntimeError: NPU out of memory. Tried to allocate 20.00 MiB (NPU 0; 60.96 GiB total)"


def triage(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
           timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "checks.cli", "triage", *args],
                          input=stdin if stdin is not None else "", capture_output=True,
                          text=True, timeout=timeout_s, env=full_env, cwd=ROOT)


def test_a_paste_on_stdin_with_a_recognised_error_exits_1(tmp_path: Path) -> None:
    done = triage("-", stdin=f"INFO start\n{OOM}\n")
    assert done.returncode == 1, done.stderr
    assert "NPU out of memory (torch_npu allocator) (torch-npu.out-of-memory)" in done.stdout
    assert "<stdin>:2" in done.stdout
    assert "playbook: symptom.memory-above-plan" in done.stdout


def test_nothing_recognised_exits_0_and_says_what_was_read(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_text("INFO 12-07 10:00:00 [api_server.py:1] started\nERROR tokenizer odd\n")
    done = triage(str(log))
    assert done.returncode == 0, done.stderr
    assert "Read 1 input, 2 lines, 0.1 KB" in done.stdout
    assert "Nothing recognised. Closest playbooks:" in done.stdout


def test_unreadable_input_exits_3_with_one_line(tmp_path: Path) -> None:
    done = triage(str(tmp_path / "missing.log"))
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and "No such file or directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_since_exits_3(tmp_path: Path) -> None:
    done = triage(str(tmp_path), "--since", "soon")
    assert done.returncode == 3
    assert "--since 'soon'" in done.stderr and "Traceback" not in done.stderr


def test_json_follows_the_contract(tmp_path: Path) -> None:
    log = tmp_path / "plog.log"
    log.write_text(f"[ERROR] RUNTIME(1,python):2026-12-07-10:00:00 x ret=507015\n{OOM}\n")
    done = triage(str(log), "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert doc["schema"] == "ascend-triage/1"
    assert doc["read"]["files"] == [str(log)] and doc["read"]["lines"] == 2
    first = doc["findings"][0]
    assert first["id"] == "core.aicore-error"
    for key, kind in (("id", str), ("playbook", str), ("cause", str), ("fix", str),
                      ("sources", list), ("evidence", list)):
        assert isinstance(first[key], kind), key
    assert first["evidence"][0] == {"file": str(log), "line": 1,
                                    "text": first["evidence"][0]["text"]}
    assert all(isinstance(s, str) and s for s in first["sources"])


def test_pid_reads_the_process_log_directory(tmp_path: Path) -> None:
    plog = tmp_path / "logs" / "debug" / "plog"
    plog.mkdir(parents=True)
    (plog / "plog-1_20261207100000000.log").write_text(
        "[ERROR] HCCL(1,python):2026-12-07-10:00:00 EI0006: Getting socket times out.\n")
    service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                               env={**os.environ, "ASCEND_PROCESS_LOG_PATH":
                                    str(tmp_path / "logs")})
    try:
        done = triage("--pid", str(service.pid), "--since", "1h")
    finally:
        service.kill()
        service.wait(timeout=10)
    assert done.returncode == 1, done.stderr
    assert "HCCL socket timed out (EI0006) (hccl.socket-timeout)" in done.stdout
    assert f"process {service.pid}: CANN logs in {tmp_path / 'logs'}" in done.stdout


def test_pid_of_no_process_exits_3() -> None:
    free = next(pid for pid in range(4_194_000, 4_000_000, -1)
                if not os.path.exists(f"/proc/{pid}"))
    done = triage("--pid", str(free))
    assert done.returncode == 3
    assert done.stderr.startswith(f"ascend-doctor: --pid {free}")
    beyond = triage("--pid", "999999999")  # above the kernel's pid_max ceiling (proc(5))
    assert beyond.returncode == 3 and "is not a process id" in beyond.stderr


@pytest.mark.parametrize("payload", [b"\0\x01\x02" * 1000, b"\xff\xfe" * 5000])
def test_hostile_bytes_on_stdin_end_cleanly(payload: bytes) -> None:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "checks.cli", "triage", "-"], input=payload,
                          capture_output=True, timeout=120, env=full_env, cwd=ROOT)
    assert done.returncode in (0, 3)
    assert b"Traceback" not in done.stderr


def test_hostile_file_names_are_shown_not_obeyed(tmp_path: Path) -> None:
    bad = tmp_path / "evil\x1b[2J\u202e.log"
    bad.write_text(f"{OOM}\n")
    (tmp_path / "gone\x1b]0;x\x07.log").symlink_to(tmp_path / "nowhere")
    done = triage(str(tmp_path))
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert "evil\\x1b[2J\\u202e.log:1" in done.stdout


def test_the_lines_of_a_finding_are_cited_in_order(tmp_path: Path) -> None:
    # the hits of one finding come from several patterns; the citation reads top to bottom
    prefix = "(Worker_DP1_TP3_EP11 pid=40211) ERROR 03-02 10:12:40 [multiproc_executor.py:654]"
    log = tmp_path / "serve.log"
    log.write_text("INFO 03-02 10:11:02 [worker.py:311] Loading weights took 41.20 seconds\n"
                   f"{prefix} RuntimeError: call aclnnMoeDistributeDispatchV2 failed, error "
                   "code is 561002\n"
                   f"{prefix} EZ9999: Inner Error!\n"
                   f"{prefix} EZ9999[PID: 40211] HCCL_BUFFSIZE is too SMALL, maxBs = 256, "
                   "h = 4096, epWorldSize = 16,\n"
                   f"{prefix}   NEEDED_HCCL_BUFFSIZE(...) = 1730MB, HCCL_BUFFSIZE=512MB.\n")
    done = triage(str(log))
    assert done.returncode == 1, done.stderr
    assert f"at: {log}:2, 3, 4, 5" in done.stdout
    assert done.stdout.startswith("Read 1 input, 5 lines, 0.6 KB.")


def test_a_paste_from_a_terminal_says_how_to_end_it() -> None:
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "checks.cli", "triage", "-"], stdin=follower,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(follower)
    try:
        os.write(leader, f"{OOM}\n\x04".encode())  # one Ctrl+D ends the paste
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        os.close(leader)
    assert "paste the log, then press Ctrl+D" in err
    assert "torch-npu.out-of-memory" in out and proc.returncode == 1


def test_a_piped_paste_gets_no_terminal_hint() -> None:
    done = triage("-", stdin=f"{OOM}\n")
    assert done.returncode == 1 and "Ctrl+D" not in done.stderr
