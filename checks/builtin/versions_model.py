"""versions.parity's judgement as it is gathered: one Verdict per pairing, the Judgement that
folds them into one Finding, and the Installed versions of one machine."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from checks.model import Finding, Status, worst

if TYPE_CHECKING:
    from probes.version_files import DriverVersionInfo, FirmwareVersionInfo


@dataclass(frozen=True)
class Verdict:
    """One pairing judged: its status, what was compared, and the fix."""

    status: Status  # pass, warn or fail
    text: str
    remedy: str = ""
    rules: tuple[str, ...] = ()  # the rule that decided a warn or fail (CHECK_RULES)


@dataclass
class Judgement:
    """Verdicts and evidence gathered while judging, folded into one Finding: its rules are
    those of the verdicts its summary names (warns and fails), in the order they were found."""

    verdicts: list[Verdict] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)

    def add(self, status: Status, text: str, remedy: str = "",
            rules: tuple[str, ...] = ()) -> None:
        self.verdicts.append(Verdict(status, text, remedy, rules))

    def finding(self, ok_summary: str) -> Finding:
        status = worst([v.status for v in self.verdicts]) if self.verdicts else "pass"
        problems = [v for v in self.verdicts if v.status != "pass"]
        agreed = [f"ok: {v.text}" for v in self.verdicts if v.status == "pass"]
        summary = "; ".join(v.text for v in problems) if problems else ok_summary
        remedy = " ".join(dict.fromkeys(v.remedy for v in problems if v.remedy))
        rules = tuple(dict.fromkeys(rule for v in problems for rule in v.rules))
        return Finding(status, summary, (*self.evidence, *agreed), remedy, rules)


@dataclass(frozen=True)
class Installed:
    """The versions one machine has; None for what was not found."""

    driver: DriverVersionInfo | None
    firmware: FirmwareVersionInfo | None
    cann: str | None
    toolkit_family: str | None
    nnal: str | None
    mindie: str | None
    packages: Mapping[str, str | None]  # torch, torch_npu, vllm, vllm_ascend
    interpreter: str = ""  # the judged interpreter, as given
    python_error: str = ""  # why its packages could not be read; "" when they were
