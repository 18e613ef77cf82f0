from __future__ import annotations

import os
import threading
import time

import pytest

from checks.builtin.tokenizer_load import TokenizerUnavailable
from probes.forked import Forked, ForkedError, can_fork

needs_fork = pytest.mark.skipif(not can_fork(), reason="forking needs one thread and 2 cores")


@needs_fork
def test_the_value_is_computed_in_a_child() -> None:
    forked = Forked(os.getpid).start()
    assert forked.forked
    child_pid = forked.result(10)
    assert child_pid != os.getpid()


@needs_fork
def test_the_child_s_exception_comes_back_whole() -> None:
    def refuse() -> None:
        raise TokenizerUnavailable("no tokenizer.json", status="warn", detail="EOF at line 3")

    forked = Forked(refuse).start()
    with pytest.raises(TokenizerUnavailable) as raised:
        forked.result(10)
    assert (raised.value.reason, raised.value.status, raised.value.detail) == \
        ("no tokenizer.json", "warn", "EOF at line 3")


@needs_fork
def test_a_late_child_is_killed_after_its_timeout() -> None:
    forked = Forked(lambda: time.sleep(30)).start()
    pid = forked._pid
    began = time.monotonic()
    with pytest.raises(ForkedError, match="did not reply in time"):
        forked.result(0.3)
    assert time.monotonic() - began < 5
    with pytest.raises(ChildProcessError):  # killed and reaped: no zombie left
        os.waitpid(pid, os.WNOHANG)


@needs_fork
def test_a_reply_over_the_cap_is_refused() -> None:
    forked = Forked(lambda: b"x" * 100_000, max_reply_bytes=10_000).start()
    with pytest.raises(ForkedError, match="more than 10,000 bytes"):
        forked.result(10)


@needs_fork
def test_a_child_that_dies_says_so() -> None:
    forked = Forked(lambda: os._exit(3)).start()
    with pytest.raises(ForkedError, match="died before it replied"):
        forked.result(10)


def test_with_threads_running_it_computes_in_process() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        forked = Forked(os.getpid).start()
        assert not forked.forked
        assert forked.result(10) == os.getpid()
    finally:
        stop.set()
        thread.join()
