"""`ascend-doctor triage [FILE ...|-] [--pid PID] [--since DURATION] [--json]`.

Exit codes: 0 nothing recognised (the output says what was read and the closest playbooks),
1 something recognised, 3 the input could not be read (no file readable, no log directory).
"""

from __future__ import annotations

import io
import json
import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from checks.errors import EXIT_OK, EXIT_USAGE, EXIT_WARN, UsageError
from checks.triage.engine import Run
from checks.triage.model import Finding, TriageReport
from checks.triage.report import describe_read, to_json
from probes.textsafe import json_text, one_line

EXIT_RECOGNISED = EXIT_WARN  # 1
SHOWN_IN_FULL = 5
WIDTH = 100
BRIEF_CHARS = 280
CONTEXT_CHARS = 160
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class TriageOptions:
    inputs: tuple[str, ...] = ()  # files, directories, "-" for stdin
    pid: int | None = None
    since_s: float | None = None
    json: bool = False


def parse_duration(text: str) -> float:
    """`90`, `90s`, `30m`, `2h`, `1d` -> seconds. Raises UsageError."""
    found = _DURATION.match(text)
    if not found or float(found.group(1)) <= 0:
        raise UsageError(f"--since {text!r}: give a duration such as 90s, 30m, 2h or 1d")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def run(options: TriageOptions, stdin: TextIO | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    report = (_read_inputs(options, stdin or sys.stdin) if options.inputs
              else _read_target(options))
    if not report.read.files:
        print(_unreadable(report), file=sys.stderr)
        return EXIT_USAGE
    if options.json:

        print(json_text(json.dumps(to_json(report), indent=2, ensure_ascii=False)), file=out)
    else:
        print(render(report), file=out)
    return EXIT_RECOGNISED if report.findings else EXIT_OK


def _read_target(options: TriageOptions) -> TriageReport:
    from checks.triage import logdirs, triage_logs

    try:
        return triage_logs(options.pid, options.since_s)
    except logdirs.TargetError as exc:
        raise UsageError(str(exc)) from None


def _read_inputs(options: TriageOptions, stdin: TextIO) -> TriageReport:

    if options.pid is not None:
        raise UsageError("--pid reads the process's log directories: give files or --pid, "
                         "not both")
    engine = Run()
    for item in options.inputs:
        if item == "-":
            if stdin.isatty():  # a newcomer's `triage -` would otherwise wait without a word
                print("reading a paste from the terminal: paste the log, then press Ctrl+D on "
                      "a new line (Ctrl+C gives up)", file=sys.stderr)
            engine.read_stream("<stdin>", stdin.buffer if hasattr(stdin, "buffer") else
                               _encoded(stdin))
        elif Path(item).is_dir():
            engine.read_directory(Path(item), options.since_s)
        else:
            engine.read_path(Path(item))
    return engine.report()


def _encoded(stream: TextIO) -> BinaryIO:
    """A text stream without a byte buffer (a test's StringIO) as bytes."""
    return io.BytesIO(stream.read().encode("utf-8", errors="replace"))


def _unreadable(report: TriageReport) -> str:

    why = [f"{s.path}: {s.reason}" for s in report.read.skipped] or list(report.read.notes)
    detail = "; ".join(why[:3]) or "no input"
    return one_line(f"ascend-doctor triage: nothing could be read ({detail}); give log files, "
                    "a directory, - for stdin, or --pid PID")


# -- the terminal view ---------------------------------------------------------------------


def render(report: TriageReport) -> str:
    """The terminal view; every path, note and line in it has passed the neutraliser."""

    lines = [_read_line(report)]
    lines += [one_line(f"  skipped {s.path}: {s.reason}") for s in report.read.skipped[:10]]
    if len(report.read.skipped) > 10:
        lines.append(f"  ... and {len(report.read.skipped) - 10} more skipped")
    lines += [one_line(f"  note: {n}") for n in report.read.notes[:10]]
    if not report.findings:
        closest = ", ".join(report.closest_playbooks) or "none"
        lines += ["", f"Nothing recognised. Closest playbooks: {closest} "
                  "(`ascend-doctor explain ID`)."]
        return "\n".join(lines)
    lines.append("")
    for rank, finding in enumerate(report.findings, 1):
        full = rank <= SHOWN_IN_FULL and finding.role == "cause"
        lines += _full(rank, finding) if full else [_short(rank, finding)]
    if lines[-1]:
        lines.append("")
    lines.append("Every detail: --json; a playbook: ascend-doctor explain ID.")
    return "\n".join(lines)


def _read_line(report: TriageReport) -> str:
    return f"Read {describe_read(report.read)}."


def _full(rank: int, finding: Finding) -> list[str]:
    times = f", {finding.count}x" if finding.count > 1 else ""
    out = [f"{rank}. {finding.title} ({finding.id}{times})"]
    out += _wrapped("cause", _brief(finding.cause))
    out += _wrapped("fix", _brief(finding.fix))
    out.append(f"   playbook: {finding.playbook} (ascend-doctor explain {finding.playbook})")
    out.append(f"   at: {_places(finding)}")
    out += [f"     | {_cut(line, CONTEXT_CHARS)}" for line in finding.context]
    out.append("")
    return out


def _places(finding: Finding) -> str:
    """file:line of the first hits, the file named once: `plog.log:2, 3, 4`."""
    by_file: dict[str, list[int]] = {}
    for evidence in finding.evidence[:5]:
        by_file.setdefault(evidence.file, []).append(evidence.line)
    more = f" (+{finding.count - len(finding.evidence)} more)" if finding.count > 5 else ""
    return "; ".join(f"{name}:{', '.join(str(n) for n in sorted(lines))}"
                     for name, lines in by_file.items()) + more


def _brief(text: str) -> str:
    """The first sentences of `text`, up to BRIEF_CHARS (the JSON holds all of it)."""
    if len(text) <= BRIEF_CHARS:
        return text
    end = text.rfind(". ", 0, BRIEF_CHARS)
    return text[: end + 1] if end > 0 else _cut(text, BRIEF_CHARS)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(rank: int, finding: Finding) -> str:
    first = finding.evidence[0] if finding.evidence else None
    where = f" at {first.file}:{first.line}" if first else ""
    times = f", {finding.count}x" if finding.count > 1 else ""
    return f"{rank}. {finding.title} ({finding.id}{times}){where}"


def _wrapped(label: str, text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=f"   {label}: ",
                         subsequent_indent=" " * (len(label) + 5)) or [f"   {label}:"]


def options_from(inputs: Sequence[str], pid: int | None, since: str | None,
                 as_json: bool) -> TriageOptions:
    return TriageOptions(tuple(inputs), pid, parse_duration(since) if since else None, as_json)
