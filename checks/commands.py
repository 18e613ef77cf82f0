"""The sub-commands of `ascend-doctor` that judge: run, list, explain, playbooks."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from checks.cli import EXIT_OK, EXIT_USAGE, UsageError
from checks.context import Context
from checks.policy import PolicyError, load_policy
from checks.registry import all_checks, select
from checks.report import HostInfo, to_json, to_junit
from checks.runner import run_checks
from checks.terminal import make_console
from probes.errors import NotRecorded, ProbeError
from probes.host import Host

if TYPE_CHECKING:
    from checks.baseline import Baseline


def cmd_list() -> int:
    from rich.table import Table

    console = make_console()
    table = Table(title="ascend-doctor checks", title_justify="left")
    for header in ("id", "category", "looks at"):
        table.add_column(header)
    for check in all_checks():
        table.add_row(check.id, check.category, check.looks_at)
    console.print(table)
    return EXIT_OK


def cmd_explain(playbook_id: str) -> int:
    from rich.markdown import Markdown
    from rich.text import Text

    import playbooks
    from checks.sources_view import print_sources

    console = make_console()
    try:
        book = playbooks.get(playbook_id)
    except playbooks.PlaybookNotFound as exc:
        console.print(Text(f"ascend-doctor: {exc}", style="red"))
        return EXIT_USAGE
    console.print(Markdown(f"# {book.title}\n\n{book.body}"))
    if book.sources:
        print_sources(console, book.sources)
    return EXIT_OK


def cmd_playbooks(text: str) -> int:
    from rich.table import Table
    from rich.text import Text

    import playbooks

    console = make_console()
    table = Table(title=f"playbooks matching '{text}'" if text else "playbooks",
                  title_justify="left")
    for header in ("id", "kind", "title"):
        table.add_column(header)
    found = ([b for b, _ in playbooks.search(text, limit=10)] if text
             else list(playbooks.load_all()))
    for book in found:
        table.add_row(book.id, book.kind, book.title)
    console.print(table if found else Text(f"no playbook matches '{text}'"))
    if found:
        console.print(Text("read one with: ascend-doctor explain ID", style="dim"))
    return EXIT_OK


def model_dir_arg(args: argparse.Namespace, host: Host) -> Path | None:
    """The --model directory, a path on the observed machine (under --root, in a recording)."""
    if not args.model:
        return None
    path = os.path.abspath(args.model) if not args.root and not args.from_path else args.model
    try:
        kind = host.kind(path)
    except NotRecorded:
        return Path(path)  # the checks say what the recording lacks
    except ProbeError:
        kind = "missing"
    if kind != "dir":
        raise UsageError(f"--model {args.model}: not a directory on the observed machine "
                         "(give the model folder holding config.json)")
    return Path(path)


def host_info(ctx: Context, args: argparse.Namespace, policy_source: str) -> HostInfo:
    from checks.builtin import facts

    host = ctx.host
    env = facts.python(ctx)  # read once per run, shared with the checks
    python = env.interpreter or "(none)"
    if env.error:
        python = f"{python} — {env.error}" if env.interpreter else env.error
    return HostInfo(host.description, python, policy_source, args.model)


def cmd_run(args: argparse.Namespace, host: Host) -> int:
    try:
        policy = load_policy(Path(args.policy) if args.policy else None)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    try:
        checks = select(all_checks(), args.only, args.skip)
    except KeyError as exc:
        raise UsageError(f"unknown check id {exc.args[0]} (see `ascend-doctor list`)") from None
    ctx = Context(host, policy, model_dir_arg(args, host), timeout_s=args.timeout,
                  baseline=_baseline(args))
    run = run_checks(checks, ctx)
    info = host_info(ctx, args, policy.source)
    if args.json:
        print(json.dumps(to_json(run, info), indent=2, ensure_ascii=False))
    else:
        from checks.report_terminal import render_terminal

        render_terminal(run, info, sys.stdout, args.verbose)
    if args.junit:
        _write_atomic(Path(args.junit), to_junit(run, info))
    if getattr(args, "prometheus", None):
        from checks.prom import to_prometheus, write_prometheus

        write_prometheus(Path(args.prometheus), to_prometheus(run))
    return run.exit_code()


def _baseline(args: argparse.Namespace) -> Baseline | None:
    """The --baseline file, loaded before any check runs: a bad file is exit 3, not a skip."""
    if not getattr(args, "baseline", None):
        return None
    from checks.baseline import BaselineError, load_baseline

    try:
        return load_baseline(Path(args.baseline))
    except BaselineError as exc:
        raise UsageError(str(exc)) from None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"--junit {path}: cannot write ({exc.strerror or exc})") from None
