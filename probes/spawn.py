"""Running a program without a shell, with a timeout that kills its whole process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from probes.host import CommandResult

# After a timeout, how long to wait for the killed process group to release the pipes.
KILL_GRACE_S = 0.4


def spawn(
    argv: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str],
    executable: str | None = None,
) -> CommandResult:
    """Run `argv` without a shell; a timeout kills the whole process group.

    Returns within timeout_s + 1.5 * KILL_GRACE_S even when grandchildren hold the pipes
    or the child is stuck in a driver call.
    """
    argv = tuple(argv)
    started_s = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            executable=executable,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,  # its own process group, so a timeout can kill it all
        )
    except OSError as exc:
        return CommandResult(argv=argv, outcome="error", error=one_line(exc))
    return _wait(proc, argv, timeout_s, started_s)


def _wait(
    proc: subprocess.Popen[bytes], argv: tuple[str, ...], timeout_s: float, started_s: float
) -> CommandResult:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        out, err = _kill_and_drain(proc, exc)
        return CommandResult(
            argv=argv,
            outcome="timeout",
            stdout=decode(out),
            stderr=decode(err),
            duration_s=time.monotonic() - started_s,
            error=f"timed out after {timeout_s:g} s",
        )
    return CommandResult(
        argv=argv,
        outcome="exited",
        exit_code=proc.returncode,
        stdout=decode(out),
        stderr=decode(err),
        duration_s=time.monotonic() - started_s,
    )


def _kill_and_drain(
    proc: subprocess.Popen[bytes], first: subprocess.TimeoutExpired
) -> tuple[bytes, bytes]:
    """Kill the group, then collect what is left, waiting KILL_GRACE_S at most."""
    _kill_group(proc)
    try:
        return proc.communicate(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired as second:
        # Something outside the group (it called setsid) still holds the pipes: give up on them.
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        _reap(proc)
        return _as_bytes(second.output or first.output), _as_bytes(second.stderr or first.stderr)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    # A child stuck in the kernel (a hung driver call) dies only when that call returns.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S / 2)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _as_bytes(data: bytes | str | None) -> bytes:
    if data is None:
        return b""
    return data.encode() if isinstance(data, str) else data


def decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
