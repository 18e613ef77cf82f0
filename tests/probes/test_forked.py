"""probes.forked in fresh interpreters: a test process that has run the engine holds its
helper threads for good, and with threads running nothing is forked (by design), so each case
runs where the process still has one thread."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from probes.forked import Forked

ROOT = Path(__file__).resolve().parents[2]


def fresh(body: str) -> dict[str, object]:
    """Run `body` (which sets `out`, a dict) in a new interpreter; `out` as JSON."""
    script = ("import json, os, time\nfrom probes.forked import Forked, ForkedError, "
              "can_fork\nout = {}\n" + textwrap.dedent(body) + "\nprint(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    if not result.get("could_fork", True):
        pytest.skip("forking needs one thread and 2 cores")
    return result


def test_the_value_is_computed_in_a_child() -> None:
    out = fresh("""
        out["could_fork"] = can_fork()
        forked = Forked(os.getpid).start()
        out["forked"] = forked.forked
        out["child_is_other"] = forked.result(10) != os.getpid()
    """)
    assert out["forked"] and out["child_is_other"]


def test_the_child_s_exception_comes_back_whole() -> None:
    out = fresh("""
        from checks.builtin.tokenizer_load import TokenizerUnavailable
        out["could_fork"] = can_fork()

        def refuse():
            raise TokenizerUnavailable("no tokenizer.json", status="warn", detail="EOF at 3")

        try:
            Forked(refuse).start().result(10)
        except TokenizerUnavailable as exc:
            out["got"] = [exc.reason, exc.status, exc.detail]
    """)
    assert out["got"] == ["no tokenizer.json", "warn", "EOF at 3"]


def test_a_late_child_is_killed_after_its_timeout() -> None:
    out = fresh("""
        out["could_fork"] = can_fork()
        forked = Forked(lambda: time.sleep(30)).start()
        pid, began = forked._pid, time.monotonic()
        try:
            forked.result(0.3)
        except ForkedError as exc:
            out["error"] = str(exc)
        out["seconds"] = time.monotonic() - began
        try:
            os.waitpid(pid, os.WNOHANG)
            out["reaped"] = False
        except ChildProcessError:
            out["reaped"] = True
    """)
    assert out["error"] == "the child process did not reply in time"
    assert float(str(out["seconds"])) < 5 and out["reaped"]


def test_a_reply_over_the_cap_is_refused() -> None:
    out = fresh("""
        out["could_fork"] = can_fork()
        try:
            Forked(lambda: b"x" * 100_000, max_reply_bytes=10_000).start().result(10)
        except ForkedError as exc:
            out["error"] = str(exc)
    """)
    assert out["error"] == "the child process replied more than 10,000 bytes"


def test_a_child_that_dies_says_so() -> None:
    out = fresh("""
        out["could_fork"] = can_fork()
        forked = Forked(lambda: os._exit(3)).start()
        if forked.forked:  # never run in-process: it would end this interpreter
            try:
                forked.result(10)
            except ForkedError as exc:
                out["error"] = str(exc)
    """)
    assert str(out["error"]).startswith("the child process died before it replied")


def test_with_threads_running_it_computes_in_process() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        forked = Forked(lambda: threading.get_ident()).start()
        assert not forked.forked
        assert forked.result(10) == threading.get_ident()
    finally:
        stop.set()
        thread.join()


def test_native_threads_count_too() -> None:
    """Threads Python does not know of (OpenMP's, here) hold locks a child would lack."""
    out = fresh("""
        out["alone"] = can_fork()
        import torch
        torch.set_num_threads(2)
        torch.ones(1 << 22).sum()  # starts OpenMP's threads
        out["python_threads"] = __import__("threading").active_count()
        out["native_threads"] = len(os.listdir("/proc/self/task"))
        out["with_openmp"] = can_fork()
    """)
    if out["native_threads"] == 1:
        pytest.skip("torch started no OpenMP thread here")
    assert out["python_threads"] == 1 and out["with_openmp"] is False



def test_a_child_that_allocates_without_end_is_capped() -> None:
    out = fresh("""
        out["could_fork"] = can_fork()

        def hog():
            blocks = []
            while True:
                blocks.append(bytearray(64 << 20))

        forked = Forked(hog).start()
        out["forked"] = forked.forked
        try:
            forked.result(60)
        except (ForkedError, MemoryError) as exc:
            out["error"] = type(exc).__name__
    """)
    assert out["forked"] and out["error"] in ("ForkedError", "MemoryError")
