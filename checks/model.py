"""What a check is and what it returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from checks.context import Context

Status = Literal["pass", "warn", "fail", "skip", "error"]
STATUSES: tuple[Status, ...] = ("pass", "warn", "fail", "skip", "error")


@dataclass(frozen=True)
class Finding:
    """What a check function concludes; the runner adds identity and timing."""

    status: Status
    summary: str
    evidence: tuple[str, ...] = ()
    remedy: str = ""


def passed(summary: str, *evidence: str) -> Finding:
    return Finding("pass", summary, evidence)


def warned(summary: str, remedy: str, *evidence: str) -> Finding:
    return Finding("warn", summary, evidence, remedy)


def failed(summary: str, remedy: str, *evidence: str) -> Finding:
    return Finding("fail", summary, evidence, remedy)


def skipped(reason: str, *evidence: str) -> Finding:
    return Finding("skip", reason, evidence)


CheckFn = Callable[["Context"], Finding]


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    category: str
    looks_at: str  # one line for `ascend-doctor list`
    fn: CheckFn = field(repr=False, compare=False)
    playbook: str = ""  # defaults to the id

    @property
    def playbook_id(self) -> str:
        return self.playbook or self.id


@dataclass(frozen=True)
class Result:
    id: str
    title: str
    category: str
    status: Status
    summary: str
    evidence: tuple[str, ...]
    remedy: str
    playbook: str
    duration_ms: float
    waiver: str = ""  # the reason when a policy waiver accepted a warn/fail

    @classmethod
    def of(cls, check: Check, finding: Finding, duration_ms: float) -> Result:
        return cls(check.id, check.title, check.category, finding.status, finding.summary,
                   finding.evidence, finding.remedy, check.playbook_id, duration_ms)


def worst(statuses: list[Status]) -> Status:
    """fail > error > warn > pass > skip, for a one-word verdict."""
    order: tuple[Status, ...] = ("fail", "error", "warn", "pass")
    return next((status for status in order if status in statuses), "skip")
