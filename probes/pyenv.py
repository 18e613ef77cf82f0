"""Which distributions one Python interpreter sees, asked of that interpreter itself.

The interpreter runs a tiny inline script with its normal start-up (no -I, -E or -S), so
PYTHONPATH, site-packages and .pth files count exactly as they will for the deployment.
The script imports nothing heavy (never torch) and runs on Python 3.8+ without this
package being importable there.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable, Mapping, Sequence

from probes.host import CommandResult, PythonEnvironment, normalise_dist_name

RunFn = Callable[[Sequence[str], float], CommandResult]

DEFAULT_PYENV_TIMEOUT_S = 20.0

# Marks our line, so output from a chatty sitecustomize or .pth file cannot confuse us.
MARKER = "ASCEND_DOCTOR_PYENV "

# The first distribution per PEP 503 name in sys.path order wins: that is the one `import`
# would load. The empty entry (cwd, added by -c) is skipped: it is the doctor's cwd, not
# the deployment's. Keep this runnable on Python 3.8.
#
# It reports what importlib.metadata reports (Name and Version from the METADATA or PKG-INFO
# header, the same dist-info/egg-info candidates in the same order as its path finder), but
# lists directories with os.listdir and reads only the header lines: importing
# importlib.metadata (email, pathlib objects per file) was most of the cost. A zip on sys.path
# is left to importlib.metadata itself.
SCRIPT = """
import json, os, re, sys
def norm(name):
    return re.sub(r"[-_.]+", "-", name.strip()).lower()
def header(lines):
    found = {}
    for line in lines:
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key in ("Name", "Version") and key not in found:
            found[key] = value.strip()
    return found.get("Name", ""), found.get("Version", "")
def head_lines(path):
    # the header block of one metadata file, or None where importlib.metadata reads no text
    try:
        with open(path, encoding="utf-8") as handle:
            lines = []
            for raw in handle:
                parts = raw.splitlines() or [""]
                lines.extend(parts)
                if any(not part.strip() for part in parts):
                    break
    except (OSError, UnicodeDecodeError):
        return None
    return lines or None
def head_dir(meta_dir):
    for filename in ("METADATA", "PKG-INFO"):
        lines = head_lines(os.path.join(meta_dir, filename))
        if lines:
            return header(lines)
    return "", ""
def candidates(entry):
    # importlib.metadata's order: dist-info/egg-info grouped by their normalised directory
    # name in listing order, then the EGG-INFO of an .egg entry
    names = os.listdir(entry)
    groups = {}
    eggs = []
    base = os.path.basename(entry).lower()
    for child in names:
        low = child.lower()
        if low.endswith((".dist-info", ".egg-info")):
            key = re.sub(r"[-_.]+", "-", low.rpartition(".")[0].partition("-")[0])
            groups.setdefault(key.replace("-", "_"), []).append(os.path.join(entry, child))
        elif base.endswith(".egg") and low == "egg-info":
            eggs.append(os.path.join(entry, "EGG-INFO"))
    return [path for group in groups.values() for path in group] + eggs
def zipped(entry):
    try:
        from importlib import metadata
    except ImportError:
        return []
    def head(dist):
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
        return header(text.splitlines())
    return [head(dist) for dist in metadata.distributions(path=[entry])]
def found_in(entry):
    if os.path.isdir(entry):
        try:
            return [head_dir(path) for path in candidates(entry)]
        except OSError:
            return []
    if os.path.isfile(entry):
        return zipped(entry)
    return []
seen = {}
for entry in sys.path:
    if not entry:
        continue
    for name, version in found_in(entry):
        if not name or norm(name) in seen:
            continue
        seen[norm(name)] = {"version": version, "location": entry}
print(@MARKER@ + json.dumps(
    {"version": sys.version, "executable": sys.executable, "packages": seen}))
""".replace("@MARKER@", repr(MARKER))


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
    result = runner((interpreter, "-c", SCRIPT), timeout_s)
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
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(SCRIPT, "<pyenv>", "exec"), {"__name__": "ascend_doctor_pyenv"})
    return parse_report(sys.executable, out.getvalue())


def parse_report(interpreter: str, stdout: str) -> PythonEnvironment:
    """The PythonEnvironment described by the script's marked output line."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        return _failed(interpreter, f"{interpreter} printed no report (is it a Python?)")
    try:
        report = json.loads(line[len(MARKER) :])
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
