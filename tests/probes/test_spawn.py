"""probes.spawn: a timeout and an output cap bound every program the project runs."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from probes.spawn import end_unfinished, spawn, start

ENV = dict(os.environ)
ENDLESS = "import sys\nwhile True: sys.{}.write('x' * 65536)"


def test_a_program_that_prints_without_end_is_stopped_at_the_cap() -> None:
    cap = 256 * 1024
    result = spawn([sys.executable, "-c", ENDLESS.format("stdout")], 60, ENV,
                   max_output_bytes=cap)
    assert result.outcome == "output_limit"
    assert len(result.stdout) == cap and result.exit_code is None
    assert result.error == "output over 0.25 MiB; stopped"
    assert "printed too much" in result.describe()


def test_stderr_counts_too() -> None:
    result = spawn([sys.executable, "-c", ENDLESS.format("stderr")], 60, ENV,
                   max_output_bytes=100_000)
    assert result.outcome == "output_limit"
    assert len(result.stderr) == 100_000 and result.stdout == ""


def test_output_within_the_cap_is_whole() -> None:
    script = "import sys; sys.stdout.write('o' * 5000); sys.stderr.write('e' * 5000)"
    result = spawn([sys.executable, "-c", script], 60, ENV, max_output_bytes=10_000)
    assert result.outcome == "exited" and result.exit_code == 0
    assert result.stdout == "o" * 5000 and result.stderr == "e" * 5000


def test_closed_pipes_do_not_end_the_wait() -> None:
    # the program closes its output but keeps running: still the timeout that ends it
    script = "import os, time; os.close(1); os.close(2); time.sleep(30)"
    result = spawn([sys.executable, "-c", script], 0.5, ENV)
    assert result.outcome == "timeout"


def test_exit_code_after_closed_pipes() -> None:
    result = spawn([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"], 60, ENV)
    assert (result.outcome, result.exit_code, result.stdout) == ("exited", 3, "hi\n")


def test_every_host_run_has_the_cap(tmp_path: Path) -> None:
    """The doctor, bundles and the console's sampler all run npu-smi through LiveHost.run
    (probes.inventory): an endless one is stopped there, for all of them."""
    from probes.inventory import read_live
    from probes.live import LiveHost

    program = tmp_path / "usr/local/bin/npu-smi"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\nexec yes '| 0 910B4 | OK |'\n")
    program.chmod(0o755)
    host = LiveHost(root=str(tmp_path), env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
                    max_output_bytes=64 * 1024)
    reading = read_live(host, timeout_s=60)
    assert reading.command is not None and reading.command.outcome == "output_limit"
    assert "output over 0.0625 MiB" in reading.error_text


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper is dead)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_setsid_grandchild_holding_the_pipes_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = (f'setsid sh -c \'echo $$ > {pid_file}; exec sleep 300\' & '
              'while [ ! -s ' + str(pid_file) + ' ]; do sleep 0.05; done; echo started')
    result = spawn(["sh", "-c", script], 1.5, dict(os.environ))
    grandchild = int(pid_file.read_text())
    assert result.outcome == "timeout" and "started" in result.stdout
    for _ in range(50):  # the kill is sent; the kernel takes a moment to end it
        if not _alive(grandchild):
            break
        os.sched_yield()
        time.sleep(0.02)
    assert not _alive(grandchild)


def test_on_start_is_called_once_while_the_child_runs(tmp_path: Path) -> None:
    """A waiter in another thread may go on once the child exists (the tokenizer check builds
    its tokenizer, which holds the GIL, only after its template child has started)."""
    flag = tmp_path / "go"
    seen: list[bool] = []
    script = f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.01)\n"

    def started() -> None:
        seen.append(True)
        flag.touch()  # the child waits for this: it must already be running

    result = spawn([sys.executable, "-c", script], 30, dict(os.environ), on_start=started)
    assert result.ok and seen == [True]


def test_on_start_is_called_when_the_child_cannot_start(tmp_path: Path) -> None:
    seen: list[bool] = []
    result = spawn([str(tmp_path / "missing")], 5, {}, on_start=lambda: seen.append(True))
    assert result.outcome == "error" and seen == [True]


# -- started early, finished later ----------------------------------------------------------

ECHO = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"


def test_input_given_at_finish_reaches_the_child() -> None:
    data = b"0123456789abcdef" * 65536  # 1 MiB: more than a pipe holds at once
    started = start([sys.executable, "-c", ECHO], ENV, with_input=True)
    result = started.finish(60, 4 * 1024 * 1024, data)
    assert result.outcome == "exited" and result.exit_code == 0
    assert result.stdout == data.decode()


def test_a_child_that_never_reads_its_input_still_times_out() -> None:
    started = start([sys.executable, "-c", "import time; time.sleep(60)"], ENV,
                    with_input=True)
    result = started.finish(0.5, data=b"x" * (4 * 1024 * 1024))
    assert result.outcome == "timeout"


def test_a_child_that_exits_before_reading_its_input_is_no_error() -> None:
    started = start([sys.executable, "-c", "print('bye')"], ENV, with_input=True)
    time.sleep(0.2)
    result = started.finish(30, data=b"x" * (4 * 1024 * 1024))
    assert (result.outcome, result.exit_code, result.stdout) == ("exited", 0, "bye\n")


def test_a_discarded_child_is_ended_and_reaped() -> None:
    started = start([sys.executable, "-c", "import time; time.sleep(60)"], ENV,
                    with_input=True)
    pid = started.pid
    assert pid is not None and _alive(pid)
    started.discard()
    started.discard()  # once is enough; again does nothing
    assert not os.path.exists(f"/proc/{pid}")  # neither running nor a zombie


def test_a_child_that_cannot_start_finishes_as_an_error(tmp_path: Path) -> None:
    started = start([str(tmp_path / "missing")], {}, with_input=True)
    result = started.finish(5, data=b"work")
    assert result.outcome == "error" and "missing" in (result.error or "")
    started.discard()


def test_end_unfinished_ends_a_child_another_thread_still_waits_on() -> None:
    started = start([sys.executable, "-c", "import time; time.sleep(60)"], ENV)
    results = []
    waiter = threading.Thread(target=lambda: results.append(started.finish(60)))
    waiter.start()
    time.sleep(0.2)
    assert end_unfinished() == 1
    waiter.join(10)
    assert not waiter.is_alive() and results[0].exit_code != 0
    assert end_unfinished() == 0  # finished children are forgotten


def test_end_unfinished_leaves_finished_and_discarded_children_alone() -> None:
    spawn([sys.executable, "-c", "pass"], 60, ENV)
    start([sys.executable, "-c", "import time; time.sleep(60)"], ENV).discard()
    assert end_unfinished() == 0
