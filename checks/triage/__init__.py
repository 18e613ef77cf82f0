"""Triage: read the logs on-call has (pasted text, service logs, CANN plogs and device logs,
.gz files, directories, a target's log directories) in bounded memory, recognise the field's
log signatures and error codes (checks/data/signatures.yaml, error_codes.yaml), and rank what
was found, the earliest cause first, each finding citing its lines.

model.py     the frozen results: TriageReport, ReadSummary, Finding, Evidence; Limits
reading.py   streaming reads: blocks of whole lines, caps, gzip, binary probe, directory walk
archive.py   a .tar.gz (asys collect --tar=True) read member by member, bounded first
literals.py  the literal prefilter that lets one pass serve every pattern
matching.py  one block -> hits per signature and error code (Tally)
ranking.py   hits -> findings: combined evidence, refinements, codes, order
engine.py    one run over the inputs
logdirs.py   a process's CANN log directories (--pid)
watch.py     following logs: the signatures new since the last look (the console's alert)
report.py    the ascend-triage/1 JSON document
cli.py       `ascend-doctor triage`
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from checks.triage.engine import Run
from checks.triage.model import Evidence, Finding, Limits, ReadSummary, Skipped, TriageReport
from checks.triage.report import SCHEMA, describe_read, to_json

__all__ = [
    "SCHEMA",
    "Evidence",
    "Finding",
    "Limits",
    "ReadSummary",
    "Skipped",
    "TriageReport",
    "describe_read",
    "to_json",
    "triage_logs",
    "triage_paths",
    "triage_text",
]


def triage_text(text: str, name: str = "<paste>", limits: Limits | None = None) -> TriageReport:
    """Triage of pasted text (one input named `name`)."""
    run = Run(limits or Limits())
    run.read_stream(name, io.BytesIO(text.encode("utf-8", errors="replace")))
    return run.report()


def triage_paths(paths: Sequence[Path], since_s: float | None = None,
                 limits: Limits | None = None) -> TriageReport:
    """Triage of files (.gz decompressed) and directories (their newest files within
    `since_s` seconds), in the order given."""
    run = Run(limits or Limits())
    for path in paths:
        path = Path(path)
        if path.is_dir():
            run.read_directory(path, since_s)
        else:
            run.read_path(path)
    return run.report()


def triage_logs(pid: int | None = None, since_s: float | None = None,
                limits: Limits | None = None) -> TriageReport:
    """Triage of a process's CANN log directories (checks.triage.logdirs): process `pid`, or
    the serving process found the way the doctor finds its target. Raises
    logdirs.TargetError for a process that cannot be read."""
    from checks.triage import logdirs

    found = logdirs.for_process(pid)
    run = Run(limits or Limits())
    run.notes.extend(found.notes)
    for directory in found.directories:
        run.read_directory(directory, since_s)
    return run.report()
