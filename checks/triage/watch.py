"""Following a process's logs: which error signatures are new since the last look.

The console calls `poll()` every so often in a worker. The first poll only notes where each
file ends (what was there before is for the triage screen, not an alert); each later poll
reads what was appended since (a file that shrank was rotated or truncated: read from its
start), triages it, and returns the findings whose id it has not seen before. Each poll is
bounded like any triage (`Limits`), so a log that grows by gigabytes between polls costs one
capped read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from checks.triage.engine import Run
from checks.triage.model import Finding, Limits
from checks.triage.reading import plan_directory

POLL_LIMITS = Limits(max_total_bytes=64 * 1024 * 1024, max_files=200)


class LogWatch:
    def __init__(self, directories: Callable[[], Sequence[Path]],
                 limits: Limits = POLL_LIMITS) -> None:
        self._directories = directories
        self._limits = limits
        self._ends: dict[Path, int] = {}
        self._seen: set[str] = set()
        self._primed = False

    def poll(self) -> tuple[Finding, ...]:
        """The causes found in what was appended since the last poll, new ids only."""
        run = Run(self._limits)
        for path in self._files():
            self._read_new(run, path)
        primed, self._primed = self._primed, True
        if not primed:
            return ()
        findings = run.report().findings
        new = tuple(f for f in findings if f.id not in self._seen and f.role == "cause")
        self._seen.update(f.id for f in findings)
        return new

    def _files(self) -> list[Path]:
        files: list[Path] = []
        for directory in self._directories():
            planned, _ = plan_directory(directory, self._limits, None)
            files += [p.path for p in planned]
        return files

    def _read_new(self, run: Run, path: Path) -> None:
        try:
            size = path.stat().st_size
        except OSError:
            return
        start = self._ends.get(path, size if not self._primed else 0)
        self._ends[path] = size
        if size < start:
            start = 0  # it shrank: rotated or truncated, so all of it is new
        if size == start:
            return
        try:
            with path.open("rb") as handle:
                handle.seek(start)
                run.read_stream(str(path), handle, size - start)
        except OSError:
            return
