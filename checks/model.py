"""What a check is and what it returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from checks.context import Context

Status = Literal["pass", "warn", "fail", "skip", "error"]
STATUSES: tuple[Status, ...] = ("pass", "warn", "fail", "skip", "error")

# inputs a check can declare; without them it is skipped before its module is imported.
# "asked": the check runs only when named in --only (it loads torch: a run that does not name
# it keeps its start-up)
Need = Literal["model", "baseline", "endpoint", "asked"]
NO_MODEL = "no --model given"
NO_BASELINE = "no --baseline FILE given"
NO_ENDPOINT = "no --endpoint URL given"


def no_model(ctx: Context) -> str:
    """Why no model is judged: none named, or the one the target's command line names was not
    found (so "no --model given" alone would hide the target's mistake)."""
    named = ctx.target.serving.model
    if named is None:
        return NO_MODEL
    return (f"{NO_MODEL}, and the target's model {named.value} ({named.source}) is neither a "
            "directory on its machine nor in its Hugging Face cache")


@dataclass(frozen=True)
class Finding:
    """What a check function concludes; the runner adds identity and timing.

    `rules`: the names of the check's rules that decided it (`CHECK_RULES` of its module, the
    "What the check does" section of its playbook); empty for a pass nothing objected to."""

    status: Status
    summary: str
    evidence: tuple[str, ...] = ()
    remedy: str = ""
    rules: tuple[str, ...] = ()


def passed(summary: str, *evidence: str, rules: tuple[str, ...] = ()) -> Finding:
    return Finding("pass", summary, evidence, rules=rules)


def warned(summary: str, remedy: str, *evidence: str, rules: tuple[str, ...] = ()) -> Finding:
    return Finding("warn", summary, evidence, remedy, rules)


def failed(summary: str, remedy: str, *evidence: str, rules: tuple[str, ...] = ()) -> Finding:
    return Finding("fail", summary, evidence, remedy, rules)


def skipped(reason: str, *evidence: str, rules: tuple[str, ...] = ()) -> Finding:
    return Finding("skip", reason, evidence, rules=rules)


CheckFn = Callable[["Context"], Finding]


@dataclass(frozen=True)
class Check:
    """One check: its contract id, where it is listed, and the function that judges."""

    id: str
    title: str
    category: str
    looks_at: str  # one line for `ascend-doctor list`
    fn: CheckFn = field(repr=False, compare=False)
    playbook: str = ""  # defaults to the id
    needs: tuple[Need, ...] = ()
    # Called on the runner's thread before any check thread starts, for work best begun in a
    # process that still has one thread (a child forked to observe the tokenizer).
    prefetch: Callable[[Context], None] | None = field(default=None, repr=False, compare=False)

    @property
    def playbook_id(self) -> str:
        return self.playbook or self.id

    def missing_input(self, ctx: Context) -> str:
        """Why the check cannot apply for want of a declared input; "" when it can run."""
        if "model" in self.needs and ctx.model_dir is None:
            return no_model(ctx)
        if "baseline" in self.needs and ctx.baseline is None:
            return NO_BASELINE
        if "endpoint" in self.needs and ctx.endpoint is None:
            return NO_ENDPOINT
        if "asked" in self.needs and self.id not in ctx.requested:
            return (f"not asked for: it loads torch and traces the model (run it with "
                    f"--only {self.id}, or `ascend-doctor ops`)")
        return ""


@dataclass(frozen=True)
class Result:
    """A check's finding with its identity and duration: one row of every report."""

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
    rules: tuple[str, ...] = ()  # the check's rules that decided it (Finding.rules)

    @classmethod
    def of(cls, check: Check, finding: Finding, duration_ms: float) -> Result:
        """Every value cut to the report's line budget here, once, for every output: a
        recorded file may hold a driver version of megabytes."""
        from probes.textsafe import REPORT_VALUE_CHARS, cut, cut_lines

        return cls(check.id, check.title, check.category, finding.status,
                   cut(finding.summary, REPORT_VALUE_CHARS), cut_lines(finding.evidence),
                   cut(finding.remedy, REPORT_VALUE_CHARS), check.playbook_id, duration_ms,
                   rules=finding.rules)


def worst(statuses: list[Status]) -> Status:
    """fail > error > warn > pass > skip, for a one-word verdict."""
    order: tuple[Status, ...] = ("fail", "error", "warn", "pass")
    return next((status for status in order if status in statuses), "skip")
