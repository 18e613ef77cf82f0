"""The log settings beside ASCEND_GLOBAL_LOG_LEVEL, parsed (pure): CANN's per-module levels,
MindIE's own logging, and the plog files each process leaves.

- ASCEND_MODULE_LOG_LEVEL (CANN envref_07_0123,
  https://www.hiascend.com/document/detail/en/canncommercial/800/apiref/envvar/envref_07_0123.html):
  `MODULE=LEVEL` pairs joined by `:`, no spaces, levels 0..4 as the global one; any other
  symbol or an unsupported module makes the whole setting ineffective; it overrides
  ASCEND_GLOBAL_LOG_LEVEL for the modules it names, for debug logs only.
- MINDIE_LOG_LEVEL / MINDIE_LOG_PATH (MindIE Service mindie_service0282,
  https://www.hiascend.com/doc_center/source/zh/mindie/20RC2/mindieservice/servicedev/mindie_service0282.html):
  levels CRITICAL, ERROR, WARN, INFO, DEBUG (case-insensitive), `null` turns logging off,
  INFO by default; `component:level` entries separated by `;` set one component; logs under
  MINDIE_LOG_PATH, by default ~/mindie/log. The MindIE-LLM table (Ascend/MindIE-LLM
  docs/zh/user_guide/user_manual/environment_variable.md @ 5b52f59d9e94) agrees on INFO and
  gives the path's default as "mindie/log/debug", the directory the debug logs land in.
- plog files are named `plog-<pid>_<time>.log`, one set per process
  (Ascend/pytorch docs/zh/.../plog_log.md @ 9e73e708ab93; cann/ops-transformer
  docs/zh/debug/op_debug_prof.md @ b2adacfe384b).
- The newest plog files are the ones with the latest `<time>` in their names; their tails are
  what triage reads (checks.triage).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MODULE_LEVELS = {"0": "DEBUG", "1": "INFO", "2": "WARNING", "3": "ERROR", "4": "NULL"}
_MODULE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
MINDIE_LEVELS = ("critical", "error", "warn", "warning", "info", "debug", "null")
MINDIE_DEFAULT_LEVEL = "info"
MINDIE_DEFAULT_PATH = "~/mindie/log"
_PLOG = re.compile(r"^plog-(\d+)_(\d*)")


@dataclass(frozen=True)
class ModuleLevels:
    """ASCEND_MODULE_LOG_LEVEL: the per-module levels in effect (none when it is ignored)."""

    raw: str | None
    levels: tuple[tuple[str, int], ...] = ()
    problem: str = ""  # non-empty: the whole setting is ignored, and why

    def verbose(self) -> tuple[tuple[str, int], ...]:
        """The modules set to DEBUG (0) or INFO (1)."""
        return tuple((name, level) for name, level in self.levels if level in (0, 1))


def parse_module_levels(raw: str | None) -> ModuleLevels:
    if raw is None or raw == "":
        return ModuleLevels(raw)
    levels: list[tuple[str, int]] = []
    for part in raw.split(":"):
        name, sep, level = part.partition("=")
        if not sep or not _MODULE.match(name) or level not in MODULE_LEVELS:
            return ModuleLevels(raw, problem=(
                f"ASCEND_MODULE_LOG_LEVEL={raw!r}: {part!r} is not MODULE=0..4, so CANN "
                "ignores the whole setting and the global level applies"))
        levels.append((name, int(level)))
    return ModuleLevels(raw, tuple(levels))


def describe_module_levels(levels: ModuleLevels) -> str:
    if levels.raw is None or levels.raw == "":
        return "ASCEND_MODULE_LOG_LEVEL unset: every module logs at the global level"
    if levels.problem:
        return levels.problem
    shown = ", ".join(f"{n} {lv} ({MODULE_LEVELS[str(lv)]})" for n, lv in levels.levels)
    return (f"ASCEND_MODULE_LOG_LEVEL={levels.raw}: {shown}, over the global level for these "
            "modules' debug logs (module names are not checked against CANN's log_types.h)")


@dataclass(frozen=True)
class MindieLogging:
    """MINDIE_LOG_LEVEL and MINDIE_LOG_PATH, as MindIE reads them."""

    level: str  # the level for every component (lower case)
    components: tuple[tuple[str, str], ...]  # component -> level
    path: str
    problems: tuple[str, ...] = ()
    level_set: bool = False
    path_set: bool = False

    def debug(self) -> list[str]:
        """Who logs at DEBUG: "every component" and/or component names."""
        who = ["every component"] if self.level == "debug" else []
        return who + [name for name, level in self.components if level == "debug"]


def parse_mindie_logging(level_raw: str | None, path_raw: str | None) -> MindieLogging:
    level, components, problems = MINDIE_DEFAULT_LEVEL, [], []
    for entry in (level_raw or "").split(";"):
        entry = entry.strip().strip('"').strip()
        if not entry:
            continue
        name, sep, value = entry.rpartition(":")
        value = value.strip().lower()
        if value not in MINDIE_LEVELS:
            problems.append(f"MINDIE_LOG_LEVEL entry {entry!r}: not one of "
                            "critical, error, warn, info, debug, null")
        elif sep and name.strip():
            components.append((name.strip().lower(), value))
        else:
            level = value
    return MindieLogging(level, tuple(components), path_raw or MINDIE_DEFAULT_PATH,
                         tuple(problems), bool(level_raw), bool(path_raw))


def describe_mindie(log: MindieLogging) -> str:
    level = (f"MINDIE_LOG_LEVEL: {log.level.upper()} for every component" if log.level_set
             else "MINDIE_LOG_LEVEL unset: MindIE logs at INFO, its default")
    if log.components:
        level += "; " + ", ".join(f"{n} at {lv.upper()}" for n, lv in log.components)
    where = (f"MINDIE_LOG_PATH={log.path}" if log.path_set
             else f"MINDIE_LOG_PATH unset: MindIE logs under {MINDIE_DEFAULT_PATH}")
    return f"{level}; {where}"


@dataclass(frozen=True)
class PlogCount:
    """The plog files of one directory, grouped by the pid in their names."""

    directory: str
    files: int
    pids: int
    newest: str = ""  # the time part of the newest name, as written
    oldest: str = ""


def count_plogs(directory: str, names: Iterable[str]) -> PlogCount:
    by_pid: dict[str, list[str]] = {}
    for name in names:
        match = _PLOG.match(name)
        if match:
            by_pid.setdefault(match.group(1), []).append(match.group(2))
    stamps = sorted(s for group in by_pid.values() for s in group if s)
    files = sum(len(group) for group in by_pid.values())
    return PlogCount(directory, files, len(by_pid), stamps[-1] if stamps else "",
                     stamps[0] if stamps else "")


def describe_plogs(count: PlogCount) -> str:
    span = (f", name times {count.oldest} to {count.newest}" if count.newest else "")
    return (f"{count.directory}: {count.files} plog files from {count.pids} process ids"
            f"{span}")


def newest_plogs(listings: Sequence[tuple[str, Iterable[str]]], count: int) -> list[str]:
    """The paths of the `count` plog files with the latest name times, newest first, from
    (directory, names) listings; names without a time sort oldest."""
    found: list[tuple[str, str]] = []
    for directory, names in listings:
        for name in names:
            match = _PLOG.match(name)
            if match:
                found.append((match.group(2), posixpath.join(directory, name)))
    found.sort(reverse=True)
    return [path for _, path in found[:count]]


def whole_lines(data: bytes, cut: bool) -> tuple[int, int]:
    """(start, end) of the whole lines in a file's tail `data`: after its first newline when
    the tail begins inside the file (`cut`), up to and with its last newline."""
    start = data.find(b"\n") + 1 if cut else 0
    end = data.rfind(b"\n") + 1
    return (0, 0) if cut and start == 0 else (start, end)
