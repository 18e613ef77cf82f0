"""Alert rules over snapshots (pure) and a bounded, deduplicating log of raised alerts.

Temperatures are judged by the doctor's rule (`checks.thermal`): thermal alarm codes of the
chips whose health is not OK (sampled from `npu-smi info -t health`, as the doctor reads them),
codes that could not be read for such a chip, and chips much hotter than their peers
(`npu.temperature_above_peers_warn_c`); the HBM temperature the doctor also reads from
`-t memory` is not sampled. The other thresholds come from the policy's
`console:` section (`hbm_used_warn_percent`, `hbm_used_fail_percent`, `decode_drop_warn_ratio`,
`stale_after_intervals`), and for a serving endpoint `endpoint.kv_cache_usage_warn_ratio` and
`endpoint.waiting_warn_requests`. Every alert about a remote NPU names its host.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from checks.health import health_level, health_verdict
from checks.policy import Policy
from checks.thermal import (
    RULE_PEERS,
    ChipReading,
    ThermalLimits,
    ThermalVerdict,
    judge_temperatures,
    thermal_limits,
)
from console.snapshots import (
    Alert,
    AlertLevel,
    ChipSample,
    EngineSnapshot,
    NpuSnapshot,
    ServingSnapshot,
)

RESTART_ALERT_S = 300.0  # how long "restarted" stays raised after the restart was seen


def evaluate(
    npu: NpuSnapshot | None,
    engine: EngineSnapshot | None,
    policy: Policy,
    now: float,
    stale_after_s: float,
    decode_baseline_tokens_per_s: float | None,
) -> list[Alert]:
    """Every condition that holds now. Pass the NPU snapshot on screen (`Sampler.last_good`):
    its chips are judged, and its age against `stale_after_s` raises the stale alert."""
    alerts: list[Alert] = []
    if npu is not None and npu.ok:
        thermal = thermal_verdicts(npu.chips, thermal_limits(policy))
        for chip in npu.chips:
            alerts.extend(chip_alerts(chip, policy, now, thermal.get(chip.key)))
        alerts.extend(stale_alerts(npu, now, stale_after_s))
    if engine is not None:
        alerts.extend(decode_alerts(engine, policy, now, decode_baseline_tokens_per_s))
    return alerts


def thermal_verdicts(chips: Sequence[ChipSample],
                     limits: ThermalLimits) -> dict[str, ThermalVerdict]:
    """The doctor's temperature rule over one snapshot's chips, by chip key (the alerts and the
    NPU panel's colours)."""
    readings = [ChipReading(c.key, None if c.temperature_c is None else float(c.temperature_c),
                            None, c.fault_codes, c.codes_unread) for c in chips]
    return {verdict.key: verdict for verdict in judge_temperatures(readings, limits)}


def endpoint_alerts(serving: ServingSnapshot, now: float) -> list[Alert]:
    """The serving process itself: down (no HTTP answer to its /metrics) and, for
    `RESTART_ALERT_S` after it was seen, restarted (its exported process start time changed or
    a counter went back: console/serving.py)."""
    out = []
    if not serving.answered:
        out.append(Alert(now, "serving:down", "fail",
                         f"serving endpoint down: {serving.url} does not answer",
                         serving.error or "no answer"))
    restarted = serving.restarted_at
    if restarted is not None and 0 <= now - restarted < RESTART_ALERT_S:
        out.append(Alert(now, "serving:restarted", "warn",
                         "serving endpoint restarted (process start time changed or counters "
                         "went back): in-flight requests were lost",
                         f"{now - restarted:.0f} s ago"))
    return out


def exporter_alerts(latest: Sequence[NpuSnapshot], now: float) -> list[Alert]:
    """Each NPU-Exporter whose last scrape failed (no answer, or an answer not read), by host;
    this machine's npu-smi is judged by the stale alert instead. Whether an exporter restarted
    is not in our data: the recorded NPU-Exporter outputs export no process start time."""
    return [Alert(now, f"exporter:down:{npu.source}", "fail",
                  f"NPU-Exporter {npu.source} down or unreadable", npu.error or "no data")
            for npu in latest if npu.source and not npu.ok]


def serving_alerts(serving: ServingSnapshot, policy: Policy, now: float) -> list[Alert]:
    out = []
    kv_limit = float(policy.get("endpoint", "kv_cache_usage_warn_ratio"))
    if serving.kv_cache_usage is not None and serving.kv_cache_usage >= kv_limit:
        out.append(Alert(now, "serving:kv_cache", "warn",
                         f"serving KV cache at or above {kv_limit:.0%} (requests will be "
                         "preempted or queued)", f"{serving.kv_cache_usage:.0%}"))
    waiting_limit = float(policy.get("endpoint", "waiting_warn_requests"))
    if serving.waiting is not None and serving.waiting > waiting_limit:
        out.append(Alert(now, "serving:waiting", "warn",
                         f"serving queue: more than {waiting_limit:g} requests waiting",
                         f"{serving.waiting:g} waiting"))
    return out


def chip_alerts(chip: ChipSample, policy: Policy, now: float,
                thermal: ThermalVerdict | None = None) -> list[Alert]:
    found = [
        _temperature(chip, thermal, now),
        _hbm(chip, policy, now),
        _health(chip, now),
    ]
    return [a for a in found if a is not None]


def _temperature(chip: ChipSample, thermal: ThermalVerdict | None, now: float) -> Alert | None:
    if thermal is None or thermal.level not in ("warn", "fail"):
        return None
    joint = " at " if thermal.rules[0] == RULE_PEERS else ": "
    more = len(thermal.reasons) - 1
    message = f"NPU {chip.key}{joint}{thermal.reasons[0]}" + (f" (and {more} more)"
                                                              if more else "")
    value = "not printed" if chip.temperature_c is None else f"{chip.temperature_c} °C"
    return Alert(now, f"temperature:{chip.key}", thermal.level, message, value)


def _hbm(chip: ChipSample, policy: Policy, now: float) -> Alert | None:
    used = chip.hbm_used_percent
    if used is None:
        return None
    warn = policy.get("console", "hbm_used_warn_percent")
    fail = policy.get("console", "hbm_used_fail_percent")
    level = _level(used, warn, fail)
    if level is None:
        return None
    limit = fail if level == "fail" else warn
    return Alert(now, f"hbm:{chip.key}", level, f"NPU {chip.key} HBM use at or above {limit:g} %",
                 f"{used:.1f} % ({chip.hbm_used_mb} / {chip.hbm_total_mb} MB)")


def _health(chip: ChipSample, now: float) -> Alert | None:
    health = (chip.health or "").strip()
    level = health_verdict(health)
    if level not in ("warn", "fail"):
        return None
    where = " on that host" if "#" in chip.key else ""
    what = "could not be read" if health_level(health) == "unknown" else f"is {health}"
    return Alert(now, f"health:{chip.key}", level,
                 f"NPU {chip.key} health {what} (see `npu-smi info -t health -i "
                 f"{chip.npu_id}`{where})", health or "not printed")


def stale_alerts(npu: NpuSnapshot, now: float, stale_after_s: float) -> list[Alert]:
    age_s = now - npu.taken_at
    if age_s <= stale_after_s:
        return []
    if npu.source:
        return [Alert(now, f"stale:npu:{npu.source}", "warn",
                      f"NPU telemetry from {npu.source} is stale (older than {stale_after_s:g} "
                      "s; exporter slow or unreachable)", f"{age_s:.0f} s old")]
    return [Alert(now, "stale:npu", "warn",
                  f"NPU telemetry is stale (older than {stale_after_s:g} s; npu-smi slow or hung)",
                  f"{age_s:.0f} s old")]


def decode_alerts(
    engine: EngineSnapshot, policy: Policy, now: float, baseline_tokens_per_s: float | None
) -> list[Alert]:
    rate = engine.decode_tokens_per_s
    if rate is None or not baseline_tokens_per_s or baseline_tokens_per_s <= 0:
        return []
    ratio = policy.get("console", "decode_drop_warn_ratio")
    if rate >= ratio * baseline_tokens_per_s:
        return []
    return [Alert(now, "decode_drop", "warn",
                  f"decode speed below {ratio:g} x its baseline of "
                  f"{baseline_tokens_per_s:.1f} tokens/s",
                  f"{rate:.1f} tokens/s ({rate / baseline_tokens_per_s:.0%} of baseline)")]


def _level(value: float, warn: float, fail: float) -> AlertLevel | None:
    if value >= fail:
        return "fail"
    if value >= warn:
        return "warn"
    return None


class AlertLog:
    """Raised alerts with their time and value, newest last; bounded to `max_entries`.

    `update()` takes the alerts that hold now. An alert is logged when its condition starts
    (or its level changes); while it persists it is not logged again, and `active` holds the
    first alert of the running condition. A condition that stops is dropped from `active`.
    """

    def __init__(self, max_entries: int = 500) -> None:
        self.entries: deque[Alert] = deque(maxlen=max_entries)
        self.active: dict[str, Alert] = {}

    def update(self, alerts: Iterable[Alert]) -> list[Alert]:
        """Record the current alerts; returns those newly raised (for a notification)."""
        current = {a.key: a for a in alerts}
        raised = [a for a in current.values() if self._is_new(a)]
        new_keys = {a.key for a in raised}
        self.active = {k: a if k in new_keys else self.active[k] for k, a in current.items()}
        self.entries.extend(raised)
        return raised

    def _is_new(self, alert: Alert) -> bool:
        running = self.active.get(alert.key)
        return running is None or running.level != alert.level
