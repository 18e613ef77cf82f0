"""What triage reads and finds, as frozen values: the caps, the read summary, the findings."""

from __future__ import annotations

from dataclasses import dataclass, field

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Limits:
    """The caps that keep a read bounded whatever the input (a 1 GB line, a gzip bomb, a
    directory of a million files): what is past a cap is not read, and the summary says so."""

    max_line_bytes: int = 64 * KIB  # a longer line is cut here (the rest of it skipped)
    max_total_bytes: int = 2048 * MIB  # over every input, decompressed
    max_files: int = 2000  # files read from directories, newest first
    max_walk_entries: int = 200_000  # directory entries looked at while walking
    chunk_bytes: int = 4 * MIB  # read and matched this much at a time
    evidence_per_finding: int = 5
    context_lines: int = 2  # before and after the first hit


@dataclass(frozen=True)
class Skipped:
    """An input not read, or not read whole, and why (one line)."""

    path: str
    reason: str


@dataclass(frozen=True)
class ReadSummary:
    files: tuple[str, ...] = ()
    lines: int = 0
    bytes: int = 0
    first_time: str = ""  # the earliest timestamp seen at the start of a file, when any
    last_time: str = ""  # the latest seen at the end of a file
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()  # where the inputs came from (a target's log directories)


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int  # 1-based
    text: str  # neutralised: control characters shown as escapes, one line


@dataclass(frozen=True)
class Finding:
    id: str  # a signature id or an error code
    title: str
    playbook: str
    cause: str
    fix: str
    sources: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    context: tuple[str, ...] = ()  # a few lines around the first hit, neutralised
    count: int = 1  # hits merged into this finding
    component: str = ""
    role: str = "cause"  # cause | consequence
    known: bool = True  # False: an error code the data does not explain


@dataclass(frozen=True)
class TriageReport:
    read: ReadSummary
    findings: tuple[Finding, ...] = ()
    closest_playbooks: tuple[str, ...] = field(default=())
