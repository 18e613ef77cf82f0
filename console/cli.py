"""`ascend-console`: parse the command line, build ConsoleOptions, run the app.

Textual is imported only after the arguments are accepted, so `--help` and usage errors are
instant. A bad argument is one line on stderr and exit code 3 (as for ascend-doctor).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from console.engine_worker import DEMO_KIND, DEMO_KINDS, ModelSpec, demo_dir
from console.recording import (
    Player,
    RecordingError,
    default_recordings_dir,
    new_recording_path,
)
from probes.textsafe import one_line

if TYPE_CHECKING:
    from console.app import ConsoleOptions

USAGE_EXIT = 3
DEVICES = ("auto", "npu", "cuda", "cpu")
DTYPES = ("bfloat16", "float16", "float32")

DESCRIPTION = """\
The operations console: chat with a model running in this process, beside live NPU,
memory-pressure, engine and host panels, with the doctor and the playbooks one key away.

With no arguments it loads the smollm2-moe-fp8 demo model (built by `make demo`) and
watches this machine."""

EPILOG = """\
keys: Enter send · Esc cancel the reply (or leave the prompt) · d doctor · / playbooks ·
      ? help · r record · y copy the last reply · ctrl+s save the chat · ctrl+p every action ·
      q quit

examples:
  ascend-console                                  demo model, live panels
  ascend-console --model /models/Qwen3-30B-A3B-FP8 --device npu
  ascend-console --record /var/tmp/box.db         watch and record telemetry
  ascend-console --record                         record to the default place (bundled)
  ascend-console --replay box.db --read-only      replay a recording (labelled REPLAY)
  ascend-console --root /mnt/image --msprof ./PROF_000001

demo models are looked for in demo-assets/KIND next to the source, or in
$ASCEND_CONSOLE_DEMO_DIR; build one with
  python -m engine.demo build --out demo-assets/KIND --kind KIND"""


class _DefaultPlace(str):
    """`--record` given without FILE: a new file in the default place of recordings."""


_DEFAULT_PLACE = _DefaultPlace("(default place)")


class UsageError(Exception):
    """A bad command line: one line, exit code 3."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ascend-console", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    model = parser.add_argument_group("model")
    which = model.add_mutually_exclusive_group()
    which.add_argument("--model", metavar="PATH",
                       help="a Hugging Face model directory or .gguf file to chat with")
    which.add_argument("--demo-model", metavar="KIND", choices=DEMO_KINDS,
                       help=f"a demo build: {', '.join(DEMO_KINDS)} (default {DEMO_KIND})")
    which.add_argument("--no-model", action="store_true",
                       help="panels only: load no model")
    model.add_argument("--device", choices=DEVICES, default="auto",
                       help="where the engine runs (default auto: npu, then cuda, then cpu)")
    model.add_argument("--dtype", choices=DTYPES, default="bfloat16",
                       help="compute dtype (default bfloat16)")
    model.add_argument("--fp8", choices=("dequantize", "resident"), default="dequantize",
                       help="FP8 checkpoints: dequantise at load, or keep FP8 resident")
    model.add_argument("--max-seq-len", type=int, default=4096, metavar="N",
                       help="KV cache length in tokens (default 4096)")
    panels = parser.add_argument_group("panels")
    panels.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="telemetry sampling interval (default 2)")
    panels.add_argument("--policy", metavar="FILE",
                        help="policy YAML overriding the thresholds (see checks/policy.yaml)")
    panels.add_argument("--root", metavar="DIR", default=None,
                        help="read the machine's files under DIR (a mounted image or a copy)")
    panels.add_argument("--msprof", metavar="DIR",
                        help="an msprof output directory: show its bank-conflict ratios")
    panels.add_argument("--log-dir", metavar="DIR", default=None,
                        help="the directory whose disk the host panel watches (default: the "
                             "CANN application log directory, ASCEND_PROCESS_LOG_PATH > "
                             "ASCEND_WORK_PATH > $HOME/ascend/log)")
    rec = parser.add_argument_group("recording")
    rec.add_argument("--record", metavar="FILE", nargs="?", const=_DEFAULT_PLACE,
                     help="append every telemetry sample to this SQLite file; without FILE, "
                          "a new HOST-UTCTIME.sqlite in $ASCEND_CONSOLE_RECORDINGS, else "
                          "$XDG_STATE_HOME/ascend-console/recordings, else "
                          "~/.local/state/ascend-console/recordings (where `ascend-doctor "
                          "bundle` looks)")
    rec.add_argument("--replay", metavar="FILE",
                     help="play a recording instead of sampling this machine")
    rec.add_argument("--speed", type=float, default=1.0, metavar="X",
                     help="replay speed (1 = real time, 0 = as fast as possible)")
    parser.add_argument("--read-only", action="store_true",
                        help="disable everything that changes state (recording)")
    return parser


def parse_options(argv: Sequence[str] | None = None) -> ConsoleOptions:
    """The ConsoleOptions for argv; raises UsageError with one line."""
    from console.app import ConsoleOptions  # textual only once the arguments are accepted

    args = make_parser().parse_args(argv)
    _validate(args)
    recordings_dir = _recordings_dir()
    record: Path | None = None
    if args.record is _DEFAULT_PLACE:
        record = new_recording_path(recordings_dir)
    elif args.record:
        record = Path(args.record)
    return ConsoleOptions(
        model=_model_spec(args), interval_s=args.interval,
        npu_timeout_s=min(5.0, max(1.0, 2.5 * args.interval)),
        policy_path=Path(args.policy) if args.policy else None,
        record=record, recordings_dir=recordings_dir,
        replay=Path(args.replay) if args.replay else None, replay_speed=args.speed,
        root=args.root or "/", msprof=Path(args.msprof) if args.msprof else None,
        read_only=args.read_only, log_dir=args.log_dir or _cann_log_dir())


def _recordings_dir() -> Path:
    return default_recordings_dir(os.environ).expanduser()


def _cann_log_dir() -> str | None:
    # CANN never rotates application logs: their disk is the one that fills (PATHS.md §5)
    import os

    from probes.environment import resolve_log_dir

    return resolve_log_dir(os.environ).path


def _validate(args: argparse.Namespace) -> None:
    if not 0.1 <= args.interval <= 3600:
        raise UsageError(f"--interval {args.interval:g}: use 0.1 to 3600 seconds")
    if args.max_seq_len < 16:
        raise UsageError(f"--max-seq-len {args.max_seq_len}: use at least 16")
    if args.speed < 0:
        raise UsageError(f"--speed {args.speed:g}: use 0 (as fast as possible) or more")
    if args.record and args.replay:
        raise UsageError("--record and --replay together: replay a copy, or record live")
    if args.record and args.read_only:
        raise UsageError("--record with --read-only: recording writes a file; drop one")
    if args.replay and not Path(args.replay).is_file():
        raise UsageError(f"--replay {args.replay}: no such file (make one with --record FILE)")
    if args.replay:
        try:  # what is not a recording is refused here, in one line, before the app starts
            Player(args.replay, speed=args.speed)
        except RecordingError as exc:
            raise UsageError(f"--replay {exc}") from None
    if args.policy and not Path(args.policy).is_file():
        raise UsageError(f"--policy {args.policy}: no such file")
    if args.root and not Path(args.root).is_dir():
        raise UsageError(f"--root {args.root}: not a directory")
    if args.msprof and not Path(args.msprof).is_dir():
        raise UsageError(f"--msprof {args.msprof}: not a directory (give msprof's PROF_* "
                         "output folder)")
    if args.model and not Path(args.model).exists():
        raise UsageError(f"--model {args.model}: no such directory or .gguf file")


def _model_spec(args: argparse.Namespace) -> ModelSpec | None:
    if args.no_model:
        return None
    common = {"device": args.device, "dtype": args.dtype, "max_seq_len": args.max_seq_len,
              "fp8": args.fp8}
    if args.model:
        return ModelSpec(Path(args.model), **common)
    kind = args.demo_model or DEMO_KIND
    return ModelSpec(demo_dir(kind, os.environ), demo_kind=kind, **common)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = parse_options(argv)
    except UsageError as exc:
        print(f"ascend-console: {one_line(str(exc))} (see ascend-console --help)",
              file=sys.stderr)
        return USAGE_EXIT
    from checks.policy import PolicyError
    from console.app import ConsoleApp

    try:
        app = ConsoleApp(options)
    except PolicyError as exc:
        print(f"ascend-console: {one_line(str(exc))}", file=sys.stderr)
        return USAGE_EXIT
    result = app.run()
    # a crash inside the app leaves a traceback and return_code 1: never exit 0 after one
    return app.return_code or int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
