from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from checks.policy import Policy, load_policy
from console.alerts import AlertLog, evaluate
from console.snapshots import Alert, ChipSample, EngineSnapshot, NpuSnapshot, chip_key

NOW = 1_000.0


def _chip(npu_id: int = 0, chip_id: int | None = 0, **changes: object) -> ChipSample:
    chip = ChipSample(npu_id, chip_id, "910B4", "OK", 40, 90.0, 10, 1000, 32768, 5.0,
                      chip_key(npu_id, chip_id))
    return replace(chip, **changes)  # type: ignore[arg-type]


def _npu(*chips: ChipSample, taken_at: float = NOW) -> NpuSnapshot:
    return NpuSnapshot(taken_at, tuple(chips), (), True, None, 0.2)


def _engine(decode: float | None) -> EngineSnapshot:
    return EngineSnapshot(NOW, "cpu", "float32", "mixtral", "none", (), 0.5, 100.0, decode,
                          1 << 20, 10, 2048, "BSND", 64)


def _keys(alerts: list[Alert]) -> dict[str, str]:
    return {a.key: a.level for a in alerts}


def _policy(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return load_policy(path)


def test_healthy_machine_raises_nothing() -> None:
    assert evaluate(_npu(_chip()), _engine(20.0), load_policy(), NOW, 6.0, 20.0) == []
    assert evaluate(None, None, load_policy(), NOW, 6.0, None) == []


def test_temperature_by_the_doctors_rule_no_fixed_threshold() -> None:
    policy = load_policy()
    even = [_chip(n, 0, temperature_c=90) for n in range(4)]  # hot, but all alike: no alert
    assert evaluate(_npu(*even), None, policy, NOW, 6.0, None) == []
    chips = [_chip(n, 0, temperature_c=40) for n in range(3)] + [_chip(3, 0, temperature_c=60)]
    alerts = evaluate(_npu(*chips), None, policy, NOW, 6.0, None)
    assert _keys(alerts) == {"temperature:3/0": "warn"}
    assert alerts[0].value == "60 °C" and alerts[0].raised_at == NOW
    assert alerts[0].message == ("NPU 3/0 at 60 °C, 20 °C above the median of the 3 other "
                                 "chips (40 °C)")


def test_temperature_policy_override(tmp_path: Path) -> None:
    policy = _policy(tmp_path, "npu:\n  temperature_above_peers_warn_c: 5\n")
    chips = [_chip(n, 0, temperature_c=40) for n in range(3)] + [_chip(3, 0, temperature_c=46)]
    alerts = evaluate(_npu(*chips), None, policy, NOW, 6.0, None)
    assert _keys(alerts) == {"temperature:3/0": "warn"}


def test_hbm_use_thresholds_and_override(tmp_path: Path) -> None:
    full = _chip(hbm_used_mb=32000, hbm_total_mb=32768)  # 97.7 %
    assert _keys(evaluate(_npu(full), None, load_policy(), NOW, 6.0, None)) == {
        "hbm:0/0": "warn"}
    brim = _chip(hbm_used_mb=32700)
    assert _keys(evaluate(_npu(brim), None, load_policy(), NOW, 6.0, None)) == {
        "hbm:0/0": "fail"}
    policy = _policy(tmp_path, "console:\n  hbm_used_warn_percent: 3\n")
    alerts = evaluate(_npu(_chip()), None, policy, NOW, 6.0, None)
    assert _keys(alerts) == {"hbm:0/0": "warn"}
    assert alerts[0].value.startswith("3.1 %")
    no_hbm = _chip(hbm_used_mb=None, hbm_total_mb=None)  # 310P: no HBM figure, no alert
    assert evaluate(_npu(no_hbm), None, policy, NOW, 6.0, None) == []


def test_health_not_ok() -> None:
    chips = (_chip(0, 0, health="Warning"), _chip(0, 1, health="Alarm"), _chip(1, 0, health="NA"))
    alerts = evaluate(_npu(*chips), None, load_policy(), NOW, 6.0, None)
    # health that could not be read (NA, UNKNOWN) is a warning, as in the doctor
    assert _keys(alerts) == {"health:0/0": "warn", "health:0/1": "fail", "health:1/0": "warn"}
    assert "npu-smi info -t health -i 0" in alerts[0].message


def test_stale_telemetry() -> None:
    old = _npu(_chip(), taken_at=NOW - 10)
    alerts = evaluate(old, None, load_policy(), NOW, 6.0, None)
    assert _keys(alerts) == {"stale:npu": "warn"} and alerts[0].value == "10 s old"
    assert evaluate(old, None, load_policy(), NOW, 12.0, None) == []


def test_decode_drop_against_baseline(tmp_path: Path) -> None:
    policy = load_policy()
    assert _keys(evaluate(None, _engine(9.0), policy, NOW, 6.0, 20.0)) == {"decode_drop": "warn"}
    assert evaluate(None, _engine(11.0), policy, NOW, 6.0, 20.0) == []
    assert evaluate(None, _engine(1.0), policy, NOW, 6.0, None) == []  # no baseline yet
    assert evaluate(None, _engine(None), policy, NOW, 6.0, 20.0) == []
    strict = _policy(tmp_path, "console:\n  decode_drop_warn_ratio: 0.9\n")
    assert _keys(evaluate(None, _engine(17.0), strict, NOW, 6.0, 20.0)) == {"decode_drop": "warn"}


def test_failed_snapshot_is_judged_by_nobody() -> None:
    failed = NpuSnapshot(NOW - 100, (), (), False, "npu-smi not found on PATH", 0.0)
    assert evaluate(failed, None, load_policy(), NOW, 6.0, None) == []


def test_alert_log_deduplicates_escalates_and_clears() -> None:
    log = AlertLog(max_entries=5)
    warm = Alert(1.0, "temperature:0/0", "warn", "hot", "86 °C")
    assert log.update([warm]) == [warm]
    again = replace(warm, raised_at=3.0, value="87 °C")
    assert log.update([again]) == []  # still the same condition
    assert log.active["temperature:0/0"].raised_at == 1.0 and len(log.entries) == 1
    hot = Alert(5.0, "temperature:0/0", "fail", "too hot", "96 °C")
    assert log.update([hot]) == [hot] and log.active == {hot.key: hot}
    assert log.update([]) == [] and log.active == {}
    assert log.update([warm]) == [warm]  # a new episode is logged again
    assert [a.value for a in log.entries] == ["86 °C", "96 °C", "86 °C"]


def test_alert_log_is_bounded() -> None:
    log = AlertLog(max_entries=100)
    for i in range(10_000):
        log.update([Alert(float(i), f"k{i % 2}", "warn" if i % 4 < 2 else "fail", "m", "v")])
    assert len(log.entries) == 100
    assert len(log.active) == 1


def test_a_dead_endpoint_and_a_restart_raise_and_clear() -> None:
    from console.alerts import RESTART_ALERT_S, endpoint_alerts
    from console.snapshots import ServingSnapshot

    url = "http://node:8000/metrics"
    log = AlertLog()
    up = ServingSnapshot(NOW, url, "vLLM", None, 0.01)
    down = ServingSnapshot(NOW + 2, url, "unknown", "cannot connect", 0.01, answered=False)
    back = ServingSnapshot(NOW + 4, url, "vLLM", None, 0.01, restarted_at=NOW + 4)
    assert endpoint_alerts(up, NOW) == []
    raised = log.update(endpoint_alerts(down, NOW + 2))
    assert _keys(raised) == {"serving:down": "fail"} and "cannot connect" in raised[0].value
    log.update(endpoint_alerts(back, NOW + 4))
    assert set(log.active) == {"serving:restarted"}  # down cleared, restarted raised
    log.update(endpoint_alerts(back, NOW + 4 + RESTART_ALERT_S + 1))
    assert log.active == {}  # and cleared in its turn


def test_each_exporter_that_does_not_answer_raises_its_own_alert() -> None:
    from console.alerts import exporter_alerts

    good = NpuSnapshot(NOW, (), (), True, None, 0.2, "node-a:8082")
    dead = NpuSnapshot(NOW, (), (), False, "cannot connect", 0.2, "node-b:8082")
    local = NpuSnapshot(NOW, (), (), False, "npu-smi not found", 0.2)
    alerts = exporter_alerts([good, dead, local], NOW)
    assert _keys(alerts) == {"exporter:down:node-b:8082": "fail"}
    assert "node-b:8082" in alerts[0].message
