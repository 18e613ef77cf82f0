"""Reading a process from /proc: the parsers on real and written bytes, the reader on real
processes and on a tree a test builds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.target.proc import (
    ProcDenied,
    ProcGone,
    ProcReader,
    format_cpu_list,
    parse_cmdline,
    parse_cpu_list,
    parse_environ,
    parse_start_ticks,
    parse_status,
)

STATUS = """Name:\tpython3
Umask:\t0022
State:\tS (sleeping)
Tgid:\t4242
Pid:\t4242
PPid:\t1
Uid:\t1000\t1000\t1000\t1000
NSpid:\t4242\t7
Cpus_allowed:\tff
Cpus_allowed_list:\t0-3,8
Mems_allowed_list:\t1
"""


def test_environ_keeps_the_first_of_a_repeated_name_and_drops_entries_without_equals() -> None:
    env = parse_environ(b"A=1\0B=x=y\0junk\0A=2\0=nameless\0EMPTY=\0")
    assert env == {"A": "1", "B": "x=y", "EMPTY": ""}


def test_cmdline_splits_on_nul_and_reads_a_rewritten_title_as_words() -> None:
    assert parse_cmdline(b"python3\0-m\0vllm.entrypoints.openai.api_server\0") == (
        "python3", "-m", "vllm.entrypoints.openai.api_server")
    assert parse_cmdline(b"vllm serve /models/m --port 8000") == (
        "vllm", "serve", "/models/m", "--port", "8000")
    assert parse_cmdline(b"") == ()


def test_status_lines() -> None:
    status = parse_status(STATUS)
    assert (status.name, status.ppid, status.uid, status.ns_pid) == ("python3", 1, 1000, 7)
    assert status.cpus_allowed == (0, 1, 2, 3, 8)
    assert status.mems_allowed == (1,)


def test_start_ticks_with_a_name_holding_spaces_and_parentheses() -> None:
    fields = ["S"] + [str(n) for n in range(4, 22)] + ["123456", "0"]
    assert parse_start_ticks("42 (a (b) c) " + " ".join(fields)) == 123456


@given(st.sets(st.integers(min_value=0, max_value=300), max_size=40))
def test_cpu_lists_round_trip(cpus: set[int]) -> None:
    text = format_cpu_list(tuple(cpus))
    assert parse_cpu_list(text) == tuple(sorted(cpus))


def test_bad_cpu_lists_are_refused() -> None:
    for text in ("3-1", "a", "0-999999"):
        with pytest.raises(ValueError):
            parse_cpu_list(text)


def test_the_reader_on_this_very_process() -> None:
    reader = ProcReader()
    info, problems = reader.process(os.getpid())
    assert info.cmdline[0] == sys.orig_argv[0]
    assert info.exe == os.path.realpath(sys.executable)
    assert info.cwd == os.getcwd()
    assert info.mount_ns == "same" and info.files_root == "/"
    assert info.cpus_allowed == tuple(sorted(os.sched_getaffinity(0)))
    assert problems == []
    assert reader.environ(os.getpid())["PATH"] == os.environ["PATH"]


def test_a_process_that_is_gone_is_proc_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(ProcGone, match="no such process"):
        ProcReader().process(child.pid)


def test_a_reused_pid_is_not_the_same_process(tmp_path: Path) -> None:
    proc = tmp_path / "proc" / "77"
    proc.mkdir(parents=True)
    (proc / "stat").write_text("77 (x) S " + " ".join(["0"] * 18) + " 500 0\n")
    reader = ProcReader(str(tmp_path / "proc"))
    assert reader.alive(77, 500)
    assert not reader.alive(77, 499)
    (proc / "stat").unlink()
    assert not reader.alive(77, 500)


def test_a_refused_read_is_proc_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("builtins.open", refuse)
    with pytest.raises(ProcDenied, match="permission denied"):
        ProcReader().environ(os.getpid())
