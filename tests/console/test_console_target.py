"""`ascend-console --pid PID`: the host panel watches the target's log disk and names it, and
the doctor screen judges the same target as `ascend-doctor --pid`."""

from __future__ import annotations

import os
import threading
from functools import partial
from pathlib import Path

import pytest
from target_fixtures import fake_vllm
from textual.widgets import Static

from checks.policy import Policy
from console.options import ConsoleOptions
from console.target import FINDING, Found, TargetError, check_pid, find
from console.ui.app import ConsoleApp
from console.ui.cli import parse_options
from console.ui.screens.doctor import DoctorScreen
from console.ui.widgets.host import HostPanel
from probes.target import proc
from probes.target.find import Observed
from tests.conftest import CORPUS_DIR
from tests.console.fakes import FakeEngine, fake_backend
from tests.console.test_app import A2_8, wait_for

CORPUS = CORPUS_DIR / "npu-smi"


def summary(doctor: DoctorScreen) -> str:
    return str(doctor.query_one("#doctor-summary", Static).render())


async def test_the_panels_and_the_doctor_judge_the_target(tmp_path: Path) -> None:
    logs = tmp_path / "svc-logs"
    env = {"ASCEND_GLOBAL_LOG_LEVEL": "1", "ASCEND_PROCESS_LOG_PATH": str(logs)}
    with fake_vllm(tmp_path, env) as server:
        found = find(parse_options(["--no-model", "--pid", str(server.pid)]))
    assert found.log_dir == str(logs)
    assert found.target.pid == server.pid
    app = ConsoleApp(ConsoleOptions(interval_s=3600, log_dir=found.log_dir,
                                    sample_live=False),
                     backend=fake_backend(FakeEngine()), host=found.host,
                     target=found.target)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        subtitle = str(app.query_one(HostPanel).border_subtitle)
        assert subtitle.startswith(f"process {server.pid} (vllm serve ")
    run = app.run_doctor()
    level = next(r for r in run.results if r.id == "logging.level")
    assert level.status == "warn" and "level 1 (INFO)" in level.summary
    assert level.evidence[0].startswith(f"environment judged: process {server.pid}")


def test_a_pid_that_is_not_there_is_one_line_before_the_app_opens(
        capsys: pytest.CaptureFixture[str]) -> None:
    from console.ui.cli import main

    with pytest.raises(TargetError, match="no such process"):
        check_pid(parse_options(["--no-model", "--pid", "999999999"]))
    assert main(["--no-model", "--pid", "999999999"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("ascend-console: --pid 999999999: ") and "no such process" in err


def slow_npu_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An npu-smi on PATH that says it started, then waits (up to 30 s) until the test lets
    it print a real table; /proc seen by discovery is empty, so this shell is the target."""
    started, release = tmp_path / "started", tmp_path / "release"
    script = tmp_path / "bin" / "npu-smi"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\ntouch "{started}"\nn=0\n'
                      f'while [ ! -e "{release}" ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); '
                      f'done\ncat "{CORPUS / A2_8}"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    (tmp_path / "proc").mkdir()
    monkeypatch.setattr(proc, "PROC", str(tmp_path / "proc"))
    return started, release


async def test_the_app_opens_before_a_slow_npu_smi_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The target is found in a worker once the app is open: while npu-smi is still running,
    the app answers keys, and the host panel and the doctor screen say what they wait for."""
    started, release = slow_npu_smi(tmp_path, monkeypatch)
    options = ConsoleOptions(interval_s=3600, sample_live=False, npu_timeout_s=40.0)
    app = ConsoleApp(options, backend=fake_backend(FakeEngine()),
                     find_target=partial(find, options))
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, started.exists, what="npu-smi to start")
        panel = app.query_one(HostPanel)
        assert str(panel.border_subtitle) == FINDING
        await pilot.press("escape", "d")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen), what="doctor")
        doctor = app.screen
        assert isinstance(doctor, DoctorScreen)
        await wait_for(pilot, lambda: summary(doctor) == FINDING, what="the doctor to wait")
        assert not release.exists() and not app.target_known.is_set()
        release.touch()
        await wait_for(pilot, lambda: doctor.last_run is not None, timeout_s=60,
                       what="the checks")
        assert str(panel.border_subtitle) == "this shell"
        assert app.target.kind == "shell" and app.target.chosen == "no serving process found"
        results = {r.id: r for r in doctor.last_run.results} if doctor.last_run else {}
        assert results["npu.health"].status == "pass"
        assert results["logging.level"].evidence[0].startswith("environment judged: this shell")


async def test_a_target_that_cannot_be_read_is_said_and_never_judged() -> None:
    def gone() -> Found:
        raise TargetError("--pid 4242: the process exited while it was being read")

    app = ConsoleApp(ConsoleOptions(interval_s=3600, sample_live=False),
                     backend=fake_backend(FakeEngine()), find_target=gone)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, app.target_known.is_set, what="the target worker")
        await pilot.pause()
        subtitle = str(app.query_one(HostPanel).border_subtitle)
        assert subtitle == "no target: --pid 4242: the process exited while it was being read"
        await pilot.press("escape", "d")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen), what="doctor")
        doctor = app.screen
        assert isinstance(doctor, DoctorScreen)
        await wait_for(pilot, lambda: "could not run" in summary(doctor), what="the refusal")
        assert "--pid 4242: the process exited" in summary(doctor)
        assert doctor.last_run is None


def test_the_command_line_opens_the_app_without_running_npu_smi(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.ui.cli import main

    started, _ = slow_npu_smi(tmp_path, monkeypatch)
    opened: list[object] = []

    class App:
        return_code = 0

        def __init__(self, options: ConsoleOptions, **kwargs: object) -> None:
            opened.append(kwargs["find_target"])

        def run(self) -> int:
            opened.append(started.exists())
            return 0

    monkeypatch.setattr("console.ui.app.ConsoleApp", App)
    assert main(["--no-model"]) == 0
    find_target, npu_smi_ran = opened
    assert callable(find_target) and npu_smi_ran is False


async def test_quitting_while_the_doctor_waits_leaves_nothing_waiting() -> None:
    release = threading.Event()

    def slow() -> Found:
        release.wait(30)
        raise TargetError("not found")

    app = ConsoleApp(ConsoleOptions(interval_s=3600, sample_live=False),
                     backend=fake_backend(FakeEngine()), find_target=slow)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("escape", "d")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen), what="doctor")
        doctor = app.screen
        assert isinstance(doctor, DoctorScreen)
        await wait_for(pilot, lambda: summary(doctor) == FINDING, what="the doctor to wait")
        await pilot.press("escape")  # back to the main screen, the doctor still waiting
        await wait_for(pilot, lambda: not isinstance(app.screen, DoctorScreen), what="back")
        await pilot.press("escape", "q")
    release.set()
    assert app.target_known.is_set()
    with pytest.raises(TargetError, match="closing"):
        app.run_doctor()


async def test_the_console_doctor_judges_what_ascend_doctor_judges(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One target, with its model on its command line: the doctor screen's run and
    `ascend-doctor --pid PID --json` give every check the same status and summary."""
    import asyncio
    import json

    from checks.cli import main as doctor_main

    env = {"ASCEND_GLOBAL_LOG_LEVEL": "1"}
    with fake_vllm(tmp_path, env) as server:
        options = parse_options(["--no-model", "--pid", str(server.pid), "--interval", "3600"])
        app = ConsoleApp(options, backend=None, find_target=partial(find, options))
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, app.target_known.is_set, timeout_s=30, what="the target")
            console_run = await asyncio.to_thread(app.run_doctor)
        capsys.readouterr()
        doctor_main(["--pid", str(server.pid), "--json"])
        document = json.loads(capsys.readouterr().out)
    console_results = {r.id: (r.status, r.summary) for r in console_run.results}
    doctor_results = {r["id"]: (r["status"], r["summary"]) for r in document["results"]}
    assert console_results == doctor_results
    # the model on the target's command line was judged, not skipped for want of one
    checkpoint = next(r for r in console_run.results if r.id == "checkpoint.format")
    assert checkpoint.status != "skip", checkpoint.summary


def test_the_console_doctor_is_the_doctors_own_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The doctor screen's run is checks.doctor.run itself, on the target the console found."""
    from checks import doctor
    from checks.policy import load_policy
    from console.doctor_run import run_doctor

    calls: list[Observed] = []
    real = doctor.run

    def spy(observed: Observed, policy: Policy, request: doctor.Request) -> doctor.Judged:
        calls.append(observed)
        return real(observed, policy, request)

    monkeypatch.setattr(doctor, "run", spy)
    options = ConsoleOptions(root=str(tmp_path), sample_live=False)
    observed = find(options).observed
    assert observed is not None
    run = run_doctor(options, observed, load_policy(), None)
    assert calls == [observed] and len(run.results) > 10
