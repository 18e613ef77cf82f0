"""What the machine holds for versions.parity (the Ascend version files, the judged interpreter's
stack packages), and the check's front (checks/registry.py): a machine holding none of it skips
before the pairing tables, their judges and their classes (checks.builtin.versions,
versions_model) are imported, so the doctor's bare run on a machine without an Ascend stack
never builds them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from checks.builtin import facts
from checks.builtin.facts import stack
from checks.context import Context
from checks.model import Finding, skipped
from probes.stack import Found, StackVersions

if TYPE_CHECKING:
    from checks.builtin.versions_model import Installed, Judgement
    from probes.host import PythonEnvironment

PACKAGES = ("torch", "torch_npu", "vllm", "vllm_ascend")
ABSENT = ("missing", "not_recorded")


def nothing_installed(ctx: Context) -> Finding | None:
    """The check's skip when the machine holds no Ascend stack; None when it holds some."""
    s = stack(ctx)
    if any(f.state not in ABSENT for f in _all_files(s)):
        return None
    py = facts.python(ctx)
    packages, python_line = _packages(py)
    if packages["torch_npu"] is not None or packages["vllm_ascend"] is not None:
        return None
    reason = ("the Ascend version files were not recorded"
              if any(f.state == "not_recorded" for f in _all_files(s))
              else "no Ascend driver, CANN toolkit or torch_npu found")
    lines = [line for name, found, version in _described(s)
             if (line := file_line(name, found, version)) is not None]
    return skipped(reason, *lines, python_line, rules=("nothing-installed",))


def _all_files(s: StackVersions) -> tuple[Found[Any], ...]:
    return (s.driver, s.firmware, s.toolkit, s.version_cfg, s.nnal, s.mindie)


def file_line(name: str, found: Found[Any], version: str | None) -> str | None:
    """The evidence line of one version file; None for one that is there but unusable (a
    warning, `version-file-unusable`, says it instead)."""
    if found.value is not None:
        return f"{name} {version or '(no version line)'} from {found.path}"
    if found.state in ("unreadable", "invalid"):
        return None
    if found.state == "not_recorded":
        return f"{name}: not recorded"
    return (f"{name}: not found (tried {', '.join(found.tried[:3])}"
            f"{', ...' if len(found.tried) > 3 else ''})")


def _cann_version(s: StackVersions) -> str | None:
    if s.toolkit.value is not None and s.toolkit.value.version:
        return s.toolkit.value.version
    return s.version_cfg.value.running_version if s.version_cfg.value else None


def _nnal_version(s: StackVersions) -> str | None:
    return (s.nnal.value.version or s.nnal.value.full_version) if s.nnal.value else None


def _described(s: StackVersions) -> list[tuple[str, Found[Any], str | None]]:
    """The files the evidence describes, in order, with their versions (MindIE only when it is
    there: it is optional)."""
    driver, fw = s.driver.value, s.firmware.value
    files: list[tuple[str, Found[Any], str | None]] = [
        ("driver", s.driver, driver.driver_version if driver else None),
        ("firmware", s.firmware, fw.version if fw else None),
        ("CANN toolkit", s.toolkit, _cann_version(s)),
        ("NNAL/ATB", s.nnal, _nnal_version(s))]
    if s.mindie.value is not None:
        files.append(("MindIE", s.mindie, s.mindie.value.version))
    return files


def _packages(py: PythonEnvironment) -> tuple[Mapping[str, str | None], str]:
    """The stack packages of the judged interpreter, and the evidence line saying so."""
    interpreter = py.interpreter or "the --python interpreter"
    if py.error:
        return (dict.fromkeys(PACKAGES),
                f"python packages of {interpreter} not read: {py.error}")
    packages = {name: py.version_of(name) for name in PACKAGES}
    shown = ", ".join(f"{n} {v or 'not installed'}" for n, v in packages.items())
    return packages, f"python {interpreter}: {shown}"


def read_installed(ctx: Context, j: Judgement) -> Installed:
    """The versions the machine holds; their evidence (and unusable files' warnings) go to j."""
    from checks.builtin.versions_model import Installed

    s = stack(ctx)
    for name, found, version in _described(s):
        line = file_line(name, found, version)
        if line is None:
            j.add("warn", f"{name} version file unusable: {found.error}",
                  f"Repair or reinstall the {name} package so its version file reads.",
                  rules=("version-file-unusable",))
        else:
            j.evidence.append(line)
        if name == "CANN toolkit" and s.toolkit.value is None and version:
            j.evidence.append(f"CANN {version} from {s.version_cfg.path}")
    py = facts.python(ctx)
    packages, python_line = _packages(py)
    j.evidence.append(python_line)
    family = s.toolkit.value.family if s.toolkit.value else None
    mindie = s.mindie.value.version if s.mindie.value else None
    return Installed(s.driver.value, s.firmware.value, _cann_version(s), family, _nnal_version(s),
                     mindie, packages, py.interpreter or "the --python interpreter", py.error)
