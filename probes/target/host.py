"""TargetHost: this machine as the target sees it.

Files are read under the target's root (`/proc/PID/root` for a process in another mount
namespace, a LiveHost root); `env` is the target's environment; `python_packages` reads the
target's interpreter statically (probes.pyenv_static) unless --python names one. Programs
(npu-smi, lspci) are this machine's tools, found and run with the doctor's own environment:
a service's PATH need not hold them, and they describe the machine, not the deployment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from probes.host import DEFAULT_TIMEOUT_S, CommandResult, PythonEnvironment
from probes.live import LiveHost
from probes.pyenv_static import inspect_static, is_python_name
from probes.target.model import Target
from probes.target.proc import ProcReader


class TargetHost(LiveHost):
    """A LiveHost whose environment, files and interpreter are the target's."""

    def __init__(self, target: Target, env: Mapping[str, str], root: str = "/",
                 python: str | None = None, machine_env: Mapping[str, str] | None = None,
                 default_timeout_s: float = DEFAULT_TIMEOUT_S,
                 reader: ProcReader | None = None) -> None:
        proc = target.process
        super().__init__(root=root, env=env, python=python, default_timeout_s=default_timeout_s,
                         owner=proc.owner() if proc is not None else None)
        self.target = target
        self.reader = reader or ProcReader()
        self.machine = LiveHost(env=os.environ if machine_env is None else machine_env,
                                default_timeout_s=default_timeout_s)
        self._static: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        proc = self.target.process
        if proc is not None and proc.mount_ns == "other":
            return f"live, files of process {proc.pid} under {self.root}"
        return super().description

    @property
    def env(self) -> Mapping[str, str]:
        unknown = self.target.environment_unknown()
        if unknown is not None:
            raise unknown
        return super().env

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        self.machine.max_output_bytes = self.max_output_bytes  # the policy's cap, as set
        return self.machine.run(argv, timeout_s)

    @property
    def static_notes(self) -> tuple[str, ...]:
        """How the last static read derived sys.path (for the report's evidence)."""
        return self._static

    def python_packages(self) -> PythonEnvironment:
        proc = self.target.process
        if self.python is not None or proc is None:
            return super().python_packages()
        if self.target.environment_error:
            return PythonEnvironment(interpreter=proc.exe or "", error=(
                f"its environment (PYTHONPATH, PYTHONHOME) could not be read: "
                f"{self.target.environment_error}"))
        if proc.exe is None:
            return PythonEnvironment(interpreter="", error=(
                f"/proc/{proc.pid}/exe could not be read: name the deployment's interpreter "
                "with --python PATH"))
        argv0 = proc.cmdline[0] if proc.cmdline else ""
        if not (is_python_name(proc.exe) or is_python_name(argv0)):
            return PythonEnvironment(interpreter=proc.exe, error=(
                f"process {proc.pid} runs {proc.exe}, not a Python interpreter: name the "
                "deployment's interpreter with --python PATH"))
        found = inspect_static(self, proc.exe, proc.cmdline, super().env, proc.cwd)
        self._static = found.how
        return found.environment

    def alive(self) -> bool:
        """The target process is still the one that was read (always True for no process)."""
        proc = self.target.process
        return proc is None or self.reader.alive(proc.pid, proc.start_ticks)
