"""The temperature rule: one pure function for the doctor's `npu.temperature` and the console's
colours and alerts.

No vendor document gives a chip (SoC) temperature at which an Ascend 910B/A3 slows down or must
be stopped, so there is no fixed chip threshold. What the rule judges, per chip:

- thermal fault codes from `npu-smi info -t health` (Ascend/mind-cluster FaultDiag
  `kg-config.json`): HBM above 95 °C `0x80E00209` and HBM fatal high temperature `0x80E0020B`
  fail; the non-fatal SoC (`0x80E20207`) and DDR (`0x80DE0207`) high-temperature alarms warn;
- the HBM temperature, where npu-smi prints it, against the documented HBM alarm (policy
  `npu.hbm_temperature_alarm_c`, 95 °C): above it fails;
- a chip much hotter than its peers on the same box: `npu.temperature_above_peers_warn_c` or
  more above the median of the other chips (at least two others with a reading) warns — a
  project default, not a vendor figure;
- thermal codes that could not be read for a chip whose health is not OK warn: the doctor
  cannot tell whether one of them is active;
- a chip for which npu-smi prints no temperature (`NA`, `-`, no column) and no other rule
  objects is `unknown`, never `ok`: no alarm code is active, but nothing says how hot it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checks.thermal_codes import (
    NO_TEMPERATURE,
    RULE_CODE,
    RULE_CODES_UNREAD,
    RULE_HBM,
    RULE_NO_TEMPERATURE,
    RULE_PEERS,
    THERMAL_CODES,
    ThermalLevel,
)
from probes.npu_smi.reading import normalise_code

if TYPE_CHECKING:
    from checks.policy import Policy

__all__ = ["RULE_CODE", "RULE_CODES_UNREAD", "RULE_HBM", "RULE_NO_TEMPERATURE", "RULE_PEERS",
           "THERMAL_CODES",
           "ChipReading", "ThermalLevel", "ThermalLimits", "ThermalVerdict", "above_peers_c",
           "judge_by_key", "judge_temperatures", "normalise_code", "thermal_limits", "worst"]

_ORDER: dict[ThermalLevel, int] = {"unknown": 0, "ok": 1, "warn": 2, "fail": 3}
MIN_PEERS = 2  # a median of one other chip is that chip: two chips cannot outvote each other


@dataclass(frozen=True)
class ThermalLimits:
    """The policy's numbers for the temperature rule."""

    hbm_alarm_c: float  # npu.hbm_temperature_alarm_c
    above_peers_warn_c: float  # npu.temperature_above_peers_warn_c


def thermal_limits(policy: Policy) -> ThermalLimits:
    return ThermalLimits(
        hbm_alarm_c=float(policy.get("npu", "hbm_temperature_alarm_c")),
        above_peers_warn_c=float(policy.get("npu", "temperature_above_peers_warn_c")),
    )


@dataclass(frozen=True)
class ChipReading:
    """What is known of one chip's temperatures. `fault_codes` None: not read (the console
    never reads them); `codes_unread` says why they could not be read where they were needed."""

    key: str  # how the chip is named in reasons and alerts: "NPU 0 chip 1"
    temperature_c: float | None
    hbm_temperature_c: float | None = None
    fault_codes: tuple[str, ...] | None = None
    codes_unread: str | None = None


@dataclass(frozen=True)
class ThermalVerdict:
    """The rule's verdict on one chip, with a reason and a rule name per finding."""

    key: str
    level: ThermalLevel  # "unknown": no temperature was read and no other rule objects
    reasons: tuple[str, ...]  # one line each, empty when ok
    rules: tuple[str, ...] = ()  # the rule behind each reason (RULE_* names), same order


Found = tuple[ThermalLevel, str, str]  # level, reason, rule


def judge_temperatures(chips: Sequence[ChipReading],
                       limits: ThermalLimits) -> tuple[ThermalVerdict, ...]:
    """One verdict per chip, in the order given; the peer rule looks at all of them."""
    temperatures = [chip.temperature_c for chip in chips]
    return tuple(_judge(chip, _others(temperatures, index), limits)
                 for index, chip in enumerate(chips))


def judge_by_key(temperatures: Mapping[str, float | None],
                 limits: ThermalLimits) -> dict[str, ThermalVerdict]:
    """The rule on chip temperatures alone (the console's view: no codes, no HBM), by key."""
    readings = [ChipReading(key, temp) for key, temp in temperatures.items()]
    return {verdict.key: verdict for verdict in judge_temperatures(readings, limits)}


def worst(levels: Sequence[ThermalLevel]) -> ThermalLevel:
    return max(levels, key=_ORDER.__getitem__, default="unknown")


def _median(values: Sequence[float]) -> float:
    """The median (as statistics.median, without importing statistics and with it decimal,
    fractions and random on every run that judges a chip)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _others(temperatures: Sequence[float | None], index: int) -> list[float]:
    return [t for i, t in enumerate(temperatures) if i != index and t is not None]


def _judge(chip: ChipReading, others: list[float], limits: ThermalLimits) -> ThermalVerdict:
    found = [*_code_findings(chip), *_hbm_findings(chip, limits),
             *_peer_findings(chip, others, limits)]
    if found:
        return ThermalVerdict(chip.key, worst([level for level, _, _ in found]),
                              tuple(reason for _, reason, _ in found),
                              tuple(rule for _, _, rule in found))
    if chip.temperature_c is None:
        return ThermalVerdict(chip.key, "unknown", (NO_TEMPERATURE,), (RULE_NO_TEMPERATURE,))
    return ThermalVerdict(chip.key, "ok", ())


def _code_findings(chip: ChipReading) -> list[Found]:
    if chip.codes_unread is not None:
        return [("warn", f"thermal alarm codes not read ({chip.codes_unread})",
                 RULE_CODES_UNREAD)]
    found: list[Found] = []
    for code in map(normalise_code, chip.fault_codes or ()):
        if code in THERMAL_CODES:
            level, meaning = THERMAL_CODES[code]
            found.append((level, f"fault 0x{code}: {meaning}", RULE_CODE))
    return found


def _hbm_findings(chip: ChipReading, limits: ThermalLimits) -> list[Found]:
    hbm_c = chip.hbm_temperature_c
    if hbm_c is None or hbm_c <= limits.hbm_alarm_c:
        return []
    return [("fail", f"HBM {hbm_c:g} °C, above the {limits.hbm_alarm_c:g} °C HBM alarm",
             RULE_HBM)]


def _peer_findings(chip: ChipReading, others: list[float],
                   limits: ThermalLimits) -> list[Found]:
    if chip.temperature_c is None or len(others) < MIN_PEERS:
        return []
    median_c = _median(others)
    above_c = chip.temperature_c - median_c
    if above_c < limits.above_peers_warn_c:
        return []
    return [("warn", f"{chip.temperature_c:g} °C, {above_c:g} °C above the median of the "
                     f"{len(others)} other chips ({median_c:g} °C)", RULE_PEERS)]


def above_peers_c(temperatures: Sequence[float | None], index: int) -> float | None:
    """How far chip `index` is above the median of the others, None without enough peers."""
    others = _others(temperatures, index)
    own = temperatures[index]
    if own is None or len(others) < MIN_PEERS:
        return None
    return own - _median(others)
