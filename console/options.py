"""What the command line decides, and the chat backend it names; no textual here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from console.chat.backend import ChatBackend, ChatSettings
from console.chat.local import LocalBackend, ModelSpec
from console.chat.openai import EndpointBackend, EndpointSpec
from probes.http import Secret
from probes.recordings import default_recordings_dir


@dataclass(frozen=True)
class ConsoleOptions:
    """Everything the command line decides; the app reads nothing else from the outside."""

    model: ModelSpec | None = None  # None: no local model (or a backend handed in)
    endpoint: EndpointSpec | None = None  # chat with an OpenAI-compatible server instead
    serving_metrics_url: str | None = None  # the serving panel's /metrics (None: no panel)
    npu_exporters: tuple[str, ...] = ()  # NPU-Exporter /metrics URLs instead of local npu-smi
    prometheus_url: str | None = None  # --prometheus: the fleet view's Prometheus server
    interval_s: float = 2.0
    npu_timeout_s: float = 5.0
    policy_path: Path | None = None
    record: Path | None = None
    replay: Path | None = None
    replay_speed: float = 1.0
    root: str = "/"
    pid: int | None = None  # --pid: the serving process the panels and the doctor judge
    msprof: Path | None = None
    read_only: bool = False
    sample_live: bool = True  # False: no telemetry timers (fixed-data tests, bench baseline)
    log_dir: str | None = None  # the CANN application log directory, resolved by the CLI
    transcript_dir: Path = field(default_factory=Path.cwd)
    # the default place of recordings (`r` without --record FILE, `--record` without FILE)
    recordings_dir: Path = field(
        default_factory=lambda: default_recordings_dir(os.environ).expanduser())
    settings: ChatSettings = field(default_factory=ChatSettings)


def api_key(spec: EndpointSpec, env: Mapping[str, str]) -> Secret | None:
    """The key from the variable `--api-key-env` names (never from the command line)."""
    if not spec.api_key_env:
        return None
    value = env.get(spec.api_key_env, "")
    return Secret(value) if value else None


def backend_for(options: ConsoleOptions,
                env: Mapping[str, str] | None = None) -> ChatBackend | None:
    """The chat backend the options name; None for `--no-model`."""
    env = os.environ if env is None else env
    if options.endpoint is not None:
        return EndpointBackend(options.endpoint, api_key(options.endpoint, env))
    if options.model is not None:
        return LocalBackend(options.model)
    return None
