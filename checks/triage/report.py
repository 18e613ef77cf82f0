"""The ascend-triage/1 JSON document (docs/triage-json.md describes it)."""

from __future__ import annotations

from typing import Any

from checks.triage.model import Evidence, Finding, ReadSummary, TriageReport

SCHEMA = "ascend-triage/1"


def describe_read(read: ReadSummary) -> str:
    """`1 input, 6 lines, 0.9 KB, <first> .. <last>`: what a run read, for both faces."""
    inputs = f"{len(read.files)} input" + ("" if len(read.files) == 1 else "s")
    lines = f"{read.lines:,} line" + ("" if read.lines == 1 else "s")
    size = (f"{read.bytes / 1048576:.1f} MB" if read.bytes >= 1048576
            else f"{read.bytes / 1024:.1f} KB")
    span = f", {read.first_time} .. {read.last_time}" if read.first_time and read.last_time else ""
    return f"{inputs}, {lines}, {size}{span}"


def to_json(report: TriageReport) -> dict[str, Any]:
    return {"schema": SCHEMA, "read": _read(report.read),
            "findings": [_finding(f) for f in report.findings],
            "closest_playbooks": list(report.closest_playbooks)}


def _read(read: ReadSummary) -> dict[str, Any]:
    return {"files": list(read.files), "lines": read.lines, "bytes": read.bytes,
            "first_time": read.first_time or None, "last_time": read.last_time or None,
            "skipped": [{"path": s.path, "reason": s.reason} for s in read.skipped],
            "notes": list(read.notes)}


def _finding(finding: Finding) -> dict[str, Any]:
    return {"id": finding.id, "title": finding.title, "playbook": finding.playbook,
            "cause": finding.cause, "fix": finding.fix, "sources": list(finding.sources),
            "evidence": [_evidence(e) for e in finding.evidence],
            "context": list(finding.context), "count": finding.count,
            "component": finding.component, "role": finding.role, "known": finding.known}


def _evidence(evidence: Evidence) -> dict[str, Any]:
    return {"file": evidence.file, "line": evidence.line, "text": evidence.text}
