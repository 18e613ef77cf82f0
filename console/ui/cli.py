"""`ascend-console`: parse the command line, build ConsoleOptions, run the app.

Textual is imported only after the arguments are accepted, so `--help` and usage errors are
instant. A bad argument is one line on stderr and exit code 3 (as for ascend-doctor).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from checks import TOOL_VERSION
from checks.errors import ExitCode, UsageError
from console.chat.local import DEMO_KIND, DEMO_KINDS, ModelSpec, demo_dir, model_problem
from console.target import TargetError, check_pid, find
from engine.options import DEVICES, DTYPES, FP8_MODES
from probes.recordings import default_recordings_dir, new_recording_path
from probes.textsafe import one_line

if TYPE_CHECKING:
    from console.chat.openai import EndpointSpec
    from console.options import ConsoleOptions


DESCRIPTION = """\
The operations console: chat with a model running in this process or behind an
OpenAI-compatible endpoint (vLLM, vllm-ascend, MindIE), beside live NPU (this machine's
npu-smi or NPU-Exporters), serving, memory-pressure, engine and host panels, with the doctor
and the playbooks one key away.

With no arguments it loads the smollm2-moe-fp8 demo model (built by `make demo`) and
watches this machine."""

EPILOG = """\
keys (from the prompt too): F1 help · F2 panels/chat · F3 doctor · F4 playbooks ·
      Ctrl+R record · Ctrl+S save the chat · Ctrl+P every action · Ctrl+C quit
      Enter send · Esc cancel the reply (or leave the prompt; then d, /, ?, r, y, q work)

examples:
  ascend-console                                  demo model, live panels
  ascend-console --model /models/Qwen3-30B-A3B-FP8 --device npu
  ascend-console --endpoint http://10.0.0.5:8000/v1 --npu-exporter http://10.0.0.5:8082 \
                 --npu-exporter http://10.0.0.6:8082
  OPENAI_API_KEY=... ascend-console --endpoint https://serving.example/v1 \
                 --endpoint-api-key-env OPENAI_API_KEY --endpoint-model qwen3-30b-a3b
  ascend-console --no-model --prometheus http://prometheus:9090   the fleet (key f)
  ascend-console --record /var/tmp/box.db         watch and record telemetry
  ascend-console --record                         record to the default place (bundled)
  ascend-console --replay box.db --read-only      replay a recording (labelled REPLAY)
  ascend-console --root /mnt/image --msprof ./PROF_000001

demo models are looked for in demo-assets/KIND next to the source, or in
$ASCEND_CONSOLE_DEMO_DIR; build one with
  python -m demo_models build --out demo-assets/KIND --kind KIND"""


class _DefaultPlace(str):
    """`--record` given without FILE: a new file in the default place of recordings."""


_DEFAULT_PLACE = _DefaultPlace("(default place)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        from checks.cli.suggest import hint  # only on this error path: start-up

        raise UsageError(message + hint(self, message))


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ascend-console", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    model = parser.add_argument_group("model")
    which = model.add_mutually_exclusive_group()
    which.add_argument("--model", metavar="PATH",
                       help="a Hugging Face model directory or .gguf file to chat with; with "
                            "--endpoint, the served model's NAME (default: the first listed)")
    which.add_argument("--demo-model", metavar="KIND", choices=DEMO_KINDS,
                       help=f"a demo build: {', '.join(DEMO_KINDS)} (default {DEMO_KIND})")
    which.add_argument("--no-model", action="store_true",
                       help="panels only: load no model")
    model.add_argument("--device", choices=DEVICES, default="auto",
                       help="where the engine runs (default auto: npu, then cuda, then cpu)")
    model.add_argument("--dtype", choices=DTYPES, default="bfloat16",
                       help="compute dtype (default bfloat16)")
    model.add_argument("--fp8", choices=FP8_MODES, default="dequantize",
                       help="FP8 checkpoints: dequantise at load, or keep FP8 resident")
    model.add_argument("--max-seq-len", type=int, default=4096, metavar="N",
                       help="KV cache length in tokens (default 4096)")
    remote = parser.add_argument_group("serving endpoint")
    remote.add_argument("--endpoint", metavar="URL",
                        help="chat with an OpenAI-compatible server (http://HOST:PORT/v1) "
                             "instead of a model in this process; its /metrics feeds the "
                             "serving panel")
    # the same names as ascend-doctor's; the older spellings stay as aliases
    remote.add_argument("--endpoint-model", metavar="NAME",
                        help="the served model to chat with (default: the first /v1/models "
                             "lists; --model NAME with --endpoint says the same)")
    remote.add_argument("--endpoint-api-key-env", "--api-key-env", dest="api_key_env",
                        metavar="NAME",
                        help="the environment variable holding the endpoint's API key (a key "
                             "is never taken from the command line)")
    remote.add_argument("--endpoint-metrics", "--metrics-url", dest="metrics_url",
                        metavar="URL",
                        help="where the serving panel scrapes (default: /metrics at the "
                             "endpoint's root; MindIE serves it on its management port)")
    remote.add_argument("--connect-timeout", type=float, default=5.0, metavar="SECONDS",
                        help="endpoint connect timeout (default 5)")
    remote.add_argument("--first-token-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="longest wait for a reply's first token (default 120)")
    remote.add_argument("--idle-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="longest silence between streamed chunks (default 60)")
    panels = parser.add_argument_group("panels")
    panels.add_argument("--npu-exporter", metavar="URL", action="append", default=[],
                        help="read NPU telemetry from this NPU-Exporter (http://HOST:8082) "
                             "instead of the local npu-smi; repeat for several hosts")
    panels.add_argument("--prometheus", metavar="URL",
                        help="read every node's NPU-Exporter series (and the doctor's "
                             "--prometheus results) from this Prometheus server for the fleet "
                             "view (key f); see docs/fleet.md")
    panels.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="telemetry sampling interval (default 2)")
    panels.add_argument("--policy", metavar="FILE",
                        help="policy YAML overriding the thresholds (see checks/policy.yaml)")
    panels.add_argument("--root", metavar="DIR", default=None,
                        help="read the machine's files under DIR (a mounted image or a copy)")
    panels.add_argument("--pid", type=int, metavar="PID", default=None,
                        help="the serving process the host panel and the doctor screen judge "
                             "(default: the one found on the NPUs or by its command line, as "
                             "ascend-doctor finds it)")
    panels.add_argument("--msprof", metavar="DIR",
                        help="an msprof output directory: show its bank-conflict ratios")
    panels.add_argument("--log-dir", metavar="DIR", default=None,
                        help="the directory whose disk the host panel watches (default: the "
                             "CANN application log directory, ASCEND_PROCESS_LOG_PATH > "
                             "$ASCEND_WORK_PATH/log > $HOME/ascend/log)")
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
    parser.add_argument("--version", action="version", version=f"ascend-console {TOOL_VERSION}")
    parser.add_argument("--read-only", action="store_true",
                        help="disable everything that changes state (recording)")
    return parser


def parse_options(argv: Sequence[str] | None = None) -> ConsoleOptions:
    """The ConsoleOptions for argv; raises UsageError with one line."""
    from console.options import ConsoleOptions

    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a == "--api-key" or a.startswith("--api-key=") for a in argv):
        raise UsageError("--api-key: a key on the command line is visible to every user "
                         "(ps); put it in an environment variable and pass --api-key-env NAME")
    args = make_parser().parse_args(argv)
    _validate(args)
    recordings_dir = _recordings_dir()
    record: Path | None = None
    if args.record is _DEFAULT_PLACE:
        record = new_recording_path(recordings_dir)
    elif args.record:
        record = Path(args.record)
    endpoint = _endpoint_spec(args)
    return ConsoleOptions(
        model=None if endpoint is not None else _model_spec(args), endpoint=endpoint,
        serving_metrics_url=_serving_metrics_url(args),
        npu_exporters=tuple(args.npu_exporter), interval_s=args.interval,
        prometheus_url=_prometheus_url(args),
        npu_timeout_s=min(5.0, max(1.0, 2.5 * args.interval)),
        policy_path=Path(args.policy) if args.policy else None,
        record=record, recordings_dir=recordings_dir,
        replay=Path(args.replay) if args.replay else None, replay_speed=args.speed,
        root=args.root or "/", pid=args.pid,
        msprof=Path(args.msprof) if args.msprof else None,
        read_only=args.read_only, log_dir=args.log_dir)


def _recordings_dir() -> Path:
    return default_recordings_dir(os.environ).expanduser()


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
        # lazy: the recorder brings every telemetry source, which --help does not need
        from console.recording import Player, RecordingError

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
    if args.model and not args.endpoint:
        problem = model_problem(Path(args.model))
        if problem is not None:
            raise UsageError(f"--model {one_line(problem)}")
    _validate_remote(args)


def _validate_remote(args: argparse.Namespace) -> None:
    from console.exporter import metrics_url as exporter_url
    from probes.http import EndpointURLError, check_url

    if args.endpoint and (args.demo_model or args.no_model):
        raise UsageError("--endpoint chats with the server: drop --demo-model/--no-model")
    if (args.api_key_env or args.metrics_url or args.endpoint_model) and not args.endpoint:
        raise UsageError("--endpoint-model, --endpoint-api-key-env and --endpoint-metrics go "
                         "with --endpoint URL")
    if args.endpoint_model and args.model:
        raise UsageError("--endpoint-model and --model both name the served model: give one")
    if args.api_key_env and not os.environ.get(args.api_key_env):
        raise UsageError(f"--endpoint-api-key-env {args.api_key_env}: that environment "
                         "variable is not set (or empty)")
    for name in ("connect_timeout", "first_token_timeout", "idle_timeout"):
        if not 0.1 <= getattr(args, name) <= 3600:
            raise UsageError(f"--{name.replace('_', '-')}: use 0.1 to 3600 seconds")
    try:
        if args.endpoint:
            check_url(args.endpoint, "--endpoint")
        if args.metrics_url:
            check_url(args.metrics_url, "--endpoint-metrics")
        for url in args.npu_exporter:
            exporter_url(url)
    except EndpointURLError as exc:
        raise UsageError(str(exc)) from None


def _prometheus_url(args: argparse.Namespace) -> str | None:
    from probes.prometheus_api import PromAPIError, base_url

    try:
        return base_url(args.prometheus) if args.prometheus else None
    except PromAPIError as exc:
        raise UsageError(str(exc)) from None


def _endpoint_spec(args: argparse.Namespace) -> EndpointSpec | None:
    from console.chat.openai import EndpointSpec
    from probes.http import api_base

    if not args.endpoint:
        return None
    return EndpointSpec(api_base(args.endpoint), model=args.endpoint_model or args.model or None,
                        api_key_env=args.api_key_env,
                        connect_timeout_s=args.connect_timeout,
                        first_token_timeout_s=args.first_token_timeout,
                        idle_timeout_s=args.idle_timeout)


def _serving_metrics_url(args: argparse.Namespace) -> str | None:
    from probes.http import check_url, metrics_url

    if args.metrics_url:
        return check_url(args.metrics_url, "--endpoint-metrics")
    return metrics_url(args.endpoint) if args.endpoint else None


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
        if options.replay is None:
            check_pid(options)  # /proc only: a wrong --pid is one line, exit 3
    except (UsageError, TargetError) as exc:
        print(f"ascend-console: {one_line(str(exc))} (see ascend-console --help)",
              file=sys.stderr)
        return ExitCode.USAGE
    from checks.policy import PolicyError
    from console.ui.app import ConsoleApp

    try:
        # the target is found once the app is open (npu-smi may take its whole timeout)
        app = ConsoleApp(options, find_target=None if options.replay is not None
                         else partial(find, options))
    except PolicyError as exc:
        print(f"ascend-console: {one_line(str(exc))}", file=sys.stderr)
        return ExitCode.USAGE
    result = app.run()
    # a crash inside the app leaves a traceback and return_code 1: never exit 0 after one
    return app.return_code or int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
