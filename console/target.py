"""Whose deployment the console's host panel and doctor screen judge, found as ascend-doctor
finds it (probes.target.find): `--pid PID`, else the serving process on the NPUs or known
by its command line, else this shell.

Finding it runs npu-smi for its process table, which may take the whole npu-smi timeout: the
app calls `find` in a worker once it is open, never on the UI thread, and says `FINDING` until
it is known. `check_pid` is the instant part the command line does first, so that a `--pid`
that is not there (or not ours to read) is still one line and exit 3. No textual here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from probes.errors import ProbeError
from probes.target.find import TargetError, TargetSpec
from probes.target.find import find as find_target

if TYPE_CHECKING:
    from console.options import ConsoleOptions
    from probes.host import Host
    from probes.target.find import Observed
    from probes.target.model import Target

__all__ = ["FINDING", "Found", "TargetError", "check_pid", "find"]

FINDING = "finding the serving process…"


@dataclass(frozen=True)
class Found:
    """The target, the Host that sees the machine as it does, and the directory whose disk the
    host panel watches (--log-dir, else the target's CANN application log directory)."""

    host: Host
    target: Target
    log_dir: str | None
    observed: Observed | None = None  # what the doctor's context is built from


def check_pid(options: ConsoleOptions) -> None:
    """Raise TargetError when `--pid` names no process this user can read: /proc only, no
    npu-smi (the NPUs it holds are read by `find`)."""
    if options.pid is not None:
        _observe(options, npu_smi=False)


def find(options: ConsoleOptions) -> Found:
    """The target the options name, as ascend-doctor resolves it. Raises TargetError."""
    observed = _observe(options, npu_smi=True)
    log_dir = options.log_dir
    if log_dir is None:
        log_dir = _log_dir_on_this_machine(observed.host)
    return Found(observed.host, observed.target, log_dir, observed)


def _observe(options: ConsoleOptions, npu_smi: bool) -> Observed:
    from checks.secret_names import is_secret_name

    spec = TargetSpec(root=None if options.root == "/" else options.root, pid=options.pid,
                      timeout_s=options.npu_timeout_s, npu_smi=npu_smi)
    try:
        return find_target(spec, is_secret=is_secret_name)
    except TargetError:
        raise
    except ProbeError as exc:  # a question to the machine failed outside any check
        raise TargetError(str(exc)) from None


def _log_dir_on_this_machine(host: Host) -> str | None:
    """The target's CANN log directory, as a path here (a container's is read through
    /proc/PID/root): the disk that fills, since CANN caps each running process's log files but
    keeps those of processes that ended (CANN environment-variable reference, envref_07_0126)."""
    from probes.environment import resolve_log_dir

    try:
        path = resolve_log_dir(host.env).path
    except Exception:  # an environment that could not be read: the panel says unknown
        return None
    if path is None or not path.startswith("/"):
        return path
    return str(host.host_path(path)) if hasattr(host, "host_path") else path
