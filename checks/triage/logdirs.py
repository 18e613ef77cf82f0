"""Where a serving process's CANN logs are: from its environment, HOME and root.

CANN writes a process's application logs under one directory, chosen by
ASCEND_PROCESS_LOG_PATH, else ASCEND_WORK_PATH/log, else $HOME/ascend/log (CANN
environment-variable reference, pages envref_07_0120 and envref_07_0007;
probes.environment.resolve_log_dir): host logs in {debug,run}/plog, device logs collected to
the host in {debug,run}/device-<id> (MindCluster fault-diag guide, "CANN App Logs"). A process
in a container sees that path in its own mount namespace, so it is read under /proc/PID/root.
A MindIE service writes its own logs to $HOME/mindie/log/debug by default (Ascend/MindIE-LLM
docs/zh/faq/faq.md @ 1c18b4b7b907b07025a79f9868c32a0f98c2a8a4): read too when it is there
(MINDIE_LOG_PATH, which moves them per component, is not interpreted).
Without a pid, the serving process is discovered the way the doctor finds its target
(probes.target); with none found, this shell's environment is used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from probes.environment import resolve_log_dir

LOG_SUBDIRS = ("debug/plog", "run/plog")
MINDIE_LOGS = "mindie/log/debug"  # under $HOME
DEVICE_PARENTS = ("debug", "run")


@dataclass(frozen=True)
class LogDirs:
    directories: tuple[Path, ...]  # existing directories, on this machine
    notes: tuple[str, ...]  # where they came from, or why there are none


class TargetError(Exception):
    """The named process cannot be read (gone, or another user's): a one-line message."""


def for_process(pid: int | None, proc_dir: str | None = None) -> LogDirs:
    """The log directories of process `pid`, or of the discovered serving process."""
    from probes.target.proc import ProcError, ProcReader

    reader = ProcReader(proc_dir)
    try:
        if pid is not None:
            info, _ = reader.process(pid)
            env: Mapping[str, str] = reader.environ(pid)
            return from_environment(env, info.files_root, f"process {pid}")
        return _discovered(reader)
    except ProcError as exc:
        raise TargetError(f"--pid {pid}: {exc}") from None


def _discovered(reader: object) -> LogDirs:
    from probes.target.proc import ProcReader
    from probes.target.resolve import from_discovery

    assert isinstance(reader, ProcReader)
    resolved = from_discovery(reader, (), False, dict(os.environ))
    target = resolved.target
    if target.process is None:
        found = from_environment(resolved.env, "/", "this shell (no serving process found)")
    else:
        found = from_environment(resolved.env, target.process.files_root, target.label)
    return LogDirs(found.directories, (f"target: {target.label} ({target.chosen})",
                                       *found.notes))


def from_environment(env: Mapping[str, str], root: str, whose: str) -> LogDirs:
    """The existing CANN log directories that `env` points at, read under `root`."""
    log_dir = resolve_log_dir(env)
    notes = [f"{whose}: {note}" for note in log_dir.notes]
    if not log_dir.path:
        return LogDirs((), (*notes, f"{whose}: no CANN log directory (HOME not set)"))
    base = _under(root, log_dir.path)
    notes.append(f"{whose}: CANN logs in {log_dir.path} (from {log_dir.source})"
                 + (f", read under {root}" if root != "/" else ""))
    found = [base / sub for sub in LOG_SUBDIRS if (base / sub).is_dir()]
    for parent in DEVICE_PARENTS:
        found += sorted(p for p in _children(base / parent) if p.name.startswith("device-"))
    if not found:
        notes.append(f"{whose}: none of {base}/{{debug,run}}/{{plog,device-*}} exists")
    mindie = _mindie_logs(env, root)
    if mindie is not None:
        found.append(mindie)
        notes.append(f"{whose}: MindIE logs in {mindie}")
    return LogDirs(tuple(found), tuple(notes))


def _mindie_logs(env: Mapping[str, str], root: str) -> Path | None:
    home = env.get("HOME")
    if not home or not home.startswith("/"):
        return None
    directory = _under(root, f"{home.rstrip('/')}/{MINDIE_LOGS}")
    return directory if directory.is_dir() else None


def _under(root: str, path: str) -> Path:
    return Path(path) if root in ("", "/") else Path(root) / path.lstrip("/")


def _children(directory: Path) -> list[Path]:
    try:
        return [p for p in directory.iterdir() if p.is_dir()]
    except OSError:
        return []
