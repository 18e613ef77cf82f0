"""versions.parity's driver side: firmware against driver (installer fields), the driver's
HDK release against the CANN->HDK table of checks/data/compat.yaml (a declared list, a declared
minimum, pairings for some products, community reports, or the install helper's recommended
pair), the toolkit's innerversion family in the driver's compatible_version, and the driver
npu-smi reports against the installed one."""

from __future__ import annotations

from checks.builtin import facts
from checks.builtin.compat import (
    HdkRow,
    hdk_matches,
    hdk_row,
    newer_than_all,
    recommended_driver,
)
from checks.builtin.versions_model import Installed, Judgement
from checks.context import Context
from checks.model import Status
from probes.versions import try_parse_version

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
    seen = row is not None and row.kind == "community" and any(
        hdk_matches(driver, h) for h, _ in row.entries)
    if (row is None or (row.kind == "community" and not seen)) and \
            _by_recommended_pair(driver, cann, j):
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
