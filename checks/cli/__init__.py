"""`ascend-doctor` command line: the options built once from the parsed arguments
(checks.cli.parser), dispatch to `checks.cli.commands`, and the one place where the doctor's own
errors become a line and an exit code (checks/errors.py).
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from checks.cli.parser import parse_args
from checks.errors import UsageError, exit_code_for
from checks.options import EndpointOptions, HostOptions, RunOptions
from probes.errors import ProbeError
from probes.textsafe import one_line

if TYPE_CHECKING:
    from checks.command_options import (
        BaselineRecordOptions,
        BenchOptions,
        BundleOptions,
        NpuOptions,
        OpsOptions,
    )


# -- the options, built once from the parsed arguments ------------------------------------------


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def host_options(args: argparse.Namespace) -> HostOptions:
    return HostOptions(root=args.root, from_path=args.from_path, python=args.python,
                       timeout_s=args.timeout, pid=getattr(args, "pid", None),
                       env_file=getattr(args, "env_file", None))


def run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(
        host=host_options(args), model=args.model, tp=args.tp, policy=_path(args.policy),
        only=tuple(args.only), skip=tuple(args.skip), json=args.json, junit=_path(args.junit),
        verbose=args.verbose, baseline=_path(args.baseline), prometheus=_path(args.prometheus),
        endpoint=_endpoint(args))


def _endpoint(args: argparse.Namespace) -> EndpointOptions | None:
    extras = (args.endpoint_model, args.endpoint_api_key_env, args.endpoint_metrics)
    if not args.endpoint:
        if any(extras):
            raise UsageError("--endpoint-model, --endpoint-api-key-env and --endpoint-metrics "
                             "go with --endpoint URL")
        return None
    return EndpointOptions(args.endpoint, args.endpoint_model, args.endpoint_api_key_env,
                           args.endpoint_metrics)


def npu_options(args: argparse.Namespace) -> NpuOptions:
    from checks.command_options import NpuOptions

    return NpuOptions(host=host_options(args), from_file=args.from_file, json=args.json)


def bundle_options(args: argparse.Namespace) -> BundleOptions:
    from checks.command_options import BundleOptions

    return BundleOptions(
        host=host_options(args), model=args.model, policy=_path(args.policy),
        output=_path(args.output), include_logs=not args.no_logs, metrics=_path(args.metrics),
        redact_hostnames=args.redact_hostnames)


def ops_options(args: argparse.Namespace) -> OpsOptions:
    from checks.command_options import OpsOptions

    return OpsOptions(model=args.model, device=args.device, torch_npu=args.torch_npu,
                      python=args.python, dtype=args.dtype, fp8=args.fp8, json=args.json)


def bench_options(args: argparse.Namespace) -> BenchOptions:
    from checks.command_options import BenchOptions

    if not args.slower_pct >= 0:
        raise UsageError(f"--slower-pct {args.slower_pct}: must be 0 or more")
    return BenchOptions(model=args.model, device=args.device, dtype=args.dtype, fp8=args.fp8,
                        json=args.json, output=_path(args.output), compare=_path(args.compare),
                        slower_pct=args.slower_pct, quick=args.quick)


def baseline_record_options(args: argparse.Namespace) -> BaselineRecordOptions:
    from checks.command_options import BaselineRecordOptions

    output = None if args.output in (None, "", "-") else Path(args.output)
    return BaselineRecordOptions(host=host_options(args), model=args.model, output=output)


# -- running ------------------------------------------------------------------------------------


_QUICK_EXIT: list[bool] = []


def _exit_quickly() -> None:
    """At the interpreter's exit, leave the objects of the run to the OS: its final garbage
    collections would walk every object the imports made, about a tenth of a bare run. Only
    objects in reference cycles go unfinalized (the doctor closes what it writes as it
    writes it, the interpreter flushes stdout after this, weakref finalizers still run).
    Registered once, however often main is called (tests call it many times)."""
    if not _QUICK_EXIT:
        atexit.register(gc.freeze)
        _QUICK_EXIT.append(True)


def main(argv: Sequence[str] | None = None) -> int:
    _exit_quickly()
    args = parse_args(argv)
    early = _start_renderer_early(args)
    try:
        return _run(args)
    finally:
        if early:
            from checks.builtin import tokenizer_early

            tokenizer_early.discard()
        _end_children()


def _end_children() -> None:
    """A check that timed out leaves its thread waiting on a child (the chat-template
    renderer, a slow program): the run ends it rather than leave it to outlive the doctor."""
    spawn = sys.modules.get("probes.spawn")  # nothing started when it was never imported
    if spawn is not None:
        spawn.end_unfinished()


TOKENIZER_CHECKS = ("tokenizer.dtype", "tokenizer.token-ids")  # they render the chat template


def _start_renderer_early(args: argparse.Namespace) -> bool:
    """A run with --model whose tokenizer checks may run: the chat-template renderer's
    child (checks.builtin.tokenizer_early) starts now, so that its interpreter loads on the
    idle core while this one imports the checks. True when it was started."""
    if args.command is not None or not getattr(args, "model", None):
        return False
    wanted = set(TOKENIZER_CHECKS)
    if args.only:
        wanted &= set(args.only)
    if not wanted - set(args.skip):
        return False
    from checks.builtin import tokenizer_early

    tokenizer_early.start()
    return True


def _run(args: argparse.Namespace) -> int:
    try:
        return _dispatch(args)
    except (UsageError, ProbeError) as exc:
        # the message may quote outside text (a member name, a path): one visible line
        print(f"ascend-doctor: {one_line(str(exc))}", file=sys.stderr)
        return exit_code_for(exc)
    except KeyboardInterrupt as exc:
        print("ascend-doctor: interrupted", file=sys.stderr)
        return exit_code_for(exc)
    except BrokenPipeError as exc:
        # the reader (`| head`) went away: not an error of ours, and no traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return exit_code_for(exc)


def _dispatch(args: argparse.Namespace) -> int:
    from checks.cli import commands

    if args.command == "list":
        return commands.cmd_list()
    if args.command == "explain":
        return commands.cmd_explain(args.id)
    if args.command == "playbooks":
        return commands.cmd_playbooks(" ".join(args.text), as_json=args.json)
    if args.command == "npu":
        return commands.cmd_npu(npu_options(args))
    if args.command == "bundle":
        return commands.cmd_bundle(bundle_options(args))
    if args.command == "baseline":
        return commands.cmd_baseline_record(baseline_record_options(args))
    if args.command == "ops":
        return commands.cmd_ops(ops_options(args))
    if args.command == "bench":
        return commands.cmd_bench(bench_options(args))
    if args.command == "triage":
        return commands.cmd_triage(args.inputs, args.pid, args.since, args.json)
    return commands.cmd_run(run_options(args))
