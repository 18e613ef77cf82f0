"""A value computed in a forked child on another core, with a timeout and a size cap.

Most of a doctor run waits on one core, while a few facts cost more than the rest of the run
together and hold the GIL while they do (a tokenizer built from a large tokenizer.json is
Rust code that never releases it). Forked while the process still has one thread, a child
inherits the imported modules and computes such a fact on the other core as the checks run;
the value comes back pickled through a pipe. Where forking is unsafe or gains nothing (threads
already running, one core, no `os.fork`) the value is computed in-process when it is asked for,
so callers see the same value or the same exception either way.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_REPLY_BYTES = 16 * 1024 * 1024
# What the child may add to the address space it inherits, and its CPU seconds: a tokenizer
# whose normalizer multiplies every space took a child to 3.4 GB. Loading the largest
# tokenizer the doctor reads takes a few hundred MB; past the cap the child dies (a Rust
# allocation failure aborts) and the caller gets a ForkedError, never the machine's memory.
MAX_EXTRA_MEMORY_BYTES = 1024 * 1024 * 1024
MAX_CPU_S = 60
_READ_BYTES = 256 * 1024


class ForkedError(Exception):
    """The child gave no value: it ran out of time, replied too much, or died."""


def can_fork() -> bool:
    """Forking is safe (one thread: no lock can be held by a thread the child lacks) and
    useful (another core to run on)."""
    return (hasattr(os, "fork") and _threads() == 1
            and len(os.sched_getaffinity(0)) > 1)


def _threads() -> int:
    """The process's threads, native ones included (OpenMP's, a compiled kernel's workers:
    Python's threading module does not see them); Python's count where /proc is missing."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class Forked(Generic[T]):
    """`compute()`, begun in a child at `start` when forking is safe, else run by `result`."""

    def __init__(self, compute: Callable[[], T], max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        self._compute = compute
        self._max_reply_bytes = max_reply_bytes
        self._pid = 0
        self._fd = -1

    @property
    def forked(self) -> bool:
        return self._pid > 0

    def start(self) -> Forked[T]:
        if not can_fork():
            return self
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_fd)
            _limit_child()
            _child(self._compute, write_fd)
        os.close(write_fd)
        self._pid, self._fd = pid, read_fd
        return self

    def result(self, timeout_s: float) -> T:
        """The value (or the exception `compute` raised); ForkedError when the child gave
        neither within `timeout_s`."""
        if not self.forked:
            return self._compute()
        try:
            data = _read_all(self._fd, time.monotonic() + timeout_s, self._max_reply_bytes)
        finally:
            os.close(self._fd)
            self._end_child()
        try:
            ok, value = pickle.loads(data)
        except Exception as exc:
            raise ForkedError(f"the child process died before it replied "
                              f"({type(exc).__name__})") from None
        if not ok:
            raise value
        return value

    def _end_child(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self._pid, 0)
        self._pid = -1


def _limit_child(extra_bytes: int = MAX_EXTRA_MEMORY_BYTES, cpu_s: int = MAX_CPU_S) -> None:
    """Cap the child's address space at what it inherited plus `extra_bytes`, and its CPU
    time (a forked child's starts at zero)."""
    try:
        import resource

        with open("/proc/self/statm", "rb") as statm:
            inherited = int(statm.read(64).split()[0]) * os.sysconf("SC_PAGE_SIZE")
        cap = inherited + extra_bytes
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    except (OSError, ValueError, ImportError, IndexError):
        pass  # no /proc or no rlimits here: the timeout and the reply cap still hold


def _child(compute: Callable[[], object], write_fd: int) -> None:
    code = 0
    try:
        try:
            reply = pickle.dumps((True, compute()))
        except Exception as exc:
            try:
                reply = pickle.dumps((False, exc))
            except Exception:
                reply = pickle.dumps((False, ForkedError(f"{type(exc).__name__}: {exc}")))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(reply)
    except BaseException:
        code = 1
    finally:
        os._exit(code)  # no atexit handlers, no flushing of the parent's buffers


def _read_all(fd: int, deadline: float, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        left_s = deadline - time.monotonic()
        if left_s <= 0 or not select.select([fd], [], [], left_s)[0]:
            raise ForkedError("the child process did not reply in time")
        chunk = os.read(fd, _READ_BYTES)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise ForkedError(f"the child process replied more than {max_bytes:,} bytes")
        chunks.append(chunk)
