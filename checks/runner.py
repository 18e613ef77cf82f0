"""Run checks concurrently, each with a timeout; one check's crash stays its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from checks.context import Context
from checks.model import Check, Finding, Result, Status
from probes.errors import NotRecorded

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


class _Job(threading.Thread):
    """One check on its own daemon thread: a hung check can neither block the others nor the
    interpreter's exit (a pool's workers are joined at exit)."""

    def __init__(self, check: Check, ctx: Context) -> None:
        super().__init__(name=f"check {check.id}", daemon=True)
        self.check, self.ctx = check, ctx
        self.outcome: tuple[Finding, float] | None = None

    def begin(self) -> None:
        """Start the check; one whose declared input is absent is skipped here, unimported."""
        missing = self.check.missing_input(self.ctx)
        if missing:
            self.outcome = (Finding("skip", missing), 0.0)
        else:
            self.start()

    def run(self) -> None:
        self.outcome = _call(self.check, self.ctx)


def run_checks(checks: Sequence[Check], ctx: Context,
               today: dt.date | None = None) -> Run:
    start = time.perf_counter()
    timeout_s = float(ctx.policy.get("runner", "check_timeout_s"))
    jobs = [_Job(c, ctx) for c in checks]
    for job in jobs:
        job.begin()
    results = [_collect(job, start, timeout_s) for job in jobs]
    waived = tuple(_waive(r, ctx, today) for r in results)
    return Run(waived, (time.perf_counter() - start) * 1000)


def _collect(job: _Job, start: float, timeout_s: float) -> Result:
    # every check had `timeout_s` from the start of the run: they run side by side
    if job.outcome is None:
        job.join(max(0.0, start + timeout_s - time.perf_counter()))
    if job.outcome is None:
        finding = Finding("error", f"the check did not finish within {timeout_s:g} s",
                          (), "raise runner.check_timeout_s in the policy, or look for a "
                          "hung command (npu-smi, the --python interpreter)")
        return Result.of(job.check, finding, timeout_s * 1000)
    finding, duration_ms = job.outcome
    return Result.of(job.check, finding, duration_ms)
