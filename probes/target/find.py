"""The target's front door: `find(spec) -> Observed`, the machine as the target sees it, the
target, and the npu-smi reading that discovery made. Every way a target cannot be found or
read is one TargetError whose message is one line naming the option at fault (the spec's
fields are the options of `ascend-doctor` and `ascend-console`: --from, --root, --pid,
--env-file, --python, --timeout).

The modules a target kind needs are imported when that kind is asked for: replaying a
recording never loads /proc readers, and this shell's target never loads npu-smi's parsers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from probes.errors import ProbeError
from probes.host import DEFAULT_TIMEOUT_S, Host
from probes.target.model import Target, from_json, shell_target

if TYPE_CHECKING:
    from probes.inventory import NpuReading
    from probes.target.cmdline import SecretName
    from probes.target.parts import NpuUse
    from probes.target.proc import ProcReader
    from probes.target.resolve import Resolved


class TargetError(ProbeError):
    """The target could not be found or read; the message is one line naming the option."""


@dataclass(frozen=True)
class TargetSpec:
    """What names a target: a recording to replay, or this machine (its files under `root`)
    with a process, an environment file, or neither (a serving process is looked for when
    this machine is observed at /)."""

    recording: str | None = None  # --from: a recording directory or .tar.gz bundle
    root: str | None = None  # --root DIR; None: /
    pid: int | None = None  # --pid PID
    env_file: str | None = None  # --env-file FILE
    python: str | None = None  # --python PATH: the deployment's interpreter
    timeout_s: float = DEFAULT_TIMEOUT_S  # each command on the observed machine
    # False: a quick look that a --pid is there and readable, without npu-smi's process
    # table (which may take its whole timeout); the NPUs the process holds stay unknown
    npu_smi: bool = True

    @property
    def discovers(self) -> bool:
        """No target named and this machine observed at /: look for the serving process."""
        return (not self.root and not self.recording and self.pid is None
                and self.env_file is None)


@dataclass(frozen=True)
class Observed:
    """The observed machine as the target sees it, the target, and the npu-smi reading that
    discovery already made (the checks share it instead of running npu-smi again)."""

    host: Host
    target: Target
    npu: NpuReading | None = None


def make_host(spec: TargetSpec) -> Host:
    """The observed machine: a recording, or this one with its files under `root`."""
    if spec.recording and spec.root:
        raise TargetError("--from and --root exclude each other: a recording has its own root")
    if spec.recording:
        return _snapshot(spec.recording)
    from probes.live import LiveHost

    return LiveHost(root=_root(spec), python=spec.python, default_timeout_s=spec.timeout_s)


def _root(spec: TargetSpec) -> str:
    root = spec.root or "/"
    if not os.path.isdir(root):
        raise TargetError(f"--root {root}: not a directory")
    return root


def _snapshot(path: str) -> Host:
    from probes.recording.snapshot import SnapshotHost

    try:
        return SnapshotHost(Path(path))
    except (ValueError, OSError) as exc:
        # defence in depth: a hostile bundle may find a path the reader does not turn
        # into a SnapshotError (a NUL in a member name); it is still one line
        raise TargetError(f"--from {path}: not a readable recording "
                          f"({type(exc).__name__}: {exc})") from None


def find(spec: TargetSpec, reader: ProcReader | None = None,
         is_secret: SecretName | None = None) -> Observed:
    """The Host and the target `spec` names: a recording's, a process's, an environment
    file's, a discovered serving process's, or this shell's. `is_secret` says which flag
    names of a command line hold secrets (masked in what the target shows)."""
    _exclusive(spec)
    if spec.recording:
        host = make_host(spec)
        return Observed(host, recorded_target(host))
    if spec.pid is None and spec.env_file is None and not spec.discovers:
        return Observed(make_host(spec), shell_target(f"--root {spec.root}: this shell's "
                                                      "environment over that tree"))
    from probes.target.proc import ProcReader

    proc = reader or ProcReader()
    npu = _npu_reading(spec) if spec.env_file is None and spec.npu_smi else None
    resolved = _resolve(spec, proc, npu, is_secret)
    if resolved.target.kind == "shell":
        return Observed(make_host(spec), resolved.target, npu)
    from probes.target.host import TargetHost

    root = resolved.target.files_root if resolved.target.process else _root(spec)
    host = TargetHost(resolved.target, resolved.env, root=root, python=spec.python,
                      default_timeout_s=spec.timeout_s, reader=proc)
    return Observed(host, resolved.target, npu)


def _exclusive(spec: TargetSpec) -> None:
    if spec.pid is not None and spec.env_file is not None:
        raise TargetError("--pid and --env-file exclude each other: the environment is the "
                          "process's own")
    if spec.recording and (spec.pid is not None or spec.env_file is not None):
        raise TargetError("--from replays the target it recorded: leave out --pid and "
                          "--env-file")
    if spec.root and spec.pid is not None:
        raise TargetError("--pid reads the process's files through /proc/PID/root: leave out "
                          "--root")
    if spec.pid is not None and spec.pid <= 0:
        raise TargetError(f"--pid {spec.pid}: not a process id")


def _npu_reading(spec: TargetSpec) -> NpuReading:
    from probes.inventory import read_live
    from probes.live import LiveHost

    return read_live(LiveHost(default_timeout_s=spec.timeout_s), spec.timeout_s)


def _resolve(spec: TargetSpec, reader: ProcReader, npu: NpuReading | None,
             is_secret: SecretName | None) -> Resolved:
    from probes.target import resolve
    from probes.target.proc import ProcError

    rows, known = _npu_rows(npu)
    if spec.env_file is not None:
        from probes.target.envfile import EnvFileError

        try:
            return resolve.from_env_file(spec.env_file, spec.root or "/")
        except EnvFileError as exc:
            raise TargetError(f"--env-file {exc}") from None
    if spec.pid is None:
        return resolve.from_discovery(reader, rows, known, dict(os.environ),
                                      is_secret=is_secret)
    try:
        return resolve.from_pid(reader, spec.pid, rows, known, is_secret)
    except ProcError as exc:
        raise TargetError(f"--pid {spec.pid}: {exc}") from None


def _npu_rows(npu: NpuReading | None) -> tuple[tuple[NpuUse, ...], bool]:
    """npu-smi's process table as NpuUse rows, and whether it could be read at all."""
    info = npu.info if npu is not None else None
    if info is None:
        return (), False
    from probes.target.parts import NpuUse

    rows = tuple(NpuUse(p.npu_id, p.chip_id, p.pid, p.memory_mb) for p in info.processes)
    return rows, bool(info.processes_known)


# -- a recording's target ------------------------------------------------------------------------


def recorded_target(host: Host) -> Target:
    """The target a recording was made for; this shell of the recording when it names none."""
    recording = getattr(host, "recording", None)
    doc = getattr(recording, "target", None)
    if doc is None:
        return shell_target("the recording names no target: its shell's environment")
    try:
        return from_json(doc)
    except ValueError as exc:
        raise TargetError(f"--from {getattr(host, 'path', '')}: target.json: {exc}") from None


def recorded_model(host: Host) -> str | None:
    """The model directory the recorded run judged (target.json `run_model`), if any."""
    recording = getattr(host, "recording", None)
    doc = getattr(recording, "target", None)
    value = doc.get("run_model") if isinstance(doc, dict) else None
    return value if isinstance(value, str) and value.startswith("/") else None


# -- after a run ---------------------------------------------------------------------------------


def still_there(observed: Observed) -> Target:
    """The target after a run; a process that exited meanwhile is said, or, when its files
    were read through /proc/PID/root (which went with it), TargetError: nothing read from
    there can be trusted."""
    host, target = observed.host, observed.target
    alive = getattr(host, "alive", None)
    if alive is None or alive():
        return target
    proc = target.process
    assert proc is not None
    if proc.mount_ns == "other":
        raise TargetError(f"process {proc.pid} exited during the run: its files were read "
                          f"through {proc.files_root}, which went with it; nothing is "
                          "reported, run again")
    note = (f"process {proc.pid} exited during the run: its environment and command line are "
            "judged as they were at the start")
    return replace(target, problems=(*target.problems, note))
