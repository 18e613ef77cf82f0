"""npu.health and npu.temperature: what npu-smi says about each chip.

Both start from `npu-smi info` (read once per run). For a chip whose health is not OK they read
`npu-smi info -t health -i N -c C` (once per run, shared); npu.temperature also reads
`npu-smi info -t memory -i N -c C` for the HBM temperature of every chip with HBM. The verdicts
come from `checks.health` (health words) and `checks.thermal` (the temperature rule), which the
console uses too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.builtin.npu_table import NPU_SMI_RULES, no_table, npu_table
from checks.context import Context
from checks.health import health_level, health_verdict
from checks.health_codes import HealthRead, read_health
from checks.model import Finding, failed, passed, skipped, warned
from checks.thermal_codes import (
    RULE_CODE,
    RULE_CODES_UNREAD,
    RULE_HBM,
    RULE_NO_TEMPERATURE,
    RULE_PEERS,
    THERMAL_CODES,
)
from probes.errors import ParseError
from probes.inventory import run_npu_smi
from probes.words import counted, verb

if TYPE_CHECKING:
    from checks.thermal import ChipReading, ThermalVerdict
    from probes.npu_smi import ChipRow, ChipTemperatures, NpuInfo

# The temperature rule (checks.thermal) is imported where a table is judged: without npu-smi
# neither check builds its classes.

UNKNOWN_HEALTH = "health could not be read"

# The rules of each check, by name -> the statuses they give (tests/checks/test_check_rules.py:
# every rule tags the findings it decides, and the check's playbook lists the same rules under
# "What the check does").
CHECK_RULES: dict[str, dict[str, str]] = {
    "npu.health": {
        **NPU_SMI_RULES,
        "health-warning": "warn",
        "health-unread": "warn",
        "health-alarm": "fail",
    },
    "npu.temperature": {
        **NPU_SMI_RULES,
        RULE_CODE: "warn/fail",
        RULE_CODES_UNREAD: "warn",
        RULE_HBM: "fail",
        RULE_PEERS: "warn",
        RULE_NO_TEMPERATURE: "skip/warn",
    },
}
_HEALTH_RULES = {"warn": "health-warning", "unknown": "health-unread", "fail": "health-alarm"}


def _chip_name(chip: ChipRow) -> str:
    chip_part = "" if chip.chip_id is None else f" chip {chip.chip_id}"
    return f"NPU {chip.npu_id}{chip_part} ({chip.name or 'unknown'})"


# -- per-chip `-t` reads, shared by the checks ---------------------------------------------------


def _chip_args(kind: str, chip: ChipRow) -> list[str]:
    from probes.npu_smi.reading import chip_args  # npu-smi's parsers: only for a chip's call

    return chip_args(kind, chip.npu_id, chip.chip_id)


def health_read(ctx: Context, chip: ChipRow) -> HealthRead:
    return ctx.fact(f"npu.health:{chip.npu_id}:{chip.chip_id}",
                    lambda: read_health(ctx.host, chip.npu_id, chip.chip_id, ctx.timeout_s))


@dataclass(frozen=True)
class HbmRead:
    """`-t memory` of one chip: its HBM temperature (None when unread) and a note."""

    hbm_temperature_c: float | None
    note: str  # what the evidence says: the value, or why there is none
    timed_out: bool = False


def hbm_read(ctx: Context, chip: ChipRow) -> HbmRead:
    return ctx.fact(f"npu.hbm-temperature:{chip.npu_id}:{chip.chip_id}",
                    lambda: _read_hbm(ctx, chip))


def _read_hbm(ctx: Context, chip: ChipRow) -> HbmRead:
    args = _chip_args("memory", chip)
    result = run_npu_smi(ctx.host, args, ctx.timeout_s)
    if not result.ok:
        return HbmRead(None, f"not read ({result.describe()})", result.outcome == "timeout")
    from probes.npu_smi.reading import kv_view  # npu-smi's parsers: only for a chip's call

    try:
        found: tuple[ChipTemperatures, ...] = kv_view(result.stdout, "memory")
    except ParseError as exc:
        return HbmRead(None, f"not read (`npu-smi {' '.join(args)}`: {exc.reason})")
    hbm = next((t.hbm_temperature_c for t in found if t.hbm_temperature_c is not None), None)
    if hbm is None:
        return HbmRead(None, f"not printed by `npu-smi {' '.join(args)}`")
    return HbmRead(hbm, f"{hbm:g} °C")


# -- npu.health ----------------------------------------------------------------------------------


def npu_health(ctx: Context) -> Finding:
    info = npu_table(ctx)
    if info is None:
        return no_table(ctx) or skipped("no NPU")
    bad = [c for c in info.chips if health_level(c.health) != "ok"]
    evidence = [f"{_chip_name(c)}: {c.health or 'NA'}" for c in info.chips]
    evidence += [f"npu-smi warning: {w}" for w in info.warnings]
    if not bad:
        count = len(info.chips)
        return passed(f"{counted(count, 'chip')} {verb(count, 'reports', 'report')} OK",
                      *evidence)
    for chip in bad:
        evidence += [f"{_chip_name(chip)} -t health: {line}"
                     for line in health_read(ctx, chip).lines]
    summary = ", ".join(_health_summary(c) for c in bad)
    remedy = ("read the error codes above; then `npu-smi info -t health -i N -c C` and the "
              "device logs (`msnpureport`); replace or reset the chip before serving")
    rules = tuple(dict.fromkeys(_HEALTH_RULES[health_level(c.health)] for c in bad))
    if all(health_verdict(c.health) == "warn" for c in bad):
        return warned(summary, remedy, *evidence, rules=rules)
    return failed(summary, remedy, *evidence, rules=rules)


def _health_summary(chip: ChipRow) -> str:
    word = chip.health or "NA"
    if health_level(chip.health) == "unknown":
        return f"{_chip_name(chip)} {word} ({UNKNOWN_HEALTH})"
    return f"{_chip_name(chip)} {word}"


# -- npu.temperature -----------------------------------------------------------------------------


def npu_temperature(ctx: Context) -> Finding:
    info = npu_table(ctx)
    if info is None:
        return no_table(ctx) or skipped("no NPU")
    from checks.thermal import judge_temperatures, thermal_limits, worst

    readings, evidence = _thermal_readings(ctx, info)
    verdicts = judge_temperatures(readings, thermal_limits(ctx.policy))
    level = worst([v.level for v in verdicts])
    if level == "unknown":
        chips = counted(len(verdicts), "chip")
        return skipped(f"npu-smi printed no temperature for any of the {chips} and no thermal "
                       "alarm was found", *evidence,
                       rules=(RULE_NO_TEMPERATURE,))
    bad = [v for v in verdicts if v.level in ("warn", "fail")]
    blind = [v for v in verdicts if v.level == "unknown"]
    if not bad and not blind:
        return passed(_calm_summary(ctx, readings), *evidence)
    if not bad:  # the chips without a temperature contribute no pass
        return warned(f"{_blind_summary(blind)}; the other chips: "
                      f"{_calm_summary(ctx, readings)}", _NO_TEMPERATURE_REMEDY, *evidence,
                      rules=(RULE_NO_TEMPERATURE,))
    summary = _trouble_summary(bad)
    evidence += [f"{v.key}: {reason}" for v in bad + blind for reason in v.reasons]
    rules = tuple(dict.fromkeys(rule for v in bad + blind for rule in v.rules))
    return (failed if level == "fail" else warned)(summary, _COOLING, *evidence, rules=rules)


def _thermal_readings(ctx: Context, info: NpuInfo) -> tuple[list[ChipReading], list[str]]:
    from checks.thermal import ChipReading

    readings: list[ChipReading] = []
    evidence: list[str] = []
    hbm_stuck = False  # one hung `-t memory` means the next would hang too
    for chip in info.chips:
        codes, codes_note, unread = _codes_of(ctx, chip)
        hbm = _hbm_of(ctx, chip, hbm_stuck)
        hbm_stuck = hbm_stuck or hbm.timed_out
        readings.append(ChipReading(_key(chip), _float(chip.temperature_c),
                                    hbm.hbm_temperature_c, codes, unread))
        evidence.append(f"{_chip_name(chip)}: {_temp(chip)}, HBM {hbm.note}, "
                        f"power {_power(chip)}, thermal alarm codes: {codes_note}")
    return readings, evidence


def _codes_of(ctx: Context, chip: ChipRow) -> tuple[tuple[str, ...] | None, str, str | None]:
    """(codes, evidence note, why unread) — health OK means no alarm is active on the chip."""
    if health_level(chip.health) == "ok":
        return (), "none (health OK)", None
    read = health_read(ctx, chip)
    if read.codes is None:
        why = f"health {chip.health or 'NA'}, {read.unread}"
        return None, f"not read ({read.unread})", why
    thermal = [f"0x{c}" for c in read.codes if c in THERMAL_CODES]
    return read.codes, ", ".join(thermal) or "none among the error codes", None


def _hbm_of(ctx: Context, chip: ChipRow, stuck: bool) -> HbmRead:
    if not chip.hbm_total_mb:
        return HbmRead(None, "none (no HBM in the table)")
    if stuck:
        return HbmRead(None, "not read (an earlier `npu-smi info -t memory` timed out)")
    return hbm_read(ctx, chip)


def _calm_summary(ctx: Context, readings: list[ChipReading]) -> str:
    known = [r for r in readings if r.temperature_c is not None]
    parts = ["no thermal alarm"]
    if known:
        hottest = max(known, key=lambda r: r.temperature_c or 0.0)
        parts.append(f"hottest chip {hottest.temperature_c:g} °C ({hottest.key})")
    from checks.thermal import thermal_limits

    hbm = [r.hbm_temperature_c for r in readings if r.hbm_temperature_c is not None]
    limits = thermal_limits(ctx.policy)
    parts.append(f"HBM at most {max(hbm):g} °C (alarm above {limits.hbm_alarm_c:g} °C)" if hbm
                 else "no HBM temperature read")
    return ", ".join(parts)


def _trouble_summary(bad: list[ThermalVerdict]) -> str:
    shown = [f"{v.key}: {v.reasons[0]}" for v in bad[:3]]
    more = f" (and {len(bad) - 3} more chips)" if len(bad) > 3 else ""
    return "; ".join(shown) + more


def _blind_summary(blind: list[ThermalVerdict]) -> str:
    keys = ", ".join(v.key for v in blind[:3]) + (f" and {len(blind) - 3} more"
                                                   if len(blind) > 3 else "")
    return f"{keys}: npu-smi printed no temperature (not judged)"


_NO_TEMPERATURE_REMEDY = ("read the chip's temperature with `npu-smi info -t common -i N -c C` "
                          "or `npu-smi info -t temp -i N`; if those print none either, nothing "
                          "here can judge the chip: watch its alarm codes "
                          "(`npu-smi info -t health -i N -c C`) and see the npu.temperature "
                          "playbook")
_COOLING = ("check airflow, fans and inlet temperature of the server and the BMC's fan "
            "status; confirm with `npu-smi info -t health -i N -c C`; with an HBM alarm, take "
            "load off the card until it is cool (see the npu.temperature playbook)")


def _key(chip: ChipRow) -> str:
    return f"NPU {chip.npu_id}" + ("" if chip.chip_id is None else f" chip {chip.chip_id}")


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


def _temp(chip: ChipRow) -> str:
    return "temperature not printed" if chip.temperature_c is None else f"{chip.temperature_c} °C"


def _power(chip: ChipRow) -> str:
    return "not printed" if chip.power_w is None else f"{chip.power_w:g} W"
