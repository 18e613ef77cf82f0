"""Which distributions one Python interpreter sees, asked of that interpreter itself.

The interpreter runs the text of probes/pyenv_scan.py with its normal start-up (no -I, -E or
-S), so PYTHONPATH, site-packages and .pth files count exactly as they will for the
deployment. The scan imports nothing heavy (never torch) and runs on Python 3.8+ without this
package being importable there; the current interpreter imports it instead.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from probes import json_limits, pyenv_scan
from probes.host import CommandResult, PythonEnvironment, normalise_dist_name
from probes.pyenv_scan import MARKER

RunFn = Callable[[Sequence[str], float], CommandResult]

DEFAULT_PYENV_TIMEOUT_S = 20.0

# The scan is its own module so that the current interpreter imports it (cached bytecode) and
# any other one runs its text with -c.
SCAN_SOURCE = Path(pyenv_scan.__file__)



def inspect_python(
    interpreter: str,
    env: Mapping[str, str],
    timeout_s: float = DEFAULT_PYENV_TIMEOUT_S,
    run: RunFn | None = None,
) -> PythonEnvironment:
    """Ask `interpreter` (a path on this machine) what it can import, in environment `env`.

    Never raises for a broken interpreter: `error` then says why, in one line.
    """
    runner = run if run is not None else _live_runner(env)
    script = SCAN_SOURCE.read_text(encoding="utf-8")
    result = runner((interpreter, "-c", script), timeout_s)
    if result.outcome != "exited":
        return _failed(interpreter, _why_not_run(interpreter, result))
    if result.exit_code != 0:
        return _failed(
            interpreter,
            f"{interpreter} exited with code {result.exit_code}{_last_line(result.stderr)}",
        )
    return parse_report(interpreter, result.stdout)


def inspect_current() -> PythonEnvironment:
    """The same report for this very interpreter, without starting another one."""
    return _from_report(sys.executable, pyenv_scan.report())


def parse_report(interpreter: str, stdout: str) -> PythonEnvironment:
    """The PythonEnvironment described by the script's marked output line."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        return _failed(interpreter, f"{interpreter} printed no report (is it a Python?)")
    try:
        report = json_limits.loads(line[len(MARKER) :], "the report")
        return _from_report(interpreter, report)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return _failed(interpreter, f"{interpreter} printed an unreadable report: {exc}")


def _from_report(interpreter: str, report: dict[str, object]) -> PythonEnvironment:
    if report.get("error"):
        return _failed(interpreter, f"{interpreter}: {report['error']}")
    found = report["packages"]
    if not isinstance(found, dict):
        raise TypeError("packages is not an object")
    packages = {normalise_dist_name(k): str(v["version"]) for k, v in found.items()}
    locations = {normalise_dist_name(k): str(v["location"]) for k, v in found.items()}
    version = str(report["version"]).split(" ", 1)[0]  # "3.11.7 (main, ...)" -> "3.11.7"
    return PythonEnvironment(
        interpreter=interpreter, python_version=version, packages=packages, locations=locations
    )


def _why_not_run(interpreter: str, result: CommandResult) -> str:
    if result.outcome == "not_found":
        return f"{interpreter}: interpreter not found"
    if result.outcome == "timeout":
        return f"{interpreter} did not answer within {result.duration_s:.0f} s"
    return f"{interpreter} could not run: {result.error}"


def _failed(interpreter: str, why: str) -> PythonEnvironment:
    return PythonEnvironment(interpreter=interpreter, error=" ".join(why.split()))


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return f": {lines[-1].strip()}" if lines else ""


def _live_runner(env: Mapping[str, str]) -> RunFn:
    from probes.spawn import spawn  # subprocess only loads when an interpreter is run

    def run(argv: Sequence[str], timeout_s: float) -> CommandResult:
        return spawn(argv, timeout_s, env)

    return run
