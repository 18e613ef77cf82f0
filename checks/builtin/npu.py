"""npu.health and npu.temperature: what npu-smi says about each chip."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checks.builtin import facts
from checks.context import Context
from checks.health import health_level
from checks.model import Finding, failed, passed, skipped, warned
from probes.inventory import run_npu_smi

if TYPE_CHECKING:
    from probes.inventory import NpuReading
    from probes.npu_smi import ChipRow, NpuInfo

# npu-smi error outputs and their known causes (corpus/npu-smi/FORMATS.md §4).
ERROR_CAUSES = {
    "dcmi_init_failed": "no access to the device: a container started without the device "
                        "nodes, a device held by another container, a non-root user, or a "
                        "driver upgraded without a reboot",
    "device_in_use": "the device is already in use by another container",
    "invalid_card": "the card id is not present (a card that fell off the bus, or a wrong -i)",
    "permission_denied": "this user may not open the device nodes (run as root or in the "
                         "HwHiAiUser group)",
    "no_npu": "the driver sees no NPU card on this server",
}
# Fault codes (hex, printed by -t health without 0x) with documented meanings
# (MindCluster FaultDiag kg-config.json, facts/HARDWARE.md §4).
FAULT_CODES = {
    "80E00209": "HBM temperature above 95 °C (alarm)",
    "80E0020B": "HBM fatal high-temperature alarm",
    "80E20207": "SoC non-fatal high-temperature alarm",
    "80DE0207": "DDR chip non-fatal high temperature",
    "80E01801": "multi-bit ECC error with failed address isolation",
}


def _chip_name(chip: ChipRow) -> str:
    chip_part = "" if chip.chip_id is None else f" chip {chip.chip_id}"
    return f"NPU {chip.npu_id}{chip_part} ({chip.name or 'unknown'})"


def info_or_skip(ctx: Context) -> tuple[NpuInfo | None, Finding | None]:
    """The main table, or the Finding to return when there is none."""
    reading: NpuReading = facts.npu(ctx)
    if reading.command is not None and reading.command.outcome in ("timeout", "output_limit"):
        # error_text already says it hung, and where to look
        return None, failed(reading.error_text,
                            "find the stuck driver or device in `dmesg`; see the npu.health "
                            "playbook")
    if reading.kind == "unavailable":
        return None, skipped(f"no NPU to look at: {reading.error_text}")
    if reading.is_error:
        return None, _npu_smi_error(reading)
    if reading.info is None or not reading.info.chips:
        return None, skipped("npu-smi printed no chips")
    return reading.info, None


def _npu_smi_error(reading: NpuReading) -> Finding:
    kind = str(reading.document.get("error_kind", ""))
    cause = ERROR_CAUSES.get(kind, "see the npu.health playbook")
    return failed(f"npu-smi failed: {reading.error_text}", cause, reading.error_text)


def _health_details(ctx: Context, chip: ChipRow) -> list[str]:
    args = ["info", "-t", "health", "-i", str(chip.npu_id)]
    if chip.chip_id is not None:
        args += ["-c", str(chip.chip_id)]
    result = run_npu_smi(ctx.host, args, ctx.timeout_s)
    if not result.ok:
        return [result.describe()]
    from probes.npu_smi_kv import health_report, parse_kv  # only for a chip that is not OK

    try:
        report = health_report(parse_kv(result.stdout, "health"))
    except Exception as exc:  # a health output we cannot read is evidence, not a crash
        return [f"`npu-smi {' '.join(args)}`: unreadable ({exc})"]
    codes = [code.upper().removeprefix("0X") for code in report.error_codes]
    known = [f"fault 0x{code}: {FAULT_CODES.get(code, 'see the Huawei fault manual')}"
             for code in codes]
    return [*known, *report.error_information]


def npu_health(ctx: Context) -> Finding:
    info, finding = info_or_skip(ctx)
    if info is None:
        return finding or skipped("no NPU")
    bad = [c for c in info.chips if health_level(c.health) != "ok"]
    evidence = [f"{_chip_name(c)}: {c.health or 'unknown'}" for c in info.chips]
    evidence += [f"npu-smi warning: {w}" for w in info.warnings]
    if not bad:
        return passed(f"{len(info.chips)} chip(s) report OK", *evidence)
    for chip in bad:
        evidence += [f"{_chip_name(chip)} -t health: {d}" for d in _health_details(ctx, chip)]
    summary = ", ".join(f"{_chip_name(c)} {c.health or 'unknown'}" for c in bad)
    remedy = ("read the error codes above; then `npu-smi info -t health -i N -c C` and the "
              "device logs (`msnpureport`); replace or reset the chip before serving")
    if all(health_level(c.health) == "warn" for c in bad):
        return warned(summary, remedy, *evidence)
    return failed(summary, remedy, *evidence)


def npu_temperature(ctx: Context) -> Finding:
    info, finding = info_or_skip(ctx)
    if info is None:
        return finding or skipped("no NPU")
    warn_c = float(ctx.policy.get("npu", "temperature_warn_c"))
    fail_c = float(ctx.policy.get("npu", "temperature_fail_c"))
    evidence = [f"{_chip_name(c)}: {_temp(c)}, power {_power(c)}" for c in info.chips]
    known = [c for c in info.chips if c.temperature_c is not None]
    if not known:
        return skipped("npu-smi printed no temperature", *evidence)
    hot = [c for c in known if (c.temperature_c or 0) >= fail_c]
    warm = [c for c in known if warn_c <= (c.temperature_c or 0) < fail_c]
    hottest = max(known, key=lambda c: c.temperature_c or 0)
    if hot:
        return failed(_list(hot, f"at or above {fail_c:g} °C"), _COOLING, *evidence)
    if warm:
        return warned(_list(warm, f"at or above {warn_c:g} °C"), _COOLING, *evidence)
    return passed(f"hottest chip {hottest.temperature_c} °C ({_chip_name(hottest)}), "
                  f"below {warn_c:g} °C", *evidence)


_COOLING = ("check airflow, fans and inlet temperature of the server; confirm with "
            "`npu-smi info -t health` (fault 0x80E00209 = HBM above 95 °C)")


def _temp(chip: ChipRow) -> str:
    return "temperature unknown" if chip.temperature_c is None else f"{chip.temperature_c} °C"


def _power(chip: ChipRow) -> str:
    return "not printed" if chip.power_w is None else f"{chip.power_w:g} W"


def _list(chips: list[ChipRow], what: str) -> str:
    return ", ".join(f"{_chip_name(c)} {c.temperature_c} °C" for c in chips) + f" ({what})"
