"""Which process to judge when none is named: the known servers and the holders of NPUs.

Rules, in order:
- a process whose command line is a known server (probes.target.serving.server_kind: `vllm
  serve`, `python -m vllm.entrypoints...`, `mindieservice_daemon`/`mindie`, `torchrun`) is a
  candidate; a server started by another server (a child with the same kind of command line)
  is part of its parent;
- a process in npu-smi's process table is part of the server it descends from (vLLM's engine
  and workers, torchrun's ranks), else a candidate of its own;
- candidates are ordered: servers holding NPUs, other servers, other NPU holders; by pid
  within each. The first is judged; the report names the others.
The doctor itself and its ancestors are never candidates.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from probes.target.cmdline import SecretName, display, masked, server_kind
from probes.target.proc import ProcError, ProcReader

if TYPE_CHECKING:
    from probes.target.parts import Candidate, NpuUse

MAX_ANCESTRY = 64
LABEL_CHARS = 96
SERVER_NAMES = {"vllm": "a vLLM server", "mindie": "a MindIE server",
                "torchrun": "a torchrun launcher"}


def label(cmdline: Sequence[str], name: str = "") -> str:
    text = display(cmdline) or f"[{name or '?'}]"
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def ancestors(reader: ProcReader, pid: int) -> list[int]:
    """Parent, grandparent, ... up to pid 1 (or as far as /proc lets us read)."""
    chain: list[int] = []
    current = pid
    for _ in range(MAX_ANCESTRY):
        try:
            parent = reader.status(current).ppid
        except ProcError:
            break
        if not parent or parent in chain:
            break
        chain.append(parent)
        current = parent
    return chain


def servers(reader: ProcReader, exclude: Iterable[int]) -> dict[int, tuple[tuple[str, ...], str]]:
    """pid -> (command line, server kind) of every process running a known server."""
    skip = set(exclude)
    found: dict[int, tuple[tuple[str, ...], str]] = {}
    for pid in reader.pids():
        if pid in skip:
            continue
        try:
            cmdline = reader.cmdline(pid)
        except ProcError:
            continue  # exited, or hidden from us
        kind = server_kind(cmdline) if cmdline else ""
        if kind:
            found[pid] = (cmdline, kind)
    return found


def discover(reader: ProcReader, npu_rows: Sequence[NpuUse], own_pid: int | None = None,
             is_secret: SecretName | None = None) -> list[Candidate]:
    """The candidates, best first (module docstring); secret-looking flag values masked."""
    own = os.getpid() if own_pid is None else own_pid
    exclude = {own, *ancestors(reader, own)}
    found = servers(reader, exclude)
    if not found and not npu_rows:
        return []
    from probes.target.parts import Candidate

    top = _top_servers(reader, found)
    held: dict[int, list[NpuUse]] = {pid: [] for pid in top}
    loose: dict[int, list[NpuUse]] = {}
    for row in npu_rows:
        if row.pid in exclude:
            continue
        owner = _owner(reader, row.pid, top)
        (held[owner] if owner is not None else loose.setdefault(row.pid, [])).append(row)
    candidates = [Candidate(pid, label(masked(found[pid][0], is_secret)),
                            ", ".join([SERVER_NAMES[found[pid][1]], *_holding(held[pid])]),
                            found[pid][1], tuple(held[pid]))
                  for pid in top]
    candidates.sort(key=lambda c: (not c.npus, c.pid))
    for pid, rows in sorted(loose.items()):
        candidates.append(Candidate(pid, _label_of(reader, pid, is_secret),
                                    _holding(rows)[0], "", tuple(rows)))
    return candidates


def _top_servers(reader: ProcReader, found: dict[int, tuple[tuple[str, ...], str]]
                 ) -> list[int]:
    """Servers not started by another server."""
    return [pid for pid in sorted(found)
            if not any(a in found for a in ancestors(reader, pid))]


def _owner(reader: ProcReader, pid: int, top: Sequence[int]) -> int | None:
    if pid in top:
        return pid
    return next((a for a in ancestors(reader, pid) if a in top), None)


def _holding(rows: Sequence[NpuUse]) -> list[str]:
    if not rows:
        return []
    npus = sorted({r.npu_id for r in rows})
    return [f"holding NPU {', '.join(str(n) for n in npus)} (npu-smi process table)"]


def npus_of(reader: ProcReader, pid: int, npu_rows: Sequence[NpuUse]) -> tuple[NpuUse, ...]:
    """The rows of `pid` and of the processes it started."""
    return tuple(r for r in npu_rows if r.pid == pid or pid in ancestors(reader, r.pid))


def _label_of(reader: ProcReader, pid: int, is_secret: SecretName | None) -> str:
    try:
        return label(masked(reader.cmdline(pid), is_secret), reader.status(pid).name)
    except ProcError:
        return f"[pid {pid}: not readable]"
