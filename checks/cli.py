"""`ascend-doctor` command line.

Exit codes: 0 all pass, 1 warnings only, 2 at least one failure (or, for `npu`, an
npu-smi error), 3 the doctor itself could not run (bad arguments, unreadable input).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from probes.errors import ProbeError
from probes.host import DEFAULT_TIMEOUT_S, Host

EXIT_OK, EXIT_WARN, EXIT_FAIL, EXIT_USAGE = 0, 1, 2, 3


class UsageError(Exception):
    """The doctor cannot run: the message is one line naming what to fix."""


def _columns() -> int:
    """What shutil.get_terminal_size() says, without importing shutil (and with it bz2 and
    lzma) on every run: $COLUMNS, else the terminal's width, else 80."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    stdout = sys.__stdout__
    try:
        return os.get_terminal_size(stdout.fileno()).columns if stdout else 80
    except (ValueError, OSError):  # closed, or not a terminal
        return 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         width if width is not None else _columns() - 2)


class _RawFormatter(_Formatter, argparse.RawDescriptionHelpFormatter):
    pass


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _add_host_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", metavar="DIR",
                        help="read every file under DIR instead of / (a mounted image, a copy)")
    parser.add_argument("--from", dest="from_path", metavar="RECORDING",
                        help="answer from a recording (directory or .tar.gz) instead of this host")
    parser.add_argument("--python", metavar="PATH",
                        help="interpreter of the deployment whose packages are checked")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"timeout of each command in seconds (default {DEFAULT_TIMEOUT_S:g})")


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    _add_host_options(parser)
    parser.add_argument("--model", metavar="DIR",
                        help="model directory (config.json, safetensors shards, tokenizer)")
    parser.add_argument("--policy", metavar="FILE", help="policy overrides (YAML)")
    parser.add_argument("--only", type=_csv, default=[], metavar="ID,...",
                        help="run only these checks")
    parser.add_argument("--skip", type=_csv, default=[], metavar="ID,...",
                        help="do not run these checks")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the ascend-doctor/1 JSON report")
    out.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show the evidence of passing checks too")
    parser.add_argument("--baseline", metavar="FILE",
                        help="compare with a baseline (ascend-doctor baseline record): adds "
                        "the baseline.drift check")
    parser.add_argument("--prometheus", metavar="FILE",
                        help="also write the results for node_exporter's textfile collector "
                        "(atomically)")


EPILOG = """commands:
  (none)            run the checks on this machine (or --root DIR, --from RECORDING)
  list              every check: id, category, what it looks at
  explain ID        the playbook of a check or a symptom
  playbooks [TEXT]  list playbooks, or search them by symptom words
  npu               the NPU inventory (live, --from RECORDING, --from-file PASTED)
  bundle            record this machine into one .tar.gz (secrets redacted) for
                    `ascend-doctor --from BUNDLE` anywhere
  baseline record   write a YAML baseline of a validated machine (for --baseline FILE)

exit codes: 0 all pass (skips allowed), 1 warnings only, 2 at least one failure,
            3 the doctor itself could not run (bad arguments, unreadable policy)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ascend-doctor", epilog=EPILOG,
                     formatter_class=_RawFormatter,
                     description="Is this Ascend machine, its software stack and this "
                     "checkpoint ready to serve a Qwen MoE model?")
    _add_run_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.add_parser("list", help="every check: id, category, what it looks at")
    explain = sub.add_parser("explain", help="render the playbook of a check or symptom")
    explain.add_argument("id", metavar="ID")
    books = sub.add_parser("playbooks", help="list playbooks or search them by symptom words")
    books.add_argument("text", nargs="*", metavar="TEXT")
    npu = sub.add_parser("npu", help="NPU inventory of this machine, a recording or a pasted "
                         "npu-smi output", description="Print the NPU inventory.")
    _add_host_options(npu)
    npu.add_argument("--from-file", metavar="FILE",
                     help="parse a pasted npu-smi output (any kind, detected); - for stdin")
    npu.add_argument("--json", action="store_true", help="print the ascend-npu/1 JSON document")
    _add_bundle_parser(sub)
    _add_baseline_parser(sub)
    return parser


def _add_live_host_options(parser: argparse.ArgumentParser) -> None:
    """--root/--python/--timeout: what a recording is made of (no --from: it records)."""
    parser.add_argument("--root", metavar="DIR",
                        help="read every file under DIR instead of / (a mounted image, a copy)")
    parser.add_argument("--python", metavar="PATH",
                        help="interpreter of the deployment whose packages are checked")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"timeout of each command in seconds (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--model", metavar="DIR",
                        help="model directory (config.json, safetensors shards, tokenizer)")
    parser.set_defaults(from_path=None)


def _add_bundle_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    bundle = sub.add_parser(
        "bundle", help="record this machine into one .tar.gz for diagnosis elsewhere",
        description="Run every check through a recorder and write one .tar.gz: the recording, "
        "the JSON report, the tails of the newest CANN plog files and the console's newest "
        "metric recording (from its default place on the observed machine, "
        "$ASCEND_CONSOLE_RECORDINGS > $XDG_STATE_HOME/ascend-console/recordings > "
        "~/.local/state/ascend-console/recordings, or --metrics FILE). Secret-looking values "
        "are redacted before anything is written. "
        "Replay it anywhere with `ascend-doctor --from FILE`.")
    _add_live_host_options(bundle)
    bundle.add_argument("-o", "--output", metavar="FILE",
                        help="the bundle to write (default ascend-bundle-HOST-TIME.tar.gz here)")
    bundle.add_argument("--policy", metavar="FILE", help="policy overrides (YAML)")
    bundle.add_argument("--redact-hostnames", action="store_true",
                        help="also replace host names and IP addresses (host-1, ip-1, ...)")
    bundle.add_argument("--metrics", metavar="FILE",
                        help="the console's metric recording to include (default: the newest "
                             "*.sqlite in the default place, when one is there)")
    bundle.add_argument("--no-logs", action="store_true", help="leave the plog tails out")


def _add_baseline_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    baseline = sub.add_parser("baseline", help="record a baseline of a validated machine",
                              description="Baselines for `ascend-doctor --baseline FILE`.")
    actions = baseline.add_subparsers(dest="baseline_command", metavar="ACTION",
                                      parser_class=_Parser, required=True)
    record = actions.add_parser(
        "record", help="write the YAML baseline of this machine",
        description="Versions (driver, firmware, CANN, NNAL, MindIE, torch, torch_npu, "
        "transformers, tokenizers, vLLM), the ASCEND_* environment, the NPU inventory and, "
        "with --model, a tokenizer fingerprint.")
    _add_host_options(record)
    record.add_argument("--model", metavar="DIR",
                        help="also fingerprint this model directory's tokenizer")
    record.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")


def make_host(args: argparse.Namespace) -> Host:
    if args.from_path and args.root:
        raise UsageError("--from and --root exclude each other: a recording has its own root")
    if args.from_path:
        from probes.recording import SnapshotHost

        try:
            return SnapshotHost(Path(args.from_path))
        except (ValueError, OSError) as exc:
            # defence in depth: a hostile bundle may find a path the reader does not turn
            # into a SnapshotError (a NUL in a member name); it is still one line, exit 3
            raise UsageError(f"--from {args.from_path}: not a readable recording "
                             f"({type(exc).__name__}: {exc})") from None
    from probes.live import LiveHost

    root = args.root or "/"
    if not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory")
    return LiveHost(root=root, python=args.python, default_timeout_s=args.timeout)


def _read_input(path: str) -> str:
    # one byte over the limit is enough for the parser to refuse it (and a huge file is not read)
    from probes.npu_smi.registry import MAX_INPUT_BYTES

    if path == "-":
        return sys.stdin.read(MAX_INPUT_BYTES + 1)
    try:
        with Path(path).open("rb") as stream:
            return stream.read(MAX_INPUT_BYTES + 1).decode("utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None


def cmd_npu(args: argparse.Namespace) -> int:
    from probes.inventory import parse_output, read_live

    if args.from_file:
        reading = parse_output(_read_input(args.from_file), args.from_file)
    else:
        reading = read_live(make_host(args), timeout_s=args.timeout)
    if args.json:
        print(json.dumps(reading.document, indent=2, ensure_ascii=False))
    else:
        from checks.npu_view import render
        from checks.terminal import make_console

        render(reading, make_console())
    return EXIT_FAIL if reading.is_error else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except (UsageError, ProbeError) as exc:
        print(f"ascend-doctor: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("ascend-doctor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader (`| head`) went away: not an error of ours, and no traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _dispatch(args: argparse.Namespace) -> int:
    from checks import commands

    if args.command == "npu":
        return cmd_npu(args)
    if args.command == "list":
        return commands.cmd_list()
    if args.command == "explain":
        return commands.cmd_explain(args.id)
    if args.command == "playbooks":
        return commands.cmd_playbooks(" ".join(args.text))
    if args.command == "bundle":
        from checks.bundle import cmd_bundle

        return cmd_bundle(args, make_host(args))
    if args.command == "baseline":
        from checks.baseline import cmd_baseline_record

        return cmd_baseline_record(args, make_host(args))
    return commands.cmd_run(args, make_host(args))


if __name__ == "__main__":
    # `python -m checks.cli` loads this file twice (as __main__ and as checks.cli): run the
    # imported module's main so the errors raised by checks.commands are the ones it catches
    from checks.cli import main as _main

    sys.exit(_main())
