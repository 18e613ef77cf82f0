"""versions.parity: driver, firmware, CANN, NNAL, torch, torch_npu, vllm-ascend, MindIE agree.

Every pairing is judged against the tables of checks/data/compat.yaml (checks.builtin.compat),
each only when both of its sides were found; what was not found is said in the evidence.
What a vendor document declares is judged strictly (outside it: fail); what is only inferred
from installed files (the `compatible_version*` fields, whose meaning no vendor document
states) or only tested together, never declared, is a warning at most. Version-suffix rules
("last two digits") do not exist: torch_npu follows torch's numbering and drivers the HDK's.

The packages are those of the judged interpreter (facts.python: `--python`, or the target's):
one that cannot be inspected, or that holds no torch_npu, is a warning, never a pass.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from checks.builtin import facts
from checks.builtin.compat import (
    HdkRow,
    compat_data,
    hdk_matches,
    hdk_row,
    listed,
    mindie_pairing,
    newer_than_all,
    product_of,
    recommended_driver,
    row_for,
    same,
    vllm_pairing,
    vllm_tested_cann,
)
from checks.context import Context
from checks.model import Finding, Status, skipped, worst
from probes.stack import Found, StackVersions, read_stack
from probes.versions import torch_base, try_parse_version

if TYPE_CHECKING:
    from probes.version_files import DriverVersionInfo, FirmwareVersionInfo

__all__ = ["Judgement", "compat_data", "stack", "toolkit_dir", "versions_parity"]


def stack(ctx: Context) -> StackVersions:
    """The Ascend version files, read once per run (cann.environment shares it)."""
    return ctx.fact("stack", lambda: read_stack(ctx.host))


# ----------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """One pairing judged: its status, what was compared, and the fix."""

    status: Status  # pass, warn or fail
    text: str
    remedy: str = ""
    rules: tuple[str, ...] = ()  # the rule that decided a warn or fail (CHECK_RULES)


@dataclass
class Judgement:
    """Verdicts and evidence gathered while judging, folded into one Finding: its rules are
    those of the verdicts its summary names (warns and fails), in the order they were found."""

    verdicts: list[Verdict] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)

    def add(self, status: Status, text: str, remedy: str = "",
            rules: tuple[str, ...] = ()) -> None:
        self.verdicts.append(Verdict(status, text, remedy, rules))

    def finding(self, ok_summary: str) -> Finding:
        status = worst([v.status for v in self.verdicts]) if self.verdicts else "pass"
        problems = [v for v in self.verdicts if v.status != "pass"]
        agreed = [f"ok: {v.text}" for v in self.verdicts if v.status == "pass"]
        summary = "; ".join(v.text for v in problems) if problems else ok_summary
        remedy = " ".join(dict.fromkeys(v.remedy for v in problems if v.remedy))
        rules = tuple(dict.fromkeys(rule for v in problems for rule in v.rules))
        return Finding(status, summary, (*self.evidence, *agreed), remedy, rules)


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
    interpreter: str = ""  # the judged interpreter, as given
    python_error: str = ""  # why its packages could not be read; "" when they were


PACKAGES = ("torch", "torch_npu", "vllm", "vllm_ascend")

# The check's rules, by name -> the statuses they give; its playbook lists the same rules under
# "What the check does" (tests/checks/test_check_rules.py); each tags the findings it decides.
# "policy": the status policy versions.unknown_is sets (warn by default).
CHECK_RULES: dict[str, dict[str, str]] = {
    "versions.parity": {
        "nothing-installed": "skip",  # _skip_reason
        "version-file-unusable": "warn",  # _describe_file
        "interpreter-not-judged": "warn",  # judge_interpreter
        "firmware-driver-fields": "warn",  # judge_driver_firmware (derived)
        "driver-hdk-table": "warn/fail",  # _driver_by_table, _by_minimum, _outside_declared
        "recommended-pair": "warn",  # _by_recommended_pair
        "innerversion-family": "warn",  # _driver_by_family (derived)
        "loaded-driver": "warn",  # judge_loaded_driver
        # judge_driver_cann, judge_torch_npu_cann, judge_vllm_ascend, judge_mindie
        "not-in-the-data": "policy",
        "nnal-equals-cann": "fail",  # judge_nnal
        "torch-npu-build": "warn/fail",  # judge_torch
        "torch-npu-cann": "warn/fail",  # judge_torch_npu_cann, _judge_declared_range
        "vllm-ascend-row": "fail",  # judge_vllm_ascend
        "mindie-cann": "fail",  # judge_mindie
        # judge_toolchain (checks.builtin.toolchain, checks/data/toolchain.yaml)
        "nnal-required": "fail",
        "triton-ascend-required": "fail",
        "atb-abi": "fail",
        "bisheng-not-found": "warn",
        "soc-build": "fail",
    },
}
PYTHON_REMEDY = ("Run the doctor with --python set to the interpreter that serves the model "
                 "(e.g. the virtualenv of `vllm serve`).")


def _unknown_is(ctx: Context) -> Status:
    # policy versions.unknown_is: a version newer than the data is a warning by default
    value = str(ctx.policy.get("versions", "unknown_is"))
    return value if value in ("pass", "warn", "fail") else "warn"  # type: ignore[return-value]


# ----------------------------------------------------------------------------- reading


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


# ----------------------------------------------------------------------------- the interpreter


def judge_interpreter(inst: Installed, j: Judgement) -> None:
    """The packages side is judged only when it was read and holds torch_npu."""
    if inst.python_error:
        j.add("warn", f"torch_npu not judged: the packages of {inst.interpreter} could not be "
              f"read ({inst.python_error})", PYTHON_REMEDY, rules=("interpreter-not-judged",))
    elif inst.packages["torch_npu"] is None:
        j.add("warn", f"no torch_npu in {inst.interpreter}: torch_npu and its CANN pairing "
              "not judged", PYTHON_REMEDY + " Or install torch_npu there.",
              rules=("interpreter-not-judged",))


# ----------------------------------------------------------------------------- driver side

HDK_REMEDY = ("Install driver and firmware from an Ascend HDK release the CANN release notes "
              "list for CANN {cann}, or the CANN that pairs with this HDK.")
DERIVED = ("(an installer field whose meaning no vendor document states: a warning, not a "
           "verdict)")


def judge_driver_firmware(inst: Installed, j: Judgement) -> None:
    """The `compatible_version_fw`/`_drv` fields (derived rules: warnings at most)."""
    drv, fw = inst.driver, inst.firmware
    if drv is None or fw is None or not drv.driver_version or not fw.version:
        return
    from probes.version_files import driver_accepted_by_firmware, firmware_in_driver_range

    d, f = drv.driver_version, fw.version
    remedy = ("Install driver and firmware from the same Ascend HDK release "
              "(firmware after the driver, then a cold reboot).")
    in_range = firmware_in_driver_range(f, drv)
    ranges = ",".join(f"[{lo},{hi}]" for lo, hi in drv.compatible_fw_ranges)
    if in_range is None:
        j.evidence.append(f"driver {d} declares no usable compatible_version_fw")
    elif in_range:
        j.add("pass", f"firmware {f} within driver {d}'s compatible_version_fw {ranges}")
    else:
        j.add("warn", f"firmware {f} is outside driver {d}'s compatible_version_fw {ranges} "
              f"{DERIVED}", remedy, rules=("firmware-driver-fields",))
    accepted = driver_accepted_by_firmware(d, fw)
    entries = ",".join(f"[{lo},{hi}]" for lo, hi in fw.compatible_drv)
    if accepted is None:
        j.evidence.append(f"firmware {f} declares no compatible_version_drv")
    elif accepted:
        j.add("pass", f"driver {d} accepted by firmware {f}'s compatible_version_drv")
    else:
        j.add("warn", f"driver {d} is not in firmware {f}'s compatible_version_drv {entries} "
              f"{DERIVED}", remedy, rules=("firmware-driver-fields",))


def judge_driver_cann(inst: Installed, j: Judgement, unknown: Status) -> None:
    """The driver's HDK release against cann_to_hdk.declared; the toolkit's innerversion
    family in the driver's `compatible_version` corroborates (a derived rule: warn)."""
    d = inst.driver.driver_version if inst.driver else None
    if d is None or inst.cann is None:
        return
    by_table = _driver_by_table(inst, d, inst.cann, j)
    by_family = _driver_by_family(inst, j)
    if not by_table and not by_family:
        j.add(unknown, f"driver {d} with CANN {inst.cann} not judged: CANN {inst.cann} has no "
              "declared HDK list in the compatibility data and "
              + ("the driver's version.info has no compatible_version" if inst.driver and not
                 inst.driver.compatible_families else "the toolkit names no innerversion"),
              f"Check the CANN {inst.cann} release notes for the Ascend HDK it needs.",
              rules=("not-in-the-data",))


def _driver_by_table(inst: Installed, driver: str, cann: str, j: Judgement) -> bool:
    """Judge by the CANN->HDK table (or, without a list, the install helper's recommended
    pair); False when neither has anything to say."""
    row = hdk_row(cann)
    if (row is None or row.kind == "community") and _by_recommended_pair(driver, cann, j):
        return True
    if row is None:
        j.evidence.append(f"CANN {cann}: no HDK list in the compatibility data")
        return False
    if row.kind == "minimum":
        return _by_minimum(driver, cann, row, j)
    match = next(((h, p) for h, p in row.entries if hdk_matches(driver, h)), None)
    hdks = ", ".join(h + (f" ({p})" if p else "") for h, p in row.entries)
    if match is not None:
        what = {"complete": "declared for", "partial": "paired with",
                "community": "seen (community reports) with"}[row.kind]
        product = f" on {match[1]}" if match[1] else ""
        j.add("pass", f"driver {driver} is an HDK {match[0]} release {what} CANN "
              f"{cann}{product}")
        return True
    if row.kind == "complete":
        _outside_declared(inst, driver, cann, row, hdks, j)
        return True
    if row.kind == "partial":
        j.add("warn", f"driver {driver} is not an HDK paired with CANN {cann} in the data "
              f"({hdks}); the CANN {cann} release notes may list more",
              HDK_REMEDY.format(cann=cann), rules=("driver-hdk-table",))
        return True
    j.evidence.append(f"driver {driver} is not among the HDKs community reports show with "
                      f"CANN {cann} ({hdks}): not judged by that")
    return False


def _outside_declared(inst: Installed, driver: str, cann: str, row: HdkRow, hdks: str,
                      j: Judgement) -> None:
    """A driver outside the declared list fails, unless it is newer than every listed HDK and
    its compatible_version names the toolkit's family: then it warns."""
    families = inst.driver.compatible_families if inst.driver else ()
    if (inst.toolkit_family and inst.toolkit_family in families
            and newer_than_all(driver, [h for h, _ in row.entries])):
        j.add("warn", f"driver {driver} is newer than the HDKs declared for CANN {cann} "
              f"({hdks}; {row.source}); its compatible_version lists the toolkit's family "
              f"{inst.toolkit_family} {DERIVED}", HDK_REMEDY.format(cann=cann),
              rules=("driver-hdk-table",))
        return
    j.add("fail", f"driver {driver} is not an HDK release declared for CANN {cann} "
          f"({hdks}; {row.source})", HDK_REMEDY.format(cann=cann),
          rules=("driver-hdk-table",))


def _by_minimum(driver: str, cann: str, row: HdkRow, j: Judgement) -> bool:
    floor = row.entries[0][0]
    have, want = try_parse_version(driver), try_parse_version(floor)
    if have is None or want is None:
        j.evidence.append(f"driver {driver}: not comparable with HDK {floor}")
        return False
    if have >= want or hdk_matches(driver, floor):
        j.add("pass", f"driver {driver} is at or above HDK {floor}, the minimum declared for "
              f"CANN {cann}")
    else:
        j.add("fail", f"driver {driver} is older than HDK {floor}, the minimum declared for "
              f"CANN {cann} ({row.source})", HDK_REMEDY.format(cann=cann),
              rules=("driver-hdk-table",))
    return True


def _by_recommended_pair(driver: str, cann: str, j: Judgement) -> bool:
    """The install helper's pair, a warning level: its driver passes as the recommended one,
    another warns (the helper names one driver per CANN, not every compatible one)."""
    helper = recommended_driver(cann)
    if helper is None:
        return False
    if hdk_matches(driver, helper):
        j.add("pass", f"driver {driver} is the HDK {helper} the Ascend install helper pairs "
              f"with CANN {cann}")
        return True
    j.add("warn", f"driver {driver} is not the HDK {helper} the Ascend install helper pairs "
          f"with CANN {cann} (Ascend/docs _static/package_info.js @ b224fcc5f39c); no declared "
          "HDK list for that CANN is in the data", HDK_REMEDY.format(cann=cann),
          rules=("recommended-pair",))
    return True


def _driver_by_family(inst: Installed, j: Judgement) -> bool:
    """The toolkit's innerversion family in the driver's compatible_version (derived)."""
    drv, family = inst.driver, inst.toolkit_family
    if drv is None or family is None or not drv.compatible_families:
        return False
    d = drv.driver_version
    if family in drv.compatible_families:
        j.add("pass", f"CANN {inst.cann} family {family} in driver {d}'s compatible_version")
    else:
        j.add("warn", f"CANN {inst.cann} innerversion family {family} is not in driver {d}'s "
              f"compatible_version {','.join(drv.compatible_families)} {DERIVED}",
              HDK_REMEDY.format(cann=inst.cann), rules=("innerversion-family",))
    return True


def judge_loaded_driver(ctx: Context, inst: Installed, j: Judgement) -> None:
    """The driver npu-smi reports (its title's `Version:`) against driver/version.info: two
    readings of one driver that must agree; when they do not, the installed files changed
    since the running driver was loaded (an upgrade not yet rebooted) or npu-smi belongs to
    another installation."""
    installed = inst.driver.driver_version if inst.driver else None
    reading = facts.npu(ctx)
    loaded = None if reading.is_error or reading.info is None else reading.info.driver_version
    if not installed or not loaded:
        return
    if hdk_matches(loaded, installed) or hdk_matches(installed, loaded):
        j.add("pass", f"npu-smi reports driver {loaded}, as driver/version.info says")
        return
    j.add("warn", f"npu-smi reports driver {loaded} but driver/version.info says {installed}: "
          "the driver files changed since the running driver was loaded (an upgrade not yet "
          "rebooted), or npu-smi comes from another installation",
          "Reboot (or reload the driver) after a driver upgrade, and run the npu-smi of the "
          "installed driver.", rules=("loaded-driver",))


def judge_nnal(inst: Installed, j: Judgement) -> None:
    """NNAL (ATB) must be the same release as CANN (vllm-ascend installation.md)."""
    if inst.cann is None or inst.nnal is None:
        return
    if same(inst.cann, inst.nnal):
        j.add("pass", f"NNAL/ATB {inst.nnal} is the CANN {inst.cann} release")
        return
    j.add("fail", f"NNAL/ATB {inst.nnal} is not the CANN {inst.cann} release "
          "(NNAL must equal CANN)",
          f"Install Ascend-cann-nnal {inst.cann} (the NNAL release of the installed CANN).",
          rules=("nnal-equals-cann",))


# ----------------------------------------------------------------------------- python side


def judge_torch(inst: Installed, j: Judgement) -> None:
    """torch_npu is built per torch release: base versions must be equal (Ascend/pytorch)."""
    torch, npu = inst.packages["torch"], inst.packages["torch_npu"]
    if torch is None or npu is None:
        if npu is not None:
            j.add("fail", f"torch_npu {npu} is installed without torch",
                  "pip install the torch release torch_npu was built for.",
                  rules=("torch-npu-build",))
        return
    if try_parse_version(torch) is None or try_parse_version(npu) is None:
        j.add("warn", f"cannot parse torch {torch} / torch_npu {npu}", "",
              rules=("torch-npu-build",))
        return
    if torch_base(torch) == torch_base(npu):
        j.add("pass", f"torch_npu {npu} is built for torch {torch}")
        return
    j.add("fail", f"torch_npu {npu} is built for torch {torch_base(npu)}, found torch {torch}",
          _torch_remedy(torch, npu, inst.cann), rules=("torch-npu-build",))


def _torch_remedy(torch: str, npu: str, cann: str | None) -> str:
    rows = compat_data().torch_npu_rows
    mine = row_for(rows, "torch_npu", npu)
    want_torch = mine["torch"] if mine else torch_base(npu)
    fits = [r for r in rows if torch_base(str(r["torch"])) == torch_base(torch)]
    best = next((r for r in fits if cann and same(str(r["cann"]), cann)), None) or (
        fits[0] if fits else None)
    other = (f", or install torch_npu {best['torch_npu']} (built for torch {best['torch']}, "
             f"CANN {best['cann']})" if best else "")
    return f"pip install torch=={want_torch} to match torch_npu {npu}{other}."


def _older_or_newer(cann: str, than: str) -> str:
    have, want = try_parse_version(cann), try_parse_version(than)
    if have is None or want is None:
        return "another release"
    return "older" if have < want else "newer"


def judge_torch_npu_cann(inst: Installed, j: Judgement, unknown: Status) -> None:
    """torch_npu <-> CANN: a vendor pairing passes (the torch_npu table's build CANN, a
    vllm-ascend release row, a MindIE release row); a CANN the Ascend Extension for PyTorch
    release declares compatible warns; outside a declared range fails; the rest is "not a
    tested pairing" (warn)."""
    npu, cann = inst.packages["torch_npu"], inst.cann
    if npu is None or cann is None:
        return
    data = compat_data()
    row = row_for(data.torch_npu_rows, "torch_npu", npu)
    if _paired(npu, cann, row, j):
        return
    tested = vllm_tested_cann(npu)
    if (row is None and not tested) or not listed(cann, data.known_cann):
        what = f"CANN {cann}" if row is not None or tested else f"torch_npu {npu}"
        j.add(unknown, f"{what} is not in the compatibility data; torch_npu {npu} with "
              f"CANN {cann} cannot be judged",
              "Check the torch_npu release notes (Ascend/pytorch COMPATIBILITY.en.md).",
              rules=("not-in-the-data",))
        return
    if row is not None and product_of(row) in data.extension_ranges:
        _judge_declared_range(npu, cann, row, j)
        return
    built = f"built with CANN {row['cann']} ({row['branch']})" if row else \
        f"tested by vllm-ascend with CANN {'/'.join(tested)}"
    j.add("warn", f"torch_npu {npu} with CANN {cann} is not a tested pairing (torch_npu {npu} "
          f"is {built})", f"Prefer CANN {row['cann'] if row else tested[0]} for torch_npu {npu}, "
          f"or the torch_npu release built for CANN {cann}.", rules=("torch-npu-cann",))


def _paired(npu: str, cann: str, row: Mapping[str, Any] | None, j: Judgement) -> bool:
    """A vendor pairing of this torch_npu and this CANN, said as a pass."""
    if row is not None and same(str(row["cann"]), cann):
        j.add("pass", f"torch_npu {npu} pairs with CANN {cann} (torch_npu row {row['branch']})")
        return True
    vrow = vllm_pairing(npu, cann)
    if vrow is not None:
        j.add("pass", f"torch_npu {npu} pairs with CANN {cann} "
              f"(vllm-ascend {vrow['vllm_ascend']} row)")
        return True
    mrow = mindie_pairing(product_of(row), cann) if row is not None else None
    if mrow is not None:
        j.add("pass", f"torch_npu {npu} (Ascend Extension for PyTorch {mrow['pytorch_extension']}"
              f") pairs with CANN {cann} (MindIE {mrow['mindie']} release row)")
        return True
    return False


def _judge_declared_range(npu: str, cann: str, row: Mapping[str, Any], j: Judgement) -> None:
    product = product_of(row)
    declared = compat_data().extension_ranges[product]
    if listed(cann, declared):
        j.add("warn", f"CANN {cann} is not the CANN {row['cann']} torch_npu {npu} was built "
              f"with ({row['branch']}), {_older_or_newer(cann, str(row['cann']))} but declared "
              f"compatible with Ascend Extension for PyTorch {product}",
              f"Prefer CANN {row['cann']} for torch_npu {npu}.", rules=("torch-npu-cann",))
        return
    j.add("fail", f"torch_npu {npu} (Ascend Extension for PyTorch {product}) is declared for "
          f"CANN {', '.join(declared)}, found CANN {cann}",
          f"Install CANN {row['cann']}, or the torch_npu release built for CANN {cann}.",
          rules=("torch-npu-cann",))


def judge_vllm_ascend(inst: Installed, j: Judgement, unknown: Status) -> None:
    """vllm-ascend: vllm, torch, torch_npu, CANN all from its row (compat.yaml vllm_ascend)."""
    va = inst.packages["vllm_ascend"]
    if va is None:
        return
    row = row_for(compat_data().vllm_rows, "vllm_ascend", va)
    if row is None:
        j.add(unknown, f"vllm-ascend {va} is not in the compatibility data",
              "Check the vllm-ascend release notes (versioning_policy.md).",
              rules=("not-in-the-data",))
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
                  f"Install {what} {want[0]} (the {name}).", rules=("vllm-ascend-row",))
    if not bad:
        j.add("pass", f"vllm {inst.packages['vllm']}, torch, torch_npu and CANN match the "
              f"{name}")


def _same_torch(have: str, want: str) -> bool:
    # CPU and CUDA wheels carry a local label (2.10.0+cpu): compare base versions
    return try_parse_version(have) is not None and torch_base(have) == torch_base(want)


def judge_mindie(inst: Installed, j: Judgement, unknown: Status) -> None:
    """MindIE's CANN from compat.yaml mindie_compat."""
    if inst.mindie is None:
        return
    row = row_for(compat_data().mindie_rows, "mindie", inst.mindie)
    if row is None:
        j.add(unknown, f"MindIE {inst.mindie} is not in the compatibility data",
              "Check the MindIE release notes for its CANN version.",
              rules=("not-in-the-data",))
        return
    if inst.cann is None:
        return
    if same(str(row["cann"]), inst.cann):
        j.add("pass", f"MindIE {inst.mindie} pairs with CANN {inst.cann}")
        return
    j.add("fail", f"MindIE {row['mindie']} row wants CANN {row['cann']}, found CANN {inst.cann}",
          f"Install CANN {row['cann']} (and its NNAL) for MindIE {row['mindie']}.",
          rules=("mindie-cann",))


def judge_toolchain(ctx: Context, inst: Installed, j: Judgement) -> None:
    """NNAL and Triton-Ascend where the engines need them, and the ATB variant against torch's
    C++ ABI (checks.builtin.toolchain)."""
    from checks.builtin.toolchain import Toolchain, judge

    s = stack(ctx)
    engines = tuple(name for name, there in (("vllm-ascend", inst.packages["vllm_ascend"]),
                                             ("mindie", s.mindie.value)) if there is not None)
    found = Toolchain(engines, s.nnal.state != "missing", s.nnal.state != "not_recorded",
                      facts.python(ctx), inst.cann,
                      toolkit_dir(s.toolkit.path) if s.toolkit.value and s.toolkit.path else None)
    said, evidence = judge(ctx, found)
    j.evidence.extend(evidence)
    for status, text, remedy, rule in said:
        j.add(status, text, remedy, rules=(rule,) if rule else ())


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
        return skipped(reason, *j.evidence, rules=("nothing-installed",))
    unknown = _unknown_is(ctx)
    judge_interpreter(inst, j)
    judge_driver_firmware(inst, j)
    judge_driver_cann(inst, j, unknown)
    judge_loaded_driver(ctx, inst, j)
    judge_nnal(inst, j)
    judge_torch(inst, j)
    judge_torch_npu_cann(inst, j, unknown)
    judge_vllm_ascend(inst, j, unknown)
    judge_mindie(inst, j, unknown)
    judge_toolchain(ctx, inst, j)
    return j.finding("the installed Ascend stack agrees with itself and the pairing tables")


def toolkit_dir(toolkit_file: str) -> str:
    """The toolkit directory of an `ascend_toolkit_install.info` path (above `<arch>-linux`)."""
    parent = posixpath.dirname(toolkit_file)
    return posixpath.dirname(parent) if parent.endswith("-linux") else parent
