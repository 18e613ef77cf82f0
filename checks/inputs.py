"""The inputs of a run, resolved from the options: the Host, the policy, the model directory,
and the header every report prints. Each bad input is a UsageError naming the option."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from checks.context import Context
from checks.errors import UsageError
from checks.options import EndpointOptions, HostOptions
from checks.policy import Policy, PolicyError, load_policy
from checks.report import HostInfo
from probes.errors import NotRecorded, ProbeError
from probes.host import Host

if TYPE_CHECKING:
    from probes.http import EndpointTarget


def make_host(options: HostOptions) -> Host:
    """The observed machine: a recording (--from), or this one with its files under --root."""
    if options.from_path and options.root:
        raise UsageError("--from and --root exclude each other: a recording has its own root")
    if options.from_path:
        from probes.recording import SnapshotHost

        try:
            return SnapshotHost(Path(options.from_path))
        except (ValueError, OSError) as exc:
            # defence in depth: a hostile bundle may find a path the reader does not turn
            # into a SnapshotError (a NUL in a member name); it is still one line, exit 3
            raise UsageError(f"--from {options.from_path}: not a readable recording "
                             f"({type(exc).__name__}: {exc})") from None
    from probes.live import LiveHost

    root = options.root or "/"
    if not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory")
    return LiveHost(root=root, python=options.python, default_timeout_s=options.timeout_s)


def policy(path: Path | None) -> Policy:
    """The --policy file over the built-in defaults (the defaults alone without one)."""
    try:
        return load_policy(path)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None


def model_dir(model: str | None, options: HostOptions, host: Host) -> Path | None:
    """The --model directory, a path on the observed machine (under --root, in a recording)."""
    if not model:
        return None
    path = os.path.abspath(model) if options.is_live else model
    try:
        kind = host.kind(path)
    except NotRecorded:
        return Path(path)  # the checks say what the recording lacks
    except ProbeError:
        kind = "missing"
    if kind != "dir":
        raise UsageError(f"--model {model}: not a directory on the observed machine "
                         "(give the model folder holding config.json)")
    return Path(path)


def host_info(ctx: Context, model: str | None, policy_source: str) -> HostInfo:
    """What every report says it judged: the machine, the interpreter, the policy, the model."""
    from checks.builtin import facts

    env = facts.python(ctx)  # read once per run, shared with the checks
    python = env.interpreter or "(none)"
    if env.error:
        python = f"{python} — {env.error}" if env.interpreter else env.error
    return HostInfo(ctx.host.description, python, policy_source, model)


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
