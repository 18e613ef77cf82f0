"""logging.level: ASCEND_GLOBAL_LOG_LEVEL with its real meaning, the per-module levels over
it, MindIE's own logging, and where logs go.

CANN caps the logs per process (at most ASCEND_HOST_LOG_FILE_NUM files of 20 MB in plog/ and
in device-<id>/, the oldest deleted: hiascend envref_07_0126); each process writes its own
`plog-<pid>_...` files, so many processes (restarts, many workers) leave many sets. The check
therefore counts the plog files per process id, measures the resolved log directory (bounded
walk) and the free space of the file system holding it. Every rank of a multi-process server
is named, and a rank that logs differently is flagged (probes.target.ranks). The tails of
the newest plog files go through triage (checks.triage, the signatures of
checks/data/signatures.yaml): a known error signature there is a warning naming its playbook.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.builtin.log_settings import (
    count_plogs,
    describe_mindie,
    describe_module_levels,
    describe_plogs,
    newest_plogs,
    parse_mindie_logging,
    parse_module_levels,
    whole_lines,
)
from checks.context import Context
from checks.model import Finding, passed, warned
from probes.environment import LOG_FILE_MAX_MB, LOG_LEVEL_NAMES, LogDir, LogFileNum
from probes.errors import HostError, NotRecorded
from probes.host import Host

if TYPE_CHECKING:
    from checks.triage import Finding as TriageFinding

MIB = 1024 * 1024

# The check's rules, by name -> the statuses they give; its playbook lists the same rules under
# "What the check does" (tests/checks/test_check_rules.py); each tags the findings it decides.
CHECK_RULES: dict[str, dict[str, str]] = {
    "logging.level": {
        "level-illegal": "warn",  # probes.environment.parse_log_level
        "verbose-in-production": "warn",  # _verbose_problem, policy logging.production
        "print-to-stdout": "warn",  # ASCEND_SLOG_PRINT_TO_STDOUT=1
        "file-num-illegal": "warn",  # probes.environment.parse_log_file_num
        "log-dir-not-a-directory": "warn",  # _size_part
        "log-dir-too-large": "warn",  # _size_part, policy logging.max_log_dir_mb
        "low-free-disk": "warn",  # _free_part, policy logging.min_free_disk_mb
        "module-level-illegal": "warn",  # log_settings.parse_module_levels
        "module-verbose-in-production": "warn",  # _module_part, policy logging.production
        "mindie-level-illegal": "warn",  # log_settings.parse_mindie_logging
        "mindie-debug": "warn",  # _mindie_part
        "many-process-logs": "warn",  # _plog_part, MAX_PLOG_PIDS
        "ranks-disagree": "warn",  # _ranks_part
        "known-error-in-logs": "warn",  # _triage_part
    },
}
# More process ids than this with plog files in one directory is a warning: a project
# default (not a vendor figure), well above the processes one server starts per chip.
MAX_PLOG_PIDS = 64
# Triage reads the last TAIL_BYTES of each of the NEWEST_PLOG_FILES newest plog files: project
# defaults (not vendor figures) that keep the read bounded (3 x 256 KiB) while holding the
# lines a crash writes last; a finding cites at most TRIAGE_FINDINGS_SHOWN signatures.
NEWEST_PLOG_FILES = 3
TAIL_BYTES = 256 * 1024
TRIAGE_FINDINGS_SHOWN = 3
# The variables that decide where and how much a process logs (ranks that differ on one)
LOG_VARIABLES = ("ASCEND_GLOBAL_LOG_LEVEL", "ASCEND_MODULE_LOG_LEVEL",
                 "ASCEND_SLOG_PRINT_TO_STDOUT", "ASCEND_PROCESS_LOG_PATH", "ASCEND_WORK_PATH",
                 "ASCEND_HOST_LOG_FILE_NUM", "MINDIE_LOG_LEVEL", "MINDIE_LOG_PATH")
# The walk of the log directory stops after this many entries or below this depth.
MAX_ENTRIES = 20000
MAX_DEPTH = 8

LEVEL_REMEDY = ("for production set ASCEND_GLOBAL_LOG_LEVEL=3 (ERROR, the default) or 2 "
                "(WARNING) and unset ASCEND_SLOG_PRINT_TO_STDOUT")
FILE_NUM_REMEDY = "set ASCEND_HOST_LOG_FILE_NUM to an integer 1..1000, or unset it (10)"
DISK_REMEDY = ("CANN caps the files of each process, not of the directory: delete or archive "
               "old plog/device logs (e.g. `find DIR -name '*.log' -mtime +7 -delete`), or "
               "point ASCEND_PROCESS_LOG_PATH at a file system with room")
PLOG_REMEDY = ("many process ids left plog files: look for a restart loop (the service "
               "manager's restart count, `journalctl -u SERVICE`) and archive the old files")
MINDIE_REMEDY = "set MINDIE_LOG_LEVEL to info (MindIE's default) or higher for production"
RANKS_REMEDY = ("start every process of the server with the same log settings (they inherit "
                "the launcher's environment unless something sets them per rank)")
# The vendor's words (envref_07_0122) are only that DEBUG may cost performance through log
# volume; "production runs at WARNING or above" is this project's default (policy
# logging.production), and the summary says so.
PRODUCTION_FLOOR = ("more verbose than WARNING, the doctor's floor for production (policy "
                    "logging.production: a project default, not a vendor rule)")


def logging_level(ctx: Context) -> Finding:
    env = facts.environment(ctx)
    level = env.log_level
    name = LOG_LEVEL_NAMES[level.level]
    shown = "ASCEND_GLOBAL_LOG_LEVEL unset" if level.raw is None else \
        f"ASCEND_GLOBAL_LOG_LEVEL={level.raw}" + (" (empty)" if level.raw == "" else "")
    log_dir = env.log_dir
    where = (f"log directory {log_dir.path} (from {log_dir.source})" if log_dir.path
             else "log directory unknown")
    production = bool(ctx.policy.get("logging", "production"))
    parts = [_module_part(ctx, production), _mindie_part(ctx), _plog_part(ctx, log_dir),
             _ranks_part(ctx), log_disk(ctx, log_dir)]
    evidence = (f"{shown}: level {level.level} = {name}", where, *log_dir.notes,
                describe_file_cap(env.log_file_num),
                *(line for part in parts for line in part.evidence))
    level_problems = list(level.problems)
    rules = ["level-illegal"] if level.problems else []
    if production and level.level in (0, 1):
        level_problems.append(_verbose_problem(level.level, name))
        rules.append("verbose-in-production")
    if ctx.host.env.get("ASCEND_SLOG_PRINT_TO_STDOUT") == "1":
        level_problems.append("ASCEND_SLOG_PRINT_TO_STDOUT=1 prints host logs to stdout")
        rules.append("print-to-stdout")
    if env.log_file_num.problems:
        rules.append("file-num-illegal")
    extra = [p for part in parts for p in part.problems]
    problems = [*level_problems, *env.log_file_num.problems, *extra]
    unknown = "; ".join(part.unknown for part in parts if part.unknown)
    if problems:
        remedy = "; ".join(([LEVEL_REMEDY] if level_problems else []) +
                           ([FILE_NUM_REMEDY] if env.log_file_num.problems else []) +
                           [part.remedy for part in parts if part.problems and part.remedy])
        return facts.about_target(
            ctx, warned(_with_unknown("; ".join(problems), unknown), remedy, *evidence,
                        rules=(*rules, *(r for part in parts for r in part.rules))))
    summary = f"log level {level.level} ({name}); {where}"
    return facts.about_target(ctx, passed(_with_unknown(summary, unknown), *evidence))


def _module_part(ctx: Context, production: bool) -> LogDisk:
    levels = parse_module_levels(ctx.host.env.get("ASCEND_MODULE_LOG_LEVEL"))
    line = describe_module_levels(levels)
    if levels.problem:
        return LogDisk((levels.problem,), (line,), rules=("module-level-illegal",),
                       remedy="write ASCEND_MODULE_LOG_LEVEL as MODULE=LEVEL pairs joined "
                       "by `:` (e.g. RUNTIME=3:GE=3), or unset it")
    verbose = levels.verbose()
    if production and verbose:
        shown = ", ".join(f"{n}={lv} ({LOG_LEVEL_NAMES[lv]})" for n, lv in verbose)
        problem = (f"ASCEND_MODULE_LOG_LEVEL sets {shown}, {PRODUCTION_FLOOR}, whatever "
                   "the global level says")
        return LogDisk((problem,), (line,), rules=("module-verbose-in-production",),
                       remedy="unset ASCEND_MODULE_LOG_LEVEL (or raise those modules to 2 "
                       "or 3) for production")
    return LogDisk(evidence=(line,))


def _mindie_part(ctx: Context) -> LogDisk:
    env = ctx.host.env
    if ctx.target.serving.server != "mindie" and not any(
            k in env for k in ("MINDIE_LOG_LEVEL", "MINDIE_LOG_PATH")):
        return LogDisk()
    log = parse_mindie_logging(env.get("MINDIE_LOG_LEVEL"), env.get("MINDIE_LOG_PATH"))
    line = describe_mindie(log)
    if log.problems:
        return LogDisk(log.problems, (line,), rules=("mindie-level-illegal",),
                       remedy=MINDIE_REMEDY)
    debug = log.debug()
    if debug:
        problem = f"MINDIE_LOG_LEVEL: {', '.join(debug)} at DEBUG"
        return LogDisk((problem,), (line,), rules=("mindie-debug",), remedy=MINDIE_REMEDY)
    return LogDisk(evidence=(line,))


def _plog_part(ctx: Context, log_dir: LogDir) -> LogDisk:
    if not log_dir.path or not log_dir.path.startswith("/"):
        return LogDisk()
    problems: list[str] = []
    evidence: list[str] = []
    listings: list[tuple[str, list[str]]] = []
    for sub in ("debug/plog", "run/plog"):
        directory = posixpath.join(log_dir.path, sub)
        try:
            names = ctx.host.list_dir(directory)
        except NotRecorded:
            evidence.append(f"{directory}: not recorded")
            continue
        except HostError:
            continue  # not there: nothing written yet
        listings.append((directory, names))
        count = count_plogs(directory, names)
        evidence.append(describe_plogs(count))
        if count.pids > MAX_PLOG_PIDS:
            problems.append(f"{count.pids} process ids left plog files in {directory} "
                            f"(over {MAX_PLOG_PIDS}, a project default): a restart loop "
                            "or many short-lived workers")
    plogs = LogDisk(tuple(problems), tuple(evidence),
                    rules=("many-process-logs",) if problems else (), remedy=PLOG_REMEDY)
    return _merge(plogs, _triage_part(ctx, newest_plogs(listings, NEWEST_PLOG_FILES)))


def _merge(first: LogDisk, second: LogDisk) -> LogDisk:
    """Two parts as one: problems, evidence and rules in order, the remedies of the parts
    with problems."""
    remedies = [p.remedy for p in (first, second) if p.problems and p.remedy]
    return LogDisk(first.problems + second.problems, first.evidence + second.evidence,
                   "; ".join(u for u in (first.unknown, second.unknown) if u),
                   first.rules + second.rules, "; ".join(remedies))


def _read_tail(host: Host, path: str) -> str | None:
    """The whole lines of the last TAIL_BYTES of `path`; None when it cannot be read.
    NotRecorded propagates. A file no longer than TAIL_BYTES is read whole. In a longer one
    the line boundaries are found through the unrecorded host (as the bundle's tails are): a
    recording holds whole lines only, never the half of a line a tail's start cut, whose
    secret the bundle's redaction would no longer recognise."""
    try:
        size = host.file_size(path)
        if size <= TAIL_BYTES:
            return host.read_bytes(path, 0, TAIL_BYTES).decode("utf-8", "replace")
        offset = size - TAIL_BYTES
        peek: Host = getattr(host, "inner", host)
        start, end = whole_lines(peek.read_bytes(path, offset, TAIL_BYTES), True)
        if end <= start:
            return ""
        return host.read_bytes(path, offset + start, end - start).decode("utf-8", "replace")
    except NotRecorded:
        raise
    except HostError:
        return None


def _triage_part(ctx: Context, paths: list[str]) -> LogDisk:
    """The newest plog files' tails through triage: a known signature is a warning."""
    if not paths:
        return LogDisk()
    # triage's signatures are compiled only where there are logs to read (start-up)
    from checks.triage import triage_text

    findings: list[TriageFinding] = []
    read: list[str] = []
    for path in paths:
        try:
            text = _read_tail(ctx.host, path)
        except NotRecorded:
            return LogDisk(evidence=(f"{path}: not recorded; the newest logs not triaged",))
        if text is None:
            continue
        read.append(posixpath.basename(path))
        findings.extend(f for f in triage_text(text, path).findings if f.known)
    shown = f"the last {TAIL_BYTES // 1024} KiB of {', '.join(read) or 'no readable file'}"
    if not findings:
        return LogDisk(evidence=(f"triage of the newest plog files ({shown}): no known "
                                 "error signature",))
    named = list({f.id: f for f in findings}.values())[:TRIAGE_FINDINGS_SHOWN]
    lines = tuple(f"triage: {f.id} ({f.title}) at {f.evidence[0].file}:{f.evidence[0].line}"
                  f"; playbook {f.playbook}" if f.evidence else
                  f"triage: {f.id} ({f.title}); playbook {f.playbook}" for f in named)
    books = ", ".join(dict.fromkeys(f.playbook for f in named))
    problem = (f"the newest plog files hold known error signatures: "
               f"{', '.join(f.id for f in named)} (open playbook {books})")
    remedy = (f"read `ascend-doctor explain {named[0].playbook}`; `ascend-doctor triage "
              "--pid PID` ranks every finding of the process's logs")
    return LogDisk((problem,), (f"triage of the newest plog files ({shown})", *lines),
                   rules=("known-error-in-logs",), remedy=remedy)


def _ranks_part(ctx: Context) -> LogDisk:
    odd = [r for r in ctx.target.ranks[1:] if set(r.differs) & set(LOG_VARIABLES)]
    if not odd:
        return LogDisk()
    head = ctx.target.ranks[0].pid
    lines = tuple(f"ranks disagree: process {r.pid} ({r.role}) differs from process {head} "
                  f"on {', '.join(sorted(set(r.differs) & set(LOG_VARIABLES)))}"
                  for r in odd)
    return LogDisk(lines, rules=("ranks-disagree",), remedy=RANKS_REMEDY)


def _verbose_problem(level: int, name: str) -> str:
    cost = ("; the vendor notes DEBUG can cost performance through its log volume"
            if level == 0 else "")
    return f"level {level} ({name}) is {PRODUCTION_FLOOR}{cost}"


def describe_file_cap(num: LogFileNum) -> str:
    """What CANN keeps per process, and what it does not clean (envref_07_0126)."""
    shown = f"ASCEND_HOST_LOG_FILE_NUM={num.raw}" if num.raw else "ASCEND_HOST_LOG_FILE_NUM unset"
    return (f"{shown}: each process keeps at most {num.count} files of {LOG_FILE_MAX_MB} MB in "
            "plog/ and in each device-<id>/ (its oldest are deleted); the cap is per process, "
            "not per directory")


def _with_unknown(summary: str, unknown: str) -> str:
    """A part that could not be measured is said in the summary, never passed over."""
    return f"{summary}; {unknown}" if unknown else summary


# -- the log directory on disk --------------------------------------------------------------


@dataclass(frozen=True)
class DirSize:
    """What a bounded walk of a directory found."""

    total_bytes: int
    files: int
    stopped: str = ""  # why the walk stopped early, e.g. "stopped after 20000 files"
    unreadable: int = 0  # entries that could not be listed or measured

    @property
    def complete(self) -> bool:
        return not self.stopped and not self.unreadable


@dataclass(frozen=True)
class LogDisk:
    """The disk side of the check: problems to warn about, and what was (not) measured."""

    problems: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    unknown: str = ""  # non-empty when a part could not be measured: said in the summary
    rules: tuple[str, ...] = ()  # the rules of `problems` (CHECK_RULES)
    remedy: str = ""  # what to do about `problems`


def log_disk(ctx: Context, log_dir: LogDir) -> LogDisk:
    path = log_dir.path
    if path is None:
        return LogDisk(evidence=("log directory unknown: size and free space not measured",),
                       unknown="log disk usage not measured")
    if not path.startswith("/"):
        return LogDisk(evidence=(f"log directory {path} is relative to the process's working "
                                 "directory: size and free space not measured",),
                       unknown="log disk usage not measured")
    min_free_mb = int(ctx.policy.get("logging", "min_free_disk_mb"))
    max_dir_mb = int(ctx.policy.get("logging", "max_log_dir_mb"))
    size = _size_part(ctx.host, path, max_dir_mb)
    free = _free_part(ctx.host, path, min_free_mb)
    return LogDisk(
        problems=size.problems + free.problems,
        evidence=size.evidence + free.evidence,
        unknown="; ".join(part for part in (size.unknown, free.unknown) if part),
        rules=size.rules + free.rules, remedy=DISK_REMEDY,
    )


def _size_part(host: Host, path: str, max_dir_mb: int) -> LogDisk:
    try:
        kind = host.kind(path)
        if kind == "missing":
            return LogDisk(evidence=(f"log directory {path} does not exist yet",))
        if kind != "dir":
            return LogDisk(problems=(f"log directory {path} is a {kind}, not a directory",),
                           rules=("log-dir-not-a-directory",))
        size = measure_dir(host, path, MAX_ENTRIES, MAX_DEPTH)
    except NotRecorded:
        return LogDisk(evidence=(f"log directory {path} size: not recorded",),
                       unknown="log directory size not recorded")
    except HostError as exc:
        return LogDisk(evidence=(f"log directory size not measured: {exc}",),
                       unknown="log directory size not measured")
    shown = describe_size(size)
    evidence = f"log directory {path} holds {shown} in {size.files} files"
    if size.total_bytes > max_dir_mb * MIB:
        problem = (f"log directory {path} holds {shown}, over logging.max_log_dir_mb="
                   f"{max_dir_mb} MB")
        return LogDisk(problems=(problem,), evidence=(evidence,), rules=("log-dir-too-large",))
    return LogDisk(evidence=(evidence,))


def _free_part(host: Host, path: str, min_free_mb: int) -> LogDisk:
    try:
        measured = nearest_existing(host, path)
        usage = host.disk_usage(measured)
    except NotRecorded:
        return LogDisk(evidence=(f"free space for {path}: not recorded",),
                       unknown="log file system free space not recorded")
    except HostError as exc:
        return LogDisk(evidence=(f"free space not measured: {exc}",),
                       unknown="log file system free space not measured")
    on = path if measured == path else f"{measured} (nearest existing parent of {path})"
    evidence = (f"{mb(usage.free_bytes)} free of {mb(usage.total_bytes)} on the file system "
                f"holding {on}")
    if usage.free_bytes < min_free_mb * MIB:
        problem = (f"only {mb(usage.free_bytes)} free on the file system holding {on}, below "
                   f"logging.min_free_disk_mb={min_free_mb} MB")
        return LogDisk(problems=(problem,), evidence=(evidence,), rules=("low-free-disk",))
    return LogDisk(evidence=(evidence,))


def nearest_existing(host: Host, path: str) -> str:
    """`path` when something is there, else its nearest parent that exists."""
    current = posixpath.normpath(path)
    while current != "/" and host.kind(current) == "missing":
        current = posixpath.dirname(current)
    return current


def measure_dir(host: Host, path: str, max_entries: int = MAX_ENTRIES,
                max_depth: int = MAX_DEPTH) -> DirSize:
    """Total bytes of the files below `path` (symlinks followed), walking at most
    `max_entries` entries and `max_depth` directory levels. NotRecorded propagates."""
    total = files = seen = unreadable = 0
    too_deep = False
    pending = [(path, 0)]  # directories to list, with their depth below `path`
    while pending:
        directory, depth = pending.pop()
        names = _listing(host, directory)
        if names is None:
            unreadable += 1
            continue
        for name in names:
            if seen >= max_entries:
                return DirSize(total, files, f"stopped after {max_entries} files", unreadable)
            seen += 1
            child = posixpath.join(directory, name)
            kind, size = _entry(host, child)
            if kind == "file":
                files += 1
                total += size
            elif kind == "unreadable":
                unreadable += 1
            elif kind == "dir" and depth + 1 < max_depth:
                pending.append((child, depth + 1))
            elif kind == "dir":
                too_deep = True
    return DirSize(total, files, f"stopped at depth {max_depth}" if too_deep else "", unreadable)


def _listing(host: Host, directory: str) -> list[str] | None:
    try:
        return host.list_dir(directory)
    except NotRecorded:
        raise
    except HostError:
        return None


def _entry(host: Host, path: str) -> tuple[str, int]:
    """(kind, size in bytes for a file, else 0); kind "unreadable" when it cannot be asked."""
    try:
        kind = host.kind(path)
        return kind, host.file_size(path) if kind == "file" else 0
    except NotRecorded:
        raise
    except HostError:
        return "unreadable", 0


def describe_size(size: DirSize) -> str:
    if size.stopped:
        return f"at least {mb(size.total_bytes)} ({size.stopped})"
    if size.unreadable:
        return f"at least {mb(size.total_bytes)} ({size.unreadable} entries unreadable)"
    return mb(size.total_bytes)


def mb(count: int) -> str:
    """Bytes for a person: MB (MiB, as the policy counts them) to one decimal."""
    return f"{count / MIB:,.1f} MB" if count >= MIB // 10 else f"{count} bytes"
