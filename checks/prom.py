"""`--prometheus FILE`: the results for node_exporter's textfile collector.

One gauge per check, `ascend_doctor_check_status{id, category}`, with the status as a number
ordered by severity, so `> 1` alerts on warnings and `>= 3` on failures:

    pass 0, skip 1, warn 2, fail 3, error 4

plus `ascend_doctor_checks{status}` (how many checks ended in each status, all five always
present), `ascend_doctor_exit_code`, `ascend_doctor_run_duration_seconds` and
`ascend_doctor_last_run_timestamp_seconds` (alert when a host stops reporting). A waived
result keeps its real status here (`waived="true"` says so): alert rules decide.

The file is written to a temporary name in the same directory and renamed over the target,
so the collector never reads half a file (node_exporter's textfile collector documentation).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from checks.errors import UsageError
from checks.model import STATUSES, Status
from checks.runner import Run

STATUS_VALUE: dict[Status, int] = {"pass": 0, "skip": 1, "warn": 2, "fail": 3, "error": 4}


def _label(value: str) -> str:
    # the exposition format escapes exactly these three in label values
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def to_prometheus(run: Run, now_s: float | None = None) -> str:
    """The text exposition (format 0.0.4) of one doctor run."""
    stamp = time.time() if now_s is None else now_s
    lines = [
        "# HELP ascend_doctor_check_status Result of one ascend-doctor check: "
        "0 pass, 1 skip, 2 warn, 3 fail, 4 error.",
        "# TYPE ascend_doctor_check_status gauge",
    ]
    for result in run.results:
        waived = ',waived="true"' if result.waiver else ""
        lines.append(f'ascend_doctor_check_status{{id="{_label(result.id)}",'
                     f'category="{_label(result.category)}"{waived}}} '
                     f"{STATUS_VALUE[result.status]}")
    counts = run.counts()
    lines += ["# HELP ascend_doctor_checks Number of checks that ended in each status.",
              "# TYPE ascend_doctor_checks gauge"]
    lines += [f'ascend_doctor_checks{{status="{s}"}} {counts[s]}' for s in STATUSES]
    lines += [
        "# HELP ascend_doctor_exit_code Exit code of the run: 0 pass, 1 warnings, 2 failures.",
        "# TYPE ascend_doctor_exit_code gauge",
        f"ascend_doctor_exit_code {run.exit_code()}",
        "# HELP ascend_doctor_run_duration_seconds How long the checks took.",
        "# TYPE ascend_doctor_run_duration_seconds gauge",
        f"ascend_doctor_run_duration_seconds {run.duration_ms / 1000:.3f}",
        "# HELP ascend_doctor_last_run_timestamp_seconds When the run finished (Unix time).",
        "# TYPE ascend_doctor_last_run_timestamp_seconds gauge",
        f"ascend_doctor_last_run_timestamp_seconds {stamp:.3f}",
    ]
    return "\n".join(lines) + "\n"


def write_atomic(path: Path, text: str, option: str) -> None:
    """Write via a temporary file in the same directory and os.replace; one-line errors."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise UsageError(f"{option} {path}: cannot write ({exc.strerror or exc}); "
                         "check that the directory exists and is writable") from None


def write_prometheus(path: Path, text: str) -> None:
    write_atomic(path, text, "--prometheus")
