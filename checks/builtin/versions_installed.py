"""What the machine holds for versions.parity (the Ascend version files, the judged interpreter's
stack packages), and the check's front (checks/registry.py): a machine holding none of it skips
before the pairing tables and their judges (checks.builtin.versions) are imported, so the
doctor's bare run on a machine without an Ascend stack never builds them."""

from __future__ import annotations

from typing import Any

from checks.builtin import facts
from checks.builtin.facts import stack
from checks.builtin.versions_model import Installed, Judgement
from checks.context import Context
from checks.model import Finding, skipped
from probes.stack import Found, StackVersions

PACKAGES = ("torch", "torch_npu", "vllm", "vllm_ascend")


def nothing_installed(ctx: Context) -> Finding | None:
    """The check's skip when the machine holds no Ascend stack; None when it holds some."""
    j = Judgement()
    inst = read_installed(ctx, j)
    reason = skip_reason(stack(ctx), inst)
    return None if reason is None else skipped(reason, *j.evidence, rules=("nothing-installed",))


def _describe_file(name: str, found: Found[Any], version: str | None, j: Judgement) -> None:
    if found.value is not None:
        j.evidence.append(f"{name} {version or '(no version line)'} from {found.path}")
    elif found.state in ("unreadable", "invalid"):
        j.add("warn", f"{name} version file unusable: {found.error}",
              f"Repair or reinstall the {name} package so its version file reads.",
              rules=("version-file-unusable",))
    elif found.state == "not_recorded":
        j.evidence.append(f"{name}: not recorded")
    else:
        j.evidence.append(f"{name}: not found (tried {', '.join(found.tried[:3])}"
                          f"{', ...' if len(found.tried) > 3 else ''})")


def _cann_version(s: StackVersions) -> str | None:
    if s.toolkit.value is not None and s.toolkit.value.version:
        return s.toolkit.value.version
    return s.version_cfg.value.running_version if s.version_cfg.value else None


def _read_files(s: StackVersions, j: Judgement) -> tuple[str | None, str | None]:
    driver, fw = s.driver.value, s.firmware.value
    _describe_file("driver", s.driver, driver.driver_version if driver else None, j)
    _describe_file("firmware", s.firmware, fw.version if fw else None, j)
    cann = _cann_version(s)
    _describe_file("CANN toolkit", s.toolkit, cann, j)
    if s.toolkit.value is None and cann:
        j.evidence.append(f"CANN {cann} from {s.version_cfg.path}")
    nnal = (s.nnal.value.version or s.nnal.value.full_version) if s.nnal.value else None
    _describe_file("NNAL/ATB", s.nnal, nnal, j)
    mindie = s.mindie.value.version if s.mindie.value else None
    if s.mindie.value is not None:  # MindIE is optional: say nothing when it is absent
        _describe_file("MindIE", s.mindie, mindie, j)
    return cann, nnal


def read_installed(ctx: Context, j: Judgement) -> Installed:
    s = stack(ctx)
    cann, nnal = _read_files(s, j)
    family = s.toolkit.value.family if s.toolkit.value else None
    mindie = s.mindie.value.version if s.mindie.value else None
    py = facts.python(ctx)
    interpreter = py.interpreter or "the --python interpreter"
    if py.error:
        j.evidence.append(f"python packages of {interpreter} not read: {py.error}")
        packages: dict[str, str | None] = dict.fromkeys(PACKAGES)
    else:
        packages = {name: py.version_of(name) for name in PACKAGES}
        shown = ", ".join(f"{n} {v or 'not installed'}" for n, v in packages.items())
        j.evidence.append(f"python {interpreter}: {shown}")
    return Installed(s.driver.value, s.firmware.value, cann, family, nnal, mindie, packages,
                     interpreter, py.error)


def skip_reason(s: StackVersions, inst: Installed) -> str | None:
    """Why there is nothing to judge, or None when some part of the stack is present."""
    files = (s.driver, s.firmware, s.toolkit, s.version_cfg, s.nnal, s.mindie)
    if any(f.state not in ("missing", "not_recorded") for f in files):
        return None
    if inst.packages["torch_npu"] is not None or inst.packages["vllm_ascend"] is not None:
        return None
    if any(f.state == "not_recorded" for f in files):
        return "the Ascend version files were not recorded"
    return "no Ascend driver, CANN toolkit or torch_npu found"
