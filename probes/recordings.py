"""Where the console's metric recordings live on a machine, and how their files are named.

One default place (docs/recording.md, "Where recordings go"), resolved from an environment
alone so it answers for the observed machine as well as for this one: `ascend-console` records
there and `ascend-doctor bundle` takes the newest file from there. Names are
`<host>-<UTC time>.sqlite`, so they sort by host, then by time.
"""

from __future__ import annotations

import datetime as dt
import re
import socket
import time
from collections.abc import Mapping
from pathlib import Path

RECORDINGS_ENV = "ASCEND_CONSOLE_RECORDINGS"
RECORDINGS_SUFFIX = ".sqlite"
_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_NAME_STAMP = re.compile(r"-(\d{8}T\d{6}Z)\.sqlite$")


def default_recordings_dir(env: Mapping[str, str]) -> Path:
    """Where recordings go, from `env` alone: `$ASCEND_CONSOLE_RECORDINGS`, else
    `$XDG_STATE_HOME/ascend-console/recordings`, else `$HOME/.local/state/ascend-console/
    recordings`. A relative XDG_STATE_HOME is ignored (XDG spec). Without HOME in `env` the
    last one is relative to `~`, which the caller expands (or, for another machine, refuses)."""
    explicit = env.get(RECORDINGS_ENV, "")
    if explicit:
        return Path(explicit)
    state = env.get("XDG_STATE_HOME", "")
    base = Path(state) if state.startswith("/") else Path(env.get("HOME") or "~") / ".local/state"
    return base / "ascend-console" / "recordings"


def recording_name(hostname: str, now: float) -> str:
    """`<hostname>-<UTC timestamp>.sqlite`: names sort by host, then by time."""
    stamp = dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime(_STAMP_FORMAT)
    host = _UNSAFE.sub("_", hostname).strip(".") or "host"
    return f"{host}-{stamp}{RECORDINGS_SUFFIX}"


def new_recording_path(directory: Path, hostname: str | None = None,
                       now: float | None = None) -> Path:
    """A fresh recording in `directory` (a default-place name; the directory is not made)."""
    return directory / recording_name(hostname or socket.gethostname(),
                                      time.time() if now is None else now)


def newest_first_key(name: str) -> tuple[str, str]:
    """Sort key of recording file names, newest last: the UTC time in the name, then the name
    (files named otherwise sort before every named one)."""
    match = _NAME_STAMP.search(name)
    return (match.group(1) if match else "", name)
