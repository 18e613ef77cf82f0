"""Processes for the target tests: real ones (a script named like a server, started with its own
command line, environment and PYTHONPATH of fake `*.dist-info` packages; a worker that
overwrites its environment area, as setproctitle does; a command run in a PID namespace of its
own, where no other run's server can be seen), and planted ones (a /proc/PID of a process in
another mount namespace, with the container's tree as its root)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from conftest import FakeRoot
from machines import A2, build_a2, site_packages

from probes.target.proc import ProcReader

SERVER_PACKAGES = {"torch": "2.7.1", "torch_npu": "2.7.1.post1", "vllm": "0.11.0",
                   "vllm_ascend": "0.11.0", "transformers": "4.57.1", "tokenizers": "0.22.1"}
# what the script does: say it is ready, then wait (it is killed when the test ends)
SERVER_BODY = "import sys, time\nprint('ready', flush=True)\ntime.sleep(600)\n"
READY_TIMEOUT_S = 30.0
# a process that calls setproctitle as vLLM's EngineCore and workers do: argv[1] as its title
# over the argv area, NUL padding over the environ area (addresses from /proc/self/stat)
BLANK = """import ctypes, sys, time
words = open('/proc/self/stat').read().rpartition(')')[2].split()
arg_start, arg_end, env_start, env_end = (int(w) for w in words[45:49])
title = sys.argv[1].encode()
ctypes.memset(arg_start, 0, arg_end - arg_start)
ctypes.memmove(arg_start, title, len(title))
ctypes.memset(env_start, 0, env_end - env_start)
print('ready', flush=True)
time.sleep(600)
"""


@dataclass(frozen=True)
class FakeServer:
    pid: int
    script: Path
    site: Path  # the PYTHONPATH of fake packages
    env: Mapping[str, str]


def write_script(where: Path, name: str, python: str, body: str = SERVER_BODY) -> Path:
    script = where / name
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"#!{python}\n{body}")
    script.chmod(0o755)
    return script


def children(pid: int) -> list[int]:
    """The processes `pid` started, by their PPid (those that ended meanwhile left out)."""
    reader = ProcReader()
    found = []
    for other in reader.pids():
        try:
            if reader.status(other).ppid == pid:
                found.append(other)
        except Exception:
            continue
    return sorted(found)


def model_dir(where: Path) -> Path:
    """A model directory with a config.json (no weights: the checks say what is missing)."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text('{"model_type": "qwen3_moe", "num_hidden_layers": 2}\n')
    return where


@contextmanager
def running(argv: Sequence[str], env: Mapping[str, str],
            preexec: list[str] | None = None, cwd: Path | None = None) -> Iterator[int]:
    """Start `argv` (after the `preexec` wrapper, e.g. setpriv), wait for its `ready` line,
    yield its pid, kill it at the end."""
    command = [*(preexec or []), *argv]
    proc = subprocess.Popen(command, env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=cwd, start_new_session=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        line = proc.stdout.readline() if ready else b""
        if b"ready" not in line:
            raise RuntimeError(f"{command} did not start (exit {proc.poll()})")
        yield proc.pid
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextmanager
def fake_vllm(tmp_path: Path, env: Mapping[str, str], tail: Sequence[str] = (),
              packages: Mapping[str, str] | None = None,
              python: str = sys.executable) -> Iterator[FakeServer]:
    """`vllm serve MODEL --tensor-parallel-size 2 --max-model-len 8192` (or `tail`), as the
    console script runs: the interpreter, the `vllm` script, then its arguments."""
    site = Path(site_packages(tmp_path / "server-site", dict(packages or SERVER_PACKAGES)))
    script = write_script(tmp_path / "server-bin", "vllm", python)
    model = model_dir(tmp_path / "models" / "m")
    args = tail or ("serve", str(model), "--tensor-parallel-size", "2", "--max-model-len",
                    "8192")
    full_env = {"PATH": "/usr/bin:/bin", **env, "PYTHONPATH": str(site)}
    with running([str(script), *args], full_env) as pid:
        yield FakeServer(pid, script, site, full_env)


# inside the namespace: start the server (if any), wait for its "ready" line, run the command,
# pass on its output and exit code; the namespace ends with this process, the server with it
_LAUNCH = """import json, subprocess, sys
plan = json.loads(sys.argv[1])
if plan["server"]:
    server = subprocess.Popen(plan["server"], env=plan["server_env"], stdout=subprocess.PIPE)
    server.stdout.readline()
out = subprocess.run(plan["argv"], cwd=plan["cwd"], env=plan["env"], capture_output=True,
                     text=True, timeout=plan["timeout_s"])
sys.stdout.write(out.stdout)
sys.stderr.write(out.stderr)
sys.exit(out.returncode)
"""


def pid_namespace_missing() -> str:
    """Why `isolated` cannot run here ("" when it can)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return "needs root and unshare(1) for a PID namespace of its own"
    probe = subprocess.run(["unshare", "-pf", "--mount-proc", "true"], capture_output=True,
                           timeout=30)
    return "" if probe.returncode == 0 else f"unshare -pf refused: {probe.stderr.decode()}"


def isolated(argv: Sequence[str], env: Mapping[str, str], cwd: Path,
             server: tuple[Sequence[str], Mapping[str, str]] | None = None,
             timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
    """Run `argv` in a PID namespace of its own (unshare -pf --mount-proc): it sees no process
    of this machine, only `server` (argv, env; started first, its `ready` line awaited)."""
    plan = {"server": list(server[0]) if server else None,
            "server_env": dict(server[1]) if server else None,
            "argv": list(argv), "cwd": str(cwd), "env": dict(env), "timeout_s": timeout_s}
    return subprocess.run(["unshare", "-pf", "--mount-proc", sys.executable, "-c", _LAUNCH,
                           json.dumps(plan)], capture_output=True, text=True,
                          timeout=timeout_s + READY_TIMEOUT_S)


def container_root(proc: Path) -> FakeRoot:
    """The tree at /proc/PID/root: an Atlas 800I A2's, with a Python 3.10 and the A2's
    packages in its dist-packages."""
    tree = FakeRoot(proc / "root")
    tree.path.mkdir(parents=True)
    build_a2(tree, A2())
    tree.file("/usr/bin/python3.10", b"\x7fELF", mode=0o755)
    tree.file("/usr/lib/python3.10/os.py", "")
    for name, version in A2().packages.items():
        tree.file(f"/usr/local/lib/python3.10/dist-packages/{name}-{version}.dist-info/METADATA",
                  f"Name: {name}\nVersion: {version}\n")
    return tree


def plant_process(proc: Path, argv: Sequence[str], env: Mapping[str, str],
                  status_extra: str = "") -> None:
    """/proc/PID of a process named vllm running `argv` with `env`, PID 1 in its own mount
    namespace, its root at proc/root and its working directory `/`."""
    pid = proc.name
    (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (proc / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in env.items()))
    (proc / "status").write_text(f"Name:\tvllm\nPPid:\t1\nUid:\t0\t0\t0\t0\nNSpid:\t{pid}\t1\n"
                                 + status_extra)
    (proc / "stat").write_text(f"{pid} (vllm) S " + " ".join(["0"] * 18) + " 777 0\n")
    os.symlink("/usr/bin/python3.10", proc / "exe")
    os.symlink("/", proc / "cwd")
    (proc / "ns").mkdir()
    os.symlink("mnt:[4026531999]", proc / "ns" / "mnt")
