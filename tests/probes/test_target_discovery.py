"""Discovery on real processes: servers by command line, NPU holders folded into the server
they descend from, the order candidates are judged in, and the target read from /proc.

Other runs on this machine may have servers of their own: assertions look at our pids only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from target_fixtures import running, write_script

from probes.target.discovery import discover
from probes.target.parts import NpuUse
from probes.target.proc import ProcReader
from probes.target.resolve import from_discovery, from_pid

# a server that starts a worker (as vLLM's engine core or torchrun's ranks) and names it
PARENT = ("import subprocess, sys, time\n"
          "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
          "print('ready', child.pid, flush=True)\ntime.sleep(600)\n")


def _child_of(pid: int) -> int:
    """The worker the server started (its only child)."""
    reader = ProcReader()
    for other in reader.pids():
        try:
            if reader.status(other).ppid == pid:
                return other
        except Exception:
            continue
    raise AssertionError(f"no child of {pid}")


def test_servers_and_their_workers_on_the_npus(tmp_path: Path) -> None:
    vllm = write_script(tmp_path / "a", "vllm", sys.executable, PARENT)
    torchrun = write_script(tmp_path / "b", "torchrun", sys.executable, PARENT)
    loose = write_script(tmp_path / "c", "worker", sys.executable)
    env = {"PATH": "/usr/bin:/bin"}
    with running([str(vllm), "serve", "/models/m"], env) as server, \
            running([str(torchrun), "--nproc-per-node", "2", "train.py"], env) as launcher, \
            running([str(loose)], env) as holder:
        worker = _child_of(server)
        rows = [NpuUse(1, 0, worker, 30000), NpuUse(0, 0, holder, 100)]
        mine = {server, launcher, holder}
        found = [c for c in discover(ProcReader(), rows) if c.pid in mine]
    assert [c.pid for c in found] == [server, launcher, holder]
    first, second, third = found
    assert first.server == "vllm" and first.npus == (rows[0],)
    assert first.why == "a vLLM server, holding NPU 1 (npu-smi process table)"
    assert first.label == "vllm serve /models/m"
    assert second.server == "torchrun" and second.npus == ()
    assert third.server == "" and third.why == "holding NPU 0 (npu-smi process table)"


def test_a_server_started_by_a_server_is_part_of_it(tmp_path: Path) -> None:
    inner = write_script(tmp_path / "in", "vllm", sys.executable)
    body = ("import subprocess, sys, time\n"
            f"p = subprocess.Popen([{str(inner)!r}, 'serve', '/m'], stdout=subprocess.PIPE)\n"
            "p.stdout.readline()\nprint('ready', flush=True)\ntime.sleep(600)\n")
    outer = write_script(tmp_path / "out", "torchrun", sys.executable, body)
    with running([str(outer), "serve.py"], {"PATH": "/usr/bin:/bin"}) as launcher:
        child = _child_of(launcher)
        pids = [c.pid for c in discover(ProcReader(), [NpuUse(0, 0, child, 1)])
                if c.pid in (launcher, child)]
    assert pids == [launcher]


def test_the_target_read_from_proc(tmp_path: Path) -> None:
    script = write_script(tmp_path / "bin", "vllm", sys.executable)
    env = {"PATH": "/usr/bin:/bin", "ASCEND_GLOBAL_LOG_LEVEL": "1"}
    with running([str(script), "serve", "models/m", "-tp", "2"], env, cwd=tmp_path) as pid:
        (tmp_path / "models" / "m").mkdir(parents=True)
        resolved = from_pid(ProcReader(), pid, [NpuUse(3, None, pid, 10)], True)
        shell = from_discovery(ProcReader(str(tmp_path / "no-proc")), [], False, {"A": "1"})
    target = resolved.target
    assert resolved.env["ASCEND_GLOBAL_LOG_LEVEL"] == "1"
    assert target.kind == "process" and target.pid == pid and target.chosen == f"--pid {pid}"
    assert target.label == f"process {pid} (vllm serve models/m -tp 2)"
    assert target.process is not None and target.process.cwd == str(tmp_path)
    assert target.serving.model_dir is not None
    assert target.serving.model_dir.value == str(tmp_path / "models" / "m")
    assert target.serving.tensor_parallel_size is not None
    assert target.serving.tensor_parallel_size.value == 2
    assert target.npus == (NpuUse(3, None, pid, 10),) and target.npus_known
    assert shell.target.kind == "shell" and shell.env == {"A": "1"}
    assert shell.target.chosen == "no serving process found"
