"""The sub-commands of `ascend-doctor` that judge: run, list, explain, playbooks."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from checks.cli import EXIT_OK, EXIT_USAGE, UsageError
from checks.context import Context
from checks.policy import PolicyError, load_policy
from checks.registry import all_checks, select
from checks.report import HostInfo, render_terminal, to_json, to_junit
from checks.runner import run_checks
from probes.host import Host


def cmd_list(console: Console) -> int:
    table = Table(title="ascend-doctor checks", title_justify="left")
    for header in ("id", "category", "looks at"):
        table.add_column(header)
    for check in all_checks():
        table.add_row(check.id, check.category, check.looks_at)
    console.print(table)
    return EXIT_OK


def cmd_explain(playbook_id: str, console: Console) -> int:
    import playbooks

    try:
        book = playbooks.get(playbook_id)
    except playbooks.PlaybookNotFound as exc:
        console.print(Text(f"ascend-doctor: {exc}", style="red"))
        return EXIT_USAGE
    console.print(Markdown(f"# {book.title}\n\n{book.body}"))
    if book.sources:
        console.print(Markdown("**Sources**\n\n" + "\n".join(f"- {s}" for s in book.sources)))
    return EXIT_OK


def cmd_playbooks(text: str, console: Console) -> int:
    import playbooks

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


def _model_dir(args: argparse.Namespace) -> Path | None:
    if not args.model:
        return None
    path = Path(args.model)
    if not path.is_dir():
        raise UsageError(f"--model {args.model}: not a directory (give the model folder "
                         "holding config.json)")
    return path


def _host_info(host: Host, args: argparse.Namespace, policy_source: str) -> HostInfo:
    env = host.python_packages()
    python = env.interpreter or "(none)"
    if env.error:
        python = f"{python} — {env.error}" if env.interpreter else env.error
    return HostInfo(host.description, python, policy_source, args.model)


def cmd_run(args: argparse.Namespace, host: Host, console: Console) -> int:
    try:
        policy = load_policy(Path(args.policy) if args.policy else None)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    try:
        checks = select(all_checks(), args.only, args.skip)
    except KeyError as exc:
        raise UsageError(f"unknown check id {exc.args[0]} (see `ascend-doctor list`)") from None
    ctx = Context(host, policy, _model_dir(args), timeout_s=args.timeout)
    run = run_checks(checks, ctx)
    info = _host_info(host, args, policy.source)
    if args.json:
        print(json.dumps(to_json(run, info), indent=2, ensure_ascii=False))
    else:
        render_terminal(run, info, console, args.verbose)
    if args.junit:
        _write_atomic(Path(args.junit), to_junit(run, info))
    return run.exit_code()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"--junit {path}: cannot write ({exc.strerror or exc})") from None
