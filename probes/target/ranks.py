"""Every process of a multi-process server, and whether their environments agree.

A vLLM server is an API server, one EngineCore per data-parallel rank and one worker per
chip; the EngineCore and the workers call setproctitle (vllm-project/vllm
vllm/utils/system_utils.py, set_process_title: the title `VLLM::<name>`), which writes over
their argv and environ areas, so /proc/PID/environ of the PIDs npu-smi lists reads back as
padding. Such a process is judged through its serving parent, the server it descends from
(the PPid chain, as discovery folds NPU holders into servers); each verdict then says which
processes it covers, and a process whose own environment can be read and differs from the
judged one on a variable the checks read is named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from probes.target.cmdline import server_kind
from probes.target.discovery import ancestors, label
from probes.target.proc import EnvironBlank, ProcDenied, ProcError, ProcGone, ProcReader

if TYPE_CHECKING:
    from probes.target.parts import Rank

# The variables the environment checks read: CANN's (ASCEND_*), HCCL's, torch_npu's, MindIE's,
# vLLM's and the paths a process loads its libraries and packages from.
JUDGED_PREFIXES = ("ASCEND_", "HCCL_", "PYTORCH_NPU_", "MINDIE_", "VLLM_", "ATB_")
JUDGED_NAMES = frozenset({"LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "TASK_QUEUE_ENABLE",
                          "CPU_AFFINITY_CONF"})
MAX_RANKS = 256
SHOWN_RANKS = 8
ROLE_CHARS = 40


def judged_name(name: str) -> bool:
    return name in JUDGED_NAMES or name.startswith(JUDGED_PREFIXES)


def serving_parent(reader: ProcReader, pid: int) -> int | None:
    """The outermost known server `pid` descends from (as discovery groups them), or None."""
    found = None
    for parent in ancestors(reader, pid):
        try:
            cmdline = reader.cmdline(parent)
        except ProcError:
            continue
        if cmdline and server_kind(cmdline):
            found = parent
    return found


def blank_environment(reader: ProcReader, pid: int) -> bool:
    """Whether `pid`'s environment area holds no NAME=VALUE entry (EnvironBlank)."""
    try:
        reader.environ(pid)
    except EnvironBlank:
        return True
    except ProcError:
        return False
    return False


def descendants(reader: ProcReader, pid: int, limit: int = MAX_RANKS) -> list[int]:
    """The processes `pid` started, and theirs, ascending; at most `limit`."""
    children: dict[int, list[int]] = {}
    for other in reader.pids():
        try:
            parent = reader.status(other).ppid
        except ProcError:
            continue
        if parent:
            children.setdefault(parent, []).append(other)
    found: list[int] = []
    pending = [pid]
    while pending and len(found) < limit:
        for child in children.get(pending.pop(), []):
            if child not in found and child != pid:
                found.append(child)
                pending.append(child)
    return sorted(found[:limit])


def ranks_of(reader: ProcReader, pid: int, env: Mapping[str, str]) -> tuple[Rank, ...]:
    """The processes of the server `pid` (it first), each with its environment's state."""
    from probes.target.parts import Rank

    out = [Rank(pid, _role(reader, pid), "read")]
    for child in descendants(reader, pid):
        try:
            theirs = reader.environ(child)
        except EnvironBlank:
            out.append(Rank(child, _role(reader, child), "overwritten (setproctitle)"))
            continue
        except ProcDenied:
            out.append(Rank(child, _role(reader, child), "permission denied"))
            continue
        except ProcGone:
            continue
        except ProcError as exc:
            out.append(Rank(child, _role(reader, child), exc.reason))
            continue
        out.append(Rank(child, _role(reader, child), "read", differing(env, theirs)))
    return tuple(out)


def differing(judged: Mapping[str, str], theirs: Mapping[str, str]) -> tuple[str, ...]:
    names = {n for n in (*judged, *theirs) if judged_name(n)}
    return tuple(sorted(n for n in names if judged.get(n) != theirs.get(n)))


def _role(reader: ProcReader, pid: int) -> str:
    try:
        text = label(reader.cmdline(pid), reader.status(pid).name)
    except ProcError:
        return "?"
    return text if len(text) <= ROLE_CHARS else text[: ROLE_CHARS - 1] + "…"


def coverage(ranks: Sequence[Rank]) -> str:
    """One line: the processes a verdict on the first rank's environment covers."""
    if len(ranks) < 2:
        return ""
    head, rest = ranks[0], ranks[1:]
    shown = ", ".join(f"{r.pid} {r.role}" for r in rest[:SHOWN_RANKS])
    more = f" and {len(rest) - SHOWN_RANKS} more" if len(rest) > SHOWN_RANKS else ""
    blank = [r for r in rest if not r.readable]
    started = "the process it started" if len(rest) == 1 else \
        f"the {len(rest)} processes it started"
    line = f"covers process {head.pid} and {started} ({shown}{more})"
    if blank:
        line += (f"; {len(blank)} of them could not be read ({_reasons(blank)}): judged by "
                 f"the environment they were started from, {head.pid}'s, which the server "
                 "may change before starting them")
    return line


def _reasons(ranks: Sequence[Rank]) -> str:
    return ", ".join(sorted({r.environment for r in ranks}))


def disagreements(ranks: Sequence[Rank]) -> list[str]:
    """One line per process whose readable environment differs from the judged one."""
    if not ranks:
        return []
    head = ranks[0].pid
    return [f"ranks disagree: process {r.pid} ({r.role}) differs from process {head} on "
            f"{', '.join(r.differs)}" for r in ranks[1:] if r.differs]
