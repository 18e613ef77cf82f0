"""The inputs of a run, resolved from the options: the Host and the target judged on it, the
policy, the model directory, and the header every report prints. Each bad input is a
UsageError naming the option."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checks.context import Context
from checks.errors import UsageError
from checks.options import EndpointOptions, HostOptions
from checks.policy import Policy, PolicyError, load_policy
from checks.report import HostInfo
from probes.errors import NotRecorded
from probes.host import Host
from probes.target.model import Target, from_json, shell_target

if TYPE_CHECKING:
    from probes.http import EndpointTarget
    from probes.inventory import NpuReading
    from probes.target.parts import NpuUse
    from probes.target.proc import ProcReader
    from probes.target.resolve import Resolved


def make_host(options: HostOptions) -> Host:
    """The observed machine: a recording (--from), or this one with its files under --root."""
    if options.from_path and options.root:
        raise UsageError("--from and --root exclude each other: a recording has its own root")
    if options.from_path:
        return _snapshot(options)
    from probes.live import LiveHost

    return LiveHost(root=_root(options), python=options.python,
                    default_timeout_s=options.timeout_s)


def _root(options: HostOptions) -> str:
    root = options.root or "/"
    if not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory")
    return root


def _snapshot(options: HostOptions) -> Host:
    from probes.recording import SnapshotHost

    try:
        return SnapshotHost(Path(str(options.from_path)))
    except (ValueError, OSError) as exc:
        # defence in depth: a hostile bundle may find a path the reader does not turn
        # into a SnapshotError (a NUL in a member name); it is still one line, exit 3
        raise UsageError(f"--from {options.from_path}: not a readable recording "
                         f"({type(exc).__name__}: {exc})") from None


# -- the target ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """The observed machine as the target sees it, the target, and the npu-smi reading that
    discovery already made (the checks share it instead of running npu-smi again)."""

    host: Host
    target: Target
    npu: NpuReading | None = None


def observe(options: HostOptions, reader: ProcReader | None = None,
            npu_smi: bool = True) -> Observed:
    """The Host and the target the options name: a recording's, a process's (--pid), an
    environment file's, a discovered serving process's, or this shell's.

    `npu_smi` False: without npu-smi's process table (which may take its whole timeout): a
    quick look that a --pid is there and readable, the NPUs it holds left unknown."""
    _exclusive(options)
    if options.from_path:
        host = make_host(options)
        return Observed(host, recorded_target(host))
    if options.pid is None and options.env_file is None and not options.discovers:
        return Observed(make_host(options), shell_target(f"--root {options.root}: this shell's "
                                                         "environment over that tree"))
    from probes.target.proc import ProcReader

    proc = reader or ProcReader()
    npu = _npu_reading(options) if options.env_file is None and npu_smi else None
    resolved = _resolve(options, proc, npu)
    if resolved.target.kind == "shell":
        return Observed(make_host(options), resolved.target, npu)
    from probes.target.host import TargetHost

    root = resolved.target.files_root if resolved.target.process else _root(options)
    host = TargetHost(resolved.target, resolved.env, root=root, python=options.python,
                      default_timeout_s=options.timeout_s, reader=proc)
    return Observed(host, resolved.target, npu)


def _exclusive(options: HostOptions) -> None:
    if options.pid is not None and options.env_file is not None:
        raise UsageError("--pid and --env-file exclude each other: the environment is the "
                         "process's own")
    if options.from_path and (options.pid is not None or options.env_file is not None):
        raise UsageError("--from replays the target it recorded: leave out --pid and --env-file")
    if options.root and options.pid is not None:
        raise UsageError("--pid reads the process's files through /proc/PID/root: leave out "
                         "--root")
    if options.pid is not None and options.pid <= 0:
        raise UsageError(f"--pid {options.pid}: not a process id")


def _npu_reading(options: HostOptions) -> NpuReading:
    from probes.inventory import read_live
    from probes.live import LiveHost

    return read_live(LiveHost(default_timeout_s=options.timeout_s), options.timeout_s)


def _resolve(options: HostOptions, reader: ProcReader, npu: NpuReading | None) -> Resolved:
    from probes.target import resolve
    from probes.target.proc import ProcError

    rows, known = _npu_rows(npu)
    if options.env_file is not None:
        from probes.target.envfile import EnvFileError

        try:
            return resolve.from_env_file(options.env_file, options.root or "/")
        except EnvFileError as exc:
            raise UsageError(f"--env-file {exc}") from None
    if options.pid is None:
        return resolve.from_discovery(reader, rows, known, dict(os.environ),
                                      is_secret=_is_secret_name)
    try:
        return resolve.from_pid(reader, options.pid, rows, known, _is_secret_name)
    except ProcError as exc:
        raise UsageError(f"--pid {options.pid}: {exc}") from None


def _is_secret_name(name: str) -> bool:
    """checks.secret_names, imported only when a command line is there to mask."""
    from checks.secret_names import is_secret_name

    return is_secret_name(name)


def _npu_rows(npu: NpuReading | None) -> tuple[tuple[NpuUse, ...], bool]:
    """npu-smi's process table as NpuUse rows, and whether it could be read at all."""
    info = npu.info if npu is not None else None
    if info is None:
        return (), False
    from probes.target.parts import NpuUse

    rows = tuple(NpuUse(p.npu_id, p.chip_id, p.pid, p.memory_mb) for p in info.processes)
    return rows, bool(info.processes_known)


def recorded_target(host: Host) -> Target:
    """The target a recording was made for; this shell of the recording when it names none."""
    recording = getattr(host, "recording", None)
    doc = getattr(recording, "target", None)
    if doc is None:
        return shell_target("the recording names no target: its shell's environment")

    try:
        return from_json(doc)
    except ValueError as exc:
        raise UsageError(f"--from {getattr(host, 'path', '')}: target.json: {exc}") from None


def recorded_model(host: Host) -> str | None:
    """The model directory the recorded run judged (target.json `run_model`), if any."""
    recording = getattr(host, "recording", None)
    doc = getattr(recording, "target", None)
    value = doc.get("run_model") if isinstance(doc, dict) else None
    return value if isinstance(value, str) and value.startswith("/") else None


def unreproduced(host: Host, results: Any) -> list[str]:
    """One line per verdict of a recording's run that this replay did not give again (a
    tokenizer the recording could not carry, a fact it never recorded)."""
    recording = getattr(host, "recording", None)
    recorded = getattr(recording, "verdicts", None)
    if not recorded:
        return []
    lines = [f"replay: {r.id} was {recorded[r.id]} in the recorded run, {r.status} here"
             for r in results if r.id in recorded and recorded[r.id] != r.status]
    return lines


def still_there(observed: Observed, run: Any = None) -> Target:
    """The target after the run; a process that exited meanwhile is said, or, when its files
    were read through /proc/PID/root (which went with it), the run is refused. A replay
    (`run` given) adds the recorded verdicts it did not reproduce to the target's problems."""
    host, target = observed.host, observed.target
    if run is not None:
        lines = unreproduced(host, run.results)
        if lines:
            target = replace(target, problems=(*target.problems, *lines))
    alive = getattr(host, "alive", None)
    if alive is None or alive():
        return target
    proc = target.process
    assert proc is not None
    if proc.mount_ns == "other":
        raise UsageError(f"process {proc.pid} exited during the run: its files were read "
                         f"through {proc.files_root}, which went with it; nothing is "
                         "reported, run again")
    note = (f"process {proc.pid} exited during the run: its environment and command line are "
            "judged as they were at the start")
    return replace(target, problems=(*target.problems, note))


def policy(path: Path | None) -> Policy:
    """The --policy file over the built-in defaults (the defaults alone without one)."""
    try:
        return load_policy(path)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None


def model_dir(model: str | None, options: HostOptions, host: Host,
              target: Target | None = None) -> Path | None:
    """The --model directory, a path on the observed machine (under --root, in a recording);
    without --model, the one a recording's run judged, else the directory the target's
    command line serves, when it names one."""
    if not model:
        recorded = recorded_model(host) if options.from_path else None
        if recorded is not None:
            return Path(recorded)
        found = target.serving.model_dir if target is not None else None
        return Path(found.value) if found is not None else None
    from probes.model.reader import locate_model

    path = os.path.abspath(model) if options.is_live else model
    try:
        location = locate_model(host, path)
    except NotRecorded:
        return Path(path)  # the checks say what the recording lacks
    if location.kind == "gguf":
        raise UsageError(f"--model {model}: a .gguf file; the doctor's checks read a model "
                         "directory (config.json and safetensors shards)")
    if location.problem is not None:
        raise UsageError(f"--model {location.problem} on the observed machine")
    return Path(path)


def _model_host(host: Host, model: str | None, options: HostOptions
                ) -> tuple[Host, str | None]:
    """A replay's host and model, with `--model DIR` read from this machine (as an absolute
    path) when the recording does not hold that directory and this machine does
    (probes.recording_overlay)."""
    if not (options.from_path and model):
        return host, model
    try:
        host.kind(model)
        return host, model  # the recording answers for it
    except NotRecorded:
        pass
    except Exception:
        return host, model
    local = os.path.abspath(model)
    if not os.path.isdir(local):
        return host, model
    from probes.recording_overlay import ModelOverlay

    return ModelOverlay(host, local), local


def context(observed: Observed, policy: Policy, model: str | None, options: HostOptions,
            **extra: Any) -> Context:
    """The run's Context: the observed host and target, the model (--model, else the
    target's), and the npu-smi reading discovery already made."""
    host, model = _model_host(observed.host, model, options)
    ctx = Context(host, policy, model_dir(model, options, host, observed.target),
                  timeout_s=options.timeout_s, target=observed.target, **extra)
    if observed.npu is not None:
        ctx.know("npu", observed.npu)
    return ctx


def host_info(ctx: Context, model: str | None, policy_source: str) -> HostInfo:
    """What every report says it judged: the machine, the target, the interpreter, the policy,
    the model (and where its path came from)."""
    from checks.builtin import facts

    env = facts.python(ctx)  # read once per run, shared with the checks
    python = env.interpreter or "(none)"
    if env.error:
        python = f"{python} — {env.error}" if env.interpreter else env.error
    elif _read_statically(ctx.host) and ctx.target.process is not None:
        python += (f" (Python {env.python_version}, of process {ctx.target.process.pid}; "
                   "packages read without running it)")
    shown = model
    found = ctx.target.serving.model_dir
    recorded = None if model else recorded_model(ctx.host)
    if not model and found is not None and (recorded is None or found.value == recorded):
        shown = f"{found.value} (from {found.source})"
    elif recorded is not None and ctx.model_dir is not None and str(ctx.model_dir) == recorded:
        shown = f"{recorded} (the model the recorded run judged)"
    elif not model and found is not None:
        shown = f"{found.value} (from {found.source})"
    return HostInfo(ctx.host.description, python, policy_source, shown, ctx.target)


def _read_statically(host: object) -> bool:
    """The host (or the one a recorder wraps) reads the target's interpreter statically: a
    TargetHost without --python (told by its attributes, so that a run without a target
    process never imports it)."""
    while not hasattr(host, "static_notes") and hasattr(host, "inner"):
        host = host.inner
    return hasattr(host, "static_notes") and getattr(host, "python", None) is None


def endpoint(options: EndpointOptions | None) -> EndpointTarget | None:
    """The --endpoint target, its URLs checked and its key read from the named variable."""
    if options is None:
        return None
    from probes.http import EndpointTarget, EndpointURLError, Secret, check_url

    key = None
    if options.api_key_env:
        value = os.environ.get(options.api_key_env, "")
        if not value:
            raise UsageError(f"--endpoint-api-key-env {options.api_key_env}: that environment "
                             "variable is not set (or empty)")
        key = Secret(value)
    try:
        check_url(options.url, "--endpoint")
        if options.metrics_url:
            check_url(options.metrics_url, "--endpoint-metrics")
        return EndpointTarget.of(options.url, options.model, options.metrics_url, key)
    except EndpointURLError as exc:
        raise UsageError(str(exc)) from None
