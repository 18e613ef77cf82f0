"""The temperature rule on its own: codes, HBM alarm, peers, and what it does not judge."""

from __future__ import annotations

import statistics

from hypothesis import given
from hypothesis import strategies as st

from checks.policy import load_policy
from checks.thermal import (
    ChipReading,
    ThermalLimits,
    _median,
    judge_by_key,
    judge_temperatures,
    thermal_limits,
)

LIMITS = ThermalLimits(hbm_alarm_c=95.0, above_peers_warn_c=15.0)


def levels(*chips: ChipReading) -> list[str]:
    return [v.level for v in judge_temperatures(chips, LIMITS)]


def test_limits_come_from_the_policy() -> None:
    assert thermal_limits(load_policy()) == LIMITS


@given(st.lists(st.floats(-50, 150, allow_nan=False), min_size=1, max_size=17))
def test_the_median_is_the_statistics_median(values: list[float]) -> None:
    assert _median(values) == statistics.median(values)


def test_no_chip_threshold_however_hot() -> None:
    assert levels(*(ChipReading(f"c{n}", 105.0) for n in range(4))) == ["ok"] * 4


def test_peers_need_two_others_and_the_median_of_the_others() -> None:
    assert levels(ChipReading("a", 40.0), ChipReading("b", 90.0)) == ["ok", "ok"]
    assert levels(ChipReading("a", 40.0), ChipReading("b", 41.0), ChipReading("c", 56.0)) == [
        "ok", "ok", "warn"]
    assert levels(ChipReading("a", 40.0), ChipReading("b", 41.0), ChipReading("c", 55.4)) == [
        "ok", "ok", "ok"]
    verdict = judge_by_key({"a": 40.0, "b": 42.0, "c": None, "d": 60.0}, LIMITS)["d"]
    assert verdict.reasons == ("60 °C, 19 °C above the median of the 2 other chips (41 °C)",)


def test_codes_hbm_and_unread_codes() -> None:
    hot_hbm = ChipReading("a", 40.0, hbm_temperature_c=96.0)
    at_alarm = ChipReading("b", 40.0, hbm_temperature_c=95.0)
    fatal = ChipReading("c", 40.0, fault_codes=("0x80e0020b", "80E01801"))
    soc = ChipReading("d", 40.0, fault_codes=("80E20207",))
    unread = ChipReading("e", 40.0, codes_unread="health Alarm, npu-smi timed out")
    verdicts = judge_temperatures([hot_hbm, at_alarm, fatal, soc, unread], LIMITS)
    assert [v.level for v in verdicts] == ["fail", "ok", "fail", "warn", "warn"]
    assert verdicts[2].reasons == ("fault 0x80E0020B: HBM fatal high-temperature alarm",)
    assert verdicts[4].reasons[0].startswith("thermal alarm codes not read (health Alarm")


def test_nothing_read_is_unknown_not_ok() -> None:
    assert levels(ChipReading("a", None), ChipReading("b", None, fault_codes=())) == [
        "unknown", "unknown"]


def test_no_temperature_is_unknown_even_with_health_ok_and_a_calm_hbm() -> None:
    """Health OK means no alarm is active, not that the chip's temperature is known."""
    blind = ChipReading("a", None, hbm_temperature_c=60.0, fault_codes=())
    verdict = judge_temperatures([blind], LIMITS)[0]
    assert verdict.level == "unknown" and verdict.rules == ("no-temperature",)
    assert verdict.reasons == ("npu-smi printed no temperature for it",)
    hot_hbm = ChipReading("b", None, hbm_temperature_c=96.0, fault_codes=())
    assert levels(hot_hbm) == ["fail"]  # another rule still decides
