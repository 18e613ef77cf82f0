"""`ascend-doctor`'s argparse parser: the run's options, every sub-command's parser, and the
quick path that builds no sub-command parser for a run without one (most runs).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from checks import TOOL_VERSION
from checks.errors import EXIT_USAGE
from engine.options import DEVICES, DTYPES, FP8_MODES, TRACE_DEVICES
from probes.host import DEFAULT_TIMEOUT_S
from probes.textsafe import cut, one_line


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
        from checks.cli.suggest import hint  # only on this error path: start-up

        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}{hint(self, message)}\n")


def _add_host_options(parser: argparse.ArgumentParser) -> None:
    _add_root(parser)
    parser.add_argument("--from", dest="from_path", metavar="RECORDING",
                        help="answer from a recording (directory or .tar.gz) instead of this host")
    _add_python_and_timeout(parser)


def _add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", metavar="DIR",
                        help="read every file under DIR instead of / (a mounted image, a copy)")


def _add_python_and_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", metavar="PATH",
                        help="interpreter of the deployment whose packages are checked")
    parser.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"timeout of each command in seconds (default {DEFAULT_TIMEOUT_S:g})")


def _seconds(text: str) -> float:
    """A timeout: a finite number of seconds above 0 (0 or less would time every command out)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{one_line(cut(text, 40))!r} is not a number of "
                                         "seconds above 0")
    return value


def _pid(text: str) -> int:
    from probes.numbers import Field, NumberError, parse_int

    try:  # PID_MAX_LIMIT on 64-bit Linux is 2**22 (proc(5), /proc/sys/kernel/pid_max)
        return parse_int(text, Field("--pid", 1, 2**22), max_digits=7)
    except NumberError:
        shown = one_line(cut(text, 40))
        raise argparse.ArgumentTypeError(f"{shown!r} is not a process id (ASCII digits, "
                                         f"1 to {2**22})") from None


def _add_target_options(parser: argparse.ArgumentParser) -> None:
    """Whose deployment is judged: without these, a live run looks for the serving process."""
    parser.add_argument("--pid", type=_pid, metavar="PID",
                        help="judge this serving process: its environment, command line, "
                        "interpreter and files (a container's too) instead of this shell's")
    parser.add_argument("--env-file", metavar="FILE",
                        help="judge this environment (systemd EnvironmentFile, `docker "
                        "inspect` JSON or KEY=VALUE lines) of a service not running yet")


def _tp(text: str) -> int:
    from probes.numbers import Field, NumberError, parse_int

    try:
        return parse_int(text, Field("tensor-parallel size", 1, 4096), max_digits=4)
    except NumberError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    _add_host_options(parser)
    _add_target_options(parser)
    parser.add_argument("--model", metavar="DIR",
                        help="model directory (config.json, safetensors shards, tokenizer)")
    parser.add_argument("--tp", type=_tp, metavar="N",
                        help="tensor-parallel size npu.hbm-fit plans for (default: the "
                        "target's -tp / MindIE worldSize, else the policy's, 1)")
    parser.add_argument("--policy", metavar="FILE", help="policy overrides (YAML)")
    parser.add_argument("--only", type=_csv, default=[], metavar="ID,...",
                        help="run only these checks")
    parser.add_argument("--skip", type=_csv, default=[], metavar="ID,...",
                        help="do not run these checks")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the ascend-doctor/1 JSON report")
    out.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show every check's evidence and rules, one line per skip")
    parser.add_argument("--baseline", metavar="FILE",
                        help="compare with a baseline (ascend-doctor baseline record): adds "
                        "the baseline.drift check")
    served = parser.add_argument_group("serving endpoint (adds the endpoint.* checks)")
    served.add_argument("--endpoint", metavar="URL",
                        help="an OpenAI-compatible server (vLLM, MindIE): http://HOST:PORT/v1")
    served.add_argument("--endpoint-model", metavar="NAME",
                        help="the model /v1/models must list (default: any)")
    served.add_argument("--endpoint-api-key-env", metavar="NAME",
                        help="the environment variable holding its API key (never the key)")
    served.add_argument("--endpoint-metrics", metavar="URL",
                        help="its Prometheus metrics (default: /metrics at the server's root; "
                        "MindIE: its management port)")
    parser.add_argument("--prometheus", metavar="FILE",
                        help="also write the results for node_exporter's textfile collector "
                        "(atomically)")


EPILOG = """commands:
  (none)            run the checks on this machine (or --root DIR, --from RECORDING)
                    judging the serving process: --pid PID, else the one found on the
                    NPUs or by its command line (vllm serve, mindie, torchrun), else this
                    shell; --env-file FILE for a service not running yet
  list              every check: id, category, what it looks at
  explain ID        the playbook of a check or a symptom
  playbooks [TEXT]  list playbooks, or search them by symptom words
  npu               the NPU inventory (live, --from RECORDING, --from-file PASTED)
  bundle            record this machine into one .tar.gz (secrets redacted) for
                    `ascend-doctor --from BUNDLE` anywhere
  baseline record   write a YAML baseline of a validated machine (for --baseline FILE)
  ops               which aten operators --model sends to the device, and whether the
                    device has kernels for them (predicted from torch_npu's registry
                    without an NPU)
  bench             micro-benchmarks of --model's hot operators at its real shapes,
                    against this device's measured copy bandwidth and matmul peak
  triage [FILE|-]   read logs (files, .gz, directories, stdin, or --pid PID's CANN
                    log directories) and rank the error signatures and codes found

examples:
  ascend-doctor                           this machine and the serving process found on it
  ascend-doctor --pid 4242 --verbose      that process, with the evidence of every check
  ascend-doctor --model /models/Qwen3-30B-A3B --tp 4
  ascend-doctor --endpoint http://127.0.0.1:8000/v1 --only endpoint.health,endpoint.smoke
  ascend-doctor --from bundle.tar.gz --json > report.json
  ascend-doctor explain npu.health | less

exit codes: 0 all pass (skips allowed), 1 warnings only, 2 at least one failure,
            3 the doctor itself could not run (bad arguments, unreadable policy,
            --only/--skip leaving no check)
"""


class _NeedsCommands(Exception):
    """The command line may name a sub-command, or asks for help or gets an error: parse it
    again with every sub-command's parser, which says it right."""


class _RunParser(_Parser):
    """The parser of a run without a sub-command (most runs): it builds none of the
    sub-commands' parsers, and hands anything it would print over to the full parser."""

    def error(self, message: str) -> NoReturn:
        raise _NeedsCommands(message)

    def print_help(self, file: Any = None) -> None:
        raise _NeedsCommands("help")


COMMANDS = ("list", "explain", "playbooks", "npu", "bundle", "baseline", "ops", "bench",
            "triage")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line; the sub-commands' parsers are built only when it may need
    them (a token that names one, a help request, an error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not any(token in COMMANDS for token in args):
        parser = _main_parser(_RunParser)
        parser.set_defaults(command=None)
        try:
            return parser.parse_args(args)
        except _NeedsCommands as exc:
            if str(exc).startswith("unrecognized arguments: -"):  # a mistyped option, no command
                build_parser().error(str(exc))
    return build_parser().parse_args(args)


def _main_parser(parser_class: type[_Parser]) -> _Parser:
    parser = parser_class(prog="ascend-doctor", epilog=EPILOG,
                          formatter_class=_RawFormatter,
                          usage="%(prog)s [OPTIONS]\n       %(prog)s COMMAND [OPTIONS]   "
                          "(the commands are listed below)",
                          description="Is this Ascend machine, its software stack and this "
                          "checkpoint ready to serve a Qwen MoE model?")
    _add_run_options(parser)
    parser.add_argument("--version", action="version", version=f"ascend-doctor {TOOL_VERSION}")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _main_parser(_Parser)
    # the commands are listed once, in the epilog: not again as a positional argument
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser,
                                prog="ascend-doctor",  # not the custom usage above
                                help=argparse.SUPPRESS)
    sub.add_parser("list", help="every check: id, category, what it looks at")
    explain = sub.add_parser("explain", help="render the playbook of a check or symptom")
    explain.add_argument("id", metavar="ID")
    books = sub.add_parser(
        "playbooks", help="list playbooks or search them by symptom words, codes or log lines",
        description="Search the playbooks for a symptom, an error code (EZ1001, 507035, -8020), "
        "an exception or library name, or a line pasted from a log, in English or Chinese. "
        "Below the relevance floor it prints 'nothing matched' and the closest playbooks. "
        "Exit code 0 whether or not anything matched.")
    books.add_argument("text", nargs="*", metavar="TEXT")
    books.add_argument("--json", action="store_true",
                       help="print the ascend-playbooks/1 JSON document: query, results "
                       "(id, title, kind, score), closest (the same fields, when nothing matched)")
    npu = sub.add_parser("npu", help="NPU inventory of this machine, a recording or a pasted "
                         "npu-smi output", description="Print the NPU inventory.")
    _add_host_options(npu)
    npu.add_argument("--from-file", metavar="FILE",
                     help="parse a pasted npu-smi output (any kind, detected); - for stdin")
    npu.add_argument("--json", action="store_true", help="print the ascend-npu/1 JSON document")
    _add_bundle_parser(sub)
    _add_baseline_parser(sub)
    _add_ops_parser(sub)
    _add_bench_parser(sub)
    _add_triage_parser(sub)
    return parser


def _add_triage_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    triage = sub.add_parser(
        "triage", help="read logs and rank the error signatures and codes in them",
        description="Read logs (pasted text on stdin with -, vLLM/MindIE service logs, CANN "
        "plogs and device logs, .gz files, directories) in bounded memory and rank what is "
        "recognised, the earliest cause first, citing file:line. Without FILE it reads the "
        "CANN log directories of --pid PID, or of the serving process it finds. Exit 0: "
        "nothing recognised; 1: something recognised; 3: the input could not be read.")
    triage.add_argument("inputs", nargs="*", metavar="FILE",
                        help="log files, .gz files or directories; - reads stdin")
    triage.add_argument("--pid", type=_pid, metavar="PID",
                        help="read this process's CANN log directories (its environment, "
                        "HOME and root)")
    triage.add_argument("--since", metavar="DURATION",
                        help="only files written within DURATION (90s, 30m, 2h, 1d)")
    triage.add_argument("--json", action="store_true",
                        help="print the ascend-triage/1 JSON document")


def _add_ops_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    ops = sub.add_parser(
        "ops", help="which operators the model sends to the device, and their kernels",
        description="Trace one prefill and one decode step of --model on the meta device "
        "(config.json is enough: no weights are read or allocated) and list every aten "
        "operator that reaches the device, with its calls, dtypes, shapes and where in the "
        "model it is called; then say whether the device has a kernel for it. With torch_npu "
        "importable the dispatcher is asked; without it `--device npu` predicts from "
        "torch_npu's published operator registry for --torch-npu VERSION, the torch_npu of "
        "--python PATH, or this torch's line. Exit 1 when an operator has no kernel.")
    ops.add_argument("--model", metavar="DIR", required=True,
                     help="model directory (config.json; shards are not needed)")
    ops.add_argument("--device", choices=TRACE_DEVICES, default="npu",
                     help="the device whose kernels are asked about (default npu)")
    ops.add_argument("--torch-npu", metavar="VERSION",
                     help="predict for this torch_npu release (e.g. 2.5.1.post3)")
    ops.add_argument("--python", metavar="PATH",
                     help="predict for the torch_npu installed in this interpreter")
    ops.add_argument("--dtype", default="bfloat16", choices=DTYPES,
                     help="compute dtype the engine would use (default bfloat16)")
    ops.add_argument("--fp8", default="dequantize", choices=FP8_MODES,
                     help="FP8 checkpoints: dequantise at load (default) or keep FP8 resident")
    ops.add_argument("--json", action="store_true", help="print the ascend-doctor-ops/1 document")


def _add_bench_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    bench = sub.add_parser(
        "bench", help="micro-benchmarks of the model's hot operators at its real shapes",
        description="Time the model's hot operators at its real shapes and dtypes (decode "
        "GEMV of each projection, expert GEMMs at typical tokens per expert, attention at "
        "several context lengths, the DeltaNet recurrent step, router top-k, RMSNorm) with "
        "random tensors of one layer (a 35B model allocates one layer's tensors, not 35B), "
        "and compare each with this device's copy bandwidth and matmul peak measured in the "
        "same run. Exit 1 when --compare finds an operator slower than --slower-pct.")
    bench.add_argument("--model", metavar="DIR", required=True,
                       help="model directory (config.json is enough)")
    bench.add_argument("--device", choices=DEVICES, default="auto",
                       help="where to run (default auto: npu, then cuda, then cpu)")
    bench.add_argument("--dtype", default="bfloat16", choices=DTYPES,
                       help="compute dtype (default bfloat16)")
    bench.add_argument("--fp8", default="dequantize", choices=FP8_MODES,
                       help="FP8 checkpoints: time BF16 weights (default: dequantised at load) "
                       "or FP8-resident weights dequantised per use")
    bench.add_argument("--json", action="store_true",
                       help="print the ascend-doctor-bench/1 document")
    bench.add_argument("-o", "--output", metavar="FILE",
                       help="also write the document to FILE (to --compare on another machine)")
    bench.add_argument("--compare", metavar="FILE",
                       help="a document recorded elsewhere: which operators got slower, by how "
                       "much")
    bench.add_argument("--slower-pct", type=float, default=10.0, metavar="PCT",
                       help="report operators slower than this (default 10)")
    bench.add_argument("--quick", action="store_true",
                       help="fewer samples and context lengths (a smoke run, noisier)")


def _add_live_host_options(parser: argparse.ArgumentParser) -> None:
    """--root/--python/--timeout: what a recording is made of (no --from: it records)."""
    _add_root(parser)
    _add_python_and_timeout(parser)
    parser.add_argument("--model", metavar="DIR",
                        help="model directory (config.json, safetensors shards, tokenizer)")
    _add_target_options(parser)
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
    _add_target_options(record)
    record.add_argument("--model", metavar="DIR",
                        help="also fingerprint this model directory's tokenizer")
    record.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
