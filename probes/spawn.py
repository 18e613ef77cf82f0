"""Running a program without a shell: a timeout and an output cap, either of which kills its
whole process group.

Every program the doctor, a bundle or the console's sampler runs comes through here (through
`LiveHost.run`), so these two bounds hold for all of them: a hung `npu-smi` costs its timeout,
and one that prints without end costs `max_output_bytes` of memory, never more.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Literal

from probes.host import DEFAULT_MAX_OUTPUT_BYTES, CommandResult

MIB = 1024 * 1024
# After a timeout, how long to wait for the killed process group to release the pipes.
KILL_GRACE_S = 0.4
_READ_BYTES = 64 * 1024
# Children started and not yet reaped: a run that ends while a check's thread still waits on
# one (its check timed out) ends them all (end_unfinished), since they run in sessions of
# their own and would outlive this process.
_UNFINISHED: set[subprocess.Popen[bytes]] = set()
_UNFINISHED_LOCK = threading.Lock()

Ending = Literal["closed", "timeout", "output_limit"]


def spawn(
    argv: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str],
    executable: str | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    on_start: Callable[[], None] | None = None,
) -> CommandResult:
    """Run `argv` without a shell; a timeout, or stdout and stderr together passing
    `max_output_bytes`, kills the whole process group (what came before is kept).
    `on_start` is called once the child runs (or could not be started): a caller waiting in
    another thread may go on with work that holds the GIL.

    Returns within timeout_s + 1.5 * KILL_GRACE_S even when grandchildren hold the pipes
    or the child is stuck in a driver call.
    """
    started = start(argv, env, executable)
    if on_start is not None:
        on_start()
    return started.finish(timeout_s, max_output_bytes)


def start(argv: Sequence[str], env: Mapping[str, str], executable: str | None = None,
          with_input: bool = False) -> Started:
    """Start `argv` without a shell, in a process group of its own; `Started.finish` bounds
    and collects it, `Started.discard` ends it unread. With `with_input`, its stdin is a pipe
    that `finish` writes, so a child may start (import what it needs) before its work is
    known. Whoever calls this must call one of the two: the child is theirs to reap."""
    argv = tuple(argv)
    try:
        proc = subprocess.Popen(
            argv,
            executable=executable,
            stdin=subprocess.PIPE if with_input else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,  # its own process group, so a timeout can kill it all
        )
    except OSError as exc:
        return Started(argv, None, one_line(exc))
    return Started(argv, proc)


class Started:
    """A child `start` began: finished (bounded, read, reaped) or discarded exactly once."""

    def __init__(self, argv: tuple[str, ...], proc: subprocess.Popen[bytes] | None,
                 error: str = "") -> None:
        self.argv = argv
        self._proc = proc
        self._error = error
        if proc is not None:
            with _UNFINISHED_LOCK:
                _UNFINISHED.add(proc)
        self._done = proc is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def fds(self) -> tuple[int, ...]:
        """This process's ends of the child's pipes (a forked process closes its copies:
        holding them would keep the child's stdin open and make it a pipe holder)."""
        if self._proc is None or self._done:
            return ()
        pipes = (self._proc.stdin, self._proc.stdout, self._proc.stderr)
        return tuple(p.fileno() for p in pipes if p is not None and not p.closed)

    def finish(self, timeout_s: float, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
               data: bytes = b"") -> CommandResult:
        """Write `data` to its stdin (with_input), then read its output until it exits, the
        timeout (counted from now) passes or the output reaches the cap, which kill its
        process group. Returns within timeout_s + 1.5 * KILL_GRACE_S."""
        if self._proc is None:
            return CommandResult(argv=self.argv, outcome="error", error=self._error)
        if self._done:
            raise RuntimeError("this child was already finished or discarded")
        self._done = True
        proc, started_s = self._proc, time.monotonic()
        output = _Output(proc, max_output_bytes, data)
        try:
            ending = _run(proc, output, started_s + timeout_s)
        finally:
            output.close()
            _forget(proc)
        return _result(proc, self.argv, ending, output, timeout_s,
                       time.monotonic() - started_s)

    def discard(self) -> None:
        """End the child unread (its work was not needed) and reap it."""
        if self._proc is None or self._done:
            return
        self._done = True
        _kill_group(self._proc)
        for pipe in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        _reap(self._proc)
        _forget(self._proc)


def end_unfinished() -> int:
    """Kill the process group of every child started and not yet finished or discarded (a
    thread may still be finishing one whose check timed out); returns how many. For the end
    of a run: the threads that own them are abandoned with it."""
    with _UNFINISHED_LOCK:
        procs = list(_UNFINISHED)
        _UNFINISHED.clear()
    for proc in procs:
        _kill_group(proc)
    return len(procs)


def _forget(proc: subprocess.Popen[bytes]) -> None:
    with _UNFINISHED_LOCK:
        _UNFINISHED.discard(proc)


def _run(proc: subprocess.Popen[bytes], output: _Output, deadline_s: float) -> Ending:
    ending = output.read_until(deadline_s)
    if ending == "closed":
        try:  # the pipes closed; the program may still be running
            proc.wait(timeout=max(0.0, deadline_s - time.monotonic()))
            return "closed"
        except subprocess.TimeoutExpired:
            ending = "timeout"
    _kill_group(proc)
    kill_pipe_holders(output.pipe_inodes)  # what left the group (setsid) with our pipes
    output.read_until(time.monotonic() + KILL_GRACE_S)  # what the group wrote as it died
    _reap(proc)
    return ending


def _result(proc: subprocess.Popen[bytes], argv: tuple[str, ...], ending: Ending,
            output: _Output, timeout_s: float, duration_s: float) -> CommandResult:
    stdout, stderr = decode(bytes(output.stdout)), decode(bytes(output.stderr))
    if ending == "closed":
        return CommandResult(argv=argv, outcome="exited", exit_code=proc.returncode,
                             stdout=stdout, stderr=stderr, duration_s=duration_s)
    error = (f"timed out after {timeout_s:g} s" if ending == "timeout"
             else f"output over {output.limit_bytes / MIB:g} MiB; stopped")
    return CommandResult(argv=argv, outcome=ending, stdout=stdout, stderr=stderr,
                         duration_s=duration_s, error=error)


class _Output:
    """stdout and stderr of a process, read as they come, together at most `limit_bytes`."""

    def __init__(self, proc: subprocess.Popen[bytes], limit_bytes: int,
                 data: bytes = b"") -> None:
        self.limit_bytes = limit_bytes
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.full = False
        self._selector = selectors.DefaultSelector()
        self._pipes: list[IO[bytes]] = [p for p in (proc.stdout, proc.stderr) if p is not None]
        self.pipe_inodes = frozenset(os.fstat(p.fileno()).st_ino for p in self._pipes)
        for pipe, sink in ((proc.stdout, self.stdout), (proc.stderr, self.stderr)):
            if pipe is not None:
                self._selector.register(pipe, selectors.EVENT_READ, sink)
        self._input = memoryview(data)
        if proc.stdin is not None:  # written as the child reads it, within the deadline
            self._pipes.append(proc.stdin)
            os.set_blocking(proc.stdin.fileno(), False)
            self._selector.register(proc.stdin, selectors.EVENT_WRITE, None)

    def read_until(self, deadline_s: float) -> Ending:
        """Read until both pipes close, the deadline passes, or the limit is reached."""
        while self._selector.get_map():
            if self.full:
                return "output_limit"
            left_s = deadline_s - time.monotonic()
            if left_s <= 0:
                return "timeout"
            for key, _ in self._selector.select(left_s):
                self._read(key)
        return "output_limit" if self.full else "closed"

    def _read(self, key: selectors.SelectorKey) -> None:
        if key.data is None:
            self._write(key)
            return
        try:
            data = os.read(key.fd, _READ_BYTES)
        except OSError:
            data = b""
        if not data:
            self._selector.unregister(key.fileobj)
            return
        room = self.limit_bytes - len(self.stdout) - len(self.stderr)
        sink: bytearray = key.data
        sink += data[: max(0, room)]
        self.full = self.full or len(data) > room

    def _write(self, key: selectors.SelectorKey) -> None:
        try:
            self._input = self._input[os.write(key.fd, self._input[:_READ_BYTES]):]
        except BlockingIOError:
            return
        except OSError:  # the child went away without reading: its output says why
            self._input = self._input[:0]
        if not self._input:  # all written: closing it is the child's end of input
            self._selector.unregister(key.fileobj)
            with contextlib.suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]

    def close(self) -> None:
        # Something outside the group (it called setsid) may still hold the pipes: they are
        # closed here, never waited for.
        self._selector.close()
        for pipe in self._pipes:
            with contextlib.suppress(OSError):
                pipe.close()


def kill_pipe_holders(inodes: frozenset[int], proc_dir: str = "/proc") -> list[int]:
    """SIGKILL every process that still holds one of these pipes: a grandchild that called
    setsid is in no process group of ours, and would outlive the run holding its output.
    Only processes whose fd table this user may read are seen (its own, or all for root)."""
    wanted = {f"pipe:[{inode}]" for inode in inodes}
    killed = []
    own = os.getpid()
    for name in os.listdir(proc_dir) if wanted else ():
        if not name.isdigit() or int(name) == own:
            continue
        if _holds(f"{proc_dir}/{name}/fd", wanted):
            with contextlib.suppress(OSError):
                os.kill(int(name), signal.SIGKILL)
                killed.append(int(name))
    return killed


def _holds(fd_dir: str, wanted: set[str]) -> bool:
    try:
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                if os.readlink(f"{fd_dir}/{fd}") in wanted:
                    return True
    except OSError:
        pass
    return False


def _reap(proc: subprocess.Popen[bytes]) -> None:
    # A child stuck in the kernel (a hung driver call) dies only when that call returns.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S / 2)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
