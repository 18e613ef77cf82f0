"""versions.parity's `pip check`, read statically: the requirements the stack packages declare
(`Requires-Dist` in their METADATA, probes.pyenv_requires) on one another, against the
versions installed in the judged interpreter, without running it.

A requirement behind an extra (`; extra == "..."`) is not judged (the metadata does not say
which extras were installed). Markers are evaluated for the judged interpreter: its Python
version, Linux, this machine's architecture and kernel (a container shares the host's), and
CPython (an assumption: the static read knows no implementation). A static read knows only
X.Y: a marker on the full version is then evaluated at X.Y.0 and at a late patch release
alike, and where the two disagree the requirement is not judged and the evidence says so.
Requirement syntax and version matching are PEP 508 / PEP 440 as the `packaging` library
implements them; it is loaded only when a stack package is installed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from probes.errors import NotRecorded
from probes.host import Host, PythonEnvironment, normalise_dist_name
from probes.pyenv_requires import requires_dist

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from checks.builtin.versions_model import Judgement

# The packages whose requirements on one another are judged (PEP 503 names).
STACK = ("torch", "torch-npu", "vllm", "vllm-ascend", "transformers", "tokenizers",
         "triton-ascend")
LAST_PATCH = "99"  # stands for the last patch release of an X.Y Python
PIP_CHECK_REMEDY = ("Install the versions the packages require of one another, or pick one "
                    "vllm-ascend release row and install exactly its packages; then run "
                    "`python -m pip check` in the deployment's interpreter.")
SHOWN = 5  # unmet requirements named in the summary; the evidence lists them all


def marker_env(python_version: str, full_version: str) -> dict[str, str]:
    """The PEP 508 marker variables of the judged interpreter (Python X.Y, X.Y.Z)."""
    import platform  # costs start-up; needed only where a marker is evaluated

    return {"python_version": python_version, "python_full_version": full_version,
            "implementation_version": full_version, "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": platform.machine(), "platform_release": platform.release(),
            "platform_version": platform.version(), "extra": ""}


def applies(req: Requirement, python_version: str) -> bool | None:
    """Whether the requirement applies to the judged interpreter; None: cannot be told.
    `python_version` is X.Y.Z when the interpreter ran, X.Y when it was read statically."""
    if req.marker is None:
        return True
    parts = python_version.split(".")
    if len(parts) < 2:
        return None
    xy = ".".join(parts[:2])
    fulls = [python_version] if len(parts) > 2 else [f"{xy}.0", f"{xy}.{LAST_PATCH}"]
    answers = {req.marker.evaluate(marker_env(xy, full)) for full in fulls}
    return answers.pop() if len(answers) == 1 else None


def judge_requirements(host: Host, py: PythonEnvironment, j: Judgement) -> None:
    """Unmet or conflicting requirements among the stack packages: a warning each."""
    present = [name for name in STACK if py.version_of(name) is not None]
    if py.error or not present:
        return
    unmet: list[str] = []
    not_read: list[tuple[str, str]] = []  # (package name, why)
    checked = 0
    for name in present:
        owner = f"{name} {py.version_of(name)}"
        lines = _declared(host, py, name)
        if isinstance(lines, str):
            not_read.append((name, lines))
            continue
        for line in lines:
            said = _check(owner, line, py, j)
            if said is not None:
                checked += 1
                unmet += [said] if said else []
    if not_read:
        j.evidence.append(f"pip check: the requirements of {', '.join(o for o, _ in not_read)} "
                          f"not read ({not_read[0][0]}: {not_read[0][1]})")
    _say(unmet, checked, j)


def _declared(host: Host, py: PythonEnvironment, name: str) -> tuple[str, ...] | str:
    """The Requires-Dist lines of `name`, or why they were not read."""
    where = py.locations.get(normalise_dist_name(name))
    if where is None:
        return "its location is unknown"
    try:
        return requires_dist(host, where, name)
    except NotRecorded:
        return "its METADATA was not recorded"


def _check(owner: str, line: str, py: PythonEnvironment, j: Judgement) -> str | None:
    """None: not judged (another package, a marker that does not apply or cannot be told);
    "": met; else the unmet requirement in words."""
    # the name leads a PEP 508 line: `packaging` is loaded only for a line naming the stack
    if normalise_dist_name(re.split(r"[\s\[<>=!~;(@]", line.strip(), maxsplit=1)[0]) \
            not in STACK:
        return None
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion

    try:
        req = Requirement(line)
    except InvalidRequirement:
        j.evidence.append(f"pip check: {owner} declares {line!r}, not PEP 508: not judged")
        return None
    target = normalise_dist_name(req.name)
    if target not in STACK:
        return None
    use = applies(req, py.python_version)
    if use is None:
        j.evidence.append(f"pip check: {owner} requires {line!r}: whether its marker holds "
                          f"for Python {py.python_version or '(unknown)'} cannot be told")
    if not use:
        return None
    have = py.version_of(target)
    try:
        met = have is not None and req.specifier.contains(have, prereleases=True)
    except InvalidVersion:
        j.evidence.append(f"pip check: {target} {have} is not a PEP 440 version: not judged")
        return None
    if met:
        return ""
    return (f"{owner} requires {req.name}{req.specifier}, "
            f"{'found ' + str(have) if have else 'not installed'}")


def _say(unmet: list[str], checked: int, j: Judgement) -> None:
    what = "read statically from the packages' METADATA"
    if not unmet:
        if checked:
            j.add("pass", f"pip check ({what}): the {checked} requirements the stack "
                  "packages declare on one another are met")
        return
    j.evidence.extend(f"pip check: {line}" for line in unmet)
    more = f" (and {len(unmet) - SHOWN} more)" if len(unmet) > SHOWN else ""
    j.add("warn", f"pip check ({what}): {'; '.join(unmet[:SHOWN])}{more}", PIP_CHECK_REMEDY,
          rules=("pip-check",))
