from __future__ import annotations

import datetime as dt
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from checks.context import Context
from checks.model import NO_BASELINE, NO_MODEL, Check, Finding, failed, passed, skipped, warned
from checks.policy import load_policy
from checks.runner import run_checks
from probes.live import LiveHost


def _ctx(tmp_path: Path, policy_text: str = "") -> Context:
    path = tmp_path / "policy.yaml"
    path.write_text(policy_text or "runner:\n  check_timeout_s: 1\n")
    return Context(LiveHost(root=str(tmp_path), env={}), load_policy(path))


def _check(id: str, finding: Finding | Exception, delay_s: float = 0.0) -> Check:
    def fn(ctx: Context) -> Finding:
        time.sleep(delay_s)
        if isinstance(finding, Exception):
            raise finding
        return finding

    return Check(id, id, "test", "nothing", fn)


def test_statuses_and_exit_codes(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    quiet = run_checks([_check("a", passed("ok")), _check("b", skipped("n/a"))], ctx)
    assert quiet.exit_code() == 0
    assert run_checks([_check("a", passed("ok")), _check("b", warned("w", "r"))],
                      ctx).exit_code() == 1
    run = run_checks([_check("a", warned("w", "r")), _check("b", failed("f", "r"))], ctx)
    assert run.exit_code() == 2
    assert run.counts() == {"pass": 0, "warn": 1, "fail": 1, "skip": 0, "error": 0}


def test_a_crash_is_contained_as_error(tmp_path: Path) -> None:
    run = run_checks([_check("boom", RuntimeError("disk on fire")),
                      _check("fine", passed("ok"))], _ctx(tmp_path))
    by_id = {r.id: r for r in run.results}
    assert by_id["boom"].status == "error"
    assert "RuntimeError: disk on fire" in by_id["boom"].summary
    assert by_id["fine"].status == "pass"
    assert run.exit_code() == 2


def test_a_hung_check_times_out_and_the_rest_finish(tmp_path: Path) -> None:
    started = time.perf_counter()
    run = run_checks([_check("slow", passed("late"), delay_s=20.0),
                      _check("quick", passed("ok"))], _ctx(tmp_path))
    elapsed = time.perf_counter() - started
    by_id = {r.id: r for r in run.results}
    assert by_id["slow"].status == "error" and "within 1 s" in by_id["slow"].summary
    assert by_id["quick"].status == "pass"
    assert elapsed < 10  # well short of the 20 s check: it was cut off, not waited for


def test_checks_run_concurrently(tmp_path: Path) -> None:
    barrier = threading.Barrier(3, timeout=5)

    def meet(ctx: Context) -> Finding:
        barrier.wait()
        return passed("met")

    checks = [Check(f"c{i}", "c", "test", "x", meet) for i in range(3)]
    run = run_checks(checks, _ctx(tmp_path, "runner:\n  check_timeout_s: 10\n"))
    assert [r.status for r in run.results] == ["pass", "pass", "pass"]


def test_facts_are_read_once_across_checks(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, "runner:\n  check_timeout_s: 10\n")
    calls: list[int] = []

    def read() -> int:
        calls.append(1)
        time.sleep(0.05)
        return 42

    def uses(c: Context) -> Finding:
        return passed(str(c.fact("answer", read)))

    run_checks([Check(f"c{i}", "c", "t", "x", uses) for i in range(4)], ctx)
    assert calls == [1]


def test_waiver_keeps_the_status_but_not_the_exit_code(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, "waivers:\n  - {id: b, reason: known riser, expires: 2027-01-31}\n")
    run = run_checks([_check("b", warned("x8 link", "reseat"))], ctx, today=dt.date(2027, 1, 1))
    assert run.results[0].status == "warn"
    assert run.results[0].waiver.startswith("known riser")
    assert run.exit_code() == 0
    expired = run_checks([_check("b", warned("x8", "r"))], ctx, today=dt.date(2027, 2, 2))
    assert expired.exit_code() == 1
    assert any("expired" in e for e in expired.results[0].evidence)


def test_an_input_missing_from_a_recording_is_a_skip_never_a_pass(tmp_path: Path) -> None:
    from probes.errors import NotRecorded

    run = run_checks([_check("r", NotRecorded("/etc/ascend_install.info"))], _ctx(tmp_path))
    assert run.results[0].status == "skip"
    assert "not recorded: /etc/ascend_install.info" in run.results[0].summary


def test_a_check_whose_declared_input_is_absent_is_skipped_without_running(tmp_path: Path
                                                                           ) -> None:
    ran: list[str] = []

    def fn(ctx: Context) -> Finding:
        ran.append("yes")
        return passed("looked")

    checks = [Check("m", "m", "t", "x", fn, needs=("model",)),
              Check("b", "b", "t", "x", fn, needs=("baseline",))]
    run = run_checks(checks, _ctx(tmp_path))
    assert [(r.status, r.summary) for r in run.results] == [("skip", NO_MODEL),
                                                            ("skip", NO_BASELINE)]
    assert ran == []
    ctx = _ctx(tmp_path)
    ctx.model_dir = tmp_path
    assert run_checks(checks[:1], ctx).results[0].status == "pass" and ran == ["yes"]


def test_a_hung_check_does_not_keep_the_interpreter_alive(tmp_path: Path) -> None:
    code = (
        "import time, sys\n"
        "from checks.context import Context\n"
        "from checks.model import Check, passed\n"
        "from checks.policy import load_policy\n"
        "from checks.runner import run_checks\n"
        "from probes.live import LiveHost\n"
        f"policy = load_policy(__import__('pathlib').Path({str(tmp_path / 'p.yaml')!r}))\n"
        "hang = Check('hang', 'h', 't', 'x', lambda ctx: time.sleep(600) or passed('x'))\n"
        "run = run_checks([hang], Context(LiveHost(env={}), policy))\n"
        "print(run.results[0].status)\n"
    )
    (tmp_path / "p.yaml").write_text("runner:\n  check_timeout_s: 0.5\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "error"


def test_quick_checks_share_one_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import checks.runner as runner

    monkeypatch.setattr(runner, "STAGGER_S", 5.0)  # far longer than any of these takes
    threads: list[int] = []

    def note(ctx: Context) -> Finding:
        threads.append(threading.get_ident())
        return passed("quick")

    run = run_checks([Check(f"q{i}", "q", "t", "x", note) for i in range(5)],
                     _ctx(tmp_path, "runner:\n  check_timeout_s: 10\n"))
    assert [r.status for r in run.results] == ["pass"] * 5
    assert len(set(threads)) == 1 and threads[0] != threading.get_ident()


def test_a_waiting_check_gets_a_second_worker(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import checks.runner as runner

    monkeypatch.setattr(runner, "STAGGER_S", 0.05)
    released = threading.Event()

    def wait(ctx: Context) -> Finding:  # first in line: only another worker can release it
        return passed("released") if released.wait(5) else failed("never released", "")

    def release(ctx: Context) -> Finding:
        released.set()
        return passed("released the other")

    run = run_checks([Check("wait", "w", "t", "x", wait), Check("release", "r", "t", "x", release)],
                     _ctx(tmp_path, "runner:\n  check_timeout_s: 10\n"))
    assert [r.status for r in run.results] == ["pass", "pass"]
