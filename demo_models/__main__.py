"""`python -m demo_models`: list the kinds, or build one. Every failure is one line on stderr
and exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from demo_models import COMMAND
from demo_models.base import SCALE_DTYPES, BuildOptions, DemoError
from demo_models.build import build
from demo_models.kinds import KINDS
from engine.errors import EngineError


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def make_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=COMMAND, description="Build the demo models locally, from "
                           "files shipped in PyPI wheels; nothing is downloaded.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    commands.add_parser("list", help="print the kinds, one line each")
    builder = commands.add_parser("build", help="build a demo model directory")
    builder.add_argument("--out", required=True, type=Path, help="output directory")
    builder.add_argument("--kind", required=True, help="one of: " + ", ".join(KINDS))
    builder.add_argument("--scale-dtype", default="bf16", help="bf16 (default), fp16 or fp32")
    builder.add_argument("--shards", default=1, type=int, help="safetensors shards (default 1)")
    builder.add_argument("--force", action="store_true", help="rebuild even if up to date")
    return parser


def options_from(args: argparse.Namespace) -> BuildOptions:
    if args.kind not in KINDS:
        raise DemoError(f"unknown kind {args.kind!r}; choose one of: {', '.join(KINDS)} "
                        f"({COMMAND} list)")
    if args.scale_dtype not in SCALE_DTYPES:
        raise DemoError(f"unknown --scale-dtype {args.scale_dtype!r}; choose one of: "
                        f"{', '.join(SCALE_DTYPES)}")
    if args.shards < 1:
        raise DemoError(f"--shards must be at least 1, got {args.shards}")
    if not KINDS[args.kind].safetensors and (args.shards != 1 or args.scale_dtype != "bf16"):
        raise DemoError(f"--shards and --scale-dtype do not apply to {args.kind} (a GGUF "
                        f"file); drop them")
    return BuildOptions(args.kind, args.scale_dtype, args.shards)


def human_size(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def run_build(args: argparse.Namespace) -> None:
    options = options_from(args)
    built, record = build(args.out, options, force=args.force)
    total = sum(record.get("files", {}).values())
    if built:
        print(f"built {options.kind} in {args.out} ({human_size(total)}, "
              f"{record['build_seconds']} s)")
    else:
        print(f"up to date: {args.out} ({options.kind}, {human_size(total)}); "
              f"--force rebuilds")


def main(argv: Sequence[str] | None = None) -> int:

    args = make_parser().parse_args(argv)
    try:
        if args.command == "list":
            width = max(len(name) for name in KINDS)
            for kind in KINDS.values():
                print(f"{kind.name:<{width}}  {kind.summary}")
        else:
            run_build(args)
    except (DemoError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: Python package {exc.name or exc} is missing; install the project: "
              f"pip install -e .", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc.strerror or exc} ({exc.filename or 'file'}); check the path, "
              f"its permissions and free disk space", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; run the build again", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
