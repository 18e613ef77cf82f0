"""A vLLM server's EngineCore and workers overwrite their argv/environ area (setproctitle):
real processes that do exactly that (ctypes over the addresses /proc/self/stat gives) under
a parent whose command line is `vllm serve`. The worker a responder copies from npu-smi into
`--pid` is judged through that parent, every rank is named, a rank whose environment differs
is flagged, and an overwritten environment is never read as "nothing set"."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from target_fixtures import BLANK, children, running, write_script

from checks.cli import main
from probes.target.proc import EnvironBlank, ProcReader
from probes.target.resolve import from_pid

# an API server that starts an EngineCore, which starts two workers; the second worker keeps
# its environment but runs at another log level (a rank that disagrees)
ENGINE = """import os, subprocess, sys, time
blank, worker_env = sys.argv[1], dict(os.environ, ASCEND_GLOBAL_LOG_LEVEL='0')
kids = [subprocess.Popen([sys.executable, blank, 'VLLM::Worker_TP0'], stdout=subprocess.PIPE),
        subprocess.Popen([sys.executable, '-c', 'import time; print(1, flush=True); '
                          'time.sleep(600)'], stdout=subprocess.PIPE, env=worker_env)]
for kid in kids:
    kid.stdout.readline()
print('ready', flush=True)
time.sleep(600)
"""
SERVER = """import subprocess, sys, time
engine = subprocess.Popen([sys.executable, sys.argv[-2], sys.argv[-1]], stdout=subprocess.PIPE)
engine.stdout.readline()
print('ready', flush=True)
time.sleep(600)
"""


def _workers(engine: int) -> tuple[int, int]:
    """(the worker that overwrote its environment, the one that kept it), by their titles."""
    kids = children(engine)
    blank = [k for k in kids if ProcReader().cmdline(k) == ("VLLM::Worker_TP0",)]
    assert len(kids) == 2 and len(blank) == 1, kids
    return blank[0], next(k for k in kids if k != blank[0])


def _server(tmp_path: Path) -> list[str]:
    blank = tmp_path / "blank.py"
    blank.write_text(BLANK)
    engine = tmp_path / "engine.py"
    engine.write_text(ENGINE)
    vllm = write_script(tmp_path / "bin", "vllm", sys.executable, SERVER)
    return [str(vllm), "serve", "/models/m", "--tp", "2", str(engine), str(blank)]


ENV = {"PATH": "/usr/bin:/bin", "ASCEND_GLOBAL_LOG_LEVEL": "1", "HOME": "/tmp"}


def test_an_overwritten_environment_is_unreadable(tmp_path: Path) -> None:
    blank = tmp_path / "blank.py"
    blank.write_text(BLANK)
    with running([sys.executable, str(blank), "VLLM::EngineCore"], ENV) as pid:
        reader = ProcReader()
        with pytest.raises(EnvironBlank, match="no NAME=VALUE entry"):
            reader.environ(pid)
        assert reader.cmdline(pid) == ("VLLM::EngineCore",)
        resolved = from_pid(reader, pid, [], False)
    assert resolved.target.pid == pid and resolved.env == {}
    assert "its environment is unknown, not empty" in resolved.target.environment_error


def test_a_worker_is_judged_through_its_serving_parent(tmp_path: Path) -> None:
    with running(_server(tmp_path), ENV) as server:
        (engine,) = children(server)
        blank_worker, odd_worker = _workers(engine)
        resolved = from_pid(ProcReader(), blank_worker, [], False)
    target = resolved.target
    assert target.pid == server and resolved.env["ASCEND_GLOBAL_LOG_LEVEL"] == "1"
    assert target.chosen.startswith(f"--pid {blank_worker}: its environment area was "
                                     f"overwritten (setproctitle), so its serving parent "
                                     f"{server} is judged")
    assert [r.pid for r in target.ranks] == [server, *sorted((engine, blank_worker, odd_worker))]
    states = {r.pid: (r.environment, r.differs) for r in target.ranks}
    assert states[blank_worker] == ("overwritten (setproctitle)", ())
    assert states[odd_worker] == ("read", ("ASCEND_GLOBAL_LOG_LEVEL",))
    assert f"covers process {server} and the 3 processes it started" in target.environment
    assert "1 of them could not be read (overwritten (setproctitle))" in target.environment
    assert any(f"ranks disagree: process {odd_worker}" in line for line in target.problems)
    assert any(line.startswith(f"process {blank_worker} named by --pid: ")
               for line in target.problems)


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("checks.cli.os.environ", {"PATH": os.environ.get("PATH", "/usr/bin")})
        main(argv)
    return json.loads(capsys.readouterr().out)


def test_the_verdict_names_its_processes_and_the_rank_that_disagrees(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with running(_server(tmp_path), ENV) as server:
        (engine,) = children(server)
        blank_worker, odd_worker = _workers(engine)
        doc = _json(["--pid", str(blank_worker), "--only", "logging.level", "--json"], capsys)
    (result,) = doc["results"]
    assert doc["target"]["pid"] == server
    assert result["status"] == "warn" and "level 1 (INFO)" in result["summary"]
    assert f"ranks disagree: process {odd_worker}" in result["summary"]
    assert "ranks-disagree" in result["rules"]
    assert any(f"covers process {server}" in line for line in result["evidence"])


def test_cann_environment_flags_a_rank_with_another_environment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {**ENV, "ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/latest"}
    with running(_server(tmp_path), env) as server:
        (engine,) = children(server)
        _, odd_worker = _workers(engine)
        doc = _json(["--pid", str(server), "--only", "cann.environment", "--json"], capsys)
    (result,) = doc["results"]
    assert "ranks-disagree" in result["rules"]
    assert f"ranks disagree: process {odd_worker}" in result["summary"]
    assert "ASCEND_GLOBAL_LOG_LEVEL" in result["summary"]


def test_one_started_process_is_said_in_the_singular() -> None:
    from probes.target.parts import Rank
    from probes.target.ranks import coverage

    line = coverage([Rank(10, "vllm serve", "read"), Rank(11, "EngineCore", "read")])
    assert line.startswith("covers process 10 and the process it started (11 EngineCore")
