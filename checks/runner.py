"""Run checks concurrently, each with a timeout; one check's crash stays its own.

Checks run one after another on a worker thread; when STAGGER_S passes with no check finished,
another worker starts beside it. Quick checks (most of them, on most machines) so run without
fighting over the GIL, and a check that waits (npu-smi, another interpreter, a cold disk) still
overlaps with the rest.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from checks.context import Context
from checks.model import Check, Finding, Result, Status
from probes.errors import NotRecorded
from probes.target.model import TargetUnreadable

STAGGER_S = 0.02

if TYPE_CHECKING:
    import datetime as dt


@dataclass(frozen=True)
class Run:
    """The results of one run, in report order, and the wall time it took."""

    results: tuple[Result, ...]
    duration_ms: float

    def counts(self) -> dict[Status, int]:
        counts: dict[Status, int] = {"pass": 0, "warn": 0, "fail": 0, "skip": 0, "error": 0}
        for result in self.results:
            counts[result.status] += 1
        return counts

    def exit_code(self) -> int:
        """0 all pass, 1 warnings only, 2 a failure or a broken check; waived ones don't count."""
        live = [r.status for r in self.results if not r.waiver]
        if "fail" in live or "error" in live:
            return 2
        return 1 if "warn" in live else 0


def _call(check: Check, ctx: Context) -> tuple[Finding, float]:
    began = time.perf_counter()
    try:
        finding = check.fn(ctx)
    except TargetUnreadable as exc:
        # a fact of the target (its environment) the kernel refused: never a pass
        finding = Finding("skip", str(exc))
    except NotRecorded as exc:
        # a recording that lacks an input the check needs: it could not look, so never a pass
        finding = Finding("skip", f"not recorded: {exc.path}")
    except Exception as exc:
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1]
        finding = Finding("error", f"the check broke: {type(exc).__name__}: {exc}",
                          (f"at {where.filename}:{where.lineno}",),
                          "report this as a bug in ascend-doctor, with the --json output")
    return finding, (time.perf_counter() - began) * 1000


def _waive(result: Result, ctx: Context, today: dt.date | None) -> Result:
    waiver = ctx.policy.waiver_for(result.id)
    if waiver is None or result.status not in ("warn", "fail"):
        return result
    if today is None:
        import datetime as dt

        today = dt.date.today()
    if not waiver.active(today):
        note = f"waiver expired on {waiver.expires.isoformat()}: {waiver.reason}"
        return replace(result, evidence=(*result.evidence, note))
    return replace(result, waiver=f"{waiver.reason} (until {waiver.expires.isoformat()})")


class _Job:
    __slots__ = ("began", "check", "outcome")

    def __init__(self, check: Check) -> None:
        self.check = check
        self.outcome: tuple[Finding, float] | None = None
        self.began = 0.0


class _Workers:
    """Runs jobs in order on one daemon thread; whenever STAGGER_S passes and no job has
    finished, another worker joins in. A hung check thus blocks neither the others nor the
    interpreter's exit, and quick checks never fight over the GIL.

    The caller sleeps while the workers run: it is woken when the last job starts and when
    every job has finished, not at each finish (on a busy machine every wake-up costs a wait
    for a core and a GIL hand-over)."""

    def __init__(self, jobs: list[_Job], ctx: Context) -> None:
        self._pending = list(reversed(jobs))  # next job at the end
        self._total = len(jobs)
        self._finished = 0
        self._overdue = False  # a job ran out of time: the caller wants every finish
        self._ctx = ctx
        self.changed = threading.Condition()

    def start_all(self) -> None:
        """Return once every job has started."""
        with self.changed:
            while self._pending:
                threading.Thread(target=self._work, name="check worker", daemon=True).start()
                seen = -1
                while self._pending and seen != self._finished:
                    seen = self._finished  # a job finished within the window: keep up
                    self.changed.wait(STAGGER_S)

    def wait_all(self, jobs: Sequence[_Job], timeout_s: float) -> None:
        """Return once every job (all started) has finished or run out of its `timeout_s`."""
        with self.changed:
            while True:
                now = time.perf_counter()
                left_s = [j.began + timeout_s - now for j in jobs if j.outcome is None]
                if not any(s > 0 for s in left_s):
                    return
                self._overdue = any(s <= 0 for s in left_s)
                self.changed.wait(min(s for s in left_s if s > 0))

    def _work(self) -> None:
        while True:
            with self.changed:
                if not self._pending:
                    return
                job = self._pending.pop()
                job.began = time.perf_counter()
                if not self._pending:
                    self.changed.notify_all()  # every job has started
            self._run(job)

    def _run(self, job: _Job) -> None:
        outcome = _call(job.check, self._ctx)
        with self.changed:
            job.outcome = outcome
            self._finished += 1
            if self._finished == self._total or self._overdue:
                self.changed.notify_all()


def run_checks(checks: Sequence[Check], ctx: Context,
               today: dt.date | None = None) -> Run:
    start = time.perf_counter()
    timeout_s = float(ctx.policy.get("runner", "check_timeout_s"))
    jobs = [_Job(c) for c in checks]
    for job in jobs:
        missing = job.check.missing_input(ctx)
        if missing:  # skipped here, its module never imported
            job.outcome = (Finding("skip", missing), 0.0)
    running = [job for job in jobs if job.outcome is None]
    _prefetch(running, ctx)
    workers = _Workers(running, ctx)
    workers.start_all()
    workers.wait_all(running, timeout_s)
    results = [_collect(job, timeout_s, workers.changed) for job in jobs]
    waived = tuple(_waive(r, ctx, today) for r in results)
    return Run(waived, (time.perf_counter() - start) * 1000)


def _prefetch(jobs: Sequence[_Job], ctx: Context) -> None:
    """Every prefetch here, before the first check thread starts (each is idempotent). A
    prefetch only begins work its check would otherwise do itself, so a failure is left to
    the check to meet again and report."""
    for job in jobs:
        if job.check.prefetch is not None:
            with contextlib.suppress(Exception):
                job.check.prefetch(ctx)


def _collect(job: _Job, timeout_s: float, changed: threading.Condition) -> Result:
    # every check has `timeout_s` from its own start
    with changed:
        while job.outcome is None:
            remaining_s = job.began + timeout_s - time.perf_counter()
            if remaining_s <= 0:
                break
            changed.wait(remaining_s)
        outcome = job.outcome
    if outcome is None:
        finding = Finding("error", f"the check did not finish within {timeout_s:g} s",
                          (), "raise runner.check_timeout_s in the policy, or look for a "
                          "hung command (npu-smi, the --python interpreter)")
        return Result.of(job.check, finding, timeout_s * 1000)
    finding, duration_ms = outcome
    return Result.of(job.check, finding, duration_ms)
