"""versions.parity: driver, firmware, CANN, NNAL, torch, torch_npu, vllm-ascend, MindIE agree.

Every pairing is judged against the tables of checks/data/compat.yaml (a copy of
facts/COMPAT.yaml), each only when both of its sides were found; what was not found is said
in the evidence. Version-suffix rules ("last two digits") do not exist (FACTCHECK A2/A3).
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from checks import datafiles
from checks.builtin import facts
from checks.context import Context
from checks.model import Finding, Status, skipped, worst
from probes.stack import Found, StackVersions, read_stack
from probes.versions import same_release, torch_base, try_parse_version

if TYPE_CHECKING:
    from probes.version_files import DriverVersionInfo, FirmwareVersionInfo

Row = Mapping[str, Any]


def stack(ctx: Context) -> StackVersions:
    """The Ascend version files, read once per run (cann.environment shares it)."""
    return ctx.fact("stack", lambda: read_stack(ctx.host))


# ----------------------------------------------------------------------------- compat data


@dataclass(frozen=True)
class CompatData:
    """The pairing tables of checks/data/compat.yaml that the judging reads."""

    torch_npu_rows: tuple[Row, ...]  # COMPAT.yaml torch_npu.active + historical
    extension_ranges: Mapping[str, tuple[str, ...]]  # pytorch_extension_compat_ranges
    vllm_rows: tuple[Row, ...]  # vllm_ascend.rows
    mindie_rows: tuple[Row, ...]  # mindie_compat.rows

    @property
    def known_cann(self) -> tuple[str, ...]:
        """Every CANN version any table names: outside these, the data cannot judge."""
        names = [str(r["cann"]) for r in (*self.torch_npu_rows, *self.vllm_rows,
                                          *self.mindie_rows)]
        names += [c for cs in self.extension_ranges.values() for c in cs]
        return tuple(names)


@functools.lru_cache(maxsize=1)
def compat_data() -> CompatData:
    raw = datafiles.load("data/compat.yaml")
    npu = raw["torch_npu"]
    return CompatData(
        torch_npu_rows=tuple(npu["active"]) + tuple(npu["historical"]),
        extension_ranges={str(k): tuple(str(c) for c in v)
                          for k, v in raw["pytorch_extension_compat_ranges"].items()},
        vllm_rows=tuple(raw["vllm_ascend"]["rows"]),
        mindie_rows=tuple(raw["mindie_compat"]["rows"]),
    )


def same(a: str | None, b: str | None) -> bool:
    """Same release (build and local labels ignored); False when either does not parse."""
    pa, pb = try_parse_version(a), try_parse_version(b)
    return pa is not None and pb is not None and same_release(pa, pb)


def _row_for(rows: Sequence[Row], key: str, version: str) -> Row | None:
    return next((r for r in rows if same(str(r[key]), version)), None)


def _in(version: str, names: Sequence[str]) -> bool:
    return any(same(version, n) for n in names)


# ----------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """One pairing judged: its status, what was compared, and the fix."""

    status: Status  # pass, warn or fail
    text: str
    remedy: str = ""


@dataclass
class Judgement:
    """Verdicts and evidence gathered while judging, folded into one Finding."""

    verdicts: list[Verdict] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)

    def add(self, status: Status, text: str, remedy: str = "") -> None:
        self.verdicts.append(Verdict(status, text, remedy))

    def finding(self, ok_summary: str) -> Finding:
        status = worst([v.status for v in self.verdicts]) if self.verdicts else "pass"
        problems = [v for v in self.verdicts if v.status != "pass"]
        agreed = [f"ok: {v.text}" for v in self.verdicts if v.status == "pass"]
        summary = "; ".join(v.text for v in problems) if problems else ok_summary
        remedy = " ".join(dict.fromkeys(v.remedy for v in problems if v.remedy))
        return Finding(status, summary, (*self.evidence, *agreed), remedy)


@dataclass(frozen=True)
class Installed:
    """The versions one machine has; None for what was not found."""

    driver: DriverVersionInfo | None
    firmware: FirmwareVersionInfo | None
    cann: str | None
    toolkit_family: str | None
    nnal: str | None
    mindie: str | None
    packages: Mapping[str, str | None]  # torch, torch_npu, vllm, vllm_ascend


PACKAGES = ("torch", "torch_npu", "vllm", "vllm_ascend")


def _unknown_is(ctx: Context) -> Status:
    # policy versions.unknown_is: a version newer than the data is a warning (issue #3)
    value = str(ctx.policy.get("versions", "unknown_is"))
    return value if value in ("pass", "warn", "fail") else "warn"  # type: ignore[return-value]


# ----------------------------------------------------------------------------- reading


def _describe_file(name: str, found: Found[Any], version: str | None, j: Judgement) -> None:
    if found.value is not None:
        j.evidence.append(f"{name} {version or '(no version line)'} from {found.path}")
    elif found.state in ("unreadable", "invalid"):
        j.add("warn", f"{name} version file unusable: {found.error}",
              f"Repair or reinstall the {name} package so its version file reads.")
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


def _read_packages(ctx: Context, j: Judgement) -> dict[str, str | None]:
    py = facts.python(ctx)
    if py.error:
        j.evidence.append(f"python packages of {py.interpreter or 'the --python interpreter'} "
                          f"not read: {py.error}; only the version files are judged")
        return dict.fromkeys(PACKAGES)
    found = {name: py.version_of(name) for name in PACKAGES}
    shown = ", ".join(f"{n} {v or 'not installed'}" for n, v in found.items())
    j.evidence.append(f"python {py.interpreter}: {shown}")
    return found


def read_installed(ctx: Context, j: Judgement) -> Installed:
    s = stack(ctx)
    cann, nnal = _read_files(s, j)
    family = s.toolkit.value.family if s.toolkit.value else None
    mindie = s.mindie.value.version if s.mindie.value else None
    return Installed(s.driver.value, s.firmware.value, cann, family, nnal, mindie,
                     _read_packages(ctx, j))


# ----------------------------------------------------------------------------- judging


def judge_driver_firmware(inst: Installed, j: Judgement) -> None:
    """COMPAT.yaml installed_file_crosschecks.firmware_vs_driver."""
    drv, fw = inst.driver, inst.firmware
    if drv is None or fw is None or not drv.driver_version or not fw.version:
        return
    from probes.version_files import driver_accepted_by_firmware, firmware_in_driver_range

    d, f = drv.driver_version, fw.version
    in_range = firmware_in_driver_range(f, drv)
    ranges = ",".join(f"[{lo},{hi}]" for lo, hi in drv.compatible_fw_ranges)
    remedy = ("Install driver and firmware from the same Ascend HDK release "
              "(firmware after the driver, then a cold reboot).")
    if in_range is False:
        j.add("fail", f"firmware {f} is outside driver {d}'s compatible_version_fw {ranges}",
              remedy)
    elif in_range:
        j.add("pass", f"firmware {f} within driver {d}'s compatible_version_fw {ranges}")
    else:
        j.evidence.append(f"driver {d} declares no usable compatible_version_fw")
    accepted = driver_accepted_by_firmware(d, fw)
    entries = ",".join(f"[{lo},{hi}]" for lo, hi in fw.compatible_drv)
    if accepted is False:
        j.add("fail", f"driver {d} is not in firmware {f}'s compatible_version_drv {entries}",
              remedy)
    elif accepted:
        j.add("pass", f"driver {d} accepted by firmware {f}'s compatible_version_drv")
    else:
        j.evidence.append(f"firmware {f} declares no compatible_version_drv")


def judge_driver_toolkit(inst: Installed, j: Judgement) -> None:
    """COMPAT.yaml installed_file_crosschecks.driver_vs_cann: a warning, the data is derived."""
    drv, family = inst.driver, inst.toolkit_family
    if drv is None or family is None or not drv.compatible_families:
        return
    d = drv.driver_version
    if family in drv.compatible_families:
        j.add("pass", f"CANN {inst.cann} family {family} in driver {d}'s compatible_version")
        return
    j.add("warn", f"CANN {inst.cann} innerversion family {family} is not in driver {d}'s "
          f"compatible_version {','.join(drv.compatible_families)}",
          "Install an Ascend HDK (driver) release listed for this CANN version "
          "(CANN release notes), or a CANN the driver lists.")


def judge_nnal(inst: Installed, j: Judgement) -> None:
    """NNAL (ATB) must be the same release as CANN (vllm-ascend installation.md)."""
    if inst.cann is None or inst.nnal is None:
        return
    if same(inst.cann, inst.nnal):
        j.add("pass", f"NNAL/ATB {inst.nnal} is the CANN {inst.cann} release")
        return
    j.add("fail", f"NNAL/ATB {inst.nnal} is not the CANN {inst.cann} release "
          "(NNAL must equal CANN)",
          f"Install Ascend-cann-nnal {inst.cann} (the NNAL release of the installed CANN).")


def judge_torch(inst: Installed, j: Judgement) -> None:
    """torch_npu is built per torch release: base versions must be equal (COMPAT.yaml §1)."""
    torch, npu = inst.packages["torch"], inst.packages["torch_npu"]
    if torch is None or npu is None:
        if npu is not None:
            j.add("fail", f"torch_npu {npu} is installed without torch",
                  "pip install the torch release torch_npu was built for.")
        return
    if try_parse_version(torch) is None or try_parse_version(npu) is None:
        j.add("warn", f"cannot parse torch {torch} / torch_npu {npu}", "")
        return
    if torch_base(torch) == torch_base(npu):
        j.add("pass", f"torch_npu {npu} is built for torch {torch}")
        return
    j.add("fail", f"torch_npu {npu} is built for torch {torch_base(npu)}, found torch {torch}",
          _torch_remedy(torch, npu, inst.cann))


def _torch_remedy(torch: str, npu: str, cann: str | None) -> str:
    rows = compat_data().torch_npu_rows
    mine = _row_for(rows, "torch_npu", npu)
    want_torch = mine["torch"] if mine else torch_base(npu)
    fits = [r for r in rows if torch_base(str(r["torch"])) == torch_base(torch)]
    best = next((r for r in fits if cann and same(str(r["cann"]), cann)), None) or (
        fits[0] if fits else None)
    other = (f", or install torch_npu {best['torch_npu']} (built for torch {best['torch']}, "
             f"CANN {best['cann']})" if best else "")
    return f"pip install torch=={want_torch} to match torch_npu {npu}{other}."


def _vllm_pairs(npu: str, cann: str) -> Row | None:
    return next((r for r in compat_data().vllm_rows
                 if same(str(r["torch_npu"]), npu) and same(str(r["cann"]), cann)), None)


def judge_torch_npu_cann(inst: Installed, j: Judgement, unknown: Status) -> None:
    """torch_npu <-> CANN: COMPAT.yaml torch_npu table, then pytorch_extension_compat_ranges."""
    npu, cann = inst.packages["torch_npu"], inst.cann
    if npu is None or cann is None:
        return
    data = compat_data()
    row = _row_for(data.torch_npu_rows, "torch_npu", npu)
    if row is not None and same(str(row["cann"]), cann):
        j.add("pass", f"torch_npu {npu} pairs with CANN {cann} (torch_npu row {row['branch']})")
        return
    vrow = _vllm_pairs(npu, cann)
    if vrow is not None:  # a vllm-ascend release row is also a vendor-tested pairing
        j.add("pass", f"torch_npu {npu} pairs with CANN {cann} "
              f"(vllm-ascend {vrow['vllm_ascend']} row)")
        return
    known_npu = row is not None or _row_for(data.vllm_rows, "torch_npu", npu) is not None
    if row is not None:
        product = str(row["branch"]).rsplit("-", 1)[-1]
        if _in(cann, data.extension_ranges.get(product, ())):
            j.add("warn", f"CANN {cann} is not the CANN {row['cann']} torch_npu {npu} was "
                  f"built with ({row['branch']}), older but declared compatible with "
                  f"Ascend Extension for PyTorch {product}",
                  f"Prefer CANN {row['cann']} for torch_npu {npu}.")
            return
    if not known_npu or not _in(cann, data.known_cann):
        what = f"torch_npu {npu}" if not known_npu else f"CANN {cann}"
        j.add(unknown, f"{what} is not in the compatibility data; torch_npu {npu} with "
              f"CANN {cann} cannot be judged",
              "Check the torch_npu release notes (Ascend/pytorch COMPATIBILITY.en.md).")
        return
    want = row["cann"] if row else _vllm_cann(npu)
    where = f"torch_npu row {row['branch']}" if row else "vllm-ascend rows"
    j.add("fail", f"torch_npu {npu} wants CANN {want} ({where}), found CANN {cann}",
          f"Install CANN {want}, or the torch_npu release built for CANN {cann}.")


def _vllm_cann(npu: str) -> str:
    cands = [str(r["cann"]) for r in compat_data().vllm_rows if same(str(r["torch_npu"]), npu)]
    return "/".join(dict.fromkeys(cands))


def judge_vllm_ascend(inst: Installed, j: Judgement, unknown: Status) -> None:
    """vllm-ascend: vllm, torch, torch_npu, CANN all from its row (COMPAT.yaml vllm_ascend)."""
    va = inst.packages["vllm_ascend"]
    if va is None:
        return
    row = _row_for(compat_data().vllm_rows, "vllm_ascend", va)
    if row is None:
        j.add(unknown, f"vllm-ascend {va} is not in the compatibility data",
              "Check the vllm-ascend release notes (versioning_policy.md).")
        return
    name = f"vllm-ascend {row['vllm_ascend']} row"
    wants = {
        "vllm": (str(row["vllm"]).split("/"), inst.packages["vllm"], same),
        "torch": ([str(row["torch"])], inst.packages["torch"], _same_torch),
        "torch_npu": ([str(row["torch_npu"])], inst.packages["torch_npu"], same),
        "CANN": ([str(row["cann"])], inst.cann, same),
    }
    bad = []
    for what, (want, have, equal) in wants.items():
        if have is None and what == "CANN":
            continue  # no toolkit file found: said in the evidence
        if have is None or not any(equal(have, w) for w in want):
            bad.append(what)
            j.add("fail", f"{name} wants {what} {'/'.join(want)}, found {have or 'none'}",
                  f"Install {what} {want[0]} (the {name}).")
    if not bad:
        j.add("pass", f"vllm {inst.packages['vllm']}, torch, torch_npu and CANN match the "
              f"{name}")


def _same_torch(have: str, want: str) -> bool:
    # CPU and CUDA wheels carry a local label (2.10.0+cpu): compare base versions
    return try_parse_version(have) is not None and torch_base(have) == torch_base(want)


def judge_mindie(inst: Installed, j: Judgement, unknown: Status) -> None:
    """MindIE's CANN from COMPAT.yaml mindie_compat."""
    if inst.mindie is None:
        return
    row = _row_for(compat_data().mindie_rows, "mindie", inst.mindie)
    if row is None:
        j.add(unknown, f"MindIE {inst.mindie} is not in the compatibility data",
              "Check the MindIE release notes for its CANN version.")
        return
    if inst.cann is None:
        return
    if same(str(row["cann"]), inst.cann):
        j.add("pass", f"MindIE {inst.mindie} pairs with CANN {inst.cann}")
        return
    j.add("fail", f"MindIE {row['mindie']} row wants CANN {row['cann']}, found CANN {inst.cann}",
          f"Install CANN {row['cann']} (and its NNAL) for MindIE {row['mindie']}.")


# ----------------------------------------------------------------------------- the check


def _skip_reason(s: StackVersions, inst: Installed) -> str | None:
    """Why there is nothing to judge, or None when some part of the stack is present."""
    files = (s.driver, s.firmware, s.toolkit, s.version_cfg, s.nnal, s.mindie)
    if any(f.state not in ("missing", "not_recorded") for f in files):
        return None
    if inst.packages["torch_npu"] is not None or inst.packages["vllm_ascend"] is not None:
        return None
    if any(f.state == "not_recorded" for f in files):
        return "the Ascend version files were not recorded"
    return "no Ascend driver, CANN toolkit or torch_npu found"


def versions_parity(ctx: Context) -> Finding:
    j = Judgement()
    inst = read_installed(ctx, j)
    reason = _skip_reason(stack(ctx), inst)
    if reason is not None:
        return skipped(reason, *j.evidence)
    unknown = _unknown_is(ctx)
    judge_driver_firmware(inst, j)
    judge_driver_toolkit(inst, j)
    judge_nnal(inst, j)
    judge_torch(inst, j)
    judge_torch_npu_cann(inst, j, unknown)
    judge_vllm_ascend(inst, j, unknown)
    judge_mindie(inst, j, unknown)
    return j.finding("the installed Ascend stack agrees with itself and the pairing tables")


def toolkit_dir(toolkit_file: str) -> str:
    """The toolkit directory of an `ascend_toolkit_install.info` path (above `<arch>-linux`)."""
    parent = posixpath.dirname(toolkit_file)
    return posixpath.dirname(parent) if parent.endswith("-linux") else parent

