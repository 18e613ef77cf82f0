"""The inputs of a run, resolved from the options: the Host and the target judged on it (the
options as a probes.target.find.TargetSpec), the policy, the model directory, and the header
every report prints. Each bad input is a UsageError naming the option."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checks.context import Context
from checks.errors import UsageError
from checks.options import EndpointOptions, HostOptions
from checks.policy import Policy, PolicyError, load_policy
from checks.report import HostInfo
from probes.errors import NotRecorded
from probes.host import Host
from probes.target import find
from probes.target.find import Observed, TargetError, TargetSpec, recorded_model
from probes.target.model import Target

if TYPE_CHECKING:
    from probes.http import EndpointTarget
    from probes.target.proc import ProcReader


def spec_of(options: HostOptions, npu_smi: bool = True) -> TargetSpec:
    """The target the options name, as probes.target.find reads it."""
    return TargetSpec(recording=options.from_path, root=options.root, pid=options.pid,
                      env_file=options.env_file, python=options.python,
                      timeout_s=options.timeout_s, npu_smi=npu_smi)


def make_host(options: HostOptions) -> Host:
    """The observed machine: a recording (--from), or this one with its files under --root."""
    with _usage_error():
        return find.make_host(spec_of(options))


def observe(options: HostOptions, reader: ProcReader | None = None,
            npu_smi: bool = True) -> Observed:
    """The Host and the target the options name (probes.target.find); `npu_smi` False: a
    quick look that a --pid is there and readable, the NPUs it holds left unknown."""
    with _usage_error():
        return find.find(spec_of(options, npu_smi), reader, is_secret=_is_secret_name)


@contextmanager
def _usage_error() -> Iterator[None]:
    """A target that cannot be found or read ends the run as a usage error: its one line."""
    try:
        yield
    except TargetError as exc:
        raise UsageError(str(exc)) from None


def _is_secret_name(name: str) -> bool:
    """checks.secret_names, imported only when a command line is there to mask."""
    from checks.secret_names import is_secret_name as is_secret

    return is_secret(name)


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
    """The target after the run (probes.target.find.still_there: a process that exited
    meanwhile is said, or the run is refused). A replay (`run` given) adds the recorded
    verdicts it did not reproduce to the target's problems."""
    with _usage_error():
        target = find.still_there(observed)
    lines = unreproduced(observed.host, run.results) if run is not None else []
    return replace(target, problems=(*target.problems, *lines)) if lines else target


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
    (probes.recording.overlay)."""
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
    from probes.recording.overlay import ModelOverlay

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
    replay = getattr(ctx.host, "recording", None) is not None  # a SnapshotHost, or an overlay
    return HostInfo(ctx.host.description, python, policy_source, shown, ctx.target, replay)


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
