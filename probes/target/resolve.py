"""From a pid, an environment file or nothing at all to a Target and its environment.

Reading a process: status first (it says whether the process is there), then the command
line, environment, interpreter, working directory and mount namespace. A process that goes
away between those reads is a ProcGone naming it; a refused environment is, for a process
that was named (`--pid`), a ProcDenied, and for one that was discovered, a Target whose
`environment_error` says what to run instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from probes.live import LiveHost
from probes.target.cmdline import SecretName, display, masked
from probes.target.discovery import discover, npus_of
from probes.target.model import Target, shell_target
from probes.target.proc import EnvironBlank, ProcDenied, ProcError, ProcGone, ProcReader

if TYPE_CHECKING:
    from probes.target.parts import Candidate, NpuUse


@dataclass(frozen=True)
class Resolved:
    """The target and the environment its checks judge (empty when it could not be read)."""

    target: Target
    env: Mapping[str, str]


def _denied_hint(pid: int, uid: int | None, euid: int | None = None) -> str:
    """What to do about a refused /proc/PID/environ. Reading it takes a ptrace access check
    (proc(5), /proc/pid/environ; ptrace(2), "Ptrace access mode checking"): an ordinary user
    passes it for their own processes, root only while it holds CAP_SYS_PTRACE and no security
    module (Yama, SELinux, AppArmor) refuses."""
    if (os.geteuid() if euid is None else euid) == 0:
        return (f"the doctor runs as root but may not trace process {pid}: it lacks "
                "CAP_SYS_PTRACE (a container or `capsh`/`setpriv` dropped it), or a security "
                "module refuses (Yama ptrace_scope, SELinux, AppArmor); run it where root holds "
                "CAP_SYS_PTRACE (docker: --cap-add SYS_PTRACE), see ptrace(2)")
    owner = f"uid {uid}" if uid is not None else "another user"
    return (f"process {pid} belongs to {owner}; run the doctor as root or as that user "
            f"(`sudo ascend-doctor --pid {pid}`)")


def read_process(reader: ProcReader, pid: int, chosen: str, npu_rows: Sequence[NpuUse],
                 npus_known: bool, *, env_required: bool,
                 candidates: tuple[Candidate, ...] = (),
                 is_secret: SecretName | None = None) -> Resolved:
    """The Target of process `pid`. Raises ProcGone (not there, or gone while read) and,
    when `env_required`, ProcDenied for an environment the kernel refuses. The command line
    is read whole; the Target keeps it with secret-looking flag values masked."""
    info, problems = reader.process(pid)
    env: Mapping[str, str] = {}
    env_error = ""
    try:
        env = reader.environ(pid)
    except ProcDenied as exc:
        if env_required:
            raise ProcDenied(pid, exc.path, f"permission denied: {_denied_hint(pid, info.uid)}")\
                from None
        env_error = f"{exc.path}: permission denied: {_denied_hint(pid, info.uid)}"
    except EnvironBlank as exc:
        env_error = (f"{exc.path}: {exc.reason}; name its serving process with --pid (the "
                     "server it was started by), or the service's file with --env-file")
    except ProcGone:
        raise ProcGone(pid, reader.path(pid, "environ"),
                       "the process exited while it was being read") from None
    from probes.target.ranks import coverage, disagreements, ranks_of
    from probes.target.serving import serving_args

    ranks = ranks_of(reader, pid, env) if not env_error else ()
    covers = coverage(ranks)

    files = LiveHost(root=info.files_root, env=env, owner=info.owner())
    serving = serving_args(info.cmdline, files, env, info.cwd)
    info = replace(info, cmdline=masked(info.cmdline, is_secret))
    where = "" if info.mount_ns != "other" else f"; its files under {info.files_root}"
    target = Target(
        kind="process", chosen=chosen,
        label=f"process {pid} ({_short(display(info.cmdline) or info.command)})",
        environment=f"{reader.path(pid, 'environ')}{where}" + (f"; {covers}" if covers else ""),
        environment_error=env_error, process=info, serving=serving,
        npus=npus_of(reader, pid, npu_rows), npus_known=npus_known, candidates=candidates,
        problems=(*problems, *disagreements(ranks)), ranks=ranks)
    if not reader.alive(pid, info.start_ticks):
        raise ProcGone(pid, reader.path(pid, "stat"),
                       "the process exited while it was being read")
    return Resolved(target, env)


def _short(command: str, limit: int = 96) -> str:
    return command if len(command) <= limit else command[: limit - 1] + "…"


def from_pid(reader: ProcReader, pid: int, npu_rows: Sequence[NpuUse],
             npus_known: bool, is_secret: SecretName | None = None) -> Resolved:
    """`--pid PID`. Raises ProcError (ProcGone, ProcDenied) with a message to show. A process
    whose environment area was overwritten (a vLLM EngineCore or worker) is judged through
    its serving parent (probes.target.ranks), and the target says so."""
    from probes.target.ranks import blank_environment, serving_parent

    parent = serving_parent(reader, pid) if blank_environment(reader, pid) else None
    if parent is None:
        return read_process(reader, pid, f"--pid {pid}", npu_rows, npus_known,
                            env_required=True, is_secret=is_secret)
    chosen = (f"--pid {pid}: its environment area was overwritten (setproctitle), so its "
              f"serving parent {parent} is judged, with every process it started")
    resolved = read_process(reader, parent, chosen, npu_rows, npus_known, env_required=True,
                            is_secret=is_secret)
    note = f"process {pid} named by --pid: {blank_reason_line(reader, pid)}"
    return replace(resolved, target=replace(
        resolved.target, problems=(note, *resolved.target.problems)))


def blank_reason_line(reader: ProcReader, pid: int) -> str:
    try:
        reader.environ(pid)
    except ProcError as exc:
        return f"{exc.path}: {exc.reason}"
    return "its environment reads back"


def from_discovery(reader: ProcReader, npu_rows: Sequence[NpuUse], npus_known: bool,
                   shell_env: Mapping[str, str], own_pid: int | None = None,
                   is_secret: SecretName | None = None) -> Resolved:
    """The first candidate that can be read, or this shell when there is none."""
    candidates = tuple(discover(reader, npu_rows, own_pid, is_secret))
    gone: list[str] = []
    for index, candidate in enumerate(candidates):
        chosen = _chosen(index, candidates)
        try:
            resolved = read_process(reader, candidate.pid, chosen, npu_rows, npus_known,
                                    env_required=False, candidates=candidates,
                                    is_secret=is_secret)
        except ProcError as exc:
            gone.append(f"process {candidate.pid} not judged: {exc}")
            continue
        problems = (*gone, *resolved.target.problems)
        return replace(resolved, target=replace(resolved.target, problems=problems))
    target = shell_target(candidates=candidates)
    return Resolved(replace(target, problems=tuple(gone)), shell_env)


def _chosen(index: int, candidates: Sequence[Candidate]) -> str:
    if len(candidates) == 1:
        return f"discovered: the only candidate, {candidates[0].why}"
    others = ", ".join(str(c.pid) for i, c in enumerate(candidates) if i != index)
    order = "the first" if index == 0 else f"number {index + 1}"
    return (f"discovered: {order} of {len(candidates)} candidates ({candidates[index].why}); "
            f"--pid picks another ({others})")


def from_env_file(path: str, files_root: str = "/") -> Resolved:
    """`--env-file FILE`. Raises EnvFileError naming the file. The file holds an environment
    only: the files the checks read are this machine's (under `files_root`), not those of
    the image or host the service will run in, and the target says so."""
    from probes.target.envfile import read_env_file

    found = read_env_file(path)
    whose = ("this machine's files under /" if files_root == "/" else
             f"the files under --root {files_root}")
    files = (f"files read: {whose}, not those of the container image or host the service "
             "will run in" + (" (name that root with --root DIR)" if files_root == "/" else ""))
    target = Target(kind="env_file", label=f"environment file {path}",
                    chosen=f"--env-file {path}",
                    environment=f"{path} ({found.shape}); {files}",
                    env_file=path, problems=found.notes)
    return Resolved(target, found.env)

